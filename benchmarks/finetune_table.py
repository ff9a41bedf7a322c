"""Gather the fine-tuning experiment's reports into one markdown table (docs/RESULTS.md §10).

Reads ``docs/results/finetune/<arm>/`` as ``scripts/finetune_experiment.sh eval`` writes it: the SQuAD-LongPosQ
and SciFact reports of ``posfair eval`` and the ``evidence_moving.json`` of ``posfair diagnose``. Arms that
have not run yet are listed as missing, never filled in.

    python benchmarks/finetune_table.py [--results docs/results/finetune]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

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


def _fmt(values, digits: int = 1) -> str:
    point, low, high = values
    return f"{point:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def _delta(values) -> str:
    if not values:
        return "-"
    point, low, high = values
    return f"{point:+.2f} [{low:+.2f}, {high:+.2f}]"


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
        scifact_delta = _delta(other["delta_ndcg_at_10_vs_plain_paired"]) if other else "-"
        name = result["name"]
        key = "plain" if name == "plain" else ("calibrated" if "0.85" in name else None)
        moved = f"{moving[key]['delta_x1000']:.1f}" if key and key in moving else "-"
        rows.append(
            f"| {name} | {groups} | {_fmt(ndcg['hm'])} | {_fmt(ndcg['psi'], 3)} | "
            f"{_delta(result['delta_ndcg_at_10_vs_plain_paired'])} | {scifact_cell} | {scifact_delta} | {moved} |"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", default="docs/results/finetune")
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


if __name__ == "__main__":
    main()
