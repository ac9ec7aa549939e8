"""Indexing / layout / reduction kernels at the shapes real models use (issue #9):
trn vs CPU PyTorch with one thread (one trn core = one thread), same inputs, same run.

  python bench/bench_index.py [--repeat N]

Each line: best wall time (sync included) on trn and on CPU, and the ratio trn / CPU
(lower is better; <= 1.0 means the trn kernel is at least as fast as CPU PyTorch's).
"""

import argparse
import time

import torch

import trnscope  # noqa: F401  (registers the trn device)
from benchlib import best_of, cpu_model


def cases():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(8, 32000, generator=g)
    hidden = torch.randn(8, 512, 256, generator=g)
    mask = torch.rand(8, 512, generator=g) > 0.5
    probs = logits.softmax(-1)
    col = torch.randint(0, 32000, (8, 1), generator=g)
    rows = torch.randint(0, 4096, (2048,), generator=g)
    table = torch.randn(4096, 256, generator=g)
    bmask = torch.rand(8, 1, 512, 512, generator=g) > 0.01
    buckets = torch.randint(0, 32, (64, 64), generator=g)
    bias = torch.randn(32, 8, generator=g)
    tokens = torch.randint(0, 32000, (8, 512), generator=g)
    vocab = torch.randn(32000, 64, generator=g)
    return {
        "embedding [32,8] by [64,64] (T5's bias)": (torch.nn.functional.embedding, (buckets, bias)),
        "embedding [32000,64] by [8,512]": (torch.nn.functional.embedding, (tokens, vocab)),
        "tril causal mask 2048^2 bool": (lambda d: torch.ones(2048, 2048, dtype=torch.bool, device=d).tril(), ()),
        "arange 1M int64": (lambda d: torch.arange(1 << 20, device=d), ()),
        "all [8,1,512,512] bool, dim -1": (lambda m: m.all(-1), (bmask,)),
        "gather logits [8,32000] -> [8,1]": (lambda x, i: x.gather(-1, i), (logits, col)),
        "topk 50 of [8,32000]": (lambda x: x.topk(50, -1), (logits,)),
        "sort [8,32000] descending": (lambda x: x.sort(-1, descending=True), (logits,)),
        "cumsum [8,32000] f32": (lambda x: x.cumsum(-1), (probs,)),
        "argmin [8,32000] dim -1": (lambda x: x.argmin(-1), (logits,)),
        "scatter [8,32000] src": (lambda x, i: x.scatter(-1, i, x[:, :1]), (logits, col)),
        "index hidden[mask] [8,512,256]": (lambda x, m: x[m], (hidden, mask)),
        "index rows table[2048 ids]": (lambda t, r: t[r], (table, rows)),
        "index_put_ accumulate rows": (lambda t, r, v: t.index_put_((r,), v, accumulate=True),
                                      (table.clone(), rows, table[:2048].clone())),
        "flip [8,512,256] dim 1": (lambda x: x.flip(1), (hidden,)),
        "nonzero mask [8,512]": (lambda m: m.nonzero(), (mask,)),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(f"CPU: {cpu_model()}; torch {torch.__version__}; CPU PyTorch with 1 thread")
    print(f"{'op':40s} {'trn ms':>9s} {'cpu ms':>9s} {'trn/cpu':>8s}")
    for name, (fn, inputs) in cases().items():
        if inputs:
            trn_in = [x.to("trn") for x in inputs]
            trn = best_of(lambda: fn(*trn_in), args.repeat, torch.trn.synchronize)
            cpu = best_of(lambda: fn(*inputs), args.repeat)
        else:
            trn = best_of(lambda: fn("trn"), args.repeat, torch.trn.synchronize)
            cpu = best_of(lambda: fn("cpu"), args.repeat)
        print(f"{name:40s} {trn * 1e3:9.3f} {cpu * 1e3:9.3f} {trn / cpu:7.2f}x")
    fallbacks = trnscope.fallback_ops()
    print("CPU fallbacks during the run:", fallbacks or "none")


if __name__ == "__main__":
    main()
