"""The Edge clients against qdrant-client's own interface, so that an upgrade of qdrant-client breaks a test here
rather than a user's program.

Every public method of ``QdrantBase`` and ``AsyncQdrantBase`` is answered by the Edge backends or refused by name;
the async twin has the base's shape (coroutines where the base has coroutines); ``_attach`` sets what
``QdrantClient.__init__`` sets; and the qdrant-client helpers the backend uses behave as the code they replaced.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import textwrap
import uuid

import numpy as np
import pytest

pytest.importorskip("qdrant_edge", reason="qdrant-edge-py is in the dev extra")

from qdrant_client import AsyncQdrantClient, QdrantClient, models  # noqa: E402
from qdrant_client.async_client_base import AsyncQdrantBase  # noqa: E402
from qdrant_client.async_qdrant_fastembed import AsyncQdrantFastembedMixin  # noqa: E402
from qdrant_client.client_base import QdrantBase  # noqa: E402
from qdrant_client.local.local_collection import LocalCollection  # noqa: E402
from qdrant_client.qdrant_fastembed import QdrantFastembedMixin  # noqa: E402
from qdrant_client.uploader.uploader import iter_batch  # noqa: E402

from posfair_llamaindex.errors import EdgeUnsupportedError  # noqa: E402
from posfair_llamaindex.qdrant.edge_async import (  # noqa: E402
    ASYNC_REFUSED_CALLS,
    AsyncEdgeBackend,
    derive_async_twin,
)
from posfair_llamaindex.qdrant.edge_backend import (  # noqa: E402
    EDGE_ONLY_CALLS,
    REFUSED_CALLS,
    UNTRANSLATED_CALLS,
    EdgeBackend,
    public_calls,
    refuse_untranslated,
)
from posfair_llamaindex.qdrant.edge_client import AsyncEdgeQdrantClient, EdgeQdrantClient  # noqa: E402
from posfair_llamaindex.qdrant.edge_points import upload_rows  # noqa: E402

SYNC_CALLS = public_calls(QdrantBase)
ASYNC_CALLS = public_calls(AsyncQdrantBase)


def defined_on(cls: type, name: str) -> bool:
    """The method is written in ``cls``'s own body (not inherited, not installed as a refusal)."""
    return getattr(cls, name).__qualname__ == f"{cls.__name__}.{name}"


# ---------------------------------------------------------------------------------------------------- the sync backend


def test_the_walk_sees_qdrant_bases_calls():
    assert {"query_points", "upsert", "create_collection", "close", "migrate"} <= set(SYNC_CALLS)
    assert len(SYNC_CALLS) > 50 and set(ASYNC_CALLS) == set(SYNC_CALLS)


def test_every_qdrant_base_call_is_answered_or_refused_by_name():
    assert UNTRANSLATED_CALLS == ()  # a newer qdrant-client's call nobody has looked at: answer it or refuse it
    answered = sorted(name for name in SYNC_CALLS if defined_on(EdgeBackend, name))
    refused = sorted(name for name in SYNC_CALLS if name in REFUSED_CALLS)
    assert set(answered).isdisjoint(refused)
    assert sorted(answered + refused) == SYNC_CALLS
    for name in SYNC_CALLS:
        assert getattr(EdgeBackend, name) is not getattr(QdrantBase, name), name


def test_each_refused_call_names_itself(tmp_path):
    client = EdgeQdrantClient(tmp_path / "s")
    backend = client._client
    try:
        for name, (construct, _) in REFUSED_CALLS.items():
            with pytest.raises(EdgeUnsupportedError, match=f"^{name}: {construct} is not supported") as refused:
                getattr(backend, name)("c")
            assert refused.value.call == name
    finally:
        client.close()


def test_a_call_a_later_qdrant_client_adds_is_refused_by_name(tmp_path):
    class LaterBase(QdrantBase):
        def brand_new_call(self, collection_name: str, **kwargs):
            raise NotImplementedError()

    class LaterBackend(EdgeBackend, LaterBase):
        pass

    assert refuse_untranslated(LaterBackend, LaterBase) == ("brand_new_call",)
    backend = LaterBackend.open(tmp_path / "s")
    try:
        with pytest.raises(EdgeUnsupportedError, match="^brand_new_call: this call is not supported"):
            backend.brand_new_call("c")
    finally:
        backend.close()


