#!/usr/bin/env bash
# Lets the GPU machine build the Vulkan backend within the carry limit (../shared/device/README.md):
# instead of glslang-tools + spirv-tools (6 MB of packages), carries the SPIR-V this machine compiled
# (build-release/src/vulkan/spv, ~0.4 MB packed), Debian's libvulkan-dev (vulkan.hpp) and a stand-in
# glslangValidator that copies the carried .spv for each kernel. The stand-in refuses to run when
# kernels/vulkan changed after the pack (stale SPIR-V would test old kernels). Run after building
# build-release; on the device pass -DCANDLE_GLSLANG_VALIDATOR=$PWD/.devdeps/vk/glslangValidator.
#   cmake --build build-release --target candle_vulkan && tools/devdeps-vulkan-spv.sh
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
spv=${1:-build-release/src/vulkan/spv}
[ -n "$(ls "$spv"/*.spv 2>/dev/null)" ] || { echo "no SPIR-V in $spv: build candle_vulkan first" >&2; exit 1; }
export LC_ALL=C
newest=$(ls -t "$spv"/*.spv | head -1)
for k in kernels/vulkan/*.comp kernels/vulkan/*.glsl; do
  [ "$k" -ot "$newest" ] || { echo "$k is newer than the SPIR-V in $spv: rebuild candle_vulkan" >&2; exit 1; }
done
mkdir -p .devdeps/vk .devdeps/debs
(cd .devdeps/debs && apt-get -oAPT::Architecture=amd64 -oDir::State::Lists=/tmp/devdeps-lists download \
  libvulkan-dev 2>&1 | grep -v '^Get:' || true)
tar czf .devdeps/vk/spv.tgz -C "$spv" .
cat kernels/vulkan/*.comp kernels/vulkan/*.glsl | sha256sum | cut -c1-64 > .devdeps/vk/kernels.sha256
cat > .devdeps/vk/glslangValidator <<'EOS'
#!/usr/bin/env bash
# stand-in for glslangValidator (tools/devdeps-vulkan-spv.sh): copies the carried SPIR-V named by -o
set -euo pipefail
export LC_ALL=C
here=$(cd "$(dirname "$0")" && pwd)
out=""; prev=""; src=""
for a in "$@"; do [ "$prev" = "-o" ] && out=$a; prev=$a; src=$a; done
kdir=$(dirname "$src")
want=$(cat "$here/kernels.sha256")
have=$(cat "$kdir"/*.comp "$kdir"/*.glsl | sha256sum | cut -c1-64)
[ "$want" = "$have" ] || { echo "carried SPIR-V is stale (kernels/vulkan changed): rerun tools/devdeps-vulkan-spv.sh" >&2; exit 1; }
if [ ! -d "$here/spv" ]; then  # parallel jobs: each unpacks into its own folder, the first rename wins
  t=$(mktemp -d "$here/spv.XXXXXX"); tar xzf "$here/spv.tgz" -C "$t"; mv -T "$t" "$here/spv" 2>/dev/null || rm -rf "$t"
fi
cp "$here/spv/$(basename "$out")" "$out"
EOS
chmod +x .devdeps/vk/glslangValidator
du -sh .devdeps | sed 's/^/.devdeps: /'
