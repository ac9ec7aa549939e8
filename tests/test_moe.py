"""The ops a mixture-of-experts layer reaches off the CPU (transformers'
grouped_mm experts: Mixtral, Qwen-MoE, ...): histc on int32 expert ids and
torch._grouped_mm, both native on trn and against CPU PyTorch.

CPU's histc has no integer kernel (CUDA's has), so integer inputs are checked
against numpy's histogram of the same bins; 16-bit floats bin in float32 (as
CUDA), i.e. like CPU's histc of the input converted to float32. _grouped_mm's
rows that no group covers are uninitialised on the CPU and 0 on trn.
"""

import numpy as np
import pytest
import torch

import trnscope

FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]


def _no_fallback():
    assert trnscope.fallback_ops() == {}, trnscope.fallback_ops()


# ---- histc ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("bins,lo,hi", [(10, 0, 0), (7, -2, 2), (100, -1, 5), (3, 1.5, 1.5), (1, -3, 3)])
def test_histc_floats_match_cpu(dtype, bins, lo, hi):
    g = torch.Generator().manual_seed(bins)
    x = (torch.randn(2000, generator=g) * 3).to(dtype)
    x[:4] = torch.tensor([lo, hi, -7.0, 7.0]).to(dtype)  # both edges and values outside
    want = torch.histc(x.float() if dtype in (torch.bfloat16, torch.float16) else x, bins, lo, hi)
    got = torch.histc(x.to("trn"), bins, lo, hi)
    assert got.dtype == dtype and got.shape == (bins,)
    assert torch.equal(got.cpu(), want.to(dtype))
    _no_fallback()


