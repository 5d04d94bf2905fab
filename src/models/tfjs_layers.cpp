// TF.js layers model -> candle tensors + normalised graph (see include/candle/models/tfjs.h).
//
// model.json holds the Keras topology ("modelTopology") and a weights manifest: groups of
// weights, each group's data being the concatenation of its shard files, the weights laid
// out back to back in manifest order (little-endian, no padding). Conv kernels are stored
// HWIO ([kh, kw, c_in, c_out]) and become candle's OIHW here.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include "candle/io/json_limits.h"
#include "candle/io/safetensors.h"
#include "candle/models/tfjs.h"

namespace candle::models::tfjs {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

[[noreturn]] void fail(ErrorKind kind, const std::string& msg) { throw Error(kind, "tfjs: " + msg); }

// model.json beyond this is not a model of the layer types we convert
constexpr uint64_t kMaxModelJsonBytes = 64ull << 20;
// real model.json files nest about 10 deep
constexpr size_t kMaxJsonDepth = 64;
// upsampling factors, each and in product (the scales the upscaler supports go to 8)
constexpr size_t kMaxScale = 8;

std::string excerpt(const json& v) { return io::excerpt(v.dump()); }

std::vector<char> read_file(const fs::path& p, const char* what, uint64_t max_bytes) {
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) fail(ErrorKind::Io, std::string(what) + " not found: " + p.string());
  const uintmax_t size = fs::file_size(p, ec);
  if (ec) fail(ErrorKind::Io, std::string("cannot stat ") + what + ": " + p.string());
  if (size > max_bytes) {
    fail(ErrorKind::Parse, std::string(what) + " " + p.string() + " has " + std::to_string(size) +
                               " bytes, more than the " + std::to_string(max_bytes) + " expected");
  }
  std::ifstream f(p, std::ios::binary);
  if (!f) fail(ErrorKind::Io, std::string("cannot open ") + what + ": " + p.string());
  std::vector<char> data(static_cast<size_t>(size));
  f.read(data.data(), static_cast<std::streamsize>(size));
  if (static_cast<uintmax_t>(f.gcount()) != size || f.bad())
    fail(ErrorKind::Io, std::string("cannot read ") + what + ": " + p.string());
  return data;
}

// Where the shards named by a manifest come from (a directory, or memory): a shard's size
// (nullopt when it does not exist), then its bytes, of exactly that size.
struct ShardSource {
  std::function<std::optional<uint64_t>(const std::string&)> size;
  std::function<std::vector<char>(const std::string&, uint64_t)> read;
};

// A weight of the manifest with its bytes.
struct RawWeight {
  std::vector<size_t> shape;
  std::vector<float> data;
};

// Elements of a shape, at most 2^40 (and so its bytes fit a size_t).
size_t checked_count(const std::vector<size_t>& shape, const std::string& name) {
  size_t n = 1;
  for (size_t d : shape) {
    if (d != 0 && n > (size_t{1} << 40) / d)
      fail(ErrorKind::Parse, "weight '" + io::excerpt(name) + "' is too large");
    n *= d;
  }
  return n;
}

// A shard path must be relative and stay inside the model's directory; returned normalised
// (so that "a/../b" and "b" are seen as the same shard).
std::string shard_name(const std::string& rel) {
  fs::path p(rel);
  auto bad = [&] {
    fail(ErrorKind::Parse, "bad shard path '" + io::excerpt(rel) + "' in the weights manifest");
  };
  if (rel.empty() || p.is_absolute() || rel.find('\0') != std::string::npos) bad();
  for (const auto& part : p)
    if (part == "..") bad();
  std::string norm = p.lexically_normal().generic_string();
  if (norm.empty() || norm == ".") bad();
  return norm;
}

struct ManifestGroup {
  std::vector<std::string> paths;  // normalised
  std::vector<std::pair<std::string, std::vector<size_t>>> weights;
  uint64_t bytes = 0;  // what the weights need
};

