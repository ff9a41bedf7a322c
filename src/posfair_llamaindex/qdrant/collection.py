"""The embedding's tag in a Qdrant collection's metadata: create the collection with it, or check it.

The tag goes in with ``create_collection`` itself, so a collection never exists without its tag, and an
existing collection whose tag differs is refused before anything is written.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Generator
from typing import TYPE_CHECKING, Any, Optional

from pydantic import BaseModel, ConfigDict, Field
from qdrant_client import AsyncQdrantClient, QdrantClient
from qdrant_client.http import models as rest

from posfair_llamaindex.qdrant.retry import (
    DEFAULT_RETRY,
    RetryPolicy,
    awith_retries,
    describe_client,
    is_local,
    with_retries,
)
from posfair_llamaindex.tag import comparable_tag

if TYPE_CHECKING:  # loading the embedding pulls in torch; reading a tag must not
    from posfair_llamaindex.embedding import PosFairEmbedding

logger = logging.getLogger(__name__)

METADATA_KEY = "posfair"
# the named vectors of a dual collection
PLAIN_VECTOR = "plain"
CALIBRATED_VECTOR = "calibrated"
DUAL_VECTORS = (PLAIN_VECTOR, CALIBRATED_VECTOR)
# LlamaIndex's QdrantVectorStore names (a hybrid collection is read by its query code, so it must use them)
HYBRID_DENSE_VECTOR = "text-dense"
HYBRID_SPARSE_VECTOR = "text-sparse-new"
# what the tag records as the sparse encoder when the user hands in sparse_doc_fn
CUSTOM_SPARSE_ENCODER = "custom"

# one client call of the create-or-check procedure: (method name, positional args, keyword args)
Step = tuple[str, tuple, dict[str, Any]]


class CollectionTagMismatchError(ValueError):
    """The collection holds vectors from a different encoder or calibration config."""

    def __init__(self, collection: str, stored: Optional[dict[str, Any]], requested: dict[str, Any]) -> None:
        self.collection, self.stored, self.requested = collection, stored, requested
        if stored is None:
            reason = "it has no posfair tag, so the origin of its vectors is unknown"
        else:
            keys = sorted(set(comparable_tag(stored)) | set(comparable_tag(requested)))
            differing = [k for k in keys if stored.get(k) != requested.get(k)]
            reason = "; ".join(f"{k}: stored {stored.get(k)!r} != requested {requested.get(k)!r}" for k in differing)
        super().__init__(
            f"Qdrant collection {collection!r} was not embedded with this configuration ({reason}). Nothing was "
            f"written. Stored tag: {json.dumps(stored, sort_keys=True)}. Requested tag: "
            f"{json.dumps(requested, sort_keys=True)}. Use another collection, or recreate=True "
            "(CLI: --recreate) to delete it and start again."
        )


class HybridSettings(BaseModel):
    """How a hybrid collection stores its sparse vector, recorded in the tag under ``hybrid``.

    The key is only present on hybrid collections, so the tags and fingerprints of every other collection
    stay as they were. It takes part in the tag comparison (a dense-only store cannot write points that lack
    the sparse vector, nor a store with another sparse encoder), but not in the points' fingerprint, which
    says what the dense vectors mean.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    dense_vector: str = Field(default=HYBRID_DENSE_VECTOR, min_length=1)
    sparse_vector: str = Field(default=HYBRID_SPARSE_VECTOR, min_length=1)
    # a fastembed model name, or "custom" for the user's own sparse_doc_fn (which no tag can identify)
    sparse_encoder: str = Field(default=CUSTOM_SPARSE_ENCODER, min_length=1)
    idf: bool = False

    def tag(self) -> dict[str, Any]:
        return self.model_dump()


