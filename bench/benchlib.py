"""Helpers shared by the benchmarks (run as `python bench/<name>.py`, so this
folder is on sys.path): the host's CPU model, best-of timing."""

from __future__ import annotations

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
