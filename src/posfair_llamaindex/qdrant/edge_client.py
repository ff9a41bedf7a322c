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
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn, Optional, Union

from qdrant_client import AsyncQdrantClient, QdrantClient
from qdrant_client.async_client_base import AsyncQdrantBase
from qdrant_client.async_qdrant_fastembed import AsyncQdrantFastembedMixin
from qdrant_client.embed.type_inspector import Inspector
from qdrant_client.http import models as rest
from qdrant_client.qdrant_fastembed import QdrantFastembedMixin

from posfair_llamaindex.qdrant.edge_backend import EdgeBackend, EdgeClosedError, EdgeSettings
from posfair_llamaindex.qdrant.edge_translate import EdgeUnsupportedError

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
) -> EdgeSettings:
    return EdgeSettings(
        hnsw_config=hnsw_config,
        optimizers_config=optimizers_config,
        max_search_threads=max_search_threads,
        auto_optimize=auto_optimize,
        flush_writes=flush_writes,
    )


def _attach(client: Any, path: PathLike, settings: EdgeSettings, backend: Any) -> None:
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
    ``flush_writes`` also flushes to disk after each call. See :class:`EdgeSettings`.
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
        arrive. Queries are exact (and slower) on whatever has not been optimized.
        """
        return self._client.optimize(collection_name)

    def flush(self, collection_name: Optional[str] = None) -> None:
        """Write the segments to disk (every write is already in the write-ahead log when its call returns)."""
        self._client.flush(collection_name)

    def async_client(self) -> AsyncEdgeQdrantClient:
        """An ``AsyncEdgeQdrantClient`` on the same store and settings (the same backend, in this process)."""
        options = dict(self._init_options)
        return AsyncEdgeQdrantClient(options.pop("path"), **options)

    def close(self, grpc_grace: Optional[float] = None, **kwargs: Any) -> None:
        """Close this client; the store closes (flushed, unlocked) when its last client in this process does."""
        backend = self.__dict__.get("_client")
        if isinstance(backend, EdgeBackend):
            self._client = _ClosedBackend(backend.location)
            backend.close()


# ---------------------------------------------------------------------------------------------------- async


def _awaitable(name: str) -> Callable[..., Awaitable[Any]]:
    """The async face of one backend call: Edge runs in this process, so the call runs at once, in the loop."""

    async def call(self: AsyncEdgeBackend, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.backend, name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"``EdgeBackend.{name}``, awaited."
    return call


def _direct(name: str) -> Callable[..., Any]:
    """A backend call the async client makes without awaiting (qdrant-client's uploads are plain methods)."""

    def call(self: AsyncEdgeBackend, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.backend, name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    return call


class AsyncEdgeBackend(AsyncQdrantBase):
    """``AsyncQdrantBase`` on an :class:`EdgeBackend`: the same store and calls, awaitable."""

    def __init__(self, backend: EdgeBackend) -> None:
        super().__init__()
        self.backend = backend
        self.location = backend.location

    async def close(self, **kwargs: Any) -> None:
        self.backend.close()

    query_points = _awaitable("query_points")
    query_batch_points = _awaitable("query_batch_points")
    query_points_groups = _awaitable("query_points_groups")
    search_matrix_pairs = _awaitable("search_matrix_pairs")
    search_matrix_offsets = _awaitable("search_matrix_offsets")
    scroll = _awaitable("scroll")
    count = _awaitable("count")
    facet = _awaitable("facet")
    retrieve = _awaitable("retrieve")
    upsert = _awaitable("upsert")
    update_vectors = _awaitable("update_vectors")
    delete_vectors = _awaitable("delete_vectors")
    delete = _awaitable("delete")
    set_payload = _awaitable("set_payload")
    overwrite_payload = _awaitable("overwrite_payload")
    delete_payload = _awaitable("delete_payload")
    clear_payload = _awaitable("clear_payload")
    batch_update_points = _awaitable("batch_update_points")
    upload_points = _direct("upload_points")
    upload_collection = _direct("upload_collection")
    get_collections = _awaitable("get_collections")
    get_collection = _awaitable("get_collection")
    collection_exists = _awaitable("collection_exists")
    create_collection = _awaitable("create_collection")
    recreate_collection = _awaitable("recreate_collection")
    update_collection = _awaitable("update_collection")
    delete_collection = _awaitable("delete_collection")
    update_collection_aliases = _awaitable("update_collection_aliases")
    get_collection_aliases = _awaitable("get_collection_aliases")
    get_aliases = _awaitable("get_aliases")
    create_payload_index = _awaitable("create_payload_index")
    delete_payload_index = _awaitable("delete_payload_index")
    create_vector_name = _awaitable("create_vector_name")
    delete_vector_name = _awaitable("delete_vector_name")
    list_snapshots = _awaitable("list_snapshots")
    create_snapshot = _awaitable("create_snapshot")
    delete_snapshot = _awaitable("delete_snapshot")
    recover_snapshot = _awaitable("recover_snapshot")
    list_full_snapshots = _awaitable("list_full_snapshots")
    create_full_snapshot = _awaitable("create_full_snapshot")
    delete_full_snapshot = _awaitable("delete_full_snapshot")
    list_shard_snapshots = _awaitable("list_shard_snapshots")
    create_shard_snapshot = _awaitable("create_shard_snapshot")
    delete_shard_snapshot = _awaitable("delete_shard_snapshot")
    recover_shard_snapshot = _awaitable("recover_shard_snapshot")
    create_shard_key = _awaitable("create_shard_key")
    delete_shard_key = _awaitable("delete_shard_key")
    list_shard_keys = _awaitable("list_shard_keys")
    info = _awaitable("info")
    cluster_collection_update = _awaitable("cluster_collection_update")
    collection_cluster_info = _awaitable("collection_cluster_info")
    cluster_status = _awaitable("cluster_status")
    recover_current_peer = _awaitable("recover_current_peer")
    remove_peer = _awaitable("remove_peer")
    get_optimizations = _awaitable("get_optimizations")
    cluster_telemetry = _awaitable("cluster_telemetry")
    optimize = _awaitable("optimize")
    flush = _awaitable("flush")


class AsyncEdgeQdrantClient(AsyncQdrantClient):
    """The async twin of :class:`EdgeQdrantClient`: the same calls, awaitable, on the same store.

    In one process, both clients of a folder share its backend, so what one writes the other reads at once (unlike
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
