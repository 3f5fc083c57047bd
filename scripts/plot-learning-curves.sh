#!/usr/bin/env bash
# Draws the held-out learning curves of a training run: per-family greedy accuracy on unseen scenes against the
# decoder step, from <run>/probe.jsonl (written when the recipe sets probe_every; a step probed twice, after a
# resume, keeps its last line). With TOWER_OUT.png also the tower's curves: foreground accuracy of each patch
# head on held-out images against the tower step, from <run>/tower_probe.jsonl.
# Usage: scripts/plot-learning-curves.sh RUN_DIR OUT.png [TOWER_OUT.png]
set -euo pipefail
RUN=$1
OUT=$2
TOWER_OUT=${3:-}
[ -s "$RUN/probe.jsonl" ] || { echo "error: $RUN/probe.jsonl is missing or empty (set probe_every in the recipe)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
families=$(jq -rs '.[0].accuracy | keys | join(" ")' "$RUN/probe.jsonl")
# One row per decoder step (last line wins): step, overall, then each family in key order.
jq -rs 'group_by(.decoder_step) | map(last) | .[] |
        [.decoder_step, .overall] + (.accuracy | to_entries | sort_by(.key) | map(.value)) | @tsv' \
  "$RUN/probe.jsonl" > "$tmp/curves.tsv"
{
  echo "set terminal pngcairo size 1000,600 noenhanced font ',10'"
  echo "set output '$OUT'"
  echo "set title 'held-out accuracy per family (greedy, all visual tokens) — $(basename "$RUN")'"
  echo "set xlabel 'decoder step (all decoder stages)'; set ylabel 'accuracy'; set yrange [0:1.02]; set grid"
  echo "set key outside right"
  printf "plot '%s' using 1:2 with linespoints lw 3 title 'all'" "$tmp/curves.tsv"
  col=3
  for f in $families; do
    printf ", '' using 1:%d with linespoints title '%s'" "$col" "$f"
    col=$((col + 1))
  done
  echo
} > "$tmp/plot.gp"
gnuplot "$tmp/plot.gp"
echo "wrote $OUT"
[ -n "$TOWER_OUT" ] || exit 0
[ -s "$RUN/tower_probe.jsonl" ] || { echo "error: $RUN/tower_probe.jsonl is missing or empty" >&2; exit 2; }
heads="colour shape size centre char ink"
jq -rs --arg heads "$heads" 'group_by(.step) | map(last) | .[] as $p |
        [$p.step] + ($heads | split(" ") | map($p[.].foreground_accuracy)) | @tsv' \
  "$RUN/tower_probe.jsonl" > "$tmp/tower.tsv"
{
  echo "set terminal pngcairo size 1000,600 noenhanced font ',10'"
  echo "set output '$TOWER_OUT'"
  echo "set title 'tower patch heads, foreground accuracy on 32 held-out images — $(basename "$RUN")'"
  echo "set xlabel 'tower step'; set ylabel 'foreground accuracy'; set yrange [0:1.02]; set grid"
  echo "set key outside right"
  col=2
  sep="plot '$tmp/tower.tsv'"
  for h in $heads; do
    printf "%s using 1:%d with linespoints title '%s'" "$sep" "$col" "$h"
    sep=", ''"
    col=$((col + 1))
  done
  echo
} > "$tmp/tower.gp"
gnuplot "$tmp/tower.gp"
echo "wrote $TOWER_OUT"
