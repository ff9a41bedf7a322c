"""Node texts read back from a collection's payload, for work that needs the documents and not their vectors."""

from __future__ import annotations

from typing import Any, Optional

from llama_index.core.schema import MetadataMode
from llama_index.core.vector_stores.utils import metadata_dict_to_node
from qdrant_client import QdrantClient

from posfair_llamaindex.qdrant.retry import describe_client, with_retries

PAGE = 256


def node_texts(client: QdrantClient, collection: str, limit: Optional[int] = None) -> dict[str, str]:
    """Node id -> the text that was embedded (metadata left out), for up to ``limit`` points in storage order.

    Points whose payload holds no LlamaIndex node are an error that names the first one: such a collection
    was not written through LlamaIndex, and its texts cannot be recovered.
    """
    target = describe_client(client)
    if not with_retries(lambda: client.collection_exists(collection), what="collection_exists", target=target):
        raise ValueError(f"collection {collection!r} does not exist")
    texts: dict[str, str] = {}
    offset: Any = None
    while limit is None or len(texts) < limit:
        page = PAGE if limit is None else min(PAGE, limit - len(texts))
        records, offset = with_retries(
            lambda page=page, offset=offset: client.scroll(
                collection, limit=page, offset=offset, with_payload=True, with_vectors=False
            ),
            what="scroll",
            target=target,
        )
        for record in records:
            try:
                node = metadata_dict_to_node(record.payload or {})
            except Exception as error:  # no _node_content: not written by LlamaIndex
                raise ValueError(
                    f"point {record.id} of {collection!r} holds no LlamaIndex node in its payload ({error})"
                ) from error
            texts[node.node_id] = node.get_content(metadata_mode=MetadataMode.NONE)
        if offset is None:
            break
    return texts
