"""Edge's exceptions as ours: each row of ``ENGINE_TYPES`` and ``ENGINE_MESSAGES``, said by the real engine.

qdrant-edge-py raises plain ``Exception``s whose text is the only clue, so a new engine version that words a message
differently must fail here, not turn a locked store into a "bad request" for a user.
"""

from __future__ import annotations

from pathlib import Path

import pytest

edge = pytest.importorskip("qdrant_edge", reason="qdrant-edge-py is in the dev extra")

from qdrant_client import models  # noqa: E402

from posfair_llamaindex.errors import (  # noqa: E402
    EdgeEngineError,
    EdgeRequestError,
    EdgeStoreLockedError,
    EdgeUnsupportedError,
)
from posfair_llamaindex.qdrant.edge_client import EdgeQdrantClient  # noqa: E402
from posfair_llamaindex.qdrant.edge_config import edge_config  # noqa: E402
from posfair_llamaindex.qdrant.edge_errors import (  # noqa: E402
    ENGINE_MESSAGES,
    ENGINE_TYPES,
    engine_error,
    engine_errors,
)

DOT = models.Distance.DOT


@pytest.fixture
def store(tmp_path):
    client = EdgeQdrantClient(tmp_path / "store")
    client.create_collection("c", vectors_config=models.VectorParams(size=2, distance=DOT))
    yield client
    client.close()


def shard_of(client: EdgeQdrantClient, name: str = "c"):
    store = client._client.store
    collection = store.collection(name)
    return store.shard(collection), collection


# ---------------------------------------------------------------------------------------------------- by type


def test_the_bindings_type_errors_are_bad_requests(store):
    shard, _ = shard_of(store)
    refused = pytest.raises(EdgeRequestError, match="^update on collection 'c': 'str' object is not an instance")
    with refused as raised, engine_errors("update", "c"):
        shard.update("not an operation")
    assert type(raised.value.__cause__) is TypeError


def test_the_bindings_value_errors_are_bad_requests():
    refused = pytest.raises(EdgeRequestError, match="^count on collection 'c': index must be less than total")
    with refused as raised, engine_errors("count", "c"):
        edge.SliceCondition(2, 5)  # the binding's own check
    assert type(raised.value.__cause__) is ValueError


def test_each_type_has_its_test():
    assert [raised for raised, _ in ENGINE_TYPES] == [TypeError, ValueError]  # the two tests above


# ---------------------------------------------------------------------------------------------------- by message


def test_a_shard_held_elsewhere_is_a_locked_store(tmp_path):
    """Edge's own lock on the write-ahead log (our folder lock is free: the holder opened the shard directly)."""
    client = EdgeQdrantClient(tmp_path / "store")
    client.create_collection("c", vectors_config=models.VectorParams(size=2, distance=DOT))
    collection = client._client.store.collection("c")
    shard_path, config = str(collection.shard_path), edge_config(collection.config, "load")
    client.close()
    holder = edge.EdgeShard.load(shard_path, config)
    reopened = EdgeQdrantClient(tmp_path / "store")
    try:
        with pytest.raises(EdgeStoreLockedError, match="^load on collection 'c': its Edge shard is open in another"):
            reopened.count("c")
        with pytest.raises(Exception, match=r"^Service runtime error: .*WouldBlock"):  # what Edge itself says
            edge.EdgeShard.load(shard_path, config)
    finally:
        reopened.close()
        holder.close()


def test_a_damaged_shard_is_an_engine_failure(tmp_path):
    client = EdgeQdrantClient(tmp_path / "store")
    client.create_collection("c", vectors_config=models.VectorParams(size=2, distance=DOT))
    shard_path = Path(client._client.store.collection("c").shard_path)
    client.close()
    (shard_path / "edge_config.json").write_text("damaged", encoding="utf-8")
    reopened = EdgeQdrantClient(tmp_path / "store")
    try:
        with pytest.raises(EdgeEngineError, match="^load on collection 'c': Qdrant Edge failed: Service runtime error"):
            reopened.count("c")
    finally:
        reopened.close()


def test_a_closed_shard_is_an_engine_failure(store):
    shard, collection = shard_of(store)
    shard.close()
    collection.shard = None  # the store has nothing left to close
    failed = pytest.raises(EdgeEngineError, match="Service runtime error: Shard is not initialized")
    with failed, engine_errors("count", "c"):
        shard.count(edge.CountRequest(exact=True))


def test_what_no_row_names_is_a_bad_request(store):
    with pytest.raises(EdgeRequestError, match="^upsert on collection 'c': Vector dimension error: expected dim: 2"):
        store.upsert("c", [models.PointStruct(id=1, vector=[1.0, 0.0, 3.0])])
    with pytest.raises(EdgeRequestError, match="^scroll on collection 'c': No range index for `order_by` key"):
        store.scroll("c", order_by="rank")


def test_internal_errors_are_engine_failures():
    """No request we know makes Edge 0.9.0 say it; the text is the binding's own (see the next test)."""
    mapped = engine_error("query", "c", Exception("Internal error: something Qdrant did not expect"))
    assert isinstance(mapped, EdgeEngineError) and str(mapped).startswith("query on collection 'c': Qdrant Edge failed")


def test_every_fragment_is_text_the_binding_holds():
    """Each fragment the table looks for is in qdrant-edge-py's compiled strings, so the table matches real text."""
    binary = b"".join(path.read_bytes() for path in Path(edge.__file__).parent.glob("*.so")).lower()
    assert binary
    for row in ENGINE_MESSAGES:
        assert row.fragment.lower().encode() in binary, row.fragment


def test_each_message_has_its_test():
    produced_by = {
        "WouldBlock": test_a_shard_held_elsewhere_is_a_locked_store,
        "Service runtime error": test_a_damaged_shard_is_an_engine_failure,
        "internal error": test_internal_errors_are_engine_failures,
    }
    assert [row.fragment for row in ENGINE_MESSAGES] == list(produced_by)


def test_the_first_matching_row_wins_and_case_does_not_matter():
    locked = engine_error("load", "c", Exception("Service runtime error: Can't init WAL: Kind(wouldblock)"))
    assert isinstance(locked, EdgeStoreLockedError)
    assert isinstance(engine_error("x", "c", Exception("SERVICE RUNTIME ERROR: disk")), EdgeEngineError)
    assert type(engine_error("x", "c", Exception("Wrong input"))) is EdgeRequestError


def test_our_own_refusals_pass_through():
    refusal = EdgeUnsupportedError("query_points", "something")
    with pytest.raises(EdgeUnsupportedError) as raised, engine_errors("query_points", "c"):
        raise refusal
    assert raised.value is refusal
