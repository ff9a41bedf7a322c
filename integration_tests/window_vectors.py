"""Comparing windows-mode embeddings made by two backends: the same windows, vector for vector."""

from __future__ import annotations

import numpy as np

from posfair_llamaindex.encoding.windows import WindowConfig
from tests.utils import sample_texts

MINILM_DIMENSION = 384
# small windows, so that the short texts have several and the long one dozens
WINDOWS = WindowConfig(size=64)
# a sentence only the long text's last windows hold, past the model's 512 tokens
LATE = "The ledger of shipwrecks is kept today in the lighthouse at Varkness, above the basalt cliffs."


def wrapped_corpus() -> list[str]:
    """Six texts of 10 to 300 words and one of 500 words ending in :data:`LATE`."""
    filler = sample_texts(1, seed=7, min_words=500, max_words=500)[0]
    return [*sample_texts(6, seed=2, min_words=10, max_words=300), f"{filler} {LATE}"]


def windows_of(vectors, dimension: int = MINILM_DIMENSION) -> list[np.ndarray]:
    """Each flat windows embedding as its (windows, dimension) rows."""
    return [np.asarray(vector, dtype=np.float32).reshape(-1, dimension) for vector in vectors]


def assert_same_windows(ours, theirs, dimension: int = MINILM_DIMENSION, least_cosine: float = 0.9999) -> None:
    """As many windows per text, each at cosine ``least_cosine`` or more to its counterpart (unit vectors)."""
    for a, b in zip(windows_of(ours, dimension), windows_of(theirs, dimension), strict=True):
        assert a.shape == b.shape
        assert np.min(np.sum(a * b, axis=1)) >= least_cosine
