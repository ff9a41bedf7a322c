"""EdgeQdrantClient: qdrant-client's interface on Qdrant Edge shards, checked against qdrant-client's local mode.

The same points go to local mode (Qdrant re-implemented in Python) and to Edge (Qdrant's own engine, in-process): every
filter LlamaIndex's MetadataFilters produce and then some, and dense, named, multivector, sparse, prefetch + fusion and
formula queries must find the same points. Then what only a store on disk has: reopening, writes surviving kill -9, one
process per folder, folders that are not stores; and LlamaIndex's QdrantVectorStore and tagged_vector_store on it.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("qdrant_edge", reason="qdrant-edge-py is in the dev extra")

from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode  # noqa: E402
from llama_index.core.vector_stores.types import (  # noqa: E402
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)
from llama_index.vector_stores.qdrant import QdrantVectorStore  # noqa: E402
from qdrant_client import QdrantClient, models  # noqa: E402

from posfair_llamaindex import PosFairEmbedding, WindowConfig  # noqa: E402
from posfair_llamaindex.errors import (  # noqa: E402
    EdgeClosedError,
    EdgeRequestError,
    EdgeStoreLockedError,
    EdgeStoreVersionError,
    EdgeUnsupportedError,
    NotAnEdgeStoreError,
)
from posfair_llamaindex.qdrant import atagged_vector_store, tagged_vector_store  # noqa: E402
from posfair_llamaindex.qdrant.edge_client import AsyncEdgeQdrantClient, EdgeQdrantClient  # noqa: E402
from posfair_llamaindex.qdrant.edge_store import MARKER_FILE, is_edge_store  # noqa: E402
from tests.qdrant import edge_children  # noqa: E402
from tests.qdrant.conftest import make_nodes, sparse_encode, unit_vector  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DIM = 8
POINTS = 150
COLOURS = ("red", "green", "blue")
WORDS = ("river", "museum", "bridge", "barley", "harbour", "castle", "lantern", "orchard")
F, FC = models.Filter, models.FieldCondition
CHILD_TIMEOUT_S = 120


# ---------------------------------------------------------------------------------------------------- the world


def world_points(count: int = POINTS, seed: int = 0) -> list[models.PointStruct]:
    """Points with every kind of payload a filter can meet, int and UUID ids, dense, multi and sparse vectors."""
    rng = random.Random(seed)
    points = []
    for i in range(count):
        payload = {
            "rank": i,
            "colour": COLOURS[i % 3],
            "price": round(rng.uniform(0, 100), 2),
            "flag": i % 2 == 0,
            "text": " ".join(rng.choice(WORDS) for _ in range(5)),
            "tags": [f"t{i % 4}", f"t{i % 5}"],
            "info": {"city": ("Paris", "Oslo", "Rome")[i % 3], "zip": i % 7},
            "offers": [{"price": i % 10, "shop": "a"}, {"price": (i * 3) % 10, "shop": "b"}],
            "when": f"2024-01-{(i % 28) + 1:02d}T00:00:00Z",
            "mixed": i if i % 2 else str(i),
        }
        payload["empty"] = {0: [], 1: None, 2: [1]}.get(i % 10, "x")
        if i % 6 < 2:
            payload["maybe"] = None if i % 6 == 0 else "x"
        point_id = i * 10 if i % 4 == 0 else str(uuid.UUID(int=rng.getrandbits(128), version=4))
        indices = sorted(rng.sample(range(50), 5))
        vector = {
            "dense": unit_vector(rng, DIM),
            "multi": [unit_vector(rng, DIM) for _ in range(1 + i % 3)],
            "sparse": models.SparseVector(indices=indices, values=[rng.uniform(0.1, 2.0) for _ in indices]),
        }
        if i % 9 == 0:  # some points lack a vector
            del vector["multi"]
        points.append(models.PointStruct(id=point_id, vector=vector, payload=payload))
    return points


def create_world(client, name: str = "world", idf: bool = False, points=None) -> None:
    max_sim = models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM)
    client.create_collection(
        name,
        vectors_config={
            "dense": models.VectorParams(size=DIM, distance=models.Distance.COSINE),
            "multi": models.VectorParams(size=DIM, distance=models.Distance.DOT, multivector_config=max_sim),
        },
        sparse_vectors_config={"sparse": models.SparseVectorParams(modifier=models.Modifier.IDF if idf else None)},
    )
    client.upsert(name, points if points is not None else world_points())


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The same collections in local mode and on Edge: ``world`` (plain sparse) and ``idf`` (IDF sparse)."""
    local = QdrantClient(":memory:")
    client = EdgeQdrantClient(tmp_path_factory.mktemp("edge") / "store")
    for c in (local, client):
        create_world(c)
        create_world(c, "idf", idf=True)
    client.create_payload_index("world", "rank", models.PayloadSchemaType.INTEGER)  # order_by needs a range index
    yield local, client
    client.close()


@pytest.fixture
def store(tmp_path):
    client = EdgeQdrantClient(tmp_path / "store")
    yield client
    client.close()


def scroll_ids(client, collection: str, query_filter=None) -> list:
    records, _ = client.scroll(collection, scroll_filter=query_filter, limit=10_000)
    return sorted(str(r.id) for r in records)


def assert_same_ranking(local: list, found: list, tolerance: float = 1e-5) -> None:
    """The same scores in the same order, and the same ids wherever a score is not tied.

    Tied points may come in any order, and a tie at the cut may leave either of them out, so the ids of tied scores
    and of the last score are not compared.
    """
    assert len(found) == len(local)
    assert [p.score for p in found] == pytest.approx([p.score for p in local], abs=tolerance)
    scores = [round(p.score, 4) for p in local]
    tied = Counter(scores)
    for a, b, score in zip(local, found, scores, strict=True):
        if tied[score] == 1 and score != scores[-1]:
            assert a.id == b.id


def assert_same_result(expected, found, tolerance: float = 1e-5) -> None:
    """:func:`assert_same_ranking` for two LlamaIndex query results."""
    assert_same_ranking(
        [
            models.ScoredPoint(id=i, version=0, score=s)
            for i, s in zip(expected.ids, expected.similarities, strict=True)
        ],
        [models.ScoredPoint(id=i, version=0, score=s) for i, s in zip(found.ids, found.similarities, strict=True)],
        tolerance,
    )


# ---------------------------------------------------------------------------------------------------- filters

