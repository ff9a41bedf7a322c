"""``posfair eval``, ``posfair sweep`` and ``posfair diagnose``: measurements on real data and on your texts."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from posfair_llamaindex.cli.options import (
    CliError,
    calibration_from_args,
    calibration_options,
    chunker_options,
    chunker_settings,
    comma_floats,
    model_options,
    quiet_transformers,
    resolve_model,
)
from posfair_llamaindex.eval.fusion import ALL_FUSIONS, is_fusion
from posfair_llamaindex.eval.grids import GRID_BASKETS, GRID_LAYERS, STRENGTHS

DEFAULT_DATA = "../shared/data"
BENCHMARKS = ("squad", "evidence", "nq", "scifact")
NAMED_CONFIGS = ("plain", "default", "uniform", "cls_hard", "sea", "custom", "dual", "multi", "windows")


def register(commands) -> None:
    model = model_options()
    data = argparse.ArgumentParser(add_help=False)
    group = data.add_argument_group("data and output")
    group.add_argument("--data", default=DEFAULT_DATA, help="the shared data folder (%(default)s)")
    group.add_argument("--out", default="posfair_eval", help="folder for markdown, JSON and PNG results (%(default)s)")
    group.add_argument("--cache-dir", default=None, help="reuse document embeddings across runs")
    group.add_argument(
        "--bootstrap", type=int, default=1000, help="bootstrap samples for the 95%% intervals (%(default)s)"
    )
    group.add_argument("--seed", type=int, default=0, help="sampling seed (%(default)s)")
    squad = argparse.ArgumentParser(add_help=False)
    group = squad.add_argument_group("documents (SQuAD-LongPosQ; the token budget also for evidence moving and NQ)")
    group.add_argument("--max-documents", type=int, default=2000, help="documents (%(default)s)")
    group.add_argument("--questions-per-group", type=int, default=2000, help="questions per group (%(default)s)")
    group.add_argument("--token-budget", type=int, default=512, help="document token budget (%(default)s)")
    group.add_argument(
        "--word-budget", type=int, default=None, help="build ~N-word documents instead (long-context models)"
    )
    group.add_argument("--exact-offsets", action="store_true", help="keep only questions whose answer offset is exact")
    split_options(group, default="all")
    group.add_argument(
        "--scifact-sample",
        type=int,
        default=None,
        help="SciFact corpus: every relevant abstract plus N sampled others (all 5,183 when unset)",
    )
    rotation = argparse.ArgumentParser(add_help=False)
    rotation.add_argument_group("evidence moving and NQ oracle").add_argument(
        "--max-sets", type=int, default=600, help="rotated sets of three passages (%(default)s)"
    )

    evaluate = commands.add_parser(
        "eval",
        parents=[data, squad, rotation, model, calibration_options(), chunker_options()],
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

    diagnose = commands.add_parser(
        "diagnose",
        parents=[model, calibration_options()],
        help="self-mass per layer and segment profiles of your texts",
        description="For files or literal texts: box plots of the pooling token's attention to itself per layer, "
        "and the cosine between each text's embedding and its 10 segments, plain vs calibrated (PNG + JSON).",
    )
    diagnose.add_argument("texts", nargs="*", metavar="TEXT", help="files (.txt/.md) or literal texts")
    diagnose.add_argument("--out", default="posfair_diagnostics", help="output folder")
    probes = diagnose.add_argument_group("training-side diagnostics")
    probes.add_argument(
        "--evidence-moving",
        type=int,
        default=None,
        metavar="N",
        help="move the evidence of N SQuAD questions through 10 slots of a filler document; cos(query, doc) per slot",
    )
    probes.add_argument(
        "--dump-effect", action="store_true", help="norms and stopword attention of [CLS], [DUMP] and stopwords"
    )
    probes.add_argument("--data", default=DEFAULT_DATA, help="the shared data folder, for --evidence-moving")
    split_options(probes, default="heldout")
    probes.add_argument("--token-budget", type=int, default=450, help="tokens per moved document (%(default)s)")
    probes.add_argument("--seed", type=int, default=0, help="which questions (%(default)s)")
    diagnose.set_defaults(handler=run_diagnose)


def split_options(group, default: str) -> None:
    """--split, --heldout-fraction and --split-seed: the SQuAD articles to read, split as `posfair finetune` does."""
    group.add_argument(
        "--split",
        choices=("all", "heldout"),
        default=default,
        help="SQuAD articles to build from: all, or only those `posfair finetune` holds out (%(default)s)",
    )
    group.add_argument(
        "--heldout-fraction", type=float, default=0.2, help="with --split heldout: as in finetune (%(default)s)"
    )
    group.add_argument("--split-seed", type=int, default=0, help="with --split heldout: as in finetune (%(default)s)")


def _model(args) -> str:
    quiet_transformers()
    return resolve_model(args.model)


def _custom_name(calibration) -> str:
    """Name a custom configuration by its settings so that reports say what was run."""
    c = calibration
    name = f"custom ({c.variant}, strength {c.strength:g}, basket {c.basket_size}, layers {c.layers}"
    if calibration.variant == "cls_hard":
        name += f", hard weight {calibration.hard_weight:g}"
    return name + ")"


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


def _window_configs(args, model: str) -> list:
    """The grid of windows configurations: size x stride x source x document x fusion (--fusion's plain rules)."""
    from posfair_llamaindex.eval.runner import EvalConfig
    from posfair_llamaindex.options import FUSIONS
    from posfair_llamaindex.windows import WindowConfig

    def items(text: str) -> list:
        return [item.strip() for item in text.split(",") if item.strip()]

    fusions = [f for f in _fusions(args.fusion) if f in FUSIONS] or ["max"]
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


def _fusions(text: str) -> list:
    chosen = [f.strip() for f in text.split(",") if f.strip()]
    unknown = [f for f in chosen if not is_fusion(f)]
    if unknown or not chosen:
        raise ValueError(f"--fusion takes a comma list of {', '.join(ALL_FUSIONS)} or max@OFFSET, got {text!r}")
    return chosen


def _dual_strengths(args, model: str) -> list:
    if args.dual_strengths:
        return comma_floats(args.dual_strengths, "--dual-strengths")
    from posfair_llamaindex.embedding import DUAL_DEFAULTS
    from posfair_llamaindex.model_files import read_sentence_transformer_files, resolve_local_folder

    pooling = args.pooling or read_sentence_transformer_files(resolve_local_folder(model)).pooling or "first"
    return [DUAL_DEFAULTS[pooling]["strength"]]


def _configs(args, model: str = "") -> list:
    from posfair_llamaindex.config import CalibrationConfig
    from posfair_llamaindex.eval.runner import EvalConfig
    from posfair_llamaindex.sea import ChunkerConfig

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
            fusions = _fusions(args.fusion)
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
    from posfair_llamaindex.eval import data

    names = BENCHMARKS if args.benchmark == "all" else [n.strip() for n in args.benchmark.split(",")]
    built = []
    for name in names:
        if name == "squad":
            built.append(_squad(args, tokenizer))
        elif name == "evidence":
            built.append(
                data.squad_evidence_moving(
                    Path(args.data),
                    tokenizer,
                    token_budget=args.token_budget,
                    max_sets=args.max_sets,
                    seed=args.seed,
                    articles=_articles(args),
                )
            )
        elif name == "nq":
            built.append(
                data.nq_oracle(
                    Path(args.data), tokenizer, token_budget=args.token_budget, max_sets=args.max_sets, seed=args.seed
                )
            )
        elif name == "scifact":
            built.append(_scifact(args))
        else:
            raise ValueError(f"unknown benchmark {name!r}; choose from {', '.join(BENCHMARKS)} or all")
    return built


def _squad(args, tokenizer):
    """SQuAD-LongPosQ as the document options describe it."""
    from posfair_llamaindex.eval import data

    return data.squad_longposq(
        Path(args.data),
        tokenizer,
        token_budget=args.token_budget,
        word_budget=args.word_budget,
        max_documents=args.max_documents,
        questions_per_group=args.questions_per_group,
        exact_offsets_only=args.exact_offsets,
        seed=args.seed,
        articles=_articles(args),
    )


def _articles(args):
    """The held-out SQuAD article positions under --split heldout, else None (every article)."""
    if args.split == "all":
        return None
    from posfair_llamaindex.eval import data

    return data.heldout_article_indices(Path(args.data), args.heldout_fraction, args.split_seed)


def _scifact(args):
    from posfair_llamaindex.eval import data

    return data.scifact(Path(args.data), sample=args.scifact_sample, seed=args.seed)


def _tokenizer(model: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model)


def _run(args, model: str, configs, benchmark, stem):
    from posfair_llamaindex.eval.report import to_markdown, write_report
    from posfair_llamaindex.eval.runner import evaluate

    print(benchmark.describe())
    run = evaluate(
        benchmark,
        configs,
        model=model,
        max_length=args.max_length,
        batch_size=args.batch_size,
        device=args.device,
        dtype=args.dtype,
        trust_remote_code=args.trust_remote_code,
        cache_dir=args.cache_dir,
        bootstrap_samples=args.bootstrap,
    )
    paths = write_report(run, Path(args.out), stem)
    print(to_markdown(run))
    print(f"wrote {', '.join(str(p) for p in paths.values())}")
    return run


def run_eval(args) -> int:
    if args.shuffle_seed is not None and not args.shuffle_sentences:
        raise CliError("--shuffle-seed is used by --shuffle-sentences only")
    model = _model(args)
    configs = _configs(args, model)
    tokenizer = _tokenizer(model)
    losses: dict[str, list] = {}
    for benchmark in _benchmarks(args, tokenizer):
        stem = benchmark.name.split(" (")[0].lower().replace(" ", "-").replace("(", "").replace(")", "")
        stem = f"{stem}-{args.pooling or 'model-pooling'}"
        ordered = _run(args, model, configs, benchmark, stem)
        if args.shuffle_sentences:
            losses[benchmark.name] = _shuffle_loss(args, model, configs, ordered, stem)
    if len(losses) > 1:
        from posfair_llamaindex import plots

        chart = plots.save_png(
            plots.shuffle_losses(losses), Path(args.out) / f"shuffle-loss-{args.pooling or 'model-pooling'}.png"
        )
        print(f"wrote {chart}")
    return 0


def _shuffle_loss(args, model: str, configs, ordered, stem: str) -> list:
    """Run the configs on the benchmark with shuffled sentences; write and print the loss against ``ordered``."""
    from posfair_llamaindex import plots
    from posfair_llamaindex.eval.report import display_name
    from posfair_llamaindex.eval.shuffle import loss_markdown, loss_report, loss_rows, shuffle_sentences

    seed = args.shuffle_seed or 0
    shuffled = shuffle_sentences(ordered.benchmark, seed)
    settings = shuffled.settings
    print(
        f"shuffled sentences (seed {seed}); kept as they were: {settings['single_sentence_documents']} "
        f"single-sentence and {settings['order_kept_documents']} order-kept documents"
    )
    after = _run(args, model, configs, shuffled, f"{stem}-shuffled")
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
    print(table)
    print(f"wrote {out / f'{stem}-shuffle-loss.md'}, {out / f'{stem}-shuffle-loss.json'}, {chart}")
    return rows


def run_sweep(args) -> int:
    from posfair_llamaindex import plots
    from posfair_llamaindex.eval.sweeps import findings, grid_configs, grid_markdown, strength_configs

    model = _model(args)
    benchmark = _squad(args, _tokenizer(model))
    pooling = args.pooling or "model-pooling"
    if args.kind == "strength":
        strengths = [float(v) for v in args.strengths.split(",")] if args.strengths else None
        configs = strength_configs(calibration_from_args(args), args.pooling, *([strengths] if strengths else []))
        run = _run(args, model, configs, benchmark, f"sweep-strength-{pooling}")
        chart = plots.save_png(plots.strength_sweep(run), Path(args.out) / f"sweep-strength-{pooling}-deltas.png")
        print(f"wrote {chart}")
    else:
        run = _run(args, model, grid_configs(args.pooling, **_grid_settings(args)), benchmark, f"sweep-grid-{pooling}")
        table = grid_markdown(run)
        (Path(args.out) / f"sweep-grid-{pooling}-table.md").write_text(table + "\n")
        print(table)
    summary = findings(run)
    (Path(args.out) / f"sweep-{args.kind}-{pooling}-findings.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    return 0


def run_dual_sweep(args) -> int:
    from posfair_llamaindex import plots
    from posfair_llamaindex.eval.sweeps import dual_configs, tradeoff_findings, tradeoff_markdown, tradeoff_rows

    model = _model(args)
    strengths = comma_floats(args.strengths, "--strengths")
    configs = dual_configs(args.pooling, strengths, _fusions(args.fusion), base=calibration_from_args(args))
    squad = _squad(args, _tokenizer(model))
    pooling = args.pooling or "model-pooling"
    positional = _run(args, model, configs, squad, f"sweep-dual-squad-{pooling}")
    general = _run(args, model, configs, _scifact(args), f"sweep-dual-scifact-{pooling}")
    rows = tradeoff_rows(positional, general)
    out = Path(args.out)
    table = tradeoff_markdown(rows, "SQuAD", "SciFact")
    (out / f"sweep-dual-{pooling}.md").write_text(table + "\n")
    summary = tradeoff_findings(rows)
    (out / f"sweep-dual-{pooling}.json").write_text(json.dumps({"rows": rows, "findings": summary}, indent=2) + "\n")
    title = f"SQuAD-LongPosQ fairness vs SciFact quality, {pooling} pooling"
    chart = plots.save_png(plots.trade_off(rows, title), out / f"sweep-dual-{pooling}.png")
    print(table)
    print(json.dumps(summary, indent=2))
    print(f"wrote {chart}")
    return 0


def _grid_settings(args) -> dict:
    """The calibration settings a grid holds fixed: its strength (and hard weight), unless left at the default."""
    fixed = calibration_from_args(args)
    return {"strength": fixed.strength, "hard_weight": fixed.hard_weight}


def _read_texts(items: list[str]) -> list[str]:
    texts = []
    for item in items:
        try:
            is_file = Path(item).is_file()
        except OSError:  # a long literal text is not a valid path
            is_file = False
        texts.append(Path(item).read_text(encoding="utf-8") if is_file else item)
    return texts


def run_diagnose(args) -> int:
    from posfair_llamaindex.encoder import PosFairEncoder

    if not args.texts and args.evidence_moving is None:
        raise ValueError("give texts to diagnose, or --evidence-moving N")
    if args.dump_effect and not args.texts:
        raise ValueError("--dump-effect needs texts to look at")
    if args.evidence_moving is not None and args.evidence_moving < 1:
        raise ValueError(f"--evidence-moving needs at least 1 set, got {args.evidence_moving}")
    encoder = PosFairEncoder(
        _model(args),
        pooling=args.pooling,
        max_length=args.max_length,
        device=args.device,
        dtype=args.dtype,
        trust_remote_code=args.trust_remote_code,
    )
    out = Path(args.out)
    calibration = calibration_from_args(args)
    if args.texts:
        _text_diagnostics(encoder, _read_texts(args.texts), calibration, args)
    if args.evidence_moving is not None:
        _evidence_moving(encoder, calibration, args, out)
    return 0


def _text_diagnostics(encoder, texts, calibration, args) -> None:
    from posfair_llamaindex import plots
    from posfair_llamaindex.eval.diagnostics import diagnose
    from posfair_llamaindex.eval.probes import dump_effect

    results = diagnose(encoder, texts, calibration, Path(args.out))
    profile = results["segment_profile"]
    for name in ("plain", "calibrated"):
        values = " ".join(f"{v:.3f}" for v in profile[name]["mean_profile"])
        summary = profile[name]
        spread = f"spread {summary['spread']:.3f}, end-begin {summary['end_minus_begin']:+.3f}"
        print(f"segment profile {name:>10}: {values}  ({spread})")
    if "self_mass" in results:
        for name in ("plain_median", "calibrated_median"):
            print(f"self-mass {name:>17}: " + " ".join(f"{v:.3f}" for v in results["self_mass"][name]))
    charts = "segment_profile.png" + (", self_mass.png" if "self_mass" in results else "")
    print(f"wrote {args.out}/{charts} and diagnostics.json")
    if args.dump_effect:
        prompt = encoder.files.prompts.get("document", encoder.files.prompts.get("passage", ""))
        effect = dump_effect(encoder, texts, prompt=prompt)
        (Path(args.out) / "dump_effect.json").write_text(json.dumps(effect, indent=2) + "\n")
        plots.save_png(plots.dump_effect(effect), Path(args.out) / "dump_effect.png")
        print("dump effect: " + json.dumps(effect))
        print(f"wrote {args.out}/dump_effect.png and dump_effect.json")


def _evidence_moving(encoder, calibration, args, out: Path) -> None:
    from posfair_llamaindex import plots
    from posfair_llamaindex.eval.probes import evidence_moving_cosine, moving_summary, squad_moving_sets

    articles = _articles(args)
    sets = squad_moving_sets(
        Path(args.data),
        encoder.tokenizer,
        count=args.evidence_moving,
        token_budget=args.token_budget,
        articles=articles,
        seed=args.seed,
    )
    prompts = encoder.files.prompts
    kwargs = dict(
        query_prompt=prompts.get("query", ""),
        document_prompt=prompts.get("document", prompts.get("passage", "")),
        batch_size=args.batch_size,
    )
    curves = {"plain": evidence_moving_cosine(encoder, sets, None, **kwargs)}
    if not calibration.is_plain:
        curves["calibrated"] = evidence_moving_cosine(encoder, sets, calibration, **kwargs)
    results = {
        "model": encoder.model_name,
        "pooling": encoder.pooling,
        "calibration": calibration.tag(),
        "split": args.split,
        **{name: moving_summary(cosines) for name, cosines in curves.items()},
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "evidence_moving.json").write_text(json.dumps(results, indent=2) + "\n")
    plots.save_png(plots.evidence_moving(list(curves.items())), out / "evidence_moving.png")
    for name in curves:
        summary = results[name]
        values = " ".join(f"{v:.3f}" for v in summary["mean_cosine"])
        print(
            f"evidence moving {name:>10}: {values}  (peak slot {summary['peak_slot']}, lowest "
            f"{summary['lowest_slot']}, delta x1000 {summary['delta_x1000']:.1f}, {summary['sets']} sets)"
        )
    print(f"wrote {out}/evidence_moving.png and evidence_moving.json")
