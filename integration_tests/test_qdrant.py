"""Tagged collections against every available Qdrant backend."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import random

import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.schema import QueryBundle, TextNode

from posfair_llamaindex.jobs.ingest import embed_nodes, ingest_documents, node_parser_for, split_documents
from posfair_llamaindex.qdrant import (
    POINT_FINGERPRINT_KEY,
    CollectionTagMismatchError,
    QdrantUnavailableError,
    RetryConfig,
    atagged_vector_store,
    collection_tag,
    point_id,
    tagged_vector_store,
)
from tests.utils import SHARED_DATA, sample_texts


def documents(count=6, seed=0, words=(60, 400)):
    texts = sample_texts(count, seed=seed, min_words=words[0], max_words=words[1])
    return [
        Document(text=text, doc_id=f"file-{i}.txt", metadata={"file_name": f"file-{i}.txt"})
        for i, text in enumerate(texts)
    ]


def count(backend, collection):
    return backend.client.count(collection, exact=True).count


def test_tag_is_written_and_read_back(qdrant, embed_model):
    name = qdrant.collection()
    store = tagged_vector_store(qdrant.client, name, embed_model)
    info = qdrant.client.get_collection(name)
    tag = collection_tag(info)
    assert tag == {**embed_model.tag(), "fingerprint": embed_model.fingerprint()}
    assert info.config.params.vectors.size == 384
    assert tag["calibration"]["variant"] == "cls_soft" and tag["model_weights"].startswith("sha256:")
    ingest_documents(documents(2), embed_model, store, show_progress=False)
    points, _ = qdrant.client.scroll(name, limit=100, with_payload=True)
    assert points and all(p.payload[POINT_FINGERPRINT_KEY] == embed_model.fingerprint() for p in points)


def test_mismatch_is_refused_and_nothing_is_written(qdrant, embed_model, other_embed_model):
    name = qdrant.collection()
    store = tagged_vector_store(qdrant.client, name, embed_model)
    ingest_documents(documents(3), embed_model, store, show_progress=False)
    before = count(qdrant, name)
    with pytest.raises(CollectionTagMismatchError) as info:
        tagged_vector_store(qdrant.client, name, other_embed_model)
    message = str(info.value)
    assert "strength" in message and "Stored tag" in message and "Requested tag" in message
    assert count(qdrant, name) == before
    assert collection_tag(qdrant.client.get_collection(name))["fingerprint"] == embed_model.fingerprint()
    # explicit opt-in recreates it, empty and with the new tag
    tagged_vector_store(qdrant.client, name, other_embed_model, recreate=True)
    assert count(qdrant, name) == 0
    assert collection_tag(qdrant.client.get_collection(name))["fingerprint"] == other_embed_model.fingerprint()


def test_untagged_collection_is_refused(qdrant, embed_model):
    from qdrant_client.http import models as rest

    name = qdrant.collection()
    qdrant.client.create_collection(name, vectors_config=rest.VectorParams(size=384, distance=rest.Distance.COSINE))
    with pytest.raises(CollectionTagMismatchError, match="no posfair tag"):
        tagged_vector_store(qdrant.client, name, embed_model)


def test_reingest_is_idempotent_and_edits_remove_stale_points(qdrant, embed_model):
    name = qdrant.collection()
    store = tagged_vector_store(qdrant.client, name, embed_model)
    parser = node_parser_for(embed_model, chunk_size=64)
    docs = documents(4, words=(150, 250))
    written = ingest_documents(docs, embed_model, store, node_parser=parser, show_progress=False).nodes
    assert count(qdrant, name) == written > 4  # several nodes per document
    ids_before = {p.id for p in qdrant.client.scroll(name, limit=1000)[0]}
    ingest_documents(docs, embed_model, store, node_parser=parser, show_progress=False)
    assert {p.id for p in qdrant.client.scroll(name, limit=1000)[0]} == ids_before
    # document 0 shrinks: its surplus nodes disappear, the others are untouched
    shorter = Document(text=docs[0].text[:200], doc_id=docs[0].doc_id, metadata=docs[0].metadata)
    ingest_documents([shorter], embed_model, store, node_parser=parser, show_progress=False)
    remaining = qdrant.client.scroll(name, limit=1000, with_payload=True)[0]
    assert sum(1 for p in remaining if p.payload["doc_id"] == docs[0].doc_id) == 1
    assert count(qdrant, name) == written - (len(parser.get_nodes_from_documents([docs[0]])) - 1)


def test_deleting_a_document_removes_its_points(qdrant, embed_model):
    name = qdrant.collection()
    store = tagged_vector_store(qdrant.client, name, embed_model)
    parser = node_parser_for(embed_model, chunk_size=64)
    docs = documents(3, words=(150, 250))
    ingest_documents(docs, embed_model, store, node_parser=parser, show_progress=False)
    before = count(qdrant, name)
    own = len(parser.get_nodes_from_documents([docs[1]]))
    store.delete(docs[1].doc_id)
    assert count(qdrant, name) == before - own
    payloads = [p.payload["doc_id"] for p in qdrant.client.scroll(name, limit=1000, with_payload=True)[0]]
    assert docs[1].doc_id not in payloads


def test_any_node_id_is_accepted_and_maps_deterministically(qdrant, embed_model):
    name = qdrant.collection()
    store = tagged_vector_store(qdrant.client, name, embed_model)
    nodes = [TextNode(text=text, id_=f"note-{i}") for i, text in enumerate(sample_texts(3, seed=4))]
    index = VectorStoreIndex(nodes, embed_model=embed_model, storage_context=_context(store))
    VectorStoreIndex(nodes, embed_model=embed_model, storage_context=_context(store))  # again: replaced
    assert count(qdrant, name) == 3
    assert {p.id for p in qdrant.client.scroll(name, limit=10)[0]} == {point_id(f"note-{i}") for i in range(3)}
    store.delete_nodes(["note-1"])
    assert count(qdrant, name) == 2
    assert index.as_retriever(similarity_top_k=1).retrieve(nodes[0].text)[0].node.node_id == "note-0"


def _context(store):
    from llama_index.core import StorageContext

    return StorageContext.from_defaults(vector_store=store)


def test_async_path(qdrant, embed_model, other_embed_model):
    nodes = [TextNode(text=text, id_=f"async-{i}") for i, text in enumerate(sample_texts(4, seed=6, min_words=40))]

    async def run():
        aclient = qdrant.make_aclient()
        name = qdrant.collection()
        store = await atagged_vector_store(aclient, name, embed_model)
        index = VectorStoreIndex(nodes, embed_model=embed_model, storage_context=_context(store), use_async=True)
        hits = await index.as_retriever(similarity_top_k=1).aretrieve(nodes[2].text)
        counted = (await aclient.count(name, exact=True)).count
        info = await aclient.get_collection(name)
        with pytest.raises(CollectionTagMismatchError):
            await atagged_vector_store(aclient, name, other_embed_model)
        await aclient.close()
        return hits, counted, collection_tag(info)

    hits, counted, tag = asyncio.run(run())
    assert hits[0].node.node_id == "async-2"
    assert counted == 4
    assert tag["fingerprint"] == embed_model.fingerprint()


class FailingStore:
    """Wraps a store and fails the n-th add, like a crash halfway through an ingest."""

    def __init__(self, store, fail_at):
        self._store, self._fail_at, self._adds = store, fail_at, 0

    def add(self, nodes):
        self._adds += 1
        if self._adds == self._fail_at:
            raise RuntimeError("simulated crash")
        return self._store.add(nodes)

    def __getattr__(self, name):
        return getattr(self._store, name)


def test_interrupted_ingest_resumes_without_duplicates_or_losses(qdrant, embed_model):
    name = qdrant.collection()
    store = tagged_vector_store(qdrant.client, name, embed_model)
    parser = node_parser_for(embed_model, chunk_size=64)
    docs = documents(6, words=(100, 200))
    expected = len(parser.get_nodes_from_documents(docs))
    with pytest.raises(RuntimeError, match="simulated crash"):
        ingest_documents(
            docs,
            embed_model,
            FailingStore(store, fail_at=2),
            node_parser=parser,
            documents_per_batch=2,
            show_progress=False,
        )
    partial = count(qdrant, name)
    assert 0 < partial < expected
    ingest_documents(docs, embed_model, store, node_parser=parser, documents_per_batch=2, show_progress=False)
    assert count(qdrant, name) == expected
    doc_ids = {p.payload["doc_id"] for p in qdrant.client.scroll(name, limit=1000, with_payload=True)[0]}
    assert doc_ids == {d.doc_id for d in docs}


def test_failed_first_batch_leaves_a_fully_tagged_collection(qdrant, embed_model, monkeypatch):
    name = qdrant.collection()
    store = tagged_vector_store(qdrant.client, name, embed_model)

    def broken(*args, **kwargs):
        raise RuntimeError("encoder crashed")

    monkeypatch.setattr(type(embed_model), "get_text_embedding_batch", broken)
    with pytest.raises(RuntimeError, match="encoder crashed"):
        ingest_documents(documents(2), embed_model, store, show_progress=False)
    monkeypatch.undo()
    assert count(qdrant, name) == 0
    assert collection_tag(qdrant.client.get_collection(name))["fingerprint"] == embed_model.fingerprint()
    tagged_vector_store(qdrant.client, name, embed_model)  # reopens fine


def test_failed_create_leaves_no_collection(qdrant, embed_model, monkeypatch):
    name = qdrant.collection()

    def refuse(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(qdrant.client, "create_collection", refuse)
    with pytest.raises(RuntimeError, match="disk full"):
        tagged_vector_store(qdrant.client, name, embed_model)
    monkeypatch.undo()
    assert not qdrant.client.collection_exists(name)


def squad_corpus(articles=25, per_article=4, budget_words=330):
    with gzip.open(SHARED_DATA / "squad" / "squad-v1.1-train.json.gz") as handle:
        data = json.load(handle)["data"]
    docs, questions = [], []
    for article in data[:articles]:
        paragraphs = article["paragraphs"]
        start = 0
        for _ in range(per_article):
            chosen, words = [], 0
            while start < len(paragraphs) and words + len(paragraphs[start]["context"].split()) <= budget_words:
                chosen.append(paragraphs[start])
                words += len(paragraphs[start]["context"].split())
                start += 1
            if not chosen:
                break
            doc_id = f"{article['title']}-{len(docs)}"
            docs.append(Document(text="\n\n".join(p["context"] for p in chosen), doc_id=doc_id))
            questions += [(qa["question"], doc_id) for p in chosen for qa in p["qas"]]
    return docs, questions


@pytest.fixture(scope="module")
def squad_embedded(embed_model):
    """100 SQuAD documents split and embedded as ``ingest_documents`` does, and 50 of their questions embedded: once
    for every engine, which then stores and searches the same vectors."""
    if not (SHARED_DATA / "squad").is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA} (set POSFAIR_DATA)")
    docs, questions = squad_corpus()
    nodes = split_documents(docs, node_parser_for(embed_model))
    assert len(nodes) == len(docs)  # one node per document: each fits the model window
    embed_nodes(nodes, embed_model)
    sample = random.Random(0).sample(questions, 50)
    vectors = [embed_model.get_query_embedding(question) for question, _ in sample]  # as the retriever embeds them
    return [n.node for n in nodes], [(q, doc_id, v) for (q, doc_id), v in zip(sample, vectors, strict=True)]


def test_real_corpus_retrieval(qdrant, embed_model, squad_embedded):
    nodes, sample = squad_embedded
    name = qdrant.collection()
    store = tagged_vector_store(qdrant.client, name, embed_model)
    store.add([node.model_copy(deep=True) for node in nodes])
    assert count(qdrant, name) == len(nodes)
    retriever = VectorStoreIndex.from_vector_store(store, embed_model=embed_model).as_retriever(similarity_top_k=5)
    found = sum(
        doc_id in {hit.node.ref_doc_id for hit in retriever.retrieve(QueryBundle(question, embedding=vector))}
        for question, doc_id, vector in sample
    )
    print(f"\n{qdrant.name}: top-5 hit rate {found}/50 over {len(nodes)} SQuAD documents")
    assert found >= 45


def test_unreachable_server_gets_bounded_retries_then_a_clear_error(embed_model):
    from qdrant_client import QdrantClient

    client = QdrantClient(url="http://127.0.0.1:9", timeout=1)
    with pytest.raises(QdrantUnavailableError, match="did not answer .* after 3 attempts"):
        tagged_vector_store(client, "anything", embed_model, retry=RetryConfig(retries=2, backoff_s=0.01))


def test_wrong_client_type_is_refused(embed_model):
    with pytest.raises(TypeError, match="QdrantClient"):
        tagged_vector_store("http://localhost:6333", "x", embed_model)
    with pytest.raises(ValueError, match="atagged_vector_store"):
        tagged_vector_store(None, "x", embed_model)


# ----------------------------------------------------------------------------- a real cluster: two nodes
QDRANT_IMAGE = os.environ.get("POSFAIR_QDRANT_IMAGE", "qdrant/qdrant:v1.16.2")


@pytest.fixture(scope="module")
def qdrant_cluster():
    """Two Qdrant nodes in cluster mode on one Docker network: (url of node 0, url of node 1).

    The documented two-node setup: node 0 starts the consensus (``--uri``), node 1 joins it (``--bootstrap``).
    Skips, saying why, where testcontainers or a Docker daemon is missing.
    """
    try:
        from docker.errors import DockerException
        from testcontainers.core.container import DockerContainer
        from testcontainers.core.network import Network
    except ImportError as error:
        pytest.skip(f"testcontainers is not installed: {error}")
    try:
        network = Network()
        network.create()
    except DockerException as error:
        pytest.skip(f"no Docker daemon for a two-node Qdrant cluster: {error}")
    commands = (
        "./qdrant --uri http://node0:6335",
        'bash -c "sleep 2 && ./qdrant --bootstrap http://node0:6335 --uri http://node1:6335"',
    )
    nodes = []
    try:
        for index, command in enumerate(commands):
            node = (
                DockerContainer(QDRANT_IMAGE)
                .with_network(network)
                .with_network_aliases(f"node{index}")
                .with_env("QDRANT__CLUSTER__ENABLED", "true")
                .with_command(command)
                .with_exposed_ports(6333)
            )
            node.start()
            nodes.append(node)
        urls = [f"http://{n.get_container_host_ip()}:{n.get_exposed_port(6333)}" for n in nodes]
        _wait_for_peers(urls[0], peers=2)
        yield urls
    finally:
        for node in nodes:
            node.stop()
        network.remove()


def _wait_for_peers(url, peers, timeout_s=90.0):
    import time

    import requests

    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            status = requests.get(f"{url}/cluster", timeout=2).json()["result"]
            if len(status.get("peers", {})) >= peers and status.get("raft_info", {}).get("leader") is not None:
                return
            last = status
        except Exception as error:  # not up yet
            last = error
        time.sleep(1)
    raise RuntimeError(f"the Qdrant cluster at {url} did not reach {peers} peers in {timeout_s}s: {last}")


def _cluster_shards(client, name):
    info = client.http.distributed_api.collection_cluster_info(name).result
    replicas = [(s.shard_id, s.shard_key, "local", s.state) for s in info.local_shards]
    replicas += [(s.shard_id, s.shard_key, s.peer_id, s.state) for s in info.remote_shards]
    return replicas


def _nodes(texts, tenant):
    return [TextNode(text=text, id_=f"{tenant}-{i}", metadata={"tenant": tenant}) for i, text in enumerate(texts)]


def test_a_dual_hybrid_collection_on_two_shards_with_a_replica_each(qdrant_cluster, embed_model):
    from llama_index.core import StorageContext
    from llama_index.vector_stores.qdrant import QdrantVectorStore
    from qdrant_client import QdrantClient
    from qdrant_client.http import models as rest

    from posfair_llamaindex import PosFairEmbedding
    from posfair_llamaindex.qdrant.sparse import WordPieceBM25

    dual = PosFairEmbedding(embed_model.model_name, mode="dual", encoder=embed_model.encoder)
    bm25 = WordPieceBM25.for_embedding(dual)
    first, second = (QdrantClient(url=url) for url in qdrant_cluster)
    options = dict(
        shard_number=2,
        replication_factor=2,
        write_consistency_factor=2,
        dense_config=rest.VectorParams(size=dual.dimension, distance=rest.Distance.COSINE, on_disk=True),
        quantization_config=rest.ScalarQuantization(scalar=rest.ScalarQuantizationConfig(type=rest.ScalarType.INT8)),
        payload_indexes=[{"field_name": "tenant", "field_schema": rest.PayloadSchemaType.KEYWORD}],
    )
    hybrid = dict(
        enable_hybrid=True,
        sparse_doc_fn=bm25.documents,
        sparse_query_fn=bm25.queries,
        sparse_config=bm25.sparse_config(),
    )
    store = tagged_vector_store(first, "cluster-dual", dual, **options, **hybrid)
    nodes = _nodes(sample_texts(12, seed=8, min_words=40, max_words=120), "a")
    index = VectorStoreIndex(nodes, embed_model=dual, storage_context=StorageContext.from_defaults(vector_store=store))

    info = first.get_collection("cluster-dual")
    params = info.config.params
    assert (params.shard_number, params.replication_factor, params.write_consistency_factor) == (2, 2, 2)
    assert {name: v.on_disk for name, v in params.vectors.items()} == {"plain": True, "calibrated": True}
    assert info.config.quantization_config.scalar.type == rest.ScalarType.INT8
    assert set(info.payload_schema) == {"doc_id", "tenant"}
    replicas = _cluster_shards(first, "cluster-dual")
    assert sorted(r[0] for r in replicas) == [0, 0, 1, 1]  # two shards, each on both nodes
    assert all(str(r[3]).lower().endswith("active") for r in replicas)
    # upstream's store, given the same options, makes the same collection (bar the tag)
    QdrantVectorStore("cluster-upstream", client=first, **options, **hybrid)._create_collection(
        "cluster-upstream", vector_size=dual.dimension
    )
    upstream = first.get_collection("cluster-upstream").config.params
    assert params.model_dump(exclude={"vectors"}) == upstream.model_dump(exclude={"vectors"})
    assert all(v == upstream.vectors["text-dense"] for v in params.vectors.values())
    # the replica on the other node answers the same fused hybrid query
    question = nodes[5].text.split(".")[0]
    retriever = index.as_retriever(similarity_top_k=3, vector_store_query_mode="hybrid")
    hits = [h.node.node_id for h in retriever.retrieve(question)]
    assert hits[0] == nodes[5].node_id
    replica = tagged_vector_store(second, "cluster-dual", dual, **options, **hybrid)
    again = VectorStoreIndex.from_vector_store(replica, embed_model=dual).as_retriever(
        similarity_top_k=3, vector_store_query_mode="hybrid"
    )
    assert [h.node.node_id for h in again.retrieve(question)] == hits
    first.close()
    second.close()


def test_custom_shard_keys_are_created_and_shard_identifier_routes_add_query_and_delete(qdrant_cluster, embed_model):
    from llama_index.core.vector_stores.types import VectorStoreQuery
    from qdrant_client import QdrantClient
    from qdrant_client.http import models as rest

    client = QdrantClient(url=qdrant_cluster[0])
    regions = {0: "eu", 1: "us"}
    store = tagged_vector_store(
        client,
        "cluster-custom",
        embed_model,
        sharding_method=rest.ShardingMethod.CUSTOM,
        shard_keys=list(regions.values()),
        shard_key_selector_fn=lambda n: regions[n % 2],
        replication_factor=2,
    )
    assert {r[1] for r in _cluster_shards(client, "cluster-custom")} == {"eu", "us"}
    for shard, tenant in regions.items():
        nodes = _nodes(sample_texts(3, seed=shard, min_words=30, max_words=60), tenant)
        for node in nodes:
            node.embedding = embed_model.get_text_embedding(node.text)
        store.add(nodes, shard_identifier=shard)
    query = VectorStoreQuery(query_embedding=embed_model.get_query_embedding("a question"), similarity_top_k=10)
    assert {n.metadata["tenant"] for n in store.query(query, shard_identifier=1).nodes} == {"us"}
    assert len(store.query(query).nodes) == 6  # no identifier: every shard
    assert {n.metadata["tenant"] for n in store.get_nodes(shard_identifier=0)} == {"eu"}
    store.delete_nodes(shard_identifier=0)
    assert {n.metadata["tenant"] for n in store.get_nodes()} == {"us"}
    client.close()
