"""Recall@k of the dual store's fused ``max`` query on an HNSW-indexed collection, on Qdrant's own engine.

Local mode always searches exactly, so it cannot show what a server does once a collection is large enough
to be HNSW-indexed. This builds an edge shard (qdrant-edge-py: Qdrant's Rust engine in-process, default HNSW
settings m=16, ef_construct=100) with the two named vectors of a dual collection, sends it the exact request
``PosFairQdrantVectorStore._fused_request`` builds, and compares the fused top k with brute force over all
points, for several prefetch lengths, at the default search parameters, at ``hnsw_ef`` and exact; without a
filter, and with a payload filter that keeps a third of the points, both without a payload index (the store
creates none for user metadata) and with a keyword index made before the data (LlamaIndex's
``payload_indexes`` option); filtered queries also with Qdrant's ACORN search (``{"acorn": {"enable": True}}``).

Vectors (``--kind``): ``random`` are uniform on the sphere, the hardest case for HNSW; ``clustered`` are
MiniLM-like: points around 200 topic centres, and each calibrated vector is its plain vector moved a little
(cosine about 0.95), as calibration does. Queries are new points of the same kind.

    python benchmarks/bench_hnsw_recall.py [--points 20000] [--kind clustered] [--queries 200]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the request translator lives with the tests that check it


def unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def make_vectors(kind: str, count: int, dim: int, rng: np.random.Generator, centres=None):
    if kind == "random":
        plain = unit(rng.standard_normal((count, dim)))
    else:
        picks = centres[rng.integers(0, len(centres), count)]
        plain = unit(picks + 1.5 * unit(rng.standard_normal((count, dim))))  # cosine to its centre about 0.55
    calibrated = unit(plain + 0.33 * unit(rng.standard_normal((count, dim))))
    return plain.astype(np.float32), calibrated.astype(np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=20_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--kind", choices=("random", "clustered"), default="clustered")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--k", type=int, nargs="+", default=[10, 50, 100])
    parser.add_argument("--hnsw-ef", type=int, default=512)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="also write the table here")
    args = parser.parse_args()

    import qdrant_edge as edge
    from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters, VectorStoreQuery
    from qdrant_client import QdrantClient

    from posfair_llamaindex.qdrant.store import PosFairQdrantVectorStore
    from tests.qdrant import edge as translate

    rng = np.random.default_rng(args.seed)
    centres = unit(rng.standard_normal((200, args.dim))) if args.kind == "clustered" else None
    plain, calibrated = make_vectors(args.kind, args.points, args.dim, rng, centres)
    colour = rng.integers(0, 3, args.points)  # the filter keeps about a third of the points
    store = PosFairQdrantVectorStore(
        "bench", client=QdrantClient(":memory:"), fingerprint="bench", dimension=args.dim, fusion="max"
    )
    qp, _ = make_vectors(args.kind, args.queries, args.dim, rng, centres)
    exact_all = np.maximum(plain @ qp.T, calibrated @ qp.T)  # (points, queries): the fused max by brute force
    blue = MetadataFilters(filters=[MetadataFilter(key="colour", value="blue")])
    rows: list[dict] = []

    def measure(shard, where: str, filters, allowed) -> None:
        scores = np.where(allowed[:, None], exact_all, -np.inf)
        for k in args.k:
            truth = [set(np.argsort(-scores[:, j])[:k]) for j in range(args.queries)]
            default = store._fused_request(VectorStoreQuery(query_embedding=qp[0].tolist(), similarity_top_k=k), {})
            # (label, prefetch length or None for the store's default, search params)
            settings = [("k", k, None), ("store default", None, None), ("4k", 4 * k, None)]
            settings += [("k", k, {"hnsw_ef": args.hnsw_ef}), ("k", k, {"exact": True})]
            if filters is not None:  # Qdrant's ACORN: filtered HNSW search that also walks neighbours' neighbours
                settings += [("store default", None, {"acorn": {"enable": True}})]
            for label, length, params in settings:
                found, seconds = 0, 0.0
                for j in range(args.queries):
                    query = VectorStoreQuery(query_embedding=qp[j].tolist(), similarity_top_k=k, filters=filters)
                    request = store._fused_request(query, {"search_params": params} if params else {})
                    for prefetch in request["prefetch"]:
                        prefetch.limit = length or prefetch.limit
                    t = time.perf_counter()
                    hits = shard.query(translate.translate(request))
                    seconds += time.perf_counter() - t
                    found += len(truth[j] & {int(h.id) for h in hits})
                row = dict(
                    filter=where,
                    k=k,
                    prefetch=f"{label} ({length or default['prefetch'][0].limit})",
                    params=params or "default",
                    recall=round(found / (k * args.queries), 4),
                    ms_per_query=round(1000 * seconds / args.queries, 2),
                )
                rows.append(row)
                print(json.dumps(row), flush=True)

    def build(path: str, indexed: bool):
        """The shard, HNSW-indexed; ``indexed``: a keyword index on the filtered field exists before the data."""
        started = time.perf_counter()
        shard = translate.create_shard(path, args.dim, hnsw=True)
        if indexed:  # as LlamaIndex's payload_indexes option does when the store opens an empty collection
            shard.update(edge.UpdateOperation.create_field_index("colour", edge.PayloadSchemaType.Keyword))
        names = ("red", "green", "blue")
        for start in range(0, args.points, 1000):
            batch = [
                edge.Point(
                    i,
                    {"plain": plain[i].tolist(), "calibrated": calibrated[i].tolist()},
                    {"colour": names[colour[i]]},
                )
                for i in range(start, min(start + 1000, args.points))
            ]
            shard.update(edge.UpdateOperation.upsert_points(batch))
        shard.optimize()
        info = shard.info()
        seconds = time.perf_counter() - started
        print(
            f"{args.points} points x 2 vectors ({args.kind}, dim {args.dim}, payload index: {indexed}): "
            f"{info.segments_count} segment(s), {info.indexed_vectors_count} indexed vectors, built in {seconds:.0f} s",
            flush=True,
        )
        return shard, seconds

    builds = []
    with tempfile.TemporaryDirectory() as folder:
        shard, seconds = build(str(Path(folder) / "plain"), indexed=False)
        builds.append(round(seconds))
        measure(shard, "none", None, np.ones(args.points, bool))
        measure(shard, "colour=blue, no payload index", blue, colour == 2)
        shard.close()
        shard, seconds = build(str(Path(folder) / "indexed"), indexed=True)
        builds.append(round(seconds))
        measure(shard, "colour=blue, keyword index before the data", blue, colour == 2)
        shard.close()
    if args.json:
        Path(args.json).write_text(json.dumps(dict(args=vars(args), build_s=builds, rows=rows), indent=2))


if __name__ == "__main__":
    main()
