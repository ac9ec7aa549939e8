"""The studies' harness: profile variants, read their traces, compare them, write the report.

A variant is a callable run on the study's inputs. `profile_variants` warms each up (a
compiled variant compiles there, outside the profile), then profiles the variants in turn,
`rounds` times (naive, fused, compiled, naive, fused, ...), `iters` calls per variant and
round, each call inside a `record_function(label)` span, with CPU + PrivateUse1 activities
through ProfileConfig/Profiler. On this shared 2-core host a noisy neighbour slows whatever
runs while it is busy; taking turns spreads that over all variants, and the device time of
a call is the median over all rounds. The last round of each variant is exported
(trace.json, summary.txt, meta.json) and read back through the analyzer: `read_trace` takes
its SQLite export, where every device event (kernel or copy) is linked to the op that
launched it, and assigns the event to the label span that op lies in. Earlier rounds contribute
their per-call device time as PyTorch reports it (the span's device_time_total).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function

import trnscope
from trnscope.profiling import (
    ProfileConfig,
    ProfileMode,
    Profiler,
    host_peaks,
    quiet_kineto_logs,
    share_of_peak,
)

__all__ = [
    "DTYPES",
    "StudyError",
    "VariantRun",
    "check_agree",
    "comparison_table",
    "parse_dtype",
    "parse_shape",
    "positive_int",
    "print_key_averages",
    "print_locations",
    "profile_variants",
    "read_trace",
    "report_or_skip",
    "write_report",
]

DTYPES = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float64": torch.float64,  # kept in storage, computed as float32 (docs/device.md)
}


class StudyError(RuntimeError):
    """A study could not complete (outputs disagree, the analyzer failed); printed, exit 1."""


# ---- Command-line values ------------------------------------------------------------------------
def parse_shape(text: str) -> tuple[int, ...]:
    """'4096x4096' -> (4096, 4096); argparse type."""
    parts = text.lower().split("x")
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:
        dims = ()
    if not dims or any(d <= 0 for d in dims):
        raise argparse.ArgumentTypeError(
            f"shape {text!r} is not understood: expected positive integers joined by 'x', "
            "e.g. 4096x4096 or 8x512x4096 (the last dim is normalized)"
        )
    return dims


def parse_dtype(text: str) -> torch.dtype:
    """'float32' -> torch.float32; argparse type."""
    key = text.lower().removeprefix("torch.")
    if key not in DTYPES:
        raise argparse.ArgumentTypeError(
            f"dtype {text!r} is not supported by the study: expected one of {', '.join(DTYPES)}"
        )
    return DTYPES[key]


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return value


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


# ---- Profiling the variants ----------------------------------------------------------------------
@dataclass
class CallStats:
    """Device work of one profiled call of a variant."""

    device_us: float = 0.0
    launches: int = 0  # kernels
    copies: int = 0
    bytes: int = 0  # read + written by its kernels and copies
    flops: int = 0


@dataclass
class VariantRun:
    """One profiled variant: its trace folder, PyTorch's table, and what its trace says."""

    name: str
    label: str  # the record_function span around each call
    folder: str  # Profiler.export_trace's output: trace.json, summary.txt, meta.json
    table: str  # prof.key_averages().table(...), sorted by self device time
    output: Any  # the last call's result, on the CPU
    key_averages_device_us: float  # Self TRN total as PyTorch sums it
    calls: list[CallStats] = field(default_factory=list)
    unassigned: CallStats = field(default_factory=CallStats)  # device work outside any span
    meta: dict = field(default_factory=dict)
    earlier_us: list = field(default_factory=list)  # device us per call, earlier rounds
    kernels: dict = field(default_factory=dict)  # kernel name -> [launches, total us]
    ops: dict = field(default_factory=dict)  # aten op that launched -> [launches, total us]

    @property
    def trace(self) -> str:
        return os.path.join(self.folder, "trace.json")

    @property
    def meta_path(self) -> str:
        return os.path.join(self.folder, "meta.json")

    def median(self, attr: str) -> float:
        return statistics.median(getattr(c, attr) for c in self.calls) if self.calls else 0.0

    @property
    def per_call_us(self) -> list:
        """Device time (us) of every profiled call, all rounds."""
        return self.earlier_us + [c.device_us for c in self.calls]

    @property
    def device_us(self) -> float:
        """Median device time of one call (us), over all rounds."""
        return statistics.median(self.per_call_us) if self.per_call_us else 0.0

    @property
    def total_device_us(self) -> float:
        """Device time (us) of the exported (last) round, as the trace records it."""
        return sum(c.device_us for c in self.calls) + self.unassigned.device_us

    @property
    def launches(self) -> float:
        return self.median("launches")

    @property
    def bytes(self) -> float:
        return self.median("bytes")

    def leading_op(self) -> tuple[str, float]:
        """(aten op with the most device time, its share of the device time)."""
        if not self.ops:
            return "", 0.0
        op, (_, us) = max(self.ops.items(), key=lambda kv: kv[1][1])
        total = sum(v[1] for v in self.ops.values())
        return op, us / total if total else 0.0


