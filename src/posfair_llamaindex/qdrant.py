"""Qdrant collections that record which encoder and calibration config produced their vectors.

``tagged_vector_store`` (or ``atagged_vector_store`` for an ``AsyncQdrantClient``) creates the collection
with the right vector size, cosine distance and the embedding's tag in the collection metadata, or checks
the tag of an existing one and refuses a mismatch before anything is written. The returned
``PosFairQdrantVectorStore`` is LlamaIndex's ``QdrantVectorStore`` with two additions: every point's
payload carries the tag fingerprint, and point ids are derived deterministically from node ids, so any
node id (not only UUIDs) is accepted and re-adding a node replaces its point.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, TypeVar

from llama_index.core.schema import BaseNode
from llama_index.core.vector_stores.types import VectorStoreQuery

from llama_index.vector_stores.qdrant import QdrantVectorStore
from llama_index.vector_stores.qdrant.base import DOCUMENT_ID_KEY
from pydantic import PrivateAttr
from qdrant_client import AsyncQdrantClient, QdrantClient
from qdrant_client.http import models as rest
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from posfair_llamaindex.embedding import PosFairEmbedding, comparable_tag

logger = logging.getLogger(__name__)

METADATA_KEY = "posfair"
POINT_FINGERPRINT_KEY = "posfair_fingerprint"
# Fixed namespace: the same node id maps to the same point id on every machine and in every version.
POINT_ID_NAMESPACE = uuid.UUID("6f1d3c4e-2b7a-5e0f-9a41-0c8d5b7e2f13")

T = TypeVar("T")


class CollectionTagMismatchError(ValueError):
    """The collection holds vectors from a different encoder or calibration config."""

    def __init__(self, collection: str, stored: Optional[Dict[str, Any]], requested: Dict[str, Any]) -> None:
        self.collection, self.stored, self.requested = collection, stored, requested
        if stored is None:
            reason = "it has no posfair tag, so the origin of its vectors is unknown"
        else:
            keys = sorted(set(comparable_tag(stored)) | set(comparable_tag(requested)))
            differing = [k for k in keys if stored.get(k) != requested.get(k)]
            reason = "; ".join(f"{k}: stored {stored.get(k)!r} != requested {requested.get(k)!r}" for k in differing)
        super().__init__(
            f"Qdrant collection {collection!r} was not embedded with this configuration ({reason}). Nothing was "
            f"written. Stored tag: {json.dumps(stored, sort_keys=True)}. Requested tag: "
            f"{json.dumps(requested, sort_keys=True)}. Use another collection, or recreate=True "
            "(CLI: --recreate) to delete it and start again."
        )


class QdrantUnavailableError(ConnectionError):
    """Qdrant did not answer after the allowed retries."""


def point_id(node_id: str) -> str:
    """The Qdrant point id of a node: the node id itself when it is a UUID, else a UUID5 of it."""
    try:
        return str(uuid.UUID(str(node_id)))
    except ValueError:
        return str(uuid.uuid5(POINT_ID_NAMESPACE, str(node_id)))


def describe_client(client: Any) -> str:
    inner = getattr(client, "_client", None)
    location = getattr(inner, "location", None) or getattr(inner, "rest_uri", None)
    return str(location) if location else type(client).__name__


def _transient_errors() -> tuple:
    """Errors that mean "no answer": qdrant-client wraps HTTP transport errors; gRPC raises RpcError."""
    errors = [ResponseHandlingException, ConnectionError, TimeoutError]
    try:
        import grpc

        errors.append(grpc.RpcError)
    except ImportError:  # gRPC is optional in qdrant-client
        pass
    return tuple(errors)


_TRANSIENT = _transient_errors()


def with_retries(call: Callable[[], T], *, what: str, target: str, retries: int = 3, backoff_s: float = 0.5) -> T:
    """Run ``call``; on connection failures retry with exponential backoff, then raise a clear error."""
    for attempt in range(retries + 1):
        try:
            return call()
        except (UnexpectedResponse, *_TRANSIENT) as error:
            time.sleep(_delay_after(error, attempt, what=what, target=target, retries=retries, backoff_s=backoff_s))
    raise AssertionError("unreachable")


async def awith_retries(call, *, what: str, target: str, retries: int = 3, backoff_s: float = 0.5):
    """The async twin of :func:`with_retries`: ``call`` returns an awaitable."""
    for attempt in range(retries + 1):
        try:
            return await call()
        except (UnexpectedResponse, *_TRANSIENT) as error:
            await asyncio.sleep(_delay_after(error, attempt, what=what, target=target, retries=retries, backoff_s=backoff_s))
    raise AssertionError("unreachable")


def _delay_after(error: Exception, attempt: int, *, what: str, target: str, retries: int, backoff_s: float) -> float:
    """How long to wait after a failed attempt; raises instead when the failure is final."""
    if isinstance(error, UnexpectedResponse):  # the server answered: retrying will not change its mind
        raise _refused(error, what, target) from None
    if attempt == retries:
        raise QdrantUnavailableError(
            f"Qdrant at {target} did not answer ({what}) after {retries + 1} attempts: {_root(error)}"
        ) from None
    delay = backoff_s * 2**attempt
    logger.warning("Qdrant at %s: %s failed (%s); retrying in %.1fs", target, what, _root(error), delay)
    return delay


def _refused(error: UnexpectedResponse, what: str, target: str) -> Exception:
    hint = " (check the API key)" if error.status_code in (401, 403) else ""
    detail = error.content.decode("utf-8", "replace")[:300] if error.content else ""
    return RuntimeError(f"Qdrant at {target} refused {what}: HTTP {error.status_code} {error.reason_phrase}{hint} {detail}".strip())


def _root(error: BaseException) -> str:
    source = getattr(error, "source", None)
    return f"{type(source or error).__name__}: {source or error}"


# ----------------------------------------------------------------------------- the tag in the collection
def collection_tag(info: rest.CollectionInfo) -> Optional[Dict[str, Any]]:
    """The posfair tag stored in a collection's metadata, or None."""
    metadata = getattr(info.config, "metadata", None) or {}
    return metadata.get(METADATA_KEY)


