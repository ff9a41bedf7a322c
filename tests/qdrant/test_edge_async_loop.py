"""AsyncEdgeQdrantClient keeps its event loop running between Edge's calls (edge_async.py ``off_loop``).

Edge holds the GIL for each call, so the loop cannot run *during* one; it can run between them. A bulk write
through LlamaIndex's ``QdrantVectorStore.async_add`` is many upserts: with the calls off the loop, a task beside it
gets turns while it runs; with them in the loop (``off_loop = False``), it gets none until the write is over.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

pytest.importorskip("qdrant_edge", reason="qdrant-edge-py is in the dev extra")

from llama_index.core.schema import TextNode  # noqa: E402
from llama_index.vector_stores.qdrant import QdrantVectorStore  # noqa: E402

from posfair_llamaindex import AsyncEdgeQdrantClient  # noqa: E402
from posfair_llamaindex.qdrant.edge_async import AsyncEdgeBackend  # noqa: E402


def _nodes(count: int) -> list[TextNode]:
    vectors = np.random.default_rng(0).standard_normal((count, 8)).astype(np.float32)
    return [
        TextNode(text=f"node {i}", id_=f"00000000-0000-0000-0000-{i:012d}", embedding=row.tolist())
        for i, row in enumerate(vectors)
    ]


async def _turns_during_write(folder, off_loop: bool, monkeypatch) -> tuple[int, int]:
    monkeypatch.setattr(AsyncEdgeBackend, "off_loop", off_loop)
    aclient = AsyncEdgeQdrantClient(path=str(folder))
    store = QdrantVectorStore("loop", aclient=aclient, batch_size=16)
    writing = asyncio.Event()
    turns = 0

    async def beside() -> None:
        nonlocal turns
        await writing.wait()
        while writing.is_set():
            turns += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(beside())
    await asyncio.sleep(0)
    writing.set()
    await store.async_add(_nodes(320))  # 20 upserts of 16
    writing.clear()
    await task
    count = (await aclient.count("loop")).count
    await aclient.close()
    return turns, count


async def test_a_bulk_write_lets_the_loop_run_between_edges_calls(tmp_path, monkeypatch):
    turns, stored = await _turns_during_write(tmp_path / "off", True, monkeypatch)
    assert stored == 320
    assert turns >= 20  # at least one turn per upsert the write awaited


async def test_in_the_loop_a_bulk_write_stops_it_until_it_ends(tmp_path, monkeypatch):
    turns, stored = await _turns_during_write(tmp_path / "in", False, monkeypatch)
    assert stored == 320
    assert turns <= 1  # the task beside it gets at most the turn after the write returned