def _to_cpu(out: Any) -> Any:
    if isinstance(out, torch.Tensor):
        return out.detach().cpu()
    if isinstance(out, (tuple, list)):
        return type(out)(_to_cpu(o) for o in out)
    return out


def _profile(
    fn: Callable, inputs: Sequence[Any], iters: int, label: str, cfg: ProfileConfig
) -> tuple[Any, Any]:
    """(finished torch.profiler profile, last output) of `iters` labelled calls."""
    activities = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
    config = cfg.experimental_config()
    quiet_kineto_logs()
    with (
        torch.inference_mode(),
        profile(activities=activities, experimental_config=config, record_shapes=True) as prof,
    ):
        out = None
        for _ in range(iters):
            with record_function(label):
                out = fn(*inputs)
        torch.trn.synchronize()
    return prof, out


def profile_variants(
    variants: Sequence[tuple[str, Callable, str]],
    inputs: Sequence[Any],
    iters: int,
    out_dir: str,
    rounds: int = 5,
    warmup: int = 2,
) -> dict:
    """Profile (name, fn, label) variants in turn; {name: VariantRun}, in the given order.

    Each variant's last round is exported to out_dir/<name>/<timestamp>/.
    """
    with torch.inference_mode():
        for _, fn, _ in variants:
            for _ in range(warmup):  # compiles, fills the caching allocator, faults pages in
                fn(*inputs)
        torch.trn.synchronize()
    earlier: dict = {name: [] for name, _, _ in variants}
    runs: dict = {}
    for r in range(rounds):
        for name, fn, label in variants:
            cfg = ProfileConfig(
                modes=[ProfileMode.DEVICE, ProfileMode.RUNTIME],
                output_dir=os.path.join(out_dir, name),
            )
            prof, out = _profile(fn, inputs, iters, label, cfg)
            if r + 1 < rounds:
                earlier[name] += [e.device_time_total for e in prof.events() if e.name == label]
                continue
            folder = Profiler(cfg).export_trace(prof)
            averages = prof.key_averages()
            # As PyTorch's table sums "Self TRN time total": device-side rows only (an op's
            # row and its kernel's row carry the same time).
            device_us = sum(
                e.self_device_time_total
                for e in averages
                if e.device_type == DeviceType.PrivateUse1
            )
            runs[name] = read_trace(
                VariantRun(
                    name=name,
                    label=label,
                    folder=folder,
                    table=averages.table(sort_by="self_device_time_total", row_limit=12),
                    output=_to_cpu(out),
                    key_averages_device_us=device_us,
                    earlier_us=earlier[name],
                )
            )
    return {name: runs[name] for name, _, _ in variants}


# Every device event (kernel or copy) of the analyzer's export with the label span (call) its
# op lies in: the analyzer linked it to its op (docs/analyzer.md, Note [Linking]); climb that
# op's parents to the first span named :label. span_id is NULL for unlinked work or work
# outside every call.
_DEVICE_WORK_SQL = """
WITH RECURSIVE up(kernel_id, op_id) AS (
  SELECT id, op_id FROM kernels WHERE op_id IS NOT NULL
  UNION ALL
  SELECT up.kernel_id, ops.parent_id FROM up JOIN ops ON ops.id = up.op_id
  WHERE ops.name != :label AND ops.parent_id IS NOT NULL
)
SELECT k.name, k.kind, k.dur_ns, k.bytes_read + k.bytes_written, k.flops, k.op_name, span.id
FROM kernels k
LEFT JOIN (SELECT up.kernel_id, ops.id FROM up JOIN ops ON ops.id = up.op_id
           WHERE ops.name = :label AND ops.kind = 'op') span ON span.kernel_id = k.id
ORDER BY k.id
"""


def export_analysis(trace: str, db_path: str, timeout: float = 600) -> None:
    """`trnscope export trace --sqlite db_path`: the analyzer's ops, kernels and links.

    The analyzer is required (Profiler.export_trace runs it for summary.txt too).
    """
    from trnscope.cli import binary_path

    exe = binary_path()
    cmd = [exe, "export", trace, "--sqlite", db_path]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout)
    if proc.returncode not in (0, 3):  # 3: partial input, recovered
        raise StudyError(
            f"`{' '.join(cmd)}` failed with exit code {proc.returncode}:\n"
            f"{proc.stderr.strip() or proc.stdout.strip()}"
        )


