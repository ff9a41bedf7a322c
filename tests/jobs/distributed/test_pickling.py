"""A PosFairEmbedding crosses processes as its settings and loads its model again where it lands.

This is what LlamaIndex's ``IngestionPipeline(num_workers=...)`` (a spawn pool) and Ray actors need. No
Ray here: these tests run without the extra.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from posfair_llamaindex import PosFairEmbedding
from tests.utils import sample_texts, save_tiny_model


@pytest.fixture
def own_model(tiny_model_dir, tmp_path):
    """A tiny model in a folder of this test's own, which the test may move or overwrite."""
    folder = tmp_path / "model"
    shutil.copytree(tiny_model_dir("bert"), folder)
    return folder


def test_an_embedding_travels_as_settings_and_loads_once_on_first_use(own_model):
    embed_model = PosFairEmbedding(str(own_model), pooling="first", embed_batch_size=4)
    texts = sample_texts(6, seed=3)
    data = pickle.dumps(embed_model)
    assert len(data) < 20_000  # settings, not weights
    copy = pickle.loads(data)
    assert "_encoder" not in copy.__pydantic_private__  # nothing loaded yet
    again = pickle.loads(pickle.dumps(copy))  # passed on unused: still nothing loads
    assert "_encoder" not in again.__pydantic_private__
    vectors = copy.get_text_embedding_batch(texts)
    np.testing.assert_array_equal(np.asarray(vectors), np.asarray(embed_model.get_text_embedding_batch(texts)))
    loaded = copy.encoder
    assert copy.encoder is loaded and copy.tag() == embed_model.tag()  # loaded once, the same configuration
    assert copy.get_query_embedding("a question") == embed_model.get_query_embedding("a question")
    assert again.fingerprint() == embed_model.fingerprint()


def test_a_process_without_the_model_fails_on_first_use_with_the_reason(own_model, tmp_path):
    copy_data = pickle.dumps(PosFairEmbedding(str(own_model)))
    own_model.rename(tmp_path / "moved")
    copy = pickle.loads(copy_data)  # unpickling never fails: a pool worker that fails here is lost silently
    with pytest.raises(RuntimeError, match=f"could not load {own_model} in process {os.getpid()}"):
        copy.get_text_embedding("some text")


def test_other_weights_under_the_same_path_are_refused(own_model):
    data = pickle.dumps(PosFairEmbedding(str(own_model)))
    save_tiny_model("bert", own_model, seed=1)  # retrained in place
    copy = pickle.loads(data)
    with pytest.raises(ValueError, match="gives fingerprint .* but the embedding was sent with fingerprint"):
        copy.get_text_embedding("some text")


PIPELINE = textwrap.dedent(
    """
    import json, sys
    from llama_index.core import Document
    from llama_index.core.ingestion import IngestionPipeline
    from llama_index.core.node_parser import SentenceSplitter
    from posfair_llamaindex import PosFairEmbedding

    if __name__ == "__main__":
        model, texts, out = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
        docs = [Document(text=text, id_=f"doc-{i}") for i, text in enumerate(texts)]
        embed_model = PosFairEmbedding(model, embed_batch_size=4)
        runs = {}
        for workers in (1, 2):
            splitter = SentenceSplitter(chunk_size=96, chunk_overlap=0)
            pipeline = IngestionPipeline(transformations=[splitter, embed_model])
            nodes = pipeline.run(documents=docs, num_workers=workers)
            runs[workers] = {n.text: n.embedding for n in nodes}
        json.dump(runs, open(out, "w"))
    """
)


def test_ingestion_pipeline_with_two_workers_gives_the_vectors_of_one(tiny_model_dir, tmp_path):
    """The issue's pipeline, ``SentenceSplitter`` and ``PosFairEmbedding`` under ``run(num_workers=2)``, offline.

    LlamaIndex pickles SentenceSplitter's default tiktoken tokenizer by name, and a fresh worker fetches it
    from the network unless TIKTOKEN_CACHE_DIR points at LlamaIndex's bundled copy (LlamaIndex sets it only
    while it loads the tokenizer). Offline, the fetch raises an OSError while the worker unpickles its task;
    CPython's pool worker takes that for a closed queue and exits without a word, a new worker replaces it,
    the task is lost, and ``run`` waits forever. Making a PosFairEmbedding sets the variable when the user has
    not, so the run here, with the variable unset, must finish.
    """
    script = tmp_path / "pipeline.py"
    script.write_text(PIPELINE)
    texts = sample_texts(6, seed=4, min_words=60, max_words=200)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("TIKTOKEN_CACHE_DIR", None)
    argv = [sys.executable, str(script), tiny_model_dir("bert"), json.dumps(texts), str(tmp_path / "out.json")]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Removing unpickleable private attribute _encoder" not in done.stderr  # it pickled as settings
    runs = json.loads((tmp_path / "out.json").read_text())
    one, two = runs["1"], runs["2"]
    assert sorted(two) == sorted(one) and len(one) > len(texts)
    for text, vector in one.items():
        np.testing.assert_allclose(two[text], vector, atol=1e-5, rtol=0)


def test_the_tiktoken_cache_is_shared_with_workers_unless_the_user_chose_one(monkeypatch, tmp_path):
    from posfair_llamaindex import embedding

    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    embedding._share_llamaindex_tiktoken_cache()
    bundled = os.environ["TIKTOKEN_CACHE_DIR"]
    assert bundled.endswith(os.path.join("llama_index", "core", "_static", "tiktoken_cache")) and os.listdir(bundled)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    embedding._share_llamaindex_tiktoken_cache()
    assert os.environ["TIKTOKEN_CACHE_DIR"] == str(tmp_path)
