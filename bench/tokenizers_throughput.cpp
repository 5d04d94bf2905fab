// One-thread encoding speed of candle::tokenizers: each line of a text file (with its "\n") encoded
// without special tokens, as tools/tokenizer_reference.mjs --bench does with HF's JavaScript tokenizers.
//   tokenizers_throughput NAME TOKENIZER_JSON TEXT_FILE
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "candle/error.h"
#include "candle/tokenizers/tokenizer.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s NAME TOKENIZER_JSON TEXT_FILE\n", argv[0]);
    return 2;
  }
  try {
    const auto tok = candle::tokenizers::Tokenizer::from_file(argv[2]);
    std::ifstream f(argv[3], std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string text = ss.str();
    std::vector<std::string> lines;
    for (size_t pos = 0;;) {
      const size_t nl = text.find('\n', pos);
      lines.push_back(text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos) + "\n");
      if (nl == std::string::npos) break;
      pos = nl + 1;
    }
    (void)tok.encode(lines[0], false);
    const auto t0 = std::chrono::steady_clock::now();
    size_t n = 0;
    for (const auto& l : lines) n += tok.encode(l, false).len();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("candle %s %.2f MB/s (%zu tokens, %.2f MB, %.2f s)\n", argv[1], text.size() / 1e6 / s, n,
                text.size() / 1e6, s);
  } catch (const candle::Error& e) {
    std::fprintf(stderr, "tokenizers_throughput: %s\n", e.what());
    return 1;
  }
  return 0;
}
