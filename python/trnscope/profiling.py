"""trnscope.profiling: what to capture on the trn device, and the combined-trace export.

`ProfileConfig` (the seed's NeuronConfig) says which cores, streams and kinds of
events a torch.profiler session captures; `Profiler` (the seed's NeuronProfiler)
writes trace.json / summary.txt / meta.json for a finished profile. See
docs/profiling.md.

    cfg = ProfileConfig(cores="0,1", modes=[ProfileMode.DEVICE, ProfileMode.RUNTIME])
    with torch.profiler.profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
        experimental_config=cfg.experimental_config(),
        on_trace_ready=Profiler(cfg).export_trace,
    ) as prof:
        model(x)
"""

from __future__ import annotations

import datetime
import enum
import json
import os
import subprocess
import threading
import time
import warnings
from collections.abc import Iterable
from typing import Any

import torch

import trnscope
from trnscope import _C

__all__ = ["ProfileConfig", "ProfileMode", "Profiler"]

_ALL = (1 << 64) - 1  # every bit of a tracer mask (device_mask, stream_mask)


class ProfileMode(enum.Enum):
    """What a session records; combine several in ProfileConfig(modes=[...])."""

    DEVICE = "device"  # kernels and copies on the cores (the device columns)
    RUNTIME = "runtime"  # host runtime spans: launch, memcpy, synchronize, event record/wait
    MEMORY = "memory"  # allocator events; a memory-in-use counter track per core in trace.json


_MODE_BITS = {m: _C.profile_mode_bits[m.value] for m in ProfileMode}  # core/trace/trace.h

_IndexSpec = None | int | str | Iterable[int]
_INDEX_FORMS = 'None (all), an int, a string such as "0,1" or "0-3", or a list of ints'


