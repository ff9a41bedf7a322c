"""The Edge store's folder: what is in it, who may open it, and what survives a crash.

qdrant-client's local mode keeps its folder in ``QdrantLocal`` beside the calls; here the folder is on its own, so
the backend's calls never touch a file directly and the rules below live in one place. The folder::

    <path>/posfair_edge.json                     what the folder is (format and version): a local-mode folder has
                                                 meta.json instead, so the two are never mistaken for each other
    <path>/.lock                                 held by the one process that has the store open
    <path>/aliases.json                          alias -> collection
    <path>/collections/<name>/collection.json    the collection as created with qdrant-client, and its metadata
    <path>/collections/<name>/shard/             its Edge shard

Every JSON file is written whole (a temporary file renamed over it). A collection exists once its
``collection.json`` does: a folder without one is a creation cut short, removed when the store is next opened, and a
deleted collection is renamed away in one step before its files are removed.

In one process, every client of a folder shares its :class:`EdgeStore` (:meth:`EdgeStore.open`), so what one writes
the others read at once; the last to release it flushes and closes the shards and unlocks the folder, and so does
the interpreter's exit for stores still open.
"""

from __future__ import annotations

import atexit
import errno
import json
import logging
import os
import shutil
import threading
import uuid
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Optional, Union

from qdrant_client.http import models as rest

from posfair_llamaindex.errors import (
    EdgeCollectionNotFoundError,
    EdgeStoreLockedError,
    EdgeStoreReadOnlyError,
    EdgeStoreVersionError,
    NotAnEdgeStoreError,
)
from posfair_llamaindex.qdrant.edge_binding import edge
from posfair_llamaindex.qdrant.edge_config import edge_config
from posfair_llamaindex.qdrant.edge_errors import engine_errors

