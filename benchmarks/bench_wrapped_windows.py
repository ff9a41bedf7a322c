"""Windows mode over a wrapped LlamaIndex embedding: the same fairness as native windows, and what HTTP costs.

Three backends make the window vectors of one corpus, all all-MiniLM-L6-v2 with windows of 128 tokens (document
vector "none", the default):

* ``native``: ``PosFairEmbedding(model_folder, mode="windows")``, the model loaded by this package;
* ``huggingface``: ``PosFairEmbedding(embed_model=HuggingFaceEmbedding(folder), mode="windows")``;
* ``server``: ``PosFairEmbedding(embed_model=OpenAILikeEmbedding(...), tokenizer=folder, mode="windows")`` over
  infinity-emb serving the same folder on 127.0.0.1 (started here from scripts/embedding_server.sh's environment,
  stopped at the end).

Each backend embeds SQuAD-LongPosQ's held-out articles (``--squad-documents`` of them, seed 0) and a fixed SciFact
sample (every relevant abstract plus ``--scifact-sample`` others, seed 0); queries go through each backend's own
query path. Scores: nDCG@10 by third of the document (begin / middle / end), HM and PSI over the thirds, the
aggregate, each with a 95 % bootstrap interval (eval/metrics.py), and the smallest window cosine against native.
Timing: ``--rounds`` interleaved ingest passes per backend over the SQuAD documents (``get_text_embedding_batch``,
LlamaIndex's batch call; medians), windows per second, and the server's time per window over the in-process
HuggingFaceEmbedding's (HTTP, JSON and infinity's queue; both run the same sentence-transformers model on the same
two cores). The per-benchmark "windows/s" beside the scores is a single pass, kept for reference.

    bash scripts/embedding_server.sh                   # the server's environment, once
    python benchmarks/bench_wrapped_windows.py         # the subset below: ~20 min on 2 shared cores
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

DEFAULT_DATA = ROOT / ".." / "shared" / "data"


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the shared data folder")
    parser.add_argument("--squad-documents", type=int, default=100, help="held-out SQuAD-LongPosQ documents")
    parser.add_argument("--scifact-sample", type=int, default=200, help="SciFact abstracts beside the relevant ones")
    parser.add_argument("--window-size", type=int, default=128)
    parser.add_argument("--samples", type=int, default=1000, help="bootstrap draws")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds over the SQuAD documents")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "wrapped_windows.json")
    return parser.parse_args()


def backends(server_base: str | None, window_size: int) -> dict:
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    from posfair_llamaindex import PosFairEmbedding
    from posfair_llamaindex.encoding.windows import WindowConfig
    from tests.utils import minilm_path

    folder = minilm_path()
    windows = WindowConfig(size=window_size)
    made = {
        "native": PosFairEmbedding(folder, mode="windows", windows=windows),
        # LlamaIndex's default embed_batch_size (10) is what a user who does not set it gets
        "huggingface": PosFairEmbedding(
            embed_model=HuggingFaceEmbedding(model_name=folder, device="cpu"), mode="windows", windows=windows
        ),
    }
    if server_base is not None:
        from llama_index.embeddings.openai_like import OpenAILikeEmbedding

        from integration_tests.embedding_server import SERVED_NAME

        served = OpenAILikeEmbedding(model_name=SERVED_NAME, api_base=server_base, timeout=600)
        made["server"] = PosFairEmbedding(embed_model=served, mode="windows", windows=windows, tokenizer=folder)
    return made


def score(embedding, benchmark, samples: int) -> tuple[dict, list]:
    from posfair_llamaindex.eval.metrics import bootstrap, ndcg_at_k
    from posfair_llamaindex.eval.window_vectors import max_sim

    task = benchmark.tasks[0]
    doc_ids = list(task.documents)
    texts = [task.documents[d] for d in doc_ids]
    start = time.perf_counter()
    vectors = embedding.get_text_embedding_batch(texts)
    seconds = time.perf_counter() - start
    windows = [np.asarray(v, dtype=np.float32).reshape(-1, embedding.dimension) for v in vectors]
    queries = np.asarray([embedding.get_query_embedding(q.text) for q in task.queries], dtype=np.float32)
    scores = max_sim(queries, windows)
    top = np.argsort(-scores, axis=1)[:, :10]
    per_group: dict[str, list] = {g: [] for g in benchmark.groups}
    for query, row in zip(task.queries, top, strict=True):
        per_group[query.group].append(ndcg_at_k([doc_ids[i] for i in row], query.relevant, 10))
    groups = [g for g in benchmark.groups if per_group[g]]
    summary = bootstrap({g: np.asarray(v) for g, v in per_group.items()}, groups, samples=samples)
    count = sum(len(w) for w in windows)
    return {"summary": summary, "seconds": seconds, "windows": count, "documents": len(texts)}, windows


def throughput(made: dict, benchmark, rounds: int) -> dict:
    """Ingest time per backend over the same documents, the backends taking turns round after round after a warm-up
    each (bench_encoding.py's loop), so that a slow phase of a shared machine falls on all of them alike."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_encoding import interleaved_rounds

    task = benchmark.tasks[0]
    texts = list(task.documents.values())
    windows = sum(len(v) for v in made["native"].get_text_embedding_batch(texts)) // made["native"].dimension
    times = interleaved_rounds(
        {name: (lambda e=e: e.get_text_embedding_batch(texts)) for name, e in made.items()}, rounds
    )
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(f"throughput over {len(texts)} documents, {windows} windows, {rounds} interleaved rounds (median):")
    for name, seconds in medians.items():
        print(
            f"  {name:12s} {seconds:.2f} s  {windows / seconds:.0f} windows/s  {1000 * seconds / windows:.2f} ms/window"
        )
    result = {"documents": len(texts), "windows": windows, "seconds": times, "median_seconds": medians}
    if "server" in medians:
        result["server_minus_huggingface_ms_per_window"] = 1000 * (medians["server"] - medians["huggingface"]) / windows
        print(f"  server - huggingface: {result['server_minus_huggingface_ms_per_window']:.3f} ms per window")
    return result


def main() -> int:
    args = arguments()
    from transformers import AutoTokenizer

    from integration_tests import embedding_server
    from posfair_llamaindex.eval import benchmark_data as data
    from tests.utils import minilm_path

    tokenizer = AutoTokenizer.from_pretrained(minilm_path())
    benchmarks = [
        data.squad_longposq(
            args.data,
            tokenizer,
            max_documents=args.squad_documents,
            articles=data.heldout_article_indices(args.data),
            seed=0,
        ),
        data.scifact(args.data, sample=args.scifact_sample, seed=0),
    ]
    results: dict = {}
    try:
        context = embedding_server.start()
        base = context.__enter__()
    except BaseException as error:  # pytest.skip outside pytest: the server is not installed
        print(f"server backend skipped: {error}")
        context, base = None, None
    try:
        made = backends(base, args.window_size)
        for benchmark in benchmarks:
            print(benchmark.describe())
            native_windows = None
            for name, embedding in made.items():
                result, windows = score(embedding, benchmark, args.samples)
                if native_windows is None:
                    native_windows = windows
                result["min_cosine_vs_native"] = float(
                    min(np.min(np.sum(a * b, axis=1)) for a, b in zip(native_windows, windows, strict=True))
                )
                results.setdefault(benchmark.name, {})[name] = result
                s = result["summary"]
                line = f"  {name:12s} nDCG@10 {100 * s['aggregate'][0]:.1f} [{100 * s['aggregate'][1]:.1f}, "
                line += f"{100 * s['aggregate'][2]:.1f}]"
                if "hm" in s:
                    line += f"  HM {100 * s['hm'][0]:.1f} [{100 * s['hm'][1]:.1f}, {100 * s['hm'][2]:.1f}]"
                    line += f"  PSI {s['psi'][0]:.3f} [{s['psi'][1]:.3f}, {s['psi'][2]:.3f}]"
                line += f"  {result['windows'] / result['seconds']:.0f} windows/s ({result['windows']} windows, "
                line += f"{result['seconds']:.1f} s)  min cosine vs native {result['min_cosine_vs_native']:.6f}"
                print(line, flush=True)
            here = results[benchmark.name]
            if "server" in here:
                per_window = {k: v["seconds"] / v["windows"] for k, v in here.items()}
                overhead = (per_window["server"] - per_window["huggingface"]) * 1000
                print(f"  HTTP overhead per window (server - huggingface): {overhead:.3f} ms")
                here["http_overhead_ms_per_window"] = overhead
        results["throughput"] = throughput(made, benchmarks[0], args.rounds)
    finally:
        if context is not None:
            context.__exit__(None, None, None)
    payload = {
        "date": date.today().isoformat(),
        "machine": f"{platform.processor() or platform.machine()}, 2 cores, shared",
        "command": " ".join(sys.argv),
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(payload, indent=1, default=float))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
