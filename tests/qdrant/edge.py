"""Translate the store's query-API requests (qdrant-client models) to Qdrant's own engine, qdrant-edge-py.

Local mode is a Python re-implementation of Qdrant; the edge shard runs the Rust engine a server runs, so a
request answered the same by both (and by brute force) is one a server answers that way too. Only what
``PosFairQdrantVectorStore._fused_request`` and ``_build_query_filter`` produce is translated; anything else
is refused by name, so a new construct in the store cannot be silently dropped here.
"""

from __future__ import annotations

from typing import Any, Optional

import qdrant_edge as edge
from qdrant_client.http import models as rest

from posfair_llamaindex.qdrant.layout import DUAL_VECTORS


def create_shard(path: str, dimension: int, *, hnsw: bool = False) -> edge.EdgeShard:
    """A shard with the two cosine vectors of a dual collection. ``hnsw=True`` indexes early (small segments)."""
    vector = edge.EdgeVectorParams(size=dimension, distance=edge.Distance.Cosine)
    optimizers = edge.EdgeOptimizersConfig(indexing_threshold=1) if hnsw else None
    config = edge.EdgeConfig(vectors={name: vector for name in DUAL_VECTORS}, optimizers=optimizers)
    return edge.EdgeShard.create(path, config)


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


def translate(request: dict[str, Any]) -> edge.QueryRequest:
    """The edge request for ``store._fused_request(...)``'s keyword arguments to ``query_points``."""
    known = {"collection_name", "prefetch", "query", "limit", "with_payload"}
    if set(request) - known:
        raise NotImplementedError(f"no edge translation for request keys {sorted(set(request) - known)}")
    prefetches = [
        edge.Prefetch(
            limit=p.limit,
            query=edge.Query.Nearest(list(p.query), using=p.using),
            filter=filter_(p.filter),
            params=search_params(p.params),
        )
        for p in request["prefetch"]
    ]
    return edge.QueryRequest(
        limit=request["limit"], query=fused_query(request["query"]), prefetches=prefetches, with_payload=False
    )
