"""Windows as one MaxSim multivector per document, or each window as its own point grouped by document?

Windows mode stores, per document, one Qdrant multivector ``windows`` (comparator MAX_SIM, a row per window), so a
query scores a document by its best window. The usual alternative stores every window as its own point (one dense
cosine vector, a keyword payload ``doc_id`` naming its document) and groups the hits by document: on a server
``query_points_groups(group_by="doc_id", group_size=1, limit=k)``, on an engine without a groups API a client-side
grouping of an over-fetched top N of windows. With exact search both rank documents by their best window, so they
return the same documents; this script measures what differs: points and bytes stored, build time, query latency,
and HNSW recall (Qdrant's multivector graph is built on the MaxSim distance between whole documents, the flat
layout's on the cosine between windows).

Same corpus, seed and queries as ``bench_windows.py store`` (its functions, imported): synthetic MiniLM-like
vectors, documents around 200 topic centres with round(N(4, 1)) >= 1 windows each, 10,000 and 100,000 windows;
"targeted" queries (a stored window moved to cosine 0.57) and "fresh" ones (a window of a new document); no
filter. The search measured is the windows-alone one (a document scored by its best window), and, unless
``--no-fused``, the fused max(plain cosine, best window cosine) of the ``plain`` + ``windows`` layout.

(1) Local mode (``QdrantClient(":memory:")``, exact): build seconds, ms per query and recall of (a) the
multivector collection (``query_points(using="windows")``) and (b) the flat one (the real
``query_points_groups``), on the first ``--local-queries`` targeted queries.
(2) qdrant-edge-py (Qdrant's Rust engine in-process; HNSW m=16, ef_construct=100, small segments indexed early,
as in bench_windows.py): build seconds, storage (points, float32 bytes, allocated shard bytes without the WAL,
HNSW links, per document), and recall@k of the top-k documents against brute force with ms per query, for
(a) the multivector at the default ef, ``hnsw_ef`` 256 / 512 and exact, and (b) the flat shard fetching N =
4k / 10k / 20k windows (with their ``doc_id`` payload) and keeping each document's best window, at the same ef
settings (Qdrant searches with ef = max(hnsw_ef, N), hnsw_ef defaulting to ef_construct); one row of (b) reads
the document from the point id instead of the payload, to show what the payload costs. Fused: (a') the product's
request on a ``plain`` + ``windows`` shard (prefetch max(2k, 100) per vector, formula max), (b') a plain shard
(one point per document) queried for max(2k, 100) documents plus the flat window shard's top N, maximum per
document on the client (the two latencies added).

    python benchmarks/bench_window_groups.py                      # 10k and 100k windows, ~13 min on 2 shared cores
    python benchmarks/bench_window_groups.py --windows 10000 --queries 50 --local-queries 10 --output /tmp/g.json
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))  # the edge request translator lives with the tests that check it

from bench_windows import (  # noqa: E402
    QUERY_KINDS,
    _version,
    build_edge_shard,
    exact_scores,
    make_queries,
    synthetic_corpus,
    top_sets,
    unit,
)

DIMENSION = 384  # all-MiniLM-L6-v2's, as bench_windows.py store lays out
WINDOW_VECTOR = "window"  # the flat layout's one vector per window point
DOC_FIELD = "doc_id"
EF_SETTINGS = {"default ef": {}, "hnsw_ef 256": {"hnsw_ef": 256}, "hnsw_ef 512": {"hnsw_ef": 512}, "exact": {}}
EF_CONSTRUCT = 100  # Qdrant's default, the search ef when a query gives none


def layouts() -> dict:
    """The product's layouts for windows alone and windows + plain (what ``layout_for`` gives a windows embedding of
    a 384-dimensional model, built here without loading one), a plain document layout, and the flat window one."""
    from qdrant_client.http import models as rest

    from posfair_llamaindex.qdrant.vector_layout import (
        PLAIN_VECTOR,
        WINDOWS_VECTOR,
        DenseVector,
        QueryFusion,
        VectorLayout,
        dense_vector,
    )

    max_sim = rest.MultiVectorConfig(comparator=rest.MultiVectorComparator.MAX_SIM)
    windows = DenseVector(
        name=WINDOWS_VECTOR,
        params=rest.VectorParams(size=DIMENSION, distance=rest.Distance.COSINE, multivector_config=max_sim),
    )
    plain = dense_vector(PLAIN_VECTOR, DIMENSION)
    return {
        "multivector": VectorLayout(dimension=DIMENSION, dense=(windows,)),
        "plain + windows": VectorLayout(dimension=DIMENSION, dense=(plain, windows), fusion=QueryFusion(rule="max")),
        "plain": VectorLayout(dimension=DIMENSION, dense=(plain,)),
        "flat": VectorLayout(dimension=DIMENSION, dense=(dense_vector(WINDOW_VECTOR, DIMENSION),)),
    }


def document_of(corpus: dict) -> np.ndarray:
    """The document of every window."""
    counts = np.diff(corpus["offsets"])
    return np.repeat(np.arange(len(counts)), counts)


# ----------------------------------------------------------------------------- points
def multivector_points(corpus: dict, names: tuple, size: int = 500):
    """One point per document: its windows as one multivector (and its plain vector when ``names`` has it)."""
    offsets = corpus["offsets"]
    for start in range(0, len(corpus["plain"]), size):
        batch = []
        for i in range(start, min(start + size, len(corpus["plain"]))):
            vector = {"windows": corpus["windows"][offsets[i] : offsets[i + 1]].tolist()}
            if "plain" in names:
                vector["plain"] = corpus["plain"][i].tolist()
            batch.append((i, vector, {}))
        yield batch


def flat_points(corpus: dict, size: int = 2000):
    """One point per window (id: the window's index), its document in the keyword payload ``doc_id``."""
    docs = document_of(corpus)
    for start in range(0, len(docs), size):
        yield [
            (j, {WINDOW_VECTOR: corpus["windows"][j].tolist()}, {DOC_FIELD: str(docs[j])})
            for j in range(start, min(start + size, len(docs)))
        ]


def plain_points(corpus: dict, size: int = 2000):
    for start in range(0, len(corpus["plain"]), size):
        yield [
            (i, {"plain": corpus["plain"][i].tolist()}, {})
            for i in range(start, min(start + size, len(corpus["plain"])))
        ]


# ----------------------------------------------------------------------------- local mode
def local_mode(corpus: dict, layout: dict, queries: np.ndarray, truth: np.ndarray, args) -> dict:
    """Both layouts in local mode (exact): build seconds, then ms per query and recall (1 by construction)."""
    from qdrant_client import QdrantClient
    from qdrant_client.http import models as rest

    client = QdrantClient(":memory:")
    count = min(args.local_queries, len(queries))
    everyone = np.ones(len(corpus["plain"]), bool)
    result = {"queries": count, "build_s": {}, "rows": []}
    for name, points in (("multivector", multivector_points(corpus, ())), ("flat", flat_points(corpus))):
        started = time.perf_counter()
        client.create_collection(name, **layout[name].create_arguments())
        if name == "flat":  # local mode keeps no payload index, but this is the call a server needs
            client.create_payload_index(name, DOC_FIELD, rest.PayloadSchemaType.KEYWORD)
        for batch in points:
            client.upsert(name, points=[rest.PointStruct(id=i, vector=v, payload=p) for i, v, p in batch], wait=True)
        result["build_s"][name] = round(time.perf_counter() - started, 1)
    for k in args.local_k:
        expected = top_sets(truth[:, :count], k, everyone)
        for name in ("multivector", "flat"):
            found, seconds = 0, 0.0
            for j in range(count):
                q = queries[j].tolist()
                t = time.perf_counter()
                if name == "multivector":
                    hits = {int(h.id) for h in client.query_points(name, query=[q], using="windows", limit=k).points}
                else:
                    groups = client.query_points_groups(
                        name, query=q, using=WINDOW_VECTOR, group_by=DOC_FIELD, group_size=1, limit=k
                    ).groups
                    hits = {int(g.id) for g in groups}
                seconds += time.perf_counter() - t
                found += len(expected[j] & hits)
            row = dict(
                layout=name, k=k, recall=round(found / (k * count), 4), ms_per_query=round(1000 * seconds / count, 1)
            )
            result["rows"].append(row)
            print(json.dumps({"local": row}), flush=True)
    client.close()
    return result


# ----------------------------------------------------------------------------- edge shards
def build_shard(folder: Path, name: str, layout, points, payload_index: bool = False):
    import qdrant_edge as edge

    batches = ([edge.Point(i, v, p) for i, v, p in batch] for batch in points)
    # the keyword index a group_by field wants, made with the collection, before the data
    shard, built = build_edge_shard(folder / name, layout, batches, index_field=DOC_FIELD if payload_index else None)
    disk = built.pop("disk_bytes")
    summary = dict(shard=name, **built, **disk)
    print(json.dumps({"edge shard": summary}), flush=True)
    return shard, summary


def params_for(label: str):
    from qdrant_client.http import models as rest

    if label == "exact":
        return rest.SearchParams(exact=True)
    return rest.SearchParams(**EF_SETTINGS[label]) if EF_SETTINGS[label] else None


def one_vector_request(layout, query: np.ndarray, limit: int, label: str, payload=None):
    """The edge request of one vector's own search (the store's request for a one-vector layout, translated)."""
    import qdrant_edge as edge

    from tests.qdrant import edge as translate

    found = layout.dense_search(query.tolist(), limit)  # {"query", "using"}: no filter, no params given
    request = dict(query=found["query"], using=found["using"], limit=limit)
    params = params_for(label)
    if params is not None:
        request["search_params"] = params
    translated = translate.translate(request)
    if payload:
        translated = edge.QueryRequest(
            limit=translated.limit,
            query=translated.query,
            params=translated.params,
            with_payload=edge.PayloadSelector.Include([DOC_FIELD]),
        )
    return translated


def fused_request(layout, query: np.ndarray, k: int, label: str):
    from tests.qdrant import edge as translate

    request = layout.fused_dense(query.tolist(), k, params=params_for(label))
    return translate.translate(dict(request, limit=k))


def best_per_document(hits, doc_of_window: np.ndarray, from_payload: bool) -> dict:
    """Each document's best window score among the window hits (hits come best first)."""
    best: dict = {}
    for h in hits:
        doc = int(h.payload[DOC_FIELD]) if from_payload else int(doc_of_window[h.id])
        if doc not in best:
            best[doc] = h.score
    return best


def top_k(scores: dict, k: int) -> set:
    return set(sorted(scores, key=scores.get, reverse=True)[:k])


def effective_ef(label: str, limit: int):
    if label == "exact":
        return None
    return max(EF_SETTINGS[label].get("hnsw_ef", EF_CONSTRUCT), limit)


def edge_mode(corpus: dict, layout: dict, queries: dict, truth: dict, args) -> tuple:
    """Build the shards, then recall@k and ms per query of each layout and setting, for each kind of query."""
    doc_of_window = document_of(corpus)
    everyone = np.ones(len(corpus["plain"]), bool)
    rows, shards = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        multi, shards["multivector"] = build_shard(
            folder, "multivector", layout["multivector"], multivector_points(corpus, ())
        )
        flat, shards["flat"] = build_shard(folder, "flat", layout["flat"], flat_points(corpus), payload_index=True)
        if args.fused:
            fused, shards["plain + windows"] = build_shard(
                folder, "plain + windows", layout["plain + windows"], multivector_points(corpus, ("plain",))
            )
            plain, shards["plain"] = build_shard(folder, "plain", layout["plain"], plain_points(corpus))

        def record(query_kind, search, layout_name, setting, k, fetched, ef, run) -> None:
            cases.append(
                dict(
                    run=run,
                    row=dict(
                        queries=query_kind,
                        search=search,
                        layout=layout_name,
                        setting=setting,
                        k=k,
                        fetched=fetched,
                        fetch_factor=fetched // k if layout_name == "flat" else None,
                        ef=ef,
                    ),
                )
            )

        def measure(query_kind: str, k: int) -> None:
            """Every case of one kind of query and one k, interleaved query by query (the order rotating), so that
            the load of a shared machine falls on all of them alike; wall and process CPU ms per query."""
            asked, gold = queries[query_kind]
            expected = {search: top_sets(truth[query_kind][search], k, everyone) for search in truth[query_kind]}
            tallies = [dict(found=0, wall=0.0, cpu=0.0, short=0, answered=0, exact=0) for _ in cases]
            for j in range(len(asked)):
                for i in np.roll(np.arange(len(cases)), -j):
                    case, tally = cases[i], tallies[i]
                    wall, cpu, hits = case["run"](asked[j])
                    wanted = expected[case["row"]["search"]][j]
                    tally["wall"] += wall
                    tally["cpu"] += cpu
                    tally["found"] += len(wanted & hits)
                    tally["short"] += len(hits) < k
                    if gold is not None:
                        tally["answered"] += gold[j] in hits
                        tally["exact"] += gold[j] in wanted
            for case, tally in zip(cases, tallies, strict=True):
                row = dict(
                    case["row"],
                    recall=round(tally["found"] / (k * len(asked)), 4),
                    ms_per_query=round(1000 * tally["wall"] / len(asked), 2),
                    cpu_ms_per_query=round(1000 * tally["cpu"] / len(asked), 2),
                    short_of_k=tally["short"],
                )
                if gold is not None:
                    row.update(
                        answer=round(tally["answered"] / len(asked), 4),
                        answer_exact=round(tally["exact"] / len(asked), 4),
                    )
                rows.append(row)
                print(json.dumps({"edge": row}), flush=True)
            cases.clear()

        def multivector_run(shard, request_of):
            def run(q):
                request = request_of(q)
                t, c = time.perf_counter(), time.process_time()
                hits = {int(h.id) for h in shard.query(request)}
                return time.perf_counter() - t, time.process_time() - c, hits

            return run

        def flat_run(k, limit, label, from_payload=True, plain_limit=None):
            def run(q):
                request = one_vector_request(layout["flat"], q, limit, label, payload=from_payload)
                plain_request = None
                if plain_limit:
                    plain_request = one_vector_request(layout["plain"], q, plain_limit, label)
                t, c = time.perf_counter(), time.process_time()
                best = best_per_document(flat.query(request), doc_of_window, from_payload)
                if plain_request is not None:
                    for h in plain.query(plain_request):
                        best[int(h.id)] = max(best.get(int(h.id), -1.0), h.score)
                chosen = top_k(best, k)
                return time.perf_counter() - t, time.process_time() - c, chosen

            return run

        cases: list = []
        for query_kind in args.query_kinds:
            for k in args.k:
                for label in EF_SETTINGS:
                    record(
                        query_kind,
                        "windows",
                        "multivector",
                        label,
                        k,
                        k,
                        effective_ef(label, k),
                        multivector_run(
                            multi, lambda q, k=k, label=label: one_vector_request(layout["multivector"], q, k, label)
                        ),
                    )
                for label in EF_SETTINGS:
                    for factor in args.fetch:
                        limit = factor * k
                        record(
                            query_kind,
                            "windows",
                            "flat",
                            label,
                            k,
                            limit,
                            effective_ef(label, limit),
                            flat_run(k, limit, label),
                        )
                limit = args.id_fetch * k
                record(
                    query_kind,
                    "windows",
                    "flat",
                    "default ef, document from point id",
                    k,
                    limit,
                    effective_ef("default ef", limit),
                    flat_run(k, limit, "default ef", from_payload=False),
                )
                if args.fused:
                    prefetch = layout["plain + windows"].prefetch_limit(k, "max")
                    for label in ("default ef", "hnsw_ef 256", "hnsw_ef 512"):
                        record(
                            query_kind,
                            "plain + windows",
                            "multivector",
                            label,
                            k,
                            prefetch,
                            effective_ef(label, prefetch),
                            multivector_run(
                                fused, lambda q, k=k, label=label: fused_request(layout["plain + windows"], q, k, label)
                            ),
                        )
                    for factor in args.fetch:
                        limit = factor * k
                        record(
                            query_kind,
                            "plain + windows",
                            "flat",
                            "default ef",
                            k,
                            limit,
                            effective_ef("default ef", limit),
                            flat_run(k, limit, "default ef", plain_limit=prefetch),
                        )
                measure(query_kind, k)
        for shard in (multi, flat, *((fused, plain) if args.fused else ())):
            shard.close()
    return rows, shards


# ----------------------------------------------------------------------------- one corpus size
def run(total: int, layout: dict, args) -> dict:
    # the same generator calls, in the same order, as bench_windows.py store_run: same corpus and queries
    rng = np.random.default_rng(args.seed)
    centres = unit(rng.standard_normal((args.centres, DIMENSION)))
    corpus = synthetic_corpus(total, centres, args.windows_per_document[0], args.windows_per_document[1], rng)
    queries = {kind: make_queries(kind, args.queries, corpus, centres, rng) for kind in QUERY_KINDS}
    truth = {kind: exact_scores(corpus, asked) for kind, (asked, _) in queries.items()}
    documents = len(corpus["plain"])
    per_document = total / documents
    print(f"{total} windows, {documents} documents ({per_document:.2f} windows each)", flush=True)
    started = time.perf_counter()
    local = (
        local_mode(corpus, layout, queries["targeted"][0], truth["targeted"]["windows"], args)
        if args.local_queries
        else None
    )
    print(f"local mode: {time.perf_counter() - started:.0f} s", flush=True)
    started = time.perf_counter()
    rows, shards = edge_mode(corpus, layout, queries, truth, args)
    print(f"edge: {time.perf_counter() - started:.0f} s", flush=True)
    storage = {}
    for name, shard in shards.items():
        vectors = {
            "multivector": per_document,
            "flat": per_document,
            "plain + windows": 1 + per_document,
            "plain": 1,
        }[name]
        storage[name] = dict(
            points_per_document=round(shard["points"] / documents, 3),
            vectors_per_document=round(vectors, 3),
            float32_bytes_per_document=round(vectors * DIMENSION * 4),
            edge_allocated_bytes_per_document=round(shard["allocated_without_wal"] / documents),
            edge_hnsw_links_bytes_per_document={n: round(b / documents) for n, b in shard["hnsw_links"].items()},
        )
    return {
        "windows": total,
        "documents": documents,
        "storage": storage,
        "local": local,
        "edge": {"shards": list(shards.values()), "rows": rows},
    }


def markdown(result: dict) -> str:
    lines = [
        f"`{result['command']}`: {result['vectors']}; {result['machine']}, {result['date']}; qdrant-client "
        f"{result['qdrant_client']} (local mode), qdrant-edge-py {result['qdrant_edge']} ({result['hnsw']}).",
        "",
        "Storage and build, per document (multivector: one point per document, windows as one MaxSim multivector; "
        "flat: one point per window, keyword payload doc_id with a keyword index)",
        "",
        "| windows | documents | layout | points / doc | float32 bytes / doc | edge allocated bytes / doc (no WAL) | "
        "HNSW links bytes / doc | edge build s | local build s |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["runs"]:
        shards = {s["shard"]: s for s in r["edge"]["shards"]}
        for name, s in r["storage"].items():
            links = ", ".join(f"{v:,}" for v in s["edge_hnsw_links_bytes_per_document"].values())
            local = r["local"]["build_s"].get(name, "") if r["local"] else ""
            lines.append(
                f"| {r['windows']:,} | {r['documents']:,} | {name} | {s['points_per_document']:.2f} | "
                f"{s['float32_bytes_per_document']:,} | {s['edge_allocated_bytes_per_document']:,} | {links} | "
                f"{shards[name]['build_s']:.0f} | {local} |"
            )
    if any(r["local"] for r in result["runs"]):
        lines += [
            "",
            "Local mode (exact), windows alone, targeted queries: ms per query and recall",
            "",
            "| windows | queries | k | multivector (query_points) ms | recall | flat (query_points_groups) ms | "
            "recall |",
            "|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in result["runs"]:
            if not r["local"]:
                continue
            by = {(x["layout"], x["k"]): x for x in r["local"]["rows"]}
            for k in sorted({x["k"] for x in r["local"]["rows"]}):
                m, f = by[("multivector", k)], by[("flat", k)]
                lines.append(
                    f"| {r['windows']:,} | {r['local']['queries']} | {k} | {m['ms_per_query']:.1f} | "
                    f"{m['recall']:.4f} | {f['ms_per_query']:.1f} | {f['recall']:.4f} |"
                )
    lines += [
        "",
        f"qdrant-edge-py HNSW, {result['queries']} queries of each kind: recall of the top-k documents against brute "
        "force; wall-clock and process CPU ms per query, the settings interleaved query by query (flat: N windows "
        "fetched with their payload, best window per document kept on the client; ef: Qdrant's max(hnsw_ef, N); "
        "short: queries with fewer than k documents)",
        "",
        "| windows | queries | search | layout | setting | N (k=10) | ef | recall@10 | answer@10 | ms | CPU ms | "
        "short | N (k=100) | ef | recall@100 | answer@100 | ms | CPU ms | short |",
        "|---:|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["runs"]:
        rows = r["edge"]["rows"]
        fields = ("queries", "search", "layout", "setting")
        fields = (*fields, "fetch_factor")
        for key in dict.fromkeys(tuple(x[f] for f in fields) for x in rows):
            by_k = {x["k"]: x for x in rows if tuple(x[f] for f in fields) == key}
            cells = []
            for k in (10, 100):
                x = by_k.get(k)
                if x is None:
                    cells.append(" | | | | | | ")
                    continue
                ef = "exact" if x["ef"] is None else str(x["ef"])
                answer = f"{x['answer']:.3f}" if "answer" in x else ""
                cells.append(
                    f"{x['fetched']} | {ef} | {x['recall']:.4f} | {answer} | {x['ms_per_query']:.2f} | "
                    f"{x['cpu_ms_per_query']:.2f} | {x['short_of_k']}"
                )
            lines.append(f"| {r['windows']:,} | {' | '.join(key[:4])} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--windows", type=int, nargs="+", default=[10_000, 100_000], help="windows in all, per run")
    parser.add_argument("--windows-per-document", type=float, nargs=2, default=[4.0, 1.0], metavar=("MEAN", "SD"))
    parser.add_argument("--centres", type=int, default=200, help="topic centres of the clustered vectors")
    parser.add_argument("--queries", type=int, default=200, help="queries of each kind on the edge shards")
    parser.add_argument("--local-queries", type=int, default=50, help="targeted queries in local mode (0: skip)")
    parser.add_argument("--local-k", type=int, nargs="+", default=[10])
    parser.add_argument("--k", type=int, nargs="+", default=[10, 100])
    parser.add_argument("--fetch", type=int, nargs="+", default=[4, 10, 20], help="flat layout: N = factor x k windows")
    parser.add_argument("--id-fetch", type=int, default=10, help="N / k of the row that reads documents from ids")
    parser.add_argument("--no-fused", dest="fused", action="store_false", help="skip plain + windows")
    parser.add_argument("--query-kinds", nargs="+", choices=QUERY_KINDS, default=list(QUERY_KINDS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--machine", default="2 CPU cores, shared with other jobs")
    parser.add_argument("--output", default=str(ROOT / "benchmarks" / "results" / "windows_groups.json"))
    args = parser.parse_args()
    layout = layouts()
    runs = [run(total, layout, args) for total in args.windows]
    result = {
        "vectors": f"bench_windows.py store's synthetic clustered vectors, dim {DIMENSION}, {args.centres} topic "
        f"centres, windows per document round(N({args.windows_per_document[0]:g}, "
        f"{args.windows_per_document[1]:g})) >= 1, seed {args.seed}",
        "queries": args.queries,
        "local_queries": args.local_queries,
        "hnsw": "HNSW m=16, ef_construct=100, indexing_threshold=1 KB (segments indexed early); unfiltered searches "
        "walk the graph",
        "qdrant_edge": _version("qdrant-edge-py"),
        "qdrant_client": _version("qdrant-client"),
        "seed": args.seed,
        "command": "python benchmarks/bench_window_groups.py " + shlex.join(sys.argv[1:]),
        "machine": args.machine,
        "cpus": os.cpu_count(),
        "date": date.today().isoformat(),
        "runs": runs,
    }
    Path(args.output).write_text(json.dumps(result, indent=2) + "\n")
    print(markdown(result))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
