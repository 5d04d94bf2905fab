// Residual dense network (see include/candle/models/rdn.h): a small interpreter over the
// normalised layer graph. Conv + a following relu (when the relu is the conv's only
// consumer) run as one conv2d_fused call; every intermediate is released after its last use.
#include "candle/models/rdn.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <vector>

#include "candle/io/json_limits.h"
#include "candle/io/safetensors.h"
#include "rdn_tiles.h"

namespace candle::models {

using json = nlohmann::json;

namespace {

[[noreturn]] void fail(ErrorKind kind, const std::string& msg) { throw Error(kind, "rdn: " + msg); }

enum class Op { Input, Conv, Relu, Identity, Concat, Add, Upsample };

Op parse_op(const std::string& s, const std::string& layer) {
  if (s == "input") return Op::Input;
  if (s == "conv2d") return Op::Conv;
  if (s == "relu") return Op::Relu;
  if (s == "identity") return Op::Identity;
  if (s == "concat") return Op::Concat;
  if (s == "add") return Op::Add;
  if (s == "upsample_nearest") return Op::Upsample;
  fail(ErrorKind::UnsupportedOp, "layer '" + layer + "': unknown op '" + s + "'");
}

std::string shape_str(const std::vector<size_t>& d) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < d.size(); ++i) s << (i ? ", " : "") << d[i];
  s << "]";
  return s.str();
}

// Bounds on what a topology may ask for (a hostile file must not make the graph builder or
// the memory plan allocate or overflow): nesting, layers, channels, kernels, scale.
constexpr size_t kMaxJsonDepth = 64;
constexpr size_t kMaxLayers = 100'000;
constexpr size_t kMaxChannels = size_t{1} << 16;
constexpr size_t kMaxKernel = 63;
constexpr size_t kMaxScale = 8;
// a fused upsample's phase weights (f64 while summed) beyond this stay a plain upsample + conv
constexpr size_t kMaxFusedWeights = size_t{1} << 24;

bool supported_scale(size_t s, bool allow_one) {
  return (allow_one && s == 1) || s == 2 || s == 3 || s == 4 || s == 8;
}

// An unsigned field in [0, max]: anything else (absent, negative, a float, too large) is an error.
size_t uint_field(const json& l, const char* key, size_t max, const std::string& layer) {
  const json& v = l.at(key);
  if (!v.is_number_unsigned() || v.get<uint64_t>() > max) {
    fail(ErrorKind::Parse, "layer '" + io::excerpt(layer) + "': '" + key + "' must be an integer from 0 to " +
                               std::to_string(max) + ", got " + io::excerpt(v.dump()));
  }
  return static_cast<size_t>(v.get<uint64_t>());
}

// A pair [a, b] of unsigned values, each at most `max`.
std::vector<size_t> uint_pair(const json& l, const char* key, size_t max, const std::string& layer) {
  const json& v = l.at(key);
  if (!v.is_array() || v.size() != 2 || !v[0].is_number_unsigned() || !v[1].is_number_unsigned() ||
      v[0].get<uint64_t>() > max || v[1].get<uint64_t>() > max) {
    fail(ErrorKind::Parse, "layer '" + io::excerpt(layer) + "': '" + key +
                               "' must be a pair of integers from 0 to " + std::to_string(max) + ", got " +
                               io::excerpt(v.dump()));
  }
  return {static_cast<size_t>(v[0].get<uint64_t>()), static_cast<size_t>(v[1].get<uint64_t>())};
}

// Extra input pixels a block algorithm (Winograd F(4x4, 3x3): 4 outputs from 6 inputs) may
// make an output depend on, beyond its receptive field, per conv with a spatial kernel.
constexpr size_t kBlockSlack = 3;

}  // namespace

