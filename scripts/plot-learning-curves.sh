#!/usr/bin/env bash
# Draws the held-out learning curves of a training run: per-family greedy accuracy on unseen scenes against the
# decoder step, from <run>/probe.jsonl (written when the recipe sets probe_every; a step probed twice, after a
# resume, keeps its last line). Usage: scripts/plot-learning-curves.sh RUN_DIR OUT.png
set -euo pipefail
RUN=$1
OUT=$2
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
