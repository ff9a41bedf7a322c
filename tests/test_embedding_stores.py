"""Every mode with every store a LlamaIndex user picks: dual and windows embeddings given to a store that keeps one
vector per node are refused before anything is encoded, with the mode, the store and the fix named."""

from __future__ import annotations

import pytest
from llama_index.core import Document, Settings, StorageContext, VectorStoreIndex
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores import SimpleVectorStore

from posfair_llamaindex import EdgeQdrantClient, PosFairEmbedding, WindowConfig, tagged_vector_store
from posfair_llamaindex.modes import HOLDS_EVERY_MODE, MODES_BY_NAME
from posfair_llamaindex.qdrant.store import PosFairQdrantVectorStore

TEXTS = ["the river meets the sea in a wide delta", "a violin maker worked in a small town", "hieroglyphs write sounds"]


@pytest.fixture(scope="module")
def embeddings(tiny_model_dir):
    plain = PosFairEmbedding(tiny_model_dir("bert"), mode="plain", device="cpu")
    made = {"plain": plain}
    for mode, extra in (("calibrated", {}), ("dual", {}), ("windows", {"windows": WindowConfig(size=8)})):
        made[mode] = PosFairEmbedding(tiny_model_dir("bert"), mode=mode, encoder=plain.encoder, **extra)
    return made


@pytest.fixture
def encoded(monkeypatch, embeddings):
    """How many times the shared encoder ran a forward pass."""
    calls = []
    encoder = embeddings["plain"].encoder
    original = encoder.encode
    monkeypatch.setattr(encoder, "encode", lambda *a, **k: calls.append(1) or original(*a, **k))
    return calls


@pytest.mark.parametrize("mode", ["dual", "windows"])
def test_the_in_memory_store_is_refused_before_the_first_document_is_encoded(mode, embeddings, encoded):
    nodes = [TextNode(text=text) for text in TEXTS]
    with pytest.raises(ValueError, match=f"mode='{mode}'.*SimpleVectorStore.*nothing was encoded.*tagged_vector_store"):
        VectorStoreIndex(nodes, embed_model=embeddings[mode])
    assert encoded == []


@pytest.mark.parametrize("mode", ["dual", "windows"])
def test_settings_from_documents_and_the_async_path_are_refused_too(mode, embeddings, encoded, monkeypatch):
    monkeypatch.setattr(Settings, "_embed_model", embeddings[mode])
    documents = [Document(text=text) for text in TEXTS]
    with pytest.raises(ValueError, match=f"mode='{mode}'"):
        VectorStoreIndex.from_documents(documents)
    with pytest.raises(ValueError, match=f"mode='{mode}'"):
        VectorStoreIndex.from_documents(documents, use_async=True)
    assert encoded == []


def test_an_ingestion_pipeline_writing_to_a_one_vector_store_is_refused(embeddings, encoded):
    pipeline = IngestionPipeline(transformations=[embeddings["windows"]], vector_store=SimpleVectorStore())
    with pytest.raises(ValueError, match="mode='windows'.*a vector per window"):
        pipeline.run(nodes=[TextNode(text=text) for text in TEXTS])
    assert encoded == []


@pytest.mark.parametrize("mode", ["plain", "calibrated"])
def test_single_vector_modes_work_with_the_in_memory_store(mode, embeddings):
    index = VectorStoreIndex([TextNode(text=text) for text in TEXTS], embed_model=embeddings[mode])
    assert len(index.as_retriever(similarity_top_k=2).retrieve("where does the river end")) == 2


@pytest.mark.parametrize("mode", ["dual", "windows"])
def test_the_posfair_store_takes_them(mode, embeddings, tmp_path):
    client = EdgeQdrantClient(path=str(tmp_path / "store"))
    store = tagged_vector_store(client, "docs", embeddings[mode])
    index = VectorStoreIndex(
        [TextNode(text=text) for text in TEXTS],
        embed_model=embeddings[mode],
        storage_context=StorageContext.from_defaults(vector_store=store),
    )
    assert len(index.as_retriever(similarity_top_k=2).retrieve("where does the river end")) == 2
    client.close()


def test_embedding_directly_outside_an_index_is_left_alone(embeddings):
    assert len(embeddings["dual"].get_text_embedding_batch(TEXTS)[0]) == 2 * embeddings["dual"].dimension


def test_the_store_flag_is_the_one_the_modes_name():
    assert getattr(PosFairQdrantVectorStore, HOLDS_EVERY_MODE) is True
    assert {name for name, mode in MODES_BY_NAME.items() if mode.named_vectors} == {"dual", "windows"}
