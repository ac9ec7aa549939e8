"""nki.isa (nisa): the engine instructions, run on numpy and recorded by the tracer.

Supported: dma_copy, nc_matmul, nc_transpose, tensor_copy, tensor_tensor,
tensor_scalar (number or [P, 1] tile operands), activation (number or [P, 1] bias and
scale), activation_reduce, tensor_reduce (any free axes), memset, iota, bn_stats,
bn_aggr, affine_select, all with mask=. Others raise UnsupportedError naming them
(docs/device_model.md lists the subset).

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
from trnscope.nki._trace import NkiError, Tile, UnsupportedError, View, as_view, current

_GEMM_MOVING_FMAX = 512
_GEMM_STATIONARY_FMAX = 128

# numpy / nl functions -> the ALU ops and activation functions of core/isa.
_ALU = {np.add: "add", np.subtract: "subtract", np.multiply: "multiply", np.divide: "divide",
        np.maximum: "max", np.minimum: "min", np.power: "pow"}
_REDUCE = {np.add: ("add", np.sum), np.maximum: ("max", np.max), np.minimum: ("min", np.min),
           np.multiply: ("multiply", np.prod)}
_REDUCE.update({np.sum: _REDUCE[np.add], np.max: _REDUCE[np.maximum], np.min: _REDUCE[np.minimum],
                np.prod: _REDUCE[np.multiply], np.amax: _REDUCE[np.maximum],
                np.amin: _REDUCE[np.minimum]})


def _gelu(x):
    from math import erf, sqrt

    return 0.5 * x * (1 + np.vectorize(erf)(x / sqrt(2)))


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _rsqrt(x):
    return 1 / np.sqrt(x)


def _relu(x):
    return np.maximum(x, 0)


def _silu(x):
    return x * _sigmoid(x)


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))


def _copy(x):
    return x


_ACTIVATION = {
    np.exp: ("exp", np.exp), np.log: ("log", np.log), np.tanh: ("tanh", np.tanh),
    np.sqrt: ("sqrt", np.sqrt), np.square: ("square", np.square),
    np.reciprocal: ("reciprocal", np.reciprocal), _rsqrt: ("rsqrt", _rsqrt),
    _sigmoid: ("sigmoid", _sigmoid), _relu: ("relu", _relu), _gelu: ("gelu", _gelu),
    _silu: ("silu", _silu), _gelu_tanh: ("gelu_apprx_tanh", _gelu_tanh), _copy: ("copy", _copy),
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
    return isinstance(x, (Tile, View, _trace.Tensor))


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


def _take(bound: dict, fn: str, *names):
    """The named arguments (None when absent); any other one is unsupported."""
    values = [bound.pop(k, None) for k in names]
    if bound:
        raise UnsupportedError(f"nki: nisa.{fn} arguments {sorted(bound)}")
    return values


def _onchip(x, what: str) -> View:
    v = as_view(x, what)
    if isinstance(v.base, _trace.Tensor):
        raise NkiError(f"nki: {what} is in HBM; compute engines read SBUF or PSUM "
                       "(load it with nl.load)")
    return v


def _shape2(shape):
    return tuple(shape) if len(shape) >= 2 else ((shape[0], 1) if shape else (1, 1))


def _mask_ranges(mask, shape, what):
    if mask is None:
        return [(0, n) for n in shape]
    if not isinstance(mask, _trace.Predicate):
        raise NkiError(f"nki: {what}: mask= takes a predicate of index expressions "
                       f"(i_p < n), got {type(mask).__name__}")
    return mask.ranges(shape, what)


def _cut(v: View, mask, what):
    """The part of `v` the mask keeps (None: nothing)."""
    if mask is None:
        return v
    r = _mask_ranges(mask, v.shape, what)
    return None if r is None else v.clip(r)


def _op(what, opcode, engine, dst, srcs, shape, dtype, memory, fn, mask=None, scalars=None,
        **fields):
    """Emits one instruction: reads the views `srcs` (src0[, src1]), writes `dst` (or a
    new tile of `shape`); `fn(*arrays)` computes its values. A mask cuts every operand
    to the box it keeps (on the axes the operand shares with it)."""
    trace = current()
    out = None
    if dst is None:
        out = Tile(trace, _shape2(shape), _trace.dtype_of(dtype), memory, what)
        d = out.full
    else:
        d = as_view(dst, f"{what} dst")
        if isinstance(d.base, _trace.Tensor) and opcode != "dma_copy":
            raise NkiError(f"nki: {what} writes SBUF or PSUM, not HBM (store with nl.store)")
    full_shape = d.shape
    ranges = None
    if mask is not None:
        ranges = _mask_ranges(mask, d.shape, what)
        cut = [None if (v := _cut(s, mask, what)) is None else v for s in srcs]
        if ranges is None or any(c is None for c in cut):
            return out if out is not None else dst  # masked away: no instruction
        d, srcs = d.clip(ranges), cut
    if mask is not None and scalars is not None:
        scalars = _cut(scalars, mask, what)
    for name, v in zip(("src0", "src1"), srcs):
        v.check(f"{what} {name}")
    if scalars is not None:
        scalars.check(f"{what} scalars")
    d.check(f"{what} dst")
    index = trace.emit(opcode, engine, dst=d, src0=srcs[0] if srcs else None,
                       src1=srcs[1] if len(srcs) > 1 else scalars, op=what, **fields)
    if trace.numerics:
        with np.errstate(all="ignore"):  # rows a mask left unloaded hold zeros
            values = fn(*[v.read() for v in srcs], *([scalars.read()] if scalars is not None else []))
        d.write(values)
    if out is not None:
        out.producer = index
        out._src0 = srcs[0] if opcode == "dma_copy" else None
        out.producer_clip = ranges if ranges != [(0, n) for n in full_shape] else None
        return out
    return dst


def dma_copy(*args, **kwargs):
    """dst = src, between HBM and SBUF (or SBUF and SBUF)."""
    b = _bind("dma_copy", args, kwargs, ("dst", "src"), ("dst", "src"), lambda a: True)
    dst, src, mask = b.pop("dst", None), b.pop("src", None), b.pop("mask", None)
    b.pop("dge_mode", None)
    if dst is None or src is None:
        raise NkiError("nki: nisa.dma_copy needs dst and src")
    if b:
        raise UnsupportedError(f"nki: nisa.dma_copy arguments {sorted(b)}")
    d, s = as_view(dst, "dma_copy dst"), as_view(src, "dma_copy src")
    if s.memory == "psum":
        raise NkiError("nki: dma_copy cannot read PSUM; copy the tile to SBUF first "
                       "(nisa.tensor_copy)")
    if d.numel != s.numel:
        raise NkiError(f"nki: dma_copy: dst {list(d.shape)} and src {list(s.shape)} differ in size")
    if d.shape != s.shape:
        s = s.reshape(d.shape) if _trace._dense(s.shape, s.strides) else s
    _op("nisa.dma_copy", "dma_copy", "dma", d, [s], None, None, None, lambda x: x, mask=mask)


def _matmul_values(s, m):
    return s.astype(np.float32).T @ m.astype(np.float32)


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
    mask = b.pop("mask", None)
    for k in ("is_stationary_onezero", "is_moving_onezero", "is_transpose", "perf_mode"):
        if b.get(k) in (False, None, "none"):
            b.pop(k, None)
    if stationary is None or moving is None:
        raise NkiError("nki: nisa.nc_matmul needs stationary and moving")
    if b:
        raise UnsupportedError(f"nki: nisa.nc_matmul arguments {sorted(b)}")
    s, m = _onchip(stationary, "nc_matmul stationary"), _onchip(moving, "nc_matmul moving")
    if mask is not None:
        s, m = _cut(s, mask, "nc_matmul"), _cut(m, mask, "nc_matmul")
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
    s.check("nc_matmul stationary")
    m.check("nc_matmul moving")
    trace = current()
    values = _matmul_values(s.read(), m.read()) if trace.numerics else None
    if dst is not None:
        d = as_view(dst, "nc_matmul dst")
        if d.memory != "psum":
            raise NkiError("nki: nc_matmul writes a PSUM tile (nl.ndarray(..., buffer=nl.psum))")
        if tuple(x for x in d.shape if x != 1) != tuple(x for x in (mm, n) if x != 1):
            raise NkiError(f"nki: nc_matmul: dst {list(d.shape)} is not the result's shape "
                           f"[{mm}, {n}]")
        t = d.base
        acc = (t.matmul_written and not t.pending_zero) if accumulate is None else bool(accumulate)
        trace.emit("load_stationary", "tensor", src0=s, op="nisa.nc_matmul")
        trace.emit("multiply_moving", "tensor", dst=d, src0=m, src1=s, accumulate=acc,
                   op="nisa.nc_matmul")
        if trace.numerics:
            prev = d.read().astype(np.float32) if acc else 0.0
            d.write(prev + values.reshape(d.shape))
        t.matmul_written, t.pending_zero = True, False
        return None
    trace.emit("load_stationary", "tensor", src0=s, op="nisa.nc_matmul")
    out = Tile(trace, (mm, n), _trace.FLOAT32, "psum", "nc_matmul")
    out.producer = trace.emit("multiply_moving", "tensor", dst=out.full, src0=m, src1=s,
                              op="nisa.nc_matmul")
    if trace.numerics:
        out.full.write(values)
    return out


def nc_transpose(*args, **kwargs):
    """[P, F] -> [F, P]; on the Tensor engine (into PSUM) or the Vector engine (32x32)."""
    b = _bind("nc_transpose", args, kwargs, ("data",), ("dst", "data"), lambda a: len(a) == 2)
    dst, data, engine = b.pop("dst", None), b.pop("data", None), b.pop("engine", "tensor")
    dtype, mask = b.pop("dtype", None), b.pop("mask", None)
    if b:
        raise UnsupportedError(f"nki: nisa.nc_transpose arguments {sorted(b)}")
    engine = _engine(engine, "tensor")
    v = _onchip(data, "nc_transpose data")
    if len(v.shape) != 2:
        raise NkiError(f"nki: nc_transpose takes a 2-D tile, got {list(v.shape)}")
    memory = "psum" if engine == "tensor" else "sbuf"
    return _op("nc_transpose", "nc_transpose", engine, dst, [v], v.shape[::-1],
               dtype or v.dtype, memory, lambda x: x.T, mask=mask)


def _engine(engine, default: str) -> str:
    """An engine given as NKI's enum/alias or a name -> core's engine name."""
    name = getattr(engine, "name", engine) or default
    return default if name == "unknown" else name


def tensor_copy(*args, **kwargs):
    """dst = src cast to dst's dtype (old form: a new SBUF tile of `dtype`)."""
    b = _bind("tensor_copy", args, kwargs, ("src",), ("dst", "src"), lambda a: len(a) == 2)
    dst, src, dtype, mask = b.pop("dst", None), b.pop("src", None), b.pop("dtype", None), b.pop(
        "mask", None)
    engine = _engine(b.pop("engine", "vector"), "vector")
    what = b.pop("_what", "tensor_copy")
    if b:
        raise UnsupportedError(f"nki: nisa.tensor_copy arguments {sorted(b)}")
    v = _onchip(src, "tensor_copy src")
    if dst is not None:
        d = as_view(dst, "tensor_copy dst")
        if d.numel != v.numel:
            raise NkiError(f"nki: tensor_copy: dst {list(d.shape)} and src {list(v.shape)} differ "
                           "in size")
        if d.shape != v.shape and mask is None:
            v = _reshaped(v, d.shape)
    return _op(what, "tensor_copy", engine, dst, [v], v.shape, dtype or v.dtype, "sbuf",
               lambda x: x, mask=mask)


