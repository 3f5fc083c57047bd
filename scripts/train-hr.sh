#!/usr/bin/env bash
# Reproduces the bundled high-resolution model models/synthvqa-hr (issue 48) in one command: installs, builds,
# trains configs/hr/synthvqa-hr.json from models/synthvqa-small (resumable: run it again after an interrupt and it
# continues from the last checkpoint), exports bf16 safetensors and evaluates the export on the SynthVQA-HR
# test split (real images with every visual token and with the base view alone, and shuffled images).
# Environment: RECIPE (default configs/hr/synthvqa-hr.json), RUN (run folder, default out/train-synthvqa-hr; keep
# it outside the checkout for long runs), MODEL (default models/synthvqa-hr), EVAL_N (test samples, default
# 2000 = the whole split), THREADS (intra-op threads; default 0 = all cores).
set -euo pipefail
cd "$(dirname "$0")/.."
RECIPE=${RECIPE:-configs/hr/synthvqa-hr.json}
RUN=${RUN:-out/train-synthvqa-hr}
MODEL=${MODEL:-models/synthvqa-hr}
EVAL_N=${EVAL_N:-2000}
THREADS=${THREADS:-0}
source scripts/lib/training.sh
B=build/vispco
run_training "$RUN" $B train-hr --recipe "$RECIPE" --base models/synthvqa-small --out "$RUN" --export "$MODEL" \
  --threads "$THREADS"
[ -f "$MODEL/config.json" ] || { echo "error: training did not finish; rerun to resume" >&2; exit 1; }
[ -f out/synthvqa-hr-test/manifest.json ] || $B data synth --split hr-test --out out/synthvqa-hr-test
$B eval --model "$MODEL" --data out/synthvqa-hr-test --limit "$EVAL_N" --batch 4 --out "$RUN/eval-hr-test" \
  --store "$RUN/eval-hr-test.sqlite" --threads "$THREADS" >/dev/null
$B eval --model "$MODEL" --data out/synthvqa-hr-test --limit "$EVAL_N" --batch 4 --plan base_view:keep=576 \
  --out "$RUN/eval-hr-test-base-view" --store "$RUN/eval-hr-test.sqlite" --threads "$THREADS" >/dev/null
$B eval --model "$MODEL" --data out/synthvqa-hr-test --limit "$EVAL_N" --batch 4 \
  --out "$RUN/eval-hr-test-shuffled" --store "$RUN/eval-hr-test.sqlite" --threads "$THREADS" \
  --shuffle-images 1 >/dev/null
cat "$RUN/eval-hr-test/summary.md"