# every operator of LlamaIndex's MetadataFilters (QdrantVectorStore._build_subfilter), and/or/not, nested
LLAMA_FILTERS = {
    "eq str": MetadataFilters(filters=[MetadataFilter(key="colour", value="red")]),
    "eq int": MetadataFilters(filters=[MetadataFilter(key="rank", value=7)]),
    "eq float": MetadataFilters(filters=[MetadataFilter(key="price", value=world_points()[3].payload["price"])]),
    "ne": MetadataFilters(filters=[MetadataFilter(key="colour", value="red", operator=FilterOperator.NE)]),
    "lt": MetadataFilters(filters=[MetadataFilter(key="price", value=30, operator=FilterOperator.LT)]),
    "gt": MetadataFilters(filters=[MetadataFilter(key="rank", value=100, operator=FilterOperator.GT)]),
    "lte": MetadataFilters(filters=[MetadataFilter(key="rank", value=10, operator=FilterOperator.LTE)]),
    "gte": MetadataFilters(filters=[MetadataFilter(key="price", value=75.5, operator=FilterOperator.GTE)]),
    "in": MetadataFilters(filters=[MetadataFilter(key="colour", value=["red", "blue"], operator=FilterOperator.IN)]),
    "in ints": MetadataFilters(filters=[MetadataFilter(key="mixed", value=[1, 3, 5], operator=FilterOperator.IN)]),
    "in csv": MetadataFilters(filters=[MetadataFilter(key="colour", value="red,green", operator=FilterOperator.IN)]),
    "nin": MetadataFilters(filters=[MetadataFilter(key="rank", value=[1, 2, 3], operator=FilterOperator.NIN)]),
    "text": MetadataFilters(filters=[MetadataFilter(key="text", value="river", operator=FilterOperator.TEXT_MATCH)]),
    "text two words": MetadataFilters(
        filters=[MetadataFilter(key="text", value="River museum", operator=FilterOperator.TEXT_MATCH_INSENSITIVE)]
    ),
    "is_empty": MetadataFilters(filters=[MetadataFilter(key="empty", value=None, operator=FilterOperator.IS_EMPTY)]),
    "or": MetadataFilters(
        filters=[
            MetadataFilter(key="colour", value="red"),
            MetadataFilter(key="rank", value=10, operator=FilterOperator.LT),
        ],
        condition=FilterCondition.OR,
    ),
    "not": MetadataFilters(filters=[MetadataFilter(key="colour", value="red")], condition=FilterCondition.NOT),
    "nested and/or/not": MetadataFilters(
        filters=[
            MetadataFilters(
                filters=[
                    MetadataFilter(key="colour", value="red"),
                    MetadataFilters(
                        filters=[MetadataFilter(key="rank", value=60, operator=FilterOperator.LT)],
                        condition=FilterCondition.NOT,
                    ),
                ],
                condition=FilterCondition.OR,
            ),
            MetadataFilter(key="rank", value=30, operator=FilterOperator.GT),
        ]
    ),
}

# what qdrant-client can say beyond LlamaIndex's filters
QDRANT_FILTERS = {
    "is_null": F(must=[models.IsNullCondition(is_null=models.PayloadField(key="maybe"))]),
    "field is_empty false": F(must=[FC(key="empty", is_empty=False)]),
    "has_id": F(must=[models.HasIdCondition(has_id=[0, 40, 80, "00000000-0000-0000-0000-000000000000"])]),
    "min_should": F(
        min_should=models.MinShould(
            conditions=[
                FC(key="colour", match=models.MatchValue(value="red")),
                FC(key="flag", match=models.MatchValue(value=True)),
                FC(key="rank", range=models.Range(lt=50)),
            ],
            min_count=2,
        )
    ),
    "nested key": F(must=[FC(key="info.city", match=models.MatchValue(value="Oslo"))]),
    "array element": F(must=[FC(key="tags", match=models.MatchValue(value="t1"))]),
    "nested objects": F(
        must=[
            models.NestedCondition(
                nested=models.Nested(
                    key="offers",
                    filter=F(
                        must=[
                            FC(key="price", range=models.Range(gte=8)),
                            FC(key="shop", match=models.MatchValue(value="b")),
                        ]
                    ),
                )
            )
        ]
    ),
    "values_count": F(must=[FC(key="tags", values_count=models.ValuesCount(gte=2))]),
    "datetime range": F(
        must=[FC(key="when", range=models.DatetimeRange(gte="2024-01-10T00:00:00Z", lt="2024-01-20T00:00:00Z"))]
    ),
    "has_vector": F(must=[models.HasVectorCondition(has_vector="multi")]),
    "text any": F(must=[FC(key="text", match=models.MatchTextAny(text_any="river castle"))]),
    "phrase": F(must=[FC(key="text", match=models.MatchPhrase(phrase="river museum"))]),
    "prefix": F(must=[FC(key="colour", match=models.MatchPrefix(prefix="gr"))]),
    "substring": F(must=[FC(key="colour", match=models.MatchSubstring(substring="ee"))]),
    "empty should": F(should=[]),
    "slice": F(must=[models.SliceCondition(slice=models.Slice(total=3, index=1))]),
    "eq bool": F(must=[FC(key="flag", match=models.MatchValue(value=True))]),
    "bool except": F(must_not=[FC(key="flag", match=models.MatchValue(value=False))]),
}


@pytest.fixture(scope="module")
def llama_filter(world):
    """LlamaIndex's own translation of MetadataFilters into a qdrant-client Filter."""
    local, _ = world
    return QdrantVectorStore("unused", client=local)._build_subfilter


@pytest.mark.parametrize("name", sorted(LLAMA_FILTERS))
def test_llamaindex_filters_select_the_same_points(world, llama_filter, name):
    local, client = world
    query_filter = llama_filter(LLAMA_FILTERS[name])
    expected = scroll_ids(local, "world", query_filter)
    assert scroll_ids(client, "world", query_filter) == expected
    assert client.count("world", count_filter=query_filter).count == len(expected)
    assert 0 < len(expected) < POINTS  # each filter really selects


@pytest.mark.parametrize("name", sorted(QDRANT_FILTERS))
def test_qdrant_filters_select_the_same_points(world, name):
    local, client = world
    expected = scroll_ids(local, "world", QDRANT_FILTERS[name])
    assert scroll_ids(client, "world", QDRANT_FILTERS[name]) == expected
    assert client.count("world", count_filter=QDRANT_FILTERS[name]).count == len(expected)


