"""``PosFairQdrantDatasink``: Ray Data writes document rows to a Qdrant server from its own tasks, in parallel.

Each write task opens its own client, rebuilds the driver's vector store from the collection layout the
driver found, and writes its blocks as :func:`~posfair_llamaindex.jobs.distributed.writer.write_rows` does
(upserts retried with backoff, then stale points removed). The counts come back to the driver.

``ray-qdrant``'s sink was considered: it writes plain columns as payload into collections it creates
untagged, with one unnamed or named vector, and removes nothing. Points here must be exactly those of
one-process ingest (LlamaIndex node payload, tag fingerprint, text hash, deterministic ids, dual named
vectors), in a collection the driver has tagged before any work starts.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Optional

from posfair_llamaindex.jobs.distributed.requirements import RAY_MISSING

try:
    from ray.data.block import Block, BlockAccessor
    from ray.data.datasource.datasink import Datasink, WriteResult
except ImportError as error:
    raise ImportError(RAY_MISSING) from error

from posfair_llamaindex.jobs.distributed.ray_config import QdrantTarget
from posfair_llamaindex.jobs.distributed.rows import from_table
from posfair_llamaindex.jobs.distributed.store_layout import StoreLayout
from posfair_llamaindex.jobs.distributed.writer import WriteCounts, write_rows
from posfair_llamaindex.qdrant.retry import RetryConfig


class PosFairQdrantDatasink(Datasink[WriteCounts]):
    def __init__(self, target: QdrantTarget, layout: StoreLayout, *, retry: RetryConfig, upload_points: int) -> None:
        if not target.is_server:
            raise ValueError(
                f"PosFairQdrantDatasink writes to a Qdrant server from many tasks; {target.where} is an embedded "
                "folder, which one process at a time can open (the driver writes those)"
            )
        self.target = target
        self.layout = layout
        self.retry = retry
        self.upload_points = upload_points
        self.counts: Optional[WriteCounts] = None

    def get_name(self) -> str:
        return "PosFairQdrant"

    def write(self, blocks: Iterable[Block], ctx) -> WriteCounts:
        client = self.target.connect(check_compatibility=False)
        try:
            store = self.layout.open_store(client, self.retry)
            counts = WriteCounts()
            for block in blocks:
                rows = from_table(BlockAccessor.for_block(block).to_arrow())
                counts = counts + write_rows(store, rows, retry=self.retry, upload_points=self.upload_points)
            return counts
        finally:
            client.close()

    def on_write_complete(self, write_result: WriteResult[WriteCounts]) -> None:
        total = WriteCounts()
        for counts in write_result.write_returns:
            total = total + counts
        self.counts = total
