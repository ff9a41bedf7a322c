"""LlamaIndex's ``QdrantVectorStore`` constructor options, each honoured with its meaning there or refused by name.

:data:`UPSTREAM_OPTIONS` lists every option of llama-index-vector-stores-qdrant's constructor and what it does
on a posfair store; :func:`resolve_options` sorts what a caller passed into the collection's vector layout
inputs, the ``create_collection`` / ``create_shard_key`` / ``create_payload_index`` arguments
(:class:`CollectionCreateConfig`) and what LlamaIndex's own code keeps using (uploads, queries, sharding), and
refuses, before anything is created, whatever would otherwise be silently ignored.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from qdrant_client.http import models as rest

from posfair_llamaindex.qdrant.vector_layout import HYBRID_RULES

# every option of QdrantVectorStore.__init__ (llama-index-vector-stores-qdrant 0.10.4) but collection_name,
# client and aclient, with what it does here. tests/qdrant/test_store_options.py checks the list against the
# installed package, so an option added upstream fails a test until it is placed here.
UPSTREAM_OPTIONS: dict[str, str] = {
    "url": "with no client: both clients are built from url, api_key and client_kwargs, as upstream",
    "api_key": "see url",
    "client_kwargs": "see url",
    "batch_size": "points per upload request (LlamaIndex's upload code)",
    "parallel": "upload processes (LlamaIndex's upload code)",
    "max_retries": "upload retries (LlamaIndex's upload code); other calls follow retry=RetryConfig",
    "dense_config": (
        "the VectorParams of every dense vector (dual: of plain and calibrated; or a dict by vector name): "
        "distance, on_disk, hnsw_config, quantization_config, datatype, memory. size must be the model's "
        "dimension; multivector_config and uint8 are refused; distance and datatype enter the tag"
    ),
    "sparse_config": "the sparse vector's SparseVectorParams (hybrid only); its IDF modifier enters the tag",
    "quantization_config": "create_collection(quantization_config=...), as upstream",
    "enable_hybrid": "adds the sparse vector (single and dual collections); recorded in the tag under 'hybrid'",
    "fastembed_sparse_model": "hybrid with this fastembed model (needs fastembed and its model files)",
    "sparse_doc_fn": "hybrid: your document sparse encoder (the tag records 'custom', or the encoder's own tag)",
    "sparse_query_fn": "hybrid: your query sparse encoder",
    "hybrid_fusion_fn": "hybrid: fuses the dense and sparse results client-side (relative-score fusion by default)",
    "index_doc_id": "False skips the doc_id keyword payload index, as upstream",
    "text_key": "the payload key of legacy text payloads (LlamaIndex's parsing code)",
    "dense_vector_name": "the dense vector's name on a single-vector hybrid collection; refused where no name is used",
    "sparse_vector_name": "the sparse vector's name (hybrid only)",
    "shard_number": "create_collection(shard_number=...)",
    "sharding_method": "create_collection(sharding_method=...); CUSTOM needs shard_keys and shard_key_selector_fn",
    "shard_key_selector_fn": "maps shard_identifier (add, query, delete, get_nodes, delete_nodes) to a shard key",
    "shard_keys": "create_shard_key(collection, key) for each, after the collection is created, as upstream",
    "replication_factor": "create_collection(replication_factor=...)",
    "write_consistency_factor": "create_collection(write_consistency_factor=...)",
    "payload_indexes": (
        "create_payload_index(collection, field_name, field_schema) for each {'field_name', 'field_schema'}, "
        "on a new collection and on opening an existing one, as upstream (a TextIndexParams schema is a "
        "full-text index)"
    ),
}
# options of this store that LlamaIndex's does not have
POSFAIR_OPTIONS: dict[str, str] = {
    "fusion_candidates": "dual: hits per vector that sum and rrf fuse (default 100)",
    "max_candidates": "dual: the least hits per vector that max fuses (default 100; at least 2k)",
    "hybrid_fusion": (
        f"dual + hybrid: how the dense and sparse rankings fuse, one of {HYBRID_RULES}; default dbsf (relative "
        "when a query gives alpha)"
    ),
}
# create_collection arguments that collection_options may carry besides the cluster options above
EXTRA_CREATE_OPTIONS = (
    "on_disk_payload",
    "hnsw_config",
    "optimizers_config",
    "wal_config",
    "strict_mode_config",
    "timeout",
    "payload",
    "id_tracker",
)
# collection_options keys that name a store option in create_collection's words
ALIASES = ("vectors_config", "sparse_vectors_config")
# the options that reach create_collection / create_shard_key / create_payload_index, from the store's keywords
# or from collection_options (the same meaning in both places)
COLLECTION_STORE_OPTIONS = (
    "shard_number",
    "sharding_method",
    "replication_factor",
    "write_consistency_factor",
    "quantization_config",
    "shard_keys",
    "index_doc_id",
    "payload_indexes",
)
# hybrid-only options: refused on a dense-only store, where LlamaIndex's would ignore them
HYBRID_ONLY = ("sparse_config", "sparse_doc_fn", "sparse_query_fn", "hybrid_fusion_fn", "sparse_vector_name")

PayloadSchema = Union[
    rest.PayloadSchemaType,
    rest.KeywordIndexParams,
    rest.IntegerIndexParams,
    rest.FloatIndexParams,
    rest.GeoIndexParams,
    rest.TextIndexParams,
    rest.BoolIndexParams,
    rest.DatetimeIndexParams,
    rest.UuidIndexParams,
]
Quantization = Union[rest.ScalarQuantization, rest.ProductQuantization, rest.BinaryQuantization, rest.TurboQuantization]


class PayloadIndex(BaseModel):
    """One of upstream's ``payload_indexes`` entries: ``{"field_name": ..., "field_schema": ...}``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    field_name: str = Field(min_length=1)
    field_schema: PayloadSchema