# ---------------------------------------------------------------------------------------------------- queries


def _queries() -> dict:
    rng = random.Random(42)
    q, q2 = unit_vector(rng, DIM), unit_vector(rng, DIM)
    sparse = models.SparseVector(indices=[1, 5, 9, 20, 33], values=[1.0, 0.5, 2.0, 1.0, 0.3])
    ids = [p.id for p in world_points()]
    red = F(must=[FC(key="colour", match=models.MatchValue(value="red"))])
    two = [
        models.Prefetch(query=q, using="dense", limit=20),
        models.Prefetch(query=sparse, using="sparse", limit=20),
    ]
    scores = ["$score[0]", "$score[1]"]
    return {
        "dense": dict(query=q, using="dense", limit=10),
        "dense filtered": dict(query=q, using="dense", limit=10, query_filter=red),
        "dense offset": dict(query=q, using="dense", limit=5, offset=3),
        "dense threshold": dict(query=q, using="dense", limit=50, score_threshold=0.3),
        "multivector": dict(query=[q, q2], using="multi", limit=10),
        "sparse": dict(query=sparse, using="sparse", limit=10),
        "rrf": dict(prefetch=two, query=models.FusionQuery(fusion=models.Fusion.RRF), limit=10),
        "weighted rrf": dict(prefetch=two, query=models.RrfQuery(rrf=models.Rrf(k=60, weights=[2.0, 1.0])), limit=10),
        "dbsf": dict(prefetch=two, query=models.FusionQuery(fusion=models.Fusion.DBSF), limit=10),
        "formula max": dict(
            prefetch=[
                models.Prefetch(query=q, using="dense", limit=30),
                models.Prefetch(query=[q2], using="multi", limit=30),
            ],
            query=models.FormulaQuery(formula=models.MaxExpression(max=scores), defaults={s: -1.0 for s in scores}),
            limit=10,
        ),
        "formula sum, mult, condition": dict(
            prefetch=[models.Prefetch(query=q, using="dense", limit=30)],
            query=models.FormulaQuery(
                formula=models.SumExpression(
                    sum=[
                        "$score",
                        models.MultExpression(mult=[0.01, "rank"]),
                        models.MultExpression(mult=[0.5, FC(key="colour", match=models.MatchValue(value="red"))]),
                    ]
                )
            ),
            limit=10,
        ),
        "nested prefetch": dict(
            prefetch=[
                models.Prefetch(
                    prefetch=[models.Prefetch(query=q, using="dense", limit=50)], query=[q2], using="multi", limit=20
                )
            ],
            query=q,
            using="dense",
            limit=5,
        ),
        "nearest to a point id": dict(query=ids[5], using="dense", limit=5),
        "recommend best_score": dict(
            query=models.RecommendQuery(
                recommend=models.RecommendInput(
                    positive=[ids[1], q], negative=[q2], strategy=models.RecommendStrategy.BEST_SCORE
                )
            ),
            using="dense",
            limit=8,
        ),
        "recommend average_vector": dict(
            query=models.RecommendQuery(recommend=models.RecommendInput(positive=[ids[1], q], negative=[q2])),
            using="dense",
            limit=8,
        ),
        "discover": dict(
            query=models.DiscoverQuery(
                discover=models.DiscoverInput(target=q, context=[models.ContextPair(positive=q2, negative=ids[7])])
            ),
            using="dense",
            limit=8,
        ),
        "mmr": dict(
            query=models.NearestQuery(nearest=q, mmr=models.Mmr(diversity=0.5, candidates_limit=30)),
            using="dense",
            limit=8,
        ),
        "order_by": dict(
            query=models.OrderByQuery(order_by=models.OrderBy(key="rank", direction=models.Direction.DESC)), limit=5
        ),
        "no query": dict(limit=5),
    }


QUERIES = _queries()


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_queries_rank_like_local_mode(world, name):
    local, client = world
    expected = local.query_points("world", **QUERIES[name]).points
    assert_same_ranking(expected, client.query_points("world", **QUERIES[name]).points)


@pytest.mark.parametrize("name", ["sparse", "rrf", "dbsf"])
def test_idf_sparse_queries_rank_like_local_mode(world, name):
    local, client = world
    expected = local.query_points("idf", **QUERIES[name]).points
    assert_same_ranking(expected, client.query_points("idf", **QUERIES[name]).points)


def test_payload_and_vector_selection(world):
    local, client = world
    q = QUERIES["dense"]
    for with_payload, with_vectors in [
        (models.PayloadSelectorInclude(include=["colour", "rank"]), ["dense"]),
        (models.PayloadSelectorExclude(exclude=["text", "offers", "tags", "info"]), False),
        (["info.city"], True),
        (False, ["multi", "sparse"]),
    ]:
        expected = local.query_points("world", **q, with_payload=with_payload, with_vectors=with_vectors).points
        found = client.query_points("world", **q, with_payload=with_payload, with_vectors=with_vectors).points
        for a, b in zip(expected, found, strict=True):
            assert b.payload == a.payload
            if a.vector is None:
                assert b.vector is None
                continue
            assert set(b.vector) == set(a.vector)
            for name, vector in a.vector.items():
                if isinstance(vector, models.SparseVector):  # Edge stores sparse values as float32
                    assert b.vector[name].indices == vector.indices
                    assert b.vector[name].values == pytest.approx(vector.values, rel=1e-6)
                else:
                    assert np.asarray(b.vector[name]) == pytest.approx(np.asarray(vector), abs=1e-6)


def test_batch_queries_and_ids_keep_their_type(world):
    local, client = world
    requests = [
        models.QueryRequest(query=QUERIES["dense"]["query"], using="dense", limit=4, with_payload=True),
        models.QueryRequest(query=QUERIES["sparse"]["query"], using="sparse", limit=3),
    ]
    expected, found = local.query_batch_points("world", requests), client.query_batch_points("world", requests)
    for a, b in zip(expected, found, strict=True):
        assert_same_ranking(a.points, b.points)
        assert [p.payload for p in b.points] == [p.payload for p in a.points]
    ids = [p.id for p in client.query_points("world", QUERIES["dense"]["query"], using="dense", limit=POINTS).points]
    assert {type(i) for i in ids} == {int, str}
    assert all(str(uuid.UUID(i)) == i for i in ids if isinstance(i, str))


