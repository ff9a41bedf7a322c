"""Every constructor option of LlamaIndex's QdrantVectorStore, side by side: the calls that create the collection.

For each option, LlamaIndex's store and ours are built with the same keywords on a recording client (which
plays a server), and their ``create_collection``, ``create_shard_key`` and ``create_payload_index`` calls are
compared. Ours adds the tag (``metadata``) and, on a dual collection, gives each named vector the params
LlamaIndex's store gives its one vector. Options that would mean nothing here are refused by name before any
call is made.
"""

from __future__ import annotations

import asyncio
import inspect

import pytest
from llama_index.vector_stores.qdrant import QdrantVectorStore
from qdrant_client import QdrantClient
from qdrant_client.http import models as rest

from posfair_llamaindex.modes import DUAL_VECTORS
from posfair_llamaindex.qdrant import CollectionTagMismatchError, atagged_vector_store, tagged_vector_store
from posfair_llamaindex.qdrant.collection import METADATA_KEY
from posfair_llamaindex.qdrant.store_options import (
    COLLECTION_RULES,
    GIVEN_RULES,
    POSFAIR_OPTIONS,
    STORE_RULES,
    UPSTREAM_OPTIONS,
    resolve_options,
)
from tests.qdrant.conftest import sparse_encode
from tests.qdrant.recording import AsyncRecordingClient, RecordingClient

DIM = 64
NAME = "opts"
HYBRID = dict(enable_hybrid=True, sparse_doc_fn=sparse_encode, sparse_query_fn=sparse_encode)
SCALAR = rest.ScalarQuantization(scalar=rest.ScalarQuantizationConfig(type=rest.ScalarType.INT8, always_ram=True))
CUSTOM = dict(sharding_method=rest.ShardingMethod.CUSTOM, shard_keys=["eu", "us", 7], shard_key_selector_fn=lambda x: x)
PAYLOAD_INDEXES = [
    {"field_name": "tenant_id", "field_schema": rest.PayloadSchemaType.KEYWORD},
    {"field_name": "rank", "field_schema": rest.PayloadSchemaType.INTEGER},
    {"field_name": "body", "field_schema": rest.TextIndexParams(type="text", tokenizer=rest.TokenizerType.WORD)},
]
# one entry per upstream option that reaches the collection calls (and combinations)
OPTIONS = {
    "defaults": {},
    "dense_config DOT on disk": {"dense_config": rest.VectorParams(size=DIM, distance=rest.Distance.DOT, on_disk=True)},
    "dense_config per-vector HNSW, quantization, float16": {
        "dense_config": rest.VectorParams(
            size=DIM,
            distance=rest.Distance.COSINE,
            hnsw_config=rest.HnswConfigDiff(m=32, ef_construct=200),
            quantization_config=SCALAR,
            datatype=rest.Datatype.FLOAT16,
        )
    },
    "quantization_config": {"quantization_config": SCALAR},
    "shard_number, replication_factor, write_consistency_factor": {
        "shard_number": 2,
        "replication_factor": 2,
        "write_consistency_factor": 1,
    },
    "sharding_method CUSTOM with shard_keys": CUSTOM,
    "index_doc_id False": {"index_doc_id": False},
    "payload_indexes (keyword, integer, full text)": {"payload_indexes": PAYLOAD_INDEXES},
    "everything": {
        "dense_config": rest.VectorParams(size=DIM, distance=rest.Distance.DOT, on_disk=True),
        "quantization_config": SCALAR,
        "shard_number": 3,
        "replication_factor": 2,
        "write_consistency_factor": 2,
        "index_doc_id": False,
        "payload_indexes": PAYLOAD_INDEXES,
        **CUSTOM,
    },
}
HYBRID_OPTIONS = {
    "hybrid": {},
    "hybrid with sparse_config IDF and names": {
        "sparse_config": rest.SparseVectorParams(
            index=rest.SparseIndexParams(on_disk=True), modifier=rest.Modifier.IDF
        ),
        "sparse_vector_name": "words",
    },
}


