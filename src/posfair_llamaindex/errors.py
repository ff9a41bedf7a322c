"""Every exception the package raises on purpose, under one base class.

``except PosFairError`` catches them all. Each also keeps the built-in parent it had before there was a common
base (``ValueError`` for bad settings or data, ``RuntimeError`` for work that failed midway, ``ConnectionError``
for an unreachable server), so a caller's existing ``except ValueError`` still catches what it caught.
"""

from __future__ import annotations

import json
from typing import Any, Optional

from posfair_llamaindex.tag import comparable_tag


class PosFairError(Exception):
    """The base of every error this package raises on purpose; the message says what to do about it."""


class UnsupportedModelError(PosFairError, ValueError):
    """The model's attention cannot be reached by either door, so it cannot be calibrated."""


class MismatchedWeightsError(PosFairError, ValueError):
    """The folder's weights do not fit the class that loaded them: the vectors would come from random values."""


class KernelBuildError(PosFairError, RuntimeError):
    """The kernel could not be built or loaded; ``cause`` is the one line that says why, ``log`` the whole output."""

    def __init__(self, cause: str, log: str = "") -> None:
        super().__init__(cause)
        self.cause = cause
        self.log = log or cause


class KernelLockTimeoutError(KernelBuildError):
    """Another process held the build lock for longer than the timeout."""


class CollectionTagMismatchError(PosFairError, ValueError):
    """The collection holds vectors from a different encoder or calibration config."""

    def __init__(self, collection: str, stored: Optional[dict[str, Any]], requested: dict[str, Any]) -> None:
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


class QdrantUnavailableError(PosFairError, ConnectionError):
    """Qdrant did not answer, or kept answering "not now", after the allowed retries."""


class IngestError(PosFairError, RuntimeError):
    """Ingesting failed because of a document; the message names its file (and node, where known)."""


class UpgradeRefusedError(PosFairError, ValueError):
    """The source collection cannot be upgraded with these settings; nothing was written."""


class UpgradeIncompleteError(PosFairError, RuntimeError):
    """The target still lacks source points after the catch-up passes (writers kept changing the source);
    the source was not deleted."""


class CopyRefusedError(PosFairError, ValueError):
    """Copying collections between clients was refused, or its check failed; the message says which and why."""


class AuditCorpusError(PosFairError, ValueError):
    """The corpus cannot be audited: too few documents, or too few long enough to span two baskets."""


class QueryEncodingError(PosFairError, RuntimeError):
    """The process that encodes a query (encoding/query_process.py) refused the query or ended without a vector."""


class WrappedEmbeddingError(PosFairError, ValueError):
    """A wrapped LlamaIndex embedding cannot serve these settings (calibration needs the model's attention, a
    window does not fit the model's input, its tokenizer or limit is unknown); raised before the model is called."""


class WrappedRequestError(PosFairError, RuntimeError):
    """A request to a wrapped LlamaIndex embedding failed; ``nodes`` are the positions, in the call, of the nodes
    whose windows it held. No vector of the call is returned, so no node is stored with part of its windows."""

    def __init__(self, message: str, nodes: Optional[list] = None) -> None:
        super().__init__(message)
        self.nodes = list(nodes or [])


class CliError(PosFairError):
    """A refusal or failure the user can act on; the command line prints it as one line."""


# Qdrant Edge, the embedded engine (qdrant/edge_*.py)


class NotAnEdgeStoreError(PosFairError, ValueError):
    """The folder is not an Edge store (a qdrant-client local-mode folder, a file, or someone else's files)."""


class EdgeStoreVersionError(PosFairError, ValueError):
    """The folder is an Edge store of a format this version cannot read."""


class EdgeStoreLockedError(PosFairError, RuntimeError):
    """Another process has the store open; Edge shards take one process at a time."""


class EdgeStoreReadOnlyError(PosFairError, PermissionError):
    """The store's folder cannot be written, and Edge writes even to answer (its write-ahead log, its lock)."""


class EdgeCollectionNotFoundError(PosFairError, ValueError):
    """No collection (or alias) of that name; a ``ValueError`` saying "Collection X not found" as local mode's."""


class EdgeRequestError(PosFairError, ValueError):
    """Edge refused a request (a vector of the wrong size, an unknown vector name, a missing point, ...)."""


class EdgeEngineError(PosFairError, RuntimeError):
    """Edge failed while serving a valid request."""


class EdgeClosedError(PosFairError, RuntimeError):
    """The client was closed; open a new one on the folder."""


class EdgeUnsupportedError(PosFairError, NotImplementedError):
    """A request asks for something Qdrant Edge cannot do in-process, which a Qdrant server can."""

    def __init__(self, call: str, construct: str, reason: str = "") -> None:
        self.call, self.construct = call, construct
        because = f" ({reason})" if reason else ""
        super().__init__(
            f"{call}: {construct} is not supported by the Qdrant Edge client{because}. Use a Qdrant server "
            "(QdrantClient(url=...)) for it."
        )


__all__ = [
    "EdgeClosedError",
    "EdgeCollectionNotFoundError",
    "EdgeEngineError",
    "EdgeRequestError",
    "EdgeStoreLockedError",
    "EdgeStoreReadOnlyError",
    "EdgeStoreVersionError",
    "EdgeUnsupportedError",
    "NotAnEdgeStoreError",
    "AuditCorpusError",
    "CliError",
    "CopyRefusedError",
    "CollectionTagMismatchError",
    "IngestError",
    "KernelBuildError",
    "KernelLockTimeoutError",
    "MismatchedWeightsError",
    "PosFairError",
    "QdrantUnavailableError",
    "QueryEncodingError",
    "UnsupportedModelError",
    "UpgradeIncompleteError",
    "UpgradeRefusedError",
    "WrappedEmbeddingError",
    "WrappedRequestError",
]