def read_trace(run: VariantRun) -> VariantRun:
    """Fill run.calls / unassigned / kernels / ops / meta from the analyzer's view of run.folder.

    Which op launched each device event comes from the analyzer (`trnscope export --sqlite`),
    not from a second reading of trace.json here.
    """
    with open(run.meta_path) as f:
        run.meta = json.load(f)
    with tempfile.TemporaryDirectory(prefix="trnscope-study-") as tmp:
        db_path = os.path.join(tmp, "analysis.sqlite")
        export_analysis(run.trace, db_path)
        db = sqlite3.connect(db_path)
        try:
            spans = db.execute(
                "SELECT id FROM ops WHERE name = ? AND kind = 'op' ORDER BY start_ns, id",
                (run.label,),
            ).fetchall()
            rows = db.execute(_DEVICE_WORK_SQL, {"label": run.label}).fetchall()
        finally:
            db.close()
    call_of = {span_id: i for i, (span_id,) in enumerate(spans)}
    run.calls = [CallStats() for _ in spans]
    run.unassigned = CallStats()
    run.kernels, run.ops = {}, {}
    for name, kind, dur_ns, nbytes, flops, op, span_id in rows:
        stats = run.calls[call_of[span_id]] if span_id is not None else run.unassigned
        dur = dur_ns / 1e3
        stats.device_us += dur
        stats.bytes += nbytes
        stats.flops += flops
        if kind == "kernel":
            stats.launches += 1
            for table, key in ((run.kernels, name), (run.ops, op or "?")):
                k = table.setdefault(key, [0, 0.0])
                k[0] += 1
                k[1] += dur
        else:
            stats.copies += 1
    return run


# ---- Checks and output ----------------------------------------------------------------------
def _tensors(out: Any) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _tensors(o)]
    return []


def max_abs_diff(a: Any, b: Any) -> float:
    return max(
        (x.double() - y.double()).abs().max().item() for x, y in zip(_tensors(a), _tensors(b))
    )


def check_agree(
    runs: Sequence[VariantRun], reference: Any, rtol: float, atol: float, reference_name: str
) -> list[str]:
    """Every run's output against runs[0]'s and against `reference`; returns printable lines.

    Raises StudyError naming the variant and the worst difference when one disagrees.
    """
    title = (
        f"outputs agree? tolerance rtol={rtol:g}, atol={atol:g} "
        f"(torch.testing.assert_close), against {runs[0].name} and {reference_name}"
    )
    lines = [title]
    failures = []
    for run in runs:
        for other_name, other in ((runs[0].name, runs[0].output), (reference_name, reference)):
            if run.output is other:
                continue
            diff = max_abs_diff(run.output, other)
            try:
                for x, y in zip(_tensors(run.output), _tensors(other)):
                    torch.testing.assert_close(x, y, rtol=rtol, atol=atol, check_device=False)
                verdict = "ok"
            except AssertionError as err:
                verdict = "DIFFERENT"
                failures.append(
                    f"{run.name} vs {other_name}: {str(err).splitlines()[0]} "
                    f"(max |diff| {diff:.3g})"
                )
            lines.append(f"  {run.name:>10} vs {other_name:<14} max |diff| {diff:9.3g}  {verdict}")
    if failures:
        raise StudyError(
            "the variants' outputs disagree:\n  " + "\n  ".join(failures) + "\n" + "\n".join(lines)
        )
    return lines


def print_key_averages(runs: Sequence[VariantRun], titles: dict[str, str]) -> None:
    for run in runs:
        print(
            f"\n=== {run.name}: {titles.get(run.name, '')} "
            f"(last round, {len(run.calls)} calls; key_averages() by self device time) ==="
        )
        print(run.table)


def _fmt_bytes(n: float) -> str:
    return f"{n / 1e6:,.1f}"


def comparison_table(runs: Sequence[VariantRun], peak_gb_s: float | None) -> str:
    """Per variant: device time per call (median), launches, bytes, bandwidth, ratio to runs[0].

    Launches and bytes are the last round's (the same every call); "TRN total" is PyTorch's
    Self TRN total of the last round.
    """
    base = runs[0].device_us or float("nan")
    head = (
        f"{'variant':<10} {'device ms/call':>14} {'(min..max)':>17} {'TRN total ms':>12} "
        f"{'launches/call':>13} {'MB moved/call':>13} {'GB/s':>7} {'% host peak':>11} "
        f"{'vs ' + runs[0].name:>10}"
    )
    rows = [head, "-" * len(head)]
    rates = [run.bytes / (run.device_us * 1e3) if run.device_us > 0 else 0.0 for run in runs]
    peak, notes = peak_gb_s, []
    for run, gb_s in zip(runs, rates):
        if peak and share_of_peak(gb_s, peak)[2]:
            notes.append(f"note: {run.name} moved {gb_s:.1f} GB/s, above the recorded host peak "
                         f"{peak:.1f} GB/s; the peak is raised to it")
            peak = gb_s
    for run, gb_s in zip(runs, rates):
        per = run.per_call_us or [0.0]
        pct = f"{100 * share_of_peak(gb_s, peak)[0]:10.0f}%" if peak else f"{'n/a':>11}"
        rows.append(
            f"{run.name:<10} {run.device_us / 1e3:14.3f} "
            f"{f'({min(per) / 1e3:.2f}..{max(per) / 1e3:.2f})':>17} "
            f"{run.key_averages_device_us / 1e3:12.2f} {run.launches:13g} "
            f"{_fmt_bytes(run.bytes):>13} {gb_s:7.1f} {pct} "
            f"{run.device_us / base:9.2f}x"
        )
    return "\n".join(rows + notes)


