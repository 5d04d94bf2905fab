// candle-quantize: an f32 / f16 / bf16 model (GGUF or safetensors) to a GGUF file of a chosen
// block type, with llama.cpp's per-tensor mixes for Q4_K_M / Q5_K_M and its importance matrices.
//
//   candle-quantize INPUT OUTPUT TYPE [--imatrix FILE] [--allow-requantize] [--force] [--threads N]
//
// TYPE: f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k q4_k q5_k q6_k iq4_nl iq4_xs, or the
// mixes q4_k_m q5_k_m q4_k_s q5_k_s (case-insensitive). As llama-quantize does, only weight
// matrices are quantized (2-d tensors named *.weight; norms, biases and 1-d tensors stay f32),
// the output projection takes q6_k under K-quant types, and a K-quant that does not divide a row
// falls back to a legacy type. The output is written under a temporary name and renamed; an
// existing OUTPUT is kept unless --force. Tensors are loaded, quantized and written one at a time
// (gguf_file::Writer), so the memory held stays near that of the largest tensor.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "candle/candle.h"
#include "candle/quantized/ftype_mix.h"
#include "candle/quantized/gguf_file.h"
#include "candle/quantized/quantized.h"

using candle::DType;
using candle::Error;
using candle::ErrorKind;
using candle::Shape;
using candle::Tensor;
using namespace candle::quantized;
namespace fs = std::filesystem;

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// An importance matrix: llama-imatrix's legacy .dat (entries of name, calls, values summed over
// calls) or its GGUF form (<name>.in_sum2 and <name>.counts tensors); values per column.
std::map<std::string, std::vector<float>> read_imatrix(const std::string& path) {
  std::map<std::string, std::vector<float>> out;
  if (lower(path).ends_with(".gguf")) {
    gguf_file::Content c = gguf_file::Content::read(path);
    for (const auto& [name, info] : c.tensor_infos) {
      if (!name.ends_with(".in_sum2")) continue;
      const std::string base = name.substr(0, name.size() - 8);
      auto sums = c.tensor(name).dequantize(candle::Device::cpu()).flatten_to_vec<float>();
      auto cit = c.tensor_infos.find(base + ".counts");
      if (cit != c.tensor_infos.end()) {
        auto counts = c.tensor(base + ".counts").dequantize(candle::Device::cpu()).flatten_to_vec<float>();
        const float n = counts.empty() ? 0.f : counts[0];
        if (n > 0)
          for (float& v : sums) v /= n;
      }
      out[base] = std::move(sums);
    }
    return out;
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(ErrorKind::Io, "--imatrix: cannot open " + path);
  const auto file_size = static_cast<uint64_t>(fs::file_size(path));
  auto read_i32 = [&](const char* what) {
    int32_t v = 0;
    if (!f.read(reinterpret_cast<char*>(&v), 4))
      throw Error(ErrorKind::Parse, path + ": truncated at " + what);
    return v;
  };
  const int32_t n = read_i32("the entry count");
  if (n < 0 || static_cast<uint64_t>(n) > file_size / 12)
    throw Error(ErrorKind::Parse, path + ": " + std::to_string(n) + " entries cannot fit the file");
  for (int32_t e = 0; e < n; ++e) {
    const int32_t len = read_i32("a name length");
    if (len <= 0 || len > 4096)
      throw Error(ErrorKind::Parse, path + ": bad name length " + std::to_string(len));
    std::string name(static_cast<size_t>(len), '\0');
    if (!f.read(name.data(), len)) throw Error(ErrorKind::Parse, path + ": truncated name");
    const int32_t ncall = read_i32("a call count");
    const int32_t nval = read_i32("a value count");
    if (nval <= 0 || static_cast<uint64_t>(nval) * 4 > file_size)
      throw Error(ErrorKind::Parse,
                  path + ": bad value count " + std::to_string(nval) + " for " + name.substr(0, 80));
    std::vector<float> v(static_cast<size_t>(nval));
    if (!f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * 4)))
      throw Error(ErrorKind::Parse, path + ": truncated values of " + name.substr(0, 80));
    if (ncall > 0)
      for (float& x : v) x /= static_cast<float>(ncall);
    out[name] = std::move(v);
  }
  return out;
}

