"""What LlamaIndex's own QdrantVectorStore tests check, checked on ours, in our words.

Upstream's suite (llama-index-vector-stores-qdrant, tests/) runs against this store with only the construction
changed; its results are in the notes of issue 30. These are the same behaviours on our store, written for it:
the in-memory ones directly, the server and cluster ones on a recording client (calls, not a server), and
the ones that meet the tag on purpose (an untagged collection is refused).
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
)
from qdrant_client import AsyncQdrantClient, QdrantClient
from qdrant_client.http import models as rest

from posfair_llamaindex.qdrant import CollectionTagMismatchError, atagged_vector_store, tagged_vector_store
from posfair_llamaindex.qdrant.store import PosFairQdrantVectorStore, plan_store
from tests.qdrant.conftest import sparse_encode, unit_vector
from tests.qdrant.recording import AsyncRecordingClient, RecordingClient

DIM = 64
IDS = [
    "11111111-1111-1111-1111-111111111111",
    "22222222-2222-2222-2222-222222222222",
    "33333333-3333-3333-3333-333333333333",
]
HYBRID = dict(enable_hybrid=True, sparse_doc_fn=sparse_encode, sparse_query_fn=sparse_encode)


def three_nodes(width=DIM):
    import random

    rng = random.Random(0)
    keys = [1, 2, "3"]  # the third one a string, as upstream's fixture has it
    return [
        TextNode(
            text=f"test{i + 1}",
            id_=node_id,
            embedding=unit_vector(rng, width),
            metadata={"some_key": keys[i]},
            relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id="test-0")} if i < 2 else {},
        )
        for i, node_id in enumerate(IDS)
    ]


@pytest.fixture(params=["single", "dual"])
def filled(request, tiny_embed, tiny_dual):
    """A store with upstream's three nodes in both of its embedded Qdrants (they share nothing)."""
    embed = tiny_dual if request.param == "dual" else tiny_embed

    async def build():
        store = tagged_vector_store(QdrantClient(":memory:"), "test", embed, aclient=AsyncQdrantClient(":memory:"))
        nodes = three_nodes(DIM * (2 if embed.is_dual else 1))
        store.add(nodes)
        await store.async_add(nodes)
        return store

    return asyncio.run(build())


def test_it_is_a_llamaindex_vector_store():
    assert issubclass(PosFairQdrantVectorStore, BasePydanticVectorStore)


def test_delete_nodes_then_get_nodes(filled):
    filled.delete_nodes(node_ids=[IDS[0]])
    assert sorted(n.node_id for n in filled.get_nodes(node_ids=IDS)) == IDS[1:]


def test_clear_drops_the_collection(filled):
    filled.clear()
    with pytest.raises(ValueError, match="Collection test not found"):
        filled.get_nodes(node_ids=IDS)


def test_async_delete_get_and_clear(filled):
    async def run():
        await filled.adelete_nodes(node_ids=[IDS[0]])
        left = await filled.aget_nodes(node_ids=IDS)
        await filled.aclear()
        with pytest.raises(ValueError, match="Collection test not found"):
            await filled.aget_nodes(node_ids=IDS)
        return left

    assert sorted(n.node_id for n in asyncio.run(run())) == IDS[1:]


def test_nodes_come_back_with_their_embedding(tiny_embed):
    async def run():
        store = await atagged_vector_store(AsyncQdrantClient(":memory:"), "test", tiny_embed)
        await store.async_add(three_nodes())
        return await store.aget_nodes(node_ids=IDS)

    assert all(n.embedding is not None and len(n.embedding) == DIM for n in asyncio.run(run()))


def test_parse_to_query_result_reads_unnamed_and_named_vectors(filled):
    payload = {"text": "Hello, world!"}
    unnamed = filled.parse_to_query_result([rest.PointStruct(id=1, vector={"": [1, 2, 3]}, payload=payload)])
    assert unnamed.nodes[0].embedding == [1, 2, 3]
    filled.dense_vector_name = "text-dense"
    named = filled.parse_to_query_result([rest.PointStruct(id=1, vector={"text-dense": [4, 5]}, payload=payload)])
    assert named.nodes[0].embedding == [4, 5]


def test_metadata_filters_build_and_or_not_and_nested(filled):
    books = MetadataFilter(key="category", value="books")
    both = filled._build_subfilter(
        MetadataFilters(filters=[books, MetadataFilter(key="price", value=10, operator=FilterOperator.GT)])
    )
    assert [c.key for c in both.must] == ["category", "price"] and both.must[1].range.gt == 10
    either = filled._build_subfilter(
        MetadataFilters(filters=[books, MetadataFilter(key="category", value="maps")], condition=FilterCondition.OR)
    )
    assert [c.match.value for c in either.should] == ["books", "maps"]
    nested = filled._build_subfilter(
        MetadataFilters(
            filters=[books, MetadataFilters(filters=[MetadataFilter(key="price", value=50)], condition="not")]
        )
    )
    assert isinstance(nested.must[1], rest.Filter) and nested.must[1].must_not[0].match.value == 50


def test_filters_keep_value_types(filled):
    def count(operator, value):
        filters = MetadataFilters(filters=[MetadataFilter(key="some_key", value=value, operator=operator)])
        return len(filled.get_nodes(filters=filters))

    assert count(FilterOperator.IN, [1, 2]) == 2
    assert count(FilterOperator.NIN, [1, 2]) == 1
    assert count(FilterOperator.IN, ["3"]) == 1


