"""nki.isa (nisa): the engine instructions, run on numpy and recorded by the tracer.

Supported: dma_copy, nc_matmul, nc_transpose, tensor_copy, tensor_tensor,
tensor_scalar, activation, tensor_reduce, memset. Others raise UnsupportedError
naming them (docs/device_model.md lists the subset).

Note [NKI dialects]
Both of NKI's calling conventions are accepted. The old one (NKI 0.1) returns a
new tile: `t = nisa.tensor_copy(src)`. The new one (NKI 0.2+) passes the result
tile first and returns None: `nisa.tensor_copy(dst, src)` or `(dst=..., src=...)`.
Each instruction tells them apart by its positional arguments (is the first one
a tile where the old form takes something else, or are there more tiles than
the old form takes), and `dst=` given as a keyword always means "write here".
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


def _is_tile(x) -> bool:
    return isinstance(x, (Tile, _trace.TileView, _trace.Tensor, _trace.HbmView))


def _bind(fn: str, args, kwargs, old: tuple, new: tuple, is_new) -> dict:
    """Names the positional `args` by the old or the new convention (Note [NKI dialects])."""
    names = new if "dst" not in kwargs and args and is_new(args) else old
    if len(args) > len(names):
        raise NkiError(f"nki: nisa.{fn} takes at most {len(names)} positional arguments "
                       f"({', '.join(names)}), got {len(args)}")
    bound = dict(zip(names, args))
    for k in bound:
        if k in kwargs:
            raise NkiError(f"nki: nisa.{fn} got {k!r} twice")
    bound.update(kwargs)
    bound.pop("name", None)  # NKI's instruction names only label the compiler's output
    return bound


def _onchip(x, what: str):
    v = as_view(x, what)
    if isinstance(v, _trace.HbmView):
        raise NkiError(f"nki: {what} is in HBM; compute engines read SBUF or PSUM "
                       "(load it with nl.load)")
    return v


def _shape2(shape):
    return tuple(shape) if len(shape) >= 2 else (shape[0], 1)


def _result(shape, dtype, memory: str, what: str) -> Tile:
    """A new tile for an instruction's result; its `producer` is set once emitted (taking
    its block or reloading an operand may emit spill DMAs first, Note [SBUF spill])."""
    return Tile(current(), _shape2(shape), _trace.dtype_of(dtype), memory, what)


def _write(dst, values, what: str):
    """Writes numpy `values` into dst (a Tile or TileView)."""
    v = as_view(dst, what)
    if v.tile.trace.numerics:
        v.write(values)


def _emit_into(dst, shape, dtype, memory, what, opcode, engine, values, **fields):
    """Emits one instruction writing `dst` (or a new tile), with its numpy values."""
    trace = current()
    if dst is None:
        out = _result(shape, dtype, memory, what)
        out.producer = trace.emit(opcode, engine, dst=out.full, op=what, **fields)
        if trace.numerics:
            out.data[...] = out.dtype.cast(values).reshape(out.shape)
        return out
    view = as_view(dst, what)
    trace.emit(opcode, engine, dst=view, op=what, **fields)
    _write(view, values, what)
    return dst


def dma_copy(dst=None, src=None, mask=None, **unsupported):
    """dst = src, between HBM and SBUF (or SBUF and SBUF)."""
    unsupported.pop("name", None)
    if mask is not None:
        unsupported["mask"] = mask
    if dst is None or src is None:
        raise NkiError("nki: nisa.dma_copy needs dst and src")
    if unsupported:
        raise UnsupportedError(f"nki: nisa.dma_copy arguments {sorted(unsupported)}")
    d, s = as_view(dst, "dma_copy dst"), as_view(src, "dma_copy src")
    if isinstance(s, _trace.TileView) and s.tile.memory == "psum":
        raise NkiError("nki: dma_copy cannot read PSUM; copy the tile to SBUF first "
                       "(nisa.tensor_copy)")
    if int(np.prod(d.shape)) != int(np.prod(s.shape)):
        raise NkiError(f"nki: dma_copy: dst {list(d.shape)} and src {list(s.shape)} differ in size")
    trace = current()
    trace.emit("dma_copy", "dma", dst=d, src0=s, op="nisa.dma_copy")
    if trace.numerics:
        d.write(data_of(s)) if isinstance(d, _trace.HbmView) else _write(d, data_of(s), "dma_copy")


def nc_matmul(*args, **kwargs):
    """stationary [K, M] and moving [K, N] (SBUF) -> PSUM float32 [M, N] =
    stationary.T @ moving. Old form: returns a new PSUM tile (`psum += nisa.nc_matmul(s, m)`
    accumulates). New form `nc_matmul(dst, stationary, moving, accumulate=None)`: the
    first matmul into a PSUM tile overwrites it and later ones accumulate, unless
    `accumulate` says otherwise."""
    b = _bind("nc_matmul", args, kwargs, ("stationary", "moving"), ("dst", "stationary", "moving"),
              lambda a: len(a) == 3)
    dst, accumulate = b.pop("dst", None), b.pop("accumulate", None)
    stationary, moving = b.pop("stationary", None), b.pop("moving", None)
    if stationary is None or moving is None:
        raise NkiError("nki: nisa.nc_matmul needs stationary and moving")
    if b:
        raise UnsupportedError(f"nki: nisa.nc_matmul arguments {sorted(b)}")
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
    values = None
    if trace.numerics:
        values = data_of(s).astype(np.float32).T @ data_of(m).astype(np.float32)
    if dst is not None:
        d = as_view(dst, "nc_matmul dst")
        if not isinstance(d, _trace.TileView) or d.tile.memory != "psum":
            raise NkiError("nki: nc_matmul writes a PSUM tile (nl.ndarray(..., buffer=nl.psum))")
        if tuple(x for x in d.shape if x != 1) != tuple(x for x in (mm, n) if x != 1):
            raise NkiError(f"nki: nc_matmul: dst {list(d.shape)} is not the result's shape "
                           f"[{mm}, {n}]")
        t = d.tile
        acc = (t.matmul_written and not t.pending_zero) if accumulate is None else bool(accumulate)
        trace.emit("load_stationary", "tensor", src0=s, op="nisa.nc_matmul")
        trace.emit("multiply_moving", "tensor", dst=d, src0=m, src1=s, accumulate=acc,
                   op="nisa.nc_matmul")
        if trace.numerics:
            prev = d.read().astype(np.float32) if acc else 0.0
            _write(d, prev + values.reshape(d.shape), "nc_matmul")
        t.matmul_written, t.pending_zero = True, False
        return None
    trace.emit("load_stationary", "tensor", src0=s, op="nisa.nc_matmul")
    out = _result((mm, n), _trace.FLOAT32, "psum", "nc_matmul")
    out.producer = trace.emit("multiply_moving", "tensor", dst=out.full, src0=m, src1=s,
                              op="nisa.nc_matmul")
    if trace.numerics:
        out.data[...] = values
    return out


def nc_transpose(*args, **kwargs):
    """[P, F] -> [F, P]; on the Tensor engine (into PSUM) or the Vector engine (32x32)."""
    b = _bind("nc_transpose", args, kwargs, ("data",), ("dst", "data"), lambda a: len(a) == 2)
    dst, data, engine = b.pop("dst", None), b.pop("data", None), b.pop("engine", "tensor")
    dtype = b.pop("dtype", None)
    if b:
        raise UnsupportedError(f"nki: nisa.nc_transpose arguments {sorted(b)}")
    engine = _engine(engine, "tensor")
    v = _onchip(data, "nc_transpose data")
    memory = "psum" if engine == "tensor" else "sbuf"
    values = data_of(v).T if data_of(v) is not None else None
    return _emit_into(dst, v.shape[::-1], dtype or v.tile.dtype, memory, "nc_transpose",
                      "nc_transpose", engine, values, src0=v)


def _engine(engine, default: str) -> str:
    """An engine given as NKI's enum/alias or a name -> core's engine name."""
    name = getattr(engine, "name", engine) or default
    return default if name == "unknown" else name


def tensor_copy(*args, **kwargs):
    """dst = src cast to dst's dtype (old form: a new SBUF tile of `dtype`)."""
    b = _bind("tensor_copy", args, kwargs, ("src",), ("dst", "src"), lambda a: len(a) == 2)
    dst, src, dtype = b.pop("dst", None), b.pop("src", None), b.pop("dtype", None)
    engine = _engine(b.pop("engine", "vector"), "vector")
    if b:
        raise UnsupportedError(f"nki: nisa.tensor_copy arguments {sorted(b)}")
    v = _onchip(src, "tensor_copy src")
    dt = dtype or v.tile.dtype
    return _emit_into(dst, v.shape, dt, "sbuf", "tensor_copy", "tensor_copy", engine, data_of(v),
                      src0=v)