std::map<std::string, RawWeight> read_weights(const json& manifest, const ShardSource& shards) {
  if (!manifest.is_array()) fail(ErrorKind::Parse, "model.json: weightsManifest is not a list");
  // First the whole manifest, checked against the shards' sizes, before reading any shard.
  std::vector<ManifestGroup> groups;
  std::set<std::string> all_paths, all_names;
  for (size_t g = 0; g < manifest.size(); ++g) {
    const json& group = manifest[g];
    if (!group.is_object() || !group.contains("paths") || !group["paths"].is_array() ||
        !group.contains("weights") || !group["weights"].is_array()) {
      fail(ErrorKind::Parse,
           "model.json: weightsManifest group " + std::to_string(g) + " needs 'paths' and 'weights'");
    }
    ManifestGroup mg;
    uint64_t have = 0;
    for (const json& p : group["paths"]) {
      if (!p.is_string()) fail(ErrorKind::Parse, "model.json: a shard path is not a string");
      std::string name = shard_name(p.get<std::string>());
      if (!all_paths.insert(name).second)
        fail(ErrorKind::Parse, "model.json: shard '" + io::excerpt(name) + "' is listed twice");
      std::optional<uint64_t> size = shards.size(name);
      if (!size) fail(ErrorKind::Io, "weight shard not found: " + io::excerpt(name));
      if (*size > std::numeric_limits<uint64_t>::max() - have)
        fail(ErrorKind::Parse, "model.json: the shards of group " + std::to_string(g) + " are too large");
      have += *size;
      mg.paths.push_back(std::move(name));
    }
    for (const json& w : group["weights"]) {
      if (!w.is_object() || !w.contains("name") || !w["name"].is_string() || !w.contains("shape") ||
          !w["shape"].is_array()) {
        fail(ErrorKind::Parse, "model.json: a weight entry needs 'name' and 'shape'");
      }
      std::string name = w["name"].get<std::string>();
      if (w.contains("quantization"))
        fail(ErrorKind::UnsupportedOp, "quantized weight '" + io::excerpt(name) + "' is not supported");
      const json dtype = w.contains("dtype") ? w["dtype"] : json("float32");
      if (dtype != "float32") {
        fail(ErrorKind::UnsupportedOp, "weight '" + io::excerpt(name) + "' has dtype " + excerpt(dtype) +
                                           " (only float32 is supported)");
      }
      if (w["shape"].size() > 8) fail(ErrorKind::Parse, "weight '" + io::excerpt(name) + "' has a bad shape");
      std::vector<size_t> shape;
      for (const json& d : w["shape"]) {
        if (!d.is_number_unsigned())
          fail(ErrorKind::Parse, "weight '" + io::excerpt(name) + "' has a bad shape");
        shape.push_back(d.get<size_t>());
      }
      const uint64_t nbytes = uint64_t(checked_count(shape, name)) * sizeof(float);
      if (nbytes > std::numeric_limits<uint64_t>::max() - mg.bytes)
        fail(ErrorKind::Parse, "model.json: the weights of group " + std::to_string(g) + " are too large");
      mg.bytes += nbytes;
      if (!all_names.insert(name).second)
        fail(ErrorKind::Parse, "weight '" + io::excerpt(name) + "' appears twice in the manifest");
      mg.weights.emplace_back(std::move(name), std::move(shape));
    }
    if (mg.bytes != have) {
      fail(ErrorKind::Parse, "weight shards of group " + std::to_string(g) + " hold " + std::to_string(have) +
                                 " bytes but the manifest needs " + std::to_string(mg.bytes));
    }
    groups.push_back(std::move(mg));
  }
  // Then the bytes: every shard read once, each group exactly as large as its weights.
  std::map<std::string, RawWeight> out;
  for (size_t g = 0; g < groups.size(); ++g) {
    ManifestGroup& mg = groups[g];
    std::vector<char> bytes;
    bytes.reserve(static_cast<size_t>(mg.bytes));
    for (const std::string& path : mg.paths) {
      const uint64_t left = mg.bytes - bytes.size();
      std::vector<char> shard = shards.read(path, left);
      if (shard.size() > left)
        fail(ErrorKind::Io, "weight shard " + io::excerpt(path) + " grew while reading");
      bytes.insert(bytes.end(), shard.begin(), shard.end());
    }
    if (bytes.size() != mg.bytes) {
      fail(ErrorKind::Io, "weight shards of group " + std::to_string(g) + " changed size while reading");
    }
    size_t off = 0;
    for (auto& [name, shape] : mg.weights) {
      RawWeight rw;
      rw.shape = std::move(shape);
      const size_t n = checked_count(rw.shape, name);
      rw.data.resize(n);
      if (n) std::memcpy(rw.data.data(), bytes.data() + off, n * sizeof(float));
      off += n * sizeof(float);
      out.emplace(name, std::move(rw));
    }
  }
  return out;
}

