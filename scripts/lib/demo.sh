# Sourced by scripts/demo.sh (the bundled SynthVQA model) and scripts/demo-hr.sh (the bundled high-resolution
# model): installs, builds the CLI, then chooses pruning plans with `vispco optimize` and proves them on a test
# split:
#   1. grid: the TEMPLATES at every K of KEEPS on the calibration split → empirical Pareto frontier of accuracy
#      vs LLM FLOPs ratio;
#   2. min-K at ε for MIN_K_TEMPLATE (the text-guided FastV) and for the best pre-LLM template of the grid
#      (binary search); the grid's chosen plan is its cheapest plan meeting the same constraints;
#   3. each chosen plan on the test split: retention, FLOPs ratio, measured prefill speedup, per family; report
#      (optimize.json, optimize.md) and gnuplot plots per search under OUT.
# The promise (issue 46): a plan is accepted only when the upper CONFIDENCE bound on its paired accuracy loss is
# within ε, every family keeps its loss within EPSILON_FAMILY of its own unpruned accuracy (Bonferroni-joint
# bounds at the same level) and its measured prefill is faster than unpruned.
# All evaluations share one SQLite result store (OUT/results.sqlite): a second run, or a run after a kill,
# re-uses every finished sample.
# The caller sets MODEL, CALIB_SPLIT, TEST_SPLIT (SynthVQA split names), TEMPLATES (';'-separated), KEEPS,
# MIN_K_TEMPLATE, FALLBACK_BEST, OUT, BATCH, K_FLAGS (the min-K search's K range flags), HEATMAP_IMAGE,
# HEATMAP_PROMPT, HEATMAP_PLANS (';'-separated), N_CALIB and N_TEST; the knobs both jobs share default here:
# EPSILON (0.05), CONFIDENCE (0.9), EPSILON_FAMILY (0.35), THREADS (0 = all cores).
run_demo() {
  : "${EPSILON:=0.05}" "${CONFIDENCE:=0.9}" "${EPSILON_FAMILY:=0.35}" "${THREADS:=0}"
  bash scripts/install-deps.sh
  TARGETS=vispco bash scripts/build.sh >/dev/null  # the CLI only, not the test suite
  local B=build/vispco
  mkdir -p "$OUT"
  [ -f "$MODEL/config.json" ] || { echo "error: no bundled model in $MODEL (see README: how it is trained)" >&2; exit 1; }
  for split in "$CALIB_SPLIT" "$TEST_SPLIT"; do
    [ -f "out/synthvqa-$split/manifest.json" ] || $B data synth --split "$split" --out "out/synthvqa-$split"
  done
  local common=(--model "$MODEL" --calib "out/synthvqa-$CALIB_SPLIT" --test "out/synthvqa-$TEST_SPLIT"
    --limit-calib "$N_CALIB" --limit-test "$N_TEST" --epsilon "$EPSILON" --confidence "$CONFIDENCE"
    --epsilon-per-family "$EPSILON_FAMILY" --batch "$BATCH" --store "$OUT/results.sqlite" --threads "$THREADS")
  local start
  start=$(date +%s)

  echo "== grid: accuracy vs FLOPs frontier on $N_CALIB calibration samples, K in {$KEEPS}; ε = $EPSILON at" \
    "confidence $CONFIDENCE, per family $EPSILON_FAMILY, never slower than unpruned =="
  $B optimize --method grid "${common[@]}" --keep "$KEEPS" --template "$TEMPLATES" --out "$OUT/grid"
  local best
  best=$(grep -o '"best": *"[^"]*"' "$OUT/grid/optimize.json" | head -1 | sed 's/.*: *"\(.*\)"/\1/')
  [ -n "$best" ] || best="$FALLBACK_BEST"
  echo "best pre-LLM template on the grid: $best"

  local tmpl name
  for tmpl in "$MIN_K_TEMPLATE" "$best"; do
    name=$(echo "$tmpl" | sed 's/[^A-Za-z0-9]/_/g')  # a folder name: "divprune:layer=0,keep={P}%" → divprune_layer_0_keep____
    echo "== min-K at ε = $EPSILON (relative, confidence $CONFIDENCE, per family $EPSILON_FAMILY) for $tmpl =="
    # shellcheck disable=SC2086  # K_FLAGS is a list of flags
    $B optimize --method min-k "${common[@]}" --template "$tmpl" $K_FLAGS --out "$OUT/min-k-$name"
  done

  local plan
  IFS=';' read -ra plans <<<"$HEATMAP_PLANS"
  for plan in "${plans[@]}"; do
    name=$(echo "$plan" | cut -d: -f1)
    $B generate --model "$MODEL" --image "$HEATMAP_IMAGE" --prompt "$HEATMAP_PROMPT" --plan "$plan" \
      --threads "$THREADS" --heatmap "$OUT/heatmap-$name.png" >/dev/null
  done
  echo "reports: $OUT/{grid,min-k-*}/optimize.md, plots: $OUT/*/plots/*.png, heat-maps: $OUT/heatmap-*.png"
  echo "searches took $(($(date +%s) - start)) s"
}
