#!/usr/bin/env bash
# Writes <model>/README.md: docs/model-card-synthvqa-small.md with its placeholders filled from a training run
# folder — {{WALL_MIN}} (wall_seconds), {{TOWER_PROBE}} and {{TOWER_POSITION}} (tower_probe.json), {{EVAL_TABLE}} and {{EVAL_HEAD}}
# (eval-test/summary.md), {{SHUFFLED_TABLE}} (eval-test-shuffled/summary.md), {{RANDOM32_TABLE}}
# (eval-random32/summary.md: random pruning to K = 32), {{WEIGHTS_MB}} (size of the
# safetensors file), {{LIMITS}} (RUN/limits.md: the weak families with the measurements that show why, written
# by whoever ships the model; a placeholder line if absent).
# Usage: scripts/model-card.sh RUN_DIR MODEL_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=$1
MODEL=$2
for f in wall_seconds tower_probe.json eval-test/summary.md; do
  [ -f "$RUN/$f" ] || { echo "error: $RUN/$f is missing (a finished, evaluated training run folder is needed)" >&2; exit 2; }
done
ls "$MODEL"/model*.safetensors > /dev/null 2>&1 || { echo "error: no model*.safetensors in '$MODEL'" >&2; exit 2; }
wall=$(awk '{ printf "%.0f", $1 / 60 }' "$RUN/wall_seconds")
probe=$(jq -r 'to_entries[] | select(.value.foreground_accuracy != null) |
  "| \(.key) | \(.value.foreground_accuracy * 1000 | round / 10) | \(.value.foreground_patches) |"' "$RUN/tower_probe.json")
position=$(jq -r 'if .position then "Position head: mean absolute error \(.position.mean_abs_error_patches * 100 | round / 100) patches (the grid middle as a constant guess: 6.0)." else "" end' \
  "$RUN/tower_probe.json")
# The per-family table of an evaluation's summary.md ("(not measured)" when that evaluation was not run).
family_table() { sed -n '/^| family/,$p' "$RUN/$1/summary.md" 2>/dev/null || echo "(not measured)"; }
table=$(sed -n '/^| family/,$p' "$RUN/eval-test/summary.md")
shuffled=$(family_table eval-test-shuffled)
random32=$(family_table eval-random32)
limits=$(cat "$RUN/limits.md" 2>/dev/null || echo "(to be written from the per-family figures above)")
head=$(grep -E '^- (samples|per sample|model|dataset):' "$RUN/eval-test/summary.md")
mb=$(du -m --apparent-size "$MODEL"/model*.safetensors | awk '{ s += $1 } END { print s }')
awk -v wall="$wall" -v probe="$probe" -v position="$position" -v table="$table" -v shuffled="$shuffled" -v random32="$random32" -v limits="$limits" -v head="$head" -v mb="$mb" '
  { gsub(/\{\{WALL_MIN\}\}/, wall); gsub(/\{\{WEIGHTS_MB\}\}/, mb); gsub(/\{\{TOWER_POSITION\}\}/, position)
    if ($0 == "{{TOWER_PROBE}}") { print probe; next }
    if ($0 == "{{EVAL_TABLE}}") { print table; next }
    if ($0 == "{{SHUFFLED_TABLE}}") { print shuffled; next }
    if ($0 == "{{RANDOM32_TABLE}}") { print random32; next }
    if ($0 == "{{LIMITS}}") { print limits; next }
    if ($0 == "{{EVAL_HEAD}}") { print head; next }
    print }' docs/model-card-synthvqa-small.md > "$MODEL/README.md"