def test_migrate_is_answered_with_qdrant_clients_own(tmp_path):
    client, target = EdgeQdrantClient(tmp_path / "s"), QdrantClient(":memory:")
    try:
        client.create_collection("c", vectors_config=models.VectorParams(size=2, distance=models.Distance.DOT))
        client.upsert("c", [models.PointStruct(id=i, vector=[1.0, float(i)], payload={"i": i}) for i in range(5)])
        client._client.migrate(target, ["c"])  # the backend's own, as QdrantClient.migrate calls qdrant-client's
        assert target.count("c").count == 5
        assert sorted(r.payload["i"] for r in target.scroll("c", limit=10)[0]) == list(range(5))
    finally:
        client.close()
        target.close()


# ---------------------------------------------------------------------------------------------------- the async twin


def test_the_async_twin_has_the_async_bases_shape():
    for name in ASYNC_CALLS:
        ours, theirs = getattr(AsyncEdgeBackend, name), getattr(AsyncQdrantBase, name)
        assert ours is not theirs, name
        assert inspect.iscoroutinefunction(ours) == inspect.iscoroutinefunction(theirs), name
    plain = sorted(name for name in ASYNC_CALLS if not inspect.iscoroutinefunction(getattr(AsyncQdrantBase, name)))
    assert plain == ["migrate", "upload_collection", "upload_points"]  # as qdrant-client's async client calls them
    for name in EDGE_ONLY_CALLS:
        assert inspect.iscoroutinefunction(getattr(AsyncEdgeBackend, name)), name


async def test_the_async_twin_answers_and_refuses_as_the_sync_backend(tmp_path):
    client = AsyncEdgeQdrantClient(tmp_path / "s")
    backend = client._client
    try:
        await backend.create_collection("c", vectors_config=models.VectorParams(size=2, distance=models.Distance.DOT))
        backend.upload_points("c", [models.PointStruct(id=1, vector=[1.0, 0.0])])  # plain, as in AsyncQdrantBase
        assert (await backend.count("c")).count == 1
        for name, (construct, _) in REFUSED_CALLS.items():
            with pytest.raises(EdgeUnsupportedError, match=f"^{name}: {construct}"):
                await getattr(backend, name)("c")
        for name, (construct, _) in ASYNC_REFUSED_CALLS.items():
            with pytest.raises(EdgeUnsupportedError, match=f"^{name}: {construct}"):
                getattr(backend, name)(None)
    finally:
        await client.close()


async def test_a_call_a_later_async_base_adds_is_answered_or_refused_by_name(tmp_path):
    class LaterAsyncBase(AsyncQdrantBase):
        async def count_twice(self, collection_name: str, **kwargs):
            raise NotImplementedError()

        async def brand_new_call(self, collection_name: str, **kwargs):
            raise NotImplementedError()

    class LaterBackend(EdgeBackend):
        def count_twice(self, collection_name: str, **kwargs) -> int:
            return 2 * self.count(collection_name).count

    class LaterTwin(AsyncEdgeBackend, LaterAsyncBase):
        pass

    derive_async_twin(LaterTwin, LaterAsyncBase, LaterBackend)
    twin = LaterTwin(LaterBackend.open(tmp_path / "s"))
    try:
        await twin.create_collection("c", vectors_config=models.VectorParams(size=2, distance=models.Distance.DOT))
        await twin.upsert("c", [models.PointStruct(id=1, vector=[1.0, 0.0])])
        assert await twin.count_twice("c") == 2
        with pytest.raises(EdgeUnsupportedError, match="^brand_new_call: this call is not supported"):
            await twin.brand_new_call("c")
    finally:
        await twin.close()


# ---------------------------------------------------------------------------------------------------- _attach


