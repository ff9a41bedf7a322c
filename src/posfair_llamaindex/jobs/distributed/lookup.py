"""Which nodes are stored already, unchanged, under the job's fingerprint: those are not embedded again.

Against a server each reading task asks Qdrant for the nodes of its batch. An embedded folder can only be
opened by the driver, which is also its only writer; it reads the stored hashes once, before the job, and
the actors look them up in that snapshot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional, Protocol

from posfair_llamaindex.jobs.distributed.ray_config import QdrantTarget
from posfair_llamaindex.jobs.distributed.store_layout import StoreLayout
from posfair_llamaindex.qdrant.retry import RetryConfig, describe_client, with_retries
from posfair_llamaindex.qdrant.store import POINT_FINGERPRINT_KEY, TEXT_HASH_KEY, point_id


class StoredHashes(Protocol):
    """What :meth:`PosFairQdrantVectorStore.stored_text_hashes` answers, from a server or from a snapshot."""

    def stored_text_hashes(self, node_ids: Sequence[str]) -> dict[str, str]:
        """``{node id: text hash}`` for the nodes stored under the job's fingerprint."""


@dataclass(frozen=True)
class SnapshotLookup:
    hashes: dict[str, str]  # point id -> text hash

    def open(self) -> SnapshotLookup:
        return self

    def stored_text_hashes(self, node_ids: Sequence[str]) -> dict[str, str]:
        found = {}
        for node_id in node_ids:
            value = self.hashes.get(point_id(node_id))
            if value is not None:
                found[node_id] = value
        return found


@dataclass(frozen=True)
class ServerLookup:
    target: QdrantTarget
    layout: StoreLayout
    retry: RetryConfig

    def open(self) -> StoredHashes:
        return self.layout.open_store(self.target.connect(check_compatibility=False), self.retry)


def snapshot(client, collection: str, fingerprint: str, retry: RetryConfig, page: int = 1024) -> SnapshotLookup:
    """Every point's text hash under ``fingerprint`` (points of another fingerprint must be embedded again)."""
    hashes: dict[str, str] = {}
    offset: Optional[object] = None
    target = describe_client(client)
    while True:
        records, offset = with_retries(
            lambda offset=offset: client.scroll(
                collection,
                limit=page,
                offset=offset,
                with_payload=[POINT_FINGERPRINT_KEY, TEXT_HASH_KEY],
                with_vectors=False,
            ),
            what="scroll",
            target=target,
            policy=retry,
        )
        for record in records:
            payload = record.payload or {}
            if payload.get(POINT_FINGERPRINT_KEY) == fingerprint and payload.get(TEXT_HASH_KEY):
                hashes[str(record.id)] = payload[TEXT_HASH_KEY]
        if offset is None:
            return SnapshotLookup(hashes)
