"""Windows over LlamaIndex's FastEmbedEmbedding (fastembed on onnxruntime), on an ONNX export of the offline
all-MiniLM-L6-v2, equal to this package's own windows of that folder.

fastembed pins huggingface-hub<2 and this project's .venv holds 2, so FastEmbed runs in a virtual environment of its
own (scripts/fastembed_env.sh; CI calls it): one child Python there (integration_tests/fastembed_child.py) exports
the model to ONNX (once, into a cache beside that environment), embeds the texts in windows through
``PosFairEmbedding(embed_model=FastEmbedEmbedding(...), mode="windows")`` with FastEmbed's own tokenizer, and writes
a tagged Qdrant Edge collection; this process compares its vectors with native windows and opens its collection.
Where the environment is not installed, the tests skip with the reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from integration_tests.window_vectors import LATE, WINDOWS, assert_same_windows, windows_of
from posfair_llamaindex import CollectionTagMismatchError, EdgeQdrantClient, PosFairEmbedding, tagged_vector_store
from posfair_llamaindex.encoding.token_offsets import HuggingFaceTokenOffsets
from tests.utils import minilm_path

QUERY = "Where is the ledger of shipwrecks kept?"
MODEL_NAME = "posfair/all-MiniLM-L6-v2-onnx"  # fastembed_child.MODEL_NAME (that module runs in the other venv)
COLLECTION = "docs"
CHILD_TIMEOUT_S = 300
ROOT = Path(__file__).resolve().parents[1]


def fastembed_venv() -> Path:
    return Path(os.environ.get("POSFAIR_FASTEMBED_VENV", Path.home() / ".cache" / "posfair-fastembed" / "venv"))


@pytest.fixture(scope="module")
def child(wrapped_texts, tmp_path_factory):
    """What the child found, and the Qdrant Edge folder of the collection it wrote."""
    venv = fastembed_venv()
    python = venv / "bin" / "python"
    if not (venv / ".posfair-installed").is_file() or not python.is_file():
        pytest.skip(f"fastembed is not installed in {venv} (run bash scripts/fastembed_env.sh)")
    folder = tmp_path_factory.mktemp("fastembed")
    request = {
        "minilm": minilm_path(),
        "cache": str(venv.parent / "onnx"),
        "texts": wrapped_texts,
        "window_size": WINDOWS.size,
        "query": QUERY,
        "qdrant_path": str(folder / "q"),
        "collection": COLLECTION,
    }
    (folder / "request.json").write_text(json.dumps(request))
    environment = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONPATH": str(ROOT / "src"),  # this checkout's package, not one installed there
        "VIRTUAL_ENV": str(venv),
    }
    command = [str(python), str(ROOT / "integration_tests" / "fastembed_child.py")]
    done = subprocess.run(
        [*command, str(folder / "request.json"), str(folder / "answer.json")],
        env=environment,
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
    )
    if done.returncode != 0:
        pytest.fail(
            f"the FastEmbed child failed (exit code {done.returncode}); its output ends:\n{done.stderr[-3000:]}"
        )
    answer = json.loads((folder / "answer.json").read_text())
    print(f"fastembed child: {answer['versions']}, seconds {answer['timings']}", file=sys.stderr)
    return answer, str(folder / "q")


def test_windows_over_fastembed_equal_native_windows(child, native_windows):
    answer, _ = child
    assert_same_windows(native_windows[1], answer["vectors"])
    assert_same_windows(native_windows[1], answer["async_vectors"])  # asyncio.to_thread, the same vectors
    assert windows_of(native_windows[1])[-1].shape[0] > 8  # the long text: past the model's limit, covered by windows
    assert float(np.dot(answer["query"], native_windows[0].get_query_embedding(QUERY))) >= 0.9999


def test_fastembed_tokenizer_is_found_and_the_tag_names_the_class_the_model_and_the_weights(child):
    answer, _ = child
    tag = answer["collection_tag"]
    assert tag["embedding"]["class"] == "FastEmbedEmbedding"
    assert tag["embedding"]["model_name"] == MODEL_NAME
    # found on FastEmbed's model without tokenizer=: the same tokens as the folder's tokenizer.json
    assert tag["embedding"]["tokenizer"] == HuggingFaceTokenOffsets.from_folder(minilm_path()).tag()
    assert tag["embedding"]["tokenizer"] == answer["told_tag"]["embedding"]["tokenizer"]
    assert tag["embedding"]["max_input_tokens"] == 512  # tokenizer_config.json's, where FastEmbed truncates
    assert tag["windows"] == {"size": 64, "stride": 64, "document": "none"} and tag["dimension"] == 384
    assert tag["embedding_source"]["tokenizer"] is None and tag["embedding_source"]["model"] == MODEL_NAME
    assert tag["model_weights"].startswith("sha256:")  # the ONNX file's hash: the model is on this machine


def test_a_collection_written_through_fastembed_is_searchable_and_refuses_another_model(child):
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    answer, path = child
    assert LATE in answer["hit"]
    client = EdgeQdrantClient(path=path)  # written by the child's process, read here
    local = PosFairEmbedding(
        embed_model=HuggingFaceEmbedding(model_name=minilm_path(), device="cpu"), mode="windows", windows=WINDOWS
    )
    with pytest.raises(CollectionTagMismatchError, match="embedding"):
        tagged_vector_store(client, COLLECTION, local)
    with pytest.raises(CollectionTagMismatchError):
        tagged_vector_store(client, COLLECTION, PosFairEmbedding(minilm_path(), mode="windows", windows=WINDOWS))
    assert client.count(COLLECTION, exact=True).count == answer["points"] > 0
    client.close()
