"""Fixtures for the store tests: tiny embeddings (only their tags and dimension are used) and hand-made nodes.

No test here runs the model: every vector is made by hand, so LlamaIndex's QdrantVectorStore and ours can be
given exactly the same points.
"""

from __future__ import annotations

import hashlib
import random
import uuid

import pytest
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from qdrant_client import AsyncQdrantClient, QdrantClient

from posfair_llamaindex import AsyncEdgeQdrantClient, EdgeQdrantClient, PosFairEmbedding

WORDS = ("river", "museum", "bridge", "barley", "harbour", "castle", "lantern", "orchard", "glacier", "market")


@pytest.fixture(scope="session")
def tiny_embed(tiny_model_dir) -> PosFairEmbedding:
    return PosFairEmbedding(tiny_model_dir("bert"), device="cpu")


@pytest.fixture(scope="session")
def tiny_dual(tiny_model_dir) -> PosFairEmbedding:
    return PosFairEmbedding(tiny_model_dir("bert"), mode="dual", device="cpu")


def unit_vector(rng: random.Random, dimension: int) -> list[float]:
    values = [rng.gauss(0.0, 1.0) for _ in range(dimension)]
    norm = sum(v * v for v in values) ** 0.5
    return [v / norm for v in values]


def make_nodes(count: int, dimension: int, *, seed: int = 0, uuid_ids: bool = True, documents: int = 4):
    """Nodes with text, metadata, a source document and a random unit embedding (2 x dimension: see dual)."""
    rng = random.Random(seed)
    nodes = []
    for i in range(count):
        node_id = str(uuid.UUID(int=rng.getrandbits(128), version=4)) if uuid_ids else f"note-{seed}-{i}"
        text = " ".join(rng.choice(WORDS) for _ in range(8))
        nodes.append(
            TextNode(
                id_=node_id,
                text=text,
                metadata={"group": i % 3, "colour": ("red", "green", "blue")[i % 3], "rank": i},
                relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=f"doc-{i % documents}")},
                embedding=unit_vector(rng, dimension),
            )
        )
    return nodes


def sparse_encode(texts):
    """A toy offline sparse encoder (word counts at hashed indices), the shape LlamaIndex's sparse functions have."""
    indices, values = [], []
    for text in texts:
        counts: dict[int, float] = {}
        for word in text.lower().split():
            index = int(hashlib.sha256(word.encode()).hexdigest()[:6], 16) % 50_000
            counts[index] = counts.get(index, 0.0) + 1.0
        ordered = sorted(counts)
        indices.append(ordered)
        values.append([counts[i] for i in ordered])
    return indices, values


class Engine:
    """New clients on one embedded engine: qdrant-client's local mode in memory, or Qdrant Edge in a folder of
    their own (a sync client and the async client made after it share that folder, as in one application)."""

    def __init__(self, name: str, root) -> None:
        self.name, self.root, self.made = name, root, []

    def client(self) -> QdrantClient:
        made = QdrantClient(":memory:") if self.name == "local" else EdgeQdrantClient(path=str(self._folder()))
        self.made.append(made)
        return made

    def aclient(self) -> AsyncQdrantClient:
        if self.name == "local":
            return AsyncQdrantClient(":memory:")
        return AsyncEdgeQdrantClient(path=str(self._folder()))

    def _folder(self):
        return self.root / f"{self.name}-{uuid.uuid4().hex[:8]}"

    def close(self) -> None:
        for client in self.made:
            client.close()


@pytest.fixture(params=["local", "edge"])
def engine(request, tmp_path):
    """Each test that takes it runs on local mode and on Qdrant Edge, the package's embedded default."""
    made = Engine(request.param, tmp_path)
    yield made
    made.close()
