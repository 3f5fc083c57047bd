#!/usr/bin/env bash
# Runs on the CUDA machine, from the unpacked kit (scripts/cuda/make-kit.sh): copies the kit's files into /
# without overwriting any file there, adds a stub only for a library the machine lacks, and an empty placeholder
# for each OpenCV module the kit does not carry (OpenCV's CMake files check that every module's file exists).
set -uo pipefail
K=$(cd "$(dirname "$0")" && pwd)
cp -rn --preserve=links "$K/root/." / 2> /dev/null  # exits 1 on every file it leaves alone
L=/usr/lib/x86_64-linux-gnu
for s in "$L"/vispco-stubs/*; do
  n=$(basename "$s")
  [ -e "$L/$n" ] || ldconfig -p | awk -v n="$n" '$1 == n {f = 1} END {exit !f}' || cp "$s" "$L/$n"
done
grep -o '"${_IMPORT_PREFIX}/lib/x86_64-linux-gnu/libopencv_[a-z_0-9]*\.so\.[0-9.]*"' \
  "$L/cmake/opencv4/OpenCVModules-release.cmake" | tr -d '"' | sed 's#${_IMPORT_PREFIX}#/usr#' |
  while read -r f; do [ -e "$f" ] || touch "$f"; done
ldconfig 2>/dev/null
echo "cuda kit installed"
