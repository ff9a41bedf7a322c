"""``EdgeBackend``: qdrant-client's backend interface (``QdrantBase``) on Qdrant Edge shards kept in one folder.

``QdrantClient`` hands every call to a backend: ``QdrantRemote`` for a server, ``QdrantLocal`` for its pure-Python
local mode. ``EdgeQdrantClient`` hands them to this one, which runs each collection on an Edge shard (Qdrant's Rust
engine, in-process), so code written for ``QdrantClient`` (LlamaIndex's ``QdrantVectorStore`` included) runs
unchanged on the engine a server runs.

The folder::

    <path>/posfair_edge.json                     what the folder is (format and version): a local-mode folder has
                                                 meta.json instead, so the two are never mistaken for each other
    <path>/.lock                                 held by the one process that has the store open
    <path>/aliases.json                          alias -> collection
    <path>/collections/<name>/collection.json    the collection as created with qdrant-client, and its metadata
    <path>/collections/<name>/shard/             its Edge shard

Every JSON file is written whole (a temporary file renamed over it). A collection exists once its
``collection.json`` does: a folder without one is a creation cut short, removed when the store is next opened, and a
deleted collection is renamed away in one step before its files are removed.

Every write call returns once Edge has written it to the shard's write-ahead log, so it survives the process being
killed; ``flush`` also writes the segments themselves. Edge builds HNSW indexes only when asked: call ``optimize``
after a bulk load (or open the store with ``auto_optimize=True`` to optimize after every write, as a server would in
the background).
"""

from __future__ import annotations

import atexit
import errno
import functools
import itertools
import json
import logging
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, NamedTuple, Optional, TypeVar, Union

import numpy as np
from pydantic_core import to_jsonable_python
from qdrant_client.client_base import QdrantBase
from qdrant_client.http import models as rest

try:
    import qdrant_edge as edge
except ImportError as missing:  # an optional engine: say what to install
    raise ImportError(
        "EdgeQdrantClient runs Qdrant Edge in-process and needs qdrant-edge-py: pip install 'qdrant-edge-py==0.9.0'"
    ) from missing

from posfair_llamaindex.errors import (
    EdgeClosedError,
    EdgeCollectionNotFoundError,
    EdgeEngineError,
    EdgeRequestError,
    EdgeStoreLockedError,
    EdgeStoreReadOnlyError,
    EdgeStoreVersionError,
    NotAnEdgeStoreError,
)
from posfair_llamaindex.qdrant.edge_translate import (
    QDRANT_OPTIMIZER_DEFAULTS,
    EdgeUnsupportedError,
    QueryTranslator,
    edge_config,
    edge_filter,
    edge_id,
    edge_payload_schema,
    edge_point,
    edge_search_params,
    edge_vector_struct,
    edge_with_payload,
    edge_with_vectors,
    hnsw_values,
    merged_diff,
    point_id_from_edge,
    record_from_edge,
    schema_type_from_edge,
    scored_point_from_edge,
)

__all__ = [
    "MARKER_FILE",
    "STORE_FORMAT",
    "STORE_VERSION",
    "EdgeBackend",
    "EdgeClosedError",
    "EdgeCollectionNotFoundError",
    "EdgeEngineError",
    "EdgeRequestError",
    "EdgeSettings",
    "EdgeStoreLockedError",
    "EdgeStoreReadOnlyError",
    "EdgeStoreVersionError",
    "NotAnEdgeStoreError",
    "is_edge_store",
]

logger = logging.getLogger(__name__)

MARKER_FILE = "posfair_edge.json"
STORE_FORMAT = "posfair-llamaindex-qdrant-edge"
STORE_VERSION = 1
COLLECTION_FILE = "collection.json"
COLLECTIONS_DIR = "collections"
SHARD_DIR = "shard"
ALIASES_FILE = "aliases.json"
LOCK_FILE = ".lock"
# qdrant-client local mode's files, to name such a folder when it is opened here by mistake
LOCAL_MODE_FILES = ("meta.json", "collection")
# characters a server refuses in collection names (qdrant-client's local mode refuses the same)
INVALID_NAME_CHARS = ("<", ">", ":", '"', "/", "\\", "|", "?", "*", "\0", "\x1f")

T = TypeVar("T")


