// TensorFlow.js layers models (model.json + binary weight shards) converted to candle's
// tensors and a normalised layer graph: what candle-tfjs-convert writes as safetensors.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "candle/tensor.h"

namespace candle::models::tfjs {

// The result of a conversion: the conv weights in candle's layout ([c_out, c_in, kh, kw],
// named "<layer>.weight" / "<layer>.bias") and the metadata written next to them:
//   "topology": the normalised graph (JSON, see rdn.h for its format),
//   "scale":    the model's upscaling factor (the product of its upsampling factors),
//   "source":   where the model came from (when given).
struct ConvertedModel {
  std::unordered_map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;
};

// Reads a TF.js layers model: `path` is its model.json or the directory holding it; the
// weight shards are read from the same directory. Supports the layer types of Keras
// residual dense networks (InputLayer, Conv2D, Activation/ReLU, Concatenate, Add,
// UpSampling2D nearest); anything else, a missing file, bad JSON or shards whose sizes do
// not match the manifest throws Error(Io / Parse / UnsupportedOp) with a one-line message.
ConvertedModel convert_layers_model(const std::string& path, const std::string& source = "");

// convert_layers_model from memory: model.json's text, and the shard files by the paths the
// manifest names (relative, normalised: "group1-shard1of1.bin"). For tests and fuzzing.
ConvertedModel convert_layers_model_json(std::string_view model_json,
                                         const std::map<std::string, std::vector<char>>& shards,
                                         const std::string& source = "");

// convert_layers_model then safetensors::save to `out_path` (written to a temporary name
// and renamed).
void convert_layers_model_to_file(const std::string& path, const std::string& out_path,
                                  const std::string& source = "");

}  // namespace candle::models::tfjs
