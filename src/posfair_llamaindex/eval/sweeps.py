"""Sweeps over calibration settings: strength (the paper's Figure 4) and layers x basket size x variant (Table 1)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from posfair_llamaindex.config import CalibrationConfig
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
