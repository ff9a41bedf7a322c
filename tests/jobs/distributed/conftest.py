"""One local Ray for the whole session (2 CPUs), a small corpus, and one-process ingest to compare against."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from qdrant_client import QdrantClient

from posfair_llamaindex.jobs.ingest import ingest_documents, node_parser_for, read_documents
from posfair_llamaindex.qdrant import tagged_vector_store
from tests.utils import sample_texts

NODE_TOKENS = 64  # several nodes per file, so documents span batches of nodes


@pytest.fixture(scope="session")
def ray_cluster():
    """The GCS address of a local Ray with 2 CPUs, started once for every test that needs Ray."""
    ray = pytest.importorskip("ray", reason="Ray Data is not installed: pip install 'posfair-llamaindex[ray]'")
    pytest.importorskip("ray.data", reason="Ray Data is not installed: pip install 'posfair-llamaindex[ray]'")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


def write_corpus(folder: Path, count: int, seed: int = 0) -> list[Path]:
    """``count`` text and markdown files of sentences, plus an empty file and a binary one that are skipped."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, text in enumerate(sample_texts(count, seed=seed, min_words=40, max_words=220)):
        path = folder / ("notes" if i % 3 == 0 else "") / f"doc-{i:02d}.{'md' if i % 3 == 0 else 'txt'}"
        path.parent.mkdir(exist_ok=True)
        path.write_text(". ".join(text.split(" the ")).capitalize() + ".\n")
        paths.append(path)
    (folder / "empty.txt").write_bytes(b"")
    (folder / "image.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    return paths


@pytest.fixture
def corpus(tmp_path) -> Path:
    write_corpus(tmp_path / "corpus", 7)
    return tmp_path / "corpus"


def one_process_ingest(paths, embed_model, client, collection: str, **collection_options):
    """What ``posfair ingest --engine local`` does: read, drop emptied files' points, ingest."""
    read = read_documents([str(p) for p in paths])
    store = tagged_vector_store(client, collection, embed_model, collection_options=collection_options or None)
    for item in read.skipped:
        if item.no_text:
            store.delete(str(item.path))
    parser = node_parser_for(embed_model, NODE_TOKENS)
    report = ingest_documents(read.documents, embed_model, store, node_parser=parser, show_progress=False)
    report.skipped = read.skipped
    return report


def points(client: QdrantClient, collection: str) -> dict:
    records, offset = client.scroll(collection, limit=10_000, with_payload=True, with_vectors=True)
    assert offset is None
    return {str(r.id): r for r in records}


def assert_same_collection(expected: QdrantClient, actual: QdrantClient, collection: str) -> int:
    """The same point ids, payloads and tag, vectors within 1e-5; returns the point count."""
    want, got = points(expected, collection), points(actual, collection)
    assert sorted(got) == sorted(want)
    for point_id, record in want.items():
        assert got[point_id].payload == record.payload, point_id
        np.testing.assert_allclose(np.asarray(got[point_id].vector), np.asarray(record.vector), atol=1e-5, rtol=0)
    assert actual.get_collection(collection).config.metadata == expected.get_collection(collection).config.metadata
    assert actual.count(collection, exact=True).count == len(want)
    return len(want)
