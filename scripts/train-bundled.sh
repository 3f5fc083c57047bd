#!/usr/bin/env bash
# Reproduces the bundled model models/synthvqa-small in one command: installs, builds, trains
# configs/synthvqa-small.json (resumable: run it again after an interrupt and it continues from the last
# checkpoint), exports bf16 safetensors, evaluates the export on the SynthVQA test split (real images, shuffled
# images, random pruning to K = 32) and writes the model
# card (README.md in the model folder) from docs/model-card-synthvqa-small.md with the measured figures.
# Environment: RECIPE (default configs/synthvqa-small.json), RUN (run folder, default out/train-synthvqa-small;
# keep it outside the checkout for long runs), MODEL (default models/synthvqa-small),
# EVAL_N (test samples for the card, default 2000 = the whole split), THREADS (intra-op threads; default 0 = all
# cores; use 1 on a machine shared with other work, where OpenMP threads spin).
set -euo pipefail
cd "$(dirname "$0")/.."
RECIPE=${RECIPE:-configs/synthvqa-small.json}
RUN=${RUN:-out/train-synthvqa-small}
MODEL=${MODEL:-models/synthvqa-small}
EVAL_N=${EVAL_N:-2000}
THREADS=${THREADS:-0}
source scripts/lib/training.sh
B=build/vispco
run_training "$RUN" $B train --recipe "$RECIPE" --out "$RUN" --export "$MODEL" --threads "$THREADS"
[ -f "$MODEL/config.json" ] || { echo "error: training did not finish; rerun to resume" >&2; exit 1; }
[ -f out/synthvqa-test/manifest.json ] || $B data synth --split test --out out/synthvqa-test
$B eval --model "$MODEL" --data out/synthvqa-test --limit "$EVAL_N" --batch 8 --out "$RUN/eval-test" \
  --store "$RUN/eval-test.sqlite" --threads "$THREADS" >/dev/null
$B eval --model "$MODEL" --data out/synthvqa-test --limit "$EVAL_N" --batch 8 --out "$RUN/eval-test-shuffled" \
  --store "$RUN/eval-test.sqlite" --threads "$THREADS" --shuffle-images 1 >/dev/null
$B eval --model "$MODEL" --data out/synthvqa-test --limit "$EVAL_N" --batch 8 --out "$RUN/eval-random32" \
  --store "$RUN/eval-test.sqlite" --threads "$THREADS" --plan random:layer=0,keep=32 >/dev/null
tower_png=()
[ -s "$RUN/tower_probe.jsonl" ] && tower_png=("$MODEL/tower_curves.png")
[ -s "$RUN/probe.jsonl" ] && bash scripts/plot-learning-curves.sh "$RUN" "$MODEL/learning_curves.png" "${tower_png[@]}"
bash scripts/model-card.sh "$RUN" "$MODEL"
echo "model card: $MODEL/README.md"
