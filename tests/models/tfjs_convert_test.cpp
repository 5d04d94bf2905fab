// TF.js layers model conversion: a round trip through a tiny synthetic model written here,
// the network it builds against a naive NCHW reference, and hostile inputs. The command-line
// programs (candle-tfjs-convert, candle-upscale) are checked when built next to this test.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "candle/candle.h"
#include "candle/image.h"
#include "candle/io/safetensors.h"
#include "candle/models/rdn.h"
#include "candle/models/tfjs.h"
#include "png_util.h"
#include "program_util.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace candle;
using candle::models::Rdn;
using candle::test_util::error_of;

// A synthetic RDN-like model: in(3) -> c1 3x3 same relu (4) -> concat(in, c1) (7)
// -> c2 1x1 valid (3) -> add(c2, in) -> up x2 -> c3 3x3 same (3) -> act relu.
struct Synth {
  // HWIO kernels and biases, filled with small deterministic values
  std::vector<float> k1, b1, k2, b2, k3, b3;
  json layers;
};

std::vector<float> values(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-0.5f, 0.5f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

json conv_layer(const std::string& name, const std::string& in, size_t filters, size_t k,
                const std::string& pad, const std::string& act) {
  return {{"class_name", "Conv2D"},
          {"name", name},
          {"config",
           {{"name", name},
            {"filters", filters},
            {"kernel_size", {k, k}},
            {"strides", {1, 1}},
            {"padding", pad},
            {"data_format", "channels_last"},
            {"dilation_rate", {1, 1}},
            {"groups", 1},
            {"activation", act},
            {"use_bias", true}}},
          {"inbound_nodes", {{{in, 0, 0, json::object()}}}}};
}

json plain_layer(const std::string& cls, const std::string& name, const std::vector<std::string>& ins,
                 json cfg) {
  cfg["name"] = name;
  json inbound = json::array();
  for (const auto& i : ins) inbound.push_back({i, 0, 0, json::object()});
  return {{"class_name", cls}, {"name", name}, {"config", cfg}, {"inbound_nodes", json::array({inbound})}};
}

// Writes model.json + one shard into dir; `mutate` may edit the JSON before it is written.
Synth write_synth(const fs::path& dir, const std::function<void(json&)>& mutate = {}, long shard_delta = 0) {
  fs::create_directories(dir);
  Synth s;
  s.k1 = values(3 * 3 * 3 * 4, 1), s.b1 = values(4, 2);
  s.k2 = values(1 * 1 * 7 * 3, 3), s.b2 = values(3, 4);
  s.k3 = values(3 * 3 * 3 * 3, 5), s.b3 = values(3, 6);
  json layers = json::array();
  layers.push_back(
      {{"class_name", "InputLayer"},
       {"name", "LR"},
       {"config",
        {{"name", "LR"}, {"batch_input_shape", {nullptr, nullptr, nullptr, 3}}, {"dtype", "float32"}}},
       {"inbound_nodes", json::array()}});
  layers.push_back(conv_layer("c1", "LR", 4, 3, "same", "relu"));
  layers.push_back(plain_layer("Concatenate", "cat", {"LR", "c1"}, {{"axis", 3}}));
  layers.push_back(conv_layer("c2", "cat", 3, 1, "valid", "linear"));
  layers.push_back(plain_layer("Add", "sum", {"c2", "LR"}, json::object()));
  layers.push_back(
      plain_layer("UpSampling2D", "up", {"sum"},
                  {{"size", {2, 2}}, {"interpolation", "nearest"}, {"data_format", "channels_last"}}));
  layers.push_back(conv_layer("c3", "up", 3, 3, "same", "linear"));
  layers.push_back(plain_layer("Activation", "out", {"c3"}, {{"activation", "relu"}}));
  json weights = json::array({
      {{"name", "c1/kernel"}, {"shape", {3, 3, 3, 4}}, {"dtype", "float32"}},
      {{"name", "c1/bias"}, {"shape", {4}}, {"dtype", "float32"}},
      {{"name", "c2/kernel"}, {"shape", {1, 1, 7, 3}}, {"dtype", "float32"}},
      {{"name", "c2/bias"}, {"shape", {3}}, {"dtype", "float32"}},
      {{"name", "c3/kernel"}, {"shape", {3, 3, 3, 3}}, {"dtype", "float32"}},
      {{"name", "c3/bias"}, {"shape", {3}}, {"dtype", "float32"}},
  });
  json model = {{"format", "layers-model"},
                {"generatedBy", "candle-cpp test"},
                {"modelTopology",
                 {{"keras_version", "2.10.0"},
                  {"model_config",
                   {{"class_name", "Functional"},
                    {"config",
                     {{"name", "synth"},
                      {"layers", layers},
                      {"input_layers", {{"LR", 0, 0}}},
                      {"output_layers", {{"out", 0, 0}}}}}}}}},
                {"weightsManifest", {{{"paths", {"group1-shard1of1.bin"}}, {"weights", weights}}}}};
  if (mutate) mutate(model);
  test_models::write_text((dir / "model.json").string(), model.dump());
  std::vector<float> all;
  for (auto* v : {&s.k1, &s.b1, &s.k2, &s.b2, &s.k3, &s.b3}) all.insert(all.end(), v->begin(), v->end());
  size_t bytes = all.size() * sizeof(float);
  bytes = static_cast<size_t>(static_cast<long>(bytes) + shard_delta);
  all.resize(bytes / sizeof(float) + 1);
  test_models::write_bytes((dir / "group1-shard1of1.bin").string(), all.data(), bytes);
  return s;
}

fs::path temp_dir(const std::string& name) {
  fs::path p = fs::path(::testing::TempDir()) / ("candle_tfjs_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p;
}

// HWIO [kh, kw, ci, co] -> value at OIHW (o, i, y, x)
float hwio(const std::vector<float>& k, size_t kw, size_t ci, size_t co, size_t o, size_t i, size_t y,
           size_t x) {
  return k[((y * kw + x) * ci + i) * co + o];
}

// Naive NCHW 'same' conv (odd square kernel, HWIO weights), batch 1.
std::vector<float> ref_conv(const std::vector<float>& in, size_t ci, size_t h, size_t w,
                            const std::vector<float>& k, const std::vector<float>& b, size_t co, size_t ks,
                            bool relu) {
  std::vector<float> out(co * h * w);
  const long p = long(ks - 1) / 2;
  for (size_t o = 0; o < co; ++o)
    for (size_t y = 0; y < h; ++y)
      for (size_t x = 0; x < w; ++x) {
        double acc = b[o];
        for (size_t i = 0; i < ci; ++i)
          for (size_t dy = 0; dy < ks; ++dy)
            for (size_t dx = 0; dx < ks; ++dx) {
              long yy = long(y) + long(dy) - p, xx = long(x) + long(dx) - p;
              if (yy < 0 || xx < 0 || yy >= long(h) || xx >= long(w)) continue;
              acc += double(in[(i * h + size_t(yy)) * w + size_t(xx)]) * hwio(k, ks, ci, co, o, i, dy, dx);
            }
        out[(o * h + y) * w + x] = relu ? std::max(0.0f, float(acc)) : float(acc);
      }
  return out;
}

std::vector<float> ref_forward(const Synth& s, const std::vector<float>& in, size_t h, size_t w) {
  auto c1 = ref_conv(in, 3, h, w, s.k1, s.b1, 4, 3, true);
  std::vector<float> cat(in);
  cat.insert(cat.end(), c1.begin(), c1.end());
  auto c2 = ref_conv(cat, 7, h, w, s.k2, s.b2, 3, 1, false);
  for (size_t i = 0; i < c2.size(); ++i) c2[i] += in[i];
  std::vector<float> up(3 * 4 * h * w);
  for (size_t c = 0; c < 3; ++c)
    for (size_t y = 0; y < 2 * h; ++y)
      for (size_t x = 0; x < 2 * w; ++x) up[(c * 2 * h + y) * 2 * w + x] = c2[(c * h + y / 2) * w + x / 2];
  return ref_conv(up, 3, 2 * h, 2 * w, s.k3, s.b3, 3, 3, true);
}

TEST(TfjsConvert, KernelsBecomeOihwAndBiasesStay) {
  fs::path dir = temp_dir("roundtrip");
  Synth s = write_synth(dir);
  auto m = models::tfjs::convert_layers_model(dir.string());
  ASSERT_EQ(m.tensors.size(), 6u);
  Tensor k1 = m.tensors.at("c1.weight");
  EXPECT_EQ(k1.dims(), (std::vector<size_t>{4, 3, 3, 3}));
  auto v = k1.flatten_to_vec<float>();
  for (size_t o = 0; o < 4; ++o)
    for (size_t i = 0; i < 3; ++i)
      for (size_t y = 0; y < 3; ++y)
        for (size_t x = 0; x < 3; ++x)
          ASSERT_EQ(v[((o * 3 + i) * 3 + y) * 3 + x], hwio(s.k1, 3, 3, 4, o, i, y, x));
  EXPECT_EQ(m.tensors.at("c2.weight").dims(), (std::vector<size_t>{3, 7, 1, 1}));
  EXPECT_EQ(m.tensors.at("c3.bias").to_vec1<float>(), s.b3);
  EXPECT_EQ(m.metadata.at("scale"), "2");
}

TEST(TfjsConvert, TopologyIsTheNormalisedGraph) {
  fs::path dir = temp_dir("topology");
  write_synth(dir);
  auto m = models::tfjs::convert_layers_model((dir / "model.json").string(), "test source");
  EXPECT_EQ(m.metadata.at("source"), "test source");
  json g = json::parse(m.metadata.at("topology"));
  EXPECT_EQ(g["input"], "LR");
  EXPECT_EQ(g["output"], "out");
  EXPECT_EQ(g["scale"], 2);
  std::vector<std::string> ops;
  for (const auto& l : g["layers"]) ops.push_back(l["op"]);
  EXPECT_EQ(ops, (std::vector<std::string>{"input", "conv2d", "concat", "conv2d", "add", "upsample_nearest",
                                           "conv2d", "relu"}));
  EXPECT_EQ(g["layers"][1]["padding"], json({1, 1}));
  EXPECT_EQ(g["layers"][1]["activation"], "relu");
  EXPECT_EQ(g["layers"][3]["padding"], json({0, 0}));
  EXPECT_EQ(g["layers"][2]["inputs"], json({"LR", "c1"}));
}

TEST(TfjsConvert, SafetensorsFileRoundTripBuildsTheNetwork) {
  fs::path dir = temp_dir("file");
  Synth s = write_synth(dir);
  std::string out = (dir / "synth.safetensors").string();
  models::tfjs::convert_layers_model_to_file(dir.string(), out);
  Rdn net = Rdn::load(out, Device::cpu());
  EXPECT_EQ(net.scale(), 2u);
  EXPECT_EQ(net.num_convs(), 3u);
  // c1 (1) + c2 (0) before the upsampling, c3 (1 output pixel = half an input pixel) after
  EXPECT_EQ(net.receptive_radius(), 2u);
  const size_t h = 9, w = 11;
  std::vector<float> img = values(3 * h * w, 7);
  for (auto& x : img) x = (x + 0.5f) * 255.0f;
  Tensor y = net.forward_raw(Tensor::from_vec(img, {1, 3, h, w}, Device::cpu()));
  ASSERT_EQ(y.dims(), (std::vector<size_t>{1, 3, 2 * h, 2 * w}));
  auto got = y.flatten_to_vec<float>();
  auto want = ref_forward(s, img, h, w);
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-3f) << "at " << i;  // f32 vs f64 sums
}

TEST(TfjsConvert, MissingModelJsonIsAnIoError) {
  std::string e = error_of([] { models::tfjs::convert_layers_model(temp_dir("missing").string()); });
  EXPECT_NE(e.find("model.json not found"), std::string::npos) << e;
}

TEST(TfjsConvert, BadJsonIsAParseError) {
  fs::path dir = temp_dir("badjson");
  fs::create_directories(dir);
  test_models::write_text((dir / "model.json").string(), "{\"modelTopology\": [1, 2");
  try {
    models::tfjs::convert_layers_model(dir.string());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Parse);
    EXPECT_NE(std::string(e.what()).find("is not valid JSON"), std::string::npos) << e.what();
  }
}

