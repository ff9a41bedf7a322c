#!/usr/bin/env bash
# Set up (idempotent), ingest examples/docs into an embedded Qdrant folder, query it and audit it, offline.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
QDRANT_DIR="${QDRANT_DIR:-./posfair_qdrant}"
posfair ingest examples/docs --collection demo --qdrant-path "$QDRANT_DIR"
posfair query "Where does the Danube end?" --collection demo --qdrant-path "$QDRANT_DIR" -k 3
posfair query "Who showed how hieroglyphs work?" --collection demo --qdrant-path "$QDRANT_DIR" -k 3
posfair collections --qdrant-path "$QDRANT_DIR"
# the label-free position audit of the collection just written (about a minute on 2 cores)
posfair audit --collection demo --qdrant-path "$QDRANT_DIR" --strengths 0.5,1 --recommend --out ./posfair_audit
