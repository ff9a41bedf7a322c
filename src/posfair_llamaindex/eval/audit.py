"""The label-free position audit: how position-biased a user's own corpus is, and which setting fixes it.

Pseudo-queries from the corpus's own sentences (:mod:`~posfair_llamaindex.eval.pseudo_queries`) go through
the labelled benchmarks' runner, so every configuration is scored the same way: nDCG@10 per position group,
HM, PSI and bootstrap intervals, and HM and PSI paired against plain over the same pseudo-queries.

Over a wrapped LlamaIndex embedding (``PosFairEmbedding(embed_model=...).encoder``) the audit scores what runs
over it, plain (the wrapped model's own vector) and windows, and says in :attr:`AuditReport.notes` that
calibrated and dual were left out: they need the model's attention, which a wrapped embedding does not expose.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from posfair_llamaindex.calibration.config import CalibrationConfig
from posfair_llamaindex.encoding.encoder import PosFairEncoder
from posfair_llamaindex.encoding.load_config import DEFAULT_LOAD, LoadConfig
from posfair_llamaindex.encoding.windows import WindowConfig
from posfair_llamaindex.eval.benchmark_data import Benchmark
from posfair_llamaindex.eval.metrics import paired_summary_difference
from posfair_llamaindex.eval.pseudo_queries import DESIGNS, CorpusScreen, pseudo_query_benchmark
from posfair_llamaindex.eval.runner import EvalConfig, EvalRun, check_configs_over_wrapped, evaluate, is_wrapped
from posfair_llamaindex.modes import DUAL_DEFAULTS
from posfair_llamaindex.options import AUDIT_STRENGTHS


@dataclass
class AuditReport:
    model: str
    pooling: Optional[str]  # None over a wrapped embedding, which pools as it does itself
    screen: CorpusScreen
    benchmark: Benchmark
    run: EvalRun
    rows: list[dict]
    notes: list[str] = field(default_factory=list)  # what was left out, and why
    wrapped: Optional[str] = None  # the wrapped LlamaIndex embedding audited (its class and model), if one was


def audit_configs(
    pooling: Optional[str],
    resolved_pooling: str,
    base: Optional[CalibrationConfig] = None,
    strengths: Sequence[float] = AUDIT_STRENGTHS,
    dual: bool = True,
    windows: Optional[WindowConfig] = None,
) -> list[EvalConfig]:
    """Plain, the calibrated vector at each strength, dual mode with its defaults for the model's pooling, and
    windows mode with ``windows`` (max fusion) when given."""
    base = base or CalibrationConfig()
    configs = [EvalConfig.plain(pooling)]
    for strength in strengths:
        if not 0.0 < strength <= 1.0:
            raise ValueError(f"audit strengths must be in (0, 1], got {strength}")
        calibration = base.model_copy(update={"strength": float(strength)})
        configs.append(EvalConfig(f"calibrated {strength:g}", calibration=calibration, pooling=pooling))
    if dual:
        defaults = DUAL_DEFAULTS[resolved_pooling]
        calibration = base.model_copy(update={"strength": defaults["strength"]})
        name = f"dual {defaults['fusion']} {defaults['strength']:g}"
        configs.append(
            EvalConfig(name, mode="dual", calibration=calibration, fusion=defaults["fusion"], pooling=pooling)
        )
    if windows is not None:
        calibration = base
        if windows.document == "dual":
            calibration = base.model_copy(update={"strength": DUAL_DEFAULTS[resolved_pooling]["strength"]})
        name = f"windows {windows.size}/{windows.step} + {windows.document}"
        configs.append(
            EvalConfig(name, mode="windows", calibration=calibration, fusion="max", windows=windows, pooling=pooling)
        )
    return configs


def audit_texts(
    texts: Mapping[str, str],
    model: str,
    *,
    configs: Optional[Sequence[EvalConfig]] = None,
    calibration: Optional[CalibrationConfig] = None,
    strengths: Sequence[float] = AUDIT_STRENGTHS,
    design: str = DESIGNS[0],
    max_documents: int = 300,
    seed: int = 0,
    load: LoadConfig = DEFAULT_LOAD,
    cache_dir: Optional[Path] = None,
    bootstrap_samples: int = 1000,
    show_progress: bool = True,
    encoder: Optional[PosFairEncoder] = None,
    dual: bool = True,
    windows: Optional[WindowConfig] = None,
) -> AuditReport:
    """Audit documents (id -> text) under ``configs`` (default: :func:`audit_configs`); see :class:`AuditReport`.

    ``load`` says how the model runs; ``encoder`` is a model already loaded under it (the CLI has one from
    splitting files into nodes), or a wrapped LlamaIndex embedding's ``WrappedEncoder``: then the default
    configurations are plain and windows (calibrated and dual need the model's attention, and are named in the
    report's notes as left out), and given ``configs`` that calibrate are refused before any model call.
    """
    pooling = load.pooling
    if encoder is None:
        encoder = load.encoder(model)
    base = calibration or CalibrationConfig()
    notes = []
    wrapped = is_wrapped(encoder)
    if configs is None and wrapped:
        configs = audit_configs(pooling, None, base, strengths=(), dual=False, windows=windows)
        left_out = [f"calibrated ({', '.join(f'{s:g}' for s in strengths)})"] if strengths else []
        left_out += ["dual"] if dual else []
        if left_out:
            notes.append(
                f"{' and '.join(left_out)} left out: {encoder.describe()} is a wrapped LlamaIndex embedding, and "
                "calibration needs the model's attention, which it does not expose"
            )
    elif configs is None:
        configs = audit_configs(pooling, encoder.pooling, base, strengths, dual, windows)
    if not any(c.mode == "plain" for c in configs):
        raise ValueError("an audit compares with plain: include a plain configuration")
    if wrapped:  # refused before the corpus is screened or the model called
        check_configs_over_wrapped(encoder, configs)
    # a document must span two baskets of every calibrated configuration, or calibration leaves it alone (over a
    # wrapped model, the basket the settings name: its documents are screened as a loaded model's would be)
    basket = max((c.calibration.basket_size for c in configs if c.calibrates), default=base.basket_size)
    benchmark, screen = pseudo_query_benchmark(
        texts,
        encoder.offsets if wrapped else encoder.tokenizer,
        min_tokens=basket,
        max_tokens=encoder.content_limit - _prompt_tokens(encoder),
        max_documents=max_documents,
        design=design,
        seed=seed,
    )
    run = evaluate(
        benchmark,
        configs,
        model=model,
        load=load,
        cache_dir=cache_dir,
        bootstrap_samples=bootstrap_samples,
        show_progress=show_progress,
        encoders={pooling: encoder},
    )
    rows = audit_rows(run, bootstrap_samples)
    return AuditReport(
        model, encoder.pooling, screen, benchmark, run, rows, notes, encoder.describe() if wrapped else None
    )


def _prompt_tokens(encoder: PosFairEncoder) -> int:
    if is_wrapped(encoder):  # its content_limit has already set its own document prompt aside
        return 0
    prompts = encoder.files.prompts
    prompt = prompts.get("document", prompts.get("passage", ""))
    return len(encoder.tokenizer(prompt, add_special_tokens=False)["input_ids"]) if prompt else 0


def audit_rows(run: EvalRun, bootstrap_samples: int = 1000) -> list[dict]:
    """One JSON-ready row per configuration: its scores, and HM, PSI and nDCG@10 paired against plain."""
    groups = list(run.benchmark.groups)
    plain = next(r for r in run.results if r.config.mode == "plain")
    rows = []
    for result in run.results:
        c = result.config
        row: dict[str, Any] = {
            "name": c.name,
            "mode": c.mode,
            "strength": c.calibration.strength if c.calibrates else None,
            "variant": c.calibration.variant if c.calibrates else None,
            "fusion": c.fusion,
            "pooling": result.pooling,
            "fingerprint": result.fingerprint,
            "hm": list(result.summary["hm"]),
            "psi": list(result.summary["psi"]),
            "groups": {g: list(result.summary[f"group:{g}"]) for g in groups},
            "ndcg": list(result.summary["aggregate"]),
            "recall": list(result.recall_summary["aggregate"]),
            "hm_vs_plain": None,
            "psi_vs_plain": None,
            "ndcg_vs_plain": None,
        }
        if result is not plain:
            paired = paired_summary_difference(result.ndcg, plain.ndcg, groups, samples=max(bootstrap_samples, 1))
            row["hm_vs_plain"] = [v * 100 for v in paired["hm"]]
            row["psi_vs_plain"] = list(paired["psi"])
            row["ndcg_vs_plain"] = [v * 100 for v in paired["aggregate"]]
        rows.append(row)
    return rows


# plain's PSI below this: its three thirds score within 10 % of the best one, too little position bias for
# calibration to be worth recommending (the README's plain first-token PSI on SQuAD-LongPosQ is 0.267)
LOW_PSI = 0.10


def recommend(rows: Sequence[dict]) -> dict:
    """The configuration to use on this corpus, and why: the highest HM that beats plain beyond noise.

    HM rewards lifting the worst position group without giving up the others, which is the goal; a gain
    counts only when its paired interval over the same pseudo-queries lies above zero.
    """
    plain = next(r for r in rows if r["mode"] == "plain")
    others = [r for r in rows if r["mode"] != "plain"]
    if not others:
        raise ValueError("nothing to recommend: the audit ran plain only")
    best = max(others, key=lambda r: r["hm"][0])
    gain = best["hm_vs_plain"]
    worst = min(plain["groups"], key=lambda g: plain["groups"][g][0])
    top = max(plain["groups"], key=lambda g: plain["groups"][g][0])
    if gain[1] <= 0:
        psi = plain["psi"]
        bias = (
            f"plain PSI is {psi[0]:.3f} [{psi[1]:.3f}, {psi[2]:.3f}] (its {worst} group scores "
            f"{plain['groups'][worst][0]:.1f}, its {top} group {plain['groups'][top][0]:.1f})"
        )
        if psi[0] < LOW_PSI:
            verdict = f"{bias}, below {LOW_PSI:g}: little position bias, so this corpus needs no calibration"
        else:
            verdict = (
                f"yet {bias}: this corpus is position-biased, but none of the settings tried corrects it beyond "
                "noise on these pseudo-queries, so plain stays; more documents (--max-documents) narrow the intervals"
            )
        return {
            "name": "plain",
            "mode": "plain",
            "strength": None,
            "reason": (
                f"no configuration raises HM beyond noise: the best, {best['name']}, changes it by {gain[0]:+.2f} "
                f"[{gain[1]:+.2f}, {gain[2]:+.2f}]; {verdict}"
            ),
        }
    moved = best["groups"][worst][0] - plain["groups"][worst][0]
    return {
        "name": best["name"],
        "mode": best["mode"],
        "strength": best["strength"],
        "reason": (
            f"highest HM: {best['hm'][0]:.1f} against plain's {plain['hm'][0]:.1f} (paired {gain[0]:+.2f} "
            f"[{gain[1]:+.2f}, {gain[2]:+.2f}]); PSI {plain['psi'][0]:.3f} -> {best['psi'][0]:.3f}; plain's weakest "
            f"group ({worst}) moves {moved:+.1f} points"
        ),
    }


def audit_markdown(report: AuditReport) -> str:
    """The audit's table: per-group nDCG@10, HM, PSI, and the paired changes against plain (x100, PSI as a ratio)."""
    head = ["config", "begin", "middle", "end", "HM", "PSI", "Δ HM vs plain", "Δ PSI vs plain", "nDCG@10", "Δ nDCG@10"]
    lines = [
        f"**{report.benchmark.describe()}**; {report.screen.describe()}. Pseudo-query nDCG@10 ×100 with 95% "
        "bootstrap intervals; Δ columns are paired over the same pseudo-queries.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]

    def cell(values, digits=1):
        return "-" if values is None else f"{values[0]:.{digits}f} [{values[1]:.{digits}f}, {values[2]:.{digits}f}]"

    def signed(values, digits=2):
        return "-" if values is None else f"{values[0]:+.{digits}f} [{values[1]:+.{digits}f}, {values[2]:+.{digits}f}]"

    if report.wrapped is not None:
        lines[0] = f"{report.wrapped}: {lines[0]}"
    for r in report.rows:
        groups = [f"{r['groups'][g][0]:.1f}" for g in report.benchmark.groups]
        cells = [
            r["name"],
            *groups,
            cell(r["hm"]),
            cell(r["psi"], 3),
            signed(r["hm_vs_plain"]),
            signed(r["psi_vs_plain"], 3),
            f"{r['ndcg'][0]:.1f}",
            signed(r["ndcg_vs_plain"]),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    if report.notes:
        lines += ["", *(f"Note: {note}." for note in report.notes)]
    return "\n".join(lines)


def chart_rows(rows: Sequence[dict]) -> list[dict]:
    """The rows in the shape of ``sweep dual``'s trade-off chart, the audit's own nDCG@10 change on the x axis."""
    return [{**r, "general_delta": r["ndcg_vs_plain"] or [0.0, 0.0, 0.0]} for r in rows]
