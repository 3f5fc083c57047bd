#!/usr/bin/env bash
# Installs every build and run dependency of vispco from Debian's packages. Idempotent: a second run
# installs nothing new. Needs root (or sudo). Usage: bash scripts/install-deps.sh
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  clang-format-14         # .clang-format check in CI (scripts/check-format.sh)
  libtorch-dev            # tensors, autograd, c10d (LibTorch 1.13)
  libgloo-dev             # headers of c10d's Gloo process group (VisPCO data-parallel training)
  libopenblas0-openmp     # fp32 GEMM/GEMV for LibTorch (~30x faster than reference BLAS); selected below
  libopencv-dev           # image decode (JPEG/PNG/WebP/BMP), resize, drawing
  libsentencepiece-dev    # tokenizer.model
  libpcre2-dev            # byte-level BPE pre-tokenizer regexes with Unicode properties (tokenizer.json)
  libutf8proc-dev         # Unicode NFC normalisation (tokenizer.json "normalizer": NFC)
  nlohmann-json3-dev      # config.json, safetensors headers, reports
  libcli11-dev            # command line
  libspdlog-dev           # logging
  libcpp-httplib-dev      # HTTP server
  libsqlite3-dev          # result store
  libssl-dev              # SHA-256 content hashes (libcrypto)
  jq                      # reading JSON reports in scripts (model card)
  libgtest-dev libgmock-dev googletest
  libbenchmark-dev
  gnuplot-nox             # plots of `vispco optimize` (run as an external program)
  python3-torch           # independent float64 references in tests/reference/ (tests skip without it)
  python3-regex python3-pil  # Qwen references: the BPE pre-tokenizer regex (\p{L}), Pillow's bicubic resize
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node + npm run the official OpenAI client against `vispco serve` in the tests (Debian's packages where the
# machine has none).
command -v node > /dev/null || missing+=(nodejs)
command -v npm > /dev/null || missing+=(npm)
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# LibTorch's own thread pool is OpenMP; OpenBLAS's pthread build keeps a second pool, and on 2 cores the two
# fight (OpenMP workers spin while OpenBLAS's wait): on an AVX2 EPYC, fp32 decode at the 1.1B dimensions ran at
# 2.9 tok/s with the pthread build and 6.8 with the OpenMP build, vision 5.1 → 2.5 s (docs/benchmarks.md).
# Debian ranks the pthread build first, so select the OpenMP one where both are installed.
for alt in libblas.so.3 liblapack.so.3 libopenblas.so.0; do
  $SUDO update-alternatives --set "$alt-x86_64-linux-gnu" "/usr/lib/x86_64-linux-gnu/openblas-openmp/$alt" > /dev/null
done
echo "install-deps: BLAS is OpenBLAS's OpenMP build ($(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3))"

# The `openai` npm package for tests/serve/test_openai_node.cpp (pinned by package-lock.json); the test
# skips with a message where npm's registry cannot be reached.
node_dir="$(cd "$(dirname "$0")/.." && pwd)/tests/serve/node"
if [ -f "$node_dir/node_modules/openai/package.json" ]; then
  echo "install-deps: openai npm package present"
elif command -v npm > /dev/null && timeout 300 npm ci --prefix "$node_dir" --no-audit --no-fund --loglevel=error; then
  echo "install-deps: installed the openai npm package into tests/serve/node"
else
  echo "install-deps: could not install the openai npm package (npm registry unreachable?); its test will skip"
fi

# Hugging Face's tokenizers (Node binding) and @huggingface/jinja, the external references of the Qwen tokenizer and
# chat-template tests (tests/reference/qwen_tokenizer, pinned by package-lock.json); those tests skip without them.
qwen_dir="$(cd "$(dirname "$0")/.." && pwd)/tests/reference/qwen_tokenizer"
if [ -f "$qwen_dir/node_modules/tokenizers/package.json" ] && [ -f "$qwen_dir/node_modules/@huggingface/jinja/package.json" ]; then
  echo "install-deps: tokenizers and @huggingface/jinja npm packages present"
elif command -v npm > /dev/null && timeout 300 npm ci --prefix "$qwen_dir" --no-audit --no-fund --loglevel=error; then
  echo "install-deps: installed tokenizers and @huggingface/jinja into tests/reference/qwen_tokenizer"
else
  echo "install-deps: could not install tokenizers / @huggingface/jinja (npm registry unreachable?); their tests will skip"
fi
