#!/usr/bin/env bash
# FastEmbed for the integration tests (integration_tests/test_wrapped_fastembed.py): fastembed 0.9.1 and
# llama-index-embeddings-fastembed 0.7.0 in a virtual environment of their own, beside this package's runtime
# dependencies.
#
#   bash scripts/fastembed_env.sh            # install it once (idempotent: a finished install is kept)
#   bash scripts/fastembed_env.sh --path     # print the folder of its virtual environment
#
# Why a venv of its own: fastembed pins huggingface-hub<2, and this project's .venv resolves to huggingface-hub 2
# (nothing there asks for 2: transformers 5 and datasets take >=1.31,<3; joining them would downgrade the hub for the
# whole project). Here the two meet on the newest 1.x. The package itself is not installed: the tests run the checkout's
# src/ in it (PYTHONPATH), so one environment serves every clone; only the runtime dependencies of pyproject.toml go in,
# within constraints.txt and scripts/fastembed_constraints.txt, with `onnx` for torch.onnx.export (the tests export
# all-MiniLM-L6-v2 to ONNX in it, into a cache beside it; nothing is downloaded from a model hub).
#
# It lives outside the clone, in ${POSFAIR_FASTEMBED_VENV:-$HOME/.cache/posfair-fastembed/venv}, so that a fresh
# clone (CI) finds it installed. torch 2.13.0 goes in first, from the local CPU wheel: left to resolve plain `torch`,
# pip would pull a CUDA build of several GB. A finished install leaves the file .posfair-installed in the folder,
# holding a hash of the dependencies and constraints it was made from (when they change, the next run installs anew);
# the tests use the environment only where that file is, and skip with the reason otherwise. When the install fails
# (no network, a version gone) this script says so and exits 0: the rest of CI runs, and the FastEmbed tests skip.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${POSFAIR_FASTEMBED_VENV:-$HOME/.cache/posfair-fastembed/venv}"
MARKER="$VENV/.posfair-installed"
if [ "${1:-}" = "--path" ]; then
    echo "$VENV"
    exit 0
fi
PYTHON="${PYTHON:-python3}"
# what the install was made from: a change to the package's dependencies or to either constraints file installs anew
stamp="$("$PYTHON" -c 'import hashlib, sys, tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
parts = ["\n".join(deps), *(open(name).read() for name in sys.argv[1:])]
print(hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16])' constraints.txt scripts/fastembed_constraints.txt)" || stamp="unknown"
if [ -f "$MARKER" ] && [ -x "$VENV/bin/python" ] && [ "$(cat "$MARKER")" = "$stamp" ]; then
    echo "fastembed: found in $VENV"
    exit 0
fi
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
install() {
    rm -rf "$VENV"
    mkdir -p "$(dirname "$VENV")"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    "$VENV/bin/python" -m pip install --quiet torch==2.13.0
    # the runtime dependencies of pyproject.toml, one per line (tomllib: Python 3.11 and later)
    mapfile -t dependencies < <("$VENV/bin/python" -c \
        'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))')
    "$VENV/bin/python" -m pip install --quiet -c constraints.txt -c scripts/fastembed_constraints.txt torch==2.13.0 \
        "${dependencies[@]}" fastembed==0.9.1 llama-index-embeddings-fastembed==0.7.0 onnx "huggingface-hub>=1.31,<2"
    "$VENV/bin/python" -c "import torch, transformers, onnx, onnxruntime, fastembed, llama_index.embeddings.fastembed; \
assert torch.__version__.startswith('2.13.0'), torch.__version__"
}
echo "fastembed: installing fastembed 0.9.1 into $VENV (once; a few minutes)"
# a subshell of its own with set -e in force (in an `if` condition bash would run on past a failed step)
set +e
(set -e; install) > "$log" 2>&1
status=$?
set -e
if [ "$status" -eq 0 ]; then
    echo "$stamp" > "$MARKER"
    echo "fastembed: installed"
else
    grep -v "is ignored" "$log" | tail -5 >&2 || true
    rm -rf "$VENV"
    echo "fastembed SKIPPED: fastembed could not be installed (above); its tests will skip"
fi