def upstream_calls(options: dict) -> list:
    client = RecordingClient()
    store = QdrantVectorStore(NAME, client=client, **options)
    store._create_collection(NAME, vector_size=DIM)  # what its first add() does
    return client.made()


def our_calls(embed, options: dict) -> tuple[list, dict]:
    client = RecordingClient()
    tagged_vector_store(client, NAME, embed, **options)
    calls = client.made()
    create = dict(calls[0][1])
    tag = create.pop("metadata")[METADATA_KEY]
    return [("create_collection", create), *calls[1:]], tag


def per_vector(upstream: list, names) -> list:
    """Upstream's calls with its one dense vector's params given to each of ``names`` (the dual layout)."""
    method, create = upstream[0]
    vectors = create["vectors_config"]
    params = next(iter(vectors.values())) if isinstance(vectors, dict) else vectors
    return [(method, {**create, "vectors_config": {name: params for name in names}}), *upstream[1:]]


def test_the_option_list_is_upstreams():
    """A new upstream option fails here until UPSTREAM_OPTIONS says what it does on this store."""
    upstream = set(inspect.signature(QdrantVectorStore.__init__).parameters) - {
        "self",
        "collection_name",
        "client",
        "aclient",
        "kwargs",
    }
    assert set(UPSTREAM_OPTIONS) == upstream
    assert not set(POSFAIR_OPTIONS) & upstream


@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_single_collection_calls_are_upstreams(tiny_embed, option):
    ours, tag = our_calls(tiny_embed, OPTIONS[option])
    assert ours == upstream_calls(OPTIONS[option])
    assert tag["fingerprint"] == tiny_embed.fingerprint()


@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_dual_collection_gives_each_named_vector_upstreams_params(tiny_dual, option):
    ours, tag = our_calls(tiny_dual, OPTIONS[option])
    assert ours == per_vector(upstream_calls(OPTIONS[option]), DUAL_VECTORS)
    assert tag["mode"] == "dual"


@pytest.mark.parametrize("hybrid", sorted(HYBRID_OPTIONS))
@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_hybrid_collection_calls_are_upstreams(tiny_embed, option, hybrid):
    options = {**OPTIONS[option], **HYBRID, **HYBRID_OPTIONS[hybrid]}
    ours, tag = our_calls(tiny_embed, options)
    assert ours == upstream_calls(options)
    assert tag["hybrid"]["idf"] == ("sparse_config" in HYBRID_OPTIONS[hybrid])


@pytest.mark.parametrize("option", ["defaults", "everything"])
def test_dual_hybrid_collection_calls_are_upstreams_with_both_dense_vectors(tiny_dual, option):
    options = {**OPTIONS[option], **HYBRID, **HYBRID_OPTIONS["hybrid with sparse_config IDF and names"]}
    ours, tag = our_calls(tiny_dual, options)
    assert ours == per_vector(upstream_calls(options), DUAL_VECTORS)
    assert tag["hybrid"] == {"sparse_vector": "words", "sparse_encoder": "custom", "idf": True}


def test_a_named_dense_vector_on_a_hybrid_collection(tiny_embed):
    options = {**HYBRID, "dense_vector_name": "meaning"}
    ours, tag = our_calls(tiny_embed, options)
    assert ours == upstream_calls(options)
    assert set(ours[0][1]["vectors_config"]) == {"meaning"} and tag["hybrid"]["dense_vector"] == "meaning"


