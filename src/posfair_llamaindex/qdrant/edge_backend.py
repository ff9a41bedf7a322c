"""``EdgeBackend``: qdrant-client's backend interface (``QdrantBase``) on an Edge store.

``QdrantClient`` hands every call to a backend: ``QdrantRemote`` for a server, ``QdrantLocal`` for its pure-Python
local mode. ``EdgeQdrantClient`` hands them to this one, which runs each on the collection's Edge shard (Qdrant's
Rust engine, in-process), so code written for ``QdrantClient`` (LlamaIndex's ``QdrantVectorStore`` included) runs
unchanged on the engine a server runs. This module holds the calls only: the folder is in ``edge_store``, the
translation in ``edge_points``, ``edge_filters``, ``edge_queries`` and ``edge_config``.

Every ``QdrantBase`` method is either answered here or refused by name (:data:`REFUSED_CALLS`); one that a later
qdrant-client adds and nobody has looked at yet is refused by name too, never left to the base class's bare
``NotImplementedError``.

Every write call returns once Edge has written it to the shard's write-ahead log, so it survives the process being
killed; ``flush`` also writes the segments themselves. Edge builds HNSW indexes only when asked: call ``optimize``
after a bulk load (or open the store with ``auto_optimize=True`` to optimize after every write, as a server would in
the background).
"""

from __future__ import annotations

import functools
import inspect
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Optional, TypeVar, Union

from pydantic_core import to_jsonable_python
from qdrant_client.client_base import QdrantBase
from qdrant_client.http import models as rest
from qdrant_client.migrate import migrate as migrate_collections
from qdrant_client.uploader.uploader import iter_batch

from posfair_llamaindex.errors import (
    EdgeClosedError,
    EdgeCollectionNotFoundError,
    EdgeRequestError,
    EdgeUnsupportedError,
)
from posfair_llamaindex.qdrant.edge_binding import edge
from posfair_llamaindex.qdrant.edge_config import collection_info, edge_config, edge_payload_schema, merged_diff
from posfair_llamaindex.qdrant.edge_errors import engine_errors
from posfair_llamaindex.qdrant.edge_filters import edge_filter, selected_points
from posfair_llamaindex.qdrant.edge_points import (
    batch_rows,
    edge_id,
    edge_point,
    edge_points,
    edge_vector_struct,
    point_id_from_edge,
    record_from_edge,
    scored_point_from_edge,
    upload_rows,
)
from posfair_llamaindex.qdrant.edge_queries import (
    QueryTranslator,
    check_limit,
    edge_search_params,
    edge_with_payload,
    edge_with_vectors,
)
from posfair_llamaindex.qdrant.edge_store import (
    EdgeStore,
    EdgeStoreConfig,
    StoredCollection,
    check_collection_name,
    edge_version,
)

__all__ = [
    "EDGE_ONLY_CALLS",
    "REFUSED_CALLS",
    "UNTRANSLATED_CALLS",
    "EdgeBackend",
    "public_calls",
    "refuse_untranslated",
]

T = TypeVar("T")

_SNAPSHOTS = "copy the store's folder while no client has it open"
_ONE_SHARD = "an Edge collection is a single shard"
_NO_CLUSTER = "Edge runs in this process, not in a cluster"
# the QdrantBase calls Edge cannot answer: call -> (what is refused, why); each raises EdgeUnsupportedError
REFUSED_CALLS: dict[str, tuple[str, str]] = {
    "query_points_groups": ("grouped queries", "qdrant-edge-py has no query_groups"),
    "search_matrix_pairs": ("the search matrix", "qdrant-edge-py has no search_matrix"),
    "search_matrix_offsets": ("the search matrix", "qdrant-edge-py has no search_matrix"),
    "create_snapshot": ("snapshots", _SNAPSHOTS),
    "delete_snapshot": ("snapshots", _SNAPSHOTS),
    "recover_snapshot": ("snapshots", _SNAPSHOTS),
    "create_full_snapshot": ("snapshots", _SNAPSHOTS),
    "delete_full_snapshot": ("snapshots", _SNAPSHOTS),
    "create_shard_snapshot": ("snapshots", _SNAPSHOTS),
    "delete_shard_snapshot": ("snapshots", _SNAPSHOTS),
    "recover_shard_snapshot": ("snapshots", _SNAPSHOTS),
    "create_shard_key": ("shard keys", _ONE_SHARD),
    "delete_shard_key": ("shard keys", _ONE_SHARD),
    "list_shard_keys": ("shard keys", _ONE_SHARD),
    "cluster_collection_update": ("cluster operations", _NO_CLUSTER),
    "collection_cluster_info": ("cluster information", _NO_CLUSTER),
    "cluster_status": ("cluster status", _NO_CLUSTER),
    "recover_current_peer": ("peers", _NO_CLUSTER),
    "remove_peer": ("peers", _NO_CLUSTER),
    "cluster_telemetry": ("cluster telemetry", _NO_CLUSTER),
    "get_optimizations": (
        "optimization progress",
        "Edge optimizes only inside optimize(), which blocks until done",
    ),
}
# what the Edge clients add to qdrant-client's calls
EDGE_ONLY_CALLS = ("optimize", "flush")