// An integer config value, `dflt` when absent or null; anything but an integer in
// [lo, hi] is an error.
int64_t int_value(const json& cfg, const char* key, const std::string& layer, int64_t dflt, int64_t lo,
                  int64_t hi) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return dflt;
  if (it->is_number_unsigned()) {
    if (it->get<uint64_t>() <= static_cast<uint64_t>(hi)) return static_cast<int64_t>(it->get<uint64_t>());
  } else if (it->is_number_integer()) {
    const int64_t v = it->get<int64_t>();
    if (v >= lo && v <= hi) return v;
  }
  fail(ErrorKind::Parse, "layer '" + io::excerpt(layer) + "': bad '" + key + "' " + excerpt(*it));
}

// A number config value, `dflt` when absent or null.
double number_value(const json& cfg, const char* key, const std::string& layer, double dflt) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return dflt;
  if (!it->is_number()) fail(ErrorKind::Parse, "layer '" + io::excerpt(layer) + "': bad '" + key + "'");
  return it->get<double>();
}

// A string config value, `dflt` when absent or null.
std::string string_value(const json& cfg, const char* key, const std::string& layer, const char* dflt) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return dflt;
  if (!it->is_string())
    fail(ErrorKind::Parse, "layer '" + io::excerpt(layer) + "': bad '" + key + "' " + excerpt(*it));
  return it->get<std::string>();
}

std::vector<size_t> pair_of(const json& cfg, const char* key, const std::string& layer, size_t dflt) {
  if (!cfg.contains(key) || cfg[key].is_null()) return {dflt, dflt};
  const json& v = cfg[key];
  if (v.is_number_unsigned()) return {v.get<size_t>(), v.get<size_t>()};
  if (v.is_array() && v.size() == 2 && v[0].is_number_unsigned() && v[1].is_number_unsigned()) {
    return {v[0].get<size_t>(), v[1].get<size_t>()};
  }
  fail(ErrorKind::Parse, "layer '" + layer + "': bad '" + key + "'");
}

void check_channels_last(const json& cfg, const std::string& layer) {
  if (cfg.contains("data_format") && !cfg["data_format"].is_null() && cfg["data_format"] != "channels_last") {
    fail(ErrorKind::UnsupportedOp, "layer '" + layer + "': only data_format channels_last is supported");
  }
}

