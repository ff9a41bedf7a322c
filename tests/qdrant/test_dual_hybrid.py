"""Dual plus hybrid: plain, calibrated and a sparse vector in one collection, fused in one Qdrant request.

The dense maximum comes first; its ranking is then fused with the sparse one by LlamaIndex's rule (relative
scores with ``alpha``, from one batch request) or on the server (RRF, DBSF). Each answer is checked against
the same fusion computed here from the stored vectors; the query modes are LlamaIndex's (HYBRID, SPARSE,
DEFAULT), sync and async, through ``VectorStoreIndex`` too.
"""

from __future__ import annotations

import asyncio
import hashlib

import numpy as np
import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.schema import MetadataMode, TextNode
from llama_index.core.vector_stores.types import (
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
)
from llama_index.vector_stores.qdrant.utils import relative_score_fusion
from qdrant_client import AsyncQdrantClient, QdrantClient
from qdrant_client.http import models as rest

from posfair_llamaindex.options import RRF_K
from posfair_llamaindex.qdrant import atagged_vector_store, collection_tag, point_id, tagged_vector_store
from tests.qdrant.conftest import make_nodes
from tests.qdrant.recording import RecordingClient

DIM = 64


def sparse_encode(texts):
    """Word counts at hashed indices, each word weighted by its own factor, so that no two documents tie."""
    indices, values = [], []
    for text in texts:
        counts: dict[int, float] = {}
        for word in text.lower().split():
            digest = int(hashlib.sha256(word.encode()).hexdigest()[:8], 16)
            counts[digest % 50_000] = counts.get(digest % 50_000, 0.0) + 1.0 + (digest % 997) / 997
        ordered = sorted(counts)
        indices.append(ordered)
        values.append([counts[i] for i in ordered])
    return indices, values


HYBRID = dict(enable_hybrid=True, sparse_doc_fn=sparse_encode, sparse_query_fn=sparse_encode)


@pytest.fixture(scope="module")
def world(tiny_dual):
    nodes = make_nodes(40, 2 * DIM, seed=9, uuid_ids=False)
    store = tagged_vector_store(QdrantClient(":memory:"), "dh", tiny_dual, **HYBRID)
    store.add(nodes)
    return store, nodes


def dense_scores(nodes, query):
    """Each node's max(plain cosine, calibrated cosine)."""
    q = np.asarray(query) / np.linalg.norm(query)
    out = {}
    for node in nodes:
        halves = np.asarray(node.embedding[:DIM]), np.asarray(node.embedding[DIM:])
        out[node.node_id] = max(float(h @ q / np.linalg.norm(h)) for h in halves)
    return out


def sparse_scores(nodes, text):
    (q_idx,), (q_val,) = sparse_encode([text])
    query = dict(zip(q_idx, q_val, strict=True))
    out = {}
    for node in nodes:
        (d_idx,), (d_val,) = sparse_encode([node.text])
        score = sum(query.get(i, 0.0) * v for i, v in zip(d_idx, d_val, strict=True))
        if score > 0:
            out[node.node_id] = score
    return out


def top(scores, k):
    return sorted(scores, key=lambda n: -scores[n])[:k]


def result_of(scores, ids, by_id):
    return VectorStoreQueryResult(nodes=[by_id[i] for i in ids], similarities=[scores[i] for i in ids], ids=ids)


def query_for(nodes, i, **fields):
    fields.setdefault("similarity_top_k", 5)
    return VectorStoreQuery(
        query_embedding=nodes[i].embedding[:DIM], query_str=nodes[(i + 3) % len(nodes)].text, **fields
    )


@pytest.mark.parametrize("alpha", [None, 0.0, 0.3, 1.0])
def test_relative_fusion_is_llamaindexs_rule_over_the_dual_maximum(world, alpha):
    store, nodes = world
    by_id = {n.node_id: n for n in nodes}
    query = query_for(nodes, 2, mode="hybrid", alpha=alpha, sparse_top_k=8, hybrid_top_k=6)
    dense, sparse = dense_scores(nodes, query.query_embedding), sparse_scores(nodes, query.query_str)
    expected = relative_score_fusion(
        result_of(dense, top(dense, 5), by_id),
        result_of(sparse, top(sparse, 8), by_id),
        alpha=0.5 if alpha is None else alpha,
        top_k=6,
    )
    got = store.query(query, hybrid_fusion="relative")
    assert got.ids == expected.ids
    assert got.similarities == pytest.approx(expected.similarities, abs=1e-6)
    if alpha == 1.0:  # all weight on the dense side: the dual ranking first
        assert got.ids[:5] == top(dense, 5)


