"""The same operations, on the same hand-made vectors, through LlamaIndex's QdrantVectorStore and through ours.

Each test runs one operation on both stores (each on its own embedded Qdrant) and compares what comes back:
ids, scores, node texts and metadata, and what is left stored. Where our store differs by design (the tag,
two extra payload keys) the comparison says so. Node ids are UUIDs here because LlamaIndex's store accepts
no others.
"""

from __future__ import annotations

import asyncio

import pytest
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)
from llama_index.vector_stores.qdrant import QdrantVectorStore

from posfair_llamaindex.qdrant import (
    POINT_FINGERPRINT_KEY,
    TEXT_HASH_KEY,
    atagged_vector_store,
    collection_tag,
    tagged_vector_store,
)
from tests.qdrant.conftest import Engine, make_nodes, sparse_encode

DIM = 64
NAME = "diff"
HYBRID = dict(enable_hybrid=True, sparse_doc_fn=sparse_encode, sparse_query_fn=sparse_encode)


ENGINE = Engine("local", None)  # every test here runs on local mode and on Qdrant Edge (the fixture below)


@pytest.fixture(autouse=True)
def on_each_engine(engine):
    global ENGINE
    ENGINE = engine
    yield


def pair(embed, **store_kwargs):
    """(upstream, ours): one store each, on separate Qdrants of the engine under test, with the same options."""
    upstream = QdrantVectorStore(NAME, client=ENGINE.client(), **store_kwargs)
    ours = tagged_vector_store(ENGINE.client(), NAME, embed, **store_kwargs)
    return upstream, ours


async def apair(embed, **store_kwargs):
    upstream = QdrantVectorStore(NAME, aclient=ENGINE.aclient(), **store_kwargs)
    ours = await atagged_vector_store(ENGINE.aclient(), NAME, embed, **store_kwargs)
    return upstream, ours


def same_result(a, b):
    assert a.similarities == pytest.approx(b.similarities, abs=1e-6)
    if ENGINE.name == "local":  # local mode breaks ties by insertion order, the same for both stores
        keep_a = keep_b = list(range(len(a.ids)))
    else:  # Edge leaves a tie's order (and which of a tie at the cut make the top k) to its segments
        keep_a, keep_b = above_the_last_tie(a), above_the_last_tie(b)
    assert [a.ids[i] for i in keep_a] == [b.ids[i] for i in keep_b]
    for field in (lambda n: n.get_content(), lambda n: n.metadata, lambda n: n.ref_doc_id):
        assert [field(a.nodes[i]) for i in keep_a] == [field(b.nodes[i]) for i in keep_b]


def above_the_last_tie(result) -> list[int]:
    """Positions in score order, ties in id order, leaving out the lowest score's tie when it has several."""
    scores = [round(s, 5) for s in result.similarities]
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], str(result.ids[i])))
    lowest = min(scores, default=None)
    return [i for i in order if scores[i] != lowest or scores.count(lowest) == 1]


def stored(store) -> dict:
    """{point id: payload without our two keys} of every point."""
    points, _ = store.client.scroll(NAME, limit=10_000, with_payload=True)
    return {
        str(p.id): {k: v for k, v in p.payload.items() if k not in (POINT_FINGERPRINT_KEY, TEXT_HASH_KEY)}
        for p in points
    }


@pytest.fixture
def nodes():
    return make_nodes(24, DIM, seed=3)


@pytest.fixture
def stores(tiny_embed, nodes):
    upstream, ours = pair(tiny_embed)
    assert upstream.add(nodes) == ours.add(nodes) == [n.node_id for n in nodes]
    return upstream, ours


def query(nodes, i=0, k=5, **fields):
    return VectorStoreQuery(query_embedding=nodes[i].embedding, similarity_top_k=k, **fields)


def test_add_stores_the_same_points(stores, tiny_embed):
    upstream, ours = stores
    assert stored(upstream) == stored(ours)
    points, _ = ours.client.scroll(NAME, limit=100, with_payload=True)
    assert {p.payload[POINT_FINGERPRINT_KEY] for p in points} == {tiny_embed.fingerprint()}
    assert collection_tag(ours.client.get_collection(NAME))["fingerprint"] == tiny_embed.fingerprint()
    assert collection_tag(upstream.client.get_collection(NAME)) is None


