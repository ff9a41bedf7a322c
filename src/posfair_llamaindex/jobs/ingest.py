"""Reading files into LlamaIndex documents and writing them to a tagged Qdrant collection, resumably.

Reading screens every file before it is loaded: empty files, files with no text, files that are not
UTF-8 (binary, latin-1, UTF-16) and files over a size limit are skipped with a warning that names the
file and the reason, instead of failing the whole ingest later on.

Node ids are derived from the document id and the node's position, so ingesting the same files again
(or resuming an interrupted run) addresses the same points. Before embedding a batch, the store is asked
which of its nodes are stored already with the same text hash; only the missing or changed nodes are
embedded and written. Stale points of a document are removed only after its new points are written, so
an interruption (even ``kill -9``) never loses what was stored, and a rerun does not encode it again.
"""

from __future__ import annotations

import codecs
import logging
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from posfair_llamaindex.errors import IngestError
from posfair_llamaindex.modes import document_mode

if TYPE_CHECKING:  # listing and screening files needs neither LlamaIndex nor the model's libraries
    from llama_index.core import Document
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.core.schema import BaseNode

    from posfair_llamaindex.embedding import PosFairEmbedding
    from posfair_llamaindex.qdrant import PosFairQdrantVectorStore

logger = logging.getLogger(__name__)

READABLE_SUFFIXES = (".txt", ".md")
DEFAULT_MAX_FILE_BYTES = 50 * 1024 * 1024
NODE_ID_NAMESPACE = uuid.UUID("0b9a7d52-1c3e-5f64-8d27-3e4f5a6b7c8d")

EMPTY_FILE = "empty file"
WHITESPACE_ONLY = "no text (whitespace only)"
NO_TEXT_AFTER_LOADING = "no text after loading"
NO_TEXT_REASONS = (EMPTY_FILE, WHITESPACE_ONLY, NO_TEXT_AFTER_LOADING)

_UTF16_32_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),  # before UTF-16 LE: it starts with the same two bytes
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)


# ----------------------------------------------------------------------------- reading
@dataclass(frozen=True)
class SkippedFile:
    """A file that was not ingested, and why (human readable)."""

    path: Path
    reason: str
    # the file exists but holds no text: points stored for it earlier are stale and should be removed
    no_text: bool = False


@dataclass
class ReadResult:
    documents: list[Document]
    skipped: list[SkippedFile]


def read_documents(
    paths: Sequence[str],
    suffixes: Sequence[str] = READABLE_SUFFIXES,
    *,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
) -> ReadResult:
    """Read text files and folders (recursively) into documents whose id is the file's absolute path.

    Every file is screened before it is loaded; the ones that cannot make a useful document are left
    out, logged as a warning, and listed in :attr:`ReadResult.skipped`. A missing path, a file named
    explicitly with another suffix, or no candidate file at all are errors.
    """
    files = candidate_files(paths, suffixes)
    documents: list[Document] = []
    skipped: list[SkippedFile] = []

    def skip(path: Path, reason: str) -> None:
        logger.warning("skipping %s: %s", path, reason)
        skipped.append(SkippedFile(path, reason, no_text=reason in NO_TEXT_REASONS))

    for path in files:
        reason = screen_file(path, max_file_bytes)
        if reason is not None:
            skip(path, reason)
            continue
        try:
            loaded = _load(path)
        except (OSError, ValueError) as error:  # the file changed or vanished since it was screened
            skip(path, f"unreadable: {type(error).__name__}: {getattr(error, 'strerror', None) or error}")
            continue
        kept = [document for document in loaded if document.text.strip()]
        if not kept:
            skip(path, NO_TEXT_AFTER_LOADING)
            continue
        documents += kept
    return ReadResult(documents, skipped)


def candidate_files(paths: Sequence[str], suffixes: Sequence[str]) -> list[Path]:
    files: list[Path] = []
    for raw in paths:
        path = Path(raw).expanduser().resolve()
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in suffixes)
        elif path.is_file():
            if path.suffix.lower() not in suffixes:
                raise ValueError(f"{path}: only {', '.join(suffixes)} files can be ingested")
            files.append(path)
        else:
            raise FileNotFoundError(f"{raw}: no such file or folder")
    if not files:
        raise ValueError(f"no {', '.join(suffixes)} files under {', '.join(map(str, paths))}")
    return list(dict.fromkeys(files))


