#!/usr/bin/env bash
# The OpenAI-compatible embedding server of the integration tests: infinity-emb 0.0.78, in a virtual environment of
# its own (it pins transformers 4 and sentence-transformers 3, which clash with this package's 5 and 6).
#
#   bash scripts/embedding_server.sh            # install it once (idempotent: a finished install is kept)
#   bash scripts/embedding_server.sh --path     # print the folder of its virtual environment
#
# The environment lives outside the clone, in ${POSFAIR_SERVER_VENV:-$HOME/.cache/posfair-infinity/venv}, so that a
# fresh clone (CI) finds it installed. torch 2.13.0 goes in first, from the local CPU wheel: left to resolve plain
# `torch`, pip would pull a CUDA build of several GB. A finished install leaves the file .posfair-installed in the
# folder; the tests use the server only where it is (integration_tests/embedding_server.py), and skip with the
# reason otherwise. When the install fails (no network, a version gone) this script says so and exits 0: the rest of
# CI runs, and the server's tests skip.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${POSFAIR_SERVER_VENV:-$HOME/.cache/posfair-infinity/venv}"
MARKER="$VENV/.posfair-installed"
if [ "${1:-}" = "--path" ]; then
    echo "$VENV"
    exit 0
fi
if [ -f "$MARKER" ] && [ -x "$VENV/bin/infinity_emb" ]; then
    echo "embedding server: infinity-emb found in $VENV"
    exit 0
fi
PYTHON="${PYTHON:-python3}"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
install() {
    rm -rf "$VENV"
    mkdir -p "$(dirname "$VENV")"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    "$VENV/bin/python" -m pip install --quiet torch==2.13.0
    "$VENV/bin/python" -m pip install --quiet -c scripts/embedding_server_constraints.txt torch==2.13.0 \
        "infinity-emb[server,torch]==0.0.78"
    "$VENV/bin/python" -c "import torch, infinity_emb; assert torch.__version__.startswith('2.13.0')"
}
echo "embedding server: installing infinity-emb 0.0.78 into $VENV (once; a few minutes)"
if (install) > "$log" 2>&1; then
    touch "$MARKER"
    echo "embedding server: installed"
else
    grep -v "is ignored" "$log" | tail -5 >&2 || true
    rm -rf "$VENV"
    echo "embedding server SKIPPED: infinity-emb could not be installed (above); its tests will skip"
fi
