#!/usr/bin/env bash
# Installs a built tree and checks the installed package from outside the source tree:
#  1. the package's files: the public headers with the backend SDK (candle/backend/*.h) and the
#     generated candle/version.h; the GPU backend plugins beside libcandle_core.so; and not the
#     CMake function that builds plugins (a build-only tool, cmake/CandleBackendPlugin.cmake);
#  2. tests/install: a program using find_package(candle CONFIG) and candle::core, built and run;
#  3. tests/install-libs: src/models and src/datasets recompiled against the installed core with
#     only the installed headers and each library's own folder; with --with-nn (or
#     CANDLE_INSTALL_CHECK_NN=1) src/nn first, and models then against that rebuilt nn.
#
# usage: tools/install-check.sh [--with-nn] [BUILD_DIR (default build-release)] [WORK_DIR]
# WORK_DIR (default: a fresh temporary folder) receives the prefix and the two consumer builds.
# CANDLE_INSTALL_CHECK_DEVICE=vulkan (or cuda, ...) also runs the consumer on that device, which
# loads the installed plugin (set CANDLE_VULKAN_ALLOW_CPU=1 for lavapipe).
# The build folder must have been built in full (cmake --install needs every installed target).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
with_nn=${CANDLE_INSTALL_CHECK_NN:-0}
args=()
for a in "$@"; do
  case "$a" in
    --with-nn) with_nn=1 ;;
    -h | --help) sed -n '2,17p' "$0"; exit 0 ;;
    *) args+=("$a") ;;
  esac
done
build=${args[0]:-build-release}
work=${args[1]:-$(mktemp -d /tmp/candle-install-check.XXXXXX)}
prefix=$work/prefix
[ -f "$build/CMakeCache.txt" ] || { echo "install-check: $build is not a configured build folder" >&2; exit 2; }
rm -rf "$prefix" "$work/consumer" "$work/libs"

echo "== install $build into $prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(find "$prefix" -name 'libcandle_core.so' -printf '%h\n' | head -n1)
[ -n "$libdir" ] || { echo "install-check: no libcandle_core.so under $prefix" >&2; exit 1; }
for h in candle/candle.h candle/version.h candle/backend/backend.h candle/backend/cpu_storage.h \
  candle/backend/plugin.h; do
  [ -f "$prefix/include/$h" ] || { echo "install-check: $h not installed" >&2; exit 1; }
done
if find "$prefix" -name 'CandleBackendPlugin.cmake' | grep -q .; then
  echo "install-check: the build-only CandleBackendPlugin.cmake was installed" >&2
  exit 1
fi
# every plugin the build made (backend-plugins.txt, written by CMake) is installed beside the
# core, where Device::open looks for it
while read -r name; do
  [ -z "$name" ] || [ -e "$libdir/$name" ] || { echo "install-check: plugin $name not installed in $libdir" >&2; exit 1; }
done <"$build/backend-plugins.txt"

echo "== tests/install: a consumer of find_package(candle CONFIG)"
cmake -S tests/install -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/consumer"
"$work/consumer/consumer"
if [ -n "${CANDLE_INSTALL_CHECK_DEVICE:-}" ]; then
  echo "== the consumer on $CANDLE_INSTALL_CHECK_DEVICE (the installed plugin)"
  "$work/consumer/consumer" "$CANDLE_INSTALL_CHECK_DEVICE"
fi

libs="models;datasets"
[ "$with_nn" = 1 ] && libs="nn;$libs"
echo "== tests/install-libs: src/{${libs//;/,}} against the installed core"
cmake -S tests/install-libs -B "$work/libs" -DCMAKE_PREFIX_PATH="$prefix" -DCANDLE_SOURCE_DIR="$root" \
  "-DCANDLE_LIBS=$libs" >/dev/null
cmake --build "$work/libs"
echo "== install-check passed ($work)"