def tensor_tensor(*args, **kwargs):
    """dst = data1 op data2, elementwise on the Vector engine."""
    b = _bind("tensor_tensor", args, kwargs, ("data1", "data2", "op"),
              ("dst", "data1", "data2", "op"), lambda a: len(a) == 4)
    dst, dtype = b.pop("dst", None), b.pop("dtype", None)
    data1, data2, op = b.pop("data1", None), b.pop("data2", None), b.pop("op", None)
    b.pop("engine", None)
    if b:
        raise UnsupportedError(f"nki: nisa.tensor_tensor arguments {sorted(b)}")
    a, c = _onchip(data1, "tensor_tensor data1"), _onchip(data2, "tensor_tensor data2")
    if a.tile.memory == "psum" and c.tile.memory == "psum":
        raise NkiError("nki: tensor_tensor: data1 and data2 may not both be in PSUM")
    alu = _alu(op, "tensor_tensor")
    op = _np_op(op)
    values = op(data_of(a), data_of(c)) if data_of(a) is not None else None
    return _emit_into(dst, a.shape, dtype or a.tile.dtype, "sbuf", "tensor_tensor",
                      "tensor_tensor", "vector", values, src0=a, src1=c, op0=alu)


def tensor_scalar(*args, **kwargs):
    """dst = (data op0 operand0) op1 operand1, operands scalars (Vector engine)."""
    b = _bind("tensor_scalar", args, kwargs,
              ("data", "op0", "operand0", "reverse0", "op1", "operand1", "reverse1"),
              ("dst", "data", "op0", "operand0", "reverse0", "op1", "operand1", "reverse1"),
              lambda a: len(a) >= 2 and _is_tile(a[1]))
    dst, data, dtype = b.pop("dst", None), b.pop("data", None), b.pop("dtype", None)
    op0, operand0, op1 = b.pop("op0", None), b.pop("operand0", None), b.pop("op1", None)
    operand1 = b.pop("operand1", None)
    engine = _engine(b.pop("engine", "vector"), "vector")
    if b.pop("reverse0", False) or b.pop("reverse1", False):
        raise UnsupportedError("nki: nisa.tensor_scalar(reverse0/reverse1=True)")
    if b:
        raise UnsupportedError(f"nki: nisa.tensor_scalar arguments {sorted(b)}")
    for x in (operand0, operand1):
        if x is not None and not isinstance(x, (int, float, np.number)):
            raise UnsupportedError("nki: nisa.tensor_scalar with a tile operand (scalars only)")
    v = _onchip(data, "tensor_scalar data")
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


