"""``posfair diagnose``: self-mass, segment profiles and training-side probes of your texts, plain vs calibrated."""

from __future__ import annotations

import json
from pathlib import Path

from posfair_llamaindex.cli.arguments import (
    calibration_from_args,
    calibration_options,
    load_config_from_args,
    model_options,
)
from posfair_llamaindex.cli.research_arguments import DEFAULT_DATA, heldout_articles, model_from_args, split_options


def register(commands) -> None:
    diagnose = commands.add_parser(
        "diagnose",
        parents=[model_options(), calibration_options()],
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

    if not args.texts and args.evidence_moving is None:
        raise ValueError("give texts to diagnose, or --evidence-moving N")
    if args.dump_effect and not args.texts:
        raise ValueError("--dump-effect needs texts to look at")
    if args.evidence_moving is not None and args.evidence_moving < 1:
        raise ValueError(f"--evidence-moving needs at least 1 set, got {args.evidence_moving}")
    encoder = load_config_from_args(args).encoder(model_from_args(args))
    out = Path(args.out)
    calibration = calibration_from_args(args)
    if args.texts:
        _text_diagnostics(encoder, _read_texts(args.texts), calibration, args)
    if args.evidence_moving is not None:
        _evidence_moving(encoder, calibration, args, out)
    return 0


def _text_diagnostics(encoder, texts, calibration, args) -> None:
    from posfair_llamaindex.eval import plots
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
    from posfair_llamaindex.eval import plots
    from posfair_llamaindex.eval.probes import evidence_moving_cosine, moving_summary, squad_moving_sets

    articles = heldout_articles(args)
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
