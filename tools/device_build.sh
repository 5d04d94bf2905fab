# Sourced by the GPU-machine scripts (tools/*_device_run.sh, tools/train_default_device.sh):
#   device_build BUILD_DIR TARGET...
# configures a Release build without Vulkan and tests in BUILD_DIR and builds TARGETs with 16 jobs,
# the log in $OUT/build.log; on failure prints its end and exits. Prints the CPU model first.
device_build() {
  local b=$1; shift
  local gen="" zl=""
  command -v ninja >/dev/null && gen="-G Ninja"
  [ -e /usr/lib/x86_64-linux-gnu/libz.so.1 ] && zl="-DZLIB_LIBRARY=/usr/lib/x86_64-linux-gnu/libz.so.1"
  grep -m1 'model name' /proc/cpuinfo
  { cmake -S . -B "$b" $gen $zl -DCMAKE_BUILD_TYPE=Release -DCANDLE_VULKAN=OFF -DCANDLE_BUILD_TESTS=OFF && \
    timeout 300 cmake --build "$b" -j16 --target "$@"; } > "$OUT/build.log" 2>&1 \
    || { echo "build failed"; tail -30 "$OUT/build.log"; exit 1; }
}

# The generator and zlib arguments device_build configures with, for scripts that configure their
# own build (with tests): cmake -S . -B DIR $(device_cmake_args) ...
device_cmake_args() {
  command -v ninja >/dev/null && printf -- '-G Ninja '
  [ -e /usr/lib/x86_64-linux-gnu/libz.so.1 ] && printf -- '-DZLIB_LIBRARY=/usr/lib/x86_64-linux-gnu/libz.so.1'
  return 0
}