@pytest.mark.parametrize("alpha", [None, 0.5, 0.8, 1.0])
def test_rrf_fuses_the_dual_maximum_and_the_sparse_ranking_on_the_server(world, alpha):
    store, nodes = world
    query = query_for(nodes, 5, mode="hybrid", alpha=alpha, sparse_top_k=6)
    dense, sparse = dense_scores(nodes, query.query_embedding), sparse_scores(nodes, query.query_str)
    weights = (1.0, 1.0) if alpha is None else (2 * alpha, 2 * (1 - alpha))  # alpha 0.5: plain RRF
    fused = {}
    for weight, ranking in zip(weights, (top(dense, 5), top(sparse, 6)), strict=True):
        for rank, node_id in enumerate(ranking):  # Qdrant's weighted RRF: rank r counts as (r + 1) / weight - 1
            fused[node_id] = fused.get(node_id, 0.0) + (1 / ((rank + 1) / weight + RRF_K - 1) if weight else 0.0)
    got = store.query(query, hybrid_fusion="rrf")
    assert got.ids == top(fused, 5)
    assert got.similarities == pytest.approx([fused[i] for i in got.ids], abs=1e-9)
    if alpha in (None, 0.5):  # the same ranking and scores as unweighted RRF
        assert got.ids == store.query(query_for(nodes, 5, mode="hybrid", sparse_top_k=6), hybrid_fusion="rrf").ids
    if alpha == 1.0:  # the sparse ranking weighs nothing
        assert got.ids == top(dense, 5)


def test_dbsf_returns_the_top_of_both_rankings(world):
    store, nodes = world
    query = query_for(nodes, 7, mode="hybrid")
    dense, sparse = dense_scores(nodes, query.query_embedding), sparse_scores(nodes, query.query_str)
    got = store.query(query, hybrid_fusion="dbsf")
    assert len(got.ids) == 5 and set(got.ids) <= set(top(dense, 5)) | set(top(sparse, 5))
    assert got.similarities == sorted(got.similarities, reverse=True)


def test_default_and_sparse_modes_answer_like_the_dense_and_sparse_stores(world, tiny_dual):
    store, nodes = world
    query = query_for(nodes, 3)
    dense = dense_scores(nodes, query.query_embedding)
    assert store.query(query).ids == top(dense, 5)  # DEFAULT: the dual maximum alone
    sparse = store.query(query_for(nodes, 3, mode="sparse", sparse_top_k=4))
    assert sparse.ids == top(sparse_scores(nodes, query.query_str), 4)
    dense_only = tagged_vector_store(QdrantClient(":memory:"), "d", tiny_dual)
    with pytest.raises(ValueError, match="Hybrid search is not enabled"):  # LlamaIndex's own refusal
        dense_only.query(query_for(nodes, 3, mode="hybrid"))


def test_filters_apply_to_the_dense_and_the_sparse_side(world):
    store, nodes = world
    red = MetadataFilters(filters=[MetadataFilter(key="colour", value="red")])
    by_rank = MetadataFilters(filters=[MetadataFilter(key="rank", value=[1, 4, 7, 10], operator=FilterOperator.IN)])
    for rule in ("relative", "rrf", "dbsf"):
        for filters, allowed in ((red, {n.node_id for n in nodes if n.metadata["colour"] == "red"}), (by_rank, None)):
            got = store.query(query_for(nodes, 1, mode="hybrid", filters=filters), hybrid_fusion=rule)
            allowed = allowed or {n.node_id for n in nodes if n.metadata["rank"] in (1, 4, 7, 10)}
            assert got.ids and set(got.ids) <= allowed


