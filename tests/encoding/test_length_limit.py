"""The token limit in force: a number, the model card's (what sentence-transformers and LlamaIndex's
HuggingFaceEmbedding truncate at) or the model's positions; resolved once, recorded in the tag."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from posfair_llamaindex import PosFairEmbedding
from posfair_llamaindex.encoding.encoder import PosFairEncoder
from posfair_llamaindex.options import DEFAULT_LENGTH_LIMIT, LENGTH_LIMITS
from tests.utils import minilm_path, sample_texts

# all-MiniLM-L6-v2's card limit is 256 tokens, its positions 512: texts of ~300-450 tokens fall between
TEXTS = sample_texts(4, seed=5, min_words=280, max_words=420)


@pytest.fixture(scope="module")
def card():
    return PosFairEmbedding(minilm_path(), mode="plain", max_length="model_card")


def cosines(a, b) -> np.ndarray:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_the_limits_of_minilm_are_read_from_its_folder(card):
    limits = card.encoder.length_limits
    assert limits == {"positions": 512, "model_card": 256}
    assert card.max_length == 256 and card.tag()["max_length"] == 256
    assert min(card.encoder.token_lengths(TEXTS)) > 256 + 40  # every text is cut by the card's limit
    assert PosFairEmbedding(minilm_path(), mode="plain", max_length="positions", encoder=None).max_length == 512


def test_the_default_is_the_measured_choice():
    encoder = PosFairEncoder(minilm_path())
    assert encoder.max_length == encoder.length_limits[DEFAULT_LENGTH_LIMIT]


def test_model_card_reproduces_sentence_transformers_on_every_text(card):
    sentence_transformers = pytest.importorskip("sentence_transformers", reason="the train extra")
    reference = sentence_transformers.SentenceTransformer(minilm_path(), device="cpu")
    assert reference.max_seq_length == 256
    expected = reference.encode(TEXTS, normalize_embeddings=True)
    assert cosines(card.get_text_embedding_batch(TEXTS), expected).min() >= 0.99999
    assert cosines([card.get_query_embedding(t) for t in TEXTS[:2]], expected[:2]).min() >= 0.99999
    # the check could fail: at the position limit the same texts give other vectors
    at_positions = PosFairEmbedding(minilm_path(), mode="plain", max_length="positions", encoder=None)
    assert cosines(at_positions.get_text_embedding_batch(TEXTS), expected).max() < 0.999


def test_model_card_reproduces_llamaindex_huggingface_embedding(card):
    huggingface = pytest.importorskip("llama_index.embeddings.huggingface", reason="the dev extra")
    reference = huggingface.HuggingFaceEmbedding(model_name=minilm_path(), device="cpu")
    assert reference.max_length == card.max_length
    expected = reference.get_text_embedding_batch(TEXTS)
    assert cosines(card.get_text_embedding_batch(TEXTS), expected).min() >= 0.99999


def test_a_folder_without_a_model_card_limit_falls_back_to_positions(tiny_model_dir):
    folder = Path(tiny_model_dir("bert", "first"))
    card = folder / "sentence_bert_config.json"
    assert not card.exists() or "max_seq_length" not in json.loads(card.read_text())
    encoder = PosFairEncoder(str(folder), max_length="model_card")
    assert encoder.length_limits["model_card"] is None
    assert encoder.max_length == encoder.length_limits["positions"] == 512


@pytest.mark.parametrize("bad", ["card", "", 1, True, 3.5])
def test_other_limits_are_refused_by_name(bad):
    with pytest.raises(ValueError, match="max_length"):
        PosFairEmbedding(minilm_path(), mode="plain", max_length=bad)


def test_limit_names_are_the_options_set():
    assert set(LENGTH_LIMITS) == {"model_card", "positions"}
