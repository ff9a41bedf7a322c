"""How a collection's vectors are stored: float32, float16, int8 and binary (rescored), on Qdrant Edge, measured.

The corpus is bench_edge_scale.py's (imported, and its cache shared): real all-MiniLM-L6-v2 window vectors of
SQuAD-LongPosQ documents and SciFact abstracts, cut by the product's ``WindowEmbedder`` (128-token windows), with
synthetic perturbed copies of real nodes only past the ~40k real windows; real SQuAD questions and SciFact claims
as queries, encoded plain. Exact truth: numpy float32 MaxSim over every window of every node.

Two kinds of collection:

* ``windows``: one point per node, its windows as the MaxSim multivector ``windows``, created from the product's
  layout (``vector_layout._layout`` for windows mode with ``vector_storage=VectorStorage(type=arm)``) and searched
  by the product's request (``VectorLayout.dense_search``: ``hnsw_ef`` 512 and, for int8 and binary,
  ``QuantizationSearchParams(rescore=True, oversampling=...)``);
* ``plain``: one point per vector, the same real window vectors each stored as one unnamed vector, as a plain
  collection holds a node's one vector (exact cosine top 10 as the truth), searched at Qdrant's default beam.

Arms: ``float32`` (today), ``float16`` (``datatype``), ``int8`` (scalar quantization kept in RAM, originals on
disk, rescored) at oversampling 1, 2 and 4, ``binary`` (binary quantization in RAM, originals on disk, rescored) at
oversampling 2, 4 and 8. Each arm is its own Edge store, built in a child process (upsert 64 nodes per call, then one
``optimize``, timed), then opened by a fresh serving process that runs every query of every setting, interleaved
query by query after a warm-up. Per arm: upsert and optimize seconds; disk (allocated bytes after close) with the
part in vector files, quantized files and HNSW graphs; the serving process's RSS above its baseline after the
queries (anonymous / mapped files); "RAM for vectors", the bytes the layout keeps in RAM by Qdrant's rules (float32
or float16 vectors when not on disk, else the quantized copy), per node and against a plain float32 collection of
the same nodes (384 x 4 bytes a node); p50 / p95 and recall@10 per setting. The 1-minute load average is recorded
at the start and end of every step.

    python benchmarks/bench_window_storage.py --kind windows --sizes 100000 1000000
    python benchmarks/bench_window_storage.py --kind plain --sizes 100000 1000000 --name plain_storage
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_edge_scale as edge_scale  # noqa: E402  (the corpus, its cache and the small helpers)

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "window_storage"
DEFAULT_WORK = Path("/tmp") / "posfair_window_storage_work"
DIMENSION, K = edge_scale.DIMENSION, edge_scale.K
ARMS = ("float32", "float16", "int8", "binary")
OVERSAMPLING = {"int8": (1.0, 2.0, 4.0), "binary": (2.0, 4.0, 8.0)}
PLAIN_FLOAT32_BYTES = DIMENSION * 4  # a plain float32 collection's vector bytes per node
COLLECTION = "bench"
PLAIN_BATCH = 256  # points per upsert call of the plain kind


def layout_for_arm(kind: str, arm: str, oversampling: Any = None):
    """The product's layout of a windows-mode (or plain) collection stored as ``arm``."""
    from posfair_llamaindex.qdrant.vector_layout import _layout
    from posfair_llamaindex.qdrant.vector_storage import VectorStorage

    storage = VectorStorage(type=arm, oversampling=oversampling if arm in OVERSAMPLING else None)
    mode, document = ("windows", "none") if kind == "windows" else ("plain", None)
    return _layout(DIMENSION, mode, document, normalize=True, fusion_rule=None, vector_storage=storage)


def settings_for(kind: str, arm: str) -> list:
    """(label, layout) of every search measured on an arm's store."""
    if arm in OVERSAMPLING:
        return [(f"oversampling {x:g}", layout_for_arm(kind, arm, x)) for x in OVERSAMPLING[arm]]
    return [("default", layout_for_arm(kind, arm))]


