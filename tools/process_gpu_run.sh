#!/bin/bash
# On the GPU machine (see /work/shared/device/README.md; prepare with
# DEVDEPS_EXTRA="libpng-dev libpng16-16 libjpeg62-turbo-dev libjpeg62-turbo"):
#   source .devdeps/devenv.sh && bash tools/process_gpu_run.sh
# The whole candle-upscale process (--device auto) beside a PyTorch script doing the same on
# CUDA (tools/bench_upscale_process.py), the Vulkan per-layer profile of medium x4 at 1024x1024,
# and the whole process on the CPU at 2 threads. Logs under $OUT.
cd "$(dirname "$0")/.."
T0=$SECONDS
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
GEN=""; command -v ninja >/dev/null && GEN="-G Ninja"
ZL=""; [ -e /usr/lib/x86_64-linux-gnu/libz.so.1 ] && ZL="-DZLIB_LIBRARY=/usr/lib/x86_64-linux-gnu/libz.so.1"
{ cmake -S . -B build-dev-vk $GEN $ZL -DCMAKE_BUILD_TYPE=Release -DCANDLE_BUILD_BENCH=ON && \
  timeout 280 cmake --build build-dev-vk -j16 --target candle-upscale; } > $OUT/build.log 2>&1
echo "build rc $? at $((SECONDS-T0)) s"; grep -E "error|FAILED|Could NOT" $OUT/build.log | head -5
B=build-dev-vk/bin
for m in esrgan-medium esrgan-slim; do
  timeout 150 python3 tools/bench_upscale_process.py --bin $B --device auto --torch-device cuda --model $m \
    --scale 4 --size 1024 --threads 16 --runs 3 2>&1 | tail -6
done
echo "== Vulkan per layer, medium x4 1024 (second pass)"
python3 -c "
import sys; sys.path.insert(0, 'tools'); import bench_upscale_process as b; b.write_png('build-dev-vk/p1024.png', 1024)"
CANDLE_RDN_PROFILE=1 $B/candle-upscale --model esrgan-medium --scale 4 --repeat 2 build-dev-vk/p1024.png \
  build-dev-vk/p_out.png > $OUT/profile_vk.log 2>&1
awk '/run 1:/{p=1; next} p && /ms$/' $OUT/profile_vk.log | sort -k2 -n -r | head -12
grep -E "run|wrote" $OUT/profile_vk.log
echo "== CPU, 2 threads, slim x4 512"
timeout 120 python3 tools/bench_upscale_process.py --bin $B --device cpu --model esrgan-slim --scale 4 --size 512 \
  --threads 2 --runs 3 2>&1 | tail -6
echo "done at $((SECONDS-T0)) s"