class CollectionCreateConfig(BaseModel):
    """Everything ``create_collection`` and the calls after it get besides the vectors and the tag."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # passed to create_collection as LlamaIndex's store passes them (None included)
    quantization_config: Optional[Quantization] = None
    shard_number: Optional[int] = Field(default=None, ge=1)
    replication_factor: Optional[int] = Field(default=None, ge=1)
    sharding_method: Optional[rest.ShardingMethod] = None
    write_consistency_factor: Optional[int] = Field(default=None, ge=1)
    # passed only when given
    on_disk_payload: Optional[bool] = None
    hnsw_config: Optional[rest.HnswConfigDiff] = None
    optimizers_config: Optional[rest.OptimizersConfigDiff] = None
    wal_config: Optional[rest.WalConfigDiff] = None
    strict_mode_config: Optional[rest.StrictModeConfig] = None
    timeout: Optional[int] = None
    payload: Optional[rest.PayloadStorageParams] = None
    id_tracker: Optional[rest.IdTrackerParams] = None
    # the calls after create_collection
    shard_keys: Optional[tuple[Union[int, str], ...]] = None
    index_doc_id: bool = True
    payload_indexes: Optional[tuple[PayloadIndex, ...]] = None

    @field_validator("payload_indexes", mode="before")
    @classmethod
    def _entries(cls, value: Any) -> Any:
        if value is None:
            return None
        entries = []
        for entry in value:
            if isinstance(entry, dict) and set(entry) != {"field_name", "field_schema"}:
                raise ValueError(
                    "each payload_indexes entry is {'field_name': ..., 'field_schema': ...}, got keys "
                    f"{sorted(entry)}"
                )
            entries.append(entry)
        return entries

    def create_kwargs(self) -> dict[str, Any]:
        """``create_collection``'s keyword arguments other than the name, the vectors and the metadata."""
        kwargs: dict[str, Any] = {
            "quantization_config": self.quantization_config,
            "shard_number": self.shard_number,
            "replication_factor": self.replication_factor,
            "sharding_method": self.sharding_method,
            "write_consistency_factor": self.write_consistency_factor,
        }
        for name in EXTRA_CREATE_OPTIONS:
            if getattr(self, name) is not None:
                kwargs[name] = getattr(self, name)
        return kwargs

    @property
    def custom_sharding(self) -> bool:
        return self.sharding_method == rest.ShardingMethod.CUSTOM

    def check_local(self) -> None:
        """Refuse what embedded Qdrant cannot do, before anything is created there."""
        if self.custom_sharding or self.shard_keys:
            raise ValueError(
                "sharding_method=CUSTOM and shard_keys need a Qdrant server: embedded Qdrant (path=, :memory: or "
                "Qdrant Edge) has no shards and refuses create_shard_key"
            )


