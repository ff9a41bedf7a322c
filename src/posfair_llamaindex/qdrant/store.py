"""``PosFairQdrantVectorStore``: LlamaIndex's QdrantVectorStore on a tagged collection.

Two additions to the LlamaIndex store: every point's payload carries the tag fingerprint and a hash of
the text that was embedded, and point ids are derived deterministically from node ids, so any node id
(not only a UUID) is accepted and re-adding a node replaces its point. The hash lets a rerun ask Qdrant
which nodes are already stored unchanged, and embed only the rest.
"""

from __future__ import annotations

import dataclasses
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
    CUSTOM_SPARSE_ENCODER,
    DUAL_VECTORS,
    HYBRID_DENSE_VECTOR,
    HYBRID_SPARSE_VECTOR,
    PLAIN_VECTOR,
    CollectionSpec,
    HybridSettings,
    aensure_spec,
    collection_spec,
    ensure_spec,
)
from posfair_llamaindex.qdrant.retry import DEFAULT_RETRY, RetryPolicy, awith_retries, describe_client, with_retries

POINT_FINGERPRINT_KEY = "posfair_fingerprint"
TEXT_HASH_KEY = "posfair_text_sha256"
# sum and rrf are fused over this many candidates per vector (the maximum needs only top k: see _fused_request)
DEFAULT_FUSION_CANDIDATES = 100
# the maximum prefetches max(MAX_PREFETCH_FACTOR * k, max_candidates) hits per vector. Exact top k would suffice
# for exact search; on an HNSW-indexed collection the longer list (which also widens the HNSW beam, ef) keeps the
# recall of the fused top k at >= 0.99 (benchmarks/bench_hnsw_recall.py; RESULTS.md "HNSW recall of the fused
# max query")
MAX_PREFETCH_FACTOR = 2
DEFAULT_MAX_CANDIDATES = 100
# LlamaIndex's default fastembed sparse model, used when enable_hybrid=True comes without sparse functions
DEFAULT_FASTEMBED_SPARSE_MODEL = "prithivida/Splade_PP_en_v1"
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
    _max_candidates: int = PrivateAttr(default=DEFAULT_MAX_CANDIDATES)
    _spec: Optional[CollectionSpec] = PrivateAttr(default=None)
    _collection_options: dict = PrivateAttr(default_factory=dict)

    def __init__(
        self,
        collection_name: str,
        *,
        fingerprint: str,
        dimension: int,
        retry: RetryPolicy = DEFAULT_RETRY,
        fusion: Optional[str] = None,
        fusion_candidates: int = DEFAULT_FUSION_CANDIDATES,
        max_candidates: int = DEFAULT_MAX_CANDIDATES,
        spec: Optional[CollectionSpec] = None,
        collection_options: Optional[dict[str, Any]] = None,
        **kwargs: Any,
    ) -> None:
        """``fusion`` makes this a dual store: points hold ``plain`` and ``calibrated`` named vectors, and a
        query fetches the top hits by each and fuses their scores by that rule. ``spec`` is the tagged
        collection to re-create when an ``add`` follows ``clear`` (LlamaIndex's store would make it untagged)."""
        if fusion is not None and fusion not in FUSIONS:
            raise ValueError(f"fusion must be one of {FUSIONS}, got {fusion!r}")
        if fusion is not None and kwargs.get("enable_hybrid"):
            raise ValueError("a dual store fuses its own two dense vectors; it cannot also be a hybrid store")
        _positive(fusion_candidates, "fusion_candidates")
        _positive(max_candidates, "max_candidates")
        super().__init__(collection_name=collection_name, **kwargs)
        self._fingerprint = fingerprint
        self._dimension = dimension
        self._retry = retry
        self._fusion = fusion
        self._fusion_candidates = fusion_candidates
        self._max_candidates = max_candidates
        self._spec = spec
        self._collection_options = dict(collection_options or {})

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

    # ------------------------------------------------------------------ writing
    def add(self, nodes: list[BaseNode], **add_kwargs: Any) -> list[str]:
        self._check_dimensions(nodes)  # before a collection dropped by clear() is created again
        return super().add(nodes, **add_kwargs)

    async def async_add(self, nodes: list[BaseNode], **kwargs: Any) -> list[str]:
        self._check_dimensions(nodes)
        return await super().async_add(nodes, **kwargs)

    def _create_collection(self, collection_name: str, vector_size: int) -> None:
        """Called by LlamaIndex's ``add`` when the collection is missing (after ``clear``): create it tagged."""
        ensure_spec(self._client, collection_name, self._require_spec(), retry=self._retry, **self._collection_options)
        self._collection_initialized = True

    async def _acreate_collection(self, collection_name: str, vector_size: int) -> None:
        self._ensure_async_client()
        await aensure_spec(
            self._aclient, collection_name, self._require_spec(), retry=self._retry, **self._collection_options
        )
        self._collection_initialized = True

    def _require_spec(self) -> CollectionSpec:
        if self._spec is None:
            raise ValueError(
                f"collection {self.collection_name!r} does not exist and this store was built without its "
                "collection spec, so it cannot create it tagged; open the store with tagged_vector_store"
            )
        return self._spec

    def _check_dimensions(self, nodes: Sequence[BaseNode]) -> None:
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

    def _build_points(self, nodes: list[BaseNode], sparse_vector_name: str) -> tuple[list[Any], list[str]]:
        self._check_dimensions(nodes)
        points, node_ids = super()._build_points(nodes, sparse_vector_name)
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
        # LlamaIndex's add returns node ids, whatever ids its points get
        return points, node_ids

    # ------------------------------------------------------------------ dual search
    def _fused_request(self, query: VectorStoreQuery, kwargs: dict[str, Any]) -> dict[str, Any]:
        """One query-API request: a prefetch per named vector, their scores fused on the server.

        For the maximum, prefetching the top k of each vector is exact: a document in the top k by
        ``max(plain, calibrated)`` is in the top k of the vector that gives its maximum, since otherwise k
        documents would beat it on that vector alone, and so on their maximum. That holds for exact top-k
        lists; on an HNSW-indexed collection each prefetch is approximate, so the maximum prefetches
        ``max(2k, max_candidates)`` hits (a longer list also widens the HNSW beam), which measured recall
        >= 0.99 of the exact fused top k without a filter (RESULTS.md). Sum and RRF are
        fused over ``fusion_candidates`` hits per vector; a document missing from one list counts
        ``MISSING_SCORE`` there (sum) or nothing (RRF). ``search_params`` (``hnsw_ef``, ``exact``) go to both
        prefetches.
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
        if fusion == "max":
            floor = _positive(kwargs.get("max_candidates", self._max_candidates), "max_candidates")
            per_vector = max(MAX_PREFETCH_FACTOR * top_k, floor)
        else:
            candidates = kwargs.get("fusion_candidates", self._fusion_candidates)
            per_vector = max(top_k, _positive(candidates, "fusion_candidates"))
        params = kwargs.get("search_params")
        if isinstance(params, dict):  # as LlamaIndex's store accepts them: {"hnsw_ef": 256} or {"exact": True}
            params = rest.SearchParams(**params)
        if params is not None and not isinstance(params, rest.SearchParams):
            raise TypeError(f"search_params must be a dict or qdrant SearchParams, got {type(params).__name__}")
        prefetch = [
            rest.Prefetch(query=list(embedding), using=name, limit=per_vector, filter=query_filter, params=params)
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
        if query.node_ids:  # a dataclass in llama-index-core, copied so the caller's query is left alone
            query = dataclasses.replace(query, node_ids=[point_id(n) for n in query.node_ids])
        return super()._build_query_filter(query)

    def parse_to_query_result(self, response: list[Any]) -> VectorStoreQueryResult:
        """LlamaIndex's result, with ``ids`` holding node ids (from the payload), not point ids."""
        result = super().parse_to_query_result(response)
        result.ids = [node.node_id for node in result.nodes or []]
        return result

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


