"""Evaluation runs through the public API, the report they write, the cache and the sweep helpers.

Generated data (always) and the real shared data (when present) go through the same checks; a hand-built
benchmark with a known ranking pins the exact scores.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from posfair_llamaindex.calibration.config import CalibrationConfig
from posfair_llamaindex.encoding.sea import ChunkerConfig
from posfair_llamaindex.eval import benchmark_data as data
from posfair_llamaindex.eval.benchmark_data import Benchmark, Query, RetrievalTask
from posfair_llamaindex.eval.report import to_json, to_markdown, write_report
from posfair_llamaindex.eval.runner import ConfigResult, EvalConfig, EvalRun, evaluate
from posfair_llamaindex.eval.sweeps import findings, grid_configs, grid_markdown, strength_configs
from tests.utils import HAS_SQUAD, NO_SHARED_DATA, SHARED_DATA, minilm_path

real_data = pytest.mark.skipif(not HAS_SQUAD, reason=NO_SHARED_DATA)
SMALL_BASKETS = CalibrationConfig(basket_size=16)  # documents of 128 tokens are calibrated only with small baskets


@pytest.fixture(scope="module")
def fake_squad(fake_data, tokenizer):
    return data.squad_longposq(fake_data, tokenizer, token_budget=128, max_documents=8, questions_per_group=6)


@pytest.fixture(scope="module")
def real_squad(tokenizer):
    return data.squad_longposq(SHARED_DATA, tokenizer, max_documents=16, questions_per_group=8)


def run_and_check_report(bench, tmp_path, calibration, bootstrap_samples):
    configs = [
        EvalConfig.plain("first"),
        EvalConfig("default", calibration=calibration, pooling="first"),
        EvalConfig("sea", mode="sea", chunker=ChunkerConfig(kind="sentence", chunk_size=48), pooling="first"),
    ]
    cache = tmp_path / "cache"
    run = evaluate(
        bench, configs, model=minilm_path(), cache_dir=cache, bootstrap_samples=bootstrap_samples, show_progress=False
    )
    assert run.benchmark is bench and run.model == minilm_path()
    assert list(run.query_seconds) == ["first"]  # queries encoded once, shared by the three configs
    plain, calibrated, sea = run.results
    per_group = {g: sum(q.group == g for t in bench.tasks for q in t.queries) for g in bench.groups}
    for result in run.results:
        assert {g: len(v) for g, v in result.ndcg.items()} == per_group
        assert {g: len(v) for g, v in result.recall.items()} == per_group
        assert result.pooling == "first" and result.seconds > 0
        for key, (point, low, high) in result.summary.items():
            assert low <= point <= high
            assert 0 <= point <= (1 if key == "psi" else 100)
        for group in bench.groups:
            assert result.summary[f"group:{group}"][0] == pytest.approx(100 * result.ndcg[group].mean())
            assert result.recall_summary[f"group:{group}"][0] == pytest.approx(100 * result.recall[group].mean())
            assert np.all(result.ndcg[group] <= result.recall[group] + 1e-12)  # one relevant document each
    # the questions name their paragraph's place: retrieval works
    assert plain.summary["aggregate"][0] > 50
    assert len({plain.fingerprint, calibrated.fingerprint, sea.fingerprint}) == 3
    assert plain.delta_vs_plain is None
    for result in (calibrated, sea):
        point, low, high = result.delta_vs_plain
        assert low <= point <= high
        assert point == pytest.approx(result.summary["aggregate"][0] - plain.summary["aggregate"][0], abs=1e-6)

    paths = write_report(run, tmp_path / "out", "squad")
    assert {p.name for p in (tmp_path / "out").iterdir()} == {
        "squad.md",
        "squad.json",
        "per-query-squad.json",
        "squad.png",
    }
    per_query = json.loads(paths["per_query"].read_text())
    for result in run.results:  # every query's score, in the order the summaries were computed from
        for group in bench.groups:
            assert per_query["ndcg_at_10"][result.config.name][group] == pytest.approx(list(result.ndcg[group]))
            assert len(per_query["queries"][group]) == len(result.ndcg[group])
    assert paths["markdown"].read_text() == to_markdown(run) + "\n"
    report = json.loads(paths["json"].read_text())
    assert [r["name"] for r in report["results"]] == ["plain", "default", "sea"]
    assert [r["mode"] for r in report["results"]] == ["plain", "calibrated", "sea"]
    assert report["results"][1]["calibration"] == calibration.tag()
    assert report["results"][0]["calibration"] is None and report["results"][2]["chunker"]["kind"] == "sentence"
    assert report["documents"] == bench.document_count and report["queries"] == bench.query_count
    assert report["results"][0]["queries_per_group"] == per_group
    assert report["results"][1]["ndcg_at_10"]["hm"] == pytest.approx(list(calibrated.summary["hm"]))
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and paths["png"].stat().st_size > 5000
    markdown = to_markdown(run)
    assert "| plain | first |" in markdown and "| HM | PSI |" in markdown and "| cached |" not in markdown
    assert "model `all-MiniLM-L6-v2`" in markdown  # the offline package is named, not its install path
    assert len(list(cache.glob("*.npy"))) == 3

    # the cache serves a second run with identical scores
    again = evaluate(
        bench, configs[:2], model=minilm_path(), cache_dir=cache, bootstrap_samples=10, show_progress=False
    )
    for before, after in zip(run.results[:2], again.results, strict=True):
        assert after.fingerprint == before.fingerprint and after.seconds is None
        for group in bench.groups:
            np.testing.assert_array_equal(after.ndcg[group], before.ndcg[group])
            np.testing.assert_array_equal(after.recall[group], before.recall[group])
    assert to_markdown(again).count("| cached |") == 2
    assert len(list(cache.glob("*.npy"))) == 3  # nothing new written
    return run


def test_end_to_end_run_and_report_on_generated_data(fake_squad, tmp_path):
    assert fake_squad.document_count == 8 and fake_squad.query_count == 18
    run = run_and_check_report(fake_squad, tmp_path, SMALL_BASKETS, bootstrap_samples=50)
    plain, calibrated, _ = run.results
    # with baskets of 16 tokens the calibration changes the document vectors, so some score moves
    cached = [np.load(p) for p in sorted((tmp_path / "cache").glob("*.npy"))]
    assert all(v.shape == (8, 384) for v in cached)
    assert min(np.abs(a - b).max() for i, a in enumerate(cached) for b in cached[i + 1 :]) > 1e-4


@real_data
def test_end_to_end_run_and_report_on_real_data(real_squad, tmp_path):
    run_and_check_report(real_squad, tmp_path, CalibrationConfig(), bootstrap_samples=100)


# ----------------------------------------------------------------------------- a ranking known in advance
DOCS = {
    "cats": "Cats are small furry pets that purr and chase mice around the house.",
    "rockets": "Rockets carry satellites into orbit after launching from the pad.",
    "bread": "Bakers knead dough and bake fresh bread in hot stone ovens every morning.",
    "bread-twin": "Bakers knead dough and bake fresh bread in hot brick ovens every morning.",
    "volcano": "The volcano erupted and lava flowed down toward the sleeping village.",
}
OTHER_DOCS = {
    "orchestra": "The orchestra played a long symphony in the new concert hall.",
    "glacier": "Glaciers slowly carve deep valleys into the northern mountains.",
}


def known_benchmark() -> Benchmark:
    """Each query repeats one document word for word, so that document ranks first and its twin second."""
    first = RetrievalTask(
        dict(DOCS),
        [
            Query("q-cats", DOCS["cats"], frozenset({"cats"}), "begin"),  # rank 1
            Query("q-rockets", DOCS["rockets"], frozenset({"rockets"}), "begin"),  # rank 1
            Query("q-twin", DOCS["bread"], frozenset({"bread-twin"}), "middle"),  # rank 2
            Query("q-miss", DOCS["bread"], frozenset({"volcano"}), "end"),  # below the top 2
        ],
    )
    second = RetrievalTask(
        dict(OTHER_DOCS), [Query("q-orchestra", OTHER_DOCS["orchestra"], frozenset({"orchestra"}), "end")]
    )
    return Benchmark("known", [first, second], data.GROUPS, {"made": "by hand"})


def test_hand_built_benchmark_gives_the_exact_scores():
    bench = known_benchmark()
    run = evaluate(bench, [EvalConfig.plain()], model=minilm_path(), bootstrap_samples=50, show_progress=False, k=2)
    (result,) = run.results
    second = 1 / math.log2(3)
    # results of the two corpora are pooled by group, in query order
    np.testing.assert_allclose(result.ndcg["begin"], [1.0, 1.0], atol=1e-9)
    np.testing.assert_allclose(result.ndcg["middle"], [second], atol=1e-9)
    np.testing.assert_allclose(result.ndcg["end"], [0.0, 1.0], atol=1e-9)
    np.testing.assert_allclose(result.recall["middle"], [1.0]) and np.testing.assert_allclose(
        result.recall["end"], [0.0, 1.0]
    )
    s = result.summary
    assert s["group:begin"] == pytest.approx((100, 100, 100))  # no spread, no interval
    assert s["group:middle"] == pytest.approx((100 * second,) * 3)
    assert s["group:end"][0] == pytest.approx(50) and s["group:end"][1] >= 0 and s["group:end"][2] <= 100
    assert s["hm"][0] == pytest.approx(100 * 3 / (1 + 1 / second + 2))
    assert s["psi"][0] == pytest.approx(0.5)  # PSI stays a ratio
    assert s["aggregate"][0] == pytest.approx(100 * (3 + second) / 5)
    assert result.recall_summary["aggregate"][0] == pytest.approx(80)
    assert result.pooling == "mean"  # MiniLM's own sentence-transformers pooling
    report = to_json(run)
    assert report["benchmark"] == "known" and report["settings"] == {"made": "by hand"}
    assert report["documents"] == 7 and report["queries"] == 5
    assert report["results"][0]["queries_per_group"] == {"begin": 2, "middle": 1, "end": 2}
    assert report["results"][0]["delta_ndcg_at_10_vs_plain_paired"] is None


def test_k_cuts_the_ranking():
    bench = Benchmark(
        "k", [RetrievalTask(dict(DOCS), [Query("q", DOCS["bread"], frozenset({"bread-twin"}))])], ("all",)
    )
    top1 = evaluate(bench, [EvalConfig.plain()], model=minilm_path(), bootstrap_samples=5, show_progress=False, k=1)
    assert top1.results[0].ndcg["all"].tolist() == [0.0]  # the twin ranks second: outside the top 1
    assert "hm" not in top1.results[0].summary and "psi" not in top1.results[0].summary
    markdown = to_markdown(top1)
    assert "HM" not in markdown and "nDCG@10 all" not in markdown  # one group: no positional columns
    assert "| plain | mean | 0.0 [0.0, 0.0] | - | 0.0 [0.0, 0.0] |" in markdown


def test_bad_configs_are_refused():
    bench = known_benchmark()
    with pytest.raises(ValueError, match="unique"):
        evaluate(bench, [EvalConfig.plain(), EvalConfig.plain()], model=minilm_path())
    with pytest.raises(ValueError, match="at least one"):
        evaluate(bench, [], model=minilm_path())


# ----------------------------------------------------------------------------- sweeps
def made_result(config: EvalConfig, hm: float, psi: float) -> ConfigResult:
    """A result with fixed HM and PSI (points with zero-width intervals)."""
    empty = {g: np.zeros(1) for g in data.GROUPS}
    return ConfigResult(
        config, "first", config.name, None, empty, empty, summary={"hm": (hm, hm, hm), "psi": (psi, psi, psi)}
    )


def made_run(results) -> EvalRun:
    return EvalRun(known_benchmark(), "model", list(results), {})


def test_strength_and_grid_configs():
    base = CalibrationConfig(variant="cls_hard", basket_size=32, layers="last")
    configs = strength_configs(base, "first", strengths=(0.25, 1.0))
    assert [c.name for c in configs] == ["plain", "strength 0.25", "strength 1.00"]
    assert configs[0].mode == "plain" and all(c.pooling == "first" for c in configs)
    assert [c.calibration for c in configs[1:]] == [base.model_copy(update={"strength": s}) for s in (0.25, 1.0)]
    assert configs[2].calibration.variant == "cls_hard" and configs[2].calibration.basket_size == 32
    grid = grid_configs(None, layers=("last", 0.5), baskets=(64, 128), variants=("uniform", "cls_soft"), strength=0.75)
    assert len(grid) == 1 + 2 * 2 * 2 and grid[0].mode == "plain"
    assert grid[1].name == "uniform layers=last B=64" and grid[-1].name == "cls_soft layers=0.5 B=128"
    assert {(c.calibration.variant, c.calibration.layers, c.calibration.basket_size) for c in grid[1:]} == {
        (v, layer, b) for v in ("uniform", "cls_soft") for layer in ("last", 0.5) for b in (64, 128)
    }
    assert all(c.calibration.strength == 0.75 and c.mode == "calibrated" for c in grid[1:])
    assert len({c.name for c in grid}) == len(grid)  # evaluate needs unique names


def test_findings_on_known_summaries():
    run = made_run(
        [
            made_result(EvalConfig.plain(), 50.0, 0.30),
            made_result(
                EvalConfig("a", calibration=CalibrationConfig(strength=0.25)), 52.0, 0.08
            ),  # fair, gain too small
            made_result(EvalConfig("b", calibration=CalibrationConfig(strength=0.5)), 56.0, 0.09),  # qualifies
            made_result(EvalConfig("c", calibration=CalibrationConfig(strength=1.0)), 60.0, 0.20),  # best HM, unfair
            made_result(
                EvalConfig("d", calibration=CalibrationConfig(strength=0.75)), 54.0, 0.05
            ),  # qualifies, fairest
        ]
    )
    found = findings(run)
    assert found["plain"] == {"hm": 50.0, "psi": 0.30}
    assert found["best_hm"] == {"name": "c", "hm": 60.0, "psi": 0.20}
    assert found["lowest_psi"] == {"name": "d", "hm": 54.0, "psi": 0.05}
    assert found["psi<=0.1 and hm>=plain+3.0"] == ["b", "d"]
    assert findings(run, psi_target=0.25, hm_gain=8.0)["psi<=0.25 and hm>=plain+8.0"] == ["c"]
    with pytest.raises(ValueError, match="no plain"):
        findings(made_run(run.results[1:]))


def test_grid_markdown_on_known_summaries():
    grid = grid_configs("first", layers=("last", 0.5), baskets=(64, 128), variants=("uniform", "cls_soft"))
    scores = {c.name: (40.0 + i, 0.1 * i) for i, c in enumerate(grid)}
    kept = [c for c in grid if c.name != "cls_soft layers=0.5 B=64"]  # a missing cell shows as "-"
    table = grid_markdown(made_run(made_result(c, *scores[c.name]) for c in kept))
    lines = table.splitlines()
    assert lines[0] == "plain: HM 40.0, PSI 0.000. Cells: HM / PSI."
    uniform = lines.index("**uniform**")
    assert lines[uniform + 2] == "| layers | B=64 | B=128 |"
    assert lines[uniform + 4] == "| last | 41.0 / 0.100 | 42.0 / 0.200 |"
    assert lines[uniform + 5] == "| 0.5 | 43.0 / 0.300 | 44.0 / 0.400 |"
    soft = lines.index("**cls_soft**")
    assert lines[soft + 4] == "| last | 45.0 / 0.500 | 46.0 / 0.600 |"
    assert lines[soft + 5] == "| 0.5 | - | 48.0 / 0.800 |"


def run_sweeps(bench, base):
    configs = strength_configs(base, "first", strengths=(0.25, 1.0))
    run = evaluate(bench, configs, model=minilm_path(), bootstrap_samples=20, show_progress=False)
    found = findings(run)
    calibrated = run.results[1:]
    best = max(calibrated, key=lambda r: r.summary["hm"][0])
    assert found["best_hm"]["name"] == best.config.name and found["plain"]["hm"] == run.results[0].summary["hm"][0]
    grid = grid_configs("first", layers=("last",), baskets=(16,), variants=("uniform", "cls_soft"))
    table = grid_markdown(evaluate(bench, grid, model=minilm_path(), bootstrap_samples=20, show_progress=False))
    assert "**uniform**" in table and "**cls_soft**" in table and "| layers | B=16 |" in table
    assert table.count("| last | ") == 2 and " - " not in table
    return run


def test_sweep_helpers_on_generated_data(fake_squad):
    run = run_sweeps(fake_squad, SMALL_BASKETS)
    plain, gentle, full = run.results
    # full strength moves some score away from plain
    moved = [sum(np.abs(r.ndcg[g] - plain.ndcg[g]).sum() for g in data.GROUPS) for r in (gentle, full)]
    assert moved[1] > 0


@real_data
def test_sweep_helpers_on_real_data(real_squad):
    run_sweeps(real_squad, CalibrationConfig())
