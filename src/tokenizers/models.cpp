// Models: BPE (merges by rank, byte fallback, unknown tokens, ignore_merges), WordPiece, Unigram (Viterbi).
#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <limits>
#include <queue>
#include <unordered_map>

#include "internal.h"

namespace candle::tokenizers::detail {
namespace {

struct StrHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using Vocab = std::unordered_map<std::string, uint32_t, StrHash, std::equal_to<>>;

std::string byte_token(uint8_t b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "<0x%02X>", b);
  return buf;
}

// A vocabulary with its reverse map; ids need not be dense.
struct VocabBase : Model {
  Vocab vocab;
  std::unordered_map<uint32_t, std::string> reverse;
  std::vector<const std::string*> dense;  // reverse as an array, when the ids are dense enough
  std::optional<uint32_t> token_to_id(std::string_view t) const override {
    auto it = vocab.find(t);
    if (it == vocab.end()) return std::nullopt;
    return it->second;
  }
  const std::string* id_to_token(uint32_t id) const override {
    if (!dense.empty()) return id < dense.size() ? dense[id] : nullptr;
    auto it = reverse.find(id);
    return it == reverse.end() ? nullptr : &it->second;
  }
  size_t vocab_size() const override { return vocab.size(); }
  void add(std::string tok, uint32_t id, const char* where) {
    if (!reverse.emplace(id, tok).second)
      bad(std::string(where) + ": id " + std::to_string(id) + " given twice");
    if (!vocab.emplace(std::move(tok), id).second) bad(std::string(where) + ": a token is given twice");
  }
  void read_dict(const json& v, const char* where) {
    if (!v.is_object()) bad(std::string(where) + ": 'vocab' is not an object");
    vocab.reserve(v.size());
    reverse.reserve(v.size());
    for (auto it = v.begin(); it != v.end(); ++it) add(it.key(), get_u32(it.value(), where), where);
  }
  std::optional<uint32_t> find(std::string_view s) const { return token_to_id(s); }
  void finish() {
    uint32_t max_id = 0;
    for (auto& [id, t] : reverse) max_id = std::max(max_id, id);
    if (reverse.empty() || max_id > 2 * reverse.size() + 1024) return;
    dense.assign(size_t{max_id} + 1, nullptr);
    for (auto& [id, t] : reverse) dense[id] = &t;
  }
};

// ---- BPE ------------------------------------------------------------------------------------------
struct Bpe final : VocabBase {
  std::unordered_map<uint64_t, std::pair<uint32_t, uint32_t>> merges;  // (a, b) -> (rank, merged id)
  std::optional<uint32_t> unk;
  std::string prefix, suffix;
  bool fuse_unk = false, byte_fallback = false, ignore_merges = false;
  std::array<int64_t, 256> byte_ids{};
  // SentencePiece's merging (GGUF "llama" vocabularies): two neighbours merge when their text is a
  // token, the token of highest score first: score_rank[id] is 0 for the highest score (equal
  // scores, equal ranks), kNoRank for a token that is never a merge result.
  bool by_score = false;
  std::vector<uint32_t> score_rank;
  static constexpr uint32_t kNoRank = UINT32_MAX;

  // Words already tokenized, one cache per thread and model: encode_batch's threads share no lock
  // and no written cache line (16 locked shards scaled 3.4x on 16 threads). A thread keeps the
  // caches of its last kCacheModels models, each emptied when full; models are told apart by a
  // process-unique id (a freed model's address can be reused).
  using WordMap = std::unordered_map<std::string, std::vector<Tok>, StrHash, std::equal_to<>>;
  static constexpr size_t kCacheModels = 4, kCacheEntries = 65536, kCacheMaxLen = 256;
  const uint64_t cache_id = [] {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
  }();
  WordMap& cache() const {
    struct Slot {
      uint64_t owner = 0, used = 0;
      WordMap words;
    };
    thread_local std::array<Slot, kCacheModels> slots;
    thread_local uint64_t clock = 0;
    Slot* pick = &slots[0];
    for (Slot& sl : slots) {
      if (sl.owner == cache_id) {
        pick = &sl;
        break;
      }
      if (sl.used < pick->used) pick = &sl;  // else the least recently used
    }
    if (pick->owner != cache_id) {
      pick->words.clear();
      pick->owner = cache_id;
    }
    pick->used = ++clock;
    return pick->words;
  }

