#!/bin/bash
# "Nothing gets slower" at the AVX2 kernels on the GPU machine's 16-core AVX-512 CPU, with the
# before and after builds interleaved in one run (so that the machine's drift hits both alike):
#   git archive <before-commit> > .devdeps/before.tar
#   source .devdeps/devenv.sh && bash tools/avx2_before_after_run.sh build   # then: ... bench
# build: this tree in build-dev-after, the archive in build-dev-before (conv_bench, candle-mnist-training,
#        candle-upscale; the before tree reads this tree's models/);
#        a before tree whose built-in GEMM predates CANDLE_CPU_ISA (b59ee92 chose AVX-512 whenever the
#        CPU had it) is patched to honour CANDLE_CPU_ISA=avx2, so both sides run AVX2 GEMM kernels;
# bench: REPS rounds (default 3) of {before, after (each of AFTER_VARIANTS)} for the 5x5 / 3x3 convs, the slim x4
#        upscale of the bundled 512² sample (network time, best of 2 passes) and the Fashion-MNIST epoch
#        (synthetic IDX files), at 16 threads, the built-in kernels forced to AVX2 (both sides) and OpenBLAS
#        to its Haswell kernel (both); medians printed. Logs under $OUT. The archive may leave out
#        models/ and tests/ (the builds need neither):
#          git archive b59ee92 | tar --delete --wildcards 'models/esrgan-*' 'tests/*' > .devdeps/before.tar
cd "$(dirname "$0")/.."
T0=$SECONDS
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
GEN=""; command -v ninja >/dev/null && GEN="-G Ninja"
ZL=""; [ -e /usr/lib/x86_64-linux-gnu/libz.so.1 ] && ZL="-DZLIB_LIBRARY=/usr/lib/x86_64-linux-gnu/libz.so.1"
REPS=${REPS:-3}
# ROWS: which rows the bench step runs (a subset saves device time); TARGETS: what the build step
# builds on both sides, AFTER_TARGETS what it adds on the after side (e.g. matmul_bench)
ROWS=${ROWS:-conv upscale mnist}
row() { [[ " $ROWS " == *" $1 "* ]]; }
TARGETS=${TARGETS:-conv_bench candle-mnist-training candle-upscale}
step=${1:-build}
grep -m1 'model name' /proc/cpuinfo
if [ "$step" = build ]; then
  rm -rf build-dev-before-src && mkdir -p build-dev-before-src && tar -xf .devdeps/before.tar -C build-dev-before-src
  [ -e build-dev-before-src/models/esrgan-slim ] || { rm -rf build-dev-before-src/models && ln -s "$PWD/models" build-dev-before-src/models; }
  gb=build-dev-before-src/src/cpu/gemm_builtin.cpp
  if ! grep -q CANDLE_CPU_ISA $gb; then
    sed -i 's/if (has_avx512f()) return/if (has_avx512f() \&\& !(std::getenv("CANDLE_CPU_ISA") \&\& std::strcmp(std::getenv("CANDLE_CPU_ISA"), "avx2") == 0)) return/' $gb
    echo "before: built-in GEMM patched to honour CANDLE_CPU_ISA=avx2 ($(grep -c 'CANDLE_CPU_ISA") &&' $gb) kernel choices)"
  fi
  for side in after before; do
    src=.; [ $side = before ] && src=build-dev-before-src
    { cmake -S $src -B build-dev-$side $GEN $ZL -DCMAKE_BUILD_TYPE=Release -DCANDLE_BUILD_BENCH=ON \
        -DCANDLE_BUILD_TESTS=OFF -DCANDLE_VULKAN=OFF && \
      timeout 280 cmake --build build-dev-$side -j16 --target $TARGETS $([ $side = after ] && echo "${AFTER_TARGETS:-}"); } > $OUT/build_$side.log 2>&1
    echo "build $side rc $? at $((SECONDS-T0)) s"; grep -E "error|FAILED" $OUT/build_$side.log | head -5
  done
  exit 0
fi
mkdir -p build-dev-fmnist
row mnist && python3 - <<'PY'
import gzip, os, random, struct
d = "build-dev-fmnist"; random.seed(1)
def w(name, magic, dims, n):
    p = os.path.join(d, name)
    if os.path.exists(p): return
    with gzip.open(p, "wb", compresslevel=1) as f:
        f.write(struct.pack(">I", magic) + b"".join(struct.pack(">I", x) for x in dims))
        f.write(bytes(random.getrandbits(8) % (10 if magic == 2049 else 256) for _ in range(n)))
