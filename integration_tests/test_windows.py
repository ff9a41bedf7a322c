"""Windows collections: document vector(s) and a MaxSim multivector of windows, fused in one request, on every
available Qdrant backend."""

from __future__ import annotations

import numpy as np
import pytest
from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.schema import MetadataMode, TextNode
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters, VectorStoreQuery
from qdrant_client.http import models as rest

from integration_tests.fused import async_index_run, brute_force
from posfair_llamaindex import CollectionTagMismatchError, PosFairEmbedding, tagged_vector_store
from posfair_llamaindex.encoding.windows import WindowConfig
from posfair_llamaindex.jobs.ingest import ingest_documents, node_parser_for
from posfair_llamaindex.qdrant import collection_tag, point_id
from tests.utils import minilm_path, sample_texts

QUESTION = "farmers planted barley near the old stone bridge"
# the end of a text past MiniLM's 512-token limit: only a window can find it
LATE = (
    "A lighthouse keeper named Orwell catalogued seventeen shipwrecks along the basalt cliffs of Varkness. Each "
    "winter he rowed out to the wrecks, sketched their hulls and wrote the names of the sailors in a leather "
    "ledger. The ledger of shipwrecks is kept today in the lighthouse at Varkness."
)


@pytest.fixture(scope="module")
def windows_model(embed_model):
    return PosFairEmbedding(
        minilm_path(), mode="windows", windows=WindowConfig(size=64, document="plain"), encoder=embed_model.encoder
    )


def corpus(count=20):
    texts = sample_texts(count, seed=1, min_words=20, max_words=400)
    nodes = [TextNode(text=text, id_=f"n{i}", metadata={"part": "a" if i % 2 else "b"}) for i, text in enumerate(texts)]
    filler = " ".join(sample_texts(1, seed=7, min_words=600, max_words=600))
    nodes.append(TextNode(text=f"{filler} {LATE}", id_="long", metadata={"part": "a"}))
    return nodes


@pytest.fixture(scope="module")
def embedded(windows_model):
    """The corpus with its windows-mode embeddings, computed once: each test's index stores copies."""
    nodes = corpus()
    texts = [node.get_content(metadata_mode=MetadataMode.EMBED) for node in nodes]
    for node, vector in zip(nodes, windows_model.get_text_embedding_batch(texts), strict=True):
        node.embedding = vector
    return nodes


def copies(embedded, count=20):
    """The first ``count`` nodes and the long one, as ``corpus(count)`` makes them, embedded."""
    return [node.model_copy(deep=True) for node in (*embedded[:count], embedded[-1])]


def indexed(nodes, model, store):
    return VectorStoreIndex(nodes, embed_model=model, storage_context=StorageContext.from_defaults(vector_store=store))


def stored_scores(client, name, query, document="plain"):
    """Every stored point's document cosine and best window cosine, computed here from the vectors Qdrant holds."""
    points, _ = client.scroll(name, limit=1000, with_vectors=True)
    ids = [str(p.id) for p in points]
    documents = np.array([p.vector[document] for p in points]) @ query
    windows = np.array([max(np.asarray(p.vector["windows"]) @ query) for p in points])
    return ids, documents, windows


def test_vector_store_index_retrieves_by_the_best_window_and_the_document_vector(qdrant, windows_model, embedded):
    name = qdrant.collection()
    store = tagged_vector_store(qdrant.client, name, windows_model)
    nodes = copies(embedded)  # embedded by the windows model (the async test has VectorStoreIndex embed them)
    index = indexed(nodes, windows_model, store)
    info = qdrant.client.get_collection(name)
    vectors = info.config.params.vectors
    assert set(vectors) == {"plain", "windows"}
    assert vectors["windows"].multivector_config.comparator == rest.MultiVectorComparator.MAX_SIM
    tag = collection_tag(info)
    assert tag["mode"] == "windows" and tag["windows"] == {"size": 64, "stride": 64, "document": "plain"}
    hits = index.as_retriever(similarity_top_k=8).retrieve(QUESTION)
    query = np.array(windows_model.get_query_embedding(QUESTION))
    ids, documents, windows = stored_scores(qdrant.client, name, query)
    expected_ids, expected_scores = brute_force(ids, documents, windows, "max", 8)
    assert [point_id(h.node.node_id) for h in hits] == expected_ids
    np.testing.assert_allclose([h.score for h in hits], expected_scores, atol=1e-5)
    # the stored vectors are the document embedding's parts: the plain vector, then every window
    long_node = next(n for n in nodes if n.node_id == "long")
    stored = qdrant.client.retrieve(name, [point_id("long")], with_vectors=True)[0].vector
    embedding = np.asarray(windows_model.get_text_embedding(long_node.get_content(metadata_mode=MetadataMode.EMBED)))
    np.testing.assert_allclose(stored["plain"], embedding[:384], atol=1e-5)
    np.testing.assert_allclose(np.asarray(stored["windows"]), embedding[384:].reshape(-1, 384), atol=1e-5)
    assert len(stored["windows"]) >= 10  # about 650 tokens in windows of 64