def test_the_sync_and_async_paths_agree_in_every_mode_and_rule(tiny_dual):
    nodes = make_nodes(20, 2 * DIM, seed=4)

    async def run():
        store = tagged_vector_store(
            QdrantClient(":memory:"), "dh", tiny_dual, aclient=AsyncQdrantClient(":memory:"), **HYBRID
        )
        store.add(nodes)
        await store.async_add(nodes)  # two embedded Qdrants do not share data
        pairs = []
        for mode in ("default", "sparse", "hybrid"):
            for rule in ("relative", "rrf", "dbsf"):
                # alpha 0: the async path must not read it as 0.5 (DBSF takes none)
                query = query_for(nodes, 6, mode=mode, alpha=None if rule == "dbsf" else 0.0)
                pairs.append((store.query(query, hybrid_fusion=rule), await store.aquery(query, hybrid_fusion=rule)))
        return pairs

    for sync, async_ in asyncio.run(run()):
        assert sync.ids == async_.ids and sync.ids
        assert sync.similarities == pytest.approx(async_.similarities)


def test_dbsf_unless_the_query_weighs_the_rankings(tiny_dual):
    """The measured default; an alpha asks for LlamaIndex's weighted rule instead, and DBSF chosen with an alpha
    is refused rather than the alpha dropped."""
    client = RecordingClient()
    store = tagged_vector_store(client, "dh", tiny_dual, **HYBRID)
    nodes = make_nodes(3, 2 * DIM)
    store.query(query_for(nodes, 0, mode="hybrid"))
    assert client.made("query_points")[-1][1]["query"] == rest.FusionQuery(fusion=rest.Fusion.DBSF)
    before = len(client.made("query_batch_points"))
    store.query(query_for(nodes, 0, mode="hybrid", alpha=0.7))
    assert len(client.made("query_batch_points")) == before + 1  # relative: the two lists, fused in Python
    with pytest.raises(ValueError, match="alpha=0.7 weighs the dense and the sparse ranking, which DBSF cannot"):
        store.query(query_for(nodes, 0, mode="hybrid", alpha=0.7), hybrid_fusion="dbsf")
    chosen = tagged_vector_store(RecordingClient(), "dh", tiny_dual, hybrid_fusion="dbsf", **HYBRID)
    with pytest.raises(ValueError, match="which DBSF cannot"):
        chosen.query(query_for(nodes, 0, mode="hybrid", alpha=0.7))


def test_the_hybrid_rule_is_the_collections_default_and_can_change_per_query(tiny_dual):
    client = RecordingClient()
    store = tagged_vector_store(client, "dh", tiny_dual, hybrid_fusion="rrf", **HYBRID)
    nodes = make_nodes(3, 2 * DIM)
    store.query(query_for(nodes, 0, mode="hybrid"))
    assert client.made("query_points")[-1][1]["query"] == rest.RrfQuery(rrf=rest.Rrf(k=RRF_K))
    store.query(query_for(nodes, 0, mode="hybrid"), hybrid_fusion="relative")
    dense, sparse = client.made("query_batch_points")[-1][1]["requests"]
    assert [p.using for p in dense.prefetch] == ["plain", "calibrated"] and sparse.using == "text-sparse-new"
    assert isinstance(dense.query.formula, rest.MaxExpression)  # the dense maximum first
    with pytest.raises(ValueError, match="hybrid_fusion must be one of"):
        store.query(query_for(nodes, 0, mode="hybrid"), hybrid_fusion="mean")


def test_shard_identifier_reaches_every_fused_request(tiny_dual):
    client = RecordingClient()
    store = tagged_vector_store(
        client,
        "dh",
        tiny_dual,
        sharding_method=rest.ShardingMethod.CUSTOM,
        shard_keys=["a", "b"],
        shard_key_selector_fn=lambda n: "ab"[n % 2],
        **HYBRID,
    )
    nodes = make_nodes(3, 2 * DIM)
    store.query(query_for(nodes, 0), shard_identifier=1)
    assert client.made("query_points")[-1][1]["shard_key_selector"] == "b"
    store.query(query_for(nodes, 0, mode="hybrid"), shard_identifier=2, hybrid_fusion="relative")
    assert [r.shard_key for r in client.made("query_batch_points")[-1][1]["requests"]] == ["a", "a"]
    store.query(query_for(nodes, 0, mode="hybrid"), shard_identifier=3, hybrid_fusion="dbsf")
    assert client.made("query_points")[-1][1]["shard_key_selector"] == "b"
    store.query(query_for(nodes, 0, mode="sparse"), shard_identifier=3)
    assert client.made("query_batch_points")[-1][1]["requests"][0].shard_key == "b"
    store.query(query_for(nodes, 0))  # no identifier: no selector, as upstream
    assert "shard_key_selector" not in client.made("query_points")[-1][1]