def search(client, layout, query: list) -> list:
    request = layout.dense_search(query, K)
    request["search_params"] = request.pop("params", None)
    if request.get("using") == "":
        request.pop("using")
    hits = client.query_points(COLLECTION, **request, limit=K, with_payload=False).points
    return [int(h.id) for h in hits]


def point_batches(kind: str, windows: np.ndarray, counts: np.ndarray, batch: int):
    from qdrant_client.http import models as rest

    if kind == "windows":
        yield from edge_scale.batches(windows, counts, "multivector", batch)
        return
    for start in range(0, len(windows), PLAIN_BATCH):
        rows = windows[start : start + PLAIN_BATCH]
        yield [rest.PointStruct(id=start + i, vector=row.tolist()) for i, row in enumerate(rows)]


def breakdown(folder: Path) -> dict:
    """Allocated bytes under ``folder`` by what the files hold: quantized copies, HNSW graphs, vectors, the rest."""
    out = {"quantized": 0, "hnsw": 0, "vectors": 0, "other": 0}
    for path in folder.rglob("*"):
        if not path.is_file() or path.is_symlink():
            continue
        size = path.stat().st_blocks * 512
        text = str(path.relative_to(folder)).lower()
        if "quantiz" in text:
            out["quantized"] += size
        elif "hnsw" in text or "graph" in text or "links" in text:
            out["hnsw"] += size
        elif "vector" in text:
            out["vectors"] += size
        else:
            out["other"] += size
    return out


def warm(kind: str, arm: str) -> None:
    """Every call once on a throwaway store, so the RSS baseline already holds the code it runs."""
    import tempfile

    from posfair_llamaindex.qdrant.edge_client import EdgeQdrantClient

    windows = edge_scale.unit(np.random.default_rng(0).standard_normal((12, DIMENSION)))
    with tempfile.TemporaryDirectory() as folder:
        client = EdgeQdrantClient(path=Path(folder) / "warm")
        client.create_collection(COLLECTION, **layout_for_arm(kind, arm).create_arguments())
        for points in point_batches(kind, windows, np.array([3, 3, 3, 3]), 2):
            client.upsert(COLLECTION, points=points, wait=True)
        client.optimize(COLLECTION)
        for _, layout in settings_for(kind, arm):
            search(client, layout, windows[0].tolist())
        client.close()
    gc.collect()


def child_build(spec: dict) -> dict:
    from posfair_llamaindex.qdrant.edge_client import EdgeQdrantClient

    kind, arm, folder = spec["kind"], spec["arm"], Path(spec["store"])
    windows = np.load(Path(spec["corpus"]) / "windows.npy")
    counts = np.load(Path(spec["corpus"]) / "counts.npy")
    out: dict = {"load": [edge_scale.load_now()]}
    warm(kind, arm)
    client = EdgeQdrantClient(path=folder)
    layout = layout_for_arm(kind, arm)
    client.create_collection(COLLECTION, **layout.create_arguments())
    out["vectors_config"] = json.loads(json.dumps(layout.vectors_config(), default=lambda o: o.model_dump()))
    started = time.perf_counter()
    for points in point_batches(kind, windows, counts, spec["batch"]):
        client.upsert(COLLECTION, points=points, wait=True)
    out["upsert_s"] = round(time.perf_counter() - started, 2)
    out["load"].append(edge_scale.load_now())
    started = time.perf_counter()
    client.optimize(COLLECTION)
    out["optimize_s"] = round(time.perf_counter() - started, 2)
    out["load"].append(edge_scale.load_now())
    info = client.get_collection(COLLECTION)
    out["segments"], out["points"] = info.segments_count, info.points_count
    client.close()
    out["disk"] = edge_scale.du(folder)
    out["disk_parts"] = breakdown(folder)
    return out


