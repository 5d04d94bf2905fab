// PNG encoding of a 4096x4096 RGB image (a smooth gradient with noise): candle::image at levels 1
// and 6 on 1 and 2 threads, beside libpng with its default settings (zlib level 6, adaptive filters).
//   build-release/bin/png_encode_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>
#include <png.h>

#include <algorithm>
#include <random>
#include <vector>

#include "candle/image.h"

namespace {

constexpr size_t kW = 4096, kH = 4096, kC = 3;

const std::vector<uint8_t>& image() {
  static const std::vector<uint8_t> px = [] {
    std::vector<uint8_t> p(kW * kH * kC);
    std::mt19937 rng(1);
    for (size_t y = 0; y < kH; ++y)
      for (size_t x = 0; x < kW; ++x) {
        const int g[3] = {int(x * 255 / kW), int(y * 255 / kH), int((x + y) * 255 / (kW + kH))};
        for (size_t c = 0; c < kC; ++c)
          p[(y * kW + x) * kC + c] = uint8_t(std::clamp(g[c] + int(rng() % 9) - 4, 0, 255));
      }
    return p;
  }();
  return px;
}

void BM_CandlePng(benchmark::State& state) {
  const auto& px = image();
  candle::image::EncodeOptions o;
  o.png_level = int(state.range(0));
  o.threads = unsigned(state.range(1));
  size_t bytes = 0;
  for (auto _ : state) bytes = candle::image::encode_png(px.data(), kW, kH, kC, o).size();
  state.counters["MB"] = double(bytes) / 1e6;
}
BENCHMARK(BM_CandlePng)
    ->ArgNames({"level", "threads"})
    ->Args({1, 1})
    ->Args({1, 2})
    ->Args({6, 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void on_write(png_structp png, png_bytep data, size_t n) {
  auto* out = static_cast<std::vector<uint8_t>*>(png_get_io_ptr(png));
  out->insert(out->end(), data, data + n);
}
void on_flush(png_structp) {}

// libpng's defaults; errors (none expected from memory output) abort through libpng's own handler
void BM_LibpngDefault(benchmark::State& state) {
  const auto& px = image();
  size_t bytes = 0;
  for (auto _ : state) {
    std::vector<uint8_t> out;
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
    png_infop info = png_create_info_struct(png);
    png_set_write_fn(png, &out, on_write, on_flush);
    png_set_IHDR(png, info, kW, kH, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (size_t y = 0; y < kH; ++y) png_write_row(png, px.data() + y * kW * kC);
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    bytes = out.size();
  }
  state.counters["MB"] = double(bytes) / 1e6;
}
BENCHMARK(BM_LibpngDefault)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