def activation(*args, **kwargs):
    """dst = op(data * scale + bias) on the Scalar engine; scale and bias are scalars here."""
    b = _bind("activation", args, kwargs, ("op", "data", "bias", "scale"),
              ("dst", "op", "data", "bias", "scale"), lambda a: _is_tile(a[0]))
    dst, op, data, dtype = b.pop("dst", None), b.pop("op", None), b.pop("data", None), b.pop(
        "dtype", None)
    bias, scale = b.pop("bias", None), b.pop("scale", 1.0)
    if b:
        raise UnsupportedError(f"nki: nisa.activation arguments {sorted(b)}")
    op = _np_op(op)
    if op not in _ACTIVATION:
        raise UnsupportedError(f"nki: nisa.activation op {getattr(op, '__name__', op)!r} "
                               f"(supported: {sorted(n for n, _ in _ACTIVATION.values())})")
    if bias is not None and not isinstance(bias, (int, float)):
        raise UnsupportedError("nki: nisa.activation with a tile bias (scalars only)")
    if not isinstance(scale, (int, float)):
        raise UnsupportedError("nki: nisa.activation with a tile scale (scalars only)")
    name, fn = _ACTIVATION[op]
    v = _onchip(data, "activation data")
    values = fn(data_of(v) * scale + (bias or 0.0)) if data_of(v) is not None else None
    return _emit_into(dst, v.shape, dtype or v.tile.dtype, "sbuf", "activation", "activation",
                      "scalar", values, src0=v, func=name, imm0=float(scale),
                      imm1=float(bias or 0.0))


