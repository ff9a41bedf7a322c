"""Every chart the package draws, as ``matplotlib.figure.Figure`` objects.

Figures are built without pyplot, so importing this module never picks or changes a matplotlib backend
and figures are freed when they go out of scope. :func:`save_png` writes one. The functions take the
evaluation's result objects (duck-typed) or plain arrays; nothing here computes a metric.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Optional

import numpy as np
from matplotlib.figure import Figure


def save_png(figure: Figure, path: Path, dpi: int = 120) -> Path:
    """Lay out and write ``figure`` as a PNG, creating the folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(path, dpi=dpi, format="png")
    return path


def group_bars(run, title: Optional[str] = None, model_name: Optional[str] = None) -> Figure:
    """Grouped bars: nDCG@10 per positional group for every configuration of an eval run, with 95% intervals."""
    groups = list(run.benchmark.groups)
    keys = [f"group:{g}" for g in groups] if len(groups) > 1 else ["aggregate"]
    results = run.results
    width = 0.8 / len(results)
    figure = Figure(figsize=(max(6, 1.6 * len(groups) + 0.5 * len(results)), 4))
    axis = figure.subplots()
    for index, result in enumerate(results):
        points = [result.summary[k][0] for k in keys]
        errors = [
            [p - result.summary[k][1] for p, k in zip(points, keys, strict=True)],
            [result.summary[k][2] - p for p, k in zip(points, keys, strict=True)],
        ]
        positions = [i + (index - (len(results) - 1) / 2) * width for i in range(len(keys))]
        label = result.config.name
        if "hm" in result.summary:
            label += f" (HM {result.summary['hm'][0]:.1f}, PSI {result.summary['psi'][0]:.3f})"
        axis.bar(positions, points, width, yerr=errors, capsize=3, label=label)
    axis.set_xticks(range(len(keys)))
    axis.set_xticklabels(groups if len(groups) > 1 else ["all"])
    axis.set_ylabel("nDCG@10 (x100)")
    poolings = ", ".join(sorted({r.pooling for r in results}))
    name = run.benchmark.describe().split(":")[0]
    axis.set_title(title or f"{name}: {model_name or run.model}, {poolings} pooling", fontsize=10)
    low = min(r.summary[k][1] for r in results for k in keys)
    high = max(r.summary[k][2] for r in results for k in keys)
    axis.set_ylim(max(0, low - 10), min(100, high + 5))
    axis.legend(fontsize=8, loc="lower left")
    return figure


def strength_sweep(run) -> Figure:
    """Per-group nDCG@10 change against plain as strength grows (left), HM and PSI (right)."""
    plain = next((r for r in run.results if r.config.mode == "plain"), None)
    if plain is None:
        raise ValueError("a strength sweep chart needs a plain configuration to compare with")
    calibrated = [r for r in run.results if r.config.mode == "calibrated"]
    strengths = [r.config.calibration.strength for r in calibrated]
    figure = Figure(figsize=(11, 4))
    left, right = figure.subplots(1, 2)
    for group in run.benchmark.groups:
        key = f"group:{group}"
        base = plain.summary[key][0]
        left.plot(strengths, [r.summary[key][0] - base for r in calibrated], marker="o", markersize=3, label=group)
        left.fill_between(
            strengths,
            [r.summary[key][1] - base for r in calibrated],
            [r.summary[key][2] - base for r in calibrated],
            alpha=0.12,
        )
    left.axhline(0, color="black", linewidth=0.8)
    left.set_xlabel("strength")
    left.set_ylabel("nDCG@10 change vs plain (points)")
    left.set_title("Per-group change")
    left.legend(fontsize=8)
    right.plot(strengths, [r.summary["hm"][0] for r in calibrated], marker="o", markersize=3, label="HM")
    right.axhline(plain.summary["hm"][0], color="C0", linestyle="--", linewidth=0.8, label="HM plain")
    twin = right.twinx()
    twin.plot(strengths, [r.summary["psi"][0] for r in calibrated], color="C3", marker="s", markersize=3, label="PSI")
    twin.axhline(plain.summary["psi"][0], color="C3", linestyle="--", linewidth=0.8, label="PSI plain")
    right.set_xlabel("strength")
    right.set_ylabel("HM of group nDCG@10")
    twin.set_ylabel("PSI (lower is fairer)")
    right.set_title("HM and PSI")
    handles = right.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
    right.legend(handles, [h.get_label() for h in handles], fontsize=8, loc="center right")
    figure.suptitle(run.benchmark.describe().split(":")[0] + f", pooling {plain.pooling}", fontsize=10)
    return figure


