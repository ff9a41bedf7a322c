"""The two Ray Data stages that do the work.

:func:`prepare_documents` (Ray tasks, CPU) reads files, splits them into nodes with the parser and ids of
``posfair ingest`` and marks the nodes that are not stored yet; it needs only the model's tokenizer.
:class:`EmbedDocuments` (a pool of actors, GPUs when there are) loads the encoder once per actor and embeds
the marked nodes. Both reuse ``ingest``'s own steps, so a file is screened, split and embedded exactly as
in one process, and failures name the file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Optional

import numpy as np
import pyarrow as pa
from llama_index.core.node_parser import SentenceSplitter

from posfair_llamaindex.embedding import PosFairEmbedding
from posfair_llamaindex.jobs.distributed.lookup import ServerLookup, SnapshotLookup
from posfair_llamaindex.jobs.distributed.rows import DocumentRow, from_table, skipped_row, to_table
from posfair_llamaindex.jobs.ingest import (
    PendingNode,
    SkippedFile,
    document_label,
    embed_nodes,  # one-process ingest's own steps: the same node filter and the same error messages
    node_parser_for,
    read_documents,
    split_documents,
)
from posfair_llamaindex.qdrant.store import embedded_text_hash


@dataclass(frozen=True)
class ParserConfig:
    """What ``node_parser_for`` needs from an embedding, without its weights: tokenizer, window, prompt."""

    model_name: str
    trust_remote_code: bool
    text_instruction: Optional[str]
    content_limit: int
    chunk_size: Optional[int]
    chunk_overlap: int

    @classmethod
    def of(cls, embed_model: PosFairEmbedding, chunk_size: Optional[int], chunk_overlap: int) -> ParserConfig:
        node_parser_for(embed_model, chunk_size, chunk_overlap)  # refuses a chunk size that does not fit, here
        return cls(
            model_name=embed_model.model_name,
            trust_remote_code=embed_model.trust_remote_code,
            text_instruction=embed_model.text_instruction,
            content_limit=embed_model.encoder.content_limit,
            chunk_size=chunk_size,
            chunk_overlap=chunk_overlap,
        )

    def build(self) -> SentenceSplitter:
        """``node_parser_for`` on the model's own tokenizer: the same token counts and node ids."""
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(self.model_name, trust_remote_code=self.trust_remote_code)
        tokens_only = SimpleNamespace(
            encoder=SimpleNamespace(tokenizer=tokenizer, content_limit=self.content_limit),
            text_instruction=self.text_instruction,
        )
        return node_parser_for(tokens_only, self.chunk_size, self.chunk_overlap)  # type: ignore[arg-type]


def prepare_documents(
    batch: pa.Table, *, parser: ParserConfig, lookup: ServerLookup | SnapshotLookup, max_file_bytes: int
) -> pa.Table:
    """Files -> one row per document with all its nodes, and which of them must be embedded.

    Runs as Ray tasks; the splitter (the model's tokenizer) and a server connection are made once per worker
    process and kept, so later batches and later jobs on the same workers do not load them again.
    """
    splitter = _cached(("parser", parser), parser.build)
    stored_hashes = lookup if isinstance(lookup, SnapshotLookup) else _cached(("lookup", lookup), lookup.open)
    paths = batch.column("path").to_pylist()
    present = [path for path in paths if Path(path).is_file()]
    rows = [
        skipped_row(SkippedFile(Path(path), "no such file (it went away after the job listed it)"))
        for path in paths
        if path not in present
    ]
    if not present:
        return to_table(rows)
    read = read_documents(present, max_file_bytes=max_file_bytes)
    rows += [skipped_row(skipped) for skipped in read.skipped]
    split = split_documents(read.documents, splitter)
    stored = stored_hashes.stored_text_hashes([n.node.node_id for n in split]) if split else {}
    by_document: dict[str, list[Any]] = {}
    for n in split:
        by_document.setdefault(n.node.ref_doc_id, []).append(n.node)
    for document in read.documents:
        nodes = by_document.get(document.doc_id, [])
        todo = [i for i, node in enumerate(nodes) if stored.get(node.node_id) != embedded_text_hash(node)]
        rows.append(DocumentRow(doc_id=document.doc_id, label=document_label(document), nodes=nodes, todo=todo))
    return to_table(rows)


_WORKER_CACHE: dict[Any, Any] = {}  # per worker process: splitters and server connections, by their settings


def _cached(key: Any, make: Any) -> Any:
    if key not in _WORKER_CACHE:
        _WORKER_CACHE[key] = make()
    return _WORKER_CACHE[key]


class EmbedDocuments:
    """Embeds the marked nodes of each document row; one encoder per actor, loaded when the actor starts.

    ``settings`` are :meth:`PosFairEmbedding.constructor_settings` with the actor's device; the loaded
    model must give ``fingerprint``, the one the collection is tagged with, or the actor refuses to start.
    """

    def __init__(self, settings: dict[str, Any], fingerprint: str, threads: Optional[int] = None) -> None:
        if threads is not None:
            import torch

            torch.set_num_threads(threads)
        self.embed_model = PosFairEmbedding(**settings)
        found = self.embed_model.fingerprint()
        if found != fingerprint:
            raise ValueError(
                f"the embedding actor loaded {settings['model_name']} with fingerprint {found}, but the collection "
                f"is tagged {fingerprint}: the worker sees other weights or settings than the driver"
            )

    def __call__(self, batch: pa.Table) -> pa.Table:
        rows = from_table(batch)
        work = [PendingNode(row.nodes[i], row.label, i) for row in rows for i in row.todo]
        if work:
            embed_nodes(work, self.embed_model)
        for row in rows:  # one embedding per node; their sizes differ between nodes in windows mode
            row.vectors = [np.asarray(row.nodes[i].embedding, dtype=np.float32) for i in row.todo]
        return to_table(rows)
