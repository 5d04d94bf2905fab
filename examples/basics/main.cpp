// README's first example: a matmul on the CPU.
#include <iostream>

#include "candle/candle.h"

int main() {
  try {
    candle::Device device = candle::Device::cpu();
    candle::Tensor a = candle::Tensor::randn(0.f, 1.f, {2, 3}, device);
    candle::Tensor b = candle::Tensor::randn(0.f, 1.f, {3, 4}, device);
    candle::Tensor c = a.matmul(b);
    std::cout << c << "\n";
    return 0;
  } catch (const candle::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
