"""What one call of the CPU flash kernel costs in the all-rows path (DESIGN.md §2.1), by key count and layout.

The all-rows path makes one kernel call per basket of 128 keys. This prints, per call, the milliseconds
for a range of key counts, so that the fixed part of a call (its per-query-block work, paid whatever the
number of keys) can be read off the line through them, and the same 128-key call with the query in
transformers' layout (``[N, Q, H, D]`` in memory) against a contiguous ``[N, H, Q, D]`` one.

    python benchmarks/bench_basket_kernel.py                     # 16 x 512 rows, MiniLM-sized heads
    python benchmarks/bench_basket_kernel.py --sequences 1 --rows 4096
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_encoding import interleaved_rounds  # noqa: E402

KERNEL = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sequences", type=int, default=16)
    parser.add_argument("--rows", type=int, default=512, help="query rows per sequence")
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--dim", type=int, default=32, help="head size")
    parser.add_argument("--keys", default="64,128,256,512", help="key counts per call")
    parser.add_argument("--basket", type=int, default=128, help="the key count of the layout comparison")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    generator = torch.Generator().manual_seed(0)
    n, h, q_len, d = args.sequences, args.heads, args.rows, args.dim
    scale = d**-0.5

    def tensor(*shape):
        return torch.randn(*shape, generator=generator)

    query = tensor(n, h, q_len, d)
    query_transposed = tensor(n, q_len, h, d).transpose(1, 2)  # how the model hands it over
    functions = {}
    for count in (int(x) for x in args.keys.split(",")):
        k, v = tensor(n, h, count, d), tensor(n, h, count, d)
        functions[f"{count} keys"] = lambda k=k, v=v: KERNEL(query, k, v, scale=scale)
    k, v = tensor(n, h, args.basket, d), tensor(n, h, args.basket, d)
    functions[f"{args.basket} keys, query in [N, Q, H, D] memory"] = lambda: KERNEL(query_transposed, k, v, scale=scale)
    times = interleaved_rounds(functions, args.rounds)
    medians = {name: statistics.median(t) * 1000 for name, t in times.items()}

    print(f"{n} x {q_len} query rows, {h} heads of {d}, {args.threads} threads, {args.rounds} rounds (median)")
    print("| call | ms |")
    print("|---|---:|")
    for name, ms in medians.items():
        print(f"| {name} | {ms:.2f} |")
    counts = [int(name.split()[0]) for name in medians if name.endswith(" keys")]
    spans = [medians[f"{c} keys"] for c in counts]
    slope, intercept = statistics.linear_regression(counts, spans)
    print(f"least-squares line: {intercept:.2f} ms per call + {slope * 1000:.1f} us per key")
    whole = max(counts)
    calls = whole // args.basket
    if calls > 1 and f"{args.basket} keys" in medians:
        split = calls * medians[f"{args.basket} keys"] / medians[f"{whole} keys"]
        print(f"{calls} calls of {args.basket} keys against one of {whole}: {split:.2f}x")


if __name__ == "__main__":
    main()
