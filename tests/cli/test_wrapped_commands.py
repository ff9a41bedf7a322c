"""posfair upgrade, query and audit over a LlamaIndex embedding (--embedding huggingface): an untagged collection that
LlamaIndex's QdrantVectorStore wrote through HuggingFaceEmbedding is upgraded into a tagged windows one, answers
queries, and is audited over the same embedding (plain and windows; calibrated and dual left out by name), with the
windows figures a loaded copy of the same weights gives."""

from __future__ import annotations

import json
import math
import re

import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.schema import TextNode
from llama_index.vector_stores.qdrant import QdrantVectorStore

from posfair_llamaindex.cli import main
from posfair_llamaindex.qdrant import EdgeQdrantClient, collection_tag
from tests.utils import HAS_SQUAD, NO_SHARED_DATA, SHARED_DATA, minilm_path

pytestmark = pytest.mark.skipif(not HAS_SQUAD, reason=NO_SHARED_DATA)

# SQuAD paragraphs longer than one basket (128 tokens) and shorter than MiniLM's 256: each one auditable
DOCUMENTS = 21
FAST = ["--max-documents", "20", "--bootstrap", "50"]


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def squad_paragraphs(count: int) -> list[str]:
    from posfair_llamaindex.eval.benchmark_data import squad_articles

    found = []
    for article in squad_articles(SHARED_DATA):
        context = article["paragraphs"][0]["context"]
        if 130 < len(context.split()) < 165:
            found.append(context)
        if len(found) == count:
            return found
    raise AssertionError("too few SQuAD paragraphs of the wanted length")


@pytest.fixture(scope="module")
def hf_embedding():
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    return HuggingFaceEmbedding(model_name=minilm_path(), device="cpu")


@pytest.fixture(scope="module")
def upgraded(tmp_path_factory, hf_embedding):
    """Folder with 'old' (LlamaIndex's own, untagged, through HuggingFaceEmbedding) and 'new', the upgrade's output."""
    folder = tmp_path_factory.mktemp("wrapped") / "qdrant"
    nodes = [
        TextNode(id_=f"00000000-0000-4000-8000-{i:012d}", text=text, metadata={"file_name": f"p{i}.txt"})
        for i, text in enumerate(squad_paragraphs(DOCUMENTS))
    ]
    client = EdgeQdrantClient(path=str(folder))
    VectorStoreIndex(
        nodes,
        embed_model=hf_embedding,
        storage_context=StorageContext.from_defaults(vector_store=QdrantVectorStore("old", client=client)),
    )
    client.close()
    code = main(
        [
            "upgrade",
            "--collection",
            "old",
            "--into",
            "new",
            "--qdrant-path",
            str(folder),
            "--embedding",
            "huggingface",
            "--embedding-model",
            minilm_path(),
            "--mode",
            "windows",
        ]
    )
    assert code == 0
    return folder, nodes


def test_upgrade_through_a_wrapped_embedding_writes_a_tagged_windows_collection_that_answers(capsys, upgraded):
    folder, nodes = upgraded
    client = EdgeQdrantClient(path=str(folder))
    try:
        tag = collection_tag(client.get_collection("new"))
        assert client.count("new", exact=True).count == DOCUMENTS
    finally:
        client.close()
    assert tag["mode"] == "windows" and tag["windows"]["document"] == "plain"
    assert tag["embedding"]["class"] == "HuggingFaceEmbedding"
    assert tag["embedding_source"]["kind"] == "huggingface" and tag["embedding_source"]["model"] == minilm_path()
    # rebuilt from the tag, through the wrapped model's own query path
    question = nodes[3].text.split(".")[0]
    code, out, err = run(capsys, "query", question, "--collection", "new", "--qdrant-path", folder, "-k", "3")
    assert code == 0, err
    assert nodes[3].text[:40] in out


def test_upgrade_refuses_what_a_wrapped_embedding_cannot_do_before_qdrant_is_opened(capsys, tmp_path):
    wrapped = ["--embedding", "huggingface", "--embedding-model", minilm_path()]
    absent = ["--collection", "old", "--into", "new", "--qdrant-path", tmp_path / "nowhere"]
    code, _, err = run(capsys, "upgrade", *absent, *wrapped)  # the default mode is dual
    assert code == 1 and "mode 'dual' cannot run over --embedding huggingface" in err
    code, _, err = run(capsys, "upgrade", *absent, *wrapped, "--mode", "windows", "--engine", "ray")
    assert code == 1 and "use --engine local" in err