  struct Sym {
    uint32_t id;
    int32_t prev, next;
    uint32_t b, e;
    bool alive;
    bool fixed;  // a byte-fallback or unknown symbol: never merged when merging by score
  };

  void tokenize(std::string_view w, std::vector<Tok>& out) const override {
    if (w.empty()) return;
    const bool cacheable = w.size() <= kCacheMaxLen;
    if (cacheable) {
      const WordMap& words = cache();
      auto it = words.find(w);
      if (it != words.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        return;
      }
    }
    const size_t start = out.size();
    if (ignore_merges) {
      if (auto id = find(w)) {
        out.push_back(Tok{*id, 0, w.size()});
        remember(w, out, start, cacheable);
        return;
      }
    }
    std::vector<Sym> syms;
    syms.reserve(w.size());
    std::string tmp;
    auto push = [&](uint32_t id, size_t b, size_t e, bool fixed = false) {
      const auto n = static_cast<int32_t>(syms.size());
      syms.push_back(Sym{id, n - 1, -1, static_cast<uint32_t>(b), static_cast<uint32_t>(e), true, fixed});
      if (n > 0) syms[static_cast<size_t>(n - 1)].next = n;
    };
    bool last_unk = false;
    for (size_t i = 0; i < w.size();) {
      const size_t l = std::min(utf8_len(static_cast<unsigned char>(w[i])), w.size() - i);
      std::string_view c = w.substr(i, l);
      std::optional<uint32_t> id;
      if (prefix.empty() && suffix.empty()) {
        id = find(c);
      } else {
        tmp.clear();
        if (i > 0) tmp += prefix;
        tmp.append(c);
        if (i + l == w.size()) tmp += suffix;
        id = find(tmp);
      }
      if (id) {
        push(*id, i, i + l);
        last_unk = false;
      } else {
        bool done = false;
        if (byte_fallback) {
          bool all = true;
          for (size_t k = 0; k < l; ++k) all &= byte_ids[static_cast<uint8_t>(c[k])] >= 0;
          if (all) {
            for (size_t k = 0; k < l; ++k)
              push(static_cast<uint32_t>(byte_ids[static_cast<uint8_t>(c[k])]), i, i + l, true);
            done = true;
            last_unk = false;
          }
        }
        if (!done && unk) {
          if (fuse_unk && last_unk)
            syms.back().e = static_cast<uint32_t>(i + l);
          else
            push(*unk, i, i + l, true);
          last_unk = true;
        }
      }
      i += l;
    }
    // Merge the pair of lowest rank first (leftmost among equal ranks).
    struct Cand {
      uint32_t rank;
      int32_t pos;
      uint32_t new_id;
      bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    std::priority_queue<Cand, std::vector<Cand>, std::greater<>> q;
    // the merge of symbol a with its next one: (rank, merged id)
    auto merge_of = [&](int32_t a) -> std::optional<std::pair<uint32_t, uint32_t>> {
      const Sym& sa = syms[static_cast<size_t>(a)];
      if (sa.next < 0) return std::nullopt;
      const Sym& sb = syms[static_cast<size_t>(sa.next)];
      if (by_score) {
        if (sa.fixed || sb.fixed) return std::nullopt;
        const auto id = find(w.substr(sa.b, sb.e - sa.b));
        if (!id || score_rank[*id] == kNoRank) return std::nullopt;
        return std::make_pair(score_rank[*id], *id);
      }
      auto it = merges.find((static_cast<uint64_t>(sa.id) << 32) | sb.id);
      if (it == merges.end()) return std::nullopt;
      return it->second;
    };
    auto consider = [&](int32_t a) {
      if (a < 0) return;
      if (auto m = merge_of(a)) q.push(Cand{m->first, a, m->second});
    };
    for (int32_t i = 0; i + 1 < static_cast<int32_t>(syms.size()); ++i) consider(i);
    while (!q.empty()) {
      const Cand c = q.top();
      q.pop();
      Sym& a = syms[static_cast<size_t>(c.pos)];
      if (!a.alive || a.next < 0) continue;
      const auto m = merge_of(c.pos);
      if (!m || m->second != c.new_id || m->first != c.rank) continue;
      Sym& b = syms[static_cast<size_t>(a.next)];
      a.id = c.new_id;
      a.e = b.e;
      b.alive = false;
      a.next = b.next;
      if (b.next >= 0) syms[static_cast<size_t>(b.next)].prev = c.pos;
      consider(a.prev);
      consider(c.pos);
    }
    for (const Sym& s : syms)
      if (s.alive) out.push_back(Tok{s.id, s.b, s.e});
    remember(w, out, start, cacheable);
  }

  void remember(std::string_view w, const std::vector<Tok>& out, size_t start, bool cacheable) const {
    if (!cacheable) return;
    WordMap& words = cache();
    if (words.size() >= kCacheEntries) words.clear();
    words.emplace(std::string(w), std::vector<Tok>(out.begin() + static_cast<ptrdiff_t>(start), out.end()));
  }
};

std::unique_ptr<VocabBase> make_bpe(const json& j) {
  const char* w = "model BPE";
  auto m = std::make_unique<Bpe>();
  m->read_dict(field(j, "vocab", w), w);
  const json& merges = field(j, "merges", w);
  if (!merges.is_array()) bad("model BPE: 'merges' is not an array");
  m->merges.reserve(merges.size());
  uint32_t rank = 0;
  for (const json& mj : merges) {
    std::string a, b;
    if (mj.is_string()) {
      const std::string& s = mj.get_ref<const std::string&>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        bad("model BPE: merge " + std::to_string(rank) + " '" + excerpt(s) + "' is not 'a b'");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (mj.is_array() && mj.size() == 2 && mj[0].is_string() && mj[1].is_string()) {
      a = mj[0].get<std::string>();
      b = mj[1].get<std::string>();
    } else {
      bad("model BPE: merge " + std::to_string(rank) + " is neither 'a b' nor [a, b]");
    }
    auto ia = m->find(a), ib = m->find(b), ic = m->find(a + b);
    if (!ia || !ib || !ic)
      bad("model BPE: merge " + std::to_string(rank) + " '" + excerpt(a) + " " + excerpt(b) +
          "' uses a token missing from the vocabulary");
    m->merges.emplace((static_cast<uint64_t>(*ia) << 32) | *ib, std::make_pair(rank, *ic));
    ++rank;
  }
  if (auto u = get_opt_string(j, "unk_token", w)) {
    auto id = m->find(*u);
    if (!id) bad("model BPE: unk_token '" + excerpt(*u) + "' is not in the vocabulary");
    m->unk = id;
  }
  m->prefix = get_string(j, "continuing_subword_prefix", w);
  m->suffix = get_string(j, "end_of_word_suffix", w);
  m->fuse_unk = get_bool(j, "fuse_unk", w, false);
  m->byte_fallback = get_bool(j, "byte_fallback", w, false);
  m->ignore_merges = get_bool(j, "ignore_merges", w, false);
  for (int b = 0; b < 256; ++b) {
    auto id = m->find(byte_token(static_cast<uint8_t>(b)));
    m->byte_ids[static_cast<size_t>(b)] = id ? static_cast<int64_t>(*id) : -1;
  }
  return m;
}

// ---- WordPiece ------------------------------------------------------------------------------------
struct WordPiece final : VocabBase {
  uint32_t unk = 0;
  std::string prefix = "##";
  size_t max_chars = 100;
  size_t max_token_bytes = 0;  // the longest token, less the prefix
  void tokenize(std::string_view w, std::vector<Tok>& out) const override {
    size_t chars = 0;
    for (size_t i = 0; i < w.size(); i += utf8_len(static_cast<unsigned char>(w[i]))) ++chars;
    if (chars > max_chars) {
      out.push_back(Tok{unk, 0, w.size()});
      return;
    }
    const size_t start_out = out.size();
    std::string tmp;
    for (size_t start = 0; start < w.size();) {
      // no candidate is longer than the longest token: a long word costs O(length x longest)
      size_t end = std::min(w.size(), start + max_token_bytes);
      while (end > start && end < w.size() && (static_cast<unsigned char>(w[end]) & 0xC0) == 0x80) --end;
      std::optional<uint32_t> hit;
      while (end > start) {
        tmp.clear();
        if (start > 0) tmp += prefix;
        tmp.append(w.substr(start, end - start));
        if ((hit = find(tmp))) break;
        do --end;
        while (end > start && (static_cast<unsigned char>(w[end]) & 0xC0) == 0x80);
      }
      if (!hit) {
        out.resize(start_out);
        out.push_back(Tok{unk, 0, w.size()});
        return;
      }
      out.push_back(Tok{*hit, start, end});
      start = end;
    }
  }
};

std::unique_ptr<VocabBase> make_wordpiece(const json& j) {
  const char* w = "model WordPiece";
  auto m = std::make_unique<WordPiece>();
  m->read_dict(field(j, "vocab", w), w);
  const std::string u = get_string(j, "unk_token", w, "[UNK]");
  auto id = m->find(u);
  if (!id) bad("model WordPiece: unk_token '" + excerpt(u) + "' is not in the vocabulary");
  m->unk = *id;
  m->prefix = get_string(j, "continuing_subword_prefix", w, "##");
  if (j.contains("max_input_chars_per_word")) m->max_chars = get_u32(j["max_input_chars_per_word"], w);
  for (auto& [t, id] : m->vocab) m->max_token_bytes = std::max(m->max_token_bytes, t.size());
  return m;
}

// ---- Unigram --------------------------------------------------------------------------------------
// A byte trie over the pieces: the pieces that start at a position are found in one walk.
struct PieceTrie {
  struct Node {
    std::vector<std::pair<unsigned char, uint32_t>> next;
    int64_t id = -1;
  };
  std::vector<Node> nodes{1};
  void add(std::string_view s, uint32_t id) {
    uint32_t n = 0;
    for (unsigned char c : s) {
      uint32_t child = 0;
      for (auto& [k, v] : nodes[n].next)
        if (k == c) child = v;
      if (!child) {
        nodes.push_back(Node{});
        child = static_cast<uint32_t>(nodes.size() - 1);
        nodes[n].next.push_back({c, child});
      }
      n = child;
    }
    nodes[n].id = id;
  }
  // fn(end, id) for each piece that is a prefix of s[i..]
  template <class Fn>
  void prefixes(std::string_view s, size_t i, Fn&& fn) const {
    uint32_t n = 0;
    for (size_t k = i; k < s.size(); ++k) {
      uint32_t child = 0;
      for (auto& [c, v] : nodes[n].next)
        if (c == static_cast<unsigned char>(s[k])) child = v;
      if (!child) return;
      n = child;
      if (nodes[n].id >= 0) fn(k + 1, static_cast<uint32_t>(nodes[n].id));
    }
  }
};

struct Unigram final : VocabBase {
  PieceTrie trie;
  std::vector<double> scores;
  std::optional<uint32_t> unk;
  bool byte_fallback = false;
  double unk_score = 0;
  std::array<int64_t, 256> byte_ids{};

  void tokenize(std::string_view w, std::vector<Tok>& out) const override {
    const size_t n = w.size();
    constexpr double kNone = -std::numeric_limits<double>::infinity();
    std::vector<double> best(n + 1, kNone);
    std::vector<size_t> from(n + 1, 0);
    std::vector<int64_t> via(n + 1, -1);  // token id, or -1 for an unknown character
    best[0] = 0;
    for (size_t i = 0; i < n;) {
      const size_t cl = std::min(utf8_len(static_cast<unsigned char>(w[i])), n - i);
      if (best[i] != kNone) {
        bool single = false;
        trie.prefixes(w, i, [&](size_t e, uint32_t id) {
          const double s = best[i] + scores[id];
          if (e == i + cl) single = true;
          if (s > best[e]) best[e] = s, from[e] = i, via[e] = id;
        });
        if (!single) {
          const double s = best[i] + unk_score;
          if (s > best[i + cl]) best[i + cl] = s, from[i + cl] = i, via[i + cl] = -1;
        }
      }
      i += cl;
    }
    std::vector<Tok> rev;
    for (size_t e = n; e > 0;) {
      const size_t b = from[e];
      rev.push_back(Tok{via[e] < 0 ? UINT32_MAX : static_cast<uint32_t>(via[e]), b, e});
      e = b;
    }
    bool last_unk = false;
    for (auto it = rev.rbegin(); it != rev.rend(); ++it) {
      Tok t = *it;
      const bool is_unk = t.id == UINT32_MAX || (unk && t.id == *unk);
      if (is_unk && byte_fallback) {
        bool all = true;
        for (size_t k = t.b; k < t.e; ++k) all &= byte_ids[static_cast<uint8_t>(w[k])] >= 0;
        if (all) {
          for (size_t k = t.b; k < t.e; ++k)
            out.push_back(Tok{static_cast<uint32_t>(byte_ids[static_cast<uint8_t>(w[k])]), t.b, t.e});
          last_unk = false;
          continue;
        }
      }
      if (is_unk) {
        if (!unk)
          throw Error(ErrorKind::InvalidArgument,
                      "tokenizers: Unigram met an unknown character and has no unk_id");
        if (last_unk) {
          out.back().e = t.e;
        } else {
          out.push_back(Tok{*unk, t.b, t.e});
        }
        last_unk = true;
        continue;
      }
      out.push_back(t);
      last_unk = false;
    }
  }
};

constexpr size_t kMaxPieceBytes = 2048;

std::unique_ptr<VocabBase> make_unigram(const json& j) {
  const char* w = "model Unigram";
  auto m = std::make_unique<Unigram>();
  const json& v = field(j, "vocab", w);
  if (!v.is_array()) bad("model Unigram: 'vocab' is not an array");
  double min_score = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const json& e = v[i];
    if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_number())
      bad("model Unigram: vocab entry " + std::to_string(i) + " is not [piece, score]");
    const double s = e[1].get<double>();
    if (!std::isfinite(s)) bad("model Unigram: vocab entry " + std::to_string(i) + " has a non-finite score");
    std::string piece = e[0].get<std::string>();
    // Viterbi walks the trie as deep as the longest piece from every position: bound it (SentencePiece
    // itself trains pieces of at most 16 characters)
    if (piece.size() > kMaxPieceBytes)
      bad("model Unigram: vocab entry " + std::to_string(i) + " is longer than " +
          std::to_string(kMaxPieceBytes) + " bytes");
    // A piece given twice keeps its last id (as HF's token_to_ids map does); both ids decode to it.
    m->reverse.emplace(static_cast<uint32_t>(i), piece);
    m->trie.add(piece, static_cast<uint32_t>(i));  // a piece given twice keeps its last id here too
    m->vocab.insert_or_assign(std::move(piece), static_cast<uint32_t>(i));
    m->scores.push_back(s);
    min_score = std::min(min_score, s);
  }
  m->unk_score = min_score - 10.0;
  if (j.contains("unk_id") && !j["unk_id"].is_null()) {
    const uint32_t u = get_u32(j["unk_id"], "model Unigram: unk_id");
    if (u >= v.size()) bad("model Unigram: unk_id is out of the vocabulary");
    m->unk = u;
  }
  m->byte_fallback = get_bool(j, "byte_fallback", w, false);
  for (int b = 0; b < 256; ++b) {
    auto id = m->find(byte_token(static_cast<uint8_t>(b)));
    m->byte_ids[static_cast<size_t>(b)] = id ? static_cast<int64_t>(*id) : -1;
  }
  return m;
}

}  // namespace