// Keras layer -> normalised node (without "inputs").
json convert_layer(const std::string& cls, const std::string& name, const json& cfg,
                   std::map<std::string, RawWeight>& weights, ConvertedModel& out) {
  json node = {{"name", name}};
  if (cls == "InputLayer") {
    node["op"] = "input";
    size_t channels = 0;
    for (const char* key : {"batch_input_shape", "batch_shape"}) {
      if (cfg.contains(key) && cfg[key].is_array() && cfg[key].size() == 4 &&
          cfg[key][3].is_number_unsigned()) {
        channels = cfg[key][3].get<size_t>();
      }
    }
    node["channels"] = channels;
    return node;
  }
  if (cls == "Conv2D") {
    check_channels_last(cfg, name);
    if (pair_of(cfg, "strides", name, 1) != std::vector<size_t>{1, 1})
      fail(ErrorKind::UnsupportedOp, "layer '" + name + "': only stride 1 is supported");
    if (pair_of(cfg, "dilation_rate", name, 1) != std::vector<size_t>{1, 1})
      fail(ErrorKind::UnsupportedOp, "layer '" + name + "': only dilation 1 is supported");
    if (int_value(cfg, "groups", name, 1, 0, 1 << 20) != 1)
      fail(ErrorKind::UnsupportedOp, "layer '" + name + "': only groups = 1 is supported");
    auto ks = pair_of(cfg, "kernel_size", name, 0);
    if (ks[0] == 0 || ks[1] == 0 || ks[0] > 63 || ks[1] > 63)
      fail(ErrorKind::UnsupportedOp, "layer '" + name + "': kernel_size must be 1 to 63");
    const std::string padding = string_value(cfg, "padding", name, "valid");
    std::vector<size_t> pad;
    if (padding == "same") {
      if (ks[0] % 2 == 0 || ks[1] % 2 == 0)
        fail(ErrorKind::UnsupportedOp, "layer '" + name + "': 'same' padding needs an odd kernel");
      pad = {(ks[0] - 1) / 2, (ks[1] - 1) / 2};
    } else if (padding == "valid" && ks[0] == 1 && ks[1] == 1) {
      pad = {0, 0};
    } else {
      fail(ErrorKind::UnsupportedOp, "layer '" + name + "': padding '" + padding + "' with kernel " +
                                         std::to_string(ks[0]) + "x" + std::to_string(ks[1]) +
                                         " changes the image size (unsupported)");
    }
    const std::string act = string_value(cfg, "activation", name, "linear");
    if (act != "linear" && act != "relu")
      fail(ErrorKind::UnsupportedOp, "layer '" + name + "': activation '" + act + "' is not supported");
    auto kit = weights.find(name + "/kernel");
    if (kit == weights.end())
      fail(ErrorKind::Parse, "layer '" + name + "': weight '" + name + "/kernel' is missing");
    const RawWeight& k = kit->second;
    const auto filters = static_cast<size_t>(int_value(cfg, "filters", name, 0, 0, int64_t{1} << 40));
    if (k.shape.size() != 4 || k.shape[0] != ks[0] || k.shape[1] != ks[1] || k.shape[3] != filters) {
      std::ostringstream s;
      s << "layer '" << name << "': kernel shape [";
      for (size_t i = 0; i < k.shape.size(); ++i) s << (i ? ", " : "") << k.shape[i];
      s << "] does not match kernel_size " << ks[0] << "x" << ks[1] << " and " << filters << " filters";
      fail(ErrorKind::Parse, s.str());
    }
    const size_t kh = k.shape[0], kw = k.shape[1], ci = k.shape[2], co = k.shape[3];
    std::vector<float> oihw(k.data.size());
    for (size_t y = 0; y < kh; ++y)
      for (size_t x = 0; x < kw; ++x)
        for (size_t i = 0; i < ci; ++i)
          for (size_t o = 0; o < co; ++o)
            oihw[((o * ci + i) * kh + y) * kw + x] = k.data[((y * kw + x) * ci + i) * co + o];
    out.tensors[name + ".weight"] = Tensor::from_vec(oihw, {co, ci, kh, kw}, Device::cpu());
    auto ub = cfg.find("use_bias");
    if (ub != cfg.end() && !ub->is_null() && !ub->is_boolean())
      fail(ErrorKind::Parse, "layer '" + name + "': bad 'use_bias'");
    const bool use_bias = ub == cfg.end() || ub->is_null() || ub->get<bool>();
    if (use_bias) {
      auto bit = weights.find(name + "/bias");
      if (bit == weights.end())
        fail(ErrorKind::Parse, "layer '" + name + "': weight '" + name + "/bias' is missing");
      if (bit->second.shape != std::vector<size_t>{co})
        fail(ErrorKind::Parse,
             "layer '" + name + "': bias shape does not match " + std::to_string(co) + " filters");
      out.tensors[name + ".bias"] = Tensor::from_vec(bit->second.data, {co}, Device::cpu());
    }
    node["op"] = "conv2d";
    node["in_channels"] = ci;
    node["out_channels"] = co;
    node["kernel"] = {kh, kw};
    node["padding"] = pad;
    node["bias"] = use_bias;
    node["activation"] = act;
    return node;
  }
  if (cls == "Activation" || cls == "ReLU") {
    std::string act = cls == "ReLU" ? "relu" : string_value(cfg, "activation", name, "linear");
    if (cls == "ReLU" && ((cfg.contains("max_value") && !cfg["max_value"].is_null()) ||
                          number_value(cfg, "negative_slope", name, 0.0) != 0.0 ||
                          number_value(cfg, "threshold", name, 0.0) != 0.0)) {
      fail(ErrorKind::UnsupportedOp, "layer '" + name + "': only a plain ReLU is supported");
    }
    if (act == "relu") {
      node["op"] = "relu";
    } else if (act == "linear") {
      node["op"] = "identity";
    } else {
      fail(ErrorKind::UnsupportedOp, "layer '" + name + "': activation '" + act + "' is not supported");
    }
    return node;
  }
  if (cls == "Concatenate") {
    const int64_t axis = int_value(cfg, "axis", name, -1, -64, 64);
    if (axis != 3 && axis != -1)
      fail(ErrorKind::UnsupportedOp, "layer '" + name + "': only concatenation along channels is supported");
    node["op"] = "concat";
    return node;
  }
  if (cls == "Add") {
    node["op"] = "add";
    return node;
  }
  if (cls == "UpSampling2D") {
    check_channels_last(cfg, name);
    const std::string interp = string_value(cfg, "interpolation", name, "nearest");
    if (interp != "nearest")
      fail(ErrorKind::UnsupportedOp, "layer '" + name + "': interpolation '" + interp + "' is not supported");
    auto size = pair_of(cfg, "size", name, 2);
    if (size[0] == 0 || size[1] == 0) fail(ErrorKind::Parse, "layer '" + name + "': upsampling size 0");
    if (size[0] > kMaxScale || size[1] > kMaxScale) {
      fail(ErrorKind::UnsupportedOp, "layer '" + name + "': upsampling by " + std::to_string(size[0]) + "x" +
                                         std::to_string(size[1]) + " (at most " + std::to_string(kMaxScale) +
                                         " is supported)");
    }
    node["op"] = "upsample_nearest";
    node["size"] = size;
    return node;
  }
  fail(ErrorKind::UnsupportedOp, "layer '" + name + "': unsupported layer type " + io::excerpt(cls));
}