def _reshaped(v: View, shape) -> View:
    """v seen in `shape` (same size) when its layout allows; else v (numel-equal copies)."""
    try:
        return reshape(v, shape)
    except (NkiError, UnsupportedError):
        return v


def _is_scalar(x) -> bool:
    return isinstance(x, (int, float, np.number)) and not isinstance(x, bool)


def _column(x, data: View, what: str):
    """A per-partition scalar operand ([P, 1] tile) as a view, or None for a number."""
    if _is_scalar(x):
        return None
    v = _onchip(x, what)
    if v.numel != data.shape[0] or (len(v.shape) > 1 and v.shape[0] != data.shape[0]):
        raise NkiError(f"nki: {what}: a tile operand holds one scalar per partition, "
                       f"[{data.shape[0]}, 1]; got {list(v.shape)}")
    return v.reshape((data.shape[0], 1)) if v.shape != (data.shape[0], 1) else v


def tensor_tensor(*args, **kwargs):
    """dst = data1 op data2, elementwise on the Vector engine."""
    b = _bind("tensor_tensor", args, kwargs, ("data1", "data2", "op"),
              ("dst", "data1", "data2", "op"), lambda a: len(a) == 4)
    dst, dtype, mask = b.pop("dst", None), b.pop("dtype", None), b.pop("mask", None)
    data1, data2, op = b.pop("data1", None), b.pop("data2", None), b.pop("op", None)
    engine = _engine(b.pop("engine", "vector"), "vector")
    if b:
        raise UnsupportedError(f"nki: nisa.tensor_tensor arguments {sorted(b)}")
    a, c = _onchip(data1, "tensor_tensor data1"), _onchip(data2, "tensor_tensor data2")
    if a.memory == "psum" and c.memory == "psum":
        raise NkiError("nki: tensor_tensor: data1 and data2 may not both be in PSUM")
    if a.numel != c.numel:
        raise NkiError(f"nki: tensor_tensor: data1 {list(a.shape)} and data2 {list(c.shape)} "
                       "differ in shape (broadcast a [P, 1] operand with nisa.tensor_scalar, "
                       "partitions with .broadcast_to)")
    if a.shape != c.shape:
        c = _reshaped(c, a.shape)
    alu = _alu(op, "tensor_tensor")
    fn = _np_op(op)
    return _op("tensor_tensor", "tensor_tensor", engine, dst, [a, c], a.shape, dtype or a.dtype,
               "sbuf", lambda x, y: fn(x, y.reshape(x.shape)), mask=mask, op0=alu)


