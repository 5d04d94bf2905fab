// candle's Display format for tensors (`println!("{t}")`), and its process-wide print options.
//
// The rules, as candle (after PyTorch's _tensor_str) applies them:
//  - a tensor with more than `threshold` elements is summarised: along every dim longer than
//    2 * edge_items only the first and last edge_items entries are shown, with "..." between;
//  - all shown values share one width, the widest of them formatted alone;
//  - floats: "int mode" ("42.") when every shown finite non-zero value is integral, "sci mode"
//    ("1.2340e-5") when max/min of their magnitudes > 1000, max > 1e8 or min < 1e-4 (unless
//    the options force it), else fixed with `precision` digits;
//  - a 1-D row that is not summarised wraps every line_width / (width + 2) elements;
//  - the text ends with "\nTensor[[dims], dtype]" (plus ", cuda:0" etc. off the CPU), with no
//    newline after it.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

#include "candle/backend/cpu_storage.h"
#include "candle/candle.h"

namespace candle {

namespace {

std::mutex g_options_mutex;
PrintOptions g_options;  // guarded by g_options_mutex

// Which entries of each dim are shown: all of them, or the first and last `edge` ones.
struct ShownDims {
  std::vector<size_t> dims;
  bool summarize = false;
  size_t edge = 0;

  // dims[d] > 2 * edge, without overflow for huge edge_items
  bool cut(size_t d) const { return summarize && edge < dims[d] && dims[d] - edge > edge; }
  size_t shown(size_t d) const { return cut(d) ? 2 * edge : dims[d]; }
  // The index along dim d of its k-th shown entry.
  size_t index(size_t d, size_t k) const { return (cut(d) && k >= edge) ? dims[d] - 2 * edge + k : k; }
  size_t shown_count() const {
    size_t n = 1;
    for (size_t d = 0; d < dims.size(); ++d) n *= shown(d);
    return n;
  }
};

// The shown elements of a CPU tensor, row-major over the shown entries, read through the
// layout (only the shown elements are touched). V is double for floats, int64_t for ints.
template <typename T, typename V>
std::vector<V> gather_shown(const CpuStorage& storage, const Layout& layout, const ShownDims& sd) {
  const T* data = storage.data<T>();
  const size_t rank = sd.dims.size();
  const size_t count = sd.shown_count();
  std::vector<V> out;
  out.reserve(count);
  if (count == 0) return out;
  const auto& stride = layout.stride();
  std::vector<size_t> k(rank, 0);
  size_t offset = layout.start_offset();
  for (size_t d = 0; d < rank; ++d) offset += sd.index(d, 0) * stride[d];
  for (size_t n = 0; n < count; ++n) {
    out.push_back(static_cast<V>(cast_value<compute_t<T>>(data[offset])));
    // odometer step over the shown entries, keeping the storage offset up to date
    for (size_t d = rank; d-- > 0;) {
      offset -= sd.index(d, k[d]) * stride[d];
      if (++k[d] < sd.shown(d)) {
        offset += sd.index(d, k[d]) * stride[d];
        break;
      }
      k[d] = 0;
      offset += sd.index(d, 0) * stride[d];
    }
  }
  return out;
}

void append_padded(std::string& out, const char* text, size_t len, size_t width) {
  if (len < width) out.append(width - len, ' ');
  out.append(text, len);
}

// std::to_chars: exact decimal, round-half-even (as Rust's formatting), independent of the
// C locale. Precision is capped at 1000, so 1400 chars hold any double.
std::string format_float(double v, std::chars_format fmt, int precision) {
  char buf[1400];
  auto res = std::to_chars(buf, buf + sizeof buf, v, fmt, precision);
  return std::string(buf, res.ptr);
}

// Rust's Display names for the non-finite floats.
const char* non_finite_name(double v) {
  if (std::isnan(v)) return "NaN";
  return v > 0 ? "inf" : "-inf";
}

// One value's text (before padding) as candle's FloatFormatter writes it.
struct FloatFormat {
  bool int_mode = true;
  bool sci_mode = false;
  int precision = 4;