TEST(TfjsConvert, ShortShardIsAnError) {
  fs::path dir = temp_dir("short");
  write_synth(dir, {}, -4);
  std::string e = error_of([&] { models::tfjs::convert_layers_model(dir.string()); });
  EXPECT_NE(e.find("hold 876 bytes but the manifest needs 880"), std::string::npos) << e;
}

TEST(TfjsConvert, LongShardIsAnError) {
  fs::path dir = temp_dir("long");
  write_synth(dir, {}, 8);
  std::string e = error_of([&] { models::tfjs::convert_layers_model(dir.string()); });
  EXPECT_NE(e.find("hold 888 bytes but the manifest needs 880"), std::string::npos) << e;
}

TEST(TfjsConvert, MissingShardIsAnIoError) {
  fs::path dir = temp_dir("noshard");
  write_synth(dir, [](json& m) { m["weightsManifest"][0]["paths"][0] = "other.bin"; });
  std::string e = error_of([&] { models::tfjs::convert_layers_model(dir.string()); });
  EXPECT_NE(e.find("weight shard not found"), std::string::npos) << e;
}

TEST(TfjsConvert, ShardPathOutsideTheDirectoryIsRejected) {
  fs::path dir = temp_dir("escape");
  write_synth(dir, [](json& m) { m["weightsManifest"][0]["paths"][0] = "../../etc/passwd"; });
  std::string e = error_of([&] { models::tfjs::convert_layers_model(dir.string()); });
  EXPECT_NE(e.find("bad shard path"), std::string::npos) << e;
}

