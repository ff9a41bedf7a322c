"""Diagnostics: self-mass per layer and segment profiles."""

from __future__ import annotations

import json

import numpy as np
import pytest

from posfair_llamaindex.calibration.config import CalibrationConfig
from posfair_llamaindex.encoding.encoder import PosFairEncoder
from posfair_llamaindex.eval.diagnostics import diagnose, profile_summary, segment_profile, self_mass_per_layer
from tests.utils import minilm_path, sample_texts


@pytest.fixture(scope="module")
def encoder():
    return PosFairEncoder(minilm_path(), pooling="first")


def test_self_mass_is_pinned_by_cls_hard_in_calibrated_layers(encoder):
    texts = sample_texts(3, seed=3, min_words=250, max_words=300)
    plain = self_mass_per_layer(encoder, texts, None)
    hard = self_mass_per_layer(encoder, texts, CalibrationConfig(variant="cls_hard", strength=1.0, hard_weight=0.3))
    assert plain.shape == hard.shape == (6, 3 * 12)
    assert np.all((plain > 0) & (plain < 1))
    np.testing.assert_allclose(hard[3:], 0.3, atol=1e-6)  # the last 50% of six layers
    np.testing.assert_allclose(hard[:3], plain[:3], atol=1e-6)  # earlier layers untouched


def test_profile_summary_on_a_hand_made_profile():
    profile = np.array([[0.9, 0.8, 0.7, 0.6, 0.5, 0.4], [0.7, 0.6, 0.5, 0.4, 0.3, 0.2]])
    summary = profile_summary(profile)
    np.testing.assert_allclose(summary["mean_profile"], [0.8, 0.7, 0.6, 0.5, 0.4, 0.3])
    assert summary["spread"] == pytest.approx((0.8 - 0.3) / 0.8)
    assert summary["end_minus_begin"] == pytest.approx((0.4 + 0.3) / 2 - (0.8 + 0.7) / 2)  # thirds of two segments
    rising = profile_summary(np.array([[0.2, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4, 0.6, 1.0]]))
    assert rising["spread"] == pytest.approx(0.8)
    assert rising["end_minus_begin"] == pytest.approx((0.4 + 0.6 + 1.0) / 3 - (0.2 + 0.4 + 0.4) / 3)
    flat = profile_summary(np.full((3, 10), 0.5))
    assert flat["spread"] == 0.0 and flat["end_minus_begin"] == 0.0
    assert json.loads(json.dumps(summary)) == summary  # JSON-safe floats


def test_segment_profile_values_and_calibration(encoder):
    texts = sample_texts(2, seed=5, min_words=200, max_words=250)
    plain = segment_profile(encoder, texts, None)
    assert plain.shape == (2, 10)
    assert np.all((plain > 0) & (plain <= 1 + 1e-5))  # cosines of normalised vectors of related texts
    calibrated = segment_profile(encoder, texts, CalibrationConfig(strength=1.0))
    assert calibrated.shape == (2, 10) and np.all((calibrated > 0) & (calibrated <= 1 + 1e-5))
    # the texts are longer than a basket, so the calibrated whole-text vector, and its profile, change
    assert np.abs(calibrated - plain).max() > 1e-3
    summary = profile_summary(plain)
    np.testing.assert_allclose(summary["mean_profile"], plain.mean(axis=0), rtol=1e-6)
    assert summary["spread"] == pytest.approx((plain.mean(0).max() - plain.mean(0).min()) / plain.mean(0).max())
    with pytest.raises(ValueError, match="cannot be cut"):
        segment_profile(encoder, ["too short"], None)


def test_diagnose_writes_charts_and_numbers(encoder, tmp_path):
    texts = sample_texts(2, seed=7, min_words=220, max_words=260)
    results = diagnose(encoder, texts, CalibrationConfig(), tmp_path)
    assert (tmp_path / "self_mass.png").stat().st_size > 5000
    assert (tmp_path / "segment_profile.png").stat().st_size > 5000
    stored = json.loads((tmp_path / "diagnostics.json").read_text())
    assert stored["self_mass"]["calibrated_layers"] == [3, 4, 5]
    assert stored == json.loads(json.dumps(results))


def test_mean_pooled_model_skips_self_mass(tmp_path):
    mean = PosFairEncoder(minilm_path())
    with pytest.raises(ValueError, match="mean pooling"):
        self_mass_per_layer(mean, ["text"], None)
    results = diagnose(mean, sample_texts(1, seed=2, min_words=200, max_words=220), CalibrationConfig(), tmp_path)
    assert "self_mass" not in results and (tmp_path / "segment_profile.png").is_file()