def tensor_scalar(*args, **kwargs):
    """dst = (data op0 operand0) op1 operand1 on the Vector engine; each operand is a
    number or a [P, 1] tile (one scalar per partition)."""
    b = _bind("tensor_scalar", args, kwargs,
              ("data", "op0", "operand0", "reverse0", "op1", "operand1", "reverse1"),
              ("dst", "data", "op0", "operand0", "reverse0", "op1", "operand1", "reverse1"),
              lambda a: len(a) >= 2 and _is_tile(a[1]))
    dst, data, dtype, mask = b.pop("dst", None), b.pop("data", None), b.pop("dtype", None), b.pop(
        "mask", None)
    op0, operand0, op1 = b.pop("op0", None), b.pop("operand0", None), b.pop("op1", None)
    operand1 = b.pop("operand1", None)
    reverse0, reverse1 = bool(b.pop("reverse0", False)), bool(b.pop("reverse1", False))
    engine = _engine(b.pop("engine", "vector"), "vector")
    if b:
        raise UnsupportedError(f"nki: nisa.tensor_scalar arguments {sorted(b)}")
    v = _onchip(data, "tensor_scalar data")
    steps = [(op0, operand0, reverse0)] + ([(op1, operand1, reverse1)] if op1 is not None else [])
    return _scalar_steps(v, steps, dst, dtype, mask, engine)


