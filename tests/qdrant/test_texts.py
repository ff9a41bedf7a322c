"""Node texts read back from a collection's payload."""

from __future__ import annotations

import pytest
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.utils import node_to_metadata_dict
from qdrant_client import QdrantClient
from qdrant_client.http import models as rest

from posfair_llamaindex.qdrant.texts import node_texts


def _client(count: int, extra_payload: dict | None = None) -> QdrantClient:
    client = QdrantClient(":memory:")
    client.create_collection("c", vectors_config=rest.VectorParams(size=2, distance=rest.Distance.COSINE))
    points = []
    for i in range(count):
        node = TextNode(id_=f"node-{i}", text=f"text number {i}", metadata={"file_name": f"f{i}.txt"})
        payload = node_to_metadata_dict(node, remove_text=False)
        points.append(rest.PointStruct(id=i, vector=[1.0, float(i)], payload=payload))
    if extra_payload is not None:
        points.append(rest.PointStruct(id=count, vector=[1.0, 0.0], payload=extra_payload))
    client.upsert("c", points)
    return client


def test_every_node_text_without_its_metadata_across_pages():
    texts = node_texts(_client(600), "c")
    assert len(texts) == 600
    assert texts["node-7"] == "text number 7"


def test_the_limit_bounds_how_much_is_read():
    assert len(node_texts(_client(600), "c", limit=300)) == 300


def test_points_not_written_by_llamaindex_and_missing_collections_are_named():
    with pytest.raises(ValueError, match="point 3 of 'c' holds no LlamaIndex node"):
        node_texts(_client(3, {"text": "raw"}), "c")
    with pytest.raises(ValueError, match="collection 'missing' does not exist"):
        node_texts(_client(1), "missing")