__all__ = [
    "ALIASES_FILE",
    "COLLECTIONS_DIR",
    "COLLECTION_FILE",
    "LOCAL_MODE_FILES",
    "LOCK_FILE",
    "MARKER_FILE",
    "SHARD_DIR",
    "STORE_FORMAT",
    "STORE_VERSION",
    "EdgeStoreConfig",
    "EdgeStore",
    "StoredCollection",
    "check_collection_name",
    "edge_version",
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


# ---------------------------------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class EdgeStoreConfig:
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


def edge_version() -> str:
    """The installed qdrant-edge-py's version (written in the marker, answered by ``info``)."""
    try:
        return version("qdrant-edge-py")
    except PackageNotFoundError:  # an unpackaged build of the bindings
        return "unknown"


def check_collection_name(name: str) -> None:
    """Refuse a name a server refuses (a collection's name is also its folder's)."""
    if not isinstance(name, str):
        raise TypeError(f"a collection name must be a str, got {type(name).__name__}")
    for char in INVALID_NAME_CHARS:
        if char in name:
            raise ValueError(f"Collection name cannot contain {char!r} char")
    if name in ("", ".", "..") or name.startswith("."):
        raise ValueError(f"Collection name {name!r} is not allowed (empty, or starting with '.')")
    if len(name) > 255:
        raise ValueError("Collection name must be at most 255 characters long")


# ---------------------------------------------------------------------------------------------------- the store


@dataclass
class StoredCollection:
    """A collection: its folder, its configuration as created, and its shard once opened."""

    name: str
    folder: Path
    config: rest.CreateCollection
    shard: Optional[edge.EdgeShard] = field(default=None, repr=False)

    @property
    def shard_path(self) -> Path:
        return self.folder / SHARD_DIR


class EdgeStore:
    """An open Edge store: its collections (configurations and shards), its aliases, and the folder's lock.

    One process opens a folder at a time (a second one gets :class:`EdgeStoreLockedError`). ``lock`` serialises
    everything that reaches the shards or the files; the backend holds it for each call.
    """

    _open: dict[str, EdgeStore] = {}
    _registry_lock = threading.Lock()

    @classmethod
    def open(cls, path: Union[str, os.PathLike], settings: Optional[EdgeStoreConfig] = None) -> EdgeStore:
        """The store at ``path`` (created when the folder is new or empty), shared in this process; every
        ``open`` is matched by one :meth:`release`."""
        settings = settings or EdgeStoreConfig()
        key = os.path.realpath(os.fspath(path))
        with cls._registry_lock:
            store = cls._open.get(key)
            if store is not None and not store.closed:
                if store.settings != settings:
                    raise ValueError(
                        f"the Edge store {key} is already open in this process with other settings "
                        f"({store.settings}); open it with the same ones, or close the other clients first"
                    )
                store._users += 1
                return store
            store = cls(key, settings)
            cls._open[key] = store
            return store

    def __init__(self, path: str, settings: EdgeStoreConfig) -> None:
        self.location = path  # where the clients point, for messages (as QdrantLocal.location)
        self.path = Path(path)
        self.settings = settings
        self.lock = threading.RLock()
        self.collections: dict[str, StoredCollection] = {}
        self.aliases: dict[str, str] = {}
        self._users = 1
        self._closed = True
        self._lock_file: Any = None
        self._open_folder()
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    # ------------------------------------------------------------------ opening
    def _open_folder(self) -> None:
        path = self.path
        if path.exists() and not path.is_dir():
            raise NotAnEdgeStoreError(f"{path} is a file; an Edge store is a folder")
        if not path.exists() or not any(path.iterdir()):
            self._create_folder()
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

    def _create_folder(self) -> None:
        try:
            (self.path / COLLECTIONS_DIR).mkdir(parents=True, exist_ok=True)
            marker = {"format": STORE_FORMAT, "version": STORE_VERSION, "qdrant_edge": edge_version()}
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
            self.collections[entry.name] = StoredCollection(name=entry.name, folder=entry, config=config)
        aliases_path = self.path / ALIASES_FILE
        if aliases_path.is_file():
            self.aliases = dict(_read_json(aliases_path, "the aliases file"))

    # ------------------------------------------------------------------ closing
    def release(self) -> None:
        """One user of the store is done; the last one flushes and closes every shard and unlocks the folder."""
        with self._registry_lock, self.lock:
            if self._closed:
                return
            self._users -= 1
            if self._users == 0:
                self._shut()

    def _shut(self) -> None:
        """Flush and close every shard, unlock the folder, leave the registry (the caller holds both locks)."""
        try:
            for collection in self.collections.values():
                self.close_shard(collection)
        finally:
            self._closed = True
            self._release_lock()
            if self._open.get(str(self.path)) is self:
                del self._open[str(self.path)]

    @classmethod
    def shut_all(cls) -> None:
        """At interpreter exit: close the stores still open (every write is already in their logs; this flushes)."""
        with cls._registry_lock:
            for store in list(cls._open.values()):
                with store.lock:
                    if not store._closed:
                        try:
                            store._shut()
                        except Exception as error:  # at exit, one store's failure must not keep the others open
                            logger.warning("could not close the Edge store %s at exit: %s", store.path, error)

    # ------------------------------------------------------------------ collections and their shards
    def resolve(self, name: str) -> str:
        """The collection a name means: itself, or the collection it is an alias of."""
        return name if name in self.collections else self.aliases.get(name, name)

    def collection(self, name: str) -> StoredCollection:
        collection = self.collections.get(self.resolve(name))
        if collection is None:
            raise EdgeCollectionNotFoundError(f"Collection {name} not found")
        return collection

    def shard(self, collection: StoredCollection) -> edge.EdgeShard:
        """The collection's shard, opened on first use with its stored settings and this process's search pool."""
        if collection.shard is None:
            config = edge_config(collection.config, "load", self.settings.max_search_threads)
            with engine_errors("load", collection.name):
                collection.shard = edge.EdgeShard.load(str(collection.shard_path), config)
        return collection.shard

    def close_shard(self, collection: StoredCollection) -> None:
        """Flush and close the shard if open (it reopens on next use, with the collection's settings then)."""
        shard, collection.shard = collection.shard, None
        if shard is None:
            return
        with engine_errors("close", collection.name):
            shard.flush()
            shard.close()

    def create(self, name: str, config: rest.CreateCollection, shard_config: edge.EdgeConfig) -> StoredCollection:
        """A new collection: its shard first, then its ``collection.json``, from which on it exists."""
        folder = self.path / COLLECTIONS_DIR / name
        if folder.exists():  # a creation cut short in this process: nothing in it is a collection yet
            shutil.rmtree(folder)
        collection = StoredCollection(name=name, folder=folder, config=config)
        folder.mkdir(parents=True)
        try:
            with engine_errors("create_collection", name):
                collection.shard = edge.EdgeShard.create(str(collection.shard_path), shard_config)
            self._write_collection_file(collection)
        except BaseException:
            if collection.shard is not None:
                collection.shard.close()
            shutil.rmtree(folder, ignore_errors=True)
            raise
        self.collections[name] = collection
        return collection

    def save_config(self, collection: StoredCollection, config: rest.CreateCollection) -> None:
        """Keep ``config`` as the collection's configuration, in memory and in its ``collection.json``."""
        collection.config = config
        self._write_collection_file(collection)

    def _write_collection_file(self, collection: StoredCollection) -> None:
        data = {"name": collection.name, "config": collection.config.model_dump(mode="json")}
        _write_json(collection.folder / COLLECTION_FILE, data)

    def delete(self, name: str) -> bool:
        """Remove a collection (and the aliases of it) in one step: its folder is renamed away, then removed."""
        collection = self.collections.pop(name, None)
        if collection is None:
            return False
        aliases = {alias: target for alias, target in self.aliases.items() if target != name}
        if aliases != self.aliases:
            self.save_aliases(aliases)
        try:
            self.close_shard(collection)
        finally:
            trash = collection.folder.with_name(f".deleted-{uuid.uuid4().hex}")
            os.replace(collection.folder, trash)  # the collection is gone in one step
            _fsync_folder(trash.parent)
            shutil.rmtree(trash, ignore_errors=True)
        return True

    # ------------------------------------------------------------------ aliases
    def save_aliases(self, aliases: dict[str, str]) -> None:
        """Make ``aliases`` the store's aliases, in memory and in ``aliases.json``."""
        _write_json(self.path / ALIASES_FILE, aliases)
        self.aliases = aliases


atexit.register(EdgeStore.shut_all)
