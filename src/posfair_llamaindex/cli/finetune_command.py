"""``posfair finetune``: train a retriever on position-controlled pairs (needs the extra ``train``)."""

from __future__ import annotations

import json
from pathlib import Path

from posfair_llamaindex.cli.arguments import OFFLINE_MODEL, CliError, quiet_transformers, resolve_model
from posfair_llamaindex.train.finetune import FinetuneConfig
from posfair_llamaindex.train.training_pairs import SETUPS


def _default(field: str):
    return FinetuneConfig.model_fields[field].default


def register(commands) -> None:
    finetune = commands.add_parser(
        "finetune",
        help="fine-tune a retriever on position-controlled SQuAD (or your own) pairs",
        description="Fine-tune with sentence-transformers' MultipleNegativesRankingLoss (scale 20, in-batch "
        "negatives) on pairs whose evidence sits where --setup says, optionally with trainable [DUMP] prefix "
        "tokens. SQuAD pairs come from the training articles only; the held-out articles are what "
        "`posfair eval --split heldout` measures. The output is a sentence-transformers folder that "
        "`--model DIR` loads everywhere.",
    )
    model = finetune.add_argument_group("model")
    model.add_argument("--model", default=None, help=f"base model folder (default {OFFLINE_MODEL})")
    model.add_argument("--pooling", choices=("cls", "mean"), required=True, help="pooling to train")
    model.add_argument(
        "--dump-tokens", type=int, default=_default("dump_tokens"), help="[DUMP] prefix tokens, 0 = off (%(default)s)"
    )
    model.add_argument("--max-length", type=int, default=_default("max_length"), help="token limit (%(default)s)")
    model.add_argument("--out", required=True, help="output folder")
    model.add_argument("--overwrite", action="store_true", help="replace a non-empty output folder")
    data = finetune.add_argument_group("data")
    data.add_argument("--setup", choices=SETUPS, default=_default("setup"), help="evidence position (%(default)s)")
    data.add_argument("--examples", type=int, default=_default("examples"), help="training pairs (%(default)s)")
    data.add_argument("--data", default=str(_default("data_dir")), help="the shared data folder (%(default)s)")
    data.add_argument("--pairs", default=None, help="your own JSONL of {query, evidence} pairs (with --fillers)")
    data.add_argument("--fillers", default=None, help="folder of filler texts for --pairs")
    data.add_argument(
        "--token-budget", type=int, default=_default("token_budget"), help="document tokens (%(default)s)"
    )
    data.add_argument("--hard-negatives", action="store_true", help="add one same-article document without the answer")
    data.add_argument(
        "--heldout-fraction",
        type=float,
        default=_default("heldout_fraction"),
        help="SQuAD articles kept out of training (%(default)s)",
    )
    data.add_argument("--split-seed", type=int, default=_default("split_seed"), help="article split seed (%(default)s)")
    training = finetune.add_argument_group("training")
    length = training.add_mutually_exclusive_group()
    length.add_argument("--steps", type=int, default=None, help="optimiser steps")
    length.add_argument("--epochs", type=float, default=None, help="epochs (1 when neither is given)")
    training.add_argument("--batch-size", type=int, default=_default("batch_size"), help="pairs per step (%(default)s)")
    training.add_argument(
        "--learning-rate", type=float, default=_default("learning_rate"), help="peak learning rate (%(default)s)"
    )
    training.add_argument("--seed", type=int, default=_default("seed"), help="training seed (%(default)s)")
    training.add_argument("--bf16", action="store_true", help="bfloat16 mixed precision")
    training.add_argument("--cpu", action="store_true", help="train on the CPU even when a GPU exists")
    finetune.set_defaults(handler=run_finetune)


def config_from_args(args) -> FinetuneConfig:
    from pydantic import ValidationError

    steps, epochs = args.steps, args.epochs
    if steps is None and epochs is None:
        epochs = 1.0
    try:
        return FinetuneConfig(
            base_model=Path(resolve_model(args.model)),
            pooling=args.pooling,
            output=Path(args.out),
            setup=args.setup,
            examples=args.examples,
            data_dir=Path(args.data),
            pairs_file=Path(args.pairs) if args.pairs else None,
            filler_dir=Path(args.fillers) if args.fillers else None,
            token_budget=args.token_budget,
            max_length=args.max_length,
            batch_size=args.batch_size,
            learning_rate=args.learning_rate,
            steps=steps,
            epochs=epochs,
            seed=args.seed,
            split_seed=args.split_seed,
            dump_tokens=args.dump_tokens,
            hard_negatives=args.hard_negatives,
            heldout_fraction=args.heldout_fraction,
            bf16=args.bf16,
            use_cpu=args.cpu,
            overwrite=args.overwrite,
        )
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'settings'}: {e['msg']}" for e in error.errors())
        raise CliError(f"invalid fine-tuning settings: {problems}") from None


def run_finetune(args) -> int:
    from posfair_llamaindex.train.finetune import finetune

    settings = config_from_args(args)
    quiet_transformers()
    try:
        result = finetune(settings)
    except ModuleNotFoundError as error:
        if error.name and error.name.split(".")[0] in ("sentence_transformers", "datasets", "accelerate"):
            raise CliError(
                f"fine-tuning needs the extra 'train': pip install 'posfair-llamaindex[train]' ({error})"
            ) from None
        raise
    data = result.summary["data"]
    print(json.dumps({"slots": data.get("slot_counts"), "articles": data.get("articles")}))
    final = f"{result.losses[-1]:.4f}" if result.losses else "n/a"
    print(f"trained {result.steps} step(s), final loss {final}; model in {result.output}")
    print(f"use it with: posfair ingest PATH --collection NAME --model {result.output}")
    return 0