// Input layer names of a functional-model layer (one call of the layer, single outputs).
std::vector<std::string> inbound_names(const json& layer, const std::string& name) {
  std::vector<std::string> names;
  if (!layer.contains("inbound_nodes") || !layer["inbound_nodes"].is_array())
    fail(ErrorKind::Parse, "layer '" + name + "' has no inbound_nodes");
  const json& nodes = layer["inbound_nodes"];
  if (nodes.empty()) return names;
  if (nodes.size() != 1)
    fail(ErrorKind::UnsupportedOp,
         "layer '" + name + "' is called more than once (shared layers are unsupported)");
  if (!nodes[0].is_array())
    fail(ErrorKind::UnsupportedOp, "layer '" + name + "': unsupported inbound_nodes format");
  for (const json& in : nodes[0]) {
    if (!in.is_array() || in.size() < 3 || !in[0].is_string() || in[1] != 0 || in[2] != 0) {
      fail(ErrorKind::UnsupportedOp, "layer '" + name + "': unsupported inbound node entry");
    }
    names.push_back(in[0].get<std::string>());
  }
  return names;
}

std::string single_endpoint(const json& list, const char* what) {
  if (!list.is_array() || list.size() != 1 || !list[0].is_array() || list[0].empty() ||
      !list[0][0].is_string()) {
    fail(ErrorKind::UnsupportedOp, std::string("the model needs exactly one ") + what);
  }
  return list[0][0].get<std::string>();
}

