#!/usr/bin/env bash
# Hostile-load benchmark (issue 45's acceptance; docs/serving.md): starts `vispco serve` on the bundled model
# on a free loopback port and runs `vispco hostile-load` twice, each time against a fresh server: (a) the
# normal clients alone, (b) the same normal load beside the attack classes; then prints one markdown table:
# the normal clients' ok/failed, latency, req/s, /health probes, the server's peak RSS (VmHWM), and per attack
# what was sent and how the server answered. Loopback only; every loop stops by count and by time (about
# 1-2 min in all). Environment: MODEL, PLAN (the server's --plan; divprune:keep=64 as in README's example,
# the plan the plan-spelling attack spells), IMAGE, PROMPT, CLIENTS (4), MAX_TOKENS (8), ATTACK_SECONDS (20),
# ATTACK_RATE (8/s), ATTACKERS (16), ATTACKS (all; names or issue items, `vispco hostile-load --help`),
# THREADS (server intra-op threads, 1), SERVE_FLAGS (more `vispco serve` options), HOSTILE_FLAGS (more
# hostile-load options, e.g. "--huge-side 16384"), RSS_BOUND_MB (the peak-RSS bound docs/serving.md derives
# from the options; 0: not judged), RSS_KILL_MB (8192: safety valve, a server whose RSS passes it is killed
# so that an unprotected server cannot take the machine down; the table says so), OUT (raw JSON, server
# logs and the table; default a temporary folder).
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${MODEL:-models/synthvqa-small}
PLAN=${PLAN:-divprune:keep=64}
IMAGE=${IMAGE:-data/samples/images/000000.png}
PROMPT=${PROMPT:-"What color is the cross?"}
CLIENTS=${CLIENTS:-4}
MAX_TOKENS=${MAX_TOKENS:-8}
ATTACK_SECONDS=${ATTACK_SECONDS:-20}
ATTACK_RATE=${ATTACK_RATE:-8}
ATTACKERS=${ATTACKERS:-16}
ATTACKS=${ATTACKS:-all}
THREADS=${THREADS:-1}
RSS_BOUND_MB=${RSS_BOUND_MB:-0}
RSS_KILL_MB=${RSS_KILL_MB:-8192}
OUT=${OUT:-$(mktemp -d /tmp/vispco-hostile-XXXXXX)}
mkdir -p "$OUT"
read -r -a serve_flags <<< "${SERVE_FLAGS:-}"
read -r -a hostile_flags <<< "${HOSTILE_FLAGS:-}"
B=build/vispco
[ -x "$B" ] || TARGETS=vispco bash scripts/build.sh > /dev/null

pid= watchdog=
stop_server() {
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2> /dev/null || true
  for _ in $(seq 300); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done  # graceful: 30 s at most
  kill -KILL "$pid" 2> /dev/null || true
  wait "$pid" 2> /dev/null || true
  kill "$watchdog" 2> /dev/null || true
  wait "$watchdog" 2> /dev/null || true
  pid= watchdog=
}
trap stop_server EXIT

# Runs one phase: $1 = name, $2 = --attacks, then extra hostile-load options.
phase() {
  local name=$1 attacks=$2 port_file="$OUT/port-$1"
  shift 2
  rm -f "$port_file" "$OUT/killed-$name"
  $B serve --model "$MODEL" --plan "$PLAN" --host 127.0.0.1 --port 0 --port-file "$port_file" \
    --threads "$THREADS" "${serve_flags[@]}" 2> "$OUT/serve-$name.log" &
  pid=$!
  (  # the safety valve: the server's RSS, every 0.1 s
    while kill -0 "$pid" 2> /dev/null; do
      rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2> /dev/null || echo 0)
      if [ "${rss:-0}" -gt $((RSS_KILL_MB * 1024)) ]; then
        echo "$((rss / 1024))" > "$OUT/killed-$name"
        kill -KILL "$pid"
      fi
      sleep 0.1
    done
  ) &
  watchdog=$!
  for _ in $(seq 600); do [ -s "$port_file" ] && break; sleep 0.1; done
  [ -s "$port_file" ] || { echo "error: the server did not start (see $OUT/serve-$name.log)" >&2; exit 1; }
  local port
  port=$(cat "$port_file")
  $B loadtest --port "$port" --image "$IMAGE" --prompt "$PROMPT" --clients "$CLIENTS" --requests 8 \
    --max-tokens "$MAX_TOKENS" --json > /dev/null  # warm-up
  $B hostile-load --port "$port" --image "$IMAGE" --prompt "$PROMPT" --clients "$CLIENTS" \
    --max-tokens "$MAX_TOKENS" --attack-seconds "$ATTACK_SECONDS" --attacks "$attacks" --server-pid "$pid" \
    "$@" --json > "$OUT/$name.json"
  stop_server
  if [ -f "$OUT/killed-$name" ]; then
    echo "note: phase $name: the server passed RSS_KILL_MB ($(cat "$OUT/killed-$name") MB) and was killed" >&2
  fi
  return 0
}

