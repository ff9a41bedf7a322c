"""qdrant-client request models to qdrant-edge-py objects, and Edge's answers back to qdrant-client models.

Qdrant Edge is the Rust engine a Qdrant server runs, loaded in-process. This module changes the shape of requests
and answers, never their meaning: a filter, a query or a collection setting that has no Edge counterpart raises
:class:`EdgeUnsupportedError`, naming the call and the construct, rather than being dropped or approximated.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime
from typing import Any, Optional, Union, get_args

import numpy as np
from pydantic_core import to_jsonable_python
from qdrant_client.http import models as rest

from posfair_llamaindex.errors import EdgeUnsupportedError

try:
    import qdrant_edge as edge
except ImportError as missing:  # an optional engine: say what to install
    raise ImportError(
        "EdgeQdrantClient runs Qdrant Edge in-process and needs qdrant-edge-py: pip install 'qdrant-edge-py==0.9.0'"
    ) from missing

__all__ = [
    "DEFAULT_RRF_K",
    "QDRANT_HNSW_DEFAULTS",
    "QDRANT_OPTIMIZER_DEFAULTS",
    "EdgeUnsupportedError",
    "QueryTranslator",
    "edge_config",
    "edge_filter",
    "edge_id",
    "edge_payload_schema",
    "edge_point",
    "edge_search_params",
    "edge_vector_struct",
    "edge_with_payload",
    "edge_with_vectors",
    "exclude_ids",
    "hnsw_values",
    "jsonable_payload",
    "merged_diff",
    "point_id_from_edge",
    "record_from_edge",
    "schema_type_from_edge",
    "scored_point_from_edge",
    "vector_from_edge",
]

PointId = Union[int, str]
# Qdrant's own defaults, for what a collection leaves unset (the server's and Edge's alike)
QDRANT_HNSW_DEFAULTS: dict[str, Any] = {"m": 16, "ef_construct": 100, "full_scan_threshold": 10_000}
QDRANT_OPTIMIZER_DEFAULTS: dict[str, Any] = {
    "deleted_threshold": 0.2,
    "vacuum_min_vector_number": 1000,
    "default_segment_number": 0,
    "indexing_threshold": 10_000,
}
# Qdrant's RRF constant when a query leaves k unset
DEFAULT_RRF_K = 2
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


def _edge_enum(edge_enum: Any, value: Any, call: str, what: str) -> Any:
    """The Edge enum member named like a qdrant-client enum value (``one_and_half_bits`` is ``OneAndHalfBits``)."""
    raw = getattr(value, "value", value)
    wanted = str(raw).replace("_", "").lower()
    for name in dir(edge_enum):
        if not name.startswith("_") and name.replace("_", "").lower() == wanted:
            return getattr(edge_enum, name)
    raise EdgeUnsupportedError(call, f"{what} {raw!r}")


def _maybe_enum(edge_enum: Any, value: Any, call: str, what: str) -> Any:
    return None if value is None else _edge_enum(edge_enum, value, call, what)


def schema_type_from_edge(value: Any) -> rest.PayloadSchemaType:
    """A payload index's type as qdrant-client names it (Edge's ``Keyword`` is ``keyword``)."""
    name = str(value).rsplit(".", 1)[-1].lower()
    return rest.PayloadSchemaType(name)


# ---------------------------------------------------------------------------------------------------- point ids


def edge_id(point_id: Any, call: str) -> PointId:
    """A point id as Edge takes it: an unsigned int, or a UUID in its canonical form (as a server stores it)."""
    if isinstance(point_id, bool):
        raise ValueError(f"{call}: point id {point_id!r} is a bool; Qdrant point ids are unsigned integers or UUIDs")
    if isinstance(point_id, int):
        if point_id < 0:
            raise ValueError(
                f"{call}: point id {point_id} is negative; Qdrant point ids are unsigned integers or UUIDs"
            )
        return point_id
    if isinstance(point_id, uuid.UUID):
        return str(point_id)
    if isinstance(point_id, str):
        try:
            return str(uuid.UUID(point_id))
        except ValueError:
            raise ValueError(
                f"{call}: point id {point_id!r} is neither an unsigned integer nor a UUID, which are Qdrant's only ids"
            ) from None
    raise TypeError(f"{call}: point id must be an int or a UUID string, got {type(point_id).__name__}")


def point_id_from_edge(point_id: Any) -> PointId:
    """The id as a qdrant-client answer has it: an int stays an int, a UUID becomes its string."""
    if isinstance(point_id, uuid.UUID):
        return str(point_id)
    return point_id


def exclude_ids(query_filter: Optional[rest.Filter], ids: Sequence[PointId]) -> Optional[rest.Filter]:
    """``query_filter`` that also leaves out ``ids`` (the points a query names as examples, as Qdrant does)."""
    if not ids:
        return query_filter
    excluded = rest.HasIdCondition(has_id=list(ids))
    if query_filter is None:
        return rest.Filter(must_not=[excluded])
    must_not = query_filter.must_not
    if must_not is None:
        must_not = []
    elif not isinstance(must_not, list):
        must_not = [must_not]
    return query_filter.model_copy(update={"must_not": [*must_not, excluded]})


# ---------------------------------------------------------------------------------------------------- filters


def edge_filter(query_filter: Any, call: str) -> Optional[edge.Filter]:
    """A qdrant-client ``Filter`` (must, should, must_not, min_should, nested to any depth) as an Edge filter."""
    if query_filter is None:
        return None
    if not isinstance(query_filter, rest.Filter):
        raise TypeError(f"{call}: a filter must be a qdrant_client.models.Filter, got {type(query_filter).__name__}")
    min_should = None
    if query_filter.min_should is not None:
        min_should = edge.MinShould(
            [_condition(c, call) for c in query_filter.min_should.conditions], query_filter.min_should.min_count
        )
    return edge.Filter(
        must=_conditions(query_filter.must, call),
        should=_conditions(query_filter.should, call),
        must_not=_conditions(query_filter.must_not, call),
        min_should=min_should,
    )


def _conditions(conditions: Any, call: str) -> Optional[list]:
    if conditions is None:
        return None
    if not isinstance(conditions, list):
        conditions = [conditions]
    return [_condition(c, call) for c in conditions]


def _condition(condition: Any, call: str) -> Any:
    if isinstance(condition, rest.Filter):
        return edge_filter(condition, call)
    if isinstance(condition, rest.FieldCondition):
        return _field_condition(condition, call)
    if isinstance(condition, rest.IsEmptyCondition):
        return edge.IsEmptyCondition(condition.is_empty.key)
    if isinstance(condition, rest.IsNullCondition):
        return edge.IsNullCondition(condition.is_null.key)
    if isinstance(condition, rest.HasIdCondition):
        return edge.HasIdCondition({edge_id(i, call) for i in condition.has_id})
    if isinstance(condition, rest.HasVectorCondition):
        return edge.HasVectorCondition(condition.has_vector)
    if isinstance(condition, rest.NestedCondition):
        return edge.NestedCondition(condition.nested.key, edge_filter(condition.nested.filter, call))
    if isinstance(condition, rest.SliceCondition):
        return edge.SliceCondition(condition.slice.total, condition.slice.index)
    raise EdgeUnsupportedError(call, f"filter condition {type(condition).__name__}")


def _field_condition(condition: rest.FieldCondition, call: str) -> edge.FieldCondition:
    return edge.FieldCondition(
        condition.key,
        match=_match(condition.match, call),
        range=_range(condition.range, call),
        geo_bounding_box=_bounding_box(condition.geo_bounding_box),
        geo_radius=_radius(condition.geo_radius),
        geo_polygon=_polygon(condition.geo_polygon),
        values_count=_values_count(condition.values_count),
        is_empty=condition.is_empty,
        is_null=condition.is_null,
    )


def _match(match: Any, call: str) -> Any:
    if match is None:
        return None
    if isinstance(match, rest.MatchValue):
        if isinstance(match.value, bool):
            # qdrant-edge-py 0.9.0 reads a Python bool as the integer 1 or 0 (which matches no bool payload); a
            # numpy bool is read as a bool
            return edge.MatchValue(np.bool_(match.value))
        return edge.MatchValue(match.value)
    if isinstance(match, rest.MatchAny):
        return edge.MatchAny(list(match.any))
    if isinstance(match, rest.MatchExcept):
        return edge.MatchExcept(list(match.except_))
    if isinstance(match, rest.MatchText):
        return edge.MatchText(match.text)
    if isinstance(match, rest.MatchTextAny):
        return edge.MatchTextAny(match.text_any)
    if isinstance(match, rest.MatchPhrase):
        return edge.MatchPhrase(match.phrase)
    if isinstance(match, rest.MatchPrefix):
        return edge.MatchPrefix(match.prefix)
    if isinstance(match, rest.MatchSubstring):
        return edge.MatchSubstring(match.substring)
    raise EdgeUnsupportedError(call, f"match condition {type(match).__name__}")


def _range(bounds: Any, call: str) -> Any:
    if bounds is None:
        return None
    if isinstance(bounds, rest.Range):
        return edge.RangeFloat(gte=bounds.gte, gt=bounds.gt, lte=bounds.lte, lt=bounds.lt)
    if isinstance(bounds, rest.DatetimeRange):
        return edge.RangeDateTime(gte=_iso(bounds.gte), gt=_iso(bounds.gt), lte=_iso(bounds.lte), lt=_iso(bounds.lt))
    raise EdgeUnsupportedError(call, f"range {type(bounds).__name__}")


def _iso(value: Any) -> Optional[str]:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    return str(value)


def _geo_point(point: rest.GeoPoint) -> edge.GeoPoint:
    return edge.GeoPoint(lon=point.lon, lat=point.lat)


def _bounding_box(box: Optional[rest.GeoBoundingBox]) -> Optional[edge.GeoBoundingBox]:
    return None if box is None else edge.GeoBoundingBox(_geo_point(box.top_left), _geo_point(box.bottom_right))


def _radius(radius: Optional[rest.GeoRadius]) -> Optional[edge.GeoRadius]:
    return None if radius is None else edge.GeoRadius(_geo_point(radius.center), radius.radius)


def _polygon(polygon: Optional[rest.GeoPolygon]) -> Optional[edge.GeoPolygon]:
    if polygon is None:
        return None
    interiors = None
    if polygon.interiors is not None:
        interiors = [[_geo_point(p) for p in ring.points] for ring in polygon.interiors]
    return edge.GeoPolygon([_geo_point(p) for p in polygon.exterior.points], interiors)


def _values_count(count: Optional[rest.ValuesCount]) -> Optional[edge.ValuesCount]:
    if count is None:
        return None
    return edge.ValuesCount(lt=count.lt, gt=count.gt, lte=count.lte, gte=count.gte)


# ---------------------------------------------------------------------------------------------------- read options


def edge_search_params(params: Any, call: str) -> Optional[edge.SearchParams]:
    """``hnsw_ef``, ``exact``, quantization rescoring, ``indexed_only``, ACORN and the IDF corpus, as given."""
    if params is None:
        return None
    if isinstance(params, dict):  # as qdrant-client and LlamaIndex accept them
        params = rest.SearchParams(**params)
    quantization = None
    if params.quantization is not None:
        q = params.quantization
        quantization = edge.QuantizationSearchParams(
            ignore=bool(q.ignore), rescore=q.rescore, oversampling=q.oversampling
        )
    acorn = None
    if params.acorn is not None:
        acorn = edge.AcornSearchParams(enable=bool(params.acorn.enable), max_selectivity=params.acorn.max_selectivity)
    idf = None
    if isinstance(params.idf, rest.IdfCorpusParams):
        idf = edge.IdfParams(corpus=edge_filter(params.idf.corpus, call))
    elif params.idf is not None and params.idf != rest.IdfScope.GLOBAL:
        raise EdgeUnsupportedError(call, f"search_params.idf {params.idf!r}")
    return edge.SearchParams(
        hnsw_ef=params.hnsw_ef,
        exact=bool(params.exact),
        quantization=quantization,
        indexed_only=bool(params.indexed_only),
        acorn=acorn,
        idf=idf,
    )


def edge_with_payload(with_payload: Any, call: str) -> Any:
    """True, False, a list of keys, or an include / exclude selector."""
    if with_payload is None or isinstance(with_payload, bool):
        return bool(with_payload)
    if isinstance(with_payload, rest.PayloadSelectorInclude):
        return edge.PayloadSelector.Include(list(with_payload.include))
    if isinstance(with_payload, rest.PayloadSelectorExclude):
        return edge.PayloadSelector.Exclude(list(with_payload.exclude))
    if isinstance(with_payload, (list, tuple)):
        return [str(key) for key in with_payload]
    raise EdgeUnsupportedError(call, f"with_payload {with_payload!r}")


def edge_with_vectors(with_vectors: Any, call: str) -> Any:
    """True, False, or the names of the vectors to return."""
    if with_vectors is None or isinstance(with_vectors, bool):
        return bool(with_vectors)
    if isinstance(with_vectors, (list, tuple)):
        return [str(name) for name in with_vectors]
    raise EdgeUnsupportedError(call, f"with_vectors {with_vectors!r}")


# ---------------------------------------------------------------------------------------------------- vectors, points


def _floats(values: Any) -> list[float]:
    return [float(v) for v in values]


def _is_multivector(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and len(value) > 0 and isinstance(value[0], (list, tuple, np.ndarray))


def _one_vector(value: Any, call: str) -> Any:
    """A dense vector, a multivector (rows) or a sparse vector, as Edge takes it."""
    if isinstance(value, rest.SparseVector):
        return edge.SparseVector(list(value.indices), _floats(value.values))
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if _is_multivector(value):
        return [_floats(row) for row in value]
    if isinstance(value, (list, tuple)):
        return _floats(value)
    raise EdgeUnsupportedError(
        call,
        f"vector of type {type(value).__name__}",
        "documents and images are embedded by the client with fastembed before they reach Edge; without it they "
        "cannot be stored",
    )


def edge_vector_struct(vector: Any, call: str) -> Any:
    """A point's vector(s): one unnamed vector, or ``{name: dense | multivector | sparse}``."""
    if isinstance(vector, Mapping):
        return {str(name): _one_vector(value, call) for name, value in vector.items()}
    return _one_vector(vector, call)


