"""Every model command end to end on a remote-code folder, with --trust-remote-code.

The folder is the eager stand-in of tests/standin (written the transformers-4 way: it calls the PreTrainedModel
mask helpers transformers 5 removed, and needs its non-persistent buffers rebuilt), mean-pooled, tiny and random.
"""

from __future__ import annotations

import json

import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.schema import TextNode
from llama_index.vector_stores.qdrant import QdrantVectorStore
from qdrant_client import QdrantClient

from posfair_llamaindex import PosFairEmbedding
from posfair_llamaindex.cli import main
from posfair_llamaindex.qdrant import collection_tag
from posfair_llamaindex.qdrant.embedded import open_embedded
from tests.eval.test_pseudo_queries import corpus
from tests.utils import NO_SHARED_DATA, SHARED_DATA, STANDIN_SWITCHES, sample_texts, save_standin_model

TRUST = "--trust-remote-code"


@pytest.fixture(scope="module")
def remote(tmp_path_factory):
    return save_standin_model(tmp_path_factory.mktemp("remote"), pooling="mean", **STANDIN_SWITCHES["softmax"])


@pytest.fixture
def docs(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, text in corpus(20).items():
        (folder / f"{name}.txt").write_text(text)
    return folder


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_ingest_and_query_need_the_trust_and_use_the_folders_code(capsys, tmp_path, docs, remote):
    store = ["--qdrant-path", tmp_path / "q"]
    code, _, err = run(capsys, "ingest", docs, "--collection", "c", "--model", remote, *store)
    assert code == 1 and "--trust-remote-code" in err and err.count("\n") == 1
    code, out, err = run(
        capsys, "ingest", docs, "--collection", "c", "--model", remote, TRUST, "--basket-size", "8", *store
    )
    assert code == 0, err
    assert "ingested 20 document(s)" in out
    code, out, err = run(
        capsys, "query", "boats in the archive", "--collection", "c", "-k", "3", "--json", TRUST, *store
    )
    assert code == 0, err
    hits = json.loads(out)
    assert len(hits) == 3 and hits[0]["score"] >= hits[-1]["score"]
    client = open_embedded(tmp_path / "q")  # the folder posfair ingest made: a Qdrant Edge store
    tag = collection_tag(client.get_collection("c"))
    client.close()
    assert tag["pooling"] == "mean" and tag["calibration"]["basket_size"] == 8


def test_audit_on_a_remote_code_model(capsys, tmp_path, docs, remote):
    fast = ["--max-documents", "20", "--bootstrap", "20", "--basket-size", "16", "--strengths", "0.5"]
    code, out, err = run(capsys, "audit", docs, "--model", remote, TRUST, "--out", tmp_path / "out", *fast)
    assert code == 0, err
    assert "| calibrated 0.5 |" in out


@pytest.mark.skipif(not (SHARED_DATA / "nq-open-oracle").is_dir(), reason=NO_SHARED_DATA)
def test_eval_on_a_remote_code_model(capsys, tmp_path, remote):
    code, out, err = run(
        capsys,
        "eval",
        "--data",
        SHARED_DATA,
        "--benchmark",
        "nq",
        "--max-sets",
        "4",
        "--configs",
        "plain,default,dual",
        "--basket-size",
        "16",
        "--bootstrap",
        "20",
        "--model",
        remote,
        TRUST,
        "--out",
        tmp_path / "eval",
    )
    assert code == 0, err
    assert "| plain |" in out and "| dual" in out


def test_upgrade_of_a_llamaindex_collection_written_with_remote_code(capsys, tmp_path, remote):
    plain = PosFairEmbedding(remote, mode="plain", trust_remote_code=True, device="cpu")
    nodes = [
        TextNode(id_=f"00000000-0000-4000-8000-{i:012d}", text=text)
        for i, text in enumerate(sample_texts(34, seed=3, min_words=14, max_words=30))
    ]
    client = QdrantClient(path=str(tmp_path / "q"))
    store = QdrantVectorStore("old", client=client)
    VectorStoreIndex(nodes, embed_model=plain, storage_context=StorageContext.from_defaults(vector_store=store))
    client.close()
    argv = ["upgrade", "--qdrant-path", tmp_path / "q", "--collection", "old", "--into", "new", "--model", remote]
    code, _, err = run(capsys, *argv, "--basket-size", "8")
    assert code == 1 and "--trust-remote-code" in err
    code, out, err = run(capsys, *argv, TRUST, "--basket-size", "8")
    assert code == 0, err
    assert "34 node(s), 34 written now" in out
    client = QdrantClient(path=str(tmp_path / "q"))
    assert collection_tag(client.get_collection("new"))["mode"] == "dual"
    assert client.count("new").count == 34
    client.close()
