"""The audit's configurations, rows and recommendation, and a whole audit on a tiny random model."""

from __future__ import annotations

import json

import pytest

from posfair_llamaindex.calibration.config import CalibrationConfig
from posfair_llamaindex.encoding.windows import WindowConfig
from posfair_llamaindex.eval.audit import audit_configs, audit_markdown, audit_texts, chart_rows, recommend
from posfair_llamaindex.eval.runner import EvalConfig
from tests.eval.test_pseudo_queries import corpus


def test_configs_are_plain_each_strength_and_the_pooling_dual_default():
    configs = audit_configs("mean", "mean", CalibrationConfig(variant="uniform", basket_size=64), (0.25, 1.0))
    assert [c.name for c in configs] == ["plain", "calibrated 0.25", "calibrated 1", "dual max 0.85"]
    assert [c.mode for c in configs] == ["plain", "calibrated", "calibrated", "dual"]
    assert all(c.calibration.variant == "uniform" and c.calibration.basket_size == 64 for c in configs[1:])
    assert configs[3].calibration.strength == 0.85 and configs[3].fusion == "max"
    first = audit_configs(None, "first", strengths=(0.5,), dual=True)
    assert first[-1].name == "dual max 1" and all(c.pooling is None for c in first)
    assert [c.name for c in audit_configs(None, "first", strengths=(0.5,), dual=False)] == ["plain", "calibrated 0.5"]
    with pytest.raises(ValueError, match=r"in \(0, 1\]"):
        audit_configs(None, "first", strengths=(0.0,))


def test_windows_mode_joins_the_audit_with_the_windows_it_is_given():
    configs = audit_configs(None, "mean", strengths=(0.5,), windows=WindowConfig(size=64, document="dual"))
    windows = configs[-1]
    assert windows.name == "windows 64/64 + dual" and windows.mode == "windows" and windows.fusion == "max"
    assert windows.calibrates and windows.calibration.strength == 0.85  # the dual document's default strength
    default = audit_configs(None, "first", strengths=(0.5,), windows=WindowConfig())[-1]
    assert default.name == "windows 128/128 + none" and not default.calibrates


def _row(name, mode, strength, hm, gain=None, groups=(80.0, 70.0, 60.0), psi=0.25):
    return {
        "name": name,
        "mode": mode,
        "strength": strength,
        "hm": [hm, hm - 2, hm + 2],
        "psi": [psi, psi - 0.05, psi + 0.05],
        "groups": {g: [v, v - 3, v + 3] for g, v in zip(("begin", "middle", "end"), groups, strict=True)},
        "hm_vs_plain": gain,
    }


def test_recommend_takes_the_best_hm_only_when_its_gain_is_beyond_noise():
    plain = _row("plain", "plain", None, 69.0)
    clear = [
        plain,
        _row("calibrated 0.5", "calibrated", 0.5, 72.0, [3.0, 1.0, 5.0], (78.0, 71.0, 68.0), 0.13),
        _row("calibrated 1", "calibrated", 1.0, 71.0, [2.0, 0.5, 3.5]),
    ]
    advice = recommend(clear)
    assert (advice["name"], advice["mode"], advice["strength"]) == ("calibrated 0.5", "calibrated", 0.5)
    assert "72.0 against plain's 69.0" in advice["reason"] and "(end) moves +8.0" in advice["reason"]
    fair = _row("plain", "plain", None, 69.0, psi=0.05)
    noisy = [fair, _row("dual max 1", "dual", 1.0, 70.0, [1.0, -0.5, 2.5])]
    advice = recommend(noisy)
    assert advice["name"] == "plain" and advice["strength"] is None
    assert "dual max 1" in advice["reason"] and "needs no calibration" in advice["reason"]
    with pytest.raises(ValueError, match="plain only"):
        recommend([plain])


def test_the_reason_for_plain_follows_plains_psi():
    """Nothing beats plain beyond noise on a biased corpus: plain is kept, but the corpus is not called fair."""
    biased = _row("plain", "plain", None, 60.0, groups=(75.0, 60.0, 52.0), psi=0.303)
    advice = recommend([biased, _row("calibrated 1", "calibrated", 1.0, 61.0, [1.0, -0.8, 2.8])])
    assert advice["name"] == "plain"
    assert "needs no calibration" not in advice["reason"]
    assert "plain PSI is 0.303 [0.253, 0.353] (its end group scores 52.0, its begin group 75.0)" in advice["reason"]
    assert "position-biased, but none of the settings tried corrects it beyond noise" in advice["reason"]
    fair = _row("plain", "plain", None, 69.0, psi=0.099)
    assert "little position bias" in recommend([fair, _row("c", "calibrated", 1.0, 69.0, [0.0, -1.0, 1.0])])["reason"]


def test_a_whole_audit_on_a_tiny_model(tiny_model_dir):
    model = tiny_model_dir("bert")
    base = CalibrationConfig(basket_size=16)
    report = audit_texts(
        corpus(24), model, calibration=base, strengths=(0.5, 1.0), bootstrap_samples=50, show_progress=False
    )
    rows = report.rows
    assert [r["name"] for r in rows] == ["plain", "calibrated 0.5", "calibrated 1", "dual max 1"]
    assert report.screen.sampled == 24 and report.benchmark.query_count == 72
    plain = rows[0]
    assert plain["hm_vs_plain"] is None and plain["strength"] is None
    for row in rows[1:]:
        assert set(row["groups"]) == {"begin", "middle", "end"}
        # the paired point estimate is the plain difference of the two HMs
        assert row["hm_vs_plain"][0] == pytest.approx(row["hm"][0] - plain["hm"][0], abs=1e-9)
        assert row["hm_vs_plain"][1] <= row["hm_vs_plain"][0] <= row["hm_vs_plain"][2]
    assert len({r["fingerprint"] for r in rows}) == 4
    json.dumps(rows)  # the CLI's --json prints them as they are
    assert "| calibrated 0.5 |" in audit_markdown(report)
    assert [r["general_delta"] for r in chart_rows(rows)][0] == [0.0, 0.0, 0.0]


def test_an_audit_needs_plain_to_compare_with(tiny_model_dir):
    with pytest.raises(ValueError, match="include a plain configuration"):
        audit_texts(corpus(24), tiny_model_dir("bert"), configs=[EvalConfig("c")], show_progress=False)
