"""Device benchmarks (issue #2). Every line is a ratio against a peer measured in this run.

  python bench/bench_device.py [--quick] [--host-only] [--simd AVX2]

1. host-side cost per eager op (small tensors): trn vs CPU PyTorch          target <= 1.2x
   (torch.add; also add_, mul, view and silu)
2. fused rms_norm 4096x4096 f32: bandwidth vs a device copy of the same bytes target >= 0.7x
   and speed vs CPU PyTorch rms_norm with one thread                        target >= 1.0x
3. GEMM 1024^3 f32 vs CPU PyTorch mm with one thread                         target >= 0.5x
4. activations on 1M and 88K f32 (gelu, gelu tanh, silu, sigmoid, tanh, erf, exp) vs CPU
   PyTorch with one thread
   (report: the transformer MLPs' elementwise cost)
"""

import argparse
import time

import torch

import trnscope  # noqa: F401  (registers the trn device)
from benchlib import best_of, cpu_model


def host_cost_per_op(n_ops: int, repeat: int) -> None:
    """What a user's eager loop pays per small op: dispatch, launch and the
    worker's execution, with one synchronize after the loop (not per op)."""
    a_cpu, b_cpu = torch.randn(16), torch.randn(16)
    cases = {
        "torch.add(a, b)": lambda a, b: torch.add(a, b),
        "a.add_(b)": lambda a, b: a.add_(b),
        "torch.mul(a, b)": lambda a, b: torch.mul(a, b),
        "a.view(4, 4)": lambda a, b: a.view(4, 4),
        "F.silu(a)": lambda a, b: torch.nn.functional.silu(a),
    }
    for i, (name, op) in enumerate(cases.items()):
        def loop(a, b):
            def run():
                for _ in range(n_ops):
                    op(a, b)
            return run

        a_trn, b_trn = a_cpu.to("trn"), b_cpu.to("trn")
        # trn and CPU alternate, so machine noise hits both alike.
        trn = cpu = float("inf")
        for _ in range(3):
            trn = min(trn, best_of(loop(a_trn, b_trn), repeat, torch.trn.synchronize) / n_ops)
            cpu = min(cpu, best_of(loop(a_cpu.clone(), b_cpu), repeat) / n_ops)
        target = " (target <= 1.2x)" if i == 0 else ""
        print(f"host cost per op   {name:16s} 16 floats: trn {trn * 1e6:6.2f} us, "
              f"cpu {cpu * 1e6:6.2f} us -> ratio {trn / cpu:5.2f}x{target}")


def best_of_cpu(fn, repeat: int) -> float:
    """best_of for the CPU PyTorch peer, with one thread (one trn core is one host thread)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return best_of(fn, repeat)
    finally:
        torch.set_num_threads(threads)


def rms_norm(repeat: int) -> None:
    n = 4096
    x = torch.randn(n, n, device="trn")
    w = torch.randn(n, device="trn")
    y = torch.empty_like(x)
    sync = torch.trn.synchronize
    t_norm = best_of(lambda: torch.nn.functional.rms_norm(x, (n,), w), repeat, sync)
    t_copy = best_of(lambda: y.copy_(x), repeat, sync)
    bytes_moved = 2 * x.numel() * 4  # read x, write y (weight is negligible)
    bw_norm, bw_copy = bytes_moved / t_norm / 1e9, bytes_moved / t_copy / 1e9
    print(f"rms_norm 4096^2 f32 bandwidth: {bw_norm:6.2f} GB/s vs device copy {bw_copy:6.2f} "
          f"GB/s -> {bw_norm / bw_copy:5.2f}x (target >= 0.7x)")
    x_cpu, w_cpu = x.cpu(), w.cpu()
    t_cpu = best_of_cpu(lambda: torch.nn.functional.rms_norm(x_cpu, (n,), w_cpu), repeat)
    print(f"rms_norm 4096^2 f32 speed: trn {t_norm * 1e3:7.2f} ms vs CPU torch (1 thread) "
          f"{t_cpu * 1e3:7.2f} ms -> {t_cpu / t_norm:5.2f}x faster (target >= 1.0x)")


def gemm(repeat: int) -> None:
    n = 1024
    a_cpu, b_cpu = torch.randn(n, n), torch.randn(n, n)
    a, b = a_cpu.to("trn"), b_cpu.to("trn")
    t_trn = best_of(lambda: torch.mm(a, b), repeat, torch.trn.synchronize)
    t_cpu = best_of_cpu(lambda: torch.mm(a_cpu, b_cpu), repeat)
    flops = 2 * n**3
    print(f"GEMM 1024^3 f32: trn {flops / t_trn / 1e9:6.1f} GFLOP/s vs CPU torch mm (1 thread) "
          f"{flops / t_cpu / 1e9:6.1f} GFLOP/s -> {t_cpu / t_trn:5.2f}x (target >= 0.5x)")


def activations(repeat: int) -> None:
    """1M elements (out of L2), and 88K (in L2: 20 calls per timing, one
    synchronize, so the launch's round trip is not in the kernel's time)."""
    fns = {
        "gelu": torch.nn.functional.gelu,
        "gelu tanh": lambda a: torch.nn.functional.gelu(a, approximate="tanh"),
        "silu": torch.nn.functional.silu,
        "sigmoid": torch.sigmoid,
        "tanh": torch.tanh,
        "erf": torch.erf,
        "exp": torch.exp,
    }
    for n, calls in ((1 << 20, 1), (88 << 10, 20)):
        x_cpu = torch.randn(n)
        x = x_cpu.to("trn")
        label = f"{n >> 10}K f32"
        for name, fn in fns.items():
            def run(a, fn=fn):
                return lambda: [fn(a) for _ in range(calls)]
            t_trn = best_of(run(x), repeat, torch.trn.synchronize) / calls
            t_cpu = best_of_cpu(run(x_cpu), repeat) / calls
            print(f"{name:9s} {label:8s}: trn {t_trn * 1e6:7.1f} us vs CPU torch (1 thread) "
                  f"{t_cpu * 1e6:7.1f} us -> {t_trn / t_cpu:5.2f}x the time")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--host-only", action="store_true", help="only the host cost per op")
    parser.add_argument("--simd", default="best",
                        help="pin the kernels to this compiled SIMD target (e.g. AVX2) to time "
                             "its code on this CPU")
    args = parser.parse_args()
    repeat = 3 if args.quick else 10
    simd = torch.ops.trnscope._set_simd_target(args.simd)
    print(f"CPU: {cpu_model()}; SIMD target: {simd}; "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    host_cost_per_op(n_ops=2000, repeat=repeat)
    if args.host_only:
        return
    rms_norm(repeat)
    gemm(repeat)
    activations(repeat)


if __name__ == "__main__":
    main()