def child_serve(spec: dict) -> dict:
    from posfair_llamaindex.qdrant.edge_client import EdgeQdrantClient

    kind, arm = spec["kind"], spec["arm"]
    queries = [q.tolist() for q in np.load(spec["queries"])["queries"]]
    settings = settings_for(kind, arm)
    out: dict = {"load": [edge_scale.load_now()]}
    warm(kind, arm)
    base, base_parts = edge_scale.rss(), edge_scale.rss_parts()
    client = EdgeQdrantClient(path=spec["store"])
    client.get_collection(COLLECTION)
    for _, layout in settings:
        for q in queries[: spec["warmup"]]:
            search(client, layout, q)
    times: list = [[] for _ in settings]
    hits: list = [[] for _ in settings]
    for j, q in enumerate(queries):
        for i in np.roll(np.arange(len(settings)), -j):
            started = time.perf_counter()
            found = search(client, settings[i][1], q)
            times[i].append(time.perf_counter() - started)
            hits[i].append(found)
    gc.collect()
    out["rss_serving"] = edge_scale.rss() - base
    out["rss_parts_serving"] = edge_scale.parts_above(base_parts)
    out["load"].append(edge_scale.load_now())
    client.close()
    out["searches"] = {label: {"times": times[i], "hits": hits[i]} for i, (label, _) in enumerate(settings)}
    return out


def child_main(path: str) -> None:
    spec = json.loads(Path(path).read_text())
    result = {"build": child_build, "serve": child_serve}[spec["job"]](spec)
    Path(spec["output"]).write_text(json.dumps(result))


def run_child(spec: dict, work: Path) -> dict:
    name = f"{spec['job']}-{spec['kind']}-{spec['arm']}-{spec['size']}"
    spec = dict(spec, output=str(work / f"{name}.json"))
    spec_path = work / f"{name}.spec.json"
    spec_path.write_text(json.dumps(spec))
    child = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", str(spec_path)], check=False)
    if child.returncode != 0:
        return {"failed": f"exit code {child.returncode}"}
    return json.loads(Path(spec["output"]).read_text())


# ----------------------------------------------------------------------------- truth
def prepare(real: dict, size: int, args) -> dict:
    """The corpus of ``size`` windows and its exact top 10: node MaxSim (windows) or vector cosine (plain)."""
    prepared = edge_scale.prepare_size(real, size, args)
    if args.kind == "windows":
        return prepared
    windows = np.load(prepared["folder"] / "windows.npy", mmap_mode="r")
    scores_file = prepared["folder"] / "plain_scores.npy"
    if not scores_file.is_file():
        out = np.empty((len(windows), len(real["queries"])), dtype=np.float32)
        for start in range(0, len(windows), 200_000):
            out[start : start + 200_000] = np.asarray(windows[start : start + 200_000]) @ real["queries"].T
        np.save(scores_file, out)
    scores = np.load(scores_file)
    truth = edge_scale.top_k(scores, K)
    tenth = np.take_along_axis(scores.T, truth[:, -1:], axis=1)[:, 0]
    return dict(prepared, nodes=len(windows), scores=scores, truth=truth, tenth=tenth)


def ram_for_vectors(vectors_config: dict, windows: int) -> int:
    """Bytes the vectors keep in RAM by Qdrant's rules: the quantized copy when there is one (always_ram), else the
    vectors themselves unless on disk (then none: the page cache holds what searches read)."""
    params = vectors_config if "size" in vectors_config else next(iter(vectors_config.values()))
    quantization = params.get("quantization_config") or {}
    if "scalar" in quantization:
        return windows * DIMENSION  # one byte a float (plus two floats of offsets per vector, left out)
    if "binary" in quantization:
        return windows * DIMENSION // 8
    if params.get("on_disk"):
        return 0
    return windows * DIMENSION * (2 if params.get("datatype") == "float16" else 4)


