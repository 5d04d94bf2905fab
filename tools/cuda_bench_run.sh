#!/usr/bin/env bash
# On the GPU machine, after tools/cuda_device_run.sh built /tmp/bcuda with
# EXTRA_TARGETS="gpu_ops_speed candle-upscale candle-mnist-training": the CUDA benchmarks beside
# PyTorch in the same run (ops, the whole candle-upscale process, one MNIST epoch of 60,000 images).
#   source .devdeps/devenv.sh && tools/cuda_bench_run.sh [ops] [conv_own] [upscale] [upscale_own] [process] [mnist]
#     [qmatmul] [ops:NAME] (ops of gpu_ops_speed whose name contains NAME)
# (default: all). conv_own / upscale_own: the backend's own convolutions (CANDLE_CUDA_CUDNN=0).
# Carry .devdata (tools/make_fmnist_repeated.py's input: .devdata/fmnist-small holds the t10k files).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=/tmp/bcuda
parts="${*:-ops conv_own upscale upscale_own process mnist}"
for p in $parts; do
  case $p in
    ops)
      echo "== ops (candle / PyTorch)"
      timeout 240 python3 tools/bench_cuda_vs_torch.py $B > "$OUT/ops.log" 2>&1
      grep -v "^#" "$OUT/ops.log" | tail -60 ;;
    ops:*)
      echo "== ${p#ops:} (candle / PyTorch)"
      timeout 120 python3 tools/bench_cuda_vs_torch.py $B --only "${p#ops:}" > "$OUT/$p.log" 2>&1
      grep -v "^#" "$OUT/$p.log" | tail -12 ;;
    qmatmul)
      echo "== quantized matmul (gpu_qmatmul_speed)"
      timeout 120 $B/bin/gpu_qmatmul_speed > "$OUT/qmatmul.log" 2>&1
      tail -40 "$OUT/qmatmul.log" ;;
    conv_own)
      echo "== conv2d on the backend's own kernels (CANDLE_CUDA_CUDNN=0) / PyTorch cuDNN"
      CANDLE_CUDA_CUDNN=0 timeout 120 python3 tools/bench_cuda_vs_torch.py $B --only conv2d 2>&1 | tail -12 ;;
    upscale|upscale_own)
      env=""
      [ $p = upscale_own ] && env="CANDLE_CUDA_CUDNN=0"
      for tf32 in 0 1; do
        echo "== candle-upscale compute, $env CANDLE_CUDA_TF32=$tf32 (read the tf32=$tf32 columns)"
        env $env CANDLE_CUDA_TF32=$tf32 timeout 200 python3 tools/bench_upscale_vulkan_vs_torch.py --bin $B/bin \
          --device cuda --sizes 512,1024 --scales 4 --repeat 5 --warmup 2 2>&1 | tail -6
      done ;;
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