def _scalar_steps(v: View, steps, dst, dtype, mask, engine="vector"):
    """tensor_scalar instructions for `steps` [(op, operand, reverse)]: one instruction
    for up to two steps with at most one distinct tile operand; a reversed step
    (operand op x) is x * -1 + operand for subtract, else unsupported."""
    norm = []
    for op, operand, rev in steps:
        fn = _np_op(op)
        if rev:
            if fn is np.subtract:
                norm += [(np.multiply, -1.0), (np.add, operand)]
                continue
            if fn in (np.add, np.multiply, np.maximum, np.minimum):
                norm.append((fn, operand))
                continue
            raise UnsupportedError(f"nki: reversed tensor_scalar {getattr(fn, '__name__', fn)} "
                                   "(only subtract and commutative ops)")
        norm.append((fn, operand))
    out = None
    while norm:
        pair, norm = norm[:2], norm[2:]
        cols = [_column(x, v, "tensor_scalar operand") for _, x in pair]
        tiles = [c for c in cols if c is not None]
        if len(tiles) == 2 and not tiles[0].same(tiles[1]):
            pair, norm = pair[:1], pair[1:] + norm  # two tile operands: two instructions
            cols, tiles = cols[:1], tiles[:1]
        alus = [_alu(fn, "tensor_scalar") for fn, _ in pair]
        value = sum(1 << i for i, c in enumerate(cols) if c is not None)
        imms = [0.0 if c is not None else float(x) for (_, x), c in zip(pair, cols)]
        def fn(x, *col, pair=pair, cols=cols):
            for (f, operand), c in zip(pair, cols):
                x = f(x, _bcast_np(col[0], x.ndim) if c is not None else operand)
            return x

        last = not norm
        res = _op("tensor_scalar", "tensor_scalar", engine, dst if last else None, [v],
                  v.shape, dtype or v.dtype, "sbuf", fn, mask=mask,
                  scalars=tiles[0] if tiles else None,
                  op0=alus[0], op1=alus[1] if len(alus) > 1 else "bypass",
                  imm0=imms[0], imm1=imms[1] if len(imms) > 1 else 0.0, value=value)
        out = res
        if not last:
            v = res.full
    return out


def activation(*args, **kwargs):
    """dst = op(data * scale + bias) on the Scalar engine; bias and scale are numbers
    or [P, 1] tiles."""
    b = _bind("activation", args, kwargs, ("op", "data", "bias", "scale"),
              ("dst", "op", "data", "bias", "scale"), lambda a: _is_tile(a[0]))
    dst, op, data, dtype = b.pop("dst", None), b.pop("op", None), b.pop("data", None), b.pop(
        "dtype", None)
    bias, scale, mask = b.pop("bias", None), b.pop("scale", 1.0), b.pop("mask", None)
    reduce = (b.pop("reduce_op", None), b.pop("reduce_res", None), b.pop("reduce_cmd", None))
    if b:
        raise UnsupportedError(f"nki: nisa.activation arguments {sorted(b)}")
    out = _activation(op, data, bias, scale, dst, dtype, mask)
    if reduce[1] is not None:
        _reduce_into(reduce[0] or np.add, out, reduce[1], mask)
    return out


def _activation(op, data, bias, scale, dst, dtype, mask):
    fn_op = _np_op(op)
    if fn_op not in _ACTIVATION:
        raise UnsupportedError(f"nki: nisa.activation op {getattr(fn_op, '__name__', fn_op)!r} "
                               f"(supported: {sorted(n for n, _ in _ACTIVATION.values())})")
    name, fn = _ACTIVATION[fn_op]
    v = _onchip(data, "activation data")
    bcol = _column(bias, v, "activation bias") if bias is not None else None
    scol = _column(scale, v, "activation scale")
    if bcol is not None and scol is not None and not bcol.same(scol):
        # One per-partition operand per instruction: scale first, then the function.
        v = tensor_scalar(v, np.multiply, scale).full
        scale, scol = 1.0, None
    col = bcol if bcol is not None else scol
    value = (1 if bcol is not None else 0) | (2 if scol is not None else 0)
    nd = len(v.shape)

    def values(x, *c):
        s = _bcast_np(c[0], nd) if scol is not None else scale
        bb = _bcast_np(c[0], nd) if bcol is not None else (bias or 0.0)
        return fn(x * s + bb)

    return _op("activation", "activation", "scalar", dst, [v], v.shape, dtype or v.dtype, "sbuf",
               values, mask=mask, scalars=col, func=name,
               imm0=0.0 if scol is not None else float(scale),
               imm1=0.0 if bcol is not None or bias is None else float(bias), value=value)


def _bcast_np(col, ndim):
    return col.reshape(col.shape[:1] + (1,) * (ndim - 1))


