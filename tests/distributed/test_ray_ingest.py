"""Ray ingest on a local Ray gives exactly the collection of one-process ingest, and resumes.

Each test runs whole Ray jobs (the slow part is starting the actors), so each checks several things of
one job: the collection, the counts, the retries.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from qdrant_client import QdrantClient

from posfair_llamaindex import PosFairEmbedding
from posfair_llamaindex.qdrant import RetryPolicy
from tests.distributed.conftest import (
    NODE_TOKENS,
    assert_same_collection,
    one_process_ingest,
    points,
    write_corpus,
)
from tests.distributed.qdrant_stub import QdrantStub
from tests.utils import minilm_path

pytest.importorskip("ray.data", reason="Ray Data is not installed: pip install 'posfair-llamaindex[ray]'")

from posfair_llamaindex.distributed import EmbedDocuments, QdrantTarget, RayIngestSettings, ray_ingest  # noqa: E402

FAST_RETRY = RetryPolicy(retries=4, backoff_s=0.05)


def raising_once(marker: str) -> type[EmbedDocuments]:
    """An embedding stage whose first batch, in whichever actor gets it, raises; ``marker`` records the pid."""

    class RaisesOnce(EmbedDocuments):
        def __call__(self, batch):
            if not os.path.exists(marker):
                with open(marker, "w") as handle:
                    handle.write(str(os.getpid()))
                raise RuntimeError("injected failure of an embedding actor")
            return super().__call__(batch)

    return RaisesOnce


def test_server_ingest_writes_from_workers_through_refusals_and_a_failing_actor(ray_cluster, corpus, tmp_path):
    embed_model = PosFairEmbedding(minilm_path(), embed_batch_size=8)
    expected = QdrantClient(":memory:")
    local = one_process_ingest([corpus], embed_model, expected, "docs")
    marker = str(tmp_path / "raised")
    settings = RayIngestSettings(actors=1, batch_size=3, upload_points=4, retry=FAST_RETRY, show_progress=False)
    with QdrantStub() as stub:
        # three files are on the server already: the reading tasks ask it, and only the others are embedded
        first = sorted(corpus.rglob("doc-0[0-2].*"))
        stored = one_process_ingest(first, embed_model, QdrantClient(url=stub.url), "docs").nodes
        # from now on the server refuses the first upserts and the first read of stored hashes, as a loaded
        # cluster does, and the first batch's embedding actor raises
        stub.refuse.update({"upsert": 3, "retrieve": 1})
        target = QdrantTarget(collection="docs", url=stub.url)
        report = ray_ingest(
            [str(corpus)], embed_model, target, settings, node_tokens=NODE_TOKENS, embedder=raising_once(marker)
        )
        assert Path(marker).read_text() != str(os.getpid())  # it raised in an actor, and the batch ran again
        assert stub.refused["upsert"] == 3 and stub.refused["retrieve"] == 1
        count = assert_same_collection(expected, stub.local, "docs")
        assert (report.documents, report.nodes, report.embedded, report.unchanged) == (7, count, count - stored, stored)
        assert report.nodes == local.nodes > report.documents and 0 < stored < count
        assert [(s.path.name, s.reason) for s in report.skipped] == [(s.path.name, s.reason) for s in local.skipped]


def test_the_driver_tags_the_collection_with_the_cluster_options_before_any_work(corpus, monkeypatch, tiny_model_dir):
    from posfair_llamaindex.distributed import pipeline

    def no_work(settings):
        raise RuntimeError("stopped before Ray")

    monkeypatch.setattr(pipeline, "_start_ray", no_work)
    embed_model = PosFairEmbedding(tiny_model_dir("bert"))
    cluster = {"shard_number": 2, "replication_factor": 2, "write_consistency_factor": 1}
    with QdrantStub() as stub:
        target = QdrantTarget(collection="docs", url=stub.url, **cluster)
        with pytest.raises(RuntimeError, match="stopped before Ray"):
            ray_ingest([str(corpus)], embed_model, target)
        assert {key: stub.created[0][key] for key in cluster} == cluster
        tag = stub.local.get_collection("docs").config.metadata["posfair"]
        assert tag["fingerprint"] == embed_model.fingerprint() and stub.local.count("docs").count == 0
        # a collection tagged for another configuration is refused there too, before any work
        other = PosFairEmbedding(tiny_model_dir("bert"), mode="plain")
        with pytest.raises(ValueError, match="was not embedded with this configuration"):
            ray_ingest([str(corpus)], other, target)


CHILD = textwrap.dedent(
    """
    import sys, time
    import ray
    from posfair_llamaindex import PosFairEmbedding
    from posfair_llamaindex.distributed import QdrantTarget, RayIngestSettings, pipeline, ray_ingest

    address, model, corpus, storage, tokens = sys.argv[1:6]
    real = pipeline.write_rows

    def announcing(store, rows, **kwargs):
        # the driver writes an embedded folder's batches; announce each, and stall after the first
        counts = real(store, rows, **kwargs)
        print(f"written {counts.embedded}", flush=True)
        time.sleep(120)
        return counts

    pipeline.write_rows = announcing
    ray.init(address=address, log_to_driver=False)
    settings = RayIngestSettings(actors=1, batch_size=2, show_progress=False)
    print("ready", flush=True)
    ray_ingest([corpus], PosFairEmbedding(model), QdrantTarget(collection="docs", path=storage), settings,
               node_tokens=int(tokens))
    print("finished", flush=True)
    """
)


def test_a_killed_job_rerun_loses_and_duplicates_nothing(ray_cluster, tiny_model_dir, tmp_path):
    model = tiny_model_dir("bert")
    corpus, storage = tmp_path / "corpus", tmp_path / "qdrant"
    write_corpus(corpus, 8, seed=5)
    script = tmp_path / "driver.py"
    script.write_text(CHILD)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    argv = [sys.executable, str(script), ray_cluster, model, str(corpus), str(storage), str(NODE_TOKENS)]
    with open(tmp_path / "driver.err", "w") as stderr:
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env)
        guard = threading.Timer(180, child.kill)  # never hang the suite on a stuck driver
        guard.start()
        lines = []
        try:
            for line in child.stdout:
                lines.append(line.strip())
                if line.startswith("written"):
                    os.kill(child.pid, signal.SIGKILL)  # the driver dies between two batches
                    break
            child.wait(timeout=60)
        finally:
            guard.cancel()
            child.stdout.close()
    assert child.returncode == -signal.SIGKILL and lines[-1].startswith("written"), (
        lines,
        (tmp_path / "driver.err").read_text()[-3000:],
    )

    embed_model = PosFairEmbedding(model)
    client = QdrantClient(path=str(storage))  # only now: the killed driver held the folder
    try:
        survived = set(points(client, "docs"))
        assert 0 < len(survived) == int(lines[-1].split()[1])
        settings = RayIngestSettings(actors=1, batch_size=2, show_progress=False)
        target = QdrantTarget(collection="docs", path=str(storage))
        report = ray_ingest([str(corpus)], embed_model, target, settings, client=client, node_tokens=NODE_TOKENS)
        expected = QdrantClient(":memory:")
        one_process_ingest([corpus], embed_model, expected, "docs")
        count = assert_same_collection(expected, client, "docs")
        assert survived < set(points(client, "docs"))
        assert (report.nodes, report.unchanged, report.embedded) == (count, len(survived), count - len(survived))
    finally:
        client.close()