def self_mass(plain: np.ndarray, calibrated: np.ndarray, calibrated_layers: Iterable[int]) -> Figure:
    """Box plots of the pooling token's attention to itself per layer (``[layers, samples]`` arrays)."""
    layers = set(calibrated_layers)
    count = plain.shape[0]
    figure = Figure(figsize=(max(6, count * 0.9), 4))
    axis = figure.subplots()
    left = axis.boxplot(
        list(plain), positions=np.arange(count) - 0.18, widths=0.32, patch_artist=True, showfliers=False
    )
    right = axis.boxplot(
        list(calibrated), positions=np.arange(count) + 0.18, widths=0.32, patch_artist=True, showfliers=False
    )
    for box in left["boxes"]:
        box.set_facecolor("#9ecae1")
    for box in right["boxes"]:
        box.set_facecolor("#fdae6b")
    axis.set_xticks(range(count))
    axis.set_xticklabels([f"{i}{'*' if i in layers else ''}" for i in range(count)])
    axis.set_xlabel("layer (* calibrated)")
    axis.set_ylabel("pooling token's attention to itself")
    axis.legend([left["boxes"][0], right["boxes"][0]], ["plain", "calibrated"], fontsize=8)
    axis.set_title("Pooling-token self-mass per layer (over heads and texts)")
    return figure


def _mean_curves(curves: Sequence[tuple], xlabel: str, ylabel: str, title: str, delta: bool = False) -> Figure:
    """One line per ``(label, [rows, points] array)``: the mean over rows with a ± standard-error band.

    ``delta`` appends (peak − lowest) × 10³ of each mean curve to its label.
    """
    figure = Figure(figsize=(6, 4))
    axis = figure.subplots()
    x = None
    for label, values in curves:
        x = np.arange(1, values.shape[1] + 1)
        mean = values.mean(axis=0)
        spread = values.std(axis=0) / np.sqrt(len(values))
        name = f"{label} (Δ={(mean.max() - mean.min()) * 1000:.1f})" if delta else label
        axis.plot(x, mean, marker="o", label=name)
        axis.fill_between(x, mean - spread, mean + spread, alpha=0.2)
    if x is not None:
        axis.set_xticks(x)
    axis.set_xlabel(xlabel)
    axis.set_ylabel(ylabel)
    axis.set_title(title)
    axis.legend(fontsize=8)
    return figure


def segment_profiles(profiles: Sequence[tuple]) -> Figure:
    """Mean cosine between texts and their segments, one line per ``(label, [texts, segments] array)``."""
    return _mean_curves(
        profiles,
        "segment of the text (1 = start)",
        "cosine(text embedding, segment embedding)",
        "Which part of a text its vector represents (flat = fair)",
    )


