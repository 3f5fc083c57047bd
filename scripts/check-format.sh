#!/usr/bin/env bash
# Checks that every tracked C++ file is formatted as .clang-format says (clang-format 14, Debian's
# clang-format-14, which scripts/install-deps.sh installs). Exits non-zero and names the files otherwise.
# Fix with: git ls-files '*.cpp' '*.h' | xargs clang-format-14 -i
set -euo pipefail
cd "$(dirname "$0")/.."
fmt=$(command -v clang-format-14 || command -v clang-format || true)
if [ -z "$fmt" ]; then
  echo "check-format: clang-format-14 is not installed (bash scripts/install-deps.sh)" >&2
  exit 2
fi
bad=$(git ls-files '*.cpp' '*.h' | xargs "$fmt" --dry-run 2>&1 | grep ': warning: ' | cut -d: -f1 | sort -u || true)
if [ -n "$bad" ]; then
  echo "check-format: $(echo "$bad" | wc -l) file(s) differ from .clang-format:" >&2
  echo "$bad" >&2
  exit 1
fi
echo "check-format: $(git ls-files '*.cpp' '*.h' | wc -l) files clean ($("$fmt" --version))"
