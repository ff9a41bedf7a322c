"""The one description of what a collection stores: vectors, how a document embedding splits, how a query fuses.

Built from the embedding for single, dual and hybrid collections; a multivector entry (what windows mode adds)
is built by hand here, to show that it slots in as one more entry: the layout splits, stores and queries it.
"""

from __future__ import annotations

import random

import pytest
from qdrant_client import QdrantClient
from qdrant_client.http import models as rest

from posfair_llamaindex.modes import DUAL_VECTORS
from posfair_llamaindex.qdrant.store import PosFairQdrantVectorStore
from posfair_llamaindex.qdrant.vector_layout import (
    MISSING_SCORE,
    MISSING_UNBOUNDED_SCORE,
    MULTIVECTOR_HNSW_EF,
    DenseVector,
    QueryFusion,
    SparseVector,
    VectorLayout,
    dense_vector,
    layout_for,
)
from tests.qdrant.conftest import unit_vector

DIM = 64


def windows_layout(dimension=4) -> VectorLayout:
    """Dual's two vectors plus a MaxSim multivector of any number of rows (the shape windows mode adds)."""
    windows = rest.VectorParams(
        size=dimension,
        distance=rest.Distance.COSINE,
        multivector_config=rest.MultiVectorConfig(comparator=rest.MultiVectorComparator.MAX_SIM),
    )
    dense = (*(dense_vector(n, dimension) for n in DUAL_VECTORS), DenseVector(name="windows", params=windows))
    return VectorLayout(dimension=dimension, dense=dense, fusion=QueryFusion(rule="max"))


def test_single_dual_and_hybrid_layouts_from_the_embedding(tiny_embed, tiny_dual):
    single = layout_for(tiny_embed)
    assert single.names == ("",) and not single.is_fused
    assert single.vectors_config() == rest.VectorParams(size=DIM, distance=rest.Distance.COSINE)
    assert single.create_arguments() == {"vectors_config": single.vectors_config()}
    assert single.tag() == {}  # dense-only cosine tags stay as they were
    dual = layout_for(tiny_dual)
    assert dual.names == DUAL_VECTORS and dual.fusion.rule == tiny_dual.fusion
    hybrid = layout_for(tiny_embed, sparse=SparseVector())
    assert hybrid.names == ("text-dense",)
    assert hybrid.create_arguments()["sparse_vectors_config"] == {"text-sparse-new": SparseVector().params}
    assert hybrid.tag() == {
        "hybrid": {
            "dense_vector": "text-dense",
            "sparse_vector": "text-sparse-new",
            "sparse_encoder": "custom",
            "idf": False,
        }
    }
    both = layout_for(tiny_dual, sparse=SparseVector(encoder="bm25"))
    assert set(both.vectors_config()) == set(DUAL_VECTORS)
    assert both.tag()["hybrid"] == {"sparse_vector": "text-sparse-new", "sparse_encoder": "bm25", "idf": False}


def test_split_checks_the_length_and_names_every_part(tiny_dual):
    dual = layout_for(tiny_dual)
    embedding = list(range(2 * DIM))
    parts = dual.split(embedding)
    assert parts == {"plain": list(range(DIM)), "calibrated": list(range(DIM, 2 * DIM))}
    with pytest.raises(
        ValueError, match=r"a document embedding here is 128 floats \(plain \(64\) \+ calibrated \(64\)\), got 64"
    ):
        dual.split(embedding[:DIM])


def test_a_multivector_takes_the_rest_in_rows_of_the_dimension():
    layout = windows_layout(4)
    doc, windows = [0.0] * 8, [[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 1.0, 1.0, 1.0]]
    parts = layout.split(doc + [x for w in windows for x in w])
    assert parts["windows"] == windows and parts["plain"] == [0.0] * 4
    assert layout.split(doc)["windows"] == []  # no window at all is allowed ...
    assert "windows" not in layout.point_vectors(doc)  # ... and leaves the named vector out of the point
    with pytest.raises(ValueError, match=r"8 floats plus any multiple of 4 .*got 10"):
        layout.split(doc + [1.0, 2.0])
    assert layout.describe()[0]["windows"].endswith("/multi:max_sim")


