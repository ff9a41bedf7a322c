"""Ray ingest into an embedded folder equals one-process ingest and retries a raising actor; the driver
tags the collection before any work. ``test_cli_engine.py`` has the server, the kill and the reruns.

Each Ray job costs seconds (its actors start a process and import torch), so each test checks several
things of one job.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from qdrant_client import QdrantClient

from posfair_llamaindex import PosFairEmbedding
from tests.jobs.distributed.conftest import (
    NODE_TOKENS,
    assert_same_collection,
    one_process_ingest,
)
from tests.jobs.distributed.qdrant_stub import QdrantStub

pytest.importorskip("ray.data", reason="Ray Data is not installed: pip install 'posfair-llamaindex[ray]'")

from posfair_llamaindex.jobs.distributed import EmbedDocuments, QdrantTarget, RayIngestConfig, ray_ingest  # noqa: E402
from posfair_llamaindex.qdrant.embedded import open_embedded


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


def test_the_driver_tags_the_collection_with_the_cluster_options_before_any_work(corpus, monkeypatch, tiny_model_dir):
    from posfair_llamaindex.jobs.distributed import pipeline

    def no_work(settings):
        raise RuntimeError("stopped before Ray")

    monkeypatch.setattr(pipeline, "start_ray", no_work)
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


def test_ingest_into_an_embedded_folder_equals_one_process_and_survives_a_raising_actor(
    ray_cluster, corpus, tiny_model_dir, tmp_path
):
    """The driver writes an embedded folder's batches itself; two actors, the first batch raises once."""
    embed_model = PosFairEmbedding(tiny_model_dir("bert"), embed_batch_size=4)
    expected = QdrantClient(":memory:")
    local = one_process_ingest([corpus], embed_model, expected, "docs")
    marker = str(tmp_path / "raised")
    settings = RayIngestConfig(actors=2, batch_size=2, upload_points=5, show_progress=False)
    target = QdrantTarget(collection="docs", path=str(tmp_path / "qdrant"))
    report = ray_ingest(
        [str(corpus)], embed_model, target, settings, node_tokens=NODE_TOKENS, embedder=raising_once(marker)
    )
    assert Path(marker).read_text() != str(os.getpid())  # it raised in an actor, and Ray Data ran the batch again
    client = open_embedded(tmp_path / "qdrant")  # a new folder: the Qdrant Edge store the driver made
    try:
        count = assert_same_collection(expected, client, "docs")
    finally:
        client.close()
    assert (report.documents, report.nodes, report.embedded, report.unchanged) == (7, count, count, 0)
    assert report.nodes == local.nodes
    assert [(s.path.name, s.reason) for s in report.skipped] == [(s.path.name, s.reason) for s in local.skipped]
