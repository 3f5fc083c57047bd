# Sourced by scripts/train-bundled.sh and scripts/train-hr.sh: installs, builds the CLI, runs one training
# command with its output appended to RUN/train.log, and adds the sitting's wall time to RUN/wall_seconds (a
# sitting counts only when the command exits in it).
# Usage: run_training RUN COMMAND [ARGS...]   (COMMAND is usually build/vispco train…)
run_training() {
  local run=$1
  shift
  bash scripts/install-deps.sh
  TARGETS=vispco bash scripts/build.sh >/dev/null # the CLI only, not the test suite
  mkdir -p "$run"
  local start prev
  start=$(date +%s)
  "$@" 2>&1 | tee -a "$run/train.log"
  prev=$(cat "$run/wall_seconds" 2>/dev/null || echo 0)
  echo $((prev + $(date +%s) - start)) >"$run/wall_seconds"
}