def assigned_attributes(function) -> set[str]:
    """The ``self.<name>`` attributes a method assigns (in any branch)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign) and node.value is not None:  # a bare annotation assigns nothing
            targets = [node.target]
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                names.add(target.attr)
    return names


def test_attach_sets_what_qdrant_clients_init_sets(tmp_path):
    """A newer QdrantClient.__init__ that sets something more (which its methods then read) fails here first."""
    real, edge = QdrantClient(":memory:"), EdgeQdrantClient(tmp_path / "s")
    try:
        assert set(vars(edge)) == set(vars(real))
        expected = assigned_attributes(QdrantClient.__init__) | assigned_attributes(QdrantFastembedMixin.__init__)
        assert expected == set(vars(edge))
        assert edge._init_options["path"] == str(tmp_path / "s") and edge.cloud_inference is False
    finally:
        edge.close()
        real.close()


async def test_the_async_attach_sets_what_async_qdrant_clients_init_sets(tmp_path):
    real, edge = AsyncQdrantClient(":memory:"), AsyncEdgeQdrantClient(tmp_path / "s")
    try:
        assert set(vars(edge)) == set(vars(real))
        expected = assigned_attributes(AsyncQdrantClient.__init__) | assigned_attributes(
            AsyncQdrantFastembedMixin.__init__
        )
        assert expected == set(vars(edge))
    finally:
        await edge.close()
        await real.close()


# ---------------------------------------------------------------------------------------------------- helpers adopted


def chunks(items, size):
    """The hand-written batching iter_batch replaced."""
    iterator = iter(items)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk


@pytest.mark.parametrize("count", [0, 1, 63, 64, 65, 200])
def test_iter_batch_cuts_as_the_old_chunks_did(count):
    items = range(count)
    assert list(iter_batch(items, 64)) == list(chunks(items, 64))
    assert list(iter_batch(iter(items), 1)) == list(chunks(iter(items), 1))


def rows_as_before(vectors, payload, ids, batch_size):
    """The hand-written column rows upload_rows replaced: one point at a time, then batched."""
    if isinstance(vectors, dict) and any(isinstance(v, np.ndarray) for v in vectors.values()):
        columns = vectors
        (count,) = {len(v) for v in columns.values()}
        vectors = ({name: values[i] for name, values in columns.items()} for i in range(count))
    point_ids = ids if ids is not None else itertools.count()
    payloads = payload if payload is not None else itertools.repeat(None)
    return list(chunks(zip(point_ids, iter(vectors), payloads, strict=False), batch_size))


def plain(value):
    if isinstance(value, dict):
        return {name: plain(v) for name, v in value.items()}
    return np.asarray(value).tolist()


@pytest.mark.parametrize(
    "vectors, payload, ids",
    [
        (np.arange(14.0).reshape(7, 2), [{"n": i} for i in range(7)], list(range(100, 107))),
        ({"a": np.ones((5, 2)), "b": np.zeros((5, 3))}, None, range(5)),
        ([[1.0, float(i)] for i in range(9)], None, range(4)),  # fewer ids than vectors: as many points as ids
        ([[1.0, float(i)] for i in range(3)], [{"n": i} for i in range(9)], None),
        (np.ones((70, 2)), None, range(65)),
    ],
)
def test_upload_rows_match_the_rows_they_replaced(vectors, payload, ids):
    ours = list(upload_rows(vectors, payload, ids, 4))
    before = rows_as_before(vectors, payload, ids, 4)
    assert [len(batch) for batch in ours] == [len(batch) for batch in before]
    for batch, old in zip(ours, before, strict=True):
        for row, (point_id, vector, point_payload) in zip(batch, old, strict=True):
            assert plain(row.vector) == plain(vector) and row.payload == point_payload
            if ids is not None:
                assert row.id == point_id
            else:
                assert uuid.UUID(row.id)  # a random UUID, as before


@pytest.mark.parametrize("negatives", [0, 1, 3])
def test_local_modes_average_vector_is_the_formula_it_replaced(negatives):
    rng = np.random.default_rng(negatives)
    positive = rng.normal(size=(3, 8)).tolist()
    negative = rng.normal(size=(negatives, 8)).tolist()
    mean = np.mean(np.asarray(positive, dtype=np.float64), axis=0)
    before = mean if not negative else 2 * mean - np.mean(np.asarray(negative, dtype=np.float64), axis=0)
    ours = LocalCollection._recommend_average_dense(positive, negative)
    assert np.asarray(ours, dtype=np.float64).tolist() == before.tolist()  # bit for bit
