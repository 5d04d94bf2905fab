// A program built against the installed package. With a device name argument ("vulkan", ...)
// it runs on that device, which loads the installed plugin from beside libcandle_core.so
// through the version check.
#include <candle/backend/plugin.h>
#include <candle/candle.h>

#include <iostream>

int main(int argc, char** argv) {
  std::cout << "candle " << CANDLE_VERSION_STRING << ", backend ABI " << CANDLE_BACKEND_ABI_VERSION << "\n";
  auto dev = argc > 1 ? candle::Device::from_name(argv[1]) : candle::Device::cpu();
  auto a = candle::Tensor::new_({{1.f, 2.f}, {3.f, 4.f}}, dev);
  auto c = a.matmul(a);
  std::cout << c << "\n";
  return c.to_vec2<float>()[1][1] == 22.f ? 0 : 1;
}
