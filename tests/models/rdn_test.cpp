// candle::models::Rdn on the bundled ESRGAN slim models: UpscalerJS's own sample outputs,
// tiled == untiled, and errors on bad graphs / weights.
#include "candle/models/rdn.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "candle/candle.h"
#include "candle/io/safetensors.h"
#include "cpu/gemm.h"
#include "png_util.h"

namespace {

using namespace candle;
using candle::models::Rdn;

const std::string kModels = std::string(CANDLE_TEST_DATA_DIR) + "/../../models/esrgan-slim/";

float max_abs_diff(const Tensor& a, const Tensor& b) {
  auto x = a.flatten_to_vec<float>(), y = b.flatten_to_vec<float>();
  EXPECT_EQ(x.size(), y.size());
  float m = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) m = std::max(m, std::fabs(x[i] - y[i]));
  return m;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.dims() != b.dims()) return false;
  auto x = a.flatten_to_vec<float>(), y = b.flatten_to_vec<float>();
  return std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

size_t count_diff(const Tensor& a, const Tensor& b) {
  auto x = a.flatten_to_vec<float>(), y = b.flatten_to_vec<float>();
  size_t n = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) n += x[i] != y[i];
  return n;
}

// Tiled output == untiled output, byte for byte: every conv rounds each output the same
// whatever the image extent (its GEMMs are cpu::gemm_tile_exact, the built-in GEMM, whose
// elements do not depend on the matrix sizes or the column's position).
void expect_tiled_equal(const Tensor& tiled, const Tensor& whole, size_t tile) {
  ASSERT_EQ(tiled.dims(), whole.dims());
  EXPECT_TRUE(same_bytes(tiled, whole))
      << "tile " << tile << ": " << count_diff(tiled, whole) << " values differ, max "
      << max_abs_diff(tiled, whole) << " (GEMM " << blas_name() << ")";
}

TEST(RdnModel, BundledModelsLoadWithTheirScale) {
  for (size_t s : {2, 3, 4, 8}) {
    Rdn net = Rdn::load(kModels + "x" + std::to_string(s) + ".safetensors", Device::cpu());
    EXPECT_EQ(net.scale(), s);
    EXPECT_EQ(net.in_channels(), 3u);
    EXPECT_EQ(net.out_channels(), 3u);
    EXPECT_EQ(net.num_convs(), 12u);
    EXPECT_EQ(net.num_layers(), 24u);
  }
}

TEST(RdnModel, ReceptiveRadiusOfEsrganSlim) {
  // 3x3 convs F_m1 F_0 F_1_1 F_2_1 GFF_2 UPN2 UPN3 (1 each) + 5x5 UPN1 (2) = 9, and the
  // 3x3 SR conv after the upsampling reaches one more input pixel.
  Rdn x2 = Rdn::load(kModels + "x2.safetensors", Device::cpu());
  EXPECT_EQ(x2.receptive_radius(), 10u);
  // plus 3 per spatial conv before the upsampling (8 convs); the SR conv runs fused with the
  // upsampling as phase convs on the source map: 1 + 3 source pixels, ceil((1 + 3 * s) / s)
  EXPECT_EQ(x2.halo(), 9u + 24u + 4u);
  Rdn x8 = Rdn::load(kModels + "x8.safetensors", Device::cpu());
  EXPECT_EQ(x8.receptive_radius(), 10u);
  EXPECT_EQ(x8.halo(), 9u + 24u + 4u);
}

void check_sample(size_t s) {
  Rdn net = Rdn::load(kModels + "x" + std::to_string(s) + ".safetensors", Device::cpu());
  Tensor in = test_models::load_rgb(kModels + "fixture.png");
  Tensor want = test_models::load_rgb(kModels + "samples/" + std::to_string(s) + "x/result.png");
  Tensor got = net.forward(in);
  ASSERT_EQ(got.dims(), want.dims());
  // UpscalerJS ran the model in TF.js (float32, another summation order) and wrote 8-bit
  // pixels: every pixel within 1.
  EXPECT_LE(max_abs_diff(got, want), 1.0f);
}

