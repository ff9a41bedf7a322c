"""Position-fair dense retrieval for LlamaIndex: attention calibration at indexing time.

The public API is what ``__all__`` lists. Names are loaded on first use, so ``import posfair_llamaindex``
(and the ``posfair`` command's first contact with Qdrant) does not wait for torch and transformers.
Lower-level pieces (the registered attention function, the per-batch plan, the row math) stay importable
from their own modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from posfair_llamaindex.lazy import lazy_exports
from posfair_llamaindex.version import __version__

_WHERE = {
    "CalibrationConfig": "posfair_llamaindex.config",
    "ChunkerConfig": "posfair_llamaindex.sea",
    "CollectionTagMismatchError": "posfair_llamaindex.qdrant",
    "PosFairEmbedding": "posfair_llamaindex.embedding",
    "PosFairEncoder": "posfair_llamaindex.encoder",
    "PosFairQdrantVectorStore": "posfair_llamaindex.qdrant",
    "QdrantUnavailableError": "posfair_llamaindex.qdrant",
    "RetryPolicy": "posfair_llamaindex.qdrant",
    "UnsupportedModelError": "posfair_llamaindex.encoder",
    "WindowConfig": "posfair_llamaindex.windows",
    "atagged_vector_store": "posfair_llamaindex.qdrant",
    "tagged_vector_store": "posfair_llamaindex.qdrant",
}

__all__ = sorted([*_WHERE, "__version__"])

if TYPE_CHECKING:  # what static tools see; at run time the names load lazily below
    from posfair_llamaindex.config import CalibrationConfig
    from posfair_llamaindex.embedding import PosFairEmbedding
    from posfair_llamaindex.encoder import PosFairEncoder, UnsupportedModelError
    from posfair_llamaindex.qdrant import (
        CollectionTagMismatchError,
        PosFairQdrantVectorStore,
        QdrantUnavailableError,
        RetryPolicy,
        atagged_vector_store,
        tagged_vector_store,
    )
    from posfair_llamaindex.sea import ChunkerConfig
    from posfair_llamaindex.windows import WindowConfig


__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
