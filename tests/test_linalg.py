"""torch.linalg on trn against CPU PyTorch: linalg.solve_triangular (the
chunked gated delta rule of Qwen3-Next, Qwen3.5 and OLMo-hybrid), eagerly and
compiled, over lower / upper, left / right, unit diagonals, broadcast batches,
non-contiguous operands, out= and CPU's errors. The triangle the solve must not
read holds NaN, as a model's masked matrix may. float32 matches CPU within
rtol/atol 1e-4; float64 computes in float32 on trn (Note [float64 policy]).
"""

import warnings

import pytest
import torch

import trnscope

pytestmark = pytest.mark.usefixtures("no_fallback")


def _triangular(batch, n, upper, unit, dtype=torch.float32, seed=0):
    """A well-conditioned triangular batch: off-diagonal entries of scale
    1/sqrt(n), a diagonal of magnitude 1..2 (or NaN where unit: never read),
    NaN in the other triangle."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(*batch, n, n, generator=g, dtype=torch.float64) / n ** 0.5
    keep = torch.ones(n, n, dtype=torch.bool)
    keep = keep.triu(1) if upper else keep.tril(-1)
    diag = (1 + torch.rand(*batch, n, generator=g, dtype=torch.float64)) * torch.where(
        torch.rand(*batch, n, generator=g) < 0.5, -1.0, 1.0).double()
    a = torch.where(keep, a, torch.nan)
    a.diagonal(dim1=-2, dim2=-1).copy_(torch.full_like(diag, torch.nan) if unit else diag)
    return a.to(dtype)


def _rhs(shape, dtype=torch.float32, seed=1):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unit", [False, True])
@pytest.mark.parametrize("a_batch,b_batch", [((), ()), ((2, 3), (3,)), ((1,), (4,)), ((4,), ())])
@pytest.mark.parametrize("n,k", [(1, 1), (7, 5), (64, 33), (70, 9)])
def test_solve_triangular_matches_cpu(upper, left, unit, a_batch, b_batch, n, k):
    a = _triangular(a_batch, n, upper, unit)
    b = _rhs((*b_batch, n, k) if left else (*b_batch, k, n))
    want = torch.linalg.solve_triangular(a, b, upper=upper, left=left, unitriangular=unit)
    got = torch.linalg.solve_triangular(a.to("trn"), b.to("trn"), upper=upper, left=left,
                                        unitriangular=unit)
    assert got.shape == want.shape and got.dtype == want.dtype
    torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("layout", ["a_transposed", "a_rows_strided", "b_strided", "b_transposed",
                                    "expanded", "large_one_column"])
def test_solve_triangular_non_contiguous(layout):
    a = _triangular((3,), 16, False, False)
    b = _rhs((3, 16, 8))
    ta, tb = a.to("trn"), b.to("trn")
    if layout == "a_transposed":  # the lower triangle read through a transposed view
        a = _triangular((3,), 16, True, False).mT
        ta = a.mT.contiguous().to("trn").mT
    if layout == "b_strided":
        b, tb = b[..., ::2], tb[..., ::2]
    if layout == "b_transposed":
        b = _rhs((3, 8, 16)).mT
        tb = b.mT.contiguous().to("trn").mT
    if layout == "a_rows_strided":  # read in place: rows 40 floats apart, the batch 700 apart
        wide = torch.randn(3, 17, 40)
        wide[..., :16, 3:19] = a
        a, ta = wide[..., :16, 3:19], wide.to("trn")[..., :16, 3:19]
    if layout == "expanded":
        a, ta = a[:1].expand(3, 16, 16), ta[:1].expand(3, 16, 16)
    if layout == "large_one_column":  # several row blocks, a vector right-hand side
        a = _triangular((), 300, False, False)
        b = _rhs((300, 1))
        ta, tb = a.to("trn"), b.to("trn")
    want = torch.linalg.solve_triangular(a, b, upper=False)
    got = torch.linalg.solve_triangular(ta, tb, upper=False)
    torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("a_dtype,b_dtype", [(torch.float64, torch.float64),
                                              (torch.float32, torch.float64),
                                              (torch.float64, torch.float32),
                                              (torch.float32, torch.int64)])
def test_solve_triangular_takes_a_dtype_as_cpu(a_dtype, b_dtype):
    """CPU casts B to A's dtype (not type promotion)."""
    a = _triangular((2,), 12, False, False, a_dtype)
    b = (_rhs((2, 12, 3)) * 4).round().to(b_dtype)
    want = torch.linalg.solve_triangular(a, b, upper=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the float64 policy's warning
        got = torch.linalg.solve_triangular(a.to("trn"), b.to("trn"), upper=False)
    assert got.dtype == want.dtype == a_dtype
    torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-4)


