"""Sweeps over calibration settings: strength (the paper's Figure 4) and layers x basket size x variant (Table 1)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from posfair_llamaindex.calibration.config import CalibrationConfig
from posfair_llamaindex.eval.grids import GRID_BASKETS, GRID_LAYERS, STRENGTHS
from posfair_llamaindex.eval.runner import ConfigResult, EvalConfig, EvalRun
from posfair_llamaindex.options import VARIANTS


def strength_configs(
    base: CalibrationConfig, pooling: Optional[str], strengths: Sequence[float] = STRENGTHS
) -> list[EvalConfig]:
    configs = [EvalConfig.plain(pooling)]
    for strength in strengths:
        calibration = base.model_copy(update={"strength": float(strength)})
        configs.append(EvalConfig(f"strength {strength:.2f}", calibration=calibration, pooling=pooling))
    return configs


def grid_configs(
    pooling: Optional[str],
    layers: Sequence = GRID_LAYERS,
    baskets: Sequence[int] = GRID_BASKETS,
    variants: Sequence[str] = VARIANTS,
    strength: float = 0.5,
    hard_weight: float = CalibrationConfig.model_fields["hard_weight"].default,
) -> list[EvalConfig]:
    configs = [EvalConfig.plain(pooling)]
    for variant in variants:
        for layer in layers:
            for basket in baskets:
                calibration = CalibrationConfig(
                    variant=variant, layers=layer, basket_size=basket, strength=strength, hard_weight=hard_weight
                )
                configs.append(
                    EvalConfig(f"{variant} layers={layer} B={basket}", calibration=calibration, pooling=pooling)
                )
    return configs


def _plain(run: EvalRun) -> ConfigResult:
    for result in run.results:
        if result.config.mode == "plain":
            return result
    raise ValueError("the run has no plain configuration to compare with")


def findings(run: EvalRun, psi_target: float = 0.10, hm_gain: float = 3.0) -> dict[str, object]:
    """The best configuration by HM, and every one with PSI <= ``psi_target`` and HM >= plain + ``hm_gain``."""
    plain = _plain(run)
    calibrated = [r for r in run.results if r.config.mode != "plain"]
    best = max(calibrated, key=lambda r: r.summary["hm"][0])
    qualifying = [
        r.config.name
        for r in calibrated
        if r.summary["psi"][0] <= psi_target and r.summary["hm"][0] >= plain.summary["hm"][0] + hm_gain
    ]
    fairest = min(calibrated, key=lambda r: r.summary["psi"][0])
    return {
        "plain": {"hm": plain.summary["hm"][0], "psi": plain.summary["psi"][0]},
        "best_hm": {"name": best.config.name, "hm": best.summary["hm"][0], "psi": best.summary["psi"][0]},
        "lowest_psi": {"name": fairest.config.name, "hm": fairest.summary["hm"][0], "psi": fairest.summary["psi"][0]},
        f"psi<={psi_target} and hm>=plain+{hm_gain}": qualifying,
    }


def grid_markdown(run: EvalRun) -> str:
    """HM / PSI for every grid cell, one table per variant (rows layers, columns basket sizes)."""
    plain = _plain(run)
    cells: dict[str, dict[tuple, ConfigResult]] = {}
    for result in run.results:
        if result.config.mode != "calibrated":
            continue
        c = result.config.calibration
        cells.setdefault(c.variant, {})[(c.layers, c.basket_size)] = result
    lines = [f"plain: HM {plain.summary['hm'][0]:.1f}, PSI {plain.summary['psi'][0]:.3f}. Cells: HM / PSI.", ""]
    for variant, by_cell in cells.items():
        layers = list(dict.fromkeys(key[0] for key in by_cell))
        baskets = sorted({key[1] for key in by_cell})
        lines += [
            f"**{variant}**",
            "",
            "| layers | " + " | ".join(f"B={b}" for b in baskets) + " |",
            "|---" * (len(baskets) + 1) + "|",
        ]
        for layer in layers:
            row = []
            for basket in baskets:
                result = by_cell.get((layer, basket))
                row.append("-" if result is None else f"{result.summary['hm'][0]:.1f} / {result.summary['psi'][0]:.3f}")
            lines.append(f"| {layer} | " + " | ".join(row) + " |")
        lines.append("")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- dual: fairness against general quality
def dual_configs(
    pooling: Optional[str],
    strengths: Sequence[float],
    fusions: Sequence[str],
    base: Optional[CalibrationConfig] = None,
    singles: bool = True,
) -> list[EvalConfig]:
    """Plain, the single calibrated vector at every strength (when ``singles``), and dual per fusion x strength."""
    base = base or CalibrationConfig()
    configs = [EvalConfig.plain(pooling)]
    for strength in strengths:
        calibration = base.model_copy(update={"strength": float(strength)})
        if singles:
            configs.append(EvalConfig(f"calibrated {strength:g}", calibration=calibration, pooling=pooling))
        for fusion in fusions:
            configs.append(
                EvalConfig(
                    f"dual {fusion} {strength:g}", mode="dual", calibration=calibration, fusion=fusion, pooling=pooling
                )
            )
    return configs


def tradeoff_rows(positional: EvalRun, general: EvalRun) -> list[dict]:
    """One row per configuration run on both: HM and PSI on the positional set, nDCG@10 change on the general one."""
    general_by_name = {r.config.name: r for r in general.results}
    rows = []
    for result in positional.results:
        other = general_by_name.get(result.config.name)
        if other is None:
            continue
        delta = other.delta_vs_plain or (0.0, 0.0, 0.0)
        rows.append(
            {
                "name": result.config.name,
                "mode": result.config.mode,
                "fusion": result.config.fusion,
                "strength": None if result.config.mode == "plain" else result.config.calibration.strength,
                "hm": result.summary["hm"],
                "psi": result.summary["psi"],
                "groups": {g: result.summary[f"group:{g}"] for g in positional.benchmark.groups},
                "positional_delta": result.delta_vs_plain,
                "general_ndcg": other.summary["aggregate"],
                "general_delta": tuple(delta),
            }
        )
    return rows


def tradeoff_findings(rows: list[dict], psi_target: float = 0.10, hm_gain: float = 3.0) -> dict:
    """Which configurations beat plain on both sets, and which reach the fairness target without a general loss."""
    plain = next(r for r in rows if r["mode"] == "plain")
    better_on_both = [
        r["name"] for r in rows if r["mode"] != "plain" and r["hm"][0] > plain["hm"][0] and r["general_delta"][0] > 0
    ]
    target = [
        r["name"]
        for r in rows
        if r["psi"][0] <= psi_target and r["hm"][0] >= plain["hm"][0] + hm_gain and r["general_delta"][0] >= 0
    ]
    return {
        "plain": {"hm": plain["hm"][0], "psi": plain["psi"][0], "general_ndcg": plain["general_ndcg"][0]},
        "beat plain on HM and on general nDCG@10": better_on_both,
        f"psi<={psi_target}, hm>=plain+{hm_gain}, general not lower": target,
    }


def tradeoff_markdown(rows: list[dict], positional_name: str, general_name: str) -> str:
    head = [
        "config",
        "begin",
        "middle",
        "end",
        "HM",
        "PSI",
        f"Δ nDCG@10 {positional_name}",
        f"nDCG@10 {general_name}",
        f"Δ nDCG@10 {general_name}",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def signed(values):
        return "-" if values is None else f"{values[0]:+.2f} [{values[1]:+.2f}, {values[2]:+.2f}]"

    for r in rows:
        groups = [f"{value[0]:.1f}" for value in r["groups"].values()]
        general_delta = "-" if r["mode"] == "plain" else signed(r["general_delta"])
        cells = [
            r["name"],
            *groups,
            f"{r['hm'][0]:.2f}",
            f"{r['psi'][0]:.3f}",
            signed(r["positional_delta"]),
            f"{r['general_ndcg'][0]:.2f}",
            general_delta,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
