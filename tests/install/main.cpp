#include <candle/candle.h>

#include <iostream>

int main() {
  auto dev = candle::Device::cpu();
  auto a = candle::Tensor::new_({{1.f, 2.f}, {3.f, 4.f}}, dev);
  auto c = a.matmul(a);
  std::cout << c << "\n";
  return c.to_vec2<float>()[1][1] == 22.f ? 0 : 1;
}