def public_calls(base: type) -> list[str]:
    """The public methods of a qdrant-client backend base (``QdrantBase`` or ``AsyncQdrantBase``), by name."""
    return sorted(
        {
            name
            for cls in base.__mro__
            for name, member in vars(cls).items()
            if not name.startswith("_") and inspect.isfunction(member)
        }
    )


def _refusal(call: str, construct: str, reason: str) -> Callable[..., Any]:
    def refuse(self: EdgeBackend, *args: Any, **kwargs: Any) -> Any:
        raise EdgeUnsupportedError(call, construct, reason)

    refuse.__name__ = refuse.__qualname__ = call
    refuse.__doc__ = f"Refused: {construct} ({reason})."
    return refuse


def _locked(method: Callable[..., T]) -> Callable[..., T]:
    """Run the method under the store's lock: one call at a time reaches the shards and the folder."""

    @functools.wraps(method)
    def run(self: EdgeBackend, *args: Any, **kwargs: Any) -> T:
        with self.store.lock:
            self._check_open()
            return method(self, *args, **kwargs)

    return run


def _completed() -> rest.UpdateResult:
    return rest.UpdateResult(operation_id=0, status=rest.UpdateStatus.COMPLETED)


def _refuse(call: str, **options: Any) -> None:
    """Refuse server-only options that were given (shard keys above all: Edge is one shard)."""
    for name, value in options.items():
        if value is not None:
            raise EdgeUnsupportedError(call, f"{name}={value!r}", _ONE_SHARD)


_UPDATE_MODES = {
    rest.UpdateMode.UPSERT: edge.UpdateMode.Upsert,
    rest.UpdateMode.INSERT_ONLY: edge.UpdateMode.InsertOnly,
    rest.UpdateMode.UPDATE_ONLY: edge.UpdateMode.UpdateOnly,
}