@pytest.mark.parametrize("mode", ["single", "dual"])
def test_hybrid_top_k_sizes_the_fused_list_and_hybrid_can_be_switched_off(tiny_embed, tiny_dual, mode):
    embed = tiny_dual if mode == "dual" else tiny_embed
    width = DIM * (2 if embed.is_dual else 1)
    store = tagged_vector_store(QdrantClient(":memory:"), "test", embed, **HYBRID)
    nodes = three_nodes(width)
    store.add(nodes)
    query = VectorStoreQuery(
        query_embedding=nodes[1].embedding[:DIM],  # the dense side finds test2, the sparse side test1
        query_str="test1",
        similarity_top_k=1,
        sparse_top_k=1,
        hybrid_top_k=2,
        mode="hybrid",
    )
    assert len(store.query(query).nodes) == 2  # one dense hit and one sparse hit, fused into two
    store.enable_hybrid = False
    query.mode = "default"
    assert len(store.query(query).nodes) == 1


def test_shard_key_selection_is_upstreams(tiny_embed):
    plain = tagged_vector_store(RecordingClient(), "test", tiny_embed)
    assert plain._generate_shard_key_selector(None) is None and plain._generate_shard_key_selector(5) is None
    client = RecordingClient()
    custom = tagged_vector_store(
        client,
        "test",
        tiny_embed,
        sharding_method=rest.ShardingMethod.CUSTOM,
        shard_key_selector_fn=lambda x: x % 3,
        shard_keys=[0, 1, 2],
    )
    assert custom._generate_shard_key_selector(7) == 1
    assert [k["shard_key"] for _, k in client.made("create_shard_key")] == [0, 1, 2]
    custom._validate_custom_sharding()


@pytest.mark.parametrize("embed_name", ["tiny_embed", "tiny_dual"])
def test_shard_identifier_reaches_every_call_that_takes_it(request, embed_name):
    embed = request.getfixturevalue(embed_name)
    client = RecordingClient()
    store = tagged_vector_store(
        client,
        "test",
        embed,
        sharding_method=rest.ShardingMethod.CUSTOM,
        shard_key_selector_fn=lambda x: f"key-{x % 3}",
        shard_keys=["key-0", "key-1", "key-2"],
    )
    store.add(three_nodes(DIM * (2 if embed.is_dual else 1)), shard_identifier=1)
    store.delete("test-0", shard_identifier=2)
    store.delete_nodes(node_ids=[IDS[0]], shard_identifier=3)
    store.get_nodes(shard_identifier=4)
    store.query(VectorStoreQuery(query_embedding=[0.5] * DIM, similarity_top_k=2), shard_identifier=5)
    selectors = [
        (method, kwargs["shard_key_selector"])
        for method, kwargs in client.calls
        if method in ("upload_points", "delete", "scroll", "query_points")
    ]
    assert selectors == [
        ("upload_points", "key-1"),
        ("delete", "key-2"),
        ("delete", "key-0"),
        ("scroll", "key-1"),
        ("query_points", "key-2"),
    ]


def test_async_payload_indexes_on_an_existing_collection(tiny_embed):
    indexes = [
        {"field_name": "tenant_id", "field_schema": rest.PayloadSchemaType.KEYWORD},
        {"field_name": "some_key", "field_schema": rest.PayloadSchemaType.INTEGER},
    ]

    async def run():
        client = AsyncRecordingClient()
        await atagged_vector_store(client, "test", tiny_embed, index_doc_id=False)
        client.calls.clear()
        await atagged_vector_store(client, "test", tiny_embed, index_doc_id=False, payload_indexes=indexes)
        return client.made()

    assert [(m, k["field_name"]) for m, k in asyncio.run(run())] == [
        ("create_payload_index", "tenant_id"),
        ("create_payload_index", "some_key"),
    ]


def untagged_collection(sparse):
    params = SimpleNamespace(vectors={"text-dense": object()}, sparse_vectors={name: object() for name in sparse})
    return SimpleNamespace(config=SimpleNamespace(params=params, metadata=None))


@pytest.mark.parametrize("sparse", [["text-sparse"], ["text-sparse-new"], ["custom-sparse", "text-sparse-new"]])
def test_a_collection_without_a_tag_is_refused_where_upstream_detects_its_vector_names(tiny_embed, sparse):
    """Upstream reads an existing collection's sparse vector name; ours refuses a collection it did not tag."""
    client = RecordingClient()
    client.collections["test_collection"] = {}
    client.get_collection = lambda name, **kwargs: untagged_collection(sparse)
    with pytest.raises(CollectionTagMismatchError, match="no posfair tag"):
        tagged_vector_store(client, "test_collection", tiny_embed, **HYBRID)
    assert client.made() == []


def test_an_async_only_store_checks_the_tag_on_its_first_call(tiny_embed, tiny_model_dir):
    async def run():
        aclient = AsyncQdrantClient(":memory:")
        await aclient.create_collection("plain", vectors_config=rest.VectorParams(size=DIM, distance="Cosine"))
        plan = plan_store(tiny_embed, {}, None)
        store = PosFairQdrantVectorStore(
            "plain", aclient=aclient, vector_layout=plan.config.layout, posfair_tag=plan.config.tag
        )
        with pytest.raises(CollectionTagMismatchError, match="no posfair tag"):
            await store.aquery(VectorStoreQuery(query_embedding=[1.0] * DIM, similarity_top_k=1))
        tagged = await atagged_vector_store(aclient, "tagged", tiny_embed)
        await tagged.async_add(three_nodes())
        lazy = PosFairQdrantVectorStore(
            "tagged", aclient=aclient, vector_layout=plan.config.layout, posfair_tag=plan.config.tag
        )
        return await lazy.aquery(VectorStoreQuery(query_embedding=three_nodes()[1].embedding, similarity_top_k=1))

    assert asyncio.run(run()).ids == [IDS[1]]
