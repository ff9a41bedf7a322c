#!/usr/bin/env bash
# LlamaIndex's own QdrantVectorStore tests, run twice: on qdrant-client's local mode (as upstream runs them), then on
# EdgeQdrantClient (tests/upstream/edge_plugin.py gives upstream's fixtures Edge clients instead of ":memory:" ones).
#
#   scripts/upstream_qdrant_tests.sh TESTS_DIR [pytest options...]
#
# TESTS_DIR: llama-index-integrations/vector_stores/llama-index-vector-stores-qdrant/tests of run-llama/llama_index,
# extracted outside this repository (its code is never committed here). Exit status: nonzero if either run failed.
set -uo pipefail

if [[ $# -lt 1 || ! -d "$1" ]]; then
  echo "usage: $0 TESTS_DIR [pytest options...]" >&2
  exit 2
fi
tests_dir=$(cd "$1" && pwd)
shift
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
case "$tests_dir/" in
  "$repo"/*) echo "keep upstream's tests outside the repository ($repo)" >&2; exit 2 ;;
esac

cd "$repo" || exit 2
[[ -f .venv/bin/activate ]] || bash scripts/setup.sh || exit 2
. .venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
# upstream's folder is the root: none of this repository's pytest settings apply to its tests
common=(-q -rfEs -p no:cacheprovider --rootdir "$tests_dir" -c /dev/null -o asyncio_mode=strict)

echo "== LlamaIndex's QdrantVectorStore tests on qdrant-client local mode"
python -m pytest "$tests_dir" "${common[@]}" "$@"
local_status=$?

echo
echo "== the same tests on EdgeQdrantClient"
python -m pytest "$tests_dir" "${common[@]}" -p tests.upstream.edge_plugin "$@"
edge_status=$?

echo
echo "local mode: exit $local_status; Edge: exit $edge_status"
[[ $local_status -eq 0 && $edge_status -eq 0 ]]
