"""Turn a collection written by LlamaIndex's ``QdrantVectorStore`` into a tagged posfair collection.

The node text is read from each point's payload (LlamaIndex stores the whole node there), so no source file
is needed. Before anything is written, a sample of at least 32 nodes is encoded again with the plain model
and compared with the stored vectors: unless they agree (cosine >= 0.9999), the collection was made with
other settings, and the upgrade refuses and says which settings differ where it can tell. In dual mode the
stored vectors become the ``plain`` vectors as they are, and only the calibrated vectors are computed.

The new collection is written beside the old one. Qdrant can add a named vector to an existing collection
(``create_vector_name``: checked with qdrant-client 1.20 in local mode, an unnamed-vector collection becomes
``{"": ..., "calibrated": ...}``), but it cannot rename LlamaIndex's unnamed vector to ``plain``, so an
in-place upgrade would leave a layout that no posfair store reads. The old collection is only removed with
``replace=True``, after the new one is complete. Points are written in batches of complete points, and a rerun
skips those already written with the same text, so a killed upgrade resumes where it stopped.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from llama_index.core.schema import BaseNode, MetadataMode
from llama_index.core.vector_stores.utils import metadata_dict_to_node
from pydantic import BaseModel, ConfigDict, Field, model_validator
from qdrant_client import QdrantClient
from qdrant_client.http import models as rest
from tqdm.auto import tqdm

from posfair_llamaindex.embedding import PosFairEmbedding
from posfair_llamaindex.options import POOLINGS
from posfair_llamaindex.qdrant.collection import collection_tag
from posfair_llamaindex.qdrant.retry import describe_client, with_retries
from posfair_llamaindex.qdrant.store import PosFairQdrantVectorStore, embedded_text_hash, tagged_vector_store

logger = logging.getLogger(__name__)

MIN_SAMPLE = 32


class UpgradeRefused(ValueError):
    """The source collection cannot be upgraded with these settings; nothing was written."""


class UpgradeSettings(BaseModel):
    """What to upgrade into what, and how strictly the stored vectors are checked."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str = Field(min_length=1)
    target: str = Field(min_length=1)
    sample: int = Field(default=MIN_SAMPLE, ge=MIN_SAMPLE, description="nodes re-encoded by the check")
    min_cosine: float = Field(default=0.9999, gt=0.0, le=1.0)
    batch_size: int = Field(default=64, ge=1, description="points read, encoded and written at a time")
    replace: bool = Field(default=False, description="delete the source once the target is complete")

    @model_validator(mode="after")
    def _distinct(self) -> UpgradeSettings:
        if self.source == self.target:
            raise ValueError(f"the target must be a new collection, not the source {self.source!r} itself")
        return self


@dataclass
class UpgradeReport:
    source: str
    target: str
    points: int  # in the source
    written: int  # by this run
    already_there: int  # written by an earlier, interrupted run
    checked: int  # nodes re-encoded plain by the sampled check
    min_cosine: float  # the lowest cosine the check found
    plain_reused: int  # stored vectors kept as plain vectors (dual mode)
    calibrated_computed: int
    replaced: bool


@dataclass(frozen=True)
class _Source:
    vector: Optional[str]  # the dense vector's name; None for an unnamed vector
    size: int
    points: int


# texts -> their calibrated vectors, in order (the driver's own encoder, or a pool of Ray actors)
Encode = Callable[[list[str]], list[list[float]]]


def upgrade_collection(
    client: QdrantClient,
    embed_model: PosFairEmbedding,
    settings: UpgradeSettings,
    *,
    show_progress: bool = True,
    encode: Optional[Encode] = None,
) -> UpgradeReport:
    """Write ``settings.target``, a tagged collection for ``embed_model`` (mode dual or calibrated), from the
    nodes of ``settings.source``. Raises :class:`UpgradeRefused` before writing anything when it cannot.

    ``encode`` computes the calibrated vectors of a page of texts; by default ``embed_model``'s own encoder
    (``posfair_llamaindex.distributed.upgrade`` passes a pool of Ray actors)."""
    if embed_model.mode not in ("dual", "calibrated"):
        raise ValueError(f"upgrade writes a dual or calibrated collection, not mode {embed_model.mode!r}")
    source = _inspect_source(client, settings.source, embed_model)
    checked, lowest = _check_sample(client, settings, source, embed_model)
    store = tagged_vector_store(client, settings.target, embed_model)
    encode = encode or calibrated_twin(embed_model).get_text_embedding_batch
    report = UpgradeReport(settings.source, settings.target, source.points, 0, 0, checked, lowest, 0, 0, False)
    offset: Any = None
    with tqdm(total=source.points, desc="Upgrading", unit="node", disable=not show_progress) as progress:
        while True:
            records, offset = _scroll(client, settings.source, source, settings.batch_size, offset)
            nodes = [_node(record, settings.source) for record in records]
            stored = store.stored_text_hashes([n.node_id for n in nodes]) if nodes else {}
            todo = [
                (r, n) for r, n in zip(records, nodes, strict=True) if stored.get(n.node_id) != embedded_text_hash(n)
            ]
            if todo:
                _write(store, todo, source, embed_model, encode)
                report.calibrated_computed += len(todo)
                report.plain_reused += len(todo) if embed_model.is_dual else 0
            report.written += len(todo)
            report.already_there += len(nodes) - len(todo)
            progress.update(len(nodes))
            if offset is None:
                break
    _verify_complete(client, settings, source)
    if settings.replace:
        with_retries(
            lambda: client.delete_collection(settings.source), what="delete_collection", target=describe_client(client)
        )
        report.replaced = True
    return report