std::unique_ptr<Model> make_model(const json& j) {
  if (!j.is_object()) bad("model is not an object");
  std::string type = get_string(j, "type", "model");
  if (type.empty()) {  // older files name no type: tell the models apart by their fields
    if (j.contains("merges"))
      type = "BPE";
    else if (j.contains("continuing_subword_prefix") || j.contains("max_input_chars_per_word"))
      type = "WordPiece";
    else if (j.contains("vocab") && j["vocab"].is_array())
      type = "Unigram";
  }
  std::unique_ptr<VocabBase> m;
  if (type == "BPE")
    m = make_bpe(j);
  else if (type == "WordPiece")
    m = make_wordpiece(j);
  else if (type == "Unigram")
    m = make_unigram(j);
  if (m) {
    m->finish();
    return m;
  }
  throw Error(ErrorKind::UnsupportedOp, "tokenizer.json: unsupported model type '" + excerpt(type) + "'");
}

namespace {

// the vocabulary of a GGUF file: ids are the positions in `tokens`; a text given twice maps to its
// last id (as llama.cpp's and HF's token -> id maps do), both ids decode to it
void gguf_vocab(VocabBase& m, const std::vector<std::string>& tokens) {
  m.vocab.reserve(tokens.size());
  m.reverse.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    m.reverse.emplace(static_cast<uint32_t>(i), tokens[i]);
    m.vocab.insert_or_assign(tokens[i], static_cast<uint32_t>(i));
  }
}