def test_scroll_pages_and_retrieve(world):
    local, client = world
    red = F(must=[FC(key="colour", match=models.MatchValue(value="red"))])
    for query_filter in (None, red):
        pages = {}
        for name, c in (("local", local), ("edge", client)):
            seen, offset = [], None
            while True:
                records, offset = c.scroll("world", scroll_filter=query_filter, limit=7, offset=offset)
                seen += [r.id for r in records]
                if offset is None:
                    break
            pages[name] = seen
        assert pages["edge"] == pages["local"]
        assert len(set(pages["edge"])) == len(pages["edge"])
    by_rank, _ = client.scroll("world", limit=3, order_by=models.OrderBy(key="rank", direction=models.Direction.DESC))
    assert [r.payload["rank"] for r in by_rank] == [POINTS - 1, POINTS - 2, POINTS - 3]
    ids = [p.id for p in world_points()[:6]] + ["00000000-0000-0000-0000-000000000000"]
    found = client.retrieve("world", ids, with_vectors=["dense"])
    assert [r.id for r in found] == [r.id for r in local.retrieve("world", ids)] == ids[:6]
    assert [r.payload for r in found] == [r.payload for r in local.retrieve("world", ids)]


# ---------------------------------------------------------------------------------------------------- writes


@pytest.fixture
def pair(tmp_path):
    """A fresh ``world`` collection in local mode and on Edge, for tests that change it."""
    local, client = QdrantClient(":memory:"), EdgeQdrantClient(tmp_path / "store")
    for c in (local, client):
        create_world(c, points=world_points(60, seed=3))
    yield local, client
    client.close()


def test_deletes_by_ids_and_by_filter(pair):
    local, client = pair
    ids = [p.id for p in world_points(60, seed=3)]
    red = F(must=[FC(key="colour", match=models.MatchValue(value="red"))])
    for c in (local, client):
        c.delete("world", points_selector=models.PointIdsList(points=ids[:5]))
        c.delete("world", points_selector=[ids[10]])
        c.delete("world", points_selector=models.FilterSelector(filter=red))
        c.delete("world", points_selector=F(must=[FC(key="rank", range=models.Range(gt=50))]))
    assert scroll_ids(client, "world") == scroll_ids(local, "world")
    assert client.count("world").count == local.count("world").count < 40


def test_payload_and_vector_updates(pair):
    local, client = pair
    ids = [p.id for p in world_points(60, seed=3)]
    green = F(must=[FC(key="colour", match=models.MatchValue(value="green"))])
    for c in (local, client):
        c.set_payload("world", {"new": 1, "info": {"zip": 99}}, points=ids[:3])
        c.set_payload("world", {"deep": "x"}, points=green, key="info")
        c.overwrite_payload("world", {"only": True}, points=[ids[4]])
        c.delete_payload("world", ["price", "tags"], points=ids[5:8])
        c.clear_payload("world", points_selector=models.PointIdsList(points=[ids[9]]))
        c.update_vectors("world", [models.PointVectors(id=ids[11], vector={"dense": [1.0] + [0.0] * (DIM - 1)})])
        c.delete_vectors("world", ["multi"], points=ids[12:14])
        c.batch_update_points(
            "world",
            [
                models.SetPayloadOperation(set_payload=models.SetPayload(payload={"batch": 1}, points=[ids[20]])),
                models.DeleteOperation(delete=models.PointIdsList(points=[ids[21]])),
                models.UpsertOperation(
                    upsert=models.PointsList(points=[models.PointStruct(id=7777, vector=world_points(1)[0].vector)])
                ),
            ],
        )
    expected = local.retrieve("world", ids + [7777], with_vectors=["dense", "multi"])
    found = client.retrieve("world", ids + [7777], with_vectors=["dense", "multi"])
    assert [r.id for r in found] == [r.id for r in expected]
    for a, b in zip(expected, found, strict=True):
        assert b.payload == a.payload
        assert set(b.vector) == set(a.vector)
        assert b.vector["dense"] == pytest.approx(a.vector["dense"], abs=1e-6)


def test_upsert_modes_batches_and_uploads(store):
    store.create_collection("c", vectors_config=models.VectorParams(size=2, distance=models.Distance.DOT))
    store.upsert("c", models.Batch(ids=[1, 2], vectors=[[1.0, 0.0], [0.0, 1.0]], payloads=[{"a": 1}, {"a": 2}]))
    store.upsert(
        "c",
        [models.PointStruct(id=1, vector=[5.0, 5.0], payload={"a": 9})],
        update_mode=models.UpdateMode.INSERT_ONLY,
    )
    assert store.retrieve("c", [1])[0].payload == {"a": 1}
    store.upsert(
        "c",
        [models.PointStruct(id=2, vector=[0.0, 2.0], payload={"a": 3})],
        update_filter=F(must=[FC(key="a", match=models.MatchValue(value=2))]),
    )
    assert store.retrieve("c", [2])[0].payload == {"a": 3}
    store.upload_points("c", (models.PointStruct(id=i, vector=[float(i), 1.0]) for i in range(10, 30)), batch_size=6)
    store.upload_collection("c", vectors=[[1.0, float(i)] for i in range(5)], ids=range(100, 105), payload=None)
    store.upload_collection("c", vectors=np.ones((3, 2)), ids=[200, 201, 202], payload=[{"n": i} for i in range(3)])
    store.upload_collection("c", vectors=np.zeros((2, 2)))  # random UUID ids
    assert store.count("c").count == 2 + 20 + 5 + 3 + 2
    assert store.retrieve("c", [201])[0].payload == {"n": 1}