struct Rdn::Impl {
  // A k x k conv (padding (k-1)/2) over an s-times nearest-upsampled map reads, for output
  // row Y*s + a, upsampled rows Y*s + a + dy = source rows Y + floor((a + dy) / s): each
  // output phase (a, b) is a small conv on the source map whose taps are sums of the
  // original taps. All phases run as one conv on the source (s_h * s_w times the output
  // channels, in pixel-shuffle order) followed by a pixel shuffle: nothing at the
  // upsampled size is materialised but the output, and 3x3 phase kernels take Winograd.
  struct Node {
    std::string name;
    Op op = Op::Identity;
    std::vector<size_t> inputs;  // indices into nodes (all earlier: topological order)
    // conv
    Tensor weight;
    std::optional<Tensor> bias;
    size_t pad_h = 0, pad_w = 0, k_h = 1, k_w = 1;
    bool relu = false;
    // upsample; `fused`: computed by the conv that follows it (see fuse_upsample)
    size_t up_h = 1, up_w = 1;
    bool fused = false;
    // a conv reading a fused x(fuse_h, fuse_w) nearest upsample: one conv per phase class
    size_t fuse_h = 1, fuse_w = 1, src_pad_h = 0, src_pad_w = 0;
    // static shape: channels and resolution relative to the input
    size_t channels = 0, res_h = 1, res_w = 1;
    size_t last_use = 0;  // the step after which the value is released
  };
  // Replaces `conv`'s weights by its phase convs over the source of the x(s_h, s_w) upsample.
  static void fuse_upsample(Node& conv, size_t s_h, size_t s_w, const Device& device);
  static Tensor phase_conv_forward(const Node& conv, const Tensor& x, std::optional<UnaryOp> act);

  std::vector<Node> nodes;  // topological order; nodes[0] is the input, nodes.back() the output
  Device device = Device::cpu();
  size_t scale = 1;
  size_t receptive = 0, halo = 0, bytes_per_pixel = 0, largest_bytes_per_pixel = 0, convs = 0;

  // Input pixels (per side) the output depends on; slack per spatial conv as above.
  size_t reach(size_t slack) const {
    std::vector<size_t> demand(nodes.size(), 0);
    for (size_t i = nodes.size(); i-- > 0;) {
      const Node& n = nodes[i];
      size_t d = demand[i];
      if (n.op == Op::Conv) {
        size_t r = std::max(n.pad_h, n.pad_w);
        // a fused conv's phase convs run on the upsample's source: slack in source pixels
        d += r + (std::max(n.k_h, n.k_w) > 1 ? slack * std::max(n.fuse_h, n.fuse_w) : 0);
      } else if (n.op == Op::Upsample) {
        size_t f = std::min(n.up_h, n.up_w);
        d = (d + f - 1) / f;
      }
      for (size_t in : n.inputs) demand[in] = std::max(demand[in], d);
    }
    return demand[0];
  }
};

namespace {

// Along one axis: for output phase a of an x s upsample followed by a k-tap conv (padding
// (k-1)/2), the source offset floor((a + t - pad) / s) each tap t reads.
std::vector<int64_t> tap_offsets(size_t a, size_t s, size_t k) {
  std::vector<int64_t> o(k);
  const int64_t pad = static_cast<int64_t>(k - 1) / 2;
  for (size_t t = 0; t < k; ++t) {
    const int64_t u = static_cast<int64_t>(a) + static_cast<int64_t>(t) - pad, si = static_cast<int64_t>(s);
    o[t] = u >= 0 ? u / si : -((-u + si - 1) / si);
  }
  return o;
}

}  // namespace

