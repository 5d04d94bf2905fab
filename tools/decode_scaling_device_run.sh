#!/bin/bash
# Decode at 4 to 16 threads on the GPU machine's Xeon (issue 15): where candle-cpp's tg128 loses to
# llama.cpp's while its m = 1 kernels are faster on weights in the caches. The CPU, the m = 1 kernels
# beside ggml's with the weights from DRAM (--cold-mb), the decode tiles' software prefetch
# (CANDLE_QMM_DECODE_PREFETCH), the per-token fixed cost (a 22-layer model of tiny matrices) and
# TinyLlama's pp512 / tg128 beside llama.cpp, then the decoder's phases (CANDLE_DECODER_PROFILE=1) at
# 4 and 16 threads. Carry .devdeps and .devdeps-ggml (tools/devdeps-ggml.sh: llama.cpp's libraries,
# xz-packed); send the output to $OUT so that a timeout keeps what ran:
#   mkdir -p /tmp/ggml && tar -C /tmp/ggml -xJf .devdeps-ggml/ggml.tar.xz && source .devdeps/devenv.sh &&
#   CANDLE_LLAMA_LIB_DIR=/tmp/ggml bash tools/decode_scaling_device_run.sh > $OUT/run.log 2>&1
# Options (environment): KTHREADS (the kernels' thread counts), PF (prefetch distances), SCALE_THREADS,
# TYPES (TinyLlama types), SKIP_KERNELS=1, COLD7B=1, SKIP_LLM=1, PROFILE_THREADS, GROUP_AB=1 (the
# LLM bench with q|k|v and gate|up apart and grouped: CANDLE_GROUP_PROJECTIONS=0 / 1).
cd "$(dirname "$0")/.."
T0=$SECONDS
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source tools/device_build.sh
lscpu | grep -E "^(Model name|CPU\(s\)|Thread|Core|Socket|NUMA node\(s\)|L2|L3)"
grep -m1 flags /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx512_vnni|avx_vnni|amx_int8|avx512bw)$' | tr '\n' ' '; echo
BT=${BT:-build-dev-amx}
device_build $BT llm_speed candle-make-random-llama qmatmul_vs_ggml
echo "built at $((SECONDS-T0)) s"
LIB=${CANDLE_LLAMA_LIB_DIR:-$PWD/.devdeps/ggml}
kern() { timeout 120 $BT/bin/qmatmul_vs_ggml --lib-dir $LIB --rounds 3 --types q4_0,q4_k \
  --shapes 2048x2048,5632x2048,2048x5632 --m 1 --cold-mb 512 "$@" 2>&1 | grep -v "^repack\|^ggml_backend"; }
if [ "${SKIP_KERNELS:-0}" != 1 ]; then
  for th in ${KTHREADS:-1 4 16}; do kern --threads $th; done
  for pf in ${PF:-0 4096}; do echo "CANDLE_QMM_DECODE_PREFETCH=$pf"; CANDLE_QMM_DECODE_PREFETCH=$pf kern --threads 4 | tail -n +3; done
  echo "kernels at $((SECONDS-T0)) s"
fi
# issue 14's m = 1 cells on LLaMA-7B's shapes with the weights from DRAM (a decode's case), beside
# ggml's CPU_REPACK and its AMX buffer type (what llama.cpp's loader takes on an AMX CPU)
if [ "${COLD7B:-0}" = 1 ]; then
  # (CPU_REPACK has layouts for Q4_0 / Q4_K only; AMX for all five, as tools/amx_device_run.sh's KERN7B)
  for spec in "CPU_REPACK q4_0,q4_K" "AMX q4_0,q8_0,q4_K,q6_K,iq4_xs"; do
    set -- $spec
    timeout 200 $BT/bin/qmatmul_vs_ggml --lib-dir $LIB --threads 16 --rounds 3 --types q4_0,q8_0,q4_k,q6_k,iq4_xs \
      --m 1 --cold-mb 1024 --ggml-buft $1 --ggml-repack $2 2>&1 | grep -v "^repack\|^ggml_backend"
  done
  echo "cold 7B at $((SECONDS-T0)) s"
fi
[ "${SKIP_LLM:-0}" = 1 ] && exit 0
M=/tmp/models; mkdir -p $M
mk() { [ -f "$M/$1.gguf" ] || $BT/bin/candle-make-random-llama "$M/$1.gguf" "${@:2}" > /dev/null 2>&1; }
mk overhead-q4_0 --shape custom --layers 22 --dim 256 --ffn 512 --heads 8 --kv-heads 2 --vocab 1000 --type q4_0
for t in ${TYPES:-q4_0}; do mk tinyllama-$t --shape tinyllama --type $t; done
bench() { timeout 200 python3 tools/bench_llm_vs_llamacpp.py --llm-speed $BT/bin/llm_speed "$@" --reps 2 2>&1 | tail -n +2; }
echo "model                          t        test    candle llama.cpp  ratio    MiB MiB l.c wall s wall l.c"
bench $M/overhead-q4_0.gguf --threads 16 --pp 128 --tg 128
for th in ${SCALE_THREADS:-4 16}; do for t in ${TYPES:-q4_0}; do bench $M/tinyllama-$t.gguf --threads $th --pp ${PP:-128,512} --tg 128; done; done
# q|k|v and gate|up apart (CANDLE_GROUP_PROJECTIONS=0) and grouped, llama.cpp beside (GROUP_AB=1)
if [ "${GROUP_AB:-0}" = 1 ]; then
  for g in 0 1; do
    echo "CANDLE_GROUP_PROJECTIONS=$g"
    export CANDLE_GROUP_PROJECTIONS=$g
    for th in ${SCALE_THREADS:-4 16}; do
      bench $M/overhead-q4_0.gguf --threads $th --pp 128 --tg 128
      bench $M/tinyllama-q4_0.gguf --threads $th --pp 128,512 --tg 128
    done
  done
  unset CANDLE_GROUP_PROJECTIONS
fi
for pf in ${PF:-0 4096}; do
  echo "q4_0 4 threads prefetch $pf: $(CANDLE_QMM_DECODE_PREFETCH=$pf timeout 60 $BT/bin/llm_speed $M/tinyllama-q4_0.gguf --pp 1 --tg 128 --reps 2 --threads 4 2>&1 | grep tg)"
done
echo "llm at $((SECONDS-T0)) s"
# where a prompt's and a decode's time goes per thread count (the phases that do not shrink)
for th in ${PROFILE_THREADS:-4 16}; do
  for run in "--pp 512 --tg 0" "--pp 1 --tg 128"; do
    echo "CANDLE_DECODER_PROFILE=1 llm_speed tinyllama-q4_0 $run --threads $th:"
    CANDLE_DECODER_PROFILE=1 timeout 60 $BT/bin/llm_speed $M/tinyllama-q4_0.gguf $run --reps 1 --threads $th 2>&1 | grep -A14 "^BENCH\|decoder profile" | grep -v "^--"
  done
done
echo "done at $((SECONDS-T0)) s"