@pytest.mark.parametrize("option", ["everything", "payload_indexes (keyword, integer, full text)"])
def test_async_creation_makes_the_same_calls(tiny_embed, tiny_dual, option):
    options = OPTIONS[option]

    async def run(embed):
        upstream_client, our_client = AsyncRecordingClient(), AsyncRecordingClient()
        await QdrantVectorStore(NAME, aclient=upstream_client, **options)._acreate_collection(NAME, vector_size=DIM)
        await atagged_vector_store(our_client, NAME, embed, **options)
        return upstream_client.made(), our_client.made()

    upstream, ours = asyncio.run(run(tiny_embed))
    assert ours[0][1].pop("metadata")[METADATA_KEY]["fingerprint"] == tiny_embed.fingerprint()
    assert ours == upstream
    upstream, ours = asyncio.run(run(tiny_dual))
    ours[0][1].pop("metadata")
    assert ours == per_vector(upstream, DUAL_VECTORS)


def test_opening_an_existing_collection_creates_its_payload_indexes_as_upstream(tiny_embed):
    """LlamaIndex's constructor gives an existing collection the payload indexes asked for; so does ours."""
    client = RecordingClient()
    tagged_vector_store(client, NAME, tiny_embed)
    client.calls.clear()
    tagged_vector_store(client, NAME, tiny_embed, payload_indexes=PAYLOAD_INDEXES, index_doc_id=False)
    upstream_client = RecordingClient()
    upstream_client.collections[NAME] = client.collections[NAME]
    QdrantVectorStore(NAME, client=upstream_client, payload_indexes=PAYLOAD_INDEXES, index_doc_id=False)
    assert client.made() == upstream_client.made()
    assert [k["field_name"] for _, k in client.made()] == ["tenant_id", "rank", "body"]


def test_collection_options_give_vectors_config_the_meaning_of_dense_config(tiny_dual):
    dot = rest.VectorParams(size=DIM, distance=rest.Distance.DOT, on_disk=True)
    via_store, _ = our_calls(tiny_dual, {"dense_config": dot})
    client = RecordingClient()
    tagged_vector_store(client, NAME, tiny_dual, collection_options={"vectors_config": dot})
    create = dict(client.made()[0][1])
    create.pop("metadata")
    assert create == via_store[0][1]
    # by name, one vector at a time: only the calibrated vector quantized
    quantized = rest.VectorParams(size=DIM, distance=rest.Distance.COSINE, quantization_config=SCALAR)
    plain = rest.VectorParams(size=DIM, distance=rest.Distance.COSINE)
    client = RecordingClient()
    tagged_vector_store(
        client, NAME, tiny_dual, collection_options={"vectors_config": {"plain": plain, "calibrated": quantized}}
    )
    assert client.made()[0][1]["vectors_config"] == {"plain": plain, "calibrated": quantized}


def test_collection_options_carry_the_other_create_collection_arguments(tiny_embed):
    hnsw = rest.HnswConfigDiff(m=8)
    optimizers = rest.OptimizersConfigDiff(indexing_threshold=0)
    client = RecordingClient()
    tagged_vector_store(
        client,
        NAME,
        tiny_embed,
        collection_options={
            "hnsw_config": hnsw,
            "optimizers_config": optimizers,
            "on_disk_payload": True,
            "shard_number": 2,
        },
    )
    create = client.made()[0][1]
    assert (create["hnsw_config"], create["optimizers_config"], create["on_disk_payload"]) == (hnsw, optimizers, True)
    assert create["shard_number"] == 2  # the same meaning as the store keyword


def expect_refused(embed, match, *, collection_options=None, **options):
    client = RecordingClient()
    with pytest.raises((ValueError, TypeError), match=match):
        tagged_vector_store(client, NAME, embed, collection_options=collection_options, **options)
    assert client.made() == []  # refused before anything was created
    local = QdrantClient(":memory:")
    with pytest.raises((ValueError, TypeError), match=match):
        tagged_vector_store(local, NAME, embed, collection_options=collection_options, **options)
    assert not local.collection_exists(NAME)