def _stored_tag_for(embed_model: PosFairEmbedding) -> Dict[str, Any]:
    return {**embed_model.tag(), "fingerprint": embed_model.fingerprint()}


def _check_existing(name: str, info: rest.CollectionInfo, embed_model: PosFairEmbedding) -> None:
    stored = collection_tag(info)
    requested = _stored_tag_for(embed_model)
    if stored is None or comparable_tag(_without_fingerprint(stored)) != comparable_tag(embed_model.tag()):
        raise CollectionTagMismatchError(name, stored, requested)
    vectors = info.config.params.vectors
    if isinstance(vectors, rest.VectorParams) and (
        vectors.size != embed_model.dimension or vectors.distance != rest.Distance.COSINE
    ):
        raise CollectionTagMismatchError(name, {**stored, "vectors": f"{vectors.size}/{vectors.distance}"}, requested)


def _without_fingerprint(tag: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in tag.items() if k != "fingerprint"}


def _create_args(name: str, embed_model: PosFairEmbedding) -> Dict[str, Any]:
    return dict(
        collection_name=name,
        vectors_config=rest.VectorParams(size=embed_model.dimension, distance=rest.Distance.COSINE),
        metadata={METADATA_KEY: _stored_tag_for(embed_model)},
    )


def _ensure_steps(collection_name: str, embed_model: PosFairEmbedding, recreate: bool, local: bool):
    """Create the tagged collection or check the existing one's tag, as a sequence of client calls.

    Written once as a generator that yields ``(method, args, kwargs)`` and receives each call's result
    (or its exception), so the sync and the async client run exactly the same procedure. The tag goes in
    with ``create_collection`` itself: a collection never exists without its tag.
    """
    if (yield "collection_exists", (collection_name,), {}):
        info = yield "get_collection", (collection_name,), {}
        try:
            _check_existing(collection_name, info, embed_model)
            return False
        except CollectionTagMismatchError:
            if not recreate:
                raise
            logger.warning("recreating Qdrant collection %r with a new tag", collection_name)
            yield "delete_collection", (collection_name,), {}
    try:
        yield "create_collection", (), _create_args(collection_name, embed_model)
    except (ValueError, RuntimeError) as error:
        if "already exists" not in str(error):
            raise
        # another writer created it between our check and our create: its tag must match ours
        _check_existing(collection_name, (yield "get_collection", (collection_name,), {}), embed_model)
        return False
    if not local:  # embedded Qdrant ignores payload indexes (and warns)
        yield "create_payload_index", (collection_name, DOCUMENT_ID_KEY, rest.PayloadSchemaType.KEYWORD), {}
    return True


