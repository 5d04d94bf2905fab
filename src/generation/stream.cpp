// TokenOutputStream and StopStrings.
#include "candle/generation/stream.h"

#include <algorithm>

#include "candle/error.h"

namespace candle::generation {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
// A UTF-8 character is at most 4 bytes, so a text still ending in U+FFFD after this many held
// tokens is invalid for good: it is printed (as U+FFFD) rather than held, which would grow the
// window that every token re-decodes without bound (random bytes from an untrained model).
constexpr size_t kMaxHeldTokens = 8;

}  // namespace

std::string TokenOutputStream::decode(size_t begin, size_t end) const {
  return tok_->decode(std::span<const uint32_t>(tokens_.data() + begin, end - begin), true);
}

std::optional<std::string> TokenOutputStream::next_token(uint32_t id) {
  const std::string prev = decode(prev_index_, current_index_);
  tokens_.push_back(id);
  const std::string text = decode(prev_index_, tokens_.size());
  const bool held_long = tokens_.size() - current_index_ >= kMaxHeldTokens;
  if (text.size() <= prev.size() || !text.starts_with(prev) || (text.ends_with(kReplacement) && !held_long)) {
    // tokens that add no text (or rewrite what was printed) are not re-decoded forever either
    if (held_long && (text.size() <= prev.size() || !text.starts_with(prev))) {
      prev_index_ = current_index_ = tokens_.size();
    }
    return std::nullopt;
  }
  prev_index_ = current_index_;
  current_index_ = tokens_.size();
  return text.substr(prev.size());
}

std::optional<std::string> TokenOutputStream::decode_rest() const {
  const std::string prev = decode(prev_index_, current_index_);
  const std::string text = decode(prev_index_, tokens_.size());
  if (text.size() <= prev.size() || !text.starts_with(prev)) return std::nullopt;
  return text.substr(prev.size());
}

std::string TokenOutputStream::decode_all() const { return decode(0, tokens_.size()); }

void TokenOutputStream::clear() {
  tokens_.clear();
  prev_index_ = current_index_ = 0;
}

StopStrings::StopStrings(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (const auto& s : stops_)
    if (s.empty()) throw Error(ErrorKind::InvalidArgument, "StopStrings: a stop string is empty");
}

StopStrings::Chunk StopStrings::feed(std::string_view text) {
  Chunk out;
  if (stopped_) {
    out.stopped = true;
    return out;
  }
  pending_ += text;
  // the earliest stop string in what is pending
  size_t hit = std::string::npos;
  for (size_t k = 0; k < stops_.size(); ++k) {
    const size_t p = pending_.find(stops_[k]);
    if (p < hit) {
      hit = p;
      out.which = k;
    }
  }
  if (hit != std::string::npos) {
    out.text = pending_.substr(0, hit);
    out.stopped = stopped_ = true;
    pending_.clear();
    return out;
  }
  // hold back the longest tail that begins some stop string
  size_t hold = 0;
  for (const auto& s : stops_) {
    for (size_t len = std::min(s.size() - 1, pending_.size()); len > hold; --len) {
      if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  out.text = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopStrings::flush() {
  std::string rest;
  rest.swap(pending_);
  return stopped_ ? std::string() : rest;
}

void StopStrings::clear() {
  pending_.clear();
  stopped_ = false;
}

}  // namespace candle::generation
