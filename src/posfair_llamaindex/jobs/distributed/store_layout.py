"""The tagged collection as the driver found it, and the same vector store rebuilt from that in a worker.

The driver creates or checks the collection (``tagged_vector_store``); workers must then build exactly the
points it would build. LlamaIndex's store reads the vector layout from the server when it is constructed
and, when that read fails, silently assumes another one; a worker facing a server that refuses its first
requests would then write differently named vectors. So the layout travels from the driver instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from posfair_llamaindex.qdrant.retry import RetryConfig, describe_client, with_retries
from posfair_llamaindex.qdrant.store import PosFairQdrantVectorStore
from posfair_llamaindex.qdrant.vector_layout import VectorLayout


@dataclass(frozen=True)
class StoreLayout:
    collection: str
    fingerprint: str
    # the named vectors, how an embedding fills them (dual, windows), the sparse one: a VectorLayout as JSON, so
    # that the layout stays hashable (workers cache what they open by it)
    vectors_json: str
    dense_vector_name: str  # LlamaIndex's name for the dense vector ("" for an unnamed one)

    @classmethod
    def of(cls, store: PosFairQdrantVectorStore) -> StoreLayout:
        return cls(
            collection=store.collection_name,
            fingerprint=store.fingerprint,
            vectors_json=store.layout.model_dump_json(),
            dense_vector_name=store.dense_vector_name,
        )

    @property
    def vectors(self) -> VectorLayout:
        return VectorLayout.model_validate_json(self.vectors_json)

    def open_store(self, client, retry: RetryConfig) -> PosFairQdrantVectorStore:
        """The driver's store, on ``client`` (its construction asks the server about the collection, retried)."""
        store = with_retries(
            lambda: PosFairQdrantVectorStore(
                self.collection,
                client=client,
                fingerprint=self.fingerprint,
                vector_layout=self.vectors,
                retry=retry,
                check_collection=False,  # the driver checked it
            ),
            what="collection_exists",
            target=describe_client(client),
            policy=retry,
        )
        store.dense_vector_name = self.dense_vector_name
        return store
