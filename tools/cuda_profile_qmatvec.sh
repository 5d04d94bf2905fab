#!/usr/bin/env bash
# On the GPU machine, after /tmp/bcuda has llm_speed and /tmp/models the random TinyLlama GGUFs
# (tools/device_run_llm_vulkan.sh or device_run_decode.sh): Nsight Compute's limiter sections
# (speed of light, memory workload, warp stalls, occupancy) for the first decode step's kernels
# matching KERNELS (default the quantized matvec and the activation quantizer), one layer's worth.
#   TYPE=q4_0 KERNELS='regex:qmatvec|quantize_acts' COUNT=5 tools/cuda_profile_qmatvec.sh
set -uo pipefail
f=/tmp/models/${SHAPE:-tinyllama}-${TYPE:-q4_0}.gguf
timeout ${NCU_TIMEOUT:-240} ncu --clock-control none -k "${KERNELS:-regex:qmatvec|quantize_acts}" \
  --launch-skip ${SKIP:-0} --launch-count ${COUNT:-5} \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
  --section LaunchStats --section SchedulerStats \
  /tmp/bcuda/bin/llm_speed $f --device cuda --pp 0 --tg 2 --reps 1 --decode graph 2>&1 |
  grep -E "qmatvec|quantize_acts|Duration|DRAM Throughput|Memory Throughput|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth|L1/TEX Cache Throughput|L2 Cache Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Size|Grid Size|Warp Cycles Per Issued|Issued Warp|No Eligible|Active Warps Per|Eligible Warps|Compute \(SM\)|Stall|est\. speedup|Waves Per SM|Shared Memory Configuration" |
  grep -vE "^\s*$" | cut -c1-160 | head -${LINES_MAX:-200}
