"""qdrant-client filters as Qdrant Edge filters, and the points a selector names.

Every read and most writes pick points by a filter, so one translation serves them all: a condition or a match
that Edge has no counterpart for is refused by name (:class:`EdgeUnsupportedError`) rather than dropped, because a
dropped condition would silently select more points than the caller asked for.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, Optional

import numpy as np
from qdrant_client.http import models as rest

from posfair_llamaindex.errors import EdgeUnsupportedError
from posfair_llamaindex.qdrant.edge_binding import edge
from posfair_llamaindex.qdrant.edge_points import PointId, edge_id

__all__ = ["edge_condition", "edge_filter", "edge_geo_point", "selected_points"]


def edge_filter(query_filter: Any, call: str) -> Optional[edge.Filter]:
    """A qdrant-client ``Filter`` (must, should, must_not, min_should, nested to any depth) as an Edge filter."""
    if query_filter is None:
        return None
    if not isinstance(query_filter, rest.Filter):
        raise TypeError(f"{call}: a filter must be a qdrant_client.models.Filter, got {type(query_filter).__name__}")
    min_should = None
    if query_filter.min_should is not None:
        min_should = edge.MinShould(
            [edge_condition(c, call) for c in query_filter.min_should.conditions], query_filter.min_should.min_count
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
    return [edge_condition(c, call) for c in conditions]


def edge_condition(condition: Any, call: str) -> Any:
    """One condition of a filter (a nested filter included), as Edge takes it."""
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


def edge_geo_point(point: rest.GeoPoint) -> edge.GeoPoint:
    return edge.GeoPoint(lon=point.lon, lat=point.lat)


def _bounding_box(box: Optional[rest.GeoBoundingBox]) -> Optional[edge.GeoBoundingBox]:
    return None if box is None else edge.GeoBoundingBox(edge_geo_point(box.top_left), edge_geo_point(box.bottom_right))


def _radius(radius: Optional[rest.GeoRadius]) -> Optional[edge.GeoRadius]:
    return None if radius is None else edge.GeoRadius(edge_geo_point(radius.center), radius.radius)


def _polygon(polygon: Optional[rest.GeoPolygon]) -> Optional[edge.GeoPolygon]:
    if polygon is None:
        return None
    interiors = None
    if polygon.interiors is not None:
        interiors = [[edge_geo_point(p) for p in ring.points] for ring in polygon.interiors]
    return edge.GeoPolygon([edge_geo_point(p) for p in polygon.exterior.points], interiors)


def _values_count(count: Optional[rest.ValuesCount]) -> Optional[edge.ValuesCount]:
    if count is None:
        return None
    return edge.ValuesCount(lt=count.lt, gt=count.gt, lte=count.lte, gte=count.gte)


# ---------------------------------------------------------------------------------------------------- selectors


def selected_points(selector: Any, call: str) -> tuple[Optional[list[PointId]], Optional[edge.Filter]]:
    """``(ids, None)`` or ``(None, filter)`` for any qdrant-client points selector (shard keys refused)."""
    if isinstance(selector, rest.PointIdsList):
        _refuse_shard_key(call, selector.shard_key)
        return [edge_id(i, call) for i in selector.points], None
    if isinstance(selector, rest.FilterSelector):
        _refuse_shard_key(call, selector.shard_key)
        return None, edge_filter(selector.filter, call)
    if isinstance(selector, rest.Filter):
        return None, edge_filter(selector, call)
    if isinstance(selector, (list, tuple)):
        return [edge_id(i, call) for i in selector], None
    raise TypeError(f"{call}: points must be a list of ids, a Filter, PointIdsList or FilterSelector")


def _refuse_shard_key(call: str, shard_key: Any) -> None:
    if shard_key is not None:
        raise EdgeUnsupportedError(call, f"shard_key={shard_key!r}", "an Edge collection is a single shard")
