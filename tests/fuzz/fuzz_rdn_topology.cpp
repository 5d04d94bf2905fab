// libFuzzer: the Rdn graph builder (src/models/rdn.cpp) on a topology JSON, with conv weights
// synthesised from the layers it names: matching, or (as the first byte says) of the wrong
// shape, missing a bias, or f16. Small graphs that build also run a forward on a 1 x c x 3 x 2
// image. candle::Error is the expected outcome for bad input.
//
// Input: one flag byte, then the topology JSON.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>

#include "candle/candle.h"
#include "candle/models/rdn.h"

namespace {

using candle::Device;
using candle::DType;
using candle::Tensor;

// An unsigned field of a layer, or `dflt` when absent or of another type.
size_t field(const nlohmann::json& l, const char* key, size_t idx, size_t dflt) {
  auto it = l.find(key);
  if (it == l.end()) return dflt;
  if (it->is_array() && idx < it->size() && (*it)[idx].is_number_unsigned()) return (*it)[idx].get<size_t>();
  if (it->is_number_unsigned()) return it->get<size_t>();
  return dflt;
}

// The harness's own reading of the topology: shallow and bounded (the library does the rest).
bool shallow(const uint8_t* p, size_t n) {
  size_t depth = 0;
  bool in_str = false;
  for (size_t i = 0; i < n; ++i) {
    const char c = static_cast<char>(p[i]);
    if (in_str) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_str = false;
    } else if (c == '"') {
      in_str = true;
    } else if (c == '[' || c == '{') {
      if (++depth > 32) return false;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t flags = data[0];
  std::string topo(reinterpret_cast<const char*>(data + 1), size - 1);
  std::unordered_map<std::string, Tensor> tensors;
  if (shallow(data + 1, size - 1)) {
    nlohmann::json g = nlohmann::json::parse(topo, nullptr, /*allow_exceptions=*/false);
    if (g.is_object() && g.contains("layers") && g["layers"].is_array()) {
      size_t total = 0;
      for (const auto& l : g["layers"]) {
        if (!l.is_object() || !l.contains("name") || !l["name"].is_string()) continue;
        const std::string name = l["name"].get<std::string>();
        size_t co = field(l, "out_channels", 0, 3), ci = field(l, "in_channels", 0, 3);
        size_t kh = field(l, "kernel", 0, 1), kw = field(l, "kernel", 1, 1);
        if (flags & 1) co += 1;  // a weight of the wrong shape
        if (co > 256 || ci > 256 || kh > 9 || kw > 9) continue;
        const size_t n = co * ci * kh * kw;
        if ((total += n) > (size_t{1} << 20)) break;
        const DType dt = flags & 4 ? DType::F16 : DType::F32;
        tensors.emplace(name + ".weight", Tensor::full(0.01, {co, ci, kh, kw}, dt, Device::cpu()));
        if (!(flags & 2)) tensors.emplace(name + ".bias", Tensor::full(0.5, {co}, dt, Device::cpu()));
      }
    }
  }
  try {
    candle::models::Rdn net(tensors, topo, Device::cpu());
    if ((flags & 8) && net.num_convs() <= 32 && net.activation_bytes_per_pixel() < (size_t{1} << 20)) {
      Tensor img = Tensor::full(100.0, {1, net.in_channels(), 3, 2}, DType::F32, Device::cpu());
      (void)net.forward(img);
      if (flags & 16) (void)net.forward_tiled(img, 1);
    }
  } catch (const candle::Error&) {
  }
  return 0;
}
