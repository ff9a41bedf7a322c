"""``posfair eval``: measure position bias of named configurations on real benchmarks, with bootstrap intervals."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from posfair_llamaindex.cli.arguments import (
    CliError,
    calibration_from_args,
    calibration_options,
    chunker_options,
    chunker_settings,
    comma_floats,
    for_terminal,
    model_options,
)
from posfair_llamaindex.cli.research_arguments import (
    data_options,
    document_options,
    fusion_rules,
    heldout_articles,
    model_from_args,
    run_benchmark,
    scifact_benchmark,
    squad_benchmark,
    tokenizer_for,
)
from posfair_llamaindex.eval.fusion import ALL_FUSIONS

BENCHMARKS = ("squad", "evidence", "nq", "scifact")
NAMED_CONFIGS = ("plain", "default", "uniform", "cls_hard", "sea", "custom", "dual", "multi", "windows")


def register(commands) -> None:
    rotation = argparse.ArgumentParser(add_help=False)
    rotation.add_argument_group("evidence moving and NQ oracle").add_argument(
        "--max-sets", type=int, default=600, help="rotated sets of three passages (%(default)s)"
    )
    evaluate = commands.add_parser(
        "eval",
        parents=[
            data_options(),
            document_options(),
            rotation,
            model_options(),
            calibration_options(),
            chunker_options(),
        ],
        help="measure position bias on real data",
        description="Run configurations over position-aware benchmarks; report nDCG@10 per group, HM, PSI, "
        "aggregate nDCG@10 and Recall@10 with bootstrap 95%% intervals, as markdown, JSON and a PNG chart.",
    )
    evaluate.add_argument(
        "--benchmark", default="squad", help=f"comma list of {', '.join(BENCHMARKS)} or 'all' (%(default)s)"
    )
    evaluate.add_argument(
        "--configs",
        default="plain,default",
        help=f"comma list of {', '.join(NAMED_CONFIGS)}; 'custom' uses --variant/--strength/... (%(default)s)",
    )
    dual_group(evaluate)
    windows_group(evaluate)
    shuffle = evaluate.add_argument_group("shuffled-sentence test")
    shuffle.add_argument(
        "--shuffle-sentences",
        action="store_true",
        help="also encode every document with its sentences in a random order and report the loss in nDCG@10 "
        "and Recall@10 against the ordered documents, per configuration",
    )
    shuffle.add_argument(
        "--shuffle-seed", type=int, default=None, help="with --shuffle-sentences: the sentence-order seed (0)"
    )
    evaluate.set_defaults(handler=run_eval)


def dual_group(parser) -> None:
    group = parser.add_argument_group("dual configurations ('dual' and 'multi' in --configs)")
    group.add_argument(
        "--fusion", default="max", help=f"comma list of fusion rules for 'dual': {', '.join(ALL_FUSIONS)} (%(default)s)"
    )
    group.add_argument(
        "--dual-strengths",
        default=None,
        help="comma list of calibrated-vector strengths for 'dual' (the pooling's dual default); 'multi' fuses "
        "plain with all of them by the first --fusion rule",
    )


def windows_group(parser) -> None:
    from posfair_llamaindex.options import DEFAULT_WINDOW_DOCUMENT, WINDOW_DOCUMENTS, WINDOW_SOURCES

    group = parser.add_argument_group("windows configurations ('windows' in --configs; each list is a grid)")
    group.add_argument("--window-size", default="128", help="comma list of window sizes in tokens (%(default)s)")
    group.add_argument(
        "--window-stride", default="full", help="comma list: 'full' (= size), 'half' (size / 2) or tokens (%(default)s)"
    )
    group.add_argument(
        "--window-document",
        default=DEFAULT_WINDOW_DOCUMENT,
        help=f"comma list of the document vector(s) beside the windows: {', '.join(WINDOW_DOCUMENTS)} (%(default)s)",
    )
    group.add_argument(
        "--window-source",
        default="windows",
        help=f"comma list of where window vectors come from: {', '.join(WINDOW_SOURCES)} (%(default)s; late: "
        "late chunking from one whole-document pass; nodes: LlamaIndex nodes of that size, mapped to their parent)",
    )


def _custom_name(calibration) -> str:
    """Name a custom configuration by its settings so that reports say what was run."""
    c = calibration
    name = f"custom ({c.variant}, strength {c.strength:g}, basket {c.basket_size}, layers {c.layers}"
    if calibration.variant == "cls_hard":
        name += f", hard weight {calibration.hard_weight:g}"
    return name + ")"


def _window_configs(args, model: str) -> list:
    """The grid of windows configurations: size x stride x source x document x fusion (--fusion's plain rules)."""
    from posfair_llamaindex.encoding.windows import WindowConfig
    from posfair_llamaindex.eval.runner import EvalConfig
    from posfair_llamaindex.options import FUSIONS

    def items(text: str) -> list:
        return [item.strip() for item in text.split(",") if item.strip()]

    fusions = [f for f in fusion_rules(args.fusion) if f in FUSIONS] or ["max"]
    configs = []
    for size in (int(v) for v in items(args.window_size)):
        for stride_text in items(args.window_stride):
            stride = {"full": size, "half": size // 2}.get(stride_text) or int(stride_text)
            for source in items(args.window_source):
                for document in items(args.window_document):
                    windows = WindowConfig(size=size, stride=stride, document=document)
                    calibration = calibration_from_args(args)
                    if document == "dual" and args.strength is None:
                        calibration = calibration.model_copy(update={"strength": _dual_strengths(args, model)[0]})
                    label = f"{'windows' if source == 'windows' else source} {size}/{stride} + {document}"
                    for fusion in fusions if document != "none" else ["max"]:
                        configs.append(
                            EvalConfig(
                                label if document == "none" else f"{label} ({fusion})",
                                mode="windows",
                                calibration=calibration,
                                fusion=fusion,
                                windows=windows,
                                window_source=source,
                                pooling=args.pooling,
                            )
                        )
    return configs


def _dual_strengths(args, model: str) -> list:
    if args.dual_strengths:
        return comma_floats(args.dual_strengths, "--dual-strengths")
    from posfair_llamaindex.model.model_files import read_sentence_transformer_files, resolve_local_folder
    from posfair_llamaindex.modes import DUAL_DEFAULTS

    pooling = args.pooling or read_sentence_transformer_files(resolve_local_folder(model)).pooling or "first"
    return [DUAL_DEFAULTS[pooling]["strength"]]


def _configs(args, model: str = "") -> list:
    from posfair_llamaindex.calibration.config import CalibrationConfig
    from posfair_llamaindex.encoding.sea import ChunkerConfig
    from posfair_llamaindex.eval.runner import EvalConfig

    configs = []
    for name in [n.strip() for n in args.configs.split(",") if n.strip()]:
        if name == "plain":
            configs.append(EvalConfig.plain(args.pooling))
        elif name == "default":
            configs.append(EvalConfig("default (cls_soft)", calibration=CalibrationConfig(), pooling=args.pooling))
        elif name in ("uniform", "cls_hard"):
            configs.append(EvalConfig(name, calibration=CalibrationConfig(variant=name), pooling=args.pooling))
        elif name == "sea":
            chunker = ChunkerConfig(**chunker_settings(args))
            configs.append(EvalConfig("sea", mode="sea", chunker=chunker, pooling=args.pooling))
        elif name == "custom":
            calibration = calibration_from_args(args)
            configs.append(EvalConfig(_custom_name(calibration), calibration=calibration, pooling=args.pooling))
        elif name == "windows":
            configs.extend(_window_configs(args, model))
        elif name in ("dual", "multi"):
            base = calibration_from_args(args)
            strengths = _dual_strengths(args, model)
            calibrations = [base.model_copy(update={"strength": s}) for s in strengths]
            fusions = fusion_rules(args.fusion)
            if name == "multi":
                label = f"{fusions[0]}(plain, " + ", ".join(f"{s:g}" for s in strengths) + ")"
                configs.append(
                    EvalConfig(
                        label,
                        mode="dual",
                        calibration=calibrations[0],
                        fusion=fusions[0],
                        more_calibrations=tuple(calibrations[1:]),
                        pooling=args.pooling,
                    )
                )
                continue
            for calibration in calibrations:
                for fusion in fusions:
                    configs.append(
                        EvalConfig(
                            f"dual {fusion} {calibration.strength:g}",
                            mode="dual",
                            calibration=calibration,
                            fusion=fusion,
                            pooling=args.pooling,
                        )
                    )
        else:
            raise ValueError(f"unknown configuration {name!r}; choose from {', '.join(NAMED_CONFIGS)}")
    return configs


def _benchmarks(args, tokenizer) -> list:
    from posfair_llamaindex.eval import benchmark_data as data

    names = BENCHMARKS if args.benchmark == "all" else [n.strip() for n in args.benchmark.split(",")]
    built = []
    for name in names:
        if name == "squad":
            built.append(squad_benchmark(args, tokenizer))
        elif name == "evidence":
            built.append(
                data.squad_evidence_moving(
                    Path(args.data),
                    tokenizer,
                    token_budget=args.token_budget,
                    max_sets=args.max_sets,
                    seed=args.seed,
                    articles=heldout_articles(args),
                )
            )
        elif name == "nq":
            built.append(
                data.nq_oracle(
                    Path(args.data), tokenizer, token_budget=args.token_budget, max_sets=args.max_sets, seed=args.seed
                )
            )
        elif name == "scifact":
            built.append(scifact_benchmark(args))
        else:
            raise ValueError(f"unknown benchmark {name!r}; choose from {', '.join(BENCHMARKS)} or all")
    return built


def run_eval(args) -> int:
    if args.shuffle_seed is not None and not args.shuffle_sentences:
        raise CliError("--shuffle-seed is used by --shuffle-sentences only")
    model = model_from_args(args)
    configs = _configs(args, model)
    tokenizer = tokenizer_for(model)
    losses: dict[str, list] = {}
    for benchmark in _benchmarks(args, tokenizer):
        stem = benchmark.name.split(" (")[0].lower().replace(" ", "-").replace("(", "").replace(")", "")
        stem = f"{stem}-{args.pooling or 'model-pooling'}"
        ordered = run_benchmark(args, model, configs, benchmark, stem)
        if args.shuffle_sentences:
            losses[benchmark.name] = _shuffle_loss(args, model, configs, ordered, stem)
    if len(losses) > 1:
        from posfair_llamaindex.eval import plots

        chart = plots.save_png(
            plots.shuffle_losses(losses), Path(args.out) / f"shuffle-loss-{args.pooling or 'model-pooling'}.png"
        )
        print(f"wrote {chart}")
    return 0


def _shuffle_loss(args, model: str, configs, ordered, stem: str) -> list:
    """Run the configs on the benchmark with shuffled sentences; write and print the loss against ``ordered``."""
    from posfair_llamaindex.eval import plots
    from posfair_llamaindex.eval.report import display_name
    from posfair_llamaindex.eval.shuffle import loss_markdown, loss_report, loss_rows, shuffle_sentences

    seed = args.shuffle_seed or 0
    shuffled = shuffle_sentences(ordered.benchmark, seed)
    settings = shuffled.settings
    print(
        f"shuffled sentences (seed {seed}); kept as they were: {settings['single_sentence_documents']} "
        f"single-sentence and {settings['order_kept_documents']} order-kept documents"
    )
    after = run_benchmark(args, model, configs, shuffled, f"{stem}-shuffled")
    rows = loss_rows(ordered, after, samples=args.bootstrap)
    heading = (
        f"**{ordered.benchmark.describe()}**, model `{display_name(model)}`: ordered vs sentences shuffled "
        f"(seed {seed}); paired bootstrap 95% intervals over queries."
    )
    table = loss_markdown(rows, heading)
    out = Path(args.out)
    (out / f"{stem}-shuffle-loss.md").write_text(table + "\n")
    (out / f"{stem}-shuffle-loss.json").write_text(json.dumps(loss_report(ordered, after, rows), indent=2) + "\n")
    chart = plots.save_png(plots.shuffle_losses({ordered.benchmark.name: rows}), out / f"{stem}-shuffle-loss.png")
    print(for_terminal(table))
    print(f"wrote {out / f'{stem}-shuffle-loss.md'}, {out / f'{stem}-shuffle-loss.json'}, {chart}")
    return rows
