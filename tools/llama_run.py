#!/usr/bin/env python3
"""Load a GGUF model with llama.cpp's libllama (the prebuilt v0.5.0 libraries of tools/peers,
called through ctypes; no headers are shipped, so the few prototypes are declared here) and
evaluate a token sequence: what llama.cpp does with a GGUF file written by candle-cpp.

  python3 tools/llama_run.py MODEL [--tokens 1,5,9 | --prompt TEXT | --n-tokens N]
                             [--threads N] [--show N] [--verbose]
      evaluate the tokens in one batch from an empty context (after a warm-up run) and print the last position's logits
      (the first --show values, the argmax), whether they are all finite, and tokens/s. The last
      line is machine-readable:
          RESULT n_vocab=V n_tokens=T finite=1 argmax=I max=X tok_per_s=S
      Exit status: 1 when llama.cpp refuses the model (load, context or decode fails; its log is
      printed), 3 when a logit is not finite, 2 on bad arguments.

  python3 tools/llama_run.py MODEL --bench [--pp 512] [--tg 128] [--reps 3] [--threads N] [--depth D]
      llama-bench's two tests: pp = the time to decode --pp random tokens in one batch (n_ubatch
      512) from an empty context; tg = --tg single-token decodes from an empty context; each after
      a warm-up run, --reps times; prints tokens/s (mean and standard deviation) and a line
          BENCH test=pp512 t=N tok_per_s=MEAN std=STD
      --depth D (llama-bench's -d): each run first decodes D random tokens (not timed), the tests
      named pp512_dD / tg128_dD.
      (tools/bench_llamacpp_gguf.py runs this for several files / thread counts.)

  python3 tools/llama_run.py MODEL --greedy N [--kv-f32] [--tokens 1,5,9 | --prompt TEXT | --n-tokens N] [--threads N]
      greedy decoding: the prompt in one batch from an empty context, then N steps each taking the
      argmax of the last logits and decoding it alone. Prints JSON on the last line:
          GREEDY {"prompt": [...], "greedy": [...], "gaps": [...], "prompt_last_logits": [...]}
      greedy = prompt + N tokens; gaps[i] = top-1 minus top-2 logit at step i (how close a tie
      was); prompt_last_logits = the logits after the prompt. --kv-f32: attention in f32 (the KV cache
      in f32 instead of llama.cpp's default f16, and flash attention off: its CPU kernel rounds q, k
      and v to f16), so that f32 weights give the exact math's logits (within ~1e-5).

Struct arguments: llama_model_params, llama_context_params and llama_batch are passed and
returned by value. Only a few fields of llama_context_params are touched here: n_ctx, n_batch,
n_ubatch (the first uint32s), n_threads and n_threads_batch (found by their default values after
n_seq_max; this release has fields there that older llama.h did not), checked on the context
made through llama_n_ctx / llama_n_batch / llama_n_threads / llama_n_threads_batch; the structs are
declared as opaque byte blocks larger than the library's own (x86-64 SysV passes and returns
such structs in memory, and the callee reads only its own size), so no other field layout is
assumed.

Environment: CANDLE_LLAMA_LIB_DIR overrides the directory of libllama / libggml*.
"""
import argparse
import ctypes as C
import json
import math
import os
import random
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LIB_DIR = os.environ.get("CANDLE_LLAMA_LIB_DIR",
                         os.path.join(HERE, "peers/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"))


class Opaque(C.Structure):
    """A by-value struct of unknown layout: larger than any of this release's."""
    _fields_ = [("b", C.c_uint8 * 1024)]


LOG = []  # llama.cpp's log lines, printed when it refuses something
LOG_CB_TYPE = C.CFUNCTYPE(None, C.c_int, C.c_char_p, C.c_void_p)


def _log_cb(level, text, user):
    LOG.append(text.decode("utf-8", "replace") if text else "")
    if VERBOSE:
        sys.stderr.write(LOG[-1])


_LOG_CB = LOG_CB_TYPE(_log_cb)
VERBOSE = False