def _parse_indices(
    value: _IndexSpec, what: str, limit: int, limit_why: str
) -> tuple[int, ...] | None:
    """Sorted, unique indices of `value`; None means all. Errors name the value and the forms."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str, list, tuple, set, range)):
        raise TypeError(
            f"ProfileConfig: {what}={value!r} has type {type(value).__name__}; "
            f"expected {_INDEX_FORMS}"
        )
    if isinstance(value, int):
        items = [value]
    elif isinstance(value, str):  # TRN_VISIBLE_CORES' grammar, parsed by the runtime
        items = _C.parse_index_list(value, f"ProfileConfig: {what}", _C.max_devices)
    else:
        items = list(value)
        for item in items:
            if isinstance(item, bool) or not isinstance(item, int):
                raise TypeError(
                    f"ProfileConfig: {what}={value!r} contains {item!r}; expected {_INDEX_FORMS}"
                )
    if not items:
        raise ValueError(
            f"ProfileConfig: {what}={value!r} selects nothing; expected {_INDEX_FORMS}"
        )
    for item in items:
        if item < 0:
            raise ValueError(
                f"ProfileConfig: {what}={value!r} contains the negative index {item}; "
                f"expected {_INDEX_FORMS}"
            )
        if item >= limit:
            raise ValueError(f"ProfileConfig: {what}={value!r} contains {item}, but {limit_why}")
    return tuple(sorted(set(items)))


def _parse_modes(modes: Any) -> tuple[ProfileMode, ...]:
    forms = (
        "a ProfileMode or a list of them ("
        + ", ".join(f"ProfileMode.{m.name}" for m in ProfileMode)
        + ")"
    )
    if modes is None:
        return (ProfileMode.DEVICE, ProfileMode.RUNTIME)
    if isinstance(modes, (ProfileMode, str)):
        modes = [modes]
    try:
        items = list(modes)
    except TypeError:
        raise TypeError(f"ProfileConfig: modes={modes!r} is not {forms}") from None
    if not items:
        raise ValueError(f"ProfileConfig: modes={modes!r} is empty; expected {forms}")
    out = []
    for m in items:
        if isinstance(m, str):
            try:
                m = ProfileMode(m.lower())
            except ValueError:
                raise ValueError(f"ProfileConfig: unknown mode {m!r}; expected {forms}") from None
        if not isinstance(m, ProfileMode):
            raise TypeError(f"ProfileConfig: mode {m!r} is not {forms}")
        if m not in out:
            out.append(m)
    return tuple(sorted(out, key=lambda m: _MODE_BITS[m]))


class ProfileConfig:
    """What a profiling session captures on trn (the seed's NeuronConfig).

    cores:   logical cores to capture: None (all), 1, "0,1", "0-3" or [0, 1].
    streams: stream ids to capture: None (all), "0,2" or [0, 2].
    modes:   ProfileMode values; default [DEVICE, RUNTIME].
    max_events_per_core: tracer records kept per core; later ones are dropped
             and counted (meta.json "dropped_events").
    output_dir: where Profiler.export_trace writes <timestamp>/ folders.

    Values are checked here; an invalid one raises ValueError/TypeError naming
    the value and the accepted forms.
    """

    def __init__(
        self,
        cores: _IndexSpec = None,
        streams: _IndexSpec = None,
        modes: Iterable[ProfileMode] | ProfileMode | None = None,
        max_events_per_core: int = 1_000_000,
        output_dir: str | os.PathLike = "trnscope_profiles",
    ):
        count = torch.trn.device_count()
        self.cores = _parse_indices(
            cores,
            "cores",
            count,
            f"torch.trn.device_count() is {count} (set TRN_VISIBLE_CORES for more cores)",
        )
        self.streams = _parse_indices(
            streams, "streams", _C.max_streams, f"stream ids are 0..{_C.max_streams - 1}"
        )
        self.modes = _parse_modes(modes)
        if isinstance(max_events_per_core, bool) or not isinstance(max_events_per_core, int):
            raise TypeError(
                f"ProfileConfig: max_events_per_core={max_events_per_core!r} must be a positive int"
            )
        if max_events_per_core <= 0:
            raise ValueError(
                f"ProfileConfig: max_events_per_core={max_events_per_core} must be a positive int"
            )
        self.max_events_per_core = max_events_per_core
        if not isinstance(output_dir, (str, os.PathLike)):
            raise TypeError(f"ProfileConfig: output_dir={output_dir!r} must be a str or a path")
        self.output_dir = os.fspath(output_dir)

    def _masks(self) -> dict:
        def mask(indices):
            return _ALL if indices is None else sum(1 << i for i in indices)

        return {
            "device_mask": mask(self.cores),
            "stream_mask": mask(self.streams),
            "modes": sum(_MODE_BITS[m] for m in self.modes),
            "max_events_per_core": self.max_events_per_core,
        }

    def custom_profiler_config(self) -> str:
        """The one-line JSON the Kineto plugin reads (Kineto's Config::getCustomConfig())."""
        return json.dumps({"backend": "trnscope", **self._masks()}, separators=(",", ":"))

    def experimental_config(self) -> torch._C._profiler._ExperimentalConfig:
        """Pass as torch.profiler.profile(experimental_config=...) to activate this config.

        It is PyTorch's documented channel to a custom backend's profiler:
        `custom_profiler_config` reaches the plugin's configure() in Kineto's Config.
        """
        return torch._C._profiler._ExperimentalConfig(
            custom_profiler_config=self.custom_profiler_config()
        )

    def to_dict(self) -> dict:
        return {
            "cores": None if self.cores is None else list(self.cores),
            "streams": None if self.streams is None else list(self.streams),
            "modes": [m.value for m in self.modes],
            "max_events_per_core": self.max_events_per_core,
            "output_dir": self.output_dir,
        }

    def __repr__(self) -> str:
        d = self.to_dict()
        modes = "[" + ", ".join(f"ProfileMode.{m.name}" for m in self.modes) + "]"
        return (
            f"ProfileConfig(cores={d['cores']}, streams={d['streams']}, modes={modes}, "
            f"max_events_per_core={self.max_events_per_core}, output_dir={self.output_dir!r})"
        )


# ---- Host peaks: measured once per process -------------------------------------------------
_peaks: dict | None = None
_peaks_lock = threading.Lock()


def quiet_kineto_logs() -> None:
    """Silence Kineto's logger unless the user set KINETO_LOG_LEVEL.

    torch 2.13's Kineto prints two "USDT: profiler_start/stop" lines per profile on
    stderr (dozens per study); level 6 is above all of its levels. It is read at the
    first profile, so call this before profiling. Used by the studies and benchmarks.
    """
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")


def host_peaks() -> dict:
    """Peak copy bandwidth (GB/s) and GEMM throughput (GFLOP/s) of trn:0, measured once.

    Runs on a private stream so a failed kernel of the user's is neither raised
    nor consumed here.
    """
    global _peaks
    with _peaks_lock:
        if _peaks is None:
            _peaks = _measure_peaks()
        return dict(_peaks)


def _best_seconds(fn, stream, repeats: int = 5) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        stream.synchronize()
        best = min(best, time.perf_counter() - t0)
    return best


def _measure_peaks() -> dict:
    t_start = time.perf_counter()
    stream = torch.trn.Stream(0)
    with torch.trn.stream(stream):
        n_bytes = 32 << 20
        # Bytes moved per second (read + write) by memcpy, a non-temporal copy and
        # our own copy and add kernels, on trn:0's core thread; the peak is the
        # best of them (Note [Host peak] in core/kernels/bandwidth.cc).
        rates = dict(_C.host_bandwidth(0, n_bytes, 5))
        n = 512
        a = torch.randn(n, n, device="trn:0")
        b = torch.randn(n, n, device="trn:0")
        stream.synchronize()
        gemm_s = _best_seconds(lambda: torch.mm(a, b), stream)
    best = max(rates, key=rates.get)
    return {
        "device": "trn:0",
        "copy_bandwidth_gb_s": round(rates[best], 2),  # read + write, best of `bandwidth_by`
        "bandwidth_by": {k: round(v, 2) for k, v in rates.items()},
        "gemm_gflop_s": round(2 * n**3 / gemm_s / 1e9, 2),
        "gemm_size": n,
        "copy_bytes": n_bytes,
        "measure_seconds": round(time.perf_counter() - t_start, 3),
    }


def share_of_peak(achieved: float, peak: float) -> tuple[float, float, bool]:
    """(share of the peak in [0, 1], the peak used, raised). A measured rate above the
    recorded peak raises the peak to it (the peak was measured too low) and says so,
    so a share is never printed above 100 %."""
    if peak <= 0:
        raise ValueError(f"share_of_peak: peak must be > 0, got {peak!r}")
    if achieved > peak:
        return 1.0, achieved, True
    return max(achieved, 0.0) / peak, peak, False


# ---- Export ------------------------------------------------------------------------------------
def _kineto_results(prof: Any):
    inner = getattr(prof, "profiler", None) or prof  # torch.profiler.profile wraps the autograd one
    results = getattr(inner, "kineto_results", None)
    if results is None:
        raise ValueError(
            f"export_trace needs a finished torch.profiler.profile, got {type(prof).__name__} "
            "without profiler results (was the profile stopped?)"
        )
    return inner, results


def _device_requested(prof: Any, inner: Any) -> bool:
    activities = getattr(prof, "activities", None)
    if activities is not None:
        return torch.profiler.ProfilerActivity.PrivateUse1 in activities
    return getattr(inner, "use_device", None) == "trn"


def _write_summary(folder: str) -> None:
    """summary.txt: the C++ analyzer's summary of the exported trace (and meta.json
    beside it), every op listed. A subprocess: it reads 150k ops in well under a
    second, where key_averages() took ~30 s."""
    from trnscope.cli import binary_path

    exe = binary_path()
    trace = os.path.join(folder, "trace.json")
    r = subprocess.run([exe, "summary", trace, "--top", "0"], capture_output=True, text=True)
    if r.returncode not in (0, 3):  # 3: partial input, recovered (the summary says what)
        raise RuntimeError(
            f"trnscope: summarizing {trace} failed (exit {r.returncode} from {exe}): "
            f"{r.stderr.strip()}"
        )
    with open(os.path.join(folder, "summary.txt"), "w") as f:
        f.write(r.stdout)


def _device_info() -> dict:
    count = torch.trn.device_count()
    spec = _C.visible_cores_spec()
    return {
        "count": count,
        "visible_cores": list(_C.parse_visible_cores(spec)),
        "visible_cores_spec": spec,
        "capacity_bytes_per_core": [_C.memory_stats(i)["capacity_bytes"] for i in range(count)],
    }


class Profiler:
    """Exports a finished torch.profiler profile as combined traces (the seed's NeuronProfiler).

    Use `Profiler(cfg).export_trace` as `on_trace_ready`, or call it on a
    finished profile. Each call writes a new `<output_dir>/<timestamp>/` with
    trace.json (framework ops + runtime spans + one lane per core/stream, flow
    arrows op -> launch -> kernel), summary.txt and meta.json, and returns it.
    """

    def __init__(self, config: ProfileConfig | None = None):
        if config is not None and not isinstance(config, ProfileConfig):
            raise TypeError(f"Profiler(config={config!r}): expected a ProfileConfig or None")
        self.config = config if config is not None else ProfileConfig()
        self.last_export: dict | None = None  # the exporter's counts of the last call
        host_peaks()  # measured now, on an idle device, never inside a trace handler

    def _new_dir(self) -> str:
        os.makedirs(self.config.output_dir, exist_ok=True)
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        for attempt in range(10_000):
            path = os.path.join(
                self.config.output_dir, stamp if attempt == 0 else f"{stamp}-{attempt}"
            )
            try:
                os.mkdir(path)
                return path
            except FileExistsError:
                continue
        raise RuntimeError(f"trnscope: could not create a new folder in {self.config.output_dir!r}")

    def export_trace(self, prof: Any) -> str:
        """Write trace.json, summary.txt and meta.json for `prof`; returns the folder."""
        inner, results = _kineto_results(prof)
        session = dict(_C._profiler_last_session())
        requested = _device_requested(prof, inner)
        # The plugin's last session belongs to this profile only if it ended after it began.
        mine = requested and session["id"] > 0 and session["stop_ns"] >= results.trace_start_ns()
        guard = {
            "device_requested": requested,
            "device_session": mine,
            "from_profile_config": bool(mine and session["from_profile_config"]),
            "synchronized_at_stop": bool(mine and session["synchronized_at_stop"]),
            "commands_in_flight": session["commands_in_flight"] if mine else 0,
            "device_events": session["device_records"] if mine else 0,
            "warning": None,
        }
        if requested and guard["device_events"] == 0:
            guard["warning"] = (
                "trnscope: device activities were requested but no device event was captured; "
                "make sure work runs on trn inside the profile and call torch.trn.synchronize() "
                "before the profiler stops"
                + ("" if mine else " (the trn profiler plugin did not run for this profile)")
            )
            warnings.warn(guard["warning"], UserWarning, stacklevel=2)

        count = torch.trn.device_count()
        dropped = session["dropped_per_core"] if mine else []
        meta = {
            "trnscope_version": trnscope.__version__,
            "torch_version": torch.__version__,
            "config": self.config.to_dict(),
            "device": _device_info(),
            "host_peaks": host_peaks(),
            "dropped_events": {
                "total": session["dropped_total"] if mine else 0,
                "per_core": {str(i): (dropped[i] if i < len(dropped) else 0) for i in range(count)},
            },
            "fallback_ops": trnscope.fallback_ops(),
            "float64_downcasts": trnscope.float64_downcasts(),
            "time_correlation": guard,
            "compile": trnscope.compile_stats(),
        }
        out = self._new_dir()
        stats = _C._export_chrome_trace(
            results, os.path.join(out, "trace.json"), json.dumps(meta, default=str),
            with_device=mine
        )
        meta["export"] = dict(stats)
        with open(os.path.join(out, "meta.json"), "w") as f:
            json.dump(meta, f, indent=2, default=str)
            f.write("\n")
        _write_summary(out)
        self.last_export = dict(stats, path=out)
        return out