def test_a_multivector_layout_is_stored_and_queried_in_one_request():
    """Qdrant (local mode) takes the layout's collection, points and fused request as they are."""
    layout = windows_layout(4)
    client = QdrantClient(":memory:")
    client.create_collection("w", **layout.create_arguments())
    rng = random.Random(3)
    points = []
    for i in range(30):
        embedding = unit_vector(rng, 4) + unit_vector(rng, 4) + [x for _ in range(i % 4) for x in unit_vector(rng, 4)]
        points.append(rest.PointStruct(id=i, vector=layout.point_vectors(embedding)))
    client.upsert("w", points)
    query = unit_vector(rng, 4)
    fused = layout.fused_dense(query, 5, rule="max")
    assert fused["prefetch"][2].query == [query]  # one query vector, as a one-row multivector
    hits = client.query_points("w", **fused, limit=5).points
    best = {}
    for name, question in (("plain", query), ("calibrated", query), ("windows", [query])):
        for hit in client.query_points("w", query=question, using=name, limit=30).points:
            best[hit.id] = max(best.get(hit.id, -1.0), hit.score)
    expected = sorted(best, key=best.get, reverse=True)[:5]
    assert [h.id for h in hits] == expected
    assert [h.score for h in hits] == pytest.approx([best[i] for i in expected], abs=1e-6)


def test_prefetch_sizes_and_rules():
    layout = windows_layout(4).model_copy(update={"fusion": QueryFusion(rule="max", candidates=30, max_candidates=7)})
    assert layout.prefetch_limit(10, "max") == 20 and layout.prefetch_limit(2, "max") == 7
    assert layout.prefetch_limit(10, "sum") == 30 and layout.prefetch_limit(50, "rrf") == 50
    rrf = layout.fused_dense([0.0] * 4, 3, rule="rrf")["query"]
    assert isinstance(rrf, rest.RrfQuery)
    total = layout.fused_dense([0.0] * 4, 3, rule="sum")["query"]
    assert total.formula.sum == ["$score[0]", "$score[1]", "$score[2]"]
    with pytest.raises(ValueError, match="fusion must be one of"):
        layout.fused_dense([0.0] * 4, 3, rule="mean")


def test_a_multivector_is_searched_with_a_wide_beam_unless_the_query_says_otherwise():
    """Qdrant's default beam misses 6% of the exact top 10 nodes at 100,000 windows (RESULTS.md §9.6)."""
    layout = windows_layout(4)
    query = [0.5] * 4
    params = [p.params for p in layout.fused_dense(query, 3)["prefetch"]]
    assert params == [None, None, rest.SearchParams(hnsw_ef=MULTIVECTOR_HNSW_EF)]  # the plain vectors keep theirs
    alone = VectorLayout(dimension=4, dense=(layout.dense[2],))
    assert alone.dense_search(query, 3)["params"] == rest.SearchParams(hnsw_ef=MULTIVECTOR_HNSW_EF)
    for chosen in (rest.SearchParams(hnsw_ef=64), rest.SearchParams(exact=True)):
        assert alone.dense_search(query, 3, params=chosen)["params"] == chosen
        assert layout.fused_dense(query, 3, params=chosen)["prefetch"][2].params == chosen
    quantized = rest.SearchParams(quantization=rest.QuantizationSearchParams(rescore=True))
    widened = alone.dense_search(query, 3, params=quantized)["params"]
    assert widened.hnsw_ef == MULTIVECTOR_HNSW_EF and widened.quantization == quantized.quantization
    assert quantized.hnsw_ef is None  # the caller's object is left as it was
    plain = VectorLayout(dimension=4, dense=(layout.dense[0],))
    assert "params" not in plain.dense_search(query, 3)


def test_layouts_that_cannot_work_are_refused():
    one = dense_vector("a", 4)
    with pytest.raises(ValueError, match="need a fusion rule"):
        VectorLayout(dimension=4, dense=(one, dense_vector("b", 4)))
    with pytest.raises(ValueError, match="names must differ"):
        VectorLayout(dimension=4, dense=(one, one), fusion=QueryFusion(rule="max"))
    with pytest.raises(ValueError, match="has size 4, but the layout's dimension is 8"):
        VectorLayout(dimension=8, dense=(one,))
    with pytest.raises(ValueError, match="only a collection with one dense vector"):
        VectorLayout(dimension=4, dense=(dense_vector("", 4),), sparse=SparseVector())
    multi = windows_layout(4).dense[2]
    with pytest.raises(ValueError, match="at most one dense vector may be a multivector"):
        VectorLayout(
            dimension=4, dense=(multi, multi.model_copy(update={"name": "w2"})), fusion=QueryFusion(rule="max")
        )


