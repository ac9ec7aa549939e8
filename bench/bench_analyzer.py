"""Analyzer benchmark with peers, side by side in one run (issue 5 "Benchmarks").

1. Generates a torch.profiler-style trace of --mb megabytes: the same events and
   pretty-printing as export_chrome_trace (and as WriteSyntheticTrace in
   core/analysis/analysis_benchmark.cc): cpu_op -> cudaLaunchKernel -> kernel with
   an ac2g flow, Kineto's args.
2. `trnscope summary` on it: MB/s, events/s and peak RSS (the child's own rusage),
   best of --repeat runs.
3. PyTorch's own path on a CPU profile of --ka-ops ops (~3 events per op): stop()
   (Kineto post-processing), building the FunctionEvent list and key_averages().table(),
   in a subprocess for its peak RSS. Compared per event (a profile as large as a 1 GB
   trace does not fit in memory: ~10 GB per million events).
4. HolisticTraceAnalysis loading the same file (TraceAnalysis(trace_dir=...)), in a
   subprocess with a time and memory cap; if it cannot load --mb, it is measured on a
   --hta-mb file and compared with trnscope on that same file. HTA needs pandas and
   plotly but not torch; install it where it cannot touch torch, e.g.
     pip install --no-deps --target /tmp/hta_env HolisticTraceAnalysis==0.5.0 \
       pandas==2.3.3 plotly narwhals psutil pytz tzdata python-dateutil
   and pass --hta-path /tmp/hta_env.

Prints ratios, not only bare times. Usage:
  python bench/bench_analyzer.py [--mb 1024] [--hta-path DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = os.path.join(ROOT, "python", "trnscope", "bin", "trnscope")
OPS = ["aten::pow", "aten::mean", "aten::add", "aten::rsqrt", "aten::mul", "aten::mul"]
KERNELS = ["pow_f32", "mean_f32", "add_f32", "rsqrt_f32", "mul_f32", "mul_f32"]


def write_trace(path: str, mb: int) -> int:
    """Writes ~mb MiB of Kineto-shaped events; returns the number of events."""
    events = 0
    ts = 1700000000000000.0
    eid = 1
    with open(path, "w") as f:
        f.write('{\n  "schemaVersion": 1,\n  "deviceProperties": [],\n  "traceEvents": [\n')
        written = 0
        while written < mb << 20:
            chunk = []
            for _ in range(200):
                for op, kernel in zip(OPS, KERNELS):
                    chunk.append(
                        f'  {{\n    "ph": "X", "cat": "cpu_op", "name": "{op}", "pid": 4242, "tid": 4242,\n'
                        f'    "ts": {ts:.3f}, "dur": 12.500,\n    "args": {{\n      "External id": {eid}, '
                        f'"Sequence number": {eid}, "Fwd thread id": 0, "Record function id": 0, '
                        f'"Concrete Inputs": ["", "2"], "Input type": ["float", "Scalar"], '
                        f'"Input Strides": [[4096, 1], []], "Input Dims": [[4096, 4096], []], '
                        f'"Ev Idx": {eid}\n    }}\n  }},\n'
                        f'  {{\n    "ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", '
                        f'"pid": 4242, "tid": 4242,\n    "ts": {ts + 2:.3f}, "dur": 4.000,\n    "args": {{\n'
                        f'      "External id": {eid}, "cbid": 211, "correlation": {eid}\n    }}\n  }},\n'
                        f'  {{\n    "ph": "f", "id": {eid}, "pid": 0, "tid": 7, "ts": {ts + 8:.3f}, '
                        f'"cat": "ac2g", "name": "ac2g", "bp": "e"\n  }},\n'
                        f'  {{\n    "ph": "s", "id": {eid}, "pid": 4242, "tid": 4242, "ts": {ts + 2:.3f}, '
                        f'"cat": "ac2g", "name": "ac2g"\n  }},\n'
                        f'  {{\n    "ph": "X", "cat": "kernel", "name": "{kernel}", "pid": 0, "tid": 7,\n'
                        f'    "ts": {ts + 8:.3f}, "dur": 9.000,\n    "args": {{\n      "External id": {eid}, '
                        f'"queued": 0, "device": 0, "context": 1, "stream": 7, "correlation": {eid}, '
                        f'"registers per thread": 32, "shared memory": 0, "blocks per SM": 0.5, '
                        f'"warps per SM": 4.0, "grid": [65536, 1, 1], "block": [128, 1, 1], '
                        f'"est. achieved occupancy %": 100\n    }}\n  }},\n')
                    events += 5
                    eid += 1
                    ts += 20
            data = "".join(chunk)
            f.write(data)
            written += len(data)
        f.write('  {"ph": "i", "s": "g", "name": "end", "pid": "", "tid": "", "ts": 0}\n  ],\n'
                '  "traceName": "synthetic"\n}\n')
    return events + 1


class Child:
    """Runs a command; wall time and the child's own peak RSS (wait4), killed past the caps."""

    def __init__(self, cmd: list[str], env: dict | None = None, timeout_s: float = 1e9,
                 max_rss: float = float("inf")):
        self.cmd, self.env, self.timeout_s, self.max_rss = cmd, env, timeout_s, max_rss
        self.wall = self.rss = 0.0
        self.killed = ""
        self.stdout = ""

    def _watch(self, p: subprocess.Popen, done: threading.Event) -> None:
        t0 = time.perf_counter()
        while not done.wait(0.25):
            try:
                with open(f"/proc/{p.pid}/status") as f:
                    rss = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS"))
            except (OSError, StopIteration):
                continue
            if rss > self.max_rss:
                self.killed = f"over {self.max_rss / 2**30:.0f} GiB"
            elif time.perf_counter() - t0 > self.timeout_s:
                self.killed = f"over {self.timeout_s:.0f} s"
            if self.killed:
                p.kill()
                return

    def run(self) -> Child:
        with tempfile.TemporaryFile("w+") as out:
            t0 = time.perf_counter()
            p = subprocess.Popen(self.cmd, env=self.env, stdout=out, stderr=subprocess.STDOUT)
            done = threading.Event()
            w = threading.Thread(target=self._watch, args=(p, done), daemon=True)
            w.start()
            _, status, ru = os.wait4(p.pid, 0)
            self.wall = time.perf_counter() - t0
            done.set()
            w.join()
            p.returncode = os.waitstatus_to_exitcode(status)
            self.rss = ru.ru_maxrss * 1024.0
            out.seek(0)
            self.stdout = out.read()
        if p.returncode != 0 and not self.killed:
            raise RuntimeError(f"{self.cmd[0]} exited {p.returncode}:\n{self.stdout[-2000:]}")
        return self