// the source model: GGUF (metadata kept) or safetensors
struct Source {
  std::optional<gguf_file::Content> gguf;
  std::optional<candle::safetensors::MmapedSafetensors> st;
  std::vector<std::string> names;

  explicit Source(const std::string& path) {
    if (lower(path).ends_with(".gguf")) {
      gguf = gguf_file::Content::read(path);
      for (const auto& [n, info] : gguf->tensor_infos) names.push_back(n);
      // the file's order (by offset), as llama-quantize keeps it
      std::sort(names.begin(), names.end(), [&](const std::string& a, const std::string& b) {
        return gguf->tensor_infos.at(a).offset < gguf->tensor_infos.at(b).offset;
      });
    } else if (lower(path).ends_with(".safetensors")) {
      st.emplace(path);
      names = st->names();
    } else {
      throw Error(ErrorKind::InvalidArgument, "input " + path + ": expected a .gguf or .safetensors file");
    }
  }
  Shape shape(const std::string& n) const {
    return gguf ? gguf->tensor_infos.at(n).shape : st->info(n).second;
  }
  std::string dtype_name(const std::string& n) const {
    return gguf ? std::string(ggml_dtype_name(gguf->tensor_infos.at(n).ggml_dtype))
                : std::string(candle::dtype_name(st->info(n).first));
  }
  size_t bytes(const std::string& n) const {
    if (gguf) return gguf->tensor_infos.at(n).size_in_bytes();
    return shape(n).elem_count() * candle::dtype_size(st->info(n).first);
  }
  bool is_quantized(const std::string& n) const {
    return gguf && ggml_is_quantized(gguf->tensor_infos.at(n).ggml_dtype);
  }
  Tensor load_f32(const std::string& n) const {
    if (gguf) return gguf->tensor(n).dequantize(candle::Device::cpu());
    return st->load(n, candle::Device::cpu()).to_dtype(DType::F32);
  }
  // the tensor's pages of the mapped input leave the resident memory once it is quantized
  void release(const std::string& n) const {
    if (gguf)
      gguf->release(n);
    else
      st->release(n);
  }
  long n_layers() const {
    if (gguf)
      for (const auto& [k, v] : gguf->metadata)
        if (k.ends_with(".block_count")) return static_cast<long>(v.to_u64());
    long n = -1;
    for (const auto& name : names) n = std::max(n, tensor_layer_index(name));
    return n + 1;
  }
};

