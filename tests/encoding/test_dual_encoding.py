"""Dual encoding: one shared pass gives the plain and the calibrated vector, equal to two separate passes."""

from __future__ import annotations

import numpy as np
import pytest

from posfair_llamaindex.calibration.config import CalibrationConfig
from posfair_llamaindex.encoding.encoder import PosFairEncoder
from tests.utils import FAMILY_CASES, minilm_path, sample_texts


def assert_halves_match(encoder, texts, config, batch_size=8):
    dual = encoder.encode(texts, config, dual=True, batch_size=batch_size)
    plain = encoder.encode(texts, None, batch_size=batch_size)
    calibrated = encoder.encode(texts, config, batch_size=batch_size)
    d = encoder.dimension
    assert dual.shape == (len(texts), 2 * d)
    # float noise only: far below what calibration changes (checked by the callers)
    np.testing.assert_allclose(dual[:, :d], plain, atol=1e-5)
    np.testing.assert_allclose(dual[:, d:], calibrated, atol=1e-5)
    assert (dual[:, :d] * plain).sum(1).min() >= 0.99999
    assert (dual[:, d:] * calibrated).sum(1).min() >= 0.99999
    return dual, plain, calibrated


@pytest.mark.parametrize("family,pooling,padding", FAMILY_CASES)
def test_shared_pass_equals_two_passes_on_every_family(tiny_model_dir, family, pooling, padding):
    encoder = PosFairEncoder(tiny_model_dir(family, pooling), padding_side=padding)
    texts = sample_texts(5, seed=3, min_words=3, max_words=140)  # long and short ones in one batch
    config = CalibrationConfig(strength=1.0, basket_size=16)
    _, plain, calibrated = assert_halves_match(encoder, texts, config)
    assert np.abs(calibrated - plain).max() > 5e-5  # the calibrated half really is calibrated


def test_shared_pass_on_minilm_first_and_mean_pooling(minilm):
    texts = sample_texts(4, seed=6, min_words=150, max_words=400)
    for pooling in ("first", "mean"):
        encoder = PosFairEncoder(minilm, pooling=pooling)
        _, plain, calibrated = assert_halves_match(encoder, texts, CalibrationConfig(strength=0.85), batch_size=3)
        assert np.abs(calibrated - plain).max() > 1e-2


def test_layers_that_are_not_contiguous(tiny_model_dir):
    encoder = PosFairEncoder(tiny_model_dir("qwen3", "last"), padding_side="left")
    texts = sample_texts(3, seed=8, min_words=40, max_words=120)
    # the branch is at layer 0, so layers 1 and 2 run twice without being calibrated
    assert_halves_match(encoder, texts, CalibrationConfig(basket_size=8, layers=(0, -1), strength=1.0))


def test_a_batch_with_nothing_to_calibrate_gives_the_plain_vector_twice(minilm):
    encoder = PosFairEncoder(minilm, pooling="first")
    texts = ["a short note about barley", "the bridge"]
    dual = encoder.encode(texts, CalibrationConfig(), dual=True)
    plain = encoder.encode(texts, None)
    np.testing.assert_array_equal(dual[:, :384], plain)
    np.testing.assert_array_equal(dual[:, 384:], plain)


def test_plain_forwards_are_untouched_by_the_layer_hooks(minilm):
    """The hooks act only under a dual plan: plain and calibrated passes are bit-for-bit as before."""
    encoder = PosFairEncoder(minilm, pooling="first")
    texts = sample_texts(3, seed=2, min_words=200, max_words=300)
    before_plain, before_calibrated = encoder.encode(texts, None), encoder.encode(texts, CalibrationConfig())
    encoder.encode(texts, CalibrationConfig(), dual=True)
    np.testing.assert_array_equal(encoder.encode(texts, None), before_plain)
    np.testing.assert_array_equal(encoder.encode(texts, CalibrationConfig()), before_calibrated)


def test_dual_needs_a_calibration_and_cannot_record():
    encoder = PosFairEncoder(minilm_path(), pooling="first")
    with pytest.raises(ValueError, match="needs a calibration"):
        encoder.encode(["text"], None, dual=True)
    with pytest.raises(ValueError, match="cannot record"):
        encoder.encode_batch(["text"], CalibrationConfig(), dual=True, recorder=lambda *a: None)
