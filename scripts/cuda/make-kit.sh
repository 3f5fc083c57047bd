#!/usr/bin/env bash
# Packs what vispco's build needs besides LibTorch — headers, CMake and pkg-config files, and the shared
# libraries of this machine's Debian packages (scripts/install-deps.sh) — into .devkit/kit.tar.gz, for building
# vispco on a CUDA machine that has a pip PyTorch but none of those packages (scripts/cuda/device-check.sh);
# gzip, not xz, so that a minimal image can unpack it.
# Libraries that OpenCV's core/imgproc/imgcodecs link but vispco never calls (GDAL, GDCM, BLAS/LAPACK, GLX)
# become stubs whose functions abort with a message. Usage: bash scripts/cuda/make-kit.sh (under a minute, ~15 MB).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
L=/usr/lib/x86_64-linux-gnu
stubs=(libgdal.so.32 libgdcmMSFF.so.3.0 libgdcmDSED.so.3.0 libblas.so.3 liblapack.so.3 libGLX.so.0)
files=$(mktemp)
for p in libopencv-dev libopencv-core-dev libopencv-imgproc-dev libopencv-imgcodecs-dev libsentencepiece-dev \
         nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev libcpp-httplib-dev libsqlite3-dev libssl-dev \
         libgloo-dev zlib1g-dev libbrotli-dev pkgconf pkg-config libpkgconf3 pkgconf-bin; do
  dpkg -L "$p" | grep -E '^/usr/(include|lib|share/cmake|share/pkgconfig|bin/pkg)' >> "$files" || true
done
# The run-time closure of the libraries vispco links (stubs and the C/C++ runtime excluded), every name of each.
python3 "$here/closure.py" "${stubs[@]}" > "$stage/closure.txt"
awk '{print $2}' "$stage/closure.txt" >> "$files"
awk '{print $1}' "$stage/closure.txt" | while read -r n; do ls -d "$L/$n"* 2>/dev/null; done >> "$files"
sort -u "$files" | while read -r f; do
  [ -d "$f" ] || [ ! -e "$f" ] && continue
  case "$f" in /lib/*|*.a|*/bin/opencv_*|*/share/doc/*|*/man/*) continue ;; esac
  mkdir -p "$stage/root$(dirname "$f")" && cp -a "$f" "$stage/root$f"
  if [ -L "$f" ]; then t=$(readlink -f "$f"); mkdir -p "$stage/root$(dirname "$t")" && cp -a "$t" "$stage/root$t"; fi
done
rm -f "$files"
# Stubs: every symbol OpenCV's three libraries take from them, as a function that aborts.
undef=$(mktemp)
for lib in core imgproc imgcodecs; do nm -D --undefined-only "$L/libopencv_$lib.so.406" | awk '{print $2}'; done |
  sed 's/@.*//' | sort -u > "$undef"
mkdir -p "$stage/root$L/vispco-stubs"
for so in "${stubs[@]}"; do
  nm -D --defined-only "$(readlink -f "$L/$so")" | awk '{print $3}' | sed 's/@.*//' | sort -u | comm -12 "$undef" - |
    awk -v so="$so" 'BEGIN{print "#include <stdio.h>\n#include <stdlib.h>"}
      {printf "void f%d(void) __asm__(\"%s\");\nvoid f%d(void) { fputs(\"vispco cuda kit: stub %s called\\n\", stderr); abort(); }\n", NR, $1, NR, so}' \
      > "$stage/$so.c"
  gcc -shared -fPIC -o "$stage/root$L/vispco-stubs/$so" -Wl,-soname,"$so" "$stage/$so.c"
done
rm -f "$undef"
cp "$here/install-kit.sh" "$stage/"
mkdir -p "$root/.devkit"
tar czf "$root/.devkit/kit.tar.gz" -C "$stage" install-kit.sh root
du -h "$root/.devkit/kit.tar.gz"
