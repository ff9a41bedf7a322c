"""A collection's qdrant-client configuration as Qdrant Edge shard settings, and back as ``CollectionInfo``.

The store keeps each collection's configuration as qdrant-client wrote it (that is where the tag lives) and builds
the Edge settings from it whenever a shard is created or opened. Building them in one place keeps a shard from ever
differing from the collection it stands for: a setting Edge has no counterpart for is refused by name before any
file exists, not dropped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Optional

from qdrant_client.http import models as rest

from posfair_llamaindex.errors import EdgeUnsupportedError
from posfair_llamaindex.qdrant.edge_binding import edge

__all__ = [
    "EDGE_OPTIMIZER_FIELDS",
    "QDRANT_HNSW_DEFAULTS",
    "QDRANT_OPTIMIZER_DEFAULTS",
    "collection_info",
    "edge_config",
    "edge_enum",
    "edge_payload_schema",
    "hnsw_values",
    "maybe_edge_enum",
    "merged_diff",
    "schema_type_from_edge",
]

# Qdrant's own defaults, for what a collection leaves unset (the server's and Edge's alike)
QDRANT_HNSW_DEFAULTS: dict[str, Any] = {"m": 16, "ef_construct": 100, "full_scan_threshold": 10_000}
QDRANT_OPTIMIZER_DEFAULTS: dict[str, Any] = {
    "deleted_threshold": 0.2,
    "vacuum_min_vector_number": 1000,
    "default_segment_number": 0,
    "indexing_threshold": 10_000,
}
# optimizer settings Edge has (a server-only one, such as flush_interval_sec, is refused by name)
EDGE_OPTIMIZER_FIELDS = (
    "deleted_threshold",
    "vacuum_min_vector_number",
    "default_segment_number",
    "max_segment_size",
    "indexing_threshold",
    "prevent_unoptimized",
)


# ---------------------------------------------------------------------------------------------------- enums


def edge_enum(edge_enum_type: Any, value: Any, call: str, what: str) -> Any:
    """The Edge enum member named like a qdrant-client enum value (``one_and_half_bits`` is ``OneAndHalfBits``)."""
    raw = getattr(value, "value", value)
    wanted = str(raw).replace("_", "").lower()
    for name in dir(edge_enum_type):
        if not name.startswith("_") and name.replace("_", "").lower() == wanted:
            return getattr(edge_enum_type, name)
    raise EdgeUnsupportedError(call, f"{what} {raw!r}")


def maybe_edge_enum(edge_enum_type: Any, value: Any, call: str, what: str) -> Any:
    return None if value is None else edge_enum(edge_enum_type, value, call, what)


def schema_type_from_edge(value: Any) -> rest.PayloadSchemaType:
    """A payload index's type as qdrant-client names it (Edge's ``Keyword`` is ``keyword``)."""
    name = str(value).rsplit(".", 1)[-1].lower()
    return rest.PayloadSchemaType(name)


# ---------------------------------------------------------------------------------------------------- collections


def merged_diff(base: Any, override: Any) -> Any:
    """``override``'s set fields over ``base``'s (two ``*ConfigDiff`` models of one type; either may be None)."""
    if base is None:
        return override
    if override is None:
        return base
    return base.model_copy(update=override.model_dump(exclude_none=True))


def _hnsw(diff: Any, base: Mapping[str, Any], call: str) -> Optional[edge.HnswIndexConfig]:
    """Edge's HNSW settings: ``diff``'s fields over ``base`` (Qdrant's defaults, or the collection's own, which a
    vector's ``hnsw_config`` refines field by field as on a server)."""
    if diff is None:
        return None
    values = {**base, **diff.model_dump(exclude_none=True)}
    return edge.HnswIndexConfig(
        m=values["m"],
        ef_construct=values["ef_construct"],
        full_scan_threshold=values["full_scan_threshold"],
        max_indexing_threads=values.get("max_indexing_threads", 0),
        on_disk=values.get("on_disk"),
        payload_m=values.get("payload_m"),
        inline_storage=values.get("inline_storage"),
        memory=maybe_edge_enum(edge.Memory, values.get("memory"), call, "hnsw_config.memory"),
    )


def hnsw_values(diff: Any) -> dict[str, Any]:
    """The HNSW settings a collection ends up with: ``diff``'s over Qdrant's defaults."""
    values = dict(QDRANT_HNSW_DEFAULTS)
    if diff is not None:
        values.update(diff.model_dump(exclude_none=True))
    return values


def _quantization(config: Any, call: str) -> Any:
    if config is None:
        return None
    if isinstance(config, rest.ScalarQuantization):
        scalar = config.scalar
        return edge.ScalarQuantizationConfig(
            edge_enum(edge.ScalarType, scalar.type, call, "scalar quantization type"),
            quantile=scalar.quantile,
            always_ram=scalar.always_ram,
            memory=maybe_edge_enum(edge.Memory, scalar.memory, call, "quantization memory"),
        )
    if isinstance(config, rest.ProductQuantization):
        product = config.product
        return edge.ProductQuantizationConfig(
            edge_enum(edge.CompressionRatio, product.compression, call, "product quantization compression"),
            always_ram=product.always_ram,
            memory=maybe_edge_enum(edge.Memory, product.memory, call, "quantization memory"),
        )
    if isinstance(config, rest.BinaryQuantization):
        binary = config.binary
        return edge.BinaryQuantizationConfig(
            always_ram=binary.always_ram,
            encoding=maybe_edge_enum(edge.BinaryQuantizationEncoding, binary.encoding, call, "binary encoding"),
            query_encoding=maybe_edge_enum(
                edge.BinaryQuantizationQueryEncoding, binary.query_encoding, call, "binary query encoding"
            ),
            memory=maybe_edge_enum(edge.Memory, binary.memory, call, "quantization memory"),
        )
    if isinstance(config, rest.TurboQuantization):
        turbo = config.turbo
        return edge.TurboQuantQuantizationConfig(
            always_ram=turbo.always_ram,
            bits=maybe_edge_enum(edge.TurboQuantBitSize, turbo.bits, call, "turbo quantization bits"),
            memory=maybe_edge_enum(edge.Memory, turbo.memory, call, "quantization memory"),
        )
    raise EdgeUnsupportedError(call, f"quantization_config {type(config).__name__}")


def _vector_params(params: rest.VectorParams, graph: Mapping[str, Any], call: str) -> edge.EdgeVectorParams:
    multivector = None
    if params.multivector_config is not None:
        comparator = edge_enum(
            edge.MultiVectorComparator, params.multivector_config.comparator, call, "multivector comparator"
        )
        multivector = edge.MultiVectorConfig(comparator)
    return edge.EdgeVectorParams(
        size=params.size,
        distance=edge_enum(edge.Distance, params.distance, call, "distance"),
        on_disk=params.on_disk,
        multivector_config=multivector,
        datatype=maybe_edge_enum(edge.VectorStorageDatatype, params.datatype, call, "vector datatype"),
        quantization_config=_quantization(params.quantization_config, call),
        hnsw_config=_hnsw(params.hnsw_config, graph, call),
        memory=maybe_edge_enum(edge.Memory, params.memory, call, "vector memory"),
    )


def _sparse_params(params: rest.SparseVectorParams, call: str) -> edge.EdgeSparseVectorParams:
    index = params.index or rest.SparseIndexParams()
    modifier = None
    if params.modifier is not None and params.modifier != rest.Modifier.NONE:
        modifier = edge_enum(edge.Modifier, params.modifier, call, "sparse modifier")
    return edge.EdgeSparseVectorParams(
        full_scan_threshold=index.full_scan_threshold,
        on_disk=index.on_disk,
        modifier=modifier,
        datatype=maybe_edge_enum(edge.VectorStorageDatatype, index.datatype, call, "sparse datatype"),
        memory=maybe_edge_enum(edge.Memory, index.memory, call, "sparse index memory"),
    )


def _optimizers(diff: Optional[rest.OptimizersConfigDiff], call: str) -> Optional[edge.EdgeOptimizersConfig]:
    if diff is None:
        return None
    given = diff.model_dump(exclude_none=True)
    other = sorted(set(given) - set(EDGE_OPTIMIZER_FIELDS))
    if other:
        raise EdgeUnsupportedError(call, f"optimizers_config {other}", "Edge has no background optimizer threads")
    return edge.EdgeOptimizersConfig(**given)


def edge_config(config: rest.CreateCollection, call: str, max_search_threads: Optional[int] = None) -> edge.EdgeConfig:
    """The Edge shard settings for a collection created with ``config`` (vectors, sparse vectors, storage, HNSW,
    quantization, optimizers); ``max_search_threads`` sizes the shard's search pool (None: Edge's, from the CPUs)."""
    graph = hnsw_values(config.hnsw_config)
    vectors: Any = None
    if isinstance(config.vectors, rest.VectorParams):
        vectors = _vector_params(config.vectors, graph, call)
    elif config.vectors:
        vectors = {name: _vector_params(params, graph, call) for name, params in config.vectors.items()}
    sparse = None
    if config.sparse_vectors:
        sparse = {name: _sparse_params(params, call) for name, params in config.sparse_vectors.items()}
    if vectors is None and sparse is None:
        vectors = {}
    payload_memory = None if config.payload is None else config.payload.memory
    tracker_memory = None if config.id_tracker is None else config.id_tracker.memory
    return edge.EdgeConfig(
        vectors=vectors,
        sparse_vectors=sparse,
        on_disk_payload=config.on_disk_payload,
        hnsw_config=_hnsw(config.hnsw_config, QDRANT_HNSW_DEFAULTS, call),
        quantization_config=_quantization(config.quantization_config, call),
        optimizers=_optimizers(config.optimizers_config, call),
        max_search_threads=max_search_threads,
        payload_memory=maybe_edge_enum(edge.Memory, payload_memory, call, "payload memory"),
        id_tracker_memory=maybe_edge_enum(edge.Memory, tracker_memory, call, "id tracker memory"),
    )


def collection_info(config: rest.CreateCollection, info: Any) -> rest.CollectionInfo:
    """``get_collection``'s answer: the collection as created (a server's single-shard defaults for the rest), with
    the counts and payload indexes of its shard's ``info()``."""
    schema = {
        key: rest.PayloadIndexInfo(data_type=schema_type_from_edge(index.data_type), points=index.points)
        for key, index in info.payload_schema.items()
    }
    optimizers = dict(QDRANT_OPTIMIZER_DEFAULTS)
    if config.optimizers_config is not None:
        optimizers.update(config.optimizers_config.model_dump(exclude_none=True))
    if isinstance(config.vectors, rest.VectorParams):
        vectors: Any = config.vectors.model_copy(deep=True)
    else:
        vectors = {name: params.model_copy(deep=True) for name, params in (config.vectors or {}).items()}
    sparse = None
    if config.sparse_vectors is not None:
        sparse = {name: params.model_copy(deep=True) for name, params in config.sparse_vectors.items()}
    return rest.CollectionInfo(
        status=rest.CollectionStatus.GREEN,
        optimizer_status=rest.OptimizersStatusOneOf.OK,
        indexed_vectors_count=info.indexed_vectors_count,
        points_count=info.points_count,
        segments_count=info.segments_count,
        payload_schema=schema,
        config=rest.CollectionConfig(
            params=rest.CollectionParams(
                vectors=vectors,
                sparse_vectors=sparse,
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


# ---------------------------------------------------------------------------------------------------- payload indexes

_INDEX_PARAMS = {
    rest.KeywordIndexParams: edge.KeywordIndexParams,
    rest.IntegerIndexParams: edge.IntegerIndexParams,
    rest.FloatIndexParams: edge.FloatIndexParams,
    rest.GeoIndexParams: edge.GeoIndexParams,
    rest.TextIndexParams: edge.TextIndexParams,
    rest.BoolIndexParams: edge.BoolIndexParams,
    rest.DatetimeIndexParams: edge.DatetimeIndexParams,
    rest.UuidIndexParams: edge.UuidIndexParams,
}


def edge_payload_schema(schema: Any, call: str) -> Any:
    """A payload index's schema: a type (``keyword``, ``integer``, ...) or its params (``KeywordIndexParams``...)."""
    if isinstance(schema, (rest.PayloadSchemaType, str)):
        return edge_enum(edge.PayloadSchemaType, schema, call, "payload index type")
    build = _INDEX_PARAMS.get(type(schema))
    if build is None:
        raise EdgeUnsupportedError(call, f"payload index schema {type(schema).__name__}")
    values = {}
    for name, value in schema:
        if name == "type" or value is None:
            continue
        values[name] = _index_param(name, value, call)
    return build(**values)


def _index_param(name: str, value: Any, call: str) -> Any:
    if name == "memory":
        return edge_enum(edge.Memory, value, call, "payload index memory")
    if name == "tokenizer":
        return edge_enum(edge.TokenizerType, value, call, "text index tokenizer")
    if name == "stopwords":
        if isinstance(value, rest.StopwordsSet):
            languages = None
            if value.languages is not None:
                languages = {edge_enum(edge.Language, lang, call, "stopwords language") for lang in value.languages}
            return edge.StopwordsSet(languages=languages, custom=set(value.custom) if value.custom else None)
        return edge_enum(edge.Language, value, call, "stopwords language")
    if name == "stemmer":
        if isinstance(value, rest.SnowballParams):
            return edge.SnowballParams(edge_enum(edge.SnowballLanguage, value.language, call, "stemmer language"))
        return edge.DisabledStemmer()
    if name == "scoring":
        if isinstance(value, bool):
            return value
        return edge.TextScoringParams(edge_enum(edge.TextScoringType, value.type, call, "text scoring type"))
    if isinstance(value, (bool, int, float, str)):
        return value
    raise EdgeUnsupportedError(call, f"payload index parameter {name}={value!r}")
