"""The FastEmbed side of integration_tests/test_wrapped_fastembed.py, run by the Python of FastEmbed's own virtual
environment (scripts/fastembed_env.sh), never imported by the tests' process: fastembed needs huggingface-hub 1,
the project's .venv holds 2.

    python integration_tests/fastembed_child.py REQUEST.json ANSWER.json

The request names the all-MiniLM-L6-v2 folder, a cache folder for its ONNX export, the texts, the window size, a
query and a Qdrant Edge folder. The child

1. exports the folder's weights to ONNX with ``torch.onnx.export`` (once: the export is kept in the cache, under the
   hash of the weights it was made from), beside the tokenizer files FastEmbed reads;
2. registers the export with ``TextEmbedding.add_custom_model`` (mean pooling, normalized, 384 floats) and opens it
   with LlamaIndex's ``FastEmbedEmbedding(..., specific_model_path=export)``: nothing is downloaded;
3. embeds the texts in windows through ``PosFairEmbedding(embed_model=FastEmbedEmbedding, mode="windows")``, without
   ``tokenizer=`` (FastEmbed's own tokenizer is found on the model), sync and async, and the query;
4. writes a collection through it into the Qdrant Edge folder and retrieves the query's best node;

and writes what it found as JSON: the vectors, the tags, the hit, the versions, and how long each step took.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

# the name the export is registered under in FastEmbed (a custom model: not one of FastEmbed's own downloads)
MODEL_NAME = "posfair/all-MiniLM-L6-v2-onnx"
DIMENSION = 384
ONNX_FILE = "model.onnx"
# what FastEmbed's tokenizer loader reads (fastembed.common.preprocessor_utils.load_tokenizer), as an ONNX export of
# the model ships them; the limit is tokenizer_config.json's model_max_length, at which FastEmbed truncates
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "config.json", "vocab.txt")
OPSET = 17


def weights_hash(folder: Path) -> str:
    digest = hashlib.sha256()
    with (folder / "model.safetensors").open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def export(source: Path, cache: Path) -> tuple[Path, bool]:
    """The ONNX export of ``source`` in ``cache`` (made now if it is not there): its folder, and whether it was made."""
    target = cache / f"all-MiniLM-L6-v2-{weights_hash(source)}"
    if (target / ONNX_FILE).is_file():
        return target, False
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(source)).eval()

    class LastHiddenState(torch.nn.Module):
        """The token vectors, the output FastEmbed pools (its first output)."""

        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    names = ["input_ids", "attention_mask", "token_type_ids"]
    example = torch.full((2, 16), 1000, dtype=torch.long)
    mask = torch.ones_like(example)
    mask[1, 9:] = 0  # a padded row: the trace takes the masked path that FastEmbed's padded batches take
    cache.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".export-", dir=cache))
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's notes on shapes it fixes (batch and length stay dynamic)
            torch.onnx.export(
                LastHiddenState(model),
                (example, mask, torch.zeros_like(example)),
                str(work / ONNX_FILE),
                input_names=names,
                output_names=["last_hidden_state"],
                dynamic_axes={name: {0: "batch", 1: "sequence"} for name in [*names, "last_hidden_state"]},
                opset_version=OPSET,
                dynamo=False,  # the TorchScript exporter: needs onnx, not onnxscript
            )
        for name in TOKENIZER_FILES:
            shutil.copy2(source / name, work / name)
        work.chmod(0o755)
        work.rename(target)  # whole or not at all: a second export racing this one keeps its own
    except OSError:
        if not (target / ONNX_FILE).is_file():
            raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target, True


def fastembed_model(folder: Path):
    from fastembed import TextEmbedding
    from fastembed.common.model_description import ModelSource, PoolingType
    from llama_index.embeddings.fastembed import FastEmbedEmbedding

    if not any(model["model"] == MODEL_NAME for model in TextEmbedding.list_supported_models()):
        TextEmbedding.add_custom_model(
            model=MODEL_NAME,
            pooling=PoolingType.MEAN,
            normalization=True,
            # never fetched: specific_model_path answers first (FastEmbed asks for a source all the same)
            sources=ModelSource(hf=MODEL_NAME),
            dim=DIMENSION,
            model_file=ONNX_FILE,
        )
    return FastEmbedEmbedding(model_name=MODEL_NAME, specific_model_path=str(folder), threads=1)


def main(request_path: str, answer_path: str) -> None:
    request = json.loads(Path(request_path).read_text())
    timings: dict[str, float] = {}
    start = time.perf_counter()
    folder, exported = export(Path(request["minilm"]), Path(request["cache"]))
    timings["export"] = time.perf_counter() - start

    import fastembed
    import huggingface_hub
    import onnxruntime
    from llama_index.core import Document, StorageContext, VectorStoreIndex

    from posfair_llamaindex import EdgeQdrantClient, PosFairEmbedding, WindowConfig, tagged_vector_store
    from posfair_llamaindex.qdrant import collection_tag

    windows = WindowConfig(size=request["window_size"])
    start = time.perf_counter()
    embedding = fastembed_model(folder)
    model = PosFairEmbedding(embed_model=embedding, mode="windows", windows=windows)
    timings["load"] = time.perf_counter() - start
    texts = request["texts"]
    start = time.perf_counter()
    vectors = model.get_text_embedding_batch(texts)
    timings["windows"] = time.perf_counter() - start
    async_vectors = asyncio.run(model.aget_text_embedding_batch(texts))
    query = model.get_query_embedding(request["query"])
    # the same embedding told the folder's tokenizer: its tag must say the same tokenizer as the one found
    told = PosFairEmbedding(embed_model=embedding, mode="windows", windows=windows, tokenizer=request["minilm"])

    client = EdgeQdrantClient(path=request["qdrant_path"])
    store = tagged_vector_store(client, request["collection"], model)
    index = VectorStoreIndex.from_documents(
        [Document(text=text) for text in texts],
        embed_model=model,
        storage_context=StorageContext.from_defaults(vector_store=store),
    )
    hit = index.as_retriever(similarity_top_k=1).retrieve(request["query"])[0]
    tag = collection_tag(client.get_collection(request["collection"]))
    points = client.count(request["collection"], exact=True).count
    client.close()

    answer = {
        "vectors": vectors,
        "async_vectors": async_vectors,
        "query": query,
        "hit": hit.node.get_content(),
        "collection_tag": tag,
        "points": points,
        "tag": model.tag(),
        "told_tag": told.tag(),
        "exported": exported,
        "onnx_folder": str(folder),
        "timings": timings,
        "versions": {
            "fastembed": fastembed.__version__,
            "llama-index-embeddings-fastembed": _version("llama-index-embeddings-fastembed"),
            "onnxruntime": onnxruntime.__version__,
            "huggingface_hub": huggingface_hub.__version__,
            "python": sys.version.split()[0],
        },
    }
    Path(answer_path).write_text(json.dumps(answer, default=str))


def _version(distribution: str) -> str:
    from importlib.metadata import version

    return version(distribution)


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main(*sys.argv[1:3])
