"""A second study: one Llama-style decoder block on trn, eager vs torch.compile(backend="trn").

    python -m trnscope.studies.decoder [--batch 2] [--seq 128] [--dim 512] [--heads 8]
        [--hidden 1408] [--dtype float32] [--rms-norm naive|fused] [--iters N] [--rounds R]
        [--out DIR]

The block (trnscope.studies.models.DecoderBlockModel): RMSNorm, causal attention with
rotary embeddings and softmax, RMSNorm, SwiGLU MLP, residual adds. Eager launches one
kernel per aten op; the compiled program fuses the elementwise chains (RMSNorm, rotary,
SiLU * gate, residual adds) and matmul epilogues. Both run on identical inputs and weights
and are profiled like the RMSNorm study (taking turns for R rounds; the last round's traces
under DIR/<variant>/<timestamp>/), checked against each other and against the same block on
CPU PyTorch, and compared in a table and in DIR/report.html. At these sizes the matmuls
dominate device time, and fusion does not shrink a matmul: the compiled block launches far
fewer kernels and moves fewer bytes, but its device time stays close to eager.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
from dataclasses import dataclass

import torch

import trnscope
from trnscope.studies import common, models

VARIANT_TITLES = {
    "eager": "one kernel per aten op",
    "compiled": 'torch.compile(block, backend="trn"): fused programs',
}
# eager vs compiled on trn, and each against the block on CPU PyTorch (same weights).
TOLERANCE = {
    torch.float32: (1e-4, 1e-4),
    torch.float64: (1e-4, 1e-4),  # computed as float32 on trn
    torch.bfloat16: (5e-2, 5e-2),  # eager rounds every op to bfloat16, compiled chains do not
    torch.float16: (2e-2, 2e-2),
}


@dataclass
class DecoderStudy:
    """What a run of the study produced."""

    runs: dict  # "eager", "compiled" -> common.VariantRun
    report: str | None
    agreement: list
    compile_stats: list  # trnscope.compile_stats() of the compiled block
    out_dir: str


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m trnscope.studies.decoder",
        description="A Llama decoder block on trn, eager vs torch.compile(backend='trn'), "
        "profiled: key-averages tables, a comparison table and the HTML explorer.",
    )
    p.add_argument("--batch", type=common.positive_int, default=2)
    p.add_argument("--seq", type=common.positive_int, default=128)
    p.add_argument("--dim", type=common.positive_int, default=512)
    p.add_argument("--heads", type=common.positive_int, default=8)
    p.add_argument("--hidden", type=common.positive_int, default=1408, help="MLP width")
    p.add_argument(
        "--rms-norm",
        choices=("naive", "fused"),
        default="naive",
        help="RMSNorm form in the block (default naive, as Llama's reference code)",
    )
    common.add_common_flags(p, "trnscope_out/decoder")
    args = p.parse_args(argv)
    if args.dim % args.heads or (args.dim // args.heads) % 2:
        p.error(f"--dim {args.dim} must split into --heads {args.heads} heads of even size")
    return args


def run(argv=None) -> DecoderStudy:
    """Run the study (prints as it goes). Raises common.StudyError when a check fails."""
    args = parse_args(argv)
    args.out = os.path.abspath(args.out)
    dtype = args.dtype
    print(common.device_banner())
    print(
        f"\nLlama decoder block: batch {args.batch}, seq {args.seq}, dim {args.dim}, "
        f"{args.heads} heads, MLP {args.hidden}, {args.rms_norm} RMSNorm, "
        f"{common.dtype_name(dtype)}, seed={args.seed}, trn:0; {args.warmup} warm-up + "
        f"{args.rounds} rounds of {args.iters} profiled calls per variant"
    )

    torch.manual_seed(args.seed)
    model = (
        models.DecoderBlockModel(
            args.dim, args.heads, args.hidden, args.seq, fused_rms_norm=args.rms_norm == "fused"
        )
        .eval()
        .to(dtype)
    )
    x_cpu = torch.randn(args.batch, args.seq, args.dim).to(dtype)
    cpu_model = copy.deepcopy(model)
    with torch.inference_mode():
        reference = cpu_model(x_cpu)

    torch.trn.set_device(0)
    model.to("trn")
    x = x_cpu.to("trn")
    trnscope.reset_compile_stats()
    compiled = models.compile_for_trn(model)
    t0 = time.perf_counter()
    with torch.inference_mode():
        compiled(x)  # compile outside the profiled region
        torch.trn.synchronize()
    compile_s = time.perf_counter() - t0
    stats = trnscope.compile_stats()
    print(
        f"compiled in {compile_s:.2f} s: {len(stats)} graph(s), "
        f"{sum(s['num_kernels'] for s in stats)} kernels, eager nodes "
        f"{[n for s in stats for n in s['eager_nodes']]}"
    )
    peaks = common.measure_host_peaks()
    print(
        f"host peaks (meta.json): streaming {peaks['copy_bandwidth_gb_s']} GB/s read+write, "
        f"GEMM {peaks['gemm_gflop_s']} GFLOP/s"
    )

    variants = [
        (name, fn, f"decoder.{name}") for name, fn in (("eager", model), ("compiled", compiled))
    ]
    runs = common.profile_variants(variants, (x,), args.iters, args.out, args.rounds, args.warmup)
    ordered = list(runs.values())

    common.print_key_averages(ordered, VARIANT_TITLES)
    rtol, atol = TOLERANCE[dtype]
    agreement = common.check_agree(ordered, reference, rtol, atol, "CPU PyTorch")
    print("\n" + "\n".join(agreement))

    peak = common.peak_bandwidth(ordered)
    print(
        f"\n=== comparison: median call of {args.rounds} rounds x {args.iters}; bytes = kernels' "
        f"bytes read + written (trace.json args); host peak streaming bandwidth {peak} GB/s "
        "(meta.json) ==="
    )
    print(common.comparison_table(ordered, peak))
    eager, comp = runs["eager"], runs["compiled"]
    op, share = eager.leading_op()
    gemm = sum(
        us for o, (_, us) in eager.ops.items() if o in ("aten::mm", "aten::bmm", "aten::addmm")
    )
    gemm_share = gemm / max(sum(us for _, us in eager.ops.values()), 1e-9)
    print(
        f"eager: {op} leads the device time ({100 * share:.0f}%). compiled launches "
        f"{comp.launches:g} kernels per call instead of {eager.launches:g} and moves "
        f"{(eager.bytes - comp.bytes) / 1e6:,.1f} MB less; matmuls are "
        f"{100 * gemm_share:.0f}% of eager device time and fusion does not shrink them."
    )

    report = common.report_or_skip(ordered, args.out)
    common.print_locations(ordered, report)
    return DecoderStudy(runs, report, agreement, stats, args.out)


def main(argv=None) -> int:
    return common.run_main(run, argv)


if __name__ == "__main__":
    sys.exit(main())
