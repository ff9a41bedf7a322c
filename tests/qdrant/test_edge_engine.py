"""The store's fused requests on Qdrant's own Rust engine (qdrant-edge-py), against local mode and brute force.

Dual: every fusion rule, with and without a payload filter (and node ids), at several k. Windows: the document
vector and the MaxSim multivector fused by max, and the multivector alone. The same request that the store sends
to a server goes to an edge shard holding the same points. Exact search on small shards; the HNSW behaviour at
scale is measured by benchmarks/bench_hnsw_recall.py (dual) and benchmarks/bench_windows.py store (windows).
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters, VectorStoreQuery
from qdrant_client import QdrantClient

from posfair_llamaindex import PosFairEmbedding
from posfair_llamaindex.encoding.windows import WindowConfig
from posfair_llamaindex.options import RRF_K
from posfair_llamaindex.qdrant import point_id, tagged_vector_store
from posfair_llamaindex.qdrant.store import MISSING_SCORE, PosFairQdrantVectorStore
from posfair_llamaindex.qdrant.vector_layout import layout_for
from tests.qdrant.conftest import make_nodes, unit_vector

edge = pytest.importorskip("qdrant_edge", reason="qdrant-edge-py is in the dev extra")
from tests.qdrant import edge as translate  # noqa: E402  (needs qdrant_edge)

DIM, POINTS, CANDIDATES = 64, 800, 40
FILTERS = {
    "none": None,
    "colour": MetadataFilters(filters=[MetadataFilter(key="colour", value="blue")]),
    "rank": MetadataFilters(filters=[MetadataFilter(key="rank", value=500, operator=FilterOperator.LT)]),
}


@pytest.fixture(scope="module")
def world(tiny_dual, tmp_path_factory):
    nodes = make_nodes(POINTS, 2 * DIM, seed=11, uuid_ids=False)
    store = tagged_vector_store(QdrantClient(":memory:"), "dual", tiny_dual, fusion_candidates=CANDIDATES)
    store.add(nodes)
    shard = translate.create_shard(str(tmp_path_factory.mktemp("edge") / "shard"), DIM)
    translate.upsert(shard, store._build_points(nodes, store.sparse_vector_name)[0])
    vectors = np.array([n.embedding for n in nodes], dtype=np.float64)
    plain, calibrated = vectors[:, :DIM], vectors[:, DIM:]
    yield store, shard, nodes, plain, calibrated
    shard.close()


def brute_force(nodes, plain, calibrated, q, fusion, k, allowed, keep=None):
    """The fused top k (or top ``keep``) over all allowed points, computed from the definitions (DESIGN.md §2.6)."""
    q = np.asarray(q, dtype=np.float64)
    q /= np.linalg.norm(q)
    ids = np.flatnonzero(allowed)
    per_vector = [(m[ids] @ q) / np.linalg.norm(m[ids], axis=1) for m in (plain, calibrated)]
    if fusion == "max":
        fused = np.maximum(*per_vector)
    else:  # a candidate list per vector; outside it a point counts MISSING_SCORE (sum) or nothing (rrf)
        limit = max(k, CANDIDATES)
        fused = np.zeros(len(ids))
        hit_any = np.zeros(len(ids), dtype=bool)
        for scores in per_vector:
            order = np.argsort(-scores)[:limit]
            hit_any[order] = True
            if fusion == "rrf":
                fused[order] += 1.0 / (RRF_K + np.arange(len(order)))
            else:
                contribution = np.full(len(ids), MISSING_SCORE)
                contribution[order] = scores[order]
                fused += contribution
        fused = np.where(hit_any, fused, -np.inf)
    order = np.argsort(-fused)[: keep or k]
    return {nodes[ids[i]].node_id: float(fused[i]) for i in order}


@pytest.mark.parametrize("fusion", ["max", "sum", "rrf"])
@pytest.mark.parametrize("where", sorted(FILTERS))
@pytest.mark.parametrize("k", [1, 10, 50])
def test_edge_engine_local_mode_and_brute_force_agree(world, fusion, where, k):
    store, shard, nodes, plain, calibrated = world
    q = unit_vector(random.Random(k * 7 + len(where)), DIM)
    query = VectorStoreQuery(query_embedding=q, similarity_top_k=k, filters=FILTERS[where])
    allowed = np.array([_passes(n, FILTERS[where]) for n in nodes])

    local = store.query(query, fusion=fusion)
    hits = shard.query(translate.translate(store._fused_request(query, {"fusion": fusion})))
    by_point = {point_id(n.node_id): n.node_id for n in nodes}
    engine = {by_point[str(h.id)]: h.score for h in hits}
    exact = brute_force(nodes, plain, calibrated, q, fusion, k, allowed)

    assert len(local.ids) == len(engine) == len(exact) == k
    if fusion == "rrf":  # ranks tie often: compare every hit's score with its definition instead of the order
        full = brute_force(nodes, plain, calibrated, q, fusion, k, allowed, keep=len(nodes))
        # the engine answers in float32
        assert sorted(engine.values(), reverse=True) == pytest.approx(list(exact.values()), rel=1e-6)
        assert all(full[i] == pytest.approx(s, rel=1e-6) for i, s in engine.items())
        assert all(full[i] == pytest.approx(s, rel=1e-6) for i, s in zip(local.ids, local.similarities, strict=True))
    else:
        assert list(engine) == list(exact) == local.ids
        assert list(engine.values()) == pytest.approx(list(exact.values()), abs=2e-6)
        assert local.similarities == pytest.approx(list(exact.values()), abs=2e-6)


def test_node_ids_restrict_the_engine_too(world):
    store, shard, nodes, plain, calibrated = world
    chosen = {n.node_id for n in nodes[100:160]}
    q = nodes[120].embedding[:DIM]
    query = VectorStoreQuery(query_embedding=q, similarity_top_k=5, node_ids=sorted(chosen))
    hits = shard.query(translate.translate(store._fused_request(query, {"fusion": "max"})))
    by_point = {point_id(n.node_id): n.node_id for n in nodes}
    allowed = np.array([n.node_id in chosen for n in nodes])
    assert [by_point[str(h.id)] for h in hits] == list(brute_force(nodes, plain, calibrated, q, "max", 5, allowed))
    assert store.query(query).ids == [by_point[str(h.id)] for h in hits]


def test_search_params_travel_to_both_prefetches(world):
    store, *_ = world
    query = VectorStoreQuery(query_embedding=[1.0] * DIM, similarity_top_k=3)
    request = store._fused_request(query, {"search_params": {"hnsw_ef": 321, "exact": False}})
    assert [p.params.hnsw_ef for p in request["prefetch"]] == [321, 321]
    assert translate.translate(request).prefetches[0].params.hnsw_ef == 321
    assert [p.limit for p in store._fused_request(query, {"max_candidates": 7})["prefetch"]] == [7, 7]
    # the default for max: max(2k, 100) per vector (RESULTS.md §9.2)
    assert [p.limit for p in request["prefetch"]] == [100, 100]
    wide = VectorStoreQuery(query_embedding=[1.0] * DIM, similarity_top_k=80)
    assert [p.limit for p in store._fused_request(wide, {})["prefetch"]] == [160, 160]
    acorn = store._fused_request(query, {"search_params": {"acorn": {"enable": True}}})
    assert translate.translate(acorn).prefetches[1].params.acorn.enable
    with pytest.raises(ValueError, match="max_candidates must be an int >= 1"):
        store._fused_request(query, {"max_candidates": 0})


def _passes(node, filters) -> bool:
    if filters is None:
        return True
    f = filters.filters[0]
    value = node.metadata[f.key]
    return value == f.value if f.operator == FilterOperator.EQ else value < f.value


# ---------------------------------------------------------------------- windows: a MaxSim multivector beside plain
WINDOW_POINTS = 300


@pytest.fixture(scope="module")
def windows_world(tiny_model_dir, tmp_path_factory):
    """A windows collection (plain + a MaxSim multivector of 0 to 5 windows per document) in local mode and on an
    edge shard made from the same layout; every window is its document's plain vector moved, so either side can win."""
    config = WindowConfig(size=16, document="plain")
    model = PosFairEmbedding(tiny_model_dir("bert"), mode="windows", windows=config, device="cpu")
    rng = np.random.default_rng(5)
    nodes = make_nodes(WINDOW_POINTS, DIM, seed=13, uuid_ids=False)
    plain, windows = [], []
    for node in nodes:
        vector = np.asarray(node.embedding)
        rows = vector + 0.8 * rng.standard_normal((int(rng.integers(0, 6)), DIM)) / np.sqrt(DIM)
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        node.embedding = [*vector.tolist(), *rows.ravel().tolist()]
        plain.append(vector)
        windows.append(rows)
    client = QdrantClient(":memory:")
    store = tagged_vector_store(client, "windows", model)
    store.add(nodes)
    only = PosFairEmbedding(
        tiny_model_dir("bert"), mode="windows", windows=config.model_copy(update={"document": "none"}), device="cpu"
    )
    # the request a windows-only collection sends, asked of the same points (its layout names only `windows`)
    windows_only = PosFairQdrantVectorStore(
        "windows", client=client, fingerprint=store.fingerprint, vector_layout=layout_for(only)
    )
    assert any(len(rows) == 0 for rows in windows)  # a document with no window: its point has no multivector
    shard = translate.create_shard(str(tmp_path_factory.mktemp("edge") / "windows"), store.layout)
    translate.upsert(shard, store._build_points(nodes, store.sparse_vector_name)[0])
    yield {"plain + windows": store, "windows": windows_only}, shard, nodes, np.array(plain), windows
    shard.close()