// A layer's name: a non-empty string of at most 256 bytes, not seen before.
std::string layer_name(const json& v, std::set<std::string>& seen) {
  if (!v.is_string()) fail(ErrorKind::Parse, "a layer name is not a string");
  std::string name = v.get<std::string>();
  if (name.empty() || name.size() > 256 || !seen.insert(name).second)
    fail(ErrorKind::Parse,
         "layer name '" + io::excerpt(name) + "' is empty, longer than 256 bytes or repeated");
  return name;
}

ConvertedModel convert(std::string_view text, const std::string& label, const ShardSource& shards,
                       const std::string& source) {
  io::check_json_depth(text, kMaxJsonDepth, "tfjs: " + label);
  json model;
  try {
    model = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    fail(ErrorKind::Parse, label + " is not valid JSON: " + e.what());
  }
  try {
    if (!model.is_object() || !model.contains("modelTopology") || !model.contains("weightsManifest")) {
      fail(ErrorKind::Parse, label + " is not a TF.js layers model (no modelTopology / weightsManifest)");
    }
    if (model.contains("format") && model["format"] != "layers-model") {
      fail(ErrorKind::UnsupportedOp,
           "model format " + excerpt(model["format"]) + " is not supported (only layers-model)");
    }
    auto weights = read_weights(model["weightsManifest"], shards);
    const json& topo = model["modelTopology"];
    const json& mc = topo.contains("model_config") ? topo["model_config"] : topo;
    if (!mc.is_object() || !mc.contains("class_name") || !mc.contains("config"))
      fail(ErrorKind::Parse, "modelTopology has no model_config");
    const std::string cls = mc["class_name"].get<std::string>();
    const json& cfg = mc["config"];

    ConvertedModel out;
    json nodes = json::array();
    std::string input_name, output_name;
    std::set<std::string> seen;
    if (cls == "Functional" || cls == "Model") {
      if (!cfg.contains("layers") || !cfg["layers"].is_array())
        fail(ErrorKind::Parse, "model_config has no layers");
      for (const json& layer : cfg["layers"]) {
        if (!layer.is_object() || !layer.contains("class_name") || !layer.contains("config") ||
            !layer["config"].is_object()) {
          fail(ErrorKind::Parse, "a layer has no class_name / config");
        }
        std::string name = layer_name(
            layer.contains("name") ? layer["name"] : layer["config"].value("name", json("")), seen);
        json node =
            convert_layer(layer["class_name"].get<std::string>(), name, layer["config"], weights, out);
        node["inputs"] = inbound_names(layer, name);
        nodes.push_back(std::move(node));
      }
      input_name = single_endpoint(cfg.value("input_layers", json()), "input layer");
      output_name = single_endpoint(cfg.value("output_layers", json()), "output layer");
    } else if (cls == "Sequential") {
      const json& layers = cfg.is_array() ? cfg : cfg.value("layers", json());
      if (!layers.is_array() || layers.empty()) fail(ErrorKind::Parse, "Sequential model has no layers");
      std::string prev;
      for (const json& layer : layers) {
        if (!layer.is_object() || !layer.contains("class_name") || !layer.contains("config") ||
            !layer["config"].is_object()) {
          fail(ErrorKind::Parse, "a layer has no class_name / config");
        }
        const json& lc = layer["config"];
        std::string name = layer_name(lc.value("name", json("")), seen);
        if (prev.empty() && layer["class_name"] != "InputLayer") {
          json in = convert_layer("InputLayer", "input", lc, weights, out);
          in["inputs"] = json::array();
          nodes.push_back(in);
          prev = "input";
          input_name = "input";
        }
        json node = convert_layer(layer["class_name"].get<std::string>(), name, lc, weights, out);
        node["inputs"] = prev.empty() ? json::array() : json::array({prev});
        if (prev.empty()) input_name = name;
        nodes.push_back(std::move(node));
        prev = name;
      }
      output_name = prev;
    } else {
      fail(ErrorKind::UnsupportedOp, "model class " + cls + " is not supported");
    }

    // scale: the product of the upsampling factors (checked consistent by the graph builder)
    size_t scale = 1;
    for (const json& n : nodes) {
      if (n["op"] == "upsample_nearest") {
        if (n["size"][0] != n["size"][1])
          fail(ErrorKind::UnsupportedOp,
               "layer '" + n["name"].get<std::string>() + "': unequal upsampling factors");
        scale *= n["size"][0].get<size_t>();  // each at most kMaxScale: no overflow before the check
        if (scale > kMaxScale) {
          fail(ErrorKind::UnsupportedOp, "the upsampling layers scale by more than " +
                                             std::to_string(kMaxScale) + " (at " +
                                             n["name"].get<std::string>() + ")");
        }
      }
    }
    json graph = {{"format", "candle-graph"}, {"version", 1},   {"input", input_name},
                  {"output", output_name},    {"scale", scale}, {"layers", nodes}};
    out.metadata["topology"] = graph.dump();
    out.metadata["scale"] = std::to_string(scale);
    if (!source.empty()) out.metadata["source"] = source;
    return out;
  } catch (const json::exception& e) {
    fail(ErrorKind::Parse, label + ": unexpected model.json content: " + e.what());
  }
}

}  // namespace