def screen_file(path: Path, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES) -> Optional[str]:
    """Why ``path`` cannot be ingested as UTF-8 text, or None when it can."""
    try:
        size = path.stat().st_size
        if size == 0:
            return EMPTY_FILE
        if size > max_file_bytes:
            return f"larger than the {_size(max_file_bytes)} limit ({_size(size)})"
        with path.open("rb") as handle:
            data = handle.read(max_file_bytes + 1)
    except OSError as error:  # the path is named beside the reason, so only the OS's words
        return f"unreadable: {type(error).__name__}: {error.strerror or error}"
    if len(data) > max_file_bytes:  # grew since stat
        return f"larger than the {_size(max_file_bytes)} limit"
    for bom, encoding in _UTF16_32_BOMS:
        if data.startswith(bom):
            return f"not UTF-8 text ({encoding} byte order mark); convert it to UTF-8"
    if b"\x00" in data:
        return "binary file (NUL bytes)"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        return f"not UTF-8 text (invalid byte 0x{data[error.start]:02x} at offset {error.start}); convert it to UTF-8"
    if not text.lstrip("\ufeff").strip():
        return WHITESPACE_ONLY
    return None


def _load(path: Path) -> list[Document]:
    # One reader per file, so a file that fails to load fails alone. The documents are exactly what
    # SimpleDirectoryReader(input_files=..., filename_as_id=True) gives, which keeps their ids (and
    # therefore node and point ids) stable across versions.
    from llama_index.core import SimpleDirectoryReader

    documents = SimpleDirectoryReader(input_files=[str(path)], filename_as_id=True).load_data()
    for document in documents:
        # file metadata stays in the payload for display but is not embedded: vectors must not change
        # when a file is touched or moved
        document.excluded_embed_metadata_keys = list(document.metadata)
    return documents


def _size(count: int) -> str:
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            break
        value /= 1024
    if unit == "B":
        return f"{count} B"
    return f"{value:.1f}".rstrip("0").rstrip(".") + f" {unit}"


# ----------------------------------------------------------------------------- ingesting
@dataclass
class IngestReport:
    documents: int  # documents processed
    nodes: int  # nodes the split produced (== points now stored for these documents)
    embedded: int  # nodes actually sent to the embedding model
    unchanged: int  # nodes already stored under the same fingerprint and text hash, not embedded again
    skipped: list[SkippedFile] = field(default_factory=list)  # filled by the caller from ReadResult


def node_parser_for(
    embed_model: PosFairEmbedding, chunk_size: Optional[int] = None, chunk_overlap: int = 0
) -> SentenceSplitter:
    """A sentence splitter that counts the model's own tokens and gives every node a deterministic id.

    Nodes fill one forward pass of the model by default. Only windows mode takes longer ones: its windows cover a
    node however long, where every other mode would cut the node's end away."""
    from llama_index.core.node_parser import SentenceSplitter

    encoder = embed_model.encoder
    if getattr(encoder, "is_wrapped", False):  # a wrapped embedding's own tokens; its limit counts its own prompt
        limit = encoder.content_limit

        def tokens_of(text: str) -> list[int]:
            return [0] * encoder.offsets.count(text)

    else:
        tokenizer = encoder.tokenizer
        prefix = len(tokenizer(embed_model.text_instruction or "", add_special_tokens=False)["input_ids"])
        limit = encoder.content_limit - prefix

        def tokens_of(text: str) -> list[int]:
            return tokenizer(text, add_special_tokens=False)["input_ids"]

    size = chunk_size or limit
    if size > limit and not document_mode(embed_model.mode).windows:
        raise ValueError(
            f"chunk_size={size} exceeds what one forward pass of the model takes ({limit} tokens); only windows mode "
            "(--mode windows) embeds longer nodes whole"
        )

    def node_id(index: int, document: Document) -> str:
        return str(uuid.uuid5(NODE_ID_NAMESPACE, f"{document.doc_id}#{index}"))

    return SentenceSplitter(chunk_size=size, chunk_overlap=chunk_overlap, tokenizer=tokens_of, id_func=node_id)


def document_label(document: Document) -> str:
    """How messages name a document: its file path when it came from a file, else its id."""
    return str(document.metadata.get("file_path") or document.doc_id)


@dataclass
class PendingNode:
    node: BaseNode
    label: str  # the document's file
    index: int  # position among the nodes of its document


