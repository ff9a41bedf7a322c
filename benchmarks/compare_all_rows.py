"""Old against new sources of the all-rows path, in one process, rounds interleaved.

A machine whose speed drifts between runs (a shared VM) cannot compare two runs of bench_encoding.py;
this puts both versions of ``basket_attention.py`` side by side instead:

  * one calibrated layer's attention on random ``[N, 12, L, 32]`` tensors, against SDPA;
  * the whole randomly initialised MiniLM-sized BERT of bench_encoding.py on one document, with the
    all-rows function of each version swapped into the attention path.

    git show REV:src/posfair_llamaindex/basket_attention.py > /tmp/old_basket.py
    python benchmarks/compare_all_rows.py --old /tmp/old_basket.py
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_encoding import build_long_model, interleaved_rounds, median_ratios  # noqa: E402


def load_old(path: str):
    spec = importlib.util.spec_from_file_location("old_basket_attention", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def interleaved(functions: dict, rounds: int) -> dict:
    """Median seconds and median per-round ratio to the first entry, for each function."""
    times = interleaved_rounds(functions, rounds)
    ratios = median_ratios(times)
    return {name: (statistics.median(t), ratios[name]) for name, t in times.items()}


def attention_case(old, length: int, sequences: int, rounds: int) -> list:
    from posfair_llamaindex.calibration import basket_attention
    from posfair_llamaindex.calibration.config import CalibrationConfig
    from posfair_llamaindex.calibration.row_math import RowLayout

    heads, dim = 12, 32
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(sequences, length, heads, dim, generator=generator).transpose(1, 2) for _ in range(3))
    valid = torch.ones(sequences, length, dtype=torch.long)
    valid[1:, length - length // 8 :] = 0  # right padding on all but the first sequence
    layout = RowLayout.from_attention_mask(
        valid, basket_size=128, isolate_first=True, isolate_last=True, pooling_token=None
    )
    mask = None if sequences == 1 else valid.bool()[:, None, None, :].expand(sequences, 1, length, length)
    config = CalibrationConfig()

    def run(module):
        return lambda: module.calibrated_all_rows(q, k, v, mask, dim**-0.5, False, layout, config)

    def sdpa():
        torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask).transpose(1, 2).contiguous()

    gap = (run(old)() - run(basket_attention)()).abs().max().item()
    found = interleaved({"sdpa": sdpa, "old": run(old), "new": run(basket_attention)}, rounds)
    label = f"attention, {sequences} x {length} tokens"
    return [(label, name, seconds, ratio, gap) for name, (seconds, ratio) in found.items()]


def model_case(old, length: int, rounds: int) -> list:
    from posfair_llamaindex.calibration.config import CalibrationConfig
    from posfair_llamaindex.encoding.encoder import PosFairEncoder
    from posfair_llamaindex.model import attention
    from posfair_llamaindex.model.attention import PLAN_KWARG

    new_function = attention.calibrated_all_rows
    with tempfile.TemporaryDirectory() as folder:
        build_long_model(Path(folder), length)
        encoder = PosFairEncoder(folder, pooling="mean")
    ids = torch.randint(1000, 29000, (1, length), generator=torch.Generator().manual_seed(0))
    ids[:, 0], ids[:, -1] = 101, 102
    mask = torch.ones_like(ids)
    plan = encoder.plan_for(mask, CalibrationConfig())

    def run(function, calibrated=True):
        def forward():
            attention.calibrated_all_rows = function
            try:
                with torch.inference_mode():
                    extra = {PLAN_KWARG: plan} if calibrated else {}
                    return encoder.model(input_ids=ids, attention_mask=mask, **extra).last_hidden_state
            finally:
                attention.calibrated_all_rows = new_function

        return forward

    gap = (run(old.calibrated_all_rows)() - run(new_function)()).abs().max().item()
    found = interleaved(
        {"plain": run(new_function, False), "old": run(old.calibrated_all_rows), "new": run(new_function)}, rounds
    )
    label = f"random BERT, {length} tokens"
    return [(label, name, seconds, ratio, gap) for name, (seconds, ratio) in found.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", required=True, help="an older basket_attention.py")
    parser.add_argument("--lengths", default="1024,2048,4096", help="single-document lengths")
    parser.add_argument("--padded", default="16x512", help="SEQUENCESxLENGTH of a right-padded batch, or 'none'")
    parser.add_argument("--model-length", type=int, default=4096, help="whole-model document length, 0: none")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    old = load_old(args.old)
    rows = []
    for length in (int(x) for x in args.lengths.split(",") if x):
        rows += attention_case(old, length, 1, args.rounds)
    if args.padded != "none":
        sequences, length = (int(x) for x in args.padded.split("x"))
        rows += attention_case(old, length, sequences, args.rounds)
    if args.model_length:
        rows += model_case(old, args.model_length, max(3, args.rounds - 2))
    print("| case | sources | seconds | x baseline (median per-round ratio) | max abs difference old/new |")
    print("|---|---|---:|---:|---:|")
    for label, name, seconds, ratio, gap in rows:
        print(f"| {label} | {name} | {seconds:.4f} | {ratio:.3f} | {gap:.1e} |")


if __name__ == "__main__":
    main()
