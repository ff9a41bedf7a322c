"""``posfair sweep strength|grid|dual``: sweep calibration settings on SQuAD-LongPosQ (and SciFact for dual)."""

from __future__ import annotations

import json
from pathlib import Path

from posfair_llamaindex.cli.arguments import (
    calibration_from_args,
    calibration_options,
    comma_floats,
    for_terminal,
    model_options,
)
from posfair_llamaindex.cli.research_arguments import (
    data_options,
    document_options,
    fusion_rules,
    model_from_args,
    run_benchmark,
    scifact_benchmark,
    squad_benchmark,
    tokenizer_for,
)
from posfair_llamaindex.eval.fusion import ALL_FUSIONS
from posfair_llamaindex.eval.grids import GRID_BASKETS, GRID_LAYERS, STRENGTHS


def register(commands) -> None:
    data, squad, model = data_options(), document_options(), model_options()
    sweep = commands.add_parser(
        "sweep",
        help="strength sweep or layers x basket x variant grid",
        description="Sweeps of calibration settings on SQuAD-LongPosQ.",
    )
    kinds = sweep.add_subparsers(dest="kind", required=True, metavar="KIND")
    strength = kinds.add_parser(
        "strength",
        parents=[data, squad, model, calibration_options(without=("strength",))],
        help="0.05..1.0 in steps of 0.05, with a chart of per-group nDCG@10 changes",
        description="Strength sweep (the paper's Figure 4): every other calibration setting is held at its value.",
    )
    strength.add_argument(
        "--strengths",
        default=None,
        help=f"comma list of strengths ({STRENGTHS[0]}..{STRENGTHS[-1]} by {STRENGTHS[1] - STRENGTHS[0]:.2f})",
    )
    strength.set_defaults(handler=run_sweep)
    grid = kinds.add_parser(
        "grid",
        parents=[data, squad, model, calibration_options(without=("variant", "basket_size", "layers"))],
        help="layers x basket size x variant (the paper's Table 1)",
        description=f"Grid of layers {set(GRID_LAYERS)} x basket size {set(GRID_BASKETS)} x variant, at one strength.",
    )
    grid.set_defaults(handler=run_sweep)
    dual = kinds.add_parser(
        "dual",
        parents=[data, squad, model, calibration_options(without=("strength",))],
        help="plain, calibrated and dual at each strength, on SQuAD-LongPosQ and SciFact: the trade-off chart",
        description="Fairness (PSI, HM on SQuAD-LongPosQ) against general quality (nDCG@10 change on SciFact) for "
        "the single calibrated vector and for dual mode under every fusion rule, at each strength.",
    )
    dual.add_argument("--strengths", default="0.5,0.6,0.7,0.8,0.85,0.9,1.0", help="comma list (%(default)s)")
    dual.add_argument("--fusion", default="max,sum,rrf", help=f"comma list of {', '.join(ALL_FUSIONS)} (%(default)s)")
    dual.set_defaults(handler=run_dual_sweep)


def run_sweep(args) -> int:
    from posfair_llamaindex.eval import plots
    from posfair_llamaindex.eval.sweeps import findings, grid_configs, grid_markdown, strength_configs

    model = model_from_args(args)
    benchmark = squad_benchmark(args, tokenizer_for(model))
    pooling = args.pooling or "model-pooling"
    if args.kind == "strength":
        strengths = [float(v) for v in args.strengths.split(",")] if args.strengths else None
        configs = strength_configs(calibration_from_args(args), args.pooling, *([strengths] if strengths else []))
        run = run_benchmark(args, model, configs, benchmark, f"sweep-strength-{pooling}")
        chart = plots.save_png(plots.strength_sweep(run), Path(args.out) / f"sweep-strength-{pooling}-deltas.png")
        print(f"wrote {chart}")
    else:
        configs = grid_configs(args.pooling, **_grid_settings(args))
        run = run_benchmark(args, model, configs, benchmark, f"sweep-grid-{pooling}")
        table = grid_markdown(run)
        (Path(args.out) / f"sweep-grid-{pooling}-table.md").write_text(table + "\n")
        print(for_terminal(table))
    summary = findings(run)
    (Path(args.out) / f"sweep-{args.kind}-{pooling}-findings.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    return 0


def run_dual_sweep(args) -> int:
    from posfair_llamaindex.eval import plots
    from posfair_llamaindex.eval.sweeps import dual_configs, tradeoff_findings, tradeoff_markdown, tradeoff_rows

    model = model_from_args(args)
    strengths = comma_floats(args.strengths, "--strengths")
    configs = dual_configs(args.pooling, strengths, fusion_rules(args.fusion), base=calibration_from_args(args))
    squad = squad_benchmark(args, tokenizer_for(model))
    pooling = args.pooling or "model-pooling"
    positional = run_benchmark(args, model, configs, squad, f"sweep-dual-squad-{pooling}")
    general = run_benchmark(args, model, configs, scifact_benchmark(args), f"sweep-dual-scifact-{pooling}")
    rows = tradeoff_rows(positional, general)
    out = Path(args.out)
    table = tradeoff_markdown(rows, "SQuAD", "SciFact")
    (out / f"sweep-dual-{pooling}.md").write_text(table + "\n")
    summary = tradeoff_findings(rows)
    (out / f"sweep-dual-{pooling}.json").write_text(json.dumps({"rows": rows, "findings": summary}, indent=2) + "\n")
    title = f"SQuAD-LongPosQ fairness vs SciFact quality, {pooling} pooling"
    chart = plots.save_png(plots.trade_off(rows, title), out / f"sweep-dual-{pooling}.png")
    print(for_terminal(table))
    print(json.dumps(summary, indent=2))
    print(f"wrote {chart}")
    return 0


def _grid_settings(args) -> dict:
    """The calibration settings a grid holds fixed: its strength (and hard weight), unless left at the default."""
    fixed = calibration_from_args(args)
    return {"strength": fixed.strength, "hard_weight": fixed.hard_weight}