def run_size(real: dict, size: int, args, work_root: Path) -> dict:
    prepared = prepare(real, size, args)
    work = work_root / f"size-{size}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    nodes = prepared["nodes"]
    result: dict = {
        "kind": args.kind,
        "size": size,
        "windows": prepared["windows"],
        "nodes": nodes,
        "real_windows": min(prepared["real_windows"], prepared["windows"]),
        "arms": {},
    }
    print(f"\n== {args.kind}: {size:,} vectors, {nodes:,} nodes", flush=True)
    for arm in args.arms:
        spec = {
            "job": "build",
            "kind": args.kind,
            "arm": arm,
            "size": size,
            "store": str(work / arm),
            "corpus": str(prepared["folder"]),
            "queries": args.queries_file,
            "batch": edge_scale.BATCH_NODES,
            "warmup": args.warmup,
        }
        built = run_child(spec, work)
        entry: dict = {"build": built}
        if "failed" not in built:
            served = run_child(dict(spec, job="serve"), work)
            searches = served.pop("searches", {})
            entry["serve"] = served
            tagged = {label: dict(found, arm=arm) for label, found in searches.items()}
            entry["rows"] = edge_scale.summarize(tagged, prepared)
            ram = ram_for_vectors(built["vectors_config"], prepared["windows"])
            entry["ram_for_vectors"] = {
                "bytes": ram,
                "per_node": round(ram / nodes, 1),
                "vs_plain_float32": round(ram / (nodes * PLAIN_FLOAT32_BYTES), 3),
            }
        result["arms"][arm] = entry
        shutil.rmtree(work / arm, ignore_errors=True)
        print("\n".join(arm_lines(result, arm)), flush=True)
    shutil.rmtree(work, ignore_errors=True)
    return result


# ----------------------------------------------------------------------------- report
def mb(value: Any) -> str:
    return "" if value is None else f"{value / 2**20:,.0f}"


def arm_lines(run: dict, arm: str) -> list:
    entry, nodes = run["arms"][arm], run["nodes"]
    build = entry["build"]
    if "failed" in build:
        return [f"| {run['size']:,} | {arm} | failed: {build['failed']} |"]
    serve, ram = entry["serve"], entry["ram_for_vectors"]
    rss = serve["rss_parts_serving"]
    lines = []
    for row in entry["rows"]:
        load = " / ".join(f"{x['load'][0]:.2f}" for x in serve["load"])
        lines.append(
            f"| {run['size']:,} | {nodes:,} | {arm} | {row['setting']} | {ram['per_node']:,.0f} | "
            f"{ram['vs_plain_float32']:.2f}x | {(rss.get('anon', 0) + rss.get('file', 0)) / nodes:,.0f} "
            f"({rss.get('anon', 0) / nodes:,.0f} / {rss.get('file', 0) / nodes:,.0f}) | "
            f"{build['disk']['bytes'] / nodes:,.0f} | {build['upsert_s']} + {build['optimize_s']} | "
            f"{row['p50_ms']:.2f} | {row['p95_ms']:.2f} | {row['recall@10']:.4f} | {load} |"
        )
    return lines


HEADER = [
    "| vectors | nodes | arm | setting | RAM for vectors B/node | vs plain float32 | serving RSS B/node (anon / "
    "mapped) | disk B/node | build s (upsert + optimize) | p50 ms | p95 ms | recall@10 | load at search "
    "(start / end) |",
    "|---:|---:|---|---|---:|---:|---:|---:|---|---:|---:|---:|---|",
]


