"""What a command imports before it answers. ``--help`` and the refusals that need no model come without torch,
transformers, LlamaIndex or any other library that takes a good part of a second to load; a refusal that needs
Qdrant's answer (a missing collection, a dead server) loads qdrant-client and nothing heavier.

Each path runs in a fresh interpreter, and ``sys.modules`` is read once the command has returned. No timings
here: benchmarks/bench_cli_latency.py measures them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap

import pytest

from posfair_llamaindex.calibration.config import CalibrationConfig
from posfair_llamaindex.cli import build_parser

HEAVY = (
    "torch",
    "transformers",
    "llama_index.core",
    "qdrant_client",
    "matplotlib",
    "chonkie",
    "ray",
    "datasets",
    "sentence_transformers",
    "scipy",
    "pandas",
    "pyarrow",
)
QDRANT = {"qdrant_client"}
DEAD_SERVER = "http://127.0.0.1:9"  # the discard port: nothing listens, the connection is refused at once

# runs each argument list in turn, and prints the heavy libraries that each one added to sys.modules
PROBE = textwrap.dedent(
    """
    import json, sys
    from posfair_llamaindex.cli import main
    heavy = json.loads(sys.argv[1])
    for argv in json.loads(sys.argv[2]):
        try:
            code = main(argv)
        except SystemExit as stop:
            code = stop.code
        print("@@ " + json.dumps({"argv": argv, "code": code, "heavy": [n for n in heavy if n in sys.modules]}))
    """
)


def probe(*argvs: list) -> tuple[list, str]:
    """The report of each argument list run in one fresh interpreter, and what it wrote to stderr."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(HEAVY), json.dumps([[str(a) for a in argv] for argv in argvs])],
        capture_output=True,
        text=True,
        timeout=300,
    )
    reports = [json.loads(line[3:]) for line in done.stdout.splitlines() if line.startswith("@@ ")]
    assert len(reports) == len(argvs), (done.stdout[-2000:], done.stderr[-2000:])
    return reports, done.stderr