TEST(TfjsConvert, UnsupportedLayerIsNamed) {
  fs::path dir = temp_dir("lambda");
  write_synth(dir, [](json& m) {
    m["modelTopology"]["model_config"]["config"]["layers"][7]["class_name"] = "Lambda";
  });
  std::string e = error_of([&] { models::tfjs::convert_layers_model(dir.string()); });
  EXPECT_NE(e.find("layer 'out': unsupported layer type Lambda"), std::string::npos) << e;
}

TEST(TfjsConvert, KernelShapeNotMatchingTheConfigIsAnError) {
  fs::path dir = temp_dir("filters");
  write_synth(dir, [](json& m) {
    m["modelTopology"]["model_config"]["config"]["layers"][1]["config"]["filters"] = 5;
  });
  std::string e = error_of([&] { models::tfjs::convert_layers_model(dir.string()); });
  EXPECT_NE(e.find("layer 'c1': kernel shape [3, 3, 3, 4] does not match kernel_size 3x3 and 5 filters"),
            std::string::npos)
      << e;
}

TEST(TfjsConvert, QuantizedWeightsAreUnsupported) {
  fs::path dir = temp_dir("quant");
  write_synth(dir, [](json& m) {
    m["weightsManifest"][0]["weights"][0]["quantization"] = {{"dtype", "uint8"}, {"scale", 0.1}, {"min", 0}};
  });
  std::string e = error_of([&] { models::tfjs::convert_layers_model(dir.string()); });
  EXPECT_NE(e.find("quantized weight 'c1/kernel' is not supported"), std::string::npos) << e;
}