# ---------------------------------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class EdgeSettings:
    """How this process's Edge store indexes and searches.

    ``hnsw_config`` and ``optimizers_config`` are the defaults of the collections created here (what a
    ``create_collection`` call sets wins, field by field; unset fields keep Qdrant's defaults: m 16, ef_construct 100,
    full_scan_threshold 10000 KB, indexing_threshold 10000 KB). ``max_search_threads`` sizes each shard's search pool
    (None: Edge's choice, from the CPU count). ``auto_optimize`` runs the optimizer after every write call, building
    HNSW as soon as a segment passes the indexing threshold, as a server does in the background; left False, indexes
    are built by ``optimize`` only, once, after the points are in. Every write is in the shard's write-ahead log when
    its call returns, which a killed process does not lose; ``flush_writes`` also flushes the shard to disk after
    every write call (for a machine that loses power; tens of milliseconds a call).
    """

    hnsw_config: Optional[rest.HnswConfigDiff] = None
    optimizers_config: Optional[rest.OptimizersConfigDiff] = None
    max_search_threads: Optional[int] = None
    auto_optimize: bool = False
    flush_writes: bool = False

    def __post_init__(self) -> None:
        if self.hnsw_config is not None and not isinstance(self.hnsw_config, rest.HnswConfigDiff):
            raise TypeError(f"hnsw_config must be a models.HnswConfigDiff, got {type(self.hnsw_config).__name__}")
        if self.optimizers_config is not None and not isinstance(self.optimizers_config, rest.OptimizersConfigDiff):
            raise TypeError(
                f"optimizers_config must be a models.OptimizersConfigDiff, got {type(self.optimizers_config).__name__}"
            )
        threads = self.max_search_threads
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise ValueError(f"max_search_threads must be an int >= 1 or None, got {threads!r}")


# ---------------------------------------------------------------------------------------------------- files


def _write_json(path: Path, data: Any) -> None:
    """Write ``data`` as JSON so that ``path`` holds either the old or the new content, whatever happens."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    with open(temporary, "w", encoding="utf-8") as file:
        json.dump(data, file, indent=2, sort_keys=True)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
    _fsync_folder(path.parent)


def _fsync_folder(folder: Path) -> None:
    """Make a rename in ``folder`` durable (POSIX only: Windows has no folder handles to sync)."""
    if os.name != "posix":
        return
    handle = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def _read_json(path: Path, what: str) -> Any:
    try:
        with open(path, encoding="utf-8") as file:
            return json.load(file)
    except json.JSONDecodeError as error:
        raise NotAnEdgeStoreError(f"{what} {path} is not valid JSON ({error})") from None


def is_edge_store(path: Union[str, os.PathLike]) -> bool:
    """True when ``path`` is a folder written by ``EdgeQdrantClient`` (it has the store's marker file)."""
    return (Path(path) / MARKER_FILE).is_file()


def _edge_version() -> str:
    try:
        return version("qdrant-edge-py")
    except PackageNotFoundError:  # an unpackaged build of the bindings
        return "unknown"


def _check_new_name(name: str) -> None:
    if not isinstance(name, str):
        raise TypeError(f"a collection name must be a str, got {type(name).__name__}")
    for char in INVALID_NAME_CHARS:
        if char in name:
            raise ValueError(f"Collection name cannot contain {char!r} char")
    if name in ("", ".", "..") or name.startswith("."):
        raise ValueError(f"Collection name {name!r} is not allowed (empty, or starting with '.')")
    if len(name) > 255:
        raise ValueError("Collection name must be at most 255 characters long")


# ---------------------------------------------------------------------------------------------------- engine errors


def _engine_error(call: str, collection: str, error: Exception) -> Exception:
    message = str(error)
    where = f"{call} on collection {collection!r}"
    if "WouldBlock" in message:
        return EdgeStoreLockedError(f"{where}: its Edge shard is open in another process ({message})")
    if message.startswith("Service runtime error") or "internal error" in message.lower():
        return EdgeEngineError(f"{where}: Qdrant Edge failed: {message}")
    return EdgeRequestError(f"{where}: {message}")


@contextmanager
def _engine(call: str, collection: str):
    """Edge's own exceptions (plain ``Exception``s) as :class:`EdgeRequestError` / :class:`EdgeEngineError`."""
    try:
        yield
    except EdgeUnsupportedError:
        raise
    except Exception as error:
        raise _engine_error(call, collection, error) from error


def _locked(method: Callable[..., T]) -> Callable[..., T]:
    """Run the method under the backend's lock: one call at a time reaches the shards and the folder."""

    @functools.wraps(method)
    def run(self: EdgeBackend, *args: Any, **kwargs: Any) -> T:
        with self._lock:
            self._check_open()
            return method(self, *args, **kwargs)

    return run


def _completed() -> rest.UpdateResult:
    return rest.UpdateResult(operation_id=0, status=rest.UpdateStatus.COMPLETED)


def _refuse(call: str, **options: Any) -> None:
    """Refuse server-only options that were given (shard keys above all: Edge is one shard)."""
    for name, value in options.items():
        if value is not None:
            raise EdgeUnsupportedError(call, f"{name}={value!r}", "an Edge collection is a single shard")


def _check_limit(call: str, limit: Any, name: str = "limit") -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"{call}: {name} value {limit!r} is invalid. Must be 1 or larger.")