def trnscope(path: str, repeat: int) -> Child:
    runs = [Child([CLI, "summary", path]).run() for _ in range(repeat)]
    best = min(runs, key=lambda c: c.wall)
    best.rss = max(c.rss for c in runs)
    return best


KA_SCRIPT = r"""
import sys, time, torch
from torch.profiler import ProfilerActivity, profile
n = int(sys.argv[1])
x = torch.randn(64, 64)
prof = profile(activities=[ProfilerActivity.CPU], record_shapes=True)
prof.start()
for _ in range(n // 6):
    v = x.pow(2).mean(-1, keepdim=True)
    _ = x * torch.rsqrt(v + 1e-6) * x
t0 = time.perf_counter()
prof.stop()
events = len(prof.events())
prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=20)
print(events, time.perf_counter() - t0)
"""

HTA_SCRIPT = r"""
import sys, time
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
TraceAnalysis(trace_dir=sys.argv[1])
print(time.perf_counter() - t0)
"""


def key_averages(ops: int) -> tuple[int, float, float]:
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    c = Child([sys.executable, "-c", KA_SCRIPT, str(ops)], env=env).run()
    events, secs = c.stdout.strip().splitlines()[-1].split()
    return int(events), float(secs), c.rss


def hta(path: str, hta_path: str, timeout_s: float, max_rss: float) -> Child:
    d = tempfile.mkdtemp()
    os.symlink(path, os.path.join(d, "rank-0.json"))
    env = dict(os.environ)
    if hta_path:
        env["PYTHONPATH"] = hta_path + os.pathsep + env.get("PYTHONPATH", "")
    return Child([sys.executable, "-c", HTA_SCRIPT, d], env=env, timeout_s=timeout_s,
                 max_rss=max_rss).run()


def hta_available(hta_path: str) -> bool:
    env = dict(os.environ)
    if hta_path:
        env["PYTHONPATH"] = hta_path + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", "import hta.trace_analysis"], env=env,
                          capture_output=True, check=False).returncode == 0


