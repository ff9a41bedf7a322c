"""The windows-mode tables of docs/RESULTS.md §4, read from the ``posfair eval`` JSON reports they come from.

    python benchmarks/windows_tables.py docs/results/windows/squad-grid-mean docs/results/windows/squad-grid-first
    python benchmarks/windows_tables.py docs/results/windows/scifact-mean --general

One row per configuration: the position groups, HM and PSI with their intervals (or, with ``--general``, aggregate
nDCG@10), the paired change against plain, and the vectors stored per document.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from posfair_llamaindex.eval.report import display_name, interval_cell, signed_interval


def reports(folder: Path) -> list[dict]:
    found = sorted(p for p in folder.glob("*.json") if not p.name.startswith("per-query-"))
    if not found:
        raise SystemExit(f"no eval report in {folder}")
    return [json.loads(p.read_text()) for p in found]


def table(report: dict, general: bool) -> str:
    groups = report["groups"]
    positional = len(groups) > 1 and not general
    head = ["config", *groups, "HM", "PSI"] if positional else ["config", "nDCG@10"]
    head += ["Δ nDCG@10 vs plain (paired)", "vectors / document"]
    lines = [
        f"**{report['benchmark']}**, {report['documents']} documents, {report['queries']} queries, "
        f"`{display_name(report['model'])}` at {report['max_length']} tokens",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for result in report["results"]:
        scores = result["ndcg_at_10"]
        row = [result["name"]]
        if positional:
            row += [f"{scores[f'group:{g}'][0]:.1f}" for g in groups]
            row += [interval_cell(scores["hm"], 2), f"{scores['psi'][0]:.3f}"]
        else:
            row.append(interval_cell(scores["aggregate"], 2))
        delta = signed_interval(result["delta_ndcg_at_10_vs_plain_paired"])
        row += [delta, f"{result.get('vectors_per_document', 1.0):.2f}"]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="+", type=Path, help="output folders of posfair eval")
    parser.add_argument("--general", action="store_true", help="aggregate nDCG@10 only (SciFact)")
    args = parser.parse_args()
    for folder in args.folders:
        for report in reports(folder):
            print(table(report, args.general or len(report["groups"]) == 1))
            print()


if __name__ == "__main__":
    main()
