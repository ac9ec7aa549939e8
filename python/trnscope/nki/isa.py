"""nki.isa (nisa): the engine instructions, run on numpy and recorded by the tracer.

Supported: dma_copy, nc_matmul, nc_transpose, tensor_copy, tensor_tensor,
tensor_scalar, activation, tensor_reduce, memset. Others raise UnsupportedError
naming them (docs/device_model.md lists the subset).
"""

from __future__ import annotations

import numpy as np

from trnscope.nki import _trace
from trnscope.nki._trace import NkiError, Tile, UnsupportedError, as_view, current, data_of

_GEMM_MOVING_FMAX = 512
_GEMM_STATIONARY_FMAX = 128

# numpy / nl functions -> the ALU ops and activation functions of core/isa.
_ALU = {np.add: "add", np.subtract: "subtract", np.multiply: "multiply", np.divide: "divide",
        np.maximum: "max", np.minimum: "min", np.power: "pow"}
_REDUCE = {np.add: ("add", np.sum), np.maximum: ("max", np.max), np.minimum: ("min", np.min),
           np.multiply: ("multiply", np.prod)}


def _gelu(x):
    from math import erf, sqrt

    return 0.5 * x * (1 + np.vectorize(erf)(x / sqrt(2)))


_ACTIVATION = {
    np.exp: ("exp", np.exp), np.log: ("log", np.log), np.tanh: ("tanh", np.tanh),
    np.sqrt: ("sqrt", np.sqrt), np.square: ("square", np.square),
    np.reciprocal: ("reciprocal", np.reciprocal),
}


def _np_op(op):
    return getattr(op, "_np", op)  # nl.add and friends stand for their numpy function


def _alu(op, what: str) -> str:
    op = _np_op(op)
    if op in _ALU:
        return _ALU[op]
    raise UnsupportedError(f"nki: {what}: operation {getattr(op, '__name__', op)!r} is not supported "
                           f"(one of {sorted(f.__name__ for f in _ALU)})")


def _onchip(x, what: str):
    v = as_view(x, what)
    if isinstance(v, _trace.HbmView):
        raise NkiError(f"nki: {what} is in HBM; compute engines read SBUF or PSUM "
                       "(load it with nl.load)")
    return v


def _shape2(shape):
    return tuple(shape) if len(shape) >= 2 else (shape[0], 1)


def _result(shape, dtype, memory: str, what: str, producer: int) -> Tile:
    t = Tile(current(), _shape2(shape), _trace.dtype_of(dtype), memory, what)
    t.producer = producer
    return t


def _write(dst, values, what: str):
    """Writes numpy `values` into dst (a Tile or TileView)."""
    v = as_view(dst, what)
    if v.tile.trace.numerics:
        v.tile.data[v.slices()] = v.tile.dtype.cast(values).reshape(v.shape)


def _emit_into(dst, shape, dtype, memory, what, opcode, engine, values, **fields):
    """Emits one instruction writing `dst` (or a new tile), with its numpy values."""
    trace = current()
    if dst is None:
        index = len(trace.instructions)
        out = _result(shape, dtype, memory, what, index)
        trace.emit(opcode, engine, dst=out.full, op=what, **fields)
        if trace.numerics:
            out.data[...] = out.dtype.cast(values).reshape(out.shape)
        return out
    view = as_view(dst, what)
    trace.emit(opcode, engine, dst=view, op=what, **fields)
    _write(view, values, what)
    return dst


def dma_copy(*, dst, src, **unsupported):
    """dst = src, between HBM and SBUF (or SBUF and SBUF)."""
    if unsupported:
        raise UnsupportedError(f"nki: nisa.dma_copy arguments {sorted(unsupported)}")
    d, s = as_view(dst, "dma_copy dst"), as_view(src, "dma_copy src")
    if int(np.prod(d.shape)) != int(np.prod(s.shape)):
        raise NkiError(f"nki: dma_copy: dst {list(d.shape)} and src {list(s.shape)} differ in size")
    trace = current()
    trace.emit("dma_copy", "dma", dst=d, src0=s, op="nisa.dma_copy")
    if trace.numerics:
        d.write(data_of(s)) if isinstance(d, _trace.HbmView) else _write(d, data_of(s), "dma_copy")


def nc_matmul(stationary, moving, **unsupported):
    """stationary [K, M] and moving [K, N] (SBUF) -> a PSUM float32 tile [M, N] =
    stationary.T @ moving; `psum += nisa.nc_matmul(...)` accumulates."""
    if unsupported:
        raise UnsupportedError(f"nki: nisa.nc_matmul arguments {sorted(unsupported)}")
    s, m = _onchip(stationary, "nc_matmul stationary"), _onchip(moving, "nc_matmul moving")
    if len(s.shape) != 2 or len(m.shape) != 2:
        raise NkiError(f"nki: nc_matmul takes 2-D tiles, got {list(s.shape)} and {list(m.shape)}")
    k, mm = s.shape
    k2, n = m.shape
    if k != k2:
        raise NkiError(f"nki: nc_matmul: contraction sizes differ: stationary {list(s.shape)}, "
                       f"moving {list(m.shape)}")
    if n > _GEMM_MOVING_FMAX:
        raise NkiError(f"nki: nc_matmul: the moving free size is at most {_GEMM_MOVING_FMAX} "
                       f"(nl.tile_size.gemm_moving_fmax), got {n}")
    if mm > _GEMM_STATIONARY_FMAX:
        raise NkiError(f"nki: nc_matmul: the stationary free size is at most "
                       f"{_GEMM_STATIONARY_FMAX} (nl.tile_size.gemm_stationary_fmax), got {mm}")
    trace = current()
    trace.emit("load_stationary", "tensor", src0=s, op="nisa.nc_matmul")
    index = len(trace.instructions)
    out = _result((mm, n), _trace.FLOAT32, "psum", "nc_matmul", index)
    trace.emit("multiply_moving", "tensor", dst=out.full, src0=m, src1=s, op="nisa.nc_matmul")
    if trace.numerics:
        out.data[...] = data_of(s).astype(np.float32).T @ data_of(m).astype(np.float32)
    return out


