"""Fusing the scores of several vectors per document into one ranking score (dual mode and its research variants).

Scores are ``[queries, documents]`` arrays, one per vector (the plain one first). The rules are the same
as the Qdrant store's (``max``, ``sum``, ``rrf`` with :data:`~posfair_llamaindex.options.RRF_K`), computed
here over the whole corpus. Three research rules: ``zmax`` maps every calibrated score distribution onto
the plain one, per query, before the maximum; ``max@D`` adds a constant D to the calibrated scores
first (one knob between plain, D << 0, and calibrated, D >> 0); ``perdoc`` (see
:func:`per_document_choice`) gives each document one calibrated vector, the strongest that stays close to
its plain vector, before the maximum.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from posfair_llamaindex.options import FUSIONS, RRF_K

RESEARCH_FUSIONS = ("zmax", "perdoc")
ALL_FUSIONS = (*FUSIONS, *RESEARCH_FUSIONS)


def is_fusion(rule: str) -> bool:
    """A known rule, or ``max@D``: the maximum after adding D to every calibrated score (research)."""
    return rule in ALL_FUSIONS or _offset(rule) is not None


def _offset(rule: str):
    if not rule.startswith("max@"):
        return None
    try:
        return float(rule[4:])
    except ValueError:
        return None


def fuse(scores: Sequence[np.ndarray], rule: str) -> np.ndarray:
    """One ``[queries, documents]`` score array from several, by ``rule``."""
    if not is_fusion(rule):
        raise ValueError(f"fusion must be one of {ALL_FUSIONS} or max@OFFSET, got {rule!r}")
    if not scores:
        raise ValueError("nothing to fuse")
    shape = scores[0].shape
    if any(s.shape != shape for s in scores):
        raise ValueError(f"score arrays differ in shape: {[s.shape for s in scores]}")
    if len(scores) == 1:
        return scores[0]
    if rule == "max":
        return np.maximum.reduce(list(scores))
    if rule == "sum":
        return np.sum(scores, axis=0)
    if rule == "rrf":
        return np.sum([1.0 / (RRF_K + ranks(s)) for s in scores], axis=0)
    if rule == "perdoc":
        raise ValueError("perdoc chooses vectors, not scores: use per_document_choice on the document vectors")
    if _offset(rule) is not None:  # the calibrated scores shifted before the maximum
        return np.maximum.reduce([scores[0], *(s + _offset(rule) for s in scores[1:])])
    return np.maximum.reduce([scores[0], *(matched_to(s, scores[0]) for s in scores[1:])])


def per_document_choice(plain: np.ndarray, calibrated: Sequence[np.ndarray], quantile: float = 0.5) -> np.ndarray:
    """Per document, the strongest calibrated vector whose cosine to the plain one stays above a threshold.

    ``calibrated`` is ordered from the weakest to the strongest strength. The threshold is the
    ``quantile`` of the strongest vector's cosines to plain over the corpus, so about that share of the
    documents keep the strongest calibration and the rest, the ones it moves furthest, fall back to a
    weaker one (or the weakest). Returns ``[documents, dim]``.
    """
    closeness = np.stack([(plain * c).sum(axis=1) for c in calibrated])  # [strengths, documents]
    threshold = np.quantile(closeness[-1], quantile)
    chosen = np.zeros(plain.shape[0], dtype=int)
    for index in range(len(calibrated)):
        chosen = np.where(closeness[index] >= threshold, index, chosen)
    return np.stack(calibrated)[chosen, np.arange(plain.shape[0])]


def ranks(scores: np.ndarray) -> np.ndarray:
    """0-based rank of every document per query (0 = best); ties broken by document order."""
    order = np.argsort(-scores, axis=1, kind="stable")
    result = np.empty_like(order)
    rows = np.arange(scores.shape[0])[:, None]
    result[rows, order] = np.arange(scores.shape[1])[None, :]
    return result


def matched_to(scores: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """``scores`` shifted and scaled, per query, to the mean and spread of ``reference`` over the corpus."""
    mean, spread = scores.mean(axis=1, keepdims=True), scores.std(axis=1, keepdims=True)
    target_mean, target_spread = reference.mean(axis=1, keepdims=True), reference.std(axis=1, keepdims=True)
    return (scores - mean) / np.where(spread > 0, spread, 1.0) * target_spread + target_mean
