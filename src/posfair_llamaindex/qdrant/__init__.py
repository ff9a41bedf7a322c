"""Tagged Qdrant collections: retries (``retry``), the tag in collection metadata (``collection``), the LlamaIndex
vector store on top of it (``store``) and the embedded engine (``edge_client``: a QdrantClient on Qdrant Edge).

Names load on first use, so the retry rules can be used (say, to check that a server answers) without
loading LlamaIndex or the embedding model's libraries.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from posfair_llamaindex.lazy import lazy_exports

_WHERE = {
    "METADATA_KEY": "posfair_llamaindex.qdrant.collection",
    "CollectionTagMismatchError": "posfair_llamaindex.qdrant.collection",
    "aensure_tagged_collection": "posfair_llamaindex.qdrant.collection",
    "check_collection": "posfair_llamaindex.qdrant.collection",
    "collection_tag": "posfair_llamaindex.qdrant.collection",
    "ensure_tagged_collection": "posfair_llamaindex.qdrant.collection",
    "list_tagged_collections": "posfair_llamaindex.qdrant.collection",
    "QdrantUnavailableError": "posfair_llamaindex.qdrant.retry",
    "EdgeQdrantClient": "posfair_llamaindex.qdrant.edge_client",
    "AsyncEdgeQdrantClient": "posfair_llamaindex.qdrant.edge_client",
    "RetryConfig": "posfair_llamaindex.qdrant.retry",
    "awith_retries": "posfair_llamaindex.qdrant.retry",
    "with_retries": "posfair_llamaindex.qdrant.retry",
    "POINT_FINGERPRINT_KEY": "posfair_llamaindex.qdrant.store",
    "TEXT_HASH_KEY": "posfair_llamaindex.qdrant.store",
    "PosFairQdrantVectorStore": "posfair_llamaindex.qdrant.store",
    "atagged_vector_store": "posfair_llamaindex.qdrant.store",
    "point_id": "posfair_llamaindex.qdrant.store",
    "tagged_vector_store": "posfair_llamaindex.qdrant.store",
}

__all__ = sorted(_WHERE)

if TYPE_CHECKING:
    from posfair_llamaindex.qdrant.collection import (
        METADATA_KEY,
        CollectionTagMismatchError,
        aensure_tagged_collection,
        check_collection,
        collection_tag,
        ensure_tagged_collection,
        list_tagged_collections,
    )
    from posfair_llamaindex.qdrant.edge_client import AsyncEdgeQdrantClient, EdgeQdrantClient
    from posfair_llamaindex.qdrant.retry import (
        QdrantUnavailableError,
        RetryConfig,
        awith_retries,
        with_retries,
    )
    from posfair_llamaindex.qdrant.store import (
        POINT_FINGERPRINT_KEY,
        TEXT_HASH_KEY,
        PosFairQdrantVectorStore,
        atagged_vector_store,
        point_id,
        tagged_vector_store,
    )


__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
