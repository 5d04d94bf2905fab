#!/usr/bin/env bash
# Fails when code above the backends reaches past the backend interface (DESIGN §2, "one door"):
# in src/ops, src/nn, src/models, src/datasets, examples and tools, no call into a backend's
# namespace (cpu::, vulkan::), no is_cpu() branch, no CpuStorage made or cast to (a custom op's
# cpu_fwd may take one: that is the SDK), and no include of a backend's private headers
# (src/cpu, src/vulkan, src/cuda, src/rocm, src/metal). A custom op's CPU forward makes CPU
# storages through the SDK: such a line ends with the marker comment "// custom-op SDK".
set -euo pipefail
cd "$(dirname "$0")/.."
dirs=(src/ops src/nn src/models src/datasets examples tools/tfjs_convert)
pattern='\b(cpu|vulkan|cuda|rocm|metal)::[a-z_]|is_cpu\(\)|CpuStorage::|_cast<(const )?CpuStorage|#include "(cpu|vulkan|cuda|rocm|metal)/'
if hits=$(git ls-files "${dirs[@]}" | grep -E '\.(cpp|h)$' | xargs grep -nE "$pattern" | grep -v '// custom-op SDK$'); then
  echo "check-layers: code above the backends reaches into a backend:"
  echo "$hits"
  exit 1
fi
echo "check-layers: ok"