def test_payload_indexes_and_collection_info(store):
    store.create_collection(
        "c",
        vectors_config={"v": models.VectorParams(size=4, distance=models.Distance.COSINE, on_disk=True)},
        sparse_vectors_config={"s": models.SparseVectorParams(modifier=models.Modifier.IDF)},
        hnsw_config=models.HnswConfigDiff(m=8),
        optimizers_config=models.OptimizersConfigDiff(indexing_threshold=500),
        metadata={"posfair": {"fingerprint": "abc", "nested": [1, {"x": None}]}},
    )
    store.upsert("c", [models.PointStruct(id=1, vector={"v": [1.0, 0, 0, 0]}, payload={"k": "a", "n": 3, "t": "x y"})])
    store.create_payload_index("c", "k", models.PayloadSchemaType.KEYWORD)
    store.create_payload_index(
        "c", "n", field_schema=models.IntegerIndexParams(type="integer", lookup=True, range=True)
    )
    store.create_payload_index("c", "t", models.TextIndexParams(type="text", tokenizer=models.TokenizerType.WORD))
    info = store.get_collection("c")
    assert {k: v.data_type for k, v in info.payload_schema.items()} == {
        "k": models.PayloadSchemaType.KEYWORD,
        "n": models.PayloadSchemaType.INTEGER,
        "t": models.PayloadSchemaType.TEXT,
    }
    assert info.points_count == 1 and info.status == models.CollectionStatus.GREEN
    assert info.config.params.vectors["v"].size == 4 and info.config.params.vectors["v"].on_disk
    assert info.config.params.sparse_vectors["s"].modifier == models.Modifier.IDF
    assert info.config.hnsw_config.m == 8 and info.config.hnsw_config.ef_construct == 100
    assert info.config.optimizer_config.indexing_threshold == 500
    assert info.config.metadata == {"posfair": {"fingerprint": "abc", "nested": [1, {"x": None}]}}
    store.delete_payload_index("c", "k")
    assert set(store.get_collection("c").payload_schema) == {"n", "t"}
    assert store.update_collection("c", metadata={"other": 1})
    assert store.get_collection("c").config.metadata == {
        "posfair": {"fingerprint": "abc", "nested": [1, {"x": None}]},
        "other": 1,
    }
    store.update_collection("c", optimizers_config=models.OptimizersConfigDiff(indexing_threshold=1))
    assert store.get_collection("c").config.optimizer_config.indexing_threshold == 1
    assert store.count("c").count == 1  # the shard reopened with its new settings


def test_reopen_finds_everything(tmp_path):
    path = tmp_path / "store"
    client = EdgeQdrantClient(path)
    create_world(client, points=world_points(40))
    client.create_collection("plain", vectors_config=models.VectorParams(size=2, distance=models.Distance.EUCLID))
    client.upsert("plain", [models.PointStruct(id=5, vector=[1.0, 2.0], payload={"x": "y"})])
    client.create_payload_index("world", "colour", models.PayloadSchemaType.KEYWORD)
    client.update_collection_aliases(
        [models.CreateAliasOperation(create_alias=models.CreateAlias(collection_name="plain", alias_name="nick"))]
    )
    client.update_collection("world", metadata={"posfair": {"tag": 1}})
    before = client.query_points("world", QUERIES["dense"]["query"], using="dense", limit=10).points
    client.close()
    assert is_edge_store(path)

    again = EdgeQdrantClient(path)
    assert sorted(c.name for c in again.get_collections().collections) == ["plain", "world"]
    assert again.count("world").count == 40 and again.count("nick").count == 1
    assert again.get_collection("world").config.metadata == {"posfair": {"tag": 1}}
    assert isinstance(again.get_collection("plain").config.params.vectors, models.VectorParams)
    assert set(again.get_collection("world").config.params.sparse_vectors) == {"sparse"}
    assert set(again.get_collection("world").payload_schema) == {"colour"}
    assert [a.alias_name for a in again.get_aliases().aliases] == ["nick"]
    assert_same_ranking(before, again.query_points("world", QUERIES["dense"]["query"], using="dense", limit=10).points)
    assert again.retrieve("nick", [5], with_vectors=True)[0].vector == [1.0, 2.0]
    again.close()


def test_aliases_and_collection_lifecycle(store):
    params = models.VectorParams(size=2, distance=models.Distance.DOT)
    assert not store.collection_exists("a")
    assert store.create_collection("a", vectors_config=params)
    with pytest.raises(ValueError, match="Collection a already exists"):
        store.create_collection("a", vectors_config=params)
    store.upsert("a", [models.PointStruct(id=1, vector=[1.0, 0.0])])
    store.update_collection_aliases(
        [models.CreateAliasOperation(create_alias=models.CreateAlias(collection_name="a", alias_name="x"))]
    )
    assert store.collection_exists("x") and store.count("x").count == 1
    store.update_collection_aliases(
        [models.RenameAliasOperation(rename_alias=models.RenameAlias(old_alias_name="x", new_alias_name="y"))]
    )
    assert [a.alias_name for a in store.get_collection_aliases("a").aliases] == ["y"]
    with pytest.warns(DeprecationWarning):
        store.recreate_collection("a", vectors_config=params)
    assert store.count("a").count == 0
    assert store.delete_collection("a") and not store.delete_collection("a")
    assert store.get_aliases().aliases == []
    with pytest.raises(ValueError, match="Collection a not found"):
        store.count("a")
    with pytest.raises(ValueError, match="cannot contain"):
        store.create_collection("a/b", vectors_config=params)


def test_optimize_builds_the_index(tmp_path):
    client = EdgeQdrantClient(tmp_path / "store", optimizers_config=models.OptimizersConfigDiff(indexing_threshold=1))
    client.create_collection("c", vectors_config=models.VectorParams(size=16, distance=models.Distance.COSINE))
    rng = random.Random(1)
    client.upsert("c", [models.PointStruct(id=i, vector=unit_vector(rng, 16)) for i in range(300)])
    assert client.get_collection("c").indexed_vectors_count == 0  # Edge indexes only when asked
    assert client.optimize("c")
    assert client.get_collection("c").indexed_vectors_count == 300
    assert client.get_collection("c").config.optimizer_config.indexing_threshold == 1
    client.close()
    auto = EdgeQdrantClient(
        tmp_path / "auto",
        optimizers_config=models.OptimizersConfigDiff(indexing_threshold=1),
        auto_optimize=True,
        flush_writes=True,
    )
    auto.create_collection("c", vectors_config=models.VectorParams(size=16, distance=models.Distance.COSINE))
    auto.upsert("c", [models.PointStruct(id=i, vector=unit_vector(rng, 16)) for i in range(300)])
    assert auto.get_collection("c").indexed_vectors_count == 300
    auto.close()


# ---------------------------------------------------------------------------------------------------- refusals