def test_an_option_upstream_does_not_have_is_refused_by_name(tiny_embed):
    """LlamaIndex's store swallows unknown keywords (``**kwargs``); a typo there silently does nothing."""
    expect_refused(tiny_embed, r"unknown store option\(s\) \['text_index'\]", text_index={"field_name": "body"})
    expect_refused(tiny_embed, r"unknown store option\(s\) \['shard_numbr'\]", shard_numbr=2)


def test_a_dense_config_that_does_not_fit_the_embedding_is_refused(tiny_embed, tiny_dual):
    expect_refused(tiny_embed, "dense_config has size 8.*64", dense_config=rest.VectorParams(size=8, distance="Dot"))
    multi = rest.MultiVectorConfig(comparator=rest.MultiVectorComparator.MAX_SIM)
    expect_refused(
        tiny_embed,
        "multivector_config is not available",
        dense_config=rest.VectorParams(size=DIM, distance="Cosine", multivector_config=multi),
    )
    expect_refused(
        tiny_embed, "uint8", dense_config=rest.VectorParams(size=DIM, distance="Cosine", datatype=rest.Datatype.UINT8)
    )
    expect_refused(
        tiny_dual, "Euclid ranks by lowest score first", dense_config=rest.VectorParams(size=DIM, distance="Euclid")
    )
    expect_refused(tiny_dual, "must name exactly", dense_config={"plain": rest.VectorParams(size=DIM, distance="Dot")})
    expect_refused(
        tiny_dual,
        "must share a distance",
        dense_config={
            "plain": rest.VectorParams(size=DIM, distance="Dot"),
            "calibrated": rest.VectorParams(size=DIM, distance="Cosine"),
        },
    )


# (rule, store keywords, collection_options, the mode's dense vectors, a fragment of the rule's message): each
# case breaks its rule and none of the rules checked before it
RULE_CASES = [
    ("_refuse_unknown_store_options", {"shard_numbr": 2}, None, (), r"unknown store option\(s\) \['shard_numbr'\]"),
    ("_refuse_collection_options_the_store_owns", {}, {"metadata": {}}, (), r"collection_options\['metadata'\] is not"),
    ("_refuse_unknown_collection_options", {}, {"init_from": 1}, (), r"\['init_from'\] are not create_collection"),
    ("_hybrid_settings_need_hybrid", {"sparse_doc_fn": print}, None, (), "sparse_doc_fn configure hybrid search"),
    (
        "_dense_vector_name_needs_a_single_vector_hybrid_collection",
        {"dense_vector_name": "x"},
        None,
        DUAL_VECTORS,
        "dense_vector_name='x' would be ignored: this collection's mode names",
    ),
    (
        "_hybrid_fusion_needs_hybrid_and_several_dense_vectors",
        {"hybrid_fusion": "rrf"},
        None,
        (),
        "hybrid_fusion chooses",
    ),
    (
        "_hybrid_fusion_must_be_a_known_rule",
        {"enable_hybrid": True, "hybrid_fusion": "mean"},
        None,
        DUAL_VECTORS,
        "hybrid_fusion must be one of",
    ),
    (
        "_hybrid_fusion_fn_needs_client_side_fusion",
        {"enable_hybrid": True, "hybrid_fusion_fn": print, "hybrid_fusion": "rrf"},
        None,
        DUAL_VECTORS,
        "the function would never run",
    ),
    ("_candidates_need_several_dense_vectors", {"max_candidates": 5}, None, (), "max_candidates size the prefetches"),
    (
        "_custom_sharding_needs_keys_and_selector",
        {"sharding_method": "custom", "shard_keys": [1]},
        None,
        (),
        "sharding_method=CUSTOM needs shard_key_selector_fn",
    ),
    ("_shard_keys_need_custom_sharding", {}, {"shard_keys": [1]}, (), "shard_keys are created only on a collection"),
    (
        "_shard_key_selector_fn_needs_custom_sharding",
        {"shard_key_selector_fn": print},
        None,
        (),
        "shard_key_selector_fn is used only",
    ),
    (
        "_sparse_config_must_be_sparse_vector_params",
        {"enable_hybrid": True, "sparse_config": {"modifier": "idf"}},
        None,
        (),
        "sparse_config must be a qdrant SparseVectorParams, got dict",
    ),
]


