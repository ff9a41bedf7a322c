"""The query's vector from a child process (encoding/query_process.py): the same vector and the same tag facts as an
embedding in this process, what it refuses, and what it leaves behind."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from posfair_llamaindex.embedding import PosFairEmbedding
from posfair_llamaindex.encoding import query_process
from posfair_llamaindex.encoding.query_process import InProcessQueryEncoder, QueryEncoderProcess, query_request
from posfair_llamaindex.errors import QueryEncodingError
from posfair_llamaindex.tag import ENCODER_TAG_KEYS


def settings_of(embedding: PosFairEmbedding) -> dict:
    """What the command line hands query_request: the embedding's constructor settings."""
    return {
        "model_name": embedding.model_name,
        "normalize": embedding.normalize,
        "query_instruction": None,
        "text_instruction": None,
    }


def test_the_child_gives_the_embeddings_vector_and_tag_facts(tiny_model_dir):
    """One child, for the pipe both ways; what else it answers is :func:`answer`'s, tested in this process below."""
    embedding = PosFairEmbedding(tiny_model_dir("bert", "first"), mode="dual")
    text = "Where does the river Danube end?"
    with QueryEncoderProcess() as child:
        child.send(query_request(settings_of(embedding), embedding.load_config), text)
        vector, facts = child.receive()
    assert np.allclose(vector, embedding.get_query_embedding(text), atol=1e-6)
    tag = embedding.tag()
    assert facts == {key: tag[key] for key in ENCODER_TAG_KEYS if key in tag}


def test_a_last_token_model_gets_the_embeddings_vector_and_tag_facts(tiny_model_dir):
    embedding = PosFairEmbedding(tiny_model_dir("qwen3", "last"), mode="dual")
    with InProcessQueryEncoder() as here:  # the child's answer(), made here (a child costs a fresh torch import)
        here.send(query_request(settings_of(embedding), embedding.load_config), "Where does the Danube end?")
        vector, facts = here.receive()
    assert np.allclose(vector, embedding.get_query_embedding("Where does the Danube end?"), atol=1e-6)
    tag = embedding.tag()
    assert facts == {key: tag[key] for key in ENCODER_TAG_KEYS if key in tag}


def test_the_models_own_prompts_are_used_as_the_embedding_uses_them(minilm, tmp_path):
    """A model folder whose sentence-transformers config names query and document prompts."""
    import shutil

    folder = tmp_path / "prompted"
    shutil.copytree(minilm, folder)
    config = folder / "config_sentence_transformers.json"
    data = json.loads(config.read_text()) if config.exists() else {}
    data["prompts"] = {"query": "query: ", "document": "passage: "}
    config.write_text(json.dumps(data))
    embedding = PosFairEmbedding(str(folder))
    assert embedding.query_instruction == "query: "
    with InProcessQueryEncoder() as here:
        here.send(query_request(settings_of(embedding), embedding.load_config), "lantern keeper")
        vector, facts = here.receive()
    assert np.allclose(vector, embedding.get_query_embedding("lantern keeper"), atol=1e-6)
    assert facts["model_weights"] == embedding.tag()["model_weights"]
    plain = PosFairEmbedding(minilm)
    assert not np.allclose(plain.get_query_embedding("lantern keeper"), vector, atol=1e-3)  # the prompt mattered


def test_what_the_child_refuses_is_raised_here_as_one_error(tiny_model_dir):
    embedding = PosFairEmbedding(tiny_model_dir("bert", "mean"))
    with QueryEncoderProcess() as child:
        gone = {**settings_of(embedding), "model_name": "/no/such/model"}
        child.send(query_request(gone, embedding.load_config), "x")
        with pytest.raises(QueryEncodingError, match="/no/such/model"):
            child.receive()
    with InProcessQueryEncoder() as here:  # refusals are answer()'s; an empty query, made here
        here.send(query_request(settings_of(embedding), embedding.load_config), "   ")
        with pytest.raises(QueryEncodingError, match="query is empty or whitespace only"):
            here.receive()


def test_an_unused_child_is_stopped_and_a_used_one_cannot_be_asked_again(tiny_model_dir, monkeypatch):
    monkeypatch.setattr(query_process, "model_libraries_loaded", lambda: False)  # as in `posfair query` from a shell
    child = QueryEncoderProcess()
    process = child._process
    child.close()
    assert process.poll() is not None  # killed and reaped, not left running
    with pytest.raises(RuntimeError, match="already answered or was closed"):
        child.send({}, "x")
    query_process.start_early()
    early = query_process._early
    assert query_process.take() is early and query_process._early is None
    early.close()
    query_process.start_early()
    waiting = query_process._early._process
    query_process.discard_early()
    assert waiting.poll() is not None and query_process._early is None


def test_a_process_that_has_torch_answers_itself_as_the_child_would(tiny_model_dir):
    """main() called from Python (torch loaded): no child is started, and the same answer and refusals come back."""
    embedding = PosFairEmbedding(tiny_model_dir("bert", "mean"))
    request = query_request(settings_of(embedding), embedding.load_config)
    query_process.start_early()
    assert query_process._early is None
    with query_process.take() as here:
        assert isinstance(here, query_process.InProcessQueryEncoder)
        here.send(request, "who kept the ledger?")
        vector, facts = here.receive()
    # what the child gives (test_the_child_gives_the_embeddings_vector_and_tag_facts)
    assert np.allclose(vector, embedding.get_query_embedding("who kept the ledger?"), atol=1e-6)
    tag = embedding.tag()
    assert facts == {key: tag[key] for key in ENCODER_TAG_KEYS if key in tag}
    with query_process.take() as here:
        here.send(request, "   ")
        with pytest.raises(QueryEncodingError, match="query is empty or whitespace only"):
            here.receive()


def test_the_child_loads_neither_qdrant_llamaindex_pydantic_nor_the_command_line(tiny_model_dir):
    embedding = PosFairEmbedding(tiny_model_dir("bert", "mean"))
    request = query_request(settings_of(embedding), embedding.load_config)
    watch = ("qdrant_client", "llama_index.core", "pydantic", "posfair_llamaindex.cli", "torch")
    script = textwrap.dedent(
        f"""
        import runpy, sys
        try:
            runpy.run_module("posfair_llamaindex.encoding.query_process", run_name="__main__")
        except SystemExit:
            pass
        print("@@", [name for name in {watch!r} if name in sys.modules], file=sys.stderr)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=json.dumps({**request, "text": "x"}) + "\n",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert '"vector"' in done.stdout, done.stderr[-2000:]
    assert "@@ ['torch']" in done.stderr, done.stderr[-2000:]
