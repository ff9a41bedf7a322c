"""Forward passes sized by tokens, and LlamaIndex's small slices sharing them through the lookahead."""

from __future__ import annotations

import asyncio
import random

import numpy as np
import pytest
from llama_index.core.callbacks import CallbackManager, CBEventType, LlamaDebugHandler
from pydantic import ValidationError

from posfair_llamaindex import PosFairEmbedding, WindowConfig
from posfair_llamaindex.encoding.passes import Lookahead, forward_passes
from tests.utils import minilm_path, sample_texts


@pytest.mark.parametrize("seed", range(5))
def test_passes_cover_every_text_once_longest_first_within_both_caps(seed):
    rng = random.Random(seed)
    lengths = [rng.randint(3, 300) for _ in range(rng.randint(1, 80))]
    budget, rows = rng.choice([64, 256, 1000]), rng.choice([None, 3, 7])
    passes = forward_passes(lengths, max_tokens=budget, max_rows=rows)
    flat = [i for chunk in passes for i in chunk]
    assert sorted(flat) == list(range(len(lengths)))
    assert [lengths[i] for i in flat] == sorted(lengths, reverse=True)
    for chunk in passes:
        width = max(lengths[i] for i in chunk)
        assert len(chunk) == 1 or len(chunk) * width <= budget
        assert rows is None or len(chunk) <= rows
    # greedy: each pass but the last could not take the next text
    for chunk in passes[:-1]:
        width = lengths[chunk[0]]
        assert (rows is not None and len(chunk) == rows) or (len(chunk) + 1) * width > budget


def test_a_text_longer_than_the_budget_is_a_pass_of_its_own():
    assert forward_passes([900, 10, 10], max_tokens=512) == [[0], [1, 2]]
    assert forward_passes([5, 5, 5], max_tokens=None, max_rows=2) == [[0, 1], [2]]


def test_the_lookahead_encodes_ahead_and_serves_slices_in_any_order_and_duplicates_once():
    calls = []

    def encode(texts):
        calls.append(list(texts))
        return [f"v:{text}" for text in texts]

    texts = ["a", "b", "c", "b", "d", "e", "f"]
    lookahead = Lookahead(texts, [10] * len(texts), stretch_tokens=30, encode=encode)
    assert lookahead.embed(["a", "b"]) == ["v:a", "v:b"]
    assert calls == [["a", "b", "c"]]  # ahead up to 30 tokens; the duplicate "b" is not encoded twice
    assert lookahead.embed(["c", "b"]) == ["v:c", "v:b"]
    assert len(calls) == 1
    assert lookahead.embed(["f"]) == ["v:f"]  # out of order (async workers): everything up to it
    assert calls[1] == ["d", "e", "f"]
    assert lookahead.embed(["d", "e"]) == ["v:d", "v:e"]
    assert len(calls) == 2
    assert not lookahead.holds(["a"])  # each text is served as often as it was listed, then forgotten


@pytest.fixture(scope="module")
def windows_texts():
    return sample_texts(12, seed=5, min_words=120, max_words=220)


@pytest.fixture(scope="module")
def encoder():
    return PosFairEmbedding(minilm_path(), mode="plain").encoder


def _counting(embedding: PosFairEmbedding) -> list:
    """Record the rows of every forward pass the embedding's encoder makes."""
    rows = []
    forward = embedding.encoder._forward

    def counted(batch, *args, **kwargs):
        rows.append(batch["input_ids"].shape)
        return forward(batch, *args, **kwargs)

    embedding.encoder._forward = counted
    return rows


@pytest.mark.parametrize("mode", ["windows", "plain", "dual"])
def test_slices_of_llamaindex_share_passes_under_the_budget_and_vectors_do_not_change(mode, windows_texts, encoder):
    budget = 2048
    debug = LlamaDebugHandler()
    embedding = PosFairEmbedding(
        minilm_path(),
        mode=mode,
        windows=WindowConfig(size=128) if mode == "windows" else None,
        embed_batch_size=2,
        max_batch_tokens=budget,
        callback_manager=CallbackManager([debug]),
        encoder=encoder,
    )
    shapes = _counting(embedding)
    vectors = embedding.get_text_embedding_batch(windows_texts)
    # LlamaIndex still sees one event per slice of embed_batch_size texts
    assert len(debug.get_event_pairs(CBEventType.EMBEDDING)) == len(windows_texts) // 2
    assert all(rows * width <= budget or rows == 1 for rows, width in shapes)
    units = sum(rows for rows, _ in shapes)
    assert len(shapes) < len(windows_texts) // 2  # fewer passes than slices: slices shared them
    assert units >= len(windows_texts)
    del embedding.encoder._forward
    alone = [embedding._encode_documents([text], _no_batch()) for text in windows_texts[:4]]
    for got, expected in zip(vectors[:4], alone, strict=True):
        got, expected = np.asarray(got), np.asarray(expected[0])
        assert got.shape == expected.shape
        assert np.allclose(got, expected, atol=2e-6)


def _no_batch():
    from posfair_llamaindex.embedding import _NO_BATCH

    return _NO_BATCH


def test_async_slices_are_served_by_the_same_lookahead(windows_texts, encoder):
    embedding = PosFairEmbedding(
        minilm_path(), mode="windows", embed_batch_size=2, num_workers=4, max_batch_tokens=8192, encoder=encoder
    )
    sync = embedding.get_text_embedding_batch(windows_texts)
    shapes = _counting(embedding)
    result = asyncio.run(embedding.aget_text_embedding_batch(windows_texts))
    del embedding.encoder._forward
    assert len(shapes) < len(windows_texts) // 2
    for got, expected in zip(result, sync, strict=True):
        assert np.allclose(got, expected, atol=2e-6)


def test_the_budget_is_refused_unless_a_positive_int(encoder):
    with pytest.raises(ValidationError, match="max_batch_tokens"):
        PosFairEmbedding(minilm_path(), mode="plain", max_batch_tokens=0, encoder=encoder)
    with pytest.raises(ValueError, match="max_batch_tokens must be a positive int"):
        encoder.encode(["a text"], max_batch_tokens=0)
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        encoder.encode(["a text"], batch_size=True)
