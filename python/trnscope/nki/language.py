"""nki.language (nl): tensors, tiles, loops and the high-level operations.

Supported: the dtypes float32 / bfloat16 / float16 / int32, the buffers hbm,
shared_hbm, private_hbm, sbuf, psum, `ndarray`, `zeros`, `tile_size`,
`affine_range` / `sequential_range` / `static_range`, basic slicing, `load`,
`store`, `copy`, `matmul(x, y, transpose_x=True)`, and `exp`, `log`, `tanh`,
`sqrt`, `square`, `reciprocal`, `add`, `subtract`, `multiply`, `divide`,
`maximum`, `minimum` on tiles. Others raise UnsupportedError naming them.
"""

from __future__ import annotations

import numpy as np

from trnscope.nki import _trace
from trnscope.nki import isa as _isa
from trnscope.nki._trace import NkiError, Tensor, Tile, UnsupportedError, as_view, current

float32 = _trace.FLOAT32
bfloat16 = _trace.BFLOAT16
float16 = _trace.FLOAT16
int32 = _trace.INT32


class _Buffer:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"nl.{self.name}"


hbm = _Buffer("hbm")
shared_hbm = _Buffer("shared_hbm")
private_hbm = _Buffer("private_hbm")
sbuf = _Buffer("sbuf")
psum = _Buffer("psum")


class tile_size:  # noqa: N801 (NKI's name)
    pmax = _trace.PMAX
    gemm_stationary_fmax = 128
    gemm_moving_fmax = 512
    psum_fmax = 512  # float32 elements of one PSUM bank


def affine_range(*args):
    """Iterations with no loop-carried dependency (the tracer runs them in order)."""
    return range(*args)


sequential_range = affine_range
static_range = affine_range


def ndarray(shape, dtype, buffer=sbuf, name=None):
    trace = current()
    dt = _trace.dtype_of(dtype)
    if buffer in (hbm, shared_hbm, private_hbm):
        return Tensor(trace, name or f"t{len(trace.tensors)}", "output", shape, dt)
    if buffer not in (sbuf, psum):
        raise UnsupportedError(f"nki: buffer {buffer!r}")
    return Tile(trace, shape, dt, buffer.name, "nl.ndarray")


def zeros(shape, dtype, buffer=sbuf, name=None):
    t = ndarray(shape, dtype, buffer, name)
    if isinstance(t, Tile) and t.memory == "psum":
        t.pending_zero = True  # the first nc_matmul into it overwrites (no memset)
        return t
    if isinstance(t, Tile):
        _isa.memset(t.shape, 0.0, t.dtype, dst=t)
    return t


def load(src, dtype=None, mask=None, **unsupported):
    """An HBM view -> a new SBUF tile of its shape (dim 0 on partitions)."""
    if mask is not None or unsupported:
        names = sorted(["mask"] * (mask is not None) + list(unsupported))
        raise UnsupportedError(f"nki: nl.load arguments {names}")
    v = as_view(src, "nl.load src")
    if not isinstance(v, _trace.HbmView):
        raise NkiError("nki: nl.load reads an HBM tensor (use nl.copy between tiles)")
    trace = current()
    out = Tile(trace, v.shape, _trace.dtype_of(dtype) if dtype else v.tensor.dtype, "sbuf",
               "nl.load")
    out.producer = trace.emit("dma_copy", "dma", dst=out.full, src0=v, op="nl.load")
    if trace.numerics:
        out.data[...] = out.dtype.cast(v.read()).reshape(out.shape)
    return out


def store(dst, value, mask=None, **unsupported):
    if mask is not None or unsupported:
        raise UnsupportedError("nki: nl.store with a mask")
    d = as_view(dst, "nl.store dst")
    if not isinstance(d, _trace.HbmView):
        raise NkiError("nki: nl.store writes an HBM tensor")
    _isa.dma_copy(dst=d, src=value)


def copy(x, dtype=None):
    return _isa.tensor_copy(x, dtype=dtype)


def matmul(x, y, transpose_x=False):
    """x.T @ y with transpose_x=True (x is [K, M], y [K, N]) -> a PSUM tile [M, N]."""
    if not transpose_x:
        raise UnsupportedError("nki: nl.matmul(transpose_x=False) (load x transposed and pass "
                               "transpose_x=True)")
    return _isa.nc_matmul(x, y)


def _activation(fn):
    def op(x, dtype=None):
        return _isa.activation(fn, x, dtype=dtype)

    op.__name__ = fn.__name__
    op._np = fn  # what nisa's op= arguments resolve it to
    return op


def _binary(fn):
    def op(x, y, dtype=None):
        if isinstance(y, (int, float)):
            return _isa.tensor_scalar(x, fn, y, dtype=dtype)
        return _isa.tensor_tensor(x, y, fn, dtype=dtype)

    op.__name__ = fn.__name__
    op._np = fn
    return op


exp, log, tanh, sqrt, square, reciprocal = (
    _activation(f) for f in (np.exp, np.log, np.tanh, np.sqrt, np.square, np.reciprocal))
add, subtract, multiply, divide, maximum, minimum = (
    _binary(f) for f in (np.add, np.subtract, np.multiply, np.divide, np.maximum, np.minimum))


class _Unsupported:
    """A name of NKI's language trnscope.nki does not implement yet: using it says so."""

    def __init__(self, name):
        self.name = name

    def _fail(self, *args, **kwargs):
        raise UnsupportedError(f"nki: nl.{self.name} is not supported yet by trnscope.nki")

    __call__ = __getitem__ = _fail


def _unsupported(name):
    return _Unsupported(name)


mgrid = _unsupported("mgrid")
arange = _unsupported("arange")
par_dim = _unsupported("par_dim")
