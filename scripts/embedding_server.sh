#!/usr/bin/env bash
# The OpenAI-compatible embedding server of the integration tests: infinity-emb 0.0.78, in a virtual environment of
# its own (it pins transformers 4 and sentence-transformers 3, which clash with this package's 5 and 6).
#
#   bash scripts/embedding_server.sh            # install it once (idempotent: a finished install is kept)
#   bash scripts/embedding_server.sh --path     # print the folder of its virtual environment
#
# The environment lives outside the clone, in ${POSFAIR_SERVER_VENV:-$HOME/.cache/posfair-infinity/venv}, so that a
# fresh clone (CI) finds it installed (scripts/side_venv.sh: the marker, torch first, a failed install skipped). The
# tests use the server only where the marker is (integration_tests/embedding_server.py), and skip with the reason
# otherwise; a failed install exits 0, so the rest of CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/side_venv.sh
VENV="${POSFAIR_SERVER_VENV:-$HOME/.cache/posfair-infinity/venv}"
if [ "${1:-}" = "--path" ]; then
    echo "$VENV"
    exit 0
fi
stamp="$(side_venv_stamp scripts/embedding_server_constraints.txt scripts/side_venv.sh)"
if side_venv_current "$VENV" "$stamp" && [ -x "$VENV/bin/infinity_emb" ]; then
    echo "embedding server: infinity-emb found in $VENV"
    exit 0
fi
install() {
    side_venv_base "$VENV"
    venv_install -c scripts/embedding_server_constraints.txt torch==2.13.0 "infinity-emb[server,torch]==0.0.78"
    # the check imports what the server's process will, and writes its bytecode (side_venv_base compiles nothing)
    side_venv_warm "$VENV" "import torch, infinity_emb.cli, infinity_emb.infinity_server, uvicorn, fastapi, \
infinity_emb.transformer.embedder.sentence_transformer; assert torch.__version__.startswith('2.13.0')"
}
echo "embedding server: installing infinity-emb 0.0.78 into $VENV (once; a few minutes)"
side_venv_install "embedding server" "$VENV" "$stamp" install