phase alone none
phase hostile "$ATTACKS" --attack-rate "$ATTACK_RATE" --attackers "$ATTACKERS" --baseline "$OUT/alone.json" \
  --rss-bound-mb "$RSS_BOUND_MB" "${hostile_flags[@]}"

killed_a=$(cat "$OUT/killed-alone" 2> /dev/null || echo "")
killed_b=$(cat "$OUT/killed-hostile" 2> /dev/null || echo "")
grep -o 'avx512_bf16\|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ' | sed 's/^/CPU features: /'; echo
echo "Server plan $PLAN. Normal load: $CLIENTS streamed clients, max_tokens $MAX_TOKENS," \
  "${ATTACK_SECONDS} s; attacks: $ATTACKS at $ATTACK_RATE/s over $ATTACKERS threads (+ held connections);" \
  "raw output: $OUT"
echo
{
jq -n -r --slurpfile a "$OUT/alone.json" --slurpfile b "$OUT/hostile.json" \
  --arg ka "$killed_a" --arg kb "$killed_b" '
  def r0: . * 1 | round;
  def r2: . * 100 | round / 100;
  def normal(x): [
    ["normal requests ok / failed", "\(x.normal.ok) / \(x.normal.failed)" +
       (if (x.normal.failed_statuses | length) > 0
        then " (" + (x.normal.failed_statuses | group_by(.) | map("\(.[0]): \(length)") | join(", ")) +
             ")"
        else "" end)],
    ["normal latency P50 / P99 ms", "\(x.normal.latency_ms.p50 | r0) / \(x.normal.latency_ms.p99 | r0)"],
    ["normal TTFT P50 / P99 ms", "\(x.normal.ttft_ms.p50 | r0) / \(x.normal.ttft_ms.p99 | r0)"],
    ["normal req/s", "\(x.normal.requests_per_s | r2)"],
    ["GET /health probes ok / failed (P99 ms)",
     "\(x.health.ok) / \(x.health.failed) (\(x.health.p99_ms | r0))"],
    ["server peak RSS MB (VmHWM)", "\(x.server_peak_rss_mb | r0)"],
    ["server answers /health after the run", (if x.server_alive then "yes" else "**no**" end)],
    ["tokens generated for clients that had left (disconnected or timed out)",
     "\(x.tokens_for_gone_clients | r0)"]];
  def answers(t): t.answers | to_entries | map("\(.key) \(.value)") | join(", ");
  def killed(k): if k != "" then "**at \(k) MB**" else "no" end;
  ($a[0]) as $A | ($b[0]) as $B |
  "| | normal clients alone | with attackers |",
  "|---|---|---|",
  ([normal($A), normal($B)] | transpose[] | "| \(.[0][0]) | \(.[0][1]) | \(.[1][1]) |"),
  (if $ka != "" or $kb != "" then "| killed by RSS_KILL_MB | \(killed($ka)) | \(killed($kb)) |"
   else empty end),
  ($B.attacks | to_entries | sort_by(.value.issue_item)[] |
     "| attack `\(.key)` (item \(.value.issue_item)) | — | \(.value.sent) sent: \(answers(.value)); " +
     "longest open \(.value.max_open_s | r2) s |"),
  (if $B.verdict then "| **verdict** | | \($B.verdict.summary) |" else empty end)'
} | tee "$OUT/table.md"
