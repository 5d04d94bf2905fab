// ChatTemplate: the public face of the Jinja interpreter (context assembly, tokenizer_config.json).
#include "candle/generation/chat_template.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "candle/error.h"
#include "candle/quantized/gguf_file.h"
#include "jinja.h"

namespace candle::generation {

namespace {

using ojson = nlohmann::ordered_json;

std::string token_text(const ojson& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    auto c = it->find("content");
    if (c != it->end() && c->is_string()) return c->get<std::string>();
  }
  throw Error(ErrorKind::Parse,
              std::string("tokenizer_config.json: ") + key + " is neither a string nor {\"content\": ...}");
}

}  // namespace

ChatTemplate::ChatTemplate(std::string source)
    : source_(std::move(source)), program_(jinja::parse_template(source_)) {}

ChatTemplate ChatTemplate::from_tokenizer_config_json(std::string_view text, const std::string& name) {
  ojson j;
  try {
    j = ojson::parse(text.begin(), text.end(), [](int depth, ojson::parse_event_t, ojson&) {
      if (depth > 64) throw Error(ErrorKind::Parse, "tokenizer_config.json: nested too deeply");
      return true;
    });
  } catch (const ojson::exception& e) {
    throw Error(ErrorKind::Parse,
                std::string("tokenizer_config.json: invalid JSON: ") + jinja::short_excerpt(e.what(), 120));
  }
  if (!j.is_object()) throw Error(ErrorKind::Parse, "tokenizer_config.json: not a JSON object");
  auto it = j.find("chat_template");
  if (it == j.end() || it->is_null())
    throw Error(ErrorKind::Parse, "tokenizer_config.json: no chat_template");
  std::string source;
  if (it->is_string()) {
    source = it->get<std::string>();
  } else if (it->is_array()) {
    const ojson* pick = nullptr;
    for (const auto& t : *it) {
      if (!t.is_object() || !t.contains("name") || !t.contains("template") || !t["name"].is_string() ||
          !t["template"].is_string())
        throw Error(ErrorKind::Parse,
                    "tokenizer_config.json: chat_template entries must be {name, template}");
      const std::string n = t["name"].get<std::string>();
      if ((!name.empty() && n == name) || (name.empty() && n == "default")) pick = &t;
    }
    if (!pick && name.empty() && !it->empty()) pick = &(*it)[0];
    if (!pick)
      throw Error(ErrorKind::Parse,
                  "tokenizer_config.json: no chat template named " + jinja::short_excerpt(name));
    source = (*pick)["template"].get<std::string>();
  } else {
    throw Error(ErrorKind::Parse, "tokenizer_config.json: chat_template is neither a string nor a list");
  }
  ChatTemplate t(std::move(source));
  t.bos_ = token_text(j, "bos_token");
  t.eos_ = token_text(j, "eos_token");
  return t;
}

ChatTemplate ChatTemplate::from_tokenizer_config(const std::string& path, const std::string& name) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(ErrorKind::Io, "cannot open " + path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return with_context("reading " + path, [&] { return from_tokenizer_config_json(ss.str(), name); });
}

ChatTemplate ChatTemplate::from_gguf(const quantized::gguf_file::Content& content) {
  const auto& md = content.metadata;
  auto it = md.find("tokenizer.chat_template");
  if (it == md.end()) throw Error(ErrorKind::Parse, "GGUF: no tokenizer.chat_template");
  ChatTemplate t(it->second.to_string());
  auto tokens = md.find("tokenizer.ggml.tokens");
  auto token = [&](const char* key) -> std::string {
    auto id = md.find(key);
    if (id == md.end() || tokens == md.end()) return "";
    const uint64_t i = id->second.to_u64();
    const auto& list = tokens->second.to_vec();
    if (i >= list.size())
      throw Error(ErrorKind::Parse, std::string("GGUF: ") + key + " " + std::to_string(i) + " is past the " +
                                        std::to_string(list.size()) + " tokens");
    return list[i].to_string();
  };
  t.bos_ = token("tokenizer.ggml.bos_token_id");
  t.eos_ = token("tokenizer.ggml.eos_token_id");
  return t;
}

std::string ChatTemplate::apply(const std::vector<ChatMessage>& messages,
                                const ChatTemplateOptions& opts) const {
  jinja::Value ctx = jinja::Value::object();
  jinja::Array msgs;
  msgs.reserve(messages.size());
  for (const auto& m : messages) {
    jinja::Value o = jinja::Value::object();
    o.obj->set("role", jinja::Value::string(m.role));
    o.obj->set("content", jinja::Value::string(m.content));
    msgs.push_back(std::move(o));
  }
  ctx.obj->set("messages", jinja::Value::array(std::move(msgs)));
  ctx.obj->set("add_generation_prompt", jinja::Value::boolean(opts.add_generation_prompt));
  ctx.obj->set("bos_token", jinja::Value::string(opts.bos_token.empty() ? bos_ : opts.bos_token));
  ctx.obj->set("eos_token", jinja::Value::string(opts.eos_token.empty() ? eos_ : opts.eos_token));
  if (!opts.extra_context_json.empty()) {
    const jinja::Value extra = jinja::from_json_text(opts.extra_context_json);
    if (extra.kind != jinja::Kind::Object)
      throw Error(ErrorKind::InvalidArgument, "chat template: extra context is not a JSON object");
    for (const auto& [k, v] : extra.obj->entries) ctx.obj->set(k, v);
  }
  return jinja::render(*program_, ctx);
}

std::string ChatTemplate::render_json(std::string_view context_json) const {
  const jinja::Value ctx = jinja::from_json_text(context_json);
  if (ctx.kind != jinja::Kind::Object)
    throw Error(ErrorKind::InvalidArgument, "chat template: the context is not a JSON object");
  return jinja::render(*program_, ctx);
}

}  // namespace candle::generation