void gguf_byte_ids(Bpe& m) {
  for (int b = 0; b < 256; ++b) {
    auto id = m.find(byte_token(static_cast<uint8_t>(b)));
    m.byte_ids[static_cast<size_t>(b)] = id ? static_cast<int64_t>(*id) : -1;
  }
}

}  // namespace

std::unique_ptr<Model> make_gguf_bpe(const std::vector<std::string>& tokens,
                                     const std::vector<std::pair<std::string, std::string>>& merges,
                                     bool ignore_merges, const char* where) {
  auto m = std::make_unique<Bpe>();
  gguf_vocab(*m, tokens);
  m->merges.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    auto ia = m->find(a), ib = m->find(b), ic = m->find(a + b);
    if (!ia || !ib || !ic)
      throw Error(ErrorKind::Parse, "GGUF tokenizer: " + std::string(where) + ": merge " +
                                        std::to_string(rank) + " '" + excerpt(a) + " " + excerpt(b) +
                                        "' uses a token missing from tokenizer.ggml.tokens");
    // a pair given twice keeps its first (lowest) rank
    m->merges.emplace((static_cast<uint64_t>(*ia) << 32) | *ib,
                      std::make_pair(static_cast<uint32_t>(rank), *ic));
  }
  m->ignore_merges = ignore_merges;
  gguf_byte_ids(*m);
  m->finish();
  return m;
}

std::unique_ptr<Model> make_gguf_spm(const std::vector<std::string>& tokens, const std::vector<float>& scores,
                                     const std::vector<bool>& mergeable, std::optional<uint32_t> unk) {
  auto m = std::make_unique<Bpe>();
  gguf_vocab(*m, tokens);
  m->by_score = true;
  m->byte_fallback = true;
  m->fuse_unk = true;
  m->unk = unk;
  std::vector<uint32_t> order;
  for (uint32_t i = 0; i < tokens.size(); ++i)
    if (mergeable[i]) order.push_back(i);
  // scores are finite (checked by the caller): a strict weak order
  std::stable_sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) { return scores[x] > scores[y]; });
  m->score_rank.assign(tokens.size(), Bpe::kNoRank);
  uint32_t rank = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    if (k > 0 && scores[order[k]] != scores[order[k - 1]]) ++rank;
    m->score_rank[order[k]] = rank;
  }
  gguf_byte_ids(*m);
  m->finish();
  return m;
}

}  // namespace candle::tokenizers::detail
