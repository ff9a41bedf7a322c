"""The shuffled-sentence test: how much retrieval quality rests on the order of a document's sentences.

Every document is encoded a second time with its sentences in a random order; the queries stay as they
are. A model that reads a document as a bag of sentences loses nothing, and the loss in nDCG@10 and
Recall@10 against the ordered documents, paired over the same queries, says how much each configuration
relies on sentence order.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from posfair_llamaindex.eval.benchmark_data import Benchmark, RetrievalTask
from posfair_llamaindex.eval.metrics import paired_difference
from posfair_llamaindex.eval.runner import ConfigResult, EvalRun
from posfair_llamaindex.eval.sentences import shuffled, split_sentences

SUFFIX = ", sentences shuffled"


def document_rng(seed: int, doc_id: str) -> random.Random:
    """One generator per document, so a document shuffles the same way in every task, rotation and run."""
    return random.Random(f"{seed}:{doc_id}")


def shuffle_sentences(benchmark: Benchmark, seed: int = 0) -> Benchmark:
    """The benchmark with every document's sentences permuted; queries, groups and tasks unchanged.

    A single-sentence document keeps its text as it is (``shuffled`` would only normalise its whitespace);
    such documents, and multi-sentence ones whose permutation happened to keep the order, are counted in
    the settings, because they dilute the loss.
    """
    single = kept = 0
    tasks = []
    for task in benchmark.tasks:
        documents = {}
        for doc_id, text in task.documents.items():
            sentences = [s.text for s in split_sentences(text)]
            if len(sentences) < 2:
                single += 1
                documents[doc_id] = text
                continue
            documents[doc_id] = shuffled(text, document_rng(seed, doc_id))
            kept += documents[doc_id] == " ".join(sentences)
        tasks.append(RetrievalTask(documents, list(task.queries)))
    settings = {
        **benchmark.settings,
        "shuffle_seed": seed,
        "single_sentence_documents": single,
        "order_kept_documents": kept,
    }
    return Benchmark(benchmark.name + SUFFIX, tasks, benchmark.groups, settings)


def _per_query(values: dict[str, np.ndarray], groups: Sequence[str]) -> np.ndarray:
    return np.concatenate([np.asarray(values[g], dtype=float) for g in groups]) if groups else np.zeros(0)


def _relative(loss: float, ordered: float) -> Optional[float]:
    return None if ordered == 0 else 100 * loss / ordered


def loss_rows(ordered: EvalRun, shuffled_run: EvalRun, *, samples: int = 1000, seed: int = 0) -> list[dict[str, Any]]:
    """One row per configuration: ordered and shuffled nDCG@10 and Recall@10 (x100) and the paired loss.

    Loss is ordered minus shuffled (positive: the shuffle hurt), with a paired bootstrap 95% interval over
    the queries, which are the same in both runs; relative loss is the loss as a percentage of ordered.
    """
    groups = list(ordered.benchmark.groups)
    if list(shuffled_run.benchmark.groups) != groups:
        raise ValueError(f"the runs have different groups: {groups} vs {list(shuffled_run.benchmark.groups)}")
    names = [r.config.name for r in ordered.results]
    if [r.config.name for r in shuffled_run.results] != names:
        raise ValueError(
            f"the runs have different configurations: {names} vs {[r.config.name for r in shuffled_run.results]}"
        )
    rows = []
    for before, after in zip(ordered.results, shuffled_run.results, strict=True):
        row: dict[str, Any] = {"name": before.config.name, "mode": before.config.mode, "pooling": before.pooling}
        for metric, label in (("ndcg", "ndcg_at_10"), ("recall", "recall_at_10")):
            row.update(_metric_loss(before, after, metric, label, groups, samples, seed))
        row["queries"] = int(len(_per_query(before.ndcg, groups)))
        rows.append(row)
    return rows


def _metric_loss(
    before: ConfigResult, after: ConfigResult, metric: str, label: str, groups: list, samples: int, seed: int
) -> dict[str, Any]:
    ours, theirs = _per_query(getattr(before, metric), groups), _per_query(getattr(after, metric), groups)
    if ours.shape != theirs.shape or not len(ours):
        raise ValueError(f"{before.config.name}: the runs must score the same, non-empty queries ({label})")
    loss = [100 * v for v in paired_difference(ours, theirs, samples=max(samples, 1), seed=seed)]
    point = 100 * float(ours.mean())
    return {
        f"{label}_ordered": point,
        f"{label}_shuffled": 100 * float(theirs.mean()),
        f"{label}_loss": loss,
        f"{label}_relative_loss": _relative(loss[0], point),
    }


def smallest_loss(rows: Sequence[dict]) -> list[str]:
    """The configurations with the smallest nDCG@10 loss (all of them when tied)."""
    if not rows:
        return []
    least = min(r["ndcg_at_10_loss"][0] for r in rows)
    return [r["name"] for r in rows if np.isclose(r["ndcg_at_10_loss"][0], least, rtol=0, atol=1e-9)]


def _interval(values: Sequence[float]) -> str:
    point, low, high = values
    return f"{point:+.2f} [{low:+.2f}, {high:+.2f}]"


def _percent(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:+.1f}%"


def loss_markdown(rows: Sequence[dict], heading: str = "") -> str:
    """The loss table; the configuration(s) losing least nDCG@10 to the shuffle are in bold."""
    head = [
        "config",
        "nDCG@10 ordered",
        "nDCG@10 shuffled",
        "nDCG@10 loss [95%]",
        "nDCG@10 relative loss",
        "Recall@10 ordered",
        "Recall@10 shuffled",
        "Recall@10 loss [95%]",
    ]
    lines = [heading, ""] if heading else []
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    best = set(smallest_loss(rows))
    for r in rows:
        mark = (lambda text: f"**{text}**") if r["name"] in best else (lambda text: text)
        cells = [
            mark(r["name"]),
            f"{r['ndcg_at_10_ordered']:.1f}",
            f"{r['ndcg_at_10_shuffled']:.1f}",
            mark(_interval(r["ndcg_at_10_loss"])),
            _percent(r["ndcg_at_10_relative_loss"]),
            f"{r['recall_at_10_ordered']:.1f}",
            f"{r['recall_at_10_shuffled']:.1f}",
            _interval(r["recall_at_10_loss"]),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Loss = ordered − shuffled (x100, paired over the same queries); **bold**: smallest nDCG@10 loss."]
    return "\n".join(lines)


def loss_report(ordered: EvalRun, shuffled_run: EvalRun, rows: Sequence[dict]) -> dict[str, Any]:
    """The JSON written next to the table: what was shuffled, how, and the rows."""
    settings = shuffled_run.benchmark.settings
    return {
        "benchmark": ordered.benchmark.name,
        "model": ordered.model,
        "documents": ordered.benchmark.document_count,
        "queries": ordered.benchmark.query_count,
        "shuffle_seed": settings.get("shuffle_seed"),
        "single_sentence_documents": settings.get("single_sentence_documents"),
        "order_kept_documents": settings.get("order_kept_documents"),
        "smallest_ndcg_loss": smallest_loss(rows),
        "rows": list(rows),
    }