def test_async_add_and_aquery_give_the_same_answers(tiny_embed, nodes):
    async def run():
        upstream, ours = await apair(tiny_embed)
        added = (await upstream.async_add(nodes), await ours.async_add(nodes))
        q = query(nodes, 4, k=7)
        return added, await upstream.aquery(q), await ours.aquery(q)

    (up_ids, our_ids), a, b = asyncio.run(run())
    assert up_ids == our_ids
    same_result(a, b)
    assert a.ids[0] == nodes[4].node_id


@pytest.mark.parametrize("k", [1, 5, 24, 50])
def test_query_top_k(stores, nodes, k):
    upstream, ours = stores
    a, b = upstream.query(query(nodes, 2, k=k)), ours.query(query(nodes, 2, k=k))
    same_result(a, b)
    assert len(a.ids) == min(k, len(nodes))


FILTERS = {
    "eq": MetadataFilters(filters=[MetadataFilter(key="colour", value="red")]),
    "gt": MetadataFilters(filters=[MetadataFilter(key="rank", value=10, operator=FilterOperator.GT)]),
    "in": MetadataFilters(filters=[MetadataFilter(key="group", value=[0, 2], operator=FilterOperator.IN)]),
    "or": MetadataFilters(
        filters=[
            MetadataFilter(key="colour", value="green"),
            MetadataFilter(key="rank", value=3, operator=FilterOperator.LTE),
        ],
        condition=FilterCondition.OR,
    ),
    "nested": MetadataFilters(
        filters=[
            MetadataFilter(key="group", value=1, operator=FilterOperator.NE),
            MetadataFilters(filters=[MetadataFilter(key="rank", value=20, operator=FilterOperator.LT)]),
        ]
    ),
}


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_metadata_filters(stores, nodes, name):
    upstream, ours = stores
    q = query(nodes, 1, k=10, filters=FILTERS[name])
    a, b = upstream.query(q), ours.query(q)
    same_result(a, b)
    assert 0 < len(a.ids) < len(nodes)  # the filter did something


def test_node_ids_and_doc_ids_restrict_the_query(stores, nodes):
    upstream, ours = stores
    by_node = query(nodes, 0, k=10, node_ids=[n.node_id for n in nodes[5:9]])
    by_doc = query(nodes, 0, k=10, doc_ids=["doc-1", "doc-3"])
    both = query(nodes, 0, k=10, doc_ids=["doc-1"], node_ids=[n.node_id for n in nodes[:12]])
    for q in (by_node, by_doc, both):
        a, b = upstream.query(q), ours.query(q)
        same_result(a, b)
    assert set(ours.query(by_node).ids) == {n.node_id for n in nodes[5:9]}
    assert {n.ref_doc_id for n in ours.query(by_doc).nodes} == {"doc-1", "doc-3"}


def test_node_ids_query_async(tiny_embed, nodes):
    async def run():
        upstream, ours = await apair(tiny_embed)
        await upstream.async_add(nodes)
        await ours.async_add(nodes)
        q = query(nodes, 0, k=3, node_ids=[n.node_id for n in nodes[10:14]])
        return await upstream.aquery(q), await ours.aquery(q)

    a, b = asyncio.run(run())
    same_result(a, b)
    assert len(a.ids) == 3


def test_get_nodes(stores, nodes):
    upstream, ours = stores
    wanted = [n.node_id for n in nodes[3:7]]
    by_id = sorted(n.node_id for n in upstream.get_nodes(node_ids=wanted))
    assert by_id == sorted(n.node_id for n in ours.get_nodes(node_ids=wanted)) == sorted(wanted)
    a = {n.node_id: (n.get_content(), n.metadata) for n in upstream.get_nodes(filters=FILTERS["eq"])}
    b = {n.node_id: (n.get_content(), n.metadata) for n in ours.get_nodes(filters=FILTERS["eq"])}
    assert a == b and len(a) == 8
    got = {n.node_id: n.embedding for n in ours.get_nodes(node_ids=wanted)}
    assert got[wanted[0]] == pytest.approx(nodes[3].embedding, abs=1e-6)


