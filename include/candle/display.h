// candle's Display format for tensors, and its print options.
#pragma once

#include <cstddef>
#include <iosfwd>
#include <string>

namespace candle {

class Tensor;

struct PrintOptions {
  size_t precision = 4;     // digits after the point (float mode)
  size_t threshold = 1000;  // summarise ("...") when a tensor has more elements
  size_t edge_items = 3;    // items shown at each end of a summarised dim
  size_t line_width = 80;
  bool sci_mode_set = false;  // true: sci_mode forced on/off; false: chosen from the values
  bool sci_mode = false;
};

PrintOptions print_options();
void set_print_options(const PrintOptions& options);
void set_print_options_default();
// candle's presets: "short" (precision 2, edge items 2) and "full" (no summary).
void set_print_options_short();
void set_print_options_full();

// The text std::cout << t prints (without a trailing newline after the dtype line).
std::string to_string(const Tensor& t);

}  // namespace candle