TEST(RdnModel, MatchesUpscalerJsSampleX2) { check_sample(2); }
TEST(RdnModel, MatchesUpscalerJsSampleX3) { check_sample(3); }
TEST(RdnModel, MatchesUpscalerJsSampleX4) { check_sample(4); }

// Built from Vars, the network is trainable: the upsample stays unfused (the phase conv's weights
// are derived values) and every weight, the SR conv after the upsample included, gets a gradient.
TEST(RdnModel, BuiltFromVarsEveryWeightGetsAGradient) {
  safetensors::MmapedSafetensors st(kModels + "x2.safetensors");
  std::unordered_map<std::string, Tensor> weights;
  std::vector<Var> vars;
  for (const auto& name : st.names()) {
    Var v = Var::from_tensor(st.load(name, Device::cpu()));
    vars.push_back(v);
    weights.emplace(name, v.as_tensor());
  }
  Rdn net(weights, st.metadata().at("topology"), Device::cpu());
  Tensor x = Tensor::rand(0.0, 255.0, {1, 3, 9, 7}, DType::F32, Device::cpu());
  GradStore grads = net.forward_raw(x).abs().mean_all().backward();
  for (const Var& v : vars) EXPECT_TRUE(grads.get(v.as_tensor()).has_value());
  auto sr = grads.get(weights.at("SR.weight"));
  ASSERT_TRUE(sr.has_value());
  EXPECT_GT(sr->abs().sum_all().to_scalar<float>(), 0.0f);
}

TEST(RdnModel, ForwardClampsAndRounds) {
  Rdn net = Rdn::load(kModels + "x2.safetensors", Device::cpu());
  Tensor in = test_models::load_rgb(kModels + "fixture.png").narrow(2, 0, 24).narrow(3, 0, 20);
  Tensor raw = net.forward_raw(in), out = net.forward(in);
  auto r = raw.flatten_to_vec<float>(), o = out.flatten_to_vec<float>();
  ASSERT_EQ(r.size(), o.size());
  for (size_t i = 0; i < r.size(); ++i)
    ASSERT_EQ(o[i], std::round(std::clamp(r[i], 0.0f, 255.0f))) << "at " << i;
}

TEST(RdnModel, TiledEqualsUntiledX2) {
  Rdn net = Rdn::load(kModels + "x2.safetensors", Device::cpu());
  Tensor in = test_models::load_rgb(kModels + "fixture.png");
  Tensor whole = net.forward(in);
  // tiles of 33 and 40: tile edges inside the image, partial tiles at the right/bottom edge
  for (size_t tile : {33, 40}) {
    size_t calls = 0;
    Tensor tiled = net.forward_tiled(in, tile, [&](size_t, size_t) { ++calls; });
    size_t n = (128 + tile - 1) / tile;
    EXPECT_EQ(calls, n * n);
    expect_tiled_equal(tiled, whole, tile);
  }
}

TEST(RdnModel, TiledEqualsUntiledX3OddSizes) {
  Rdn net = Rdn::load(kModels + "x3.safetensors", Device::cpu());
  // a 83 x 101 crop at an odd offset: odd image and tile sizes, unaligned image edges
  Tensor in = test_models::load_rgb(kModels + "fixture.png").narrow(2, 5, 83).narrow(3, 17, 101).contiguous();
  Tensor whole = net.forward(in);
  for (size_t tile : {27, 45}) {
    Tensor tiled = net.forward_tiled(in, tile);
    expect_tiled_equal(tiled, whole, tile);
  }
}