def test_solve_triangular_out_resizes_aliases_and_checks_dtype():
    a = _triangular((), 9, True, False)
    b = _rhs((9, 4))
    want = torch.linalg.solve_triangular(a, b, upper=True)
    ta, tb = a.to("trn"), b.to("trn")
    out = torch.empty(0, device="trn")
    torch.linalg.solve_triangular(ta, tb, upper=True, out=out)
    torch.testing.assert_close(out.cpu(), want, rtol=1e-4, atol=1e-4)
    # out is b: the solution replaces the right-hand sides, as on CPU
    torch.linalg.solve_triangular(ta, tb, upper=True, out=tb)
    torch.testing.assert_close(tb.cpu(), want, rtol=1e-4, atol=1e-4)
    # batched, out is b: every matrix reads its own right-hand sides first
    a3, b3 = _triangular((3,), 9, False, True), _rhs((3, 9, 4))
    tb3 = b3.to("trn")
    torch.linalg.solve_triangular(a3.to("trn"), tb3, upper=False, unitriangular=True, out=tb3)
    torch.testing.assert_close(
        tb3.cpu(), torch.linalg.solve_triangular(a3, b3, upper=False, unitriangular=True),
        rtol=1e-4, atol=1e-4)
    with pytest.raises(RuntimeError) as cpu:
        torch.linalg.solve_triangular(a, b, upper=True, out=torch.empty(9, 4, dtype=torch.float64))
    with pytest.raises(RuntimeError) as trn:
        torch.linalg.solve_triangular(ta, tb, upper=True,
                                      out=torch.empty(9, 4, dtype=torch.float64, device="trn"))
    assert str(trn.value) == str(cpu.value)


def test_solve_triangular_empty():
    for a_shape, b_shape in [((0, 3, 3), (3, 2)), ((0, 0), (0, 4)), ((3, 3), (3, 0))]:
        a, b = torch.eye(3).expand(a_shape) if a_shape[-1] == 3 else torch.zeros(a_shape), \
            torch.zeros(b_shape)
        want = torch.linalg.solve_triangular(a, b, upper=False)
        got = torch.linalg.solve_triangular(a.to("trn"), b.to("trn"), upper=False)
        assert got.shape == want.shape


@pytest.mark.parametrize("case", [
    lambda t: t(torch.randn(3), torch.randn(3, 2)),          # A not a matrix
    lambda t: t(torch.randn(3, 4), torch.randn(3, 2)),       # A not square
    lambda t: t(torch.randn(3, 3), torch.randn(4, 2)),       # AX = B shapes
    lambda t: t(torch.randn(3, 3), torch.randn(2, 4), left=False),  # XA = B shapes
    lambda t: t(torch.randn(3, 3), torch.randn(3)),          # B not a matrix
    lambda t: t(torch.randn(2, 3, 3), torch.randn(4, 3, 2)),  # batches do not broadcast
])
def test_solve_triangular_errors_as_cpu(case):
    def run(device):
        def solve(a, b, **kw):
            return torch.linalg.solve_triangular(a.to(device), b.to(device), upper=False, **kw)
        with pytest.raises(RuntimeError) as e:
            case(solve)
        return str(e.value)
    assert run("trn") == run("cpu")


@pytest.mark.uses_fallback
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.int64])
def test_solve_triangular_dtypes_cpu_rejects_raise_its_error(dtype):
    a, b = torch.eye(3).to(dtype), torch.ones(3, 2).to(dtype)
    with pytest.raises(NotImplementedError) as cpu:
        torch.linalg.solve_triangular(a, b, upper=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(NotImplementedError) as trn:
            torch.linalg.solve_triangular(a.to("trn"), b.to("trn"), upper=False)
    assert str(trn.value) == str(cpu.value)


@pytest.mark.parametrize("upper,unit", [(False, True), (True, False)])
def test_compiled_solve_triangular_is_one_library_kernel(upper, unit):
    """The chunked gated delta rule's pattern: the system built in the graph,
    then solved for two right-hand sides."""
    def f(x, v, w):
        a = (x @ x.mT) / 64
        a = a.tril(-1) if not upper else a.triu(1)
        a = a + torch.eye(x.shape[-2], device=x.device) * 1.5
        s1 = torch.linalg.solve_triangular(a, v, upper=upper, unitriangular=unit)
        s2 = torch.linalg.solve_triangular(a, w * 2, upper=upper, unitriangular=unit)
        return s1 + s2.sum(-1, keepdim=True)

    g = torch.Generator().manual_seed(0)
    x, v, w = (torch.randn(2, 3, 16, 8, generator=g), torch.randn(2, 3, 16, 5, generator=g),
               torch.randn(3, 16, 4, generator=g))
    want = f(x, v, w)
    trnscope.reset_compile_stats()
    got = torch.compile(f, backend="trn")(x.to("trn"), v.to("trn"), w.to("trn"))
    torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-4)
    stats = trnscope.compile_stats()
    assert len(stats) == 1 and stats[0]["fallback"] is None
    assert stats[0]["eager_nodes"] == []


def test_compiled_right_side_solve_is_an_eager_step():
    def f(a, b):
        return torch.linalg.solve_triangular(a, b, upper=True, left=False) * 2

    a, b = _triangular((2,), 6, True, False), _rhs((2, 3, 6))
    a = torch.nan_to_num(a, nan=0.0)  # compiled graphs may read the whole input
    trnscope.reset_compile_stats()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the eager-step warning
        got = torch.compile(f, backend="trn")(a.to("trn"), b.to("trn"))
    torch.testing.assert_close(got.cpu(), f(a, b), rtol=1e-4, atol=1e-4)
    assert [n for s in trnscope.compile_stats() for n in s["eager_nodes"]] == [
        "aten.linalg_solve_triangular.default"]
