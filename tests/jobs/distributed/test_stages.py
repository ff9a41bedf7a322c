"""The pipeline's stages and writer, called in this process (no Ray cluster): the same points as one-process
ingest, edits handled the same way, and a Qdrant server that refuses writes."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from qdrant_client import QdrantClient

from posfair_llamaindex import PosFairEmbedding
from posfair_llamaindex.jobs.ingest import DEFAULT_MAX_FILE_BYTES
from posfair_llamaindex.qdrant import QdrantUnavailableError, RetryConfig, tagged_vector_store
from tests.jobs.distributed.conftest import NODE_TOKENS, assert_same_collection, one_process_ingest
from tests.jobs.distributed.qdrant_stub import QdrantStub

pytest.importorskip("ray.data", reason="Ray Data is not installed: pip install 'posfair-llamaindex[ray]'")

from posfair_llamaindex.jobs.distributed.actors import EmbedDocuments, ParserConfig, prepare_documents  # noqa: E402
from posfair_llamaindex.jobs.distributed.lookup import snapshot  # noqa: E402
from posfair_llamaindex.jobs.distributed.pipeline import ActorResources, actor_settings  # noqa: E402
from posfair_llamaindex.jobs.distributed.ray_config import QdrantTarget, RayIngestConfig  # noqa: E402
from posfair_llamaindex.jobs.distributed.rows import from_table, to_table  # noqa: E402
from posfair_llamaindex.jobs.distributed.writer import write_rows  # noqa: E402

FAST_RETRY = RetryConfig(retries=3, backoff_s=0.01)


@pytest.fixture
def embed_model(tiny_model_dir):
    return PosFairEmbedding(tiny_model_dir("bert"), embed_batch_size=4)


def run_stages(corpus, embed_model, client, batch_files: int = 3):
    """Prepare and embed ``corpus`` as the Ray stages do, a batch of files at a time."""
    parser = ParserConfig.of(embed_model, NODE_TOKENS, 0)
    lookup = snapshot(client, "docs", embed_model.fingerprint(), FAST_RETRY)
    actor = ActorResources(gpus=0, cpus=1, prepare_tasks=1, writers=1)
    embedder = EmbedDocuments(actor_settings(embed_model, RayIngestConfig(), actor), embed_model.fingerprint())
    files = sorted(str(path) for path in corpus.rglob("*") if path.is_file())
    rows = []
    for start in range(0, len(files), batch_files):
        batch = pa.table({"path": files[start : start + batch_files]})
        prepared = prepare_documents(batch, parser=parser, lookup=lookup, max_file_bytes=DEFAULT_MAX_FILE_BYTES)
        rows += from_table(embedder(prepared))
    return rows


def test_stages_write_what_one_process_ingest_writes_and_follow_edits(corpus, embed_model):
    expected = QdrantClient(":memory:")
    with QdrantStub(refuse={"upsert": 2, "delete": 1}) as stub:
        client = QdrantClient(url=stub.url)
        store = tagged_vector_store(client, "docs", embed_model)
        rows = run_stages(corpus, embed_model, client)
        assert from_table(to_table(rows))[0].nodes == rows[0].nodes  # rows survive Arrow unchanged
        counts = write_rows(store, rows, retry=FAST_RETRY, upload_points=5)
        one_process_ingest([corpus], embed_model, expected, "docs")
        count = assert_same_collection(expected, stub.local, "docs")
        assert (counts.nodes, counts.embedded, len(counts.skipped)) == (count, count, 2)
        assert stub.refused["upsert"] == 2 and stub.refused["delete"] == 1

        # one file shrinks to a sentence, another is emptied: the same points go as in one-process ingest,
        # and only the new node is embedded
        shrunk, emptied = sorted(corpus.rglob("doc-0[12].txt"))
        shrunk.write_text("A short note about the river.\n")
        emptied.write_text("   \n")
        again = write_rows(store, run_stages(corpus, embed_model, client), retry=FAST_RETRY, upload_points=5)
        one_process_ingest([corpus], embed_model, expected, "docs")
        new_count = assert_same_collection(expected, stub.local, "docs")
        assert new_count < count and again.embedded == 1 and again.unchanged == again.nodes - 1
        assert str(emptied) in {str(item.path) for item in again.skipped if item.no_text}


def test_a_server_that_keeps_refusing_fails_with_its_address(corpus, embed_model):
    with QdrantStub(refuse={"upsert": 100}) as stub:
        client = QdrantClient(url=stub.url)
        store = tagged_vector_store(client, "docs", embed_model)
        rows = run_stages(corpus, embed_model, client, batch_files=20)
        with pytest.raises(QdrantUnavailableError, match=f"Qdrant at {stub.url} did not answer .* after 4 attempts"):
            write_rows(store, rows, retry=FAST_RETRY, upload_points=100)
        assert stub.seen["upsert"] == 4 and stub.local.count("docs").count == 0


def test_targets_are_validated():
    from posfair_llamaindex.jobs.distributed.sink import PosFairQdrantDatasink
    from posfair_llamaindex.jobs.distributed.store_layout import StoreLayout

    with pytest.raises(ValueError, match="exactly one of url"):
        QdrantTarget(collection="c")
    with pytest.raises(ValueError, match="an embedded folder has one shard"):
        QdrantTarget(collection="c", path="q", shard_number=2)
    from posfair_llamaindex.qdrant.vector_layout import VectorLayout, dense_vector

    layout = StoreLayout("c", "f" * 12, VectorLayout(dimension=8, dense=(dense_vector("", 8),)).model_dump_json(), "")
    assert hash(layout) == hash(StoreLayout.of(layout.open_store(QdrantClient(":memory:"), FAST_RETRY)))
    with pytest.raises(ValueError, match="one process at a time"):
        PosFairQdrantDatasink(QdrantTarget(collection="c", path="q"), layout, retry=FAST_RETRY, upload_points=8)
    assert QdrantTarget(collection="c", url="http://q:6333", replication_factor=2).collection_options() == {
        "replication_factor": 2
    }


@pytest.mark.parametrize("mode", ["dual", "windows"])
def test_documents_carry_every_named_vector_as_in_one_process_ingest(corpus, tiny_model_dir, mode):
    """Dual (plain and calibrated) and windows (plain and a multivector of windows) points, written by a worker's
    store rebuilt from the layout the driver found, equal one-process ingest's."""
    from posfair_llamaindex.encoding.windows import WindowConfig
    from posfair_llamaindex.jobs.distributed.store_layout import StoreLayout

    # the smallest windows: the node splitter leaves room for the metadata, whose file path is as long as the
    # test's temporary folder, so nodes are shorter where that folder's path is longer (a pytest-xdist worker's)
    windows = WindowConfig(size=8, document="plain") if mode == "windows" else None
    embed_model = PosFairEmbedding(
        tiny_model_dir("bert"), mode=mode, windows=windows, pooling="first", embed_batch_size=4
    )
    expected, actual = QdrantClient(":memory:"), QdrantClient(":memory:")
    one_process_ingest([corpus], embed_model, expected, "docs")
    driver = tagged_vector_store(actual, "docs", embed_model)
    worker = StoreLayout.of(driver).open_store(actual, FAST_RETRY)
    counts = write_rows(worker, run_stages(corpus, embed_model, actual), retry=FAST_RETRY, upload_points=7)
    want = {str(p.id): p for p in expected.scroll("docs", limit=1000, with_vectors=True)[0]}
    got = {str(p.id): p for p in actual.scroll("docs", limit=1000, with_vectors=True)[0]}
    assert sorted(got) == sorted(want) and counts.embedded == len(want)
    names = {"plain", "calibrated"} if mode == "dual" else {"plain", "windows"}
    for point_id, record in want.items():
        assert set(got[point_id].vector) == names and got[point_id].payload == record.payload
        for name in names:
            np.testing.assert_allclose(got[point_id].vector[name], record.vector[name], atol=1e-5, rtol=0)
    if mode == "windows":  # some nodes span several windows
        assert max(len(p.vector["windows"]) for p in got.values()) > 1
