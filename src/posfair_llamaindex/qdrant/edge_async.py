"""``AsyncEdgeBackend``: qdrant-client's async backend interface (``AsyncQdrantBase``) on an :class:`EdgeBackend`.

qdrant-client generates its async client from the sync one; this twin is derived the same way, from
``AsyncQdrantBase`` itself when the class is made: each of its public methods runs the sync backend's method of the
same name, a coroutine where the base has one and a plain call where the base has one (``upload_points``,
``upload_collection``, ``migrate``). So a call a later qdrant-client adds is answered, or refused by name, as the
sync backend answers or refuses it; none is left to the base class's bare ``NotImplementedError``.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

from qdrant_client.async_client_base import AsyncQdrantBase

from posfair_llamaindex.errors import EdgeUnsupportedError
from posfair_llamaindex.qdrant.edge_backend import EDGE_ONLY_CALLS, EdgeBackend, public_calls

__all__ = ["ASYNC_REFUSED_CALLS", "AsyncEdgeBackend", "derive_async_twin"]

# async calls whose sync twin cannot serve them: call -> (what is refused, why)
ASYNC_REFUSED_CALLS: dict[str, tuple[str, str]] = {
    "migrate": (
        "migrate from the async client",
        "qdrant-client's migrate copies between sync clients: call migrate on an EdgeQdrantClient of the folder",
    ),
}


class AsyncEdgeBackend(AsyncQdrantBase):
    """``AsyncQdrantBase`` on an :class:`EdgeBackend`: the same store and calls, awaitable.

    Edge runs in this process, and its calls hold the GIL while they run. Run in the event loop, a bulk write of
    many batches would stop the loop for the whole write; :meth:`_run`, the one place a coroutine reaches the sync
    backend, therefore runs each call in a worker thread (``asyncio.to_thread``), so the loop runs between the calls.
    A single long call (``optimize``, one huge upsert) still stops it: the engine gives the GIL back only when it
    returns (benchmarks/bench_edge_serving.py). ``off_loop = False`` runs calls in the loop, as before.
    """

    off_loop: bool = True

    def __init__(self, backend: EdgeBackend) -> None:
        super().__init__()
        self.backend = backend
        self.location = backend.location

    def _call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return getattr(self.backend, name)(*args, **kwargs)

    async def _run(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self.off_loop:
            return await asyncio.to_thread(self._call, name, args, kwargs)
        return self._call(name, args, kwargs)


def _awaitable(name: str) -> Callable[..., Any]:
    async def call(self: AsyncEdgeBackend, *args: Any, **kwargs: Any) -> Any:
        return await self._run(name, args, kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"``EdgeBackend.{name}``, awaited."
    return call


def _direct(name: str) -> Callable[..., Any]:
    def call(self: AsyncEdgeBackend, *args: Any, **kwargs: Any) -> Any:
        return self._call(name, args, kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"``EdgeBackend.{name}`` (a plain method in ``AsyncQdrantBase`` too)."
    return call


def _refusal(name: str, construct: str, reason: str, awaitable: bool) -> Callable[..., Any]:
    def refuse(self: AsyncEdgeBackend, *args: Any, **kwargs: Any) -> Any:
        raise EdgeUnsupportedError(name, construct, reason)

    async def refuse_awaited(self: AsyncEdgeBackend, *args: Any, **kwargs: Any) -> Any:
        raise EdgeUnsupportedError(name, construct, reason)

    chosen = refuse_awaited if awaitable else refuse
    chosen.__name__ = chosen.__qualname__ = name
    chosen.__doc__ = f"Refused: {construct} ({reason})."
    return chosen


def derive_async_twin(twin: type, base: type = AsyncQdrantBase, backend: type = EdgeBackend) -> None:
    """Give ``twin`` every public method of ``base``, shaped as the base's (a coroutine where it has one), each
    running ``backend``'s method of the same name; and the Edge-only calls, awaitable."""
    for name in public_calls(base):
        awaitable = inspect.iscoroutinefunction(getattr(base, name))
        if name in ASYNC_REFUSED_CALLS:
            construct, reason = ASYNC_REFUSED_CALLS[name]
            setattr(twin, name, _refusal(name, construct, reason, awaitable))
        elif not hasattr(backend, name):  # an async-only call of a later qdrant-client
            reason = "posfair_llamaindex does not translate it to Edge yet"
            setattr(twin, name, _refusal(name, "this call", reason, awaitable))
        else:
            setattr(twin, name, _awaitable(name) if awaitable else _direct(name))
    for name in EDGE_ONLY_CALLS:
        setattr(twin, name, _awaitable(name))


derive_async_twin(AsyncEdgeBackend)