for split, n in (("train", 60000), ("t10k", 10000)):
    w(f"{split}-images-idx3-ubyte.gz", 2051, [n, 28, 28], n * 784)
    w(f"{split}-labels-idx1-ubyte.gz", 2049, [n], n)
PY
F='BM_conv2d/(5x5_64_64|3x3_64_64|3x3_64_32)/512'
# AFTER_VARIANTS="name:ENV=V ENV2=V;name2:..." runs the after build once per variant (tuning)
IFS=';' read -ra variants <<< "${AFTER_VARIANTS:-after:}"
L=$(ldd build-dev-before/bin/conv_bench | awk '/openblas/ {print $3}')
[ -n "$L" ] && OPENBLAS_CORETYPE=Haswell python3 -c "import ctypes; l=ctypes.CDLL('$L'); l.openblas_get_corename.restype=ctypes.c_char_p; print('OpenBLAS core with OPENBLAS_CORETYPE=Haswell:', l.openblas_get_corename())"
# the before build's forcing works when its AVX-512 run of the 5x5 conv differs from its AVX2 run
row conv && for isa in avx512 avx2; do
  env OPENBLAS_CORETYPE=Haswell CANDLE_NUM_THREADS=16 CANDLE_CPU_ISA=$isa build-dev-before/bin/conv_bench \
    --benchmark_filter='BM_conv2d/5x5_64_64/512' --benchmark_min_time=0.3 2>&1 | grep -E '^BM_' | sed "s/^/before, CANDLE_CPU_ISA=$isa: /"
done
for r in $(seq 1 $REPS); do
  for sv in before "${variants[@]}"; do
    side=after; [ "$sv" = before ] && side=before
    venv=""; [ $side = after ] && venv="${sv#*:}" && sv="${sv%%:*}"
    env="OPENBLAS_CORETYPE=Haswell CANDLE_NUM_THREADS=16 CANDLE_CPU_ISA=avx2 $venv"
    row conv &&
      env $env build-dev-$side/bin/conv_bench --benchmark_filter="$F" --benchmark_min_time=0.3 2>&1 |
      grep -E '^BM_' | awk -v s=$sv -v r=$r '{print "conv", s, r, $1, $2}' | tee -a $OUT/conv.txt
    if row upscale; then
      env $env timeout 120 python3 tools/bench_upscale_vs_torch.py --bin build-dev-$side/bin --scales 4 --threads 16 \
        --skip-torch > $OUT/upscale_${sv}_$r.log 2>&1
      echo "upscale $sv $r $(grep -E '^\| slim x4' $OUT/upscale_${sv}_$r.log | awk -F'|' '{print $4}')" | tee -a $OUT/upscale.txt
    fi
    if row mnist; then
      env $env timeout 120 python3 tools/bench_mnist_vs_torch.py --only candle \
        --candle build-dev-$side/bin/candle-mnist-training --data build-dev-fmnist --threads 16 > $OUT/mnist_${sv}_$r.log 2>&1
      echo "mnist $sv $r $(grep -E '^candle-cpp' $OUT/mnist_${sv}_$r.log | awk '{print $2}')" | tee -a $OUT/mnist.txt
    fi
  done
done
echo "== medians (ms for conv, s for the upscale's network and the epoch)"
python3 - "$OUT" <<'PY'
import collections, os, re, statistics, sys
out = sys.argv[1]; d = collections.defaultdict(list)
def lines(name):
    p = f"{out}/{name}"
    return open(p).readlines() if os.path.exists(p) else []
for line in lines("conv.txt"):
    _, side, _, name, ms = line.split()[:5]; d[(name, side)].append(float(ms))
for line in lines("upscale.txt"):
    f = line.split()
    if len(f) == 4: d[("upscale_slim_x4_512", f[1])].append(float(f[3]))
for line in lines("mnist.txt"):
    m = re.search(r"mnist (\w+) \d+ ([0-9.]+)s", line)
    if m: d[("mnist_epoch", m.group(1))].append(float(m.group(2)))
sides = sorted({k[1] for k in d} - {"before"})
for name in sorted({k[0] for k in d}):
    b = d.get((name, "before"), [])
    for side in sides:
        a = d.get((name, side), [])
        if b and a:
            mb, ma = statistics.median(b), statistics.median(a)
            print(f"{name}: before {mb:.2f} {side} {ma:.2f} ratio {ma/mb:.3f}  (runs {b} / {a})")
PY
echo "done at $((SECONDS-T0)) s"
