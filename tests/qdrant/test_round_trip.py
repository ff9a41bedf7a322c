"""to_dict / from_dict, JSON and pickling: as LlamaIndex's store does them, plus the tag, the layout and the options.

LlamaIndex's ``to_dict`` holds its public fields; ``from_dict`` builds the store again from them and the client
passed beside them (without one it fails, asking for a client). Ours does the same and carries the collection's
tag, vector layout and creation options, so the rebuilt store checks the collection it opens and, after
``clear``, creates it again exactly as it was.
"""

from __future__ import annotations

import json
import pickle

import pytest
from llama_index.core.vector_stores.types import VectorStoreQuery
from llama_index.vector_stores.qdrant import QdrantVectorStore
from qdrant_client import QdrantClient
from qdrant_client.http import models as rest

from posfair_llamaindex import CalibrationConfig, PosFairEmbedding
from posfair_llamaindex.qdrant import CollectionTagMismatchError, collection_tag, tagged_vector_store
from posfair_llamaindex.qdrant.store import PosFairQdrantVectorStore
from tests.qdrant.conftest import make_nodes, sparse_encode
from tests.qdrant.recording import RecordingClient

DIM = 64
HYBRID = dict(enable_hybrid=True, sparse_doc_fn=sparse_encode, sparse_query_fn=sparse_encode)
OPTIONS = dict(
    dense_config=rest.VectorParams(size=DIM, distance=rest.Distance.DOT, on_disk=True),
    quantization_config=rest.ScalarQuantization(scalar=rest.ScalarQuantizationConfig(type=rest.ScalarType.INT8)),
    payload_indexes=[{"field_name": "body", "field_schema": rest.TextIndexParams(type="text")}],
    index_doc_id=False,
    shard_number=2,
)


def answers(store, nodes, width=DIM, **fields):
    query = VectorStoreQuery(query_embedding=nodes[1].embedding[:width], query_str=nodes[1].text, similarity_top_k=4)
    for key, value in fields.items():
        setattr(query, key, value)
    return store.query(query).ids


def test_to_dict_is_upstreams_plus_the_tag_layout_and_options(tiny_embed):
    client = QdrantClient(":memory:")
    ours = tagged_vector_store(client, "r", tiny_embed, **OPTIONS).to_dict()
    upstream = QdrantVectorStore("u", client=QdrantClient(":memory:")).to_dict()
    assert set(ours) == set(upstream) | {"posfair_tag", "vector_layout", "collection_config"}
    assert ours["class_name"] == "PosFairQdrantVectorStore"
    assert ours["posfair_tag"] == collection_tag(client.get_collection("r"))
    assert ours["vector_layout"]["dense"][0]["params"]["distance"] == rest.Distance.DOT
    assert ours["collection_config"]["shard_number"] == 2 and ours["collection_config"]["index_doc_id"] is False
    json.dumps(ours)  # JSON-safe, as to_json needs


def test_from_dict_needs_a_client_as_upstreams_does(tiny_embed):
    data = tagged_vector_store(QdrantClient(":memory:"), "r", tiny_embed).to_dict()
    upstream = QdrantVectorStore("u", client=QdrantClient(":memory:")).to_dict()
    message = "Must provide either a QdrantClient instance or a url and api_key"
    with pytest.raises(ValueError, match=message):
        QdrantVectorStore.from_dict(upstream)
    with pytest.raises(ValueError, match=message):
        PosFairQdrantVectorStore.from_dict(data)


@pytest.mark.parametrize("kind", ["single", "dual", "hybrid", "dual+hybrid"])
def test_from_dict_and_from_json_rebuild_the_same_store(tiny_embed, tiny_dual, kind):
    embed = tiny_dual if kind.startswith("dual") else tiny_embed
    width = DIM * (2 if embed.is_dual else 1)
    extra = HYBRID if kind.endswith("hybrid") else {}
    client = QdrantClient(":memory:")
    store = tagged_vector_store(client, "r", embed, **OPTIONS, **extra)
    nodes = make_nodes(12, width, seed=2)
    store.add(nodes)
    functions = {k: v for k, v in extra.items() if k != "enable_hybrid"}
    for rebuilt in (
        PosFairQdrantVectorStore.from_dict(store.to_dict(), client=client, **functions),
        PosFairQdrantVectorStore.from_json(store.to_json(), client=client, **functions),
    ):
        assert rebuilt.vector_layout == store.vector_layout
        assert rebuilt.posfair_tag == store.posfair_tag and rebuilt.fingerprint == store.fingerprint
        assert rebuilt.collection_config == store.collection_config
        assert answers(rebuilt, nodes) == answers(store, nodes)
        if extra:
            assert answers(rebuilt, nodes, mode="hybrid") == answers(store, nodes, mode="hybrid")


def test_from_dict_refuses_a_collection_made_for_other_settings(tiny_embed, tiny_model_dir):
    client = QdrantClient(":memory:")
    data = tagged_vector_store(client, "r", tiny_embed).to_dict()
    client.delete_collection("r")
    other = PosFairEmbedding(tiny_model_dir("bert"), calibration=CalibrationConfig(strength=0.2), device="cpu")
    tagged_vector_store(client, "r", other)
    with pytest.raises(CollectionTagMismatchError, match="strength"):
        PosFairQdrantVectorStore.from_dict(data, client=client)


def test_a_rebuilt_store_creates_its_collection_again_after_clear_with_every_option(tiny_dual):
    client = RecordingClient()
    store = tagged_vector_store(client, "r", tiny_dual, **OPTIONS)
    first = client.made()
    rebuilt = PosFairQdrantVectorStore.from_dict(store.to_dict(), client=client)
    client.calls.clear()
    rebuilt.clear()
    rebuilt._create_collection("r", vector_size=2 * DIM)  # what add() does when the collection is missing
    assert client.made() == [("delete_collection", {"collection_name": "r"}), *first]


def test_pickling_keeps_the_tag_layout_and_options(tiny_dual):
    """LlamaIndex's pickling drops what does not pickle and restores the rest; the tag travels with the fields."""
    client = QdrantClient(":memory:")
    store = tagged_vector_store(client, "r", tiny_dual, **OPTIONS, **HYBRID)
    nodes = make_nodes(8, 2 * DIM, seed=5)
    store.add(nodes)
    restored = pickle.loads(pickle.dumps(store))
    assert restored.vector_layout == store.vector_layout
    assert restored.posfair_tag == store.posfair_tag and restored.fingerprint == store.fingerprint
    assert restored.collection_config == store.collection_config
    assert answers(restored, nodes, width=DIM) == answers(store, nodes, width=DIM)  # the embedded client pickles too
    upstream = pickle.loads(pickle.dumps(QdrantVectorStore("u", client=QdrantClient(":memory:"))))
    assert upstream.collection_name == "u"  # the same mechanism, which LlamaIndex's store also goes through


def test_the_legacy_constructor_without_a_tag_cannot_create_after_clear(tiny_embed):
    """Built from a fingerprint alone (as Ray's workers do), a store writes to a checked collection but will not
    create an untagged one."""
    client = QdrantClient(":memory:")
    tagged_vector_store(client, "r", tiny_embed)
    store = PosFairQdrantVectorStore("r", client=client, fingerprint=tiny_embed.fingerprint(), dimension=DIM)
    store.add(make_nodes(2, DIM))
    store.clear()
    with pytest.raises(ValueError, match="built without its tag"):
        store.add(make_nodes(2, DIM))
    assert not client.collection_exists("r")
