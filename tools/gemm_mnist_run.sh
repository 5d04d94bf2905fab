#!/bin/bash
# On the GPU machine's 16-core CPU (see /work/shared/device/README.md), after
#   git archive <before-commit> > .devdeps/before.tar
#   source .devdeps/devenv.sh && bash tools/gemm_mnist_run.sh
# 1. builds this tree (build-dev-after) and the archived commit (build-dev-before);
# 2. the built-in GEMM's AVX2 kernels on conv-shaped blocks (one thread) beside OpenBLAS's
#    Haswell kernel, for K panel lengths CANDLE_GEMM_KC_TUNE (tuning only), and the 5x5 / 3x3
#    convs at 16 threads;
# 3. the Fashion-MNIST epoch before and after, native ISA and forced to AVX2 + Haswell, beside
#    PyTorch in the same run (the IDX files are synthetic: the epoch's time does not depend on
#    the pixels; the machine has no copy of the dataset);
# 4. the upscaler's first and later passes at 2 threads, per layer (CANDLE_RDN_PROFILE).
# Logs under $OUT.
cd "$(dirname "$0")/.."
T0=$SECONDS
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
GEN=""; command -v ninja >/dev/null && GEN="-G Ninja"
ZL=""; [ -e /usr/lib/x86_64-linux-gnu/libz.so.1 ] && ZL="-DZLIB_LIBRARY=/usr/lib/x86_64-linux-gnu/libz.so.1"
KCS=${KCS:-256 384 512}
grep -m1 -o 'avx512f' /proc/cpuinfo >/dev/null && echo "cpu: AVX-512" || echo "cpu: no AVX-512"
grep -m1 'model name' /proc/cpuinfo
rm -rf build-dev-before-src && mkdir -p build-dev-before-src && tar -xf .devdeps/before.tar -C build-dev-before-src
for side in after before; do
  src=.; [ $side = before ] && src=build-dev-before-src
  tg="conv_bench candle-mnist-training candle-upscale"; [ $side = after ] && tg="$tg matmul_bench"
  { cmake -S $src -B build-dev-$side $GEN $ZL -DCMAKE_BUILD_TYPE=Release -DCANDLE_BUILD_BENCH=ON -DCANDLE_VULKAN=OFF && \
    timeout 280 cmake --build build-dev-$side -j16 --target $tg; } > $OUT/build_$side.log 2>&1
  echo "build $side rc $? at $((SECONDS-T0)) s"; grep -E "error|FAILED" $OUT/build_$side.log | head -5
done
A=build-dev-after/bin
echo "== BM_gemm_conv, 1 thread: OpenBLAS Haswell (which=0) and built-in AVX2 (which=1) per K panel"
OPENBLAS_CORETYPE=Haswell CANDLE_CPU_ISA=avx2 $A/matmul_bench --benchmark_filter='BM_gemm_conv/.*/0' \
  --benchmark_min_time=0.3 2>&1 | grep -E '^BM_' | awk '{print $1, $2, $3, $NF}'
for kc in $KCS; do
  echo "-- KC $kc"
  OPENBLAS_CORETYPE=Haswell CANDLE_CPU_ISA=avx2 CANDLE_GEMM_KC_TUNE=$kc $A/matmul_bench \
    --benchmark_filter='BM_gemm_conv/.*/1' --benchmark_min_time=0.3 2>&1 | grep -E '^BM_' | awk '{print $1, $2, $3}'
  CANDLE_NUM_THREADS=16 CANDLE_CPU_ISA=avx2 CANDLE_GEMM_KC_TUNE=$kc $A/conv_bench \
    --benchmark_filter='BM_conv2d/(5x5_64_64|3x3_64_64|3x3_64_32)/512' --benchmark_min_time=0.3 2>&1 |
    grep -E '^BM_' | awk '{print $1, $2, $3}'
done
echo "-- native (AVX-512), KC default"
CANDLE_NUM_THREADS=16 $A/conv_bench --benchmark_filter='BM_conv2d/(5x5_64_64|3x3_64_64|3x3_64_32)/512' \
  --benchmark_min_time=0.3 2>&1 | grep -E '^BM_' | awk '{print $1, $2, $3}'
echo "== Fashion-MNIST epoch (synthetic IDX), before / after, 16 threads"
mkdir -p build-dev-fmnist
python3 - <<'EOF'
import gzip, os, random, struct
d = "build-dev-fmnist"; random.seed(1)
def w(name, magic, dims, n):
    with gzip.open(os.path.join(d, name), "wb", compresslevel=1) as f:
        f.write(struct.pack(">I", magic) + b"".join(struct.pack(">I", x) for x in dims))
        f.write(bytes(random.getrandbits(8) % (10 if magic == 2049 else 256) for _ in range(n)))
for split, n in (("train", 60000), ("t10k", 10000)):
    w(f"{split}-images-idx3-ubyte.gz", 2051, [n, 28, 28], n * 784)
    w(f"{split}-labels-idx1-ubyte.gz", 2049, [n], n)
EOF
for isa in native avx2; do
  for side in before after; do
    env=""; [ $isa = avx2 ] && env="OPENBLAS_CORETYPE=Haswell" && [ $side = after ] && env="$env CANDLE_CPU_ISA=avx2"
    only=""; [ $side = after ] && only=""
    env $env timeout 200 python3 tools/bench_mnist_vs_torch.py --candle build-dev-$side/bin/candle-mnist-training \
      --data build-dev-fmnist --threads 16 > $OUT/mnist_${side}_$isa.log 2>&1
    echo "-- mnist $side $isa"; tail -4 $OUT/mnist_${side}_$isa.log
  done
done
echo "== upscale x4 512x512 slim, 2 threads, 3 passes, per layer"
CANDLE_NUM_THREADS=2 CANDLE_RDN_PROFILE=1 $A/candle-upscale --device cpu --scale 4 --repeat 3 \
  models/esrgan-slim/samples/4x/result.png build-dev-fmnist/up.png > $OUT/profile.log 2>&1
grep -E "run|wrote" $OUT/profile.log
echo "done at $((SECONDS-T0)) s"
