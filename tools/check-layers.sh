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
# Every CUDA kernel waits for the kernels it depends on before it reads anything: cuda::Graph makes
# the edges into them programmatic (a kernel may start before its inputs are written), so a kernel
# without pdl_entry() in its first lines would race (kernels/cuda/common.cuh)
if hits=$(python3 - $(git ls-files 'kernels/cuda/*.cu' 'kernels/cuda/*.cuh') <<'PY'
import re, sys
for path in sys.argv[1:]:
    s = open(path).read()
    for m in re.finditer(r"^[^/\n]*__global__", s, re.M):
        depth, j = 0, m.end()
        while j < len(s) and not (s[j] == "{" and depth == 0):
            depth += {"(": 1, ")": -1}.get(s[j], 0)
            j += 1
        top = s[j:].split("\n")[:24]
        if not any(re.match(r"\s*pdl_entry\(\);", line) for line in top):
            print(f"{path}:{s.count(chr(10), 0, m.start()) + 1}: a kernel without pdl_entry() at its top")
PY
); then
  [ -z "$hits" ] || { echo "check-layers: $hits"; exit 1; }
fi
echo "check-layers: ok"