class CollectionSpec(BaseModel):
    """Everything ``create_collection`` needs to make a tagged collection, and what an existing one must match."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    tag: dict[str, Any]
    vectors: Any
    sparse_vectors: Optional[dict[str, rest.SparseVectorParams]] = None


def collection_spec(embed_model: PosFairEmbedding, hybrid: Optional[HybridSettings] = None) -> CollectionSpec:
    """The tagged collection for ``embed_model``, with the sparse vector of ``hybrid`` beside the dense one."""
    tag = stored_tag_for(embed_model)
    if hybrid is None:
        return CollectionSpec(tag=tag, vectors=vectors_config_for(embed_model))
    if embed_model.is_dual:
        raise ValueError(
            "hybrid search is not available on a dual collection: its query already fuses two dense vectors "
            "(plain and calibrated) and a third, sparse ranking has no defined place in that rule. Use "
            "mode='calibrated' with enable_hybrid=True, or mode='dual' without it."
        )
    params = rest.VectorParams(size=embed_model.dimension, distance=rest.Distance.COSINE)
    sparse = rest.SparseVectorParams(index=rest.SparseIndexParams(), modifier=rest.Modifier.IDF if hybrid.idf else None)
    return CollectionSpec(
        tag={**tag, "hybrid": hybrid.tag()},
        vectors={hybrid.dense_vector: params},
        sparse_vectors={hybrid.sparse_vector: sparse},
    )


def collection_tag(info: rest.CollectionInfo) -> Optional[dict[str, Any]]:
    """The posfair tag stored in a collection's metadata, or None."""
    metadata = getattr(info.config, "metadata", None) or {}
    return metadata.get(METADATA_KEY)


def stored_tag_for(embed_model: PosFairEmbedding) -> dict[str, Any]:
    """The tag a collection holds for ``embed_model``: its tag plus its fingerprint."""
    return {**embed_model.tag(), "fingerprint": embed_model.fingerprint()}


def check_collection(
    name: str, info: rest.CollectionInfo, embed_model: PosFairEmbedding, hybrid: Optional[HybridSettings] = None
) -> None:
    """Raise :class:`CollectionTagMismatchError` unless the collection was made for ``embed_model``."""
    check_spec(name, info, collection_spec(embed_model, hybrid))


def check_spec(name: str, info: rest.CollectionInfo, spec: CollectionSpec) -> None:
    """Raise :class:`CollectionTagMismatchError` unless the collection has the tag and vectors of ``spec``."""
    stored = collection_tag(info)
    requested = spec.tag
    if stored is None or comparable_tag(stored) != comparable_tag(requested):
        raise CollectionTagMismatchError(name, stored, requested)
    found = _describe_vectors(info.config.params.vectors)
    found_sparse = _describe_sparse(info.config.params.sparse_vectors)
    wanted, wanted_sparse = _describe_vectors(spec.vectors), _describe_sparse(spec.sparse_vectors)
    if found != wanted or found_sparse != wanted_sparse:
        raise CollectionTagMismatchError(
            name,
            {**stored, "vectors": found, "sparse_vectors": found_sparse},
            {**requested, "vectors": wanted, "sparse_vectors": wanted_sparse},
        )


def vectors_config_for(embed_model: PosFairEmbedding):
    """One cosine vector per point, or for a dual embedding the named vectors ``plain`` and ``calibrated``."""
    params = rest.VectorParams(size=embed_model.dimension, distance=rest.Distance.COSINE)
    if embed_model.is_dual:
        return {name: params for name in DUAL_VECTORS}
    return params


def _describe_vectors(vectors) -> Any:
    if isinstance(vectors, rest.VectorParams):
        return f"{vectors.size}/{vectors.distance}"
    if isinstance(vectors, dict):
        return {name: _describe_vectors(params) for name, params in sorted(vectors.items())}
    return repr(vectors)


def _describe_sparse(sparse) -> Any:
    if not sparse:
        return None
    return {name: str(params.modifier) if params.modifier else None for name, params in sorted(sparse.items())}


def _create_kwargs(name: str, spec: CollectionSpec, options: dict[str, Any]) -> dict[str, Any]:
    kwargs = dict(collection_name=name, vectors_config=spec.vectors, metadata={METADATA_KEY: spec.tag}, **options)
    if spec.sparse_vectors:
        kwargs["sparse_vectors_config"] = spec.sparse_vectors
    return kwargs


def _procedure(
    name: str, spec: CollectionSpec, recreate: bool, local: bool, options: dict[str, Any]
) -> Generator[Step, Any, bool]:
    """Create the tagged collection or check the existing one's tag, as a sequence of client calls.

    Written once as a generator that yields each call and receives its result (or its exception thrown
    in), so the sync and the async client run exactly the same procedure. Returns True when it created.
    """
    if (yield "collection_exists", (name,), {}):
        info = yield "get_collection", (name,), {}
        try:
            check_spec(name, info, spec)
            return False
        except CollectionTagMismatchError:
            if not recreate:
                raise
            logger.warning("recreating Qdrant collection %r with a new tag", name)
            yield "delete_collection", (name,), {}
    try:
        yield "create_collection", (), _create_kwargs(name, spec, options)
    except (ValueError, RuntimeError) as error:
        if "already exists" not in str(error):
            raise
        # another writer created it between our check and our create: its tag must match ours
        check_spec(name, (yield "get_collection", (name,), {}), spec)
        return False
    if not local:  # embedded Qdrant ignores payload indexes (and warns)
        from llama_index.vector_stores.qdrant.base import DOCUMENT_ID_KEY

        yield "create_payload_index", (name, DOCUMENT_ID_KEY, rest.PayloadSchemaType.KEYWORD), {}
    return True


