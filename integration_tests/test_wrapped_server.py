"""Windows over a real OpenAI-compatible embedding server (infinity-emb serving all-MiniLM-L6-v2 on 127.0.0.1),
reached through LlamaIndex's own OpenAILikeEmbedding, and over LlamaIndex's HuggingFaceEmbedding.

One server for the module (about 12 s to start on two cores); where infinity-emb is not installed
(scripts/embedding_server.sh) the server's tests skip with the reason and the HuggingFaceEmbedding ones still run.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from llama_index.core import Document, StorageContext, VectorStoreIndex

from integration_tests import embedding_server
from integration_tests.window_vectors import LATE, WINDOWS, assert_same_windows, windows_of
from posfair_llamaindex import CollectionTagMismatchError, EdgeQdrantClient, PosFairEmbedding, tagged_vector_store
from posfair_llamaindex.errors import WrappedRequestError
from posfair_llamaindex.qdrant import collection_tag
from tests.utils import minilm_path


@pytest.fixture(scope="module")
def server():
    with embedding_server.start() as base:
        yield base


def served(base, **kwargs):
    from llama_index.embeddings.openai_like import OpenAILikeEmbedding

    return OpenAILikeEmbedding(
        model_name=embedding_server.SERVED_NAME, api_base=base, api_key="test-key-not-stored", **kwargs
    )


def test_windows_over_huggingface_embedding_equal_native_windows(native_windows, wrapped_texts):
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    model = PosFairEmbedding(
        embed_model=HuggingFaceEmbedding(model_name=minilm_path(), device="cpu"), mode="windows", windows=WINDOWS
    )
    assert_same_windows(native_windows[1], model.get_text_embedding_batch(wrapped_texts))
    assert windows_of(native_windows[1])[-1].shape[0] > 8  # the long text: past the model's limit, covered by windows


def test_server_vectors_equal_in_process_ones_and_windows_equal_native(server, native_windows, wrapped_texts):
    model = PosFairEmbedding(embed_model=served(server), mode="windows", windows=WINDOWS, tokenizer=minilm_path())
    assert_same_windows(native_windows[1], model.get_text_embedding_batch(wrapped_texts))
    query = "Where is the ledger of shipwrecks kept?"
    assert float(np.dot(model.get_query_embedding(query), native_windows[0].get_query_embedding(query))) >= 0.9999
    # async: concurrent requests, the same vectors
    assert_same_windows(native_windows[1], asyncio.run(model.aget_text_embedding_batch(wrapped_texts)))


def test_a_collection_through_the_server_is_tagged_searchable_and_refuses_another_model(
    server, tmp_path, wrapped_texts
):
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    model = PosFairEmbedding(embed_model=served(server), mode="windows", windows=WINDOWS, tokenizer=minilm_path())
    client = EdgeQdrantClient(path=str(tmp_path / "q"))
    store = tagged_vector_store(client, "docs", model)
    index = VectorStoreIndex.from_documents(
        [Document(text=text) for text in wrapped_texts],
        embed_model=model,
        storage_context=StorageContext.from_defaults(vector_store=store),
    )
    hit = index.as_retriever(similarity_top_k=1).retrieve("Where is the ledger of shipwrecks kept?")[0]
    assert LATE in hit.node.get_content()
    tag = collection_tag(client.get_collection("docs"))
    assert tag["embedding"]["class"] == "OpenAILikeEmbedding"
    assert tag["embedding"]["model_name"] == embedding_server.SERVED_NAME
    assert tag["embedding"]["tokenizer"].startswith("tokenizer.json:sha256:")
    assert tag["windows"] == {"size": 64, "stride": 64, "document": "none"} and tag["dimension"] == 384
    assert "test-key-not-stored" not in repr(tag)
    local = PosFairEmbedding(
        embed_model=HuggingFaceEmbedding(model_name=minilm_path(), device="cpu"), mode="windows", windows=WINDOWS
    )
    with pytest.raises(CollectionTagMismatchError, match="embedding"):
        tagged_vector_store(client, "docs", local)
    client.close()


def test_a_server_gone_fails_the_call_naming_the_node_and_stores_nothing(tmp_path, wrapped_texts):
    from llama_index.embeddings.openai_like import OpenAILikeEmbedding

    gone = OpenAILikeEmbedding(
        model_name=embedding_server.SERVED_NAME, api_base="http://127.0.0.1:9", max_retries=0, timeout=2, dimensions=384
    )
    model = PosFairEmbedding(
        embed_model=gone, mode="windows", windows=WINDOWS, tokenizer=minilm_path(), max_input_tokens=256
    )
    client = EdgeQdrantClient(path=str(tmp_path / "q"))
    store = tagged_vector_store(client, "docs", model)
    with pytest.raises(WrappedRequestError, match=r"request 1 of 1 to OpenAILikeEmbedding.*node\(s\) 0, 1"):
        VectorStoreIndex.from_documents(
            [Document(text=text) for text in wrapped_texts],
            embed_model=model,
            storage_context=StorageContext.from_defaults(vector_store=store),
        )
    assert client.count("docs", exact=True).count == 0
    client.close()


def test_the_command_line_ingests_through_the_server_and_queries_from_the_tag(server, tmp_path, capsys):
    import json

    from posfair_llamaindex.cli import main

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "ledger.txt").write_text(LATE)
    (folder / "other.txt").write_text("Antonio Stradivari made violins in Cremona.")
    store = ["--qdrant-path", str(tmp_path / "q"), "--collection", "docs"]
    wrapped = ["--embedding", "openai-like", "--api-base", server, "--embedding-model", embedding_server.SERVED_NAME]
    code = main(["ingest", str(folder), *store, "--mode", "windows", *wrapped, "--tokenizer", minilm_path()])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "ingested 2 document(s)" in out
    code = main(["query", "Where is the ledger of shipwrecks kept?", *store, "-k", "1", "--json"])  # from the tag
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "Varkness" in json.dumps(json.loads(out))
