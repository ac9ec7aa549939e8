"""trnscope.nki: NKI's kernel language on trnscope's modelled NeuronCore.

    import trnscope.nki as nki
    import trnscope.nki.language as nl
    import trnscope.nki.isa as nisa

    @nki.jit
    def kernel(a, b): ...              # written as for AWS's NKI

    out = kernel(a_np, b_np)           # runs on numpy: the real result
    p = nki.profile(kernel, a_np, b_np, target="trn2")   # modelled device profile
    p.total_ns, p.engine_active_ns["tensor"], p.hfu, p.bound, p.recommendations
    p.save("kernel.trnx"); p.export_trace("device.json")

A profile is **modelled** (docs/device_model.md): an engine program traced from the
kernel (Note [NKI tracing] in _trace.py), simulated by core/model with its error
bound; never a measurement. The supported subset is listed in language.py and isa.py;
anything else raises UnsupportedError naming it.
"""

from __future__ import annotations

import functools

import numpy as np

from trnscope.nki import _trace, compiler, isa, language, typing  # noqa: F401 (nki.compiler, ...)
from trnscope.nki._trace import NkiError, UnsupportedError

__all__ = ["DeviceProfile", "NkiError", "UnsupportedError", "baremetal", "benchmark", "jit",
           "profile", "simulate_kernel"]


def _as_array(x, i):
    """(numpy array, dtype name) of a kernel argument: numpy or a CPU tensor; None for a
    Python value (a number, a shape tuple, ...), which the kernel gets as is."""
    if isinstance(x, np.ndarray):
        return x, x.dtype.name
    if type(x).__module__.startswith("torch"):
        if x.device.type != "cpu":
            raise NkiError(f"nki: argument {i} is on {x.device}; pass a CPU tensor or numpy array")
        name = str(x.dtype).replace("torch.", "")
        return x.detach().float().numpy() if name == "bfloat16" else x.detach().numpy(), name
    if isinstance(x, (bool, int, float, str, type(None), np.number)):
        return None
    if isinstance(x, (tuple, list)) and all(isinstance(e, (bool, int, float, np.number)) for e in x):
        return None
    raise NkiError(f"nki: argument {i} is a {type(x).__name__}; expected a numpy array, a CPU "
                   "tensor, a number or a tuple of numbers")


def _trace_call(fn, args, target: str, numerics: bool, kwargs=None) -> tuple:
    trace = _trace.Trace(fn.__name__, target, numerics)

    def bind(a, i):
        got = _as_array(a, i)
        if got is None:
            return a
        data, dtype = got
        return _trace.Tensor(trace, f"arg{i}" if isinstance(i, int) else i, "input", data.shape,
                             _trace.dtype_of(dtype), data if numerics else None)

    tensors = [bind(a, i) for i, a in enumerate(args)]
    named = {k: bind(v, k) for k, v in (kwargs or {}).items()}
    previous, _trace._current = _trace._current, trace
    try:
        result = fn(*tensors, **named)
    finally:
        _trace._current = previous
    return trace, result


class Kernel:
    """An @nki.jit kernel: calling it on numpy arrays or CPU tensors runs it."""

    def __init__(self, fn):
        self.fn = fn
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        from trnscope import _C

        trace, result = _trace_call(self.fn, args, "trn2", numerics=True, kwargs=kwargs)
        # What the hardware would reject is an error here too, not a silent result.
        _C._device_model_run(trace.program(), simulate=False)
        if result is None:
            return None
        outputs = result if isinstance(result, (tuple, list)) else (result,)
        arrays = []
        for r in outputs:
            if not isinstance(r, _trace.Tensor):
                raise NkiError(f"nki: {self.fn.__name__} must return HBM tensors "
                               f"(nl.ndarray(..., buffer=nl.shared_hbm)), got {type(r).__name__}")
            arrays.append(r.data)
        return tuple(arrays) if isinstance(result, (tuple, list)) else arrays[0]

    def __getitem__(self, grid):
        """`kernel[grid](...)`: SPMD launch grids are not modelled."""
        if grid in (1, (1,), ()):
            return self
        raise UnsupportedError(f"nki: SPMD launch grid {grid!r} (one program instance only)")


def jit(fn=None, **options):
    """Decorator: `@nki.jit` or `@nki.jit(mode=...)` (options are accepted and ignored)."""
    if fn is None:
        return lambda f: Kernel(f)
    return Kernel(fn)


baremetal = jit  # NKI's baremetal mode runs the kernel on numpy arrays: so does jit here


