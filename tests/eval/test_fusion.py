"""Score fusion rules on hand-made scores, and dual configurations through the runner and the trade-off helpers."""

from __future__ import annotations

import numpy as np
import pytest

from posfair_llamaindex.calibration.config import CalibrationConfig
from posfair_llamaindex.eval import benchmark_data as data
from posfair_llamaindex.eval import plots
from posfair_llamaindex.eval.fusion import fuse, matched_to, per_document_choice, ranks
from posfair_llamaindex.eval.runner import EvalConfig, evaluate
from posfair_llamaindex.eval.sweeps import dual_configs, tradeoff_findings, tradeoff_markdown, tradeoff_rows
from posfair_llamaindex.options import RRF_K
from tests.utils import minilm_path

PLAIN = np.array([[0.9, 0.5, 0.1], [0.2, 0.3, 0.4]])
CALIBRATED = np.array([[0.6, 0.8, 0.0], [0.5, 0.1, 0.2]])


def test_max_and_sum():
    np.testing.assert_allclose(fuse([PLAIN, CALIBRATED], "max"), [[0.9, 0.8, 0.1], [0.5, 0.3, 0.4]])
    np.testing.assert_allclose(fuse([PLAIN, CALIBRATED], "sum"), [[1.5, 1.3, 0.1], [0.7, 0.4, 0.6]])
    np.testing.assert_array_equal(fuse([PLAIN], "rrf"), PLAIN)  # one vector: its own scores


def test_rrf_counts_ranks_the_way_qdrant_does():
    np.testing.assert_array_equal(ranks(PLAIN), [[0, 1, 2], [2, 1, 0]])
    np.testing.assert_array_equal(ranks(CALIBRATED), [[1, 0, 2], [0, 2, 1]])
    expected = [
        [1 / RRF_K + 1 / (RRF_K + 1), 1 / (RRF_K + 1) + 1 / RRF_K, 2 / (RRF_K + 2)],
        [1 / (RRF_K + 2) + 1 / RRF_K, 1 / (RRF_K + 1) + 1 / (RRF_K + 2), 1 / RRF_K + 1 / (RRF_K + 1)],
    ]
    np.testing.assert_allclose(fuse([PLAIN, CALIBRATED], "rrf"), expected)


def test_zmax_maps_the_calibrated_scores_onto_the_plain_distribution():
    shifted = PLAIN * 2.0 + 3.0  # same order, another scale: matched back onto PLAIN exactly
    np.testing.assert_allclose(matched_to(shifted, PLAIN), PLAIN)
    np.testing.assert_allclose(fuse([PLAIN, shifted], "zmax"), PLAIN)
    flat = np.ones_like(PLAIN)  # no spread: mapped to the plain mean, never a division by zero
    np.testing.assert_allclose(matched_to(flat, PLAIN), np.repeat(PLAIN.mean(axis=1, keepdims=True), 3, axis=1))


def test_bad_fusion_input_is_refused():
    with pytest.raises(ValueError, match="fusion must be one of"):
        fuse([PLAIN], "median")
    with pytest.raises(ValueError, match="differ in shape"):
        fuse([PLAIN, PLAIN[:1]], "max")
    with pytest.raises(ValueError, match="nothing to fuse"):
        fuse([], "max")
    with pytest.raises(ValueError, match="a fusion rule goes with modes 'dual' and 'windows' and only with them"):
        EvalConfig("x", fusion="max")
    with pytest.raises(ValueError, match="a fusion rule goes with modes 'dual' and 'windows' and only with them"):
        EvalConfig("x", mode="dual")


@pytest.fixture(scope="module")
def runs(fake_data, tokenizer):
    squad = data.squad_longposq(fake_data, tokenizer, token_budget=128, max_documents=8, questions_per_group=6)
    scifact = data.scifact(fake_data)
    configs = dual_configs("first", (0.5, 1.0), ("max", "sum", "rrf"), base=CalibrationConfig(basket_size=16))
    configs.append(
        EvalConfig(
            "max(plain, 0.5, 1)",
            mode="dual",
            fusion="max",
            pooling="first",
            calibration=CalibrationConfig(basket_size=16, strength=0.5),
            more_calibrations=(CalibrationConfig(basket_size=16, strength=1.0),),
        )
    )
    kwargs = dict(model=minilm_path(), bootstrap_samples=20, show_progress=False)
    return evaluate(squad, configs, **kwargs), evaluate(scifact, configs, **kwargs)


