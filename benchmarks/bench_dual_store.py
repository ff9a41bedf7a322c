"""What dual collections cost in Qdrant: disk size and query latency, single-vector against dual fused search.

Points are random unit vectors (384 dimensions, like all-MiniLM-L6-v2) with a short text payload, written
to embedded Qdrant folders; queries are random unit vectors. Latency is the median wall time of one
``query_points`` call (single vector) or one fused request (two prefetches plus the fusion, one round
trip) over the same queries. Server latency is measured only when ``--url`` points at a Qdrant server.

    python benchmarks/bench_dual_store.py                 # 10k and 100k points, embedded Qdrant
    python benchmarks/bench_dual_store.py --url http://localhost:6333
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
from qdrant_client import QdrantClient
from qdrant_client.http import models as rest
from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
DIMENSION = 384


def unit_vectors(count: int, seed: int) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((count, DIMENSION)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def fill(client: QdrantClient, name: str, count: int, dual: bool, batch: int = 1000) -> None:
    params = rest.VectorParams(size=DIMENSION, distance=rest.Distance.COSINE)
    config = {"plain": params, "calibrated": params} if dual else params
    client.create_collection(name, vectors_config=config)
    for start in tqdm(range(0, count, batch), desc=f"{name}: {count} points", leave=False):
        size = min(batch, count - start)
        plain = unit_vectors(size, seed=start)
        calibrated = unit_vectors(size, seed=10**9 + start)
        points = []
        for i in range(size):
            vector = {"plain": plain[i].tolist(), "calibrated": calibrated[i].tolist()} if dual else plain[i].tolist()
            payload = {"text": f"document {start + i}", "doc_id": f"doc-{start + i}"}
            points.append(
                rest.PointStruct(id=str(uuid.uuid5(uuid.NAMESPACE_OID, str(start + i))), vector=vector, payload=payload)
            )
        client.upsert(name, points=points, wait=True)


def fused_request(name: str, query: list, k: int, fusion: str) -> dict:
    limit = k if fusion == "max" else max(k, 100)
    prefetch = [rest.Prefetch(query=query, using=using, limit=limit) for using in ("plain", "calibrated")]
    if fusion == "rrf":
        fused = rest.RrfQuery(rrf=rest.Rrf(k=60))
    else:
        scores = ["$score[0]", "$score[1]"]
        formula = rest.MaxExpression(max=scores) if fusion == "max" else rest.SumExpression(sum=scores)
        fused = rest.FormulaQuery(formula=formula, defaults={s: -1.0 for s in scores})
    return dict(collection_name=name, prefetch=prefetch, query=fused, limit=k, with_payload=True)


def latency(call, repeats: int) -> float:
    call()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def folder_mib(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def measure(client: QdrantClient, where: str, count: int, repeats: int, k: int, folder=None) -> list:
    rows = []
    queries = [q.tolist() for q in unit_vectors(repeats + 1, seed=7)]
    for dual in (False, True):
        name = f"bench-{'dual' if dual else 'single'}-{count}"
        if client.collection_exists(name):
            client.delete_collection(name)
        fill(client, name, count, dual)
        size = folder_mib(folder / "collection" / name) if folder is not None else None
        methods = [("single", None)] if not dual else [(f"dual {f}", f) for f in ("max", "sum", "rrf")]
        for label, fusion in methods:
            position = iter(queries)

            def call(name=name, position=position, fusion=fusion):
                if fusion is None:
                    client.query_points(name, query=next(position), limit=k, with_payload=True)
                else:
                    client.query_points(**fused_request(name, next(position), k, fusion))

            rows.append(
                {
                    "where": where,
                    "points": count,
                    "method": label,
                    "disk_mib": size,
                    "latency_ms": latency(call, repeats),
                }
            )
        client.delete_collection(name)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", default="10000,100000")
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument("--url", default=None, help="also measure a Qdrant server over HTTP")
    parser.add_argument("--output", default=str(ROOT / "benchmarks" / "results" / "dual_store.json"))
    args = parser.parse_args()
    rows = []
    for count in (int(c) for c in args.points.split(",")):
        folder = Path(tempfile.mkdtemp(prefix="posfair-bench-"))
        try:
            client = QdrantClient(path=str(folder))
            rows += measure(client, "embedded (local path)", count, args.repeats, args.k, folder)
            client.close()
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        if args.url:
            rows += measure(QdrantClient(url=args.url), f"server {args.url}", count, args.repeats, args.k)
    print("| Qdrant | points | search | disk MiB | median latency ms |")
    print("|---|---:|---|---:|---:|")
    for r in rows:
        disk = "-" if r["disk_mib"] is None else f"{r['disk_mib']:.0f}"
        print(f"| {r['where']} | {r['points']} | {r['method']} | {disk} | {r['latency_ms']:.1f} |")
    machine = f"{platform.processor() or platform.machine()}, Python {platform.python_version()}"
    Path(args.output).write_text(json.dumps({"machine": machine, "k": args.k, "rows": rows}, indent=2) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
