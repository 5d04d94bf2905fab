#!/usr/bin/env bash
# On the GPU machine, after tools/cuda_device_run.sh built /tmp/bcuda with EXTRA_TARGETS including
# "llm_speed candle-make-random-llama" and tools/llm_cuda_run.sh wrote /tmp/models: the kernels of
# graph decoding under Nsight Compute (GPU time of each kernel, one metric pass), summed by kernel
# name over the profiled launches, and the kernel sequence of one token. Writes $OUT/ncu_<type>.csv
# and prints the summary.
#   source .devdeps/devenv.sh && TYPES="q4_0" tools/cuda_profile_decode.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}
B=/tmp/bcuda/bin
for t in ${TYPES:-q4_0}; do
  f=/tmp/models/${SHAPE:-tinyllama}-$t.gguf
  timeout ${NCU_TIMEOUT:-200} ncu --csv --clock-control none --cache-control none --metrics gpu__time_duration.sum --launch-count ${COUNT:-1500} \
    $B/llm_speed $f --device cuda --pp 0 --tg ${TG:-3} --reps 1 --decode graph > $OUT/ncu_$t.csv 2> $OUT/ncu_$t.err
  echo "$t: ncu rc=$?"
  python3 - "$OUT/ncu_$t.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows: print("no rows"); sys.exit()
h = rows[0]; ki = h.index("Kernel Name"); vi = h.index("Metric Value"); ui = h.index("Metric Unit")
tot = collections.Counter(); cnt = collections.Counter(); seq = []
for r in rows[1:]:
    if r[vi] == "" : continue
    v = float(r[vi].replace(",", "")); u = r[ui]
    v = v / 1000 if u in ("ns", "nsecond") else v if u in ("us", "usecond") else v * 1000
    name = r[ki].split("(")[0][:90]
    tot[name] += v; cnt[name] += 1; seq.append((name, v))
all_t = sum(tot.values())
print(f"{len(seq)} kernels, {all_t:.0f} us in all")
for n, v in tot.most_common(40): print(f"{v:10.1f} us {cnt[n]:6d} x {v/cnt[n]:7.2f} us  {n}")
print("--- the last 150 launches in order")
for n, v in seq[-150:]: print(f"{v:7.2f} {n}")
PY
done
