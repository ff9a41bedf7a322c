"""``PosFairQdrantVectorStore``: LlamaIndex's QdrantVectorStore on a tagged collection.

Two additions to the LlamaIndex store: every point's payload carries the tag fingerprint and a hash of
the text that was embedded, and point ids are derived deterministically from node ids, so any node id
(not only a UUID) is accepted and re-adding a node replaces its point. The hash lets a rerun ask Qdrant
which nodes are already stored unchanged, and embed only the rest.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from typing import Any, Optional

from llama_index.core.schema import BaseNode, MetadataMode
from llama_index.core.vector_stores.types import VectorStoreQuery, VectorStoreQueryMode, VectorStoreQueryResult
from llama_index.vector_stores.qdrant import QdrantVectorStore
from llama_index.vector_stores.qdrant.base import DOCUMENT_ID_KEY
from pydantic import PrivateAttr
from qdrant_client import AsyncQdrantClient, QdrantClient
from qdrant_client.http import models as rest

from posfair_llamaindex.embedding import PosFairEmbedding
from posfair_llamaindex.options import FUSIONS, RRF_K
from posfair_llamaindex.qdrant.collection import (
    CALIBRATED_VECTOR,
    DUAL_VECTORS,
    PLAIN_VECTOR,
    aensure_tagged_collection,
    ensure_tagged_collection,
)
from posfair_llamaindex.qdrant.retry import DEFAULT_RETRY, RetryPolicy, awith_retries, describe_client, with_retries

POINT_FINGERPRINT_KEY = "posfair_fingerprint"
TEXT_HASH_KEY = "posfair_text_sha256"
# sum and rrf are fused over this many candidates per vector (the maximum needs only top k: see _fused_request)
DEFAULT_FUSION_CANDIDATES = 100
# what a formula counts for a document that one of the two prefetches did not return: below any cosine
MISSING_SCORE = -1.0
# Fixed namespace: the same node id maps to the same point id on every machine and in every version.
POINT_ID_NAMESPACE = uuid.UUID("6f1d3c4e-2b7a-5e0f-9a41-0c8d5b7e2f13")


def point_id(node_id: str) -> str:
    """The Qdrant point id of a node: the node id itself when it is a UUID, else a UUID5 of it."""
    try:
        return str(uuid.UUID(str(node_id)))
    except ValueError:
        return str(uuid.uuid5(POINT_ID_NAMESPACE, str(node_id)))


def embedded_text_hash(node: BaseNode) -> str:
    """SHA-256 of exactly what the embedding model sees for ``node``."""
    return hashlib.sha256(node.get_content(metadata_mode=MetadataMode.EMBED).encode("utf-8")).hexdigest()


class PosFairQdrantVectorStore(QdrantVectorStore):
    """LlamaIndex's QdrantVectorStore on a tagged collection (build it with :func:`tagged_vector_store`)."""

    _fingerprint: str = PrivateAttr()
    _dimension: int = PrivateAttr()
    _retry: RetryPolicy = PrivateAttr()
    _fusion: Optional[str] = PrivateAttr(default=None)
    _fusion_candidates: int = PrivateAttr(default=DEFAULT_FUSION_CANDIDATES)

    def __init__(
        self,
        collection_name: str,
        *,
        fingerprint: str,
        dimension: int,
        retry: RetryPolicy = DEFAULT_RETRY,
        fusion: Optional[str] = None,
        fusion_candidates: int = DEFAULT_FUSION_CANDIDATES,
        **kwargs: Any,
    ) -> None:
        """``fusion`` makes this a dual store: points hold ``plain`` and ``calibrated`` named vectors, and a
        query fetches the top hits by each and fuses their scores by that rule."""
        if fusion is not None and fusion not in FUSIONS:
            raise ValueError(f"fusion must be one of {FUSIONS}, got {fusion!r}")
        if fusion is not None and kwargs.get("enable_hybrid"):
            raise ValueError("a dual store fuses its own two dense vectors; it cannot also be a hybrid store")
        if isinstance(fusion_candidates, bool) or not isinstance(fusion_candidates, int) or fusion_candidates < 1:
            raise ValueError(f"fusion_candidates must be an int >= 1, got {fusion_candidates!r}")
        super().__init__(collection_name=collection_name, **kwargs)
        self._fingerprint = fingerprint
        self._dimension = dimension
        self._retry = retry
        self._fusion = fusion
        self._fusion_candidates = fusion_candidates

    @property
    def is_dual(self) -> bool:
        return self._fusion is not None

    @property
    def fusion(self) -> Optional[str]:
        return self._fusion

    @classmethod
    def class_name(cls) -> str:
        return "PosFairQdrantVectorStore"

    @property
    def fingerprint(self) -> str:
        return self._fingerprint

    def _build_points(self, nodes: list[BaseNode], sparse_vector_name: str) -> tuple[list[Any], list[str]]:
        expected = self._dimension * (2 if self.is_dual else 1)
        for node in nodes:
            size = len(node.get_embedding())
            if size != expected:
                kind = "dual (plain + calibrated)" if self.is_dual else "single"
                hint = (
                    " A dual embedding writes 2 x dimension floats per node; open the collection with that embedding."
                    if size == 2 * self._dimension and not self.is_dual
                    else ""
                )
                raise ValueError(
                    f"node {node.node_id!r} has a {size}-dimensional embedding; collection {self.collection_name!r} "
                    f"holds {kind} {self._dimension}-dimensional posfair vectors, so it expects {expected} "
                    f"(fingerprint {self._fingerprint}).{hint}"
                )
        points, _ = super()._build_points(nodes, sparse_vector_name)
        for point, node in zip(points, nodes, strict=True):
            point.id = point_id(point.id)
            point.payload[POINT_FINGERPRINT_KEY] = self._fingerprint
            point.payload[TEXT_HASH_KEY] = embedded_text_hash(node)
            if self.is_dual:
                embedding = node.get_embedding()
                point.vector = {
                    PLAIN_VECTOR: embedding[: self._dimension],
                    CALIBRATED_VECTOR: embedding[self._dimension :],
                }
        return points, [point.id for point in points]

    # ------------------------------------------------------------------ dual search
    def _fused_request(self, query: VectorStoreQuery, kwargs: dict[str, Any]) -> dict[str, Any]:
        """One query-API request: a prefetch per named vector, their scores fused on the server.

        For the maximum, prefetching the top k of each vector is exact: a document in the top k by
        ``max(plain, calibrated)`` is in the top k of the vector that gives its maximum, since otherwise k
        documents would beat it on that vector alone, and so on their maximum. Sum and RRF are fused over
        ``fusion_candidates`` hits per vector; a document missing from one list counts ``MISSING_SCORE``
        there (sum) or nothing (RRF).
        """
        if query.mode != VectorStoreQueryMode.DEFAULT:
            raise ValueError(f"a dual store answers dense queries only, not mode {query.mode.value!r}")
        embedding = query.query_embedding
        if embedding is None or len(embedding) != self._dimension:
            size = None if embedding is None else len(embedding)
            raise ValueError(f"a dual store needs a {self._dimension}-dimensional query embedding, got {size}")
        fusion = kwargs.get("fusion", self._fusion)
        if fusion not in FUSIONS:
            raise ValueError(f"fusion must be one of {FUSIONS}, got {fusion!r}")
        top_k = query.similarity_top_k
        query_filter = kwargs.get("qdrant_filters") or self._build_query_filter(query)
        per_vector = top_k if fusion == "max" else max(top_k, kwargs.get("fusion_candidates", self._fusion_candidates))
        prefetch = [
            rest.Prefetch(query=list(embedding), using=name, limit=per_vector, filter=query_filter)
            for name in DUAL_VECTORS
        ]
        scores = [f"$score[{i}]" for i in range(len(DUAL_VECTORS))]
        if fusion == "rrf":
            fused: Any = rest.RrfQuery(rrf=rest.Rrf(k=RRF_K))
        else:
            formula = rest.MaxExpression(max=scores) if fusion == "max" else rest.SumExpression(sum=scores)
            fused = rest.FormulaQuery(formula=formula, defaults={score: MISSING_SCORE for score in scores})
        return dict(
            collection_name=self.collection_name, prefetch=prefetch, query=fused, limit=top_k, with_payload=True
        )

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        if not self.is_dual:
            return super().query(query, **kwargs)
        request = self._fused_request(query, kwargs)
        response = with_retries(
            lambda: self._client.query_points(**request),
            what="query_points",
            target=describe_client(self._client),
            policy=self._retry,
        )
        return self.parse_to_query_result(response.points)

    async def aquery(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        if not self.is_dual:
            return await super().aquery(query, **kwargs)
        request = self._fused_request(query, kwargs)
        response = await awith_retries(
            lambda: self._aclient.query_points(**request),
            what="query_points",
            target=describe_client(self._aclient),
            policy=self._retry,
        )
        return self.parse_to_query_result(response.points)

    def _build_query_filter(self, query: VectorStoreQuery) -> Optional[Any]:
        if query.node_ids:
            query = query.model_copy(update={"node_ids": [point_id(n) for n in query.node_ids]})
        return super()._build_query_filter(query)

    def get_nodes(self, node_ids: Optional[list[str]] = None, **kwargs: Any) -> list[BaseNode]:
        return super().get_nodes(node_ids=_mapped(node_ids), **kwargs)

    async def aget_nodes(self, node_ids: Optional[list[str]] = None, **kwargs: Any) -> list[BaseNode]:
        return await super().aget_nodes(node_ids=_mapped(node_ids), **kwargs)

    def delete_nodes(self, node_ids: Optional[list[str]] = None, **kwargs: Any) -> None:
        super().delete_nodes(node_ids=_mapped(node_ids), **kwargs)

    async def adelete_nodes(self, node_ids: Optional[list[str]] = None, **kwargs: Any) -> None:
        await super().adelete_nodes(node_ids=_mapped(node_ids), **kwargs)

    def stored_text_hashes(self, node_ids: Sequence[str], batch_size: int = 256) -> dict[str, str]:
        """``{node id: text hash}`` for the nodes already stored under this store's fingerprint.

        Points written under another fingerprint, or before text hashes were recorded, are left out:
        they must be embedded again.
        """
        by_point = {point_id(n): n for n in node_ids}
        found: dict[str, str] = {}
        ids = list(by_point)
        target = describe_client(self._client)
        for start in range(0, len(ids), batch_size):
            chunk = ids[start : start + batch_size]
            records = with_retries(
                lambda chunk=chunk: self._client.retrieve(
                    self.collection_name,
                    ids=chunk,
                    with_payload=[POINT_FINGERPRINT_KEY, TEXT_HASH_KEY],
                    with_vectors=False,
                ),
                what="retrieve",
                target=target,
                policy=self._retry,
            )
            for record in records:
                payload = record.payload or {}
                if payload.get(POINT_FINGERPRINT_KEY) == self._fingerprint and payload.get(TEXT_HASH_KEY):
                    found[by_point[str(record.id)]] = payload[TEXT_HASH_KEY]
        return found

    def delete_stale(self, ref_doc_ids: Sequence[str], keep_point_ids: Sequence[str]) -> None:
        """Remove points of these documents that are not in ``keep_point_ids`` (left by an older version)."""
        if not ref_doc_ids:
            return
        selector = rest.Filter(
            must=[rest.FieldCondition(key=DOCUMENT_ID_KEY, match=rest.MatchAny(any=list(ref_doc_ids)))],
            must_not=[rest.HasIdCondition(has_id=list(keep_point_ids))] if keep_point_ids else None,
        )
        with_retries(
            lambda: self._client.delete(collection_name=self.collection_name, points_selector=selector, wait=True),
            what="delete",
            target=describe_client(self._client),
            policy=self._retry,
        )


def _mapped(node_ids: Optional[list[str]]) -> Optional[list[str]]:
    return None if node_ids is None else [point_id(n) for n in node_ids]


def tagged_vector_store(
    client: Optional[QdrantClient],
    collection_name: str,
    embed_model: PosFairEmbedding,
    *,
    aclient: Optional[AsyncQdrantClient] = None,
    recreate: bool = False,
    retry: RetryPolicy = DEFAULT_RETRY,
    collection_options: Optional[dict[str, Any]] = None,
    **store_kwargs: Any,
) -> PosFairQdrantVectorStore:
    """A ``QdrantVectorStore`` bound to a collection tagged for ``embed_model`` (created if missing).

    ``collection_options`` are passed to ``create_collection`` when the collection is new (for a cluster:
    ``shard_number``, ``replication_factor``, ``write_consistency_factor``); ``store_kwargs`` go to
    LlamaIndex's ``QdrantVectorStore``.
    """
    if client is None:
        raise ValueError(
            "tagged_vector_store needs a QdrantClient; with only an AsyncQdrantClient use atagged_vector_store"
        )
    if not isinstance(client, QdrantClient):
        raise TypeError(f"client must be a QdrantClient, got {type(client).__name__}")
    ensure_tagged_collection(
        client, collection_name, embed_model, recreate=recreate, retry=retry, **(collection_options or {})
    )
    return PosFairQdrantVectorStore(
        collection_name,
        client=client,
        aclient=aclient,
        fingerprint=embed_model.fingerprint(),
        dimension=embed_model.dimension,
        retry=retry,
        fusion=embed_model.fusion if embed_model.is_dual else None,
        **store_kwargs,
    )


async def atagged_vector_store(
    aclient: AsyncQdrantClient,
    collection_name: str,
    embed_model: PosFairEmbedding,
    *,
    recreate: bool = False,
    retry: RetryPolicy = DEFAULT_RETRY,
    collection_options: Optional[dict[str, Any]] = None,
    **store_kwargs: Any,
) -> PosFairQdrantVectorStore:
    """The async twin of :func:`tagged_vector_store`, for an ``AsyncQdrantClient``."""
    if not isinstance(aclient, AsyncQdrantClient):
        raise TypeError(f"aclient must be an AsyncQdrantClient, got {type(aclient).__name__}")
    await aensure_tagged_collection(
        aclient, collection_name, embed_model, recreate=recreate, retry=retry, **(collection_options or {})
    )
    return PosFairQdrantVectorStore(
        collection_name,
        aclient=aclient,
        fingerprint=embed_model.fingerprint(),
        dimension=embed_model.dimension,
        retry=retry,
        fusion=embed_model.fusion if embed_model.is_dual else None,
        **store_kwargs,
    )