def jsonable_payload(payload: Any) -> Optional[dict[str, Any]]:
    """A payload as JSON holds it (dates and UUIDs as strings), as a server stores it."""
    if payload is None:
        return None
    return to_jsonable_python(payload)


def edge_point(point: Any, call: str) -> edge.Point:
    """A ``PointStruct`` (or a ``Record``) as an Edge point."""
    vector = point.vector
    if vector is None:
        vector = {}
    return edge.Point(edge_id(point.id, call), edge_vector_struct(vector, call), jsonable_payload(point.payload))


def vector_from_edge(vector: Any) -> Any:
    """Edge's vector output as qdrant-client's: sparse vectors as ``models.SparseVector``, the rest as lists."""
    if vector is None:
        return None
    if isinstance(vector, dict):
        return {name: _vector_out(value) for name, value in vector.items()}
    return _vector_out(vector)


def _vector_out(value: Any) -> Any:
    if isinstance(value, edge.SparseVector):
        return rest.SparseVector(indices=list(value.indices), values=_floats(value.values))
    if _is_multivector(value):
        return [_floats(row) for row in value]
    return _floats(value)


def scored_point_from_edge(point: Any) -> rest.ScoredPoint:
    return rest.ScoredPoint(
        id=point_id_from_edge(point.id),
        version=point.version,
        score=point.score,
        payload=point.payload,
        vector=vector_from_edge(point.vector),
        order_value=point.order_value,
    )