def test_dual_configs_run_and_share_their_members_vectors(runs):
    squad, _ = runs
    by_name = {r.config.name: r for r in squad.results}
    assert {"plain", "calibrated 0.5", "dual max 0.5", "dual rrf 1", "max(plain, 0.5, 1)"} <= set(by_name)
    for result in squad.results:
        assert result.fingerprint and sum(len(v) for v in result.ndcg.values()) == squad.benchmark.query_count
    # dual configs share their members' vectors: none of them encoded anything itself
    assert all(by_name[f"dual {f} {s}"].seconds is None for f in ("max", "sum", "rrf") for s in ("0.5", "1"))


def test_dual_scores_equal_fusing_the_members_by_hand(runs, fake_data, tokenizer):
    from posfair_llamaindex import PosFairEmbedding

    squad_run, _ = runs
    bench = squad_run.benchmark
    task = bench.tasks[0]
    doc_ids = list(task.documents)
    plain = PosFairEmbedding(minilm_path(), mode="plain", pooling="first")
    calibrated = PosFairEmbedding(
        minilm_path(),
        calibration=CalibrationConfig(basket_size=16, strength=1.0),
        pooling="first",
        encoder=plain.encoder,
    )
    texts = [task.documents[d] for d in doc_ids]
    queries = plain.encoder.encode([q.text for q in task.queries], None)
    p = queries @ np.array(plain.get_text_embedding_batch(texts)).T
    c = queries @ np.array(calibrated.get_text_embedding_batch(texts)).T
    fused = np.maximum(p, c)
    expected = {g: [] for g in bench.groups}
    for query, row in zip(task.queries, fused, strict=True):
        top = [doc_ids[i] for i in np.argsort(-row, kind="stable")[:10]]
        gains = sum(1 / np.log2(r + 2) for r, d in enumerate(top) if d in query.relevant)
        expected[query.group].append(gains)
    dual = next(r for r in squad_run.results if r.config.name == "dual max 1")
    for group in bench.groups:
        np.testing.assert_allclose(dual.ndcg[group], expected[group], atol=1e-6)


def test_tradeoff_rows_findings_table_and_chart(runs, tmp_path):
    squad, scifact = runs
    rows = tradeoff_rows(squad, scifact)
    assert [r["name"] for r in rows] == [r.config.name for r in squad.results]
    plain = rows[0]
    assert plain["mode"] == "plain" and plain["general_delta"] == (0.0, 0.0, 0.0)
    dual = next(r for r in rows if r["name"] == "dual max 1")
    general = next(r for r in scifact.results if r.config.name == "dual max 1")
    assert dual["general_ndcg"] == general.summary["aggregate"] and dual["strength"] == 1.0 and dual["fusion"] == "max"
    found = tradeoff_findings(rows)
    expected_both = [r["name"] for r in rows[1:] if r["hm"][0] > plain["hm"][0] and r["general_delta"][0] > 0]
    assert found["beat plain on HM and on general nDCG@10"] == expected_both
    table = tradeoff_markdown(rows, "SQuAD", "SciFact")
    assert table.count("\n") == len(rows) + 1 and "| dual max 1 |" in table
    figure = plots.trade_off(rows, "test")
    labels = [line.get_label() for line in figure.axes[0].get_lines()]
    assert {"plain", "calibrated", "dual max", "dual sum", "dual rrf"} <= set(labels)
    assert plots.save_png(figure, tmp_path / "tradeoff.png").stat().st_size > 5000


def test_per_document_choice_keeps_the_strongest_vector_that_stays_close():
    plain = np.eye(4)[:3]  # three documents
    weak = np.array([[1.0, 0, 0, 0], [0, 1.0, 0, 0], [0, 0, 1.0, 0]])  # identical to plain
    # the strong vector drifts: cosines to plain 0.9, 0.5, 0.1
    strong = np.array([[0.9, 0.436, 0, 0], [0, 0.5, 0.866, 0], [0.995, 0, 0.1, 0]])
    chosen = per_document_choice(plain, [weak, strong], quantile=0.5)  # threshold: the median cosine, 0.5
    np.testing.assert_allclose(chosen, [strong[0], strong[1], weak[2]])
    everything = per_document_choice(plain, [weak, strong], quantile=0.0)
    np.testing.assert_allclose(everything, strong)
    with pytest.raises(ValueError, match="perdoc chooses vectors"):
        fuse([PLAIN, CALIBRATED], "perdoc")


def test_an_offset_maximum_leans_toward_the_calibrated_scores():
    np.testing.assert_allclose(fuse([PLAIN, CALIBRATED], "max@0.0"), fuse([PLAIN, CALIBRATED], "max"))
    np.testing.assert_allclose(fuse([PLAIN, CALIBRATED], "max@0.5"), CALIBRATED + 0.5)
    np.testing.assert_allclose(fuse([PLAIN, CALIBRATED], "max@-5"), PLAIN)
    with pytest.raises(ValueError, match="max@OFFSET"):
        fuse([PLAIN, CALIBRATED], "max@much")
