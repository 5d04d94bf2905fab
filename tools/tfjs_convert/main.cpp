// candle-tfjs-convert: a TensorFlow.js layers model (model.json + weight shards) -> one
// safetensors file with the conv weights in candle's layout and the layer graph as metadata.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "candle/io/safetensors.h"
#include "candle/models/rdn.h"
#include "candle/models/tfjs.h"

int main(int argc, char** argv) {
  CLI::App app{"Converts a TensorFlow.js layers model (model.json + shards) to safetensors for candle"};
  std::string input, output, source;
  bool check = true;
  app.add_option("input", input, "model.json, or the directory holding it")->required();
  app.add_option("output", output, "the safetensors file to write")->required();
  app.add_option("--source", source, "a note on where the model comes from, stored as metadata");
  app.add_flag("!--no-check", check, "skip building the network from the converted file");
  CLI11_PARSE(app, argc, argv);
  try {
    candle::models::tfjs::ConvertedModel m = candle::models::tfjs::convert_layers_model(input, source);
    if (check) {
      // the graph must be one candle::models::Rdn can run
      candle::models::Rdn net(m.tensors, m.metadata.at("topology"), candle::Device::cpu());
      std::printf("%zu layers, %zu convs, scale %zu, receptive radius %zu px\n", net.num_layers(),
                  net.num_convs(), net.scale(), net.receptive_radius());
    }
    candle::safetensors::save(m.tensors, output, m.metadata);
    std::printf("wrote %s (%zu tensors)\n", output.c_str(), m.tensors.size());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "candle-tfjs-convert: %s\n", e.what());
    return 1;
  }
  return 0;
}
