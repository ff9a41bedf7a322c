"""Reading and ingesting without a server or a model: which files are skipped and why, node ids, resuming,
and errors that name their file. The Qdrant backends are exercised in integration_tests/test_ingest.py."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
from llama_index.core import Document, SimpleDirectoryReader
from llama_index.core.schema import MetadataMode, NodeRelationship, RelatedNodeInfo, TextNode

from posfair_llamaindex.jobs.ingest import (
    NODE_ID_NAMESPACE,
    IngestError,
    IngestReport,
    SkippedFile,
    ingest_documents,
    node_parser_for,
    read_documents,
)
from posfair_llamaindex.qdrant import point_id
from posfair_llamaindex.qdrant.store import embedded_text_hash
from tests.utils import sample_texts

MiB = 1024 * 1024


# ----------------------------------------------------------------------------- reading
def messy_folder(root: Path) -> dict:
    """Good and bad files under ``root``; returns {name: expected skip reason or None}."""
    (root / "sub").mkdir(parents=True)
    files = {
        "a.txt": (b"The river city museum opened a new wing.\nIt holds ancient maps.\n", None),
        "sub/b.md": (b"# Notes\n\nFarmers planted barley near the old stone bridge.\n", None),
        "café-utf8.txt": ("Un café près du pont, déjà fermé.\n".encode(), None),
        "bom.txt": ("\ufeffText after a byte order mark.\n".encode("utf-8"), None),
        "empty.txt": (b"", "empty file"),
        "blank.md": (b"  \n\t\r\n   \n", "no text (whitespace only)"),
        "bom-blank.txt": ("\ufeff \n".encode("utf-8"), "no text (whitespace only)"),
        "binary.txt": (b"PK\x03\x04\x00\x00\x08\x00binary stuff\xff\x00", "binary file (NUL bytes)"),
        "latin1.txt": (
            "café au lait".encode("latin-1"),
            "not UTF-8 text (invalid byte 0xe9 at offset 3); convert it to UTF-8",
        ),
        "utf16.txt": ("hello".encode("utf-16"), "not UTF-8 text (UTF-16 byte order mark); convert it to UTF-8"),
        "sub/big.md": (b"word " * 600, "larger than the 2 KiB limit (2.9 KiB)"),
        "ignored.csv": (b"a,b\n1,2\n", "not a candidate"),
    }
    for name, (data, _) in files.items():
        (root / name).write_bytes(data)
    return {name: reason for name, (_, reason) in files.items()}


def reference_documents(paths):
    """What ingest read before screening existed: SimpleDirectoryReader with file names as ids."""
    documents = SimpleDirectoryReader(input_files=[str(p) for p in paths], filename_as_id=True).load_data()
    for document in documents:
        document.excluded_embed_metadata_keys = list(document.metadata)
    return documents


def comparable(document: Document) -> dict:
    metadata = dict(document.metadata)
    metadata.pop("last_accessed_date", None)  # reading a file may move its access date (to the next day at midnight)
    return {
        "id": document.doc_id,
        "text": document.text,
        "metadata": metadata,
        "metadata_keys": sorted(document.metadata),
        "excluded_embed": document.excluded_embed_metadata_keys,
        "excluded_llm": document.excluded_llm_metadata_keys,
        "hash_input": document.get_content(metadata_mode=MetadataMode.EMBED),
    }


def test_messy_folder_skips_bad_files_with_reasons(tmp_path, caplog):
    expected = messy_folder(tmp_path / "corpus")
    root = (tmp_path / "corpus").resolve()
    with caplog.at_level(logging.WARNING, logger="posfair_llamaindex.jobs.ingest"):
        result = read_documents([str(tmp_path / "corpus")], max_file_bytes=2048)

    bad = {root / name: reason for name, reason in expected.items() if reason and reason != "not a candidate"}
    assert {s.path: s.reason for s in result.skipped} == bad
    assert all(isinstance(s, SkippedFile) for s in result.skipped)
    # only files that hold no text mark their earlier points as stale; unreadable ones leave them alone
    no_text = {"empty file", "no text (whitespace only)", "no text after loading"}
    assert {s.path: s.no_text for s in result.skipped} == {path: reason in no_text for path, reason in bad.items()}
    for path, reason in bad.items():  # one warning per skipped file, naming it and why
        assert sum(str(path) in r.getMessage() and reason in r.getMessage() for r in caplog.records) == 1

    good = sorted(root / name for name, reason in expected.items() if reason is None)
    assert [d.doc_id for d in result.documents] == [str(p) for p in good]
    assert [comparable(d) for d in result.documents] == [comparable(d) for d in reference_documents(good)]
    texts = {Path(d.doc_id).name: d.text for d in result.documents}
    assert texts["café-utf8.txt"] == "Un café près du pont, déjà fermé.\n"
    assert set(result.documents[0].metadata) >= {"file_path", "file_name", "file_size", "last_modified_date"}
    assert result.documents[0].get_content(metadata_mode=MetadataMode.EMBED) == result.documents[0].text


def test_good_files_are_exactly_what_the_reader_gave_before(tmp_path):
    folder = tmp_path / "plain"
    folder.mkdir()
    texts = sample_texts(5, seed=3, min_words=20)
    for i, text in enumerate(texts):
        (folder / f"doc-{i}.{'md' if i % 2 else 'txt'}").write_text(text)
    result = read_documents([str(folder)])
    assert result.skipped == []
    files = sorted(folder.resolve().iterdir())
    assert [comparable(d) for d in result.documents] == [comparable(d) for d in reference_documents(files)]


def test_size_limit_message_and_default(tmp_path):
    huge = tmp_path / "huge.txt"
    with huge.open("wb") as handle:  # sparse: the size is rejected before anything is read
        handle.truncate(int(73.2 * MiB))
    (tmp_path / "ok.txt").write_text("small")
    result = read_documents([str(tmp_path)])
    assert result.skipped == [SkippedFile(huge.resolve(), "larger than the 50 MiB limit (73.2 MiB)")]
    assert [Path(d.doc_id).name for d in result.documents] == ["ok.txt"]


def test_unreadable_file_is_skipped(tmp_path, monkeypatch):
    locked = tmp_path / "locked.txt"
    locked.write_text("secret")
    (tmp_path / "ok.md").write_text("fine")
    real_open = Path.open

    def guarded(self, *args, **kwargs):  # like chmod 0, which root would ignore
        if self.name == "locked.txt":
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", guarded)
    result = read_documents([str(tmp_path)])
    monkeypatch.undo()
    assert [s.path for s in result.skipped] == [locked.resolve()]
    assert result.skipped[0].reason == "unreadable: PermissionError: Permission denied"
    assert [Path(d.doc_id).name for d in result.documents] == ["ok.md"]


def test_every_file_skipped_is_a_result_not_an_error(tmp_path):
    (tmp_path / "empty.txt").write_bytes(b"")
    result = read_documents([str(tmp_path)])
    assert result.documents == [] and [s.reason for s in result.skipped] == ["empty file"]


def test_a_file_named_twice_is_read_once(tmp_path):
    (tmp_path / "one.txt").write_text("only once")
    result = read_documents([str(tmp_path / "one.txt"), str(tmp_path), str(tmp_path / "one.txt")])
    assert [Path(d.doc_id).name for d in result.documents] == ["one.txt"]


def test_explicitly_named_bad_file_is_skipped_too(tmp_path):
    (tmp_path / "empty.md").write_bytes(b"")
    result = read_documents([str(tmp_path / "empty.md")])
    assert result.documents == [] and result.skipped == [
        SkippedFile((tmp_path / "empty.md").resolve(), "empty file", no_text=True)
    ]


def test_path_errors_keep_their_messages(tmp_path):
    with pytest.raises(FileNotFoundError, match="/no/such/folder: no such file or folder"):
        read_documents(["/no/such/folder"])
    (tmp_path / "data.csv").write_text("a,b")
    with pytest.raises(ValueError, match=r"data.csv: only \.txt, \.md files can be ingested"):
        read_documents([str(tmp_path / "data.csv")])
    with pytest.raises(ValueError, match=r"no \.txt, \.md files under"):
        read_documents([str(tmp_path)])


# ----------------------------------------------------------------------------- ingesting (fakes)
class WordTokenizer:
    """Stands in for a Hugging Face tokenizer: one token per word."""

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": text.split()}


def fake_model(content_limit=40, fail=None):
    calls = []

    def get_text_embedding_batch(texts, **kwargs):
        calls.append(list(texts))
        if fail is not None:
            raise fail
        return [[float(len(t)), 1.0] for t in texts]

    encoder = SimpleNamespace(tokenizer=WordTokenizer(), content_limit=content_limit)
    return SimpleNamespace(
        encoder=encoder,
        text_instruction=None,
        mode="calibrated",
        get_text_embedding_batch=get_text_embedding_batch,
        calls=calls,
    )


class FakeStore:
    """The three calls ingest makes, on a dict of points keyed by point id."""

    def __init__(self):
        self.points = {}
        self.fail_add_at = None
        self.adds = 0

    def stored_text_hashes(self, node_ids):
        return {n: self.points[point_id(n)]["hash"] for n in node_ids if point_id(n) in self.points}

    def add(self, nodes):
        self.adds += 1
        if self.adds == self.fail_add_at:
            raise RuntimeError("simulated crash")
        for node in nodes:
            assert node.embedding is not None
            self.points[point_id(node.node_id)] = {"doc": node.ref_doc_id, "hash": embedded_text_hash(node)}
        return [point_id(n.node_id) for n in nodes]

    def delete_stale(self, ref_doc_ids, keep_point_ids):
        keep = set(keep_point_ids)
        for pid in [p for p, v in self.points.items() if v["doc"] in ref_doc_ids and p not in keep]:
            del self.points[pid]


def docs(count=5, seed=0, words=(60, 120)):
    texts = sample_texts(count, seed=seed, min_words=words[0], max_words=words[1])
    return [file_document(f"/corpus/file-{i}.txt", t) for i, t in enumerate(texts)]


def file_document(path, text):
    """A document as read_documents makes them: its file metadata is not embedded."""
    return Document(text=text, doc_id=path, metadata={"file_path": path}, excluded_embed_metadata_keys=["file_path"])


def with_text(document, text):
    return file_document(document.doc_id, text)


def test_node_ids_depend_only_on_document_id_and_position():
    model = fake_model()
    parser = node_parser_for(model, chunk_size=30)
    document = docs(1)[0]
    nodes = parser.get_nodes_from_documents([document])
    assert len(nodes) > 2
    assert [n.node_id for n in nodes] == [
        str(uuid.uuid5(NODE_ID_NAMESPACE, f"{document.doc_id}#{i}")) for i in range(len(nodes))
    ]
    again = node_parser_for(model, chunk_size=30).get_nodes_from_documents([with_text(document, document.text)])
    assert [n.node_id for n in again] == [n.node_id for n in nodes]
    with pytest.raises(ValueError, match="exceeds"):
        node_parser_for(model, chunk_size=41)


def test_rerun_embeds_nothing_and_an_edit_embeds_only_that_file():
    model, store = fake_model(), FakeStore()
    parser = node_parser_for(model, chunk_size=30)
    corpus = docs()
    expected = len(parser.get_nodes_from_documents(corpus))
    first = ingest_documents(corpus, model, store, node_parser=parser, documents_per_batch=2, show_progress=False)
    assert first == IngestReport(documents=5, nodes=expected, embedded=expected, unchanged=0)
    assert len(model.calls) == 3 and len(store.points) == expected  # one embedding call per batch

    second = ingest_documents(corpus, model, store, node_parser=parser, documents_per_batch=2, show_progress=False)
    assert (second.embedded, second.unchanged, len(model.calls)) == (0, expected, 3)

    edited = with_text(corpus[3], corpus[3].text.replace("the", "a", 1))
    own = len(parser.get_nodes_from_documents([edited]))
    third = ingest_documents([*corpus[:3], edited, corpus[4]], model, store, node_parser=parser, show_progress=False)
    assert (
        third.embedded == 1 and third.unchanged == expected - 1 and third.nodes == expected
    )  # only the node holding the edit
    assert own == len(parser.get_nodes_from_documents([corpus[3]]))

    shorter = with_text(corpus[0], " ".join(corpus[0].text.split()[:10]))
    report = ingest_documents([shorter], model, store, node_parser=parser, show_progress=False)
    assert (report.nodes, report.embedded) == (1, 1)
    assert sum(v["doc"] == corpus[0].doc_id for v in store.points.values()) == 1


def test_crash_between_batches_resumes_without_reembedding():
    model, store = fake_model(), FakeStore()
    parser = node_parser_for(model, chunk_size=30)
    corpus = docs(6)
    expected = len(parser.get_nodes_from_documents(corpus))
    store.fail_add_at = 3
    with pytest.raises(RuntimeError, match="simulated crash"):  # store errors propagate as they are
        ingest_documents(corpus, model, store, node_parser=parser, documents_per_batch=2, show_progress=False)
    survived = len(store.points)
    assert survived == len(parser.get_nodes_from_documents(corpus[:4]))
    store.fail_add_at = None
    report = ingest_documents(corpus, model, store, node_parser=parser, documents_per_batch=2, show_progress=False)
    assert (report.unchanged, report.embedded, report.nodes) == (survived, expected - survived, expected)
    assert len(store.points) == expected


def test_embedding_error_names_the_file_and_node_of_the_position():
    parser = node_parser_for(fake_model(), chunk_size=30)
    corpus = docs(3)
    counts = [len(parser.get_nodes_from_documents([d])) for d in corpus]
    assert counts[1] >= 2
    position = counts[0] + 1  # the second node of the second file
    cause = ValueError(f"text at position {position} is empty or whitespace only")
    model = fake_model(fail=cause)
    with pytest.raises(IngestError) as info:
        ingest_documents(corpus, model, FakeStore(), node_parser=parser, show_progress=False)
    message = str(info.value)
    assert message.startswith("/corpus/file-1.txt: embedding node 1 failed")
    assert f"text at position {position} is empty" in message
    assert all(f"/corpus/file-{i}.txt" in message for i in range(3))  # the batch's files
    assert info.value.__cause__ is cause


def test_embedding_error_without_a_position_names_the_batch_files():
    model = fake_model(fail=RuntimeError("CUDA out of memory"))
    with pytest.raises(IngestError, match="CUDA out of memory") as info:
        ingest_documents(
            docs(3),
            model,
            FakeStore(),
            node_parser=node_parser_for(model, chunk_size=30),
            documents_per_batch=2,
            show_progress=False,
        )
    message = str(info.value)
    assert message.startswith("embedding failed for a batch of ")
    assert "/corpus/file-0.txt" in message and "/corpus/file-1.txt" in message and "file-2" not in message
    assert isinstance(info.value, RuntimeError)


class StubParser:
    """Returns fixed nodes per document, one of them with nothing to embed."""

    def get_nodes_from_documents(self, documents):
        (document,) = documents
        if "broken" in document.doc_id:
            raise ValueError("tokenizer exploded")
        texts = ["first part", "   \n ", "third part"]
        source = {NodeRelationship.SOURCE: RelatedNodeInfo(node_id=document.doc_id)}
        return [TextNode(text=t, id_=f"{document.doc_id}#{i}", relationships=source) for i, t in enumerate(texts)]


def test_whitespace_nodes_are_dropped_with_a_warning(caplog):
    model, store = fake_model(), FakeStore()
    with caplog.at_level(logging.WARNING, logger="posfair_llamaindex.jobs.ingest"):
        report = ingest_documents(
            [Document(text="x", doc_id="/c/a.txt")], model, store, node_parser=StubParser(), show_progress=False
        )
    assert (report.nodes, report.embedded) == (2, 2)
    assert model.calls == [["first part", "third part"]]
    assert set(store.points) == {point_id("/c/a.txt#0"), point_id("/c/a.txt#2")}
    assert any("/c/a.txt" in r.getMessage() and "node 1" in r.getMessage() for r in caplog.records)


def test_split_failure_and_duplicate_documents_name_the_file():
    model = fake_model()
    with pytest.raises(IngestError, match="/c/broken.txt: splitting into nodes failed: tokenizer exploded"):
        ingest_documents(
            [Document(text="x", doc_id="/c/broken.txt")],
            model,
            FakeStore(),
            node_parser=StubParser(),
            show_progress=False,
        )
    twice = [Document(text="x", doc_id="/c/a.txt"), Document(text="y", doc_id="/c/a.txt")]
    with pytest.raises(IngestError, match="/c/a.txt: document id .* is passed twice"):
        ingest_documents(twice, model, FakeStore(), node_parser=StubParser(), show_progress=False)


def test_empty_document_removes_its_points():
    model, store = fake_model(), FakeStore()
    parser = node_parser_for(model, chunk_size=30)
    corpus = docs(2)
    ingest_documents(corpus, model, store, node_parser=parser, show_progress=False)
    emptied = with_text(corpus[1], "")
    report = ingest_documents([emptied], model, store, node_parser=parser, show_progress=False)
    assert (report.nodes, report.embedded) == (0, 0)
    assert {v["doc"] for v in store.points.values()} == {corpus[0].doc_id}