def test_delete_by_document(stores):
    upstream, ours = stores
    upstream.delete("doc-2")
    ours.delete("doc-2")
    assert stored(upstream) == stored(ours)
    assert len(stored(ours)) == 18


def test_delete_nodes_by_ids_and_filters(stores, nodes):
    upstream, ours = stores
    for store in stores:
        store.delete_nodes(node_ids=[nodes[0].node_id, nodes[1].node_id])
    assert stored(upstream) == stored(ours)
    assert len(stored(ours)) == 22
    for store in stores:
        store.delete_nodes(filters=FILTERS["gt"])
    assert stored(upstream) == stored(ours)
    assert len(stored(ours)) == 9


def test_async_delete_and_get_nodes(tiny_embed, nodes):
    async def run():
        upstream, ours = await apair(tiny_embed)
        out = []
        for store in (upstream, ours):
            await store.async_add(nodes)
            await store.adelete("doc-0")
            await store.adelete_nodes(node_ids=[nodes[1].node_id])
            out.append(sorted(n.node_id for n in await store.aget_nodes(node_ids=[n.node_id for n in nodes])))
        return out

    a, b = asyncio.run(run())
    assert a == b and len(a) == 24 - 6 - 1


def test_clear_then_add(stores, nodes, tiny_embed):
    upstream, ours = stores
    for store in stores:
        store.clear()
        assert not store.client.collection_exists(NAME)
        store.add(nodes[:5])
    assert stored(upstream) == stored(ours)
    same_result(upstream.query(query(nodes, 2)), ours.query(query(nodes, 2)))
    # the difference by design: ours is tagged again, so it can be reopened
    assert collection_tag(ours.client.get_collection(NAME))["fingerprint"] == tiny_embed.fingerprint()
    tagged_vector_store(ours.client, NAME, tiny_embed)


@pytest.mark.parametrize(
    "mode", [VectorStoreQueryMode.HYBRID, VectorStoreQueryMode.SPARSE, VectorStoreQueryMode.DEFAULT]
)
def test_hybrid(tiny_embed, nodes, mode):
    upstream, ours = pair(tiny_embed, **HYBRID)
    upstream.add(nodes)
    ours.add(nodes)
    assert stored(upstream) == stored(ours)
    up_info, our_info = upstream.client.get_collection(NAME), ours.client.get_collection(NAME)
    assert up_info.config.params.vectors == our_info.config.params.vectors
    assert up_info.config.params.sparse_vectors == our_info.config.params.sparse_vectors
    for i in (0, 7, 13):
        q = VectorStoreQuery(
            query_embedding=nodes[i].embedding,
            query_str=nodes[i].text,
            similarity_top_k=6,
            mode=mode,
            filters=FILTERS["in"] if i == 13 else None,
        )
        a, b = upstream.query(q), ours.query(q)
        same_result(a, b)
        assert a.ids


def test_hybrid_async(tiny_embed, nodes):
    async def run():
        upstream, ours = await apair(tiny_embed, **HYBRID)
        q = VectorStoreQuery(
            query_embedding=nodes[5].embedding, query_str=nodes[5].text, similarity_top_k=4, mode="hybrid"
        )
        results = []
        for store in (upstream, ours):
            await store.async_add(nodes)
            results.append(await store.aquery(q))
        return results

    a, b = asyncio.run(run())
    same_result(a, b)
    assert a.ids[0] == nodes[5].node_id


def test_the_dimension_is_fixed_by_design(stores):
    """Upstream sizes its collection from the first node; ours holds the model's dimension and says so."""
    _, ours = stores
    with pytest.raises(ValueError, match=f"holds single {DIM}-dimensional posfair vectors"):
        ours.add(make_nodes(1, DIM + 1))
