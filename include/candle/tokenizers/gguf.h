#pragma once
// The tokenizer of a GGUF file (the tokenizer.ggml.* metadata llama.cpp reads), from a Hugging Face
// tokenizer.json: what a converter writes so that the model file carries its tokenizer, and that
// Tokenizer::from_gguf reads back into the same ids.
//
//   auto md = candle::tokenizers::gguf_tokenizer_metadata_from_file("tokenizer.json",
//   "tokenizer_config.json"); md.emplace_back("general.architecture", "llama");  // ... then
//   gguf_file::write(path, md, tensors)
//
// Two families (tokenizer.ggml.model):
// - "llama": a SentencePiece BPE tokenizer.json (BPE with byte_fallback; normalizer Replace ' ' by
//   U+2581, after Prepend U+2581 when add_space_prefix) - llama2, gemma. GGUF carries a score per
//   token instead of merges: the score of a token is minus the rank of the first merge that makes it,
//   and from_gguf merges the pair whose text is the token of highest score (equal for the
//   sentencepiece-made merges of these files; see tests/data/tokenizers/README.md).
// - "gpt2": a byte-level BPE tokenizer.json whose normalizer and pre_tokenizer are those of one of
//   the tokenizer.ggml.pre names below (the regexes, not copies of them, name the family).
// Added tokens become control (special) or user-defined (not special) tokens; the BOS / EOS the
// post-processor's template adds become add_bos_token / add_eos_token.
#include <string>
#include <string_view>
#include <vector>

#include "candle/quantized/gguf_file.h"

namespace candle::tokenizers {

// tokenizer.ggml.pre names from_gguf knows: "gpt-2", "llama-bpe", "qwen2", "deepseek-v3", "gpt-4o"
std::vector<std::string> gguf_pre_tokenizer_names();

// The tokenizer.* metadata of a GGUF file for a tokenizer.json (text) and, optionally, its
// tokenizer_config.json (text; empty for none): bos / eos / pad token names, add_bos_token and
// add_eos_token (which override the template, as transformers does when it loads the tokenizer),
// chat_template. UnsupportedOp when the tokenizer has no GGUF form here (Unigram or WordPiece
// models, an unknown pre-tokenizer), Parse for a malformed file.
quantized::gguf_file::MetadataList gguf_tokenizer_metadata(std::string_view tokenizer_json,
                                                           std::string_view tokenizer_config = {});
// The same from files; config_path may be empty.
quantized::gguf_file::MetadataList gguf_tokenizer_metadata_from_file(const std::string& tokenizer_json_path,
                                                                     const std::string& config_path = {});

}  // namespace candle::tokenizers
