"""torch.compile(backend="trn"): aten graphs compiled into fused trn programs.

    model = torch.compile(model, backend="trn", dynamic=False)
    with torch.inference_mode():
        y = model(x)
    trnscope.compile_stats()  # one dict per compile: kernels, eager nodes, recompiles

The backend is found through the `torch_dynamo_backends` entry point; importing
this package also registers it by name. See docs/compile.md.
"""

from __future__ import annotations

from trnscope.compile import config
from trnscope.compile.backend import decomposition_table, trn_backend
from trnscope.compile.cache import compile_stats, reset_compile_stats


def _register() -> None:
    from torch._dynamo.backends import registry

    # Once Dynamo has discovered the entry point, lookup_backend("trn")
    # registers it; registering here as well would be a duplicate name.
    if "trn" not in registry._COMPILER_FNS and registry._BACKENDS.get("trn") is None:
        registry.register_backend(trn_backend, name="trn")


_register()

__all__ = ["compile_stats", "config", "decomposition_table", "reset_compile_stats", "trn_backend"]
