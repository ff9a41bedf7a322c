"""The shuffled-sentence test: the shuffled benchmark, the paired loss rows and table, and ``posfair eval``.

Loss rows are pinned on hand-made runs whose means can be worked out by hand; the command runs on the
generated data with MiniLM, as the other eval commands do.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from posfair_llamaindex.cli import main
from posfair_llamaindex.eval import benchmark_data as data
from posfair_llamaindex.eval.benchmark_data import Benchmark, Query, RetrievalTask
from posfair_llamaindex.eval.runner import ConfigResult, EvalConfig, EvalRun
from posfair_llamaindex.eval.sentences import shuffled, split_sentences
from posfair_llamaindex.eval.shuffle import loss_markdown, loss_report, loss_rows, shuffle_sentences, smallest_loss

LONG = " ".join(f"Sentence number {n} talks about the harbour of Fenwick." for n in range(1, 7))
OTHER = "The windmill of Oakley turned all winter. Its sails were painted blue. Farmers brought barley to it."
SINGLE = "Only one sentence lives in this  document"


def sentences(text: str) -> list[str]:
    return [s.text for s in split_sentences(text)]


@pytest.fixture()
def bench() -> Benchmark:
    queries = [Query("q1", "harbour of Fenwick?", frozenset(["long"])), Query("q2", "windmill?", frozenset(["other"]))]
    tasks = [
        RetrievalTask({"long": LONG, "other": OTHER, "single": SINGLE}, queries),
        RetrievalTask({"long": LONG, "other": OTHER}, queries[:1]),  # the same documents in a second corpus
    ]
    return Benchmark("Made up", tasks, ("all",), {"seed": 7})


def test_shuffling_keeps_the_sentences_and_changes_their_order(bench):
    result = shuffle_sentences(bench, seed=0)
    assert result.name == "Made up, sentences shuffled" and result.groups == bench.groups
    assert result.settings == {"seed": 7, "shuffle_seed": 0, "single_sentence_documents": 1, "order_kept_documents": 0}
    assert bench.tasks[0].documents["long"] == LONG  # the input is left alone
    for before, after in zip(bench.tasks, result.tasks, strict=True):
        assert after.queries == before.queries and after.queries is not before.queries
        assert list(after.documents) == list(before.documents)
        for doc_id, text in before.documents.items():
            assert sorted(sentences(after.documents[doc_id])) == sorted(sentences(text)), doc_id
    long = result.tasks[0].documents["long"]
    assert sentences(long) != sentences(LONG)
    assert long == shuffled(LONG, random.Random("0:long"))  # one generator per seed and document id
    assert result.tasks[0].documents["single"] == SINGLE  # not even its whitespace is touched


def test_shuffling_is_deterministic_per_seed_and_document(bench):
    first, again, other = shuffle_sentences(bench, 0), shuffle_sentences(bench, 0), shuffle_sentences(bench, 1)
    assert [t.documents for t in first.tasks] == [t.documents for t in again.tasks]
    assert first.tasks[0].documents["long"] != other.tasks[0].documents["long"]
    assert other.settings["shuffle_seed"] == 1
    for result in (first, other):  # the same document in two corpora shuffles the same way
        assert result.tasks[0].documents["long"] == result.tasks[1].documents["long"]
        assert result.tasks[0].documents["other"] == result.tasks[1].documents["other"]
    # the document id, not its place in the corpus, picks the order
    moved = Benchmark("Moved", [RetrievalTask({"x": OTHER, "long": LONG}, [])], ("all",))
    assert shuffle_sentences(moved, 0).tasks[0].documents["long"] == first.tasks[0].documents["long"]


def test_shuffling_a_rotated_benchmark_keeps_its_queries(fake_data, tokenizer):
    bench = data.nq_oracle(fake_data, tokenizer, token_budget=256, max_sets=3)
    result = shuffle_sentences(bench, seed=2)
    assert result.query_count == bench.query_count and result.document_count == bench.document_count
    assert [t.queries for t in result.tasks] == [t.queries for t in bench.tasks]
    changed = sum(
        a != b
        for before, after in zip(bench.tasks, result.tasks, strict=True)
        for a, b in zip(before.documents.values(), after.documents.values(), strict=True)
    )
    assert changed == bench.document_count - result.settings["single_sentence_documents"] > 0


def result(name: str, ndcg: dict, recall: dict, mode: str = "calibrated") -> ConfigResult:
    config = EvalConfig.plain() if mode == "plain" else EvalConfig(name)
    as_arrays = lambda values: {g: np.asarray(v, dtype=float) for g, v in values.items()}  # noqa: E731
    return ConfigResult(config, "first", name, None, as_arrays(ndcg), as_arrays(recall))


def runs() -> tuple[EvalRun, EvalRun]:
    bench = Benchmark("Hand made", [], ("begin", "end"))
    ordered = EvalRun(
        bench,
        "m",
        [
            result("plain", {"begin": [1.0, 0.5], "end": [0.0]}, {"begin": [1.0, 1.0], "end": [0.0]}, "plain"),
            result("calm", {"begin": [1.0, 1.0], "end": [1.0]}, {"begin": [1.0, 1.0], "end": [1.0]}),
        ],
        {},
    )
    shuffled_bench = Benchmark("Hand made, sentences shuffled", [], ("begin", "end"), {"shuffle_seed": 4})
    after = EvalRun(
        shuffled_bench,
        "m",
        [
            result("plain", {"begin": [0.5, 0.5], "end": [0.0]}, {"begin": [1.0, 0.0], "end": [0.0]}, "plain"),
            result("calm", {"begin": [1.0, 0.25], "end": [1.0]}, {"begin": [1.0, 1.0], "end": [1.0]}),
        ],
        {},
    )
    return ordered, after


def test_loss_rows_pair_the_runs_by_configuration():
    ordered, after = runs()
    plain, calm = loss_rows(ordered, after, samples=200)
    assert plain["name"] == "plain" and plain["mode"] == "plain" and plain["queries"] == 3
    assert plain["ndcg_at_10_ordered"] == pytest.approx(50.0)  # (1 + 0.5 + 0) / 3
    assert plain["ndcg_at_10_shuffled"] == pytest.approx(100 / 3)  # (0.5 + 0.5 + 0) / 3
    assert plain["ndcg_at_10_loss"][0] == pytest.approx(50 / 3)
    assert plain["ndcg_at_10_relative_loss"] == pytest.approx(100 / 3)  # a third of 50 lost
    assert plain["recall_at_10_ordered"] == pytest.approx(200 / 3) and plain["recall_at_10_shuffled"] == (
        pytest.approx(100 / 3)
    )
    assert plain["recall_at_10_loss"][0] == pytest.approx(100 / 3)
    assert calm["ndcg_at_10_loss"][0] == pytest.approx(25.0) and calm["ndcg_at_10_relative_loss"] == pytest.approx(25)
    assert calm["recall_at_10_loss"] == [0.0, 0.0, 0.0]  # nothing changed: a zero-width interval
    for row in (plain, calm):
        point, low, high = row["ndcg_at_10_loss"]
        assert low <= point <= high and low >= 0  # every paired difference is >= 0 here
    assert json.loads(json.dumps(loss_report(ordered, after, [plain, calm])))["shuffle_seed"] == 4


def test_loss_rows_refuse_runs_that_do_not_pair():
    ordered, after = runs()
    after.results.reverse()
    with pytest.raises(ValueError, match="different configurations"):
        loss_rows(ordered, after)
    after.results.reverse()
    after.results[0].ndcg["end"] = np.asarray([0.0, 1.0])
    with pytest.raises(ValueError, match="same, non-empty queries"):
        loss_rows(ordered, after)


def test_markdown_marks_the_smallest_loss():
    ordered, after = runs()
    rows = loss_rows(ordered, after, samples=50)
    assert smallest_loss(rows) == ["plain"]
    table = loss_markdown(rows, "**Hand made**")
    lines = table.splitlines()
    assert lines[0] == "**Hand made**"
    assert "| config | nDCG@10 ordered | nDCG@10 shuffled | nDCG@10 loss [95%] |" in table
    plain = next(line for line in lines if "plain" in line and line.startswith("|"))
    calm = next(line for line in lines if "calm" in line)
    assert plain.startswith("| **plain** | 50.0 | 33.3 | **+16.67 [") and "| +33.3% |" in plain
    assert calm.startswith("| calm | 100.0 | 75.0 | +25.00 [") and "**" not in calm
    rows[1]["ndcg_at_10_loss"] = [-1.0, -2.0, 0.0]  # a gain is the smallest loss
    assert smallest_loss(rows) == ["calm"] and "| **calm** |" in loss_markdown(rows)


def test_eval_shuffle_sentences_command(capsys, tmp_path, fake_data):
    # one small benchmark keeps the test quick; several share one chart (test_chart_has_a_group_per_benchmark)
    argv = ["eval", "--data", fake_data, "--benchmark", "scifact", "--configs", "plain,dual", "--pooling", "first"]
    argv += ["--bootstrap", "20", "--out", tmp_path, "--shuffle-sentences", "--shuffle-seed", "3"]
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "| config | nDCG@10 ordered | nDCG@10 shuffled |" in out and "shuffled sentences (seed 3)" in out
    for suffix in ("", "-shuffled"):  # both runs keep their usual reports
        assert (tmp_path / f"scifact-first{suffix}.json").is_file(), suffix
    table = (tmp_path / "scifact-first-shuffle-loss.md").read_text()
    assert table.count("\n| ") == 1 + 2 and "| **" in table
    report = json.loads((tmp_path / "scifact-first-shuffle-loss.json").read_text())
    assert report["shuffle_seed"] == 3 and report["smallest_ndcg_loss"]
    assert report["single_sentence_documents"] == 1  # the fake corpus has one single-sentence abstract
    names = [r["name"] for r in report["rows"]]
    assert names[0] == "plain" and names[1].startswith("dual max ") and len(names) == 2
    for row in report["rows"]:
        assert row["ndcg_at_10_loss"][0] == pytest.approx(row["ndcg_at_10_ordered"] - row["ndcg_at_10_shuffled"])
    assert (tmp_path / "scifact-first-shuffle-loss.png").stat().st_size > 5000
    shuffled_report = json.loads((tmp_path / "scifact-first-shuffled.json").read_text())
    assert shuffled_report["benchmark"] == "SciFact (BEIR), sentences shuffled"
    assert shuffled_report["queries"] == report["queries"] == 6
    assert shuffled_report["settings"]["shuffle_seed"] == 3
    assert not (tmp_path / "shuffle-loss-first.png").exists()  # the chart across benchmarks needs two


def test_chart_has_a_group_per_benchmark(tmp_path):
    from posfair_llamaindex.eval import plots

    ordered, after = runs()
    rows = loss_rows(ordered, after, samples=20)
    figure = plots.shuffle_losses({"SciFact": rows, "NQ": rows[:1]})
    axis = figure.axes[0]
    assert [t.get_text() for t in axis.get_xticklabels()] == ["SciFact", "NQ"]
    heights = sorted(round(p.get_height(), 2) for p in axis.patches)
    assert heights == [16.67, 16.67, 25.0]  # plain on both benchmarks, calm only on the first
    assert plots.save_png(figure, tmp_path / "chart.png").stat().st_size > 5000


def test_shuffle_seed_needs_shuffle_sentences(capsys, tmp_path, fake_data):
    assert main(["eval", "--data", str(fake_data), "--shuffle-seed", "1", "--out", str(tmp_path)]) == 1
    assert "--shuffle-seed is used by --shuffle-sentences only" in capsys.readouterr().err
    assert not tmp_path.exists() or not any(tmp_path.iterdir())
