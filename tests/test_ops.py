"""Natively registered aten ops on trn against CPU PyTorch.

Every test runs an op on CPU tensors and on copies of them on trn and
compares with the tolerances below; the autouse fixture asserts that nothing
ran through the CPU fallback (these ops are native on trn).

Tolerances (rtol, atol): float32 arithmetic 1e-5/1e-6, float32 transcendental
1e-4/1e-4, bfloat16 1e-2/1e-2, float16 1e-3/1e-3, integers and bool exact;
matmul atol grows with sqrt(K).
"""

import copy
import math
import warnings
import zlib

import pytest
import torch
import torch.nn.functional as F

import trnscope
from conftest import launch_counts

F32, BF16, F16 = torch.float32, torch.bfloat16, torch.float16
I32, I64, BOOL = torch.int32, torch.int64, torch.bool
FLOATS = [F32, BF16, F16]
ALL = [F32, BF16, F16, I32, I64, BOOL]
SHAPES = [(), (1,), (17,), (3, 5, 7), (0, 3)]


pytestmark = pytest.mark.usefixtures("no_fallback")


def tol(dtype, transcendental=False):
    if dtype == BF16:
        return 1e-2, 1e-2
    if dtype == F16:
        return 1e-3, 1e-3
    if dtype.is_floating_point:
        return (1e-4, 1e-4) if transcendental else (1e-5, 1e-6)
    return 0, 0


def check(got, want, transcendental=False, rtol=None, atol=None):
    assert got.device.type == "trn", got.device
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    r, a = tol(want.dtype, transcendental)
    torch.testing.assert_close(
        got.cpu(), want, rtol=r if rtol is None else rtol, atol=a if atol is None else atol,
        equal_nan=True,
    )


def make(shape, dtype, kind="any"):
    """Random CPU tensor; kind: any, positive (log/sqrt domain), nonzero, small_exp."""
    # crc32, not hash(): str hashes change per process and the data must not.
    g = torch.Generator().manual_seed(zlib.crc32(repr((shape, str(dtype), kind)).encode()))
    if dtype == BOOL:
        return torch.randint(0, 2, shape, generator=g).bool()
    if not dtype.is_floating_point:
        lo, hi = {"positive": (1, 6), "nonzero": (1, 6), "small_exp": (0, 4)}.get(kind, (-5, 6))
        t = torch.randint(lo, hi, shape, generator=g)
        if kind == "nonzero":
            t = t * (torch.randint(0, 2, shape, generator=g) * 2 - 1)
        return t.to(dtype)
    t = torch.randn(shape, generator=g)
    if kind in ("positive", "nonzero"):
        t = t.abs() + 0.5
        if kind == "nonzero":
            t = t * (torch.randint(0, 2, shape, generator=g) * 2 - 1)
    return t.to(dtype)


def on_trn(x, layout="contig"):
    """(cpu view, trn view) with the same values; layout makes the trn side
    non-contiguous: 'transposed' (last two dims swapped back) or 'strided'
    (every other element of a wider buffer)."""
    if layout == "contig" or x.dim() == 0:
        return x, x.to("trn")
    if layout == "transposed" and x.dim() >= 2:
        base = x.transpose(-1, -2).contiguous()
        t = base.to("trn").transpose(-1, -2)
        assert not t.is_contiguous() or x.shape[-1] <= 1 or x.shape[-2] <= 1
        return x, t
    wide = torch.stack([x, torch.zeros_like(x)], dim=-1).flatten(-2)
    t = wide.to("trn")[..., ::2]
    return x, t


# ---- binary --------------------------------------------------------------------------
BINARY = {
    "add": (torch.add, "any"),
    "sub": (torch.sub, "any"),
    "mul": (torch.mul, "any"),
    "div": (torch.div, "nonzero"),
    "pow": (torch.pow, "small_exp"),
    "maximum": (torch.maximum, "any"),
    "minimum": (torch.minimum, "any"),
    "eq": (torch.eq, "any"),
    "ne": (torch.ne, "any"),
    "lt": (torch.lt, "any"),
    "le": (torch.le, "any"),
    "gt": (torch.gt, "any"),
    "ge": (torch.ge, "any"),
    "logical_and": (torch.logical_and, "any"),
    "logical_or": (torch.logical_or, "any"),
}
BROADCAST = [
    ((), ()),
    ((1,), (1,)),
    ((17,), (17,)),
    ((3, 5, 7), (3, 5, 7)),
    ((3, 5, 7), (5, 1)),
    ((3, 1, 7), (1, 5, 1)),
    ((17,), ()),
    ((0, 3), (3,)),
]


CMP = ("eq", "ne", "lt", "le", "gt", "ge")


def binary_inputs(name, sa, sb, dtype):
    if name == "pow" and dtype.is_floating_point:  # positive base, any real exponent
        return make(sa, dtype, "positive"), make(sb, dtype)
    a, b = make(sa, dtype), make(sb, dtype, BINARY[name][1])
    if sa == sb and name in CMP:  # some equal pairs
        b = torch.where(torch.rand(sb) < 0.3, a, b)
    return a, b


def cpu_or_skip(fn):
    try:
        return fn()
    except (RuntimeError, TypeError, IndexError, ValueError) as e:  # torch rejects it
        pytest.skip(f"CPU rejects: {e}")


@pytest.mark.parametrize("shapes", BROADCAST, ids=str)
@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("name", list(BINARY))
def test_binary(name, dtype, shapes):
    fn = BINARY[name][0]
    a, b = binary_inputs(name, *shapes, dtype)
    want = cpu_or_skip(lambda: fn(a, b))
    check(fn(a.to("trn"), b.to("trn")), want, transcendental=name in ("pow", "div"))


@pytest.mark.parametrize("layout", ["transposed", "strided"])
@pytest.mark.parametrize("dtype", [F32, BF16, I64], ids=str)
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_noncontiguous(name, dtype, layout):
    a, b = binary_inputs(name, (3, 6, 5), (6, 5), dtype)
    want = cpu_or_skip(lambda: BINARY[name][0](a, b))
    _, ta = on_trn(a, layout)
    _, tb = on_trn(b, "strided" if layout == "transposed" else "transposed")
    check(BINARY[name][0](ta, tb), want, transcendental=name in ("pow", "div"))


SCALARS = [2, -3, 2.5, True]


@pytest.mark.parametrize("scalar", SCALARS, ids=repr)
@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_scalar(name, dtype, scalar):
    fn = BINARY[name][0]
    a = make((4, 9), dtype, "positive" if name == "pow" else "any")
    want = cpu_or_skip(lambda: fn(a, scalar))
    check(fn(a.to("trn"), scalar), want, transcendental=name in ("pow", "div"))


@pytest.mark.parametrize("scalar", [2, 2.5, -1.5])
@pytest.mark.parametrize("dtype", [F32, BF16, I32, I64], ids=str)
@pytest.mark.parametrize("op", ["rsub", "rdiv", "rpow", "radd", "rmul", "rgt"])
def test_scalar_first(op, dtype, scalar):
    """scalar (op) tensor: rsub, pow(Scalar, Tensor), python reflected operators."""
    fns = {
        "rsub": lambda s, t: s - t,
        "rdiv": lambda s, t: s / t,
        "rpow": lambda s, t: torch.pow(abs(s), t),
        "radd": lambda s, t: s + t,
        "rmul": lambda s, t: s * t,
        "rgt": lambda s, t: s > t,
    }
    a = make((5, 3), dtype, "nonzero" if op == "rdiv" else "small_exp" if op == "rpow" else "any")
    want = cpu_or_skip(lambda: fns[op](scalar, a))
    check(fns[op](scalar, a.to("trn")), want, transcendental=op in ("rpow", "rdiv"))


def test_add_sub_alpha():
    a, b = make((4, 6), F32), make((6,), F32)
    check(torch.add(a.to("trn"), b.to("trn"), alpha=0.5), torch.add(a, b, alpha=0.5))
    check(torch.sub(a.to("trn"), b.to("trn"), alpha=3), torch.sub(a, b, alpha=3))
    check(torch.sub(a.to("trn"), 2.0, alpha=3), torch.sub(a, 2.0, alpha=3))
    check(torch.rsub(a.to("trn"), 2.0, alpha=3), torch.rsub(a, 2.0, alpha=3))
    ai, bi = make((4, 6), I64), make((4, 6), I64)
    check(torch.add(ai.to("trn"), bi.to("trn"), alpha=2), torch.add(ai, bi, alpha=2))


PROMOTIONS = [
    (F32, BF16), (BF16, F16), (I32, F32), (I64, I32), (BOOL, I32), (BOOL, F16), (I64, BF16),
]


@pytest.mark.parametrize("name", ["add", "mul", "div", "maximum", "lt"])
@pytest.mark.parametrize("dtypes", PROMOTIONS, ids=str)
def test_binary_promotion(name, dtypes):
    a, b = make((3, 4), dtypes[0], "any"), make((4,), dtypes[1], "nonzero")
    fn = BINARY[name][0]
    want = cpu_or_skip(lambda: fn(a, b))
    check(fn(a.to("trn"), b.to("trn")), want, transcendental=True)


def test_zero_dim_operands():
    """A 0-dim trn tensor is a tensor operand (it does not promote like a
    python number in the same category); a 0-dim CPU tensor is a scalar."""
    a = make((3, 4), BF16)
    s32 = torch.tensor(1.7)
    check(a.to("trn") * s32.to("trn"), a * s32)
    check(a.to("trn") * s32, a * s32)
    i = make((3, 4), I32)
    check(i.to("trn") + s32.to("trn"), i + s32)  # float 0-dim promotes int to float
    check(torch.tensor(3).to("trn") * i.to("trn"), torch.tensor(3) * i)


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow", "logical_and", "lt", "eq"])
def test_binary_inplace_and_out(name):
    fn = BINARY[name][0]
    a, b = make((3, 4), F32, "positive"), make((4,), F32, "nonzero")
    want = fn(a, b)
    ta = a.to("trn")
    ptr = ta.data_ptr()
    res = getattr(ta, name + "_")(b.to("trn"))
    assert res.data_ptr() == ptr
    check(ta, want.to(F32), transcendental=True)  # in place keeps self's dtype
    out = torch.empty(0, device="trn", dtype=want.dtype)  # resized as torch does
    fn(a.to("trn"), b.to("trn"), out=out)
    check(out, want, transcendental=True)


def test_maximum_minimum_out():
    a, b = make((3, 4), F32), make((4,), F32)
    out = torch.empty(0, device="trn")
    torch.maximum(a.to("trn"), b.to("trn"), out=out)
    check(out, torch.maximum(a, b))
    torch.minimum(a.to("trn"), b.to("trn"), out=out)
    check(out, torch.minimum(a, b))


def test_inplace_non_contiguous_self_and_cast():
    a, b = make((5, 6), F32), make((6,), F32)
    ta = a.t().contiguous().to("trn").t()  # non-contiguous self
    ta.mul_(b.to("trn"))
    check(ta, a * b)
    h = make((5, 6), F16)
    th = h.to("trn")
    th.add_(b.to("trn"))  # float32 result written into float16 self
    check(th, h.add_(b))
    t = make((2, 3), I64).to("trn")
    with pytest.raises(RuntimeError, match="can't be cast"):
        t.add_(torch.ones(3, device="trn"))
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        torch.ones(3, device="trn").add_(torch.ones(2, 3, device="trn"))


def test_comparison_out_and_inplace():
    a, b = make((4, 5), F32), make((4, 5), F32)
    out = torch.empty(0, dtype=BOOL, device="trn")
    torch.lt(a.to("trn"), b.to("trn"), out=out)
    check(out, a < b)
    ta = a.to("trn")
    ta.ge_(0.0)  # in place keeps self's dtype
    check(ta, a.ge(0.0).float())


# ---- where / masked_fill --------------------------------------------------------------
@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize(
    "shapes", [((3, 4), (3, 4), (3, 4)), ((3, 1), (1, 4), (4,)), ((), (5,), ()), ((0, 2), (2,), (2,))], ids=str
)
def test_where(dtype, shapes):
    c = make(shapes[0], BOOL)
    a, b = make(shapes[1], dtype), make(shapes[2], dtype)
    check(torch.where(c.to("trn"), a.to("trn"), b.to("trn")), torch.where(c, a, b))


def test_where_scalars_and_promotion():
    c, a = make((3, 4), BOOL), make((3, 4), BF16)
    check(torch.where(c.to("trn"), a.to("trn"), 0.5), torch.where(c, a, 0.5))
    check(torch.where(c.to("trn"), 2.0, a.to("trn")), torch.where(c, 2.0, a))
    i = make((3, 4), I32)
    check(torch.where(c.to("trn"), i.to("trn"), a.to("trn")), torch.where(c, i, a))
    c2, tc = on_trn(make((3, 4), BOOL), "transposed")
    a2, ta = on_trn(make((3, 4), F32), "strided")
    check(torch.where(tc, ta, -ta), torch.where(c2, a2, -a2))


