"""Dual collections: two named vectors per point, fused at query time, on every available Qdrant backend."""

from __future__ import annotations

import numpy as np
import pytest
from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.schema import MetadataMode, TextNode
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters, VectorStoreQuery

from integration_tests.fused import async_index_run, brute_force
from posfair_llamaindex import CalibrationConfig, CollectionTagMismatchError, PosFairEmbedding, tagged_vector_store
from posfair_llamaindex.jobs.ingest import ingest_documents, node_parser_for
from posfair_llamaindex.qdrant import collection_tag, point_id
from tests.utils import minilm_path, sample_texts

QUESTION = "farmers planted barley near the old stone bridge"


@pytest.fixture(scope="module")
def dual_model(embed_model):
    return PosFairEmbedding(
        minilm_path(), mode="dual", fusion="max", calibration=CalibrationConfig(strength=0.85), pooling="first"
    )


def corpus(count=40):
    texts = sample_texts(count, seed=1, min_words=50, max_words=400)
    return [TextNode(text=text, id_=f"n{i}", metadata={"part": "a" if i % 2 else "b"}) for i, text in enumerate(texts)]


@pytest.fixture(scope="module")
def embedded_corpus(dual_model):
    """:func:`corpus` with each node's dual embedding made once, as VectorStoreIndex makes it; a test gets fresh
    nodes, and VectorStoreIndex stores a node that has its embedding as it is (the issue snippet embeds its own)."""
    nodes = corpus()
    texts = [node.get_content(metadata_mode=MetadataMode.EMBED) for node in nodes]
    vectors = dual_model.get_text_embedding_batch(texts)

    def fresh() -> list:
        return [
            node.model_copy(update={"embedding": list(vector)}) for node, vector in zip(nodes, vectors, strict=True)
        ]

    return fresh


def stored_scores(client, name, query):
    """Both cosines of every stored point, computed here from the vectors Qdrant holds."""
    points, _ = client.scroll(name, limit=1000, with_vectors=True, with_payload=True)
    ids = [p.id for p in points]
    plain = np.array([p.vector["plain"] for p in points]) @ query
    calibrated = np.array([p.vector["calibrated"] for p in points]) @ query
    return [str(i) for i in ids], plain, calibrated


def test_the_issue_snippet_returns_max_fused_hits(qdrant, dual_model):
    name = qdrant.collection()
    store = tagged_vector_store(qdrant.client, name, dual_model)
    nodes = corpus()
    index = VectorStoreIndex(
        nodes, embed_model=dual_model, storage_context=StorageContext.from_defaults(vector_store=store)
    )
    hits = index.as_retriever(similarity_top_k=10).retrieve(QUESTION)
    info = qdrant.client.get_collection(name)
    assert set(info.config.params.vectors) == {"plain", "calibrated"}
    assert collection_tag(info)["mode"] == "dual" and collection_tag(info)["fusion"] == "max"
    query = np.array(dual_model.get_query_embedding(QUESTION))
    ids, plain, calibrated = stored_scores(qdrant.client, name, query)
    expected_ids, expected_scores = brute_force(ids, plain, calibrated, "max", 10)
    assert [point_id(h.node.node_id) for h in hits] == expected_ids
    np.testing.assert_allclose([h.score for h in hits], expected_scores, atol=1e-5)
    # the stored vectors are the two halves of the dual embedding
    by_id = {point_id(n.node_id): n for n in nodes}
    first = qdrant.client.retrieve(name, [expected_ids[0]], with_vectors=True)[0]
    embedded_text = by_id[expected_ids[0]].get_content(metadata_mode=MetadataMode.EMBED)
    plain_half, calibrated_half = dual_model.split_dual(dual_model.get_text_embedding(embedded_text))
    np.testing.assert_allclose(first.vector["plain"], plain_half, atol=1e-5)
    np.testing.assert_allclose(first.vector["calibrated"], calibrated_half, atol=1e-5)


@pytest.mark.parametrize("fusion", ["sum", "rrf"])
def test_sum_and_rrf_match_brute_force_when_every_point_is_a_candidate(qdrant, dual_model, embedded_corpus, fusion):
    name = qdrant.collection()
    store = tagged_vector_store(qdrant.client, name, dual_model)
    VectorStoreIndex(
        embedded_corpus(), embed_model=dual_model, storage_context=StorageContext.from_defaults(vector_store=store)
    )
    query = np.array(dual_model.get_query_embedding(QUESTION))
    result = store.query(VectorStoreQuery(query_embedding=list(query), similarity_top_k=8), fusion=fusion)
    ids, plain, calibrated = stored_scores(qdrant.client, name, query)
    expected_ids, expected_scores = brute_force(ids, plain, calibrated, fusion, len(ids))
    # the same scores in the same order; documents with equal fused scores may come in either order
    np.testing.assert_allclose(result.similarities, expected_scores[:8], atol=1e-5)
    score_of = dict(zip(expected_ids, expected_scores, strict=True))
    # result ids are node ids (issue 17), the stored ids point ids
    np.testing.assert_allclose([score_of[point_id(i)] for i in result.ids], result.similarities, atol=1e-5)