def simulate_kernel(kernel, *args, **kwargs):
    """NKI's functional simulator: runs the kernel on numpy arrays (as calling it does)."""
    k = kernel if isinstance(kernel, Kernel) else Kernel(getattr(kernel, "fn", kernel))
    return k(*args, **kwargs)


class _Latency:
    def __init__(self, ns: float):
        self._us = ns / 1e3

    def get_latency_percentile(self, percentile) -> float:
        """Microseconds. Modelled: the model is deterministic, so every percentile is equal."""
        if not 0 <= float(percentile) <= 100:
            raise NkiError(f"nki: percentile {percentile} is not in [0, 100]")
        return self._us


class _BenchmarkResult:
    def __init__(self, profile_):
        self.profile = profile_
        self.nc_latency = _Latency(profile_.total_ns)


class _Benchmark:
    """nki.benchmark's callable: runs the kernel and keeps its **modelled** latency."""

    def __init__(self, kernel, target, save_neff_name, save_trace_name):
        self.kernel = kernel if isinstance(kernel, Kernel) else Kernel(kernel)
        self.target, self.neff, self.trace = target, save_neff_name, save_trace_name
        self.benchmark_result = None

    def __call__(self, *args, **kwargs):
        out = self.kernel(*args, **kwargs)
        p = profile(self.kernel, *args, target=self.target, **kwargs)
        if self.neff:
            p.save(self.neff)
        if self.trace:
            p.export_trace(self.trace)
        self.benchmark_result = _BenchmarkResult(p)
        return out


def benchmark(kernel=None, warmup=None, iters=None, save_neff_name=None, save_trace_name=None,
              target="trn2", **_options):
    """NKI's benchmark decorator, on the modelled core: `.benchmark_result.nc_latency.
    get_latency_percentile(50)` is the modelled total in microseconds (not a measurement).
    save_neff_name writes the executable artifact, save_trace_name the device trace."""
    if kernel is None:
        return lambda k: _Benchmark(k, target, save_neff_name, save_trace_name)
    return _Benchmark(kernel, target, save_neff_name, save_trace_name)


class DeviceProfile:
    """The modelled profile of one kernel call on a target (docs/device_model.md)."""

    def __init__(self, program: dict, result: dict, tensor_throttle: bool, spill_bytes: dict):
        self._program, self._throttle = program, tensor_throttle
        # Bytes the tracer's SBUF spills stored and reloaded (Note [SBUF spill]); they
        # are part of hbm_bytes.
        self.spill_bytes = dict(spill_bytes)
        self.target = result["target"]
        self.total_ns = result["total_ns"]
        self.engine_active_ns = dict(result["engine_active_ns"])
        self.instruction_counts = dict(result["instruction_counts"])
        self.hfu, self.mfu, self.mbu = result["hfu"], result["mfu"], result["mbu"]
        self.arithmetic_intensity = result["arithmetic_intensity"]
        self.ridge_point = result["ridge_point"]
        self.bound = result["bound"]
        self.average_dma_bytes = result["average_dma_bytes"]
        self.hbm_bytes = result["hbm_bytes"]
        self.recommendations = list(result["recommendations"])
        self.summary = result["summary"]
        self.error_bound_pct = result["error_bound_pct"]

    def save(self, path: str) -> str:
        """Writes the executable artifact (`trnscope inspect` / `device-profile` read it)."""
        from trnscope import _C

        _C._device_model_run(self._program, save_path=str(path), simulate=False)
        return str(path)

    def export_trace(self, path: str) -> str:
        """Writes the device trace (Chrome JSON: Perfetto, `trnscope summary`, the explorer)."""
        from trnscope import _C

        _C._device_model_run(self._program, trace_path=str(path), tensor_throttle=self._throttle)
        return str(path)

    def __repr__(self):
        return (f"DeviceProfile({self._program['name']}, modelled {self.target} "
                f"\u00b1{self.error_bound_pct} %: {self.total_ns / 1e3:.3f} us, {self.bound}-bound)")


def profile(kernel, *args, target: str = "trn2", tensor_throttle: bool = False,
            numerics: bool = False, **kwargs) -> DeviceProfile:
    """Traces `kernel` on these arguments' shapes and dtypes (numerics=False skips the
    numpy work, so large kernels trace in seconds) and simulates it on `target`."""
    from trnscope import _C

    fn = kernel.fn if isinstance(kernel, Kernel) else kernel
    trace, _ = _trace_call(fn, args, target, numerics, kwargs)
    program = trace.program()
    result = _C._device_model_run(program, tensor_throttle=tensor_throttle)
    return DeviceProfile(program, result, tensor_throttle, trace.spill_bytes)