ConvertedModel convert_layers_model(const std::string& path, const std::string& source) {
  fs::path json_path(path);
  std::error_code ec;
  if (fs::is_directory(json_path, ec)) json_path /= "model.json";
  std::vector<char> text = read_file(json_path, "model.json", kMaxModelJsonBytes);
  const fs::path dir = json_path.parent_path();
  ShardSource shards;
  shards.size = [&](const std::string& rel) -> std::optional<uint64_t> {
    std::error_code e;
    const fs::path p = dir / rel;
    if (!fs::is_regular_file(p, e)) return std::nullopt;
    const uintmax_t n = fs::file_size(p, e);
    if (e) return std::nullopt;
    return static_cast<uint64_t>(n);
  };
  shards.read = [&](const std::string& rel, uint64_t max_bytes) {
    return read_file(dir / rel, "weight shard", max_bytes);
  };
  return convert(std::string_view(text.data(), text.size()), json_path.string(), shards, source);
}

ConvertedModel convert_layers_model_json(std::string_view model_json,
                                         const std::map<std::string, std::vector<char>>& shards,
                                         const std::string& source) {
  ShardSource src;
  src.size = [&](const std::string& rel) -> std::optional<uint64_t> {
    auto it = shards.find(rel);
    if (it == shards.end()) return std::nullopt;
    return it->second.size();
  };
  src.read = [&](const std::string& rel, uint64_t max_bytes) {
    const std::vector<char>& b = shards.at(rel);
    if (b.size() > max_bytes)
      fail(ErrorKind::Io, "weight shard " + io::excerpt(rel) + " is larger than expected");
    return b;
  };
  return convert(model_json, "model.json", src, source);
}

void convert_layers_model_to_file(const std::string& path, const std::string& out_path,
                                  const std::string& source) {
  ConvertedModel m = convert_layers_model(path, source);
  safetensors::save(m.tensors, out_path, m.metadata);
}

}  // namespace candle::models::tfjs