def ensure_tagged_collection(
    client: QdrantClient,
    collection_name: str,
    embed_model: PosFairEmbedding,
    *,
    recreate: bool = False,
    retry: RetryPolicy = DEFAULT_RETRY,
    hybrid: Optional[HybridSettings] = None,
    **collection_options: Any,
) -> bool:
    """Create the tagged collection, or check the existing one's tag. Returns True when it was created.

    ``hybrid`` adds a sparse vector beside the dense one. ``collection_options`` go to ``create_collection``
    (e.g. ``shard_number``, ``replication_factor``).
    """
    _check_embed_model(embed_model)
    spec = collection_spec(embed_model, hybrid)
    return ensure_spec(client, collection_name, spec, recreate=recreate, retry=retry, **collection_options)


def ensure_spec(
    client: QdrantClient,
    collection_name: str,
    spec: CollectionSpec,
    *,
    recreate: bool = False,
    retry: RetryPolicy = DEFAULT_RETRY,
    **collection_options: Any,
) -> bool:
    """:func:`ensure_tagged_collection` from a ready spec (the store re-creates its collection after ``clear``)."""
    steps = _procedure(collection_name, spec, recreate, is_local(client), collection_options)
    target = describe_client(client)
    outcome: Any = None
    failed = False
    while True:
        try:
            method, args, kwargs = steps.throw(outcome) if failed else steps.send(outcome)
        except StopIteration as done:
            return done.value
        call = getattr(client, method)
        try:
            outcome, failed = (
                with_retries(
                    lambda call=call, args=args, kwargs=kwargs: call(*args, **kwargs),
                    what=method,
                    target=target,
                    policy=retry,
                ),
                False,
            )
        except Exception as error:  # handed to the procedure, which decides
            outcome, failed = error, True


async def aensure_tagged_collection(
    aclient: AsyncQdrantClient,
    collection_name: str,
    embed_model: PosFairEmbedding,
    *,
    recreate: bool = False,
    retry: RetryPolicy = DEFAULT_RETRY,
    hybrid: Optional[HybridSettings] = None,
    **collection_options: Any,
) -> bool:
    """The async twin of :func:`ensure_tagged_collection`: the same procedure on an ``AsyncQdrantClient``."""
    _check_embed_model(embed_model)
    spec = collection_spec(embed_model, hybrid)
    return await aensure_spec(aclient, collection_name, spec, recreate=recreate, retry=retry, **collection_options)


async def aensure_spec(
    aclient: AsyncQdrantClient,
    collection_name: str,
    spec: CollectionSpec,
    *,
    recreate: bool = False,
    retry: RetryPolicy = DEFAULT_RETRY,
    **collection_options: Any,
) -> bool:
    """The async twin of :func:`ensure_spec`."""
    steps = _procedure(collection_name, spec, recreate, is_local(aclient), collection_options)
    target = describe_client(aclient)
    outcome: Any = None
    failed = False
    while True:
        try:
            method, args, kwargs = steps.throw(outcome) if failed else steps.send(outcome)
        except StopIteration as done:
            return done.value
        call = getattr(aclient, method)
        try:
            outcome, failed = (
                await awith_retries(
                    lambda call=call, args=args, kwargs=kwargs: call(*args, **kwargs),
                    what=method,
                    target=target,
                    policy=retry,
                ),
                False,
            )
        except Exception as error:
            outcome, failed = error, True


def list_tagged_collections(client: QdrantClient) -> list:
    """Every collection with its point count and posfair tag (None for untagged collections)."""
    rows = []
    for description in client.get_collections().collections:
        info = client.get_collection(description.name)
        rows.append({"name": description.name, "points": info.points_count, "tag": collection_tag(info)})
    return rows


def _check_embed_model(embed_model: Any) -> None:
    from posfair_llamaindex.embedding import PosFairEmbedding

    if not isinstance(embed_model, PosFairEmbedding):
        raise TypeError(f"embed_model must be a PosFairEmbedding, got {type(embed_model).__name__}")