class Llama:
    def __init__(self, lib_dir=LIB_DIR):
        if not os.path.isdir(lib_dir):
            raise FileNotFoundError(f"llama.cpp libraries not found in {lib_dir} (run tools/install-deps.sh)")
        mode = C.RTLD_GLOBAL
        self.base = C.CDLL(os.path.join(lib_dir, "libggml-base.so"), mode=mode)
        self.ggml = C.CDLL(os.path.join(lib_dir, "libggml.v0.5.0.so"), mode=mode)
        self.lib = C.CDLL(os.path.join(lib_dir, "libllama.v0.5.0.so"), mode=mode)
        vp, i32, u32, cp = C.c_void_p, C.c_int32, C.c_uint32, C.c_char_p

        def fn(lib, name, res, *args):
            f = getattr(lib, name)
            f.restype = res
            f.argtypes = list(args)
            return f

        L = self.lib
        fn(self.base, "ggml_log_set", None, LOG_CB_TYPE, vp)
        fn(self.ggml, "ggml_backend_load_all_from_path", None, cp)
        fn(self.ggml, "ggml_backend_load", vp, cp)
        fn(self.ggml, "ggml_backend_dev_count", C.c_size_t)
        fn(L, "llama_log_set", None, LOG_CB_TYPE, vp)
        fn(L, "llama_backend_init", None)
        fn(L, "llama_backend_free", None)
        fn(L, "llama_model_default_params", Opaque)
        fn(L, "llama_context_default_params", Opaque)
        fn(L, "llama_model_load_from_file", vp, cp, Opaque)
        fn(L, "llama_model_free", None, vp)
        fn(L, "llama_init_from_model", vp, vp, Opaque)
        fn(L, "llama_free", None, vp)
        fn(L, "llama_model_get_vocab", vp, vp)
        fn(L, "llama_vocab_n_tokens", i32, vp)
        fn(L, "llama_vocab_bos", i32, vp)
        fn(L, "llama_model_n_layer", i32, vp)
        fn(L, "llama_model_n_embd", i32, vp)
        fn(L, "llama_model_desc", i32, vp, cp, C.c_size_t)
        fn(L, "llama_model_size", C.c_uint64, vp)
        fn(L, "llama_model_n_params", C.c_uint64, vp)
        fn(L, "llama_n_ctx", u32, vp)
        fn(L, "llama_n_batch", u32, vp)
        fn(L, "llama_set_n_threads", None, vp, i32, i32)
        fn(L, "llama_n_threads", i32, vp)
        fn(L, "llama_n_threads_batch", i32, vp)
        fn(L, "llama_batch_get_one", Opaque, C.POINTER(i32), i32)
        fn(L, "llama_decode", i32, vp, Opaque)
        fn(L, "llama_get_logits_ith", C.POINTER(C.c_float), vp, i32)
        fn(L, "llama_get_memory", vp, vp)
        fn(L, "llama_memory_clear", None, vp, C.c_bool)
        fn(L, "llama_synchronize", None, vp)
        fn(L, "llama_tokenize", i32, vp, cp, i32, C.POINTER(i32), i32, C.c_bool, C.c_bool)
        self.base.ggml_log_set(_LOG_CB, None)
        L.llama_log_set(_LOG_CB, None)
        # the CPU backend is a plug-in (libggml-cpu-<variant>.so): load the best one for this CPU, or
        # the one GGML_CPU_VARIANT names (haswell: AVX2 without VNNI, as qmatmul_vs_ggml takes it)
        variant = os.environ.get("GGML_CPU_VARIANT")
        if variant:
            so = os.path.join(lib_dir, "libggml-cpu-%s.so" % variant)
            if not os.path.exists(so) or not self.ggml.ggml_backend_load(so.encode()):
                raise RuntimeError("GGML_CPU_VARIANT=%s: cannot load %s" % (variant, so))
        else:
            self.ggml.ggml_backend_load_all_from_path(lib_dir.encode())
        if self.ggml.ggml_backend_dev_count() == 0:
            raise RuntimeError("llama.cpp found no backend device in " + lib_dir)
        L.llama_backend_init()
        self.model = None
        self.ctx = None

    def load(self, path):
        mp = self.lib.llama_model_default_params()
        self.model = self.lib.llama_model_load_from_file(path.encode(), mp)
        if not self.model:
            raise Refused("llama_model_load_from_file failed for " + path)
        self.vocab = self.lib.llama_model_get_vocab(self.model)
        self.n_vocab = self.lib.llama_vocab_n_tokens(self.vocab)

    def new_context(self, n_ctx, n_batch, threads, kv_f32=False):
        cp = self.lib.llama_context_default_params()
        f = (C.c_uint32 * 4).from_buffer(cp.b)  # n_ctx n_batch n_ubatch n_seq_max
        ints = list((C.c_int32 * 12).from_buffer(cp.b))
        # this release's defaults: 512 2048 512 1, then fields new in this release, then
        # n_threads n_threads_batch (both GGML_DEFAULT_N_THREADS = 4): found by value here and
        # checked on the context made (llama_n_threads / llama_n_threads_batch)
        at = next((i for i in range(4, 11) if ints[i] == ints[i + 1] == 4), None)
        if list(f) != [512, 2048, 512, 1] or at is None:
            raise RuntimeError("llama_context_params does not start as expected in this libllama "
                               f"(defaults {ints}): update tools/llama_run.py")
        t = (C.c_int32 * 2).from_buffer(cp.b, 4 * at)
        f[0], f[1], f[2] = n_ctx, n_batch, min(n_batch, 512)
        t[0] = t[1] = threads
        if kv_f32:
            # type_k, type_v (default GGML_TYPE_F16 = 1) follow the cb_eval callback and its user
            # data (two null pointers) after the rope/yarn/defrag block; GGML_TYPE_F32 = 0. Found
            # by that pattern; the KV cache's log line confirms the type after the context is made.
            ints = list((C.c_int32 * 40).from_buffer(cp.b))
            k = next((i for i in range(at + 2, 34) if ints[i:i + 4] == [0, 0, 0, 0] and ints[i + 4:i + 6] == [1, 1]
                      and C.c_float.from_buffer(cp.b, 4 * (i - 1)).value == -1.0), None)
            if k is None:
                raise RuntimeError("type_k / type_v not found in llama_context_params: update tools/llama_run.py")
            kv = (C.c_int32 * 2).from_buffer(cp.b, 4 * (k + 4))
            kv[0] = kv[1] = 0
            # flash_attn_type (LLAMA_FLASH_ATTN_TYPE_AUTO = -1 by default): the last of the four enums
            # (rope scaling, pooling, attention, flash attention; all -1) after n_threads_batch; 0
            # disables it: the CPU flash-attention kernel rounds Q, K and V to f16 whatever the
            # cache's type.
            if ints[at + 3:at + 7] != [-1, -1, -1, -1]:
                raise RuntimeError("flash_attn_type not found in llama_context_params: update tools/llama_run.py")
            C.c_int32.from_buffer(cp.b, 4 * (at + 6)).value = 0
            del LOG[:]
        if self.ctx:
            self.lib.llama_free(self.ctx)
        self.ctx = self.lib.llama_init_from_model(self.model, cp)
        if not self.ctx:
            raise Refused("llama_init_from_model failed")
        if kv_f32 and not (any("K (f32)" in line for line in LOG) and
                           any("flash_attn" in line and "disabled" in line for line in LOG)):
            raise RuntimeError("the KV cache was not made in f32 without flash attention: update tools/llama_run.py")
        if self.lib.llama_n_ctx(self.ctx) < n_ctx or self.lib.llama_n_batch(self.ctx) != n_batch or \
                self.lib.llama_n_threads(self.ctx) != threads or self.lib.llama_n_threads_batch(self.ctx) != threads:
            raise RuntimeError("llama_context_params were not taken as set")

    def clear(self):
        self.lib.llama_memory_clear(self.lib.llama_get_memory(self.ctx), True)

    def decode(self, tokens):
        arr = (C.c_int32 * len(tokens))(*tokens)
        batch = self.lib.llama_batch_get_one(arr, len(tokens))
        # llama_batch starts with int32 n_tokens, then (aligned) the token pointer
        if C.c_int32.from_buffer(batch.b).value != len(tokens) or \
                C.c_void_p.from_buffer(batch.b, 8).value != C.addressof(arr):
            raise RuntimeError("llama_batch does not start as expected in this libllama")
        rc = self.lib.llama_decode(self.ctx, batch)
        if rc != 0:
            raise Refused(f"llama_decode returned {rc}")

    def last_logits(self):
        p = self.lib.llama_get_logits_ith(self.ctx, -1)
        if not p:
            raise Refused("llama_get_logits_ith returned no logits")
        return p[:self.n_vocab]

    def tokenize(self, text):
        raw = text.encode()
        buf = (C.c_int32 * (len(raw) + 8))()
        n = self.lib.llama_tokenize(self.vocab, raw, len(raw), buf, len(buf), True, False)
        if n < 0:
            raise Refused("llama_tokenize failed")
        return list(buf[:n])

    def describe(self):
        buf = C.create_string_buffer(256)
        self.lib.llama_model_desc(self.model, buf, len(buf))
        return (f"{buf.value.decode(errors='replace')}, {self.lib.llama_model_n_params(self.model) / 1e6:.1f} M "
                f"params, {self.lib.llama_model_size(self.model) / 2**20:.2f} MiB, "
                f"{self.lib.llama_model_n_layer(self.model)} layers, dim {self.lib.llama_model_n_embd(self.model)}, "
                f"n_vocab {self.n_vocab}")

    def close(self):
        if self.ctx:
            self.lib.llama_free(self.ctx)
            self.ctx = None
        if self.model:
            self.lib.llama_model_free(self.model)
            self.model = None


