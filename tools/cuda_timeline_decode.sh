#!/usr/bin/env bash
# On the GPU machine: where a recorded decode step's time goes, kernel by kernel, as it runs in the
# graph (CUPTI's activity records through tools/probe/cupti_trace.cpp, preloaded: each node's start and
# duration, so the gaps between kernels and their overlap under programmatic launches show, which Nsight
# Compute's serialized launches hide; the GPU machine has no Nsight Systems). Builds the CUDA backend and
# llm_speed in /tmp/bcuda, writes random GGUFs to /tmp/models, prints tg128 of each and, for the
# last whole token of a short traced run, the kernels in order (start gap, duration) and a summary
# by kernel name (count, sum of durations, sum of the gaps before them).
#   source .devdeps/devenv.sh && SPECS="tinyllama:q4_0 llama7b:q4_0" tools/cuda_timeline_decode.sh
# Options: SPECS (shape:type ...), TG (tokens traced, default 8), SKIP_BUILD=1, SEQ=1 (print the
# kernel sequence), AB_VAR / AB_VALUES (tg128 once per value of a switch), QUEUED="2 64 200" (the step
# replayed back to back after that many tokens), NO_TRACE=1, TESTS=1 with EXTRA_TARGETS=test_cuda
# (and TESTS_FILTER) runs the CUDA tests first.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
b=/tmp/bcuda
start=$(date +%s)
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  export PKG_CONFIG_LIBDIR=/opt/devdeps/usr/lib/x86_64-linux-gnu/pkgconfig PKG_CONFIG_SYSROOT_DIR=/opt/devdeps
  zl=""
  [ -e /usr/lib/x86_64-linux-gnu/libz.so.1 ] && zl="-DZLIB_LIBRARY=/usr/lib/x86_64-linux-gnu/libz.so.1"
  { cmake -S . -B $b -G Ninja $zl -DCMAKE_BUILD_TYPE=Release -DCANDLE_VULKAN=OFF -DCANDLE_BUILD_BENCH=ON \
      -DCANDLE_BUILD_EXAMPLES=ON &&
    timeout 420 cmake --build $b -j16 --target candle_cuda llm_speed candle-make-random-llama \
      ${EXTRA_TARGETS:-}; } > $OUT/build.log 2>&1 ||
    { echo "build failed"; grep -E "error" $OUT/build.log | head; tail -5 $OUT/build.log; exit 1; }
  echo "built in $(( $(date +%s) - start )) s"
fi
if [ -n "${TESTS:-}" ]; then
  $b/bin/test_cuda ${TESTS_FILTER:+--gtest_filter=$TESTS_FILTER} > $OUT/tc.log 2>&1
  echo "test_cuda rc=$? $(grep -cE '^\[       OK' $OUT/tc.log) ok"
  grep -E "^\[  FAILED|Failure" $OUT/tc.log | cut -c1-200 | head -12
fi
# the tracer: tools/probe/cupti_trace.cpp (CUPTI's activity records, one per kernel node of a graph)
CUPTI_LIB=$(dirname "$(find /usr/local/cuda/ -name 'libcupti.so' 2>/dev/null | head -1)")
TRACER=/tmp/libcupti_trace.so
g++ -O2 -shared -fPIC tools/probe/cupti_trace.cpp -I/usr/local/cuda/include -L"$CUPTI_LIB" -lcupti \
  -Wl,-rpath,"$CUPTI_LIB" -o $TRACER > $OUT/tracer.log 2>&1 || { echo "tracer build failed"; cat $OUT/tracer.log; TRACER=; }
M=/tmp/models
mkdir -p $M
for spec in ${SPECS:-tinyllama:q4_0}; do
  shape=${spec%%:*} t=${spec##*:}
  f=$M/$shape-$t.gguf
  [ -f $f ] || timeout 200 $b/bin/candle-make-random-llama $f --shape $shape --type $t > /dev/null 2>&1
  for v in ${AB_VALUES:-default}; do
    env_set=""
    [ "$v" != default ] && env_set="${AB_VAR:?AB_VAR names the switch}=$v"
    r=$(env $env_set timeout 100 $b/bin/llm_speed $f --device cuda --pp ${PP:-512} --tg 128 --reps ${REPS:-2} \
          --decode graph 2>&1 | grep -E 'BENCH|error' | tr '\n' ' ')
    echo "$shape $t ${env_set:-(default)}: ${r//BENCH test=/}"
  done
  # the recorded step replayed back to back after tg N (KV buffers of N + 16 positions, N cached):
  # how a step's time grows with the context (decode attention)
  for n in ${QUEUED:-}; do
    echo "  $shape $t after tg$n: $(timeout 100 $b/bin/llm_speed $f --device cuda --pp 0 --tg $n --reps 1 \
      --decode graph --host-profile 1 2>&1 | grep -oE '[0-9.]+ us a step')"
  done
  [ -z "$TRACER" ] || [ "${NO_TRACE:-0}" = 1 ] && continue
  csv=$OUT/trace_$shape-$t.csv
  CUPTI_TRACE_OUT=$csv LD_PRELOAD=$TRACER timeout 200 $b/bin/llm_speed $f --device cuda --pp 0 --tg ${TG:-8} \
    --reps 1 --decode graph > $OUT/trace_$shape-$t.log 2>&1 || { echo "traced run failed"; tail -3 $OUT/trace_$shape-$t.log; }
  python3 - "$csv" "${SEQ:-0}" <<'PY'
import re, sys, collections
ks = []
for line in open(sys.argv[1]):
    s, e, g, name = line.rstrip("\n").split(",", 3)
    name = name.replace("(anonymous namespace)::", "").replace("candle::cuda_k::", "")
    name = re.sub(r"^void ", "", re.sub(r"\(.*", "", name))[:70]  # no parameter list
    ks.append((int(s), int(e) - int(s), name, int(g)))
ks.sort()
names = [k[2] for k in ks]
period = next((p for p in range(20, len(ks) // 2) if names[-p:] == names[-2 * p:-p]), None)
if not period:
    print("no repeating token found"); sys.exit()
tok = ks[-period:]
span = (tok[-1][0] + tok[-1][1] - tok[0][0]) / 1000
busy = sum(k[1] for k in tok) / 1000
print(f"one token: {period} kernels, {span:.1f} us first start to last end, {busy:.1f} us in kernels "
      f"(overlapping ones counted twice), graph {tok[0][3]}")
tot = collections.Counter(); gap = collections.Counter(); cnt = collections.Counter()
prev_end = None
seq = []
for s, d, n, _ in tok:
    g = (s - prev_end) / 1000 if prev_end is not None else 0.0
    prev_end = s + d if prev_end is None else max(prev_end, s + d)
    tot[n] += d / 1000; gap[n] += g; cnt[n] += 1
    seq.append((g, d / 1000, n))
print(f"{'kernel':70s} {'count':>5s} {'sum us':>8s} {'gaps us':>8s} {'mean us':>8s}")
for n, v in tot.most_common():
    print(f"{n:70s} {cnt[n]:5d} {v:8.1f} {gap[n]:8.1f} {v / cnt[n]:8.2f}")
if sys.argv[2] == "1":
    for g, d, n in seq[:60]: print(f"  gap {g:6.2f} dur {d:7.2f} {n}")
PY
done
echo "end $(( $(date +%s) - start )) s"
