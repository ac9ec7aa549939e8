"""nki.language (nl): tensors, tiles, index expressions, loops and the high-level operations.

Supported: the dtypes float32 / bfloat16 / float16 / int32 / int8 / uint8 / int16 /
uint16 / uint32 (with `.min` / `.max`), the buffers hbm, shared_hbm, private_hbm,
sbuf, psum, `ndarray`, `zeros`, `full`, `par_dim`, `tile_size`, `affine_range` /
`sequential_range` / `static_range`, slicing, `arange`, `mgrid`, `ds`, masks
(`mask=i_p < n`), `load`, `store`, `load_transpose2d`, `copy`, `matmul`, `transpose`,
activations (`exp`, `log`, `tanh`, `sqrt`, `rsqrt`, `square`, `reciprocal`, `sigmoid`,
`relu`, `gelu`, `gelu_apprx_tanh`, `silu`), elementwise `add`, `subtract`, `multiply`,
`divide`, `maximum`, `minimum`, `power`, `negative` and the operators on tiles,
reductions `sum`, `mean`, `max`, `min`, `prod`, and `tile.broadcast_to`. Others raise
UnsupportedError naming them.
"""

from __future__ import annotations

import numpy as np

from trnscope.nki import _trace
from trnscope.nki import isa as _isa
from trnscope.nki._trace import NkiError, Tensor, Tile, UnsupportedError, as_view, current

float32 = fp32 = _trace.FLOAT32
bfloat16 = _trace.BFLOAT16
float16 = _trace.FLOAT16
int32 = _trace.INT32
int8, uint8, int16, uint16, uint32 = (_trace.INT8, _trace.UINT8, _trace.INT16, _trace.UINT16,
                                      _trace.UINT32)


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
    bn_stats_fmax = 512
    total_available_sbuf_size = 192 << 10


def affine_range(*args, **_hints):
    """Iterations with no loop-carried dependency (the tracer runs them in order)."""
    return range(*args)


sequential_range = static_range = affine_range

arange = _trace.arange
mgrid = _trace._MGrid()


def ds(start, size):
    """A dynamic slice: `t[nl.ds(i * 128, 128)]` is `t[i * 128:i * 128 + 128]`."""
    return slice(start, start + size)


class par_dim(int):  # noqa: N801 (NKI's name)
    """Marks the partition dim of a tile shape: `(blocks, nl.par_dim(128), 512)`."""


def _pdim(shape):
    marks = [i for i, s in enumerate(shape) if isinstance(s, par_dim)]
    if len(marks) > 1:
        raise NkiError(f"nki: a tile shape has one par_dim, got {len(marks)} in {list(shape)}")
    return marks[0] if marks else 0


def ndarray(shape, dtype, buffer=sbuf, name=None, **_options):
    trace = current()
    dt = _trace.dtype_of(dtype)
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    if buffer in (hbm, shared_hbm, private_hbm):
        return Tensor(trace, name or f"t{len(trace.tensors)}", "output", [int(s) for s in shape], dt)
    buffer = {"sbuf": sbuf, "psum": psum}.get(getattr(buffer, "name", buffer), buffer)
    if buffer not in (sbuf, psum):
        raise UnsupportedError(f"nki: buffer {buffer!r}")
    return Tile(trace, shape, dt, buffer.name, "nl.ndarray", _pdim(shape))


def zeros(shape, dtype, buffer=sbuf, name=None, **options):
    return full(shape, 0.0, dtype, buffer, name, **options)


def full(shape, fill_value, dtype, buffer=sbuf, name=None, **options):
    t = ndarray(shape, dtype, buffer, name, **options)
    if isinstance(t, Tile) and t.memory == "psum" and fill_value == 0:
        t.pending_zero = True  # the first nc_matmul into it overwrites (no memset)
        return t
    if isinstance(t, Tile):
        _isa.memset(t.whole_storage, fill_value)
    elif current().numerics:
        t.data[...] = fill_value
    return t


def _hbm(x, what):
    v = as_view(x, what)
    if not isinstance(v.base, Tensor):
        raise NkiError(f"nki: {what} is an HBM tensor (use nl.copy between tiles)")
    return v


def load(src, dtype=None, mask=None, **unsupported):
    """An HBM view -> a new SBUF tile of its shape (dim 0 on partitions)."""
    if unsupported:
        raise UnsupportedError(f"nki: nl.load arguments {sorted(unsupported)}")
    v = _hbm(src, "nl.load src")
    dt = _trace.dtype_of(dtype) if dtype else v.dtype
    out = _isa._op("nl.load", "dma_copy", "dma", None, [v], v.shape, v.dtype, "sbuf",
                   lambda x: x, mask=mask)
    return out if dt is v.dtype else _isa.tensor_copy(out, dtype=dt)


def load_transpose2d(src, dtype=None, mask=None):
    """An HBM view [A, B] -> an SBUF tile [B, A] (a DMA with a transposing access pattern)."""
    v = _hbm(src, "nl.load_transpose2d src")
    if len(v.shape) != 2:
        raise NkiError(f"nki: nl.load_transpose2d takes a 2-D view, got {list(v.shape)}")
    out = load(v.permute([1, 0]), dtype=dtype, mask=mask)
    return out


