"""``posfair upgrade --engine ray``: the calibrated vectors on Ray actors give the collection one process writes."""

from __future__ import annotations

import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.schema import TextNode
from llama_index.vector_stores.qdrant import QdrantVectorStore
from qdrant_client import QdrantClient

from posfair_llamaindex import CalibrationConfig, PosFairEmbedding
from posfair_llamaindex.cli import main
from tests.utils import sample_texts

NODES = 34


def test_ray_upgrade_writes_what_one_process_upgrade_writes(ray_cluster, tiny_model_dir, tmp_path, capsys):
    from posfair_llamaindex.qdrant.upgrade import UpgradeConfig, upgrade_collection

    plain = PosFairEmbedding(tiny_model_dir("bert"), mode="plain", device="cpu")
    nodes = [
        TextNode(id_=f"00000000-0000-4000-8000-{i:012d}", text=t)
        for i, t in enumerate(sample_texts(NODES, seed=3, min_words=20, max_words=40))
    ]
    folder = str(tmp_path / "q")
    client = QdrantClient(path=folder)
    store = QdrantVectorStore("old", client=client)
    VectorStoreIndex(nodes, embed_model=plain, storage_context=StorageContext.from_defaults(vector_store=store))
    client.close()

    argv = ["upgrade", "--qdrant-path", folder, "--collection", "old", "--into", "ray", "--model", plain.model_name]
    argv += ["--basket-size", "8", "--batch-size", "8", "--engine", "ray", "--ray-address", ray_cluster]
    assert main(argv) == 0
    assert f"{NODES} written now" in capsys.readouterr().out

    client = QdrantClient(path=folder)
    dual = PosFairEmbedding(
        plain.model_name, mode="dual", calibration=CalibrationConfig(basket_size=8), encoder=plain.encoder
    )
    upgrade_collection(client, dual, UpgradeConfig(source="old", target="local"), show_progress=False)
    by_ray = {str(p.id): p.vector for p in client.scroll("ray", limit=100, with_vectors=True)[0]}
    local = {str(p.id): p.vector for p in client.scroll("local", limit=100, with_vectors=True)[0]}
    assert set(by_ray) == set(local) and len(local) == NODES
    for pid, vectors in local.items():
        for name in ("plain", "calibrated"):
            assert by_ray[pid][name] == pytest.approx(vectors[name], abs=1e-5)
    client.close()


def test_ray_only_options_are_refused_with_the_local_engine(capsys):
    assert main(["upgrade", "--collection", "a", "--into", "b", "--actors", "2"]) == 1
    assert "--engine ray only" in capsys.readouterr().err