def record_from_edge(record: Any) -> rest.Record:
    return rest.Record(
        id=point_id_from_edge(record.id),
        payload=record.payload,
        vector=vector_from_edge(record.vector),
        order_value=record.order_value,
    )


# ---------------------------------------------------------------------------------------------------- queries

# how a query's point ids become vectors: (id, vector name, lookup location) -> the stored vector
VectorLookup = Callable[[PointId, Optional[str], Optional[rest.LookupLocation]], Any]


class QueryTranslator:
    """The scoring queries and prefetches of one request, as Edge takes them.

    A point id given where a vector is expected is looked up through ``lookup`` (Edge takes only vectors); ids of
    this collection used that way are left out of that stage's results, as a server leaves them out.
    """

    def __init__(self, call: str, collection_name: str, lookup: VectorLookup) -> None:
        self.call = call
        self.collection_name = collection_name
        self._lookup = lookup

    # ------------------------------------------------------------------ stages
    def stage(
        self,
        query: Any,
        using: Optional[str],
        lookup_from: Optional[rest.LookupLocation],
        query_filter: Optional[rest.Filter],
        limit: int,
    ) -> tuple[Any, Optional[edge.Filter]]:
        """A stage's scoring query and its filter (with the ids the query names as examples left out)."""
        mentioned: list[PointId] = []
        scoring = self.scoring(query, using, lookup_from, limit, mentioned)
        return scoring, edge_filter(exclude_ids(query_filter, mentioned), self.call)

    def prefetches(self, prefetch: Any) -> Optional[list[edge.Prefetch]]:
        if prefetch is None:
            return None
        items = prefetch if isinstance(prefetch, (list, tuple)) else [prefetch]
        return [self.prefetch(p) for p in items if p is not None] or None

    def prefetch(self, prefetch: rest.Prefetch) -> edge.Prefetch:
        if not isinstance(prefetch, rest.Prefetch):
            raise TypeError(f"{self.call}: prefetch must be a qdrant_client.models.Prefetch, got {type(prefetch)}")
        limit = prefetch.limit if prefetch.limit is not None else 10
        scoring, stage_filter = self.stage(prefetch.query, prefetch.using, prefetch.lookup_from, prefetch.filter, limit)
        return edge.Prefetch(
            limit=limit,
            query=scoring,
            prefetches=self.prefetches(prefetch.prefetch),
            params=edge_search_params(prefetch.params, self.call),
            filter=stage_filter,
            score_threshold=prefetch.score_threshold,
        )

    # ------------------------------------------------------------------ scoring queries
    def scoring(
        self,
        query: Any,
        using: Optional[str],
        lookup_from: Optional[rest.LookupLocation],
        limit: int,
        mentioned: list[PointId],
    ) -> Any:
        """Edge's scoring query for any qdrant-client query: a bare vector or id means the nearest to it."""
        if query is None:
            return None
        if not isinstance(query, get_args(rest.Query)):
            query = rest.NearestQuery(nearest=query) if _is_vector_input(query) else query
        using = using or None  # the unnamed vector: Edge reads "" and None alike

        def vector(value: Any) -> Any:
            return self._vector(value, using, lookup_from, mentioned)

        if isinstance(query, rest.NearestQuery):
            target = vector(query.nearest)
            if query.mmr is not None:
                diversity = query.mmr.diversity if query.mmr.diversity is not None else 0.5
                candidates = query.mmr.candidates_limit if query.mmr.candidates_limit is not None else limit
                return edge.Mmr(target, 1.0 - diversity, candidates, using=using)
            return edge.Query.Nearest(target, using=using)
        if isinstance(query, rest.RecommendQuery):
            return self._recommend(query.recommend, using, vector)
        if isinstance(query, rest.DiscoverQuery):
            pairs = [edge.ContextPair(vector(p.positive), vector(p.negative)) for p in _pairs(query.discover.context)]
            return edge.Query.Discover(edge.DiscoverQuery(vector(query.discover.target), pairs), using=using)
        if isinstance(query, rest.ContextQuery):
            pairs = [edge.ContextPair(vector(p.positive), vector(p.negative)) for p in _pairs(query.context)]
            return edge.Query.Context(edge.ContextQuery(pairs), using=using)
        if isinstance(query, rest.RelevanceFeedbackQuery):
            feedback = query.relevance_feedback
            naive = feedback.strategy.naive
            return edge.Query.FeedbackNaive(
                edge.FeedbackNaiveQuery(
                    vector(feedback.target),
                    [edge.FeedbackItem(vector(item.example), item.score) for item in feedback.feedback],
                    edge.NaiveFeedbackStrategy(naive.a, naive.b, naive.c),
                ),
                using=using,
            )
        if isinstance(query, rest.OrderByQuery):
            return self.order_by(query.order_by)
        if isinstance(query, rest.FusionQuery):
            if query.fusion == rest.Fusion.RRF:
                return edge.Fusion.Rrf(k=DEFAULT_RRF_K)
            return edge.Fusion.Dbsf()
        if isinstance(query, rest.RrfQuery):
            k = query.rrf.k if query.rrf.k is not None else DEFAULT_RRF_K
            return edge.Fusion.Rrf(k=k, weights=query.rrf.weights)
        if isinstance(query, rest.FormulaQuery):
            return edge.Formula(self.expression(query.formula), defaults=dict(query.defaults or {}))
        if isinstance(query, rest.SampleQuery):
            return edge.Sample.Random
        if isinstance(query, rest.TextQuery):
            return self._text(query, using)
        raise EdgeUnsupportedError(self.call, f"query {type(query).__name__}")

    def order_by(self, order_by: Any) -> edge.OrderBy:
        if isinstance(order_by, str):
            return edge.OrderBy(order_by)
        start = order_by.start_from
        if isinstance(start, (datetime, date)):
            start = start.isoformat()
        direction = _maybe_enum(edge.Direction, order_by.direction, self.call, "order_by direction")
        return edge.OrderBy(order_by.key, direction=direction, start_from=start)

    def _recommend(self, recommend: rest.RecommendInput, using: Optional[str], vector: Callable[[Any], Any]) -> Any:
        positives = [vector(v) for v in recommend.positive or []]
        negatives = [vector(v) for v in recommend.negative or []]
        strategy = recommend.strategy or rest.RecommendStrategy.AVERAGE_VECTOR
        if strategy == rest.RecommendStrategy.BEST_SCORE:
            return edge.Query.RecommendBestScore(edge.RecommendQuery(positives, negatives), using=using)
        if strategy == rest.RecommendStrategy.SUM_SCORES:
            return edge.Query.RecommendSumScores(edge.RecommendQuery(positives, negatives), using=using)
        if not positives:
            raise ValueError(f"{self.call}: the average_vector recommend strategy needs at least one positive example")
        if not all(isinstance(v, list) and v and isinstance(v[0], float) for v in positives + negatives):
            raise EdgeUnsupportedError(
                self.call, "recommend strategy average_vector on sparse or multi vectors", "use best_score"
            )
        # Qdrant's average_vector: the positives' mean, moved away from the negatives' mean
        mean_positive = np.mean(np.asarray(positives, dtype=np.float64), axis=0)
        target = mean_positive
        if negatives:
            target = 2 * mean_positive - np.mean(np.asarray(negatives, dtype=np.float64), axis=0)
        return edge.Query.Nearest(target.tolist(), using=using)

    def _text(self, query: rest.TextQuery, using: Optional[str]) -> edge.TextQuery:
        if not using:
            raise ValueError(f"{self.call}: a text query names its payload field with `using`")
        text = query.text
        if isinstance(text, str):
            return edge.TextQuery(using, text)
        scoring = None
        if text.scoring is not None:
            bm25 = text.scoring.bm25
            scoring = edge.Bm25Params(k=bm25.k, b=bm25.b)
        return edge.TextQuery(using, text.query, scoring=scoring)

    def _vector(
        self, value: Any, using: Optional[str], lookup_from: Optional[rest.LookupLocation], mentioned: list[PointId]
    ) -> Any:
        if isinstance(value, (int, str, uuid.UUID)) and not isinstance(value, bool):
            point = edge_id(value, self.call)
            if lookup_from is None or lookup_from.collection == self.collection_name:
                mentioned.append(point)
            return self._lookup(point, using, lookup_from)
        return _one_vector(value, self.call)

    # ------------------------------------------------------------------ formula expressions
    def expression(self, expression: Any) -> edge.Expression:
        """A formula expression: constants, variables (``$score[i]``, payload keys), conditions and operators."""
        e = edge.Expression
        if isinstance(expression, bool):
            raise TypeError(f"{self.call}: a formula term cannot be a bool, got {expression!r}")
        if isinstance(expression, (int, float)):
            return e.Constant(float(expression))
        if isinstance(expression, str):
            return e.Variable(expression)
        if isinstance(expression, get_args(rest.Condition)):
            return e.Condition(_condition(expression, self.call))
        many = {
            rest.MultExpression: ("mult", e.Mult),
            rest.SumExpression: ("sum", e.Sum),
            rest.MaxExpression: ("max", e.Max),
            rest.MinExpression: ("min", e.Min),
        }
        for kind, (field, build) in many.items():
            if isinstance(expression, kind):
                return build([self.expression(x) for x in getattr(expression, field)])
        one = {
            rest.NegExpression: ("neg", e.Neg),
            rest.AbsExpression: ("abs", e.Abs),
            rest.SqrtExpression: ("sqrt", e.Sqrt),
            rest.ExpExpression: ("exp", e.Exp),
            rest.Log10Expression: ("log10", e.Log10),
            rest.LnExpression: ("ln", e.Ln),
            rest.AcoshExpression: ("acosh", e.Acosh),
        }
        for kind, (field, build) in one.items():
            if isinstance(expression, kind):
                return build(self.expression(getattr(expression, field)))
        if isinstance(expression, rest.DivExpression):
            div = expression.div
            return e.Div(self.expression(div.left), self.expression(div.right), by_zero_default=div.by_zero_default)
        if isinstance(expression, rest.PowExpression):
            return e.Pow(self.expression(expression.pow.base), self.expression(expression.pow.exponent))
        if isinstance(expression, rest.GeoDistance):
            return e.GeoDistance(_geo_point(expression.geo_distance.origin), expression.geo_distance.to)
        if isinstance(expression, rest.DatetimeExpression):
            return e.Datetime(expression.datetime)
        if isinstance(expression, rest.DatetimeKeyExpression):
            return e.DatetimeKey(expression.datetime_key)
        decays = {
            rest.LinDecayExpression: ("lin_decay", edge.DecayKind.Lin),
            rest.ExpDecayExpression: ("exp_decay", edge.DecayKind.Exp),
            rest.GaussDecayExpression: ("gauss_decay", edge.DecayKind.Gauss),
        }
        for kind, (field, decay) in decays.items():
            if isinstance(expression, kind):
                params = getattr(expression, field)
                target = None if params.target is None else self.expression(params.target)
                return e.Decay(decay, self.expression(params.x), target, params.midpoint, params.scale)
        raise EdgeUnsupportedError(self.call, f"formula expression {type(expression).__name__}")