# ----------------------------------------------------------------------------- the source
def _inspect_source(client: QdrantClient, name: str, embed_model: PosFairEmbedding) -> _Source:
    target = describe_client(client)
    if not with_retries(lambda: client.collection_exists(name), what="collection_exists", target=target):
        raise UpgradeRefused(f"collection {name!r} does not exist")
    info = with_retries(lambda: client.get_collection(name), what="get_collection", target=target)
    if collection_tag(info) is not None:
        raise UpgradeRefused(f"collection {name!r} is already a posfair collection (it has a tag); nothing to upgrade")
    if info.config.params.sparse_vectors:
        raise UpgradeRefused(
            f"collection {name!r} is a hybrid collection (sparse vectors {sorted(info.config.params.sparse_vectors)}); "
            "upgrading hybrid collections is not supported yet"
        )
    vectors = info.config.params.vectors
    if isinstance(vectors, dict):
        if len(vectors) != 1:
            raise UpgradeRefused(
                f"collection {name!r} holds {len(vectors)} dense vectors {sorted(vectors)}; expected one"
            )
        ((vector, params),) = vectors.items()
    else:
        vector, params = None, vectors
    if params.distance != rest.Distance.COSINE:
        raise UpgradeRefused(f"collection {name!r} uses {params.distance} distance; posfair collections are cosine")
    if params.size != embed_model.dimension:
        raise UpgradeRefused(
            f"collection {name!r} holds {params.size}-dimensional vectors but {embed_model.model_name} makes "
            f"{embed_model.dimension}-dimensional ones: it was written by another model (settings that differ: model)"
        )
    points = with_retries(lambda: client.count(name, exact=True).count, what="count", target=target)
    return _Source(vector=vector or None, size=params.size, points=points)


def _scroll(client: QdrantClient, name: str, source: _Source, limit: int, offset: Any):
    with_vectors: Any = [source.vector] if source.vector else True
    return with_retries(
        lambda: client.scroll(name, limit=limit, offset=offset, with_payload=True, with_vectors=with_vectors),
        what="scroll",
        target=describe_client(client),
    )


def _node(record: Any, collection: str) -> BaseNode:
    try:
        return metadata_dict_to_node(record.payload or {})
    except Exception as error:  # a point not written by LlamaIndex (no _node_content)
        raise UpgradeRefused(
            f"point {record.id} of {collection!r} holds no LlamaIndex node in its payload ({error}); only "
            "collections written by LlamaIndex's QdrantVectorStore can be upgraded"
        ) from error


def _stored_vector(record: Any, source: _Source) -> list[float]:
    vector = record.vector
    return list(vector[source.vector] if isinstance(vector, dict) else vector)


# ----------------------------------------------------------------------------- the sampled check
def _check_sample(
    client: QdrantClient, settings: UpgradeSettings, source: _Source, embed_model: PosFairEmbedding
) -> tuple[int, float]:
    """Re-encode up to ``settings.sample`` nodes spread over the collection plain; refuse unless they match."""
    records = _sample(client, settings.source, source, settings.sample)
    if not records:
        raise UpgradeRefused(f"collection {settings.source!r} is empty; there is nothing to upgrade")
    if len(records) < settings.sample:
        logger.warning("collection %r holds only %d nodes: all of them are checked", settings.source, len(records))
    texts = [_node(r, settings.source).get_content(metadata_mode=MetadataMode.EMBED) for r in records]
    stored = [_stored_vector(r, source) for r in records]
    plain = _plain_twin(embed_model)
    cosines = _cosines(plain.get_text_embedding_batch(texts), stored)
    lowest = min(cosines)
    if lowest < settings.min_cosine:
        median = sorted(cosines)[len(cosines) // 2]
        differs = _what_differs(embed_model, texts, stored, settings)
        raise UpgradeRefused(
            f"re-encoding {len(records)} sampled nodes of {settings.source!r} with {_describe(plain)} does not "
            f"reproduce the stored vectors (lowest cosine {lowest:.6f}, median {median:.6f}; needs >= "
            f"{settings.min_cosine}). Settings that differ: {differs}. Nothing was written."
        )
    return len(records), lowest


def _sample(client: QdrantClient, name: str, source: _Source, count: int) -> list[Any]:
    """Points spread over the collection: a random sample where the engine offers one, else every n-th point."""
    with_vectors: Any = [source.vector] if source.vector else True
    try:
        response = client.query_points(
            name,
            query=rest.SampleQuery(sample=rest.Sample.RANDOM),
            limit=count,
            with_payload=True,
            with_vectors=with_vectors,
        )
        return list(response.points)
    except Exception as error:  # an engine without sampling: every n-th point in id order
        logger.debug("random sample not available (%s); taking every n-th point", error)
    step = max(1, source.points // count)
    picked, offset = [], None
    while len(picked) < count:
        records, offset = _scroll(client, name, source, step * count, offset)
        picked.extend(records[::step])
        if offset is None:
            break
    return picked[:count]


def _cosines(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]]) -> list[float]:
    out = []
    for x, y in zip(a, b, strict=True):
        dot = sum(p * q for p, q in zip(x, y, strict=True))
        out.append(dot / (math.sqrt(sum(p * p for p in x)) * math.sqrt(sum(q * q for q in y)) or 1.0))
    return out


