"""Points between qdrant-client and Qdrant Edge: ids, vectors and payloads in, records and scored points out.

A server normalises what it stores (UUIDs in canonical form, payloads as JSON) and answers in qdrant-client's
models; Edge takes and gives its own objects. Doing both here, once, means a point reads back from Edge exactly as
it would from a server, whichever call wrote or read it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple, Optional, Union

import numpy as np
from pydantic_core import to_jsonable_python
from qdrant_client.http import models as rest
from qdrant_client.uploader.uploader import BaseUploader

from posfair_llamaindex.errors import EdgeUnsupportedError
from posfair_llamaindex.qdrant.edge_binding import edge

__all__ = [
    "PointId",
    "PointRow",
    "batch_rows",
    "edge_id",
    "edge_point",
    "edge_points",
    "edge_vector",
    "edge_vector_struct",
    "jsonable_payload",
    "point_id_from_edge",
    "record_from_edge",
    "scored_point_from_edge",
    "upload_rows",
    "vector_from_edge",
]

PointId = Union[int, str]


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


# ---------------------------------------------------------------------------------------------------- vectors


def _floats(values: Any) -> list[float]:
    return [float(v) for v in values]


def _is_multivector(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and len(value) > 0 and isinstance(value[0], (list, tuple, np.ndarray))


def edge_vector(value: Any, call: str) -> Any:
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
        return {str(name): edge_vector(value, call) for name, value in vector.items()}
    return edge_vector(vector, call)


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


# ---------------------------------------------------------------------------------------------------- points


def jsonable_payload(payload: Any) -> Optional[dict[str, Any]]:
    """A payload as JSON holds it (dates and UUIDs as strings), as a server stores it."""
    if payload is None:
        return None
    return to_jsonable_python(payload)


def edge_point(point: Any, call: str) -> edge.Point:
    """A ``PointStruct`` (or a ``Record``, or a :class:`PointRow`) as an Edge point."""
    vector = point.vector
    if vector is None:
        vector = {}
    return edge.Point(edge_id(point.id, call), edge_vector_struct(vector, call), jsonable_payload(point.payload))


def edge_points(points: Any, call: str) -> list[edge.Point]:
    """An upsert's points: a list of ``PointStruct`` or a column ``Batch``."""
    if isinstance(points, rest.Batch):
        points = batch_rows(points)
    return [edge_point(p, call) for p in points]


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


# ---------------------------------------------------------------------------------------------------- columns


class PointRow(NamedTuple):
    """One point of a column upload: what :func:`edge_point` reads from a ``PointStruct``."""

    id: Any
    vector: Any
    payload: Any


def batch_rows(batch: rest.Batch) -> list[PointRow]:
    """A column ``Batch`` (ids, vectors, payloads) as one row per point."""
    vectors = batch.vectors
    count = len(batch.ids)
    if isinstance(vectors, dict):
        rows = [{name: values[i] for name, values in vectors.items()} for i in range(count)]
    else:
        rows = list(vectors)
    payloads = batch.payloads if batch.payloads is not None else [None] * count
    if not len(rows) == len(payloads) == count:
        raise ValueError(f"a Batch needs as many vectors and payloads as ids ({count})")
    return [PointRow(i, v, p) for i, v, p in zip(batch.ids, rows, payloads, strict=True)]


def upload_rows(
    vectors: Any, payload: Optional[Iterable[Any]], ids: Optional[Iterable[Any]], batch_size: int
) -> Iterator[list[PointRow]]:
    """``upload_collection``'s columns as batches of rows, cut as qdrant-client cuts them for a server (rows of an
    array, of ``{name: array}`` or of any iterable of vector structs); points without ids get random UUIDs."""
    for id_batch, vector_batch, payload_batch in BaseUploader.iterate_batches(vectors, payload, ids, batch_size):
        point_ids = id_batch if id_batch is not None else [str(uuid.uuid4()) for _ in vector_batch]
        payloads = payload_batch if payload_batch is not None else [None] * len(vector_batch)
        yield [PointRow(i, v, p) for i, v, p in zip(point_ids, vector_batch, payloads, strict=False)]
