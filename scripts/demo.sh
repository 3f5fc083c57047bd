#!/usr/bin/env bash
# README's main job: installs, builds, then prunes the bundled SynthVQA model with each built-in method at
# K = 64 of 576 visual tokens, evaluates on a slice of the SynthVQA test split and prints accuracy, retention
# and measured prefill time next to the unpruned model. Results: out/demo/. A second run reads the result store.
# Options through the environment: N (test samples, default 200), K (kept tokens, default 64).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-200}
K=${K:-64}
bash scripts/install-deps.sh
bash scripts/build.sh >/dev/null
B=build/vispco
MODEL=models/synthvqa-small
OUT=out/demo
mkdir -p "$OUT"
if [ ! -f "$MODEL/config.json" ]; then
  # The bundled model is trained by `vispco train --recipe configs/synthvqa-small.json` (issue 4). Until it is
  # in the repo, run the same job on random weights of its architecture: token counts, FLOPs and timings are
  # real, accuracies are at chance.
  MODEL=out/random-synthvqa-small
  echo "note: models/synthvqa-small is not bundled yet; using random weights of its architecture ($MODEL)"
  [ -f "$MODEL/config.json" ] || $B init-random --config configs/synthvqa-small.json --dtype fp32 --out "$MODEL"
fi
[ -f out/synthvqa-test/manifest.json ] || $B data synth --split test --out out/synthvqa-test
STORE=$OUT/results.sqlite

plans=(none "fastv:layer=2,keep=$K" "pdrop:layers=2/4/6,ratio=0.5" "visionzip:layer=0,keep=$K"
       "divprune:layer=0,keep=$K" "pool:layer=0,keep=$K" "uniform:layer=0,keep=$K" "random:layer=0,keep=$K")
printf '%-36s %9s %9s %12s %10s\n' plan accuracy retention "prefill ms" "kept N_v"
base=""
for p in "${plans[@]}"; do
  name=$(echo "$p" | tr ':=,/+' '_____')
  json=$($B eval --model "$MODEL" --data out/synthvqa-test --limit "$N" --batch 8 --plan "$p" \
         --store "$STORE" --out "$OUT/$name" --json)
  acc=$(echo "$json" | grep -o '"overall":{[^}]*}' | grep -o '"accuracy":[0-9.e-]*' | head -1 | cut -d: -f2)
  pre=$(echo "$json" | grep -o '"mean_prefill_ms":[0-9.e-]*' | cut -d: -f2)
  kept=$(echo "$json" | grep -o '"mean_n_visual_kept":[0-9.e-]*' | cut -d: -f2)
  [ -z "$base" ] && base=$acc
  ret=$(awk -v a="$acc" -v b="$base" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "-" }')
  printf '%-36s %9.4f %9s %12.1f %10.1f\n' "$p" "$acc" "$ret" "$pre" "$kept"
done
$B generate --model "$MODEL" --image data/samples/images/000000.png --prompt "What color is the cross?" \
  --plan "fastv:layer=2,keep=$K" --heatmap "$OUT/heatmap-fastv.png"
$B generate --model "$MODEL" --image data/samples/images/000000.png --prompt "What color is the cross?" \
  --plan "visionzip:layer=0,keep=$K" --heatmap "$OUT/heatmap-visionzip.png"
echo "per-family tables: $OUT/*/summary.md; heat-maps: $OUT/heatmap-*.png"