void Rdn::Impl::fuse_upsample(Node& conv, size_t s_h, size_t s_w, const Device& device) {
  const size_t co = conv.weight.dim(0), ci = conv.weight.dim(1), kh = conv.k_h, kw = conv.k_w;
  const std::vector<float> w = conv.weight.to_device(Device::cpu()).flatten_all().to_vec1<float>();
  // source offsets per phase and tap along each axis; the phase kernel spans -pad..pad
  std::vector<std::vector<int64_t>> oy(s_h), ox(s_w);
  int64_t pad_h = 0, pad_w = 0;
  for (size_t a = 0; a < s_h; ++a) {
    oy[a] = tap_offsets(a, s_h, kh);
    pad_h = std::max({pad_h, -oy[a].front(), oy[a].back()});
  }
  for (size_t b = 0; b < s_w; ++b) {
    ox[b] = tap_offsets(b, s_w, kw);
    pad_w = std::max({pad_w, -ox[b].front(), ox[b].back()});
  }
  const size_t eh = static_cast<size_t>(2 * pad_h + 1), ew = static_cast<size_t>(2 * pad_w + 1);
  // phase weights, output channel (c, a, b) in pixel-shuffle order, taps summed in f64
  std::vector<double> acc(co * s_h * s_w * ci * eh * ew, 0.0);
  for (size_t o = 0; o < co; ++o)
    for (size_t a = 0; a < s_h; ++a)
      for (size_t b = 0; b < s_w; ++b)
        for (size_t i = 0; i < ci; ++i)
          for (size_t ty = 0; ty < kh; ++ty)
            for (size_t tx = 0; tx < kw; ++tx) {
              const size_t ey = static_cast<size_t>(oy[a][ty] + pad_h),
                           ex = static_cast<size_t>(ox[b][tx] + pad_w);
              acc[((((o * s_h + a) * s_w + b) * ci + i) * eh + ey) * ew + ex] +=
                  w[((o * ci + i) * kh + ty) * kw + tx];
            }
  conv.weight = Tensor::from_vec(std::vector<float>(acc.begin(), acc.end()), {co * s_h * s_w, ci, eh, ew},
                                 Device::cpu())
                    .to_device(device);
  if (conv.bias) {
    // every phase of channel c gets c's bias
    conv.bias = conv.bias->reshape({co, 1}).broadcast_as({co, s_h * s_w}).flatten_all().copy();
  }
  conv.fuse_h = s_h, conv.fuse_w = s_w;
  conv.src_pad_h = static_cast<size_t>(pad_h), conv.src_pad_w = static_cast<size_t>(pad_w);
}

Tensor Rdn::Impl::phase_conv_forward(const Node& conv, const Tensor& x, std::optional<UnaryOp> act) {
  const size_t b = x.dim(0), h = x.dim(2), w = x.dim(3), co = conv.channels, sh = conv.fuse_h,
               sw = conv.fuse_w;
  Tensor y = conv.src_pad_h == conv.src_pad_w
                 ? x.conv2d_fused(conv.weight, conv.bias, conv.src_pad_h, 1, 1, 1, act)
                 : x.pad_with_zeros(2, conv.src_pad_h, conv.src_pad_h)
                       .pad_with_zeros(3, conv.src_pad_w, conv.src_pad_w)
                       .conv2d_fused(conv.weight, conv.bias, 0, 1, 1, 1, act);
  // pixel shuffle: [b, (c, a, bb), h, w] -> [b, c, h, a, w, bb] -> [b, c, h * sh, w * sw]
  return y.reshape({b, co, sh, sw, h, w})
      .permute({0, 1, 4, 2, 5, 3})
      .contiguous()
      .reshape({b, co, h * sh, w * sw});
}

Rdn Rdn::load(const std::string& path, const Device& device) {
  return with_context("loading the model " + path, [&] {
    safetensors::MmapedSafetensors st(path);
    auto it = st.metadata().find("topology");
    if (it == st.metadata().end())
      fail(ErrorKind::Parse, "the file has no 'topology' metadata (not a converted model)");
    std::unordered_map<std::string, Tensor> tensors;
    for (const auto& name : st.names()) tensors.emplace(name, st.load(name, device));
    Rdn m(tensors, it->second, device);
    if (!supported_scale(m.scale(), false)) {
      fail(ErrorKind::UnsupportedOp,
           "the model upscales x" + std::to_string(m.scale()) + "; supported scales are 2, 3, 4 and 8");
    }
    auto sc = st.metadata().find("scale");
    if (sc != st.metadata().end() && sc->second != std::to_string(m.scale())) {
      fail(ErrorKind::Parse, "metadata scale " + io::excerpt(sc->second) +
                                 " does not match the graph's scale " + std::to_string(m.scale()));
    }
    return m;
  });
}

