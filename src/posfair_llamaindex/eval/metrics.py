"""Position-bias metrics (Zeng et al. 2025): nDCG@k with binary relevance, HM, PSI, and bootstrap intervals."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np


def ndcg_at_k(ranked: Sequence[str], relevant: set[str], k: int = 10) -> float:
    """Binary-relevance nDCG@k of one ranking."""
    if not relevant:
        raise ValueError("a query needs at least one relevant document")
    gains = sum(1.0 / math.log2(rank + 2) for rank, doc in enumerate(ranked[:k]) if doc in relevant)
    ideal = sum(1.0 / math.log2(rank + 2) for rank in range(min(len(relevant), k)))
    return gains / ideal


def recall_at_k(ranked: Sequence[str], relevant: set[str], k: int = 10) -> float:
    if not relevant:
        raise ValueError("a query needs at least one relevant document")
    return len(set(ranked[:k]) & relevant) / len(relevant)


def harmonic_mean(values: Iterable[float]) -> float:
    """Harmonic mean; 0 when any value is 0 (a group retrieved nothing)."""
    values = list(values)
    if not values:
        raise ValueError("harmonic mean of nothing")
    if any(v < 0 for v in values):
        raise ValueError("harmonic mean needs non-negative values")
    if any(v == 0 for v in values):
        return 0.0
    return len(values) / sum(1.0 / v for v in values)


def position_sensitivity_index(values: Iterable[float]) -> float:
    """PSI = (max - min) / max over the positional groups; 0 is perfectly fair."""
    values = list(values)
    if not values:
        raise ValueError("PSI of nothing")
    top = max(values)
    return 0.0 if top == 0 else (top - min(values)) / top


def summarise(per_query: Mapping[str, np.ndarray], groups: Sequence[str]) -> dict[str, float]:
    """Group means, HM and PSI over ``groups``, and the aggregate mean over all queries."""
    means = {g: float(per_query[g].mean()) for g in groups}
    summary = {f"group:{g}": v for g, v in means.items()}
    if len(groups) > 1:
        summary["hm"] = harmonic_mean(means.values())
        summary["psi"] = position_sensitivity_index(means.values())
    summary["aggregate"] = float(np.concatenate([per_query[g] for g in groups]).mean())
    return summary


def _interval(draws: Sequence[float], level: float) -> tuple[float, float]:
    """The percentile interval holding ``level`` of the bootstrap draws."""
    tail = (1.0 - level) / 2 * 100
    return float(np.percentile(draws, tail)), float(np.percentile(draws, 100 - tail))


def _resample(
    sizes: Mapping[str, int], evaluate: Callable[[Mapping[str, np.ndarray]], dict[str, float]], samples: int, seed: int
) -> dict[str, list[float]]:
    """Every entry of ``evaluate`` over ``samples`` draws of query indices, drawn with replacement per group.

    One draw's indices serve every side that ``evaluate`` looks at, which is what makes a comparison paired.
    """
    rng = np.random.default_rng(seed)
    draws: dict[str, list[float]] = {}
    for _ in range(samples):
        picks = {g: rng.integers(0, size, size) for g, size in sizes.items()}
        for key, value in evaluate(picks).items():
            draws.setdefault(key, []).append(value)
    return draws


def bootstrap(
    per_query: Mapping[str, np.ndarray],
    groups: Sequence[str],
    statistic: Callable[[Mapping[str, np.ndarray], Sequence[str]], dict[str, float]] = summarise,
    *,
    samples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, tuple[float, float, float]]:
    """(point, low, high) for every entry of ``statistic``, resampling queries within each group."""
    point = statistic(per_query, groups)
    draws = _resample(
        {g: len(per_query[g]) for g in groups},
        lambda picks: statistic({g: per_query[g][picks[g]] for g in groups}, groups),
        samples,
        seed,
    )
    return {key: (value, *_interval(draws[key], level)) for key, value in point.items()}


def paired_difference(
    ours: np.ndarray, theirs: np.ndarray, *, samples: int = 1000, seed: int = 0, level: float = 0.95
) -> tuple[float, float, float]:
    """Mean of ``ours - theirs`` over the same queries, with a paired bootstrap interval.

    Pairing removes the variance that both runs share (hard queries are hard for both), so a small but
    consistent change can be told apart from noise where two unpaired intervals overlap.
    """
    if ours.shape != theirs.shape:
        raise ValueError(f"paired results need the same queries: {ours.shape} vs {theirs.shape}")
    delta = ours - theirs
    draws = _resample({"all": len(delta)}, lambda picks: {"mean": delta[picks["all"]].mean()}, samples, seed)
    return (float(delta.mean()), *_interval(draws["mean"], level))


def paired_summary_difference(
    ours: Mapping[str, np.ndarray],
    theirs: Mapping[str, np.ndarray],
    groups: Sequence[str],
    *,
    samples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, tuple[float, float, float]]:
    """``summarise(ours) - summarise(theirs)`` (group means, HM, PSI, aggregate) over the same queries.

    Both sides are resampled with the same query indices within each group, so two models or two
    configurations evaluated on one benchmark are compared on HM and PSI as pairs, not as two intervals.
    """
    for g in groups:
        if ours[g].shape != theirs[g].shape:
            raise ValueError(
                f"paired results need the same queries: group {g!r} has {ours[g].shape} vs {theirs[g].shape}"
            )

    def difference(picks: Mapping[str, np.ndarray]) -> dict[str, float]:
        a = summarise({g: ours[g][picks[g]] for g in groups}, groups)
        b = summarise({g: theirs[g][picks[g]] for g in groups}, groups)
        return {key: a[key] - b[key] for key in a}

    everything = {g: np.arange(len(ours[g])) for g in groups}
    draws = _resample({g: len(ours[g]) for g in groups}, difference, samples, seed)
    return {key: (value, *_interval(draws[key], level)) for key, value in difference(everything).items()}