@pytest.mark.parametrize("dtype", [F32, BF16, F16, I64, BOOL], ids=str)
def test_masked_fill(dtype):
    x, m = make((2, 5, 5), dtype), make((5, 5), BOOL)
    v = True if dtype == BOOL else -7
    check(x.to("trn").masked_fill(m.to("trn"), v), x.masked_fill(m, v))
    t = x.to("trn")
    t.masked_fill_(m.to("trn"), v)
    check(t, x.masked_fill(m, v))
    check(x.to("trn").masked_fill(m.to("trn"), torch.tensor(v)), x.masked_fill(m, torch.tensor(v)))
    check(
        x.to("trn").masked_fill(m.to("trn"), torch.tensor(v).to("trn")),
        x.masked_fill(m, torch.tensor(v)),
    )


def test_masked_fill_causal_inf():
    s = make((2, 6, 6), F32)
    mask = torch.ones(6, 6, dtype=BOOL).triu(1)
    check(s.to("trn").masked_fill(mask.to("trn"), float("-inf")), s.masked_fill(mask, float("-inf")))


def test_where_rejects_non_bool_condition():
    with pytest.raises(RuntimeError, match="bool"):
        torch.where(torch.ones(3, device="trn"), torch.ones(3, device="trn"), 0.0)


# ---- unary ----------------------------------------------------------------------------
UNARY = {
    "neg": (torch.neg, "any", False),
    "abs": (torch.abs, "any", False),
    "relu": (torch.relu, "any", False),
    "exp": (torch.exp, "any", True),
    "log": (torch.log, "positive", True),
    "sqrt": (torch.sqrt, "positive", True),
    "rsqrt": (torch.rsqrt, "positive", True),
    "reciprocal": (torch.reciprocal, "nonzero", True),
    "sigmoid": (torch.sigmoid, "any", True),
    "tanh": (torch.tanh, "any", True),
    "silu": (F.silu, "any", True),
    "gelu": (F.gelu, "any", True),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), "any", True),
    "sin": (torch.sin, "any", True),
    "cos": (torch.cos, "any", True),
    "logical_not": (torch.logical_not, "any", False),
}


