// Encoding speed of candle::tokenizers: each line of a text file (with its "\n") encoded without
// special tokens, as tools/tokenizer_reference.mjs --bench does with HF's JavaScript tokenizers, one
// by one on one thread, or with THREADS all lines in one encode_batch on that many threads.
//   tokenizers_throughput NAME TOKENIZER_JSON TEXT_FILE [THREADS]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "candle/error.h"
#include "candle/tokenizers/tokenizer.h"
#include "candle/utils.h"

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    std::fprintf(stderr, "usage: %s NAME TOKENIZER_JSON TEXT_FILE [THREADS]\n", argv[0]);
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
    const size_t threads = argc == 5 ? std::strtoul(argv[4], nullptr, 10) : 0;
    const auto t0 = std::chrono::steady_clock::now();
    size_t n = 0;
    if (threads > 0) {
      candle::set_num_threads(threads);
      for (const auto& e : tok.encode_batch(lines, false)) n += e.len();
    } else {
      for (const auto& l : lines) n += tok.encode(l, false).len();
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string how = threads > 0 ? " encode_batch " + std::to_string(threads) + " threads" : "";
    std::printf("candle %s%s %.2f MB/s (%zu tokens, %.2f MB, %.2f s)\n", argv[1], how.c_str(),
                text.size() / 1e6 / s, n, text.size() / 1e6, s);
  } catch (const candle::Error& e) {
    std::fprintf(stderr, "tokenizers_throughput: %s\n", e.what());
    return 1;
  }
  return 0;
}