def test_every_refusal_rule_has_a_case():
    """A new rule fails here until RULE_CASES has a case that reaches it."""
    rules = [rule.__name__ for rule in (*GIVEN_RULES, *STORE_RULES, *COLLECTION_RULES)]
    assert sorted(case[0] for case in RULE_CASES) == sorted(rules)


@pytest.mark.parametrize(
    ("rule", "options", "collection_options", "named", "message"), RULE_CASES, ids=[case[0] for case in RULE_CASES]
)
def test_each_refusal_rule_refuses_its_case(rule, options, collection_options, named, message):
    with pytest.raises((ValueError, TypeError), match=message) as refused:
        resolve_options(options, collection_options, named=named)
    assert refused.traceback[-1].name == rule  # raised by that rule, not by one checked before it


def test_options_that_would_be_ignored_are_refused_by_name(tiny_embed, tiny_dual):
    expect_refused(
        tiny_dual,
        "dense_vector_name='x' would be ignored: this collection's mode names its dense vectors",
        dense_vector_name="x",
    )
    expect_refused(tiny_embed, "dense_vector_name='x' would be ignored: a dense-only", dense_vector_name="x")
    for name in ("sparse_config", "sparse_doc_fn", "hybrid_fusion_fn", "sparse_vector_name"):
        value = rest.SparseVectorParams() if name == "sparse_config" else ("s" if name.endswith("name") else print)
        expect_refused(tiny_embed, f"{name} configure hybrid search", **{name: value})
    expect_refused(
        tiny_embed, "fusion_candidates size the prefetches of a collection with several", fusion_candidates=5
    )
    expect_refused(tiny_embed, "hybrid_fusion chooses", hybrid_fusion="rrf")
    expect_refused(tiny_dual, "hybrid_fusion must be one of", hybrid_fusion="mean", **HYBRID)


def test_sharding_options_are_checked_as_upstream_checks_them_and_before_creating(tiny_embed):
    expect_refused(tiny_embed, "CUSTOM needs shard_key_selector_fn", sharding_method="custom", shard_keys=[1])
    expect_refused(tiny_embed, "CUSTOM needs shard_keys", sharding_method="custom", shard_key_selector_fn=lambda x: x)
    expect_refused(
        tiny_embed, "shard_keys are created only on a collection with sharding_method=CUSTOM", shard_keys=[1]
    )
    expect_refused(tiny_embed, "shard_key_selector_fn is used only", shard_key_selector_fn=lambda x: x)
    # embedded Qdrant refuses create_shard_key after create_collection; refused here before it
    local = QdrantClient(":memory:")
    with pytest.raises(ValueError, match="need a Qdrant server"):
        tagged_vector_store(local, NAME, tiny_embed, **CUSTOM)
    assert not local.collection_exists(NAME)


def test_collection_options_that_belong_to_the_store_are_refused(tiny_embed):
    expect_refused(
        tiny_embed, r"collection_options\['metadata'\] is not available", collection_options={"metadata": {}}
    )
    expect_refused(tiny_embed, r"collection_options\['collection_name'\]", collection_options={"collection_name": "y"})
    expect_refused(
        tiny_embed, r"\['init_from'\] are not create_collection options", collection_options={"init_from": 1}
    )
    expect_refused(tiny_embed, "shard_number is given twice", shard_number=2, collection_options={"shard_number": 3})
    expect_refused(
        tiny_embed,
        "dense_config is given twice",
        dense_config=rest.VectorParams(size=DIM, distance="Dot"),
        collection_options={"vectors_config": rest.VectorParams(size=DIM, distance="Cosine")},
    )
    expect_refused(
        tiny_embed, "sparse_vectors_config'] needs a hybrid store", collection_options={"sparse_vectors_config": {}}
    )
    expect_refused(tiny_embed, "shard_number: Input should be greater than or equal to 1", shard_number=0)


