// candle::models::load_causal_lm: a GGUF file or a Hugging Face folder to a CausalLM.
#include "candle/models/causal_lm.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>

#include "candle/io/json_limits.h"
#include "candle/models/llama.h"
#include "candle/models/quantized_llama.h"
#include "candle/nn/var_builder.h"
#include "candle/quantized/gguf_file.h"

namespace candle::models {

StaticDecode CausalLM::start_static_decode(size_t, size_t) {
  throw Error(ErrorKind::UnsupportedOp, architecture() + ": no position-independent decode");
}

Tensor CausalLM::decode_step(const Tensor&, StaticDecode&) {
  throw Error(ErrorKind::UnsupportedOp, architecture() + ": no position-independent decode");
}

Tensor CausalLM::prefill(const Tensor&, StaticDecode&, size_t) {
  throw Error(ErrorKind::UnsupportedOp, architecture() + ": no position-independent decode");
}

DecodeSession::DecodeSession(CausalLM& model, const Device& device, size_t reserve)
    : model_(model), device_(device), reserve_(std::max<size_t>(reserve, 1)) {}

void DecodeSession::reserve_for(size_t positions) {
  const size_t limit = model_.max_seq_len();
  if (positions > limit)
    throw Error(ErrorKind::InvalidArgument, "the text (" + std::to_string(positions) +
                                                " tokens) does not fit the context of " +
                                                std::to_string(limit) + " tokens");
  if (state_ && positions <= state_->capacity) return;
  size_t cap = state_ ? state_->capacity * 2 : reserve_;
  cap = std::min(limit, std::max(cap, positions));
  StaticDecode grown = model_.start_static_decode(1, cap);
  if (state_ && pos_ > 0) {
    // the keys and values so far; the recorded step wrote the old buffers, so it is recorded again
    for (size_t i = 0; i < grown.k.size(); ++i) {
      grown.k[i].slice_set(state_->k[i].narrow(2, 0, pos_), 2, 0);
      grown.v[i].slice_set(state_->v[i].narrow(2, 0, pos_), 2, 0);
    }
  }
  graph_.reset();
  state_ = std::move(grown);
  if (!step_ids_.defined()) step_ids_ = Tensor::from_vec(std::vector<uint32_t>{0}, {1, 1}, device_);
}

Tensor DecodeSession::feed(const std::vector<uint32_t>& ids) {
  if (ids.empty()) throw Error(ErrorKind::InvalidArgument, "DecodeSession::feed: no tokens");
  reserve_for(pos_ + ids.size());
  if (ids.size() > 1) {
    Tensor logits = model_.prefill(Tensor::from_vec(ids, {1, ids.size()}, device_), *state_, pos_);
    pos_ += ids.size();
    return logits.squeeze(0);
  }
  step_ids_.slice_set(Tensor::from_vec(ids, {1, 1}, device_), 0, 0);
  state_->pos.slice_set(Tensor::from_vec(std::vector<uint32_t>{static_cast<uint32_t>(pos_)}, {1}, device_), 0,
                        0);
  if (!graph_)
    graph_ = Graph::capture(device_, [this] { step_logits_ = model_.decode_step(step_ids_, *state_); });
  graph_->replay();
  ++pos_;
  return step_logits_.squeeze(0);
}

namespace {

namespace fs = std::filesystem;

// config.json and index files are small; anything larger is not one
constexpr uintmax_t kMaxJsonBytes = uintmax_t{64} << 20;

std::string read_text(const fs::path& p) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(p, ec);
  if (ec) throw Error(ErrorKind::Io, "cannot read " + p.string() + ": " + ec.message());
  if (size > kMaxJsonBytes) throw Error(ErrorKind::Parse, p.string() + ": too large for a JSON file");
  std::ifstream f(p, std::ios::binary);
  if (!f) throw Error(ErrorKind::Io, "cannot open " + p.string());
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return s;
}

// The safetensors files of a folder: model.safetensors, or the shards an index names.
std::vector<std::string> weight_files(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(dir / "model.safetensors", ec)) return {(dir / "model.safetensors").string()};
  const fs::path index = dir / "model.safetensors.index.json";
  if (!fs::exists(index, ec))
    throw Error(ErrorKind::Io, dir.string() + ": neither model.safetensors nor model.safetensors.index.json");
  const std::string text = read_text(index);
  io::check_json_depth(text, 16, index.string());
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::Parse, index.string() + ": " + io::excerpt(e.what(), 200));
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    throw Error(ErrorKind::Parse, index.string() + ": no weight_map object");
  std::set<std::string> files;
  for (const auto& [name, file] : j["weight_map"].items()) {
    if (!file.is_string())
      throw Error(ErrorKind::Parse, index.string() + ": weight_map values must be file names");
    const std::string f = file.get<std::string>();
    // shards live in the folder itself: no paths
    if (f.empty() || f.find('/') != std::string::npos || f.find('\\') != std::string::npos || f == "." ||
        f == "..")
      throw Error(ErrorKind::Parse, index.string() + ": bad shard name '" + io::excerpt(f, 60) + "'");
    files.insert(f);
  }
  if (files.empty()) throw Error(ErrorKind::Parse, index.string() + ": empty weight_map");
  std::vector<std::string> out;
  out.reserve(files.size());
  for (const auto& f : files) out.push_back((dir / f).string());
  return out;
}

