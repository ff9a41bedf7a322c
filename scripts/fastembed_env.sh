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
# clone (CI) finds it installed (scripts/side_venv.sh: the marker with a hash of the dependencies and constraints it
# was made from, torch first, a failed install skipped). The tests use the environment only where the marker is, and
# skip with the reason otherwise; a failed install exits 0, so the rest of CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/side_venv.sh
VENV="${POSFAIR_FASTEMBED_VENV:-$HOME/.cache/posfair-fastembed/venv}"
if [ "${1:-}" = "--path" ]; then
    echo "$VENV"
    exit 0
fi
# what the install was made from: a change to the package's dependencies, to either constraints file or to the way it
# installs (side_venv.sh) installs anew
stamp="$(side_venv_stamp constraints.txt scripts/fastembed_constraints.txt scripts/side_venv.sh)"
if side_venv_current "$VENV" "$stamp"; then
    echo "fastembed: found in $VENV"
    exit 0
fi
install() {
    side_venv_base "$VENV"
    # the runtime dependencies of pyproject.toml, one per line (tomllib: Python 3.11 and later)
    mapfile -t dependencies < <("$VENV/bin/python" -c \
        'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))')
    venv_install -c constraints.txt -c scripts/fastembed_constraints.txt torch==2.13.0 \
        "${dependencies[@]}" fastembed==0.9.1 llama-index-embeddings-fastembed==0.7.0 onnx "huggingface-hub>=1.31,<2"
    # the check imports what the tests' child (integration_tests/fastembed_child.py) will, and writes its bytecode
    # (side_venv_base compiles nothing)
    side_venv_warm "$VENV" "import torch, torch.onnx, transformers, onnx, onnxruntime, fastembed, huggingface_hub, \
llama_index.core, llama_index.embeddings.fastembed, qdrant_client, qdrant_edge; \
assert torch.__version__.startswith('2.13.0'), torch.__version__"
}
echo "fastembed: installing fastembed 0.9.1 into $VENV (once; a few minutes)"
side_venv_install fastembed "$VENV" "$stamp" install
