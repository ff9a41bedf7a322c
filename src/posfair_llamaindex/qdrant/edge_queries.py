"""qdrant-client's query API (queries, prefetches, fusion, formulas) and read options as Qdrant Edge requests.

A server takes point ids where a vector is expected and leaves those points out of the answer; Edge takes only
vectors. The translator looks the ids up, and excludes them, so a query means on Edge what it means on a server.
Each query kind Edge has no counterpart for is refused by name rather than approximated.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import date, datetime
from typing import Any, Optional, get_args

import numpy as np
from qdrant_client.http import models as rest
from qdrant_client.local.local_collection import LocalCollection, ignore_mentioned_ids_filter

from posfair_llamaindex.errors import EdgeUnsupportedError
from posfair_llamaindex.qdrant.edge_binding import edge
from posfair_llamaindex.qdrant.edge_config import maybe_edge_enum
from posfair_llamaindex.qdrant.edge_filters import edge_condition, edge_filter, edge_geo_point
from posfair_llamaindex.qdrant.edge_points import PointId, edge_id, edge_vector

__all__ = [
    "DEFAULT_RRF_K",
    "QueryTranslator",
    "VectorLookup",
    "check_limit",
    "edge_search_params",
    "edge_with_payload",
    "edge_with_vectors",
]

# Qdrant's RRF constant when a query leaves k unset
DEFAULT_RRF_K = 2

# how a query's point ids become vectors: (id, vector name, lookup location) -> the stored vector
VectorLookup = Callable[[PointId, Optional[str], Optional[rest.LookupLocation]], Any]


def check_limit(call: str, limit: Any, name: str = "limit") -> None:
    """A read's ``limit`` as a server checks it: an int of 1 or more."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"{call}: {name} value {limit!r} is invalid. Must be 1 or larger.")


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


# ---------------------------------------------------------------------------------------------------- queries


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
        return scoring, edge_filter(ignore_mentioned_ids_filter(query_filter, mentioned), self.call)

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
        direction = maybe_edge_enum(edge.Direction, order_by.direction, self.call, "order_by direction")
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
            # local mode averages these too (sparse_avg, _recommend_average_multi); answering them is a new feature
            raise EdgeUnsupportedError(
                self.call, "recommend strategy average_vector on sparse or multi vectors", "use best_score"
            )
        # Qdrant's average_vector (the positives' mean, moved away from the negatives' mean), as local mode computes it
        target = LocalCollection._recommend_average_dense(positives, negatives)
        return edge.Query.Nearest(np.asarray(target, dtype=np.float64).tolist(), using=using)

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
        return edge_vector(value, self.call)

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
            return e.Condition(edge_condition(expression, self.call))
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
            return e.GeoDistance(edge_geo_point(expression.geo_distance.origin), expression.geo_distance.to)
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
