"""WordPieceBM25: BM25 document weights over the model's tokenizer, IDF from Qdrant, recorded in the tag."""

from __future__ import annotations

import pytest
from llama_index.core.vector_stores.types import VectorStoreQuery
from qdrant_client import QdrantClient
from qdrant_client.http import models as rest

from posfair_llamaindex.qdrant import CollectionTagMismatchError, tagged_vector_store
from posfair_llamaindex.qdrant.sparse import WordPieceBM25
from tests.qdrant.conftest import make_nodes


@pytest.fixture(scope="module")
def bm25(tiny_embed):
    return WordPieceBM25.for_embedding(tiny_embed, avg_length=4)


def test_document_weights_are_bm25s_saturated_term_frequencies(bm25, tiny_embed):
    tokenizer = tiny_embed.encoder.tokenizer
    (indices,), (values,) = bm25.documents(["river river bridge"])
    river, bridge = (tokenizer.convert_tokens_to_ids(w) for w in ("river", "bridge"))
    weights = dict(zip(indices, values, strict=True))
    norm = 1.2 * (1 - 0.75 + 0.75 * 3 / 4)  # three pieces, average length 4
    assert weights[river] == pytest.approx(2 * 2.2 / (2 + norm))
    assert weights[bridge] == pytest.approx(1 * 2.2 / (1 + norm))
    assert indices == sorted(indices)
    (q_indices,), (q_values,) = bm25.queries(["bridge river river"])
    assert q_indices == sorted({river, bridge}) and q_values == [1.0, 1.0]


def test_nothing_is_cut_at_the_models_limit(bm25):
    long_text = "river " * 2000 + "glacier"
    (indices,), _ = bm25.documents([long_text])
    assert bm25.tokenizer.convert_tokens_to_ids("glacier") in indices


def test_a_collection_scores_it_with_idf_and_records_the_encoder(bm25, tiny_embed, tiny_model_dir):
    client = QdrantClient(":memory:")
    store = tagged_vector_store(
        client,
        "b",
        tiny_embed,
        enable_hybrid=True,
        sparse_doc_fn=bm25.documents,
        sparse_query_fn=bm25.queries,
        sparse_config=bm25.sparse_config(),
    )
    nodes = make_nodes(12, 64, seed=1)
    nodes[3].text = "the volcano by the harbour"  # the one document holding 'volcano'; 'harbour' is everywhere
    store.add(nodes)
    assert client.get_collection("b").config.params.sparse_vectors["text-sparse-new"].modifier == rest.Modifier.IDF
    assert store.posfair_tag["hybrid"]["sparse_encoder"] == bm25.posfair_sparse_tag
    assert store.posfair_tag["hybrid"]["idf"] is True
    hits = store.query(VectorStoreQuery(query_str="harbour volcano", query_embedding=[0.0] * 63 + [1.0], mode="sparse"))
    assert hits.ids[0] == nodes[3].node_id
    other = WordPieceBM25.for_embedding(tiny_embed, k1=2.0)
    with pytest.raises(CollectionTagMismatchError, match="sparse_encoder"):
        tagged_vector_store(
            client,
            "b",
            tiny_embed,
            enable_hybrid=True,
            sparse_doc_fn=other.documents,
            sparse_query_fn=other.queries,
            sparse_config=other.sparse_config(),
        )


def test_constants_out_of_range_are_refused(tiny_embed):
    with pytest.raises(ValueError, match="0 <= b <= 1"):
        WordPieceBM25.for_embedding(tiny_embed, b=1.5)