def _what_differs(embed_model: PosFairEmbedding, texts, stored, settings: UpgradeSettings) -> str:
    """Try the other poolings (the most common difference) and report the one that matches, if any."""
    for pooling in POOLINGS:
        if pooling == embed_model.pooling:
            continue
        try:
            other = PosFairEmbedding(
                embed_model.model_name,
                mode="plain",
                pooling=pooling,
                max_length=embed_model.max_length,
                normalize=embed_model.normalize,
                text_instruction=embed_model.text_instruction,
                query_instruction=embed_model.query_instruction,
                device=embed_model.device,
            )
        except Exception as error:  # a pooling this model cannot do
            logger.debug("pooling %s not tried: %s", pooling, error)
            continue
        if min(_cosines(other.get_text_embedding_batch(texts), stored)) >= settings.min_cosine:
            return f"pooling: the stored vectors match pooling {pooling!r}, this embedding uses {embed_model.pooling!r}"
    return (
        f"model or encoding: no pooling of {embed_model.model_name} reproduces them, so the collection was written by "
        f"another model, or with another document prefix (this one: {embed_model.text_instruction!r}) or token "
        f"limit (this one: {embed_model.max_length})"
    )


def _describe(embedding: PosFairEmbedding) -> str:
    return (
        f"{embedding.model_name} (pooling {embedding.pooling!r}, max_length {embedding.max_length}, "
        f"text prefix {embedding.text_instruction!r})"
    )


# ----------------------------------------------------------------------------- writing
def _plain_twin(embed_model: PosFairEmbedding) -> PosFairEmbedding:
    """The plain encoder of ``embed_model`` on its loaded weights (what LlamaIndex's store was given)."""
    return _twin(embed_model, "plain")


def calibrated_twin(embed_model: PosFairEmbedding) -> PosFairEmbedding:
    """The calibrated half of a dual embedding alone, or the calibrated embedding itself."""
    return embed_model if embed_model.mode == "calibrated" else _twin(embed_model, "calibrated")


def _twin(embed_model: PosFairEmbedding, mode: str) -> PosFairEmbedding:
    return PosFairEmbedding(
        embed_model.model_name,
        calibration=embed_model.calibration if mode == "calibrated" else None,
        mode=mode,
        max_length=embed_model.max_length,
        normalize=embed_model.normalize,
        text_instruction=embed_model.text_instruction,
        query_instruction=embed_model.query_instruction,
        embed_batch_size=embed_model.embed_batch_size,
        encoder=embed_model.encoder,
    )


def _write(
    store: PosFairQdrantVectorStore,
    todo: list[tuple[Any, BaseNode]],
    source: _Source,
    embed_model: PosFairEmbedding,
    encode: Encode,
) -> None:
    texts = [node.get_content(metadata_mode=MetadataMode.EMBED) for _, node in todo]
    vectors = encode(texts)
    if len(vectors) != len(texts):
        raise RuntimeError(f"the calibrated encoder returned {len(vectors)} vectors for {len(texts)} texts")
    for (record, node), vector in zip(todo, vectors, strict=True):
        node.embedding = (_stored_vector(record, source) + list(vector)) if embed_model.is_dual else list(vector)
    store.add([node for _, node in todo])


def _verify_complete(client: QdrantClient, settings: UpgradeSettings, source: _Source) -> None:
    written = with_retries(
        lambda: client.count(settings.target, exact=True).count, what="count", target=describe_client(client)
    )
    if written < source.points:
        raise RuntimeError(
            f"{settings.target!r} holds {written} points but {settings.source!r} held {source.points}: the source "
            "changed during the upgrade; run it again" + (" (the source was not deleted)" if settings.replace else "")
        )


__all__ = ("Encode", "UpgradeRefused", "UpgradeReport", "UpgradeSettings", "calibrated_twin", "upgrade_collection")