def trade_off(
    rows: Sequence[dict],
    title: str = "",
    xlabel: str = "general retrieval: nDCG@10 change vs plain (points; right is better)",
    ylabel: str = "PSI on the positional benchmark (lower is fairer)",
) -> Figure:
    """Fairness against general quality: x = general nDCG@10 change vs plain, y = PSI, each point labelled by HM.

    ``rows`` come from :func:`posfair_llamaindex.eval.sweeps.tradeoff_rows`; single-vector and dual
    configurations share the axes, one series per kind, points of a series joined in strength order.
    """
    figure = Figure(figsize=(8, 5.5))
    axis = figure.subplots()
    series: dict = {}
    for row in rows:
        kind = (
            "plain"
            if row["mode"] == "plain"
            else ("calibrated" if row["mode"] == "calibrated" else f"dual {row['fusion']}")
        )
        series.setdefault(kind, []).append(row)
    markers = {"plain": "*", "calibrated": "o"}
    for index, (kind, members) in enumerate(series.items()):
        members = sorted(members, key=lambda r: r["strength"] or 0.0)
        x = [r["general_delta"][0] for r in members]
        y = [r["psi"][0] for r in members]
        axis.plot(
            x,
            y,
            marker=markers.get(kind, "s"),
            markersize=10 if kind == "plain" else 6,
            label=kind,
            linestyle="-" if len(members) > 1 else "none",
            color=f"C{index}",
        )
        for r, xi, yi in zip(members, x, y, strict=True):
            strength = "" if r["strength"] is None else f"{r['strength']:g}: "
            axis.annotate(
                f"{strength}HM {r['hm'][0]:.1f}", (xi, yi), textcoords="offset points", xytext=(4, 4), fontsize=7
            )
    axis.axvline(0, color="black", linewidth=0.8)
    axis.set_xlabel(xlabel)
    axis.set_ylabel(ylabel)
    axis.set_title(title or "Fairness against general quality", fontsize=10)
    axis.legend(fontsize=8)
    return figure


def evidence_moving(curves: Sequence[tuple]) -> Figure:
    """cos(query, document) as the evidence moves through the slots, one line per ``(label, [sets, slots])``."""
    return _mean_curves(
        curves,
        "slot of the evidence (1 = start of the document)",
        "cosine(query, document)",
        "Evidence moving through a fixed document (flat = fair)",
        delta=True,
    )


def dump_effect(result: dict) -> Figure:
    """Mean final-layer norms by token kind, and stopwords' last-layer attention to [CLS] and [DUMP]."""
    figure = Figure(figsize=(8, 3.5))
    left, right = figure.subplots(1, 2)
    norms = {k: v for k, v in result["mean_norm"].items() if v is not None}
    left.bar(list(norms), list(norms.values()), color=["#4c72b0", "#dd8452", "#55a868"][: len(norms)])
    left.set_ylabel("mean L2 norm, final layer")
    left.set_title("hidden-state norms")
    shares = {k.replace("to_", "to "): v for k, v in result["stopword_attention"].items() if v is not None}
    right.bar(list(shares), list(shares.values()), color="#8172b3")
    right.set_ylabel("attention share (last layer)")
    right.set_title("where stopwords attend")
    return figure


def shuffle_losses(rows_by_benchmark: dict[str, list[dict]], title: str = "") -> Figure:
    """nDCG@10 lost to shuffling the sentences, per configuration (bars) and benchmark (groups), with 95% intervals.

    ``rows_by_benchmark`` maps a benchmark's name to :func:`posfair_llamaindex.eval.shuffle.loss_rows`.
    """
    benchmarks = list(rows_by_benchmark)
    names = list(dict.fromkeys(r["name"] for rows in rows_by_benchmark.values() for r in rows))
    width = 0.8 / max(len(names), 1)
    figure = Figure(figsize=(max(6, 0.6 * len(benchmarks) * len(names) + 2), 4))
    axis = figure.subplots()
    for index, name in enumerate(names):
        positions, points, low, high = [], [], [], []
        for group, benchmark in enumerate(benchmarks):
            row = next((r for r in rows_by_benchmark[benchmark] if r["name"] == name), None)
            if row is None:
                continue
            point, lower, upper = row["ndcg_at_10_loss"]
            positions.append(group + (index - (len(names) - 1) / 2) * width)
            points.append(point)
            low.append(point - lower)
            high.append(upper - point)
        axis.bar(positions, points, width, yerr=[low, high], capsize=3, label=name, color=f"C{index}")
    axis.axhline(0, color="black", linewidth=0.8)
    axis.set_xticks(range(len(benchmarks)))
    axis.set_xticklabels(benchmarks, fontsize=8)
    axis.set_ylabel("nDCG@10 loss, ordered − shuffled (points)")
    axis.set_title(title or "What shuffling the sentences costs (lower = less reliant on order)", fontsize=10)
    axis.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))  # outside: bars reach any height
    return figure
