"""Issue 17's bugs, sync and async: node_ids queries, clear() then add(), and node ids in query results; and
hybrid search on a tagged collection (the sparse vector, its tag, and what is refused)."""

from __future__ import annotations

import asyncio
import random

import pytest
from llama_index.core.vector_stores.types import VectorStoreQuery, VectorStoreQueryMode
from qdrant_client import AsyncQdrantClient, QdrantClient

from posfair_llamaindex.qdrant import (
    CollectionTagMismatchError,
    atagged_vector_store,
    collection_tag,
    point_id,
    tagged_vector_store,
)
from tests.qdrant.conftest import make_nodes, sparse_encode, unit_vector

DIM = 64


def _query(nodes, k=3, **fields):
    return VectorStoreQuery(query_embedding=nodes[0].embedding, similarity_top_k=k, **fields)


# ----------------------------------------------------------------------------- bug 1: node_ids
def test_a_node_ids_query_is_restricted_to_those_nodes(tiny_embed):
    nodes = make_nodes(12, DIM, uuid_ids=False)
    store = tagged_vector_store(QdrantClient(":memory:"), "c", tiny_embed)
    store.add(nodes)
    allowed = [nodes[5].node_id, nodes[7].node_id]
    query = _query(nodes, k=5, node_ids=allowed)
    result = store.query(query)
    assert sorted(result.ids) == sorted(allowed)
    assert query.node_ids == allowed  # the caller's query is not rewritten


def test_a_node_ids_query_works_async_and_on_a_dual_store(tiny_embed, tiny_dual):
    wanted = ["note-0-3", "note-0-8"]
    plain = unit_vector(random.Random(1), DIM)

    async def run():
        single = await atagged_vector_store(AsyncQdrantClient(":memory:"), "c", tiny_embed)
        await single.async_add(make_nodes(10, DIM, uuid_ids=False))
        dual = await atagged_vector_store(AsyncQdrantClient(":memory:"), "d", tiny_dual)
        await dual.async_add(make_nodes(10, 2 * DIM, uuid_ids=False))
        query = VectorStoreQuery(query_embedding=plain, similarity_top_k=4, node_ids=wanted)
        return await single.aquery(query), await dual.aquery(query)

    single, dual = asyncio.run(run())
    assert sorted(single.ids) == wanted
    assert sorted(dual.ids) == wanted
    sync_dual = tagged_vector_store(QdrantClient(":memory:"), "d", tiny_dual)
    sync_dual.add(make_nodes(10, 2 * DIM, uuid_ids=False))
    assert (
        sorted(sync_dual.query(VectorStoreQuery(query_embedding=plain, similarity_top_k=4, node_ids=wanted)).ids)
        == wanted
    )


# ----------------------------------------------------------------------------- bug 2: clear() then add()
def test_clear_then_add_recreates_the_collection_with_its_tag(tiny_embed):
    client = QdrantClient(":memory:")
    store = tagged_vector_store(client, "c", tiny_embed)
    store.add(make_nodes(4, DIM))
    tag = collection_tag(client.get_collection("c"))
    store.clear()
    assert not client.collection_exists("c")
    store.add(make_nodes(3, DIM, seed=1))
    assert collection_tag(client.get_collection("c")) == tag
    assert client.count("c", exact=True).count == 3
    tagged_vector_store(client, "c", tiny_embed)  # reopening checks the tag: no CollectionTagMismatchError


def test_aclear_then_async_add_recreates_the_collection_with_its_tag(tiny_embed, tiny_dual):
    async def run():
        aclient = AsyncQdrantClient(":memory:")
        store = await atagged_vector_store(aclient, "c", tiny_dual)
        await store.async_add(make_nodes(4, 2 * DIM))
        tag = collection_tag(await aclient.get_collection("c"))
        await store.aclear()
        gone = not await aclient.collection_exists("c")
        await store.async_add(make_nodes(2, 2 * DIM, seed=1))
        info = await aclient.get_collection("c")
        await atagged_vector_store(aclient, "c", tiny_dual)
        return tag, gone, info

    tag, gone, info = asyncio.run(run())
    assert gone
    assert collection_tag(info) == tag
    assert sorted(info.config.params.vectors) == ["calibrated", "plain"]


def test_a_wrong_dimension_after_clear_is_refused_before_anything_is_created(tiny_embed):
    client = QdrantClient(":memory:")
    store = tagged_vector_store(client, "c", tiny_embed)
    store.clear()
    with pytest.raises(ValueError, match="32-dimensional embedding"):
        store.add(make_nodes(2, 32))
    assert not client.collection_exists("c")


# ----------------------------------------------------------------------------- bug 3: result ids are node ids
def test_query_results_carry_node_ids_not_point_ids(tiny_embed):
    nodes = make_nodes(8, DIM, uuid_ids=False)
    store = tagged_vector_store(QdrantClient(":memory:"), "c", tiny_embed)
    assert store.add(nodes) == [n.node_id for n in nodes]  # LlamaIndex's add returns node ids
    result = store.query(_query(nodes, k=8))
    assert set(result.ids) == {n.node_id for n in nodes}
    assert result.ids == [node.node_id for node in result.nodes]
    assert result.ids[0] == nodes[0].node_id
    assert point_id(nodes[0].node_id) != nodes[0].node_id


