#!/bin/bash
# On the GPU machine (see /work/shared/device/README.md):
#   source .devdeps/devenv.sh && bash tools/auto_device_run.sh
# --device auto's choice and tiling plan for medium x4 at 1024x1024, the upscale benchmark
# beside PyTorch (cuDNN, TF32 off / on), and the CPU's first-pass cost at 2 threads with and
# without the huge-page hint (CANDLE_CPU_HUGEPAGES=0). Logs under $OUT.
cd "$(dirname "$0")/.."
T0=$SECONDS
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
GEN=""; command -v ninja >/dev/null && GEN="-G Ninja"
ZL=""; [ -e /usr/lib/x86_64-linux-gnu/libz.so.1 ] && ZL="-DZLIB_LIBRARY=/usr/lib/x86_64-linux-gnu/libz.so.1"
{ cmake -S . -B build-dev-vk $GEN $ZL -DCMAKE_BUILD_TYPE=Release -DCANDLE_BUILD_BENCH=ON && \
  timeout 280 cmake --build build-dev-vk -j16 --target candle-upscale test_vulkan test_core; } > $OUT/build.log 2>&1
echo "build rc $? at $((SECONDS-T0)) s"; grep -E "error|FAILED" $OUT/build.log | head -5
B=build-dev-vk/bin
python3 - <<'PY'
import zlib, struct, random
random.seed(1)
for w in (512, 1024):
    rows = b"".join(b"\x00" + bytes(((x * 7 + y * 3 + random.randint(0, 40)) % 256 for x in range(w * 3))) for y in range(w))
    ch = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    open(f"build-dev-vk/in{w}.png", "wb").write(b"\x89PNG\r\n\x1a\n" + ch(b"IHDR", struct.pack(">IIBBBBB", w, w, 8, 2, 0, 0, 0)) + ch(b"IDAT", zlib.compress(rows)) + ch(b"IEND", b""))
PY
timeout 60 $B/test_core --gtest_filter='*Device*:*AutoSelect*' --gtest_brief=1 2>&1 | tail -3
timeout 120 $B/test_vulkan --gtest_brief=1 > $OUT/test_vulkan.log 2>&1; echo "test_vulkan rc $?"; tail -3 $OUT/test_vulkan.log
echo "== candle-upscale --device auto, medium x4 1024"
/usr/bin/time -f "process %e s, max rss %M KB" $B/candle-upscale --model esrgan-medium --scale 4 --repeat 4 \
  build-dev-vk/in1024.png build-dev-vk/out1024.png 2>&1 | grep -v "^\s*tile"
echo "== bench (auto) beside PyTorch"
PYTHONUNBUFFERED=1 timeout 200 python3 tools/bench_upscale_vulkan_vs_torch.py --bin $B --device auto \
  --models esrgan-medium,esrgan-slim --sizes 1024 --scales 4 --repeat 5 > $OUT/upscale.log 2>&1
echo "rc $?"; tail -8 $OUT/upscale.log
echo "== CPU 2 threads, slim x4 512: huge-page hint on / off"
for hp in 1 0 1 0; do
  CANDLE_CPU_HUGEPAGES=$hp CANDLE_NUM_THREADS=2 /usr/bin/time -f "process %e s" $B/candle-upscale --device cpu \
    --scale 4 --repeat 3 build-dev-vk/in512.png build-dev-vk/out512.png 2>&1 | grep -E "run|process" | tr '\n' ' '
  echo " (hugepages=$hp)"
done
echo "done at $((SECONDS-T0)) s"