// ---- the programs, when built next to this test ------------------------------------------

using test_models::lines;
using test_models::program;
using test_models::ProgramResult;
using test_models::run;

TEST(TfjsConvertProgram, BadInputGivesOneLineAndExitCode1) {
  fs::path exe = program("candle-tfjs-convert");
  if (exe.empty()) GTEST_SKIP() << "candle-tfjs-convert is not built (CANDLE_BUILD_EXAMPLES=OFF)";
  fs::path dir = temp_dir("cli_short");
  write_synth(dir, {}, -4);
  ProgramResult r = run(exe.string() + " " + dir.string() + " " + (dir / "out.safetensors").string());
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("candle-tfjs-convert: tfjs: weight shards of group 0 hold 876 bytes"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir / "out.safetensors"));
}

TEST(UpscaleProgram, BadInputsGiveOneLineAndExitCode1) {
  fs::path exe = program("candle-upscale");
  if (exe.empty()) GTEST_SKIP() << "candle-upscale is not built (CANDLE_BUILD_EXAMPLES=OFF)";
  fs::path dir = temp_dir("cli_upscale");
  fs::create_directories(dir);
  test_models::write_text((dir / "text.png").string(), "not an image");
  const std::string out = (dir / "out.png").string();
  struct Case {
    std::string args, message;
  } cases[] = {
      {(dir / "missing.png").string() + " " + out, "input not found"},
      {(dir / "text.png").string() + " " + out, "not a supported image"},
      {"--scale 5 " + (dir / "text.png").string() + " " + out, "unsupported scale 5"},
      {"--model " + (dir / "nope.safetensors").string() + " " + out, "model not found"},
  };
  for (const auto& c : cases) {
    ProgramResult r = run(exe.string() + " " + c.args);
    EXPECT_EQ(r.rc, 1) << c.args;
    EXPECT_EQ(lines(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(out));
}

TEST(UpscaleProgram, WrongWeightShapeIsReported) {
  fs::path exe = program("candle-upscale");
  if (exe.empty()) GTEST_SKIP() << "candle-upscale is not built (CANDLE_BUILD_EXAMPLES=OFF)";
  fs::path dir = temp_dir("cli_shape");
  write_synth(dir);
  auto m = models::tfjs::convert_layers_model(dir.string());
  m.tensors["c1.weight"] = Tensor::zeros({4, 3, 5, 5}, DType::F32, Device::cpu());
  std::string model = (dir / "bad.safetensors").string();
  safetensors::save(m.tensors, model, m.metadata);
  ProgramResult r = run(exe.string() + " --model " + model + " " + std::string(CANDLE_TEST_DATA_DIR) +
                        "/../../models/esrgan-slim/fixture.png " + (dir / "o.png").string());
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("'c1.weight' has shape [4, 3, 5, 5], expected [4, 3, 3, 3]"), std::string::npos)
      << r.err;
}

TEST(UpscaleProgram, ExistingOutputIsReplacedWhole) {
  fs::path exe = program("candle-upscale");
  if (exe.empty()) GTEST_SKIP() << "candle-upscale is not built (CANDLE_BUILD_EXAMPLES=OFF)";
  fs::path dir = temp_dir("cli_ok");
  fs::create_directories(dir);
  const std::string out = (dir / "small_x2.png").string();
  test_models::write_text(out, "old content");
  // the fixture in tiles of 50 px (9 tiles); the old file is replaced by a rename
  ProgramResult r = run(exe.string() + " --tile 50 " + std::string(CANDLE_TEST_DATA_DIR) +
                        "/../../models/esrgan-slim/fixture.png " + out);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("peak memory"), std::string::npos) << r.err;
  Tensor img = test_models::load_rgb(out);
  EXPECT_EQ(img.dims(), (std::vector<size_t>{1, 3, 256, 256}));
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().string().find(".tmp-"), std::string::npos) << e.path();
}

