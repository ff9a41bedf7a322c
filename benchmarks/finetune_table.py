"""Gather the fine-tuning experiment's reports into one markdown table (docs/RESULTS.md §10).

Reads ``docs/results/finetune/<arm>/`` as ``scripts/finetune_experiment.sh eval`` writes it: the SQuAD-LongPosQ
and SciFact reports of ``posfair eval`` and the ``evidence_moving.json`` of ``posfair diagnose``. Arms that
have not run yet are listed as missing, never filled in. A second table compares arms pairwise on the same
held-out queries (``per-query-*.json``): the differences in HM, PSI and nDCG@10 with paired bootstrap
intervals, for the pairs that answer the experiment's questions.

    python benchmarks/finetune_table.py [--results docs/results/finetune]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from posfair_llamaindex.eval.metrics import paired_summary_difference
from posfair_llamaindex.eval.report import interval_cell, signed_interval

ARMS = (
    ("base-mean", "base, mean pooling"),
    ("base-first", "base, first-token pooling"),
    ("cls-begin", "CLS, begin data"),
    ("cls-uniform", "CLS, uniform data"),
    ("cls-end", "CLS, end data"),
    ("cls-begin-dump4", "CLS, begin data, [DUMP] x4"),
    ("cls-uniform-dump4", "CLS, uniform data, [DUMP] x4"),
)


def _report(folder: Path, prefix: str):
    found = sorted(folder.glob(f"{prefix}-*.json"))
    return json.loads(found[0].read_text()) if found else None


def rows_for(folder: Path) -> list[str]:
    squad, scifact = _report(folder, "squad-longposq"), _report(folder, "scifact")
    moving_path = folder / "evidence_moving.json"
    moving = json.loads(moving_path.read_text()) if moving_path.is_file() else {}
    if squad is None:
        return []
    general = {r["name"]: r for r in (scifact or {}).get("results", [])}
    rows = []
    for result in squad["results"]:
        ndcg = result["ndcg_at_10"]
        groups = " | ".join(f"{ndcg[f'group:{g}'][0]:.1f}" for g in ("begin", "middle", "end"))
        other = general.get(result["name"])
        scifact_cell = f"{other['ndcg_at_10']['aggregate'][0]:.2f}" if other else "missing"
        scifact_delta = signed_interval(other["delta_ndcg_at_10_vs_plain_paired"]) if other else "-"
        name = result["name"]
        key = "plain" if name == "plain" else ("calibrated" if "0.85" in name else None)
        moved = f"{moving[key]['delta_x1000']:.1f}" if key and key in moving else "-"
        delta = signed_interval(result["delta_ndcg_at_10_vs_plain_paired"])
        rows.append(
            f"| {name} | {groups} | {interval_cell(ndcg['hm'])} | {interval_cell(ndcg['psi'], 3)} | {delta} | "
            f"{scifact_cell} | {scifact_delta} | {moved} |"
        )
    return rows


# (question, arm A, configuration A, arm B, configuration B): A minus B on the same queries
COMPARISONS = (
    ("what CLS fine-tuning on begin data does", "cls-begin", "plain", "base-first", "plain"),
    ("what CLS fine-tuning on uniform data does", "cls-uniform", "plain", "base-first", "plain"),
    ("uniform training vs calibrating the base model (0.85)", "cls-uniform", "plain", "base-first", "custom"),
    ("begin data vs uniform data", "cls-begin", "plain", "cls-uniform", "plain"),
    ("end data vs uniform data", "cls-end", "plain", "cls-uniform", "plain"),
    ("end data vs begin data", "cls-end", "plain", "cls-begin", "plain"),
    ("calibration 0.85 on the uniform model", "cls-uniform", "custom", "cls-uniform", "plain"),
    ("calibration default on the uniform model", "cls-uniform", "default", "cls-uniform", "plain"),
    ("calibrated begin model (0.85) vs uniform training", "cls-begin", "custom", "cls-uniform", "plain"),
    ("calibrated begin model (default) vs uniform training", "cls-begin", "default", "cls-uniform", "plain"),
    ("[DUMP] x4 on begin data", "cls-begin-dump4", "plain", "cls-begin", "plain"),
    ("[DUMP] x4 on uniform data", "cls-uniform-dump4", "plain", "cls-uniform", "plain"),
    ("[DUMP] x4 on uniform data, both calibrated 0.85", "cls-uniform-dump4", "custom", "cls-uniform", "custom"),
)


def _per_query(folder: Path, prefix: str, config: str):
    found = sorted(folder.glob(f"per-query-{prefix}-*.json"))
    if not found:
        return None
    report = json.loads(found[0].read_text())
    names = [name for name in report["ndcg_at_10"] if name == config or name.startswith(f"{config} ")]
    if len(names) != 1:
        return None
    return report["queries"], {g: np.asarray(v) for g, v in report["ndcg_at_10"][names[0]].items()}


def comparison_rows(root: Path) -> list[str]:
    rows = []
    for question, arm_a, config_a, arm_b, config_b in COMPARISONS:
        cells = []
        for prefix, keys in (("squad-longposq", ("hm", "psi", "aggregate")), ("scifact", ("aggregate",))):
            a, b = _per_query(root / arm_a, prefix, config_a), _per_query(root / arm_b, prefix, config_b)
            if a is None or b is None:
                cells += ["missing"] * len(keys)
                continue
            if a[0] != b[0]:
                raise ValueError(f"{arm_a} and {arm_b} were evaluated on different {prefix} queries")
            groups = [g for g in a[1] if len(a[1][g])]
            diff = paired_summary_difference(a[1], b[1], groups)
            for key in keys:
                scale, digits = (1, 3) if key == "psi" else (100, 2)
                point, low, high = (v * scale for v in diff[key])
                cells.append(f"{point:+.{digits}f} [{low:+.{digits}f}, {high:+.{digits}f}]")
        rows.append(f"| {question} | {arm_a} {config_a} − {arm_b} {config_b} | " + " | ".join(cells) + " |")
    return rows


def arms_chart(root: Path, path: Path) -> None:
    """Every arm and configuration as one point: SciFact nDCG@10 (x) against held-out SQuAD PSI (y), labelled HM."""
    from matplotlib.figure import Figure

    from posfair_llamaindex.eval.plots import save_png

    figure = Figure(figsize=(8, 5.5))
    axis = figure.subplots()
    markers = {"plain": "o", "default": "s", "custom": "^"}
    for index, (arm, label) in enumerate(ARMS):
        squad, scifact = _report(root / arm, "squad-longposq"), _report(root / arm, "scifact")
        if squad is None or scifact is None:
            continue
        general = {r["name"]: r for r in scifact["results"]}
        for result in squad["results"]:
            kind = result["name"].split(" ")[0]
            x = general[result["name"]]["ndcg_at_10"]["aggregate"][0]
            y = result["ndcg_at_10"]["psi"][0]
            axis.scatter(
                x, y, marker=markers.get(kind, "x"), color=f"C{index}", label=label if kind == "plain" else None
            )
            axis.annotate(
                f"{result['ndcg_at_10']['hm'][0]:.1f}", (x, y), textcoords="offset points", xytext=(4, 3), fontsize=7
            )
    axis.set_xlabel("SciFact nDCG@10 (subset; right is better)")
    axis.set_ylabel("PSI on held-out SQuAD-LongPosQ (lower is fairer)")
    axis.set_title("Fine-tuning arms: o plain, s default calibration, ^ strength 0.85 (labels: HM)", fontsize=9)
    axis.legend(fontsize=7)
    save_png(figure, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", default="docs/results/finetune")
    parser.add_argument("--plot", default=None, help="also draw every arm as a PNG (SciFact against PSI)")
    args = parser.parse_args()
    root = Path(args.results)
    print(
        "| arm | documents | begin | middle | end | HM [95%] | PSI [95%] | Δ SQuAD (paired) | SciFact | "
        "Δ SciFact (paired) | evidence-moving Δ x10³ |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for arm, label in ARMS:
        rows = rows_for(root / arm)
        if not rows:
            print(f"| {label} | not run | | | | | | | | | |")
        for row in rows:
            print(f"| {label} {row}")
    print()
    print("| question | A − B | Δ HM | Δ PSI | Δ SQuAD nDCG@10 | Δ SciFact nDCG@10 |")
    print("|---|---|---|---|---|---|")
    for row in comparison_rows(root):
        print(row)
    if args.plot:
        arms_chart(root, Path(args.plot))


if __name__ == "__main__":
    main()