class EdgeBackend(QdrantBase):
    """qdrant-client's backend interface on an :class:`EdgeStore`: one shard per collection, all in one folder.

    Each client has its own backend; in one process, the backends of one folder share its store (the sync and the
    async client of LlamaIndex's store, say), which closes when the last of them does.
    """

    @classmethod
    def open(cls, path: Union[str, os.PathLike], settings: Optional[EdgeStoreConfig] = None) -> EdgeBackend:
        """A backend on the store at ``path`` (created when the folder is new or empty), shared in this process."""
        return cls(EdgeStore.open(path, settings))

    def __init__(self, store: EdgeStore) -> None:
        super().__init__()
        self.store = store
        self.location = store.location  # where the client points, for messages (as QdrantLocal.location)
        self._released = False
        self._release_lock = threading.Lock()

    @property
    def settings(self) -> EdgeStoreConfig:
        return self.store.settings

    @property
    def closed(self) -> bool:
        return self._released or self.store.closed

    def _check_open(self) -> None:
        if self.closed:
            raise EdgeClosedError(f"the Edge store {self.store.path} is closed; open a new EdgeQdrantClient on it")

    def close(self, **kwargs: Any) -> None:
        """Release this backend's share of the store (closing again does nothing)."""
        with self._release_lock:
            if self._released:
                return
            self._released = True
        self.store.release()

    # ------------------------------------------------------------------ shared steps
    def _collection(self, name: str) -> StoredCollection:
        return self.store.collection(name)

    def _update(self, call: str, collection: StoredCollection, operations: Sequence[Any]) -> rest.UpdateResult:
        """Apply Edge update operations; each is in the write-ahead log when ``update`` returns."""
        shard = self.store.shard(collection)
        with engine_errors(call, collection.name):
            for operation in operations:
                shard.update(operation)
            if self.settings.auto_optimize:
                shard.optimize()
            if self.settings.flush_writes:
                shard.flush()
        return _completed()

    def _lookup_vector(
        self, call: str, collection: StoredCollection, point_id: Any, using: Optional[str], lookup_from: Any
    ) -> Any:
        """The stored vector of a point named in a query (Edge's queries take vectors, not ids)."""
        source = collection if lookup_from is None else self._collection(lookup_from.collection)
        name = using
        if lookup_from is not None and lookup_from.vector is not None:
            name = lookup_from.vector
        with engine_errors(call, source.name):
            records = self.store.shard(source).retrieve([point_id], False, [name] if name else True)
        if not records:
            raise EdgeRequestError(f"{call}: no point with id {point_id!r} in collection {source.name!r}")
        vector = records[0].vector
        if isinstance(vector, dict):
            key = name or ""
            if key not in vector:
                raise EdgeRequestError(f"{call}: point {point_id!r} of {source.name!r} has no vector {key!r}")
            return vector[key]
        return vector

    # ------------------------------------------------------------------ Edge-only calls
    @_locked
    def optimize(self, collection_name: str) -> bool:
        """Build the collection's HNSW indexes and merge its segments now (blocking); True when anything changed."""
        collection = self._collection(collection_name)
        shard = self.store.shard(collection)
        with engine_errors("optimize", collection.name):
            return bool(shard.optimize())

    @_locked
    def flush(self, collection_name: Optional[str] = None) -> None:
        """Write the segments of one collection (or of every open one) to disk; the log already holds every write."""
        names = [collection_name] if collection_name is not None else list(self.store.collections)
        for name in names:
            collection = self._collection(name)
            if collection.shard is not None:
                with engine_errors("flush", collection.name):
                    collection.shard.flush()

    # ------------------------------------------------------------------ collections
    @_locked
    def get_collections(self, **kwargs: Any) -> rest.CollectionsResponse:
        return rest.CollectionsResponse(
            collections=[rest.CollectionDescription(name=name) for name in sorted(self.store.collections)]
        )

    @_locked
    def collection_exists(self, collection_name: str, **kwargs: Any) -> bool:
        return self.store.resolve(collection_name) in self.store.collections

    @_locked
    def get_collection(self, collection_name: str, **kwargs: Any) -> rest.CollectionInfo:
        collection = self._collection(collection_name)
        shard = self.store.shard(collection)
        with engine_errors("get_collection", collection.name):
            info = shard.info()
        return collection_info(collection.config, info)

    @_locked
    def create_collection(
        self,
        collection_name: str,
        vectors_config: Union[rest.VectorParams, Mapping[str, rest.VectorParams], None] = None,
        sparse_vectors_config: Optional[Mapping[str, rest.SparseVectorParams]] = None,
        shard_number: Optional[int] = None,
        sharding_method: Optional[rest.ShardingMethod] = None,
        replication_factor: Optional[int] = None,
        write_consistency_factor: Optional[int] = None,
        on_disk_payload: Optional[bool] = None,
        hnsw_config: Optional[rest.HnswConfigDiff] = None,
        optimizers_config: Optional[rest.OptimizersConfigDiff] = None,
        wal_config: Optional[rest.WalConfigDiff] = None,
        quantization_config: Optional[Any] = None,
        strict_mode_config: Optional[rest.StrictModeConfig] = None,
        metadata: Optional[dict[str, Any]] = None,
        payload: Optional[rest.PayloadStorageParams] = None,
        id_tracker: Optional[rest.IdTrackerParams] = None,
        **kwargs: Any,
    ) -> bool:
        call = "create_collection"
        check_collection_name(collection_name)
        self._refuse_cluster(call, shard_number, sharding_method, replication_factor, write_consistency_factor)
        if wal_config is not None and wal_config.model_dump(exclude_none=True):
            raise EdgeUnsupportedError(call, "wal_config", "qdrant-edge-py keeps Edge's write-ahead log settings")
        if strict_mode_config is not None:
            raise EdgeUnsupportedError(call, "strict_mode_config", "strict mode limits a server's clients")
        if kwargs.get("init_from") is not None:
            raise EdgeUnsupportedError(call, "init_from")
        if collection_name in self.store.collections:
            raise ValueError(f"Collection {collection_name} already exists")
        if collection_name in self.store.aliases:
            raise ValueError(f"Alias {collection_name} already exists")
        config = rest.CreateCollection(
            vectors=vectors_config if vectors_config is not None else {},
            sparse_vectors=dict(sparse_vectors_config) if sparse_vectors_config is not None else None,
            on_disk_payload=on_disk_payload,
            hnsw_config=merged_diff(self.settings.hnsw_config, hnsw_config),
            optimizers_config=merged_diff(self.settings.optimizers_config, optimizers_config),
            quantization_config=quantization_config,
            metadata=to_jsonable_python(metadata),
            payload=payload,
            id_tracker=id_tracker,
        )
        shard_config = edge_config(config, call, self.settings.max_search_threads)  # refuses before any file exists
        self.store.create(collection_name, config, shard_config)
        return True

    @staticmethod
    def _refuse_cluster(call: str, shards: Any, method: Any, replication: Any, write_consistency: Any) -> None:
        if shards not in (None, 1):
            raise EdgeUnsupportedError(call, f"shard_number={shards}", _ONE_SHARD)
        if method is not None and method != rest.ShardingMethod.AUTO:
            raise EdgeUnsupportedError(call, f"sharding_method={method}", "custom sharding needs shard keys")
        for name, value in (("replication_factor", replication), ("write_consistency_factor", write_consistency)):
            if value not in (None, 1):
                raise EdgeUnsupportedError(call, f"{name}={value}", "Edge runs on one machine, without replicas")

    def recreate_collection(self, collection_name: str, **kwargs: Any) -> bool:
        with self.store.lock:
            self.delete_collection(collection_name)
            return self.create_collection(collection_name, **kwargs)

    @_locked
    def delete_collection(self, collection_name: str, **kwargs: Any) -> bool:
        return self.store.delete(collection_name)

    @_locked
    def update_collection(
        self,
        collection_name: str,
        optimizers_config: Optional[rest.OptimizersConfigDiff] = None,
        collection_params: Optional[rest.CollectionParamsDiff] = None,
        vectors_config: Optional[Mapping[str, rest.VectorParamsDiff]] = None,
        hnsw_config: Optional[rest.HnswConfigDiff] = None,
        quantization_config: Optional[Any] = None,
        timeout: Optional[int] = None,
        sparse_vectors_config: Optional[Mapping[str, rest.SparseVectorParams]] = None,
        strict_mode_config: Optional[rest.StrictModeConfig] = None,
        metadata: Optional[dict[str, Any]] = None,
        **kwargs: Any,
    ) -> bool:
        """Metadata (merged key by key, as a server does; ``{}`` removes it), optimizer and HNSW settings."""
        call = "update_collection"
        refused = {
            "collection_params": collection_params,
            "vectors_config": vectors_config,
            "quantization_config": quantization_config,
            "sparse_vectors_config": sparse_vectors_config,
            "strict_mode_config": strict_mode_config,
        }
        for name, value in refused.items():
            if value is not None:
                raise EdgeUnsupportedError(call, name, "only metadata, optimizers_config and hnsw_config change here")
        collection = self._collection(collection_name)
        config = collection.config
        updates: dict[str, Any] = {}
        if metadata is not None:
            given = to_jsonable_python(metadata)
            updates["metadata"] = None if not given else {**(config.metadata or {}), **given}
        if optimizers_config is not None:
            updates["optimizers_config"] = merged_diff(config.optimizers_config, optimizers_config)
        if hnsw_config is not None:
            updates["hnsw_config"] = merged_diff(config.hnsw_config, hnsw_config)
        if not updates:
            return False
        new_config = config.model_copy(update=updates)
        if "optimizers_config" in updates or "hnsw_config" in updates:
            edge_config(new_config, call)  # refuses what Edge cannot take before anything changes
            self.store.close_shard(collection)  # reopened with the new settings on next use
        self.store.save_config(collection, new_config)
        return True

    # ------------------------------------------------------------------ aliases
    @_locked
    def update_collection_aliases(self, change_aliases_operations: Sequence[Any], **kwargs: Any) -> bool:
        collections = self.store.collections
        aliases = dict(self.store.aliases)
        for operation in change_aliases_operations:
            if isinstance(operation, rest.CreateAliasOperation):
                target, alias = operation.create_alias.collection_name, operation.create_alias.alias_name
                if target not in collections:
                    raise EdgeCollectionNotFoundError(f"Collection {target} not found")
                if alias in collections:
                    raise ValueError(f"Collection {alias} already exists")
                aliases[alias] = target
            elif isinstance(operation, rest.DeleteAliasOperation):
                aliases.pop(operation.delete_alias.alias_name, None)
            elif isinstance(operation, rest.RenameAliasOperation):
                old, new = operation.rename_alias.old_alias_name, operation.rename_alias.new_alias_name
                if old not in aliases:
                    raise ValueError(f"Alias {old} does not exist")
                if new in collections:
                    raise ValueError(f"Collection {new} already exists")
                aliases[new] = aliases.pop(old)
            else:
                raise EdgeUnsupportedError("update_collection_aliases", f"operation {type(operation).__name__}")
        self.store.save_aliases(aliases)
        return True

    @_locked
    def get_collection_aliases(self, collection_name: str, **kwargs: Any) -> rest.CollectionsAliasesResponse:
        return rest.CollectionsAliasesResponse(
            aliases=[
                rest.AliasDescription(alias_name=alias, collection_name=name)
                for alias, name in sorted(self.store.aliases.items())
                if name == collection_name
            ]
        )

    @_locked
    def get_aliases(self, **kwargs: Any) -> rest.CollectionsAliasesResponse:
        return rest.CollectionsAliasesResponse(
            aliases=[
                rest.AliasDescription(alias_name=alias, collection_name=name)
                for alias, name in sorted(self.store.aliases.items())
            ]
        )

    # ------------------------------------------------------------------ payload indexes, named vectors
    @_locked
    def create_payload_index(
        self,
        collection_name: str,
        field_name: str,
        field_schema: Optional[Any] = None,
        field_type: Optional[Any] = None,
        **kwargs: Any,
    ) -> rest.UpdateResult:
        call = "create_payload_index"
        schema = field_schema if field_schema is not None else field_type
        if schema is None:
            raise ValueError(f"{call}: give the field's schema (field_schema), e.g. models.PayloadSchemaType.KEYWORD")
        operation = edge.UpdateOperation.create_field_index(field_name, edge_payload_schema(schema, call))
        return self._update(call, self._collection(collection_name), [operation])

    @_locked
    def delete_payload_index(self, collection_name: str, field_name: str, **kwargs: Any) -> rest.UpdateResult:
        operation = edge.UpdateOperation.delete_field_index(field_name)
        return self._update("delete_payload_index", self._collection(collection_name), [operation])

    @_locked
    def create_vector_name(
        self, collection_name: str, vector_name: str, vector_name_config: Any, **kwargs: Any
    ) -> rest.UpdateResult:
        call = "create_vector_name"
        collection = self._collection(collection_name)
        config = collection.config
        if isinstance(vector_name_config, rest.DenseVectorNameConfig):
            params = vector_name_config.dense
            translated = edge_config(rest.CreateCollection(vectors={vector_name: params}), call).vectors[vector_name]
            operation = edge.UpdateOperation.create_dense_vector(
                vector_name, params.size, translated.distance, translated.multivector_config, translated.datatype
            )
            if isinstance(config.vectors, rest.VectorParams):
                vectors: Any = {"": config.vectors, vector_name: params}
            else:
                vectors = {**(config.vectors or {}), vector_name: params}
            new_config = config.model_copy(update={"vectors": vectors})
        elif isinstance(vector_name_config, rest.SparseVectorNameConfig):
            params = vector_name_config.sparse
            sparse = edge_config(rest.CreateCollection(sparse_vectors={vector_name: params}), call)
            translated = sparse.sparse_vectors[vector_name]
            operation = edge.UpdateOperation.create_sparse_vector(vector_name, translated.modifier, translated.datatype)
            new_config = config.model_copy(
                update={"sparse_vectors": {**(config.sparse_vectors or {}), vector_name: params}}
            )
        else:
            raise EdgeUnsupportedError(call, f"vector_name_config {type(vector_name_config).__name__}")
        result = self._update(call, collection, [operation])
        self.store.save_config(collection, new_config)
        return result

    @_locked
    def delete_vector_name(self, collection_name: str, vector_name: str, **kwargs: Any) -> rest.UpdateResult:
        collection = self._collection(collection_name)
        result = self._update("delete_vector_name", collection, [edge.UpdateOperation.delete_vector_name(vector_name)])
        config = collection.config
        updates: dict[str, Any] = {}
        if isinstance(config.vectors, dict) and vector_name in config.vectors:
            updates["vectors"] = {n: p for n, p in config.vectors.items() if n != vector_name}
        if config.sparse_vectors and vector_name in config.sparse_vectors:
            updates["sparse_vectors"] = {n: p for n, p in config.sparse_vectors.items() if n != vector_name}
        self.store.save_config(collection, config.model_copy(update=updates))
        return result

    # ------------------------------------------------------------------ reading points
    def _translator(self, call: str, collection: StoredCollection) -> QueryTranslator:
        def lookup(point_id: Any, using: Optional[str], lookup_from: Any) -> Any:
            return self._lookup_vector(call, collection, point_id, using, lookup_from)

        return QueryTranslator(call, collection.name, lookup)

    def _query_request(
        self,
        call: str,
        collection: StoredCollection,
        query: Any = None,
        using: Optional[str] = None,
        prefetch: Any = None,
        query_filter: Optional[rest.Filter] = None,
        search_params: Any = None,
        limit: int = 10,
        offset: Optional[int] = None,
        with_payload: Any = True,
        with_vectors: Any = False,
        score_threshold: Optional[float] = None,
        lookup_from: Optional[rest.LookupLocation] = None,
    ) -> edge.QueryRequest:
        check_limit(call, limit)
        if offset is not None and (isinstance(offset, bool) or not isinstance(offset, int) or offset < 0):
            raise ValueError(f"{call}: offset value {offset!r} is invalid. Must be 0 or larger.")
        translator = self._translator(call, collection)
        scoring, stage_filter = translator.stage(query, using, lookup_from, query_filter, limit)
        return edge.QueryRequest(
            limit=limit,
            offset=offset,
            query=scoring,
            prefetches=translator.prefetches(prefetch),
            with_vector=edge_with_vectors(with_vectors, call),
            with_payload=edge_with_payload(with_payload, call),
            filter=stage_filter,
            score_threshold=score_threshold,
            params=edge_search_params(search_params, call),
        )

    @_locked
    def query_points(
        self,
        collection_name: str,
        query: Any = None,
        using: Optional[str] = None,
        prefetch: Any = None,
        query_filter: Optional[rest.Filter] = None,
        search_params: Any = None,
        limit: int = 10,
        offset: Optional[int] = None,
        with_payload: Any = True,
        with_vectors: Any = False,
        score_threshold: Optional[float] = None,
        lookup_from: Optional[rest.LookupLocation] = None,
        **kwargs: Any,
    ) -> rest.QueryResponse:
        call = "query_points"
        _refuse(call, shard_key_selector=kwargs.get("shard_key_selector"))
        collection = self._collection(collection_name)
        request = self._query_request(
            call,
            collection,
            query,
            using,
            prefetch,
            query_filter,
            search_params,
            limit,
            offset,
            with_payload,
            with_vectors,
            score_threshold,
            lookup_from,
        )
        shard = self.store.shard(collection)
        with engine_errors(call, collection.name):
            hits = shard.query(request)
        return rest.QueryResponse(points=[scored_point_from_edge(hit) for hit in hits])

    @_locked
    def query_batch_points(
        self, collection_name: str, requests: Sequence[rest.QueryRequest], **kwargs: Any
    ) -> list[rest.QueryResponse]:
        """Every request planned as one batch by Edge (a request's unset ``with_payload`` means none, as on a
        server)."""
        call = "query_batch_points"
        collection = self._collection(collection_name)
        translated = []
        for request in requests:
            _refuse(call, shard_key=request.shard_key)
            translated.append(
                self._query_request(
                    call,
                    collection,
                    request.query,
                    request.using,
                    request.prefetch,
                    request.filter,
                    request.params,
                    request.limit if request.limit is not None else 10,
                    request.offset,
                    request.with_payload if request.with_payload is not None else False,
                    request.with_vector if request.with_vector is not None else False,
                    request.score_threshold,
                    request.lookup_from,
                )
            )
        if not translated:
            return []
        shard = self.store.shard(collection)
        with engine_errors(call, collection.name):
            answers = shard.query_batch(edge.QueryBatchRequest(translated))
        return [rest.QueryResponse(points=[scored_point_from_edge(hit) for hit in hits]) for hits in answers]

    @_locked
    def scroll(
        self,
        collection_name: str,
        scroll_filter: Optional[rest.Filter] = None,
        limit: int = 10,
        order_by: Any = None,
        offset: Any = None,
        with_payload: Any = True,
        with_vectors: Any = False,
        **kwargs: Any,
    ) -> tuple[list[rest.Record], Any]:
        call = "scroll"
        _refuse(call, shard_key_selector=kwargs.get("shard_key_selector"))
        check_limit(call, limit)
        collection = self._collection(collection_name)
        request = edge.ScrollRequest(
            offset=None if offset is None else edge_id(offset, call),
            limit=limit,
            filter=edge_filter(scroll_filter, call),
            with_payload=edge_with_payload(with_payload, call),
            with_vector=edge_with_vectors(with_vectors, call),
            order_by=None if order_by is None else self._translator(call, collection).order_by(order_by),
        )
        shard = self.store.shard(collection)
        with engine_errors(call, collection.name):
            records, next_offset = shard.scroll(request)
        return [record_from_edge(r) for r in records], None if next_offset is None else point_id_from_edge(next_offset)

    @_locked
    def count(
        self, collection_name: str, count_filter: Optional[rest.Filter] = None, exact: bool = True, **kwargs: Any
    ) -> rest.CountResult:
        call = "count"
        _refuse(call, shard_key_selector=kwargs.get("shard_key_selector"))
        collection = self._collection(collection_name)
        request = edge.CountRequest(exact=bool(exact), filter=edge_filter(count_filter, call))
        shard = self.store.shard(collection)
        with engine_errors(call, collection.name):
            return rest.CountResult(count=shard.count(request))

    @_locked
    def facet(
        self,
        collection_name: str,
        key: str,
        facet_filter: Optional[rest.Filter] = None,
        limit: int = 10,
        exact: bool = False,
        **kwargs: Any,
    ) -> rest.FacetResponse:
        call = "facet"
        _refuse(call, shard_key_selector=kwargs.get("shard_key_selector"))
        check_limit(call, limit)
        collection = self._collection(collection_name)
        request = edge.FacetRequest(key, limit=limit, exact=bool(exact), filter=edge_filter(facet_filter, call))
        shard = self.store.shard(collection)
        with engine_errors(call, collection.name):
            response = shard.facet(request)
        return rest.FacetResponse(hits=[rest.FacetValueHit(value=hit.value, count=hit.count) for hit in response.hits])

    @_locked
    def retrieve(
        self,
        collection_name: str,
        ids: Sequence[Any],
        with_payload: Any = True,
        with_vectors: Any = False,
        **kwargs: Any,
    ) -> list[rest.Record]:
        call = "retrieve"
        _refuse(call, shard_key_selector=kwargs.get("shard_key_selector"))
        collection = self._collection(collection_name)
        point_ids = list(dict.fromkeys(edge_id(i, call) for i in ids))
        if not point_ids:
            return []
        payload, vectors = edge_with_payload(with_payload, call), edge_with_vectors(with_vectors, call)
        shard = self.store.shard(collection)
        with engine_errors(call, collection.name):
            records = shard.retrieve(point_ids, payload, vectors)
        return [record_from_edge(r) for r in records]

    # ------------------------------------------------------------------ writing points
    def _upsert(
        self, call: str, collection: StoredCollection, points: list[edge.Point], update_filter: Any, update_mode: Any
    ) -> rest.UpdateResult:
        if not points:  # an empty upload sends nothing, as qdrant-client does
            return _completed()
        mode = None if update_mode is None else _UPDATE_MODES[rest.UpdateMode(update_mode)]
        operation = edge.UpdateOperation.upsert_points(
            points, condition=edge_filter(update_filter, call), update_mode=mode
        )
        return self._update(call, collection, [operation])

    @_locked
    def upsert(
        self,
        collection_name: str,
        points: Any,
        update_filter: Optional[rest.Filter] = None,
        update_mode: Optional[rest.UpdateMode] = None,
        **kwargs: Any,
    ) -> rest.UpdateResult:
        call = "upsert"
        _refuse(call, shard_key_selector=kwargs.get("shard_key_selector"))
        collection = self._collection(collection_name)
        return self._upsert(call, collection, edge_points(points, call), update_filter, update_mode)

    @_locked
    def upload_points(
        self,
        collection_name: str,
        points: Iterable[Any],
        batch_size: int = 64,
        update_filter: Optional[rest.Filter] = None,
        update_mode: Optional[rest.UpdateMode] = None,
        **kwargs: Any,
    ) -> None:
        """Upsert ``points`` ``batch_size`` at a time (``parallel`` and retries have no meaning in-process)."""
        call = "upload_points"
        _refuse(call, shard_key_selector=kwargs.get("shard_key_selector"))
        collection = self._collection(collection_name)
        for batch in iter_batch(points, max(1, batch_size)):
            self._upsert(call, collection, [edge_point(p, call) for p in batch], update_filter, update_mode)

    @_locked
    def upload_collection(
        self,
        collection_name: str,
        vectors: Any,
        payload: Optional[Iterable[dict[Any, Any]]] = None,
        ids: Optional[Iterable[Any]] = None,
        batch_size: int = 64,
        update_filter: Optional[rest.Filter] = None,
        update_mode: Optional[rest.UpdateMode] = None,
        **kwargs: Any,
    ) -> None:
        """Upsert vectors (rows of an array, ``{name: array}``, or any iterable of vector structs) with their payloads
        and ids (random UUIDs when none are given)."""
        call = "upload_collection"
        _refuse(call, shard_key_selector=kwargs.get("shard_key_selector"))
        collection = self._collection(collection_name)
        for rows in upload_rows(vectors, payload, ids, max(1, batch_size)):
            self._upsert(call, collection, [edge_point(r, call) for r in rows], update_filter, update_mode)

    def _update_selected(
        self,
        call: str,
        collection_name: str,
        selector: Any,
        by_ids: Callable[[list], Any],
        by_filter: Callable[[edge.Filter], Any],
        kwargs: dict[str, Any],
    ) -> rest.UpdateResult:
        """One update of the points a selector picks (ids, or a filter; no ids at all is no operation)."""
        _refuse(call, shard_key_selector=kwargs.get("shard_key_selector"))
        ids, selected = selected_points(selector, call)
        if ids is not None:
            operations = [by_ids(ids)] if ids else []
        else:
            operations = [by_filter(selected if selected is not None else edge.Filter())]
        return self._update(call, self._collection(collection_name), operations)

    @_locked
    def delete(self, collection_name: str, points_selector: Any, **kwargs: Any) -> rest.UpdateResult:
        return self._update_selected(
            "delete",
            collection_name,
            points_selector,
            edge.UpdateOperation.delete_points,
            edge.UpdateOperation.delete_points_by_filter,
            kwargs,
        )

    @_locked
    def set_payload(
        self, collection_name: str, payload: dict[str, Any], points: Any, key: Optional[str] = None, **kwargs: Any
    ) -> rest.UpdateResult:
        values = to_jsonable_python(payload)
        return self._update_selected(
            "set_payload",
            collection_name,
            points,
            lambda ids: edge.UpdateOperation.set_payload(ids, values, key),
            lambda selected: edge.UpdateOperation.set_payload_by_filter(selected, values, key),
            kwargs,
        )

    @_locked
    def overwrite_payload(
        self, collection_name: str, payload: dict[str, Any], points: Any, **kwargs: Any
    ) -> rest.UpdateResult:
        values = to_jsonable_python(payload)
        return self._update_selected(
            "overwrite_payload",
            collection_name,
            points,
            lambda ids: edge.UpdateOperation.overwrite_payload(ids, values),
            lambda selected: edge.UpdateOperation.overwrite_payload_by_filter(selected, values),
            kwargs,
        )

    @_locked
    def delete_payload(
        self, collection_name: str, keys: Sequence[str], points: Any, **kwargs: Any
    ) -> rest.UpdateResult:
        names = list(keys)
        return self._update_selected(
            "delete_payload",
            collection_name,
            points,
            lambda ids: edge.UpdateOperation.delete_payload(ids, names),
            lambda selected: edge.UpdateOperation.delete_payload_by_filter(selected, names),
            kwargs,
        )

    @_locked
    def clear_payload(self, collection_name: str, points_selector: Any, **kwargs: Any) -> rest.UpdateResult:
        return self._update_selected(
            "clear_payload",
            collection_name,
            points_selector,
            edge.UpdateOperation.clear_payload,
            edge.UpdateOperation.clear_payload_by_filter,
            kwargs,
        )

    @_locked
    def update_vectors(
        self,
        collection_name: str,
        points: Sequence[rest.PointVectors],
        update_filter: Optional[rest.Filter] = None,
        **kwargs: Any,
    ) -> rest.UpdateResult:
        call = "update_vectors"
        _refuse(call, shard_key_selector=kwargs.get("shard_key_selector"))
        vectors = [edge.PointVectors(edge_id(p.id, call), edge_vector_struct(p.vector, call)) for p in points]
        operation = edge.UpdateOperation.update_vectors(vectors, condition=edge_filter(update_filter, call))
        return self._update(call, self._collection(collection_name), [operation])

    @_locked
    def delete_vectors(
        self, collection_name: str, vectors: Sequence[str], points: Any, **kwargs: Any
    ) -> rest.UpdateResult:
        names = list(vectors)
        return self._update_selected(
            "delete_vectors",
            collection_name,
            points,
            lambda ids: edge.UpdateOperation.delete_vectors(ids, names),
            lambda selected: edge.UpdateOperation.delete_vectors_by_filter(selected, names),
            kwargs,
        )

    @_locked
    def batch_update_points(
        self, collection_name: str, update_operations: Sequence[Any], **kwargs: Any
    ) -> list[rest.UpdateResult]:
        """Each operation in turn, as a server applies them (not as one transaction)."""
        results = []
        for operation in update_operations:
            results.append(self._batch_operation(collection_name, operation))
        return results

    def _batch_operation(self, name: str, operation: Any) -> rest.UpdateResult:
        call = "batch_update_points"
        if isinstance(operation, rest.UpsertOperation):
            upsert = operation.upsert
            _refuse(call, shard_key=upsert.shard_key)
            points = upsert.points if isinstance(upsert, rest.PointsList) else batch_rows(upsert.batch)
            return self._upsert(
                call, self._collection(name), edge_points(points, call), upsert.update_filter, upsert.update_mode
            )
        if isinstance(operation, rest.DeleteOperation):
            return self.delete(name, operation.delete)
        if isinstance(operation, (rest.SetPayloadOperation, rest.OverwritePayloadOperation)):
            body = (
                operation.set_payload
                if isinstance(operation, rest.SetPayloadOperation)
                else operation.overwrite_payload
            )
            _refuse(call, shard_key=body.shard_key)
            selector = body.points if body.points is not None else body.filter
            if isinstance(operation, rest.SetPayloadOperation):
                return self.set_payload(name, body.payload, selector, key=body.key)
            if body.key is not None:
                raise EdgeUnsupportedError(call, "overwrite_payload with a key")
            return self.overwrite_payload(name, body.payload, selector)
        if isinstance(operation, rest.DeletePayloadOperation):
            body = operation.delete_payload
            _refuse(call, shard_key=body.shard_key)
            return self.delete_payload(name, body.keys, body.points if body.points is not None else body.filter)
        if isinstance(operation, rest.ClearPayloadOperation):
            return self.clear_payload(name, operation.clear_payload)
        if isinstance(operation, rest.UpdateVectorsOperation):
            body = operation.update_vectors
            _refuse(call, shard_key=body.shard_key)
            return self.update_vectors(name, body.points, update_filter=body.update_filter)
        if isinstance(operation, rest.DeleteVectorsOperation):
            body = operation.delete_vectors
            _refuse(call, shard_key=body.shard_key)
            return self.delete_vectors(name, body.vector, body.points if body.points is not None else body.filter)
        raise EdgeUnsupportedError(call, f"operation {type(operation).__name__}")

    # ------------------------------------------------------------------ the rest of QdrantBase
    def info(self) -> rest.VersionInfo:
        return rest.VersionInfo(title="qdrant-edge (posfair_llamaindex EdgeQdrantClient)", version=edge_version())

    def list_snapshots(self, collection_name: str, **kwargs: Any) -> list[rest.SnapshotDescription]:
        return []

    def list_full_snapshots(self, **kwargs: Any) -> list[rest.SnapshotDescription]:
        return []

    def list_shard_snapshots(self, collection_name: str, shard_id: int, **kwargs: Any) -> list[Any]:
        return []

    def migrate(
        self,
        dest_client: QdrantBase,
        collection_names: Optional[list[str]] = None,
        batch_size: int = 100,
        recreate_on_collision: bool = False,
    ) -> None:
        """Copy collections to ``dest_client`` with qdrant-client's own ``migrate`` (as ``QdrantClient.migrate``)."""
        migrate_collections(
            self,
            dest_client,
            collection_names=collection_names,
            batch_size=batch_size,
            recreate_on_collision=recreate_on_collision,
        )


def refuse_untranslated(backend: type, base: type = QdrantBase) -> tuple[str, ...]:
    """Install the refusals of :data:`REFUSED_CALLS` on ``backend``, then refuse by name every public call of
    ``base`` that ``backend`` would leave to the base's bare ``NotImplementedError`` (a later qdrant-client's new
    calls); those are returned."""
    for call, (construct, reason) in REFUSED_CALLS.items():
        setattr(backend, call, _refusal(call, construct, reason))
    untranslated = tuple(call for call in public_calls(base) if getattr(backend, call) is getattr(base, call))
    for call in untranslated:
        setattr(backend, call, _refusal(call, "this call", "posfair_llamaindex does not translate it to Edge yet"))
    return untranslated


# empty for the qdrant-client versions pyproject.toml allows (tests/qdrant/test_edge_coverage.py checks)
UNTRANSLATED_CALLS = refuse_untranslated(EdgeBackend)
