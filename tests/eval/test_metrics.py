"""Metrics on hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from posfair_llamaindex.eval.metrics import (
    bootstrap,
    harmonic_mean,
    ndcg_at_k,
    position_sensitivity_index,
    recall_at_k,
    summarise,
)


def test_ndcg_single_relevant():
    assert ndcg_at_k(["a", "b", "c"], {"a"}) == 1.0
    assert ndcg_at_k(["b", "a", "c"], {"a"}) == pytest.approx(1 / math.log2(3))
    assert ndcg_at_k(["b", "c", "d"], {"a"}) == 0.0
    # beyond k counts nothing
    assert ndcg_at_k(["x"] * 10 + ["a"], {"a"}, k=10) == 0.0


def test_ndcg_several_relevant():
    # relevant at ranks 1 and 3: DCG = 1 + 1/log2(4) = 1.5; IDCG = 1 + 1/log2(3)
    assert ndcg_at_k(["a", "x", "b"], {"a", "b"}) == pytest.approx(1.5 / (1 + 1 / math.log2(3)))


def test_recall():
    assert recall_at_k(["a", "x", "b"], {"a", "b", "c"}) == pytest.approx(2 / 3)
    assert recall_at_k(["x", "a"], {"a"}, k=1) == 0.0


def test_empty_relevance_is_refused():
    with pytest.raises(ValueError):
        ndcg_at_k(["a"], set())


def test_harmonic_mean_and_psi():
    assert harmonic_mean([0.5, 0.25]) == pytest.approx(2 / (2 + 4))
    assert harmonic_mean([0.6, 0.0, 0.3]) == 0.0
    assert position_sensitivity_index([0.673, 0.617, 0.473]) == pytest.approx((0.673 - 0.473) / 0.673)
    assert position_sensitivity_index([0.5, 0.5, 0.5]) == 0.0


def test_summarise_and_bootstrap():
    per_query = {
        "begin": np.array([1.0, 1.0, 0.5, 0.5]),
        "middle": np.array([0.5, 0.5]),
        "end": np.array([0.25, 0.25, 0.25]),
    }
    summary = summarise(per_query, ["begin", "middle", "end"])
    assert summary["group:begin"] == 0.75 and summary["group:end"] == 0.25
    assert summary["hm"] == pytest.approx(3 / (1 / 0.75 + 1 / 0.5 + 1 / 0.25))
    assert summary["psi"] == pytest.approx((0.75 - 0.25) / 0.75)
    assert summary["aggregate"] == pytest.approx(np.mean([1, 1, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25]))
    intervals = bootstrap(per_query, ["begin", "middle", "end"], samples=200)
    point, low, high = intervals["group:begin"]
    assert point == 0.75 and 0.5 <= low <= point <= high <= 1.0
    assert intervals["group:end"] == (0.25, 0.25, 0.25)  # no spread, no interval


def test_paired_difference():
    from posfair_llamaindex.eval.metrics import paired_difference

    base = np.array([0.2, 0.5, 0.9, 0.1, 0.7, 0.3])
    point, low, high = paired_difference(base + 0.05, base, samples=200)
    assert point == pytest.approx(0.05) and low == pytest.approx(0.05) and high == pytest.approx(0.05)
    noisy = base + np.array([0.1, -0.1, 0.1, -0.1, 0.1, -0.1])
    point, low, high = paired_difference(noisy, base, samples=500)
    assert point == pytest.approx(0.0, abs=1e-12) and low < 0 < high
    with pytest.raises(ValueError, match="same queries"):
        paired_difference(base[:3], base)


def test_paired_summary_difference():
    from posfair_llamaindex.eval.metrics import paired_summary_difference

    rng = np.random.default_rng(1)
    groups = ("begin", "end")
    theirs = {g: rng.uniform(0.2, 0.8, 40) for g in groups}
    shifted = {"begin": theirs["begin"], "end": theirs["end"] + 0.1}  # better at the end only
    diff = paired_summary_difference(shifted, theirs, groups, samples=300)
    assert diff["group:begin"] == (0.0, 0.0, 0.0)  # the same per-query scores, resampled alike
    assert diff["group:end"][0] == pytest.approx(0.1) and diff["group:end"][1] == pytest.approx(0.1)
    expected = summarise(shifted, groups)["psi"] - summarise(theirs, groups)["psi"]
    point, low, high = diff["psi"]
    assert point == pytest.approx(expected) and low <= point <= high
    noisy = {g: theirs[g] + rng.normal(0, 0.05, 40) for g in groups}
    point, low, high = paired_summary_difference(noisy, theirs, groups, samples=300)["aggregate"]
    assert low < point < high and low < 0.02 and high > -0.02
    with pytest.raises(ValueError, match="group 'end'"):
        paired_summary_difference({"begin": theirs["begin"], "end": theirs["end"][:5]}, theirs, groups)
