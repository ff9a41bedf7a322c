"""``EdgeQdrantClient`` and ``AsyncEdgeQdrantClient``: qdrant-client's clients on Qdrant Edge, in-process.

qdrant-client's local mode (``QdrantClient(path=...)``) is a pure-Python re-implementation of Qdrant, slow past a
few thousand points. These clients keep qdrant-client's whole interface (every public method is the parent's own,
with its argument handling and local inference) and hand each call to :class:`EdgeBackend`, which runs it on Qdrant's
Rust engine: one Edge shard per collection, all in one folder. So LlamaIndex's ``QdrantVectorStore`` and
:func:`~posfair_llamaindex.qdrant.tagged_vector_store` run on them unchanged::

    client = EdgeQdrantClient(path="./posfair_qdrant")
    aclient = AsyncEdgeQdrantClient(path="./posfair_qdrant")  # the same store, shared in this process
    store = QdrantVectorStore("docs", client=client, aclient=aclient)
    ...
    client.optimize("docs")  # build the HNSW index once, after a bulk load

What Edge cannot do (shard keys, snapshots, clusters, grouped queries) raises :class:`EdgeUnsupportedError`, naming
the call; a Qdrant server does those.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, NoReturn, Optional, Union

from qdrant_client import AsyncQdrantClient, QdrantClient
from qdrant_client.async_qdrant_fastembed import AsyncQdrantFastembedMixin
from qdrant_client.embed.type_inspector import Inspector
from qdrant_client.http import models as rest
from qdrant_client.qdrant_fastembed import QdrantFastembedMixin

from posfair_llamaindex.errors import EdgeClosedError, EdgeUnsupportedError
from posfair_llamaindex.qdrant.edge_async import AsyncEdgeBackend
from posfair_llamaindex.qdrant.edge_backend import EdgeBackend
from posfair_llamaindex.qdrant.edge_store import EdgeStoreConfig

__all__ = ["DEFAULT_EDGE_PATH", "AsyncEdgeBackend", "AsyncEdgeQdrantClient", "EdgeQdrantClient", "EdgeUnsupportedError"]

DEFAULT_EDGE_PATH = "./posfair_qdrant"

PathLike = Union[str, "os.PathLike[str]"]


class _ClosedBackend:
    """What a closed client calls: every call says the client is closed (closing again does nothing)."""

    def __init__(self, path: str) -> None:
        self.location = path

    def close(self, **kwargs: Any) -> None:
        return None

    def __getattr__(self, name: str) -> Callable[..., NoReturn]:
        def closed(*args: Any, **kwargs: Any) -> NoReturn:
            raise EdgeClosedError(f"this Edge client of {self.location} is closed ({name}); open a new one")

        return closed


def _settings(
    hnsw_config: Optional[rest.HnswConfigDiff],
    optimizers_config: Optional[rest.OptimizersConfigDiff],
    max_search_threads: Optional[int],
    auto_optimize: bool,
    flush_writes: bool,
) -> EdgeStoreConfig:
    return EdgeStoreConfig(
        hnsw_config=hnsw_config,
        optimizers_config=optimizers_config,
        max_search_threads=max_search_threads,
        auto_optimize=auto_optimize,
        flush_writes=flush_writes,
    )


def _attach(client: Any, path: PathLike, settings: EdgeStoreConfig, backend: Any) -> None:
    """What a client's inherited methods read: the backend they call, and the options a twin is made from."""
    client._init_options = {"path": os.fspath(path), **vars(settings)}
    client._client = backend
    client.cloud_inference = False
    client.local_inference_batch_size = None
    client._inference_inspector = Inspector()


