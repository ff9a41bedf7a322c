"""posfair audit on a folder (the shipped examples) and on a collection written by posfair ingest."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from posfair_llamaindex.cli import main
from tests.eval.test_pseudo_queries import corpus

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "docs"
FAST = ["--max-documents", "20", "--bootstrap", "20", "--basket-size", "16"]


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_audit_of_the_shipped_examples_prints_json_and_writes_the_report(capsys, tmp_path):
    code, out, err = run(
        capsys,
        "audit",
        EXAMPLES,
        "--pooling",
        "first",
        "--strengths",
        "1",
        "--no-dual",
        "--json",
        "--recommend",
        "--out",
        tmp_path,
        *FAST,
    )
    assert code == 0, err
    rows = json.loads(out)
    assert [(r["mode"], r["strength"]) for r in rows] == [("plain", None), ("calibrated", 1.0), ("windows", None)]
    for row in rows:
        assert {"hm", "psi", "groups", "ndcg", "recommended"} <= set(row)
        assert set(row["groups"]) == {"begin", "middle", "end"} and len(row["hm"]) == 3
    assert sum(r["recommended"] for r in rows) == 1
    saved = json.loads((tmp_path / "audit-first.json").read_text())
    assert saved["rows"] == rows and saved["recommendation"]["reason"]
    # --json keeps the reason: on the recommended row, and on no other
    (chosen,) = [r for r in rows if r["recommended"]]
    assert chosen["reason"] == saved["recommendation"]["reason"]
    assert all(r["reason"] is None for r in rows if not r["recommended"])
    assert "20 long enough to audit" not in saved["corpus"]  # 40 shipped documents, 20 sampled
    assert (tmp_path / "audit-first.png").stat().st_size > 10_000
    assert "| plain |" in (tmp_path / "audit-first.md").read_text()


@pytest.mark.parametrize("mode", [(), ("--mode", "windows", "--window-size", "32")])
def test_audit_of_a_collection_uses_the_tag_and_the_stored_node_texts(capsys, tmp_path, tiny_model_dir, mode):
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, text in corpus(24).items():
        (folder / f"{name}.txt").write_text(text)
    qdrant = tmp_path / "qdrant"
    code, _, err = run(
        capsys,
        "ingest",
        folder,
        "--collection",
        "mine",
        "--qdrant-path",
        qdrant,
        "--model",
        tiny_model_dir("bert"),
        "--basket-size",
        "16",
        *mode,
    )
    assert code == 0, err
    # no --model: the encoder comes from the collection's tag
    code, out, err = run(
        capsys,
        "audit",
        "--collection",
        "mine",
        "--qdrant-path",
        qdrant,
        "--strengths",
        "0.5",
        "--out",
        tmp_path / "out",
        *FAST,
    )
    assert code == 0, err
    assert "pseudo-queries (drop-words, 20 documents)" in out and "24 long enough to audit" in out
    assert "| dual max 1 |" in out and "| calibrated 0.5 |" in out
    # windows mode is scored too: with the collection's own windows, or with its defaults
    assert ("| windows 32/32 + none |" if mode else "| windows 128/128 + none |") in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "give PATHs to audit, or --collection NAME"),
        ([str(EXAMPLES), "--collection", "x"], "not both"),
        ([str(EXAMPLES), "--max-documents", "5"], "--max-documents must be at least 20"),
        ([str(EXAMPLES), "--strengths", "0.5,1.5"], r"--strengths must be numbers in \(0, 1\]"),
        ([str(EXAMPLES), "--strengths", "half"], "comma list of numbers"),
        (["--collection", "x", "--node-tokens", "64"], "--node-tokens splits PATHs"),
    ],
)
def test_bad_options_are_refused_before_any_model_loads(capsys, argv, message):
    code, _, err = run(capsys, "audit", *argv)
    assert code == 1
    assert re.search(message, err), err


def test_a_missing_collection_and_a_corpus_too_small_are_named(capsys, tmp_path, tiny_model_dir):
    from qdrant_client import QdrantClient

    QdrantClient(path=str(tmp_path / "q")).close()  # an empty store
    code, _, err = run(capsys, "audit", "--collection", "nope", "--qdrant-path", tmp_path / "q")
    assert code == 1 and "collection 'nope' does not exist" in err
    code, _, err = run(capsys, "audit", "--collection", "nope", "--qdrant-path", tmp_path / "typo")
    assert code == 1 and "does not exist; nothing was created" in err and not (tmp_path / "typo").exists()
    small = tmp_path / "small"
    small.mkdir()
    for name, text in list(corpus(5).items()):
        (small / f"{name}.txt").write_text(text)
    code, _, err = run(capsys, "audit", small, "--model", tiny_model_dir("bert"), "--basket-size", "16")
    assert code == 1 and "too few documents to audit: 5 document(s): 5 long enough" in err


def test_a_collection_too_small_to_audit_is_refused_before_the_model_loads(tmp_path, tiny_model_dir):
    """Screening only removes documents, so a collection of fewer node texts than the audit needs is refused from
    its count alone: torch and transformers never load."""
    from llama_index.core.schema import TextNode

    from posfair_llamaindex.embedding import PosFairEmbedding
    from posfair_llamaindex.qdrant import EdgeQdrantClient, tagged_vector_store
    from tests.cli.test_import_weight import probe

    embedding = PosFairEmbedding(tiny_model_dir("bert"))
    client = EdgeQdrantClient(path=str(tmp_path / "q"))
    texts = list(corpus(3).values())
    nodes = [
        TextNode(id_=f"n{i}", text=text, embedding=vector)
        for i, (text, vector) in enumerate(zip(texts, embedding.get_text_embedding_batch(texts), strict=True))
    ]
    tagged_vector_store(client, "small", embedding).add(nodes)
    client.close()
    (report,), stderr = probe(["audit", "--collection", "small", "--qdrant-path", tmp_path / "q"])
    assert report["code"] == 1
    assert "collection 'small' holds 3 node text(s); the audit needs at least 20" in stderr
    assert "torch" not in report["heavy"] and "transformers" not in report["heavy"]
