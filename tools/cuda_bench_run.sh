#!/usr/bin/env bash
# On the GPU machine, after tools/cuda_device_run.sh built /tmp/bcuda with
# EXTRA_TARGETS="gpu_ops_speed candle-upscale candle-mnist-training": the CUDA benchmarks beside
# PyTorch in the same run (ops, the whole candle-upscale process, one MNIST epoch of 60,000 images).
#   source .devdeps/devenv.sh && tools/cuda_bench_run.sh [ops] [process] [mnist]   (default: all)
# Carry .devdata (tools/make_fmnist_repeated.py's input: .devdata/fmnist-small holds the t10k files).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=/tmp/bcuda
parts="${*:-ops process mnist}"
for p in $parts; do
  case $p in
    ops)
      echo "== ops (candle / PyTorch)"
      timeout 240 python3 tools/bench_cuda_vs_torch.py $B > "$OUT/ops.log" 2>&1
      grep -v "^#" "$OUT/ops.log" | tail -60 ;;
    process)
      echo "== the whole candle-upscale process, --device cuda, 1024x1024 x4"
      for m in esrgan-medium esrgan-slim; do
        timeout 150 python3 tools/bench_upscale_process.py --bin $B/bin --device cuda --torch-device cuda \
          --model $m --scale 4 --size 1024 --threads 16 --runs 3 2>&1 | tail -6
      done ;;
    mnist)
      echo "== MNIST CNN, one epoch of 60,000 images (t10k x 6), cuda"
      python3 tools/make_fmnist_repeated.py .devdata/fmnist-small /tmp/fm60 &&
        timeout 200 python3 tools/bench_mnist_vs_torch.py --candle $B/bin/candle-mnist-training --data /tmp/fm60 \
          --device cuda --threads 16 2>&1 | tail -8 ;;
  esac
done