// The promise holds by construction for each of the built-in GEMM's kernels, not for the one
// this CPU happens to pick: every ISA it supports (an AVX-512 machine also runs the AVX2 and
// SSE kernels; tools/ci-isa-check.sh also forces CANDLE_CPU_ISA=avx2 for a whole run).
TEST(RdnModel, TiledEqualsUntiledEveryIsa) {
  const cpu::CpuIsa saved = cpu::cpu_isa();
  Rdn net = Rdn::load(kModels + "x2.safetensors", Device::cpu());
  Tensor in = test_models::load_rgb(kModels + "fixture.png").narrow(2, 7, 61).narrow(3, 3, 70).contiguous();
  for (cpu::CpuIsa isa : {cpu::CpuIsa::Sse, cpu::CpuIsa::Avx2, cpu::CpuIsa::Avx512}) {
    if (!cpu::cpu_isa_supported(isa)) continue;
    cpu::set_cpu_isa(isa);
    SCOPED_TRACE(cpu::cpu_isa_name(isa));
    Tensor whole = net.forward(in);
    expect_tiled_equal(net.forward_tiled(in, 29), whole, 29);
  }
  cpu::set_cpu_isa(saved);
}

TEST(RdnModel, TiledEqualsUntiledX8FusedUpsample) {
  // x8: the 192-channel upsample runs fused into the SR conv (phase convs + pixel shuffle)
  Rdn net = Rdn::load(kModels + "x8.safetensors", Device::cpu());
  Tensor in = test_models::load_rgb(kModels + "fixture.png").narrow(2, 11, 45).narrow(3, 6, 52).contiguous();
  Tensor whole = net.forward(in);
  ASSERT_EQ(whole.dims(), (std::vector<size_t>{1, 3, 360, 416}));
  expect_tiled_equal(net.forward_tiled(in, 19), whole, 19);
}

TEST(RdnModel, FusedUpsampleConvMatchesUpsampleThenConv) {
  // The x8 net's SR conv computed by phase convs equals upsample + 3x3 conv up to f32
  // rounding (the phase kernels sum the original taps first).
  Rdn net = Rdn::load(kModels + "x8.safetensors", Device::cpu());
  auto st = safetensors::load(kModels + "x8.safetensors", Device::cpu());
  Tensor feat = Tensor::randn(0.0, 1.0, {1, 192, 9, 7}, DType::F32, Device::cpu());
  // a one-conv graph: input -> upsample x8 -> SR conv, with the real SR weights
  const std::string topo =
      R"({"format": "candle-graph", "version": 1, "input": "in", "output": "SR", "layers": [)"
      R"({"name": "in", "op": "input", "inputs": [], "channels": 192},)"
      R"({"name": "up", "op": "upsample_nearest", "inputs": ["in"], "size": [8, 8]},)"
      R"({"name": "SR", "op": "conv2d", "inputs": ["up"], "in_channels": 192, "out_channels": 3,)"
      R"( "kernel": [3, 3], "padding": [1, 1], "bias": true, "activation": "linear"}]})";
  Rdn one({{"SR.weight", st.at("SR.weight")}, {"SR.bias", st.at("SR.bias")}}, topo, Device::cpu());
  Tensor got = one.forward_raw(feat);
  Tensor want = feat.upsample_nearest2d(72, 56)
                    .conv2d(st.at("SR.weight"), 1, 1, 1, 1)
                    .broadcast_add(st.at("SR.bias").reshape({1, 3, 1, 1}));
  ASSERT_EQ(got.dims(), want.dims());
  EXPECT_LT(max_abs_diff(got, want), 1e-3f * (1.0f + max_abs_diff(want, want.zeros_like())));
}

TEST(RdnModel, TiledEqualsUntiledTinyImage) {
  Rdn net = Rdn::load(kModels + "x4.safetensors", Device::cpu());
  Tensor in = test_models::load_rgb(kModels + "fixture.png").narrow(2, 60, 5).narrow(3, 70, 7).contiguous();
  Tensor whole = net.forward(in);
  EXPECT_EQ(whole.dims(), (std::vector<size_t>{1, 3, 20, 28}));
  expect_tiled_equal(net.forward_tiled(in, 2), whole, 2);
  EXPECT_TRUE(same_bytes(net.forward_tiled(in, 100), whole));  // one tile: the same call
}

