"""The fused ranking of two scores per document, by brute force: what a dual or windows query must return."""

from __future__ import annotations

import numpy as np

from posfair_llamaindex.options import RRF_K


def brute_force(ids, first, second, fusion, k):
    """The top ``k`` ids and fused scores of ``first`` and ``second`` (one score each per id) by ``fusion``."""
    if fusion == "max":
        fused = np.maximum(first, second)
    elif fusion == "sum":
        fused = first + second
    else:
        fused = np.zeros(len(ids))
        for scores in (first, second):
            for rank, index in enumerate(np.argsort(-scores)):
                fused[index] += 1.0 / (RRF_K + rank)
    order = np.argsort(-fused)[:k]
    return [ids[i] for i in order], fused[order]
