#!/usr/bin/env bash
# The main job on the bundled high-resolution model (models/synthvqa-hr: LLaVA-NeXT structure, 1,200–2,900
# visual tokens an image; issue 63): installs, builds, chooses pruning plans with `vispco optimize` on
# SynthVQA-HR's calibration split and proves them on its test split, under the same promise as scripts/demo.sh
# (scripts/lib/demo.sh says what each step does):
#   1. grid: FastV (ℓ = 2), DivPrune and VisionZip (ℓ = 0) at keep ratios KEEPS of each image's own N_v (the
#      base view alone, `base_view:keep=576`, is the model card's baseline: a ratio of N_v would exceed its 576);
#   2. min-K at ε (relative; EPSILON, default 0.05) for FastV and for the best pre-LLM template of the grid,
#      searched over the keep ratio in ‰ (K_MIN–K_MAX ‰ in steps of K_STEP ‰);
#   3. each chosen plan on the test split: retention, FLOPs ratio, measured prefill speedup, per family.
# Results under out/demo-hr/ (one resumable SQLite store). Knobs as scripts/demo.sh: N_CALIB (default 210 of
# the 500 hr-calib samples, 30 a family — the fewest for which a family's own loss is checked; an unpruned HR
# sample costs ≈ 0.7 s of bf16 prefill on a 2-core AMX Xeon, ≈ 27× a SynthVQA one, so the defaults are sized
# for ≈ 25 min on 2 cores after the build), N_TEST (default 210), EPSILON, CONFIDENCE (0.9), EPSILON_FAMILY
# (0.35), KEEPS, K_MIN, K_MAX, K_STEP, THREADS (0 = all cores).
set -euo pipefail
cd "$(dirname "$0")/.."
N_CALIB=${N_CALIB:-210}
N_TEST=${N_TEST:-210}
KEEPS=${KEEPS:-50%,25%,11%,5%,2%}
K_MIN=${K_MIN:-20}
K_MAX=${K_MAX:-500}
K_STEP=${K_STEP:-20}
MODEL=models/synthvqa-hr
CALIB_SPLIT=hr-calib
TEST_SPLIT=hr-test
OUT=out/demo-hr
BATCH=4
TEMPLATES="fastv:layer=2;divprune:layer=0;visionzip:layer=0"
MIN_K_TEMPLATE="fastv:layer=2"
FALLBACK_BEST="divprune:layer=0"
K_FLAGS="--k-min $K_MIN --k-max $K_MAX --k-step $K_STEP"
HEATMAP_IMAGE=out/synthvqa-hr-test/images/000017.png  # a 336×672 hr-test scene (1,776 visual tokens), made by run_demo
HEATMAP_PROMPT="What color is the tiny triangle?"
HEATMAP_PLANS="fastv:layer=2,keep=11%;divprune:layer=0,keep=11%"
source scripts/lib/demo.sh
run_demo
