"""A Qdrant client stand-in that records the calls that make a collection, as a server would receive them.

It plays a server (not embedded Qdrant, which skips and refuses some of these calls), remembers the collections
it created so that a store can open them again, and answers nothing else. LlamaIndex's own tests check their
creation calls the same way, on a mock client.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from qdrant_client import AsyncQdrantClient, QdrantClient

RECORDED = ("create_collection", "create_shard_key", "create_payload_index", "delete_collection")


class RecordingClient(QdrantClient):
    """``QdrantClient`` whose collection calls are recorded as ``(method, kwargs)`` instead of sent."""

    def __init__(self) -> None:  # no connection: every method the stores use is answered here
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.collections: dict[str, dict[str, Any]] = {}

    def __del__(self) -> None:
        pass

    def close(self, **kwargs: Any) -> None:
        pass

    def made(self, *methods: str) -> list[tuple[str, dict[str, Any]]]:
        """The recorded calls of these methods (all creating ones by default), in order."""
        wanted = methods or RECORDED
        return [(m, k) for m, k in self.calls if m in wanted]

    def collection_exists(self, collection_name: str, **kwargs: Any) -> bool:
        return collection_name in self.collections

    def get_collection(self, collection_name: str, **kwargs: Any) -> Any:
        made = self.collections[collection_name]
        params = SimpleNamespace(vectors=made.get("vectors_config"), sparse_vectors=made.get("sparse_vectors_config"))
        return SimpleNamespace(config=SimpleNamespace(params=params, metadata=made.get("metadata")), points_count=0)

    def create_collection(self, collection_name: str, **kwargs: Any) -> bool:
        self.calls.append(("create_collection", {"collection_name": collection_name, **kwargs}))
        self.collections[collection_name] = kwargs
        return True

    def delete_collection(self, collection_name: str, **kwargs: Any) -> bool:
        self.calls.append(("delete_collection", {"collection_name": collection_name, **kwargs}))
        self.collections.pop(collection_name, None)
        return True

    def create_shard_key(self, collection_name: str, shard_key: Any, **kwargs: Any) -> bool:
        self.calls.append(("create_shard_key", {"collection_name": collection_name, "shard_key": shard_key, **kwargs}))
        return True

    def create_payload_index(self, collection_name: str, field_name: str, field_schema: Any = None, **kwargs: Any):
        call = {"collection_name": collection_name, "field_name": field_name, "field_schema": field_schema, **kwargs}
        self.calls.append(("create_payload_index", call))
        return True

    def query_points(self, collection_name: str, **kwargs: Any) -> Any:
        self.calls.append(("query_points", {"collection_name": collection_name, **kwargs}))
        return SimpleNamespace(points=[])

    def query_batch_points(self, collection_name: str, requests: Any, **kwargs: Any) -> Any:
        self.calls.append(("query_batch_points", {"collection_name": collection_name, "requests": requests, **kwargs}))
        return [SimpleNamespace(points=[]) for _ in requests]

    def upload_points(self, collection_name: str, points: Any, **kwargs: Any) -> None:
        self.calls.append(("upload_points", {"collection_name": collection_name, "points": list(points), **kwargs}))

    def delete(self, collection_name: str, **kwargs: Any) -> Any:
        self.calls.append(("delete", {"collection_name": collection_name, **kwargs}))

    def scroll(self, collection_name: str, **kwargs: Any) -> Any:
        self.calls.append(("scroll", {"collection_name": collection_name, **kwargs}))
        return [], None


class AsyncRecordingClient(AsyncQdrantClient):
    """The async twin: the same records, from coroutines."""

    def __init__(self) -> None:
        self._sync = RecordingClient()

    @property
    def calls(self) -> list:
        return self._sync.calls

    def made(self, *methods: str) -> list:
        return self._sync.made(*methods)

    async def close(self, **kwargs: Any) -> None:
        pass

    def __getattribute__(self, name: str) -> Any:
        if name in (
            "collection_exists",
            "get_collection",
            "create_collection",
            "delete_collection",
            "create_shard_key",
            "create_payload_index",
            "query_points",
            "query_batch_points",
            "upsert",
            "delete",
            "scroll",
        ):
            sync = object.__getattribute__(self, "_sync")
            method = getattr(sync, "upload_points" if name == "upsert" else name)

            async def call(*args: Any, **kwargs: Any) -> Any:
                return method(*args, **kwargs)

            return call
        return object.__getattribute__(self, name)
