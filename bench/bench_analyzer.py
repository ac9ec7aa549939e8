"""Analyzer benchmark with peers, side by side in one run (issue 5 "Benchmarks").

1. Generates a torch.profiler-style trace of --mb megabytes (the same generator as
   core/analysis/analysis_benchmark.cc, via `trn_core_bench`'s synthetic writer is C++,
   so here a Python writer of the same shape).
2. `trnscope summary` on it: MB/s and peak RSS (from /usr/bin/time-like rusage).
3. PyTorch's own key_averages() on a CPU profile with a comparable number of events.
4. HolisticTraceAnalysis loading the same file, if `hta` is importable (install it with
   `pip install --no-deps HolisticTraceAnalysis` so it cannot pull another torch).

Prints ratios, not bare times. Usage: python bench/bench_analyzer.py [--mb 200]
(1 GB: --mb 1024).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = os.path.join(ROOT, "python", "trnscope", "bin", "trnscope")
OPS = ["aten::pow", "aten::mean", "aten::add", "aten::rsqrt", "aten::mul", "aten::mul"]


def write_trace(path: str, mb: int) -> int:
    """Kineto-shaped events: cpu_op -> cudaLaunchKernel -> kernel with an ac2g flow."""
    events = 0
    ts = 1700000000000000.0
    eid = 1
    with open(path, "w") as f:
        f.write('{\n  "schemaVersion": 1,\n  "deviceProperties": [],\n  "traceEvents": [\n')
        while f.tell() < mb << 20:
            chunk = []
            for _ in range(200):
                for op in OPS:
                    chunk.append(
                        f'  {{"ph": "X", "cat": "cpu_op", "name": "{op}", "pid": 4242, "tid": 4242, '
                        f'"ts": {ts:.3f}, "dur": 12.500, "args": {{"External id": {eid}, '
                        f'"Input Dims": [[4096, 4096], []], "Input type": ["float", "Scalar"]}}}},\n'
                        f'  {{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 4242, '
                        f'"tid": 4242, "ts": {ts + 2:.3f}, "dur": 4.000, "args": {{"External id": {eid}, '
                        f'"correlation": {eid}}}}},\n'
                        f'  {{"ph": "s", "id": {eid}, "pid": 4242, "tid": 4242, "ts": {ts + 2:.3f}, '
                        f'"cat": "ac2g", "name": "ac2g"}},\n'
                        f'  {{"ph": "X", "cat": "kernel", "name": "{op[6:]}_kernel", "pid": 0, "tid": 7, '
                        f'"ts": {ts + 8:.3f}, "dur": 9.000, "args": {{"External id": {eid}, '
                        f'"correlation": {eid}, "stream": 7, "device": 0}}}},\n'
                        f'  {{"ph": "f", "id": {eid}, "pid": 0, "tid": 7, "ts": {ts + 8:.3f}, '
                        f'"cat": "ac2g", "name": "ac2g", "bp": "e"}},\n')
                    events += 5
                    eid += 1
                    ts += 20
            f.write("".join(chunk))
        f.write('  {"ph": "i", "s": "g", "name": "end", "pid": 0, "tid": 0, "ts": 0}\n  ],\n'
                '  "traceName": "synthetic"\n}\n')
    return events


def run_cli(path: str) -> tuple[float, float]:
    t0 = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    subprocess.run([CLI, "summary", path], check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    if rss <= before * 1024:
        rss = float("nan")  # another child was larger; rerun alone for RSS
    return wall, rss


def key_averages_seconds(n_ops: int) -> float:
    import torch
    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(64, 64)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(n_ops // 6):
            v = x.pow(2).mean(-1, keepdim=True)
            _ = x * torch.rsqrt(v + 1e-6) * x
    t0 = time.perf_counter()
    prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=20)
    return time.perf_counter() - t0


def hta_seconds(path: str) -> float | None:
    try:
        from hta.common.trace_parser import parse_trace_dataframe  # noqa: F401
        from hta.trace_analysis import TraceAnalysis
    except Exception:
        return None
    d = tempfile.mkdtemp()
    os.symlink(path, os.path.join(d, "rank-0.json"))
    t0 = time.perf_counter()
    TraceAnalysis(trace_dir=d)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--ops", type=int, default=60000, help="ops in the key_averages profile")
    args = ap.parse_args()
    if not os.access(CLI, os.X_OK):
        sys.exit(f"build the analyzer first ({CLI} is missing): make build")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.json")
        events = write_trace(path, args.mb)
        size = os.path.getsize(path)
        wall, rss = run_cli(path)
        print(f"trace: {size / 1e6:.0f} MB, {events} events")
        print(f"trnscope summary: {wall:.2f} s, {size / wall / 1e6:.0f} MB/s, "
              f"{events / wall / 1e6:.2f} M events/s, peak RSS {rss / 1e6:.0f} MB "
              f"({rss / size:.2f}x file; targets >= 150 MB/s, <= 1.5x)")
        ka = key_averages_seconds(args.ops)
        ka_rate = args.ops * 2 / ka  # ~2 events per op (op + result_type)
        print(f"torch key_averages on {args.ops} ops: {ka:.2f} s ({ka_rate / 1e6:.2f} M events/s); "
              f"trnscope is {events / wall / ka_rate:.1f}x faster per event")
        hta = hta_seconds(path)
        if hta is None:
            print("HolisticTraceAnalysis: not installed (pip install --no-deps "
                  "HolisticTraceAnalysis), skipped")
        else:
            print(f"HolisticTraceAnalysis load: {hta:.2f} s; trnscope is {hta / wall:.1f}x faster")


if __name__ == "__main__":
    main()
