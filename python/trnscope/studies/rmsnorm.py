"""The seed's case study: RMSNorm three ways on identical inputs, profiled on trn.

    python -m trnscope.studies.rmsnorm [--shape 4096x4096] [--dtype float32] [--iters N]
        [--rounds R] [--out DIR]

- naive:    pow, mean, add, rsqrt, mul, mul as six aten ops; every intermediate is a
            tensor that goes through device memory;
- fused:    torch.nn.functional.rms_norm, the native fused kernel;
- compiled: the naive module through torch.compile(backend="trn") (compiled and warmed up
            before profiling), which the compiler turns into one fused kernel.

Each variant is profiled with CPU + PrivateUse1 activities (ProfileConfig/Profiler). The
variants take turns, R rounds of N calls each, and device time per call is the median over
all rounds (a busy neighbour on a shared host then slows all variants alike); the last
round is exported to DIR/<variant>/<timestamp>/ (trace.json, summary.txt, meta.json). The
study checks the outputs agree, prints the three key-averages tables and a comparison
table, and writes DIR/report.html with the `trnscope` analyzer.

Why the default shape is large: x is 64 MiB, twice this host's 32 MiB last-level cache, so
the naive chain's intermediates really round-trip through memory as they do through HBM on
an accelerator. With tensors that fit in the cache, the naive kernels read their inputs
from the cache and the comparison flatters them.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass

import torch

import trnscope
from trnscope.studies import common, models

VARIANT_TITLES = {
    "naive": "pow/mean/add/rsqrt/mul/mul, intermediates materialised",
    "fused": "torch.nn.functional.rms_norm, the native fused kernel",
    "compiled": 'torch.compile(naive, backend="trn")',
}
# Between variants (different summation orders, compiled chains kept in float32) and
# against a float64 CPU reference.
TOLERANCE = {
    torch.float32: (1e-5, 1e-5),
    torch.float64: (1e-5, 1e-5),  # computed as float32 on trn
    torch.bfloat16: (5e-2, 5e-2),  # the naive chain rounds each intermediate to bfloat16
    torch.float16: (1e-2, 1e-2),
}


@dataclass
class RmsNormStudy:
    """What a run of the study produced."""

    runs: dict  # variant -> common.VariantRun, in the order naive, fused, compiled
    report: str | None  # DIR/report.html, None when the analyzer is not built
    agreement: list  # the printed agreement lines
    compile_seconds: float
    out_dir: str


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m trnscope.studies.rmsnorm",
        description="RMSNorm three ways (naive aten ops, F.rms_norm, torch.compile) on "
        "identical inputs, profiled on trn: key-averages tables, a comparison table and "
        "the HTML explorer.",
    )
    p.add_argument(
        "--shape",
        type=common.parse_shape,
        default=(4096, 4096),
        help="input shape, dims joined by 'x'; RMSNorm over the last (default 4096x4096)",
    )
    p.add_argument("--eps", type=float, default=1e-6)
    common.add_common_flags(p, "trnscope_out/rmsnorm")
    return p.parse_args(argv)


def run(argv=None) -> RmsNormStudy:
    """Run the study (prints as it goes). Raises common.StudyError when a check fails."""
    args = parse_args(argv)
    args.out = os.path.abspath(args.out)
    shape, dtype = args.shape, args.dtype
    print(common.device_banner())
    numel = 1
    for d in shape:
        numel *= d
    size_mb = numel * dtype.itemsize / 2**20
    print(
        f"\nRMSNorm over the last dim of a {'x'.join(map(str, shape))} {common.dtype_name(dtype)} "
        f"tensor ({size_mb:,.1f} MiB), eps={args.eps:g}, seed={args.seed}, trn:0; "
        f"{args.warmup} warm-up calls, then {args.rounds} rounds of {args.iters} profiled calls "
        "per variant"
    )
    if dtype == torch.float64:
        print(
            "note: trn computes float64 as float32 (storage stays float64; counted in "
            "meta.json float64_downcasts), as on Trainium"
        )

    torch.manual_seed(args.seed)
    x_cpu = torch.randn(shape).to(dtype)
    naive = models.NaiveRMSNorm(shape[-1], args.eps).to(dtype)  # weight: uniform [0.5, 1.5)
    fused = models.FusedRMSNorm(shape[-1], args.eps).to(dtype)
    with torch.no_grad():
        fused.weight.copy_(naive.weight)
    reference = models.naive_rms_norm(x_cpu.double(), naive.weight.detach().double(), args.eps)

    torch.trn.set_device(0)
    x = x_cpu.to("trn")
    naive.to("trn")
    fused.to("trn")
    compiled = models.compile_for_trn(naive)  # the same module: the same weight
    t0 = time.perf_counter()
    with torch.inference_mode():
        compiled(x)  # compile outside the profiled region
        torch.trn.synchronize()
    compile_s = time.perf_counter() - t0
    stats = trnscope.compile_stats()
    kernels = stats[-1]["kernels"] if stats else []
    print(
        f"compiled in {compile_s:.2f} s (Dynamo + AOTAutograd + trn compiler): "
        f"{len(kernels)} kernel(s) {kernels}"
    )
    peaks = common.measure_host_peaks()  # before profiling, on an idle device
    print(
        f"host peaks (meta.json): streaming {peaks['copy_bandwidth_gb_s']} GB/s read+write, "
        f"GEMM {peaks['gemm_gflop_s']} GFLOP/s"
    )

    variants = [
        (name, fn, f"rmsnorm.{name}")
        for name, fn in (("naive", naive), ("fused", fused), ("compiled", compiled))
    ]
    runs = common.profile_variants(variants, (x,), args.iters, args.out, args.rounds, args.warmup)
    ordered = list(runs.values())

    common.print_key_averages(ordered, VARIANT_TITLES)
    rtol, atol = TOLERANCE[dtype]
    agreement = common.check_agree(ordered, reference.to(dtype), rtol, atol, "CPU float64")
    print("\n" + "\n".join(agreement))

    peak = common.peak_bandwidth(ordered)
    print(
        f"\n=== comparison: median call of {args.rounds} rounds x {args.iters}; bytes = kernels' "
        f"bytes read + written (trace.json args); host peak streaming bandwidth {peak} GB/s "
        "(meta.json) ==="
    )
    print(common.comparison_table(ordered, peak))
    base = runs["naive"]
    op, share = base.leading_op()
    print(
        f"naive: {op} leads the device time ({100 * share:.0f}%: "
        f"{base.ops[op][0] // max(len(base.calls), 1)} launches per call); its intermediates "
        f"move {(base.bytes - runs['fused'].bytes) / 1e6:,.1f} MB more per call than the "
        "fused kernel."
    )

    report = common.report_or_skip(ordered, args.out)
    common.print_locations(ordered, report)
    return RmsNormStudy(runs, report, agreement, compile_s, args.out)


def main(argv=None) -> int:
    return common.run_main(run, argv)


if __name__ == "__main__":
    sys.exit(main())