Rdn::Rdn(const std::unordered_map<std::string, Tensor>& tensors, const std::string& topology_json,
         const Device& device) {
  auto impl = std::make_shared<Impl>();
  impl->device = device;
  io::check_json_depth(topology_json, kMaxJsonDepth, "rdn: topology");
  json g;
  try {
    g = json::parse(topology_json);
  } catch (const json::exception& e) {
    fail(ErrorKind::Parse, std::string("topology is not valid JSON: ") + e.what());
  }
  try {
    if (!g.is_object() || !g.contains("format") || g["format"] != "candle-graph" || !g.contains("version") ||
        g["version"] != 1) {
      fail(ErrorKind::Parse, "topology is not a candle-graph version 1");
    }
    const std::string in_name = g.at("input").get<std::string>(),
                      out_name = g.at("output").get<std::string>();
    // parse layers by name
    std::map<std::string, const json*> by_name;
    const json& layers = g.at("layers");
    if (!layers.is_array()) fail(ErrorKind::Parse, "'layers' is not a list");
    if (layers.size() > kMaxLayers)
      fail(ErrorKind::UnsupportedOp, "the topology has more than " + std::to_string(kMaxLayers) + " layers");
    // the scale the upsampling layers make (each checked below, when on the output's path)
    size_t up_product = 1;
    for (const json& l : layers) {
      std::string name = l.at("name").get<std::string>();
      if (name.size() > 256)
        fail(ErrorKind::Parse, "layer name '" + io::excerpt(name) + "' is longer than 256 bytes");
      if (!by_name.emplace(name, &l).second) fail(ErrorKind::Parse, "layer '" + name + "' appears twice");
      if (l.contains("op") && l["op"] == "upsample_nearest") {
        const auto sz = uint_pair(l, "size", SIZE_MAX, name);
        if (sz[0] > kMaxScale || sz[1] > kMaxScale) {
          fail(ErrorKind::UnsupportedOp, "layer '" + name + "' upsamples x" +
                                             std::to_string(std::max(sz[0], sz[1])) + " (at most x" +
                                             std::to_string(kMaxScale) + " is supported)");
        }
        if (sz[0] != sz[1])
          fail(ErrorKind::UnsupportedOp, "layer '" + name + "': unequal horizontal and vertical upsampling");
        if (sz[0] == 0) fail(ErrorKind::Parse, "layer '" + name + "': bad upsampling size");
        up_product *= sz[0];
        if (up_product > kMaxScale) {
          fail(ErrorKind::UnsupportedOp, "the upsampling layers scale by more than " +
                                             std::to_string(kMaxScale) + " (at layer '" + name + "')");
        }
      }
    }
    if (!by_name.count(in_name))
      fail(ErrorKind::Parse, "input layer '" + io::excerpt(in_name) + "' not found");
    if (!by_name.count(out_name))
      fail(ErrorKind::Parse, "output layer '" + io::excerpt(out_name) + "' not found");
    // topological order of the output's ancestors (iterative DFS; a cycle is an error)
    std::map<std::string, size_t> index;
    std::map<std::string, int> state;  // 1: on the stack, 2: done
    std::vector<std::pair<std::string, size_t>> stack{{out_name, 0}};
    std::vector<const json*> order;
    state[out_name] = 1;
    while (!stack.empty()) {
      auto& [name, next] = stack.back();
      const json& l = *by_name.at(name);
      const json& ins = l.at("inputs");
      if (next < ins.size()) {
        std::string in = ins[next++].get<std::string>();
        if (!by_name.count(in))
          fail(ErrorKind::Parse, "layer '" + name + "' reads unknown layer '" + io::excerpt(in) + "'");
        if (state[in] == 1) fail(ErrorKind::Parse, "the graph has a cycle through layer '" + in + "'");
        if (state[in] == 0) {
          state[in] = 1;
          stack.emplace_back(in, 0);
        }
      } else {
        state[name] = 2;
        order.push_back(&l);
        stack.pop_back();
      }
    }
    auto& nodes = impl->nodes;
    for (const json* lp : order) {
      const json& l = *lp;
      Impl::Node n;
      n.name = l.at("name").get<std::string>();
      n.op = parse_op(l.at("op").get<std::string>(), n.name);
      for (const json& in : l.at("inputs")) n.inputs.push_back(index.at(in.get<std::string>()));
      auto arity = [&](size_t lo, size_t hi) {
        if (n.inputs.size() < lo || n.inputs.size() > hi)
          fail(ErrorKind::Parse, "layer '" + n.name + "' has " + std::to_string(n.inputs.size()) + " inputs");
      };
      const Impl::Node* first = n.inputs.empty() ? nullptr : &nodes[n.inputs[0]];
      switch (n.op) {
        case Op::Input:
          arity(0, 0);
          if (n.name != in_name) fail(ErrorKind::Parse, "second input layer '" + n.name + "'");
          n.channels = l.contains("channels") ? uint_field(l, "channels", kMaxChannels, n.name) : 0;
          if (n.channels == 0) n.channels = 3;
          break;
        case Op::Conv: {
          arity(1, 1);
          const size_t ci = uint_field(l, "in_channels", kMaxChannels, n.name),
                       co = uint_field(l, "out_channels", kMaxChannels, n.name);
          if (ci == 0 || co == 0) fail(ErrorKind::Parse, "layer '" + n.name + "': zero channels");
          // (bounded first: 2 * p + 1 must not wrap)
          const auto k = uint_pair(l, "kernel", kMaxKernel, n.name),
                     p = uint_pair(l, "padding", kMaxKernel, n.name);
          if (k[0] != 2 * p[0] + 1 || k[1] != 2 * p[1] + 1) {
            fail(ErrorKind::UnsupportedOp,
                 "layer '" + n.name + "': kernel and padding must keep the image size");
          }
          if (first->channels != ci) {
            fail(ErrorKind::ShapeMismatch, "layer '" + n.name + "' expects " + std::to_string(ci) +
                                               " input channels, gets " + std::to_string(first->channels));
          }
          auto w = tensors.find(n.name + ".weight");
          if (w == tensors.end()) fail(ErrorKind::Parse, "weight '" + n.name + ".weight' is missing");
          if (w->second.dims() != std::vector<size_t>{co, ci, k[0], k[1]}) {
            fail(ErrorKind::ShapeMismatch, "weight '" + n.name + ".weight' has shape " +
                                               shape_str(w->second.dims()) + ", expected " +
                                               shape_str({co, ci, k[0], k[1]}));
          }
          n.weight = w->second.to_dtype(DType::F32).to_device(device);
          if (l.value("bias", true)) {
            auto b = tensors.find(n.name + ".bias");
            if (b == tensors.end()) fail(ErrorKind::Parse, "weight '" + n.name + ".bias' is missing");
            if (b->second.dims() != std::vector<size_t>{co}) {
              fail(ErrorKind::ShapeMismatch, "weight '" + n.name + ".bias' has shape " +
                                                 shape_str(b->second.dims()) + ", expected " +
                                                 shape_str({co}));
            }
            n.bias = b->second.to_dtype(DType::F32).to_device(device);
          }
          const std::string act = l.value("activation", "linear");
          if (act != "linear" && act != "relu")
            fail(ErrorKind::UnsupportedOp, "layer '" + n.name + "': activation '" + act + "'");
          n.relu = act == "relu";
          n.k_h = k[0], n.k_w = k[1], n.pad_h = p[0], n.pad_w = p[1];
          n.channels = co, n.res_h = first->res_h, n.res_w = first->res_w;
          impl->convs++;
          break;
        }
        case Op::Relu:
        case Op::Identity:
          arity(1, 1);
          n.channels = first->channels, n.res_h = first->res_h, n.res_w = first->res_w;
          break;
        case Op::Concat:
        case Op::Add:
          arity(n.op == Op::Add ? 2 : 1, SIZE_MAX);
          n.res_h = first->res_h, n.res_w = first->res_w;
          for (size_t in : n.inputs) {
            const auto& x = nodes[in];
            if (x.res_h != n.res_h || x.res_w != n.res_w ||
                (n.op == Op::Add && x.channels != first->channels)) {
              fail(ErrorKind::ShapeMismatch,
                   "layer '" + n.name + "': inputs '" + first->name + "' and '" + x.name + "' do not match");
            }
            n.channels = n.op == Op::Add ? x.channels : n.channels + x.channels;
            if (n.channels > kMaxChannels) {
              fail(ErrorKind::UnsupportedOp,
                   "layer '" + n.name + "' has more than " + std::to_string(kMaxChannels) + " channels");
            }
          }
          break;
        case Op::Upsample: {
          arity(1, 1);
          // (checked above: equal, 1 to 8, their product at most 8)
          const auto s = uint_pair(l, "size", kMaxScale, n.name);
          n.up_h = s[0], n.up_w = s[1];
          n.channels = first->channels, n.res_h = first->res_h * s[0], n.res_w = first->res_w * s[1];
          break;
        }
      }
      index[n.name] = nodes.size();
      nodes.push_back(std::move(n));
    }
    if (nodes.empty() || nodes[0].op != Op::Input)
      fail(ErrorKind::Parse, "the output does not depend on the input layer");
    const auto& outn = nodes.back();
    if (outn.res_h != outn.res_w) fail(ErrorKind::UnsupportedOp, "unequal horizontal and vertical scale");
    impl->scale = outn.res_h;
    if (impl->scale != up_product) {
      fail(ErrorKind::Parse, "the output is upscaled x" + std::to_string(impl->scale) +
                                 " but the upsampling layers multiply to x" + std::to_string(up_product) +
                                 " (a layer off the output's path?)");
    }
    if (!supported_scale(impl->scale, true)) {
      fail(ErrorKind::UnsupportedOp,
           "the graph upscales x" + std::to_string(impl->scale) + "; supported scales are 1, 2, 3, 4 and 8");
    }
    if (g.contains("scale") && g["scale"] != impl->scale) {
      fail(ErrorKind::Parse, "topology scale " + io::excerpt(g["scale"].dump()) +
                                 " does not match the graph's " + std::to_string(impl->scale));
    }
    // fuse conv -> relu when the relu is the conv's only consumer
    std::vector<size_t> consumers(nodes.size(), 0);
    for (const auto& n : nodes)
      for (size_t in : n.inputs) consumers[in]++;
    for (auto& n : nodes) {
      if (n.op == Op::Relu) {
        auto& src = nodes[n.inputs[0]];
        if (src.op == Op::Conv && consumers[n.inputs[0]] == 1) {
          src.relu = true;
          n.op = Op::Identity;
        }
      }
    }
    // fuse a nearest upsample into the conv that is its only consumer
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (nodes[i].op != Op::Upsample || consumers[i] != 1) continue;
      for (size_t j = i + 1; j < nodes.size(); ++j) {
        if (nodes[j].op != Op::Conv || nodes[j].inputs[0] != i) continue;
        // trainable weights (Vars) keep the plain, differentiable upsample + conv, and so do
        // convs whose phase weights would be too large
        const size_t fused_weights = nodes[j].weight.elem_count() * nodes[i].up_h * nodes[i].up_w *
                                     (nodes[j].k_h + nodes[i].up_h) * (nodes[j].k_w + nodes[i].up_w) /
                                     (nodes[j].k_h * nodes[j].k_w);
        if (!nodes[j].weight.track_op() && fused_weights <= kMaxFusedWeights) {
          Impl::fuse_upsample(nodes[j], nodes[i].up_h, nodes[i].up_w, device);
          nodes[i].fused = true;
        }
        break;
      }
    }
    // liveness and the activation bytes per input pixel at the peak
    for (size_t i = 0; i < nodes.size(); ++i)
      for (size_t in : nodes[i].inputs) nodes[in].last_use = i;
    nodes.back().last_use = nodes.size();
    auto bytes = [](const Impl::Node& n) { return n.channels * n.res_h * n.res_w * sizeof(float); };
    size_t live = 0, peak = 0;
    for (size_t i = 0; i < nodes.size(); ++i) {
      const auto is_alias = [&](const Impl::Node& n) { return n.op == Op::Identity || n.fused; };
      if (!is_alias(nodes[i])) live += bytes(nodes[i]);
      // a conv also holds a padded / im2col'd copy of its input in the worst case; a conv
      // with a fused upsample a padded source, its phase outputs and their interleaving
      size_t extra = 0;
      if (nodes[i].op == Op::Conv) {
        const auto& in = nodes[nodes[i].inputs[0]];
        extra = in.fused ? bytes(nodes[in.inputs[0]]) + 2 * bytes(nodes[i]) : bytes(in);
      }
      peak = std::max(peak, live + extra);
      // one buffer: a value, or the padded copy of a conv's input
      impl->largest_bytes_per_pixel = std::max(impl->largest_bytes_per_pixel, bytes(nodes[i]));
      if (nodes[i].op == Op::Conv)
        impl->largest_bytes_per_pixel =
            std::max(impl->largest_bytes_per_pixel, bytes(nodes[nodes[i].inputs[0]]) * 9 / 8);
      for (size_t in : nodes[i].inputs)
        if (nodes[in].last_use == i && !is_alias(nodes[in])) live -= bytes(nodes[in]);
    }
    // forward's clamp and round make two more copies of the output
    impl->bytes_per_pixel = peak + 2 * bytes(nodes.back());
    impl->receptive = impl->reach(0);
    impl->halo = impl->reach(kBlockSlack);
  } catch (const json::exception& e) {
    fail(ErrorKind::Parse, std::string("bad topology: ") + e.what());
  } catch (const std::out_of_range& e) {
    fail(ErrorKind::Parse, std::string("bad topology: ") + e.what());
  }
  impl_ = std::move(impl);
}

