"""The ``posfair`` command line. It depends on the library; nothing in the library imports it."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Optional

from posfair_llamaindex.errors import CliError

__all__ = ["CliError", "build_parser", "main"]


class _Parser(argparse.ArgumentParser):
    """No abbreviated options: ``--mode`` must never be taken for ``--model``."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    # imported here, not at the top: `posfair query` starts its model's process before these load (main)
    from posfair_llamaindex.cli import (
        audit_command,
        diagnose_command,
        eval_command,
        finetune_command,
        kernel_command,
        migrate_command,
        store_commands,
        sweep_command,
        upgrade_command,
    )

    parser = _Parser(prog="posfair", description="Position-fair dense retrieval on Qdrant.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    store_commands.register(commands)
    eval_command.register(commands)
    sweep_command.register(commands)
    diagnose_command.register(commands)
    finetune_command.register(commands)
    upgrade_command.register(commands)
    migrate_command.register(commands)
    audit_command.register(commands)
    kernel_command.register(commands)
    return parser


def quiet_libraries() -> None:
    """Keep the terminal for posfair's own progress bars and messages."""
    import logging
    import warnings

    # an unreachable server is reported by posfair itself, in one line
    warnings.filterwarnings("ignore", message="Failed to obtain server version")
    # read by transformers and huggingface_hub when they load, which is later (or never, for a dead server)
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    # SimpleDirectoryReader warns about optional readers that .txt/.md never need
    logging.getLogger("llama_index.core.readers.file.base").setLevel(logging.ERROR)
    # posfair's own warnings (skipped files, retries) reach the terminal as one line each
    logging.basicConfig(level=logging.WARNING, format="posfair: %(message)s")


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    quiet_libraries()  # before the query's process starts: it inherits the environment
    if argv[:1] != ["query"] or {"-h", "--help"} & set(argv):
        return _run(argv)
    # the query's model loads in a process of its own (encoding/query_process.py); started before this process
    # imports the commands, it gains their time too. A query that turns out not to need it stops it.
    from posfair_llamaindex.encoding import query_process

    query_process.start_early()
    try:
        return _run(argv)
    finally:
        query_process.discard_early()


def _run(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        print("posfair: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # every failure ends as one line and a non-zero exit
        message = " ".join(str(error).split()) or type(error).__name__
        print(f"posfair: error: {message}", file=sys.stderr)
        if os.environ.get("POSFAIR_DEBUG"):
            raise
        return 1