def tensor_reduce(*args, **kwargs):
    """Reduces every free dim (axis 1.. of a [P, F...] tile) into [P, 1]."""
    b = _bind("tensor_reduce", args, kwargs, ("op", "data", "axis"), ("dst", "op", "data", "axis"),
              lambda a: _is_tile(a[0]))
    dst, op, data, axis = b.pop("dst", None), b.pop("op", None), b.pop("data", None), b.pop(
        "axis", None)
    dtype, keepdims, negate = b.pop("dtype", None), b.pop("keepdims", False), b.pop("negate", False)
    if b:
        raise UnsupportedError(f"nki: nisa.tensor_reduce arguments {sorted(b)}")
    v = _onchip(data, "tensor_reduce data")
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    if 0 in axes or sorted(axes) != list(range(1, len(v.shape))):
        raise UnsupportedError(f"nki: tensor_reduce over axis {axis} (only all free dims, "
                               f"1..{len(v.shape) - 1})")
    if negate:
        raise UnsupportedError("nki: nisa.tensor_reduce(negate=True)")
    op = _np_op(op)
    if op not in _REDUCE:
        raise UnsupportedError(f"nki: tensor_reduce op {getattr(op, '__name__', op)!r}")
    name, fn = _REDUCE[op]
    values = fn(data_of(v), axis=axes, keepdims=True) if data_of(v) is not None else None
    return _emit_into(dst, (v.shape[0], 1), dtype or v.tile.dtype, "sbuf", "tensor_reduce",
                      "tensor_reduce", "vector", values, src0=v, op0=name)


def memset(*args, **kwargs):
    """Fills dst (new form `memset(dst, value)`) or a new tile (old `memset(shape, value,
    dtype)`) with `value`, on the Vector engine."""
    b = _bind("memset", args, kwargs, ("shape", "value", "dtype"), ("dst", "value"),
              lambda a: _is_tile(a[0]))
    dst, value = b.pop("dst", None), b.pop("value", None)
    shape, dtype, buffer = b.pop("shape", None), b.pop("dtype", None), b.pop("buffer", "sbuf")
    b.pop("engine", None)
    if b:
        raise UnsupportedError(f"nki: nisa.memset arguments {sorted(b)}")
    if dst is not None:
        view = as_view(dst, "memset dst")
        shape, dtype = view.shape, view.tile.dtype
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


class _Engine:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"nisa.engine.{self.name}"


class engine:  # noqa: N801 (NKI's enum)
    tensor, vector, scalar, gpsimd, sync, unknown = (
        _Engine(n) for n in ("tensor", "vector", "scalar", "gpsimd", "sync", "unknown"))


tensor_engine, vector_engine, scalar_engine = engine.tensor, engine.vector, engine.scalar
gpsimd_engine, unknown_engine = engine.gpsimd, engine.unknown
