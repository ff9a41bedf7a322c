"""Position-fair dense retrieval for LlamaIndex: attention calibration at indexing time.

The public API is what ``__all__`` lists. Names are loaded on first use, so ``import posfair_llamaindex``
(and the ``posfair`` command's first contact with Qdrant) does not wait for torch and transformers.
Lower-level pieces (the registered attention function, the per-batch plan, the row math) stay importable
from their own modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from posfair_llamaindex import errors
from posfair_llamaindex.lazy import lazy_exports
from posfair_llamaindex.version import __version__

_WHERE = {
    "CalibrationConfig": "posfair_llamaindex.calibration.config",
    "ChunkerConfig": "posfair_llamaindex.encoding.sea",
    "PosFairEmbedding": "posfair_llamaindex.embedding",
    "PosFairEncoder": "posfair_llamaindex.encoding.encoder",
    "PosFairQdrantVectorStore": "posfair_llamaindex.qdrant",
    "RetryConfig": "posfair_llamaindex.qdrant",
    "EdgeQdrantClient": "posfair_llamaindex.qdrant",
    "AsyncEdgeQdrantClient": "posfair_llamaindex.qdrant",
    "WindowConfig": "posfair_llamaindex.encoding.windows",
    "atagged_vector_store": "posfair_llamaindex.qdrant",
    "tagged_vector_store": "posfair_llamaindex.qdrant",
}

_WHERE.update({name: "posfair_llamaindex.errors" for name in errors.__all__})

__all__ = sorted([*_WHERE, "__version__"])

if TYPE_CHECKING:  # what static tools see; at run time the names load lazily below
    from posfair_llamaindex.calibration.config import CalibrationConfig
    from posfair_llamaindex.embedding import PosFairEmbedding
    from posfair_llamaindex.encoding.encoder import PosFairEncoder
    from posfair_llamaindex.encoding.sea import ChunkerConfig
    from posfair_llamaindex.encoding.windows import WindowConfig
    from posfair_llamaindex.errors import (
        AuditCorpusError,
        CliError,
        CollectionTagMismatchError,
        IngestError,
        KernelBuildError,
        KernelLockTimeoutError,
        MismatchedWeightsError,
        PosFairError,
        QdrantUnavailableError,
        QueryEncodingError,
        UnsupportedModelError,
        UpgradeIncompleteError,
        UpgradeRefusedError,
        WrappedEmbeddingError,
        WrappedRequestError,
    )
    from posfair_llamaindex.qdrant import (
        AsyncEdgeQdrantClient,
        EdgeQdrantClient,
        PosFairQdrantVectorStore,
        RetryConfig,
        atagged_vector_store,
        tagged_vector_store,
    )


__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
