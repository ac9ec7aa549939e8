"""`nki.compiler`: directives to Neuron's compiler.

The tracer emits a kernel's instructions as written, in program order per engine
(Note [NKI tracing]), which is what these directives ask Neuron's compiler to keep, so
they change nothing here: `skip_middle_end_transformations`, `enable_stack_allocator`,
`force_auto_alloc`, `no_reorder`. Explicit SBUF/PSUM placement (`sbuf.mod_alloc`,
`psum.alloc`, ...) is not modelled: the tracer allocates every tile itself, so calling
one raises UnsupportedError.
"""

from __future__ import annotations

import contextlib
import types

from trnscope.nki._trace import UnsupportedError


def _passthrough(func=None, **_options):
    """A decorator usable bare (`@d`) or called (`@d(...)`) that returns the kernel as is."""
    return (lambda f: f) if func is None else func


skip_middle_end_transformations = _passthrough
enable_stack_allocator = _passthrough
force_auto_alloc = _passthrough


@contextlib.contextmanager
def no_reorder():
    """Instructions already keep their program order in the model."""
    yield


def _unsupported_allocator(memory: str, name: str):
    def allocator(*args, **kwargs):
        raise UnsupportedError(f"nki: nki.compiler.{memory}.{name} (explicit {memory.upper()} "
                               f"placement is not modelled; trnscope.nki allocates every tile)")

    allocator.__name__ = name
    return allocator


def _memory(memory: str) -> types.SimpleNamespace:
    return types.SimpleNamespace(**{n: _unsupported_allocator(memory, n)
                                    for n in ("alloc", "mod_alloc", "auto_alloc")})


sbuf = _memory("sbuf")
psum = _memory("psum")


def multi_buffer(factor=2):
    raise UnsupportedError("nki: nki.compiler.multi_buffer (the tracer rotates four buffers per "
                           "tile size, Note [NKI tracing])")


def allocation_scope():
    raise UnsupportedError("nki: nki.compiler.allocation_scope")


__all__ = ["enable_stack_allocator", "force_auto_alloc", "no_reorder", "psum", "sbuf",
           "skip_middle_end_transformations"]