def test_async_query_results_carry_node_ids(tiny_dual):
    nodes = make_nodes(6, 2 * DIM, uuid_ids=False)

    async def run():
        store = await atagged_vector_store(AsyncQdrantClient(":memory:"), "c", tiny_dual)
        await store.async_add(nodes)
        return await store.aquery(VectorStoreQuery(query_embedding=nodes[2].embedding[:DIM], similarity_top_k=6))

    result = asyncio.run(run())
    assert set(result.ids) == {n.node_id for n in nodes}
    assert result.ids[0] == nodes[2].node_id


# ----------------------------------------------------------------------------- hybrid on a tagged collection
HYBRID = dict(enable_hybrid=True, sparse_doc_fn=sparse_encode, sparse_query_fn=sparse_encode)


def test_a_hybrid_collection_has_the_sparse_vector_and_records_it_in_the_tag(tiny_embed):
    client = QdrantClient(":memory:")
    store = tagged_vector_store(client, "h", tiny_embed, **HYBRID)
    nodes = make_nodes(10, DIM)
    store.add(nodes)
    info = client.get_collection("h")
    assert list(info.config.params.sparse_vectors) == ["text-sparse-new"]
    assert list(info.config.params.vectors) == ["text-dense"]
    tag = collection_tag(info)
    assert tag["hybrid"] == {
        "dense_vector": "text-dense",
        "sparse_vector": "text-sparse-new",
        "sparse_encoder": "custom",
        "idf": False,
    }
    # the dense vectors mean what they mean in a dense-only collection: same fingerprint, on points too
    assert tag["fingerprint"] == tiny_embed.fingerprint()
    hybrid = store.query(
        VectorStoreQuery(query_embedding=nodes[4].embedding, query_str=nodes[4].text, similarity_top_k=3, mode="hybrid")
    )
    sparse = store.query(
        VectorStoreQuery(query_embedding=nodes[4].embedding, query_str=nodes[4].text, similarity_top_k=3, mode="sparse")
    )
    assert hybrid.ids[0] == nodes[4].node_id
    assert nodes[4].node_id in sparse.ids


def test_a_dense_only_collection_keeps_its_tag_and_refuses_a_hybrid_store(tiny_embed):
    client = QdrantClient(":memory:")
    tagged_vector_store(client, "d", tiny_embed)
    tag = collection_tag(client.get_collection("d"))
    assert "hybrid" not in tag  # tags (and fingerprints) of dense-only collections are unchanged
    with pytest.raises(CollectionTagMismatchError, match="hybrid: stored None"):
        tagged_vector_store(client, "d", tiny_embed, **HYBRID)
    tagged_vector_store(client, "h", tiny_embed, **HYBRID)
    with pytest.raises(CollectionTagMismatchError, match="hybrid: stored"):
        tagged_vector_store(client, "h", tiny_embed)


def test_hybrid_without_sparse_functions_or_fastembed_is_refused_clearly(tiny_embed):
    pytest.importorskip("qdrant_client")
    try:
        import fastembed  # noqa: F401

        pytest.skip("fastembed is installed: its default sparse model would be used")
    except ImportError:
        pass
    client = QdrantClient(":memory:")
    with pytest.raises(ValueError, match="sparse_query_fn.*fastembed is not installed"):
        tagged_vector_store(client, "x", tiny_embed, enable_hybrid=True, sparse_doc_fn=sparse_encode)
    assert not client.collection_exists("x")


def test_async_hybrid_store_writes_sparse_vectors(tiny_embed):
    nodes = make_nodes(6, DIM)

    async def run():
        aclient = AsyncQdrantClient(":memory:")
        store = await atagged_vector_store(aclient, "h", tiny_embed, **HYBRID)
        await store.async_add(nodes)
        points, _ = await aclient.scroll("h", limit=10, with_vectors=True)
        query = VectorStoreQuery(query_embedding=nodes[1].embedding, query_str=nodes[1].text, similarity_top_k=2)
        return points, await store.aquery(VectorStoreQuery(**{**query.__dict__, "mode": VectorStoreQueryMode.HYBRID}))

    points, result = asyncio.run(run())
    assert all(set(p.vector) == {"text-dense", "text-sparse-new"} for p in points)
    assert result.ids[0] == nodes[1].node_id


def test_clear_then_add_recreates_a_hybrid_collection_with_its_sparse_vector(tiny_embed):
    client = QdrantClient(":memory:")
    store = tagged_vector_store(client, "h", tiny_embed, **HYBRID)
    store.add(make_nodes(3, DIM))
    tag = collection_tag(client.get_collection("h"))
    store.clear()
    store.add(make_nodes(3, DIM, seed=2))
    info = client.get_collection("h")
    assert collection_tag(info) == tag
    assert list(info.config.params.sparse_vectors) == ["text-sparse-new"]
    tagged_vector_store(client, "h", tiny_embed, **HYBRID)
