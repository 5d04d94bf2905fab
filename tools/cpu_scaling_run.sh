#!/bin/bash
# CPU thread scaling of the upscaler on the GPU machine's 16 cores, in one run (see
# /work/shared/device/README.md):  source .devdeps/devenv.sh && bash tools/cpu_scaling_run.sh
# Builds candle-upscale, runs the per-layer profile (CANDLE_RDN_PROFILE=1) of x4 on the
# 512x512 sample at 1 and 16 threads (a table of both and the ratio), then the whole network
# beside PyTorch (tools/bench_upscale_vs_torch.py --threads 1,16). Logs under $OUT.
cd "$(dirname "$0")/.."
T0=$SECONDS
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
GEN=""; command -v ninja >/dev/null && GEN="-G Ninja"
ZL=""; [ -e /usr/lib/x86_64-linux-gnu/libz.so.1 ] && ZL="-DZLIB_LIBRARY=/usr/lib/x86_64-linux-gnu/libz.so.1"
{ cmake -S . -B /tmp/build $GEN $ZL -DCMAKE_BUILD_TYPE=Release -DCANDLE_BUILD_BENCH=ON && \
  timeout 240 cmake --build /tmp/build -j16 --target candle-upscale ${EXTRA_TARGETS:-}; } > $OUT/build.log 2>&1
echo "build rc $? at $((SECONDS-T0)) s"; grep -E "error|FAILED" $OUT/build.log | head -5
IMG=models/esrgan-slim/samples/4x/result.png
for t in 1 16; do  # three passes each; the table takes each layer's best
  CANDLE_NUM_THREADS=$t CANDLE_RDN_PROFILE=1 /tmp/build/bin/candle-upscale --scale ${SCALE:-4} --repeat 3 $IMG /tmp/o.png \
    > $OUT/profile_t$t.log 2>&1
done
python3 - "$OUT" <<'PY'
import re, sys, glob
out = sys.argv[1]
def best(t):
    acc = {}
    for f in sorted(glob.glob(f"{out}/profile_t{t}.log")):
        for m in re.finditer(r"^\s+(\S+)\s+([0-9.]+) ms", open(f).read(), re.M):
            acc[m.group(1)] = min(acc.get(m.group(1), 1e9), float(m.group(2)))
    return acc
a, b = best(1), best(16)
print(f"{'layer':20s} {'1 thr ms':>9s} {'16 thr ms':>9s} {'ratio':>6s}")
for k in a:
    r = a[k] / b[k] if b.get(k) else 0
    print(f"{k:20s} {a[k]:9.2f} {b.get(k, 0):9.2f} {r:6.1f}")
print(f"{'sum':20s} {sum(a.values()):9.2f} {sum(b.values()):9.2f} {sum(a.values())/max(sum(b.values()),1e-9):6.1f}")
PY
echo "at $((SECONDS-T0)) s"
timeout ${BENCH_TIMEOUT:-200} python3 tools/bench_upscale_vs_torch.py --bin /tmp/build/bin --scales ${SCALE:-4} --threads 1,16 \
  --repeats 3 > $OUT/bench.log 2>&1
echo "bench rc $? at $((SECONDS-T0)) s"; tail -8 $OUT/bench.log
g++ -O2 -mavx512f -fopenmp tools/probe/cpu_probe.cpp -o /tmp/cpu_probe && /tmp/cpu_probe 16
