#pragma once
// Chat templates: the Jinja template of a tokenizer_config.json (`chat_template`) or of a GGUF file
// (`tokenizer.chat_template`), rendered as @huggingface/jinja renders it (transformers.js; HF's
// apply_chat_template: trim_blocks and lstrip_blocks on). A template is hostile input: syntax
// errors are candle::Error(Parse) with a line and column, render errors (raise_exception, a type
// error, a loop or output past the limits) candle::Error(InvalidArgument); nothing crashes or hangs.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace candle::quantized::gguf_file {
class Content;
}

namespace candle::generation {

namespace jinja {
struct Program;
}

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", "tool"
  std::string content;
};

struct ChatTemplateOptions {
  bool add_generation_prompt = false;
  // empty: the tokens of the tokenizer_config.json the template came from (if any)
  std::string bos_token;
  std::string eos_token;
  // a JSON object whose members join the context: "tools", "enable_thinking", "documents", ...
  std::string extra_context_json;
};

class ChatTemplate {
 public:
  // Parses `source`; throws candle::Error(Parse).
  explicit ChatTemplate(std::string source);
  // The chat_template of a tokenizer_config.json: a string, or a list of {"name", "template"}
  // (`name` picks one; empty: "default", else the first). bos_token / eos_token may be strings
  // or {"content": ...} objects.
  static ChatTemplate from_tokenizer_config(const std::string& path, const std::string& name = "");
  static ChatTemplate from_tokenizer_config_json(std::string_view json, const std::string& name = "");
  // The `tokenizer.chat_template` of a GGUF file; bos / eos from tokenizer.ggml.bos_token_id and
  // eos_token_id looked up in tokenizer.ggml.tokens (empty when absent).
  static ChatTemplate from_gguf(const quantized::gguf_file::Content& content);

  // The context {messages, add_generation_prompt, bos_token, eos_token, ...extra}.
  std::string apply(const std::vector<ChatMessage>& messages, const ChatTemplateOptions& opts = {}) const;
  // The whole context as a JSON object (messages with tool_calls, tools, any variable).
  std::string render_json(std::string_view context_json) const;

  const std::string& source() const { return source_; }
  const std::string& bos_token() const { return bos_; }
  const std::string& eos_token() const { return eos_; }

 private:
  std::string source_;
  std::string bos_, eos_;
  std::shared_ptr<const jinja::Program> program_;
};

}  // namespace candle::generation
