"""Fused scaled_dot_product_attention on trn vs its peers, measured side by side.

  python bench/bench_sdpa.py [--quick] [--same-core CPU]

Per shape (B, H, Sq, Skv, D, causal), float32 and bfloat16, wall time per call (best of
N, the variants interleaved so that noise on this shared machine hits all alike):
  fused  F.scaled_dot_product_attention on trn (one sdpa kernel)
  math   the same attention as trn ops: matmul, scale, mask, softmax, matmul
  cpu    CPU PyTorch F.scaled_dot_product_attention, torch.set_num_threads(1)
           (one trn core is one thread)
Ratios: fused / cpu (target <= 1.0x) and fused / math.
"""

from __future__ import annotations

import argparse
import math
import time

import torch
import torch.nn.functional as F

import trnscope  # noqa: F401  (registers the trn device)
from benchlib import add_same_core_flag, cpu_model, pin_to_core


def math_attention(q, k, v, bias):
    """The unfused form on trn: matmul, scale, add the causal bias, softmax, matmul."""
    s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(q.size(-1)))
    if bias is not None:
        s = s + bias
    return torch.softmax(s, -1) @ v


def best_times(fns: dict, repeat: int) -> dict:
    best = {k: float("inf") for k in fns}
    with torch.inference_mode():
        for fn in fns.values():
            fn()
        torch.trn.synchronize()
        for _ in range(repeat):
            for name, fn in fns.items():
                t0 = time.perf_counter()
                fn()
                if name != "cpu":
                    torch.trn.synchronize()
                best[name] = min(best[name], time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    add_same_core_flag(ap)
    args = ap.parse_args()
    pinned = pin_to_core(args.same_core)
    torch.set_num_threads(1)
    repeat = 3 if args.quick else 10
    shapes = [  # (B, H, Sq, Skv, D, causal)
        (1, 8, 512, 512, 64, True),
        (1, 8, 512, 512, 64, False),
        (2, 8, 128, 128, 128, True),
        (1, 32, 1, 1024, 128, False),  # decode: one query against a KV cache
        (1, 32, 1, 4096, 128, False),  # long-context decode: the cache streams from DRAM
    ]
    if args.quick:
        shapes = [(1, 4, 256, 256, 64, True), (1, 8, 1, 512, 128, False)]
    print(f"CPU: {cpu_model()}; torch {torch.__version__}; CPU PyTorch with 1 thread")
    if pinned:
        print(pinned)
    print(f"{'shape (B,H,Sq,Skv,D)':24} {'causal':6} {'dtype':8} {'fused ms':>9} {'math ms':>9} "
          f"{'cpu ms':>9} {'fused/cpu':>9} {'fused/math':>10} {'GFLOP/s':>8}")
    for b, h, sq, skv, d, causal in shapes:
        for dtype in (torch.float32, torch.bfloat16):
            g = torch.Generator().manual_seed(0)
            q, k, v = (torch.randn(b, h, s, d, generator=g).to(dtype) for s in (sq, skv, skv))
            tq, tk, tv = q.to("trn"), k.to("trn"), v.to("trn")
            bias = None
            if causal:  # built once on the host, outside the timed calls
                keep = torch.ones(sq, skv, dtype=torch.bool).tril()
                bias = torch.zeros(sq, skv).masked_fill(~keep, -math.inf).to(dtype).to("trn")
            fns = {
                "fused": lambda: F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal),
                "math": lambda: math_attention(tq, tk, tv, bias),
                "cpu": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
            }
            t = best_times(fns, repeat)
            pairs = sq * skv if not causal else (
                sq * (sq + 1) // 2 if sq <= skv else skv * (skv + 1) // 2 + (sq - skv) * skv)
            gflops = b * h * pairs * 4 * d / t["fused"] / 1e9
            print(f"{str((b, h, sq, skv, d)):24} {str(causal):6} {str(dtype)[6:]:8} "
                  f"{t['fused'] * 1e3:9.3f} {t['math'] * 1e3:9.3f} {t['cpu'] * 1e3:9.3f} "
                  f"{t['fused'] / t['cpu']:8.2f}x {t['fused'] / t['math']:9.2f}x {gflops:8.1f}")


if __name__ == "__main__":
    main()