def ingest_documents(
    documents: Sequence[Document],
    embed_model: PosFairEmbedding,
    vector_store: PosFairQdrantVectorStore,
    *,
    node_parser: Optional[SentenceSplitter] = None,
    documents_per_batch: int = 16,
    show_progress: bool = True,
) -> IngestReport:
    """Split, embed and upsert ``documents``, embedding only the nodes not already stored unchanged.

    Per batch of documents: split; drop nodes with nothing to embed; ask the store which nodes it holds
    with the same text hash; embed the others in one call; upsert them; then remove the batch's points
    that no node of it addresses any more (a shortened file's surplus). Errors caused by a document raise
    :class:`IngestError` naming its file; errors of the store itself propagate unchanged.
    """
    from tqdm.auto import tqdm

    from posfair_llamaindex.qdrant.store import embedded_text_hash, point_id

    if documents_per_batch < 1:
        raise ValueError(f"documents_per_batch must be at least 1, got {documents_per_batch}")
    parser = node_parser or node_parser_for(embed_model)
    documents = list(documents)
    _refuse_duplicates(documents)
    report = IngestReport(documents=0, nodes=0, embedded=0, unchanged=0)
    with tqdm(total=len(documents), desc="Ingesting", unit="doc", disable=not show_progress) as progress:
        for start in range(0, len(documents), documents_per_batch):
            batch = documents[start : start + documents_per_batch]
            nodes = split_documents(batch, parser)
            stored = vector_store.stored_text_hashes([n.node.node_id for n in nodes]) if nodes else {}
            missing = [n for n in nodes if stored.get(n.node.node_id) != embedded_text_hash(n.node)]
            if missing:
                embed_nodes(missing, embed_model)
                vector_store.add([n.node for n in missing])
            # after the add: until then the old points stay, so an interruption loses nothing
            vector_store.delete_stale([d.doc_id for d in batch], [point_id(n.node.node_id) for n in nodes])
            report.documents += len(batch)
            report.nodes += len(nodes)
            report.embedded += len(missing)
            report.unchanged += len(nodes) - len(missing)
            progress.update(len(batch))
            progress.set_postfix(embedded=report.embedded, unchanged=report.unchanged, refresh=False)
    return report


def _refuse_duplicates(documents: Sequence[Document]) -> None:
    seen: dict[str, Document] = {}
    for document in documents:
        if document.doc_id in seen:
            raise IngestError(
                f"{document_label(document)}: document id {document.doc_id!r} is passed twice; "
                "each document can be ingested once per call"
            )
        seen[document.doc_id] = document


def split_documents(batch: Sequence[Document], parser: SentenceSplitter) -> list[PendingNode]:
    # one document at a time, so that a failure names its file; node ids and relationships are the same
    # as when splitting the batch at once (both only depend on the document itself)
    from llama_index.core.schema import MetadataMode

    nodes: list[PendingNode] = []
    for document in batch:
        label = document_label(document)
        try:
            split = parser.get_nodes_from_documents([document])
        except Exception as error:
            raise IngestError(f"{label}: splitting into nodes failed: {error}") from error
        for index, node in enumerate(split):
            if not node.get_content(metadata_mode=MetadataMode.EMBED).strip():
                logger.warning("%s: node %d has no text to embed; it is left out", label, index)
                continue
            nodes.append(PendingNode(node, label, index))
    return nodes


_POSITION = re.compile(r"\bposition (\d+)\b")


def embed_nodes(nodes: list[PendingNode], embed_model: PosFairEmbedding) -> None:
    from llama_index.core.schema import MetadataMode

    texts = [n.node.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes]
    try:
        vectors = embed_model.get_text_embedding_batch(texts)
    except Exception as error:
        raise IngestError(_embedding_failure(nodes, error)) from error
    if len(vectors) != len(nodes):
        raise IngestError(
            f"the embedding model returned {len(vectors)} vectors for {len(nodes)} texts of {_files(nodes)}"
        )
    for n, vector in zip(nodes, vectors, strict=True):
        n.node.embedding = vector


def _embedding_failure(nodes: list[PendingNode], error: Exception) -> str:
    message = f"{type(error).__name__}: {error}"
    match = _POSITION.search(str(error))
    if match and int(match.group(1)) < len(nodes):
        culprit = nodes[int(match.group(1))]
        return (
            f"{culprit.label}: embedding node {culprit.index} failed ({message}); "
            f"the batch held {len(nodes)} texts of {_files(nodes)}"
        )
    return f"embedding failed for a batch of {len(nodes)} texts of {_files(nodes)} ({message})"


def _files(nodes: list[PendingNode]) -> str:
    labels: list[str] = list(dict.fromkeys(n.label for n in nodes))
    shown = ", ".join(labels[:5])
    return shown + (f" and {len(labels) - 5} more file(s)" if len(labels) > 5 else "")


__all__: tuple[str, ...] = (
    "DEFAULT_MAX_FILE_BYTES",
    "READABLE_SUFFIXES",
    "IngestError",
    "IngestReport",
    "ReadResult",
    "SkippedFile",
    "document_label",
    "ingest_documents",
    "node_parser_for",
    "read_documents",
    "screen_file",
)
