"""Reading files into LlamaIndex documents and writing them to a tagged Qdrant collection, resumably.

Node ids are derived from the document id and the node's position, so ingesting the same files again
(or resuming an interrupted run) overwrites the same points. New points of a document are written before
its stale points are removed, so an interruption never loses what was there.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Iterable, List, Optional, Sequence

from llama_index.core import Document, SimpleDirectoryReader
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import BaseNode, MetadataMode
from tqdm.auto import tqdm

from posfair_llamaindex.embedding import PosFairEmbedding
from posfair_llamaindex.qdrant import PosFairQdrantVectorStore

READABLE_SUFFIXES = (".txt", ".md")
NODE_ID_NAMESPACE = uuid.UUID("0b9a7d52-1c3e-5f64-8d27-3e4f5a6b7c8d")


def read_documents(paths: Sequence[str], suffixes: Sequence[str] = READABLE_SUFFIXES) -> List[Document]:
    """Read text files and folders (recursively) into documents whose id is the file's absolute path."""
    files: List[Path] = []
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
    documents = SimpleDirectoryReader(input_files=[str(f) for f in dict.fromkeys(files)], filename_as_id=True).load_data()
    for document in documents:
        # file metadata stays in the payload for display but is not embedded: vectors must not change
        # when a file is touched or moved
        document.excluded_embed_metadata_keys = list(document.metadata)
    return documents  # an emptied file stays: ingesting it removes its old points


def node_parser_for(embed_model: PosFairEmbedding, chunk_size: Optional[int] = None, chunk_overlap: int = 0) -> SentenceSplitter:
    """A sentence splitter that counts the model's own tokens and gives every node a deterministic id."""
    tokenizer = embed_model.encoder.tokenizer
    prefix = len(tokenizer(embed_model.text_instruction or "", add_special_tokens=False)["input_ids"])
    limit = embed_model.encoder.content_limit - prefix
    size = chunk_size or limit
    if size > limit:
        raise ValueError(f"chunk_size={size} exceeds what one forward pass of the model takes ({limit} tokens)")

    def count(text: str) -> List[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    def node_id(index: int, document: Document) -> str:
        return str(uuid.uuid5(NODE_ID_NAMESPACE, f"{document.doc_id}#{index}"))

    return SentenceSplitter(chunk_size=size, chunk_overlap=chunk_overlap, tokenizer=count, id_func=node_id)


def ingest_documents(
    documents: Sequence[Document],
    embed_model: PosFairEmbedding,
    vector_store: PosFairQdrantVectorStore,
    *,
    node_parser: Optional[SentenceSplitter] = None,
    documents_per_batch: int = 16,
    show_progress: bool = True,
) -> int:
    """Split, embed and upsert ``documents``; returns the number of nodes written."""
    parser = node_parser or node_parser_for(embed_model)
    written = 0
    batches = [documents[i : i + documents_per_batch] for i in range(0, len(documents), documents_per_batch)]
    for batch in tqdm(batches, desc="Ingesting", unit="batch", disable=not show_progress):
        nodes = parser.get_nodes_from_documents(list(batch))
        embed_nodes(nodes, embed_model)
        ids = vector_store.add(nodes)
        vector_store.delete_stale([d.doc_id for d in batch], ids)
        written += len(nodes)
    return written


def embed_nodes(nodes: Iterable[BaseNode], embed_model: PosFairEmbedding) -> None:
    nodes = list(nodes)
    texts = [node.get_content(metadata_mode=MetadataMode.EMBED) for node in nodes]
    for node, vector in zip(nodes, embed_model.get_text_embedding_batch(texts)):
        node.embedding = vector