def peak_bandwidth(runs: Sequence[VariantRun]) -> float | None:
    """The host's measured peak copy bandwidth (GB/s) from the traces' meta.json."""
    for run in runs:
        peak = run.meta.get("host_peaks", {}).get("copy_bandwidth_gb_s")
        if peak:
            return float(peak)
    return None


def measure_host_peaks() -> dict:
    """Measure the host peaks now, while the device is idle (cached per process)."""
    return host_peaks()


# ---- The explorer ----------------------------------------------------------------------------
def analyzer_binary() -> str:
    from trnscope.cli import binary_path

    return binary_path()


def write_report(runs: Sequence[VariantRun], path: str, timeout: float = 600) -> str | None:
    """`trnscope report <traces> -o path --names ...`; None when the analyzer is not built.

    Raises StudyError when the analyzer runs but fails.
    """
    exe = analyzer_binary()
    if not os.access(exe, os.X_OK):
        return None
    cmd = [exe, "report", *(r.trace for r in runs), "-o", path, "--names", *(r.name for r in runs)]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout)
    # Exit 3: the analyzer recovered a partial input and still wrote the report.
    if proc.returncode not in (0, 3) or not os.path.exists(path):
        raise StudyError(
            f"`{' '.join(cmd)}` failed with exit code {proc.returncode}:\n"
            f"{proc.stderr.strip() or proc.stdout.strip()}"
        )
    if proc.returncode == 3:
        print(f"note: the analyzer recovered partial input: {proc.stderr.strip()}")
    return path


def report_or_skip(runs: Sequence[VariantRun], out_dir: str) -> str | None:
    """Write out_dir/report.html, or say clearly why it was skipped; returns its path or None."""
    path = os.path.join(out_dir, "report.html")
    written = write_report(runs, path)
    if written is None:
        print(
            f"\nreport.html skipped: the trnscope analyzer is not built ({analyzer_binary()} "
            "is missing); run `make build`, then rerun the study."
        )
    return written


def print_locations(runs: Sequence[VariantRun], report: str | None) -> None:
    print("\nfiles:")
    for run in runs:
        print(f"  {run.name:<10} {run.folder}/ (trace.json, summary.txt, meta.json)")
    if report:
        print(f"  report     {os.path.abspath(report)}  (open it in a browser)")
    print(f"  inspect a trace: trnscope summary {runs[0].trace}")
    names = " ".join(r.name for r in runs)
    print(f"  compare runs:    trnscope compare {' '.join(r.trace for r in runs)} --names {names}")


def device_banner() -> str:
    return (
        f"trnscope {trnscope.__version__} on torch {torch.__version__}: "
        f"{torch.trn.device_count()} trn cores (software accelerator: each core is a host "
        "thread running SIMD kernels; device times are real measurements on this host, "
        "not Trainium)"
    )


def run_main(run: Callable[[Sequence[str] | None], Any], argv: Sequence[str] | None) -> int:
    """A study's command line: exit 0, or 1 with the StudyError's message."""
    try:
        run(argv)
    except StudyError as err:
        print(f"\nerror: {err}", file=sys.stderr)
        return 1
    return 0


def add_common_flags(p: argparse.ArgumentParser, out_default: str) -> None:
    """The flags every study takes: dtype, iterations, rounds, warm-up, seed, output folder."""
    p.add_argument(
        "--dtype",
        type=parse_dtype,
        default=torch.float32,
        help=f"one of {', '.join(DTYPES)} (default float32)",
    )
    p.add_argument(
        "--iters",
        type=positive_int,
        default=5,
        help="profiled calls per variant and round (default 5)",
    )
    p.add_argument(
        "--rounds",
        type=positive_int,
        default=5,
        help="the variants are profiled in turn this many times; device time per "
        "call is the median over all rounds, traces are the last round's (default 5)",
    )
    p.add_argument(
        "--warmup",
        type=positive_int,
        default=2,
        help="unprofiled calls per variant before profiling (default 2)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=out_default, help=f"output folder (default {out_default})")
