// candle::quantized::ggml_file (candle's candle_core::quantized::ggml_file): the legacy llama.cpp
// files that came before GGUF. A file is a u32 magic ('ggml' unversioned, 'ggmf' v1, 'ggjt'
// v1 / v2 / v3, then a u32 version for all but 'ggml'), llama's hyper-parameters (seven u32),
// the vocabulary (n_vocab tokens: a u32 length and the bytes, then an f32 score except in
// unversioned files), then tensors up to the end of the file: n_dims, name length and ggml type
// (u32 each), the dims (u32, ne[] order), the name, in 'ggjt' files zeros up to a multiple of
// 32 bytes from the start of the file, then the blocks.
//
// Hostile input is a candle::Error naming the problem (counts, lengths and dims bounded by the
// file's size before anything is allocated; a tensor has 1 to 4 dims; names are unique). The
// quantized block layouts changed in ggjt v2 and v3 (f32 -> f16 scales): quantized tensors are
// read from ggjt v3 files only, f32 / f16 tensors from every version (candle reads the old
// blocks as if they were today's, which gives wrong weights).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "candle/device.h"
#include "candle/quantized/quantized.h"

namespace candle::quantized::ggml_file {

enum class VersionedMagic : uint8_t { GgmlUnversioned, GgmfV1, GgjtV1, GgjtV2, GgjtV3 };

struct HParams {
  uint32_t n_vocab = 0, n_embd = 0, n_mult = 0, n_head = 0, n_layer = 0, n_rot = 0, ftype = 0;
};

struct Vocab {
  // the token's bytes (not necessarily UTF-8) and its score (0 in unversioned files)
  std::vector<std::pair<std::string, float>> token_score_pairs;
};

class Content {
 public:
  VersionedMagic magic = VersionedMagic::GgjtV3;
  HParams hparams;
  Vocab vocab;
  std::map<std::string, QTensor> tensors;

  // The file at `path`, memory-mapped; the tensors view the mapping (not copied).
  static Content read(const std::string& path, const Device& device = Device::cpu());
  // A file already in memory, copied once.
  static Content read_buffer(std::span<const uint8_t> bytes, const Device& device = Device::cpu());
  // A file already in memory that `owner` keeps alive; nothing is copied.
  static Content read_buffer(const std::shared_ptr<const void>& owner, std::span<const uint8_t> bytes,
                             const Device& device = Device::cpu());
};

}  // namespace candle::quantized::ggml_file
