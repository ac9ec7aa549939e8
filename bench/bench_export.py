"""Profiler.export_trace vs torch's own export_chrome_trace on the same profile (issue 10).

  python bench/bench_export.py [--ops N]

Profiles N small eager ops on trn (each one aten op, one launch, one kernel), then times
torch's `prof.export_chrome_trace` and trnscope's `Profiler(cfg).export_trace` (trace.json
with device lanes and flows, meta.json, summary.txt from the C++ analyzer) on that profile.
Target: export_trace within 2x of export_chrome_trace at 150k ops.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import warnings

import torch
from torch.profiler import ProfilerActivity, profile

import trnscope  # noqa: F401  (registers the trn device)
from benchlib import cpu_model
from trnscope.profiling import ProfileConfig, Profiler, quiet_kineto_logs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--ops", type=int, default=150_000, help="eager ops in the profile")
    args = p.parse_args()
    warnings.simplefilter("ignore")
    quiet_kineto_logs()
    out = tempfile.mkdtemp(prefix="bench_export_")
    cfg = ProfileConfig(output_dir=out)
    exporter = Profiler(cfg)  # measures the host peaks now, outside the timed export
    x = torch.ones(16, device="trn")
    acts = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
    with profile(activities=acts, experimental_config=cfg.experimental_config()) as prof:
        for _ in range(args.ops):
            x.add_(1)
        torch.trn.synchronize()
    t0 = time.perf_counter()
    prof.export_chrome_trace(os.path.join(out, "torch_trace.json"))
    torch_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    folder = exporter.export_trace(prof)
    ours_s = time.perf_counter() - t0
    size = os.path.getsize(os.path.join(folder, "trace.json")) / 1e6
    print(f"CPU: {cpu_model()}; torch {torch.__version__}")
    print(f"profile of {args.ops} ops ({len(prof.events())} events): "
          f"torch export_chrome_trace {torch_s:.2f} s, trnscope export_trace {ours_s:.2f} s "
          f"({size:.0f} MB trace.json + summary.txt + meta.json) = {ours_s / torch_s:.2f}x "
          f"(target <= 2x)")


if __name__ == "__main__":
    main()