class Refused(Exception):
    pass


def run_tokens(ll, tokens, threads, show):
    ll.new_context(max(64, len(tokens)), max(1, len(tokens)), threads)
    ll.decode(tokens)  # warm-up (the first decode allocates the graph), then the timed run
    ll.clear()
    t0 = time.perf_counter()
    ll.decode(tokens)
    ll.lib.llama_synchronize(ll.ctx)
    secs = time.perf_counter() - t0
    logits = ll.last_logits()
    finite = all(math.isfinite(x) for x in logits)
    am = max(range(len(logits)), key=lambda i: logits[i]) if finite else -1
    print(f"tokens ({len(tokens)}): {tokens[:16]}{' ...' if len(tokens) > 16 else ''}")
    print(f"logits[0:{show}]: " + " ".join(f"{x:.6g}" for x in logits[:show]))
    print(f"argmax: {am} ({logits[am]:.6g})" if finite else "argmax: - (non-finite logits)")
    print(f"eval: {len(tokens)} tokens in {secs * 1e3:.2f} ms ({len(tokens) / secs:.1f} tok/s, {threads} threads)")
    print(f"RESULT n_vocab={len(logits)} n_tokens={len(tokens)} finite={int(finite)} argmax={am} "
          f"max={logits[am] if finite else float('nan'):.6g} tok_per_s={len(tokens) / secs:.2f}")
    return 0 if finite else 3


