"""Qdrant Edge's exceptions as this package's, so a caller can tell a bad request from a locked or failing store.

qdrant-edge-py 0.9.0 raises ``TypeError`` and ``ValueError`` when its own argument checks refuse a call, and a plain
``Exception`` for everything its engine refuses or fails at, with Qdrant's text as the only clue. So the typed ones
are mapped by type, and one table decides from a fragment of the text which of our errors a plain one becomes;
whatever the table does not name is a refused request. Each row has a test that makes the engine say it
(``tests/qdrant/test_edge_errors.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

from posfair_llamaindex.errors import (
    EdgeEngineError,
    EdgeRequestError,
    EdgeStoreLockedError,
    EdgeUnsupportedError,
    PosFairError,
)

__all__ = ["ENGINE_MESSAGES", "ENGINE_TYPES", "EngineMessage", "engine_error", "engine_errors"]


class EngineMessage(NamedTuple):
    """A fragment of Edge's text (found anywhere in it, in any case), the error it means, and what ours says."""

    fragment: str
    error: type[PosFairError]
    says: str  # formatted with ``where`` (the call and the collection) and ``message`` (Edge's text)


# the binding's own checks (pyo3's argument conversion, its validators): the request is wrong
ENGINE_TYPES: tuple[tuple[type[Exception], type[PosFairError]], ...] = (
    (TypeError, EdgeRequestError),
    (ValueError, EdgeRequestError),
)
# a plain Exception's text, first match wins; a message matching none is a request Edge refused (EdgeRequestError)
ENGINE_MESSAGES: tuple[EngineMessage, ...] = (
    # Edge locks each shard's write-ahead log; another holder makes it say "Service runtime error: failed to open
    # WAL ...: Can't init WAL: Kind(WouldBlock)", so this row comes before the next
    EngineMessage("WouldBlock", EdgeStoreLockedError, "{where}: its Edge shard is open in another process ({message})"),
    # Qdrant's OperationError::ServiceError: the engine failed (a damaged or missing shard, I/O), not the request
    EngineMessage("Service runtime error", EdgeEngineError, "{where}: Qdrant Edge failed: {message}"),
    # Qdrant's internal errors ("Internal error: ..."); no request we know makes Edge 0.9.0 say it
    EngineMessage("internal error", EdgeEngineError, "{where}: Qdrant Edge failed: {message}"),
)
REQUEST_SAYS = "{where}: {message}"


def engine_error(call: str, collection: str, error: Exception) -> PosFairError:
    """The error of ours that Edge's ``error`` (raised by ``call`` on ``collection``) means."""
    message = str(error)
    where = f"{call} on collection {collection!r}"
    for raised, ours in ENGINE_TYPES:
        if isinstance(error, raised):
            return ours(REQUEST_SAYS.format(where=where, message=message))
    folded = message.casefold()
    for row in ENGINE_MESSAGES:
        if row.fragment.casefold() in folded:
            return row.error(row.says.format(where=where, message=message))
    return EdgeRequestError(REQUEST_SAYS.format(where=where, message=message))


@contextmanager
def engine_errors(call: str, collection: str) -> Iterator[None]:
    """Run engine calls, raising Edge's exceptions as :func:`engine_error` maps them (our refusals pass as they are)."""
    try:
        yield
    except EdgeUnsupportedError:
        raise
    except Exception as error:
        raise engine_error(call, collection, error) from error