def activation_reduce(*args, **kwargs):
    """activation, plus reduce_res [P, 1] = the reduction (add) of each result row."""
    b = _bind("activation_reduce", args, kwargs, ("op", "data"), ("dst", "op", "data"),
              lambda a: _is_tile(a[0]))
    dst, op, data, dtype = b.pop("dst", None), b.pop("op", None), b.pop("data", None), b.pop(
        "dtype", None)
    reduce_op, reduce_res = b.pop("reduce_op", np.add), b.pop("reduce_res", None)
    bias, scale, mask = b.pop("bias", None), b.pop("scale", 1.0), b.pop("mask", None)
    if b:
        raise UnsupportedError(f"nki: nisa.activation_reduce arguments {sorted(b)}")
    if reduce_res is None:
        raise NkiError("nki: nisa.activation_reduce needs reduce_res (a [P, 1] tile)")
    if _np_op(reduce_op) is not np.add:
        raise UnsupportedError("nki: activation_reduce with a reduce_op other than add")
    v = _onchip(data, "activation_reduce data")
    r = _onchip(reduce_res, "activation_reduce reduce_res")
    if (bias is not None and not _is_scalar(bias)) or not _is_scalar(scale):
        # The Scalar engine's one tile operand holds the row sums: activation, then a reduce.
        out = _activation(op, v, bias, scale, dst, dtype, mask)
        _reduce_into(np.add, out, r, mask)
        return out
    name, fn = _ACTIVATION[_np_op(op)] if _np_op(op) in _ACTIVATION else (None, None)
    if name is None:
        raise UnsupportedError(f"nki: nisa.activation_reduce op {op!r}")
    if r.numel != v.shape[0]:
        raise NkiError(f"nki: activation_reduce: reduce_res {list(r.shape)} must be "
                       f"[{v.shape[0]}, 1]")
    r2 = r.reshape((v.shape[0], 1)) if r.shape != (v.shape[0], 1) else r
    trace = current()
    out = None
    d = as_view(dst, "activation_reduce dst") if dst is not None else None
    if d is None:
        out = Tile(trace, _shape2(v.shape), _trace.dtype_of(dtype or v.dtype), "sbuf",
                   "activation_reduce")
        d = out.full
    for x, w in ((v, "data"), (d, "dst"), (r2, "reduce_res")):
        x.check(f"activation_reduce {w}")
    index = trace.emit("activation_reduce", "scalar", dst=d, src0=v, src1=r2, func=name,
                       imm0=float(scale), imm1=float(bias or 0.0), op="activation_reduce")
    if trace.numerics:
        y = fn(v.read() * scale + (bias or 0.0))
        d.write(y)
        r2.write(d.read().reshape(v.shape[0], -1).sum(axis=1, keepdims=True))
    if out is not None:
        out.producer = index
        return out
    return dst


def _reduce_into(op, src, dst, mask):
    tensor_reduce(op, src, axis=tuple(range(1, len(as_view(src, "reduce").shape))), dst=dst,
                  mask=mask)


def tensor_reduce(*args, **kwargs):
    """Reduces the free axes `axis` of data (Vector engine); the result keeps the other
    axes (and the reduced ones as size 1 with keepdims=True)."""
    b = _bind("tensor_reduce", args, kwargs, ("op", "data", "axis"), ("dst", "op", "data", "axis"),
              lambda a: _is_tile(a[0]))
    dst, op, data, axis = b.pop("dst", None), b.pop("op", None), b.pop("data", None), b.pop(
        "axis", None)
    dtype, keepdims, negate = b.pop("dtype", None), b.pop("keepdims", False), b.pop("negate", False)
    mask = b.pop("mask", None)
    if b:
        raise UnsupportedError(f"nki: nisa.tensor_reduce arguments {sorted(b)}")
    return reduce(op, data, axis, dst=dst, dtype=dtype, keepdims=keepdims, negate=negate,
                  mask=mask)


def reduce(op, data, axis, dst=None, dtype=None, keepdims=False, negate=False, mask=None,
           what="tensor_reduce"):
    v = _onchip(data, f"{what} data")
    nd = len(v.shape)
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    axes = tuple(sorted(a % nd for a in axes))
    if 0 in axes:
        raise UnsupportedError(f"nki: {what} over axis 0, the partition dim (transpose first)")
    if any(not 0 < a < nd for a in axes) or len(set(axes)) != len(axes):
        raise NkiError(f"nki: {what}: axis {axis} for a tile of shape {list(v.shape)}")
    fn_op = _np_op(op)
    if fn_op not in _REDUCE:
        raise UnsupportedError(f"nki: {what} op {getattr(fn_op, '__name__', fn_op)!r}")
    name, fn = _REDUCE[fn_op]
    kept = [a for a in range(1, nd) if a not in axes]
    if mask is not None:
        r = _mask_ranges(mask, v.shape, what)
        if r is None:
            return dst
        v = v.clip(r)
    src = v.permute([0] + kept + list(axes), split=1 + len(kept))
    shape = [v.shape[a] if a == 0 or a not in axes else 1 for a in range(nd)] if keepdims else \
        [v.shape[0]] + [v.shape[a] for a in kept]
    sign = -1.0 if negate else 1.0
    return _op(what, "tensor_reduce", "vector", dst, [src], shape, dtype or v.dtype, "sbuf",
               lambda x: sign * fn(x, axis=tuple(range(1 + len(kept), nd))), op0=name)