def test_what_edge_cannot_do_is_refused_by_name(store):
    params = models.VectorParams(size=2, distance=models.Distance.DOT)
    refusals = [
        (
            lambda: store.create_collection("c", vectors_config=params, sharding_method=models.ShardingMethod.CUSTOM),
            "create_collection: sharding_method",
        ),
        (lambda: store.create_collection("c", vectors_config=params, replication_factor=2), "replication_factor=2"),
        (lambda: store.create_collection("c", vectors_config=params, shard_number=3), "shard_number=3"),
        (
            lambda: store.create_collection(
                "c", vectors_config=params, wal_config=models.WalConfigDiff(wal_capacity_mb=1)
            ),
            "wal_config",
        ),
        (
            lambda: store.create_collection(
                "c", vectors_config=params, optimizers_config=models.OptimizersConfigDiff(flush_interval_sec=1)
            ),
            "flush_interval_sec",
        ),
    ]
    for call, construct in refusals:
        with pytest.raises(EdgeUnsupportedError, match=construct) as refused:
            call()
        assert "Qdrant server" in str(refused.value)
    assert not store.collection_exists("c")  # refused before anything was created
    store.create_collection("c", vectors_config=params)
    later = [
        (lambda: store.create_shard_key("c", "k"), "create_shard_key: shard keys"),
        (lambda: store.query_points("c", [1.0, 0.0], shard_key_selector="k"), "query_points: shard_key_selector"),
        (lambda: store.upsert("c", [models.PointStruct(id=1, vector=[1.0, 0.0])], shard_key_selector=1), "upsert"),
        (lambda: store.create_snapshot("c"), "create_snapshot: snapshots"),
        (lambda: store.query_points_groups("c", "k", query=[1.0, 0.0]), "query_points_groups"),
        (lambda: store.cluster_status(), "cluster_status"),
    ]
    for call, construct in later:
        with pytest.raises(EdgeUnsupportedError, match=construct):
            call()
    assert store.list_snapshots("c") == []


def test_untranslatable_requests_are_refused_by_name(store):
    dot = models.Distance.DOT
    strict = models.StrictModeConfig(enabled=True)
    with pytest.raises(EdgeUnsupportedError, match="create_collection: strict_mode_config"):
        store.create_collection(
            "t", vectors_config=models.VectorParams(size=2, distance=dot), strict_mode_config=strict
        )
    store.create_collection(
        "c",
        vectors_config={"v": models.VectorParams(size=2, distance=dot)},
        sparse_vectors_config={"s": models.SparseVectorParams()},
    )
    backend = store._client  # what reaches Edge when qdrant-client has not embedded a document first
    with pytest.raises(EdgeUnsupportedError, match="upsert: vector of type Document"):
        backend.upsert("c", [models.PointStruct(id=1, vector={"v": models.Document(text="x", model="m")})])
    sparse = models.SparseVector(indices=[1], values=[1.0])
    store.upsert("c", [models.PointStruct(id=1, vector={"v": [1.0, 0.0], "s": sparse})])
    average = models.RecommendQuery(recommend=models.RecommendInput(positive=[sparse]))
    with pytest.raises(EdgeUnsupportedError, match="average_vector on sparse"):
        store.query_points("c", average, using="s")
    best = models.RecommendQuery(
        recommend=models.RecommendInput(positive=[sparse], strategy=models.RecommendStrategy.BEST_SCORE)
    )
    assert [p.id for p in store.query_points("c", best, using="s").points] == [1]


def test_threads_share_one_client(store):
    store.create_collection("c", vectors_config=models.VectorParams(size=2, distance=models.Distance.DOT))

    def work(i: int) -> int:
        store.upsert("c", [models.PointStruct(id=i, vector=[1.0, float(i)])])
        return len(store.query_points("c", [1.0, 0.0], limit=3).points)

    with ThreadPoolExecutor(4) as pool:
        found = list(pool.map(work, range(200)))
    assert min(found) >= 1 and store.count("c").count == 200


def test_bad_requests_are_clear_value_errors(store):
    store.create_collection("c", vectors_config=models.VectorParams(size=2, distance=models.Distance.DOT))
    with pytest.raises(EdgeRequestError, match="upsert on collection 'c'.*dim"):
        store.upsert("c", [models.PointStruct(id=1, vector=[1.0, 0.0, 3.0])])
    with pytest.raises(ValueError, match="neither an unsigned integer nor a UUID"):
        store.upsert("c", [models.PointStruct(id="not-a-uuid", vector=[1.0, 0.0])])
    with pytest.raises(ValueError, match="limit"):
        store.query_points("c", [1.0, 0.0], limit=0)
    with pytest.raises(EdgeRequestError, match="no point with id 9"):
        store.query_points("c", 9)
    with pytest.raises(ValueError, match="Collection nope not found"):
        store.query_points("nope", [1.0, 0.0])


# ------------------------------------------------------------------------------------------- one store, many clients


async def test_sync_and_async_clients_share_one_store(tmp_path):
    client, aclient = EdgeQdrantClient(tmp_path / "s"), AsyncEdgeQdrantClient(tmp_path / "s")
    await aclient.create_collection("c", vectors_config=models.VectorParams(size=2, distance=models.Distance.DOT))
    client.upsert("c", [models.PointStruct(id=1, vector=[1.0, 0.0])])
    assert (await aclient.count("c")).count == 1
    assert [p.id for p in (await aclient.query_points("c", [1.0, 0.0])).points] == [1]
    assert await aclient.optimize("c") in (True, False)
    aclient.upload_points("c", [models.PointStruct(id=2, vector=[0.0, 1.0])])
    with pytest.raises(ValueError, match="already open in this process with other settings"):
        EdgeQdrantClient(tmp_path / "s", max_search_threads=1)
    client.close()
    client.close()  # closing twice is harmless
    with pytest.raises(EdgeClosedError):
        client.count("c")
    assert (await aclient.count("c")).count == 2  # the other client still has the store
    await aclient.close()
    with pytest.raises(EdgeClosedError):
        await aclient.count("c")
    reopened = EdgeQdrantClient(tmp_path / "s")
    twin = reopened.async_client()  # the same store and settings, awaitable
    assert (await twin.count("c")).count == 2
    await twin.close()
    reopened.close()


# ---------------------------------------------------------------------------------------------------- processes