def test_metadata_filters_apply_to_both_vectors(qdrant, dual_model, embedded_corpus):
    name = qdrant.collection()
    store = tagged_vector_store(qdrant.client, name, dual_model)
    index = VectorStoreIndex(
        embedded_corpus(), embed_model=dual_model, storage_context=StorageContext.from_defaults(vector_store=store)
    )
    filters = MetadataFilters(filters=[MetadataFilter(key="part", value="a", operator=FilterOperator.EQ)])
    hits = index.as_retriever(similarity_top_k=6, filters=filters).retrieve(QUESTION)
    assert len(hits) == 6 and all(hit.node.metadata["part"] == "a" for hit in hits)


def test_reingest_embeds_nothing_and_changes_nothing(qdrant, dual_model):
    name = qdrant.collection()
    store = tagged_vector_store(qdrant.client, name, dual_model)
    parser = node_parser_for(dual_model, chunk_size=64)
    docs = [
        Document(text=t, doc_id=f"d{i}.txt")
        for i, t in enumerate(sample_texts(4, seed=5, min_words=100, max_words=200))
    ]
    first = ingest_documents(docs, dual_model, store, node_parser=parser, show_progress=False)
    before = {p.id: p.vector for p in qdrant.client.scroll(name, limit=1000, with_vectors=True)[0]}
    again = ingest_documents(docs, dual_model, store, node_parser=parser, show_progress=False)
    after = {p.id: p.vector for p in qdrant.client.scroll(name, limit=1000, with_vectors=True)[0]}
    assert first.embedded == first.nodes > 4 and again.embedded == 0 and again.unchanged == first.nodes
    assert after == before


def test_dual_and_single_collections_refuse_each_other(qdrant, dual_model, embed_model):
    single_name, dual_name = qdrant.collection(), qdrant.collection()
    single = PosFairEmbedding(
        minilm_path(), calibration=CalibrationConfig(strength=0.85), pooling="first", encoder=dual_model.encoder
    )
    tagged_vector_store(qdrant.client, single_name, single)
    store = tagged_vector_store(qdrant.client, dual_name, dual_model)
    VectorStoreIndex(
        corpus(4), embed_model=dual_model, storage_context=StorageContext.from_defaults(vector_store=store)
    )
    with pytest.raises(CollectionTagMismatchError, match="mode: stored 'calibrated' != requested 'dual'"):
        tagged_vector_store(qdrant.client, single_name, dual_model)
    with pytest.raises(CollectionTagMismatchError, match="mode: stored 'dual' != requested 'calibrated'"):
        tagged_vector_store(qdrant.client, dual_name, single)
    assert qdrant.client.count(dual_name, exact=True).count == 4
    # another fusion rule is a query-time choice on the same vectors: accepted
    rrf = PosFairEmbedding(
        minilm_path(),
        mode="dual",
        fusion="rrf",
        calibration=CalibrationConfig(strength=0.85),
        pooling="first",
        encoder=dual_model.encoder,
    )
    assert tagged_vector_store(qdrant.client, dual_name, rrf).fusion == "rrf"


def test_a_single_vector_store_refuses_dual_embeddings_clearly(qdrant, dual_model):
    single = PosFairEmbedding(
        minilm_path(), calibration=CalibrationConfig(strength=0.85), pooling="first", encoder=dual_model.encoder
    )
    store = tagged_vector_store(qdrant.client, qdrant.collection(), single)
    with pytest.raises(ValueError, match="768-dimensional embedding.*expects 384.*dual embedding writes 2 x dimension"):
        VectorStoreIndex(
            corpus(2), embed_model=dual_model, storage_context=StorageContext.from_defaults(vector_store=store)
        )


def test_an_in_memory_index_fails_instead_of_answering_with_half(dual_model):
    """LlamaIndex's default store holds one vector per node: the query (384) could not meet documents (768), so
    the index is refused as it is built, before any document is encoded, naming the mode and the store."""
    with pytest.raises(ValueError, match="mode='dual'.*SimpleVectorStore"):
        VectorStoreIndex(corpus(3), embed_model=dual_model)


def test_async_client_fuses_the_same_way(qdrant, dual_model):
    nodes = corpus(12)

    hits, points = async_index_run(qdrant, dual_model, nodes, QUESTION, 5)
    query = np.array(dual_model.get_query_embedding(QUESTION))
    fused = {p.id: max(np.dot(p.vector["plain"], query), np.dot(p.vector["calibrated"], query)) for p in points}
    expected = sorted(fused, key=lambda i: -fused[i])[:5]
    assert [point_id(h.node.node_id) for h in hits] == expected
