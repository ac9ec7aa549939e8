"""torch.compile(backend="trn") benchmarks (issue #4). Every line is a ratio against a peer
measured in this run.

  python bench/bench_compile.py [--quick]

1. RMSNorm 4096x4096 f32, DEVICE time from the profiler (sum of the kernels' device
   time per call, best of N): compiled vs the hand-written fused kernel
   (F.rms_norm)                                   target <= 1.2x
   compiled vs naive eager (pow/mean/add/rsqrt/mul/mul)  target <= 0.33x
2. Llama-style decoder block (dim 512, 8 heads, seq 128, f32), wall time per call:
   compiled vs eager on trn, and vs torch.compile (inductor) on the CPU with one thread.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

import trnscope  # noqa: F401  (registers the trn device)
import trnscope.profiling


def device_times_us(fns: dict, repeat: int) -> dict:
    """Best per-call device time (us) per fn: the summed device time of its kernels in
    one call, from the profiler's PrivateUse1 events; the fns interleaved."""
    best = {k: float("inf") for k in fns}
    with torch.inference_mode():
        for fn in fns.values():
            fn()
        torch.trn.synchronize()
        for _ in range(repeat):
            for k, fn in fns.items():
                with profile(
                    activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
                ) as prof:
                    fn()
                    torch.trn.synchronize()
                dev = [
                    e
                    for e in prof.events()
                    if e.device_type == torch.autograd.DeviceType.PrivateUse1
                ]
                best[k] = min(best[k], sum(e.device_time_total for e in dev))
    return best


def wall_times_s(fns: dict, repeat: int, sync=None) -> dict:
    """Best wall time (s) per fn, the fns interleaved so that noise on this shared
    machine hits all of them alike."""
    best = {k: float("inf") for k in fns}
    with torch.inference_mode():
        for fn in fns.values():
            fn()
        if sync:
            sync()
        for _ in range(repeat):
            for k, fn in fns.items():
                start = time.perf_counter()
                fn()
                if sync:
                    sync()
                best[k] = min(best[k], time.perf_counter() - start)
    return best


def rms_norm(repeat: int) -> None:
    n = 4096
    x = torch.randn(n, n, device="trn")
    w = torch.rand(n, device="trn") + 0.5

    def naive(x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    compiled = torch.compile(naive, backend="trn", dynamic=False)
    t = device_times_us(
        {
            "compiled": lambda: compiled(x),
            "fused": lambda: F.rms_norm(x, (n,), w, 1e-6),
            "naive": lambda: naive(x),
        },
        repeat,
    )
    t_compiled, t_fused, t_naive = t["compiled"], t["fused"], t["naive"]
    print(
        f"rms_norm 4096^2 f32 device time: compiled {t_compiled / 1e3:7.2f} ms, "
        f"fused {t_fused / 1e3:7.2f} ms, naive {t_naive / 1e3:7.2f} ms"
    )
    print(f"  compiled / fused  {t_compiled / t_fused:5.2f}x (target <= 1.2x)")
    print(f"  compiled / naive  {t_compiled / t_naive:5.2f}x (target <= 0.33x)")


def decoder_block(repeat: int) -> None:
    from trnscope.studies import models

    dim, heads, hidden, seq = 512, 8, 1408, 128
    torch.manual_seed(0)
    model = models.DecoderBlockModel(dim, heads, hidden, seq).eval()
    block, cos, sin, mask = model.block, model.cos, model.sin, model.mask
    x = torch.randn(1, seq, dim)

    def run(b, *args):
        return lambda: b(*args)

    block_trn = models.DecoderBlock(dim, heads, hidden).eval()
    block_trn.load_state_dict(block.state_dict())
    block_trn.to("trn")
    args_trn = [t.to("trn") for t in (x, cos, sin, mask)]
    compiled = torch.compile(block_trn, backend="trn", dynamic=False)
    t = wall_times_s(
        {"eager": run(block_trn, *args_trn), "compiled": run(compiled, *args_trn)},
        repeat,
        torch.trn.synchronize,
    )
    t_eager, t_compiled = t["eager"], t["compiled"]
    print(
        f"decoder block (dim {dim}, seq {seq}) f32 wall time: compiled trn "
        f"{t_compiled * 1e3:7.2f} ms, eager trn {t_eager * 1e3:7.2f} ms "
        f"-> compiled / eager {t_compiled / t_eager:5.2f}x"
    )
    stats = trnscope.compile_stats()[-1]
    print(f"  compiled program: {stats['num_kernels']} kernels, eager nodes {stats['eager_nodes']}")

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        fns = {"cpu": run(block, x, cos, sin, mask)}
        try:
            inductor = torch.compile(block, backend="inductor", dynamic=False)
            with torch.inference_mode():
                inductor(x, cos, sin, mask)
            fns["inductor"] = run(inductor, x, cos, sin, mask)
        except Exception as e:  # inductor needs a working C++ toolchain
            print(f"  inductor on CPU could not compile: {type(e).__name__}: {str(e)[:200]}")
        t = wall_times_s(fns, repeat)
        t_cpu, t_inductor = t["cpu"], t.get("inductor")
    finally:
        torch.set_num_threads(threads)
    print(
        f"  CPU eager, 1 thread {t_cpu * 1e3:7.2f} ms -> compiled trn / CPU eager "
        f"{t_compiled / t_cpu:5.2f}x"
    )
    if t_inductor is not None:
        print(
            f"  inductor CPU, 1 thread {t_inductor * 1e3:7.2f} ms -> compiled trn / inductor "
            f"{t_compiled / t_inductor:5.2f}x"
        )


def main() -> None:
    trnscope.profiling.quiet_kineto_logs()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    repeat = 3 if parser.parse_args().quick else 10
    rms_norm(repeat)
    decoder_block(repeat)


if __name__ == "__main__":
    main()
