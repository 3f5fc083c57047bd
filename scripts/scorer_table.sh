#!/usr/bin/env bash
# Generates docs/scorers.md (and docs/scorers.json): every pruning scorer at K ∈ {192, 128, 64, 32} on the
# bundled model and the SynthVQA test split, accuracy and retention overall and per family, FLOPs and TTFT
# (`vispco scorer-table`, resumable through out/scorer-table/results.sqlite). Trains the learned gate first
# when the model folder has none (`vispco train-gate`, SynthVQA training seed 20250601).
# Environment: MODEL (default models/synthvqa-small), LIMIT (0 = all 2000 test samples), BATCH (8),
#   OUT (docs/scorers.md), STORE (out/scorer-table/results.sqlite), GATE_STEPS (300), THREADS (0 = all),
#   BANNER (a bold line at the top of the document: set it for any model but the trained one).
# Example on random weights (proves the pipeline; accuracies at chance, so never commit it unlabelled):
#   build/vispco init-random --config configs/synthvqa-small.json --dtype fp32 --out out/random-synthvqa-small
#   MODEL=out/random-synthvqa-small LIMIT=16 OUT=out/scorers-random.md \
#     BANNER="random weights: accuracies are at chance" bash scripts/scorer_table.sh
set -euo pipefail
cd "$(dirname "$0")/.."
B=${VISPCO:-build/vispco}
MODEL=${MODEL:-models/synthvqa-small}
LIMIT=${LIMIT:-0}
BATCH=${BATCH:-8}
OUT=${OUT:-docs/scorers.md}
STORE=${STORE:-out/scorer-table/results.sqlite}
GATE_STEPS=${GATE_STEPS:-300}
THREADS=${THREADS:-0}
BANNER=${BANNER:-}

[ -x "$B" ] || bash scripts/build.sh
if [ ! -f "$MODEL/config.json" ]; then
  echo "error: no model folder '$MODEL' (the bundled model is not shipped yet: see README, or set MODEL=…)" >&2
  exit 2
fi
[ -f out/synthvqa-test/data.jsonl ] || "$B" data synth --split test --out out/synthvqa-test
[ -f "$MODEL/gate.safetensors" ] || "$B" train-gate --model "$MODEL" --steps "$GATE_STEPS" --threads "$THREADS"
args=(scorer-table --model "$MODEL" --data out/synthvqa-test --limit "$LIMIT" --batch "$BATCH" --out "$OUT"
      --store "$STORE" --threads "$THREADS")
[ -n "$BANNER" ] && args+=(--banner "$BANNER")
"$B" "${args[@]}"