@pytest.mark.parametrize("layout", ["contig", "transposed", "strided"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("name", list(UNARY))
def test_unary(name, dtype, shape, layout):
    fn, kind, transcendental = UNARY[name]
    x, t = on_trn(make(shape, dtype, kind), layout)
    want = cpu_or_skip(lambda: fn(x))
    check(fn(t), want, transcendental=transcendental)


@pytest.mark.parametrize("name", ["neg", "abs", "exp", "log", "sigmoid", "relu", "sqrt", "tanh", "silu", "gelu"])
def test_unary_inplace_and_out(name):
    fn, kind, _ = UNARY[name]
    x = make((4, 7), F32, kind)
    want = fn(x)
    t = x.to("trn")
    if name == "silu":
        F.silu(t, inplace=True)
    elif name == "gelu":
        torch.ops.aten.gelu_(t)
    else:
        getattr(t, name + "_")()
    check(t, want, transcendental=True)
    out = torch.empty(0, device="trn")
    getattr(torch.ops.aten, name).out(x.to("trn"), out=out)
    check(out, want, transcendental=True)


def test_unary_int_inplace_rejected():
    with pytest.raises(RuntimeError, match="can't be cast"):
        torch.ones(3, dtype=I64, device="trn").exp_()


# ---- casts, fill, zero, clone -----------------------------------------------------------
@pytest.mark.parametrize("layout", ["contig", "transposed"])
@pytest.mark.parametrize("dst", ALL, ids=str)
@pytest.mark.parametrize("src", ALL, ids=str)
def test_cast(src, dst, layout):
    x = make((3, 17), src)
    if src.is_floating_point:
        x = (x.float() * 10).to(src)
    x, t = on_trn(x, layout)
    got = t.to(dst)
    assert got.device.type == "trn"
    check(got, x.to(dst))


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_fill_zero(dtype, shape):
    v = True if dtype == BOOL else 3
    x, t = on_trn(make(shape, dtype), "strided" if shape else "contig")
    t.fill_(v)
    check(t, x.clone().fill_(v))
    t.zero_()
    check(t, torch.zeros_like(x))
    t.fill_(torch.tensor(v).to("trn"))  # 0-dim trn value: no host round trip
    check(t, x.clone().fill_(v))
    t.fill_(torch.tensor(v))  # 0-dim CPU value
    check(t, x.clone().fill_(v))


def test_factories_through_fill():
    check(torch.full((3, 4), 2.5, device="trn"), torch.full((3, 4), 2.5))
    check(torch.ones(2, 3, dtype=I64, device="trn"), torch.ones(2, 3, dtype=I64))
    check(torch.zeros(5, dtype=BF16, device="trn"), torch.zeros(5, dtype=BF16))


@pytest.mark.parametrize("layout", ["contig", "transposed", "strided"])
@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_clone_contiguous(dtype, layout):
    x, t = on_trn(make((3, 8), dtype), layout)
    c = t.clone()
    check(c, x.clone())
    assert c.data_ptr() != t.data_ptr()
    cc = t.contiguous()
    assert cc.is_contiguous()
    check(cc, x.contiguous())
    c2 = t.clone(memory_format=torch.contiguous_format)
    assert c2.is_contiguous()
    check(c2, x)


# ---- reductions ---------------------------------------------------------------------------
DIMS = [None, 0, -1, (0, 2), ()]


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", DIMS, ids=str)
@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("name", ["sum", "mean", "amax", "amin"])
def test_reduce(name, dtype, dim, keepdim):
    x, t = on_trn(make((3, 5, 7), dtype), "transposed" if dtype in (F32, I64) else "contig")
    fn = getattr(torch, name)
    kwargs = {} if dim is None else {"dim": dim, "keepdim": keepdim}
    if dim is None and keepdim:
        pytest.skip("keepdim needs dim")
    want = cpu_or_skip(lambda: fn(x, **kwargs))
    # sums of 105 terms: bf16/f16 inputs round the result once more
    r, a = tol(want.dtype)
    check(fn(t, **kwargs), want, rtol=2 * r, atol=10 * a)


@pytest.mark.parametrize("name", ["sum", "mean", "amax", "amin"])
@pytest.mark.parametrize("shape,dim", [((), None), ((), 0), ((17,), 0), ((1,), -1), ((0, 3), 1), ((0, 3), 0)], ids=str)
def test_reduce_shapes(name, shape, dim):
    x = make(shape, F32)
    kwargs = {} if dim is None else {"dim": dim}
    want = cpu_or_skip(lambda: getattr(torch, name)(x, **kwargs))
    check(getattr(torch, name)(x.to("trn"), **kwargs), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("src,dtype", [(BF16, F32), (F16, F32), (I32, F32), (F32, I64), (BOOL, I64), (I64, I32), (F32, F16)], ids=str)
def test_sum_dtype(src, dtype):
    x = make((4, 33), src)
    check(x.to("trn").sum(1, dtype=dtype), x.sum(1, dtype=dtype), rtol=1e-2, atol=1e-2)
    check(x.to("trn").sum(dtype=dtype), x.sum(dtype=dtype), rtol=1e-2, atol=1e-1)
    if dtype.is_floating_point:
        check(x.to("trn").mean(0, dtype=dtype), x.mean(0, dtype=dtype), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [None, 0, -1], ids=str)
@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("layout", ["contig", "transposed", "strided"])
def test_prod(dtype, dim, keepdim, layout):
    # Values near 1 keep 35-term float products finite; ints wrap in int64 as torch.
    x = make((5, 7), dtype)
    if dtype.is_floating_point:
        x = (1 + 0.1 * x.float()).to(dtype)
    x, t = on_trn(x, layout)
    if dim is None:
        if keepdim:
            pytest.skip("keepdim needs dim")
        got, want = torch.prod(t), torch.prod(x)
    else:
        got, want = torch.prod(t, dim, keepdim=keepdim), torch.prod(x, dim, keepdim=keepdim)
    r, a = tol(want.dtype)
    check(got, want, rtol=4 * r, atol=4 * a)


def test_prod_dtype_out_empty_and_wrapping():
    grid = torch.tensor([[1, 16, 16], [2, 8, 12]])  # Qwen2-VL's grid_thw.prod(-1)
    check(grid.to("trn").prod(-1), grid.prod(-1), rtol=0, atol=0)
    big = torch.tensor([2**40, 2**40, 3])
    check(big.to("trn").prod(), big.prod(), rtol=0, atol=0)  # wraps in int64
    x = make((4, 6), F32)
    check(x.to("trn").prod(1, dtype=torch.float64), x.prod(1, dtype=torch.float64))
    out = torch.empty(0, device="trn")
    torch.prod(x.to("trn"), 0, out=out)
    check(out, x.prod(0), rtol=1e-5, atol=1e-5)
    empty = torch.empty(0, 3)
    check(empty.to("trn").prod(0), empty.prod(0))
    check(empty.to("trn").prod(), empty.prod())


def test_mean_int_rejected():
    with pytest.raises(RuntimeError, match="mean"):
        torch.ones(3, dtype=I64, device="trn").mean()


def test_reduce_out():
    x = make((3, 5), F32)
    out = torch.empty(0, device="trn")
    torch.sum(x.to("trn"), 1, out=out)
    check(out, x.sum(1))
    out = torch.empty(0, device="trn")
    torch.mean(x.to("trn"), 0, keepdim=True, out=out)
    check(out, x.mean(0, keepdim=True))
    out = torch.empty(0, device="trn")
    torch.amax(x.to("trn"), 1, out=out)
    check(out, x.amax(1))


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [None, 0, 1, -1], ids=str)
@pytest.mark.parametrize("dtype", [F32, BF16, F16, I32, I64], ids=str)
@pytest.mark.parametrize("layout", ["contig", "transposed", "strided"])
def test_argmax_max(dtype, dim, keepdim, layout):
    x = make((6, 9), dtype)
    if dtype.is_floating_point:  # distinct values: the index is unambiguous
        x = torch.randperm(54, generator=torch.Generator().manual_seed(1)).reshape(6, 9).to(dtype)
    x, t = on_trn(x, layout)
    kwargs = {} if dim is None else {"dim": dim, "keepdim": keepdim}
    check(torch.argmax(t, **kwargs), torch.argmax(x, **kwargs))
    if dim is not None:
        v, i = torch.max(t, dim, keepdim)
        wv, wi = torch.max(x, dim, keepdim)
        check(v, wv)
        check(i, wi)
    else:
        check(t.max(), x.max())
        check(t.min(), x.min())


def test_argmax_nan_and_scalar():
    x = torch.tensor([1.0, float("nan"), 3.0, float("nan")])
    check(x.to("trn").argmax(), x.argmax())
    s = torch.tensor(2.0)
    check(s.to("trn").argmax(), s.argmax())


# ---- softmax ---------------------------------------------------------------------------
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("layout", ["contig", "transposed"])
def test_softmax(dtype, dim, log, layout):
    x, t = on_trn(make((3, 17, 33), dtype) * 3, layout)
    fn = F.log_softmax if log else F.softmax
    check(fn(t, dim=dim), fn(x, dim=dim), transcendental=True)


def test_softmax_edges():
    x = make((4, 8), F32)
    x[1, :4] = float("-inf")
    check(F.softmax(x.to("trn"), -1), F.softmax(x, -1), transcendental=True)
    check(F.softmax(x.to("trn"), -1, dtype=F32), F.softmax(x, -1, dtype=F32), transcendental=True)
    s = torch.tensor(1.5)
    check(F.softmax(s.to("trn"), 0), F.softmax(s, 0))
    e = torch.empty(0, 5)
    check(F.softmax(e.to("trn"), -1), F.softmax(e, -1))


# ---- matmul family --------------------------------------------------------------------------
def mm_tol(dtype, k):
    if dtype == BF16:
        return 2e-2, 2e-2 * math.sqrt(k)
    if dtype == F16:
        return 2e-3, 2e-3 * math.sqrt(k)
    return 1e-4, 1e-5 * math.sqrt(k)


MNK = [(1, 1, 1), (17, 33, 9), (64, 48, 130), (5, 1, 0)]


@pytest.mark.parametrize("transpose", ["nn", "tn", "nt", "tt"])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("mnk", MNK, ids=str)
def test_mm(mnk, dtype, transpose):
    m, n, k = mnk
    a = make((k, m), dtype).t() if transpose[0] == "t" else make((m, k), dtype)
    b = make((n, k), dtype).t() if transpose[1] == "t" else make((k, n), dtype)
    ta = a.t().contiguous().to("trn").t() if transpose[0] == "t" else a.to("trn")
    tb = b.t().contiguous().to("trn").t() if transpose[1] == "t" else b.to("trn")
    r, at = mm_tol(dtype, max(k, 1))
    check(ta @ tb, a @ b, rtol=r, atol=at)
    bias = make((n,), dtype)
    check(torch.addmm(bias.to("trn"), ta, tb, beta=0.5, alpha=2.0),
          torch.addmm(bias, a, b, beta=0.5, alpha=2.0), rtol=r, atol=at * 2)


def test_addmm_beta_zero_ignores_nan_and_inplace():
    a, b = make((4, 6), F32), make((6, 3), F32)
    c = torch.full((4, 3), float("nan"))
    check(torch.addmm(c.to("trn"), a.to("trn"), b.to("trn"), beta=0), torch.addmm(c, a, b, beta=0), atol=1e-5, rtol=1e-4)
    c = make((4, 3), F32)
    t = c.to("trn")
    t.addmm_(a.to("trn"), b.to("trn"), alpha=0.5)
    check(t, c.addmm(a, b, alpha=0.5), atol=1e-5, rtol=1e-4)
    out = torch.empty(0, device="trn")
    torch.mm(a.to("trn"), b.to("trn"), out=out)
    check(out, a @ b, atol=1e-5, rtol=1e-4)
    # The bias is a row of out itself: read before any tile overwrites it
    # (Note [Bias in the epilogue]), past the GEMV path's few rows.
    a, b, c = make((30, 40), F32), make((40, 70), F32), make((30, 70), F32)
    t, want = c.to("trn"), c.clone()
    torch.addmm(t[0], a.to("trn"), b.to("trn"), out=t)
    torch.addmm(want[0], a, b, out=want)
    check(t, want, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("n", [64, 600])  # 600: k in two slices of the GEMM
def test_mm_into_its_own_operand(n):
    """out is a or b: the GEMM reads A in place and B slice by slice, so it
    computes into scratch first (CPU PyTorch gives the product too)."""
    a, b = make((n, n), F32), make((n, n), F32)
    tol = dict(atol=1e-3, rtol=1e-4)
    ta, tb = a.to("trn"), b.to("trn")
    torch.mm(ta, tb, out=ta)
    check(ta, a @ b, **tol)
    ta, tb = a.to("trn"), b.to("trn")
    torch.mm(ta, tb, out=tb)
    check(tb, a @ b, **tol)
    t = a.to("trn")
    t.addmm_(t, b.to("trn"))
    check(t, a + a @ b, **tol)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_bmm_baddbmm(dtype):
    a, b, c = make((3, 7, 19), dtype), make((3, 19, 5), dtype), make((7, 5), dtype)
    r, at = mm_tol(dtype, 19)
    check(torch.bmm(a.to("trn"), b.to("trn")), torch.bmm(a, b), rtol=r, atol=at)
    tb = b.transpose(1, 2).contiguous().to("trn").transpose(1, 2)
    check(torch.bmm(a.to("trn"), tb), torch.bmm(a, b), rtol=r, atol=at)
    check(torch.baddbmm(c.to("trn"), a.to("trn"), b.to("trn"), beta=2, alpha=0.5),
          torch.baddbmm(c, a, b, beta=2, alpha=0.5), rtol=r, atol=2 * at)


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("shape", [(5, 16), (2, 7, 16), (2, 3, 4, 16)], ids=str)
@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
def test_linear(shape, bias, dtype):
    x, w = make(shape, dtype), make((24, 16), dtype)
    bb = make((24,), dtype) if bias else None
    r, at = mm_tol(dtype, 16)
    got = F.linear(x.to("trn"), w.to("trn"), bb.to("trn") if bias else None)
    check(got, F.linear(x, w, bb), rtol=r, atol=2 * at)
    if len(shape) >= 3:  # non-contiguous input takes matmul's bmm / reshape path
        xs = x.transpose(0, 1)
        ts = x.to("trn").transpose(0, 1)
        check(F.linear(ts, w.to("trn"), bb.to("trn") if bias else None), F.linear(xs, w, bb), rtol=r, atol=2 * at)


@pytest.mark.parametrize(
    "sa,sb", [((5,), (5,)), ((3, 5), (5,)), ((5,), (5, 4)), ((2, 3, 5), (5, 4)), ((2, 4, 3, 5), (2, 4, 5, 6)), ((2, 1, 3, 5), (4, 5, 2))], ids=str
)
def test_matmul(sa, sb):
    a, b = make(sa, F32), make(sb, F32)
    check(torch.matmul(a.to("trn"), b.to("trn")), torch.matmul(a, b), rtol=1e-4, atol=1e-5)


def test_mm_errors():
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        torch.mm(torch.ones(2, 3, device="trn"), torch.ones(4, 5, device="trn"))
    with pytest.raises(RuntimeError, match="dtype"):
        torch.mm(torch.ones(2, 3, device="trn"), torch.ones(3, 5, device="trn", dtype=BF16))


# ---- normalization ------------------------------------------------------------------------
@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("norm_shape", [(33,), (5, 33)], ids=str)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("layout", ["contig", "transposed"])
def test_layer_norm(dtype, norm_shape, affine, layout):
    w, b = (make(norm_shape, dtype), make(norm_shape, dtype)) if affine else (None, None)
    if layout == "transposed":
        x = make((5, 4, 33), dtype)
        x, t = x.transpose(0, 1), x.to("trn").transpose(0, 1)
    else:
        x = make((4, 5, 33), dtype)
        t = x.to("trn")
    tw = w.to("trn") if affine else None
    tb = b.to("trn") if affine else None
    check(F.layer_norm(t, norm_shape, tw, tb, 1e-5), F.layer_norm(x, norm_shape, w, b, 1e-5), transcendental=True)
    o, m, r = torch.native_layer_norm(t, norm_shape, tw, tb, 1e-5)
    wo, wm, wr = torch.native_layer_norm(x, norm_shape, w, b, 1e-5)
    check(o, wo, transcendental=True)
    check(m, wm, transcendental=True)
    check(r, wr, transcendental=True, rtol=1e-2 if dtype != F32 else 1e-4)


@pytest.mark.parametrize("eps", [None, 1e-6])
@pytest.mark.parametrize("weight", [False, True])
@pytest.mark.parametrize("norm_shape", [(64,), (3, 64)], ids=str)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("layout", ["contig", "transposed"])
def test_rms_norm(dtype, norm_shape, weight, eps, layout):
    w = make(norm_shape, dtype) if weight else None
    if layout == "transposed":
        x = make((3, 2, 64), dtype)
        x, t = x.transpose(0, 1), x.to("trn").transpose(0, 1)
    else:
        x = make((2, 3, 64), dtype)
        t = x.to("trn")
    tw = w.to("trn") if weight else None
    check(F.rms_norm(t, norm_shape, tw, eps), F.rms_norm(x, norm_shape, w, eps), transcendental=True)
    o, r = torch.ops.aten._fused_rms_norm(t, list(norm_shape), tw, eps)
    wo, wr = torch.ops.aten._fused_rms_norm(x, list(norm_shape), w, eps)
    check(o, wo, transcendental=True)
    check(r, wr, transcendental=True, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_rms_norm_is_one_fused_launch(dtype):
    """The seed's "built-in fused function": F.rms_norm is ONE kernel launch."""
    x = torch.randn(8, 4096, dtype=dtype, device="trn")
    w = torch.randn(4096, dtype=dtype, device="trn")
    counts = launch_counts(lambda: F.rms_norm(x, (4096,), w, 1e-6))
    assert len(counts) == 1 and sum(map(int, counts.values())) == 1, counts
    (name,) = counts
    assert name.startswith("rms_norm_"), name
    module = torch.nn.RMSNorm(4096, eps=1e-6, dtype=dtype).to("trn")
    with torch.inference_mode():
        counts = launch_counts(lambda: module(x))
    assert counts == {name: 1}, counts


def test_naive_rms_norm_launches_one_kernel_per_op():
    x = torch.randn(8, 512, device="trn")
    w = torch.randn(512, device="trn")

    def naive():
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    counts = launch_counts(naive)
    assert sum(map(int, counts.values())) == 6, counts  # pow mean add rsqrt mul mul
    check(naive(), F.rms_norm(x.cpu(), (512,), w.cpu(), 1e-6), transcendental=True)


def test_rms_norm_records_autograd():
    x = torch.randn(3, 16, device="trn", requires_grad=True)
    y = F.rms_norm(x, (16,))
    assert y.grad_fn is not None
    check(y.detach(), F.rms_norm(x.detach().cpu(), (16,)), transcendental=True)


# ---- embedding, index_select, cat --------------------------------------------------------------
@pytest.mark.parametrize("idx_dtype", [I64, I32], ids=str)
@pytest.mark.parametrize("dtype", [F32, BF16, I64], ids=str)
def test_embedding(dtype, idx_dtype):
    w = make((11, 6), dtype)
    idx = torch.randint(0, 11, (3, 5)).to(idx_dtype)
    check(F.embedding(idx.to("trn"), w.to("trn")), F.embedding(idx.long(), w))
    check(F.embedding(idx.to("trn").t(), w.to("trn"), padding_idx=0), F.embedding(idx.long().t(), w))
    module = torch.nn.Embedding(11, 6).to("trn")
    with torch.inference_mode():
        check(module(idx.to("trn")), F.embedding(idx.long(), module.weight.detach().cpu()))


def test_embedding_out_of_range_fails_at_sync_and_device_recovers():
    w = torch.randn(5, 3, device="trn")
    y = F.embedding(torch.tensor([1, 7], device="trn"), w)
    with pytest.raises(RuntimeError, match="out of range"):
        torch.trn.synchronize()
    check(w + 1, w.cpu() + 1)


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("dtype", [F32, F16, I32, BOOL], ids=str)
@pytest.mark.parametrize("layout", ["contig", "transposed", "strided"])
def test_index_select(dtype, dim, layout):
    x, t = on_trn(make((5, 7, 6), dtype), layout)
    idx = torch.tensor([4, 0, 2, 2, -1])
    idx = idx % x.shape[dim]
    check(torch.index_select(t, dim, idx.to("trn")), torch.index_select(x, dim, idx))
    check(torch.index_select(t, dim, idx[:1].to("trn").int()), torch.index_select(x, dim, idx[:1]))
    out = torch.empty(0, dtype=dtype, device="trn")
    torch.index_select(t, dim, idx.to("trn"), out=out)
    check(out, torch.index_select(x, dim, idx))


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("dtypes", [(F32, F32, F32), (BF16, BF16, BF16), (I64, I64, I64), (F32, BF16, I32), (BOOL, I32, I32)], ids=str)
def test_cat(dtypes, dim):
    xs = [make((3, 4, 5), d) for d in dtypes]
    sizes = [1, 3, 2]
    xs = [x.narrow(dim, 0, s) for x, s in zip(xs, sizes)]
    ts = [x.to("trn") for x in xs]
    ts[1] = xs[1].transpose(0, 2).contiguous().to("trn").transpose(0, 2)  # non-contiguous input
    check(torch.cat(ts, dim), torch.cat(xs, dim))
    out = torch.empty(0, dtype=torch.cat(xs, dim).dtype, device="trn")
    torch.cat(ts, dim, out=out)
    check(out, torch.cat(xs, dim))


def test_cat_legacy_empty_and_single():
    x = make((3, 4), F32)
    check(torch.cat([torch.empty(0, device="trn"), x.to("trn")], 0), torch.cat([torch.empty(0), x], 0))
    check(torch.cat([x.to("trn")], 1), x)
    with pytest.raises(RuntimeError, match="Sizes of tensors must match"):
        torch.cat([torch.ones(2, 3, device="trn"), torch.ones(3, 3, device="trn")], 1)


# ---- the elementwise ops real models hit ------------------------------------------------
# Masks (isneginf, bitwise ops on bool), rounding, clamp, erf, integer division.
# Each case runs on CPU and on trn; where CPU PyTorch raises, trn must raise the
# same exception type (bitwise ops on floats, rounding of bool, ...).
NUM = [F32, BF16, F16, I32, I64]
SPECIALS = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 0.5, 1.5, 2.5, -2.5, -0.5, 1e30, -3.75]


def with_specials(x):
    """Floating x with NaN, +-inf, -0.0 and x.5 values written over its first elements."""
    if not x.dtype.is_floating_point or x.numel() == 0:
        return x
    flat = x.clone().reshape(-1)
    n = min(flat.numel(), len(SPECIALS))
    flat[:n] = torch.tensor(SPECIALS[:n]).to(x.dtype)
    return flat.reshape(x.shape)


def spread(x, k):
    """x * k keeping x's dtype (bool stays 0/1)."""
    return x if x.dtype == BOOL else (x * k).to(x.dtype)


def same_as_cpu(fn, cpu_args, trn_args, transcendental=False, **tols):
    """fn on CPU vs on trn; when CPU raises, trn raises the same exception type."""
    try:
        want = fn(*cpu_args)
    except Exception as e:  # noqa: BLE001 - the type is what is compared
        with pytest.raises(type(e)):
            fn(*trn_args)
            torch.trn.synchronize()
        return None
    got = fn(*trn_args)
    check(got, want, transcendental=transcendental, **tols)
    return got


MODEL_UNARY = {
    "isnan": torch.isnan,
    "isinf": torch.isinf,
    "isposinf": torch.isposinf,
    "isneginf": torch.isneginf,
    "isfinite": torch.isfinite,
    "floor": torch.floor,
    "ceil": torch.ceil,
    "round": torch.round,
    "trunc": torch.trunc,
    "sign": torch.sign,
    "sgn": torch.sgn,
    "erf": torch.erf,
    "bitwise_not": torch.bitwise_not,
    "nan_to_num": torch.nan_to_num,
    "nan_to_num_args": lambda x: torch.nan_to_num(x, nan=-1.0, posinf=7.0, neginf=-7.0),
    "signbit": torch.signbit,
    "frac": torch.frac,
}
# libm in float32 on both sides (trn: glibc, CPU: Sleef or glibc): transcendental tolerances.
LIBM_UNARY = ["tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "log2",
              "log10", "exp2", "erfc", "lgamma", "sinc"]
MODEL_UNARY.update({name: getattr(torch, name) for name in LIBM_UNARY})
TRANSCENDENTAL = {"erf", *LIBM_UNARY}


@pytest.mark.parametrize("layout", ["contig", "transposed", "strided"])
@pytest.mark.parametrize("shape", [(), (17,), (3, 5, 7), (0, 3)], ids=str)
@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("name", list(MODEL_UNARY))
def test_model_unary(name, dtype, shape, layout):
    fn = MODEL_UNARY[name]
    x = with_specials(spread(make(shape, dtype), 3))
    x, t = on_trn(x, layout)
    same_as_cpu(fn, (x,), (t,), transcendental=name in TRANSCENDENTAL)


@pytest.mark.parametrize("name", ["floor", "ceil", "round", "trunc", "sign", "erf", "bitwise_not", "nan_to_num",
                                  "frac", "tan", "log10", "lgamma", "sinc"])
@pytest.mark.parametrize("dtype", [F32, BF16, I64, BOOL], ids=str)
def test_model_unary_inplace_and_out(name, dtype):
    x = with_specials(spread(make((4, 7), dtype), 3))
    try:
        want = getattr(torch, name)(x)
    except RuntimeError:
        pytest.skip("CPU rejects this dtype")
    if want.dtype == x.dtype:
        t = x.to("trn")
        getattr(t, name + "_")()
        check(t, want, transcendental=name in TRANSCENDENTAL)
    else:  # erf of an integer is float: in-place cannot hold it
        with pytest.raises(RuntimeError):
            getattr(x.to("trn"), name + "_")()
    out = torch.empty(0, dtype=want.dtype, device="trn")
    getattr(torch, name)(x.to("trn"), out=out)
    check(out, want, transcendental=name in TRANSCENDENTAL)


@pytest.mark.parametrize("name", ["isposinf", "isneginf"])
def test_inf_predicates_out(name):
    x = with_specials(make((3, 8), F16))
    out = torch.empty(0, dtype=BOOL, device="trn")
    getattr(torch, name)(x.to("trn"), out=out)
    check(out, getattr(torch, name)(x))


def test_erf_accuracy_near_zero_and_tails():
    x = torch.tensor([0.0, -0.0, 1e-6, -3e-4, 0.01, 0.49, 0.5, 0.51, 1.0, 2.0, 3.9, 4.5, 10.0, -10.0])
    check(torch.erf(x.to("trn")), torch.erf(x), rtol=2e-6, atol=1e-7)
    x64 = torch.linspace(-6, 6, 1001, dtype=torch.float64)
    check(torch.erf(x64.to("trn")), torch.erf(x64), rtol=2e-6, atol=2e-7)


@pytest.mark.parametrize("decimals", [-2, -1, 1, 2, 3])
@pytest.mark.parametrize("dtype", [F32, torch.float64], ids=str)
def test_round_decimals(decimals, dtype):
    x = torch.cat([torch.tensor([1.25, 0.125, 15.0, 25.0, -35.0, 2.5, -0.5, 1234.5]), make((40,), F32) * 100]).to(dtype)
    check(torch.round(x.to("trn"), decimals=decimals), torch.round(x.float(), decimals=decimals).to(dtype))
    t = x.to("trn")
    t.round_(decimals=decimals)
    check(t, torch.round(x.float(), decimals=decimals).to(dtype))
    out = torch.empty(0, dtype=dtype, device="trn")
    torch.round(x.to("trn"), decimals=decimals, out=out)
    check(out, torch.round(x.float(), decimals=decimals).to(dtype))


def test_round_half_to_even_and_errors():
    x = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, 1e8 + 1, 2.0**23 + 1.5])
    check(torch.round(x.to("trn")), torch.round(x), rtol=0, atol=0)
    with pytest.raises(NotImplementedError, match="Long"):
        torch.round(torch.ones(3, dtype=I64, device="trn"), decimals=1)
    with pytest.raises(NotImplementedError, match="Bool"):
        torch.floor(torch.ones(3, dtype=BOOL, device="trn"))
    with pytest.raises(NotImplementedError, match="Float"):
        torch.bitwise_not(torch.ones(3, device="trn"))


def test_nan_to_num_float64_and_half_defaults():
    for dtype in [torch.float64, F16, BF16, F32]:
        x = with_specials(make((20,), dtype))
        check(torch.nan_to_num(x.to("trn")), torch.nan_to_num(x), rtol=0, atol=0)
        t = x.to("trn")
        torch.nan_to_num_(t, nan=2.0)
        check(t, torch.nan_to_num(x, nan=2.0), rtol=0, atol=0)


MODEL_BINARY = {
    "bitwise_and": (torch.bitwise_and, "any"),
    "bitwise_or": (torch.bitwise_or, "any"),
    "bitwise_xor": (torch.bitwise_xor, "any"),
    "and_op": (lambda a, b: a & b, "any"),
    "or_op": (lambda a, b: a | b, "any"),
    "xor_op": (lambda a, b: a ^ b, "any"),
    "lshift": (torch.bitwise_left_shift, "small_exp"),
    "rshift": (torch.bitwise_right_shift, "small_exp"),
    "lshift_op": (lambda a, b: a << b, "small_exp"),
    "rshift_op": (lambda a, b: a >> b, "small_exp"),
    "remainder": (torch.remainder, "nonzero"),
    "mod_op": (lambda a, b: a % b, "nonzero"),
    "fmod": (torch.fmod, "nonzero"),
    "atan2": (torch.atan2, "any"),
    "div_trunc": (lambda a, b: torch.div(a, b, rounding_mode="trunc"), "nonzero"),
    "div_floor": (lambda a, b: torch.div(a, b, rounding_mode="floor"), "nonzero"),
    "div_none": (lambda a, b: torch.div(a, b, rounding_mode=None), "nonzero"),
    "floordiv_op": (lambda a, b: a // b, "nonzero"),
    "clamp_min_t": (torch.clamp_min, "any"),
    "clamp_max_t": (torch.clamp_max, "any"),
    "maximum_as_clamp": (lambda a, b: torch.clamp(a, min=b), "any"),
    "hypot": (torch.hypot, "any"),
    "logaddexp": (torch.logaddexp, "any"),
    "logaddexp2": (torch.logaddexp2, "any"),
    "copysign": (torch.copysign, "nonzero"),
    "xlogy": (torch.xlogy, "positive"),
    "fmax": (torch.fmax, "any"),
    "fmin": (torch.fmin, "any"),
    "heaviside": (torch.heaviside, "any"),
    "logical_xor": (torch.logical_xor, "any"),
}
LIBM_BINARY = {"atan2", "hypot", "logaddexp", "logaddexp2", "xlogy"}


def binary_transcendental(name):
    return "div" in name or name in LIBM_BINARY


def model_binary_inputs(name, sa, sb, dtype):
    a = spread(make(sa, dtype), 4 if dtype.is_floating_point else 7)
    b = make(sb, dtype, MODEL_BINARY[name][1])
    if dtype.is_floating_point and "shift" not in name and "bitwise" not in name:
        a = a.round(decimals=1) if dtype == F32 else a  # near-integer quotients are the hard case
    return a, b


@pytest.mark.parametrize("shapes", BROADCAST, ids=str)
@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("name", list(MODEL_BINARY))
def test_model_binary(name, dtype, shapes):
    fn = MODEL_BINARY[name][0]
    a, b = model_binary_inputs(name, *shapes, dtype)
    same_as_cpu(fn, (a, b), (a.to("trn"), b.to("trn")), transcendental=binary_transcendental(name))


@pytest.mark.parametrize("layout", ["transposed", "strided"])
@pytest.mark.parametrize("dtype", [F32, BF16, I32, I64, BOOL], ids=str)
@pytest.mark.parametrize("name", list(MODEL_BINARY))
def test_model_binary_noncontiguous(name, dtype, layout):
    fn = MODEL_BINARY[name][0]
    a, b = model_binary_inputs(name, (3, 6, 5), (6, 5), dtype)
    _, ta = on_trn(a, layout)
    _, tb = on_trn(b, "strided" if layout == "transposed" else "transposed")
    same_as_cpu(fn, (a, b), (ta, tb), transcendental=binary_transcendental(name))


@pytest.mark.parametrize("scalar", [2, -3, 2.5, True], ids=repr)
@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("name", list(MODEL_BINARY))
def test_model_binary_scalar(name, dtype, scalar):
    fn = MODEL_BINARY[name][0]
    if "shift" in name and scalar == -3:
        scalar = 3
    a = spread(make((4, 9), dtype), 4 if dtype.is_floating_point else 7)
    same_as_cpu(fn, (a, scalar), (a.to("trn"), scalar), transcendental=binary_transcendental(name))


@pytest.mark.parametrize("dtype", [F32, I32, I64, BOOL], ids=str)
@pytest.mark.parametrize("op", ["rmod", "rand", "ror", "rxor", "rlshift", "rfloordiv"])
def test_model_binary_scalar_first(op, dtype):
    fns = {
        "rmod": lambda s, t: s % t,
        "rand": lambda s, t: s & t,
        "ror": lambda s, t: s | t,
        "rxor": lambda s, t: s ^ t,
        "rlshift": lambda s, t: s << t,
        "rfloordiv": lambda s, t: s // t,
    }
    a = make((5, 3), dtype, "small_exp" if op == "rlshift" else "nonzero")
    scalar = True if dtype == BOOL and op in ("rand", "ror", "rxor") else 5
    same_as_cpu(lambda s, t: fns[op](s, t), (scalar, a), (scalar, a.to("trn")))


@pytest.mark.parametrize("dtype", [F32, I64, BOOL], ids=str)
@pytest.mark.parametrize("name", ["bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift", "remainder", "fmod", "floor_divide",
                                  "hypot", "copysign", "xlogy", "heaviside", "logical_xor"])
def test_model_binary_inplace_and_out(name, dtype):
    kind = "small_exp" if "shift" in name else "nonzero"
    a, b = spread(make((4, 6), dtype), 5), make((6,), dtype, kind)
    try:
        want = getattr(torch, name)(a, b)
    except RuntimeError:
        with pytest.raises(RuntimeError):
            getattr(torch, name)(a.to("trn"), b.to("trn"))
        return
    # In place, CPU's own in-place result: logical_xor_ keeps self's dtype, copysign_
    # of an integer self cannot hold its float result and raises.
    libm = name in LIBM_BINARY  # glibc against Sleef: an ulp apart
    same_as_cpu(lambda x, y: getattr(x.clone(), name + "_")(y), (a, b), (a.to("trn"), b.to("trn")),
                transcendental=libm)
    out = torch.empty(0, dtype=want.dtype, device="trn")
    getattr(torch, name)(a.to("trn"), b.to("trn"), out=out)
    check(out, want, transcendental=libm)
    if dtype != BOOL:
        d = make((6,), dtype, "nonzero")
        t = a.to("trn")
        t.div_(d.to("trn"), rounding_mode="floor")
        check(t, torch.div(a, d, rounding_mode="floor"))


@pytest.mark.parametrize("dtype", [F32, BF16, I64], ids=str)
def test_libm_binary_scalars_and_out(dtype):
    a = spread(make((4, 9), dtype, "positive"), 2)
    b = make((9,), dtype, "positive")
    ta, tb = a.to("trn"), b.to("trn")
    for fn in (lambda x, y: torch.xlogy(2.5, y), lambda x, y: torch.xlogy(x, 3),
               lambda x, y: torch.xlogy(0, y), lambda x, y: torch.copysign(x, -2)):
        same_as_cpu(fn, (a, b), (ta, tb), transcendental=True)
    for name in ("logaddexp", "logaddexp2", "fmax", "fmin", "hypot"):
        try:
            want = getattr(torch, name)(a, b)
        except NotImplementedError:  # CPU takes floating tensors only
            with pytest.raises(NotImplementedError):
                getattr(torch, name)(ta, tb)
            continue
        out = torch.empty(0, dtype=want.dtype, device="trn")
        getattr(torch, name)(ta, tb, out=out)
        check(out, want, transcendental=True)
    out = torch.empty(0, dtype=torch.float32, device="trn")
    torch.xlogy(3.0, tb, out=out)
    check(out, torch.xlogy(3.0, b, out=torch.empty(0)), transcendental=True)


def test_heaviside_needs_one_dtype_and_kl_div_is_native():
    with pytest.raises(RuntimeError, match="different dtypes"):
        torch.heaviside(torch.ones(3, device="trn"), torch.ones(3, dtype=I64, device="trn"))
    with pytest.raises(RuntimeError, match="different dtypes"):  # out's dtype too, as CPU's
        torch.heaviside(torch.ones(3, device="trn"), torch.ones(3, device="trn"),
                        out=torch.empty(3, dtype=torch.float64, device="trn"))
    for name in ("signbit", "isposinf", "isneginf"):
        with pytest.raises(RuntimeError, match="does not support non-boolean outputs"):
            getattr(torch, name)(torch.ones(3, device="trn"), out=torch.empty(3, device="trn"))
    p = torch.randn(6, 10).log_softmax(-1)
    q = torch.randn(6, 10).softmax(-1)
    for reduction in ("batchmean", "sum", "none"):
        check(F.kl_div(p.to("trn"), q.to("trn"), reduction=reduction),
              F.kl_div(p, q, reduction=reduction), transcendental=True)


def test_bool_mask_combinations_like_attention():
    """The causal/padding mask shapes of transformers: bool & | ~ over broadcasts."""
    causal = torch.ones(6, 6, dtype=BOOL).tril()
    pad = torch.tensor([[True] * 4 + [False] * 2, [True] * 6])
    want = ~(causal[None] & pad[:, None, :]) | torch.isneginf(torch.full((2, 1, 6), -float("inf")))
    got = ~(causal.to("trn")[None] & pad.to("trn")[:, None, :]) | torch.isneginf(
        torch.full((2, 1, 6), -float("inf"), device="trn"))
    check(got, want)
    m = pad.to("trn").clone()
    m &= causal.to("trn")[0]
    m |= causal.to("trn")[1]
    m ^= causal.to("trn")[2]
    check(m, ((pad & causal[0]) | causal[1]) ^ causal[2])


@pytest.mark.parametrize("dtype", [I32, I64], ids=str)
def test_integer_division_by_zero_is_an_error_not_a_crash(dtype):
    a = torch.tensor([5, -7, 3], dtype=dtype)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        torch.remainder(a.to("trn"), 0)
    for fn in [lambda x, y: x // y, lambda x, y: x % y, torch.fmod, lambda x, y: torch.div(x, y, rounding_mode="trunc")]:
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            fn(a.to("trn"), torch.tensor([1, 0, 2], dtype=dtype, device="trn")).cpu()
    # The device stays usable; INT_MIN // -1 wraps as on CPU.
    mn = torch.tensor([torch.iinfo(dtype).min, 7], dtype=dtype)
    check(mn.to("trn") // -1, mn // -1)
    check(mn.to("trn") % -1, mn % -1)


def test_float_division_rounding_specials():
    a = torch.tensor([1.0, -1.0, 0.0, -0.0, float("inf"), 7.5, -7.5, float("nan")])
    b = torch.tensor([0.0, 0.0, 0.0, 3.0, 2.0, float("inf"), 2.0, 1.0])
    for mode in ["floor", "trunc"]:
        check(torch.div(a.to("trn"), b.to("trn"), rounding_mode=mode), torch.div(a, b, rounding_mode=mode), rtol=0, atol=0)
    check(torch.remainder(a.to("trn"), b.to("trn")), torch.remainder(a, b), rtol=0, atol=0)
    check(torch.fmod(a.to("trn"), b.to("trn")), torch.fmod(a, b), rtol=0, atol=0)
    check(torch.atan2(a.to("trn"), b.to("trn")), torch.atan2(a, b), rtol=0, atol=0)  # signed zeros, inf
    t = a.to("trn")
    t.atan2_(b.to("trn"))
    check(t, torch.atan2(a, b), rtol=0, atol=0)
    with pytest.raises(RuntimeError, match="rounding_mode"):
        torch.div(a.to("trn"), b.to("trn"), rounding_mode="round")


@pytest.mark.parametrize("dtype", [F32, BF16, F16, I32, I64, BOOL], ids=str)
@pytest.mark.parametrize(
    "bounds", [(-0.5, 0.75), (None, 1), (-1, None), (2, -2), (0, 0), (-2.5, 3)], ids=str)
def test_clamp_scalar(dtype, bounds):
    lo, hi = bounds
    x = with_specials(spread(make((5, 7), dtype), 2))
    for layout in ["contig", "transposed"]:
        xc, t = on_trn(x, layout)
        same_as_cpu(lambda v: torch.clamp(v, lo, hi), (xc,), (t,))
        same_as_cpu(lambda v: torch.clip(v, min=lo, max=hi), (xc,), (t,))
    if lo is not None:
        same_as_cpu(lambda v: torch.clamp_min(v, lo), (x,), (x.to("trn"),))
    if hi is not None:
        same_as_cpu(lambda v: torch.clamp_max(v, hi), (x,), (x.to("trn"),))


def test_clamp_inplace_out_and_errors():
    x = with_specials(make((4, 6), F32) * 3)
    t = x.to("trn")
    t.clamp_(-1, 1)
    check(t, x.clamp(-1, 1))
    t = x.to("trn")
    t.clamp_min_(0.25).clamp_max_(2)
    check(t, x.clamp_min(0.25).clamp_max(2))
    out = torch.empty(0, device="trn")
    torch.clamp(x.to("trn"), max=0.5, out=out)
    check(out, x.clamp(max=0.5))
    i = make((4, 6), I64)
    check(torch.clamp(i.to("trn"), min=0.5), torch.clamp(i, min=0.5))  # promotes to float
    with pytest.raises(RuntimeError, match="can't be cast"):
        i.to("trn").clamp_(min=0.5)
    with pytest.raises(RuntimeError, match="At least one of 'min' or 'max'"):
        torch.clamp(x.to("trn"))
    h = make((4, 6), F16) * 1000  # the fp16 overflow guard of T5-style models
    check(torch.clamp(h.to("trn"), min=-65504.0 + 1000, max=65504.0 - 1000), torch.clamp(h, min=-64504.0, max=64504.0))


@pytest.mark.parametrize("dtype", [F32, BF16, I64], ids=str)
@pytest.mark.parametrize("which", ["both", "min", "max"])
def test_clamp_tensor_bounds(dtype, which):
    x = with_specials(spread(make((3, 5, 7), dtype), 3))
    lo = make((5, 1), dtype) - (1 if dtype.is_floating_point else 2)
    hi = make((7,), dtype).abs() + 1
    kw = {"both": dict(min=lo, max=hi), "min": dict(min=lo), "max": dict(max=hi)}[which]
    kwt = {k: v.to("trn") for k, v in kw.items()}
    check(torch.clamp(x.to("trn"), **kwt), torch.clamp(x, **kw))
    t = x.to("trn")
    t.clamp_(**kwt)
    check(t, torch.clamp(x, **kw))
    out = torch.empty(0, dtype=dtype, device="trn")
    torch.clamp(x.to("trn"), **kwt, out=out)
    check(out, torch.clamp(x, **kw))
    if which == "min":
        check(torch.clamp_min(x.to("trn"), lo.to("trn")), torch.clamp_min(x, lo))
    if which == "max":
        check(torch.clamp_max(x.to("trn"), hi.to("trn")), torch.clamp_max(x, hi))
    if dtype.is_floating_point:  # a NaN bound gives NaN
        lo_nan = lo.clone()
        lo_nan[0] = float("nan")
        check(torch.clamp(x.to("trn"), min=lo_nan.to("trn"), max=hi.to("trn")), torch.clamp(x, min=lo_nan, max=hi))


@pytest.mark.parametrize("dtype", [F32, BF16, F16], ids=str)
def test_lerp(dtype):
    a, b = make((3, 5, 7), dtype), make((5, 7), dtype)
    w = make((7,), dtype).abs()
    for weight in [0.25, 0.75, 1.0, -0.5]:
        check(torch.lerp(a.to("trn"), b.to("trn"), weight), torch.lerp(a, b, weight))
    check(torch.lerp(a.to("trn"), b.to("trn"), w.to("trn")), torch.lerp(a, b, w))
    _, ta = on_trn(a, "transposed")
    check(torch.lerp(ta, b.to("trn"), w.to("trn")), torch.lerp(a, b, w))
    t = a.to("trn")
    t.lerp_(b.to("trn"), 0.3)
    check(t, a.lerp(b, 0.3))
    out = torch.empty(0, dtype=dtype, device="trn")
    torch.lerp(a.to("trn"), b.to("trn"), w.to("trn"), out=out)
    check(out, torch.lerp(a, b, w))
    with pytest.raises(NotImplementedError):
        torch.lerp(torch.ones(3, dtype=I64, device="trn"), torch.ones(3, dtype=I64, device="trn"), 0.5)


@pytest.mark.parametrize("op", ["addcmul", "addcdiv"])
@pytest.mark.parametrize("dtype", [F32, BF16, F16, I32, I64], ids=str)
def test_addcmul_addcdiv(op, dtype):
    """self + value * (t1 op t2), broadcast, promoted, non-contiguous, in place and out=
    (optimizers' update); integer addcdiv raises as on CPU."""
    fn = getattr(torch, op)
    x = make((3, 5, 7), dtype)
    t1 = make((5, 7), dtype)
    t2 = make((7,), dtype, "nonzero")
    _, tx = on_trn(x, "strided")
    _, tt1 = on_trn(t1, "transposed")
    value = 0.5 if dtype.is_floating_point else 3
    same_as_cpu(lambda a, b, c: fn(a, b, c, value=value), (x, t1, t2), (tx, tt1, t2.to("trn")))
    same_as_cpu(lambda a, b, c: fn(a, b, c), (x, t1, t2), (tx, tt1, t2.to("trn")))
    if dtype == F32:  # promotion: a float64 self
        same_as_cpu(fn, (x.double(), t1, t2), (tx.double(), tt1, t2.to("trn")))
    if op == "addcdiv" and not dtype.is_floating_point:
        return
    t = x.to("trn")
    getattr(t, op + "_")(t1.to("trn"), t2.to("trn"), value=value)
    check(t, getattr(x.clone(), op + "_")(t1, t2, value=value))
    out = torch.empty(0, dtype=dtype, device="trn")
    fn(x.to("trn"), t1.to("trn"), t2.to("trn"), value=value, out=out)
    check(out, fn(x, t1, t2, value=value))


@pytest.mark.uses_fallback  # backward ops (tanh_backward) may; the steps may not
@pytest.mark.parametrize("opt", ["Adam", "AdamW", "SGD", "RMSprop", "Adagrad"])
def test_optimizer_steps_equal_cpu(opt):
    """torch.optim's single-tensor updates (addcmul_, addcdiv_, lerp_, sqrt, ...) on trn,
    with no op of the step through the CPU fallback."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    twin = copy.deepcopy(model).to("trn")
    kwargs = {"lr": 0.01, **({"momentum": 0.9, "nesterov": True} if opt == "SGD" else {})}
    opts = [getattr(torch.optim, opt)(m.parameters(), **kwargs) for m in (model, twin)]
    x = make((5, 8), F32)
    for _ in range(3):
        for m, o, dev in zip((model, twin), opts, ("cpu", "trn")):
            o.zero_grad()
            m(x.to(dev)).pow(2).sum().backward()
            torch.trn.synchronize()
            before = trnscope.fallback_ops()
            o.step()
            torch.trn.synchronize()
            assert trnscope.fallback_ops() == before, (before, trnscope.fallback_ops())
    for p, q in zip(model.parameters(), twin.parameters()):
        check(q.detach(), p.detach(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [F32, BF16, I64, BOOL], ids=str)
def test_eye(dtype):
    for args in [(0,), (1,), (4,), (3, 5), (5, 2), (0, 3)]:
        check(torch.eye(*args, dtype=dtype, device="trn"), torch.eye(*args, dtype=dtype))
    out = torch.full((2, 2), 7, dtype=dtype, device="trn")
    torch.eye(3, 4, out=out)
    check(out, torch.eye(3, 4, dtype=dtype))
    with pytest.raises(RuntimeError, match="n must be greater or equal to 0"):
        torch.eye(-1, device="trn")


def test_model_ops_kernel_names_in_launch_counts():
    """Each op is one native kernel launch with a KernelInfo name the profiler shows."""
    x = torch.randn(8, 8, device="trn")
    torch.trn.synchronize()
    cases = {
        "isneginf_f32": lambda: torch.isneginf(x),
        "clamp_f32": lambda: torch.clamp(x, -1, 1),
        "erf_f32": lambda: torch.erf(x),
        "round_f32": lambda: torch.round(x, decimals=2),
        "bitwise_and_bool": lambda: (x > 0) & (x < 1),
        "div_floor_f32": lambda: x // 0.5,
        "nan_to_num_f32": lambda: torch.nan_to_num(x),
    }
    for kernel, fn in cases.items():
        counts = launch_counts(fn)
        assert kernel in counts, (kernel, counts)


@pytest.mark.parametrize("dtype", [F32, BF16, I64], ids=str)
def test_where_scalar_branches_and_masked_fill_tensor_value(dtype):
    c = make((4, 6), BOOL)
    x = make((4, 6), dtype)
    for a, b in [(1.0, 0.0), (x, -3), (2, x), (True, x)]:
        ta = a.to("trn") if isinstance(a, torch.Tensor) else a
        tb = b.to("trn") if isinstance(b, torch.Tensor) else b
        same_as_cpu(torch.where, (c, a, b), (c.to("trn"), ta, tb))
    v = torch.tensor(-7, dtype=dtype)
    check(x.to("trn").masked_fill(c.to("trn"), v.to("trn")), x.masked_fill(c, v))
    check(x.to("trn").masked_fill(c.to("trn"), v), x.masked_fill(c, v))


@pytest.mark.parametrize("dtype", [F32, BF16, F16], ids=str)
@pytest.mark.parametrize("exponent", [3, 3.0, -2, 4.0, 1.5])
def test_pow_scalar_exponents(dtype, exponent):
    """x**3 (GPT-2's gelu) and x**-2 are computed as torch does: x*x*x and 1/(x*x)."""
    x = make((6, 33), dtype, "nonzero")
    _, t = on_trn(x, "strided")
    exact = dtype == F32 and exponent in (3, 3.0, -2)
    check(torch.pow(t, exponent), torch.pow(x, exponent), transcendental=not exact,
          **({"rtol": 0, "atol": 0} if exact else {}))


# ---- activations: hardtanh (relu6), the parametrized Activation kernel, log1p / expm1 ----
ACTIVATIONS = {
    "relu6": F.relu6,
    "hardtanh": lambda x: F.hardtanh(x, -2.0, 0.5),
    "hardtanh_int_bounds": lambda x: torch.ops.aten.hardtanh(x, -1.5, 2.5),  # ints truncate them
    "leaky_relu": F.leaky_relu,
    "leaky_relu_neg": lambda x: F.leaky_relu(x, -1.5),
    "elu": F.elu,
    "elu_params": lambda x: torch.ops.aten.elu(x, 0.7, 1.3, 0.4),
    "selu": F.selu,
    "celu": lambda x: F.celu(x, 0.3),
    "softplus": F.softplus,
    "softplus_beta": lambda x: F.softplus(x, 2.0, 5.0),  # threshold 5 is crossed below
    "softplus_neg_beta": lambda x: F.softplus(x, -0.5, 3.0),
    "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid,
    "mish": F.mish,
    "hardshrink": F.hardshrink,
    "hardshrink_wide": lambda x: F.hardshrink(x, 1.5),
    "softshrink": F.softshrink,
    "softshrink_narrow": lambda x: F.softshrink(x, 0.25),
    "logsigmoid": F.logsigmoid,
    "rrelu_eval": lambda x: F.rrelu(x, 0.1, 0.3, training=False),
    "log1p": torch.log1p,
    "expm1": torch.expm1,
}


@pytest.mark.parametrize("layout", ["contig", "transposed", "strided"])
@pytest.mark.parametrize("shape", [(), (17,), (3, 5, 7), (0, 3)], ids=str)
@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation(name, dtype, shape, layout):
    """Integers: hardtanh clamps, log1p/expm1 promote, the others raise as on CPU."""
    x = with_specials(spread(make(shape, dtype), 3))
    x, t = on_trn(x, layout)
    same_as_cpu(ACTIVATIONS[name], (x,), (t,), transcendental=True)


def test_activation_thresholds_and_ranges():
    """softplus returns x past beta * x > threshold; exp/log1p past their vector ranges."""
    x = torch.tensor(
        [19.99, 20.0, 20.01, 4.99, 2.5, 2.51, -88.0, -100.0, 88.0, 89.0, 1e-8, -1e-8, -0.999, -1.0]
    )
    fns = [F.softplus, lambda v: F.softplus(v, 2.0, 5.0), F.mish, F.elu, torch.log1p, torch.expm1, F.selu]
    for fn in fns:
        same_as_cpu(fn, (x,), (x.to("trn"),), transcendental=True)
    # near 0 log1p/expm1 are accurate in relative terms (log(1 + x) would be 0 here)
    tiny = torch.tensor([1e-10, -1e-10, 3e-8, -3e-8])
    check(torch.log1p(tiny.to("trn")), torch.log1p(tiny), rtol=1e-6, atol=0)
    check(torch.expm1(tiny.to("trn")), torch.expm1(tiny), rtol=1e-6, atol=0)


def test_activation_negative_zero_keeps_its_sign():
    z = torch.tensor([-0.0, 0.0])
    for fn in [F.relu6, F.hardtanh, F.leaky_relu, F.elu, F.hardswish, F.mish, torch.log1p, torch.expm1,
               F.hardshrink, F.softshrink, F.rrelu]:
        want = fn(z)
        got = fn(z.to("trn")).cpu()
        assert torch.equal(torch.signbit(got), torch.signbit(want)), (fn, got, want)


# (aten op, scalar args); softplus has no in-place form.
ACTIVATION_OVERLOADS = {
    "hardtanh": (-2.0, 0.5),
    "leaky_relu": (0.2,),
    "elu": (0.7, 1.3, 0.4),
    "softplus": (2.0, 5.0),
    "hardswish": (),
    "hardsigmoid": (),
    "mish": (),
    "threshold": (0.1, 20.0),
    "log1p": (),
    "expm1": (),
}


@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
@pytest.mark.parametrize("name", [  # threshold casts into another out dtype on the CPU
    pytest.param(n, marks=[pytest.mark.uses_fallback] if n == "threshold" else [])
    for n in ACTIVATION_OVERLOADS])
def test_activation_inplace_and_out(name, dtype):
    args = ACTIVATION_OVERLOADS[name]
    op = getattr(torch.ops.aten, name)
    x = with_specials(make((4, 7), dtype) * 3)
    want = op(x, *args)
    if name != "softplus":
        t = x.to("trn")
        view = t[:, ::2]  # in place on a non-contiguous view leaves the rest alone
        getattr(torch.ops.aten, name + "_")(view, *args)
        ref = x.clone()
        getattr(torch.ops.aten, name + "_")(ref[:, ::2], *args)
        check(t, ref, transcendental=True)
    out = torch.empty(0, dtype=dtype, device="trn")
    op.out(x.to("trn"), *args, out=out)
    check(out, want, transcendental=True)
    # another dtype: log1p/expm1 cast into it, the activations reject it (as on CPU)
    same_as_cpu(lambda v, o: op.out(v, *args, out=o), (x, torch.empty(0, dtype=torch.float64)),
                (x.to("trn"), torch.empty(0, dtype=torch.float64, device="trn")), transcendental=True)


@pytest.mark.parametrize(
    "fn",
    [F.relu6, F.hardtanh, F.leaky_relu, F.elu, F.selu, F.celu, F.hardswish, F.hardsigmoid, F.mish],
    ids=lambda f: f.__name__,
)
def test_activation_functional_inplace(fn):
    x = with_specials(make((3, 9), F32) * 4)
    t = x.to("trn")
    r = fn(t, inplace=True)
    assert r.data_ptr() == t.data_ptr()
    check(t, fn(x.clone(), inplace=True), transcendental=True)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("args", [(0.1, 20.0), (-1.0, -0.5), (0.0, 0.0)], ids=str)
def test_threshold(args, dtype):
    """nn.Threshold: x <= threshold gives value; NaN stays NaN."""
    x = with_specials(make((5, 8), dtype) * 2)
    x, t = on_trn(x, "strided")
    check(F.threshold(t, *args), F.threshold(x, *args))
    r = t.clone()
    torch.ops.aten.threshold_(r, *args)
    check(r, F.threshold(x, *args))


@pytest.mark.uses_fallback
def test_threshold_of_integers_runs_on_the_cpu():
    i = torch.arange(-5, 6)
    check(F.threshold(i.to("trn"), 1, -7), F.threshold(i, 1, -7))
    assert trnscope.fallback_ops().get("aten::threshold", 0) >= 1


@pytest.mark.parametrize("name,args", [("hardshrink", (0.7,)), ("softshrink", (0.7,)),
                                       ("log_sigmoid_forward", ())])
def test_shrink_and_log_sigmoid_out(name, args):
    x = with_specials(make((4, 7), F32) * 3)
    op = getattr(torch.ops.aten, name)
    want = op(x, *args)
    if name == "log_sigmoid_forward":
        out, buf = torch.empty(0, device="trn"), torch.empty(0, device="trn")
        op.output(x.to("trn"), output=out, buffer=buf)
        check(out, want[0], transcendental=True)
    else:
        out = torch.empty(0, device="trn")
        op.out(x.to("trn"), *args, out=out)
        check(out, want)


@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
def test_logsigmoid_backward(dtype):
    """Note [log_sigmoid buffer]: the backward recomputes from x (CUDA's way)."""
    x = with_specials(make((6, 9), dtype) * 4)
    x[0, :4] = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0])
    g = make((6, 9), dtype)
    xc = x.clone().requires_grad_()
    F.logsigmoid(xc).backward(g)
    xt = x.to("trn").requires_grad_()
    F.logsigmoid(xt).backward(g.to("trn"))
    check(xt.grad, xc.grad, transcendental=True)


@pytest.mark.uses_fallback
def test_rrelu_training_draws_slopes_on_the_cpu_generator():
    """Training rrelu keeps its CPU path: each negative x is scaled by a slope in [lower, upper]."""
    x = -torch.rand(200) - 0.5
    before = trnscope.fallback_ops().get("aten::rrelu_with_noise", 0)
    y = F.rrelu(x.to("trn"), 0.1, 0.3, training=True).cpu()
    slopes = y / x
    assert (slopes >= 0.1 - 1e-6).all() and (slopes <= 0.3 + 1e-6).all() and slopes.std() > 0.01
    assert trnscope.fallback_ops().get("aten::rrelu_with_noise", 0) == before + 1


def test_shrink_parameters_as_cpu_reads_them():
    """CPU rounds lambd to bfloat16 / float16 before comparing and rejects a negative one."""
    for dtype, x, lambd in [(BF16, 0.1, 0.1), (F16, 0.3, 0.3), (BF16, -0.7, 0.7)]:
        t = torch.tensor([x, -x, x * 1.01], dtype=dtype)
        for fn in (F.hardshrink, F.softshrink):
            check(fn(t.to("trn"), lambd), fn(t, lambd))
        check(F.threshold(t.to("trn"), lambd, 2.0), F.threshold(t, lambd, 2.0))
    with pytest.raises(RuntimeError, match="lambda must be in range"):
        F.softshrink(torch.ones(3, device="trn"), -0.5)
    with pytest.raises(NotImplementedError, match="'Bool'"):
        torch.addcmul(*(torch.ones(2, dtype=BOOL, device="trn"),) * 3)


def test_activation_errors_match_cpu():
    i, b = torch.arange(-3, 4), torch.tensor([True, False])
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        F.leaky_relu(i.to("trn"))
    with pytest.raises(NotImplementedError, match="not implemented for 'Bool'"):
        F.softplus(b.to("trn"))
    with pytest.raises(RuntimeError, match="Bool inputs not supported for hardtanh"):
        F.relu6(b.to("trn"))
    with pytest.raises(RuntimeError, match="can't be cast"):
        i.to("trn").log1p_()
    check(torch.expm1(i.to("trn")), torch.expm1(i), transcendental=True)  # int -> float


def test_activation_modules_have_no_fallback():
    """MobileNetV2's ReLU6, MobileNetV3's Hardswish/Hardsigmoid, YOLO's LeakyReLU, Mamba's Softplus."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU6(inplace=True), torch.nn.Hardswish(),
        torch.nn.Conv2d(8, 8, 1), torch.nn.Hardsigmoid(), torch.nn.LeakyReLU(0.1, inplace=True),
        torch.nn.Mish(), torch.nn.Softplus(), torch.nn.ELU(), torch.nn.SiLU(), torch.nn.PReLU(8),
        torch.nn.Hardshrink(0.2), torch.nn.Softshrink(0.1), torch.nn.Threshold(0.05, -1.0),
        torch.nn.RReLU(), torch.nn.Tanhshrink(), torch.nn.LogSigmoid(),
    ).eval()
    x = torch.randn(2, 3, 8, 8)
    with torch.inference_mode():
        want = net(x)
        got = net.to("trn")(x.to("trn"))
    check(got, want, transcendental=True)


@pytest.mark.parametrize("layout", ["contig", "transposed", "strided"])
@pytest.mark.parametrize("dtype", [F32, BF16, F16], ids=str)
@pytest.mark.parametrize("shape,channels", [((2, 4, 5, 5), 4), ((2, 4, 5, 5), 1), ((3, 6), 6), ((7,), 1)])
def test_prelu(shape, channels, dtype, layout):
    """nn.PReLU / F.prelu (a weight per channel or one): one prelu kernel (it took
    the CPU fallback); NaN stays NaN."""
    x = make(shape, dtype) * 3
    x.view(-1)[0] = float("nan")
    x, t = on_trn(x, layout)
    w = make((channels,), dtype, kind="positive") - 2
    check(F.prelu(t, w.to("trn")), F.prelu(x, w))
    counts = launch_counts(lambda: F.prelu(t, w.to("trn")))
    assert counts.get(f"prelu_{ {F32: 'f32', BF16: 'bf16', F16: 'f16'}[dtype]}") == 1, counts
    with pytest.raises(RuntimeError, match="expected floating operands"):
        torch._prelu_kernel(torch.arange(4, device="trn"), torch.ones(1, dtype=torch.long, device="trn"))
    with pytest.raises(RuntimeError, match="expected floating operands"):  # a float 0-d weight
        torch._prelu_kernel(torch.arange(4, device="trn"), torch.tensor(0.3, device="trn"))


@pytest.mark.parametrize("layout", ["contig", "transposed", "strided"])
@pytest.mark.parametrize("dtype", [F32, BF16, F16], ids=str)
@pytest.mark.parametrize("shape,dim", [((2, 8, 5), 1), ((3, 6), -1), ((4, 2, 7), 0), ((0, 4), 1)])
def test_glu(shape, dim, dtype, layout):
    """Speech2Text's conv subsampler: a * sigmoid(b) over the halves of dim, one kernel."""
    x, t = on_trn(make(shape, dtype) * 3, layout)
    check(F.glu(t, dim), F.glu(x, dim), transcendental=True)
    out = torch.empty(0, dtype=dtype, device="trn")
    r = torch._C._nn.glu(t, dim, out=out)
    assert r is out
    check(out, F.glu(x, dim), transcendental=True)


def test_glu_errors_match_cpu():
    for fn, err in [
        (lambda d: F.glu(torch.randn(3, 5, device=d), 1), "Halving dimension must be even"),
        (lambda d: F.glu(torch.tensor(1.0, device=d)), "does not support scalars"),
    ]:
        for dev in ("cpu", "trn"):
            with pytest.raises(RuntimeError, match=err):
                fn(dev)
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        F.glu(torch.ones(2, 4, dtype=torch.int64, device="trn"))


# ---- var / std (with the mean), vector norms, weight norm ------------------------------------
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("correction", [None, 0, 1, 2.5])
@pytest.mark.parametrize("dim", [None, 0, -1, (0, 2), ()], ids=str)
@pytest.mark.parametrize("dtype", [F32, BF16, F16], ids=str)
@pytest.mark.parametrize("name", ["var", "std", "var_mean", "std_mean"])
def test_var_std(name, dtype, dim, correction, keepdim):
    x = make((3, 5, 7), dtype) * 3 + 1
    fn = getattr(torch, name)
    rtol, atol = (1e-6, 1e-7) if dtype == F32 else tol(dtype)  # double accumulation, as CPU torch
    for layout in ["contig", "transposed", "strided"]:
        xc, t = on_trn(x, layout)
        want = fn(xc, dim, correction=correction, keepdim=keepdim)
        got = fn(t, dim, correction=correction, keepdim=keepdim)
        for g, w in zip(got, want) if name.endswith("_mean") else [(got, want)]:
            check(g, w, rtol=rtol, atol=atol)


def test_var_std_unbiased_forms_and_out():
    x = make((4, 6, 5), F32) * 2
    t = x.to("trn")
    check(t.var(), x.var(), rtol=1e-6, atol=1e-7)
    check(t.var(1, unbiased=False), x.var(1, unbiased=False), rtol=1e-6, atol=1e-7)
    check(t.std(0, True, True), x.std(0, True, True), rtol=1e-6, atol=1e-7)
    check(torch.std(t, unbiased=False), torch.std(x, unbiased=False), rtol=1e-6, atol=1e-7)
    for fn in [torch.var, torch.std]:
        out = torch.empty(0, device="trn")
        fn(t, [0, 2], out=out)
        check(out, fn(x, [0, 2]), rtol=1e-6, atol=1e-7)
        out64 = torch.empty(0, dtype=torch.float64, device="trn")  # castable out: torch allows it
        fn(t, 1, correction=0, out=out64)
        check(out64, fn(x, 1, correction=0, out=torch.empty(0, dtype=torch.float64)), rtol=1e-6, atol=1e-7)
    for op in [torch.ops.aten.var_mean, torch.ops.aten.std_mean]:
        o0, o1 = torch.empty(0, device="trn"), torch.empty(0, device="trn")
        op.correction_out(t, [1], correction=0, keepdim=True, out0=o0, out1=o1)
        w0, w1 = op.correction(x, [1], correction=0, keepdim=True)
        check(o0, w0, rtol=1e-6, atol=1e-7)
        check(o1, w1, rtol=1e-6, atol=1e-7)
    with pytest.raises(RuntimeError, match="can't be cast"):
        torch.var(t, 0, out=torch.empty(0, dtype=I64, device="trn"))


@pytest.mark.parametrize(
    "shape,dim,correction",
    [((), None, 1), ((), 0, 0), ((1,), None, 1), ((2,), None, 2), ((2,), None, 3), ((0,), None, 1),
     ((0, 3), 1, 1), ((0, 3), 0, 1), ((0, 3), 0, 0), ((4, 1), 1, 1), ((4, 1), 1, 0)],
    ids=str,
)
def test_var_degenerate_extents(shape, dim, correction):
    """Empty extents give NaN, count <= correction inf (NaN if constant), with torch's warning."""

    def dof_warnings(fn):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = fn()
        return result, [str(w.message) for w in caught if "degrees of freedom is <= 0" in str(w.message)]

    x = make(shape, F32)
    for name in ["var", "std", "var_mean", "std_mean"]:
        fn = getattr(torch, name)
        want, cpu_warned = dof_warnings(lambda: fn(x, dim, correction=correction))
        got, trn_warned = dof_warnings(lambda: fn(x.to("trn"), dim, correction=correction))
        assert len(trn_warned) == len(cpu_warned), (trn_warned, cpu_warned)
        assert all(m.startswith(f"{name}(): ") for m in trn_warned), trn_warned
        for g, w in zip(got, want) if name.endswith("_mean") else [(got, want)]:
            check(g, w, rtol=1e-6, atol=1e-7)
    const = torch.ones(2)
    with pytest.warns(UserWarning, match="degrees of freedom"):
        check(const.to("trn").var(correction=3), const.var(correction=3))  # 0 / 0


def test_var_specials_and_precision():
    x = torch.tensor([[1.0, float("nan"), 2.0], [1.0, float("inf"), 2.0], [3.0, 3.0, 3.0]])
    check(x.to("trn").var(1), x.var(1))
    # var_mean's mean is torch.mean's (inf here); CPU torch's Welford update turns
    # an inf followed by more elements into NaN, an order artefact not copied.
    check(torch.var_mean(x.to("trn"), 1)[1], torch.mean(x, 1))
    # A mean that dwarfs the spread: float32 accumulation would lose var entirely.
    # Compared with float64 (CPU torch's float32 result is itself 8e-6 off here).
    g = torch.Generator().manual_seed(3)
    big = 1e4 + torch.randn(200_003, generator=g) * 0.01
    check(big.to("trn").var(), big.double().var().float(), rtol=1e-6, atol=0)
    check(big.to("trn").std(0), big.double().std(0).float(), rtol=1e-6, atol=0)


def test_var_rejects_integers_like_cpu():
    for name, msg in [("var", "std and var only support"), ("std", "std and var only support"),
                      ("var_mean", "var_mean only support"), ("std_mean", "std_mean only support")]:
        with pytest.raises(RuntimeError, match=msg):
            getattr(torch, name)(torch.arange(6).to("trn"))


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize(
    "shape,groups", [((2, 8, 33), 4), ((2, 16, 799), 16), ((3, 6, 5, 7), 3), ((2, 4), 2), ((1, 6, 0), 3)],
    ids=str,
)
def test_group_norm_is_one_launch(dtype, shape, groups):
    """native_group_norm (wav2vec2's feature extractor, CNNs' GroupNorm) is one kernel
    against CPU's, its [N, groups] mean and rstd too; weights in float32 under a
    half input keep torch's mixed-type statistics."""
    x = make(shape, dtype) * 3 + 1
    c = shape[1]
    hw = x.numel() // (shape[0] * c) if x.numel() else 0
    for w in (None, make((c,), dtype), make((c,), F32)):
        b = None if w is None else make((c,), w.dtype, "positive")
        args = (shape[0], c, hw, groups, 1e-5)
        want = torch.ops.aten.native_group_norm(x, w, b, *args)
        wt = None if w is None else w.to("trn")
        bt = None if b is None else b.to("trn")
        xt = x.to("trn")
        counts = launch_counts(lambda: torch.ops.aten.native_group_norm(xt, wt, bt, *args))
        if x.numel():
            assert list(counts) == [f"group_norm_{ {F32: 'f32', BF16: 'bf16', F16: 'f16'}[dtype]}"], counts
        got = torch.ops.aten.native_group_norm(xt, wt, bt, *args)
        for g, e in zip(got, want):
            check(g, e, transcendental=True)
    gn = torch.nn.GroupNorm(groups, c, dtype=dtype)
    with torch.inference_mode():
        check(gn.to("trn")(x.to("trn")), gn.cpu()(x), transcendental=True)


def test_group_norm_errors_and_strided_input():
    x = make((2, 8, 5), F32)
    with pytest.raises(RuntimeError, match="divisible by num_groups"):
        F.group_norm(x.to("trn"), 3)
    with pytest.raises(RuntimeError, match="weight and bias of 8"):
        torch.ops.aten.native_group_norm(x.to("trn"), torch.ones(7, device="trn"), None, 2, 8, 5, 4, 1e-5)
    bf = torch.ones(8, dtype=BF16, device="trn")  # CPU: "expect parameter to have scalar type of Float"
    with pytest.raises(RuntimeError, match="must be Float or float32, got BFloat16"):
        torch.ops.aten.native_group_norm(x.to("trn"), bf, None, 2, 8, 5, 4, 1e-5)
    with pytest.raises(RuntimeError, match="is not N=2, C=8, HxW=6"):
        torch.ops.aten.native_group_norm(x.to("trn"), None, None, 2, 8, 6, 4, 1e-5)
    # CPU's kernel needs a contiguous input; trn's takes any (the composite passes contiguous).
    xt = make((2, 5, 8), F32).transpose(1, 2)
    got = torch.ops.aten.native_group_norm(xt.to("trn"), None, None, 2, 8, 5, 4, 1e-5)
    want = torch.ops.aten.native_group_norm(xt.contiguous(), None, None, 2, 8, 5, 4, 1e-5)
    for g, e in zip(got, want):
        check(g, e, transcendental=True)


def test_var_mean_over_leading_and_trailing_dims():
    x = make((2, 8, 33), F32)
    want = torch.var_mean(x, [0, 2], correction=0)
    got = torch.var_mean(x.to("trn"), [0, 2], correction=0)
    check(got[0], want[0], rtol=1e-6, atol=1e-7)
    check(got[1], want[1], rtol=1e-6, atol=1e-7)


ORDS = [2, 1, float("inf"), -float("inf"), 0, 3, 0.5, -1.5]


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [None, 0, -1, (0, 2), ()], ids=str)
@pytest.mark.parametrize("ord", ORDS, ids=str)
@pytest.mark.parametrize("dtype", [F32, BF16, F16], ids=str)
def test_vector_norm(dtype, ord, dim, keepdim):
    x = make((3, 5, 7), dtype) * 2
    x.view(-1)[::9] = 0  # ord 0 counts nonzeros
    for layout in ["contig", "transposed", "strided"]:
        xc, t = on_trn(x, layout)
        want = torch.linalg.vector_norm(xc, ord, dim, keepdim)
        check(torch.linalg.vector_norm(t, ord, dim, keepdim), want, transcendental=True)
    if dtype != F32:  # dtype= computes the reduced-precision input in float32
        want = torch.linalg.vector_norm(x, ord, dim, keepdim, dtype=F32)
        got = torch.linalg.vector_norm(x.to("trn"), ord, dim, keepdim, dtype=F32)
        check(got, want, rtol=1e-6, atol=1e-7)


def test_vector_norm_callers_and_out():
    x = make((4, 16), F32)
    t = x.to("trn")
    check(t.norm(), x.norm(), rtol=1e-6, atol=1e-7)
    check(t.norm(1, dim=1, keepdim=True), x.norm(1, dim=1, keepdim=True), rtol=1e-6, atol=1e-7)
    check(torch.norm(t, float("inf"), dim=0), torch.norm(x, float("inf"), dim=0))
    check(F.normalize(t, dim=-1), F.normalize(x, dim=-1), rtol=1e-6, atol=1e-7)  # CLIP embeddings
    check(F.normalize(t, p=1, dim=0), F.normalize(x, p=1, dim=0), rtol=1e-6, atol=1e-7)
    check(torch.linalg.vector_norm(torch.tensor(-3.0).to("trn"), 1), torch.tensor(3.0))
    out = torch.empty(0, device="trn")
    torch.linalg.vector_norm(t, 2, dim=1, out=out)
    check(out, torch.linalg.vector_norm(x, 2, dim=1), rtol=1e-6, atol=1e-7)
    out64 = torch.empty(0, dtype=torch.float64, device="trn")
    torch.linalg.vector_norm(t, 3, dim=0, dtype=torch.float64, out=out64)
    check(out64, torch.linalg.vector_norm(x, 3, dim=0, dtype=torch.float64), rtol=1e-6, atol=1e-7)
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype float, but got double"):
        torch.linalg.vector_norm(t, out=torch.empty(0, dtype=torch.float64, device="trn"))


def test_legacy_norm_op():
    """aten::norm, which C++ callers reach (pairwise_distance; it took the fallback)."""
    x = make((4, 16), F32)
    t = x.to("trn")
    aten = torch.ops.aten
    for p in (None, 1, 2, 3.5, 0, float("inf")):
        for dim, keepdim in (([1], False), ([0], True), ([], False)):
            check(aten.norm.ScalarOpt_dim(t, p, dim, keepdim), aten.norm.ScalarOpt_dim(x, p, dim, keepdim),
                  rtol=1e-5, atol=1e-6)
    check(aten.norm.Scalar(t, 3), aten.norm.Scalar(x, 3), rtol=1e-6, atol=1e-6)
    got = aten.norm.ScalarOpt_dim_dtype(t.bfloat16(), 2, [1], False, dtype=torch.float32)
    check(got, aten.norm.ScalarOpt_dim_dtype(x.bfloat16(), 2, [1], False, dtype=torch.float32))
    out = torch.empty(0, device="trn")
    aten.norm.out(t, 2, [0], True, out=out)
    check(out, aten.norm.ScalarOpt_dim(x, 2, [0], True), rtol=1e-6, atol=1e-7)
    check(F.pairwise_distance(t, t.flip(0)), F.pairwise_distance(x, x.flip(0)), rtol=1e-5, atol=1e-6)


def test_vector_norm_specials_and_errors():
    x = torch.tensor([[1e20, 1.0], [float("nan"), 0.0], [-2.0, 0.0], [float("inf"), 1.0]])
    for ord in ORDS:
        check(torch.linalg.vector_norm(x.to("trn"), ord, dim=1), torch.linalg.vector_norm(x, ord, dim=1))
    empty = torch.empty(0, 3)
    check(torch.linalg.vector_norm(empty.to("trn")), torch.linalg.vector_norm(empty))
    check(torch.linalg.vector_norm(empty.to("trn"), 0, dim=0), torch.linalg.vector_norm(empty, 0, dim=0))
    inf = float("inf")
    check(torch.linalg.vector_norm(empty.to("trn"), inf, dim=1), torch.linalg.vector_norm(empty, inf, dim=1))
    cases = [
        (lambda v: torch.linalg.vector_norm(v, inf), "cannot compute the inf norm on an empty tensor"),
        (lambda v: torch.linalg.vector_norm(v, -1), "cannot compute the -1 norm on an empty tensor"),
        (lambda v: torch.linalg.vector_norm(v, -inf, dim=0), "on the dimension 0"),
    ]
    for fn, msg in cases:
        with pytest.raises(RuntimeError, match=msg):
            fn(empty)
        with pytest.raises(RuntimeError, match=msg):
            fn(empty.to("trn"))
    with pytest.raises(RuntimeError, match="Expected a floating point or complex tensor as input. Got Long"):
        torch.linalg.vector_norm(torch.arange(3).to("trn"))
    with pytest.raises(RuntimeError, match="dtype should be floating point or complex, but got Long"):
        torch.linalg.vector_norm(torch.ones(3, device="trn"), dtype=I64)
    with pytest.raises(RuntimeError, match="without narrowing"):
        torch.linalg.vector_norm(torch.ones(3, device="trn"), dtype=BF16)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize(
    "vshape,gshape,dim",
    [((6, 3, 5), (6, 1, 1), 0), ((6, 3, 5), (1, 1, 5), 2), ((6, 3, 5), (6,), 0), ((8, 12), (8, 1), 0),
     ((8, 12), (1, 12), 1), ((7,), (7,), 0), ((3, 0), (3, 1), 0)],
    ids=str,
)
def test_weight_norm_interface(dtype, vshape, gshape, dim):
    v = make(vshape, dtype)
    g = make(gshape, dtype, "positive")
    w_want, n_want = torch._weight_norm_interface(v, g, dim)
    for layout in ["contig", "transposed"]:
        vc, vt = on_trn(v, layout)
        w, n = torch._weight_norm_interface(vt, g.to("trn"), dim)
        check(w, w_want, transcendental=True)
        check(n, n_want, rtol=1e-6 if dtype == F32 else None, atol=1e-7 if dtype == F32 else None)
        assert n.dtype == (F32 if dtype != F32 else dtype)  # float32 norm for bf16/f16 g, as torch


def test_weight_norm_modules_and_errors():
    """weight_norm parametrization on Linear (dim 0) and wav2vec2's positional Conv1d (dim 2)."""
    torch.manual_seed(0)
    lin = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(16, 8))
    conv = torch.nn.utils.parametrizations.weight_norm(torch.nn.Conv1d(8, 8, 5, padding=2, groups=2), dim=2)
    x = torch.randn(2, 8, 16)
    with torch.inference_mode():
        want = conv(lin(x).transpose(1, 2).contiguous())
        got = conv.to("trn")(lin.to("trn")(x.to("trn")).transpose(1, 2).contiguous())
    check(got, want, transcendental=True)
    v = torch.randn(3, 4, 5, device="trn")
    with pytest.raises(RuntimeError, match="dim 0 or 2"):
        torch._weight_norm_interface(v, torch.ones(1, 4, 1, device="trn"), 1)
    with pytest.raises(RuntimeError, match="expected scalar type Float but found Double"):
        torch._weight_norm_interface(v, torch.ones(3, 1, 1, dtype=torch.float64, device="trn"), 0)
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        ones = torch.ones(3, 2, dtype=I64, device="trn")
        torch._weight_norm_interface(ones, ones[:, :1], 0)


def test_new_ops_are_one_named_launch():
    """Each native op is one kernel launch whose KernelInfo name the profiler shows."""
    x = torch.randn(8, 8, device="trn")
    g = torch.rand(8, 1, device="trn") + 0.5
    torch.trn.synchronize()
    cases = {
        "clamp_f32": lambda: F.relu6(x),
        "leaky_relu_f32": lambda: F.leaky_relu(x),
        "elu_f32": lambda: F.selu(x),
        "softplus_f32": lambda: F.softplus(x),
        "hardswish_f32": lambda: F.hardswish(x),
        "hardsigmoid_f32": lambda: F.hardsigmoid(x),
        "mish_f32": lambda: F.mish(x),
        "log1p_f32": lambda: torch.log1p(x.abs()),
        "expm1_f32": lambda: torch.expm1(x),
        "var_f32": lambda: x.var(1),
        "std_f32": lambda: x.std(),
        "var_mean_f32": lambda: torch.var_mean(x, 0),
        "std_mean_f32": lambda: torch.std_mean(x, 0),
        "vector_norm_f32": lambda: torch.linalg.vector_norm(x, 3, dim=1),
        "weight_norm_f32": lambda: torch._weight_norm_interface(x, g, 0),
    }
    for kernel, fn in cases.items():
        counts = launch_counts(fn)
        counts.pop("abs_f32", None)  # log1p's input
        assert counts == {kernel: 1}, (kernel, counts)


def test_new_ops_float64_policy():
    """float64 keeps its dtype, is computed in float32 and counted (Note [float64 policy])."""
    x = make((3, 17), F32).double() * 3
    g = make((3, 1), F32, "positive").double()
    cases = {
        "aten::leaky_relu": lambda v: F.leaky_relu(v, 0.1),
        "aten::softplus": F.softplus,
        "aten::hardtanh": F.relu6,
        "aten::log1p": lambda v: torch.log1p(v.abs()),
        "aten::var": lambda v: v.var(1),
        "aten::std_mean": lambda v: torch.std_mean(v, 0)[0],
        "aten::linalg_vector_norm": lambda v: torch.linalg.vector_norm(v, 3, dim=1),
    }
    for op, fn in cases.items():
        trnscope.reset_counters()
        check(fn(x.to("trn")), fn(x), transcendental=True)
        torch.trn.synchronize()
        assert trnscope.float64_downcasts().get(op, 0) >= 1, (op, trnscope.float64_downcasts())
    w, n = torch._weight_norm_interface(x.to("trn"), g.to("trn"), 0)
    ww, nn = torch._weight_norm_interface(x, g, 0)
    check(w, ww, transcendental=True)
    check(n, nn, transcendental=True)


# ---- result layout (Note [Output layout]) ----------------------------------------------
def _layouts(device="cpu"):
    """name -> tensor [2, 4, 3, 5] on `device` viewed in a layout torch keeps or drops."""
    base = make((2, 4, 3, 5), F32).to(device)
    return {
        "contiguous": base,
        "permuted": base.permute(0, 2, 1, 3).contiguous().permute(0, 2, 1, 3),
        "channels_last": base.contiguous(memory_format=torch.channels_last),
        "transposed": base.transpose(-1, -2).contiguous().transpose(-1, -2),
        "sliced": torch.cat([base, base], -1)[..., ::2],  # not dense: contiguous result
        "expanded": base[:, :1].expand(2, 4, 3, 5),
    }


LAYOUT_OPS = {
    "mul_scalar": lambda x, y: x * 2,
    "add": lambda x, y: x + y,  # the first operand's order decides
    "add_reversed": lambda x, y: y + x,
    "add_row": lambda x, y: x + y[0, 0, 0],  # a broadcast operand does not vote
    "add_column": lambda x, y: x + y[..., :1],
    "neg": lambda x, y: -x,
    "exp": lambda x, y: x.exp(),
    "gelu": lambda x, y: F.gelu(x),
    "silu": lambda x, y: F.silu(x),
    "clamp": lambda x, y: x.clamp(-0.5, 0.5),
    "gt": lambda x, y: x > 0,
    "cast": lambda x, y: (x * 10).long(),
    "where": lambda x, y: torch.where(y > 0, x, 0.0),
    "lerp": lambda x, y: torch.lerp(x, y, 0.25),
    "round_decimals": lambda x, y: x.round(decimals=1),
    "masked_fill": lambda x, y: x.masked_fill(x > 0, 1.0),  # contiguous on CPU
    "softmax": lambda x, y: x.softmax(-1),
}


@pytest.mark.parametrize("other", ["contiguous", "permuted"])
@pytest.mark.parametrize("layout", ["contiguous", "permuted", "channels_last", "transposed", "sliced", "expanded"])
@pytest.mark.parametrize("name", list(LAYOUT_OPS))
def test_elementwise_results_are_laid_out_as_on_cpu(name, layout, other):
    """A new result has CPU's strides (TensorIterator's rule), so code that views
    it after a permute works on trn as on CPU, and torch.compile's FakeTensors
    (which follow the same rule) describe trn's tensors."""
    x, y = _layouts()[layout], _layouts()[other]
    xt, yt = _layouts("trn")[layout], _layouts("trn")[other]
    assert xt.stride() == x.stride()
    want = LAYOUT_OPS[name](x, y)
    got = LAYOUT_OPS[name](xt, yt)
    assert got.stride() == want.stride(), (got.stride(), want.stride())
    check(got, want, transcendental=True)


def test_a_transposed_attention_output_views_as_on_cpu():
    # The pattern transformers' attention uses: [B, S, H, D] memory viewed as
    # [B, H, S, D], an elementwise op, then a view back that needs its strides.
    q = make((2, 16, 4, 8), F32)
    for dev in ("cpu", "trn"):
        x = q.to(dev).transpose(1, 2) * 0.5
        merged = x.transpose(1, 2).view(2, 16, 32)  # raises if x came back contiguous
        if dev == "cpu":
            want = merged
    check(merged, want)


OVERLAPS = {
    "partial": lambda t: t[1:].add_(t[:-1]),
    "transposed_self": lambda t: t[:5].mul_(t[:5].T),
    "expanded_self": lambda t: t[:1].expand(3, 5).sub_(1.0),
    "out_aliases_input": lambda t: torch.add(t[1:], t[1:], out=t[:-1]),
    "itself": lambda t: t.mul_(t),
    "disjoint_halves": lambda t: t[:3].add_(t[3:]),
    "unary_expanded_self": lambda t: t[:1].expand(3, 5).exp_(),
    "unary_out_aliases_input": lambda t: torch.exp(t[1:], out=t[:-1]),
    "clamp_expanded_self": lambda t: t[:1].expand(3, 5).clamp_(0, 1),
    "clamp_tensor_bounds_overlap": lambda t: t[1:].clamp_(t[:-1], t[:-1] + 1),
    "lerp_overlap": lambda t: t[1:].lerp_(t[:-1], 0.5),
    "copy_into_expanded": lambda t: t[:1].expand(3, 5).copy_(torch.ones(3, 5, device=t.device)),
    "copy_partial_overlap": lambda t: t[1:].copy_(t[:-1]),
    "fill_expanded": lambda t: t[:1].expand(3, 5).fill_(2.0),
}


@pytest.mark.parametrize("case", list(OVERLAPS))
def test_in_place_and_out_overlaps_raise_or_compute_as_cpu(case):
    """TensorIterator's memory-overlap rules: a written tensor that overlaps an
    input partially, or itself, raises CPU's error; full or no overlap computes."""
    fn = OVERLAPS[case]
    want = torch.randn(6, 5, generator=torch.Generator().manual_seed(0))
    got = want.to("trn")
    try:
        fn(want)
    except RuntimeError as e:
        with pytest.raises(RuntimeError, match="unsupported operation"):
            fn(got)
        assert "unsupported operation" in str(e)
        return
    fn(got)
    torch.testing.assert_close(got.cpu(), want)
