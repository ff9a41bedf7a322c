"""The embedding's tag in a Qdrant collection's metadata: create the collection with it, or check it.

The tag goes in with ``create_collection`` itself, so a collection never exists without its tag, and an
existing collection whose tag differs is refused before anything is written.
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from typing import TYPE_CHECKING, Any, Optional

from pydantic import BaseModel, ConfigDict, Field
from qdrant_client import AsyncQdrantClient, QdrantClient
from qdrant_client.http import models as rest

from posfair_llamaindex.errors import CollectionTagMismatchError
from posfair_llamaindex.qdrant.retry import (
    DEFAULT_RETRY,
    RetryConfig,
    awith_retries,
    describe_client,
    is_edge,
    is_local,
    with_retries,
)
from posfair_llamaindex.qdrant.store_options import CollectionCreateConfig, resolve_options
from posfair_llamaindex.qdrant.vector_layout import (
    SparseVector,
    VectorLayout,
    describe_sparse,
    describe_vectors,
    layout_for,
    mode_vectors,
)
from posfair_llamaindex.qdrant.vector_storage import StorageChoice
from posfair_llamaindex.tag import ENCODER_TAG_KEYS, comparable_tag

# LlamaIndex's payload key of a node's source document (llama_index.vector_stores.qdrant.base.DOCUMENT_ID_KEY)
DOCUMENT_ID_KEY = "doc_id"

if TYPE_CHECKING:  # loading the embedding pulls in torch; reading a tag must not
    from posfair_llamaindex.embedding import PosFairEmbedding

logger = logging.getLogger(__name__)

METADATA_KEY = "posfair"

# one client call of the create-or-check procedure: (method name, positional args, keyword args)
Step = tuple[str, tuple, dict[str, Any]]


class TaggedCollectionConfig(BaseModel):
    """A tagged collection: its tag, what its points hold (the layout) and how it is created (the options).

    ``adopt_storage``: the vector storage was left to its default, so an existing collection is read as it is
    stored (float32 where its tag records no storage: every collection made before the choice existed) instead
    of being refused for another storage; a new one is created with the layout's.
    """

    model_config = ConfigDict(frozen=True)

    tag: dict[str, Any]
    layout: VectorLayout
    options: CollectionCreateConfig = Field(default_factory=CollectionCreateConfig)
    adopt_storage: bool = False

    def stored_as(self, stored: Optional[dict[str, Any]]) -> TaggedCollectionConfig:
        """This config for an existing collection whose tag is ``stored``: with its storage when this one adopts."""
        if not self.adopt_storage or stored is None:
            return self
        layout = self.layout.with_stored_storage(stored)
        base = {key: value for key, value in self.tag.items() if key not in self.layout.tag()}
        return self.model_copy(update={"layout": layout, "tag": {**base, **layout.tag()}, "adopt_storage": False})


def tag_for(embed_model: PosFairEmbedding, layout: VectorLayout) -> dict[str, Any]:
    """The tag a collection holds: the embedding's tag, its fingerprint, and what the layout adds to them."""
    return {**stored_tag_for(embed_model), **layout.tag()}


def collection_config(
    embed_model: PosFairEmbedding,
    hybrid: Optional[SparseVector] = None,
    options: Optional[CollectionCreateConfig] = None,
    **layout_options: Any,
) -> TaggedCollectionConfig:
    """The tagged collection for ``embed_model``, with the sparse vector ``hybrid`` beside the dense one(s).

    Without a ``vector_storage``, the config adopts an existing collection's storage
    (:class:`TaggedCollectionConfig`)."""
    options = options or CollectionCreateConfig()
    layout_options.setdefault("default_storage", options.quantization_config is None)
    layout = layout_for(embed_model, sparse=hybrid, **layout_options)
    return TaggedCollectionConfig(
        tag=tag_for(embed_model, layout),
        layout=layout,
        options=options,
        adopt_storage=layout_options.get("vector_storage") is None,
    )


def collection_tag(info: rest.CollectionInfo) -> Optional[dict[str, Any]]:
    """The posfair tag stored in a collection's metadata, or None (also for metadata that holds no dict there)."""
    metadata = getattr(info.config, "metadata", None)
    tag = metadata.get(METADATA_KEY) if isinstance(metadata, dict) else None
    return tag if isinstance(tag, dict) else None


def stored_tag_for(embed_model: PosFairEmbedding) -> dict[str, Any]:
    """The embedding's part of a collection's tag: its tag plus its fingerprint."""
    return {**embed_model.tag(), "fingerprint": embed_model.fingerprint()}


