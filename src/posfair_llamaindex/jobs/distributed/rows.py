"""The rows that travel through the Ray pipeline: one per document (or per skipped file), as Arrow tables.

A document's nodes stay together in one row from splitting to writing, so a write can remove the
document's stale points exactly as one-process ingest does: after its new points are written, and
knowing every node the document has now. Nodes travel as LlamaIndex JSON (their payload is rebuilt from
it byte for byte), vectors as float32 bytes (the values one-process ingest stores).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from llama_index.core.schema import MetadataMode, TextNode

from posfair_llamaindex.jobs.ingest import SkippedFile

SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),  # the document id ("" for a skipped file)
        ("label", pa.string()),  # how messages name the document: its file
        ("skipped", pa.string()),  # why the file was skipped ("" when it was read)
        ("no_text", pa.bool_()),  # a skipped file that holds no text: its old points are stale
        ("nodes", pa.string()),  # JSON list of the document's nodes (LlamaIndex to_dict)
        ("todo", pa.string()),  # JSON list of the positions of the nodes to embed
        ("vectors", pa.binary()),  # float32 embeddings of the nodes in todo, one after another; empty until embedded
        ("sizes", pa.string()),  # JSON list: floats per embedding (dual: 2 x dimension; windows: varies by node)
    ]
)


@dataclass
class DocumentRow:
    doc_id: str = ""
    label: str = ""
    skipped: str = ""
    no_text: bool = False
    nodes: list[TextNode] = field(default_factory=list)
    todo: list[int] = field(default_factory=list)
    vectors: list[np.ndarray] = field(default_factory=list)  # one float32 embedding per node in todo

    @property
    def is_skipped(self) -> bool:
        return bool(self.skipped)

    def texts_to_embed(self) -> list[str]:
        return [self.nodes[i].get_content(metadata_mode=MetadataMode.EMBED) for i in self.todo]

    def embedded_nodes(self) -> list[TextNode]:
        """The nodes to write, each carrying its vector (the values one-process ingest would give it)."""
        if len(self.vectors) != len(self.todo):
            raise ValueError(f"{self.label}: {len(self.vectors)} vectors for {len(self.todo)} nodes to write")
        nodes = []
        for position, vector in zip(self.todo, self.vectors, strict=True):
            node = self.nodes[position]
            node.embedding = vector.tolist()
            nodes.append(node)
        return nodes

    def skipped_file(self) -> SkippedFile:
        return SkippedFile(Path(self.label), self.skipped, no_text=self.no_text)


def skipped_row(skipped: SkippedFile) -> DocumentRow:
    path = str(skipped.path)
    return DocumentRow(doc_id=path, label=path, skipped=skipped.reason, no_text=skipped.no_text)


def to_table(rows: Sequence[DocumentRow]) -> pa.Table:
    columns: dict[str, list[Any]] = {name: [] for name in SCHEMA.names}
    for row in rows:
        vectors = [np.asarray(vector, dtype=np.float32) for vector in row.vectors]
        columns["doc_id"].append(row.doc_id)
        columns["label"].append(row.label)
        columns["skipped"].append(row.skipped)
        columns["no_text"].append(row.no_text)
        columns["nodes"].append(json.dumps([node.to_dict() for node in row.nodes]))
        columns["todo"].append(json.dumps(row.todo))
        columns["vectors"].append(b"".join(vector.tobytes() for vector in vectors))
        columns["sizes"].append(json.dumps([len(vector) for vector in vectors]))
    return pa.table(columns, schema=SCHEMA)


def from_table(table: pa.Table) -> list[DocumentRow]:
    rows = []
    for record in table.to_pylist():
        todo = json.loads(record["todo"])
        sizes = json.loads(record["sizes"])
        flat = np.frombuffer(record["vectors"], dtype=np.float32)
        rows.append(
            DocumentRow(
                doc_id=record["doc_id"],
                label=record["label"],
                skipped=record["skipped"],
                no_text=record["no_text"],
                nodes=[TextNode.from_dict(data) for data in json.loads(record["nodes"])],
                todo=todo,
                vectors=np.split(flat, np.cumsum(sizes)[:-1]) if sizes else [],
            )
        )
    return rows
