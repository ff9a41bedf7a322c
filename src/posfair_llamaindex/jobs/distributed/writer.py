"""Writing document rows to the tagged collection, as one-process ingest writes a batch of documents.

New points go in first, with retries; only then are the documents' stale points (a shortened file's
surplus) removed, and the points of files that are now empty. An interruption at any moment therefore
loses nothing that was stored, and a rerun only embeds what is missing. The Ray sink runs this in its
write tasks (a server) and the driver runs it for an embedded folder.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from posfair_llamaindex.jobs.distributed.rows import DocumentRow
from posfair_llamaindex.jobs.ingest import SkippedFile
from posfair_llamaindex.qdrant.retry import RetryConfig, describe_client, with_retries
from posfair_llamaindex.qdrant.store import PosFairQdrantVectorStore, point_id


@dataclass
class WriteCounts:
    documents: int = 0  # documents written (skipped files not counted)
    nodes: int = 0  # their nodes, i.e. the points they have now
    embedded: int = 0  # nodes that were embedded and written
    unchanged: int = 0  # nodes already stored unchanged
    skipped: list[SkippedFile] = field(default_factory=list)

    def __add__(self, other: WriteCounts) -> WriteCounts:
        return WriteCounts(
            self.documents + other.documents,
            self.nodes + other.nodes,
            self.embedded + other.embedded,
            self.unchanged + other.unchanged,
            self.skipped + other.skipped,
        )


def write_rows(
    store: PosFairQdrantVectorStore, rows: Sequence[DocumentRow], *, retry: RetryConfig, upload_points: int
) -> WriteCounts:
    """Upsert the embedded nodes of ``rows`` in requests of ``upload_points`` points, then remove stale points."""
    client = store.client
    target = describe_client(client)
    documents = [row for row in rows if not row.is_skipped]
    nodes = [node for row in documents for node in row.embedded_nodes()]
    if nodes:
        points, _ = store._build_points(nodes, store.sparse_vector_name)  # exactly what store.add would send
        for start in range(0, len(points), upload_points):
            chunk = points[start : start + upload_points]
            with_retries(
                lambda chunk=chunk: client.upsert(collection_name=store.collection_name, points=chunk, wait=True),
                what=f"upsert of {len(chunk)} points",
                target=target,
                policy=retry,
            )
    # after the upsert: until then the old points stay, so an interruption loses nothing
    store.delete_stale([row.doc_id for row in documents], [point_id(n.node_id) for row in documents for n in row.nodes])
    for row in rows:
        if row.is_skipped and row.no_text:  # an emptied file: whatever it held before is stale now
            with_retries(lambda row=row: store.delete(row.doc_id), what="delete", target=target, policy=retry)
    return WriteCounts(
        documents=len(documents),
        nodes=sum(len(row.nodes) for row in documents),
        embedded=len(nodes),
        unchanged=sum(len(row.nodes) - len(row.todo) for row in documents),
        skipped=[row.skipped_file() for row in rows if row.is_skipped],
    )