// The output path and the options are checked first: with a model that does not exist, their
// errors (not "model not found") come out, and nothing is written.
TEST(UpscaleProgram, OutputAndOptionsAreCheckedBeforeTheModelLoads) {
  fs::path exe = program("candle-upscale");
  if (exe.empty()) GTEST_SKIP() << "candle-upscale is not built (CANDLE_BUILD_EXAMPLES=OFF)";
  fs::path dir = temp_dir("cli_early");
  fs::create_directories(dir / "isdir.png");
  const std::string in = std::string(CANDLE_TEST_DATA_DIR) + "/../../models/esrgan-slim/fixture.png ";
  const std::string no_model = "--model " + (dir / "nope.safetensors").string() + " ";
  struct Case {
    std::string args, message;
  } cases[] = {
      {no_model + in + (dir / "missing" / "o.png").string(),
       "cannot write " + (dir / "missing" / "o.png").string() + ": directory " + (dir / "missing").string() +
           ": No such file or directory"},
      {no_model + in + (dir / "o.bmp").string(), "unsupported output format '.bmp'"},
      {no_model + in + (dir / "isdir.png").string(), "isdir.png: Is a directory"},
      {no_model + "--tile 8 " + in + (dir / "o.png").string(), "--tile 8 is too small"},
  };
  for (const auto& c : cases) {
    ProgramResult r = run(exe.string() + " " + c.args);
    EXPECT_EQ(r.rc, 1) << c.args;
    EXPECT_EQ(lines(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(dir / "o.png"));
  EXPECT_FALSE(fs::exists(dir / "o.bmp"));
}

TEST(UpscaleProgram, LargeAndForeignInputsAreRefused) {
  fs::path exe = program("candle-upscale");
  if (exe.empty()) GTEST_SKIP() << "candle-upscale is not built (CANDLE_BUILD_EXAMPLES=OFF)";
  fs::path dir = temp_dir("cli_hostile");
  fs::create_directories(dir);
  const std::string fixture = std::string(CANDLE_TEST_DATA_DIR) + "/../../models/esrgan-slim/fixture.png";
  test_models::write_text((dir / "bomb.ppm").string(), "P6\n16000 16000\n255\n");
  struct Case {
    std::string args, message;
  } cases[] = {
      {"--max-pixels 1000 " + fixture + " " + (dir / "o.png").string(),
       "128x128 is 16384 pixels, over the limit of 1000 (a decompression bomb? raise the limit with "
       "--max-pixels)"},
      {(dir / "bomb.ppm").string() + " " + (dir / "o.png").string(),
       "a PNM file is not a supported image (PNG or JPEG are accepted)"},
  };
  for (const auto& c : cases) {
    ProgramResult r = run(exe.string() + " " + c.args);
    EXPECT_EQ(r.rc, 1) << c.args;
    EXPECT_EQ(lines(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(dir / "o.png"));
}

// A header whose output image could not be held in this machine's memory is refused before
// anything is decoded (the file has only a header and a few bytes of pixels).
TEST(UpscaleProgram, OutputLargerThanTheMemoryIsRefusedBeforeDecoding) {
  fs::path exe = program("candle-upscale");
  if (exe.empty()) GTEST_SKIP() << "candle-upscale is not built (CANDLE_BUILD_EXAMPLES=OFF)";
  // 16383^2 -> 65532^2 RGB at x4: about 28 GiB of images
  const double need = 16383.0 * 16383.0 * 15 + 2.0 * 65532.0 * 65532.0 * 3;
  if (double(Device::cpu().memory().free_bytes) >= need)
    GTEST_SKIP() << "this machine could hold a 65532^2 output image";
  fs::path dir = temp_dir("cli_huge_output");
  fs::create_directories(dir);
  const std::string in = (dir / "huge.png").string();
  test_models::write_png_header_only(in, 16383, 16383);
  ProgramResult r =
      run(exe.string() + " --scale 4 --max-pixels 300000000 " + in + " " + (dir / "o.png").string());
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("16383x16383 -> 65532x65532 needs about"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("MiB are available"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "o.png"));
}

// JPEG in, JPEG out with --jpeg-quality; PNG out with --png-level into an existing file whose
// permission bits stay.
TEST(UpscaleProgram, JpegAndPngOptionsEndToEnd) {
  fs::path exe = program("candle-upscale");
  if (exe.empty()) GTEST_SKIP() << "candle-upscale is not built (CANDLE_BUILD_EXAMPLES=OFF)";
  fs::path dir = temp_dir("cli_jpeg");
  fs::create_directories(dir);
  const std::string models = std::string(CANDLE_TEST_DATA_DIR) + "/../../models/esrgan-slim/";
  const image::Image fixture = image::read(models + "fixture.png");
  const std::string in = (dir / "in.jpg").string(), out = (dir / "out.jpeg").string();
  image::write(in, fixture);
  ProgramResult r = run(exe.string() + " --jpeg-quality 80 " + in + " " + out);
  EXPECT_EQ(r.rc, 0) << r.err;
  const image::Info info = image::probe_file(out);
  EXPECT_EQ(info.format, image::Format::Jpeg);
  EXPECT_EQ(info.width, 256u);
  const std::string png = (dir / "out.png").string();
  test_models::write_text(png, "old");
  fs::permissions(png, fs::perms::owner_read | fs::perms::owner_write);
  r = run(exe.string() + " --png-level 6 " + models + "fixture.png " + png);
  EXPECT_EQ(r.rc, 0) << r.err;
  Tensor got = test_models::load_rgb(png), want = test_models::load_rgb(models + "samples/2x/result.png");
  ASSERT_EQ(got.dims(), want.dims());
  EXPECT_LE(got.sub(want).abs().max_all().to_scalar<float>(), 1.0f);
  EXPECT_EQ(fs::status(png).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().string().find(".tmp-"), std::string::npos) << e.path();
}

TEST(UpscaleProgram, MissingScaleOfABundledModelGivesOneLineAndExitCode1) {
  fs::path exe = program("candle-upscale");
  if (exe.empty()) GTEST_SKIP() << "candle-upscale is not built (CANDLE_BUILD_EXAMPLES=OFF)";
  fs::path dir = temp_dir("cli_medium_x2");
  fs::create_directories(dir);
  // esrgan-medium is bundled with x4 and x8 only
  ProgramResult r =
      run(exe.string() + " --model esrgan-medium --scale 2 " + std::string(CANDLE_TEST_DATA_DIR) +
          "/../../models/esrgan-slim/fixture.png " + (dir / "o.png").string());
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("candle-upscale: model not found: esrgan-medium x2"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("esrgan-medium has x4, x8"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "o.png"));
}

// The written PNG: the network output converted to 8 bits on the device, interleaved.
TEST(UpscaleProgram, OutputMatchesUpscalerJsSampleX2) {
  fs::path exe = program("candle-upscale");
  if (exe.empty()) GTEST_SKIP() << "candle-upscale is not built (CANDLE_BUILD_EXAMPLES=OFF)";
  fs::path dir = temp_dir("cli_sample");
  fs::create_directories(dir);
  const std::string models = std::string(CANDLE_TEST_DATA_DIR) + "/../../models/esrgan-slim/";
  const std::string out = (dir / "out.png").string();
  ProgramResult r = run(exe.string() + " --repeat 2 " + models + "fixture.png " + out);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("run 2: network "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(", compute "), std::string::npos) << r.err;
  Tensor got = test_models::load_rgb(out), want = test_models::load_rgb(models + "samples/2x/result.png");
  ASSERT_EQ(got.dims(), want.dims());
  // UpscalerJS's pixels, each within 1 (TF.js float32, another summation order)
  EXPECT_LE(got.sub(want).abs().max_all().to_scalar<float>(), 1.0f);
}

}  // namespace