def _child(role: str, *arguments: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.qdrant.edge_children", role, *arguments],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(condition, child: subprocess.Popen, what: str) -> None:
    """Wait until ``condition()`` holds; fail early if the child died first (no sleep decides the outcome)."""
    deadline = time.monotonic() + CHILD_TIMEOUT_S
    while not condition():
        if child.poll() is not None:
            raise AssertionError(f"the child exited before {what}: {child.stderr.read()}")
        if time.monotonic() > deadline:
            child.kill()
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


def _acknowledged(acks: Path) -> list[int]:
    if not acks.exists():
        return []
    return [int(line) for line in acks.read_text().splitlines() if line.strip()]


def test_acknowledged_writes_survive_kill_9(tmp_path):
    """A writer that never stops on its own is killed once it has acknowledged five batches (an acknowledgement is
    written after its upsert returns); every acknowledged batch is then in the store, the one in flight is there
    whole or not at all, and rerunning the upserts completes the store without duplicates."""
    path, acks, size = tmp_path / "store", tmp_path / "acks", 25
    writer = _child("writer", str(path), str(acks), str(10**9), str(size))
    _wait_for(lambda: len(_acknowledged(acks)) >= 5, writer, "five acknowledged batches")
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=CHILD_TIMEOUT_S)
    acknowledged = _acknowledged(acks)
    assert acknowledged == list(range(len(acknowledged)))

    client = EdgeQdrantClient(path)  # the killed process's lock went with it
    collection = edge_children.KILL_COLLECTION
    for batch in acknowledged:
        found = client.retrieve(collection, [p.id for p in edge_children.batch_points(batch, size)])
        assert len(found) == size, f"acknowledged batch {batch} lost points"
    # after the last acknowledgement the writer can have written at most one more batch, and wholly or not at all
    assert client.count(collection).count in (len(acknowledged) * size, (len(acknowledged) + 1) * size)
    rerun = len(acknowledged) + 10
    client.upload_points(
        collection, (p for batch in range(rerun) for p in edge_children.batch_points(batch, size)), batch_size=100
    )
    assert client.count(collection).count == rerun * size  # the rerun added the rest, duplicating nothing
    client.close()


def test_a_second_process_is_refused_with_the_folder_named(tmp_path):
    path, ready, release = tmp_path / "store", tmp_path / "ready", tmp_path / "release"
    holder = _child("holder", str(path), str(ready), str(release))
    try:
        _wait_for(ready.exists, holder, "the holder to open the store")
        with pytest.raises(EdgeStoreLockedError, match=f"{path}.*open in another process \\(pid {holder.pid}\\)"):
            EdgeQdrantClient(path)
    finally:
        release.touch()
        holder.wait(timeout=CHILD_TIMEOUT_S)
    assert holder.returncode == 0, holder.stderr.read()
    client = EdgeQdrantClient(path)  # once the holder has closed, the store opens, its data intact
    assert client.count(edge_children.HELD_COLLECTION).count == 1
    client.close()


def test_folders_that_are_not_stores_are_refused(tmp_path):
    others = tmp_path / "others"
    others.mkdir()
    (others / "notes.txt").write_text("mine")
    with pytest.raises(NotAnEdgeStoreError, match="not an Edge store.*posfair_edge.json"):
        EdgeQdrantClient(others)
    assert sorted(p.name for p in others.iterdir()) == ["notes.txt"]  # untouched

    local_path = tmp_path / "local"
    local = QdrantClient(path=str(local_path))
    local.create_collection("c", vectors_config=models.VectorParams(size=2, distance=models.Distance.DOT))
    local.close()
    with pytest.raises(NotAnEdgeStoreError, match="qdrant-client's local mode"):
        EdgeQdrantClient(local_path)

    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(NotAnEdgeStoreError, match="is a file"):
        EdgeQdrantClient(a_file)

    newer = tmp_path / "newer"
    EdgeQdrantClient(newer).close()
    marker = json.loads((newer / MARKER_FILE).read_text())
    (newer / MARKER_FILE).write_text(json.dumps({**marker, "version": marker["version"] + 1}))
    with pytest.raises(EdgeStoreVersionError, match="upgrade posfair_llamaindex"):
        EdgeQdrantClient(newer)


@pytest.mark.skipif(sys.platform != "linux", reason="the read-only child drops a Linux capability")
def test_a_read_only_store_is_refused_clearly(tmp_path):
    path = tmp_path / "store"
    client = EdgeQdrantClient(path)
    client.create_collection("c", vectors_config=models.VectorParams(size=2, distance=models.Distance.DOT))
    client.close()
    folders = [path, path / "collections"]
    for folder in folders:
        folder.chmod(0o555)
    try:
        child = _child("read-only", str(path))
        out, err = child.communicate(timeout=CHILD_TIMEOUT_S)
    finally:
        for folder in folders:
            folder.chmod(0o755)
    assert child.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    if "skipped" in result:
        pytest.skip(f"cannot make the folder read-only for the child: {result['skipped']}")
    assert result["error"] == "EdgeStoreReadOnlyError"
    assert str(path) in result["message"] and "read-only" in result["message"]


# ---------------------------------------------------------------------------------------------------- LlamaIndex


def _llama_nodes() -> list[TextNode]:
    rng = random.Random(9)
    nodes = []
    for i in range(24):
        nodes.append(
            TextNode(
                id_=str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                text=" ".join(rng.choice(WORDS) for _ in range(6)),
                metadata={"group": i % 3, "colour": COLOURS[i % 3], "rank": i},
                relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=f"doc-{i % 4}")},
                embedding=unit_vector(rng, DIM),
            )
        )
    return nodes