def _is_vector_input(value: Any) -> bool:
    vector_like = (list, tuple, np.ndarray, rest.SparseVector, int, str, uuid.UUID)
    return isinstance(value, vector_like) and not isinstance(value, bool)


def _pairs(context: Any) -> list[rest.ContextPair]:
    if context is None:
        return []
    return list(context) if isinstance(context, (list, tuple)) else [context]


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
        memory=_maybe_enum(edge.Memory, values.get("memory"), call, "hnsw_config.memory"),
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
            _edge_enum(edge.ScalarType, scalar.type, call, "scalar quantization type"),
            quantile=scalar.quantile,
            always_ram=scalar.always_ram,
            memory=_maybe_enum(edge.Memory, scalar.memory, call, "quantization memory"),
        )
    if isinstance(config, rest.ProductQuantization):
        product = config.product
        return edge.ProductQuantizationConfig(
            _edge_enum(edge.CompressionRatio, product.compression, call, "product quantization compression"),
            always_ram=product.always_ram,
            memory=_maybe_enum(edge.Memory, product.memory, call, "quantization memory"),
        )
    if isinstance(config, rest.BinaryQuantization):
        binary = config.binary
        return edge.BinaryQuantizationConfig(
            always_ram=binary.always_ram,
            encoding=_maybe_enum(edge.BinaryQuantizationEncoding, binary.encoding, call, "binary encoding"),
            query_encoding=_maybe_enum(
                edge.BinaryQuantizationQueryEncoding, binary.query_encoding, call, "binary query encoding"
            ),
            memory=_maybe_enum(edge.Memory, binary.memory, call, "quantization memory"),
        )
    if isinstance(config, rest.TurboQuantization):
        turbo = config.turbo
        return edge.TurboQuantQuantizationConfig(
            always_ram=turbo.always_ram,
            bits=_maybe_enum(edge.TurboQuantBitSize, turbo.bits, call, "turbo quantization bits"),
            memory=_maybe_enum(edge.Memory, turbo.memory, call, "quantization memory"),
        )
    raise EdgeUnsupportedError(call, f"quantization_config {type(config).__name__}")