size_t Rdn::scale() const { return impl_->scale; }
size_t Rdn::in_channels() const { return impl_->nodes.front().channels; }
size_t Rdn::out_channels() const { return impl_->nodes.back().channels; }
size_t Rdn::receptive_radius() const { return impl_->receptive; }
size_t Rdn::halo() const { return impl_->halo; }
size_t Rdn::activation_bytes_per_pixel() const { return impl_->bytes_per_pixel; }
size_t Rdn::largest_activation_bytes_per_pixel() const { return impl_->largest_bytes_per_pixel; }
const Device& Rdn::device() const { return impl_->device; }
size_t Rdn::num_layers() const { return impl_->nodes.size(); }
size_t Rdn::num_convs() const { return impl_->convs; }

Tensor Rdn::forward_raw(const Tensor& image) const {
  const auto& nodes = impl_->nodes;
  if (image.rank() != 4 || image.dim(1) != in_channels()) {
    fail(ErrorKind::ShapeMismatch, "forward expects an image [b, " + std::to_string(in_channels()) +
                                       ", h, w], got " + shape_str(image.dims()));
  }
  if (image.device().kind() != impl_->device.kind())
    fail(ErrorKind::DeviceMismatch, "the image is not on the model's device");
  std::vector<Tensor> values(nodes.size());
  values[0] = image.to_dtype(DType::F32);
  // CANDLE_RDN_PROFILE=1: each layer's time on stderr (the device is synchronised after each)
  static const bool profile = std::getenv("CANDLE_RDN_PROFILE") != nullptr;
  for (size_t i = 1; i < nodes.size(); ++i) {
    const auto& n = nodes[i];
    const auto t0 = std::chrono::steady_clock::now();
    struct Report {
      const Impl::Node& n;
      std::chrono::steady_clock::time_point t0;
      const Device& dev;
      ~Report() {
        if (!profile) return;
        try {
          dev.synchronize();  // a GPU layer's time, not its submission's
        } catch (const std::exception&) {
        }
        std::fprintf(
            stderr, "  %-16s %8.2f ms\n", n.name.c_str(),
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
    } report{n, t0, impl_->device};
    const Tensor& x = values[n.inputs[0]];
    switch (n.op) {
      case Op::Input: break;
      case Op::Conv: {
        std::optional<UnaryOp> act;
        if (n.relu) act = UnaryOp::Relu;
        if (n.fuse_h * n.fuse_w > 1) {
          values[i] = Impl::phase_conv_forward(n, x, act);
        } else if (n.pad_h == n.pad_w) {
          values[i] = x.conv2d_fused(n.weight, n.bias, n.pad_h, 1, 1, 1, act);
        } else {
          values[i] = x.pad_with_zeros(2, n.pad_h, n.pad_h)
                          .pad_with_zeros(3, n.pad_w, n.pad_w)
                          .conv2d_fused(n.weight, n.bias, 0, 1, 1, 1, act);
        }
        break;
      }
      case Op::Relu: values[i] = x.relu(); break;
      case Op::Identity: values[i] = x; break;
      case Op::Concat: {
        std::vector<Tensor> parts;
        for (size_t in : n.inputs) parts.push_back(values[in]);
        values[i] = parts.size() == 1 ? parts[0] : Tensor::cat(parts, 1);
        break;
      }
      case Op::Add: {
        Tensor acc = x.add(values[n.inputs[1]]);
        for (size_t k = 2; k < n.inputs.size(); ++k) acc = acc.add(values[n.inputs[k]]);
        values[i] = acc;
        break;
      }
      case Op::Upsample:
        values[i] = n.fused ? x : x.upsample_nearest2d(x.dim(2) * n.up_h, x.dim(3) * n.up_w);
        break;
    }
    for (size_t in : n.inputs)
      if (nodes[in].last_use == i) values[in] = Tensor();
  }
  return values.back();
}

Tensor Rdn::forward(const Tensor& image) const { return forward_raw(image).clamp(0.0f, 255.0f).round(); }

Tensor Rdn::forward_tiled(const Tensor& image, size_t tile,
                          const std::function<void(size_t, size_t)>& progress) const {
  if (tile == 0) fail(ErrorKind::InvalidArgument, "tile size 0");
  if (image.rank() != 4 || image.dim(1) != in_channels()) {
    fail(ErrorKind::ShapeMismatch, "forward expects an image [b, " + std::to_string(in_channels()) +
                                       ", h, w], got " + shape_str(image.dims()));
  }
  const size_t b = image.dim(0), h = image.dim(2), w = image.dim(3), s = scale(), halo = impl_->halo;
  const size_t ny = (h + tile - 1) / tile, nx = (w + tile - 1) / tile;
  if (ny <= 1 && nx <= 1) {
    Tensor out = forward(image);
    if (progress) progress(1, 1);
    return out;
  }
  auto extend = [&](size_t c0, size_t c1, size_t n) {
    return detail::tile_extent(c0, c1, n, halo, kTileAlign);
  };
  Tensor out = Tensor::zeros({b, out_channels(), h * s, w * s}, DType::F32, image.device());
  size_t done = 0;
  for (size_t ty = 0; ty < ny; ++ty) {
    const size_t y0 = ty * tile, y1 = std::min(h, y0 + tile);
    auto [ey0, ey1] = extend(y0, y1, h);
    std::vector<Tensor> row;
    for (size_t tx = 0; tx < nx; ++tx) {
      const size_t x0 = tx * tile, x1 = std::min(w, x0 + tile);
      auto [ex0, ex1] = extend(x0, x1, w);
      Tensor patch = image.narrow(2, ey0, ey1 - ey0).narrow(3, ex0, ex1 - ex0).contiguous();
      Tensor up = forward(patch);
      row.push_back(up.narrow(2, (y0 - ey0) * s, (y1 - y0) * s).narrow(3, (x0 - ex0) * s, (x1 - x0) * s));
      if (progress) progress(++done, nx * ny);
    }
    out.slice_set(row.size() == 1 ? row[0] : Tensor::cat(row, 3), 2, y0 * s);
  }
  return out;
}

}  // namespace candle::models
