"""trnscope: a PrivateUse1 PyTorch device "trn" on a software accelerator, plus a profiler.

Importing trnscope (or `import torch` once trnscope is installed, through the
`torch.backends` entry point) registers the device: `torch.randn(2, device="trn")`.
"""

__version__ = "0.1.0"


# Defined before `import torch`: when trnscope is imported first, torch's
# backend autoload runs while this module is still initializing and calls
# _autoload(); the registration at the end of this file then does the work.
def _autoload() -> None:
    """Entry point of the `torch.backends` group."""
    if "_register" in globals():
        _register()


import sys  # noqa: E402

import torch  # noqa: E402

from trnscope import _C  # registers the allocator, guard, hooks and aten kernels
from trnscope import device as _device_module


def _register() -> None:
    """Idempotent: the entry point and an explicit import may both run it."""
    if torch._C._get_privateuse1_backend_name() != "trn":
        torch.utils.rename_privateuse1_backend("trn")
    if not hasattr(torch, "trn"):
        torch._register_device_module("trn", _device_module)
    if not hasattr(torch.Tensor, "is_trn"):
        torch.utils.generate_methods_for_privateuse1_backend(
            for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
        )


def fallback_ops() -> dict:
    """{aten op: number of calls} that ran on the CPU through the fallback."""
    return dict(_C.fallback_ops())


def float64_downcasts() -> dict:
    """{aten op: number of calls} that computed float64 tensors in float32."""
    return dict(_C.float64_downcasts())


def reset_counters() -> None:
    """Clear fallback_ops() and float64_downcasts() (warnings stay once per process)."""
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


_register()

from trnscope import shapes  # noqa: E402

# torch.compile finds backend "trn" through the torch_dynamo_backends entry
# point; importing torch._dynamo costs ~1.5 s, so it is registered here only
# when Dynamo is already loaded (importing trnscope.compile always registers).
if "torch._dynamo" in sys.modules:
    import trnscope.compile  # noqa: E402,F401

__all__ = [
    "compile_stats",
    "fallback_ops",
    "float64_downcasts",
    "reset_compile_stats",
    "reset_counters",
    "shapes",
]