def nc_transpose(data, engine="tensor", **unsupported):
    """[P, F] -> [F, P]; on the Tensor engine (into PSUM) or the Vector engine (32x32)."""
    if unsupported:
        raise UnsupportedError(f"nki: nisa.nc_transpose arguments {sorted(unsupported)}")
    v = _onchip(data, "nc_transpose data")
    memory = "psum" if engine == "tensor" else "sbuf"
    values = data_of(v).T if data_of(v) is not None else None
    return _emit_into(None, v.shape[::-1], v.tile.dtype, memory, "nc_transpose", "nc_transpose",
                      engine, values, src0=v)


def tensor_copy(src, dst=None, dtype=None, engine="vector"):
    v = _onchip(src, "tensor_copy src")
    dt = dtype or v.tile.dtype
    return _emit_into(dst, v.shape, dt, "sbuf", "tensor_copy", "tensor_copy", engine, data_of(v),
                      src0=v)


def tensor_tensor(data1, data2, op, dst=None, dtype=None):
    a, b = _onchip(data1, "tensor_tensor data1"), _onchip(data2, "tensor_tensor data2")
    alu = _alu(op, "tensor_tensor")
    op = _np_op(op)
    values = op(data_of(a), data_of(b)) if data_of(a) is not None else None
    return _emit_into(dst, a.shape, dtype or a.tile.dtype, "sbuf", "tensor_tensor",
                      "tensor_tensor", "vector", values, src0=a, src1=b, op0=alu)


def tensor_scalar(data, op0, operand0, reverse0=False, op1=None, operand1=None, dst=None,
                  dtype=None, engine="vector"):
    v = _onchip(data, "tensor_scalar data")
    if reverse0:
        raise UnsupportedError("nki: nisa.tensor_scalar(reverse0=True)")
    a0 = _alu(op0, "tensor_scalar op0")
    a1 = _alu(op1, "tensor_scalar op1") if op1 is not None else "bypass"
    op0, op1 = _np_op(op0), _np_op(op1) if op1 is not None else None
    values = None
    if data_of(v) is not None:
        values = op0(data_of(v), operand0)
        if op1 is not None:
            values = op1(values, operand1)
    return _emit_into(dst, v.shape, dtype or v.tile.dtype, "sbuf", "tensor_scalar",
                      "tensor_scalar", engine, values, src0=v, op0=a0, op1=a1,
                      imm0=float(operand0), imm1=float(operand1 or 0.0))


def activation(op, data, bias=None, scale=1.0, dst=None, dtype=None):
    """dst = op(data * scale + bias) on the Scalar engine; scale and bias are scalars here."""
    op = _np_op(op)
    if op not in _ACTIVATION:
        raise UnsupportedError(f"nki: nisa.activation op {getattr(op, '__name__', op)!r} "
                               f"(supported: {sorted(n for n, _ in _ACTIVATION.values())})")
    if bias is not None and not isinstance(bias, (int, float)):
        raise UnsupportedError("nki: nisa.activation with a tile bias (scalars only)")
    name, fn = _ACTIVATION[op]
    v = _onchip(data, "activation data")
    values = fn(data_of(v) * scale + (bias or 0.0)) if data_of(v) is not None else None
    return _emit_into(dst, v.shape, dtype or v.tile.dtype, "sbuf", "activation", "activation",
                      "scalar", values, src0=v, func=name, imm0=float(scale),
                      imm1=float(bias or 0.0))


def tensor_reduce(op, data, axis, keepdims=False, dst=None, dtype=None):
    """Reduces every free dim (axis 1.. of a [P, F...] tile) into [P, 1]."""
    v = _onchip(data, "tensor_reduce data")
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    if 0 in axes or sorted(axes) != list(range(1, len(v.shape))):
        raise UnsupportedError(f"nki: tensor_reduce over axis {axis} (only all free dims, "
                               f"1..{len(v.shape) - 1})")
    op = _np_op(op)
    if op not in _REDUCE:
        raise UnsupportedError(f"nki: tensor_reduce op {getattr(op, '__name__', op)!r}")
    name, fn = _REDUCE[op]
    values = fn(data_of(v), axis=axes, keepdims=True) if data_of(v) is not None else None
    return _emit_into(dst, (v.shape[0], 1), dtype or v.tile.dtype, "sbuf", "tensor_reduce",
                      "tensor_reduce", "vector", values, src0=v, op0=name)


def memset(shape, value, dtype, dst=None, buffer="sbuf"):
    values = np.full(_shape2(shape), value)
    return _emit_into(dst, shape, dtype, buffer, "memset", "memset", "vector", values,
                      imm0=float(value))


def _unsupported(name):
    def f(*args, **kwargs):
        raise UnsupportedError(f"nki: nisa.{name} is not supported yet by trnscope.nki")

    f.__name__ = name
    return f


iota = _unsupported("iota")
bn_stats = _unsupported("bn_stats")
bn_aggr = _unsupported("bn_aggr")