def check_collection(
    name: str,
    info: rest.CollectionInfo,
    embed_model: PosFairEmbedding,
    hybrid: Optional[SparseVector] = None,
    vector_storage: StorageChoice = None,
) -> None:
    """Raise :class:`CollectionTagMismatchError` unless the collection was made for ``embed_model`` (stored as
    ``vector_storage``; left unset, stored any way)."""
    config = collection_config(embed_model, hybrid, vector_storage=vector_storage)
    check_collection_config(name, info, config.stored_as(collection_tag(info)))


def check_collection_config(name: str, info: rest.CollectionInfo, config: TaggedCollectionConfig) -> None:
    """Raise :class:`CollectionTagMismatchError` unless the collection has the tag and vectors of ``config``."""
    stored = collection_tag(info)
    requested = config.tag
    if stored is None or comparable_tag(stored) != comparable_tag(requested):
        raise CollectionTagMismatchError(name, stored, requested)
    found = describe_vectors(info.config.params.vectors)
    found_sparse = describe_sparse(info.config.params.sparse_vectors)
    wanted, wanted_sparse = config.layout.describe()
    if found != wanted or found_sparse != wanted_sparse:
        raise CollectionTagMismatchError(
            name,
            {**stored, "vectors": found, "sparse_vectors": found_sparse},
            {**requested, "vectors": wanted, "sparse_vectors": wanted_sparse},
        )


def check_encoder_facts(name: str, stored: dict[str, Any], facts: dict[str, Any]) -> None:
    """Raise :class:`CollectionTagMismatchError` unless an encoder loaded from the tag's own settings (which says
    ``facts``: ``PosFairEncoder.tag_facts``) makes the vectors the tag records: the same weights, and the same
    pooling, dimension and length its model files resolve. The rest of such an embedding's tag is the stored one."""
    requested = {**{key: value for key, value in stored.items() if key not in ENCODER_TAG_KEYS}, **facts}
    if comparable_tag(requested) != comparable_tag(stored):
        raise CollectionTagMismatchError(name, stored, requested)


def _already_exists(error: BaseException) -> bool:
    return isinstance(error, (ValueError, RuntimeError)) and "already exists" in str(error)


def _after_create(name: str, config: TaggedCollectionConfig, local: bool) -> Generator[Step, Any, None]:
    """The calls LlamaIndex's store makes after ``create_collection``: shard keys, then payload indexes."""
    yield from _shard_keys(name, config)
    if config.options.index_doc_id and not local:  # embedded Qdrant ignores keyword indexes (and warns)
        yield "create_payload_index", (), _payload_index(name, DOCUMENT_ID_KEY, rest.PayloadSchemaType.KEYWORD)
    yield from _payload_indexes(name, config)


def _shard_keys(name: str, config: TaggedCollectionConfig) -> Generator[Step, Any, None]:
    for key in config.options.shard_keys or ():
        try:
            yield "create_shard_key", (), {"collection_name": name, "shard_key": key}
        except Exception as error:
            if not _already_exists(error):
                raise
            logger.warning("shard key %r of Qdrant collection %r already exists", key, name)


def _payload_indexes(name: str, config: TaggedCollectionConfig) -> Generator[Step, Any, None]:
    for index in config.options.payload_indexes or ():
        yield "create_payload_index", (), _payload_index(name, index.field_name, index.field_schema)


def _payload_index(name: str, field_name: str, field_schema: Any) -> dict[str, Any]:
    return {"collection_name": name, "field_name": field_name, "field_schema": field_schema}


def create_kwargs(name: str, config: TaggedCollectionConfig) -> dict[str, Any]:
    """``create_collection``'s arguments: LlamaIndex's (vectors, sparse vectors, quantization, cluster options),
    the extras from ``collection_options``, and the tag."""
    return {
        "collection_name": name,
        **config.layout.create_arguments(),
        **config.options.create_kwargs(),
        "metadata": {METADATA_KEY: config.tag},
    }


def _procedure(
    name: str, config: TaggedCollectionConfig, recreate: bool, local: bool, edge: bool = False
) -> Generator[Step, Any, tuple[bool, TaggedCollectionConfig]]:
    """Create the tagged collection or check the existing one's tag, as a sequence of client calls.

    Written once as a generator that yields each call and receives its result (or its exception thrown
    in), so the sync and the async client run exactly the same procedure. Returns (True when it created, the
    config of the collection now there: an existing one's vector storage where ``config`` adopts it).
    An existing collection gets the payload indexes asked for, as LlamaIndex's store gives them on opening.
    """
    if local or edge:  # neither embedded engine has shards: refused before anything is created
        config.options.check_local()
    if (yield "collection_exists", (name,), {}):
        try:
            return (yield from _open_existing(name, config))
        except CollectionTagMismatchError:
            if not recreate:
                raise
            logger.warning("recreating Qdrant collection %r with a new tag", name)
            yield "delete_collection", (name,), {}
    try:
        yield "create_collection", (), create_kwargs(name, config)
    except (ValueError, RuntimeError) as error:
        if not _already_exists(error):
            raise
        # another writer created it between our check and our create: its tag must match ours; its shard keys are
        # created as LlamaIndex's store does when its create finds the collection
        return (yield from _open_existing(name, config, shard_keys=True))
    yield from _after_create(name, config, local)
    return True, config.model_copy(update={"adopt_storage": False})


