"""trnscope: a PrivateUse1 PyTorch device "trn" on a software accelerator, plus a profiler.

Importing trnscope (or `import torch` once trnscope is installed, through the
`torch.backends` entry point) registers the device: `torch.randn(2, device="trn")`.
"""

import sys

__version__ = "0.1.0"

# Note [Lazy package init]
# The `trnscope` console command (trnscope.cli) only execs the analyzer binary,
# and importing it runs this file; importing torch here would cost it ~0.9 s.
# So this file imports torch only when torch is already loaded. Otherwise it
# registers the device as soon as torch finishes loading: torch's backend
# autoload calls _autoload() (the `torch.backends` entry point), and a one-shot
# import hook does the same when autoload is off (TORCH_DEVICE_BACKEND_AUTOLOAD=0).
# Everything else (the counters, `shapes`, `_C`) loads on first use.


def _autoload() -> None:
    """Entry point of the `torch.backends` group."""
    _register()


def _register() -> None:
    """Idempotent: the entry point, the import hook and an explicit import may all run it."""
    import torch

    from trnscope import _C  # noqa: F401  (registers the allocator, guard, hooks and aten kernels)
    from trnscope import device as device_module

    if torch._C._get_privateuse1_backend_name() != "trn":
        torch.utils.rename_privateuse1_backend("trn")
    if not hasattr(torch, "trn"):
        torch._register_device_module("trn", device_module)
    if not hasattr(torch.Tensor, "is_trn"):
        torch.utils.generate_methods_for_privateuse1_backend(
            for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
        )
    # torch.compile finds backend "trn" through the torch_dynamo_backends entry
    # point; importing torch._dynamo costs ~1.5 s, so it is registered here only
    # when Dynamo is already loaded (importing trnscope.compile always registers).
    if "torch._dynamo" in sys.modules:
        import trnscope.compile  # noqa: F401


class _RegisterAfterTorch:
    """sys.meta_path finder that runs _register() once torch has finished loading.

    Removes itself on first use; import machinery calls it under the import lock.
    """

    def find_spec(self, name, path, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_register(module):
            exec_module(module)
            _register()

        spec.loader.exec_module = exec_then_register
        return spec


def fallback_ops() -> dict:
    """{aten op: number of calls} that ran on the CPU through the fallback."""
    from trnscope import _C

    return dict(_C.fallback_ops())


def float64_downcasts() -> dict:
    """{aten op: number of calls} that computed float64 tensors in float32."""
    from trnscope import _C

    return dict(_C.float64_downcasts())


def reset_counters() -> None:
    """Clear fallback_ops() and float64_downcasts() (warnings stay once per process)."""
    from trnscope import _C

    _C.reset_counters()


def compile_stats() -> list:
    """One dict per torch.compile(backend="trn") compile in this process (docs/compile.md)."""
    if "trnscope.compile.cache" not in sys.modules:  # nothing compiled: keep torch._dynamo unloaded
        return []
    return sys.modules["trnscope.compile.cache"].compile_stats()


def reset_compile_stats() -> None:
    """Forget compile_stats() and the per-graph signature history."""
    if "trnscope.compile.cache" in sys.modules:
        sys.modules["trnscope.compile.cache"].reset_compile_stats()


def __getattr__(name: str):
    """Submodules on first use (`trnscope.shapes.buckets(...)` without importing it)."""
    if name in ("shapes", "device", "profiling", "compile", "_C"):
        import importlib

        return importlib.import_module(f"trnscope.{name}")
    raise AttributeError(f"module 'trnscope' has no attribute {name!r}")


if "torch" in sys.modules:
    _register()
elif not any(isinstance(f, _RegisterAfterTorch) for f in sys.meta_path):
    sys.meta_path.insert(0, _RegisterAfterTorch())

__all__ = [
    "compile_stats",
    "fallback_ops",
    "float64_downcasts",
    "reset_compile_stats",
    "reset_counters",
    "shapes",
]
