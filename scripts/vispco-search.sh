#!/usr/bin/env bash
# VisPCO search (issue 8) on a model with both kernels — multistep and the release's single step — evaluated on
# the SynthVQA test split at budgets 0.1–0.5, each curve drawn over the grid frontier of `vispco optimize` when
# there is one. Writes OUT/<kernel>/{predictor.{pt,json}, train_log.jsonl, curve.{json,csv,gp,png}, summary.md}
# and OUT/<kernel>.log (training progress), then prints both summaries (per budget: accuracy, FLOPs ratio,
# achieved budget, plans; accuracy per family; search wall time next to the grid's).
# Usage:
#   bash scripts/vispco-search.sh MODEL_DIR OUT_DIR [extra vispco-search flags…]
# Environment: VISPCO (binary, default build/vispco); TEST_DATA (default out/synthvqa-test, the demo's, generated
# when missing); N_TEST (test samples evaluated per budget, default 200 as in scripts/demo.sh; 0 = all 2000);
# GRID_FRONTIER (optimize.json of `vispco optimize --method grid` or a CSV "flops_ratio,accuracy"; default
# out/demo/grid/optimize.json when it exists); TRAIN_FLAGS (training size, default sized for the 2-core machine:
# "--n-train 64 --n-val 16 --batch 2 --epochs 15", about 9 min per kernel on the bundled model at one thread).
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:?usage: vispco-search.sh MODEL_DIR OUT_DIR [flags]}
out=${2:?usage: vispco-search.sh MODEL_DIR OUT_DIR [flags]}
shift 2
bin=${VISPCO:-build/vispco}
data=${TEST_DATA:-out/synthvqa-test}
n_test=${N_TEST:-200}
grid=${GRID_FRONTIER:-}
read -r -a train_flags <<< "${TRAIN_FLAGS:---n-train 64 --n-val 16 --batch 2 --epochs 15}"
[ -z "$grid" ] && [ -f out/demo/grid/optimize.json ] && grid=out/demo/grid/optimize.json
mkdir -p "$out"
[ -f "$data/data.jsonl" ] || "$bin" data synth --split test --out "$data"
frontier=()
[ -n "$grid" ] && frontier=(--grid-frontier "$grid")
for kernel in multistep step; do
  start=$SECONDS
  "$bin" vispco-search --model "$model" --data "$data" --out "$out/$kernel" --kernel "$kernel" \
    --budgets 0.1,0.2,0.3,0.4,0.5 --eval-limit "$n_test" "${train_flags[@]}" "${frontier[@]}" "$@" > /dev/null 2> "$out/$kernel.log" ||
    { tail -5 "$out/$kernel.log" >&2; exit 1; }
  echo "$kernel: $(grep -c '^epoch' "$out/$kernel.log") epochs, wall $((SECONDS - start)) s (log: $out/$kernel.log)"
done
for kernel in multistep step; do echo; cat "$out/$kernel/summary.md"; done