def memset(*args, **kwargs):
    """Fills dst (new form `memset(dst, value)`) or a new tile (old `memset(shape, value,
    dtype)`) with `value`, on the Vector engine."""
    b = _bind("memset", args, kwargs, ("shape", "value", "dtype"), ("dst", "value"),
              lambda a: _is_tile(a[0]))
    dst, value = b.pop("dst", None), b.pop("value", None)
    shape, dtype, buffer = b.pop("shape", None), b.pop("dtype", None), b.pop("buffer", "sbuf")
    mask = b.pop("mask", None)
    engine = _engine(b.pop("engine", "vector"), "vector")
    if b:
        raise UnsupportedError(f"nki: nisa.memset arguments {sorted(b)}")
    if dst is not None:
        view = as_view(dst, "memset dst")
        shape, dtype = view.shape, view.dtype
    buffer = getattr(buffer, "name", buffer)
    return _op("memset", "memset", engine, dst, [], shape, dtype, buffer,
               lambda: np.array(value), mask=mask, imm0=float(value))


def iota(*args, **kwargs):
    """dst = the values of an index expression (GpSimd engine): `iota(expr, dtype)`."""
    b = _bind("iota", args, kwargs, ("expr", "dtype"), ("dst", "expr"),
              lambda a: _is_tile(a[0]))
    dst, expr, dtype, mask = b.pop("dst", None), b.pop("expr", None), b.pop("dtype", None), b.pop(
        "mask", None)
    if b:
        raise UnsupportedError(f"nki: nisa.iota arguments {sorted(b)}")
    if isinstance(expr, (int, np.integer)):
        expr = _trace.IndexExpr((1, 1), int(expr), (0, 0))
    if not isinstance(expr, _trace.IndexExpr):
        raise NkiError(f"nki: nisa.iota takes an index expression (nl.arange / nl.mgrid), got "
                       f"{type(expr).__name__}")
    shape = _shape2(expr.shape)
    e = _trace.IndexExpr(shape, expr.off, expr.aligned(len(shape))[1])
    if dst is not None:
        shape = as_view(dst, "iota dst").shape
    if dtype is None and dst is None:
        dtype = _trace.INT32
    vals = e.values()
    d = _op("iota", "iota", "gpsimd", dst, [], shape, dtype, "sbuf",
            lambda: vals.reshape(shape) if vals.size == int(np.prod(shape)) else vals, mask=mask,
            imm0=float(e.off), imm1=float(e.coefs[0]))
    return d


def bn_stats(*args, **kwargs):
    """Per-partition statistics of data [P, F] (F <= nl.tile_size.bn_stats_fmax): a [P, 6]
    row (count, mean, variance of the even elements, then of the odd ones) that
    bn_aggr combines."""
    b = _bind("bn_stats", args, kwargs, ("data",), ("dst", "data"), lambda a: len(a) == 2)
    dst, data, dtype, mask = _take(b, "bn_stats", "dst", "data", "dtype", "mask")
    v = _onchip(data, "bn_stats data")
    if mask is not None:
        r = _mask_ranges(mask, v.shape, "bn_stats")
        if r is None:
            return dst
        v = v.clip(r)

    def stats(x):
        x = x.reshape(x.shape[0], -1).astype(np.float64)
        out = []
        for h in (x[:, 0::2], x[:, 1::2]):
            n = h.shape[1]
            out += [np.full(x.shape[0], n), h.mean(1) if n else np.zeros(len(x)),
                    h.var(1) if n else np.zeros(len(x))]
        return np.stack(out, axis=1)

    return _op("bn_stats", "bn_stats", "vector", dst, [v], (v.shape[0], 6), dtype or _trace.FLOAT32,
               "sbuf", stats)


def bn_aggr(*args, **kwargs):
    """[P, 6 k] bn_stats rows -> [P, 2] (mean, variance) of all their elements."""
    b = _bind("bn_aggr", args, kwargs, ("data",), ("dst", "data"), lambda a: len(a) == 2)
    dst, data, dtype, mask = _take(b, "bn_aggr", "dst", "data", "dtype", "mask")
    v = _onchip(data, "bn_aggr data")
    if v.numel % (6 * v.shape[0]):
        raise NkiError(f"nki: bn_aggr: data {list(v.shape)} must hold whole bn_stats rows "
                       "(6 per group)")

    def aggr(x):
        g = x.reshape(x.shape[0], -1, 3).astype(np.float64)  # (count, mean, var) groups
        n, m, var = g[..., 0], g[..., 1], g[..., 2]
        total = n.sum(1)
        mean = (n * m).sum(1) / total
        var = (n * (var + (m - mean[:, None]) ** 2)).sum(1) / total
        return np.stack([mean, var], axis=1)

    return _op("bn_aggr", "bn_aggr", "vector", dst, [v], (v.shape[0], 2), dtype or _trace.FLOAT32,
               "sbuf", aggr, mask=mask)