  std::string text(double v) const {
    if (!std::isfinite(v)) return non_finite_name(v);
    if (sci_mode) {
      // Rust's {:.Ne}: the mantissa as C's %e, the exponent without '+' or leading zeros.
      // candle bug, not reproduced: for f16/bf16 it goes through half's LowerExp, which drops
      // the precision and width (half-rs issue #112) and prints e.g. "1.001358e-5" unaligned;
      // we format them as f32 is formatted.
      std::string s = format_float(v, std::chars_format::scientific, precision);
      size_t e = s.find('e');
      std::string mant = s.substr(0, e);
      bool neg = s[e + 1] == '-';
      size_t digits = s.find_first_not_of('0', e + 2);
      std::string exp = digits == std::string::npos ? "0" : s.substr(digits);
      return mant + "e" + (neg ? "-" : "") + exp;
    }
    if (int_mode) return format_float(v, std::chars_format::fixed, 0) + ".";
    return format_float(v, std::chars_format::fixed, precision);
  }
};

// The float modes from the shown values. The comparisons run in the tensor's own type, as
// candle's do (num_traits on S): T is the storage type, values are exact in double.
template <typename T>
FloatFormat float_format(const std::vector<double>& values, const PrintOptions& po) {
  FloatFormat ff;
  ff.precision = static_cast<int>(std::min<size_t>(po.precision, 1000));
  double min_abs = std::numeric_limits<double>::infinity(), max_abs = 0.0;
  bool any = false;
  for (double v : values) {
    if (!std::isfinite(v) || v == 0.0) continue;
    any = true;
    double a = std::fabs(v);
    min_abs = std::min(min_abs, a);
    max_abs = std::max(max_abs, a);
    if (std::ceil(v) != v) ff.int_mode = false;
  }
  if (any) {
    if constexpr (std::is_same_v<T, double>) {
      ff.sci_mode = max_abs / min_abs > 1000.0 || max_abs > 1e8 || min_abs < 1e-4;
    } else if constexpr (std::is_same_v<T, float>) {
      float mx = static_cast<float>(max_abs), mn = static_cast<float>(min_abs);
      ff.sci_mode = mx / mn > 1000.0f || mx > 1e8f || mn < 1e-4f;
    } else if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16>) {
      // half's arithmetic: in f32, rounded back to the half type; the thresholds are
      // rounded to it too (1e8 is inf in f16).
      auto round = [](float x) { return static_cast<float>(T(x)); };
      float mx = static_cast<float>(max_abs), mn = static_cast<float>(min_abs);
      ff.sci_mode = round(mx / mn) > round(1000.0f) || mx > round(1e8f) || mn < round(1e-4f);
    } else {
      // f8e4m3 (candle uses the float8 crate, which saturates at 448): 1000 and 1e8 become
      // 448, 1e-4 becomes 0 and max/min saturates at 448, so no comparison can hold and
      // candle never picks sci mode by itself for f8e4m3.
      ff.sci_mode = false;
    }
  }
  if (po.sci_mode_set) ff.sci_mode = po.sci_mode;
  return ff;
}

// Writes the nested brackets. `cell(i, out)` appends the i-th shown value, padded.
template <typename Cell>
class Writer {
 public:
  Writer(const ShownDims& sd, size_t width, size_t line_width, Cell cell, std::string& out)
      : sd_(sd), width_(width), line_width_(line_width), cell_(cell), out_(out) {}

  void write() {
    out_ += '[';
    if (sd_.dims.empty()) {
      cell_(next_++, out_);
    } else {
      level(0, 1);
    }
    out_ += ']';
  }

 private:
  void newline_indent(size_t indent) {
    out_ += '\n';
    out_.append(indent, ' ');
  }

  // The content of dim d (without its brackets); `indent` is the number of open brackets.
  void level(size_t d, size_t indent) {
    const size_t n = sd_.dims[d];
    const bool last = d + 1 == sd_.dims.size();
    if (last && sd_.cut(d)) {
      for (size_t i = 0; i < sd_.edge; ++i) {
        cell_(next_++, out_);
        out_ += ", ";
      }
      out_ += "...";
      for (size_t i = 0; i < sd_.edge; ++i) {
        out_ += ", ";
        cell_(next_++, out_);
      }
    } else if (last) {
      const size_t per_line = std::max<size_t>(1, line_width_ / (width_ + 2));
      for (size_t i = 0; i < n; ++i) {
        if (i > 0) {
          if (i % per_line == 0) {
            out_ += ',';
            newline_indent(indent);
          } else {
            out_ += ", ";
          }
        }
        cell_(next_++, out_);
      }
    } else if (sd_.cut(d)) {
      for (size_t i = 0; i < sd_.edge; ++i) {
        sub(d, indent);
        out_ += ',';
        newline_indent(indent);
      }
      out_ += "...";
      newline_indent(indent);
      for (size_t i = 0; i < sd_.edge; ++i) {
        sub(d, indent);
        if (i + 1 != sd_.edge) {
          out_ += ',';
          newline_indent(indent);
        }
      }
    } else {
      for (size_t i = 0; i < n; ++i) {
        sub(d, indent);
        if (i + 1 != n) {
          out_ += ',';
          newline_indent(indent);
        }
      }
    }
  }