@dataclass
class ResolvedStoreConfig:
    """What the caller's options mean for the collection, the layout and LlamaIndex's store code."""

    collection: CollectionCreateConfig
    dense_config: Any = None  # VectorParams, or {vector name: VectorParams}
    hybrid: bool = False
    sparse_config: Optional[rest.SparseVectorParams] = None
    store_kwargs: dict[str, Any] = field(default_factory=dict)  # for LlamaIndex's QdrantVectorStore.__init__
    posfair: dict[str, Any] = field(default_factory=dict)  # fusion_candidates, max_candidates, hybrid_fusion


@dataclass(frozen=True)
class StoreArguments:
    """What a caller passed: the store's keyword options, ``collection_options`` and the mode's dense vectors."""

    options: dict[str, Any]  # the store's keywords; after merging, with collection_options' store options too
    extra: dict[str, Any]  # collection_options; after merging, only the create_collection options besides those
    named: tuple = ()

    @property
    def hybrid(self) -> bool:
        return bool(self.options.get("enable_hybrid")) or self.options.get("fastembed_sparse_model") is not None

    @property
    def fused(self) -> bool:
        return len(self.named) > 1

    def get(self, name: str) -> Any:
        return self.options.get(name)

    def supplied(self, names: tuple[str, ...]) -> list[str]:
        return [name for name in names if self.options.get(name) is not None]


def resolve_options(
    store_kwargs: dict[str, Any], collection_options: Optional[dict[str, Any]], *, named: tuple = ()
) -> ResolvedStoreConfig:
    """Sort and check the store's keyword options and ``collection_options``; refuse by name what has no meaning.

    ``collection_options`` takes ``create_collection``'s keywords: the cluster options (the same as the store
    keywords of the same name; giving one in both places with different values is refused), and the ones
    LlamaIndex's store has no keyword for (``hnsw_config``, ``optimizers_config``, ``wal_config``,
    ``on_disk_payload``, ``strict_mode_config``, ``timeout``, ``payload``, ``id_tracker``). Its
    ``vectors_config`` means ``dense_config`` and its ``sparse_vectors_config`` means ``{sparse_vector_name:
    sparse_config}``; ``collection_name`` and ``metadata`` belong to the store. ``named``: the dense vectors
    the embedding's mode names (``layout.mode_vectors``: dual, windows), empty for a single vector.
    The refusals are :data:`GIVEN_RULES`, :data:`STORE_RULES` and :data:`COLLECTION_RULES`, checked in that order.
    """
    given = StoreArguments(dict(store_kwargs), dict(collection_options or {}), tuple(named))
    for rule in GIVEN_RULES:
        rule(given)
    given = _merge_collection_options(given)
    for rule in STORE_RULES:
        rule(given)
    collection = _collection_options(given.options, given.extra)
    for rule in COLLECTION_RULES:
        rule(given, collection)
    store = {name: value for name, value in given.options.items() if name not in POSFAIR_OPTIONS}
    # LlamaIndex's __init__ would create the payload indexes itself on an existing collection: ours does that
    store["payload_indexes"] = None
    return ResolvedStoreConfig(
        collection=collection,
        dense_config=given.get("dense_config"),
        hybrid=given.hybrid,
        sparse_config=given.get("sparse_config"),
        store_kwargs=store,
        posfair={name: given.get(name) for name in POSFAIR_OPTIONS if given.get(name) is not None},
    )


