"""Diagnostics: self-mass per layer and segment profiles."""

from __future__ import annotations

import json

import numpy as np
import pytest

from posfair_llamaindex.config import CalibrationConfig
from posfair_llamaindex.encoder import PosFairEncoder
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


def test_segment_profile_shape_and_summary(encoder):
    texts = sample_texts(2, seed=5, min_words=200, max_words=250)
    profile = segment_profile(encoder, texts, None)
    assert profile.shape == (2, 10) and np.all(profile < 1.0001)
    summary = profile_summary(profile)
    assert len(summary["mean_profile"]) == 10 and summary["spread"] >= 0
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
