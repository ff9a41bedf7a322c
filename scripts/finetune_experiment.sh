#!/usr/bin/env bash
# The fine-tuning experiment of docs/RESULTS.md §10: seven arms on all-MiniLM-L6-v2, each evaluated plain and
# calibrated on held-out SQuAD-LongPosQ, a fixed SciFact subset and the evidence-moving cosine.
#
#   MODELS=/tmp/posfair-models CACHE=/tmp/posfair-cache bash scripts/finetune_experiment.sh [train|eval|all]
#
# Every arm trains on the same (question, evidence) pairs (same seed and size; only the slot of the evidence,
# or the prefix, changes). Budget on 2 CPU cores: 2,400 pairs, batch 16, one epoch (150 steps), documents of
# 450 tokens, as long as the evaluation's (a 256-token trial left late evidence unseen); check the time of
# the first arm on a quiet machine against the 15-minute budget and lower --examples if needed.
# Results go to docs/results/finetune/<arm>/. Vectors are cached by fingerprint in $CACHE.
set -euo pipefail
cd "$(dirname "$0")/.."
. .venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
MODELS=${MODELS:-/tmp/posfair-models}
CACHE=${CACHE:-/tmp/posfair-cache}
OUT=docs/results/finetune
STAGE=${1:-all}
TRAIN=(--examples 2400 --batch-size 16 --epochs 1 --token-budget 450 --max-length 460 --learning-rate 5e-5 --seed 0 --cpu)
# arm name, setup, dump tokens
ARMS=("cls-begin begin 0" "cls-uniform uniform 0" "cls-end end 0" "cls-begin-dump4 begin 4" "cls-uniform-dump4 uniform 4")
EVAL=(--split heldout --scifact-sample 700 --cache-dir "$CACHE" --bootstrap 1000)

train() {
  for arm in "${ARMS[@]}"; do
    read -r name setup dumps <<<"$arm"
    if [ -f "$MODELS/$name/posfair_training.json" ]; then echo "$name: trained already"; continue; fi
    /usr/bin/time -f "$name trained in %e s" posfair finetune --pooling cls --setup "$setup" --dump-tokens "$dumps" \
      --out "$MODELS/$name" --overwrite "${TRAIN[@]}"
  done
}

evaluate_arm() {  # name, model, pooling option
  local name=$1 model=$2 pooling=${3:-}
  posfair eval --model "$model" $pooling --benchmark squad,scifact --configs plain,default,custom --strength 0.85 \
    "${EVAL[@]}" --out "$OUT/$name"
  posfair diagnose --model "$model" $pooling --evidence-moving 50 --split heldout --strength 0.85 --out "$OUT/$name"
}

evaluate() {
  evaluate_arm base-mean offline:all-MiniLM-L6-v2
  evaluate_arm base-first offline:all-MiniLM-L6-v2 "--pooling first"
  for arm in "${ARMS[@]}"; do
    read -r name _ _ <<<"$arm"
    evaluate_arm "$name" "$MODELS/$name"
  done
}

case "$STAGE" in
  train) train ;;
  eval) evaluate ;;
  all) train; evaluate ;;
  *) echo "usage: $0 [train|eval|all]" >&2; exit 2 ;;
esac