class EdgeQdrantClient(QdrantClient):
    """A ``QdrantClient`` whose collections are Qdrant Edge shards in the folder ``path``.

    The indexing settings are Qdrant's defaults unless given: ``hnsw_config`` and ``optimizers_config`` are the
    defaults of the collections created here (``create_collection``'s own win), ``max_search_threads`` sizes each
    shard's search pool, and ``auto_optimize`` builds indexes after every write (else :meth:`optimize` builds them).
    Every write call returns once its points are in the shard's write-ahead log, so a killed process loses none;
    ``flush_writes`` also flushes to disk after each call. See :class:`EdgeStoreConfig`.
    """

    def __init__(
        self,
        path: PathLike = DEFAULT_EDGE_PATH,
        *,
        hnsw_config: Optional[rest.HnswConfigDiff] = None,
        optimizers_config: Optional[rest.OptimizersConfigDiff] = None,
        max_search_threads: Optional[int] = None,
        auto_optimize: bool = False,
        flush_writes: bool = False,
    ) -> None:
        # QdrantClient.__init__ would build a local-mode or a remote backend; this sets what its methods read instead
        settings = _settings(hnsw_config, optimizers_config, max_search_threads, auto_optimize, flush_writes)
        _attach(self, path, settings, EdgeBackend.open(path, settings))
        QdrantFastembedMixin.__init__(self, parser=self._inference_inspector.parser, is_local_mode=True)

    @property
    def path(self) -> str:
        """The store's folder (absolute)."""
        return self._client.location

    def optimize(self, collection_name: str) -> bool:
        """Build the collection's HNSW indexes and merge its segments now; True when anything changed.

        Edge indexes only when asked: after a bulk load, one call builds each index once, instead of while points
        arrive. Queries are exact (and slower) on whatever has not been optimized. The call holds Python's GIL and
        the store until it returns: every query of the process waits for it, about 130 s for 120,000 points of 384
        dimensions on 2 cores (docs/RESULTS.md §9.9). Run it when nothing is served, or load through a Qdrant
        server, which indexes in the background.
        """
        return self._client.optimize(collection_name)

    def flush(self, collection_name: Optional[str] = None) -> None:
        """Write the segments to disk (every write is already in the write-ahead log when its call returns)."""
        self._client.flush(collection_name)

    def async_client(self) -> AsyncEdgeQdrantClient:
        """An ``AsyncEdgeQdrantClient`` on the same store and settings (shared in this process)."""
        options = dict(self._init_options)
        return AsyncEdgeQdrantClient(options.pop("path"), **options)

    def close(self, grpc_grace: Optional[float] = None, **kwargs: Any) -> None:
        """Close this client; the store closes (flushed, unlocked) when its last client in this process does."""
        backend = self.__dict__.get("_client")
        if isinstance(backend, EdgeBackend):
            self._client = _ClosedBackend(backend.location)
            backend.close()


class AsyncEdgeQdrantClient(AsyncQdrantClient):
    """The async twin of :class:`EdgeQdrantClient`: the same calls, awaitable, on the same store.

    In one process, both clients of a folder share its store, so what one writes the other reads at once (unlike
    two local-mode clients, which keep separate copies).
    """

    def __init__(
        self,
        path: PathLike = DEFAULT_EDGE_PATH,
        *,
        hnsw_config: Optional[rest.HnswConfigDiff] = None,
        optimizers_config: Optional[rest.OptimizersConfigDiff] = None,
        max_search_threads: Optional[int] = None,
        auto_optimize: bool = False,
        flush_writes: bool = False,
    ) -> None:
        settings = _settings(hnsw_config, optimizers_config, max_search_threads, auto_optimize, flush_writes)
        _attach(self, path, settings, AsyncEdgeBackend(EdgeBackend.open(path, settings)))
        AsyncQdrantFastembedMixin.__init__(self, parser=self._inference_inspector.parser, is_local_mode=True)

    @property
    def path(self) -> str:
        return self._client.location

    async def optimize(self, collection_name: str) -> bool:
        """See :meth:`EdgeQdrantClient.optimize`."""
        return await self._client.optimize(collection_name)

    async def flush(self, collection_name: Optional[str] = None) -> None:
        """See :meth:`EdgeQdrantClient.flush`."""
        await self._client.flush(collection_name)

    async def close(self, grpc_grace: Optional[float] = None, **kwargs: Any) -> None:
        self._release()

    def _release(self) -> None:
        backend = self.__dict__.get("_client")
        if isinstance(backend, AsyncEdgeBackend):
            self._client = _ClosedBackend(backend.location)
            backend.backend.close()

    def __del__(self) -> None:
        # AsyncQdrantClient has no __del__: without this, a client never closed would keep the store open
        self._release()
