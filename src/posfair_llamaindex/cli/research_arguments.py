"""Argument groups, benchmark builders and the reported run that ``posfair eval``, ``sweep`` and ``diagnose`` share."""

from __future__ import annotations

import argparse
from pathlib import Path

from posfair_llamaindex.cli.arguments import for_terminal, load_config_from_args, quiet_transformers, resolve_model
from posfair_llamaindex.eval.fusion import ALL_FUSIONS, is_fusion

DEFAULT_DATA = "../shared/data"


def data_options() -> argparse.ArgumentParser:
    """Where the benchmarks are read from and the results go; a parent parser for eval and every sweep."""
    data = argparse.ArgumentParser(add_help=False)
    group = data.add_argument_group("data and output")
    group.add_argument("--data", default=DEFAULT_DATA, help="the shared data folder (%(default)s)")
    group.add_argument("--out", default="posfair_eval", help="folder for markdown, JSON and PNG results (%(default)s)")
    group.add_argument("--cache-dir", default=None, help="reuse document embeddings across runs")
    group.add_argument(
        "--bootstrap", type=int, default=1000, help="bootstrap samples for the 95%% intervals (%(default)s)"
    )
    group.add_argument("--seed", type=int, default=0, help="sampling seed (%(default)s)")
    return data


def document_options() -> argparse.ArgumentParser:
    """How the SQuAD-LongPosQ documents (and the SciFact sample) are built; a parent parser for eval and sweeps."""
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
    return squad


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


def model_from_args(args) -> str:
    """The model to load, with transformers quietened first so its warnings do not bury the report."""
    quiet_transformers()
    return resolve_model(args.model)


def fusion_rules(text: str) -> list:
    """A --fusion comma list, checked up front so a typo fails before any model loads."""
    chosen = [f.strip() for f in text.split(",") if f.strip()]
    unknown = [f for f in chosen if not is_fusion(f)]
    if unknown or not chosen:
        raise ValueError(f"--fusion takes a comma list of {', '.join(ALL_FUSIONS)} or max@OFFSET, got {text!r}")
    return chosen


def tokenizer_for(model: str):
    """The model's tokenizer, which the benchmarks need to fit documents to their token budget."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model)


def squad_benchmark(args, tokenizer):
    """SQuAD-LongPosQ as the document options describe it."""
    from posfair_llamaindex.eval import benchmark_data as data

    return data.squad_longposq(
        Path(args.data),
        tokenizer,
        token_budget=args.token_budget,
        word_budget=args.word_budget,
        max_documents=args.max_documents,
        questions_per_group=args.questions_per_group,
        exact_offsets_only=args.exact_offsets,
        seed=args.seed,
        articles=heldout_articles(args),
    )


def heldout_articles(args):
    """The held-out SQuAD article positions under --split heldout, else None (every article)."""
    if args.split == "all":
        return None
    from posfair_llamaindex.eval import benchmark_data as data

    return data.heldout_article_indices(Path(args.data), args.heldout_fraction, args.split_seed)


def scifact_benchmark(args):
    """SciFact, the general-quality check: position-fairness must not cost ordinary retrieval."""
    from posfair_llamaindex.eval import benchmark_data as data

    return data.scifact(Path(args.data), sample=args.scifact_sample, seed=args.seed)


def run_benchmark(args, model: str, configs, benchmark, stem):
    """Evaluate the configurations on one benchmark, write the report files under ``stem`` and print the table."""
    from posfair_llamaindex.eval.report import to_markdown, write_report
    from posfair_llamaindex.eval.runner import evaluate

    print(benchmark.describe())
    run = evaluate(
        benchmark,
        configs,
        model=model,
        load=load_config_from_args(args),
        cache_dir=args.cache_dir,
        bootstrap_samples=args.bootstrap,
    )
    paths = write_report(run, Path(args.out), stem)
    print(for_terminal(to_markdown(run)))
    print(f"wrote {', '.join(str(p) for p in paths.values())}")
    return run
