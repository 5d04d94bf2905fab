#!/bin/bash
# The Vulkan backend on the GPU machine in one run (see /work/shared/device/README.md):
#   source .devdeps/devenv.sh && bash tools/vulkan_gpu_run.sh     (from the checkout's root)
# one GPU run from the root of the carried copy: build, tests, conv_bench vulkan (default tiles
# and a tile sweep), the upscale benchmark. Logs under $OUT.
cd "$(dirname "$0")/.."
T0=$SECONDS
GEN=""; command -v ninja >/dev/null && GEN="-G Ninja"
# .devdeps' zlib1g-dev brings a libz.so link without its target: CMake would take the non-PIC
# libz.a (the shared libraries then fail to link); the machine's own libz.so.1 is the one
ZL=""; [ -e /usr/lib/x86_64-linux-gnu/libz.so.1 ] && ZL="-DZLIB_LIBRARY=/usr/lib/x86_64-linux-gnu/libz.so.1"
{ cmake -S . -B /tmp/build $GEN $ZL -DCMAKE_BUILD_TYPE=Release -DCANDLE_BUILD_BENCH=ON && \
  timeout 190 cmake --build /tmp/build -j16 --target test_vulkan conv_bench nn_fused_bench candle-upscale vk_memtypes; } > $OUT/build.log 2>&1
echo "build rc $? at $((SECONDS-T0)) s"; grep -E "error|FAILED" $OUT/build.log | head -5
/tmp/build/bin/vk_memtypes > $OUT/memtypes.log 2>&1; grep -iE "choice|best|adapter|heap" $OUT/memtypes.log | head -12
if /tmp/build/bin/test_vulkan --gtest_filter='VulkanBackend.OpsWithKernels*' 2>&1 | grep -q SKIPPED; then
  export CANDLE_VULKAN_SYSTEM_MEMORY=1; echo "using CANDLE_VULKAN_SYSTEM_MEMORY=1"; fi
timeout 90 /tmp/build/bin/test_vulkan > $OUT/test.log 2>&1; echo "test rc $? at $((SECONDS-T0)) s"
grep -E "FAILED|PASSED|SKIPPED|Failure|tests ran" $OUT/test.log | head -12
# the split paths past the binding limit, with the limit lowered (ctest's VulkanSmallBindings)
CANDLE_VULKAN_MAX_BINDING_MB=4 timeout 60 /tmp/build/bin/test_vulkan --gtest_filter='VulkanSmallBinding*' \
  > $OUT/test_small_binding.log 2>&1; echo "small-binding test rc $? at $((SECONDS-T0)) s"
grep -E "FAILED|PASSED|Failure|tests ran" $OUT/test_small_binding.log | head -6
timeout 40 /tmp/build/bin/nn_fused_bench vulkan --benchmark_min_time=0.1 > $OUT/nn_fused_bench.log 2>&1
echo "nn_fused_bench rc $? at $((SECONDS-T0)) s"; grep -E "^BM_|ERROR" $OUT/nn_fused_bench.log | sed 's/ \+/ /g'
timeout 40 /tmp/build/bin/conv_bench vulkan --benchmark_min_time=0.05 \
  --benchmark_filter='/512|3x3_64_64/2048|1x1_68_64/2048' > $OUT/conv_bench.log 2>&1
echo "conv_bench rc $? at $((SECONDS-T0)) s"; grep -E "^BM_|ERROR" $OUT/conv_bench.log | sed 's/ \+/ /g'
for t in ${SWEEP_TILES:-}; do  # e.g. SWEEP_TILES="32x128 64x64 64x128 128x128 64x256"
  CANDLE_VULKAN_CONV_TILE=$t timeout 12 /tmp/build/bin/conv_bench vulkan --benchmark_min_time=0.02 \
    --benchmark_filter='BM_conv2d.*/512' > $OUT/tile_$t.log 2>&1
  echo "tile $t:"; grep -E "^BM_" $OUT/tile_$t.log | awk '{print $1, $2, $3, $NF}'
done
echo "at $((SECONDS-T0)) s"
[ -n "${SKIP_UPSCALE:-}" ] && exit 0
PYTHONUNBUFFERED=1 timeout ${BENCH_TIMEOUT:-330} python3 tools/bench_upscale_vulkan_vs_torch.py --bin /tmp/build/bin --repeat 5 ${BENCH_ARGS:-} > $OUT/upscale.log 2>&1
echo "upscale rc $? at $((SECONDS-T0)) s"; cat $OUT/upscale.log | tail -14
