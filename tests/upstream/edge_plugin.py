"""A pytest plugin that runs LlamaIndex's own ``QdrantVectorStore`` tests on ``EdgeQdrantClient``.

Upstream's fixtures build ``qdrant_client.QdrantClient(":memory:")`` and
``qdrant_client.AsyncQdrantClient(":memory:")``. While a fixture is set up, this plugin makes exactly those two calls
return an ``EdgeQdrantClient`` and an ``AsyncEdgeQdrantClient`` on one new folder: the sync and the async client of
one fixture share a store, as they do in a program that uses Edge. Every other call, in fixtures or in tests (a
``MagicMock(spec=QdrantClient)``, a server URL), gets qdrant-client's own classes.

Used by ``scripts/upstream_qdrant_tests.sh`` (``-p tests.upstream.edge_plugin``); upstream's tests stay outside this
repository.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any, Optional

import pytest
import qdrant_client

from posfair_llamaindex.qdrant.edge_client import AsyncEdgeQdrantClient, EdgeQdrantClient

MEMORY = ":memory:"


def _in_memory(args: tuple, kwargs: dict) -> bool:
    return (args == (MEMORY,) and not kwargs) or (not args and kwargs == {"location": MEMORY})


class _EdgeForMemory:
    """The two constructors a fixture calls, answering ``":memory:"`` with Edge clients on one lazily made folder."""

    def __init__(self, root: Path, sync_class: type, async_class: type) -> None:
        self._root = root
        self._sync_class, self._async_class = sync_class, async_class
        self._folder: Optional[Path] = None
        self.clients: list[Any] = []

    def _store(self) -> Path:
        if self._folder is None:
            self._folder = Path(tempfile.mkdtemp(prefix="store-", dir=self._root))
        return self._folder

    def sync(self, *args: Any, **kwargs: Any) -> Any:
        if _in_memory(args, kwargs):
            client = EdgeQdrantClient(self._store())
            self.clients.append(client)
            return client
        return self._sync_class(*args, **kwargs)

    def async_(self, *args: Any, **kwargs: Any) -> Any:
        if _in_memory(args, kwargs):
            client = AsyncEdgeQdrantClient(self._store())
            self.clients.append(client)
            return client
        return self._async_class(*args, **kwargs)


def pytest_configure(config: pytest.Config) -> None:
    config._edge_upstream_root = Path(tempfile.mkdtemp(prefix="edge-upstream-"))  # type: ignore[attr-defined]
    config._edge_upstream_clients = 0  # type: ignore[attr-defined]


def pytest_unconfigure(config: pytest.Config) -> None:
    root = getattr(config, "_edge_upstream_root", None)
    if root is not None:
        shutil.rmtree(root, ignore_errors=True)


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef, request: pytest.FixtureRequest) -> Any:
    sync_class, async_class = qdrant_client.QdrantClient, qdrant_client.AsyncQdrantClient
    redirect = _EdgeForMemory(request.config._edge_upstream_root, sync_class, async_class)  # type: ignore[attr-defined]
    qdrant_client.QdrantClient, qdrant_client.AsyncQdrantClient = redirect.sync, redirect.async_
    try:
        return (yield)
    finally:
        qdrant_client.QdrantClient, qdrant_client.AsyncQdrantClient = sync_class, async_class
        request.config._edge_upstream_clients += len(redirect.clients)  # type: ignore[attr-defined]


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Say how many Edge clients upstream's fixtures got, so a run that never reached Edge cannot pass for one."""
    count = getattr(config, "_edge_upstream_clients", 0)
    terminalreporter.write_line(f"edge_plugin: upstream's fixtures got {count} Edge clients instead of ':memory:' ones")


def pytest_report_header(config: pytest.Config) -> str:
    return "qdrant: QdrantClient(':memory:') and AsyncQdrantClient(':memory:') in fixtures are Edge clients"
