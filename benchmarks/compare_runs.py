"""Paired differences between two configurations of two ``posfair eval`` runs on the same benchmark.

``posfair eval`` pairs every configuration with plain inside one run. Settings that are per run, not per
configuration (``--max-length``, ``--model``), need two runs; this pairs them query by query from their
``per-query-*.json`` files (which must list the same query ids in the same order) and prints the
differences of the group means, HM, PSI and aggregate nDCG@10 with paired bootstrap 95% intervals.

    python benchmarks/compare_runs.py RUN_A/per-query-squad-longposq-mean.json plain \\
        RUN_B/per-query-squad-longposq-mean.json plain
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from posfair_llamaindex.eval.metrics import paired_summary_difference


def load(path: str, config: str) -> tuple[dict, dict]:
    data = json.loads(Path(path).read_text())
    if config not in data["ndcg_at_10"]:
        raise SystemExit(f"{path} has no configuration {config!r}; it has {sorted(data['ndcg_at_10'])}")
    return data, {group: np.asarray(values) for group, values in data["ndcg_at_10"][config].items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("ours", help="per-query JSON of the run whose configuration is compared")
    parser.add_argument("our_config")
    parser.add_argument("theirs", help="per-query JSON of the run it is compared with")
    parser.add_argument("their_config")
    parser.add_argument("--samples", type=int, default=1000)
    args = parser.parse_args()
    ours_data, ours = load(args.ours, args.our_config)
    theirs_data, theirs = load(args.theirs, args.their_config)
    if ours_data["benchmark"] != theirs_data["benchmark"] or ours_data["queries"] != theirs_data["queries"]:
        raise SystemExit(f"not the same queries: {ours_data['benchmark']!r} and {theirs_data['benchmark']!r}")
    groups = list(ours_data["queries"])
    difference = paired_summary_difference(ours, theirs, groups, samples=args.samples)
    print(f"{args.our_config} ({args.ours}) minus {args.their_config} ({args.theirs}), paired over the same queries:")
    for key, (point, low, high) in difference.items():
        scale = 1 if key == "psi" else 100
        print(f"  {key:>14}: {point * scale:+.3f} [{low * scale:+.3f}, {high * scale:+.3f}]")


if __name__ == "__main__":
    main()
