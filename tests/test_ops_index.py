"""Indexing, layout and the reductions real models hit, on trn against CPU PyTorch.

arange, tril/triu, all/any, argmin, min/max over a dim, cumsum/cumprod,
gather/scatter/scatter_add, index_put_ (accumulate, bool masks, integer
tensors, broadcast values), advanced indexing, masked_select, nonzero, topk,
sort/argsort, constant_pad_nd, repeat_interleave, repeat, flip, roll,
scatter_reduce, masked_scatter, take, cummax/cummin/logcumsumexp,
tril_indices/triu_indices, aminmax, nansum, count_nonzero, trace, cdist,
linalg.cross, channel_shuffle, bernoulli of probabilities: each is
compared with CPU PyTorch on the same inputs over dtypes, dims and
non-contiguous layouts, and the autouse fixture asserts nothing ran through
the CPU fallback. Data movement and integer results are exact; floating
arithmetic (cumsum, cumprod, scatter_add, index_put accumulate) uses
rtol/atol 1e-5/1e-5 for float32, 1e-2/1e-2 for bfloat16, 1e-3/1e-3 for float16.
"""

import copy
import math
import zlib

import pytest
import torch
import torch.nn.functional as F

import trnscope

F32, BF16, F16 = torch.float32, torch.bfloat16, torch.float16
I32, I64, BOOL = torch.int32, torch.int64, torch.bool
ALL = [F32, BF16, F16, I32, I64, BOOL]
NUM = [F32, BF16, F16, I32, I64]
LAYOUTS = ["contig", "transposed", "strided"]


pytestmark = pytest.mark.usefixtures("no_fallback")


def tol(dtype):
    return {BF16: (1e-2, 1e-2), F16: (1e-3, 1e-3)}.get(
        dtype, (1e-5, 1e-5) if dtype.is_floating_point else (0, 0))


def check(got, want, exact=False):
    assert got.device.type == "trn", got.device
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    r, a = (0, 0) if exact else tol(want.dtype)
    torch.testing.assert_close(got.cpu(), want, rtol=r, atol=a, equal_nan=True)


def make(shape, dtype, lo=-5, hi=6):
    g = torch.Generator().manual_seed(zlib.crc32(repr((shape, str(dtype), lo, hi)).encode()))
    if dtype == BOOL:
        return torch.randint(0, 2, shape, generator=g).bool()
    if not dtype.is_floating_point:
        return torch.randint(lo, hi, shape, generator=g).to(dtype)
    return torch.randn(shape, generator=g).to(dtype)


def on_trn(x, layout="contig", device="trn"):
    """The trn copy of x, non-contiguous for 'transposed' / 'strided'."""
    if layout == "contig" or x.dim() == 0:
        return x.to(device)
    if layout == "transposed" and x.dim() >= 2:
        return x.transpose(-1, -2).contiguous().to(device).transpose(-1, -2)
    wide = torch.stack([x, torch.zeros_like(x)], dim=-1).flatten(-2)
    return wide.to(device)[..., ::2]


# ---- factories and triangles ---------------------------------------------------------
@pytest.mark.parametrize("args,dtype", [
    ((10,), None), ((3, 11), None), ((-4, 9, 3), None), ((9, -4, -3), None), ((0,), None),
    ((0, 1, 0.1), None), ((1.5, -2.0, -0.25), None), ((0, 17), F32), ((0, 17), BF16),
    ((0, 10, 2), I32), ((5,), F16), ((2, 12, 3), torch.float64),
    # int64 steps that do not divide end - start - 1 (F.embedding_bag's offsets,
    # arange(0, dim, 2) of rotary embeddings)
    ((0, 24, 6), None), ((0, 23, 6), None), ((0, 32, 2), None), ((10, 0, -4), None),
    ((-7, 8, 5), None), ((0, 24, 6), I32),
])
def test_arange(args, dtype):
    kw = {} if dtype is None else {"dtype": dtype}
    check(torch.arange(*args, device="trn", **kw), torch.arange(*args, **kw))
    out = torch.empty(0, device="trn", dtype=dtype or torch.arange(*args).dtype)
    torch.arange(*args, out=out)
    check(out, torch.arange(*args, **kw))


@pytest.mark.parametrize("args,dtype", [
    ((0, 1, 7), None), ((-3.5, 2.25, 100), None), ((2, 10, 5), I64), ((0, 7, 4), I32),
    ((0, 1, 9), BF16), ((1, 0, 6), F16), ((1, 0, 4), torch.float64), ((5, 5, 1), None),
    ((0, 3, 0), None),
])
def test_linspace_and_logspace(args, dtype):
    kw = {} if dtype is None else {"dtype": dtype}
    check(torch.linspace(*args, device="trn", **kw), torch.linspace(*args, **kw))
    out = torch.empty(3, device="trn", dtype=dtype or torch.float32)
    torch.linspace(*args, out=out)
    check(out, torch.linspace(*args, **kw))
    for base in (10.0, 2.0):
        check(torch.logspace(*args, base=base, device="trn", **kw),
              torch.logspace(*args, base=base, **kw))
    with pytest.raises(RuntimeError, match="non-negative"):
        torch.linspace(0, 1, -1, device="trn")


def test_arange_bad_step():
    with pytest.raises(RuntimeError, match="step"):
        torch.arange(0, 5, 0, device="trn")
    with pytest.raises(RuntimeError, match="step sign"):
        torch.arange(5, 0, 1, device="trn")


@pytest.mark.parametrize("diagonal", [-2, 0, 1, 7])
@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_tril_triu(diagonal, dtype, layout):
    x = make((2, 5, 6), dtype)
    t = on_trn(x, layout)
    check(torch.tril(t, diagonal), torch.tril(x, diagonal), exact=True)
    check(torch.triu(t, diagonal), torch.triu(x, diagonal), exact=True)
    check(t.clone().tril_(diagonal), x.clone().tril_(diagonal), exact=True)
    out = torch.empty(0, device="trn", dtype=dtype)
    torch.triu(t, diagonal, out=out)
    check(out, torch.triu(x, diagonal), exact=True)


def test_causal_mask_square():
    ones = torch.ones(7, 7, dtype=BOOL)
    check(torch.ones(7, 7, dtype=BOOL, device="trn").tril(), ones.tril(), exact=True)
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        torch.tril(torch.ones(3, device="trn"))


# ---- reductions ------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_all_any(dtype, layout):
    x = make((3, 4, 5), dtype, 0, 2)  # many zeros
    x[1] = 1  # one slice all true
    t = on_trn(x, layout)
    for fn in (torch.all, torch.any):
        check(fn(t), fn(x), exact=True)
        for dim in (0, 1, -1):
            for keepdim in (False, True):
                check(fn(t, dim, keepdim=keepdim), fn(x, dim, keepdim=keepdim), exact=True)
        check(fn(t, dim=(0, 2)), fn(x, dim=(0, 2)), exact=True)
        out = torch.empty(0, dtype=BOOL, device="trn")
        fn(t, 1, out=out)
        check(out, fn(x, 1), exact=True)


def test_all_any_empty_and_nan():
    e = torch.empty(0, 3)
    check(e.to("trn").all(), e.all(), exact=True)
    check(e.to("trn").any(0), e.any(0), exact=True)
    n = torch.tensor([0.0, float("nan")])
    check(n.to("trn").all(), n.all(), exact=True)
    check(n.to("trn").any(), n.any(), exact=True)


