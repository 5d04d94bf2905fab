// Chat templates (Jinja) as hostile input: the bytes before the first NUL are a template, rendered
// with a fixed chat context, or with the JSON object after the NUL when there is one. Any outcome
// but a candle::Error (a crash, a hang, a leak, an oversized allocation) is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "candle/error.h"
#include "candle/generation/chat_template.h"

namespace {

const char* kContext = R"({"messages": [
  {"role": "system", "content": "Be brief."},
  {"role": "user", "content": "Hi \u00e9 \ud83d\ude00 {{ x }}"},
  {"role": "assistant", "content": "<think>r</think>ok", "tool_calls": [{"type": "function",
    "function": {"name": "f", "arguments": {"a": 1, "b": [true, null, 2.5]}}}]},
  {"role": "tool", "content": "42"}],
 "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
 "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"})";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in(reinterpret_cast<const char*>(data), size);
  const size_t nul = in.find('\0');
  const std::string source = in.substr(0, nul);
  const std::string context = nul == std::string::npos ? kContext : in.substr(nul + 1);
  try {
    const candle::generation::ChatTemplate t(source);
    const std::string out = t.render_json(context);
    if (out.size() > (64u << 20)) __builtin_trap();  // the output limit did not hold
  } catch (const candle::Error&) {
  }
  return 0;
}
