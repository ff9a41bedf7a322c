"""Comparing windows-mode embeddings made by two backends: the same windows, vector for vector."""

from __future__ import annotations

import numpy as np

MINILM_DIMENSION = 384


def windows_of(vectors, dimension: int = MINILM_DIMENSION) -> list[np.ndarray]:
    """Each flat windows embedding as its (windows, dimension) rows."""
    return [np.asarray(vector, dtype=np.float32).reshape(-1, dimension) for vector in vectors]


def assert_same_windows(ours, theirs, dimension: int = MINILM_DIMENSION, least_cosine: float = 0.9999) -> None:
    """As many windows per text, each at cosine ``least_cosine`` or more to its counterpart (unit vectors)."""
    for a, b in zip(windows_of(ours, dimension), windows_of(theirs, dimension), strict=True):
        assert a.shape == b.shape
        assert np.min(np.sum(a * b, axis=1)) >= least_cosine
