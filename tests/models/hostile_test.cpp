// Hostile models (tools/make-hostile-models.py): Rdn::load, the TF.js converter and the two
// programs give a short, clear error; none crashes, recurses deeply or allocates much.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "candle/candle.h"
#include "candle/models/rdn.h"
#include "candle/models/tfjs.h"
#include "hostile_util.h"
#include "program_util.h"

namespace {

using namespace candle;
using candle::models::Rdn;
using hostile::file;
namespace fs = std::filesystem;

TEST(HostileModel, X64UpsampleIsRejected) {
  EXPECT_HOSTILE_ERROR([] { Rdn::load(file("x64_upsample.safetensors"), Device::cpu()); },
                       ErrorKind::UnsupportedOp, "layer 'up' upsamples x64 (at most x8 is supported)");
}

TEST(HostileModel, PaddingOf2Pow63IsRejected) {
  EXPECT_HOSTILE_ERROR([] { Rdn::load(file("pad_2p63.safetensors"), Device::cpu()); }, ErrorKind::Parse,
                       "'padding' must be a pair of integers from 0 to 63");
}

TEST(HostileModel, DeepSafetensorsHeaderIsRejected) {
  EXPECT_HOSTILE_ERROR([] { Rdn::load(file("deep_header.safetensors"), Device::cpu()); }, ErrorKind::Parse,
                       "nests deeper");
}

TEST(HostileModel, GraphScaleMustBeSupportedAndMatchItsUpsampling) {
  auto graph = [](const std::string& sizes, const std::string& scale) {
    return R"({"format": "candle-graph", "version": 1, "input": "in", "output": "u2", "scale": )" + scale +
           R"(, "layers": [{"name": "in", "op": "input", "inputs": [], "channels": 3},)"
           R"({"name": "u1", "op": "upsample_nearest", "inputs": ["in"], "size": [)" +
           sizes + R"(]}, {"name": "u2", "op": "upsample_nearest", "inputs": ["u1"], "size": [)" + sizes +
           "]}]}";
  };
  EXPECT_EQ(Rdn({}, graph("2, 2", "4"), Device::cpu()).scale(), 4u);
  EXPECT_HOSTILE_ERROR([&] { Rdn({}, graph("2, 2", "2"), Device::cpu()); }, ErrorKind::Parse,
                       "topology scale 2 does not match the graph's 4");
  EXPECT_HOSTILE_ERROR([&] { Rdn({}, graph("4, 4", "16"), Device::cpu()); }, ErrorKind::UnsupportedOp,
                       "the upsampling layers scale by more than 8");
  EXPECT_HOSTILE_ERROR([&] { Rdn({}, graph("3, 3", "9"), Device::cpu()); }, ErrorKind::UnsupportedOp,
                       "scale by more than 8");
  EXPECT_HOSTILE_ERROR([&] { Rdn({}, graph("2, 3", "6"), Device::cpu()); }, ErrorKind::UnsupportedOp,
                       "unequal horizontal and vertical upsampling");
  EXPECT_HOSTILE_ERROR([&] { Rdn({}, graph("-2, -2", "4"), Device::cpu()); }, ErrorKind::Parse,
                       "'size' must be a pair of integers");
  EXPECT_HOSTILE_ERROR([&] { Rdn({}, graph("2.5e300, 2", "4"), Device::cpu()); }, ErrorKind::Parse,
                       "'size' must be a pair of integers");
}

TEST(HostileModel, DeepTopologyIsRejectedBeforeParsing) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_HOSTILE_ERROR([&] { Rdn({}, deep, Device::cpu()); }, ErrorKind::Parse, "JSON nests deeper than 64");
}

TEST(HostileTfjs, DeepFormatIsRejectedBeforeParsing) {
  EXPECT_HOSTILE_ERROR([] { models::tfjs::convert_layers_model(file("deep_format")); }, ErrorKind::Parse,
                       "JSON nests deeper than 64 levels");
}

TEST(HostileTfjs, DuplicateShardsAreRejectedBeforeReading) {
  EXPECT_HOSTILE_ERROR([] { models::tfjs::convert_layers_model(file("dup_shards")); }, ErrorKind::Parse,
                       "shard 'group1-shard1of1.bin' is listed twice");
}

TEST(HostileTfjs, ManifestNeedsAreComparedWithShardSizesFirst) {
  const std::string model = R"({"modelTopology": {}, "weightsManifest": [{"paths": ["a.bin"], "weights": [)"
                            R"({"name": "w", "shape": [1099511627776, 1024]}]}]})";
  // a weight of 2^50 floats against an 8-byte shard: refused without allocating anything
  std::map<std::string, std::vector<char>> shards{{"a.bin", std::vector<char>(8)}};
  EXPECT_HOSTILE_ERROR([&] { models::tfjs::convert_layers_model_json(model, shards); }, ErrorKind::Parse,
                       "is too large");
  const std::string two = R"({"modelTopology": {}, "weightsManifest": [{"paths": ["a.bin"], "weights": [)"
                          R"({"name": "w", "shape": [1]}, {"name": "w", "shape": [1]}]}]})";
  EXPECT_HOSTILE_ERROR([&] { models::tfjs::convert_layers_model_json(two, shards); }, ErrorKind::Parse,
                       "weight 'w' appears twice in the manifest");
  const std::string dotted = R"({"modelTopology": {}, "weightsManifest": [{"paths": ["a.bin", "x/../a.bin"],)"
                             R"( "weights": [{"name": "w", "shape": [4]}]}]})";
  EXPECT_HOSTILE_ERROR([&] { models::tfjs::convert_layers_model_json(dotted, shards); }, ErrorKind::Parse,
                       "bad shard path 'x/../a.bin'");
}

// ---- the programs on the crafted files ------------------------------------------------------

using test_models::program;
using test_models::ProgramResult;
using test_models::run;

TEST(HostileProgram, UpscaleRefusesEachCraftedModelInOneLine) {
  fs::path exe = program("candle-upscale");
  if (exe.empty()) GTEST_SKIP() << "candle-upscale is not built (CANDLE_BUILD_EXAMPLES=OFF)";
  const std::string out = hostile::dir() + "/out.png";
  for (const char* model : {"deep_header.safetensors", "x64_upsample.safetensors", "pad_2p63.safetensors",
                            "overlapping.safetensors", "offsets_past_eof.safetensors"}) {
    ProgramResult r = run(exe.string() + " --model " + file(model) + " " + out);
    EXPECT_EQ(r.rc, 1) << model << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.err.rfind("candle-upscale: ", 0), 0u) << r.err;
    EXPECT_LT(r.err.size(), 400u) << r.err;
  }
  EXPECT_FALSE(fs::exists(out));
}

TEST(HostileProgram, TfjsConvertRefusesEachCraftedModelInOneLine) {
  fs::path exe = program("candle-tfjs-convert");
  if (exe.empty()) GTEST_SKIP() << "candle-tfjs-convert is not built (CANDLE_BUILD_EXAMPLES=OFF)";
  for (const char* model : {"deep_format", "dup_shards"}) {
    const std::string out = hostile::dir() + "/converted.safetensors";
    ProgramResult r = run(exe.string() + " " + file(model) + " " + out);
    EXPECT_EQ(r.rc, 1) << model << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.err.rfind("candle-tfjs-convert: ", 0), 0u) << r.err;
    EXPECT_LT(r.err.size(), 400u) << r.err;
    EXPECT_FALSE(fs::exists(out));
  }
}

}  // namespace
