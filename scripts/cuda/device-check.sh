#!/usr/bin/env bash
# The CUDA check of issue 20, as one command on a machine with an NVIDIA GPU and a pip PyTorch (CUDA LibTorch)
# but none of Debian's packages: installs .devkit/kit.tar.gz (scripts/cuda/make-kit.sh, made beforehand on a
# machine with scripts/install-deps.sh done), builds the CLI against that LibTorch into build-cuda/, then runs,
# each capped so that the whole ends within DEADLINE seconds (default 540): the bundled model's accuracy on
# CUDA (bf16, fp32; first 600 test samples), `vispco bench` and `vispco generate` at the 1.1B preset, a short
# recipe-12 training run on CUDA (steps/s per stage), and its checkpoint resumed on the CPU.
# Writes log.txt and the raw outputs to $OUT (default ./cuda-check). Usage: bash scripts/cuda/device-check.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-cuda-check}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
T0=$(date +%s)
DEADLINE=${DEADLINE:-540}
el() { echo "[+$(($(date +%s) - T0))s] $*"; }
cap() {  # cap SECONDS COMMAND...: run COMMAND for at most SECONDS and never past DEADLINE
  local want=$1 left=$((DEADLINE - ($(date +%s) - T0)))
  shift
  [ "$left" -lt 15 ] && { el "skipped (no time left): $*"; return 99; }
  [ "$want" -gt "$left" ] && want=$left
  timeout "$want" "$@"
}
el "machine"
nproc; head -2 /etc/os-release; nvidia-smi -L; g++ --version | head -1; cmake --version | head -1
python3 -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, torch.cuda.is_available())'
TP=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
ls "$(dirname "$TP")/../include" | tr '\n' ' '; echo  # which headers LibTorch ships (fmt? gloo?)
mkdir -p /tmp/kit && tar xzf .devkit/kit.tar.gz -C /tmp/kit && bash /tmp/kit/install-kit.sh ||
  { el "kit install failed (run scripts/cuda/make-kit.sh first, carry .devkit)"; exit 1; }
el "configure"
export TORCH_CUDA_ARCH_LIST=9.0 PATH=/usr/local/cuda/bin:$PATH
# Debian's fmt and spdlog headers ahead of LibTorch's own fmt (libspdlog is built on fmt 9): -I is searched
# before every -isystem, and CMAKE_CXX_FLAGS come after the targets' -isystem include folders.
mkdir -p /tmp/first && cp -r /tmp/kit/root/usr/include/fmt /tmp/kit/root/usr/include/spdlog /tmp/first/
cap 120 cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$TP" -DVISPCO_BUILD_TESTS=OFF \
  -DVISPCO_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CXX_FLAGS='-I/tmp/first' \
  > "$OUT/configure.txt" 2>&1
echo "configure rc $?"; tail -15 "$OUT/configure.txt"
el "build"
cap 330 cmake --build build-cuda -j "$(nproc)" --target vispco -- -k 0 > "$OUT/build.txt" 2>&1
echo "build rc $?"; grep -E "error|FAILED|undefined reference" "$OUT/build.txt" | head -60
V=build-cuda/vispco
[ -x $V ] || { el "no binary"; tail -30 "$OUT/build.txt"; exit 1; }
el "data"; cap 40 $V data synth --split test --out /tmp/test --threads "$(nproc)" 2>&1 | tail -1
eval_cuda() {
  el "eval cuda $1"
  cap "$2" $V eval --model models/synthvqa-small --data /tmp/test --limit 600 --device cuda --dtype "$1" --batch 16 \
    --out "/tmp/ev-$1" --progress off 2>&1 | tail -12
  cp "/tmp/ev-$1/summary.json" "$OUT/eval-cuda-$1.json" 2>/dev/null
}
eval_cuda bf16 80
el "bench 1.1B"
cap 100 $V bench --preset llava-tinyllama-1.1b --device cuda --dtype bf16 --repeats 5 --sweep-keep 576,64 \
  --sweep-plan fastv:layer=2 --sweep-plan visionzip:layer=0 2>&1 | tail -12
el "generate 1.1B"
cap 40 $V init-random --preset llava-tinyllama-1.1b --dtype bf16 --out /tmp/tl11 2>&1 | tail -2
for plan in none fastv:layer=2,keep=64; do
  cap 40 $V generate --model /tmp/tl11 --image data/samples/images/000000.png --prompt "What is this?" \
    --max-new-tokens 64 --ignore-eos --device cuda --dtype bf16 --plan $plan --json 2>&1 | tail -3
done
nvidia-smi --query-gpu=memory.used --format=csv
el "train: recipe 12 with short stages, on CUDA"
python3 - <<'PY'
import json
r = json.load(open('configs/synthvqa-small-v12.json'))
r['vision']['steps'] = 200
for st, n in zip(r['lowres'], (120, 60)):
    st['steps'] = n
r['decoder']['steps'] = 60
r['refine'][0]['steps'] = 60
r.update(probe_every=100, probe_gates=[], checkpoint_seconds=100000)
json.dump(r, open('/tmp/speed-recipe.json', 'w'))
PY
cap 100 $V train --recipe /tmp/speed-recipe.json --out /tmp/trun --device cuda --max-minutes 1.4 > "$OUT/train.txt" 2>&1
echo "train rc $?"; grep -vE "^\[" "$OUT/train.txt" | head -20
grep -E "^\[" "$OUT/train.txt" | awk '$1 != prev {print; prev = $1} END {print}'
el "resume the CUDA checkpoint on the CPU"
cap 45 $V train --recipe /tmp/speed-recipe.json --out /tmp/trun --device cpu --threads "$(nproc)" --max-minutes 0.3 \
  > "$OUT/resume.txt" 2>&1
echo "resume rc $?"; head -3 "$OUT/resume.txt"; tail -2 "$OUT/resume.txt"
eval_cuda fp32 60
el "done"
