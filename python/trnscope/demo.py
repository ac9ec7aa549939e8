"""The main job (`make demo`): RMSNorm on the trn device, naive vs fused, checked against CPU.

The profiler (device time per op) and torch.compile parts of the study arrive with the
issues that build them; this demo shows the device they run on.
"""

import time

import torch

import trnscope


def naive_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    # pow, mean, add, rsqrt, mul, mul: every intermediate goes through device memory.
    variance = x.pow(2).mean(-1, keepdim=True)
    return x * torch.rsqrt(variance + eps) * weight


def fused_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, eps)


def wall_ms(fn, *args, repeat: int = 5) -> float:
    fn(*args)
    torch.trn.synchronize()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn(*args)
        torch.trn.synchronize()
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def main() -> None:
    print(f"trnscope {trnscope.__version__}: {torch.trn.device_count()} trn devices "
          "(software accelerator: logical cores are host threads; not Trainium hardware)")
    torch.manual_seed(0)
    rows, hidden = 2048, 4096
    x_cpu = torch.randn(rows, hidden)
    w_cpu = torch.randn(hidden)
    reference = fused_rms_norm(x_cpu, w_cpu)

    x, w = x_cpu.to("trn"), w_cpu.to("trn")
    print(f"\nRMSNorm {rows}x{hidden} float32 on trn:0 (wall time incl. synchronize, best of 5)")
    print(f"{'variant':<8} {'ms':>8} {'vs naive':>9} {'max |err| vs CPU':>17}")
    naive_ms = None
    for name, fn in (("naive", naive_rms_norm), ("fused", fused_rms_norm)):
        ms = wall_ms(fn, x, w)
        naive_ms = naive_ms or ms
        err = (fn(x, w).cpu() - reference).abs().max().item()
        print(f"{name:<8} {ms:8.2f} {ms / naive_ms:8.2f}x {err:17.2e}")

    print(f"\nfallback ops: {trnscope.fallback_ops() or 'none'}")


if __name__ == "__main__":
    main()
