"""Helpers shared by the benchmarks (run as `python bench/<name>.py`, so this
folder is on sys.path): the host's CPU model, best-of timing, pinning to one core."""

from __future__ import annotations

import argparse
import os
import platform
import time


def cpu_model() -> str:
    """The CPU model and its widest vector ISA (machines of one kind differ)."""
    name, isa = "", "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not name and line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                if line.startswith("flags"):
                    flags = line.split()
                    isa = "avx512f" if "avx512f" in flags else "avx2" if "avx2" in flags else "sse"
                    break
    except OSError:
        pass
    return f"{name or platform.processor() or 'unknown CPU'} ({isa})"


def best_of(fn, repeat: int, sync=None) -> float:
    """Best wall time in seconds of fn() over `repeat` runs after one warm-up (sync included)."""
    fn()
    if sync:
        sync()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        if sync:
            sync()
        best = min(best, time.perf_counter() - start)
    return best


# Note [Same-core comparisons]: a trn kernel runs on the device's worker thread,
# its CPU PyTorch peer on the main thread, and the scheduler keeps the two on
# different cores. On a shared VM (the 2-vCPU Sapphire Rapids hosts) a vCPU can
# run ~30 % slower for seconds at a time (a GEMM on its AVX3 and AVX2 code
# alike), so a ratio could measure the two vCPUs rather than the kernels:
# bench_gemm's mm 1024^3 read 0.67-0.94x over three runs, 0.95-0.99x over
# three with every thread on one core (slow spells still show: 0.78x once in
# four later runs). With --same-core the main thread sleeps while the worker
# computes, so they take turns on one core; host dispatch no longer overlaps
# the device, which suits per-kernel benchmarks (one synchronized call at a
# time), not whole models.
def add_same_core_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--same-core", type=int, metavar="CPU", default=None,
        help="run every thread (trn's worker too) on this one CPU: kernel ratios then "
             "compare the kernels, not two cores of a shared host (Note [Same-core comparisons])")


def pin_to_core(cpu: int | None) -> str:
    """Pins every thread of this process, and those it starts later, to `cpu`;
    returns a line for the benchmark's header ("" when cpu is None)."""
    if cpu is None:
        return ""
    allowed = os.sched_getaffinity(0)
    if cpu not in allowed:
        raise SystemExit(f"--same-core {cpu}: this process may run on CPUs "
                         f"{sorted(allowed)}, expected one of them")
    for tid in os.listdir("/proc/self/task"):
        os.sched_setaffinity(int(tid), {cpu})
    return f"every thread pinned to CPU {cpu} (Note [Same-core comparisons])"
