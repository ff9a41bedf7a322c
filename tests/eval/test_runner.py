"""A tiny end-to-end evaluation through the public API, and the report it writes."""

from __future__ import annotations

import json

import numpy as np
import pytest
from transformers import AutoTokenizer

from posfair_llamaindex.config import CalibrationConfig
from posfair_llamaindex.eval import data
from posfair_llamaindex.eval.report import to_markdown, write_report
from posfair_llamaindex.eval.runner import EvalConfig, evaluate
from posfair_llamaindex.eval.sweeps import findings, grid_configs, grid_markdown, plot_strength_sweep, strength_configs
from posfair_llamaindex.sea import ChunkerConfig
from tests.utils import SHARED_DATA, minilm_path

pytestmark = pytest.mark.skipif(not (SHARED_DATA / "squad").is_dir(), reason="shared data folder not present")


@pytest.fixture(scope="module")
def small_squad():
    tokenizer = AutoTokenizer.from_pretrained(minilm_path())
    return data.squad_longposq(SHARED_DATA, tokenizer, max_documents=24, questions_per_group=12)


def test_end_to_end_run_and_report(small_squad, tmp_path):
    configs = [
        EvalConfig.plain("first"),
        EvalConfig("default", calibration=CalibrationConfig(), pooling="first"),
        EvalConfig("sea", mode="sea", chunker=ChunkerConfig(kind="sentence", chunk_size=96), pooling="first"),
    ]
    run = evaluate(small_squad, configs, model=minilm_path(), cache_dir=tmp_path / "cache", bootstrap_samples=100, show_progress=False)
    assert list(run.query_seconds) == ["first"]  # queries encoded once, shared by the three configs
    plain, calibrated, sea = run.results
    for result in run.results:
        assert sum(len(v) for v in result.ndcg.values()) == small_squad.query_count
        for key, (point, low, high) in result.summary.items():
            assert low <= point <= high
            assert 0 <= point <= (1 if key == "psi" else 100)
    assert len({plain.fingerprint, calibrated.fingerprint, sea.fingerprint}) == 3
    assert plain.delta_vs_plain is None
    low, high = calibrated.delta_vs_plain[1:]
    assert low <= calibrated.delta_vs_plain[0] <= high
    aggregate_gap = calibrated.summary["aggregate"][0] - plain.summary["aggregate"][0]
    assert calibrated.delta_vs_plain[0] == pytest.approx(aggregate_gap, abs=1e-6)
    paths = write_report(run, tmp_path / "out", "squad")
    report = json.loads(paths["json"].read_text())
    assert [r["name"] for r in report["results"]] == ["plain", "default", "sea"]
    assert report["results"][1]["calibration"]["variant"] == "cls_soft"
    assert paths["png"].stat().st_size > 5000
    markdown = to_markdown(run)
    assert "| plain | first |" in markdown and "HM" in markdown and "PSI" in markdown
    assert "model `all-MiniLM-L6-v2`" in markdown  # the offline package is named, not its install path
    assert len(list((tmp_path / "cache").glob("*.npy"))) == 3
    # the cache serves a second run with identical scores
    again = evaluate(small_squad, configs[:2], model=minilm_path(), cache_dir=tmp_path / "cache", bootstrap_samples=10, show_progress=False)
    for group in data.GROUPS:
        np.testing.assert_array_equal(again.results[1].ndcg[group], calibrated.ndcg[group])
    assert calibrated.seconds > 0 and again.results[1].seconds is None
    assert "| cached |" in to_markdown(again)


def test_sweep_helpers(small_squad, tmp_path):
    configs = strength_configs(CalibrationConfig(), "first", strengths=(0.25, 1.0))
    run = evaluate(small_squad, configs, model=minilm_path(), bootstrap_samples=20, show_progress=False)
    assert plot_strength_sweep(run, tmp_path / "sweep.png").stat().st_size > 5000
    found = findings(run)
    assert found["best_hm"]["name"] in ("strength 0.25", "strength 1.00")
    grid = grid_configs("first", layers=("last",), baskets=(64,), variants=("uniform", "cls_soft"))
    grid_run = evaluate(small_squad, grid, model=minilm_path(), bootstrap_samples=20, show_progress=False)
    table = grid_markdown(grid_run)
    assert "**uniform**" in table and "**cls_soft**" in table and "B=64" in table


def test_bad_configs_are_refused(small_squad):
    with pytest.raises(ValueError, match="unique"):
        evaluate(small_squad, [EvalConfig.plain(), EvalConfig.plain()], model=minilm_path())
    with pytest.raises(ValueError, match="at least one"):
        evaluate(small_squad, [], model=minilm_path())