def test_the_distance_is_in_the_tag_and_on_disk_is_not(tiny_embed):
    client = QdrantClient(":memory:")
    dot = rest.VectorParams(size=DIM, distance=rest.Distance.DOT)
    store = tagged_vector_store(client, "d", tiny_embed, dense_config=dot)
    assert store.posfair_tag["distance"] == "Dot" and store.fingerprint == tiny_embed.fingerprint()
    with pytest.raises(CollectionTagMismatchError, match="distance: stored 'Dot' != requested None"):
        tagged_vector_store(client, "d", tiny_embed)
    # on_disk says where the vectors live, not what they mean: the same collection opens either way
    tagged_vector_store(client, "d", tiny_embed, dense_config=dot.model_copy(update={"on_disk": True}))
    tagged_vector_store(client, "c", tiny_embed)
    assert "distance" not in tagged_vector_store(client, "c", tiny_embed).posfair_tag  # cosine tags are unchanged
    half = rest.VectorParams(size=DIM, distance=rest.Distance.COSINE, datatype=rest.Datatype.FLOAT16)
    assert tagged_vector_store(client, "h", tiny_embed, dense_config=half).posfair_tag["datatype"] == {"": "float16"}


def test_a_dot_dual_collection_fuses_dot_products(tiny_dual):
    from llama_index.core.vector_stores.types import VectorStoreQuery

    from tests.qdrant.conftest import make_nodes

    nodes = make_nodes(10, 2 * DIM, seed=4)
    client = QdrantClient(":memory:")
    store = tagged_vector_store(client, "d", tiny_dual, dense_config=rest.VectorParams(size=DIM, distance="Dot"))
    store.add(nodes)
    query = nodes[2].embedding[:DIM]
    result = store.query(VectorStoreQuery(query_embedding=query, similarity_top_k=3))
    dots = {
        n.node_id: max(
            sum(a * b for a, b in zip(query, half, strict=True)) for half in (n.embedding[:DIM], n.embedding[DIM:])
        )
        for n in nodes
    }
    best = sorted(dots, key=dots.get, reverse=True)[:3]
    assert result.ids == best
    assert result.similarities == pytest.approx([dots[i] for i in best], abs=1e-5)  # raw dot products, not cosines


def test_url_api_key_and_client_kwargs_build_the_clients_as_upstream(tiny_embed):
    from posfair_llamaindex.qdrant import QdrantUnavailableError, RetryConfig

    with pytest.raises(QdrantUnavailableError, match="127.0.0.1:9"):  # the url was dialled
        tagged_vector_store(
            None, NAME, tiny_embed, url="http://127.0.0.1:9", client_kwargs={"timeout": 1}, retry=RetryConfig(retries=0)
        )
    with pytest.raises(ValueError, match="needs a QdrantClient \\(or url=...\\)"):
        tagged_vector_store(None, NAME, tiny_embed, api_key="k")


def test_a_fusion_function_of_ones_own_is_used_and_never_silently_dropped(tiny_dual):
    calls = []

    def mine(dense, sparse, **kwargs):
        calls.append(kwargs)
        return dense

    store = tagged_vector_store(QdrantClient(":memory:"), NAME, tiny_dual, hybrid_fusion_fn=mine, **HYBRID)
    assert store.vector_layout.fusion.hybrid_rule == "relative"
    from llama_index.core.vector_stores.types import VectorStoreQuery

    store.query(VectorStoreQuery(query_embedding=[0.1] * DIM, query_str="x", mode="hybrid", alpha=0.25))
    assert calls == [{"alpha": 0.25, "top_k": 1}]
    expect_refused(tiny_dual, "the function would never run", hybrid_fusion_fn=mine, hybrid_fusion="rrf", **HYBRID)