def greedy(ll, tokens, steps, threads, kv_f32=False):
    """The prompt in one batch, then `steps` single-token argmax decodes; prints a GREEDY line."""
    ll.new_context(max(64, len(tokens) + steps), max(1, len(tokens)), threads, kv_f32)
    ll.decode(tokens)
    first = ll.last_logits()
    out, gaps = list(tokens), []
    logits = first
    for i in range(steps):
        if not all(math.isfinite(x) for x in logits):
            print("llama_run: non-finite logits", file=sys.stderr)
            return 3
        order = sorted(range(len(logits)), key=lambda j: -logits[j])
        gaps.append(logits[order[0]] - logits[order[1]])
        out.append(order[0])
        if i + 1 < steps:
            ll.decode([order[0]])
            logits = ll.last_logits()
    print("GREEDY " + json.dumps({"prompt": list(tokens), "greedy": out, "gaps": [round(g, 6) for g in gaps],
                                  "prompt_last_logits": [float(f"{x:.7g}") for x in first]}))
    return 0


def bench(ll, pp, tg, reps, threads, seed=1, depth=0):
    """llama-bench's pp<pp> and tg<tg>: tokens/s over `reps` runs after one warm-up; returns rows.
    depth (llama-bench's -d): each run first decodes `depth` random tokens (not timed); the tests are
    then named pp<pp>_d<depth> / tg<tg>_d<depth>."""
    rng = random.Random(seed)
    n_ctx = max(pp, tg, 64) + depth
    n_batch = max(pp, min(depth, 2048), 1)
    ll.new_context(n_ctx, n_batch, threads)
    bos = ll.lib.llama_vocab_bos(ll.vocab)
    rows = []

    def one(kind):
        ll.clear()
        if depth > 0:
            toks = [rng.randrange(ll.n_vocab) for _ in range(depth)]
            for i in range(0, depth, n_batch):
                ll.decode(toks[i:i + n_batch])
            ll.lib.llama_synchronize(ll.ctx)
        if kind == "pp":
            toks = [rng.randrange(ll.n_vocab) for _ in range(pp)]
            t0 = time.perf_counter()
            for i in range(0, pp, 2048):
                ll.decode(toks[i:i + 2048])
            ll.lib.llama_synchronize(ll.ctx)
            return pp / (time.perf_counter() - t0)
        tok = bos if bos >= 0 else 1
        t0 = time.perf_counter()
        for _ in range(tg):
            ll.decode([tok])
            ll.lib.llama_synchronize(ll.ctx)
            tok = rng.randrange(ll.n_vocab)
        return tg / (time.perf_counter() - t0)

    for kind, n in (("pp", pp), ("tg", tg)):
        if n <= 0:
            continue
        one(kind)  # warm-up
        speeds = [one(kind) for _ in range(reps)]
        mean = statistics.mean(speeds)
        std = statistics.stdev(speeds) if len(speeds) > 1 else 0.0
        name = f"{kind}{n}" + (f"_d{depth}" if depth > 0 else "")
        rows.append((name, threads, mean, std))
        print(f"BENCH test={name} t={threads} tok_per_s={mean:.2f} std={std:.2f}", flush=True)
    return rows