def test_clear_then_add_recreates_all_three_vectors(tiny_dual):
    client = QdrantClient(":memory:")
    store = tagged_vector_store(client, "dh", tiny_dual, **HYBRID)
    store.add(make_nodes(3, 2 * DIM))
    tag = collection_tag(client.get_collection("dh"))
    store.clear()
    store.add(make_nodes(3, 2 * DIM, seed=1))
    info = client.get_collection("dh")
    assert collection_tag(info) == tag
    assert set(info.config.params.vectors) == {"plain", "calibrated"}
    assert set(info.config.params.sparse_vectors) == {"text-sparse-new"}
    point = client.scroll("dh", limit=1, with_vectors=True)[0][0]
    assert set(point.vector) == {"plain", "calibrated", "text-sparse-new"}


TEXTS = {
    "barley": "farmers planted barley near the old stone bridge by the river",
    "glacier": "the glacier carved a valley where a quiet lantern museum now stands",
    "harbour": "ships left the harbour at dawn carrying salt and wool to the market",
    "orchard": "apple trees in the orchard flowered late after the cold spring",
}


def test_vector_store_index_end_to_end_sync_and_async(tiny_dual):
    """Nodes embedded by the dual model itself, retrieved in hybrid mode through LlamaIndex's retriever."""
    nodes = [TextNode(id_=key, text=text, metadata={"topic": key}) for key, text in TEXTS.items()]
    question = "which stone bridge had barley planted near it"

    client, aclient = QdrantClient(":memory:"), AsyncQdrantClient(":memory:")
    store = tagged_vector_store(client, "dh", tiny_dual, **HYBRID)
    index = VectorStoreIndex(
        nodes, embed_model=tiny_dual, storage_context=StorageContext.from_defaults(vector_store=store)
    )
    hits = index.as_retriever(similarity_top_k=2, vector_store_query_mode="hybrid", alpha=0.2).retrieve(question)
    assert hits[0].node.node_id == "barley"  # the keyword side decides at alpha 0.2
    points, _ = client.scroll("dh", limit=10, with_vectors=True)
    assert {p.id for p in points} == {point_id(k) for k in TEXTS}
    assert all(set(p.vector) == {"plain", "calibrated", "text-sparse-new"} for p in points)
    content = [n.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes]  # what the index embeds, as it does
    plain, calibrated = tiny_dual.split_dual(tiny_dual.get_text_embedding_batch(content)[list(TEXTS).index("orchard")])
    stored = next(p for p in points if p.id == point_id("orchard")).vector
    np.testing.assert_allclose(stored["plain"], plain, atol=1e-5)
    np.testing.assert_allclose(stored["calibrated"], calibrated, atol=1e-5)

    async def run():
        astore = await atagged_vector_store(aclient, "dh", tiny_dual, **HYBRID)
        aindex = VectorStoreIndex(
            nodes,
            embed_model=tiny_dual,
            storage_context=StorageContext.from_defaults(vector_store=astore),
            use_async=True,
        )
        retriever = aindex.as_retriever(similarity_top_k=2, vector_store_query_mode="hybrid", alpha=0.2)
        return await retriever.aretrieve(question)

    ahits = asyncio.run(run())
    assert [h.node.node_id for h in ahits] == [h.node.node_id for h in hits]
    assert [h.score for h in ahits] == pytest.approx([h.score for h in hits], abs=1e-5)


def test_a_hybrid_query_without_text_falls_back_to_the_dense_fusion_as_upstream(world):
    store, nodes = world
    query = VectorStoreQuery(
        query_embedding=nodes[4].embedding[:DIM], similarity_top_k=5, mode=VectorStoreQueryMode.HYBRID
    )
    assert store.query(query).ids == top(dense_scores(nodes, query.query_embedding), 5)