class LlamaLM final : public CausalLM {
 public:
  LlamaLM(llama::Llama m, size_t max_seq_len)
      : model_(std::move(m)), cache_(model_.config(), max_seq_len), max_seq_len_(max_seq_len) {}
  StaticDecode start_static_decode(size_t batch, size_t capacity) override {
    return model_.start_static_decode(batch, capacity);
  }
  Tensor decode_step(const Tensor& ids, StaticDecode& state) override {
    return model_.decode_step(ids, state);
  }
  Tensor prefill(const Tensor& ids, StaticDecode& state, size_t pos) override {
    return model_.prefill(ids, state, pos);
  }
  Tensor forward(const Tensor& ids, size_t index_pos) override {
    return model_.forward(ids, index_pos, cache_);
  }
  void clear_kv_cache() override { cache_.reset(); }
  size_t vocab_size() const override { return model_.config().vocab_size; }
  size_t max_seq_len() const override { return max_seq_len_; }
  std::string architecture() const override { return model_.config().model_type; }

 private:
  llama::Llama model_;
  llama::Cache cache_;
  size_t max_seq_len_;
};

class QuantizedLlamaLM final : public CausalLM {
 public:
  explicit QuantizedLlamaLM(quantized_llama::ModelWeights m) : model_(std::move(m)) {}
  Tensor forward(const Tensor& ids, size_t index_pos) override { return model_.forward(ids, index_pos); }
  StaticDecode start_static_decode(size_t batch, size_t capacity) override {
    return model_.start_static_decode(batch, capacity);
  }
  Tensor decode_step(const Tensor& ids, StaticDecode& state) override {
    return model_.decode_step(ids, state);
  }
  Tensor prefill(const Tensor& ids, StaticDecode& state, size_t pos) override {
    return model_.prefill(ids, state, pos);
  }
  void clear_kv_cache() override { model_.clear_kv_cache(); }
  size_t vocab_size() const override { return model_.vocab_size(); }
  size_t max_seq_len() const override { return model_.max_seq_len(); }
  std::string architecture() const override { return model_.architecture(); }

 private:
  quantized_llama::ModelWeights model_;
};

}  // namespace

std::unique_ptr<CausalLM> load_causal_lm(const std::string& path, const Device& device, DType dtype,
                                         std::shared_ptr<Comm> comm) {
  std::error_code ec;
  const fs::path p(path);
  if (fs::is_directory(p, ec)) {
    const fs::path cfg_path = p / "config.json";
    if (!fs::exists(cfg_path, ec)) throw Error(ErrorKind::Io, path + ": no config.json");
    llama::LlamaConfig cfg = llama::LlamaConfig::from_json(read_text(cfg_path));
    nn::VarBuilder vb = nn::VarBuilder::from_mmaped_safetensors(weight_files(p), dtype, device);
    return std::make_unique<LlamaLM>(llama::Llama::load(vb, cfg, std::move(comm)),
                                     cfg.max_position_embeddings);
  }
  if (!fs::exists(p, ec)) throw Error(ErrorKind::Io, path + ": no such file or folder");
  return load_causal_lm(quantized::gguf_file::Content::read(path), device, std::move(comm));
}

std::unique_ptr<CausalLM> load_causal_lm(const quantized::gguf_file::Content& gguf, const Device& device,
                                         std::shared_ptr<Comm> comm) {
  return std::make_unique<QuantizedLlamaLM>(
      quantized_llama::ModelWeights::from_gguf(gguf, device, std::move(comm)));
}

}  // namespace candle::models