  void sub(size_t d, size_t indent) {
    out_ += '[';
    level(d + 1, indent + 1);
    out_ += ']';
  }

  const ShownDims& sd_;
  size_t width_;
  size_t line_width_;
  Cell cell_;
  std::string& out_;
  size_t next_ = 0;
};

template <typename Cell>
void write_nested(const ShownDims& sd, size_t width, size_t line_width, Cell cell, std::string& out) {
  Writer<Cell>(sd, width, line_width, cell, out).write();
}

// All shown values as text, packed in one buffer (a full print may show millions).
struct Cells {
  std::string text;
  std::vector<size_t> end;  // end[i]: where value i's text ends in `text`
  size_t width = 1;         // the widest value (candle starts the maximum at 1)

  void add(const std::string& s) {
    text += s;
    end.push_back(text.size());
    width = std::max(width, s.size());
  }
  void append(size_t i, std::string& out) const {
    size_t begin = i == 0 ? 0 : end[i - 1];
    append_padded(out, text.data() + begin, end[i] - begin, width);
  }
};

void write_cells(const Cells& cells, const ShownDims& sd, const PrintOptions& po, std::string& out) {
  write_nested(
      sd, cells.width, po.line_width, [&](size_t i, std::string& o) { cells.append(i, o); }, out);
}

}  // namespace

PrintOptions print_options() {
  std::lock_guard<std::mutex> lock(g_options_mutex);
  return g_options;
}

void set_print_options(const PrintOptions& options) {
  std::lock_guard<std::mutex> lock(g_options_mutex);
  g_options = options;
}

void set_print_options_default() { set_print_options(PrintOptions{}); }

// candle's presets (PyTorch's "short" and "full" profiles).
void set_print_options_short() {
  PrintOptions po;
  po.precision = 2;
  po.threshold = 1000;
  po.edge_items = 2;
  po.line_width = 80;
  set_print_options(po);
}

void set_print_options_full() {
  PrintOptions po;
  po.threshold = std::numeric_limits<size_t>::max();
  set_print_options(po);
}

std::string to_string(const Tensor& t) {
  const PrintOptions po = print_options();
  ShownDims sd;
  sd.dims = t.dims();
  sd.summarize = t.elem_count() > po.threshold;
  sd.edge = po.edge_items;

  // Read the shown elements straight from host memory; other devices copy the tensor over once.
  Tensor host = t.device().is_cpu() ? t : t.to_device(Device::cpu());
  std::shared_ptr<CpuStorage> storage = host.storage()->to_cpu();

  Cells cells;
  cells.end.reserve(sd.shown_count());
  dispatch(t.dtype(), [&]<typename T>() {
    if constexpr (is_float_v<T>) {
      std::vector<double> values = gather_shown<T, double>(*storage, host.layout(), sd);
      const FloatFormat ff = float_format<T>(values, po);
      for (double v : values) cells.add(ff.text(v));
    } else {
      for (int64_t v : gather_shown<T, int64_t>(*storage, host.layout(), sd)) cells.add(std::to_string(v));
    }
  });
  std::string out;
  write_cells(cells, sd, po, out);

  out += "\nTensor[";
  out += t.shape().to_string();
  out += ", ";
  out += dtype_name(t.dtype());
  if (!t.device().is_cpu()) {
    out += ", ";
    out += device_kind_name(t.device().kind());
    out += ':';
    out += std::to_string(t.device().ordinal());
  }
  out += ']';
  return out;
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << to_string(t); }

}  // namespace candle
