"""PosFairEmbedding(embed_model=...): what is refused before the wrapped model is called, and what the tag says.

The vectors over HuggingFaceEmbedding and over a real OpenAI-compatible server are compared with native windows in
integration_tests/test_wrapped_server.py; the wrapper's requests in tests/encoding/test_wrapped.py.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import PrivateAttr

from posfair_llamaindex import CollectionTagMismatchError, EdgeQdrantClient, PosFairEmbedding, tagged_vector_store
from posfair_llamaindex.encoding.sea import ChunkerConfig
from posfair_llamaindex.encoding.windows import WindowConfig
from posfair_llamaindex.errors import WrappedEmbeddingError
from tests.utils import minilm_path, sample_texts


class Counting(BaseEmbedding):
    """Counts every call; any call at all is what the refusals must not make."""

    _calls: list = PrivateAttr(default_factory=list)

    def _get_query_embedding(self, query):
        self._calls.append(query)
        return [1.0, 0.0]

    async def _aget_query_embedding(self, query):
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text):
        self._calls.append(text)
        return [1.0, 0.0]


@pytest.fixture(scope="module")
def huggingface():
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    return HuggingFaceEmbedding(model_name=minilm_path(), device="cpu")


@pytest.mark.parametrize(
    ("mode", "windows"), [("calibrated", None), ("dual", None), ("windows", WindowConfig(document="calibrated"))]
)
def test_modes_that_need_attention_are_refused_by_name_before_any_call(mode, windows):
    model = Counting()
    with pytest.raises(WrappedEmbeddingError, match="needs the model's attention") as caught:
        PosFairEmbedding(embed_model=model, mode=mode, windows=windows, tokenizer=minilm_path())
    assert repr(mode if windows is None else "calibrated") in str(caught.value)
    assert model._calls == []


def test_one_model_is_named_and_wrapped_settings_go_with_embed_model(huggingface):
    with pytest.raises(ValueError, match="not both"):
        PosFairEmbedding(minilm_path(), embed_model=huggingface, mode="windows")
    with pytest.raises(ValueError, match="tokenizer go with embed_model"):
        PosFairEmbedding(minilm_path(), mode="windows", tokenizer=minilm_path())
    with pytest.raises(TypeError, match="give model_name"):
        PosFairEmbedding(mode="windows")


def test_a_window_past_the_wrapped_models_limit_is_refused_at_construction(huggingface):
    # HuggingFaceEmbedding reads 256 tokens (the model card's), less [CLS] and [SEP]
    with pytest.raises(WrappedEmbeddingError, match="windows of 300 tokens do not fit HuggingFaceEmbedding"):
        PosFairEmbedding(embed_model=huggingface, mode="windows", windows=WindowConfig(size=300))


def test_the_tag_names_the_wrapped_model_and_another_wrapped_model_is_refused(huggingface, tmp_path):
    from llama_index.embeddings.openai_like import OpenAILikeEmbedding

    local = PosFairEmbedding(embed_model=huggingface, mode="windows")
    tag = local.tag()
    assert tag["embedding"]["class"] == "HuggingFaceEmbedding"
    assert tag["embedding"]["tokenizer"].startswith("tokenizer.json:sha256:")
    assert tag["model_weights"].startswith("sha256:")  # hashed: the model is on this machine
    assert tag["windows"] == {"size": 128, "stride": 128, "document": "none"} and tag["calibration"] is None
    assert tag["embedding_source"]["kind"] == "huggingface"
    assert local.fingerprint() != PosFairEmbedding(minilm_path(), mode="windows").fingerprint()
    client = EdgeQdrantClient(path=str(tmp_path / "q"))
    tagged_vector_store(client, "docs", local)
    # the same model served elsewhere: nothing is asked of the server to refuse it (dimensions given)
    remote = OpenAILikeEmbedding(
        model_name="all-MiniLM-L6-v2", api_base="http://127.0.0.1:9", api_key="secret-key-123", dimensions=384
    )
    served = PosFairEmbedding(embed_model=remote, mode="windows", tokenizer=minilm_path())
    assert "secret-key-123" not in repr(served.tag())
    with pytest.raises(CollectionTagMismatchError, match="OpenAILikeEmbedding"):
        tagged_vector_store(client, "docs", served)
    client.close()


def test_sea_runs_over_a_wrapped_embedding_with_the_models_own_tokens(huggingface):
    chunker = ChunkerConfig(kind="token", chunk_size=64)
    wrapped = PosFairEmbedding(embed_model=huggingface, mode="sea", chunker=chunker)
    native = PosFairEmbedding(minilm_path(), mode="sea", chunker=chunker)
    texts = sample_texts(3, seed=4, min_words=100, max_words=200)
    assert wrapped.tag()["chunker"] == native.tag()["chunker"]
    ours = np.asarray(wrapped.get_text_embedding_batch(texts))
    theirs = np.asarray(native.get_text_embedding_batch(texts))
    assert np.min(np.sum(ours * theirs, axis=1)) >= 0.9999


def test_a_wrapped_embedding_is_not_pickled(huggingface):
    with pytest.raises(TypeError, match="not sent to other processes"):
        pickle.dumps(PosFairEmbedding(embed_model=huggingface, mode="windows"))
