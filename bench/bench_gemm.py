"""GEMM speed on trn vs CPU PyTorch with one thread, side by side in one run (issue 9).

  python bench/bench_gemm.py [--repeat N] [--quick] [--same-core CPU]

Each line: synchronized wall time per call (best of N, timed alternately with
the peer; warm: the weight's pack is cached from the second call on, Note
[Packed weight cache]) of trn `torch.mm` or `F.linear` and of the same call on
CPU PyTorch with torch.set_num_threads(1), and the ratio cpu/trn (>= 1.0
means trn is at least as fast; target >= 1.0x).
Shapes: 1024^3 mm; decode linears (M = 1..16, K = N = 4096, x @ W.T); the
linear layers of a small LLM (M = 128, K = N = 256..1024).
"""

import argparse
import os
import time

import torch
import torch.nn.functional as F

import trnscope  # noqa: F401  (registers the trn device)
from benchlib import add_same_core_flag, cpu_model, pin_to_core


def interleaved_best(fn_trn, fn_cpu, repeat: int) -> tuple[float, float]:
    """Best synchronized wall time in seconds of each, timed alternately after a
    warm-up (the weight's pack is made on the second trn call), so that both see
    the same load on a shared machine."""
    for _ in range(3):
        fn_trn()
        fn_cpu()
    torch.trn.synchronize()
    best_trn = best_cpu = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn_trn()
        torch.trn.synchronize()
        best_trn = min(best_trn, time.perf_counter() - start)
        start = time.perf_counter()
        fn_cpu()
        best_cpu = min(best_cpu, time.perf_counter() - start)
    return best_trn, best_cpu


def case(label: str, fn, args_cpu, repeat: int) -> float:
    args_trn = [t.to("trn") for t in args_cpu]
    out_trn = fn(*args_trn).cpu()
    out_cpu = fn(*args_cpu)
    err = (out_trn - out_cpu).abs().max().item() / max(out_cpu.abs().max().item(), 1e-30)
    t_trn, t_cpu = interleaved_best(lambda: fn(*args_trn), lambda: fn(*args_cpu), repeat)
    ratio = t_cpu / t_trn
    print(f"{label:34s} {t_trn * 1e3:9.3f} {t_cpu * 1e3:9.3f} {ratio:7.2f}x   {err:.1e}",
          flush=True)
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="fewer shapes and repeats")
    add_same_core_flag(parser)
    args = parser.parse_args()
    pinned = pin_to_core(args.same_core)
    repeat = 3 if args.quick else args.repeat
    torch.set_num_threads(1)
    torch.manual_seed(0)
    print(f"CPU: {cpu_model()} ({os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}); "
          f"torch {torch.__version__}; CPU PyTorch with torch.set_num_threads(1)")
    if pinned:
        print(pinned)
    print(f"{'shape (f32)':34s} {'trn ms':>9s} {'cpu ms':>9s} {'cpu/trn':>8s}   rel err")
    ratios = []
    n = 1024
    ratios.append(case(f"mm {n}x{n}x{n}", torch.mm, [torch.randn(n, n), torch.randn(n, n)],
                       repeat))
    ratios.append(case(f"mm {n}x{n}x{n} (b = w.t())", lambda a, w: torch.mm(a, w.t()),
                       [torch.randn(n, n), torch.randn(n, n)], repeat))
    k = 4096
    for m in (1, 2, 4, 8, 16) if not args.quick else (1, 16):
        ratios.append(case(f"linear decode M={m} K=N={k}", F.linear,
                           [torch.randn(m, k), torch.randn(k, k)], repeat))
    for d in (256, 512, 768, 1024) if not args.quick else (256, 1024):
        ratios.append(case(f"linear M=128 K=N={d}", F.linear,
                           [torch.randn(128, d), torch.randn(d, d)], repeat))
        ratios.append(case(f"linear M=128 K=N={d} +bias", F.linear,
                           [torch.randn(128, d), torch.randn(d, d), torch.randn(d)], repeat))
    worst = min(ratios)
    print(f"worst cpu/trn ratio {worst:.2f}x (target >= 1.0x)")


if __name__ == "__main__":
    main()