async def test_llamaindex_store_on_edge_answers_as_on_local_mode(tmp_path):
    nodes = _llama_nodes()
    local = QdrantVectorStore("docs", client=QdrantClient(":memory:"))
    client, aclient = EdgeQdrantClient(tmp_path / "s"), AsyncEdgeQdrantClient(tmp_path / "s")
    on_edge = QdrantVectorStore("docs", client=client, aclient=aclient)
    assert on_edge.add(nodes) == local.add(nodes)
    assert "doc_id" in client.get_collection("docs").payload_schema  # LlamaIndex's keyword index is real here
    q = unit_vector(random.Random(3), DIM)
    for filters in [None, *LLAMA_FILTERS.values()]:
        query = VectorStoreQuery(query_embedding=q, similarity_top_k=5, filters=filters)
        expected, found = local.query(query), on_edge.query(query)
        assert found.ids == expected.ids
        assert found.similarities == pytest.approx(expected.similarities, abs=1e-5)
        assert [n.get_content() for n in found.nodes] == [n.get_content() for n in expected.nodes]
        assert (await on_edge.aquery(query)).ids == expected.ids
    only = VectorStoreQuery(query_embedding=q, similarity_top_k=5, node_ids=[n.node_id for n in nodes[:4]])
    assert on_edge.query(only).ids == local.query(only).ids
    assert {n.node_id for n in on_edge.get_nodes(node_ids=[nodes[0].node_id, nodes[1].node_id])} == {
        nodes[0].node_id,
        nodes[1].node_id,
    }
    for store in (local, on_edge):
        store.delete("doc-1")
        store.delete_nodes(node_ids=[nodes[0].node_id])
    await on_edge.adelete("doc-2")
    local.delete("doc-2")
    await on_edge.adelete_nodes(
        filters=MetadataFilters(filters=[MetadataFilter(key="rank", value=20, operator=FilterOperator.GT)])
    )
    local.delete_nodes(
        filters=MetadataFilters(filters=[MetadataFilter(key="rank", value=20, operator=FilterOperator.GT)])
    )
    assert sorted(n.node_id for n in on_edge.get_nodes()) == sorted(n.node_id for n in local.get_nodes())
    assert len(await on_edge.aget_nodes()) == len(local.get_nodes())
    await on_edge.async_add(nodes[:2])
    local.add(nodes[:2])
    assert sorted(n.node_id for n in on_edge.get_nodes()) == sorted(n.node_id for n in local.get_nodes())
    on_edge.clear()
    assert not client.collection_exists("docs")
    client.close()
    await aclient.close()


def test_llamaindex_hybrid_store_on_edge(tmp_path):
    nodes = _llama_nodes()
    options = dict(enable_hybrid=True, sparse_doc_fn=sparse_encode, sparse_query_fn=sparse_encode)
    local = QdrantVectorStore("h", client=QdrantClient(":memory:"), **options)
    client = EdgeQdrantClient(tmp_path / "s")
    on_edge = QdrantVectorStore("h", client=client, **options)
    local.add(nodes)
    on_edge.add(nodes)
    # the toy sparse vectors tie often: fetching every point keeps a tie at the cut from changing the fused list
    everything = dict(similarity_top_k=len(nodes), sparse_top_k=len(nodes), hybrid_top_k=5)
    query = VectorStoreQuery(
        query_embedding=nodes[5].embedding, query_str=nodes[5].text, mode=VectorStoreQueryMode.HYBRID, **everything
    )
    assert_same_result(local.query(query), on_edge.query(query))
    sparse = VectorStoreQuery(query_str=nodes[7].text, similarity_top_k=6, mode=VectorStoreQueryMode.SPARSE)
    assert_same_result(local.query(sparse), on_edge.query(sparse))
    client.close()


# ------------------------------------------------------------------------------------------------- tagged_vector_store


def test_tagged_stores_on_edge_answer_as_on_local_mode(tmp_path, tiny_embed, tiny_dual, tiny_model_dir):
    dimension = tiny_embed.dimension
    windows = PosFairEmbedding(
        tiny_model_dir("bert"), mode="windows", windows=WindowConfig(size=16, document="plain"), device="cpu"
    )
    rng = random.Random(4)
    window_nodes = make_nodes(30, dimension, seed=5)
    for node in window_nodes:  # each document: its plain vector, then 0 to 3 windows
        node.embedding = node.embedding + [x for _ in range(rng.randint(0, 3)) for x in unit_vector(rng, dimension)]
    cases = [
        ("single", tiny_embed, {}, make_nodes(30, dimension, seed=1)),
        ("dual", tiny_dual, {}, make_nodes(30, 2 * dimension, seed=2)),
        (
            "dual-hybrid",
            tiny_dual,
            dict(enable_hybrid=True, sparse_doc_fn=sparse_encode, sparse_query_fn=sparse_encode),
            make_nodes(30, 2 * dimension, seed=3),
        ),
        ("windows", windows, {}, window_nodes),
    ]
    client, local = EdgeQdrantClient(tmp_path / "s"), QdrantClient(":memory:")
    q = unit_vector(random.Random(8), dimension)
    local_stores = {}
    for name, model, options, nodes in cases:
        on_edge = tagged_vector_store(client, name, model, **options)
        on_local = local_stores[name] = tagged_vector_store(local, name, model, **options)
        on_edge.add(nodes)
        on_local.add(nodes)
        modes = [VectorStoreQueryMode.DEFAULT] + ([VectorStoreQueryMode.HYBRID] if options else [])
        for mode in modes:
            query = VectorStoreQuery(
                query_embedding=q, query_str=nodes[2].text, similarity_top_k=6, sparse_top_k=len(nodes), mode=mode
            )
            assert_same_result(on_local.query(query), on_edge.query(query))
        assert client.get_collection(name).config.metadata == local.get_collection(name).config.metadata
    client.close()

    reopened = EdgeQdrantClient(tmp_path / "s")
    again = tagged_vector_store(reopened, "dual", tiny_dual)  # the stored tag is checked, and matches
    dual_ids = [n.node_id for n in cases[1][3]]
    assert reopened.count("dual").count == 30
    assert again.stored_text_hashes(dual_ids) == local_stores["dual"].stored_text_hashes(dual_ids)
    with pytest.raises(ValueError, match="not embedded with this configuration"):
        tagged_vector_store(reopened, "single", tiny_dual)
    reopened.close()


async def test_async_tagged_store_on_edge(tmp_path, tiny_embed):
    aclient = AsyncEdgeQdrantClient(tmp_path / "s")
    store = await atagged_vector_store(aclient, "single", tiny_embed)
    nodes = make_nodes(12, tiny_embed.dimension, seed=6)
    await store.async_add(nodes)
    result = await store.aquery(VectorStoreQuery(query_embedding=nodes[4].embedding, similarity_top_k=1))
    assert result.ids == [nodes[4].node_id]
    await aclient.close()


def test_a_new_store_holds_only_its_own_files(tmp_path):
    """A client given a new folder makes exactly the store's files there, nothing else."""
    client = EdgeQdrantClient(tmp_path / "fresh")
    client.close()
    assert sorted(p.name for p in (tmp_path / "fresh").iterdir()) == [".lock", "collections", MARKER_FILE]
    assert os.listdir(tmp_path / "fresh" / "collections") == []
