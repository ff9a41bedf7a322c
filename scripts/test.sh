#!/usr/bin/env bash
# Set up (idempotent) and run the whole test suite offline.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# one worker per core (two on the CI machine); POSFAIR_TEST_WORKERS=0 runs the suite in this process. Files go to the
# workers in the order conftest.py gives (the heavy ones first), not by their number of tests
python -m pytest -n "${POSFAIR_TEST_WORKERS:-$(nproc)}" --dist loadgroup --no-loadscope-reorder "$@"
