"""Ingesting real folders into tagged collections: messy corpora, reruns that embed nothing, and a
``kill -9`` in the middle of an ingest that a rerun completes without encoding the survivors again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from posfair_llamaindex.jobs.ingest import IngestReport, ingest_documents, node_parser_for, read_documents
from posfair_llamaindex.qdrant import point_id, tagged_vector_store
from posfair_llamaindex.qdrant.embedded import folder_engine, open_embedded
from tests.utils import minilm_path, sample_texts

CHUNK = 64


def write_corpus(folder: Path, count: int, seed: int = 0, words=(60, 160)) -> list:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, text in enumerate(sample_texts(count, seed=seed, min_words=words[0], max_words=words[1])):
        path = folder / f"doc-{i:02d}.{'md' if i % 3 == 0 else 'txt'}"
        # sentences, so that the splitter cuts where a reader would
        path.write_text(". ".join(text.split(" the ")) + ".\n")
        paths.append(path)
    return paths


def messy_corpus(folder: Path) -> dict:
    """Good files with the kinds of bad ones real folders hold between them; returns {bad name: reason}."""
    write_corpus(folder, 10)
    bad = {
        "doc-03-empty.txt": (b"", "empty file"),
        "doc-05-blank.md": (b"\n \n\t\n", "no text (whitespace only)"),
        "doc-06-image.txt": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary file (NUL bytes)"),
        "doc-07-latin1.txt": (
            "Les élèves".encode("latin-1"),
            "not UTF-8 text (invalid byte 0xe9 at offset 4); convert it to UTF-8",
        ),
        "doc-08-huge.md": (b"many words " * 1000, "larger than the 8 KiB limit (10.7 KiB)"),
    }
    for name, (data, _) in bad.items():
        (folder / name).write_bytes(data)
    return {name: reason for name, (_, reason) in bad.items()}


def point_ids(client, name) -> list:
    return [p.id for p in client.scroll(name, limit=10_000)[0]]


def doc_ids(client, name) -> set:
    return {p.payload["doc_id"] for p in client.scroll(name, limit=10_000, with_payload=["doc_id"])[0]}


def test_messy_folder_stores_the_good_files_and_reports_the_rest(qdrant, embed_model, tmp_path):
    bad = messy_corpus(tmp_path / "messy")
    result = read_documents([str(tmp_path / "messy")], max_file_bytes=8 * 1024)
    assert {s.path.name: s.reason for s in result.skipped} == bad
    assert len(result.documents) == 10

    name = qdrant.collection()
    store = tagged_vector_store(qdrant.client, name, embed_model)
    parser = node_parser_for(embed_model, chunk_size=CHUNK)
    report = ingest_documents(
        result.documents, embed_model, store, node_parser=parser, documents_per_batch=4, show_progress=False
    )
    expected = parser.get_nodes_from_documents(result.documents)
    assert report == IngestReport(documents=10, nodes=len(expected), embedded=len(expected), unchanged=0, skipped=[])
    assert len(expected) > 10
    assert sorted(point_ids(qdrant.client, name)) == sorted(point_id(n.node_id) for n in expected)
    assert doc_ids(qdrant.client, name) == {d.doc_id for d in result.documents}


def test_rerun_embeds_nothing_and_an_edit_embeds_only_that_file(qdrant, embed_model, tmp_path, monkeypatch):
    paths = write_corpus(tmp_path / "corpus", 6, seed=1, words=(120, 220))
    name = qdrant.collection()
    store = tagged_vector_store(qdrant.client, name, embed_model)
    parser = node_parser_for(embed_model, chunk_size=CHUNK)
    documents = read_documents([str(tmp_path / "corpus")]).documents
    first = ingest_documents(documents, embed_model, store, node_parser=parser, show_progress=False)
    assert first.embedded == first.nodes == len(point_ids(qdrant.client, name))
    ids = sorted(point_ids(qdrant.client, name))

    embedded_texts = []
    real = type(embed_model).get_text_embedding_batch

    def spy(self, texts, *args, **kwargs):
        embedded_texts.extend(texts)
        return real(self, texts, *args, **kwargs)

    monkeypatch.setattr(type(embed_model), "get_text_embedding_batch", spy)
    second = ingest_documents(
        read_documents([str(tmp_path / "corpus")]).documents,
        embed_model,
        store,
        node_parser=parser,
        show_progress=False,
    )
    assert (second.embedded, second.unchanged, second.nodes) == (0, first.nodes, first.nodes)
    assert embedded_texts == [] and sorted(point_ids(qdrant.client, name)) == ids

    # the last sentence of one file changes: only its nodes from there on are embedded again
    edited = paths[2]
    old_nodes = parser.get_nodes_from_documents([d for d in documents if d.doc_id == str(edited.resolve())])
    edited.write_text(edited.read_text().rstrip(".\n") + " and a new closing sentence about glaciers.\n")
    third_docs = read_documents([str(tmp_path / "corpus")]).documents
    new_nodes = parser.get_nodes_from_documents([d for d in third_docs if d.doc_id == str(edited.resolve())])
    old_texts = {n.node_id: n.text for n in old_nodes}
    changed = [n for n in new_nodes if old_texts.get(n.node_id) != n.text]
    third = ingest_documents(third_docs, embed_model, store, node_parser=parser, show_progress=False)
    assert 1 <= third.embedded == len(changed) <= len(new_nodes) < third.nodes
    assert third.unchanged == third.nodes - third.embedded
    assert embedded_texts == [n.text for n in changed]
    assert len(point_ids(qdrant.client, name)) == third.nodes

    # the file shrinks to one sentence: its surplus points go
    edited.write_text("A short note.\n")
    fourth = ingest_documents(
        read_documents([str(tmp_path / "corpus")]).documents,
        embed_model,
        store,
        node_parser=parser,
        show_progress=False,
    )
    assert (
        fourth.embedded == 1 and len(point_ids(qdrant.client, name)) == fourth.nodes == third.nodes - len(new_nodes) + 1
    )


CHILD = textwrap.dedent(
    """
    import sys, time
    import torch
    from posfair_llamaindex import PosFairEmbedding
    from posfair_llamaindex.jobs.ingest import ingest_documents, node_parser_for, read_documents
    from posfair_llamaindex.qdrant import tagged_vector_store
    from posfair_llamaindex.qdrant.embedded import open_embedded

    torch.set_num_threads(1)
    model_path, corpus, storage, collection, chunk, engine = sys.argv[1:7]
    embed_model = PosFairEmbedding(model_path, embed_batch_size=16)
    client = open_embedded(storage, engine=engine)
    store = tagged_vector_store(client, collection, embed_model)


    class Announcing:
        # prints after each batch is upserted; sleeps after the second so the test can kill it there
        def __init__(self, inner):
            self.inner, self.batches = inner, 0

        def add(self, nodes):
            ids = self.inner.add(nodes)
            self.batches += 1
            print(f"written {len(ids)}", flush=True)
            if self.batches == 2:
                time.sleep(60)
            return ids

        def __getattr__(self, name):
            return getattr(self.inner, name)


    documents = read_documents([corpus]).documents
    print(f"ready {len(documents)}", flush=True)
    ingest_documents(documents, embed_model, Announcing(store), node_parser=node_parser_for(embed_model, int(chunk)),
                     documents_per_batch=2, show_progress=False)
    print("finished", flush=True)
    """
)


@pytest.mark.parametrize("engine", ["edge", "local"])
def test_kill_9_mid_ingest_then_rerun_completes_without_reembedding(embed_model, tmp_path, engine):
    corpus, storage, name = tmp_path / "corpus", tmp_path / "qdrant", "posfair-test-killed"
    write_corpus(corpus, 10, seed=2)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    with open(tmp_path / "child.err", "w") as stderr:
        child = subprocess.Popen(
            [sys.executable, str(script), minilm_path(), str(corpus), str(storage), name, str(CHUNK), engine],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=env,
        )
        # the test waits on the child's own lines; this only ends a child that is stuck for good
        guard = threading.Timer(1800, child.kill)
        guard.start()
        lines = []
        try:
            for line in child.stdout:
                lines.append(line.strip())
                if sum(x.startswith("written") for x in lines) == 2:
                    os.kill(child.pid, signal.SIGKILL)
                    break
            child.wait(timeout=60)
        finally:
            guard.cancel()
            child.stdout.close()
    assert lines[0] == "ready 10" and child.returncode == -signal.SIGKILL, (
        lines,
        (tmp_path / "child.err").read_text()[-3000:],
    )

    documents = read_documents([str(corpus)]).documents
    parser = node_parser_for(embed_model, chunk_size=CHUNK)
    expected = {point_id(n.node_id) for n in parser.get_nodes_from_documents(documents)}
    written_by_child = sum(int(x.split()[1]) for x in lines if x.startswith("written"))
    first_two_batches = {point_id(n.node_id) for n in parser.get_nodes_from_documents(documents[:4])}

    client = open_embedded(storage)  # only now: one process per folder (either engine)
    try:
        assert folder_engine(storage) == engine
        store = tagged_vector_store(client, name, embed_model)
        survived = point_ids(client, name)
        # everything upserted before the kill is there (local mode commits every point to SQLite; Edge has each
        # write in its write-ahead log when the call returns)
        assert set(survived) == first_two_batches and len(survived) == written_by_child
        assert 0 < len(survived) < len(expected)

        report = ingest_documents(
            documents, embed_model, store, node_parser=parser, documents_per_batch=2, show_progress=False
        )
        stored = point_ids(client, name)
        assert client.count(name, exact=True).count == len(stored) == len(set(stored)) == len(expected) == report.nodes
        assert set(stored) == expected
        assert report.unchanged == len(survived) and report.embedded == len(expected) - len(survived)
    finally:
        client.close()
