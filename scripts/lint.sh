#!/usr/bin/env bash
# Lint and format check with ruff (installed by scripts/setup.sh as part of the dev extra).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
ruff check .
ruff format --check .
