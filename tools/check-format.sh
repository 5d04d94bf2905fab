#!/usr/bin/env bash
# Fails when a C++ file differs from what clang-format (the root .clang-format) makes of it.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "check-format: clang-format is not installed (apt-get install clang-format)"; exit 1; }
bad=0
for f in $(git ls-files '*.cpp' '*.h'); do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then echo "not formatted: $f"; bad=1; fi
done
exit $bad