def test_audit_of_a_wrapped_collection_scores_plain_and_windows_as_a_loaded_model_does(capsys, upgraded, tmp_path):
    folder, _ = upgraded
    out_dir = tmp_path / "audit"
    argv = ["audit", "--collection", "new", "--qdrant-path", folder, "--json", "--out", out_dir, *FAST]
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    rows = json.loads(out)
    assert [r["mode"] for r in rows] == ["plain", "windows"]
    assert rows[1]["name"] == "windows 128/128 + plain" and rows[1]["strength"] is None
    for row in rows:
        assert all(math.isfinite(v) and 0 <= v <= 100 for v in row["ndcg"] + row["hm"])
        assert all(math.isfinite(row["groups"][g][0]) for g in ("begin", "middle", "end"))
        assert row["ndcg"][0] > 50  # the pseudo-queries find their paragraphs: the vectors are the model's
    assert re.search(r"calibrated \(0\.25, 0\.5, 0\.75, 1\) and dual left out: HuggingFaceEmbedding", err)
    saved = json.loads((out_dir / "audit-wrapped.json").read_text())
    assert saved["rows"] == rows and saved["embedding"].startswith("HuggingFaceEmbedding(")
    assert f"{DOCUMENTS} long enough to audit" in saved["corpus"] and "left out" in saved["notes"][0]

    # the same texts audited over the same weights loaded by posfair: windows agree (plain is scored too)
    from posfair_llamaindex.encoding.load_config import LoadConfig
    from posfair_llamaindex.encoding.windows import WindowConfig
    from posfair_llamaindex.eval.audit import audit_configs, audit_texts
    from posfair_llamaindex.qdrant.texts import node_texts

    client = EdgeQdrantClient(path=str(folder))
    try:
        texts = node_texts(client, "new")
    finally:
        client.close()
    windows = WindowConfig(document="plain")
    native = audit_texts(
        texts,
        minilm_path(),
        configs=audit_configs(None, "mean", strengths=(), dual=False, windows=windows),
        max_documents=20,
        bootstrap_samples=50,
        show_progress=False,
        load=LoadConfig(device="cpu"),
    )
    (theirs,) = [r for r in native.rows if r["mode"] == "windows"]
    ours = rows[1]
    assert native.screen.sampled == 20
    # the vectors' identity names the wrapped class: cached vectors of the two never mix
    assert {r["fingerprint"] for r in rows}.isdisjoint(r["fingerprint"] for r in native.rows)
    for key in ("ndcg", "hm", "psi", "recall"):
        assert ours[key] == pytest.approx(theirs[key], abs=1e-6), key
    for group in ("begin", "middle", "end"):
        assert ours["groups"][group] == pytest.approx(theirs["groups"][group], abs=1e-6), group


def test_audit_over_embedding_refuses_calibration_settings_before_the_model_loads(capsys, tmp_path):
    wrapped = ["--embedding", "huggingface", "--embedding-model", minilm_path()]
    code, _, err = run(capsys, "audit", tmp_path, *wrapped, "--variant", "cls_hard", *FAST)
    assert code == 1 and "--variant: an audit over a LlamaIndex embedding scores plain and windows only" in err
    code, _, err = run(capsys, "audit", tmp_path, *wrapped, "--no-windows", *FAST)
    assert code == 1 and "--no-windows leaves plain alone" in err


def test_configurations_that_calibrate_are_refused_over_a_wrapped_encoder_before_any_call(hf_embedding, monkeypatch):
    from posfair_llamaindex import CalibrationConfig, PosFairEmbedding
    from posfair_llamaindex.errors import WrappedEmbeddingError
    from posfair_llamaindex.eval.audit import audit_texts
    from posfair_llamaindex.eval.runner import EvalConfig

    encoder = PosFairEmbedding(embed_model=hf_embedding, mode="plain").encoder

    def no_call(*args, **kwargs):
        raise AssertionError("the wrapped model was called")

    monkeypatch.setattr(type(hf_embedding), "_get_text_embeddings", no_call)
    configs = [EvalConfig.plain(), EvalConfig("calibrated 1", calibration=CalibrationConfig(strength=1.0))]
    with pytest.raises(WrappedEmbeddingError, match="'calibrated 1' .* cannot run over the wrapped embedding"):
        audit_texts({"a": "text"}, minilm_path(), configs=configs, encoder=encoder, show_progress=False)
