#!/usr/bin/env bash
# On the GPU machine (see ../shared/device/README.md): build, test, and the 1 -> 16 thread
# scaling benchmark of issue 2 beside PyTorch. Output: $OUT/*.log and $OUT/scaling.md.
set -uo pipefail
source .devdeps/devenv.sh
B=/tmp/candle-build
rm -f $B/CMakeCache.txt
# Debian 12's OpenMP build of OpenBLAS (carried in .devdeps), the same library as on the dev machine
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DZLIB_LIBRARY=/usr/lib/x86_64-linux-gnu/libz.so.1 -DZLIB_LIBRARY_RELEASE=/usr/lib/x86_64-linux-gnu/libz.so.1 -DOPENBLAS_LIBRARY=/opt/devdeps/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so -DOPENBLAS_INCLUDE_DIR=/opt/devdeps/usr/include/x86_64-linux-gnu/openblas-openmp > $OUT/configure.log 2>&1 || { tail -30 $OUT/configure.log; exit 1; }
cmake --build $B -j16 > $OUT/build.log 2>&1 || { grep -E "error" $OUT/build.log | head -30; exit 1; }
(cd $B && ctest -j16 > $OUT/ctest.log 2>&1); tail -3 $OUT/ctest.log
nproc; lscpu | grep -E "Model name|Thread|Core|Socket" | head -5
python3 tools/bench_core_vs_torch.py --bin $B/bin --threads ${THREADS:-1,16} --min-time 0.1 > $OUT/scaling.md 2>&1
cat $OUT/scaling.md
# issue 3: the 3x3 64->64 conv at 2048x2048, 1 -> 16 threads, beside PyTorch
python3 tools/bench_conv_vs_torch.py --bin $B/bin --threads 1,16 --sizes 2048 --filter "${CONV_FILTER:-3x3_64_64}" --min-time 0.2 --repeats 3 > $OUT/conv_scaling.md 2>&1
cat $OUT/conv_scaling.md