def _chunks(items: Iterable[T], size: int) -> Iterable[list[T]]:
    iterator = iter(items)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk


# ---------------------------------------------------------------------------------------------------- the backend


@dataclass
class _Collection:
    """A collection: its folder, its configuration as created, and its shard once opened."""

    name: str
    folder: Path
    config: rest.CreateCollection
    shard: Optional[edge.EdgeShard] = field(default=None, repr=False)

    @property
    def shard_path(self) -> Path:
        return self.folder / SHARD_DIR


class EdgeBackend(QdrantBase):
    """qdrant-client's backend interface on an Edge store: one shard per collection, all in one folder.

    One process opens a folder at a time (a second one gets :class:`EdgeStoreLockedError`); in one process,
    :meth:`open` shares one backend per folder between all the clients on it (the sync and the async client of
    LlamaIndex's store, say), and the last ``close`` closes it.
    """

    _open: dict[str, EdgeBackend] = {}
    _registry_lock = threading.Lock()

    @classmethod
    def open(cls, path: Union[str, os.PathLike], settings: Optional[EdgeSettings] = None) -> EdgeBackend:
        """The backend of the store at ``path`` (created when the folder is new or empty), shared in this process."""
        settings = settings or EdgeSettings()
        key = os.path.realpath(os.fspath(path))
        with cls._registry_lock:
            backend = cls._open.get(key)
            if backend is not None and not backend.closed:
                if backend.settings != settings:
                    raise ValueError(
                        f"the Edge store {key} is already open in this process with other settings "
                        f"({backend.settings}); open it with the same ones, or close the other clients first"
                    )
                backend._users += 1
                return backend
            backend = cls(key, settings)
            cls._open[key] = backend
            return backend

    def __init__(self, path: str, settings: EdgeSettings) -> None:
        super().__init__()
        self.location = path  # where the client points, for messages (as QdrantLocal.location)
        self.path = Path(path)
        self.settings = settings
        self._lock = threading.RLock()
        self._users = 1
        self._closed = True
        self._lock_file: Any = None
        self._collections: dict[str, _Collection] = {}
        self._aliases: dict[str, str] = {}
        self._open_store()
        self._closed = False

    # ------------------------------------------------------------------ opening and closing
    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise EdgeClosedError(f"the Edge store {self.path} is closed; open a new EdgeQdrantClient on it")

    def _open_store(self) -> None:
        path = self.path
        if path.exists() and not path.is_dir():
            raise NotAnEdgeStoreError(f"{path} is a file; an Edge store is a folder")
        if not path.exists() or not any(path.iterdir()):
            self._create_store()
        elif not (path / MARKER_FILE).is_file():
            raise NotAnEdgeStoreError(self._not_a_store(path))
        self._check_marker()
        if not os.access(path, os.W_OK) or not os.access(path / COLLECTIONS_DIR, os.W_OK):
            raise EdgeStoreReadOnlyError(
                f"the Edge store {path} is read-only; Qdrant Edge writes to its folder even to read it (the "
                "write-ahead log and the lock), so give it a writable folder (copy the store somewhere writable)"
            )
        self._take_lock()
        try:
            self._load_collections()
        except BaseException:
            self._release_lock()
            raise

    @staticmethod
    def _not_a_store(path: Path) -> str:
        if all((path / name).exists() for name in LOCAL_MODE_FILES):
            return (
                f"{path} was written by qdrant-client's local mode (it has meta.json and collection/), not by "
                "EdgeQdrantClient: open it with QdrantClient(path=...), or give EdgeQdrantClient a new or empty folder"
            )
        return (
            f"{path} is not an Edge store: it holds files but no {MARKER_FILE}. Give EdgeQdrantClient a new or "
            "empty folder, or the folder of a store it created"
        )

    def _create_store(self) -> None:
        try:
            (self.path / COLLECTIONS_DIR).mkdir(parents=True, exist_ok=True)
            marker = {"format": STORE_FORMAT, "version": STORE_VERSION, "qdrant_edge": _edge_version()}
            _write_json(self.path / MARKER_FILE, marker)
        except PermissionError as error:
            raise EdgeStoreReadOnlyError(
                f"cannot create an Edge store at {self.path}: its folder is not writable ({error})"
            ) from None
        except OSError as error:
            if error.errno == errno.EROFS:
                raise EdgeStoreReadOnlyError(
                    f"cannot create an Edge store at {self.path}: the file system is read-only"
                ) from None
            raise

    def _check_marker(self) -> None:
        marker = _read_json(self.path / MARKER_FILE, "the Edge store marker")
        if not isinstance(marker, dict) or marker.get("format") != STORE_FORMAT:
            raise NotAnEdgeStoreError(
                f"{self.path / MARKER_FILE} does not describe an Edge store of posfair_llamaindex (format "
                f"{marker.get('format') if isinstance(marker, dict) else None!r}, expected {STORE_FORMAT!r})"
            )
        found = marker.get("version")
        if not isinstance(found, int) or found > STORE_VERSION:
            raise EdgeStoreVersionError(
                f"the Edge store {self.path} has format version {found!r}; this posfair_llamaindex reads version "
                f"{STORE_VERSION} and below: upgrade posfair_llamaindex to open it"
            )
        if not (self.path / COLLECTIONS_DIR).is_dir():
            raise NotAnEdgeStoreError(f"the Edge store {self.path} has no {COLLECTIONS_DIR}/ folder; it is damaged")

    def _take_lock(self) -> None:
        import portalocker  # qdrant-client's own dependency; imported late, as qdrant-client does

        lock_path = self.path / LOCK_FILE
        handle = open(lock_path, "a+", encoding="utf-8")  # noqa: SIM115 (held open while the store is)
        try:
            portalocker.lock(handle, portalocker.LockFlags.EXCLUSIVE | portalocker.LockFlags.NON_BLOCKING)
        except portalocker.exceptions.LockException:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise EdgeStoreLockedError(
                f"the Edge store {self.path} is open in another process (pid {holder}); an Edge store serves one "
                "process at a time: close the other client, or use a Qdrant server for concurrent access"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        self._lock_file = handle

    def _release_lock(self) -> None:
        handle, self._lock_file = self._lock_file, None
        if handle is None or handle.closed:
            return
        try:
            import portalocker

            portalocker.unlock(handle)
        except Exception:  # at interpreter exit the module may be gone; closing the file releases the lock anyway
            pass
        handle.close()

    def _load_collections(self) -> None:
        folder = self.path / COLLECTIONS_DIR
        for entry in sorted(folder.iterdir()):
            if not entry.is_dir():
                continue
            if entry.name.startswith("."):  # a deletion cut short
                logger.warning("removing %s, left by a deletion that was cut short", entry)
                shutil.rmtree(entry, ignore_errors=True)
                continue
            config_path = entry / COLLECTION_FILE
            if not config_path.is_file():
                logger.warning("removing %s: its creation was cut short (it has no %s)", entry, COLLECTION_FILE)
                shutil.rmtree(entry, ignore_errors=True)
                continue
            stored = _read_json(config_path, "the collection file")
            config = rest.CreateCollection.model_validate(stored["config"])
            self._collections[entry.name] = _Collection(name=entry.name, folder=entry, config=config)
        aliases_path = self.path / ALIASES_FILE
        if aliases_path.is_file():
            self._aliases = dict(_read_json(aliases_path, "the aliases file"))

    def close(self, **kwargs: Any) -> None:
        """Release this user of the backend; the last one flushes and closes every shard and unlocks the folder."""
        with self._registry_lock, self._lock:
            if self._closed:
                return
            self._users -= 1
            if self._users == 0:
                self._shut()

    def _shut(self) -> None:
        """Flush and close every shard, unlock the folder, leave the registry (the caller holds both locks)."""
        try:
            for collection in self._collections.values():
                self._close_shard(collection)
        finally:
            self._closed = True
            self._release_lock()
            if self._open.get(str(self.path)) is self:
                del self._open[str(self.path)]

    @classmethod
    def _shut_all(cls) -> None:
        """At interpreter exit: close the stores still open (every write is already in their logs; this flushes)."""
        with cls._registry_lock:
            for backend in list(cls._open.values()):
                with backend._lock:
                    if not backend._closed:
                        try:
                            backend._shut()
                        except Exception as error:  # at exit, one store's failure must not keep the others open
                            logger.warning("could not close the Edge store %s at exit: %s", backend.path, error)

    def _close_shard(self, collection: _Collection) -> None:
        shard, collection.shard = collection.shard, None
        if shard is None:
            return
        with _engine("close", collection.name):
            shard.flush()
            shard.close()

    # ------------------------------------------------------------------ collections, shards
    def _resolve(self, name: str) -> str:
        return name if name in self._collections else self._aliases.get(name, name)

    def _collection(self, name: str) -> _Collection:
        collection = self._collections.get(self._resolve(name))
        if collection is None:
            raise EdgeCollectionNotFoundError(f"Collection {name} not found")
        return collection

    def _shard(self, collection: _Collection) -> edge.EdgeShard:
        """The collection's shard, opened on first use with its stored settings and this process's search pool."""
        if collection.shard is None:
            config = edge_config(collection.config, "load", self.settings.max_search_threads)
            with _engine("load", collection.name):
                collection.shard = edge.EdgeShard.load(str(collection.shard_path), config)
        return collection.shard

    def _write_collection_file(self, collection: _Collection) -> None:
        data = {"name": collection.name, "config": collection.config.model_dump(mode="json")}
        _write_json(collection.folder / COLLECTION_FILE, data)

    def _update(self, call: str, collection: _Collection, operations: Sequence[Any]) -> rest.UpdateResult:
        """Apply Edge update operations; each is in the write-ahead log when ``update`` returns."""
        shard = self._shard(collection)
        with _engine(call, collection.name):
            for operation in operations:
                shard.update(operation)
            if self.settings.auto_optimize:
                shard.optimize()
            if self.settings.flush_writes:
                shard.flush()
        return _completed()

    def _lookup_vector(
        self, call: str, collection: _Collection, point_id: Any, using: Optional[str], lookup_from: Any
    ) -> Any:
        """The stored vector of a point named in a query (Edge's queries take vectors, not ids)."""
        source = collection if lookup_from is None else self._collection(lookup_from.collection)
        name = using
        if lookup_from is not None and lookup_from.vector is not None:
            name = lookup_from.vector
        with _engine(call, source.name):
            records = self._shard(source).retrieve([point_id], False, [name] if name else True)
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
        shard = self._shard(collection)
        with _engine("optimize", collection.name):
            return bool(shard.optimize())

    @_locked
    def flush(self, collection_name: Optional[str] = None) -> None:
        """Write the segments of one collection (or of every open one) to disk; the log already holds every write."""
        names = [collection_name] if collection_name is not None else list(self._collections)
        for name in names:
            collection = self._collection(name)
            if collection.shard is not None:
                with _engine("flush", collection.name):
                    collection.shard.flush()

    # ------------------------------------------------------------------ collections
    @_locked
    def get_collections(self, **kwargs: Any) -> rest.CollectionsResponse:
        return rest.CollectionsResponse(
            collections=[rest.CollectionDescription(name=name) for name in sorted(self._collections)]
        )

    @_locked
    def collection_exists(self, collection_name: str, **kwargs: Any) -> bool:
        return self._resolve(collection_name) in self._collections

    @_locked
    def get_collection(self, collection_name: str, **kwargs: Any) -> rest.CollectionInfo:
        collection = self._collection(collection_name)
        shard = self._shard(collection)
        with _engine("get_collection", collection.name):
            info = shard.info()
        config = collection.config
        schema = {
            key: rest.PayloadIndexInfo(data_type=schema_type_from_edge(index.data_type), points=index.points)
            for key, index in info.payload_schema.items()
        }
        optimizers = dict(QDRANT_OPTIMIZER_DEFAULTS)
        if config.optimizers_config is not None:
            optimizers.update(config.optimizers_config.model_dump(exclude_none=True))
        return rest.CollectionInfo(
            status=rest.CollectionStatus.GREEN,
            optimizer_status=rest.OptimizersStatusOneOf.OK,
            indexed_vectors_count=info.indexed_vectors_count,
            points_count=info.points_count,
            segments_count=info.segments_count,
            payload_schema=schema,
            config=rest.CollectionConfig(
                params=rest.CollectionParams(
                    vectors=config.vectors.model_copy(deep=True)
                    if isinstance(config.vectors, rest.VectorParams)
                    else {name: params.model_copy(deep=True) for name, params in (config.vectors or {}).items()},
                    sparse_vectors=None
                    if config.sparse_vectors is None
                    else {name: params.model_copy(deep=True) for name, params in config.sparse_vectors.items()},
                    shard_number=1,
                    replication_factor=1,
                    write_consistency_factor=1,
                    on_disk_payload=config.on_disk_payload,
                    payload=config.payload,
                    id_tracker=config.id_tracker,
                ),
                hnsw_config=rest.HnswConfig(**hnsw_values(config.hnsw_config)),
                optimizer_config=rest.OptimizersConfig(flush_interval_sec=5, **optimizers),
                wal_config=rest.WalConfig(wal_capacity_mb=32, wal_segments_ahead=0),
                quantization_config=config.quantization_config,
                metadata=None if config.metadata is None else json.loads(json.dumps(config.metadata)),
            ),
        )

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
        _check_new_name(collection_name)
        self._refuse_cluster(call, shard_number, sharding_method, replication_factor, write_consistency_factor)
        if wal_config is not None and wal_config.model_dump(exclude_none=True):
            raise EdgeUnsupportedError(call, "wal_config", "qdrant-edge-py keeps Edge's write-ahead log settings")
        if strict_mode_config is not None:
            raise EdgeUnsupportedError(call, "strict_mode_config", "strict mode limits a server's clients")
        if kwargs.get("init_from") is not None:
            raise EdgeUnsupportedError(call, "init_from")
        if collection_name in self._collections:
            raise ValueError(f"Collection {collection_name} already exists")
        if collection_name in self._aliases:
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
        folder = self.path / COLLECTIONS_DIR / collection_name
        if folder.exists():  # a creation cut short in this process: nothing in it is a collection yet
            shutil.rmtree(folder)
        collection = _Collection(name=collection_name, folder=folder, config=config)
        folder.mkdir(parents=True)
        try:
            with _engine(call, collection_name):
                collection.shard = edge.EdgeShard.create(str(collection.shard_path), shard_config)
            self._write_collection_file(collection)  # from here on the collection exists
        except BaseException:
            if collection.shard is not None:
                collection.shard.close()
            shutil.rmtree(folder, ignore_errors=True)
            raise
        self._collections[collection_name] = collection
        return True

    @staticmethod
    def _refuse_cluster(call: str, shards: Any, method: Any, replication: Any, write_consistency: Any) -> None:
        if shards not in (None, 1):
            raise EdgeUnsupportedError(call, f"shard_number={shards}", "an Edge collection is a single shard")
        if method is not None and method != rest.ShardingMethod.AUTO:
            raise EdgeUnsupportedError(call, f"sharding_method={method}", "custom sharding needs shard keys")
        for name, value in (("replication_factor", replication), ("write_consistency_factor", write_consistency)):
            if value not in (None, 1):
                raise EdgeUnsupportedError(call, f"{name}={value}", "Edge runs on one machine, without replicas")

    def recreate_collection(self, collection_name: str, **kwargs: Any) -> bool:
        with self._lock:
            self.delete_collection(collection_name)
            return self.create_collection(collection_name, **kwargs)

    @_locked
    def delete_collection(self, collection_name: str, **kwargs: Any) -> bool:
        collection = self._collections.pop(collection_name, None)
        if collection is None:
            return False
        aliases = {alias: name for alias, name in self._aliases.items() if name != collection_name}
        if aliases != self._aliases:
            self._save_aliases(aliases)
        try:
            self._close_shard(collection)
        finally:
            trash = collection.folder.with_name(f".deleted-{uuid.uuid4().hex}")
            os.replace(collection.folder, trash)  # the collection is gone in one step
            _fsync_folder(trash.parent)
            shutil.rmtree(trash, ignore_errors=True)
        return True

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
        engine_changed = "optimizers_config" in updates or "hnsw_config" in updates
        if engine_changed:
            edge_config(new_config, call)  # refuses what Edge cannot take before anything changes
            self._close_shard(collection)  # reopened with the new settings on next use
        collection.config = new_config
        self._write_collection_file(collection)
        return True

    # ------------------------------------------------------------------ aliases
    def _save_aliases(self, aliases: dict[str, str]) -> None:
        _write_json(self.path / ALIASES_FILE, aliases)
        self._aliases = aliases

    @_locked
    def update_collection_aliases(self, change_aliases_operations: Sequence[Any], **kwargs: Any) -> bool:
        aliases = dict(self._aliases)
        for operation in change_aliases_operations:
            if isinstance(operation, rest.CreateAliasOperation):
                target, alias = operation.create_alias.collection_name, operation.create_alias.alias_name
                if target not in self._collections:
                    raise EdgeCollectionNotFoundError(f"Collection {target} not found")
                if alias in self._collections:
                    raise ValueError(f"Collection {alias} already exists")
                aliases[alias] = target
            elif isinstance(operation, rest.DeleteAliasOperation):
                aliases.pop(operation.delete_alias.alias_name, None)
            elif isinstance(operation, rest.RenameAliasOperation):
                old, new = operation.rename_alias.old_alias_name, operation.rename_alias.new_alias_name
                if old not in aliases:
                    raise ValueError(f"Alias {old} does not exist")
                if new in self._collections:
                    raise ValueError(f"Collection {new} already exists")
                aliases[new] = aliases.pop(old)
            else:
                raise EdgeUnsupportedError("update_collection_aliases", f"operation {type(operation).__name__}")
        self._save_aliases(aliases)
        return True

    @_locked
    def get_collection_aliases(self, collection_name: str, **kwargs: Any) -> rest.CollectionsAliasesResponse:
        return rest.CollectionsAliasesResponse(
            aliases=[
                rest.AliasDescription(alias_name=alias, collection_name=name)
                for alias, name in sorted(self._aliases.items())
                if name == collection_name
            ]
        )

    @_locked
    def get_aliases(self, **kwargs: Any) -> rest.CollectionsAliasesResponse:
        return rest.CollectionsAliasesResponse(
            aliases=[
                rest.AliasDescription(alias_name=alias, collection_name=name)
                for alias, name in sorted(self._aliases.items())
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
        collection.config = new_config
        self._write_collection_file(collection)
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
        collection.config = config.model_copy(update=updates)
        self._write_collection_file(collection)
        return result

    # ------------------------------------------------------------------ reading points
    def _translator(self, call: str, collection: _Collection) -> QueryTranslator:
        def lookup(point_id: Any, using: Optional[str], lookup_from: Any) -> Any:
            return self._lookup_vector(call, collection, point_id, using, lookup_from)

        return QueryTranslator(call, collection.name, lookup)

    def _query_request(
        self,
        call: str,
        collection: _Collection,
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
        _check_limit(call, limit)
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
        shard = self._shard(collection)
        with _engine(call, collection.name):
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
        shard = self._shard(collection)
        with _engine(call, collection.name):
            answers = shard.query_batch(edge.QueryBatchRequest(translated))
        return [rest.QueryResponse(points=[scored_point_from_edge(hit) for hit in hits]) for hits in answers]

    def query_points_groups(self, collection_name: str, *args: Any, **kwargs: Any) -> rest.GroupsResult:
        raise EdgeUnsupportedError("query_points_groups", "grouped queries", "qdrant-edge-py has no query_groups")

    def search_matrix_pairs(self, collection_name: str, *args: Any, **kwargs: Any) -> Any:
        raise EdgeUnsupportedError("search_matrix_pairs", "the search matrix", "qdrant-edge-py has no search_matrix")

    def search_matrix_offsets(self, collection_name: str, *args: Any, **kwargs: Any) -> Any:
        raise EdgeUnsupportedError("search_matrix_offsets", "the search matrix", "qdrant-edge-py has no search_matrix")

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
        _check_limit(call, limit)
        collection = self._collection(collection_name)
        request = edge.ScrollRequest(
            offset=None if offset is None else edge_id(offset, call),
            limit=limit,
            filter=edge_filter(scroll_filter, call),
            with_payload=edge_with_payload(with_payload, call),
            with_vector=edge_with_vectors(with_vectors, call),
            order_by=None if order_by is None else self._translator(call, collection).order_by(order_by),
        )
        shard = self._shard(collection)
        with _engine(call, collection.name):
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
        shard = self._shard(collection)
        with _engine(call, collection.name):
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
        _check_limit(call, limit)
        collection = self._collection(collection_name)
        request = edge.FacetRequest(key, limit=limit, exact=bool(exact), filter=edge_filter(facet_filter, call))
        shard = self._shard(collection)
        with _engine(call, collection.name):
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
        shard = self._shard(collection)
        with _engine(call, collection.name):
            records = shard.retrieve(point_ids, payload, vectors)
        return [record_from_edge(r) for r in records]

    # ------------------------------------------------------------------ writing points
    def _points(self, call: str, points: Any) -> list[edge.Point]:
        if isinstance(points, rest.Batch):
            return [edge_point(p, call) for p in _batch_points(points)]
        return [edge_point(p, call) for p in points]

    def _upsert(
        self, call: str, collection: _Collection, points: list[edge.Point], update_filter: Any, update_mode: Any
    ) -> rest.UpdateResult:
        if not points:  # an empty upload sends nothing, as qdrant-client does
            return _completed()
        mode = None
        if update_mode is not None:
            mode = {
                rest.UpdateMode.UPSERT: edge.UpdateMode.Upsert,
                rest.UpdateMode.INSERT_ONLY: edge.UpdateMode.InsertOnly,
                rest.UpdateMode.UPDATE_ONLY: edge.UpdateMode.UpdateOnly,
            }[rest.UpdateMode(update_mode)]
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
        return self._upsert(call, collection, self._points(call, points), update_filter, update_mode)

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
        for chunk in _chunks(points, max(1, batch_size)):
            self._upsert(call, collection, [edge_point(p, call) for p in chunk], update_filter, update_mode)

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
        rows = _vector_rows(vectors)
        point_ids = ids if ids is not None else (str(uuid.uuid4()) for _ in itertools.count())
        payloads = payload if payload is not None else itertools.repeat(None)
        records = (_Row(i, v, p) for i, v, p in zip(point_ids, rows, payloads, strict=False))
        for chunk in _chunks(records, max(1, batch_size)):
            self._upsert(call, collection, [edge_point(r, call) for r in chunk], update_filter, update_mode)

    def _selector(self, call: str, selector: Any) -> tuple[Optional[list], Optional[edge.Filter]]:
        """(ids, None) or (None, filter) for any qdrant-client points selector."""
        if isinstance(selector, rest.PointIdsList):
            _refuse(call, shard_key=selector.shard_key)
            return [edge_id(i, call) for i in selector.points], None
        if isinstance(selector, rest.FilterSelector):
            _refuse(call, shard_key=selector.shard_key)
            return None, edge_filter(selector.filter, call)
        if isinstance(selector, rest.Filter):
            return None, edge_filter(selector, call)
        if isinstance(selector, (list, tuple)):
            return [edge_id(i, call) for i in selector], None
        raise TypeError(f"{call}: points must be a list of ids, a Filter, PointIdsList or FilterSelector")

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
        ids, selected = self._selector(call, selector)
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
            points = upsert.points if isinstance(upsert, rest.PointsList) else _batch_points(upsert.batch)
            return self._upsert(
                call, self._collection(name), self._points(call, points), upsert.update_filter, upsert.update_mode
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

    # ------------------------------------------------------------------ what a server has and Edge has not
    def info(self) -> rest.VersionInfo:
        return rest.VersionInfo(title="qdrant-edge (posfair_llamaindex EdgeQdrantClient)", version=_edge_version())

    def list_snapshots(self, collection_name: str, **kwargs: Any) -> list[rest.SnapshotDescription]:
        return []

    def list_full_snapshots(self, **kwargs: Any) -> list[rest.SnapshotDescription]:
        return []

    def list_shard_snapshots(self, collection_name: str, shard_id: int, **kwargs: Any) -> list[Any]:
        return []

    def _unsupported(call: str, construct: str, reason: str) -> Callable[..., Any]:  # noqa: N805 (a class-body helper)
        def refuse(self: EdgeBackend, *args: Any, **kwargs: Any) -> Any:
            raise EdgeUnsupportedError(call, construct, reason)

        refuse.__name__ = call
        refuse.__doc__ = f"Refused: {construct} ({reason})."
        return refuse

    _snapshots = "copy the store's folder while no client has it open"
    create_snapshot = _unsupported("create_snapshot", "snapshots", _snapshots)
    delete_snapshot = _unsupported("delete_snapshot", "snapshots", _snapshots)
    recover_snapshot = _unsupported("recover_snapshot", "snapshots", _snapshots)
    create_full_snapshot = _unsupported("create_full_snapshot", "snapshots", _snapshots)
    delete_full_snapshot = _unsupported("delete_full_snapshot", "snapshots", _snapshots)
    create_shard_snapshot = _unsupported("create_shard_snapshot", "snapshots", _snapshots)
    delete_shard_snapshot = _unsupported("delete_shard_snapshot", "snapshots", _snapshots)
    recover_shard_snapshot = _unsupported("recover_shard_snapshot", "snapshots", _snapshots)
    _one_shard = "an Edge collection is a single shard"
    create_shard_key = _unsupported("create_shard_key", "shard keys", _one_shard)
    delete_shard_key = _unsupported("delete_shard_key", "shard keys", _one_shard)
    list_shard_keys = _unsupported("list_shard_keys", "shard keys", _one_shard)
    _no_cluster = "Edge runs in this process, not in a cluster"
    cluster_collection_update = _unsupported("cluster_collection_update", "cluster operations", _no_cluster)
    collection_cluster_info = _unsupported("collection_cluster_info", "cluster information", _no_cluster)
    cluster_status = _unsupported("cluster_status", "cluster status", _no_cluster)
    recover_current_peer = _unsupported("recover_current_peer", "peers", _no_cluster)
    remove_peer = _unsupported("remove_peer", "peers", _no_cluster)
    cluster_telemetry = _unsupported("cluster_telemetry", "cluster telemetry", _no_cluster)
    get_optimizations = _unsupported(
        "get_optimizations", "optimization progress", "Edge optimizes only inside optimize(), which blocks until done"
    )
    del _unsupported, _snapshots, _one_shard, _no_cluster


atexit.register(EdgeBackend._shut_all)


# ---------------------------------------------------------------------------------------------------- batches


class _Row(NamedTuple):
    """One point of a column upload: what ``edge_point`` reads from a ``PointStruct``."""

    id: Any
    vector: Any
    payload: Any


def _batch_points(batch: rest.Batch) -> list[_Row]:
    """A column ``Batch`` (ids, vectors, payloads) as one record per point."""
    vectors = batch.vectors
    count = len(batch.ids)
    if isinstance(vectors, dict):
        rows = [{name: values[i] for name, values in vectors.items()} for i in range(count)]
    else:
        rows = list(vectors)
    payloads = batch.payloads if batch.payloads is not None else [None] * count
    if not len(rows) == len(payloads) == count:
        raise ValueError(f"a Batch needs as many vectors and payloads as ids ({count})")
    return [_Row(i, v, p) for i, v, p in zip(batch.ids, rows, payloads, strict=True)]


def _vector_rows(vectors: Any) -> Iterable[Any]:
    """``upload_collection``'s vectors one point at a time: rows of an array, or of ``{name: array}``."""
    if isinstance(vectors, dict) and any(isinstance(v, np.ndarray) for v in vectors.values()):
        lengths = {len(v) for v in vectors.values()}
        if len(lengths) != 1:
            raise ValueError("each named vector needs the same number of rows")
        (count,) = lengths
        return ({name: values[i] for name, values in vectors.items()} for i in range(count))
    return iter(vectors)
