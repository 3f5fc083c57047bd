#!/usr/bin/env bash
# Throughput cost of --shadow-rate (docs/serving.md): the closed loop of scripts/loadtest.sh (8 clients, max
# batch 8, one plan, PLAN / REQUESTS from the environment) at shadow rates 0, 0.05, 0.2, interleaved, 3 repeats;
# prints req/s, TTFT and the shadow counters read from /metrics 8 s after each load.
set -euo pipefail
cd "$(dirname "$0")/.."
B=build/vispco; PLAN=${PLAN:-divprune:layer=0,keep=64}; REQUESTS=${REQUESTS:-96}
for rep in 1 2 3; do for rate in 0 0.05 0.2; do
  pf=$(mktemp); rm -f "$pf"
  $B serve --model models/synthvqa-small --port 0 --port-file "$pf" --threads 1 --max-batch 8 --batch-window-ms 10 \
    --max-queue 256 --shadow-rate "$rate" 2> /dev/null &
  pid=$!
  for _ in $(seq 600); do [ -s "$pf" ] && break; sleep 0.1; done
  port=$(cat "$pf")
  $B loadtest --port "$port" --image data/samples/images/000000.png --prompt "What color is the cross?" --plan "$PLAN" \
    --clients 8 --requests 8 --max-tokens 8 --json > /dev/null
  r=$($B loadtest --port "$port" --image data/samples/images/000000.png --prompt "What color is the cross?" --plan "$PLAN" \
    --clients 8 --requests "$REQUESTS" --max-tokens 8 --json | jq -r '"\(.requests_per_s*100|round/100) req/s, TTFT P50/P99 \(.ttft_ms.p50|round)/\(.ttft_ms.p99|round) ms, failed \(.failed)"')
  sleep 8  # let queued shadow work run
  m=$(curl -s "http://127.0.0.1:$port/metrics" | grep -E '^vispco_shadow_(requests|samples|lost)_total' | sed 's/{[^}]*}//' | awk '{printf "%s=%s ", $1, $2}')
  echo "rep $rep rate $rate: $r; $m"
  kill -TERM "$pid"; wait "$pid" || true; rm -f "$pf"
done; done