def _merge_collection_options(given: StoreArguments) -> StoreArguments:
    options, extra = dict(given.options), dict(given.extra)
    if "vectors_config" in extra:
        _one_place(options, "dense_config", extra.pop("vectors_config"), "vectors_config")
    if "sparse_vectors_config" in extra:
        options.update(_sparse_from_collection_options(extra.pop("sparse_vectors_config"), options, given.hybrid))
    for name in COLLECTION_STORE_OPTIONS:
        if name in extra:
            _one_place(options, name, extra.pop(name), name)
    return replace(given, options=options, extra=extra)


# refused on the options as given, before collection_options are merged into the store's


def _refuse_unknown_store_options(given: StoreArguments) -> None:
    unknown = sorted(set(given.options) - set(UPSTREAM_OPTIONS) - set(POSFAIR_OPTIONS))
    if unknown:
        raise TypeError(
            f"unknown store option(s) {unknown}: not an option of LlamaIndex's QdrantVectorStore "
            f"(llama-index-vector-stores-qdrant 0.10.4) nor of this store ({sorted(POSFAIR_OPTIONS)}); "
            "create_collection arguments go in collection_options"
        )


def _refuse_collection_options_the_store_owns(given: StoreArguments) -> None:
    for owned in ("collection_name", "metadata"):
        if owned in given.extra:
            reason = "the store's name" if owned == "collection_name" else "where the tag lives"
            raise ValueError(f"collection_options[{owned!r}] is not available: it is {reason}")


GIVEN_RULES: tuple[Callable[[StoreArguments], None], ...] = (
    _refuse_unknown_store_options,
    _refuse_collection_options_the_store_owns,
)


# refused on the merged options, before the CollectionCreateConfig is built


def _refuse_unknown_collection_options(given: StoreArguments) -> None:
    unknown = sorted(set(given.extra) - set(EXTRA_CREATE_OPTIONS))
    if unknown:
        raise ValueError(
            f"collection_options {unknown} are not create_collection options this store passes on; it "
            f"takes {sorted((*COLLECTION_STORE_OPTIONS, *EXTRA_CREATE_OPTIONS, *ALIASES))}"
        )


def _hybrid_settings_need_hybrid(given: StoreArguments) -> None:
    names = given.supplied(HYBRID_ONLY)
    if names and not given.hybrid:
        raise ValueError(
            f"{', '.join(names)} configure hybrid search, which this store does not do without "
            "enable_hybrid=True (LlamaIndex's store would ignore them)"
        )


def _dense_vector_name_needs_a_single_vector_hybrid_collection(given: StoreArguments) -> None:
    name = given.get("dense_vector_name")
    if name and (given.named or not given.hybrid):
        where = (
            f"this collection's mode names its dense vectors {list(given.named)}"
            if given.named
            else "a dense-only collection has one unnamed vector, as LlamaIndex's store creates it"
        )
        raise ValueError(f"dense_vector_name={name!r} would be ignored: {where}")


def _hybrid_fusion_needs_hybrid_and_several_dense_vectors(given: StoreArguments) -> None:
    if given.get("hybrid_fusion") is not None and not (given.fused and given.hybrid):
        raise ValueError(
            "hybrid_fusion chooses how a hybrid collection with several dense vectors (dual, windows) fuses its "
            "rankings; this store is not one"
        )


def _hybrid_fusion_must_be_a_known_rule(given: StoreArguments) -> None:
    rule = given.get("hybrid_fusion")
    if rule is not None and rule not in HYBRID_RULES:
        raise ValueError(f"hybrid_fusion must be one of {HYBRID_RULES}, got {rule!r}")


def _hybrid_fusion_fn_needs_client_side_fusion(given: StoreArguments) -> None:
    rule = given.get("hybrid_fusion")
    if given.get("hybrid_fusion_fn") is not None and rule not in (None, "relative"):
        raise ValueError(
            f"hybrid_fusion_fn fuses the two result lists in Python, but hybrid_fusion={rule!r} "
            "fuses them on the server, so the function would never run: give one of them"
        )


def _candidates_need_several_dense_vectors(given: StoreArguments) -> None:
    names = given.supplied(("fusion_candidates", "max_candidates"))
    if names and not given.fused:
        raise ValueError(
            f"{', '.join(names)} size the prefetches of a collection with several dense vectors (dual, "
            "windows); this one has one"
        )


