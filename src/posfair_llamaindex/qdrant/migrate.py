"""Copy collections, with their configuration and tag, from one Qdrant client to another.

The way out of qdrant-client's local mode (a slow Python engine) into Qdrant Edge, and from an embedded folder
to a server: every point is copied with its vectors and payload, the collection's vectors, sparse vectors,
metadata (the posfair tag) and payload indexes come along, and the copy is checked by count and by ids. A run that
stopped midway is resumed by running it again: points already in the target are not written twice. A target
collection that is not an earlier copy of the same source (another tag or vectors, or ids the source lacks) is
refused before anything is written.

``vector_storage`` (``posfair migrate --vector-storage int8``) moves tagged collections to another storage on the
way: the copy is created with every dense vector stored that way (``vector_storage.restore_collection``) and its tag
records it; the vectors themselves are copied as they are.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from qdrant_client import QdrantClient
from qdrant_client.http import models as rest
from tqdm.auto import tqdm

from posfair_llamaindex.errors import CopyRefusedError
from posfair_llamaindex.qdrant.vector_storage import StorageChoice, restore_collection

METADATA_KEY = "posfair"  # collection.METADATA_KEY (importing collection here would load the store's code)


@dataclass
class CopyReport:
    collection: str
    points: int  # points in the source, and now in the target
    copied: int  # written by this run (the rest were there from an earlier run)
    created: bool  # the target collection was created by this run


def copy_collections(
    source: QdrantClient,
    target: QdrantClient,
    names: Optional[Sequence[str]] = None,
    *,
    batch_size: int = 256,
    show_progress: bool = True,
    vector_storage: StorageChoice = None,
) -> list[CopyReport]:
    """Copy ``names`` (every collection when None) from ``source`` to ``target``; see the module docstring.

    A target with ``optimize`` (Qdrant Edge) builds each collection's indexes once, after its points are in.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    available = sorted(c.name for c in source.get_collections().collections)
    wanted = list(available if names is None else names)
    missing = [name for name in wanted if name not in available]
    if missing:
        raise CopyRefusedError(f"the source has no collection {missing}; it has {available}")
    configs = {name: _target_config(source.get_collection(name), name, vector_storage) for name in wanted}
    for name in wanted:  # every refusal before the first write
        if target.collection_exists(name):
            _check_resumable(source, target, name, configs[name][1])
    return [_copy_one(source, target, name, batch_size, show_progress, configs[name]) for name in wanted]


def _target_config(info: Any, name: str, vector_storage: StorageChoice) -> tuple[Any, Optional[dict]]:
    """The copy's dense vectors config and metadata: the source's, or with its vectors stored as asked."""
    vectors, metadata = info.config.params.vectors, info.config.metadata
    if vector_storage is None:
        return vectors, metadata
    tag = (metadata or {}).get(METADATA_KEY)
    if not isinstance(tag, dict):
        raise CopyRefusedError(
            f"--vector-storage changes how a posfair collection stores its vectors and records it in its tag; "
            f"{name!r} has no posfair tag. Copy it without --vector-storage; nothing was written"
        )
    try:
        vectors, tag = restore_collection(vectors, tag, vector_storage)
    except (TypeError, ValueError) as error:
        raise CopyRefusedError(f"{name!r}: {error}; nothing was written") from None
    return vectors, {**metadata, METADATA_KEY: tag}


def _copy_one(
    source: QdrantClient, target: QdrantClient, name: str, batch_size: int, show_progress: bool, config: tuple
):
    info = source.get_collection(name)
    created = not target.collection_exists(name)
    if created:
        params = info.config.params
        target.create_collection(
            name,
            vectors_config=config[0],
            sparse_vectors_config=params.sparse_vectors,
            metadata=config[1],
        )
        for field, schema in (info.payload_schema or {}).items():
            target.create_payload_index(name, field, schema.data_type)
    total = source.count(name, exact=True).count
    copied = 0
    with tqdm(total=total, desc=f"copy {name}", unit="point", disable=not show_progress) as bar:
        for records in _scroll(source, name, batch_size, with_vectors=True):
            ids = [record.id for record in records]
            present = {point.id for point in target.retrieve(name, ids, with_payload=False, with_vectors=False)}
            todo = [r for r in records if r.id not in present]
            if todo:
                points = [rest.PointStruct(id=r.id, vector=r.vector, payload=r.payload) for r in todo]
                target.upsert(name, points, wait=True)
                copied += len(todo)
            bar.update(len(records))
    _verify(source, target, name, batch_size)
    if hasattr(target, "optimize"):
        target.optimize(name)
    return CopyReport(collection=name, points=total, copied=copied, created=created)


def _check_resumable(source: QdrantClient, target: QdrantClient, name: str, metadata: Optional[dict]) -> None:
    """An existing target must be an earlier copy of this source: the same tag (``metadata``, the copy's), vectors
    and a subset of its ids."""
    mine, theirs = source.get_collection(name).config, target.get_collection(name).config
    if (metadata or {}) != (theirs.metadata or {}):
        raise CopyRefusedError(
            f"the target already has a collection {name!r} with another tag or metadata (source "
            f"{metadata!r}, target {theirs.metadata!r}); nothing was written. Copy into another target, or "
            "delete that collection first"
        )
    if _vectors(mine.params) != _vectors(theirs.params):
        raise CopyRefusedError(
            f"the target's collection {name!r} stores other vectors ({_vectors(theirs.params)}) than the source's "
            f"({_vectors(mine.params)}); nothing was written"
        )
    strangers = _ids(target, name) - _ids(source, name)
    if strangers:
        shown = sorted(map(str, strangers))[:5]
        raise CopyRefusedError(
            f"the target's collection {name!r} holds {len(strangers)} points the source does not (e.g. {shown}): it "
            "is not an earlier copy of this source, and a copy would mix the two; nothing was written"
        )


def _verify(source: QdrantClient, target: QdrantClient, name: str, batch_size: int) -> None:
    expected, found = source.count(name, exact=True).count, target.count(name, exact=True).count
    if expected != found or _ids(source, name, batch_size) != _ids(target, name, batch_size):
        raise CopyRefusedError(
            f"the copy of {name!r} does not match its source ({found} points against {expected}); the source was "
            "left as it was. Was it written to during the copy? Run the copy again to finish it"
        )


def _vectors(params: rest.CollectionParams) -> dict[str, Any]:
    """The parts of a collection's vectors that decide what its points mean (not how they are indexed)."""
    dense = params.vectors
    named = dense if isinstance(dense, dict) else {"": dense}
    shape = {
        name: (p.size, str(p.distance), p.multivector_config is not None and str(p.multivector_config.comparator))
        for name, p in (named or {}).items()
    }
    shape.update({f"sparse:{name}": "sparse" for name in (params.sparse_vectors or {})})
    return shape


def _ids(client: QdrantClient, name: str, batch_size: int = 1024) -> set:
    return {record.id for records in _scroll(client, name, batch_size, with_vectors=False) for record in records}


def _scroll(client: QdrantClient, name: str, batch_size: int, *, with_vectors: bool) -> Iterator[list]:
    offset = None
    while True:
        records, offset = client.scroll(
            name, limit=batch_size, offset=offset, with_payload=with_vectors, with_vectors=with_vectors
        )
        if records:
            yield records
        if offset is None:
            return