def test_the_missing_score_is_below_any_score_the_distance_gives(tiny_embed, tiny_dual, tiny_model_dir):
    from posfair_llamaindex import PosFairEmbedding

    assert layout_for(tiny_dual).fusion.missing_score == MISSING_SCORE
    dot = rest.VectorParams(size=DIM, distance=rest.Distance.DOT)
    assert layout_for(tiny_dual, dense_config=dot).fusion.missing_score == MISSING_SCORE  # unit vectors
    raw = PosFairEmbedding(tiny_model_dir("bert"), mode="dual", normalize=False, encoder=tiny_dual.encoder)
    assert layout_for(raw, dense_config=dot).fusion.missing_score == MISSING_UNBOUNDED_SCORE


def test_the_layout_round_trips_through_json(tiny_dual):
    layout = layout_for(
        tiny_dual,
        sparse=SparseVector(params=rest.SparseVectorParams(modifier=rest.Modifier.IDF), encoder="e"),
        dense_config=rest.VectorParams(size=DIM, distance="Dot", on_disk=True, hnsw_config=rest.HnswConfigDiff(m=4)),
    )
    assert VectorLayout.model_validate_json(layout.model_dump_json()) == layout
    assert VectorLayout.model_validate(layout.model_dump()) == layout


def test_the_store_serves_a_layout_with_a_multivector_entry_unchanged():
    """What windows mode will hand the store: the store builds points and requests from the layout alone."""
    from llama_index.core.schema import TextNode
    from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters, VectorStoreQuery

    from posfair_llamaindex.qdrant.collection import TaggedCollectionConfig, ensure_collection_config

    layout = windows_layout(4)
    tag = {"mode": "windows-sketch", "fingerprint": "f" * 12}
    client = QdrantClient(":memory:")
    ensure_collection_config(client, "w", TaggedCollectionConfig(tag=tag, layout=layout))
    store = PosFairQdrantVectorStore("w", client=client, vector_layout=layout, posfair_tag=tag)
    rng = random.Random(5)
    nodes = [
        TextNode(
            id_=f"n{i}",
            text=f"node {i}",
            metadata={"parity": "even" if i % 2 == 0 else "odd"},
            embedding=[x for _ in range(2 + i % 3) for x in unit_vector(rng, 4)],  # 0 to 2 window rows
        )
        for i in range(24)
    ]
    store.add(nodes)
    query = unit_vector(rng, 4)

    def cosine(a, b):
        return sum(x * y for x, y in zip(a, b, strict=True)) / (
            sum(x * x for x in a) ** 0.5 * sum(x * x for x in b) ** 0.5
        )

    best = {}
    for node in nodes:
        parts = layout.split(node.embedding)
        rows = [parts["plain"], parts["calibrated"], *parts["windows"]]
        best[node.node_id] = max(cosine(query, row) for row in rows)
    evens = MetadataFilters(filters=[MetadataFilter(key="parity", value="even")])
    got = store.query(VectorStoreQuery(query_embedding=query, similarity_top_k=4, filters=evens))
    expected = sorted((n for n in best if int(n[1:]) % 2 == 0), key=best.get, reverse=True)[:4]
    assert got.ids == expected
    assert got.similarities == pytest.approx([best[i] for i in expected], abs=1e-6)
    with pytest.raises(ValueError, match=r"9-dimensional embedding.*expects 8 \+ k x 4 floats"):
        store.add([TextNode(id_="bad", text="x", embedding=[0.1] * 9)])


def test_a_layout_of_windows_alone_is_queried_as_a_multivector():
    """No document vector (windows mode's document 'none'): one MaxSim multivector, asked with [query]."""
    from llama_index.core.schema import TextNode
    from llama_index.core.vector_stores.types import VectorStoreQuery

    from posfair_llamaindex.qdrant.collection import TaggedCollectionConfig, ensure_collection_config

    layout = VectorLayout(dimension=4, dense=(windows_layout(4).dense[2],))
    assert not layout.is_plain and not layout.is_fused
    tag = {"mode": "windows-sketch", "fingerprint": "e" * 12}
    client = QdrantClient(":memory:")
    ensure_collection_config(client, "w", TaggedCollectionConfig(tag=tag, layout=layout))
    store = PosFairQdrantVectorStore("w", client=client, vector_layout=layout, posfair_tag=tag)
    rng = random.Random(6)
    nodes = [
        TextNode(id_=f"n{i}", text="t", embedding=[x for _ in range(1 + i % 3) for x in unit_vector(rng, 4)])
        for i in range(15)
    ]
    store.add(nodes)
    target = layout.split(nodes[7].embedding)["windows"][-1]
    request = store._fused_request(VectorStoreQuery(query_embedding=target, similarity_top_k=3), {})
    assert request["query"] == [target] and request["using"] == "windows"
    assert store.query(VectorStoreQuery(query_embedding=target, similarity_top_k=3)).ids[0] == "n7"