@pytest.mark.parametrize("dtype", NUM, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_argmin_min_max_dim(dtype, layout):
    x = make((4, 5, 6), dtype, -3, 3)  # ties: first index wins
    t = on_trn(x, layout)
    check(t.argmin(), x.argmin(), exact=True)
    check(t.min(), x.min(), exact=True)
    check(t.max(), x.max(), exact=True)
    for dim in (0, 1, -1):
        for keepdim in (False, True):
            check(t.argmin(dim, keepdim), x.argmin(dim, keepdim), exact=True)
            for fn in (torch.min, torch.max):
                gv, gi = fn(t, dim, keepdim)
                wv, wi = fn(x, dim, keepdim)
                check(gv, wv, exact=True)
                check(gi, wi, exact=True)
    out = torch.empty(0, dtype=I64, device="trn")
    torch.argmin(t, 1, out=out)
    check(out, x.argmin(1), exact=True)


def test_argmin_nan_and_empty():
    x = torch.tensor([[1.0, float("nan"), -3.0], [2.0, 0.5, 0.5]])
    check(x.to("trn").argmin(1), x.argmin(1), exact=True)
    check(x.to("trn").min(1).values, x.min(1).values, exact=True)
    with pytest.raises(RuntimeError, match="non-zero size"):
        torch.empty(2, 0, device="trn").min(1)


# ---- cumulative ------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum_cumprod(dtype, layout, dim):
    x = make((3, 4, 5), dtype, -2, 3)
    if dtype.is_floating_point:
        x = (x.float() * 0.5 + 1).to(dtype)  # products stay moderate
    t = on_trn(x, layout)
    check(torch.cumsum(t, dim), torch.cumsum(x, dim))
    check(torch.cumprod(t, dim), torch.cumprod(x, dim))
    check(torch.cumsum(t, dim, dtype=F32), torch.cumsum(x, dim, dtype=F32))
    out = torch.empty(0, device="trn", dtype=torch.cumsum(x, dim).dtype)
    torch.cumsum(t, dim, out=out)
    check(out, torch.cumsum(x, dim))
    if dtype not in (BOOL,):
        check(t.clone().cumsum_(dim), x.clone().cumsum_(dim))


def test_cumsum_position_ids_from_mask():
    """position_ids = attention_mask.cumsum(-1) - 1, as generate() builds them."""
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    want = mask.long().cumsum(-1) - 1
    check(mask.to("trn").long().cumsum(-1) - 1, want, exact=True)


# ---- gather / scatter ------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather(dtype, layout, dim):
    x = make((4, 5, 6), dtype)
    g = torch.Generator().manual_seed(dim + 7)
    idx = torch.randint(0, x.shape[dim], (3, 4, 5), generator=g)
    check(torch.gather(on_trn(x, layout), dim, on_trn(idx, layout)), torch.gather(x, dim, idx),
          exact=True)
    out = torch.empty(0, device="trn", dtype=dtype)
    torch.gather(on_trn(x, layout), dim, idx.to("trn"), out=out)
    check(out, torch.gather(x, dim, idx), exact=True)


def test_gather_bad_index():
    x = torch.randn(3, 4, device="trn")
    with pytest.raises(RuntimeError, match="int64"):
        torch.gather(x, 1, torch.zeros(3, 1, dtype=I32, device="trn"))
    torch.gather(x, 1, torch.tensor([[0], [4], [1]], device="trn"))
    with pytest.raises(RuntimeError, match="index 4 is out of bounds for dimension 1 with size 4"):
        torch.trn.synchronize()
    check(x + 1, x.cpu() + 1)  # the device stays usable


def scatter_index(shape, size, dim, seed):
    """An index whose lines along dim hit distinct positions (a unique answer)."""
    g = torch.Generator().manual_seed(seed)
    lines = torch.stack([torch.randperm(size, generator=g)[: shape[dim]]
                         for _ in range(int(torch.tensor(shape).prod()) // shape[dim])])
    moved = list(shape)
    moved.append(moved.pop(dim))
    return lines.reshape(moved).movedim(-1, dim).contiguous()


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scatter(dtype, layout, dim):
    x = make((4, 5, 6), dtype)
    d = dim % 3
    shape = [3, 4, 5]
    shape[d] = min(shape[d], x.shape[d])
    idx = scatter_index(tuple(shape), x.shape[d], d, 3 + d)
    src = make((4, 5, 6), dtype)
    tx, ts = on_trn(x, layout), on_trn(src, layout)
    check(torch.scatter(tx, dim, idx.to("trn"), ts), torch.scatter(x, dim, idx, src), exact=True)
    check(torch.scatter(tx, dim, idx.to("trn"), 1), torch.scatter(x, dim, idx, 1), exact=True)
    y = tx.clone()
    y.scatter_(dim, idx.to("trn"), ts)
    check(y, x.clone().scatter_(dim, idx, src), exact=True)
    if dtype != BOOL:
        g = torch.Generator().manual_seed(11)
        dup = torch.randint(0, x.shape[d], tuple(shape), generator=g)  # duplicates add up
        check(torch.scatter_add(tx, dim, dup.to("trn"), ts), torch.scatter_add(x, dim, dup, src))
        y = tx.clone()
        y.scatter_add_(dim, dup.to("trn"), ts)
        check(y, x.clone().scatter_add_(dim, dup, src))


def test_scatter_bad_input():
    x = torch.zeros(3, 4, device="trn")
    with pytest.raises(RuntimeError, match="dtype"):
        x.scatter(1, torch.zeros(3, 1, dtype=I64, device="trn"), torch.ones(3, 1, dtype=F16, device="trn"))
    x.scatter_(1, torch.tensor([[5]], device="trn"), 1.0)
    with pytest.raises(RuntimeError, match="index 5 is out of bounds for dimension 1 with size 4"):
        torch.trn.synchronize()


# ---- advanced indexing -----------------------------------------------------------------
def index_cases():
    i = torch.tensor([2, 0, 3, 3])
    j = torch.tensor([[1], [0]])
    return {
        "int_dim0": lambda x: (i,),
        "int_neg": lambda x: (torch.tensor([-1, 0, -4]),),
        "int_dim1": lambda x: (slice(None), torch.tensor([4, 0])),
        "int_2d": lambda x: (j,),
        "broadcast_pair": lambda x: (j, torch.tensor([0, 2, 1])),
        "non_adjacent": lambda x: (torch.tensor([1, 0]), slice(None), torch.tensor([2, 5])),
        "adjacent_inner": lambda x: (slice(None), torch.tensor([1, 2]), torch.tensor([0, 5])),
        "mask_dim0": lambda x: (torch.tensor([True, False, True, True]),),
        "mask_2d": lambda x: (make((4, 5), BOOL),),
        "mask_dim1": lambda x: (slice(None), torch.tensor([False, True, True, False, True])),
        "none_entry": lambda x: (None, i),
        "int32": lambda x: (torch.tensor([1, 3], dtype=I32),),
        "ellipsis": lambda x: (Ellipsis, torch.tensor([0, 5, 5])),
    }


INDEX = index_cases()


@pytest.mark.parametrize("case", list(INDEX))
@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("layout", ["contig", "transposed"])
def test_index(case, dtype, layout):
    x = make((4, 5, 6), dtype)
    key = INDEX[case](x)
    tkey = tuple(k.to("trn") if isinstance(k, torch.Tensor) else k for k in key)
    check(on_trn(x, layout)[tkey], x[key], exact=True)


@pytest.mark.parametrize("case", list(INDEX))
@pytest.mark.parametrize("dtype", [F32, BF16, I64, BOOL], ids=str)
@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put(case, dtype, accumulate):
    if accumulate and dtype == BOOL:
        pytest.skip("CPU index_put accumulate of bool adds as int")
    if accumulate and case == "none_entry":
        pytest.skip("index_put_'s list has no new-axis entry")
    x = make((4, 5, 6), dtype)
    key = INDEX[case](x)
    shape = x[key].shape
    if not accumulate and case in ("int_dim0", "int_2d", "broadcast_pair", "int_neg", "none_entry"):
        # duplicate positions: any one write may win, so write equal values per position
        values = torch.ones(shape[-1:], dtype=dtype)
    else:
        values = make(shape, dtype)
    tkey = tuple(k.to("trn") if isinstance(k, torch.Tensor) else k for k in key)
    t = x.to("trn")
    want = x.clone()
    if accumulate:
        torch.ops.aten.index_put_(want, _as_index_put(key, x.dim()), values, True)
        torch.ops.aten.index_put_(t, _as_index_put(tkey, x.dim()), values.to("trn"), True)
    else:
        want[key] = values
        t[tkey] = values.to("trn")
    check(t, want)


def _as_index_put(key, ndim):
    """A __getitem__ key of tensors / full slices as index_put_'s list (None = full slice)."""
    out = []
    for k in key:
        if k is Ellipsis:
            out.extend([None] * (ndim - (len(key) - 1)))
        elif isinstance(k, slice) or k is None:
            out.append(None)
        else:
            out.append(k)
    return list(out)


def test_index_put_scalar_and_broadcast_values():
    x = torch.randn(4, 5, 6)
    m = x[..., 0] > 0
    t = x.to("trn")
    t[m.to("trn")] = 0.0  # a python scalar (CPU 0-dim) value
    want = x.clone()
    want[m] = 0.0
    check(t, want)
    t[torch.tensor([1, 2], device="trn")] = torch.arange(6.0).to("trn")  # broadcast over [2, 5, 6]
    want[torch.tensor([1, 2])] = torch.arange(6.0)
    check(t, want)
    t[:, torch.tensor([0, 4], device="trn")] = torch.tensor([[-1.0], [-2.0]]).to("trn")
    want[:, torch.tensor([0, 4])] = torch.tensor([[-1.0], [-2.0]])
    check(t, want)


def test_index_cpu_and_0d_indices():
    """CPU index tensors and masks are moved to the device (as CUDA does); 0-d indices."""
    x = make((4, 5), F32)
    t = x.to("trn")
    check(t[torch.tensor([1, 3])], x[torch.tensor([1, 3])], exact=True)
    check(t[x > 0], x[x > 0], exact=True)
    check(t[torch.tensor(2, device="trn")], x[torch.tensor(2)], exact=True)
    check(torch.where(t > 0)[1], torch.where(x > 0)[1], exact=True)
    y, z = t.clone(), x.clone()
    y[torch.tensor(1, device="trn")] = 5.0
    z[torch.tensor(1)] = 5.0
    check(y, z, exact=True)


def test_index_bad_input():
    x = torch.randn(4, 5, device="trn")
    with pytest.raises(IndexError, match="tensors used as indices must be long, int"):
        x[torch.tensor([0.5], device="trn")]
    with pytest.raises(IndexError, match="too many indices"):
        x[torch.tensor([0], device="trn"), torch.tensor([0], device="trn"), torch.tensor([0], device="trn")]
    with pytest.raises(IndexError, match="shape of the mask"):
        x[torch.ones(3, dtype=BOOL, device="trn")]
    with pytest.raises(RuntimeError, match="dtypes match"):
        x.index_put_((torch.tensor([0], device="trn"),), torch.ones(5, dtype=F16, device="trn"))
    x[torch.tensor([1, 9], device="trn")]
    with pytest.raises(RuntimeError, match="index 9 is out of bounds for dimension 0 with size 4"):
        torch.trn.synchronize()
    x[:, torch.tensor([-6], device="trn")] = 1.0
    with pytest.raises(RuntimeError, match="index -6 is out of bounds for dimension 1 with size 5"):
        torch.trn.synchronize()
    check(x + 1, x.cpu() + 1)


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_nonzero_masked_select(dtype, layout):
    x = make((3, 4, 5), dtype, -1, 2)
    t = on_trn(x, layout)
    check(torch.nonzero(t), torch.nonzero(x), exact=True)
    check(t.nonzero(as_tuple=True)[1], x.nonzero(as_tuple=True)[1], exact=True)
    m = make((4, 5), BOOL)
    check(torch.masked_select(t, m.to("trn")), torch.masked_select(x, m), exact=True)
    check(torch.nonzero(torch.zeros(3, device="trn", dtype=dtype)), torch.nonzero(torch.zeros(3, dtype=dtype)))


@pytest.mark.parametrize("dtype", NUM, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("invert", [False, True])
def test_isin(dtype, layout, invert):
    x = make((3, 4, 5), dtype, -4, 4)
    test = make((2, 3), dtype, -4, 4)
    check(torch.isin(on_trn(x, layout), test.to("trn"), invert=invert),
          torch.isin(x, test, invert=invert), exact=True)
    check(torch.isin(on_trn(x, layout), 1, invert=invert), torch.isin(x, 1, invert=invert),
          exact=True)
    out = torch.empty(0, dtype=BOOL, device="trn")
    torch.isin(on_trn(x, layout), test.to("trn"), invert=invert, out=out)
    check(out, torch.isin(x, test, invert=invert), exact=True)


def test_isin_eos_tokens_mixed_dtypes():
    """generate()'s stopping check: isin(next tokens, eos ids) with an int32 id list."""
    tokens = torch.tensor([[3, 7], [2, 9]])
    eos = torch.tensor([9, 2], dtype=I32)
    check(torch.isin(tokens.to("trn"), eos.to("trn")), torch.isin(tokens, eos), exact=True)
    with pytest.raises(RuntimeError, match="Unsupported input type encountered for isin"):
        torch.isin(torch.ones(2, dtype=BOOL, device="trn"), torch.ones(2, dtype=BOOL, device="trn"))


# ---- sort / topk -----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", NUM + [BOOL], ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dim", [0, -1])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_argsort_stable(dtype, layout, dim, descending):
    x = make((6, 7), dtype, -3, 3)  # many ties: stable order is unique
    if dtype.is_floating_point:
        x = x.float().round().to(dtype)
        x[2, 3] = float("nan")
    t = on_trn(x, layout)
    gv, gi = torch.sort(t, dim=dim, descending=descending, stable=True)
    wv, wi = torch.sort(x, dim=dim, descending=descending, stable=True)
    check(gv, wv, exact=True)
    check(gi, wi, exact=True)
    check(torch.argsort(t, dim=dim, descending=descending, stable=True),
          torch.argsort(x, dim=dim, descending=descending, stable=True), exact=True)
    gv, gi = torch.sort(t, dim=dim, descending=descending)  # unstable: values, and consistent indices
    check(gv, wv, exact=True)
    check(torch.gather(t, dim, gi), wv, exact=True)
    vals, idx = torch.empty(0, dtype=dtype, device="trn"), torch.empty(0, dtype=I64, device="trn")
    torch.sort(t, dim=dim, descending=descending, stable=True, out=(vals, idx))
    check(vals, wv, exact=True)
    check(idx, wi, exact=True)


@pytest.mark.parametrize("dtype", NUM, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("k,dim", [(1, -1), (3, -1), (7, -1), (2, 0), (0, 1)])
def test_topk(dtype, layout, largest, k, dim):
    x = make((5, 7), dtype, -50, 50)
    t = on_trn(x, layout)
    gv, gi = torch.topk(t, k, dim=dim, largest=largest)
    wv, _ = torch.topk(x, k, dim=dim, largest=largest)
    check(gv, wv, exact=True)
    check(torch.gather(t, dim, gi), wv, exact=True)
    vals, idx = torch.empty(0, dtype=dtype, device="trn"), torch.empty(0, dtype=I64, device="trn")
    torch.topk(t, k, dim=dim, largest=largest, out=(vals, idx))
    check(vals, wv, exact=True)


def test_topk_bad_k():
    with pytest.raises(RuntimeError, match="k out of range"):
        torch.topk(torch.randn(3, 4, device="trn"), 5)


# ---- layout ----------------------------------------------------------------------------
@pytest.mark.parametrize("pad", [(1, 2), (0, 0, 2, 1), (-1, 2), (-2, -1, 1, 0), (1, 1, 1, 1, 1, 1)])
@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("layout", ["contig", "transposed"])
def test_constant_pad_nd(pad, dtype, layout):
    x = make((2, 4, 5), dtype)
    value = True if dtype == BOOL else 3
    check(F.pad(on_trn(x, layout), pad, value=value), F.pad(x, pad, value=value), exact=True)


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_repeat_interleave_repeat(dtype, layout):
    x = make((3, 4), dtype)
    t = on_trn(x, layout)
    check(t.repeat_interleave(2), x.repeat_interleave(2), exact=True)
    check(t.repeat_interleave(3, dim=1), x.repeat_interleave(3, dim=1), exact=True)
    r = torch.tensor([1, 0, 2])
    check(t.repeat_interleave(r.to("trn"), dim=0), x.repeat_interleave(r, dim=0), exact=True)
    check(t.repeat_interleave(r.to("trn"), dim=0, output_size=3),
          x.repeat_interleave(r, dim=0, output_size=3), exact=True)
    check(torch.repeat_interleave(r.to("trn")), torch.repeat_interleave(r), exact=True)
    check(t.repeat(2, 1, 3), x.repeat(2, 1, 3), exact=True)


REPEATS = [
    ((2, 3), (2, 1, 3)),
    ((), (3, 2)),
    ((2, 3), (0, 2)),
    ((2, 3, 4, 5, 6), (1, 1, 1, 1, 2)),  # ATen's composite viewed this in 10 dims (LongT5)
    ((2, 3, 4, 5, 6), (2, 2, 2, 2, 2)),  # 10 dims even without the 1s: one dim at a time
    ((3,), (2, 2, 2, 2, 2, 2, 2, 2)),
    ((2, 3, 2, 2, 2, 2, 2, 2), (1, 1, 1, 1, 1, 1, 1, 3)),
]


@pytest.mark.parametrize("shape,reps", REPEATS, ids=str)
@pytest.mark.parametrize("dtype", [F32, BF16, I64, BOOL], ids=str)
def test_repeat_of_many_dims(shape, reps, dtype):
    x = make(shape, dtype)
    got = x.to("trn").repeat(*reps)
    assert got.is_contiguous()
    check(got, x.repeat(*reps), exact=True)
    if x.dim() >= 2:
        check(x.to("trn").transpose(0, 1).repeat(*reps), x.transpose(0, 1).repeat(*reps), exact=True)


def test_repeat_errors_and_gradient():
    with pytest.raises(RuntimeError, match="can not be smaller"):
        torch.ones(2, 3, device="trn").repeat(2)
    with pytest.raises(RuntimeError, match="negative"):
        torch.ones(2, device="trn").repeat(-1)
    x = torch.randn(2, 3, 4, 5, 6)
    xt = x.to("trn").requires_grad_()
    xc = x.clone().requires_grad_()
    g = torch.randn(2, 6, 4, 5, 12)
    xc.repeat(1, 2, 1, 1, 2).backward(g)
    xt.repeat(1, 2, 1, 1, 2).backward(g.to("trn"))
    torch.testing.assert_close(xt.grad.cpu(), xc.grad, rtol=1e-5, atol=1e-5)


def test_repeat_interleave_negative():
    torch.repeat_interleave(torch.tensor([1, -1], device="trn"), output_size=0)
    with pytest.raises(RuntimeError, match="negative"):
        torch.trn.synchronize()


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_flip_roll(dtype, layout):
    x = make((3, 4, 5), dtype)
    t = on_trn(x, layout)
    for dims in ([0], [-1], [0, 2], [0, 1, 2]):
        check(t.flip(dims), x.flip(dims), exact=True)
    for shifts, dims in ((1, 0), (-2, -1), ((1, 7), (0, 2)), ((2, -1), (1, 1))):
        check(t.roll(shifts, dims), x.roll(shifts, dims), exact=True)
    check(t.roll(3), x.roll(3), exact=True)


# ---- a real model's attention mask -----------------------------------------------------
@pytest.mark.uses_fallback  # checks its own fallbacks
def test_llama_padding_mask_forward_matches_cpu():
    """A tiny transformers LlamaModel with a padded attention_mask: the causal + padding
    mask is built by transformers.masking_utils on trn; the forward equals CPU's and runs
    without any CPU fallback."""
    pytest.importorskip("transformers")
    from transformers import LlamaConfig, LlamaModel

    config = LlamaConfig(vocab_size=97, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=64)
    torch.manual_seed(0)
    model = LlamaModel(config).eval()
    ids = torch.randint(0, 97, (2, 9))
    mask = torch.ones(2, 9, dtype=I64)
    mask[0, :3] = 0  # left padding, as batched generation uses
    with torch.no_grad():
        want = model(input_ids=ids, attention_mask=mask).last_hidden_state
        model.to("trn")
        got = model(input_ids=ids.to("trn"), attention_mask=mask.to("trn")).last_hidden_state
        torch.trn.synchronize()
    fallbacks = trnscope.fallback_ops()
    # Rows of the padded positions attend to nothing useful; compare the real tokens.
    torch.testing.assert_close(got.cpu()[0, 3:], want[0, 3:], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(got.cpu()[1], want[1], rtol=1e-4, atol=1e-4)
    assert fallbacks == {}, f"ops that still fall back in the Llama forward: {fallbacks}"


def test_index_out_writes_in_place_or_through_a_temporary_when_it_overlaps():
    w = torch.randn(5, 7)
    ids = torch.tensor([4, 0, 4])
    want = w[ids]
    wt = w.to("trn")
    out = torch.empty(7, 3, device="trn").t()  # non-contiguous out
    res = torch.ops.aten.index.Tensor_out(wt, [ids.to("trn")], out=out)
    assert res is out and torch.equal(out.cpu(), want)
    # out overlapping self: computed before it is written
    buf = wt.clone()
    torch.ops.aten.index.Tensor_out(buf, [torch.tensor([1, 0], device="trn")], out=buf[:2])
    assert torch.equal(buf.cpu()[:2], w[[1, 0]])
    # out of another dtype: cast through the temporary
    out64 = torch.empty(0, dtype=torch.float64, device="trn")
    torch.ops.aten.index.Tensor_out(wt, [ids.to("trn")], out=out64)
    assert torch.equal(out64.cpu(), want.double())
    assert trnscope.fallback_ops() == {}


# ---- searchsorted / bucketize / bincount ------------------------------------------------
@pytest.mark.parametrize("dtype", [F32, BF16, F16, I32, I64, torch.float64], ids=str)
@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("rows", [False, True])  # one 1-D sequence, or one per leading index
def test_searchsorted(dtype, side, rows):
    seq = torch.sort(make((3, 4, 9) if rows else (9,), dtype), dim=-1).values
    seq[..., 3] = seq[..., 4]  # repeated boundaries: left and right differ there
    values = make((3, 4, 6), dtype)
    values[0, 0, :2] = seq[..., 4].flatten()[:2]
    for layout in LAYOUTS:
        got = torch.searchsorted(on_trn(seq, layout), on_trn(values, layout), side=side)
        check(got, torch.searchsorted(seq, values, side=side), exact=True)
    right = side == "right"
    got = torch.searchsorted(seq.to("trn"), values.to("trn"), right=right, out_int32=True)
    check(got, torch.searchsorted(seq, values, right=right, out_int32=True), exact=True)
    out = torch.empty(0, dtype=torch.int64, device="trn")
    torch.searchsorted(seq.to("trn"), values.to("trn"), side=side, out=out)
    check(out, torch.searchsorted(seq, values, side=side), exact=True)


def test_searchsorted_nan_mixed_dtypes_bucketize_and_errors():
    seq = torch.tensor([1.0, 2.0, 2.0, 3.0, float("nan")])
    v = torch.tensor([float("nan"), 2.0, 0.5, 3.5, float("inf")])
    for right in (False, True):
        check(torch.searchsorted(seq.to("trn"), v.to("trn"), right=right),
              torch.searchsorted(seq, v, right=right), exact=True)
    ints = torch.tensor([0, 2, 3, 9])  # int values in a float sequence: promoted
    check(torch.searchsorted(seq.to("trn"), ints.to("trn")), torch.searchsorted(seq, ints), exact=True)
    b, x = torch.tensor([0, 2, 5]), torch.tensor([[-1, 0, 3], [5, 6, 2]])
    for right in (False, True):
        check(torch.bucketize(x.to("trn"), b.to("trn"), right=right),
              torch.bucketize(x, b, right=right), exact=True)
    with pytest.raises(RuntimeError, match="side and right can't be set to opposites"):
        torch.searchsorted(seq.to("trn"), v.to("trn"), right=True, side="left")
    with pytest.raises(RuntimeError, match="first N-1 dimensions"):
        torch.searchsorted(torch.zeros(2, 3, device="trn"), torch.zeros(3, 1, device="trn"))
    with pytest.raises(RuntimeError, match="boundaries tensor must be 1 dimension"):
        torch.bucketize(v.to("trn"), torch.zeros(2, 2, device="trn"))


@pytest.mark.parametrize("weights", [None, F32, BF16, torch.float64, I64])
@pytest.mark.parametrize("minlength", [0, 12])
def test_bincount(weights, minlength):
    g = torch.Generator().manual_seed(3)
    x = torch.randint(0, 9, (40,), generator=g)
    w = None if weights is None else make((40,), weights)
    want = torch.bincount(x, weights=w, minlength=minlength)
    for layout in ("contig", "strided"):
        got = torch.bincount(on_trn(x, layout), weights=None if w is None else on_trn(w, layout),
                             minlength=minlength)
        check(got, want)
    check(torch.bincount(x.to(torch.int32).to("trn"), minlength=minlength),
          torch.bincount(x.to(torch.int32), minlength=minlength), exact=True)


def test_bincount_edges_and_errors():
    empty = torch.tensor([], dtype=torch.long)
    check(torch.bincount(empty.to("trn"), minlength=3), torch.bincount(empty, minlength=3), exact=True)
    check(torch.bincount(empty.to("trn")), torch.bincount(empty), exact=True)
    with pytest.raises(RuntimeError, match="non-negative integral"):
        torch.bincount(torch.tensor([0, -1]).to("trn"))
    with pytest.raises(RuntimeError, match="non-negative integral"):
        torch.bincount(torch.tensor([0.5]).to("trn"))
    with pytest.raises(RuntimeError, match="same length"):
        torch.bincount(torch.tensor([0, 1]).to("trn"), weights=torch.ones(3, device="trn"))
    with pytest.raises(RuntimeError, match="minlength"):
        torch.bincount(torch.tensor([0, 1]).to("trn"), minlength=-1)


# ---- unique ---------------------------------------------------------------------------------
UNIQUE = [
    torch.tensor([3, 1, 3, 2, 1, 5]),
    torch.tensor([1.0, float("nan"), 2.0, float("nan"), 1.0]),  # every NaN its own group, last
    torch.tensor([[2, 1], [2, 3]]),  # the inverse keeps the input's shape
    torch.tensor([True, False, True]),
    torch.tensor([], dtype=torch.long),
    torch.tensor([7]),
]


@pytest.mark.parametrize("case", range(len(UNIQUE) + 1))
@pytest.mark.parametrize("inverse", [False, True])
@pytest.mark.parametrize("counts", [False, True])
def test_unique_matches_cpu(case, inverse, counts):
    x = UNIQUE[case] if case < len(UNIQUE) else make((6, 7), BF16).round()
    for xt in (x.to("trn"), on_trn(x, "strided")):
        got = torch.unique(xt, return_inverse=inverse, return_counts=counts)
        want = torch.unique(x, return_inverse=inverse, return_counts=counts)
        got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
        for g, w in zip(got, want):
            check(g, w, exact=True)
    check(torch.unique(x.to("trn"), sorted=False), torch.unique(x, sorted=False), exact=True)


# ---- kthvalue / median / nanmedian ------------------------------------------------------------
def _distinct(shape, dtype):
    """Distinct values (the index of an order statistic is then unambiguous)."""
    n = math.prod(shape)
    v = torch.randperm(n, generator=torch.Generator().manual_seed(n)).reshape(shape)
    return (v - n // 2).to(dtype)


@pytest.mark.parametrize("dtype", [F32, BF16, I32, I64, torch.float64], ids=str)
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_order_statistics(dtype, dim, keepdim):
    x = _distinct((6, 7), dtype)
    for layout in LAYOUTS:
        t = on_trn(x, layout)
        for k in (1, 3, x.size(dim)):
            got, want = torch.kthvalue(t, k, dim, keepdim), torch.kthvalue(x, k, dim, keepdim)
            check(got.values, want.values, exact=True)
            check(got.indices, want.indices, exact=True)
        for fn in (torch.median, torch.nanmedian):
            got, want = fn(t, dim, keepdim), fn(x, dim, keepdim)
            check(got.values, want.values, exact=True)
            check(got.indices, want.indices, exact=True)
            check(fn(t), fn(x), exact=True)


def test_order_statistics_nan_ties_scalars_and_errors():
    nan = float("nan")
    x = torch.tensor([[3.0, 1.0, nan, 2.0, 5.0], [5.0, 4.0, 4.0, 1.0, 2.0], [nan, 1.0, 2.0, nan, 0.5]])
    t = x.to("trn")
    for fn in (torch.median, torch.nanmedian):
        got, want = fn(t, 1), fn(x, 1)
        check(got.values, want.values, exact=True)
        # a row's first NaN (median), the lower median (ties: the first index)
        check(got.indices[:2], want.indices[:2], exact=True)
        check(fn(t), fn(x), exact=True)
    check(torch.kthvalue(t, 4, 1).values, torch.kthvalue(x, 4, 1).values, exact=True)
    out_v, out_i = torch.empty(0, device="trn"), torch.empty(0, dtype=I64, device="trn")
    torch.median(t, 1, out=(out_v, out_i))
    check(out_v, torch.median(x, 1).values, exact=True)
    s = torch.tensor(3.0)
    check(torch.median(s.to("trn"), 0).values, torch.median(s, 0).values, exact=True)
    check(torch.median(torch.empty(0, device="trn")), torch.median(torch.empty(0)), exact=True)
    with pytest.raises(RuntimeError, match="k out of range"):
        torch.kthvalue(t, 6, 1)
    with pytest.raises(RuntimeError, match="non-zero size"):
        torch.median(torch.empty(2, 0, device="trn"), 1)


# ---- sampling: multinomial (Note [Multinomial]) and _assert_async --------------------------
@pytest.mark.parametrize("dtype", [F32, BF16, F16, torch.float64], ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("n,replacement", [
    (1, False), (1, True), (2, False), (4, False), (9, True), (100, False), (240, False)])
def test_multinomial_draws_cpu_samples_from_one_seed(dtype, layout, n, replacement):
    """The same seed gives CPU PyTorch's samples, equal quotients (bf16 rounds many
    together, zero probabilities) ordered as CPU's topk orders them. CPU fills the
    variates in the input's memory order, so both sides get the same layout."""
    g = torch.Generator().manual_seed(n)
    p = torch.softmax(torch.randn(3, 240, generator=g) * 3, -1)
    p[:, ::5] = 0
    p = p.to(dtype)
    torch.manual_seed(11)
    want = torch.multinomial(on_trn(p, layout, "cpu"), n, replacement)
    torch.manual_seed(11)
    got = torch.multinomial(on_trn(p, layout), n, replacement)
    if dtype == torch.float64:  # Note [float64 policy]: CPU's float32 algorithm on the
        # same draws (float64 Exp(1) variates like p, or float64 uniforms)
        pl = on_trn(p, layout, "cpu")
        torch.manual_seed(11)
        if replacement and n > 1:
            want = torch.multinomial(pl.float(), n, True)
        else:
            r = pl.float() / torch.empty_like(pl).exponential_().float()
            want = r.argmax(-1, keepdim=True) if n == 1 else torch.topk(r, n).indices
        check(got, want, exact=True)
        return
    check(got, want, exact=True)
    torch.manual_seed(11)  # 1-D, and out=
    out = torch.empty(0, dtype=I64, device="trn")
    torch.multinomial(on_trn(p[1]), n, replacement, out=out)
    torch.manual_seed(11)
    check(out, torch.multinomial(p[1], n, replacement), exact=True)


def test_multinomial_errors_match_cpu():
    def both(fn, p, *args, **kw):
        msgs = []
        for dev in ("cpu", "trn"):
            with pytest.raises(RuntimeError) as info:
                r = fn(p.to(dev), *args, **kw)
                torch.trn.synchronize()
                r.cpu()
            msgs.append(str(info.value))
        assert msgs[0] in msgs[1], msgs

    M = torch.multinomial
    for bad in ([0.5, float("nan")], [0.5, -1.0], [1.0, float("inf")], [0.0, 0.0]):
        for n, rep in ((1, False), (2, False), (3, True)):
            both(M, torch.tensor(bad), n, rep)
    both(M, torch.ones(3), 4)
    both(M, torch.ones(3), 0, True)
    both(M, torch.ones(2, 2, 2), 1)
    both(M, torch.ones(3, dtype=I64), 1)
    both(lambda p: M(p, 2, out=torch.empty(2, dtype=I32, device=p.device)), torch.ones(3))
    with pytest.raises(RuntimeError, match="0 categories"):
        M(torch.ones(2, 0, device="trn"), 1, True)
    assert M(torch.ones(0, 3, device="trn"), 2).shape == (0, 2)
    # A failed sample writes nothing into out=.
    out = torch.full((2,), 7, dtype=I64, device="trn")
    with pytest.raises(RuntimeError, match="sum of probabilities"):
        M(torch.zeros(3, device="trn"), 2, out=out)
        torch.trn.synchronize()
    assert out.cpu().tolist() == [7, 7]


def test_random_ops_fill_strided_tensors_in_cpu_order():
    for fill in (lambda t: t.exponential_(), lambda t: t.normal_(), lambda t: t.uniform_()):
        torch.manual_seed(3)
        want = fill(torch.empty(4, 6).t())
        torch.manual_seed(3)
        got = fill(torch.empty(4, 6, device="trn").t())
        check(got, want, exact=True)


@pytest.mark.parametrize("value,dtype", [(1, I64), (0.5, F32), (float("nan"), F32), (True, BOOL),
                                         (2, BF16), (1e-300, torch.float64)])
def test_assert_async_passes_nonzero_values_without_a_sync(value, dtype):
    before = trnscope.float64_downcasts()
    torch._assert_async(torch.tensor(value, dtype=dtype, device="trn"))
    torch._assert_async(torch.tensor([value], dtype=dtype, device="trn"), "never")
    torch.trn.synchronize()
    assert trnscope.float64_downcasts() == before  # an exact check, not float64 math


def test_assert_async_fails_the_stream_with_cpu_messages():
    A = torch._assert_async
    cases = [(lambda d: A(torch.tensor(0.0, device=d)), "single nonzero value, but got zero"),
             (lambda d: A(torch.tensor(0, device=d), "boom"), "boom"),
             (lambda d: A(torch.tensor(False, device=d), ""), "Assertion is failed"),
             (lambda d: A(torch.tensor([1, 2], device=d)), "more than one value"),
             (lambda d: A(torch.tensor([], device=d)), "no values")]
    for fn, msg in cases:
        with pytest.raises(RuntimeError, match=msg):
            fn("cpu")
        with pytest.raises(RuntimeError, match=msg):
            fn("trn")
            torch.trn.synchronize()


# ---- nn.EmbeddingBag: _embedding_bag / _embedding_bag_forward_only ---------------------------
def _bag_inputs(idx_dtype, n=23, rows=17, bags=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    indices = torch.randint(0, rows, (n,), generator=g).to(idx_dtype)
    cuts = torch.sort(torch.randint(0, n + 1, (bags - 1,), generator=g)).values
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), cuts]).to(idx_dtype)  # empty bags too
    return indices, offsets


@pytest.mark.parametrize("forward_only", [False, True], ids=["_embedding_bag", "forward_only"])
@pytest.mark.parametrize("include_last_offset", [False, True])
@pytest.mark.parametrize("padding_idx", [-1, 3])
@pytest.mark.parametrize("mode", [0, 1, 2], ids=["sum", "mean", "max"])
@pytest.mark.parametrize("dtype", [F32, BF16, F16], ids=str)
@pytest.mark.parametrize("idx_dtype", [I64, I32], ids=str)
def test_embedding_bag_all_outputs_equal_cpu(idx_dtype, dtype, mode, padding_idx,
                                             include_last_offset, forward_only):
    """Every output, the auxiliary ones too (CPU's backward reads them)."""
    op = torch.ops.aten._embedding_bag_forward_only if forward_only else torch.ops.aten._embedding_bag
    weight = make((17, 9), dtype)
    indices, offsets = _bag_inputs(idx_dtype)
    indices[:3] = 3  # padding rows, when padding_idx is 3
    if include_last_offset:
        offsets = torch.cat([offsets, torch.tensor([indices.numel()], dtype=idx_dtype)])
    for psw in [None, make((indices.numel(),), dtype)] if mode == 0 else [None]:
        args = (False, mode, False)
        want = op(weight, indices, offsets, *args, psw, include_last_offset, padding_idx)
        got = op(on_trn(weight, "transposed"), indices.to("trn"), offsets.to("trn"), *args,
                 None if psw is None else psw.to("trn"), include_last_offset, padding_idx)
        for g, w in zip(got, want):
            check(g, w, exact=not w.dtype.is_floating_point)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_module_2d_input_and_per_sample_weights(mode):
    """nn.EmbeddingBag over 2-D input (fixed-size bags) and 1-D input with offsets,
    under no_grad with a weight that requires grad (what inference calls)."""
    torch.manual_seed(0)
    bag = torch.nn.EmbeddingBag(50, 16, mode=mode, padding_idx=0)
    x2 = torch.randint(0, 50, (8, 5))
    x1, offsets = _bag_inputs(I64, n=30, rows=50, bags=7, seed=1)
    psw = torch.rand(30) if mode == "sum" else None
    with torch.no_grad():
        want2, want1 = bag(x2), bag(x1, offsets, per_sample_weights=psw)
        t = copy.deepcopy(bag).to("trn")
        check(t(x2.to("trn")), want2)
        check(t(x1.to("trn"), offsets.to("trn"),
                per_sample_weights=None if psw is None else psw.to("trn")), want1)


@pytest.mark.uses_fallback
def test_embedding_bag_training_backward_equals_cpu():
    """The forward's auxiliary outputs feed CPU's _embedding_bag_backward (fallback)."""
    for mode in ["sum", "mean", "max"]:
        torch.manual_seed(0)
        bag = torch.nn.EmbeddingBag(20, 6, mode=mode)
        x, offsets = _bag_inputs(I64, n=25, rows=20, bags=5, seed=2)
        bag(x, offsets).pow(2).sum().backward()
        want = bag.weight.grad.clone()
        bag.zero_grad()
        t = bag.to("trn")
        t(x.to("trn"), offsets.to("trn")).pow(2).sum().backward()
        check(t.weight.grad, want)


@pytest.mark.uses_fallback
def test_embedding_bag_mixed_index_dtypes_train_and_float64_is_counted():
    """int32 indices with int64 offsets: CPU promotes both (aux outputs int64), and its
    backward (fallback) reads them; float64 tables count as float64 downcasts."""
    w = make((6, 3), F32)
    idx, offs = torch.tensor([1, 2, 3, 4], dtype=I32), torch.tensor([0, 0, 2])
    want = torch.ops.aten._embedding_bag(w, idx, offs, False, 0, False, None, False, 0)
    got = torch.ops.aten._embedding_bag(w.to("trn"), idx.to("trn"), offs.to("trn"), False, 0,
                                        False, None, False, 0)
    for g, e in zip(got, want):
        check(g, e, exact=not e.dtype.is_floating_point)
    wc, wt = w.clone().requires_grad_(), w.to("trn").requires_grad_()
    F.embedding_bag(idx, wc, offs).sum().backward()
    F.embedding_bag(idx.to("trn"), wt, offs.to("trn")).sum().backward()
    check(wt.grad, wc.grad)
    before = trnscope.float64_downcasts().get("aten::_embedding_bag_forward_only", 0)
    F.embedding_bag(idx.to("trn"), w.double().to("trn"), offs.to("trn"))
    assert trnscope.float64_downcasts().get("aten::_embedding_bag_forward_only", 0) == before + 1


def test_embedding_bag_bad_input_fails_with_cpus_messages():
    w = torch.randn(10, 4, device="trn")
    with pytest.raises(RuntimeError, match="valid range"):
        F.embedding_bag(torch.tensor([1, 12], device="trn"), w, torch.tensor([0], device="trn"))
        torch.trn.synchronize()
    with pytest.raises(RuntimeError, match="offsets\\[0\\] has to be 0"):
        F.embedding_bag(torch.tensor([1, 2], device="trn"), w, torch.tensor([1], device="trn"))
        torch.trn.synchronize()
    with pytest.raises((RuntimeError, ValueError), match="per_sample_weights"):
        F.embedding_bag(torch.tensor([1, 2], device="trn"), w, torch.tensor([0], device="trn"),
                        mode="max", per_sample_weights=torch.ones(2, device="trn"))
    good = F.embedding_bag(torch.tensor([1, 2], device="trn"), w, torch.tensor([0], device="trn"))
    check(good, F.embedding_bag(torch.tensor([1, 2]), w.cpu(), torch.tensor([0])))


@pytest.mark.parametrize("dim", [1, 7, 16, 37, 130])
@pytest.mark.parametrize("mode", [0, 1], ids=["sum", "mean"])
def test_embedding_bag_float32_rows_in_registers(mode, dim):
    """Note [Bag sums]: contiguous float32 rows, every column tail and bags of
    more than the 64 rows gathered at a time, with and without per_sample_weights."""
    weight = make((40, dim), F32)
    g = torch.Generator().manual_seed(dim)
    indices = torch.randint(0, 40, (300,), generator=g)
    indices[10:20] = 5
    offsets = torch.tensor([0, 3, 3, 150, 290])  # 3, 0, 147, 140 and 10 rows
    for psw in [None, make((300,), F32)] if mode == 0 else [None]:
        for padding_idx in [-1, 5]:
            args = (False, mode, False, psw, False, padding_idx)
            want = torch.ops.aten._embedding_bag(weight, indices, offsets, *args)
            got = torch.ops.aten._embedding_bag(
                weight.to("trn"), indices.to("trn"), offsets.to("trn"), *args[:3],
                None if psw is None else psw.to("trn"), False, padding_idx)
            for g_, w_ in zip(got, want):
                check(g_, w_, exact=not w_.dtype.is_floating_point)


# ---- index_add_ / index_copy_ / index_fill_ (one IndexPut kernel along a dim) ----------------
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("dtype", NUM, ids=str)
def test_index_add_copy_fill_along_a_dim(dtype, dim, layout):
    """MoE's index_add_ of expert outputs, GNN aggregation; duplicates accumulate."""
    x = make((5, 6, 7), dtype)
    n = x.shape[dim]
    idx = torch.tensor([n - 1, 0, 2, 0])  # a duplicate for index_add
    src_shape = list(x.shape)
    src_shape[dim] = 4
    src = make(tuple(src_shape), dtype, lo=-3, hi=4)
    tx, tsrc = on_trn(x, layout), on_trn(src, layout)
    alpha = 2 if not dtype.is_floating_point else 0.5
    check(torch.index_add(tx, dim, idx.to("trn"), tsrc, alpha=alpha),
          torch.index_add(x, dim, idx, src, alpha=alpha))
    uniq = torch.tensor([n - 1, 0, 2])
    usrc = src.narrow(dim, 0, 3)
    check(torch.index_copy(tx, dim, uniq.to("trn"), on_trn(usrc, layout)),
          torch.index_copy(x, dim, uniq, usrc), exact=True)
    for value in [3, -1.5] if dtype.is_floating_point else [3]:
        check(torch.index_fill(tx, dim, torch.tensor([-1, 1]).to("trn"), value),
              torch.index_fill(x, dim, torch.tensor([-1, 1]), value), exact=True)
    t = x.to("trn")
    t.index_add_(dim, idx.to("trn"), src.to("trn"))
    check(t, x.clone().index_add_(dim, idx, src))
    t.index_fill_(dim, torch.tensor([0]).to("trn"), torch.tensor(7).to(dtype))
    check(t, x.clone().index_add_(dim, idx, src).index_fill_(dim, torch.tensor([0]), 7))
    out = torch.empty(0, dtype=dtype, device="trn")
    torch.index_add(x.to("trn"), dim, idx.to("trn"), src.to("trn"), out=out)
    check(out, torch.index_add(x, dim, idx, src))


def test_index_add_scalar_index_int32_and_mixtral_style_moe():
    x, src = make((6, 4), F32), make((1, 4), F32)
    check(torch.index_add(x.to("trn"), 0, torch.tensor(2).to("trn"), src.to("trn")),
          torch.index_add(x, 0, torch.tensor(2), src))
    check(torch.index_add(x.to("trn"), 0, torch.tensor([1, 1], dtype=I32).to("trn"),
                          make((2, 4), F32).to("trn")),
          torch.index_add(x, 0, torch.tensor([1, 1], dtype=I32), make((2, 4), F32)))
    # Mixtral's sparse MoE block: each expert's rows scattered back with index_add_
    hidden, routed = make((10, 8), F32), make((6, 8), F32)
    top_x = torch.tensor([9, 3, 3, 0, 7, 1])
    want = torch.zeros(10, 8).index_add_(0, top_x, routed) + hidden
    got = torch.zeros(10, 8, device="trn").index_add_(0, top_x.to("trn"), routed.to("trn"))
    check(got + hidden.to("trn"), want)


def test_index_add_copy_reject_what_cpu_rejects():
    t = torch.zeros(5, 3, device="trn")
    with pytest.raises(RuntimeError, match="index -1 is out of bounds"):  # CPU's rule
        t.index_add_(0, torch.tensor([-1], device="trn"), torch.ones(1, 3, device="trn"))
        torch.trn.synchronize()
    with pytest.raises(RuntimeError, match="index 5 is out of bounds"):
        t.index_copy_(0, torch.tensor([5], device="trn"), torch.ones(1, 3, device="trn"))
        torch.trn.synchronize()
    with pytest.raises(RuntimeError, match="does not match"):
        t.index_add_(0, torch.tensor([1], device="trn"), torch.ones(1, 4, device="trn"))
    with pytest.raises(RuntimeError, match="same scalar type"):
        t.index_add_(0, torch.tensor([1], device="trn"), torch.ones(1, 3, device="trn").double())
    check(t, torch.zeros(5, 3), exact=True)  # nothing written by the failures


# ---- scatter_reduce, masked_scatter, take, scans, triangle indices (session 26) ----------
@pytest.mark.parametrize("dtype", [F32, BF16, I32, I64], ids=str)
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("layout", ["contig", "transposed"])
def test_scatter_reduce(dtype, reduce, include_self, layout):
    x = make((4, 5, 6), dtype, 1, 4)  # small values: products stay in range
    src = make((4, 5, 6), dtype, -3, 4)
    g = torch.Generator().manual_seed(7)
    dup = torch.randint(0, 5, (4, 3, 6), generator=g)  # duplicates, and untouched cells
    want = x.scatter_reduce(1, dup, src, reduce, include_self=include_self)
    got = on_trn(x, layout).scatter_reduce(1, dup.to("trn"), on_trn(src, layout), reduce,
                                           include_self=include_self)
    check(got, want)
    y = on_trn(x, layout).clone()
    y.scatter_reduce_(1, dup.to("trn"), on_trn(src, layout), reduce, include_self=include_self)
    check(y, want)


def test_scatter_reduce_nan_out_and_errors():
    x = torch.tensor([1.0, float("nan"), 0.0, 2.0])
    src = torch.tensor([5.0, -1.0, float("nan"), 3.0, -7.0])
    idx = torch.tensor([0, 1, 2, 0, 3])
    for reduce in ("amax", "amin"):
        for include_self in (True, False):
            want = x.scatter_reduce(0, idx, src, reduce, include_self=include_self)
            got = x.to("trn").scatter_reduce(0, idx.to("trn"), src.to("trn"), reduce,
                                             include_self=include_self)
            check(got, want)
    out = torch.empty(0).to("trn")
    torch.scatter_reduce(x.to("trn"), 0, idx.to("trn"), src.to("trn"), "sum", out=out)
    check(out, torch.scatter_reduce(x, 0, idx, src, "sum"))
    with pytest.raises(RuntimeError, match="reduce argument must be either sum, prod, mean, amax"):
        x.to("trn").scatter_reduce(0, idx.to("trn"), src.to("trn"), "maximum")
    with pytest.raises(RuntimeError, match="index 4 is out of bounds"):
        x.to("trn").scatter_reduce(0, torch.tensor([4]).to("trn"), src.to("trn"), "sum").cpu()


@pytest.mark.parametrize("dtype", [F32, BF16, I64, BOOL], ids=str)
@pytest.mark.parametrize("mask_shape", [(3, 4, 5), (4, 1), (5,)])
def test_masked_scatter(dtype, mask_shape):
    """masked_scatter (VLMs put image features into text embeddings): broadcast
    masks, a source larger than needed, non-contiguous self."""
    x = make((3, 4, 5), dtype)
    mask = make(mask_shape, BOOL)
    src = make((70,), dtype)
    want = x.masked_scatter(mask, src)
    got = on_trn(x, "transposed").masked_scatter(mask.to("trn"), src.to("trn"))
    check(got, want, exact=True)
    y = x.to("trn")
    y.masked_scatter_(mask.to("trn"), src.to("trn").view(7, 10))
    check(y, want, exact=True)


def test_masked_scatter_vlm_and_errors():
    embeds = make((2, 6, 8), F32)
    ids = torch.tensor([[1, 9, 9, 9, 2, 3], [9, 9, 9, 4, 5, 6]])
    image = make((6, 8), F32)
    mask = (ids == 9).unsqueeze(-1).expand_as(embeds)
    want = embeds.masked_scatter(mask, image)
    check(embeds.to("trn").masked_scatter(mask.to("trn"), image.to("trn")), want, exact=True)
    none = torch.zeros(2, 6, 8, dtype=torch.bool)
    check(embeds.to("trn").masked_scatter(none.to("trn"), torch.empty(0).to("trn")), embeds,
          exact=True)
    with pytest.raises(RuntimeError, match=r"Number of elements of source \(40\) < number of ones"):
        embeds.to("trn").masked_scatter(mask.to("trn"), image[:5].to("trn"))
    with pytest.raises(RuntimeError, match="only supports boolean masks"):
        embeds.to("trn").masked_scatter(mask.int().to("trn"), image.to("trn"))
    with pytest.raises(RuntimeError, match="same dtypes"):
        embeds.to("trn").masked_scatter(mask.to("trn"), image.double().to("trn"))


def test_masked_scatter_gradients():
    x, src = make((3, 4), F32), make((12,), F32)
    mask = make((3, 4), BOOL)
    grads = []
    for dev in ("cpu", "trn"):
        a, b = (t.detach().clone().to(dev).requires_grad_() for t in (x, src))
        (a.masked_scatter(mask.to(dev), b) * torch.arange(12.0).view(3, 4).to(dev)).sum().backward()
        grads.append((a.grad.cpu(), b.grad.cpu()))
    for got, want in zip(*reversed(grads)):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("dtype", [F32, I64, BOOL], ids=str)
def test_take(dtype):
    x = make((4, 5), dtype)
    idx = torch.tensor([[0, 19, -1], [-20, 7, 3]])
    check(on_trn(x, "transposed").take(idx.to("trn")), x.take(idx), exact=True)
    out = torch.empty(0, dtype=dtype).to("trn")
    torch.take(x.to("trn"), idx.to("trn"), out=out)
    check(out, x.take(idx), exact=True)
    with pytest.raises(RuntimeError, match="out of range|out of bounds"):
        x.to("trn").take(torch.tensor([20]).to("trn")).cpu()


@pytest.mark.parametrize("dtype", [F32, BF16, F16, I32, I64, BOOL], ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dim", [0, -1])
def test_cummax_cummin(dtype, layout, dim):
    x = make((5, 7), dtype, -2, 3)  # ties
    if dtype.is_floating_point:
        x[1, 2] = x[3, 4] = float("nan")
    for fn in (torch.cummax, torch.cummin):
        wv, wi = fn(x, dim)
        gv, gi = fn(on_trn(x, layout), dim)
        check(gv, wv, exact=True)
        check(gi, wi, exact=True)


@pytest.mark.parametrize("dtype", [F32, BF16, torch.float64], ids=str)
def test_logcumsumexp(dtype):
    x = (make((4, 9), F32) * 30).to(dtype)
    x[0, 0] = float("-inf")
    x[1, 3] = 500.0  # exp overflows without the running shift
    x[2, 5] = float("nan")
    for dim in (0, 1):
        want = torch.logcumsumexp(x, dim)
        got = torch.logcumsumexp(on_trn(x, "strided"), dim)
        r = 2e-2 if dtype == BF16 else 1e-5
        torch.testing.assert_close(got.cpu(), want, rtol=r, atol=r, equal_nan=True)
    with pytest.raises(RuntimeError, match="expected a floating input"):
        torch.logcumsumexp(torch.ones(3, dtype=torch.long).to("trn"), 0)


@pytest.mark.parametrize("args", [(4, 5), (4, 5, 1), (5, 3, -2), (0, 3), (6, 6, 10), (3, 7, -9)])
@pytest.mark.parametrize("dtype", [I64, I32])
def test_tril_triu_indices(args, dtype):
    for fn in (torch.tril_indices, torch.triu_indices):
        check(fn(*args, device="trn", dtype=dtype), fn(*args, dtype=dtype), exact=True)


@pytest.mark.parametrize("dtype", [F32, BF16, I32, I64, BOOL], ids=str)
@pytest.mark.parametrize("dim", [None, 0, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_aminmax(dtype, dim, keepdim):
    x = make((4, 6), dtype)
    want = torch.aminmax(x, dim=dim, keepdim=keepdim)
    got = torch.aminmax(on_trn(x, "transposed"), dim=dim, keepdim=keepdim)
    for g, w in zip(got, want):
        check(g, w, exact=True)
    lo, hi = torch.empty(0, dtype=dtype).to("trn"), torch.empty(0, dtype=dtype).to("trn")
    torch.aminmax(x.to("trn"), dim=dim, keepdim=keepdim, out=(lo, hi))
    check(lo, want[0], exact=True)
    with pytest.raises(RuntimeError, match="cannot compute aminmax over an empty dimension"):
        torch.aminmax(torch.empty(0).to("trn"))


@pytest.mark.parametrize("dtype", [F32, BF16, I64], ids=str)
def test_nansum_count_nonzero_trace(dtype):
    x = make((4, 6), dtype, -2, 3)
    if dtype.is_floating_point:
        x[1, 1] = x[2, 5] = float("nan")
    for dim in (None, 0, (0, 1)):
        check(torch.nansum(on_trn(x, "strided"), dim=dim), torch.nansum(x, dim=dim))
        check(torch.count_nonzero(on_trn(x, "transposed"), dim=dim),
              torch.count_nonzero(x, dim=dim), exact=True)
    check(torch.nansum(x.to("trn"), 1, keepdim=True, dtype=torch.float32),
          torch.nansum(x, 1, keepdim=True, dtype=torch.float32))
    sq = make((5, 5), dtype, -2, 3)
    check(torch.trace(on_trn(sq, "transposed")), torch.trace(sq))
    check(torch.trace(x.to("trn")), torch.trace(x))  # not square: the leading diagonal
    with pytest.raises(RuntimeError, match="trace: expected a matrix"):
        torch.trace(x.to("trn")[0])


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.5, float("inf")])
@pytest.mark.parametrize("rows", [(5, 7), (30, 4)])  # p = 2 over > 25 rows: the matmul form
def test_cdist(p, rows):
    a, b = make((2, rows[0], 8), F32), make((2, rows[1], 8), F32)
    b[0, 0] = a[0, 1]  # a zero distance
    want = torch.cdist(a, b, p=p)
    got = torch.cdist(a.to("trn"), on_trn(b, "transposed"), p=p)
    # The matmul form takes sqrt(|a|^2 + |b|^2 - 2 a.b): a zero distance comes out as the
    # square root of a float32 cancellation error, ~sqrt(1e-7 * |a|^2), on CPU as on trn.
    atol = 2e-3 if p == 2 and rows[0] > 25 else 1e-4
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=atol)
    with pytest.raises(RuntimeError, match="same number of columns"):
        torch.cdist(a.to("trn"), b[..., :5].to("trn"))


@pytest.mark.parametrize("dtype", [F32, I64], ids=str)
def test_linalg_cross(dtype):
    a, b = make((4, 3, 5), dtype), make((1, 3, 5), dtype)
    check(torch.linalg.cross(on_trn(a, "strided"), b.to("trn"), dim=1),
          torch.linalg.cross(a, b, dim=1), exact=dtype == I64)
    with pytest.raises(RuntimeError, match="must have length 3"):
        torch.linalg.cross(a.to("trn"), b.to("trn"))


@pytest.mark.parametrize("layout", ["contig", "channels_last"])
def test_channel_shuffle(layout):
    x = make((2, 6, 3, 4), F32)
    t = x.to("trn")
    if layout == "channels_last":
        t = t.contiguous(memory_format=torch.channels_last)
    for fn in (F.channel_shuffle, torch.nn.ChannelShuffle(3)):
        got = fn(t, 3) if fn is F.channel_shuffle else fn(t)
        check(got, F.channel_shuffle(x, 3), exact=True)
    with pytest.raises(RuntimeError, match="must be divisible by groups"):
        F.channel_shuffle(t, 4)


def test_bernoulli_of_probabilities():
    """bernoulli with a probability tensor: 0 and 1 are exact, p = 0.3 draws about 30%
    ones, and the trn generator's seed reproduces the draws."""
    p = torch.tensor([0.0, 1.0, 0.3]).repeat_interleave(4000).to("trn")
    torch.manual_seed(3)
    a = torch.bernoulli(p).cpu()
    assert a[:4000].sum() == 0 and a[4000:8000].sum() == 4000
    assert abs(a[8000:].mean().item() - 0.3) < 0.03
    torch.manual_seed(3)
    assert torch.equal(torch.bernoulli(p).cpu(), a)
    y = torch.empty(3, 4000).to("trn")
    y.bernoulli_(torch.tensor([[0.0], [1.0], [0.5]]).to("trn"))
    assert y[0].sum() == 0 and y[1].sum() == 4000


def test_review_edge_cases_match_cpu():
    """Cases a review of session 26 found: each as CPU PyTorch answers or raises."""
    z, i = torch.zeros(2), torch.tensor([0, 0])
    s = torch.tensor([1.0, 3.0])
    for alias in ("max", "min"):  # CPU's aliases of amax / amin
        check(z.to("trn").scatter_reduce(0, i.to("trn"), s.to("trn"), alias),
              z.scatter_reduce(0, i, s, alias))
    with pytest.raises(RuntimeError, match="index -100"):  # the user's index, not a wrapped one
        torch.take(torch.arange(6.0).to("trn"), torch.tensor([-100]).to("trn")).cpu()
    check(torch.take(torch.arange(6.0).to("trn"), torch.tensor([-6, -1]).to("trn")),
          torch.take(torch.arange(6.0), torch.tensor([-6, -1])))
    with pytest.raises(RuntimeError, match="Expected p_in >= 0 && p_in <= 1"):
        torch.bernoulli(torch.tensor([1.5, 0.5]).to("trn")).cpu()
    with pytest.raises(RuntimeError, match="Expected p_in >= 0 && p_in <= 1"):
        torch.bernoulli(torch.tensor([float("nan")]).to("trn")).cpu()
    torch.trn.synchronize()  # the device stays usable
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        torch.bernoulli(torch.tensor([1, 0]).to("trn"))
    with pytest.raises(RuntimeError, match="expected scalar type Float but found Double"):
        torch.cdist(torch.randn(3, 4).to("trn"), torch.randn(2, 4).double().to("trn"))
    with pytest.raises(NotImplementedError, match="not implemented for 'Bool'"):
        torch.trace(torch.ones(2, 2, dtype=torch.bool).to("trn"))
    with pytest.raises(IndexError, match="Expected reduction dim 0 to have non-zero size"):
        torch.aminmax(torch.empty(0, 3).to("trn"), dim=0)
    with pytest.raises(RuntimeError, match="dimension -1 must have length 3"):
        torch.linalg.cross(torch.ones(2, 4).to("trn"), torch.ones(2, 4).to("trn"))


def test_cdist_in_blocks_matches_cpu():
    """p != 2 builds the differences a block of rows at a time (bounded memory)."""
    a, b = make((600, 160), F32), make((200, 160), F32)
    torch.testing.assert_close(torch.cdist(a.to("trn"), b.to("trn"), p=1).cpu(),
                               torch.cdist(a, b, p=1), rtol=1e-5, atol=1e-3)