def _open_existing(
    name: str, config: TaggedCollectionConfig, shard_keys: bool = False
) -> Generator[Step, Any, tuple[bool, TaggedCollectionConfig]]:
    """Check an existing collection against ``config`` (its tag and vectors), then give it the payload indexes asked
    for; returns (False, the config as stored)."""
    info = yield "get_collection", (name,), {}
    opened = config.stored_as(collection_tag(info))
    check_collection_config(name, info, opened)
    if shard_keys:
        yield from _shard_keys(name, config)
    yield from _payload_indexes(name, config)
    return False, opened


def ensure_tagged_collection(
    client: QdrantClient,
    collection_name: str,
    embed_model: PosFairEmbedding,
    *,
    recreate: bool = False,
    retry: RetryConfig = DEFAULT_RETRY,
    hybrid: Optional[SparseVector] = None,
    vector_storage: StorageChoice = None,
    **collection_options: Any,
) -> bool:
    """Create the tagged collection, or check the existing one's tag. Returns True when it was created.

    ``hybrid`` adds a sparse vector beside the dense one(s). ``vector_storage`` says how the dense vectors are
    stored (see ``tagged_vector_store``). ``collection_options`` go to ``create_collection`` (e.g.
    ``shard_number``, ``replication_factor``, ``hnsw_config``; see ``tagged_vector_store``).
    """
    _check_embed_model(embed_model)
    config = _config_from(embed_model, hybrid, collection_options, vector_storage)
    return ensure_collection_config(client, collection_name, config, recreate=recreate, retry=retry)


def _config_from(
    embed_model: PosFairEmbedding,
    hybrid: Optional[SparseVector],
    options: dict[str, Any],
    vector_storage: StorageChoice = None,
) -> TaggedCollectionConfig:
    resolved = resolve_options({}, options, named=mode_vectors(embed_model))
    return collection_config(
        embed_model, hybrid, resolved.collection, dense_config=resolved.dense_config, vector_storage=vector_storage
    )


def ensure_collection_config(
    client: QdrantClient,
    collection_name: str,
    config: TaggedCollectionConfig,
    *,
    recreate: bool = False,
    retry: RetryConfig = DEFAULT_RETRY,
) -> bool:
    """:func:`ensure_tagged_collection` from a ready config (the store re-creates its collection after ``clear``)."""
    return open_collection_config(client, collection_name, config, recreate=recreate, retry=retry)[0]


def open_collection_config(
    client: QdrantClient,
    collection_name: str,
    config: TaggedCollectionConfig,
    *,
    recreate: bool = False,
    retry: RetryConfig = DEFAULT_RETRY,
) -> tuple[bool, TaggedCollectionConfig]:
    """:func:`ensure_collection_config`, returning also the config of the collection now there (its stored vector
    storage where ``config`` adopts one)."""
    steps = _procedure(collection_name, config, recreate, is_local(client), is_edge(client))
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
    retry: RetryConfig = DEFAULT_RETRY,
    hybrid: Optional[SparseVector] = None,
    vector_storage: StorageChoice = None,
    **collection_options: Any,
) -> bool:
    """The async twin of :func:`ensure_tagged_collection`: the same procedure on an ``AsyncQdrantClient``."""
    _check_embed_model(embed_model)
    config = _config_from(embed_model, hybrid, collection_options, vector_storage)
    return await aensure_collection_config(aclient, collection_name, config, recreate=recreate, retry=retry)


async def aensure_collection_config(
    aclient: AsyncQdrantClient,
    collection_name: str,
    config: TaggedCollectionConfig,
    *,
    recreate: bool = False,
    retry: RetryConfig = DEFAULT_RETRY,
) -> bool:
    """The async twin of :func:`ensure_collection_config`."""
    return (await aopen_collection_config(aclient, collection_name, config, recreate=recreate, retry=retry))[0]


async def aopen_collection_config(
    aclient: AsyncQdrantClient,
    collection_name: str,
    config: TaggedCollectionConfig,
    *,
    recreate: bool = False,
    retry: RetryConfig = DEFAULT_RETRY,
) -> tuple[bool, TaggedCollectionConfig]:
    """The async twin of :func:`open_collection_config`."""
    steps = _procedure(collection_name, config, recreate, is_local(aclient), is_edge(aclient))
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
