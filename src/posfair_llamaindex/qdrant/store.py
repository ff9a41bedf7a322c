"""``PosFairQdrantVectorStore``: LlamaIndex's QdrantVectorStore on a tagged collection.

Two additions to the LlamaIndex store: every point's payload carries the tag fingerprint and a hash of
the text that was embedded, and point ids are derived deterministically from node ids, so any node id
(not only a UUID) is accepted and re-adding a node replaces its point. The hash lets a rerun ask Qdrant
which nodes are already stored unchanged, and embed only the rest.

What a point holds and how a query reads it comes from the collection's :class:`VectorLayout`: a collection
with one dense vector is queried by LlamaIndex's own code; one with several (dual) is queried by one fused
request built from the layout, hybrid or not.
"""

from __future__ import annotations

import dataclasses
import hashlib
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Optional, cast

from llama_index.core.schema import BaseNode, MetadataMode
from llama_index.core.vector_stores.types import VectorStoreQuery, VectorStoreQueryMode, VectorStoreQueryResult
from llama_index.vector_stores.qdrant import QdrantVectorStore
from llama_index.vector_stores.qdrant.base import DOCUMENT_ID_KEY
from pydantic import Field, PrivateAttr
from qdrant_client import AsyncQdrantClient, QdrantClient
from qdrant_client.http import models as rest

from posfair_llamaindex.modes import DUAL_VECTORS
from posfair_llamaindex.options import FUSIONS, RRF_K
from posfair_llamaindex.qdrant.collection import (
    TaggedCollectionConfig,
    aensure_collection_config,
    aopen_collection_config,
    check_collection_config,
    ensure_collection_config,
    open_collection_config,
    tag_for,
)
from posfair_llamaindex.qdrant.retry import (
    DEFAULT_RETRY,
    RetryConfig,
    awith_retries,
    describe_client,
    with_retries,
)
from posfair_llamaindex.qdrant.store_options import CollectionCreateConfig, ResolvedStoreConfig, resolve_options
from posfair_llamaindex.qdrant.vector_layout import (
    CUSTOM_SPARSE_ENCODER,
    DEFAULT_FUSION_CANDIDATES,
    DEFAULT_MAX_CANDIDATES,
    MAX_PREFETCH_FACTOR,
    MISSING_SCORE,
    UNNAMED_VECTOR,
    QueryFusion,
    SparseVector,
    VectorLayout,
    dense_vector,
    layout_for,
    mode_vectors,
)
from posfair_llamaindex.qdrant.vector_storage import StorageChoice

if TYPE_CHECKING:  # a store reading a tagged collection needs no model, so importing it loads no torch
    from posfair_llamaindex.embedding import PosFairEmbedding

__all__ = [
    "DEFAULT_FUSION_CANDIDATES",
    "DEFAULT_MAX_CANDIDATES",
    "MAX_PREFETCH_FACTOR",
    "MISSING_SCORE",
    "POINT_FINGERPRINT_KEY",
    "TEXT_HASH_KEY",
    "PosFairQdrantVectorStore",
    "atagged_vector_store",
    "embedded_text_hash",
    "point_id",
    "tagged_vector_store",
]