def _positive(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    return value


def _mapped(node_ids: Optional[list[str]]) -> Optional[list[str]]:
    return None if node_ids is None else [point_id(n) for n in node_ids]


def hybrid_settings_from(store_kwargs: dict[str, Any], embed_model: PosFairEmbedding) -> Optional[HybridSettings]:
    """The sparse vector that LlamaIndex's hybrid options ask for, or None for a dense-only collection.

    Checked before anything is created: hybrid needs either both sparse functions or fastembed installed.
    """
    model = store_kwargs.get("fastembed_sparse_model")
    if not (store_kwargs.get("enable_hybrid") or model is not None):
        return None
    if embed_model.is_dual:
        collection_spec(embed_model, HybridSettings())  # raises, naming why dual and hybrid do not mix
    doc_fn, query_fn = store_kwargs.get("sparse_doc_fn"), store_kwargs.get("sparse_query_fn")
    if doc_fn is None or query_fn is None:
        try:
            import fastembed  # noqa: F401
        except ImportError:
            missing = " and ".join(
                n for n, f in (("sparse_doc_fn", doc_fn), ("sparse_query_fn", query_fn)) if f is None
            )
            raise ValueError(
                f"enable_hybrid=True without {missing} uses a fastembed sparse model, but fastembed is not "
                "installed: pass sparse_doc_fn and sparse_query_fn (callables: texts -> (indices, values)), or "
                "pip install fastembed"
            ) from None
    sparse_config = store_kwargs.get("sparse_config")
    if sparse_config is not None:
        idf = sparse_config.modifier == rest.Modifier.IDF
    else:  # LlamaIndex's rule: IDF only for a named fastembed model that needs it
        from llama_index.vector_stores.qdrant.base import _requires_idf

        idf = model is not None and _requires_idf(model)
    return HybridSettings(
        dense_vector=store_kwargs.get("dense_vector_name") or HYBRID_DENSE_VECTOR,
        sparse_vector=store_kwargs.get("sparse_vector_name") or HYBRID_SPARSE_VECTOR,
        sparse_encoder=CUSTOM_SPARSE_ENCODER if doc_fn is not None else (model or DEFAULT_FASTEMBED_SPARSE_MODEL),
        idf=idf,
    )


def _store_for(
    collection_name: str,
    embed_model: PosFairEmbedding,
    spec: CollectionSpec,
    retry: RetryPolicy,
    collection_options: Optional[dict[str, Any]],
    store_kwargs: dict[str, Any],
    **clients: Any,
) -> PosFairQdrantVectorStore:
    return PosFairQdrantVectorStore(
        collection_name,
        **clients,
        fingerprint=embed_model.fingerprint(),
        dimension=embed_model.dimension,
        retry=retry,
        fusion=embed_model.fusion if embed_model.is_dual else None,
        spec=spec,
        collection_options=collection_options,
        **store_kwargs,
    )


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
    LlamaIndex's ``QdrantVectorStore``. With ``enable_hybrid=True`` (and ``sparse_doc_fn``/``sparse_query_fn``,
    or fastembed) the collection gets LlamaIndex's named dense vector and a sparse vector, recorded in the tag.
    """
    if client is None:
        raise ValueError(
            "tagged_vector_store needs a QdrantClient; with only an AsyncQdrantClient use atagged_vector_store"
        )
    if not isinstance(client, QdrantClient):
        raise TypeError(f"client must be a QdrantClient, got {type(client).__name__}")
    _check_embed_model(embed_model)
    spec = collection_spec(embed_model, hybrid_settings_from(store_kwargs, embed_model))
    ensure_spec(client, collection_name, spec, recreate=recreate, retry=retry, **(collection_options or {}))
    return _store_for(
        collection_name, embed_model, spec, retry, collection_options, store_kwargs, client=client, aclient=aclient
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
    _check_embed_model(embed_model)
    spec = collection_spec(embed_model, hybrid_settings_from(store_kwargs, embed_model))
    await aensure_spec(aclient, collection_name, spec, recreate=recreate, retry=retry, **(collection_options or {}))
    return _store_for(collection_name, embed_model, spec, retry, collection_options, store_kwargs, aclient=aclient)


def _check_embed_model(embed_model: Any) -> None:
    if not isinstance(embed_model, PosFairEmbedding):
        raise TypeError(f"embed_model must be a PosFairEmbedding, got {type(embed_model).__name__}")