def affine_select(*args, **kwargs):
    """dst = on_true_tile where the predicate holds, else on_false_value (GpSimd)."""
    b = _bind("affine_select", args, kwargs, ("pred", "on_true_tile", "on_false_value"),
              ("dst", "pred", "on_true_tile", "on_false_value"), lambda a: _is_tile(a[0]))
    dst, pred, tile, false = (b.pop("dst", None), b.pop("pred", None), b.pop("on_true_tile", None),
                              b.pop("on_false_value", None))
    dtype, mask = b.pop("dtype", None), b.pop("mask", None)
    if b:
        raise UnsupportedError(f"nki: nisa.affine_select arguments {sorted(b)}")
    if not isinstance(pred, _trace.Predicate):
        raise NkiError("nki: affine_select's pred is a comparison of index expressions")
    v = _onchip(tile, "affine_select on_true_tile")
    keep = pred.values(v.shape)
    return _op("affine_select", "tensor_copy", "gpsimd", dst, [v], v.shape, dtype or v.dtype,
               "sbuf", lambda x: np.where(keep, x, false), mask=mask)


def reciprocal(*args, **kwargs):
    """dst = 1 / data (modelled as the Scalar engine's reciprocal function)."""
    b = _bind("reciprocal", args, kwargs, ("data",), ("dst", "data"), lambda a: len(a) == 2)
    dst, data, dtype, mask = _take(b, "reciprocal", "dst", "data", "dtype", "mask")
    return _activation(np.reciprocal, data, None, 1.0, dst, dtype, mask)