POINT_FINGERPRINT_KEY = "posfair_fingerprint"
TEXT_HASH_KEY = "posfair_text_sha256"
# LlamaIndex's default fastembed sparse model, used when enable_hybrid=True comes without sparse functions
DEFAULT_FASTEMBED_SPARSE_MODEL = "prithivida/Splade_PP_en_v1"
# LlamaIndex's alpha when a hybrid query gives none: dense and sparse weigh the same
DEFAULT_ALPHA = 0.5
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
    """LlamaIndex's QdrantVectorStore on a tagged collection (build it with :func:`tagged_vector_store`).

    ``to_dict`` gives LlamaIndex's fields plus the collection's tag, its vector layout and its creation options,
    so ``from_dict(data, client=...)`` reopens the same collection (checking its tag) and can create it again
    after ``clear``; pickling keeps them too.
    """

    # holds every mode's document embedding (dual's two vectors, windows' multivector): see modes.HOLDS_EVERY_MODE
    holds_every_posfair_mode: ClassVar[bool] = True
    posfair_tag: Optional[dict[str, Any]] = Field(
        default=None, description="The collection's tag (its metadata): what made its vectors."
    )
    vector_layout: Optional[VectorLayout] = Field(
        default=None, description="The collection's named vectors and how a query fuses them."
    )
    collection_config: CollectionCreateConfig = Field(
        default_factory=CollectionCreateConfig, description="How the collection is created (cluster, indexes)."
    )

    _fingerprint: str = PrivateAttr()
    _dimension: int = PrivateAttr()
    _retry: RetryConfig = PrivateAttr(default=DEFAULT_RETRY)
    _checked: bool = PrivateAttr(default=False)  # the collection's tag was compared with ours

    def __init__(
        self,
        collection_name: str,
        *,
        vector_layout: Any = None,
        posfair_tag: Optional[dict[str, Any]] = None,
        collection_config: Any = None,
        fingerprint: Optional[str] = None,
        dimension: Optional[int] = None,
        fusion: Optional[str] = None,
        fusion_candidates: Optional[int] = None,
        max_candidates: Optional[int] = None,
        retry: RetryConfig = DEFAULT_RETRY,
        check_collection: bool = True,
        **kwargs: Any,
    ) -> None:
        """Build from a layout and a tag (as :func:`tagged_vector_store` and ``from_dict`` do), or, for a
        collection already checked elsewhere, from ``fingerprint``, ``dimension`` and a dual ``fusion``.

        ``check_collection``: when the collection exists and the tag is known, check it before use (at once with a
        sync client; with only an async one, on its first async call).
        """
        layout = _layout_from(vector_layout, dimension, fusion, fusion_candidates, max_candidates)
        if posfair_tag is None and fingerprint is None:
            raise ValueError("a PosFairQdrantVectorStore needs the collection's tag (posfair_tag) or its fingerprint")
        fingerprint = fingerprint if fingerprint is not None else posfair_tag.get("fingerprint")
        if posfair_tag is not None and posfair_tag.get("fingerprint") != fingerprint:
            raise ValueError(f"fingerprint {fingerprint!r} is not the tag's {posfair_tag.get('fingerprint')!r}")
        options = CollectionCreateConfig.model_validate(collection_config or {})
        for unused in ("stores_text", "is_embedding_query", "flat_metadata", "class_name"):  # to_dict's extras
            kwargs.pop(unused, None)
        if kwargs.get("enable_hybrid") and layout.sparse is None:
            raise ValueError(
                "enable_hybrid=True needs a layout with a sparse vector (build the store with tagged_vector_store)"
            )
        if layout.sparse is not None:
            kwargs["enable_hybrid"] = True
            kwargs.setdefault("sparse_vector_name", layout.sparse.name)
            if len(layout.dense) == 1:
                kwargs.setdefault("dense_vector_name", layout.dense[0].name)
        super().__init__(collection_name=collection_name, **kwargs)
        if layout.sparse is not None and layout.sparse.name != self.sparse_vector_name:
            raise ValueError(
                f"sparse_vector_name {self.sparse_vector_name!r} is not the collection's sparse vector "
                f"{layout.sparse.name!r}"
            )
        self.posfair_tag = posfair_tag
        self.vector_layout = layout
        self.collection_config = options
        self._fingerprint = fingerprint
        self._dimension = layout.dimension
        self._retry = retry
        self._checked = not check_collection or posfair_tag is None
        if not self._checked and self._client is not None and self._collection_initialized:
            info = self._call("get_collection", collection_name=collection_name)
            check_collection_config(collection_name, info, self._collection_config())
            self._checked = True

    async def _acheck_collection(self) -> None:
        """An async-only store checks the collection's tag on its first async call (its constructor cannot)."""
        if self._checked or self._aclient is None:
            return
        if await self._acall("collection_exists", collection_name=self.collection_name):
            info = await self._acall("get_collection", collection_name=self.collection_name)
            check_collection_config(self.collection_name, info, self._collection_config())
        self._checked = True

    @classmethod
    def class_name(cls) -> str:
        return "PosFairQdrantVectorStore"

    @property
    def layout(self) -> VectorLayout:
        return cast(VectorLayout, self.vector_layout)

    @property
    def is_dual(self) -> bool:
        return self.layout.names == DUAL_VECTORS

    @property
    def fusion(self) -> Optional[str]:
        """The default rule fusing the dense vectors (None with one dense vector)."""
        return self.layout.fusion.rule

    @property
    def fingerprint(self) -> str:
        return self._fingerprint

    @property
    def retry(self) -> RetryConfig:
        return self._retry

    def _collection_config(self) -> TaggedCollectionConfig:
        if self.posfair_tag is None:
            raise ValueError(
                f"collection {self.collection_name!r} does not exist and this store was built without its "
                "tag, so it cannot create it tagged; open the store with tagged_vector_store"
            )
        return TaggedCollectionConfig(tag=self.posfair_tag, layout=self.layout, options=self.collection_config)

    # ------------------------------------------------------------------ writing
    def add(self, nodes: list[BaseNode], **add_kwargs: Any) -> list[str]:
        self._check_dimensions(nodes)  # before a collection dropped by clear() is created again
        return super().add(nodes, **add_kwargs)

    async def async_add(self, nodes: list[BaseNode], **kwargs: Any) -> list[str]:
        self._check_dimensions(nodes)
        await self._acheck_collection()
        return await super().async_add(nodes, **kwargs)

    def _create_collection(self, collection_name: str, vector_size: int) -> None:
        """Called by LlamaIndex's ``add`` when the collection is missing (after ``clear``): create it tagged."""
        ensure_collection_config(self._client, collection_name, self._collection_config(), retry=self._retry)
        self._collection_initialized = True

    async def _acreate_collection(self, collection_name: str, vector_size: int) -> None:
        self._ensure_async_client()
        await aensure_collection_config(self._aclient, collection_name, self._collection_config(), retry=self._retry)
        self._collection_initialized = True

    def _check_dimensions(self, nodes: Sequence[BaseNode]) -> None:
        layout = self.layout
        for node in nodes:
            size = len(node.get_embedding())
            if layout.check_embedding(size) is None:
                continue
            hint = ""
            if layout.is_plain and size == 2 * layout.dimension:
                hint = (
                    " A dual embedding writes 2 x dimension floats per node; open the collection with that embedding."
                )
            raise ValueError(
                f"node {node.node_id!r} has a {size}-dimensional embedding; collection {self.collection_name!r} "
                f"holds {_kind(layout)} {layout.dimension}-dimensional posfair vectors, so it expects "
                f"{layout.expected_size()} ({layout.describe_embedding()}; fingerprint {self._fingerprint}).{hint}"
            )

    def _build_points(self, nodes: list[BaseNode], sparse_vector_name: str) -> tuple[list[Any], list[str]]:
        self._check_dimensions(nodes)
        points, node_ids = super()._build_points(nodes, sparse_vector_name)
        layout = self.layout
        for point, node in zip(points, nodes, strict=True):
            point.id = point_id(point.id)
            point.payload[POINT_FINGERPRINT_KEY] = self._fingerprint
            point.payload[TEXT_HASH_KEY] = embedded_text_hash(node)
            if layout.names == (UNNAMED_VECTOR,):
                continue  # LlamaIndex's own point, under the name its format detection found
            built = point.vector if isinstance(point.vector, dict) else {}
            point.vector = layout.point_vectors(node.get_embedding(), built.get(sparse_vector_name))
        # LlamaIndex's add returns node ids, whatever ids its points get
        return points, node_ids

    # ------------------------------------------------------------------ fused search (several dense vectors)
    def _fused_request(self, query: VectorStoreQuery, kwargs: dict[str, Any]) -> dict[str, Any]:
        """One query-API request for the dense ranking: a prefetch per named vector, fused on the server by the
        layout's rule (``fusion=`` per query; see :meth:`VectorLayout.fused_dense`), or a multivector's own query.
        ``search_params`` (``hnsw_ef``, ``exact``) go to every prefetch; ``shard_identifier`` picks the shard key
        as upstream."""
        found = self._dense_search(query, kwargs)
        renamed = {"filter": "query_filter", "params": "search_params"}  # query_points' names for these two
        request = dict(
            collection_name=self.collection_name,
            **{renamed.get(key, key): value for key, value in found.items()},
            limit=query.similarity_top_k,
            with_payload=True,
        )
        selector = self._shard_selector(kwargs)
        if selector is not None:
            request["shard_key_selector"] = selector
        return request

    def _dense_search(self, query: VectorStoreQuery, kwargs: dict[str, Any]) -> dict[str, Any]:
        layout = self.layout
        return layout.dense_search(
            layout.check_query(query.query_embedding),
            query.similarity_top_k,
            query_filter=self._filter_for(query, kwargs),
            params=_search_params(kwargs),
            rule=kwargs.get("fusion"),
            candidates=kwargs.get("fusion_candidates"),
            max_candidates=kwargs.get("max_candidates"),
        )

    def _filter_for(self, query: VectorStoreQuery, kwargs: dict[str, Any]) -> Any:
        return kwargs.get("qdrant_filters") or self._build_query_filter(query)

    def _shard_selector(self, kwargs: dict[str, Any]) -> Any:
        identifier = kwargs.get("shard_identifier")
        return None if identifier is None else self._generate_shard_key_selector(identifier)

    def _search_kind(self, query: VectorStoreQuery) -> str:
        """ "dense", "sparse" or "hybrid", as LlamaIndex's query code decides it from the mode."""
        if query.mode == VectorStoreQueryMode.HYBRID and not self.enable_hybrid:
            raise ValueError(
                "Hybrid search is not enabled. Please build the query with `enable_hybrid=True` in the constructor."
            )
        ready = self.enable_hybrid and self._sparse_query_fn is not None and query.query_str is not None
        if ready and query.mode == VectorStoreQueryMode.HYBRID:
            return "hybrid"
        if ready and query.mode == VectorStoreQueryMode.SPARSE:
            return "sparse"
        return "dense"

    def _sparse_query(self, query: VectorStoreQuery) -> tuple[list[int], list[float]]:
        indices, values = self._sparse_query_fn([query.query_str])
        return list(indices[0]), list(values[0])

    def _sparse_request(self, query: VectorStoreQuery, kwargs: dict[str, Any]) -> rest.QueryRequest:
        indices, values = self._sparse_query(query)
        return rest.QueryRequest(
            query=rest.SparseVector(indices=indices, values=values),
            using=self.layout.sparse.name,
            limit=query.sparse_top_k or query.similarity_top_k,
            filter=self._filter_for(query, kwargs),
            with_payload=True,
            shard_key=self._shard_selector(kwargs),
            params=_search_params(kwargs),
        )

    def _hybrid_requests(self, query: VectorStoreQuery, kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The hybrid search of a layout LlamaIndex's code cannot query: the dense ranking first (the dense vectors'
        fusion), then the sparse one.

        The rule: ``hybrid_fusion=`` of the query, else of the store, else DBSF (the measured best), or
        ``relative`` when the query gives ``alpha`` (DBSF has no weights; an explicit DBSF with alpha is refused).
        ``relative`` (LlamaIndex's rule): one batch request holds the dense top k and the sparse top k
        (``sparse_top_k``), which ``hybrid_fusion_fn`` fuses with ``alpha``. ``rrf`` and ``dbsf``: one request
        whose dense prefetch is itself the dense request, fused with the sparse prefetch on the server; ``alpha``
        weighs RRF's two rankings ``[2 alpha, 2 (1 - alpha)]`` (so 0.5 is plain RRF) as Qdrant's weighted RRF does
        (a rank r counts as ``(r + 1) / weight - 1``); DBSF has no weights.
        """
        rule = self.layout.fusion.hybrid_rule_for(kwargs.get("hybrid_fusion"), query.alpha)
        dense = self._dense_search(query, kwargs)
        selector = self._shard_selector(kwargs)
        sparse = self._sparse_request(query, kwargs)
        if rule == "relative":
            dense_request = rest.QueryRequest(
                **dense, limit=query.similarity_top_k, with_payload=True, shard_key=selector
            )
            return rule, dict(collection_name=self.collection_name, requests=[dense_request, sparse])
        dense_prefetch = rest.Prefetch(**dense, limit=query.similarity_top_k)
        sparse_prefetch = rest.Prefetch(
            query=sparse.query, using=sparse.using, limit=sparse.limit, filter=sparse.filter, params=sparse.params
        )
        if rule == "rrf":
            # alpha 0.5 weighs both rankings 1 (plain RRF); 1 leaves the dense ranking alone, 0 the sparse one
            weights = None if query.alpha is None else [2 * query.alpha, 2 * (1.0 - query.alpha)]
            fused: Any = rest.RrfQuery(rrf=rest.Rrf(k=RRF_K, weights=weights))
        else:
            fused = rest.FusionQuery(fusion=rest.Fusion.DBSF)
        request = dict(
            collection_name=self.collection_name,
            prefetch=[dense_prefetch, sparse_prefetch],
            query=fused,
            limit=query.hybrid_top_k or query.similarity_top_k,
            with_payload=True,
        )
        if selector is not None:
            request["shard_key_selector"] = selector
        return rule, request

    def _fuse_relative(self, query: VectorStoreQuery, responses: list[Any]) -> VectorStoreQueryResult:
        dense, sparse = (self.parse_to_query_result(r.points) for r in responses)
        return self._hybrid_fusion_fn(
            dense,
            sparse,
            alpha=query.alpha if query.alpha is not None else DEFAULT_ALPHA,
            top_k=query.hybrid_top_k or query.similarity_top_k,
        )

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        if self.layout.is_plain:
            return super().query(query, **kwargs)
        method, request, finish = self._query_plan(query, kwargs)
        return finish(self._call(method, **request))

    async def aquery(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        await self._acheck_collection()
        if self.layout.is_plain:
            return await super().aquery(query, **kwargs)
        self._ensure_async_client()
        method, request, finish = self._query_plan(query, kwargs)
        return finish(await self._acall(method, **request))

    def _query_plan(
        self, query: VectorStoreQuery, kwargs: dict[str, Any]
    ) -> tuple[str, dict[str, Any], Callable[[Any], VectorStoreQueryResult]]:
        """The client method, its arguments and how its response becomes the result, for a layout LlamaIndex's
        code cannot query (the same plan for the sync and the async client)."""
        kind = self._search_kind(query)
        if kind == "sparse":
            request = dict(collection_name=self.collection_name, requests=[self._sparse_request(query, kwargs)])
            return "query_batch_points", request, lambda responses: self.parse_to_query_result(responses[0].points)
        if kind == "hybrid":
            rule, request = self._hybrid_requests(query, kwargs)
            if rule == "relative":
                return "query_batch_points", request, lambda responses: self._fuse_relative(query, responses)
            return "query_points", request, lambda response: self.parse_to_query_result(response.points)
        request = self._fused_request(query, kwargs)
        return "query_points", request, lambda response: self.parse_to_query_result(response.points)

    def _call(self, method: str, **request: Any) -> Any:
        call = getattr(self._client, method)
        return with_retries(
            lambda: call(**request), what=method, target=describe_client(self._client), policy=self._retry
        )

    async def _acall(self, method: str, **request: Any) -> Any:
        call = getattr(self._aclient, method)
        return await awith_retries(
            lambda: call(**request), what=method, target=describe_client(self._aclient), policy=self._retry
        )

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
        await self._acheck_collection()
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


def _kind(layout: VectorLayout) -> str:
    if layout.is_plain:
        return "single"
    if layout.names == DUAL_VECTORS:
        return "dual (plain + calibrated)"
    return " + ".join(layout.names)


def _layout_from(
    layout: Any,
    dimension: Optional[int],
    fusion: Optional[str],
    fusion_candidates: Optional[int],
    max_candidates: Optional[int],
) -> VectorLayout:
    """The store's layout: the one given (a ``VectorLayout`` or its dict), or one or two Cosine vectors."""
    if layout is not None:
        if dimension is not None or fusion is not None:
            raise ValueError("give either vector_layout or dimension and fusion, not both")
        layout = VectorLayout.model_validate(layout)
        updates = {
            key: value
            for key, value in (("candidates", fusion_candidates), ("max_candidates", max_candidates))
            if value is not None
        }
        if updates:
            layout = layout.model_copy(update={"fusion": QueryFusion(**{**layout.fusion.model_dump(), **updates})})
        return layout
    if dimension is None:
        raise ValueError("a PosFairQdrantVectorStore needs its vector_layout, or the dimension of its vectors")
    if fusion is not None and fusion not in FUSIONS:
        raise ValueError(f"fusion must be one of {FUSIONS}, got {fusion!r}")
    names = DUAL_VECTORS if fusion is not None else (UNNAMED_VECTOR,)
    return VectorLayout(
        dimension=dimension,
        dense=tuple(dense_vector(name, dimension) for name in names),
        fusion=QueryFusion(
            rule=fusion,
            candidates=DEFAULT_FUSION_CANDIDATES if fusion_candidates is None else fusion_candidates,
            max_candidates=DEFAULT_MAX_CANDIDATES if max_candidates is None else max_candidates,
        ),
    )


def _search_params(kwargs: dict[str, Any]) -> Optional[rest.SearchParams]:
    params = kwargs.get("search_params")
    if isinstance(params, dict):  # as LlamaIndex's store accepts them: {"hnsw_ef": 256} or {"exact": True}
        params = rest.SearchParams(**params)
    if params is not None and not isinstance(params, rest.SearchParams):
        raise TypeError(f"search_params must be a dict or qdrant SearchParams, got {type(params).__name__}")
    return params


def _mapped(node_ids: Optional[list[str]]) -> Optional[list[str]]:
    return None if node_ids is None else [point_id(n) for n in node_ids]


def sparse_vector_for(resolved: ResolvedStoreConfig, store_kwargs: dict[str, Any]) -> Optional[SparseVector]:
    """The sparse vector that LlamaIndex's hybrid options ask for, or None for a dense-only collection.

    Checked before anything is created: hybrid needs either both sparse functions or fastembed installed.
    The sparse params are ``sparse_config``, else LlamaIndex's default (IDF only for a fastembed model that
    needs it).
    """
    if not resolved.hybrid:
        return None
    model = store_kwargs.get("fastembed_sparse_model")
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
    params = resolved.sparse_config
    if params is None:  # LlamaIndex's rule
        from llama_index.vector_stores.qdrant.base import _requires_idf

        params = rest.SparseVectorParams(
            index=rest.SparseIndexParams(), modifier=rest.Modifier.IDF if _requires_idf(model) else None
        )
    if doc_fn is not None:
        encoder = _own_tag(doc_fn) or CUSTOM_SPARSE_ENCODER
    else:
        encoder = model or DEFAULT_FASTEMBED_SPARSE_MODEL
    return SparseVector(
        name=store_kwargs.get("sparse_vector_name") or SparseVector.model_fields["name"].default,
        params=params.model_copy(deep=True),
        encoder=encoder,
    )


def _own_tag(encoder: Any) -> Optional[str]:
    """What a sparse encoder says it is (``posfair_sparse_tag``, on it or on the object of a bound method)."""
    for candidate in (encoder, getattr(encoder, "__self__", None)):
        tag = getattr(candidate, "posfair_sparse_tag", None)
        if isinstance(tag, str) and tag:
            return tag
    return None


@dataclasses.dataclass(frozen=True)
class StorePlan:
    """A store's collection (its config) and what LlamaIndex's store code gets, from the caller's options."""

    config: TaggedCollectionConfig
    store_kwargs: dict[str, Any]


def plan_store(
    embed_model: PosFairEmbedding,
    store_kwargs: dict[str, Any],
    collection_options: Optional[dict[str, Any]],
    vector_storage: StorageChoice = None,
) -> StorePlan:
    """Resolve every option into the tagged collection's config; refuses by name before anything is created."""
    _check_embed_model(embed_model)
    resolved = resolve_options(store_kwargs, collection_options, named=mode_vectors(embed_model))
    sparse = sparse_vector_for(resolved, resolved.store_kwargs)
    layout = layout_for(
        embed_model,
        sparse=sparse,
        dense_config=resolved.dense_config,
        dense_vector_name=resolved.store_kwargs.get("dense_vector_name"),
        fusion_candidates=resolved.posfair.get("fusion_candidates"),
        max_candidates=resolved.posfair.get("max_candidates"),
        # a fusion function of one's own means LlamaIndex's client-side fusion, whatever the default rule
        hybrid_rule=resolved.posfair.get("hybrid_fusion")
        or ("relative" if resolved.store_kwargs.get("hybrid_fusion_fn") is not None else None),
        vector_storage=vector_storage,
        # a collection-wide quantization_config is the caller's own storage choice: no default beside it
        default_storage=resolved.collection.quantization_config is None,
    )
    config = TaggedCollectionConfig(
        tag=tag_for(embed_model, layout),
        layout=layout,
        options=resolved.collection,
        adopt_storage=vector_storage is None,
    )
    return StorePlan(config=config, store_kwargs=resolved.store_kwargs)


def _clients(client: Any, aclient: Any, kwargs: dict[str, Any], *, need_sync: bool) -> tuple[Any, Any]:
    """The given clients, or (as LlamaIndex's store does) both built from ``url``, ``api_key``, ``client_kwargs``."""
    if client is None and aclient is None and kwargs.get("url"):
        extra = kwargs.get("client_kwargs") or {}
        url, api_key = kwargs["url"], kwargs.get("api_key")
        return QdrantClient(url=url, api_key=api_key, **extra), AsyncQdrantClient(url=url, api_key=api_key, **extra)
    if need_sync and client is None:
        raise ValueError(
            "tagged_vector_store needs a QdrantClient (or url=...); with only an AsyncQdrantClient use "
            "atagged_vector_store"
        )
    if client is not None and not isinstance(client, QdrantClient):
        raise TypeError(f"client must be a QdrantClient, got {type(client).__name__}")
    if aclient is not None and not isinstance(aclient, AsyncQdrantClient):
        raise TypeError(f"aclient must be an AsyncQdrantClient, got {type(aclient).__name__}")
    return client, aclient


def _store_for(collection_name: str, plan: StorePlan, retry: RetryConfig, **clients: Any) -> PosFairQdrantVectorStore:
    return PosFairQdrantVectorStore(
        collection_name,
        **clients,
        vector_layout=plan.config.layout,
        posfair_tag=plan.config.tag,
        collection_config=plan.config.options,
        retry=retry,
        check_collection=False,  # just checked (or created)
        **plan.store_kwargs,
    )


def tagged_vector_store(
    client: Optional[QdrantClient],
    collection_name: str,
    embed_model: PosFairEmbedding,
    *,
    aclient: Optional[AsyncQdrantClient] = None,
    recreate: bool = False,
    retry: RetryConfig = DEFAULT_RETRY,
    collection_options: Optional[dict[str, Any]] = None,
    vector_storage: StorageChoice = None,
    **store_kwargs: Any,
) -> PosFairQdrantVectorStore:
    """A ``QdrantVectorStore`` bound to a collection tagged for ``embed_model`` (created if missing).

    ``vector_storage`` says how the dense vectors are kept: ``"float32"``, ``"float16"``, ``"int8"`` or
    ``"binary"`` (int8 and binary: a quantized copy in RAM, the originals on disk, every search rescored), a
    :class:`~posfair_llamaindex.qdrant.vector_storage.VectorStorage` for its details, or ``{vector name: ...}``.
    Left unset, a new windows collection keeps its windows as int8 and everything else as float32, and an
    existing collection is read as it is stored; a choice that differs from an existing collection's is refused
    (:class:`CollectionTagMismatchError`, naming both).

    ``store_kwargs`` are LlamaIndex's ``QdrantVectorStore`` options, each with its meaning there (or refused by
    name: :data:`~posfair_llamaindex.qdrant.store_options.UPSTREAM_OPTIONS` says what each does here), plus
    ``fusion_candidates``, ``max_candidates`` and ``hybrid_fusion`` for dual collections.
    ``collection_options`` are further ``create_collection`` arguments (``hnsw_config``, ``optimizers_config``,
    ..., or the cluster options). With ``enable_hybrid=True`` (and ``sparse_doc_fn``/``sparse_query_fn``, or
    fastembed) the collection gets a sparse vector beside the dense one(s), recorded in the tag.
    """
    plan = plan_store(embed_model, store_kwargs, collection_options, vector_storage)
    client, aclient = _clients(client, aclient, plan.store_kwargs, need_sync=True)
    _, config = open_collection_config(client, collection_name, plan.config, recreate=recreate, retry=retry)
    plan = dataclasses.replace(plan, config=config)
    return _store_for(collection_name, plan, retry, client=client, aclient=aclient)


async def atagged_vector_store(
    aclient: Optional[AsyncQdrantClient],
    collection_name: str,
    embed_model: PosFairEmbedding,
    *,
    recreate: bool = False,
    retry: RetryConfig = DEFAULT_RETRY,
    collection_options: Optional[dict[str, Any]] = None,
    vector_storage: StorageChoice = None,
    **store_kwargs: Any,
) -> PosFairQdrantVectorStore:
    """The async twin of :func:`tagged_vector_store`, for an ``AsyncQdrantClient``."""
    plan = plan_store(embed_model, store_kwargs, collection_options, vector_storage)
    client, aclient = _clients(None, aclient, plan.store_kwargs, need_sync=False)
    if aclient is None:
        raise TypeError("atagged_vector_store needs an AsyncQdrantClient (or url=...)")
    _, config = await aopen_collection_config(aclient, collection_name, plan.config, recreate=recreate, retry=retry)
    plan = dataclasses.replace(plan, config=config)
    return _store_for(collection_name, plan, retry, client=client, aclient=aclient)


def _check_embed_model(embed_model: Any) -> None:
    from posfair_llamaindex.embedding import PosFairEmbedding

    if not isinstance(embed_model, PosFairEmbedding):
        raise TypeError(f"embed_model must be a PosFairEmbedding, got {type(embed_model).__name__}")