def _vector_params(params: rest.VectorParams, graph: Mapping[str, Any], call: str) -> edge.EdgeVectorParams:
    multivector = None
    if params.multivector_config is not None:
        comparator = _edge_enum(
            edge.MultiVectorComparator, params.multivector_config.comparator, call, "multivector comparator"
        )
        multivector = edge.MultiVectorConfig(comparator)
    return edge.EdgeVectorParams(
        size=params.size,
        distance=_edge_enum(edge.Distance, params.distance, call, "distance"),
        on_disk=params.on_disk,
        multivector_config=multivector,
        datatype=_maybe_enum(edge.VectorStorageDatatype, params.datatype, call, "vector datatype"),
        quantization_config=_quantization(params.quantization_config, call),
        hnsw_config=_hnsw(params.hnsw_config, graph, call),
        memory=_maybe_enum(edge.Memory, params.memory, call, "vector memory"),
    )


def _sparse_params(params: rest.SparseVectorParams, call: str) -> edge.EdgeSparseVectorParams:
    index = params.index or rest.SparseIndexParams()
    modifier = None
    if params.modifier is not None and params.modifier != rest.Modifier.NONE:
        modifier = _edge_enum(edge.Modifier, params.modifier, call, "sparse modifier")
    return edge.EdgeSparseVectorParams(
        full_scan_threshold=index.full_scan_threshold,
        on_disk=index.on_disk,
        modifier=modifier,
        datatype=_maybe_enum(edge.VectorStorageDatatype, index.datatype, call, "sparse datatype"),
        memory=_maybe_enum(edge.Memory, index.memory, call, "sparse index memory"),
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
        payload_memory=_maybe_enum(edge.Memory, payload_memory, call, "payload memory"),
        id_tracker_memory=_maybe_enum(edge.Memory, tracker_memory, call, "id tracker memory"),
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
        return _edge_enum(edge.PayloadSchemaType, schema, call, "payload index type")
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
        return _edge_enum(edge.Memory, value, call, "payload index memory")
    if name == "tokenizer":
        return _edge_enum(edge.TokenizerType, value, call, "text index tokenizer")
    if name == "stopwords":
        if isinstance(value, rest.StopwordsSet):
            languages = None
            if value.languages is not None:
                languages = {_edge_enum(edge.Language, lang, call, "stopwords language") for lang in value.languages}
            return edge.StopwordsSet(languages=languages, custom=set(value.custom) if value.custom else None)
        return _edge_enum(edge.Language, value, call, "stopwords language")
    if name == "stemmer":
        if isinstance(value, rest.SnowballParams):
            return edge.SnowballParams(_edge_enum(edge.SnowballLanguage, value.language, call, "stemmer language"))
        return edge.DisabledStemmer()
    if name == "scoring":
        if isinstance(value, bool):
            return value
        return edge.TextScoringParams(_edge_enum(edge.TextScoringType, value.type, call, "text scoring type"))
    if isinstance(value, (bool, int, float, str)):
        return value
    raise EdgeUnsupportedError(call, f"payload index parameter {name}={value!r}")