def store(dst, value, mask=None, **unsupported):
    if unsupported:
        raise UnsupportedError(f"nki: nl.store arguments {sorted(unsupported)}")
    d = _hbm(dst, "nl.store dst")
    if _isa._is_scalar(value):
        raise NkiError("nki: nl.store stores a tile, got a number")
    if as_view(value, "nl.store value").memory == "psum":  # DMA cannot read PSUM: via SBUF
        value = _isa.tensor_copy(value, mask=mask)
    _isa.dma_copy(dst=d, src=value, mask=mask)


def copy(x, dtype=None, mask=None, **_options):
    return _isa.tensor_copy(x, dtype=dtype, mask=mask)


def matmul(x, y, transpose_x=False, mask=None, **_options):
    """x.T @ y with transpose_x=True (x is [K, M], y [K, N]), else x @ y (x [M, K], which
    costs a transpose through PSUM) -> a PSUM tile [M, N]."""
    # The compiler moves PSUM operands to SBUF for the Tensor engine; so does the tracer.
    x, y = (_isa.tensor_copy(t) if as_view(t, "nl.matmul operand").memory == "psum" else t
            for t in (x, y))
    if not transpose_x:  # x [M, K]: the Tensor engine transposes it first, as NKI's compiler does
        xt = _isa.nc_transpose(x)
        x = _isa.tensor_copy(xt, dtype=as_view(x, "nl.matmul x").dtype)
    return _isa.nc_matmul(x, y, mask=mask)


def transpose(x, dtype=None, mask=None, **_options):
    return _isa.nc_transpose(x, dtype=dtype, mask=mask)


def _activation(fn, name):
    def op(x, dtype=None, mask=None, **_options):
        if _isa._is_scalar(x):
            return fn(x)
        return _isa.activation(fn, x, dtype=dtype, mask=mask)

    op.__name__ = name
    op._np = fn  # what nisa's op= arguments resolve it to
    return op


def _binary(fn, name):
    def op(x, y, dtype=None, mask=None, **_options):
        return _isa.binary(name, x, y, dtype=dtype, mask=mask)

    op.__name__ = fn.__name__
    op._np = fn
    return op


exp, log, tanh, sqrt, square, reciprocal = (
    _activation(f, f.__name__) for f in (np.exp, np.log, np.tanh, np.sqrt, np.square,
                                         np.reciprocal))
rsqrt = _activation(_isa._rsqrt, "rsqrt")
sigmoid = _activation(_isa._sigmoid, "sigmoid")
relu = _activation(_isa._relu, "relu")
gelu = _activation(_isa._gelu, "gelu")
gelu_apprx_tanh = _activation(_isa._gelu_tanh, "gelu_apprx_tanh")
silu = _activation(_isa._silu, "silu")
add, subtract, multiply, divide = (_binary(f, n) for f, n in (
    (np.add, "add"), (np.subtract, "subtract"), (np.multiply, "multiply"), (np.divide, "divide")))
maximum, minimum, power = (_binary(f, n) for f, n in (
    (np.maximum, "max"), (np.minimum, "min"), (np.power, "pow")))


def negative(x, dtype=None, mask=None):
    return _isa.binary("multiply", x, -1.0, dtype=dtype, mask=mask)


def _reduction(fn, name):
    def op(x, axis, dtype=None, keepdims=False, mask=None, **_options):
        return _isa.reduce(fn, x, axis, dtype=dtype, keepdims=keepdims, mask=mask,
                           what=f"nl.{name}")

    op.__name__ = name
    op._np = fn
    return op


sum = _reduction(np.add, "sum")  # noqa: A001 (NKI's names)
max = _reduction(np.maximum, "max")  # noqa: A001
min = _reduction(np.minimum, "min")  # noqa: A001
prod = _reduction(np.multiply, "prod")


def mean(x, axis, dtype=None, keepdims=False, mask=None, **_options):
    """The sum over `axis` times 1 / count (two Vector instructions)."""
    v = as_view(x, "nl.mean")
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    count = int(np.prod([v.shape[a] for a in axes]))
    s = _isa.reduce(np.add, v, axis, dtype=_trace.FLOAT32, keepdims=keepdims, mask=mask,
                    what="nl.mean")
    return _isa.tensor_scalar(s, np.multiply, 1.0 / count, dtype=dtype, mask=mask)


class _Unsupported:
    """A name of NKI's language trnscope.nki does not implement yet: using it says so."""

    def __init__(self, name):
        self.name = name

    def _fail(self, *args, **kwargs):
        raise UnsupportedError(f"nki: nl.{self.name} is not supported yet by trnscope.nki")

    __call__ = __getitem__ = _fail


for _name in ("where", "program_id", "num_programs", "spmd_dim", "atomic_rmw", "shared_constant",
              "dropout", "softmax", "rms_norm", "gather_flattened", "all_reduce", "invert",
              "bitwise_and", "bitwise_or", "left_shift", "right_shift", "erf", "abs", "sign",
              "floor", "ceil", "sin", "cos", "arctan", "logical_and", "logical_or",
              "equal", "not_equal", "greater", "greater_equal", "less", "less_equal", "var",
              "all", "any", "argmax", "argmin", "expand_dims", "loop_reduce", "rand",
              "random_seed", "load_transpose2d_old"):
    globals()[_name] = _Unsupported(_name)
