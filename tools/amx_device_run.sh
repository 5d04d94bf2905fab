#!/bin/bash
# The AMX kernels (issue 15) on the GPU machine's Xeon: the packed-weight tests with the real tiles,
# the kernels against ggml's with AMX and with it off (CANDLE_QMATMUL_ISA=avx512), then the LLM
# bench beside llama.cpp (which uses AMX there too). Carry .devdeps and .devdeps-ggml (tools/devdeps-ggml.sh):
#   mkdir -p /tmp/ggml && tar -C /tmp/ggml -xJf .devdeps-ggml/ggml.tar.xz && source .devdeps/devenv.sh &&
#   CANDLE_LLAMA_LIB_DIR=/tmp/ggml bash tools/amx_device_run.sh
# Options (environment): QM, QTYPES, TYPES, THREADS, KERN7B=1 (issue 14's 7B-shape table, every type),
# SKIP_BENCH=1 (no LLM table beside llama.cpp), AB_TYPES (the pp512 AMX A/B), CHUNK_TYPES (pp512 with
# CANDLE_PREFILL_CHUNK 0 / 256), SPLITS / SPLIT_TYPES (the decode split), WAIT_TYPES (OMP_WAIT_POLICY A/B).
cd "$(dirname "$0")/.."
T0=$SECONDS
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source tools/device_build.sh
grep -m1 flags /proc/cpuinfo | tr ' ' '\n' | grep -E '^amx' | tr '\n' ' '; echo
BT=build-dev-amx
{ cmake -S . -B $BT $(device_cmake_args) -DCMAKE_BUILD_TYPE=Release -DCANDLE_VULKAN=OFF && \
  timeout 300 cmake --build $BT -j16 --target test_quantized llm_speed candle-make-random-llama qmatmul_vs_ggml; } \
  > "$OUT/build.log" 2>&1 || { echo "build failed"; tail -30 "$OUT/build.log"; exit 1; }
echo "built at $((SECONDS-T0)) s"
timeout 120 $BT/bin/test_quantized --gtest_filter='QMatMulCpuPacked.*:QMatMul.*:QMatMulCpuErrors.*:QMatMulCpuValues.*' 2>&1 | tail -n 25
# the AVX2 kernels with AVX-VNNI (a Xeon since Sapphire Rapids has it; the dev machine's Zen 4 does not)
echo "forced avx2 (AVX-VNNI variant where the CPU has it):"
CANDLE_QMATMUL_ISA=avx2 timeout 120 $BT/bin/test_quantized --gtest_filter='QMatMulCpuPacked.*:QMatMul.*:QMatMulCpuValues.*' 2>&1 | tail -n 3
export CANDLE_LLAMA_LIB_DIR=${CANDLE_LLAMA_LIB_DIR:-$PWD/.devdeps/ggml}
for isa in amx avx512; do
  CANDLE_QMATMUL_ISA=$isa timeout 90 $BT/bin/qmatmul_vs_ggml --lib-dir $CANDLE_LLAMA_LIB_DIR --threads ${THREADS:-16} \
    --rounds 3 --types ${QTYPES:-q4_0,q8_0,q4_k} --shapes 2048x2048,5632x2048,2048x5632 --m ${QM:-16,128,512} 2>&1 | tail -n +2 | tee -a $OUT/kernels.log
done
echo "kernels at $((SECONDS-T0)) s"
# issue 14's table at 16 threads: LLaMA-7B's shapes, every benchmarked type, the default ISA
if [ "${KERN7B:-0}" = 1 ]; then
  timeout 200 $BT/bin/qmatmul_vs_ggml --lib-dir $CANDLE_LLAMA_LIB_DIR --threads ${THREADS:-16} --rounds 3 \
    --types q4_0,q8_0,q4_k,q6_k,iq4_xs --m 1,128,512 2>&1 | grep -v "^repack" | tee $OUT/kernels7b.log
  # llama.cpp's loader prefers its AMX buffer type on an AMX CPU, for the types its AMX kernels take
  timeout 200 $BT/bin/qmatmul_vs_ggml --lib-dir $CANDLE_LLAMA_LIB_DIR --threads ${THREADS:-16} --rounds 3 \
    --types q4_0,q8_0,q4_k,q6_k,iq4_xs --m 1,128,512 --ggml-buft AMX --ggml-repack q4_0,q8_0,q4_K,q6_K,iq4_xs 2>&1 \
    | tee $OUT/kernels7b_amx.log
  echo "7B kernels at $((SECONDS-T0)) s"
fi
M=/tmp/models; mkdir -p $M
for t in ${TYPES:-q4_0 q8_0 q4_k_m f16}; do
  [ -f $M/tinyllama-$t.gguf ] || $BT/bin/candle-make-random-llama $M/tinyllama-$t.gguf --shape tinyllama --type $t > /dev/null 2>&1
done
[ "${SKIP_BENCH:-0}" = 1 ] || timeout ${BENCH_TIMEOUT:-300} python3 tools/bench_llm_vs_llamacpp.py --llm-speed $BT/bin/llm_speed $M/tinyllama-*.gguf \
  --threads ${THREADS:-16} --pp ${PP:-128,512} --tg ${TG:-128} --reps ${REPS:-2} --json $OUT/llm_bench.json 2>&1 | tee $OUT/llm_bench.log | tail -n 8
for t in ${AB_TYPES:-q4_0 q8_0 q4_k_m}; do for isa in amx avx512; do
  echo "$t $isa: $(CANDLE_QMATMUL_ISA=$isa timeout 60 $BT/bin/llm_speed $M/tinyllama-$t.gguf --pp 512 --tg 0 --reps 2 --threads ${THREADS:-16} 2>&1 | grep BENCH)"
done; done
# prompts in chunks of 256 (the CPU's default) against all at once
for t in ${CHUNK_TYPES:-q4_0 q8_0}; do for ch in 0 256; do
  echo "$t prefill chunk $ch: $(CANDLE_PREFILL_CHUNK=$ch timeout 60 $BT/bin/llm_speed $M/tinyllama-$t.gguf --pp 512 --tg 0 --reps 2 --threads ${THREADS:-16} 2>&1 | grep BENCH)"
done; done
# decode: the rows' split (chunks per thread) of the m = 1 matmuls
for t in ${SPLIT_TYPES:-q4_0 q4_k_m}; do for sp in ${SPLITS:-1 2 4 8}; do
  echo "$t split $sp: $(CANDLE_QMM_DECODE_SPLIT=$sp timeout 60 $BT/bin/llm_speed $M/tinyllama-$t.gguf --pp 1 --tg 128 --reps 2 --threads ${THREADS:-16} 2>&1 | grep tg)"
done; done
# OpenMP's waiting threads: libgomp spins 300,000 times by default (100 where it counts more threads
# than CPUs) before sleeping; a decode step has ~88 parallel regions
for t in ${WAIT_TYPES:-q4_0}; do for wp in default active; do
  echo "$t OMP_WAIT_POLICY=$wp: $( ( [ $wp = default ] || export OMP_WAIT_POLICY=$wp; timeout 60 $BT/bin/llm_speed $M/tinyllama-$t.gguf --pp 128 --tg 128 --reps 2 --threads ${THREADS:-16} 2>&1 | grep BENCH | tr '\n' ' ') )"
done; done
echo "done at $((SECONDS-T0)) s"