def reshape(v: View, shape) -> View:
    """v's elements in another shape, row-major like numpy: a view when v's layout allows."""
    shape = tuple(int(s) for s in shape)
    if int(np.prod(shape)) != v.numel:
        raise NkiError(f"nki: cannot reshape a view of shape {list(v.shape)} to {list(shape)}")
    if shape == v.shape:
        return v
    # Split/merge axes: walk both shapes, grouping axes whose products agree.
    src = [(n, s) for n, s in zip(v.shape, v.strides)]
    out_strides, i = [], 0
    for n in shape:
        if n == 1:
            out_strides.append(0)
            continue
        while i < len(src) and src[i][0] == 1:
            i += 1
        if i >= len(src):
            raise NkiError(f"nki: cannot reshape {list(v.shape)} to {list(shape)}")
        m, s = src[i]
        if m == n:
            out_strides.append(s)
            i += 1
        elif m % n == 0:  # split this axis
            src[i] = (m // n, s)
            out_strides.append(s * (m // n))
        else:  # merge axes into n: they must be one run
            total, stride = 1, None
            while total < n and i < len(src):
                m, s = src[i]
                if stride is not None and stride != m * s:
                    raise UnsupportedError(f"nki: reshape of a strided view {list(v.shape)} to "
                                           f"{list(shape)}")
                total, stride = total * m, s
                i += 1
            if total != n:
                raise UnsupportedError(f"nki: reshape {list(v.shape)} to {list(shape)}")
            out_strides.append(stride)
    v.check("reshape")  # the new view covers the same cells
    return View(v.base, v.offset, shape, out_strides, ())


def broadcast_to(v: View, shape) -> View:
    """A [1, F] tile over `shape[0]` partitions (the tracer loads it again from HBM with
    partition stride 0, or stores it first), or [P, 1] along the free dims (stride 0)."""
    shape = tuple(int(s) for s in shape)
    if len(shape) != len(v.shape):
        raise NkiError(f"nki: broadcast_to {list(shape)} from {list(v.shape)}: same rank")
    for n, m in zip(v.shape, shape):
        if n not in (1, m):
            raise NkiError(f"nki: cannot broadcast shape {list(v.shape)} to {list(shape)}")
    grown = [a for a in range(1, len(shape)) if v.shape[a] == 1 and shape[a] > 1]
    checks = tuple((off, tuple(0 if a in grown else c for a, c in enumerate(coefs)), limit, label)
                   for off, coefs, limit, label in v.checks)
    free_bcast = View(v.base, v.offset, v.shape[:1] + shape[1:],
                      v.strides[:1] + tuple(0 if n == 1 else s for n, s in
                                            zip(v.shape[1:], v.strides[1:])), checks)
    if shape[0] == v.shape[0]:
        return free_bcast
    trace = current()
    r = v.base
    if isinstance(r, _trace.Tensor):
        src = v
    elif r.home is not None and r.home[1][3] and v.whole and r.pdim == 0:
        src = r.home[0]
    else:  # store the row to HBM, then load it across the partitions
        tmp = _trace.Tensor(trace, f"bcast{len(trace.tensors)}", "internal", v.shape, v.dtype)
        _op("broadcast store", "dma_copy", "dma", tmp.view, [v], None, None, None, lambda x: x)
        src = tmp.view
    hb = View(src.base, src.offset, (shape[0],) + src.shape[1:], (0,) + src.strides[1:], ())
    out = Tile(trace, shape, v.dtype, "sbuf", "broadcast_to")
    values = np.broadcast_to(v.read(), shape) if trace.numerics else None
    out.producer = trace.emit("dma_copy", "dma", dst=out.full, src0=hb, op="broadcast_to")
    if trace.numerics:
        out.full.write(values)
    return out


def assign(view: View, value) -> None:
    """`tile[...] = value`: retargets a fresh result to write here (Note [NKI tracing]),
    else copies."""
    if _is_scalar(value):
        memset(view, value)
        return
    t = view.base
    if isinstance(value, Tile) and value.producer is not None and isinstance(t, Tile):
        trace = t.trace
        last = value.producer == len(trace.instructions) - 1
        same_memory = value.memory == t.memory  # a PSUM result reaches SBUF by a copy
        if last and same_memory and value.shape == view.shape and not t.spilled and \
                not value.viewed:
            target = view.clip(value.producer_clip) if value.producer_clip else view
            target.check("assignment")
            trace.instructions[value.producer][11] = target.desc()  # write here instead
            trace._wrote(trace.instructions[value.producer][0], target,
                         _src0_view(value))
            if trace.numerics:
                target.write((value.full.clip(value.producer_clip) if value.producer_clip
                              else value.full).read())
            value.discard(view)
            return
    if isinstance(t, _trace.Tensor):
        dma_copy(dst=view, src=value)
        return
    tensor_copy(value, dst=view)


def _src0_view(tile):
    return getattr(tile, "_src0", None)


def iadd(view: View, other):
    """`view += other`: an accumulating matmul into PSUM, else tensor_tensor add."""
    t = view.base
    if isinstance(other, Tile) and other.producer is not None and other.memory == "psum" and \
            isinstance(t, Tile) and t.memory == "psum":
        trace = t.trace
        ins = trace.instructions[other.producer]
        if ins[0] == "multiply_moving" and other.producer == len(trace.instructions) - 1 and \
                view.shape == other.shape:
            view.check("+=")
            ins[11] = view.desc()
            ins[5] = not t.pending_zero  # accumulate unless the tile was just zeroed
            if trace.numerics:
                prev = 0.0 if t.pending_zero else view.read()
                view.write(prev + other.full.read())
            t.pending_zero = False
            t.matmul_written = True
            other.discard(view)
            return view
    if _is_scalar(other):
        tensor_scalar(view, np.add, other, dst=view)
    else:
        tensor_tensor(view, as_view(other, "+="), np.add, dst=view)
    return view


def binary(opname: str, x, y, dtype=None, mask=None):
    """x op y for tiles and numbers, as NKI's operators do: tensor_tensor for equal
    shapes, tensor_scalar for a number or a [P, 1] tile on either side."""
    fn = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
          "max": np.maximum, "min": np.minimum, "pow": np.power}[opname]
    tx, ty = _is_tile(x), _is_tile(y)
    if not tx and not ty:
        return fn(x, y)
    if tx and not ty:
        return _scalar_steps(_onchip(x, opname), [(fn, y, False)], None, dtype, mask)
    if ty and not tx:
        vy = _onchip(y, opname)
        if fn is np.divide:  # number / tile = number * (1 / tile)
            r = activation(np.reciprocal, vy, dtype=dtype, mask=mask)
            return r if y == 1 else _scalar_steps(r.full, [(np.multiply, x, False)], None, dtype,
                                                  mask)
        return _scalar_steps(vy, [(fn, x, True)], None, dtype, mask)
    vx, vy = _onchip(x, opname), _onchip(y, opname)
    col = lambda v: v.numel == v.shape[0]  # noqa: E731 (one value per partition)
    if vx.numel == vy.numel:
        return tensor_tensor(vx, vy, fn, dtype=dtype, mask=mask)
    if col(vy) and vy.shape[0] == vx.shape[0]:
        return _scalar_steps(vx, [(fn, vy, False)], None, dtype, mask)
    if col(vx) and vx.shape[0] == vy.shape[0]:
        return _scalar_steps(vy, [(fn, vx, True)], None, dtype, mask)
    raise NkiError(f"nki: {opname}: shapes {list(vx.shape)} and {list(vy.shape)} do not "
                   "broadcast (a [P, 1] tile broadcasts along the free dims; partitions need "
                   ".broadcast_to)")


_trace.assign, _trace.iadd, _trace.broadcast_to, _trace.reshape = assign, iadd, broadcast_to, reshape
_trace._binary = binary


def _unsupported(name):
    def f(*args, **kwargs):
        raise UnsupportedError(f"nki: nisa.{name} is not supported yet by trnscope.nki")

    f.__name__ = name
    return f


for _name in ("tensor_tensor_scan", "select_reduce", "sequence_bounds", "range_select",
              "local_gather", "dma_transpose", "tensor_partition_reduce", "nc_find_index8",
              "nc_match_replace8", "nc_stream_shuffle", "max8", "scalar_tensor_tensor",
              "tensor_scalar_reduce", "dropout", "exponential", "nc_matmul_mx", "quantize_mx"):
    globals()[_name] = _unsupported(_name)


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
