#!/usr/bin/env bash
# Serving benchmark (docs/serving.md): starts `vispco serve` on the bundled model for each --max-batch, and
# for each plan runs `vispco loadtest` (CLIENTS concurrent streamed requests, REQUESTS in all) against it on
# loopback; prints one markdown row per (max batch, plan). Environment: MODEL, CLIENTS (8), REQUESTS (48),
# MAX_TOKENS (8), IGNORE_EOS (0; 1: every request decodes MAX_TOKENS tokens), THREADS (server intra-op
# threads, 1), BATCHES ("1 8"), CONTINUOUS (1; 0: --no-continuous-batching),
# PREFILL_TOKENS (auto; 0: no limit; --max-prefill-tokens), PLANS (see below), IMAGE, PROMPT,
# SHADOW_RATE (0; --shadow-rate: that share of the pruned requests is rerun unpruned in the background).
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${MODEL:-models/synthvqa-small}
CLIENTS=${CLIENTS:-8}
REQUESTS=${REQUESTS:-48}
MAX_TOKENS=${MAX_TOKENS:-8}
THREADS=${THREADS:-1}
BATCHES=${BATCHES:-"1 8"}
PLANS=${PLANS:-"none fastv:layer=2,keep=64 divprune:layer=0,keep=64"}
IGNORE_EOS=${IGNORE_EOS:-0}
CONTINUOUS=${CONTINUOUS:-1}
serve_flags=()
[ "$CONTINUOUS" = 0 ] && serve_flags=(--no-continuous-batching)
serve_flags+=(--max-prefill-tokens "${PREFILL_TOKENS:-auto}" --shadow-rate "${SHADOW_RATE:-0}")
extra=()
[ "$IGNORE_EOS" = 1 ] && extra=(--ignore-eos)
IMAGE=${IMAGE:-data/samples/images/000000.png}
PROMPT=${PROMPT:-"What color is the cross?"}
B=build/vispco
[ -x "$B" ] || TARGETS=vispco bash scripts/build.sh > /dev/null
grep -o 'avx512_bf16\|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ' | sed 's/^/CPU features: /'; echo
echo "| max batch | plan | req/s | tok/s | TTFT P50 / P99 ms | latency P50 / P99 ms | mean prefill / decode batch | server peak RSS MB | failed |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|"
for mb in $BATCHES; do
  port_file=$(mktemp)
  rm -f "$port_file"
  $B serve --model "$MODEL" --port 0 --port-file "$port_file" --threads "$THREADS" --max-batch "$mb" \
    --batch-window-ms 10 --max-queue 256 "${serve_flags[@]}" 2> /tmp/vispco-loadtest-serve.log &
  pid=$!
  for _ in $(seq 600); do [ -s "$port_file" ] && break; sleep 0.1; done
  port=$(cat "$port_file")
  for plan in $PLANS; do
    $B loadtest --port "$port" --image "$IMAGE" --prompt "$PROMPT" --plan "$plan" --clients "$CLIENTS" \
      --requests 8 --max-tokens "$MAX_TOKENS" "${extra[@]}" --json > /dev/null  # warm-up
    $B loadtest --port "$port" --image "$IMAGE" --prompt "$PROMPT" --plan "$plan" --clients "$CLIENTS" \
      --requests "$REQUESTS" --max-tokens "$MAX_TOKENS" "${extra[@]}" --json |
      jq -r --arg mb "$mb" '"| \($mb) | `\(.plan)` | \(.requests_per_s*100|round/100) | \(.generated_tokens_per_s*10|round/10) | \(.ttft_ms.p50|round) / \(.ttft_ms.p99|round) | \(.latency_ms.p50|round) / \(.latency_ms.p99|round) | \(.mean_batch_size*100|round/100) / \(.mean_decode_batch*100|round/100) | \(.server_peak_rss_mb|round) | \(.failed) |"'
  done
  kill -TERM "$pid"
  wait "$pid"
  rm -f "$port_file"
done
