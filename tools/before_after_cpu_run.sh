#!/bin/bash
# Before/after CPU check on the GPU machine's 16 cores (see /work/shared/device/README.md):
#   git archive <before-commit> > .devdeps/before.tar
#   source .devdeps/devenv.sh && bash tools/before_after_cpu_run.sh [build|test|bench]
# build: the working tree in build-dev-after and the archived commit in build-dev-before (Release, benches);
# test:  the tile / thread exactness tests at the machine's ISA and forced to AVX2 + Haswell;
# bench: conv_bench's blocks and the upscaler beside PyTorch for both builds, both ISAs.
# Logs under $OUT.
cd "$(dirname "$0")/.."
T0=$SECONDS
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
GEN=""; command -v ninja >/dev/null && GEN="-G Ninja"
ZL=""; [ -e /usr/lib/x86_64-linux-gnu/libz.so.1 ] && ZL="-DZLIB_LIBRARY=/usr/lib/x86_64-linux-gnu/libz.so.1"
step=${1:-build}
grep -m1 -o 'avx512f' /proc/cpuinfo >/dev/null && echo "cpu: AVX-512" || echo "cpu: no AVX-512"
if [ "$step" = build ]; then
  rm -rf build-dev-before-src && mkdir -p build-dev-before-src && tar -xf .devdeps/before.tar -C build-dev-before-src
  for side in after before; do
    src=.; [ $side = before ] && src=build-dev-before-src
    { cmake -S $src -B build-dev-$side $GEN $ZL -DCMAKE_BUILD_TYPE=Release -DCANDLE_BUILD_BENCH=ON -DCANDLE_VULKAN=OFF && \
      timeout 280 cmake --build build-dev-$side -j16 --target candle-upscale conv_bench test_core test_models test_conv; } \
      > $OUT/build_$side.log 2>&1
    echo "build $side rc $? at $((SECONDS-T0)) s"; grep -E "error|FAILED" $OUT/build_$side.log | head -5
  done
fi
if [ "$step" = test ]; then
  B=build-dev-after/bin
  $B/test_core --gtest_brief=1 --gtest_filter='GemmTileExact*:MatmulFirstCall*' 2>&1 | tail -3
  $B/test_models --gtest_brief=1 --gtest_filter='RdnModel.Tiled*' 2>&1 | tail -3
  for t in test_core test_conv test_models; do $B/$t --gtest_brief=1 > $OUT/$t.log 2>&1; echo "$t rc $?"; tail -2 $OUT/$t.log; done
  bash tools/ci-isa-check.sh build-dev-after > $OUT/isa_avx2.log 2>&1; echo "ci-isa-check (avx2/Haswell) rc $?"
  grep -E "PASSED|FAILED" $OUT/isa_avx2.log | head
fi
if [ "$step" = bench ]; then
  F='BM_conv2d/3x3_64_64/512|BM_conv2d/5x5_64_64/512|BM_conv2d/3x3_64_32/512|BM_conv2d/1x1_256_64/512|transpose'
  for side in before after; do
    for isa in native avx2; do
      env=""; [ $isa = avx2 ] && env="OPENBLAS_CORETYPE=Haswell" && [ $side = after ] && env="$env CANDLE_CPU_ISA=avx2"
      env $env CANDLE_NUM_THREADS=16 build-dev-$side/bin/conv_bench --benchmark_filter="$F" --benchmark_min_time=0.2 \
        > $OUT/conv_${side}_$isa.log 2>&1
      echo "== conv_bench $side $isa (16 threads)"; grep -E '^BM_' $OUT/conv_${side}_$isa.log | awk '{print $1, $2, $3}'
      env $env timeout 120 python3 tools/bench_upscale_vs_torch.py --bin build-dev-$side/bin --scales 4 --threads 16 \
        > $OUT/upscale_${side}_$isa.log 2>&1
      echo "== upscale x4 $side $isa"; tail -6 $OUT/upscale_${side}_$isa.log
    done
  done
fi
echo "done at $((SECONDS-T0)) s"
