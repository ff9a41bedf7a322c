"""Translate the store's query-API requests (qdrant-client models) to Qdrant's own engine, qdrant-edge-py.

Local mode is a Python re-implementation of Qdrant; the edge shard runs the Rust engine a server runs, so a
request answered the same by both (and by brute force) is one a server answers that way too. Only what
``PosFairQdrantVectorStore._fused_request`` and ``_build_query_filter`` produce is translated, and shards are made
from a ``VectorLayout`` (dual, windows: a MaxSim multivector beside the document vectors); anything else is refused
by name, so a new construct in the store cannot be silently dropped here.
"""

from __future__ import annotations

from typing import Any, Optional, Union

import qdrant_edge as edge
from qdrant_client.http import models as rest

from posfair_llamaindex.modes import DUAL_VECTORS
from posfair_llamaindex.qdrant.vector_layout import VectorLayout, dense_vector

DISTANCES = {
    rest.Distance.COSINE: edge.Distance.Cosine,
    rest.Distance.DOT: edge.Distance.Dot,
    rest.Distance.EUCLID: edge.Distance.Euclid,
    rest.Distance.MANHATTAN: edge.Distance.Manhattan,
}
COMPARATORS = {rest.MultiVectorComparator.MAX_SIM: edge.MultiVectorComparator.MaxSim}
# Qdrant's HNSW defaults, for the fields a vector's own hnsw_config leaves unset
HNSW_DEFAULTS = {"m": 16, "ef_construct": 100, "full_scan_threshold": 10_000}


def create_shard(
    path: str, layout: Union[int, VectorLayout], *, hnsw: bool = False, full_scan_threshold: Optional[int] = None
) -> edge.EdgeShard:
    """A shard holding ``layout``'s dense vectors (a multivector included), or, given a dimension, the two cosine
    vectors of a dual collection. ``hnsw=True`` indexes early (small segments). ``full_scan_threshold`` (KB, Qdrant's
    default 10,000) sets where a segment is searched without its graph; 1 makes every search use the graph."""
    if isinstance(layout, int):
        layout = VectorLayout(
            dimension=layout,
            dense=tuple(dense_vector(name, layout) for name in DUAL_VECTORS),
            fusion={"rule": "max"},
        )
    if layout.sparse is not None:
        raise NotImplementedError("no edge translation for a sparse vector")
    graph_defaults = dict(HNSW_DEFAULTS)
    graph = None
    if full_scan_threshold is not None:
        graph_defaults["full_scan_threshold"] = full_scan_threshold
        graph = edge.HnswIndexConfig(**graph_defaults)
    vectors = {vector.name: vector_params(vector.params, graph_defaults) for vector in layout.dense}
    optimizers = edge.EdgeOptimizersConfig(indexing_threshold=1) if hnsw else None
    config = edge.EdgeConfig(vectors=vectors, optimizers=optimizers, hnsw_config=graph)
    return edge.EdgeShard.create(path, config)


def vector_params(params: rest.VectorParams, graph_defaults: Optional[dict] = None) -> edge.EdgeVectorParams:
    """Size, distance, a MaxSim multivector and the vector's own HNSW m / ef_construct / full_scan_threshold (what it
    leaves unset comes from ``graph_defaults``, the shard's); any other setting (quantization, storage) is refused by
    name, so a shard never silently differs from the collection it stands for."""
    graph_defaults = graph_defaults or HNSW_DEFAULTS
    translated = {"size", "distance", "multivector_config", "hnsw_config"}
    others = sorted(name for name, value in params if name not in translated and value is not None)
    if params.hnsw_config is not None:
        others += sorted(
            f"hnsw_config.{name}"
            for name, value in params.hnsw_config
            if name not in HNSW_DEFAULTS and value is not None
        )
    if others:
        raise NotImplementedError(f"no edge translation for vector params {others}")
    multivector = graph = None
    if params.multivector_config is not None:
        multivector = edge.MultiVectorConfig(comparator=COMPARATORS[params.multivector_config.comparator])
    if params.hnsw_config is not None:
        given = {name: getattr(params.hnsw_config, name) for name in HNSW_DEFAULTS}
        graph = edge.HnswIndexConfig(**{n: graph_defaults[n] if v is None else v for n, v in given.items()})
    return edge.EdgeVectorParams(
        size=params.size, distance=DISTANCES[params.distance], multivector_config=multivector, hnsw_config=graph
    )