def main(argv=None):
    global VERBOSE
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--tokens", help="comma-separated token ids")
    ap.add_argument("--prompt", help="text, tokenized by llama.cpp (BOS added)")
    ap.add_argument("--n-tokens", type=int, default=8, help="without --tokens/--prompt: BOS then N-1 ids")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--show", type=int, default=8, help="logits to print")
    ap.add_argument("--greedy", type=int, default=0, help="greedy decoding for N tokens after the prompt")
    ap.add_argument("--kv-f32", action="store_true",
                    help="with --greedy: f32 attention (an f32 KV cache, no flash attention; llama.cpp's defaults: f16, auto)")
    ap.add_argument("--bench", action="store_true", help="llama-bench's pp / tg tests instead")
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--depth", type=int, default=0, help="--bench: tokens in the KV cache before each timed run")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--verbose", action="store_true", help="print llama.cpp's log")
    a = ap.parse_args(argv)
    VERBOSE = a.verbose
    if not os.path.isfile(a.model):
        print(f"llama_run: {a.model}: no such file", file=sys.stderr)
        return 2
    if a.threads < 1 or a.n_tokens < 1 or a.reps < 1 or a.pp < 0 or a.tg < 0:
        print("llama_run: --threads, --n-tokens and --reps must be >= 1", file=sys.stderr)
        return 2
    try:
        ll = Llama()
    except (OSError, RuntimeError) as e:
        print(f"llama_run: {e}", file=sys.stderr)
        return 2
    try:
        ll.load(a.model)
        print(f"model: {a.model}: {ll.describe()}")
        if a.bench:
            bench(ll, a.pp, a.tg, a.reps, a.threads, depth=a.depth)
            return 0
        if a.tokens:
            try:
                tokens = [int(x) for x in a.tokens.split(",") if x.strip()]
            except ValueError:
                print("llama_run: --tokens: expected comma-separated integers", file=sys.stderr)
                return 2
            bad = [t for t in tokens if not 0 <= t < ll.n_vocab]
            if not tokens or bad:
                print(f"llama_run: --tokens: empty or out of the vocabulary ({ll.n_vocab}): {bad[:4]}",
                      file=sys.stderr)
                return 2
        elif a.prompt is not None:
            tokens = ll.tokenize(a.prompt)
        else:
            bos = ll.lib.llama_vocab_bos(ll.vocab)
            tokens = [bos if bos >= 0 else 1] + [(7 * i + 3) % ll.n_vocab for i in range(1, a.n_tokens)]
        if a.greedy > 0:
            return greedy(ll, tokens, a.greedy, a.threads, a.kv_f32)
        return run_tokens(ll, tokens, a.threads, a.show)
    except Refused as e:
        print(f"llama_run: llama.cpp refused {a.model}: {e}", file=sys.stderr)
        tail = "".join(LOG[-30:])
        if tail and not VERBOSE:
            print("llama.cpp's log (last lines):\n" + tail, file=sys.stderr)
        return 1
    finally:
        ll.close()


if __name__ == "__main__":
    sys.exit(main())