def mb(x: float) -> str:
    return f"{x / 1e6:,.0f} MB"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=200, help="trace size in MiB (1 GB: 1024)")
    ap.add_argument("--repeat", type=int, default=2, help="trnscope runs (best time)")
    ap.add_argument("--ka-ops", type=int, default=300000,
                    help="ops in the key_averages profile (~3 events each)")
    ap.add_argument("--hta-path", default=os.environ.get("HTA_PYTHONPATH", ""),
                    help="PYTHONPATH entry holding hta (see the docstring)")
    ap.add_argument("--hta-mb", type=int, default=100, help="HTA's fallback trace size")
    ap.add_argument("--hta-timeout", type=float, default=300)
    ap.add_argument("--hta-max-gib", type=float, default=12)
    ap.add_argument("--dir", default=None, help="where to write traces (default: a temp dir)")
    args = ap.parse_args()
    if not os.access(CLI, os.X_OK):
        sys.exit(f"build the analyzer first ({CLI} is missing): make build")
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        path = os.path.join(d, "trace.json")
        events = write_trace(path, args.mb)
        size = os.path.getsize(path)
        t = trnscope(path, args.repeat)
        t_eps = events / t.wall
        print(f"trace: {mb(size)} ({args.mb} MiB), {events:,} events, torch.profiler style")
        print(f"trnscope summary: {t.wall:.2f} s, {size / t.wall / 1e6:.0f} MB/s, "
              f"{t_eps / 1e6:.2f} M events/s, peak RSS {mb(t.rss)} = {t.rss / size:.2f}x the file "
              f"(targets >= 150 MB/s, <= 1.5x)")

        ka_events, ka_secs, ka_rss = key_averages(args.ka_ops)
        ka_eps = ka_events / ka_secs
        print(f"torch key_averages: {ka_events:,} events (CPU profile, {args.ka_ops:,} ops): "
              f"{ka_secs:.2f} s for stop + events + key_averages().table(), "
              f"{ka_eps / 1e6:.3f} M events/s, peak RSS {mb(ka_rss)} "
              f"({ka_rss / ka_events / 1e3:.1f} KB/event)")
        print(f"  ratio: trnscope is {t_eps / ka_eps:.0f}x faster per event and uses "
              f"{(ka_rss / ka_events) / (t.rss / events):.0f}x less memory per event; "
              f"this trace's {events:,} events would take torch ~{events / ka_eps:.0f} s and "
              f"~{ka_rss / ka_events * events / 1e9:.0f} GB")

        if not hta_available(args.hta_path):
            print("HolisticTraceAnalysis: not importable (see --hta-path), skipped")
            return
        h = hta(path, args.hta_path, args.hta_timeout, args.hta_max_gib * 2**30)
        if not h.killed:
            print(f"HolisticTraceAnalysis load ({mb(size)}): {h.wall:.1f} s, "
                  f"{size / h.wall / 1e6:.1f} MB/s, peak RSS {mb(h.rss)} = {h.rss / size:.1f}x the file")
            print(f"  ratio: trnscope is {h.wall / t.wall:.0f}x faster and uses "
                  f"{h.rss / t.rss:.0f}x less memory")
            return
        print(f"HolisticTraceAnalysis could not load {mb(size)} ({h.killed}, "
              f"after {h.wall:.0f} s); measuring at {args.hta_mb} MiB")
        small = os.path.join(d, "small.json")
        small_events = write_trace(small, args.hta_mb)
        small_size = os.path.getsize(small)
        ts = trnscope(small, args.repeat)
        h = hta(small, args.hta_path, args.hta_timeout, args.hta_max_gib * 2**30)
        if h.killed:
            print(f"HolisticTraceAnalysis could not load {mb(small_size)} either ({h.killed})")
            return
        print(f"at {mb(small_size)} ({small_events:,} events): trnscope {ts.wall:.2f} s, "
              f"peak RSS {mb(ts.rss)}; HolisticTraceAnalysis {h.wall:.1f} s, "
              f"peak RSS {mb(h.rss)} = {h.rss / small_size:.1f}x the file")
        print(f"  ratio: trnscope is {h.wall / ts.wall:.0f}x faster and uses "
              f"{h.rss / ts.rss:.0f}x less memory")


if __name__ == "__main__":
    main()
