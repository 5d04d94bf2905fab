#!/usr/bin/env bash
# The libFuzzer targets (tests/fuzz): configure the `asan` preset (clang, ASan + UBSan; CI has
# already built it for its sanitizer test run, so only the fuzzers link here) and build
# candle_fuzzers, replay every committed corpus (tests/fuzz/corpus/<name>/) as a regression test,
# then fuzz each target for FUZZ_SECONDS (default 45) from a scratch copy of its corpus.
# Exits non-zero on any crash, leak, timeout or out-of-memory, naming the saved input.
#
#   tools/ci-fuzz.sh                 build, replay, fuzz every target
#   FUZZ_SECONDS=600 tools/ci-fuzz.sh safetensors zip    longer, two targets
#   FUZZ_SECONDS=0 tools/ci-fuzz.sh  build and replay only
# CANDLE_FUZZ_DEADLINE (a Unix time; .ci/run sets it) shortens the random fuzzing so that it ends
# by then, shared evenly among the targets left; the replays always run.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
start=$(date +%s)
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root} CCACHE_NOHASHDIR=true
FUZZ_SECONDS=${FUZZ_SECONDS:-45}
# FUZZ_PRESET=fuzz: the static, fuzzers-only build instead
preset=${FUZZ_PRESET:-asan}
B=build-$preset
echo "== fuzz build (cmake --preset $preset: clang, ASan + UBSan + libFuzzer)"
cmake --preset "$preset" >/dev/null
cmake --build "$B" --target candle_fuzzers
if (($#)); then targets=("$@"); else mapfile -t targets < <(grep -v '^$' "$B/fuzzers.txt"); fi
echo "== fuzz build done after $(( $(date +%s) - start )) s; targets: ${targets[*]}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
limits=(-rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=10)
work=$(mktemp -d /tmp/candle-fuzz-XXXXXX)
failed=()
left=${#targets[@]}
for t in "${targets[@]}"; do
  left=$((left - 1))
  exe=$B/bin/fuzz_$t
  corpus=tests/fuzz/corpus/$t
  [ -x "$exe" ] || { echo "ci-fuzz: no fuzzer $exe"; exit 1; }
  mkdir -p "$work/$t/artifacts" "$work/$t/corpus"
  echo "== fuzz_$t: replay of $corpus ($(find "$corpus" -type f | wc -l) inputs)"
  # -runs=0 over a directory runs each input once (and fails on the first finding)
  if ! "$exe" "${limits[@]}" -runs=0 -artifact_prefix="$work/$t/artifacts/" "$corpus" \
      > "$work/$t/replay.log" 2>&1; then
    tail -40 "$work/$t/replay.log"
    echo "ci-fuzz: fuzz_$t fails on its committed corpus (log $work/$t/replay.log; inputs saved under $work/$t/artifacts/)"
    ls -l "$work/$t/artifacts/" || true
    failed+=("$t (replay)")
    continue
  fi
  secs=$FUZZ_SECONDS
  if [ -n "${CANDLE_FUZZ_DEADLINE:-}" ]; then
    # what is left before the deadline, less ~5 s per replay still to run, shared by this target and the rest
    share=$(( (CANDLE_FUZZ_DEADLINE - $(date +%s) - 5 * left) / (left + 1) ))
    if ((share < secs)); then
      secs=$((share > 0 ? share : 0))
      echo "== fuzz_$t: ${secs} s of random fuzzing instead of ${FUZZ_SECONDS} (CANDLE_FUZZ_DEADLINE)"
    fi
  fi
  ((secs > 0)) || continue
  echo "== fuzz_$t: ${secs} s"
  cp -r "$corpus/." "$work/$t/corpus/"
  if ! "$exe" "${limits[@]}" -max_total_time="$secs" -print_final_stats=1 \
      -artifact_prefix="$work/$t/artifacts/" "$work/$t/corpus" > "$work/$t/fuzz.log" 2>&1; then
    grep -E '^==[0-9]+==|SUMMARY|ERROR|runtime error|Test unit written|Base64' "$work/$t/fuzz.log" | head -20
    tail -5 "$work/$t/fuzz.log"
    echo "ci-fuzz: fuzz_$t found a problem (log $work/$t/fuzz.log); the input is saved as:"
    ls -l "$work/$t/artifacts/"
    echo "  (reproduce: $exe <input>; add it to $corpus/ once fixed)"
    failed+=("$t")
    continue
  fi
  grep -E 'stat::number_of_executed_units|stat::peak_rss_mb' "$work/$t/fuzz.log" | tr '\n' ' '
  echo
done
echo "== ci-fuzz done in $(( $(date +%s) - start )) s"
if ((${#failed[@]})); then
  echo "ci-fuzz: FAILED: ${failed[*]} (scratch directory kept: $work)"
  exit 1
fi
rm -rf "$work"
echo "ci-fuzz: ok"