def ensure_tagged_collection(
    client: QdrantClient,
    collection_name: str,
    embed_model: PosFairEmbedding,
    *,
    recreate: bool = False,
    retries: int = 3,
    backoff_s: float = 0.5,
) -> bool:
    """Create the tagged collection, or check the existing one's tag. Returns True when it was created."""
    _check_embed_model(embed_model)
    steps = _ensure_steps(collection_name, embed_model, recreate, _is_local(client))
    target = describe_client(client)
    outcome: Any = None
    failed = False
    while True:
        try:
            method, args, kwargs = steps.throw(outcome) if failed else steps.send(outcome)
        except StopIteration as done:
            return done.value
        try:
            call = getattr(client, method)
            outcome = with_retries(lambda: call(*args, **kwargs), what=method, target=target, retries=retries, backoff_s=backoff_s)
            failed = False
        except Exception as error:  # handed to the procedure, which decides
            outcome, failed = error, True


async def aensure_tagged_collection(
    aclient: AsyncQdrantClient,
    collection_name: str,
    embed_model: PosFairEmbedding,
    *,
    recreate: bool = False,
    retries: int = 3,
    backoff_s: float = 0.5,
) -> bool:
    """The async twin of :func:`ensure_tagged_collection`: the same procedure on an ``AsyncQdrantClient``."""
    _check_embed_model(embed_model)
    steps = _ensure_steps(collection_name, embed_model, recreate, _is_local(aclient))
    target = describe_client(aclient)
    outcome: Any = None
    failed = False
    while True:
        try:
            method, args, kwargs = steps.throw(outcome) if failed else steps.send(outcome)
        except StopIteration as done:
            return done.value
        try:
            call = getattr(aclient, method)
            outcome = await awith_retries(lambda: call(*args, **kwargs), what=method, target=target, retries=retries, backoff_s=backoff_s)
            failed = False
        except Exception as error:
            outcome, failed = error, True


def _is_local(client: Any) -> bool:
    return type(getattr(client, "_client", None)).__name__ in ("QdrantLocal", "AsyncQdrantLocal")


def _check_embed_model(embed_model: Any) -> None:
    if not isinstance(embed_model, PosFairEmbedding):
        raise TypeError(f"embed_model must be a PosFairEmbedding, got {type(embed_model).__name__}")


