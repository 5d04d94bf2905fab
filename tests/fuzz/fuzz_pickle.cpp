// libFuzzer: raw pickle bytes through candle::pickle's VM (zip-style persistent ids) and the
// walk that names the tensors. candle::Error is the expected outcome for bad input.
#include <cstddef>
#include <cstdint>
#include <span>

#include "candle/error.h"
#include "io/pickle_vm.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace pd = candle::pickle::detail;
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  for (pd::PidFormat pids : {pd::PidFormat::Zip, pd::PidFormat::Legacy}) {
    try {
      pd::Tree t = pd::unpickle(bytes, pids, "fuzz");
      (void)pd::collect_tensors(t, t.root, "fuzz");
      (void)pd::dict_lookup(t, t.root, "state_dict");
    } catch (const candle::Error&) {
    }
  }
  return 0;
}