@pytest.mark.parametrize("layout", ["plain + windows", "windows"])
@pytest.mark.parametrize("where", ["none", "colour"])
@pytest.mark.parametrize("k", [1, 10, 50])
def test_windows_request_on_the_edge_engine_equals_local_mode_and_brute_force(windows_world, layout, where, k):
    stores, shard, nodes, plain, windows = windows_world
    store = stores[layout]
    q = np.asarray(unit_vector(random.Random(k * 5 + len(where) + len(layout)), DIM))
    query = VectorStoreQuery(query_embedding=q.tolist(), similarity_top_k=k, filters=FILTERS[where])
    request = store._fused_request(query, {})
    # fused: a prefetch per vector, max on the server; windows alone: the multivector's own query, [q]
    assert ("prefetch" in request) == (layout == "plain + windows")

    best_window = np.array([np.max(rows @ q) if len(rows) else -np.inf for rows in windows])
    scores = np.maximum(plain @ q, best_window) if layout == "plain + windows" else best_window
    allowed = np.array([_passes(n, FILTERS[where]) for n in nodes]) & np.isfinite(scores)
    order = [i for i in np.argsort(-scores) if allowed[i]][:k]
    exact = {nodes[i].node_id: scores[i] for i in order}

    by_point = {point_id(n.node_id): n.node_id for n in nodes}
    engine = {by_point[str(h.id)]: h.score for h in shard.query(translate.translate(request))}
    local = store.query(query)
    assert len(exact) == k
    assert list(engine) == list(exact) == local.ids
    assert list(engine.values()) == pytest.approx(list(exact.values()), abs=2e-6)
    assert local.similarities == pytest.approx(list(exact.values()), abs=2e-6)
    if layout == "plain + windows":  # the maximum is taken on both sides: some hits are won by a window, some not
        won_by_window = [best_window[i] > plain[i] @ q for i in order]
        assert k == 1 or 0 < sum(won_by_window) < k