TEST(RdnModel, ForwardRejectsAnImageWithoutThreeChannels) {
  Rdn net = Rdn::load(kModels + "x2.safetensors", Device::cpu());
  Tensor gray = Tensor::zeros({1, 1, 8, 8}, DType::F32, Device::cpu());
  try {
    net.forward(gray);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::ShapeMismatch);
    EXPECT_NE(std::string(e.what()).find("[1, 1, 8, 8]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(net.forward_tiled(Tensor::zeros({1, 3, 8, 8}, DType::F32, Device::cpu()), 0), Error);
}

// ---- graph and weight errors (no conv needed) ---------------------------------------------

std::unordered_map<std::string, Tensor> one_conv_weights(size_t co, size_t ci, size_t k) {
  return {{"c.weight", Tensor::zeros({co, ci, k, k}, DType::F32, Device::cpu())},
          {"c.bias", Tensor::zeros({co}, DType::F32, Device::cpu())}};
}

std::string one_conv_graph(const std::string& op = "conv2d", const std::string& conv_input = "in") {
  nlohmann::json g = {
      {"format", "candle-graph"},
      {"version", 1},
      {"input", "in"},
      {"output", "c"},
      {"layers",
       {{{"name", "in"}, {"op", "input"}, {"channels", 3}, {"inputs", nlohmann::json::array()}},
        {{"name", "c"},
         {"op", op},
         {"inputs", {conv_input}},
         {"in_channels", 3},
         {"out_channels", 3},
         {"kernel", {3, 3}},
         {"padding", {1, 1}},
         {"bias", true},
         {"activation", "linear"}}}}};
  return g.dump();
}

TEST(RdnGraph, OneConvGraphBuilds) {
  Rdn net(one_conv_weights(3, 3, 3), one_conv_graph(), Device::cpu());
  EXPECT_EQ(net.scale(), 1u);
  EXPECT_EQ(net.receptive_radius(), 1u);
  EXPECT_EQ(net.num_convs(), 1u);
}

TEST(RdnGraph, WrongWeightShapeIsAnError) {
  try {
    Rdn net(one_conv_weights(3, 4, 3), one_conv_graph(), Device::cpu());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::ShapeMismatch);
    EXPECT_NE(std::string(e.what()).find("'c.weight' has shape [3, 4, 3, 3], expected [3, 3, 3, 3]"),
              std::string::npos)
        << e.what();
  }
}

TEST(RdnGraph, MissingWeightIsAnError) {
  auto w = one_conv_weights(3, 3, 3);
  w.erase("c.bias");
  EXPECT_THROW(Rdn(w, one_conv_graph(), Device::cpu()), Error);
}

TEST(RdnGraph, UnknownOpIsAnError) {
  try {
    Rdn net(one_conv_weights(3, 3, 3), one_conv_graph("lambda"), Device::cpu());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::UnsupportedOp);
    EXPECT_NE(std::string(e.what()).find("unknown op 'lambda'"), std::string::npos) << e.what();
  }
}

TEST(RdnGraph, CycleAndUnknownInputAreErrors) {
  EXPECT_THROW(Rdn(one_conv_weights(3, 3, 3), one_conv_graph("conv2d", "c"), Device::cpu()), Error);
  EXPECT_THROW(Rdn(one_conv_weights(3, 3, 3), one_conv_graph("conv2d", "nowhere"), Device::cpu()), Error);
}

TEST(RdnGraph, BadJsonIsAParseError) {
  try {
    Rdn net(one_conv_weights(3, 3, 3), "{not json", Device::cpu());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Parse);
  }
}

TEST(RdnGraph, FileWithoutTopologyIsAnError) {
  std::string path = ::testing::TempDir() + "rdn_no_topology.safetensors";
  safetensors::save(one_conv_weights(3, 3, 3), path);
  try {
    Rdn::load(path, Device::cpu());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no 'topology' metadata"), std::string::npos) << e.what();
  }
}

}  // namespace