# ----------------------------------------------------------------------------- the vector store
class PosFairQdrantVectorStore(QdrantVectorStore):
    """LlamaIndex's QdrantVectorStore on a tagged collection (build it with :func:`tagged_vector_store`)."""

    _fingerprint: str = PrivateAttr()
    _dimension: int = PrivateAttr()

    def __init__(self, collection_name: str, *, fingerprint: str, dimension: int, **kwargs: Any) -> None:
        super().__init__(collection_name=collection_name, **kwargs)
        self._fingerprint = fingerprint
        self._dimension = dimension

    @classmethod
    def class_name(cls) -> str:
        return "PosFairQdrantVectorStore"

    @property
    def fingerprint(self) -> str:
        return self._fingerprint

    def _build_points(self, nodes: List[BaseNode], sparse_vector_name: str) -> Tuple[List[Any], List[str]]:
        for node in nodes:
            size = len(node.get_embedding())
            if size != self._dimension:
                raise ValueError(
                    f"node {node.node_id!r} has a {size}-dimensional embedding; collection {self.collection_name!r} "
                    f"holds {self._dimension}-dimensional posfair vectors (fingerprint {self._fingerprint})"
                )
        points, _ = super()._build_points(nodes, sparse_vector_name)
        for point in points:
            point.id = point_id(point.id)
            point.payload[POINT_FINGERPRINT_KEY] = self._fingerprint
        return points, [point.id for point in points]

    def _build_query_filter(self, query: VectorStoreQuery) -> Optional[Any]:
        if query.node_ids:
            query = query.model_copy(update={"node_ids": [point_id(n) for n in query.node_ids]})
        return super()._build_query_filter(query)

    def get_nodes(self, node_ids: Optional[List[str]] = None, **kwargs: Any) -> List[BaseNode]:
        return super().get_nodes(node_ids=_mapped(node_ids), **kwargs)

    async def aget_nodes(self, node_ids: Optional[List[str]] = None, **kwargs: Any) -> List[BaseNode]:
        return await super().aget_nodes(node_ids=_mapped(node_ids), **kwargs)

    def delete_nodes(self, node_ids: Optional[List[str]] = None, **kwargs: Any) -> None:
        super().delete_nodes(node_ids=_mapped(node_ids), **kwargs)

    async def adelete_nodes(self, node_ids: Optional[List[str]] = None, **kwargs: Any) -> None:
        await super().adelete_nodes(node_ids=_mapped(node_ids), **kwargs)

    def delete_stale(self, ref_doc_ids: Sequence[str], keep_point_ids: Sequence[str]) -> None:
        """Remove points of these documents that are not in ``keep_point_ids`` (left by an older version)."""
        if not ref_doc_ids:
            return
        self._client.delete(
            collection_name=self.collection_name,
            points_selector=rest.Filter(
                must=[rest.FieldCondition(key=DOCUMENT_ID_KEY, match=rest.MatchAny(any=list(ref_doc_ids)))],
                must_not=[rest.HasIdCondition(has_id=list(keep_point_ids))] if keep_point_ids else None,
            ),
            wait=True,
        )


def _mapped(node_ids: Optional[List[str]]) -> Optional[List[str]]:
    return None if node_ids is None else [point_id(n) for n in node_ids]


def tagged_vector_store(
    client: Optional[QdrantClient],
    collection_name: str,
    embed_model: PosFairEmbedding,
    *,
    aclient: Optional[AsyncQdrantClient] = None,
    recreate: bool = False,
    retries: int = 3,
    backoff_s: float = 0.5,
    **store_kwargs: Any,
) -> PosFairQdrantVectorStore:
    """A ``QdrantVectorStore`` bound to a collection tagged for ``embed_model`` (created if missing)."""
    if client is None:
        raise ValueError("tagged_vector_store needs a QdrantClient; with only an AsyncQdrantClient use atagged_vector_store")
    if not isinstance(client, QdrantClient):
        raise TypeError(f"client must be a QdrantClient, got {type(client).__name__}")
    ensure_tagged_collection(client, collection_name, embed_model, recreate=recreate, retries=retries, backoff_s=backoff_s)
    return PosFairQdrantVectorStore(
        collection_name,
        client=client,
        aclient=aclient,
        fingerprint=embed_model.fingerprint(),
        dimension=embed_model.dimension,
        **store_kwargs,
    )


async def atagged_vector_store(
    aclient: AsyncQdrantClient,
    collection_name: str,
    embed_model: PosFairEmbedding,
    *,
    recreate: bool = False,
    retries: int = 3,
    backoff_s: float = 0.5,
    **store_kwargs: Any,
) -> PosFairQdrantVectorStore:
    """The async twin of :func:`tagged_vector_store`, for an ``AsyncQdrantClient``."""
    if not isinstance(aclient, AsyncQdrantClient):
        raise TypeError(f"aclient must be an AsyncQdrantClient, got {type(aclient).__name__}")
    await aensure_tagged_collection(
        aclient, collection_name, embed_model, recreate=recreate, retries=retries, backoff_s=backoff_s
    )
    return PosFairQdrantVectorStore(
        collection_name,
        aclient=aclient,
        fingerprint=embed_model.fingerprint(),
        dimension=embed_model.dimension,
        **store_kwargs,
    )


def list_tagged_collections(client: QdrantClient) -> List[Dict[str, Any]]:
    """Every collection with its point count and posfair tag (None for untagged collections)."""
    rows = []
    for description in client.get_collections().collections:
        info = client.get_collection(description.name)
        rows.append({"name": description.name, "points": info.points_count, "tag": collection_tag(info)})
    return rows