int run(const std::string& input, const std::string& output, const std::string& type_arg,
        const std::string& imatrix_path, bool allow_requantize, bool force) {
  const FileType target = parse_file_type(type_arg);
  std::error_code ec;
  if (!fs::is_regular_file(input, ec)) throw Error(ErrorKind::Io, "input " + input + " not found");
  if (fs::exists(output, ec)) {
    if (fs::equivalent(input, output, ec)) throw Error(ErrorKind::InvalidArgument, "the output is the input");
    if (!force) throw Error(ErrorKind::Io, "output " + output + " exists (--force replaces it)");
  }
  const fs::path out_dir = fs::absolute(output).parent_path();
  if (!fs::is_directory(out_dir, ec))
    throw Error(ErrorKind::Io, "output directory " + out_dir.string() + " not found");
  if (!lower(output).ends_with(".gguf"))
    std::fprintf(stderr, "candle-quantize: note: %s has no .gguf extension\n", output.c_str());

  std::map<std::string, std::vector<float>> imatrix;
  if (!imatrix_path.empty()) {
    imatrix = read_imatrix(imatrix_path);
    std::fprintf(stderr, "imatrix: %zu entries from %s\n", imatrix.size(), imatrix_path.c_str());
  }
  Source src(input);
  const long n_layers = src.n_layers();
  std::fprintf(stderr, "%s: %zu tensors, %ld layers; quantizing to %s\n", input.c_str(), src.names.size(),
               n_layers, target.name.c_str());

  gguf_file::MetadataList meta;
  if (src.gguf)
    for (const auto& [k, v] : src.gguf->metadata)
      if (k != "general.file_type" && k != "general.quantization_version" && k != "general.alignment")
        meta.emplace_back(k, v);
  meta.emplace_back("general.quantization_version", uint32_t{2});
  meta.emplace_back("general.file_type", target.file_type);

  // every tensor's type before any work: the writer announces them all in the file's header
  std::vector<gguf_file::TensorSpec> specs;
  for (const auto& name : src.names) {
    const Shape shape = src.shape(name);
    const GgmlDType t = tensor_type_for(name, shape, target, n_layers);
    if (src.is_quantized(name) && !allow_requantize && src.gguf->tensor_infos.at(name).ggml_dtype != t)
      throw Error(ErrorKind::InvalidArgument, "tensor " + name + " is already " + src.dtype_name(name) +
                                                  " (--allow-requantize dequantizes and quantizes it again)");
    specs.push_back({name, shape, t});
  }

  // one tensor at a time: load (a view of the mapped input, or its f32 values), quantize, write,
  // drop; the output goes to a temporary file renamed over OUTPUT at the end
  gguf_file::Writer out(output, meta, specs);
  size_t in_bytes = 0, out_bytes = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < specs.size(); ++i) {
    const std::string& name = specs[i].name;
    const Shape& shape = specs[i].shape;
    const GgmlDType t = specs[i].ggml_dtype;
    std::optional<QTensor> q;
    auto im = imatrix.find(name);
    {
      Tensor x = src.load_f32(name);
      if (im != imatrix.end() && ggml_is_quantized(t)) {
        if (im->second.size() != shape.dims().back())
          throw Error(ErrorKind::ShapeMismatch,
                      "imatrix entry " + name + " has " + std::to_string(im->second.size()) +
                          " values, the tensor's rows " + std::to_string(shape.dims().back()));
        q = QTensor::quantize_imatrix(x, im->second, t);
      } else {
        q = QTensor::quantize(x, t);
      }
    }
    out.write_tensor(*q);
    src.release(name);
    in_bytes += src.bytes(name);
    out_bytes += q->storage_size_in_bytes();
    std::string dims;
    for (size_t d : shape.dims()) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
    std::fprintf(stderr, "[%4zu/%4zu] %-40s [%s] %s -> %s%s, %.2f MiB\n", i + 1, specs.size(), name.c_str(),
                 dims.c_str(), src.dtype_name(name).c_str(), std::string(ggml_dtype_name(t)).c_str(),
                 im != imatrix.end() && ggml_is_quantized(t) ? " (imatrix)" : "",
                 static_cast<double>(q->storage_size_in_bytes()) / (1 << 20));
  }
  out.finish();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "wrote %s: %.2f MiB (input %.2f MiB), %.1f s\n", output.c_str(),
               static_cast<double>(out_bytes) / (1 << 20), static_cast<double>(in_bytes) / (1 << 20), secs);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"candle-quantize: an f32/f16/bf16 GGUF or safetensors model to a quantized GGUF file"};
  std::string input, output, type, imatrix;
  bool allow_requantize = false, force = false;
  size_t threads = 0;
  app.add_option("input", input, "model: .gguf or .safetensors")->required();
  app.add_option("output", output, "the GGUF file to write")->required();
  app.add_option("type", type,
                 "q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k q4_k q5_k q6_k iq4_nl iq4_xs f16 bf16 f32, "
                 "or the mixes q4_k_m q5_k_m q4_k_s q5_k_s")
      ->required();
  app.add_option("--imatrix", imatrix, "importance matrix: llama-imatrix's .dat or .gguf");
  app.add_flag("--allow-requantize", allow_requantize, "accept tensors that are already quantized");
  app.add_flag("--force", force, "replace OUTPUT when it exists");
  app.add_option("--threads", threads, "CPU threads (default: CANDLE_NUM_THREADS or all cores)");
  CLI11_PARSE(app, argc, argv);
  try {
    if (threads) candle::set_num_threads(threads);
    return run(input, output, type, imatrix, allow_requantize, force);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "candle-quantize: error: %s\n", e.what());
    return 1;
  }
}
