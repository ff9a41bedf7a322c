"""WrappedEncoder: windows' plain vectors from any LlamaIndex BaseEmbedding (encoding/wrapped.py).

HuggingFaceEmbedding over the offline all-MiniLM-L6-v2 is the real backend here; the OpenAI-protocol server is in
integration_tests/test_wrapped_server.py. The small BaseEmbedding subclasses below only count, delay or fail
requests, to test what the wrapper does around them.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import PrivateAttr

from posfair_llamaindex.encoding.encoder import PosFairEncoder
from posfair_llamaindex.encoding.wrapped import (
    OPENAI_MAX_INPUTS,
    OPENAI_MAX_REQUEST_TOKENS,
    RequestLimits,
    WrappedEncoder,
    lower_bound_requests,
)
from posfair_llamaindex.errors import PosFairError, WrappedEmbeddingError, WrappedRequestError
from tests.utils import minilm_path, sample_texts


@pytest.fixture(scope="module")
def huggingface():
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    return HuggingFaceEmbedding(model_name=minilm_path(), device="cpu", embed_batch_size=32)


@pytest.fixture(scope="module")
def native():
    return PosFairEncoder(minilm_path(), max_length="model_card")


class Recording(BaseEmbedding):
    """Vectors of a fixed pattern; counts requests, can hold each one a while or fail the n-th."""

    fail_on: int = -1
    delay: float = 0.0
    _requests: list = PrivateAttr(default_factory=list)
    _in_flight: int = PrivateAttr(default=0)
    _most_in_flight: int = PrivateAttr(default=0)

    def _vector(self, text):
        return [float(len(text)), 1.0, 2.0]

    def _get_query_embedding(self, query):
        return self._vector("q:" + query)

    async def _aget_query_embedding(self, query):
        return self._vector("q:" + query)

    def _get_text_embedding(self, text):
        return self._vector(text)

    def _get_text_embeddings(self, texts):
        self._requests.append(list(texts))
        if len(self._requests) - 1 == self.fail_on:
            raise ConnectionError("server gone")
        return [self._vector(text) for text in texts]

    async def _aget_text_embeddings(self, texts):
        self._in_flight += 1
        self._most_in_flight = max(self._most_in_flight, self._in_flight)
        try:
            await asyncio.sleep(self.delay)
            return self._get_text_embeddings(texts)
        finally:
            self._in_flight -= 1


def by_words(text):
    spans, start = [], None
    for i, char in enumerate(text + " "):
        if not char.isspace() and start is None:
            start = i
        elif char.isspace() and start is not None:
            spans.append((start, i))
            start = None
    return spans


def test_huggingface_embedding_is_read_without_a_call_and_its_vectors_are_the_plain_models(huggingface, native):
    wrapped = WrappedEncoder(huggingface)
    assert wrapped.max_length == 256 and wrapped.content_limit == 254  # its max_length less [CLS] and [SEP]
    assert wrapped.offsets.tag().startswith("tokenizer.json:sha256:")
    facts = wrapped.tag_facts()
    assert facts["embedding"]["class"] == "HuggingFaceEmbedding"
    assert facts["model_weights"] == native.weights_identity  # the local folder's weights are hashed
    assert facts["dimension"] == 384
    texts = sample_texts(5, seed=1, min_words=20, max_words=150)
    ours = native.encode(texts, None)
    theirs = wrapped.encode(texts)
    assert np.min(np.sum(ours * theirs, axis=1)) >= 0.9999


def test_queries_go_through_the_wrapped_models_query_path_with_its_instruction(native):
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    instructed = WrappedEncoder(
        HuggingFaceEmbedding(model_name=minilm_path(), device="cpu", query_instruction="Represent this question: ")
    )
    vector = instructed.encode_query("where does the Danube end?")
    expected = native.encode(["Represent this question: where does the Danube end?"], None)[0]
    plain = native.encode(["where does the Danube end?"], None)[0]
    assert float(vector @ expected) >= 0.9999
    assert float(vector @ plain) < 0.999


def test_a_window_that_does_not_fit_the_models_input_is_refused(huggingface):
    wrapped = WrappedEncoder(huggingface)
    wrapped.check_window(254)
    with pytest.raises(WrappedEmbeddingError, match="windows of 255 tokens do not fit HuggingFaceEmbedding") as caught:
        wrapped.check_window(255)
    assert isinstance(caught.value, PosFairError)


def test_openai_embedding_is_known_without_a_call_tiktoken_and_its_request_caps():
    from llama_index.embeddings.openai import OpenAIEmbedding

    wrapped = WrappedEncoder(OpenAIEmbedding(model="text-embedding-3-small", api_key="sk-not-used"))
    assert wrapped.offsets.tag() == "tiktoken:cl100k_base"
    assert (wrapped.max_length, wrapped.dimension) == (8191, 1536)
    assert wrapped.limits == RequestLimits(OPENAI_MAX_INPUTS, OPENAI_MAX_REQUEST_TOKENS)
    assert "sk-not-used" not in repr(wrapped.tag_facts())


def test_a_server_of_unknown_tokens_or_limit_is_refused_until_told():
    from llama_index.embeddings.openai_like import OpenAILikeEmbedding

    server = OpenAILikeEmbedding(model_name="some-model", api_base="http://127.0.0.1:9/v1")
    with pytest.raises(WrappedEmbeddingError, match="pass tokenizer="):
        WrappedEncoder(server)
    with pytest.raises(WrappedEmbeddingError, match="pass max_input_tokens="):
        WrappedEncoder(server, tokenizer=by_words)
    told = WrappedEncoder(server, tokenizer=by_words, max_input_tokens=512)
    assert told.limits.max_inputs == 2048 and told.content_limit == 512
    folder = WrappedEncoder(server, tokenizer=minilm_path())  # the served model's folder tells both
    assert (folder.max_length, folder.content_limit) == (256, 254)


@pytest.mark.parametrize("max_tokens", [None, 50, 300])
def test_requests_are_as_few_as_the_caps_allow(max_tokens):
    costs = [7, 30, 2, 45, 45, 1, 12, 30, 30, 30, 9] * 7
    limits = RequestLimits(max_inputs=10, max_tokens=max_tokens)
    requests = limits.requests(costs)
    assert [i for request in requests for i in request] == list(range(len(costs)))
    assert all(len(request) <= 10 for request in requests)
    if max_tokens is not None:
        assert all(sum(costs[i] for i in request) <= max_tokens for request in requests)
    # greedy in order: no request could have taken the next input
    for request, following in zip(requests, requests[1:], strict=False):
        over_tokens = max_tokens is not None and sum(costs[i] for i in request) + costs[following[0]] > max_tokens
        assert len(request) == 10 or over_tokens
    if max_tokens is None:
        assert len(requests) == lower_bound_requests(limits, costs)


def test_a_failed_request_names_the_nodes_whose_windows_it_held():
    model = Recording(embed_batch_size=4, fail_on=1)
    wrapped = WrappedEncoder(model, tokenizer=by_words, max_input_tokens=64)
    texts = [f"window {i}" for i in range(10)]
    owners = [0, 0, 0, 1, 1, 2, 2, 2, 3, 3]
    failure = r"request 2 of 3 .*ConnectionError: server gone.* node\(s\) 1, 2"
    with pytest.raises(WrappedRequestError, match=failure) as caught:
        wrapped.encode(texts, owners=owners)
    assert caught.value.nodes == [1, 2]
    assert [len(request) for request in model._requests] == [4, 4]  # stopped at the failure


def test_async_requests_run_concurrently_within_the_bound_and_keep_the_order():
    model = Recording(embed_batch_size=2, delay=0.05)
    wrapped = WrappedEncoder(model, tokenizer=by_words, max_input_tokens=64, max_concurrency=3)
    texts = ["a" * (i + 1) for i in range(20)]
    vectors = asyncio.run(wrapped.aencode(texts, normalize=False))
    assert model._most_in_flight == 3
    assert len(model._requests) == 10
    assert vectors[:, 0].tolist() == [float(i + 1) for i in range(20)]


def test_async_failure_raises_and_cancels_what_is_in_flight():
    model = Recording(embed_batch_size=1, delay=0.02, fail_on=0)
    wrapped = WrappedEncoder(model, tokenizer=by_words, max_input_tokens=64, max_concurrency=2)
    with pytest.raises(WrappedRequestError, match="node\\(s\\) 0"):
        asyncio.run(wrapped.aencode(["x", "y", "z", "w"], owners=[0, 1, 2, 3]))
    assert len(model._requests) < 4


def test_calibration_and_a_document_prompt_are_refused(huggingface):
    wrapped = WrappedEncoder(huggingface)
    with pytest.raises(WrappedEmbeddingError, match="cannot calibrate"):
        wrapped.encode(["text"], object())
    with pytest.raises(WrappedEmbeddingError, match="text instruction"):
        wrapped.encode(["text"], prompt="passage: ")
