#!/usr/bin/python3
"""One epoch of the mnist-training CNN in PyTorch and in candle-mnist-training, same run.

Both train candle's ConvNet (conv 1->32 5x5, max-pool 2, conv 32->64 5x5, max-pool 2,
linear 1024->1024, relu, dropout 0.5, linear 1024->10) with AdamW (lr 1e-3, betas 0.9/0.999,
eps 1e-8, weight decay 0.01) on shuffled batches of 64 (the last partial batch dropped) of the
same IDX files, on the same number of threads, each in its own process. Printed per side:
the epoch's training time (the test evaluation not included), the test accuracy after the
epoch, and the process's peak RSS (os.wait4's ru_maxrss); then candle / PyTorch ratios.

  /usr/bin/python3 tools/bench_mnist_vs_torch.py [--candle build/bin/candle-mnist-training]
      [--data /usr/share/datasets/fashion-mnist] [--threads 2] [--only torch|candle]

Here: Debian's python3-torch (1.13, CPU), hence /usr/bin/python3. On the GPU machine: --device cuda
(PyTorch 2.11 with cuDNN, TF32 off on both sides; candle-mnist-training --device cuda).
"""
import argparse
import gzip
import os
import re
import struct
import subprocess
import sys
import time

LINE = re.compile(r"epoch (\d+) train_loss ([0-9.naninf]+) test_acc ([0-9.]+) time ([0-9.]+)s")


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise SystemExit(f"{path}: not an unsigned-byte IDX file")
    nd = data[3]
    dims = struct.unpack(">" + "I" * nd, data[4:4 + 4 * nd])
    return dims, data[4 + 4 * nd:]


def find(d, stem):
    for name in (stem, stem + ".gz"):
        p = os.path.join(d, name)
        if os.path.isfile(p):
            return p
    raise SystemExit(f"{os.path.join(d, stem)}[.gz] not found")


def torch_child(args):
    import torch
    import torch.nn as tnn
    import torch.nn.functional as F

    torch.set_num_threads(args.threads)
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(args.seed)

    def load(prefix):
        (n, h, w), px = read_idx(find(args.data, prefix + "-images-idx3-ubyte"))
        (m,), lab = read_idx(find(args.data, prefix + "-labels-idx1-ubyte"))
        assert n == m
        x = torch.frombuffer(bytearray(px), dtype=torch.uint8).reshape(n, h * w).float() / 255.0
        y = torch.frombuffer(bytearray(lab), dtype=torch.uint8).long()
        return x, y

    dev = torch.device(args.device)
    train_x, train_y = load("train")
    test_x, test_y = load("t10k")
    train_x, train_y, test_x, test_y = train_x.to(dev), train_y.to(dev), test_x.to(dev), test_y.to(dev)

    class ConvNet(tnn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = tnn.Conv2d(1, 32, 5)
            self.c2 = tnn.Conv2d(32, 64, 5)
            self.fc1 = tnn.Linear(1024, 1024)
            self.fc2 = tnn.Linear(1024, 10)
            self.drop = tnn.Dropout(0.5)

        def forward(self, x):
            x = x.reshape(x.shape[0], 1, 28, 28)
            x = F.max_pool2d(self.c1(x), 2)
            x = F.max_pool2d(self.c2(x), 2).flatten(1)
            x = F.relu(self.fc1(x))
            return self.fc2(self.drop(x))

    model = ConvNet().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    bs = 64
    n_batches = train_x.shape[0] // bs
    gen = torch.Generator().manual_seed(args.seed)
    t0 = time.perf_counter()
    model.train()
    perm = torch.randperm(train_x.shape[0], generator=gen).to(dev)
    sum_loss = 0.0
    for b in range(n_batches):
        idx = perm[b * bs:(b + 1) * bs]
        loss = F.cross_entropy(model(train_x[idx]), train_y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sum_loss += loss.item()
        if (b + 1) * 10 // n_batches != b * 10 // n_batches:
            print(f"torch: {100 * (b + 1) // n_batches}% loss {sum_loss / (b + 1):.5f} "
                  f"{time.perf_counter() - t0:.1f}s", file=sys.stderr, flush=True)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    secs = time.perf_counter() - t0
    model.eval()
    ok = 0
    with torch.no_grad():
        for s in range(0, test_x.shape[0], 1000):
            ok += (model(test_x[s:s + 1000]).argmax(-1) == test_y[s:s + 1000]).sum().item()
    print(f"epoch 1 train_loss {sum_loss / n_batches:.5f} test_acc {ok / test_x.shape[0]:.4f} time {secs:.1f}s",
          flush=True)


def run_child(cmd, env=None):
    """Runs cmd, echoing its stderr; returns (its stdout, peak RSS in MiB)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, env=env, text=True)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited with {p.returncode}")
    return out, ru.ru_maxrss / 1024.0


def parse(name, out):
    m = LINE.search(out)
    if not m:
        raise SystemExit(f"{name}: no 'epoch ... time' line in its output:\n{out}")
    return float(m.group(4)), float(m.group(3)), float(m.group(2))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--candle", default=os.path.join(os.path.dirname(__file__), "..", "build", "bin",
                                                     "candle-mnist-training"))
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=299792458)
    ap.add_argument("--only", choices=["torch", "candle"])
    ap.add_argument("--device", default="cpu", help="cpu or cuda: where both sides train (TF32 off on both)")
    ap.add_argument("--torch-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.torch_child:
        torch_child(args)
        return
    if not os.path.isdir(args.data):
        raise SystemExit(f"data directory {args.data} not found (apt-get install dataset-fashion-mnist)")

    results = {}
    if args.only in (None, "torch"):
        env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
        out, rss = run_child([sys.executable, os.path.abspath(__file__), "--torch-child", "--data", args.data,
                              "--threads", str(args.threads), "--lr", str(args.lr), "--seed", str(args.seed),
                              "--device", args.device], env)
        results["pytorch"] = parse("pytorch", out) + (rss,)
    if args.only in (None, "candle"):
        if not os.path.isfile(args.candle):
            raise SystemExit(f"{args.candle} not found (build candle-mnist-training, or --candle PATH)")
        cmd = [args.candle, "--model", "cnn", "--epochs", "1", "--threads", str(args.threads),
               "--learning-rate", str(args.lr), "--data", args.data, "--seed", str(args.seed)]
        # builds from before candle-mnist-training had --device (before/after runs) train on the CPU
        if args.device != "cpu" or "--device" in subprocess.run([args.candle, "--help"], capture_output=True,
                                                                text=True).stdout:
            cmd += ["--device", args.device]
        out, rss = run_child(cmd)
        results["candle-cpp"] = parse("candle", out) + (rss,)

    print(f"\none epoch of the mnist CNN, batch 64, AdamW lr {args.lr}, {args.threads} threads, device {args.device}, "
          f"data {args.data}")
    print(f"{'':14} {'epoch time':>11} {'test acc':>9} {'train loss':>11} {'peak RSS':>10}")
    for name, (secs, acc, loss, rss) in results.items():
        print(f"{name:14} {secs:10.1f}s {acc:9.4f} {loss:11.5f} {rss:8.0f} MiB")
    if len(results) == 2:
        t, c = results["pytorch"], results["candle-cpp"]
        print(f"candle / pytorch: time {c[0] / t[0]:.2f}x, peak RSS {c[3] / t[3]:.2f}x, "
              f"accuracy {c[1] - t[1]:+.4f}")


if __name__ == "__main__":
    main()