def test_text_past_the_token_limit_is_found_only_through_its_window(qdrant, windows_model, embed_model, embedded):
    name = qdrant.collection()
    store = tagged_vector_store(qdrant.client, name, windows_model)
    indexed(copies(embedded), windows_model, store)
    question = "Which lighthouse keeper kept a ledger of the shipwrecks at Varkness?"
    hits = store.query(
        VectorStoreQuery(query_embedding=windows_model.get_query_embedding(question), similarity_top_k=1)
    )
    assert hits.ids == ["long"]
    # the plain vector alone was cut at 512 tokens, before the sentence: it does not rank the node first
    query = np.array(embed_model.get_query_embedding(question))
    ids, documents, windows = stored_scores(qdrant.client, name, query)
    assert ids[int(np.argmax(windows))] == point_id("long") and ids[int(np.argmax(documents))] != point_id("long")


@pytest.mark.parametrize("fusion", ["sum", "rrf"])
def test_sum_and_rrf_match_brute_force_when_every_point_is_a_candidate(qdrant, windows_model, fusion, embedded):
    name = qdrant.collection()
    store = tagged_vector_store(qdrant.client, name, windows_model)
    indexed(copies(embedded), windows_model, store)
    query = np.array(windows_model.get_query_embedding(QUESTION))
    result = store.query(VectorStoreQuery(query_embedding=list(query), similarity_top_k=8), fusion=fusion)
    ids, documents, windows = stored_scores(qdrant.client, name, query)
    expected_ids, expected_scores = brute_force(ids, documents, windows, fusion, len(ids))
    np.testing.assert_allclose(result.similarities, expected_scores[:8], atol=1e-5)


def test_metadata_filters_apply_to_every_prefetch_and_nodes_can_be_deleted(qdrant, windows_model, embedded):
    name = qdrant.collection()
    store = tagged_vector_store(qdrant.client, name, windows_model)
    index = indexed(copies(embedded), windows_model, store)
    filters = MetadataFilters(filters=[MetadataFilter(key="part", value="a", operator=FilterOperator.EQ)])
    hits = index.as_retriever(similarity_top_k=6, filters=filters).retrieve(QUESTION)
    assert len(hits) == 6 and all(hit.node.metadata["part"] == "a" for hit in hits)
    store.delete_nodes([hits[0].node.node_id])
    again = index.as_retriever(similarity_top_k=6, filters=filters).retrieve(QUESTION)
    assert hits[0].node.node_id not in {h.node.node_id for h in again}
    store.clear()
    indexed(copies(embedded, 3), windows_model, store)
    assert collection_tag(qdrant.client.get_collection(name))["mode"] == "windows"  # re-created with its tag


def test_windows_collections_refuse_other_settings_and_other_modes(qdrant, windows_model, embed_model, embedded):
    name = qdrant.collection()
    store = tagged_vector_store(qdrant.client, name, windows_model)
    indexed(copies(embedded, 4), windows_model, store)
    other_size = PosFairEmbedding(
        minilm_path(), mode="windows", windows=WindowConfig(size=128, document="plain"), encoder=embed_model.encoder
    )
    with pytest.raises(CollectionTagMismatchError, match="windows: stored"):
        tagged_vector_store(qdrant.client, name, other_size)
    with pytest.raises(CollectionTagMismatchError, match="mode: stored 'windows' != requested 'calibrated'"):
        tagged_vector_store(qdrant.client, name, embed_model)
    assert qdrant.client.count(name, exact=True).count == 5
    # another fusion rule is a query-time choice on the same vectors: accepted
    rrf = PosFairEmbedding(
        minilm_path(),
        mode="windows",
        windows=WindowConfig(size=64, document="plain"),
        fusion="rrf",
        encoder=embed_model.encoder,
    )
    assert tagged_vector_store(qdrant.client, name, rrf).fingerprint == store.fingerprint
    # a single-vector collection refuses windows embeddings by name
    single = tagged_vector_store(qdrant.client, qdrant.collection(), embed_model)
    with pytest.raises(ValueError, match="embedding"):
        single.add([TextNode(text="x", id_="x", embedding=windows_model.get_text_embedding("a short text"))])


def test_reingest_embeds_nothing_and_changes_nothing(qdrant, windows_model):
    name = qdrant.collection()
    store = tagged_vector_store(qdrant.client, name, windows_model)
    parser = node_parser_for(windows_model, chunk_size=300)
    docs = [
        Document(text=t, doc_id=f"d{i}.txt")
        for i, t in enumerate(sample_texts(3, seed=5, min_words=300, max_words=500))
    ]
    first = ingest_documents(docs, windows_model, store, node_parser=parser, show_progress=False)
    before = {p.id: p.vector for p in qdrant.client.scroll(name, limit=1000, with_vectors=True)[0]}
    again = ingest_documents(docs, windows_model, store, node_parser=parser, show_progress=False)
    after = {p.id: p.vector for p in qdrant.client.scroll(name, limit=1000, with_vectors=True)[0]}
    assert first.embedded == first.nodes > 3 and again.embedded == 0
    assert after == before


def test_async_client_fuses_the_same_way(qdrant, windows_model):
    nodes = corpus(10)

    hits, points = async_index_run(qdrant, windows_model, nodes, QUESTION, 5)
    query = np.array(windows_model.get_query_embedding(QUESTION))
    fused = {p.id: max(np.dot(p.vector["plain"], query), max(np.asarray(p.vector["windows"]) @ query)) for p in points}
    expected = sorted(fused, key=lambda i: -fused[i])[:5]
    assert [point_id(h.node.node_id) for h in hits] == expected