def upsert(shard: edge.EdgeShard, points: list[rest.PointStruct], batch: int = 1000) -> None:
    for start in range(0, len(points), batch):
        chunk = [edge.Point(str(p.id), dict(p.vector), p.payload) for p in points[start : start + batch]]
        shard.update(edge.UpdateOperation.upsert_points(chunk))


def condition(item: Any) -> Any:
    if isinstance(item, rest.Filter):
        return filter_(item)
    if isinstance(item, rest.HasIdCondition):
        return edge.HasIdCondition({str(i) for i in item.has_id})
    if isinstance(item, rest.FieldCondition):
        if item.range is not None:
            r = item.range
            return edge.FieldCondition(item.key, range=edge.RangeFloat(gte=r.gte, gt=r.gt, lte=r.lte, lt=r.lt))
        match = item.match
        if isinstance(match, rest.MatchValue):
            return edge.FieldCondition(item.key, match=edge.MatchValue(match.value))
        if isinstance(match, rest.MatchAny):
            return edge.FieldCondition(item.key, match=edge.MatchAny(list(match.any)))
        if isinstance(match, rest.MatchExcept):
            return edge.FieldCondition(item.key, match=edge.MatchExcept(list(match.except_)))
    raise NotImplementedError(f"no edge translation for {item!r}")


def filter_(f: Optional[rest.Filter]) -> Optional[edge.Filter]:
    if f is None:
        return None

    def each(items):
        return None if items is None else [condition(i) for i in items]

    return edge.Filter(must=each(f.must), should=each(f.should), must_not=each(f.must_not))


def search_params(params: Optional[rest.SearchParams]) -> Optional[edge.SearchParams]:
    if params is None:
        return None
    acorn = None
    if params.acorn is not None:
        acorn = edge.AcornSearchParams(enable=bool(params.acorn.enable), max_selectivity=params.acorn.max_selectivity)
    return edge.SearchParams(hnsw_ef=params.hnsw_ef, exact=bool(params.exact), acorn=acorn)


def fused_query(query: Any) -> Any:
    if isinstance(query, rest.RrfQuery):
        return edge.Fusion.Rrf(k=query.rrf.k)
    if isinstance(query, rest.FormulaQuery):
        formula = query.formula
        if isinstance(formula, rest.MaxExpression):
            variables, combine = formula.max, edge.Expression.Max
        elif isinstance(formula, rest.SumExpression):
            variables, combine = formula.sum, edge.Expression.Sum
        else:
            raise NotImplementedError(f"no edge translation for formula {formula!r}")
        expression = combine([edge.Expression.Variable(v) for v in variables])
        return edge.Formula(expression, defaults=dict(query.defaults or {}))
    raise NotImplementedError(f"no edge translation for query {query!r}")


def nearest(query: Any, using: Optional[str]) -> edge.Query:
    """A dense query vector (a list of floats) or a multivector's (a list of rows, as ``[query]``)."""
    if not isinstance(query, list) or not query:
        raise NotImplementedError(f"no edge translation for query {query!r}")
    if isinstance(query[0], list):
        vector: Any = [[float(x) for x in row] for row in query]
    else:
        vector = [float(x) for x in query]
    return edge.Query.Nearest(vector, using=using)


def translate(request: dict[str, Any]) -> edge.QueryRequest:
    """The edge request for ``store._fused_request(...)``'s keyword arguments to ``query_points``: a prefetch per
    named vector fused by a formula or RRF, or one vector's own query (a layout with one dense vector)."""
    if "prefetch" not in request:
        known = {"collection_name", "query", "using", "query_filter", "search_params", "limit", "with_payload"}
        if set(request) - known:
            raise NotImplementedError(f"no edge translation for request keys {sorted(set(request) - known)}")
        return edge.QueryRequest(
            limit=request["limit"],
            query=nearest(request["query"], request.get("using")),
            filter=filter_(request.get("query_filter")),
            params=search_params(request.get("search_params")),
            with_payload=False,
        )
    known = {"collection_name", "prefetch", "query", "limit", "with_payload"}
    if set(request) - known:
        raise NotImplementedError(f"no edge translation for request keys {sorted(set(request) - known)}")
    prefetches = [
        edge.Prefetch(
            limit=p.limit,
            query=nearest(p.query, p.using),
            filter=filter_(p.filter),
            params=search_params(p.params),
        )
        for p in request["prefetch"]
    ]
    return edge.QueryRequest(
        limit=request["limit"], query=fused_query(request["query"]), prefetches=prefetches, with_payload=False
    )