def markdown(result: dict) -> str:
    lines = [
        f"# Vector storage on Qdrant Edge: {result['kind']} collections",
        "",
        f"`{result['command']}` — {result['date']}; {result['machine']}; qdrant-edge-py {result['qdrant_edge']}, "
        f"qdrant-client {result['qdrant_client']}; load at start {result['load_start']['load']}, at end "
        f"{result.get('load_end', {}).get('load')}.",
        "",
        f"Vectors: {result['vectors']}",
        f"Queries: {result['queries']}",
        "",
        "RAM for vectors: the bytes Qdrant keeps in RAM for the vectors by the collection's config (int8: 1 byte a "
        "float, binary: 1 bit, in RAM; their float32 originals on disk, read to rescore; float32 / float16: the "
        "vectors); against a plain float32 collection of the same nodes (1,536 B a node). Serving RSS: the fresh "
        "serving process's RSS above its baseline after every query (anonymous memory / pages of mapped files). "
        "Disk: allocated bytes of the store after close. recall@10 against exact float32 "
        + ("MaxSim of the nodes." if result["kind"] == "windows" else "cosine of the vectors."),
        "",
        *HEADER,
    ]
    for run in result["runs"]:
        for arm in run["arms"]:
            lines += arm_lines(run, arm)
    for run in result["runs"]:
        lines += ["", f"{run['size']:,} vectors: {run['real_windows']:,} real, the rest synthetic."]
        for arm, entry in run["arms"].items():
            if "build" in entry and "disk_parts" in entry["build"]:
                parts = ", ".join(f"{k} {mb(v)} MB" for k, v in entry["build"]["disk_parts"].items())
                lines.append(f"- {arm}: disk {parts}; segments {entry['build'].get('segments')}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kind", choices=("windows", "plain"), default="windows")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000], help="vectors per corpus")
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    parser.add_argument("--name", default=None, help="NAME.json and NAME.md (default: KIND_storage)")
    parser.add_argument("--data", default=str(edge_scale.DEFAULT_DATA))
    parser.add_argument("--cache", default=str(edge_scale.DEFAULT_CACHE))
    parser.add_argument("--work", default=str(DEFAULT_WORK))
    parser.add_argument("--squad-queries", type=int, default=200)
    parser.add_argument("--scifact-queries", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--machine", default="2 CPU cores shared with other jobs")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_main(args.child)
        return
    name = args.name or f"{args.kind}_storage"
    load_start = edge_scale.load_now()
    real, meta = edge_scale.encode_real(args)
    args.cache_key, args.query_key = meta["cache_key"], meta["query_key"]
    args.queries_file = str(Path(args.cache) / f"queries-storage-{os.getpid()}.npz")
    np.savez(args.queries_file, queries=real["queries"])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    versions = edge_scale.versions()
    sources = {s: real["query_source"].count(s) for s in ("squad", "scifact")}
    result: dict = {
        "command": "python benchmarks/bench_window_storage.py " + shlex.join(sys.argv[1:]),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{args.machine}, {os.cpu_count()} CPUs, {platform.machine()}, Python {platform.python_version()}",
        "qdrant_edge": versions["qdrant-edge-py"],
        "qdrant_client": versions["qdrant-client"],
        "kind": args.kind,
        "vectors": f"{meta['model']} windows ({meta['window_config']}) of {meta['real_nodes']:,} real nodes "
        f"({meta['squad_nodes']:,} SQuAD-LongPosQ documents, the rest SciFact abstracts; "
        f"{int(real['counts'].sum()):,} windows); past those, perturbed copies of real nodes (cosine "
        f"{edge_scale.SYNTHETIC_COSINE} to the original)"
        + ("" if args.kind == "windows" else "; plain kind: each window vector one point"),
        "queries": f"{len(real['queries'])} real queries encoded plain: {sources['squad']} SQuAD questions, "
        f"{sources['scifact']} SciFact claims",
        "real": meta,
        "oversampling": OVERSAMPLING,
        "load_start": load_start,
        "runs": [],
    }
    work_root = Path(args.work) / f"run-{os.getpid()}"
    try:
        for size in tqdm(args.sizes, desc="sizes", unit="size"):
            result["runs"].append(run_size(real, size, args, work_root))
            result["load_end"] = edge_scale.load_now()
            (out / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
            (out / f"{name}.md").write_text(markdown(result))
    finally:
        shutil.rmtree(work_root, ignore_errors=True)
        Path(args.queries_file).unlink(missing_ok=True)
    print("\n".join(HEADER))
    for run in result["runs"]:
        for arm in run["arms"]:
            print("\n".join(arm_lines(run, arm)))
    print(f"wrote {out / name}.json and .md")


if __name__ == "__main__":
    main()