def test_histc_non_contiguous_nan_and_out():
    x = torch.randn(40, 30)
    x[3, 3] = float("nan")  # not counted when the range is given
    want = torch.histc(x.t()[::2], 12, -1, 1)
    out = torch.empty(0, device="trn")
    res = torch.histc(x.to("trn").t()[::2], 12, -1, 1, out=out)
    assert res is out and torch.equal(out.cpu(), want)
    _no_fallback()


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_histc_integers_count_expert_ids(dtype):
    """transformers' MoE: histc(expert_ids.int(), bins=E, min=0, max=E-1)."""
    experts = 8
    ids = torch.randint(0, experts, (257,), generator=torch.Generator().manual_seed(1)).to(dtype)
    got = torch.histc(ids.to("trn"), bins=experts, min=0, max=experts - 1)
    assert got.dtype == dtype
    assert got.cpu().tolist() == np.bincount(ids.numpy(), minlength=experts).tolist()
    # min == max: the data's own range, binned by CUDA's integer formula.
    sub = ids[::3].numpy().astype(np.int64)
    lo, hi = sub.min(), sub.max()
    want = np.zeros(5, dtype=np.int64)
    np.add.at(want, np.minimum((sub - lo) * 5 // (hi - lo), 4), 1)
    assert torch.histc(ids.to("trn")[::3], bins=5).cpu().tolist() == want.tolist()
    got = torch.histc(ids.to("trn"), bins=4, min=2, max=5).cpu()
    assert got.tolist() == [int((ids.numpy() == v).sum()) for v in (2, 3, 4, 5)]
    _no_fallback()


def test_histc_errors_name_the_value():
    x = torch.randn(5, device="trn")
    with pytest.raises(RuntimeError, match="bins must be > 0, got 0"):
        torch.histc(x, bins=0)
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        torch.histc(x, bins=3, min=2, max=1)
    with pytest.raises(RuntimeError, match="not finite"):
        torch.histc(x, bins=3, min=0, max=float("inf"))
    with pytest.raises(RuntimeError, match="bool"):
        torch.histc(x > 0, bins=3)
    with pytest.raises(RuntimeError, match=r"range of \[nan, nan\] is not finite"):
        torch.histc(torch.tensor([1.0, float("nan")], device="trn"), bins=3)
        torch.trn.synchronize()


# ---- _grouped_mm ----------------------------------------------------------------------
def _grouped(a, b, offs=None):
    got = torch._grouped_mm(a.to("trn"), b.to("trn"), offs=None if offs is None else offs.to("trn"))
    # CPU wants 16-byte aligned strides; the reference multiplies contiguous copies.
    return got, torch._grouped_mm(a.contiguous(), b.contiguous(), offs=offs)


def _offs(*ends):
    return torch.tensor(ends, dtype=torch.int32)


def _tol(dtype):
    return dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_grouped_mm_2d_3d_is_the_moe_forward(dtype):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(40, 32, generator=g).to(dtype)
    w = torch.randn(4, 24, 32, generator=g).to(dtype)  # experts' [out, in] weights
    offs = _offs(7, 7, 30, 40)  # an expert with no token
    got, want = _grouped(a, w.transpose(-2, -1), offs)  # transformers' layout: a non-contiguous b
    assert got.shape == (40, 24) and got.dtype == dtype
    torch.testing.assert_close(got.cpu(), want, **_tol(dtype))
    _no_fallback()


def test_grouped_mm_rows_no_group_covers_are_zero():
    a, b = torch.randn(12, 16), torch.randn(3, 16, 8)
    got, want = _grouped(a, b, _offs(2, 5, 9))
    torch.testing.assert_close(got.cpu()[:9], want[:9], rtol=1e-5, atol=1e-5)
    assert torch.equal(got.cpu()[9:], torch.zeros(3, 8))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_grouped_mm_other_layouts(dtype):
    g = torch.Generator().manual_seed(1)
    r = lambda *s: torch.randn(*s, generator=g).to(dtype)  # noqa: E731
    cases = [
        (r(4, 5, 16), r(4, 16, 8), None),  # 3-D x 3-D: bmm
        (r(5, 16), r(16, 8), _offs(4, 4, 10, 16)),  # 2-D x 2-D: K grouped, an empty group
        (r(4, 5, 16), r(16, 24), _offs(8, 8, 16, 24)),  # 3-D x 2-D: N grouped
        (r(4, 16, 5).transpose(1, 2), r(4, 8, 16).transpose(1, 2), None),  # strided operands
    ]
    for a, b, offs in cases:
        got, want = _grouped(a, b, offs)
        assert got.shape == want.shape
        torch.testing.assert_close(got.cpu(), want, **_tol(dtype))
    _no_fallback()


def test_grouped_mm_profiles_one_kernel_without_host_syncs():
    from torch.profiler import ProfilerActivity, profile

    a, b, offs = torch.randn(64, 32, device="trn"), torch.randn(8, 32, 16, device="trn"), None
    offs = torch.tensor([8 * (i + 1) for i in range(8)], dtype=torch.int32, device="trn")
    torch._grouped_mm(a, b, offs=offs)
    torch.trn.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as p:
        torch._grouped_mm(a, b, offs=offs)
        torch.trn.synchronize()
    keys = {k.key: k for k in p.key_averages()}
    assert "aten::item" not in keys and "aten::mm" not in keys  # ATen's composite does both
    assert keys["grouped_matmul_f32"].count == 1 and keys["grouped_matmul_f32"].device_time_total > 0


def test_grouped_mm_errors_name_the_value():
    a, b = torch.randn(12, 16, device="trn"), torch.randn(4, 16, 8, device="trn")
    ok = torch.tensor([1, 2, 3, 4], dtype=torch.int32, device="trn")
    with pytest.raises(RuntimeError, match="offs must be given"):
        torch._grouped_mm(a, b)
    with pytest.raises(RuntimeError, match="1-D int32 tensor, got 1-D Long"):
        torch._grouped_mm(a, b, offs=ok.long())
    with pytest.raises(RuntimeError, match="mat_b has 4 groups, offs 3"):
        torch._grouped_mm(a, b, offs=ok[:3])
    with pytest.raises(RuntimeError, match="Float32, BFloat16 or Float16 matrix, got Int"):
        torch._grouped_mm(a.int(), b.int(), offs=ok)
    with pytest.raises(RuntimeError, match="contraction dims"):
        torch._grouped_mm(a[:, :8], b, offs=ok)
    with pytest.raises(RuntimeError, match="bias is not supported"):
        torch._grouped_mm(a, b, offs=ok, bias=torch.randn(4, 8, device="trn"))
    bad = torch.tensor([2, 5, 4, 10], dtype=torch.int32, device="trn")
    with pytest.raises(RuntimeError, match=r"offs\[2\] = 4 is less than the previous offset 5"):
        torch._grouped_mm(a, b, offs=bad)
        torch.trn.synchronize()
    past = torch.tensor([2, 5, 9, 13], dtype=torch.int32, device="trn")
    with pytest.raises(RuntimeError, match=r"offs\[3\] = 13 exceeds the grouped size 12"):
        torch._grouped_mm(a, b, offs=past)
        torch.trn.synchronize()


@pytest.mark.parametrize("offs_dtype", [torch.int64, torch.int32])
def test_compiled_transformers_moe_fallback_is_one_grouped_mm(offs_dtype):
    """Note [MoE fallback]: transformers::grouped_mm_fallback (what transformers' MoE
    experts call under torch.compile) runs as one _grouped_mm kernel, not an mm per
    expert after reading the offsets back to the host; the result equals the custom
    op's own CPU implementation, rows past the last offset included (0)."""
    from torch.profiler import ProfilerActivity, profile

    import transformers.integrations.moe  # noqa: F401  (registers the custom op)

    import trnscope.compile  # noqa: F401  (the "trn" backend)

    def experts(x, w, offs):
        return torch.ops.transformers.grouped_mm_fallback(x, w, offs).relu()

    torch.manual_seed(0)
    x, w = torch.randn(30, 16), torch.randn(4, 16, 24)
    offs = torch.tensor([5, 5, 17, 26], dtype=offs_dtype)  # an empty expert; rows 26.. uncovered
    want = experts(x, w, offs)
    args = (x.to("trn"), w.to("trn"), offs.to("trn"))
    compiled = torch.compile(experts, backend="trn", dynamic=False)
    with torch.no_grad():
        torch.testing.assert_close(compiled(*args).cpu(), want, rtol=1e-5, atol=1e-5)
        torch.trn.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as p:
            got = compiled(*args)
            torch.trn.synchronize()
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
    keys = {k.key: k for k in p.key_averages()}
    assert keys["grouped_matmul_f32"].count == 1, sorted(keys)
    for host_sync_or_per_expert in ("aten::mm", "aten::item", "aten::_local_scalar_dense"):
        assert host_sync_or_per_expert not in keys, sorted(keys)
    (stats,) = trnscope.compile_stats()
    assert stats["eager_nodes"] == ["transformers.grouped_mm_fallback.default"], stats
    assert "Note [MoE fallback]" in stats["eager_reasons"][0]
    _no_fallback()