def commands(parser: argparse.ArgumentParser, prefix: tuple = ()) -> list:
    """Every command and sub-command of the parser, as argument lists."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found.append([*prefix, name])
                found += commands(child, (*prefix, name))
    return found


def test_help_imports_no_heavy_library():
    """In one interpreter, ``--help`` and then each ``COMMAND --help``: none of them adds a heavy library."""
    argvs = [["--help"]] + [[*command, "--help"] for command in commands(build_parser())]
    assert ["query", "--help"] in argvs and ["sweep", "dual", "--help"] in argvs  # the walk sees nested commands
    reports, _ = probe(*argvs)
    assert [(r["argv"], r["code"], r["heavy"]) for r in reports] == [(argv, 0, []) for argv in argvs]


@pytest.fixture(scope="module")
def places(tmp_path_factory) -> dict:
    """A Qdrant folder with a tagged collection ``demo``, a folder with a text file, an empty folder, and paths that
    are not there."""
    from qdrant_client import QdrantClient
    from qdrant_client.http import models as rest

    root = tmp_path_factory.mktemp("import-weight")
    store = root / "qdrant"
    client = QdrantClient(path=str(store))
    # written by a model that is not on this machine (a query without --model is refused)
    model = str(root / "gone" / "model")
    tag = {"mode": "calibrated", "calibration": CalibrationConfig().tag(), "model": model, "dimension": 4}
    client.create_collection(
        "demo", vectors_config=rest.VectorParams(size=4, distance=rest.Distance.COSINE), metadata={"posfair": tag}
    )
    client.close()
    docs, empty = root / "docs", root / "empty"
    docs.mkdir()
    empty.mkdir()
    (docs / "a.txt").write_text("The harbour lantern was kept by the old keeper of the town for forty years.")
    return {"store": store, "docs": docs, "empty": empty, "missing": root / "missing", "new": root / "new-store"}


def cases() -> list:
    """``(id, argv, libraries it may load, what its refusal says)``; ``{name}`` stands for a path of ``places``."""
    query = ["query", "where is the lantern?", "--collection", "demo"]
    at, dead = ["--qdrant-path", "{store}"], ["--qdrant-url", DEAD_SERVER]
    too_wide = ["--mode", "windows", "--window-size", "1000"]
    return [
        ("query-bad-path", [*query, "--qdrant-path", "{missing}"], set(), "does not exist; nothing was created"),
        ("query-k-0", [*query, *at, "-k", "0"], set(), "-k must be at least 1"),
        ("query-missing-collection", ["query", "x", "--collection", "nope", *at], QDRANT, "'nope' does not exist"),
        ("query-dead-server", [*query, *dead], QDRANT, f"Qdrant at {DEAD_SERVER} did not answer"),
        ("query-tag-model-gone", [*query, *at], QDRANT, "is not on this machine; pass --model"),
        ("query-fusion-plain", [*query, *at, "--mode", "plain", "--fusion", "max"], QDRANT, "--fusion is used by"),
        ("query-no-such-model", [*query, *at, "--model", "{missing}"], QDRANT, "there is no such folder"),
        ("ingest-bad-path", ["ingest", "{missing}", "--collection", "c", "--qdrant-path", "{new}"], set(), "no such"),
        ("ingest-empty-folder", ["ingest", "{empty}", "--collection", "c", *at], set(), "no .txt, .md files"),
        ("ingest-window-size", ["ingest", "{docs}", "--collection", "c", *at, *too_wide], set(), "do not fit"),
        ("ingest-tag-mismatch", ["ingest", "{docs}", "--collection", "demo", *at, "--mode", "plain"], QDRANT, "mode:"),
        ("ingest-dead-server", ["ingest", "{docs}", "--collection", "c", *dead], QDRANT, "did not answer"),
        ("collections-bad-path", ["collections", "--qdrant-path", "{missing}"], set(), "does not exist"),
        ("audit-no-input", ["audit", *at], set(), "give PATHs to audit, or --collection NAME"),
        ("audit-missing-collection", ["audit", "--collection", "nope", *at], QDRANT, "'nope' does not exist"),
        ("upgrade-missing-collection", ["upgrade", "--collection", "nope", "--into", "b", *at], QDRANT, "not exist"),
        # the upgrade's settings are checked first, by a module of the Qdrant layer
        ("upgrade-window-size", ["upgrade", "--collection", "demo", "--into", "b", *at, *too_wide], QDRANT, "not fit"),
        ("diagnose-no-texts", ["diagnose"], set(), "give texts to diagnose"),
        ("eval-shuffle-seed", ["eval", "--shuffle-seed", "1"], set(), "--shuffle-seed is used by --shuffle-sentences"),
    ]


@pytest.mark.parametrize("argv,allowed,refusal", [case[1:] for case in cases()], ids=[case[0] for case in cases()])
def test_a_refusal_that_needs_no_model_loads_no_model_library(places, argv, allowed, refusal):
    argv = [arg.format(**places) for arg in argv]
    (report,), stderr = probe(argv)
    assert report["code"] in (1, 2), stderr[-2000:]
    assert refusal in stderr, stderr[-2000:]
    assert set(report["heavy"]) <= allowed, stderr[-2000:]


def test_listing_collections_loads_qdrant_client_only(places):
    (report,), stderr = probe(["collections", "--qdrant-path", places["store"], "--json"])
    assert report["code"] == 0, stderr[-2000:]
    assert report["heavy"] == ["qdrant_client"]


def test_a_refused_ingest_leaves_no_new_folder_behind(places):
    """A path with nothing to read is refused before the Qdrant folder that ingest would create is made."""
    (report,), stderr = probe(["ingest", places["empty"], "--collection", "c", "--qdrant-path", places["new"]])
    assert report["code"] == 1 and "no .txt, .md files" in stderr
    assert not places["new"].exists()