STORE_RULES: tuple[Callable[[StoreArguments], None], ...] = (
    _refuse_unknown_collection_options,
    _hybrid_settings_need_hybrid,
    _dense_vector_name_needs_a_single_vector_hybrid_collection,
    _hybrid_fusion_needs_hybrid_and_several_dense_vectors,
    _hybrid_fusion_must_be_a_known_rule,
    _hybrid_fusion_fn_needs_client_side_fusion,
    _candidates_need_several_dense_vectors,
)


# refused on the merged options and the CollectionCreateConfig built from them


def _custom_sharding_needs_keys_and_selector(given: StoreArguments, collection: CollectionCreateConfig) -> None:
    if collection.custom_sharding and (not given.get("shard_key_selector_fn") or not collection.shard_keys):
        missing = [name for name in ("shard_key_selector_fn", "shard_keys") if not given.get(name)]
        raise ValueError(f"sharding_method=CUSTOM needs {' and '.join(missing)} (as LlamaIndex's store requires)")


def _shard_keys_need_custom_sharding(given: StoreArguments, collection: CollectionCreateConfig) -> None:
    if collection.shard_keys and not collection.custom_sharding:
        raise ValueError("shard_keys are created only on a collection with sharding_method=CUSTOM")


def _shard_key_selector_fn_needs_custom_sharding(given: StoreArguments, collection: CollectionCreateConfig) -> None:
    if given.get("shard_key_selector_fn") is not None and not collection.custom_sharding:
        raise ValueError(
            "shard_key_selector_fn is used only with sharding_method=CUSTOM (LlamaIndex's store ignores it otherwise)"
        )


def _sparse_config_must_be_sparse_vector_params(given: StoreArguments, collection: CollectionCreateConfig) -> None:
    sparse_config = given.get("sparse_config")
    if sparse_config is not None and not isinstance(sparse_config, rest.SparseVectorParams):
        raise TypeError(f"sparse_config must be a qdrant SparseVectorParams, got {type(sparse_config).__name__}")


COLLECTION_RULES: tuple[Callable[[StoreArguments, CollectionCreateConfig], None], ...] = (
    _custom_sharding_needs_keys_and_selector,
    _shard_keys_need_custom_sharding,
    _shard_key_selector_fn_needs_custom_sharding,
    _sparse_config_must_be_sparse_vector_params,
)


def _one_place(kwargs: dict[str, Any], name: str, value: Any, given_as: str) -> None:
    if kwargs.get(name) is not None and kwargs[name] != value:
        raise ValueError(
            f"{name} is given twice with different values (as a store option and as collection_options"
            f"[{given_as!r}]); give it once"
        )
    kwargs[name] = value


def _sparse_from_collection_options(value: Any, kwargs: dict[str, Any], hybrid: bool) -> dict[str, Any]:
    if not hybrid:
        raise ValueError("collection_options['sparse_vectors_config'] needs a hybrid store (enable_hybrid=True)")
    if not isinstance(value, dict) or len(value) != 1:
        raise ValueError("collection_options['sparse_vectors_config'] must be {sparse vector name: SparseVectorParams}")
    ((name, params),) = value.items()
    wanted = kwargs.get("sparse_vector_name")
    if wanted is not None and wanted != name:
        raise ValueError(
            f"collection_options['sparse_vectors_config'] names {name!r}, but sparse_vector_name is {wanted!r}"
        )
    out = {"sparse_vector_name": name}
    if kwargs.get("sparse_config") is not None and kwargs["sparse_config"] != params:
        raise ValueError("sparse_config is given twice with different values (also in sparse_vectors_config)")
    out["sparse_config"] = params
    return out


def _collection_options(kwargs: dict[str, Any], extra: dict[str, Any]) -> CollectionCreateConfig:
    values = {name: kwargs[name] for name in COLLECTION_STORE_OPTIONS if kwargs.get(name) is not None}
    values.update(extra)
    if values.get("shard_keys") is not None:
        values["shard_keys"] = tuple(values["shard_keys"])
    try:
        return CollectionCreateConfig(**values)
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors())
        raise ValueError(f"invalid collection option(s): {problems}") from None
