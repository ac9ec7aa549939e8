"""Convolution, batch norm, pooling and upsampling on trn against CPU PyTorch.

Every test runs the op on CPU tensors and on trn copies of the same values
(contiguous, channels_last or non-contiguous views), and the autouse fixture
asserts that nothing went through the CPU fallback, except in the tests of
the fallback itself.

Tolerances (rtol, atol): float32 1e-4/1e-4 for convolutions (a K-long f32
dot product in another summation order), 1e-5/1e-5 for pools, batch norm
and upsampling; bfloat16 2e-2/2e-2 and float16 2e-3/2e-3 (inputs rounded to
the dtype on both sides, computed in f32 on trn, rounded once on output).
"""

import copy
import zlib

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import trnscope
from conftest import launch_counts, profiled_kernel, run_python

F32, BF16, F16 = torch.float32, torch.bfloat16, torch.float16
FLOATS = [F32, BF16, F16]


pytestmark = pytest.mark.usefixtures("no_fallback")


def make(shape, dtype=F32, salt=""):
    g = torch.Generator().manual_seed(zlib.crc32(repr((shape, str(dtype), salt)).encode()))
    return torch.randn(shape, generator=g).to(dtype)


def tol(dtype, conv=False):
    if dtype == BF16:
        return 2e-2, 2e-2
    if dtype == F16:
        return 2e-3, 2e-3
    return (1e-4, 1e-4) if conv else (1e-5, 1e-5)


def check(got, want, conv=False):
    assert got.device.type == "trn", got.device
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    rtol, atol = tol(want.dtype, conv)
    torch.testing.assert_close(got.cpu(), want, rtol=rtol, atol=atol, equal_nan=True)


def to_trn(x, layout="contig"):
    """trn tensor with x's values: contiguous, channels_last (4-D), or
    'strided' (every other element of a wider last dim)."""
    if layout == "channels_last" and x.dim() == 4:
        t = x.to(memory_format=torch.channels_last).to("trn")
        assert t.is_contiguous(memory_format=torch.channels_last)
        return t
    if layout == "strided":
        wide = torch.stack([x, torch.zeros_like(x)], dim=-1).flatten(-2)
        return wide.to("trn")[..., ::2]
    return x.to("trn")


# ---- convolution ------------------------------------------------------------------------
CONV2D = [
    # (N, C, H, W), (Cout, KH, KW), kwargs
    ((2, 3, 9, 9), (4, 3, 3), {}),
    ((2, 3, 9, 9), (4, 3, 3), dict(stride=2, padding=1)),
    ((1, 4, 10, 7), (6, 3, 2), dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2))),
    ((2, 4, 8, 8), (4, 3, 3), dict(padding=2, dilation=2)),
    ((2, 6, 8, 8), (4, 3, 3), dict(groups=2, padding=1)),
    ((2, 8, 7, 7), (8, 3, 3), dict(groups=8, padding=1)),  # depthwise
    ((2, 4, 7, 7), (8, 3, 3), dict(groups=4, stride=2)),  # depthwise, multiplier 2
    ((2, 16, 5, 5), (8, 1, 1), {}),  # pointwise
    ((1, 3, 32, 32), (8, 8, 8), dict(stride=8)),  # ViT patch embedding
    ((2, 3, 6, 6), (5, 3, 3), dict(padding="same")),
    ((1, 2, 6, 7), (3, 4, 2), dict(padding="same", dilation=(1, 2))),  # asymmetric 'same'
    # im2col from stride-phase planes: a ResNet stem (7x7/2 pad 3, odd W) and stride 3 in W
    # with a pad wider than the stride.
    ((2, 3, 21, 19), (8, 7, 7), dict(stride=2, padding=3)),
    ((1, 2, 10, 14), (3, 3, 5), dict(stride=(1, 3), padding=(1, 4), dilation=(1, 2))),
]


@pytest.mark.parametrize("case", range(len(CONV2D)))
@pytest.mark.parametrize("bias", [True, False])
def test_conv2d_geometry(case, bias):
    shape, (cout, kh, kw), kwargs = CONV2D[case]
    groups = kwargs.get("groups", 1)
    x = make(shape)
    w = make((cout, shape[1] // groups, kh, kw), salt="w")
    b = make((cout,), salt="b") if bias else None
    want = F.conv2d(x, w, b, **kwargs)
    got = F.conv2d(x.to("trn"), w.to("trn"), b.to("trn") if bias else None, **kwargs)
    check(got, want, conv=True)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("layout", ["contig", "channels_last", "strided"])
def test_conv2d_dtypes_layouts(dtype, layout):
    x = make((2, 6, 9, 8), dtype)
    w = make((4, 3, 3, 3), dtype, salt="w")
    b = make((4,), dtype, salt="b")
    want = F.conv2d(x.float(), w.float(), b.float(), stride=(1, 2), padding=1, groups=2).to(dtype)
    got = F.conv2d(to_trn(x, layout), to_trn(w, layout), b.to("trn"), stride=(1, 2), padding=1,
                   groups=2)
    check(got, want, conv=True)
    if layout == "channels_last":  # torch keeps channels_last through a conv
        assert got.is_contiguous(memory_format=torch.channels_last)


def test_conv2d_transposed_weight_view():
    x = make((2, 5, 6, 6))
    base = make((3, 3, 5, 4), salt="w")  # weight stored [KH, KW, C, Cout]
    w = base.permute(3, 2, 0, 1)
    want = F.conv2d(x, w, padding=1)
    got = F.conv2d(x.to("trn"), base.to("trn").permute(3, 2, 0, 1), padding=1)
    check(got, want, conv=True)


CONV1D = [
    ((2, 3, 17), (4, 3), {}),
    ((2, 4, 20), (6, 5), dict(stride=2, padding=2, dilation=2)),
    ((1, 6, 11), (6, 3), dict(groups=3, padding=1)),
    ((2, 4, 9), (4, 4), dict(padding="same")),
]


@pytest.mark.parametrize("case", range(len(CONV1D)))
@pytest.mark.parametrize("dtype", [F32, BF16])
def test_conv1d(case, dtype):
    shape, (cout, k), kwargs = CONV1D[case]
    groups = kwargs.get("groups", 1)
    x = make(shape, dtype)
    w = make((cout, shape[1] // groups, k), dtype, salt="w")
    b = make((cout,), dtype, salt="b")
    want = F.conv1d(x.float(), w.float(), b.float(), **kwargs).to(dtype)
    check(F.conv1d(to_trn(x, "strided"), w.to("trn"), b.to("trn"), **kwargs), want, conv=True)


def test_conv_modules_and_unbatched_input():
    torch.manual_seed(0)
    for m, shape in [(nn.Conv2d(3, 4, 3, padding=1), (2, 3, 8, 8)),
                     (nn.Conv1d(3, 4, 3), (2, 3, 10)),
                     (nn.Conv2d(3, 4, 3, padding=1, bias=False), (3, 8, 8))]:
        x = make(shape)
        want = m(x)
        with torch.no_grad():
            got = m.to("trn")(x.to("trn"))
        check(got, want.detach(), conv=True)


def test_conv_profiler_kernel_launch():
    x, w = make((1, 3, 8, 8)).to("trn"), make((4, 3, 3, 3), salt="w").to("trn")
    counts = launch_counts(lambda: F.conv2d(x, w, padding=1))
    assert counts.get("conv2d_f32") == 1, counts


def test_conv_bad_input():
    x = torch.randn(1, 4, 8, 8).to("trn")
    with pytest.raises(RuntimeError, match="expected input.* to have 3 channels"):
        F.conv2d(x, torch.randn(5, 3, 3, 3).to("trn"))
    with pytest.raises(RuntimeError, match="groups"):
        F.conv2d(x, torch.randn(6, 2, 3, 3).to("trn"), groups=3)
    with pytest.raises(RuntimeError, match="[Kk]ernel size"):
        F.conv2d(torch.randn(1, 3, 2, 2).to("trn"), torch.randn(4, 3, 3, 3).to("trn"))


# ---- transposed convolutions --------------------------------------------------------------
TRANSPOSED = [
    # cin, cout, k, stride, padding, dilation, output_padding, groups
    (4, 6, 3, 1, 0, 1, 0, 1),
    (4, 6, 3, 2, 1, 1, 1, 1),  # the usual 2x upsampler
    (6, 4, 4, 2, 1, 1, 0, 2),
    (4, 8, 3, 3, 2, 2, 2, 4),  # output_padding < stride, dilation, groups
    (8, 8, 3, 1, 1, 1, 0, 8),  # depthwise
]


@pytest.mark.parametrize("case", TRANSPOSED)
@pytest.mark.parametrize("dims", [1, 2])
@pytest.mark.parametrize("bias", [True, False])
def test_conv_transpose_matches_cpu(case, dims, bias):
    cin, cout, k, s, p, d, op, g = case
    x = make((2, cin) + ((9,) if dims == 1 else (7, 9)))
    w = make((cin, cout // g) + (k,) * dims, salt="w")
    b = make((cout,), salt="b") if bias else None
    f = F.conv_transpose1d if dims == 1 else F.conv_transpose2d
    kw = dict(stride=s, padding=p, output_padding=op, groups=g, dilation=d)
    want = f(x, w, b, **kw)
    got = f(x.to("trn"), w.to("trn"), None if b is None else b.to("trn"), **kw)
    check(got, want, conv=True)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_conv_transpose_dtypes_and_layouts(dtype):
    m = nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1).eval()
    x = make((2, 4, 6, 5))
    want = m.to(dtype)(x.to(dtype)).float()
    m.to("trn")
    xt = x.to(dtype).to("trn").to(memory_format=torch.channels_last)  # any strides
    got = m(xt)
    assert got.dtype == dtype
    torch.testing.assert_close(got.float().cpu(), want, rtol=3e-2, atol=3e-2)


def test_conv_transpose_profiles_one_kernel():
    x, w = make((1, 4, 5, 5)).to("trn"), make((4, 2, 3, 3), salt="w").to("trn")
    k = profiled_kernel(lambda: F.conv_transpose2d(x, w, stride=2), "conv_transpose2d_f32")
    assert k.count == 1 and k.device_time_total > 0


# ---- 3-D convolutions -----------------------------------------------------------------------
CONV3D = [
    # (N, C, T, H, W), (Cout, KT, KH, KW), kwargs
    ((2, 3, 4, 5, 5), (4, 3, 3, 3), dict(stride=2, padding=1)),
    ((2, 3, 8, 32, 32), (8, 2, 16, 16), dict(stride=(2, 16, 16))),  # VideoMAE patch embedding
    ((1, 4, 5, 9, 10), (6, 3, 3, 3), dict(stride=(1, 2, 1), padding=(1, 0, 2), dilation=(2, 1, 1),
                                         groups=2)),
    ((2, 4, 3, 6, 7), (4, 1, 3, 3), dict(padding=(0, 1, 1), groups=4)),  # depthwise, (1, 3, 3)
    ((1, 2, 4, 6, 6), (3, 3, 3, 3), dict(padding="same")),
    ((2, 8, 3, 4, 4), (5, 1, 1, 1), {}),  # pointwise
]


@pytest.mark.parametrize("case", range(len(CONV3D)))
@pytest.mark.parametrize("bias", [True, False])
def test_conv3d_geometry(case, bias):
    shape, (cout, kt, kh, kw), kwargs = CONV3D[case]
    groups = kwargs.get("groups", 1)
    x = make(shape)
    w = make((cout, shape[1] // groups, kt, kh, kw), salt="w")
    b = make((cout,), salt="b") if bias else None
    want = F.conv3d(x, w, b, **kwargs)
    got = F.conv3d(x.to("trn"), w.to("trn"), b.to("trn") if bias else None, **kwargs)
    check(got, want, conv=True)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("layout", ["contig", "channels_last_3d", "strided"])
def test_conv3d_dtypes_layouts_and_module(dtype, layout):
    m = nn.Conv3d(4, 6, (2, 3, 3), stride=(1, 2, 1), padding=(1, 1, 0), groups=2).eval()
    x = make((2, 4, 3, 7, 6))
    want = m.to(dtype)(x.to(dtype)).float()
    m.to("trn")
    if layout == "channels_last_3d":
        xt = x.to(dtype).to(memory_format=torch.channels_last_3d).to("trn")
    else:
        xt = to_trn(x.to(dtype), layout)
    got = m(xt)
    assert got.dtype == dtype and got.device.type == "trn"
    rtol, atol = tol(dtype, conv=True)
    torch.testing.assert_close(got.float().cpu(), want, rtol=rtol, atol=atol)
    if layout == "channels_last_3d":  # torch keeps channels_last_3d through a conv
        assert got.is_contiguous(memory_format=torch.channels_last_3d)


@pytest.mark.parametrize("case", range(len(CONV3D)))
@pytest.mark.parametrize("dtype", [F32, BF16])
def test_conv3d_compiled(case, dtype):
    """torch.compile runs a 3-D convolution as the core's conv kernel (VideoMAE's patch
    embedding), not as an eager step; the relu after it is a kernel of its own
    (kernels::Conv3d takes no epilogue); the input is a strided view."""
    shape, (cout, kt, kh, kw), kwargs = CONV3D[case]
    groups = kwargs.get("groups", 1)
    x = make(shape[:-1] + (shape[-1] + 3,), dtype)[..., 1:-2]  # W strided inside a wider row
    w = make((cout, shape[1] // groups, kt, kh, kw), dtype, salt="w")
    b = make((cout,), dtype, salt="b")
    want = F.relu(F.conv3d(x.float(), w.float(), b.float(), **kwargs))
    torch._dynamo.reset()
    fn = torch.compile(lambda x, w, b: F.relu(F.conv3d(x, w, b, **kwargs)), backend="trn")
    got = fn(x.to("trn"), w.to("trn"), b.to("trn"))
    stats = trnscope.compile_stats()[-1]
    assert stats["eager_nodes"] == [] and stats["kernels"][0] == "convolution", stats["kernels"]
    assert got.dtype == dtype
    rtol, atol = tol(dtype, conv=True)
    torch.testing.assert_close(got.float().cpu(), want, rtol=rtol, atol=atol)


def test_conv3d_compiled_after_an_asymmetric_pad():
    """A zero pad before a 3-D convolution stays a pad kernel (kernels::Conv3d pads each
    side alike, so it is not folded into the conv as 1-D and 2-D pads are)."""
    x, w = make((1, 2, 3, 5, 6)), make((3, 2, 2, 2, 2), salt="w")
    pad = (1, 0, 0, 2, 1, 1)  # W (1, 0), H (0, 2), T (1, 1)
    want = F.conv3d(F.pad(x, pad), w)
    torch._dynamo.reset()
    got = torch.compile(lambda x, w: F.conv3d(F.pad(x, pad), w), backend="trn")(
        x.to("trn"), w.to("trn"))
    assert trnscope.compile_stats()[-1]["eager_nodes"] == []
    check(got, want, conv=True)


def test_conv3d_profiles_one_kernel_and_checks_its_input():
    x, w = make((1, 2, 3, 4, 4)).to("trn"), make((3, 2, 2, 2, 2), salt="w").to("trn")
    k = profiled_kernel(lambda: F.conv3d(x, w), "conv3d_f32")
    assert k.count == 1 and k.device_time_total > 0
    with pytest.raises(RuntimeError, match="[Kk]ernel size"):
        F.conv3d(make((1, 2, 1, 4, 4)).to("trn"), w)
    with pytest.raises(RuntimeError, match="expected input.* to have 4 channels"):
        F.conv3d(x, make((3, 4, 2, 2, 2), salt="w").to("trn"))


# ---- the CPU fallback for ops without a CPU kernel ------------------------------------------
@pytest.mark.uses_fallback
def test_conv_transpose3d_uses_cpu_fallback():
    x = make((2, 3, 4, 5, 5))
    w = make((3, 4, 3, 3, 3), salt="w")
    b = make((4,), salt="b")
    want = F.conv_transpose3d(x, w, b, stride=2, padding=1)
    got = F.conv_transpose3d(x.to("trn"), w.to("trn"), b.to("trn"), stride=2, padding=1)
    check(got, want, conv=True)
    assert trnscope.fallback_ops().get("aten::convolution_overrideable") == 1


@pytest.mark.uses_fallback
def test_native_conv_disabled_fallback():
    r = run_python(
        """
        import warnings, torch, torch.nn.functional as F, trnscope
        x, w = torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = F.conv2d(x.to("trn"), w.to("trn"), padding=1).cpu()
        torch.testing.assert_close(got, F.conv2d(x, w, padding=1), rtol=1e-4, atol=1e-4)
        assert trnscope.fallback_ops() == {"aten::convolution_overrideable": 1}
        assert any("convolution_overrideable" in str(c.message) for c in caught)
        print("ok")
        """,
        env={"TRN_NATIVE_CONV": "0"},
    )
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr


# ---- batch norm ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("layout", ["contig", "channels_last", "strided"])
def test_batch_norm_eval(dtype, affine, layout):
    x = make((2, 5, 4, 6), dtype)
    mean, var = make((5,), salt="m"), make((5,), salt="v").abs() + 0.5
    w, b = (make((5,), salt="w"), make((5,), salt="b")) if affine else (None, None)
    want = F.batch_norm(x.float(), mean, var, w, b, training=False, eps=1e-3).to(dtype)
    dev = lambda t: None if t is None else t.to("trn")  # noqa: E731
    got = F.batch_norm(to_trn(x, layout), dev(mean), dev(var), dev(w), dev(b), training=False,
                       eps=1e-3)
    check(got, want)


@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 7), (2, 3, 2, 2, 2)])
def test_batch_norm_eval_ranks(shape):
    m = nn.BatchNorm1d(3) if len(shape) < 4 else nn.BatchNorm3d(3)
    m.running_mean.normal_()
    m.running_var.uniform_(0.5, 2)
    m.eval()
    x = make(shape)
    want = m(x).detach()
    with torch.no_grad():
        check(m.to("trn")(x.to("trn")), want)


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize(
    "fn",
    [
        lambda t, w, b: F.instance_norm(t),
        lambda t, w, b: F.instance_norm(t, weight=w, bias=b, eps=1e-3),
        lambda t, w, b: F.batch_norm(t, None, None, w, b, training=True),  # no running stats
        lambda t, w, b: F.batch_norm(t[:, :, 0], None, None, training=True),  # [N, C, L]
        lambda t, w, b: F.batch_norm(t[:, :, 0, 0], None, None, training=True),  # [N, C]
    ],
)
def test_batch_statistics_instance_norm(fn, dtype):
    """_native_batch_norm_legit.no_stats: per-channel mean and biased variance of the
    batch, one native launch (F.instance_norm views the input as one batch of N*C)."""
    x = (make((2, 3, 5, 7)) * 3 + 1).to(dtype)
    w, b = make((3,), salt="w").to(dtype), make((3,), salt="b").to(dtype)
    want = fn(x.float(), w.float(), b.float()).to(dtype)
    got = fn(to_trn(x, "channels_last") if x.dim() == 4 else x.to("trn"), w.to("trn"), b.to("trn"))
    check(got, want)


def test_batch_statistics_save_mean_and_invstd():
    x = make((4, 3, 6, 5))
    want = torch.ops.aten._native_batch_norm_legit.no_stats(x, None, None, True, 0.1, 1e-5)
    got = torch.ops.aten._native_batch_norm_legit.no_stats(x.to("trn"), None, None, True, 0.1, 1e-5)
    for g, w in zip(got, want):
        torch.testing.assert_close(g.cpu(), w, rtol=1e-5, atol=1e-5)


# ---- pooling ------------------------------------------------------------------------------
MAXPOOL = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2)),
    dict(kernel_size=3, stride=2, ceil_mode=True),
    dict(kernel_size=2, stride=2, padding=1, dilation=2, ceil_mode=True),
]


@pytest.mark.parametrize("case", range(len(MAXPOOL)))
@pytest.mark.parametrize("layout", ["contig", "channels_last", "strided"])
@pytest.mark.parametrize("shape", [(2, 3, 9, 10), (1, 2, 7, 45)])  # W of several vectors, odd
def test_max_pool2d(case, layout, shape):
    x = make(shape)
    want, want_idx = F.max_pool2d(x, return_indices=True, **MAXPOOL[case])
    got, got_idx = F.max_pool2d(to_trn(x, layout), return_indices=True, **MAXPOOL[case])
    check(got, want)
    assert torch.equal(got_idx.cpu(), want_idx)


@pytest.mark.parametrize(
    "kw",
    [
        dict(kernel_size=3, stride=2, padding=1),
        dict(kernel_size=(2, 4), stride=3, padding=(1, 2)),
        dict(kernel_size=3, stride=1, padding=1, dilation=2),
    ],
)
def test_max_pool2d_wide_rows_nan_and_all_neg_inf(kw):
    # Rows wider than a vector (the kernel works on whole vectors), NaNs and
    # windows of -inf only (torch's index: the window's first in-input cell).
    x = make((2, 3, 21, 70))
    x[0, 0, 3, 5] = float("nan")
    x[1, 2, 10, 40] = float("nan")
    x[0, 1, :6, :9] = float("-inf")
    want, want_idx = F.max_pool2d(x, return_indices=True, **kw)
    got, got_idx = F.max_pool2d(x.to("trn"), return_indices=True, **kw)
    torch.testing.assert_close(got.cpu(), want, equal_nan=True)
    assert torch.equal(got_idx.cpu(), want_idx)


def test_max_pool2d_infinite_and_nan_windows():
    # Windows of only -inf keep the first in-input cell as the index; NaN wins and a later
    # NaN replaces an earlier one (torch's CPU rule).
    x = torch.full((1, 2, 8, 40), float("-inf"))
    x[0, 0, 2, 5] = x[0, 0, 3, 6] = float("nan")
    x[0, 1, ::3, ::4] = make((1, 1, 3, 10)).flatten()[:30].reshape(3, 10)
    for kwargs in (dict(kernel_size=3, stride=2, padding=1), dict(kernel_size=2, ceil_mode=True,
                                                                   stride=3, padding=1)):
        want, want_idx = F.max_pool2d(x, return_indices=True, **kwargs)
        got, got_idx = F.max_pool2d(x.to("trn"), return_indices=True, **kwargs)
        torch.testing.assert_close(got.cpu(), want, equal_nan=True)
        assert torch.equal(got_idx.cpu(), want_idx)


@pytest.mark.parametrize("dtype", [BF16, F16])
def test_max_pool_dtypes_nan_unbatched_1d(dtype):
    x = make((3, 8, 8), dtype)
    x[0, 1, 1] = float("nan")
    check(F.max_pool2d(x.to("trn"), 3, 2, 1), F.max_pool2d(x, 3, 2, 1))
    x1 = make((2, 3, 15), dtype)
    check(F.max_pool1d(x1.to("trn"), 3, 2, 1), F.max_pool1d(x1, 3, 2, 1))


AVGPOOL = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    dict(kernel_size=(2, 3), stride=(1, 2), divisor_override=5),
]


@pytest.mark.parametrize("case", range(len(AVGPOOL)))
@pytest.mark.parametrize("dtype", FLOATS)
def test_avg_pool2d(case, dtype):
    x = make((2, 3, 9, 10), dtype)
    want = F.avg_pool2d(x.float(), **AVGPOOL[case]).to(dtype)
    check(F.avg_pool2d(to_trn(x, "channels_last"), **AVGPOOL[case]), want)


def test_avg_pool1d():
    x = make((2, 3, 15))
    check(F.avg_pool1d(to_trn(x, "strided"), 3, 2, 1, count_include_pad=False),
          F.avg_pool1d(x, 3, 2, 1, count_include_pad=False))


@pytest.mark.parametrize("out", [1, (1, 1), 3, (4, 5), (7, 2), (9, 10), (12, 13)])
@pytest.mark.parametrize("layout", ["contig", "channels_last"])
def test_adaptive_avg_pool2d(out, layout):
    x = make((2, 3, 9, 10))
    check(F.adaptive_avg_pool2d(to_trn(x, layout), out), F.adaptive_avg_pool2d(x, out))


@pytest.mark.parametrize("dtype", [BF16, F16])
def test_adaptive_avg_pool_dtypes_1d(dtype):
    x = make((3, 7, 11), dtype)
    check(F.adaptive_avg_pool2d(x.to("trn"), (3, 4)),
          F.adaptive_avg_pool2d(x.float(), (3, 4)).to(dtype))
    check(F.adaptive_avg_pool1d(x.to("trn"), 5), F.adaptive_avg_pool1d(x.float(), 5).to(dtype))


def test_pool_bad_input():
    x = torch.randn(1, 3, 4, 4).to("trn")
    with pytest.raises(RuntimeError, match="pad should be"):
        F.max_pool2d(x, 2, padding=2)
    with pytest.raises(RuntimeError, match="Output size is too small"):
        F.avg_pool2d(x, 5)


# ---- upsample -----------------------------------------------------------------------------
UPSAMPLE = [
    dict(scale_factor=2),
    dict(scale_factor=(1.5, 2.5)),
    dict(scale_factor=0.5),
    dict(size=(7, 5)),
    dict(size=(13, 3)),
    dict(scale_factor=1.7, recompute_scale_factor=True),
    dict(size=(12, 40)),  # rows of several vectors and a tail
]


@pytest.mark.parametrize("case", range(len(UPSAMPLE)))
@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "bilinear", "bilinear_ac", "bicubic",
                                  "bicubic_ac"])
def test_upsample2d(case, mode):
    kwargs = dict(UPSAMPLE[case])
    if not mode.startswith("nearest"):
        kwargs["align_corners"] = mode == "bilinear_ac"
    m = mode.removesuffix("_ac")
    x = make((2, 3, 6, 5))
    want = F.interpolate(x, mode=m, **kwargs)
    check(F.interpolate(to_trn(x, "strided"), mode=m, **kwargs), want)


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
@pytest.mark.parametrize("shape,scale", [((2, 3, 8), 1.1), ((2, 3, 4), 2.2), ((2, 3, 8, 4), (1.1, 2.2))])
def test_nearest_with_a_scale_that_sizes_do_not_show(mode, shape, scale):
    """Output sizes equal to the input's or twice it, from a scale that is not 1 or 2:
    CPU's 2-D nearest maps them by size, its 1-D nearest and nearest-exact by the scale."""
    x = make(shape)
    want = F.interpolate(x, scale_factor=scale, mode=mode)
    assert torch.equal(F.interpolate(x.to("trn"), scale_factor=scale, mode=mode).cpu(), want)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_grid_sample(mode, padding_mode, align_corners, layout):
    """F.grid_sample (deformable attention): bilinear and nearest are one kernel (they
    took the CPU fallback): coordinates past the border on every side, exact pixel
    centres and, for nearest, halfway points (rounded half to even as on CPU)."""
    x = make((2, 3, 7, 9))
    grid = make((2, 5, 6, 2), salt="grid") * 1.3
    grid[0, 0, :, 0] = torch.linspace(-1, 1, 6)  # pixel centres (align_corners) / edges
    grid[1, 0, :, 0] = (torch.arange(6) + 0.5) / 9 * 2 - 1  # halfway between columns
    want = F.grid_sample(x, grid, mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    xt, gt = to_trn(x, layout), to_trn(grid, layout)
    got = F.grid_sample(xt, gt, mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    check(got, want)


def test_grid_sample_dtypes_bicubic_and_errors():
    x, grid = make((1, 2, 5, 5)), make((1, 3, 4, 2), salt="grid")
    for dtype in (BF16, F16):
        want = F.grid_sample(x.to(dtype).float(), grid.to(dtype).float(), align_corners=False)
        check(F.grid_sample(x.to(dtype).to("trn"), grid.to(dtype).to("trn"), align_corners=False),
              want.to(dtype))
    with pytest.raises(RuntimeError, match="grid and input of one dtype"):
        torch.grid_sampler_2d(x.to("trn"), grid.double().to("trn"), 0, 0, False)
    with pytest.raises(RuntimeError, match=r"grid \[N, H_out, W_out, 2\]"):
        torch.grid_sampler_2d(x.to("trn"), make((2, 3, 4, 2)).to("trn"), 0, 0, False)


@pytest.mark.uses_fallback
def test_grid_sample_bicubic_uses_the_cpu_fallback():
    x, grid = make((1, 2, 5, 5)), make((1, 3, 4, 2), salt="grid")
    want = F.grid_sample(x, grid, mode="bicubic", align_corners=False)
    check(F.grid_sample(x.to("trn"), grid.to("trn"), mode="bicubic", align_corners=False), want)
    assert trnscope.fallback_ops().get("aten::grid_sampler_2d") == 1


@pytest.mark.parametrize("dtype", [BF16, F16])
@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "linear", "bilinear", "bicubic"])
def test_upsample_dtypes_1d(dtype, mode):
    x = make((2, 3, 6, 5) if mode in ("bilinear", "bicubic") else (2, 3, 7), dtype)
    kwargs = {} if mode.startswith("nearest") else dict(align_corners=False)
    want = F.interpolate(x.float(), scale_factor=3, mode=mode, **kwargs).to(dtype)
    check(F.interpolate(to_trn(x, "channels_last"), scale_factor=3, mode=mode, **kwargs), want)


def test_bicubic_position_embedding_interpolation():
    # ViT's interpolate_pos_encoding: a 4x4 grid of patch embeddings to 6x5, as
    # transformers does for an image larger than the config's.
    x = make((1, 32, 4, 4))
    want = F.interpolate(x, size=(6, 5), mode="bicubic", align_corners=False)
    check(F.interpolate(x.to("trn"), size=(6, 5), mode="bicubic", align_corners=False), want)


ANTIALIAS = [
    dict(size=(2, 3)),       # Siglip2's position-embedding resize: down on both dims
    dict(size=(3, 5)),       # one dim unchanged (that pass is skipped, as CPU's)
    dict(size=(13, 2)),      # up on H, down on W
    dict(size=(1, 1)),
    dict(scale_factor=0.45),  # the user's scale sets the filter's width
    dict(scale_factor=(2.0, 0.5)),
]


@pytest.mark.parametrize("case", range(len(ANTIALIAS)))
@pytest.mark.parametrize("mode", ["bilinear", "bilinear_ac", "bicubic", "bicubic_ac"])
@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_antialiased_interpolate(case, mode, layout):
    """F.interpolate(antialias=True), torch's (PIL's) separable filters: one kernel
    (Note [Antialiased resize]) where it took the CPU fallback."""
    kwargs = dict(ANTIALIAS[case], align_corners=mode.endswith("_ac"), antialias=True)
    m = mode.removesuffix("_ac")
    x = make((2, 3, 9, 5))
    want = F.interpolate(x, mode=m, **kwargs)
    check(F.interpolate(to_trn(x, layout), mode=m, **kwargs), want)


def _antialias_reference(x, oh, ow):
    """torch's (PIL's) antialiased bilinear resize in float64, scalar loops:
    W, then H (Note [Antialiased resize])."""
    def taps(n_in, n_out):
        scale = n_in / n_out
        support, inv = (scale, 1 / scale) if scale >= 1 else (1.0, 1.0)
        rows = []
        for o in range(n_out):
            c = scale * (o + 0.5)
            lo, hi = max(int(c - support + 0.5), 0), min(int(c + support + 0.5), n_in)
            w = [max(0.0, 1 - abs((j - c + 0.5) * inv)) for j in range(lo, hi)]
            rows.append((lo, [v / sum(w) for v in w]))
        return rows
    h, w = x.shape[-2:]
    out = torch.zeros(*x.shape[:-2], oh, ow, dtype=torch.float64)
    x = x.double()
    tmp = torch.stack([sum(v * x[..., lo + j] for j, v in enumerate(ws)) for lo, ws in taps(w, ow)], -1)
    for y, (lo, ws) in enumerate(taps(h, oh)):
        out[..., y, :] = sum(v * tmp[..., lo + j, :] for j, v in enumerate(ws))
    return out


def test_antialiased_interpolate_to_one_column():
    """An output one column wide: CPU PyTorch 2.13 gives every output row the
    first row's value there (its vertical pass); trn computes each row, checked
    against a float64 reference of the same filter."""
    x = make((2, 3, 9, 5))
    got = F.interpolate(x.to("trn"), size=(2, 1), mode="bilinear", antialias=True).cpu()
    torch.testing.assert_close(got.double(), _antialias_reference(x, 2, 1), rtol=1e-5, atol=1e-5)
    cpu = F.interpolate(x, size=(2, 1), mode="bilinear", antialias=True)
    assert torch.equal(cpu[..., 0, :], cpu[..., 1, :])  # the CPU defect this works around
    wide = F.interpolate(x.to("trn"), size=(2, 3), mode="bilinear", antialias=True).cpu()
    torch.testing.assert_close(wide.double(), _antialias_reference(x, 2, 3), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [BF16, F16])
def test_antialiased_interpolate_dtypes_and_out(dtype):
    x = make((1, 4, 16, 12), dtype)
    want = F.interpolate(x.float(), size=(5, 7), mode="bilinear", antialias=True).to(dtype)
    check(F.interpolate(to_trn(x, "channels_last"), size=(5, 7), mode="bilinear", antialias=True),
          want)
    out = torch.empty(1, 4, 5, 7, device="trn")
    torch._C._nn._upsample_bicubic2d_aa(x.float().to("trn"), (5, 7), False, out=out)
    check(out, torch._C._nn._upsample_bicubic2d_aa(x.float(), (5, 7), False))


UNFOLD = [
    dict(kernel_size=3),
    dict(kernel_size=(2, 3), dilation=(2, 1), padding=(1, 2), stride=(2, 3)),
    dict(kernel_size=4, stride=4),  # Llama 4's vision patches: nn.Unfold(k, stride=k)
    dict(kernel_size=1),
]


@pytest.mark.parametrize("case", range(len(UNFOLD)))
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("layout", ["contig", "channels_last", "strided"])
def test_unfold_matches_cpu_exactly(case, dtype, layout):
    x = make((2, 3, 9, 12), dtype)
    want = F.unfold(x, **UNFOLD[case])
    got = F.unfold(to_trn(x, layout), **UNFOLD[case])
    assert got.device.type == "trn" and got.dtype == dtype
    torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0)


def test_unfold_module_unbatched_and_errors():
    x = make((3, 8, 8))
    m = nn.Unfold(kernel_size=2, stride=2)
    torch.testing.assert_close(m(x.to("trn")).cpu(), m(x), rtol=0, atol=0)
    with pytest.raises(RuntimeError, match="must be at least one"):
        F.unfold(x.to("trn"), kernel_size=9)
    with pytest.raises(RuntimeError, match="stride should be greater than zero"):
        torch.ops.aten.im2col(x.to("trn"), [2, 2], [1, 1], [0, 0], [0, 1])


@pytest.mark.parametrize("case", range(len(UNFOLD)))
@pytest.mark.parametrize("dtype", FLOATS)
def test_fold_matches_cpu(case, dtype):
    """col2im (F.fold): the adjoint of unfold; overlapping windows sum (float32 per plane)."""
    cols = F.unfold(make((2, 3, 9, 12)), **UNFOLD[case])
    cols = make(tuple(cols.shape), dtype, salt="cols")
    want = F.fold(cols.float(), (9, 12), **UNFOLD[case]).to(dtype)
    got = F.fold(to_trn(cols, "strided"), (9, 12), **UNFOLD[case])
    check(got, want)
    check(F.fold(cols[0].to("trn"), (9, 12), **UNFOLD[case]),
          F.fold(cols[0].float(), (9, 12), **UNFOLD[case]).to(dtype))  # unbatched


def test_fold_errors_and_out():
    cols = make((1, 12, 25))
    with pytest.raises(RuntimeError, match="expected size of input's dimension 2 to match"):
        F.fold(cols.to("trn"), (8, 8), kernel_size=2, stride=2, padding=1, dilation=2)
    out = torch.empty(0).to("trn")
    torch.ops.aten.col2im.out(cols.to("trn"), [6, 6], [2, 2], [1, 1], [0, 0], [1, 1], out=out)
    check(out, torch.ops.aten.col2im(cols, [6, 6], [2, 2], [1, 1], [0, 0], [1, 1]))


# ---- a small CNN end to end ---------------------------------------------------------------
class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + x)


class TinyResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 5, stride=2, padding=2), nn.BatchNorm2d(8),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        self.block = Block(8)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        return self.fc(self.pool(self.block(self.stem(x))).flatten(1))


def _randomize_bn(model):
    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.weight.data.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.bias.data.copy_(torch.randn(m.num_features, generator=g) * 0.1)


@pytest.mark.parametrize("channels_last", [False, True])
def test_tiny_resnet_eval(channels_last):
    torch.manual_seed(0)
    model = TinyResNet().eval()
    _randomize_bn(model)
    x = make((2, 3, 32, 32))
    with torch.no_grad():
        want = model(x)
        mt = TinyResNet().eval()
        mt.load_state_dict(model.state_dict())
        mt = mt.to("trn")
        xt = x.to("trn")
        if channels_last:  # activations stay channels_last through conv, bn and pools
            xt = x.contiguous(memory_format=torch.channels_last).to("trn")
        got = mt(xt)
    check(got, want, conv=True)
    assert trnscope.fallback_ops() == {}


def test_tiny_resnet_compiled():
    torch.manual_seed(0)
    model = TinyResNet().eval()
    _randomize_bn(model)
    x = make((2, 3, 32, 32))
    with torch.no_grad():
        want = model(x)
        compiled = torch.compile(model.to("trn"), backend="trn")
        got = compiled(x.to("trn"))
    check(got, want, conv=True)
    assert trnscope.fallback_ops() == {}


def test_tiny_resnet_bf16():
    torch.manual_seed(0)
    model = TinyResNet().eval()
    _randomize_bn(model)
    model = model.to(BF16)
    reference = copy.deepcopy(model).float()  # the bf16 weights, computed in f32
    x = make((2, 3, 32, 32), BF16)
    with torch.no_grad():
        want = reference(x.float())
        got = model.to("trn")(x.to("trn"))
    # bf16 weights and activations rounded per layer on trn, f32 on CPU.
    torch.testing.assert_close(got.float().cpu(), want, rtol=5e-2, atol=5e-2)
    assert trnscope.fallback_ops() == {}


def test_clone_to_channels_last_and_a_channels_last_model():
    """model.to(memory_format=torch.channels_last) on trn: clone takes the layout."""
    torch.manual_seed(0)
    x = torch.randn(2, 3, 8, 8)
    y = x.to("trn").clone(memory_format=torch.channels_last)
    assert y.stride() == x.clone(memory_format=torch.channels_last).stride()
    torch.testing.assert_close(y.cpu(), x)
    with pytest.raises(RuntimeError):
        torch.randn(3, 4, device="trn").clone(memory_format=torch.channels_last)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU()).eval()
    want = m(x)
    m.to("trn").to(memory_format=torch.channels_last)
    with torch.no_grad():
        got = m(x.to("trn").contiguous(memory_format=torch.channels_last))
    torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-4)
    assert trnscope.fallback_ops() == {}


@pytest.mark.parametrize(
    "pad",
    [(0, 1, 0, 1), (2, 3), (-1, 2, 3, -2), (1, 1, 1, 1, 1, 1), (-3, -3), (0, 0, 5, 0), ()],
)
@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "strided"])
def test_constant_pad_nd(pad, layout):
    """F.pad (mode "constant") is one constant_pad kernel: positive pads, negative ones
    (a crop), several dims, any input layout; the output's layout follows CPU's."""
    x = make((2, 5, 9, 11))
    if layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    if layout == "strided":
        x = make((2, 5, 11, 9)).transpose(2, 3)
    want = F.pad(x, pad, value=-1.25)
    torch.ops.trnscope._count_launches(True)
    try:
        got = F.pad(x.to("trn"), pad, value=-1.25)
        torch.trn.synchronize()
        counts = torch.ops.trnscope._launch_counts()
    finally:
        torch.ops.trnscope._count_launches(False)
    # All pads <= 0 is a crop, which torch (and trn) return as a clone of the narrowed input.
    crop = all(p <= 0 for p in pad)
    assert counts.split(";") == ["copy_f32=1" if crop else "constant_pad_f32=1"], counts
    assert got.shape == want.shape and got.stride() == want.stride()
    assert torch.equal(got.cpu(), want)


@pytest.mark.parametrize("dtype", [BF16, torch.float64, torch.int64, torch.bool])
def test_constant_pad_nd_dtypes_and_errors(dtype):
    x = (make((3, 7)) * 10).to(dtype)
    assert torch.equal(F.pad(x.to("trn"), (1, 2, 0, 1), value=3).cpu(), F.pad(x, (1, 2, 0, 1), value=3))
    with pytest.raises(RuntimeError, match="must be even"):
        torch.constant_pad_nd(x.to("trn"), (1, 2, 3))
    for bad in [(-4, -4), (-4, -5, 1, 0)]:
        with pytest.raises(RuntimeError, match="negative output size"):
            torch.constant_pad_nd(x.to("trn"), bad)


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("shape,pad", [
    ((2, 3, 9), (2, 3)), ((3, 9), (4, 0)), ((2, 3, 9), (-2, 3)),       # 1-D, unbatched, a crop
    ((2, 3, 5, 6), (1, 2, 4, 1)), ((3, 5, 6), (0, 5, 0, 0)),            # 2-D
    ((1, 2, 3, 4, 5), (1, 1, 2, 1, 0, 2)),                              # 3-D
])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "strided"])
def test_reflection_and_replication_pads(mode, shape, pad, layout):
    """F.pad modes "reflect" and "replicate" are one kernel each (they took the CPU
    fallback); the output's layout follows CPU's."""
    x = make(shape)
    if layout == "channels_last" and x.dim() == 4:
        x = x.contiguous(memory_format=torch.channels_last)
    if layout == "strided":
        x = make(shape[:-2] + shape[-1:] + shape[-2:-1]).transpose(-1, -2)
    want = F.pad(x, pad, mode=mode)
    counts = launch_counts(lambda: F.pad(x.to("trn"), pad, mode=mode))
    assert counts == {f"{'reflection' if mode == 'reflect' else 'replication'}_pad_f32": 1}, counts
    got = F.pad(x.to("trn"), pad, mode=mode)
    assert got.shape == want.shape and got.stride() == want.stride()
    assert torch.equal(got.cpu(), want)


@pytest.mark.parametrize("dtype", [BF16, torch.int64])
def test_reflection_and_replication_pads_dtypes_out_and_errors(dtype):
    x = (make((2, 3, 7)) * 10).to(dtype)
    for op in (torch.ops.aten.reflection_pad1d, torch.ops.aten.replication_pad1d):
        assert torch.equal(op(x.to("trn"), [3, 2]).cpu(), op(x, [3, 2]))
        out = torch.empty(0, dtype=dtype, device="trn")
        op(x.to("trn"), [1, 6], out=out)
        assert torch.equal(out.cpu(), op(x, [1, 6]))
        with pytest.raises(RuntimeError, match=r"expected a 2-D or 3-D \(batch mode\) input"):
            op(x[0, 0].to("trn"), [1, 1])
        with pytest.raises(RuntimeError, match="too small"):
            op(x.to("trn"), [-4, -4])
    with pytest.raises(RuntimeError, match=r"padding \(7, 0\) at dimension 2 .* less than"):
        torch.ops.aten.reflection_pad1d(x.to("trn"), [7, 0])
    with pytest.raises(RuntimeError, match="padding of 4 values"):
        torch.ops.aten.reflection_pad2d(x.to("trn"), [1, 1])


@pytest.mark.parametrize("padding_mode", ["reflect", "replicate", "circular"])
def test_conv_padding_modes(padding_mode):
    torch.manual_seed(0)
    for m, x in ((torch.nn.Conv1d(3, 4, 5, padding=2, padding_mode=padding_mode), make((2, 3, 16))),
                 (torch.nn.Conv2d(3, 4, 3, padding=1, padding_mode=padding_mode), make((2, 3, 8, 9)))):
        want = m(x)
        with torch.no_grad():
            got = m.to("trn")(x.to("trn"))
        check(got, want.detach(), conv=True)


def test_clone_of_a_non_dense_view_keeps_its_stride_order():
    """clone() (preserve_format) of a slice of a channels_last or transposed tensor has
    CPU's strides (torch's empty_like: the view's stride order, densely)."""
    cl = make((2, 5, 9, 11)).contiguous(memory_format=torch.channels_last)
    tr = make((2, 5, 11, 9)).transpose(2, 3)
    for x in (cl, tr, make((4, 6, 10))):
        for view in (lambda t: t[..., 3:8], lambda t: t[:, ::2]):
            want = view(x).clone()
            got = view(x.to("trn")).clone()
            assert got.stride() == want.stride() and torch.equal(got.cpu(), want)


# ---- bfloat16 on AMX (Note [bf16 conv on AMX]) ---------------------------------------------------
BF16_CONVS = [
    # dims, (N, C, *spatial), (Cout, kernel), kwargs
    (1, (2, 1, 400), (16, 10), dict(stride=5)),  # wav2vec2's first layer: k = 10 < one tile
    (1, (2, 16, 199), (16, 3), dict(stride=2)),
    (1, (2, 32, 90), (32, 16), dict(padding=8, groups=4)),
    # Note [AMX implicit conv] (channels-last input, or NCHW from 2 taps): whole
    # 32-channel tiles per group
    (1, (2, 128, 90), (64, 16), dict(padding=8, groups=4)),  # wav2vec2's positional conv
    (1, (2, 64, 50), (40, 3), dict(padding=(2), dilation=2)),
    (1, (1, 64, 7), (70, 5), dict(padding=4)),  # partial row and column tiles
    (1, (2, 32, 99), (32, 3), dict(stride=2)),  # wav2vec2's feature convs
    (1, (1, 64, 60), (16, 4), dict(stride=3, padding=1, dilation=2, groups=2)),
    (2, (2, 8, 10, 9), (12, 3), dict(padding=1)),  # small images share one GEMM
    (2, (1, 8, 40, 36), (12, 3), dict(stride=(1, 2), padding=2, dilation=2)),  # bands
    (2, (2, 6, 12, 12), (9, 1), {}),  # 1x1
]


@pytest.mark.parametrize("amx", [True, False], ids=["amx", "float32-gemm"])
@pytest.mark.parametrize("layout", ["contig", "channels_last"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("case", range(len(BF16_CONVS)))
def test_bfloat16_convolutions_round_once(case, bias, layout, amx):
    """On AMX tiles where the CPU has them (else, and with _set_amx(False), the float32
    GEMM), a bfloat16 convolution sums exact products in float32 and rounds once: every
    output lies within half a bfloat16 ulp of the float64 result, plus the float32
    sum's error (far tighter than the 2e-2 of the other bfloat16 tests)."""
    ops = torch.ops.trnscope
    if ops._set_amx(amx) != amx:
        ops._set_amx(True)
        pytest.skip("this CPU has no AMX-BF16 (or the OS refused the tile state)")
    try:
        dims, xs, (cout, k), kw = BF16_CONVS[case]
        x = make(xs, BF16, "x")
        w = make((cout, xs[1] // kw.get("groups", 1)) + (k,) * dims, BF16, "w")
        b = make((cout,), BF16, "b") if bias else None
        f = F.conv1d if dims == 1 else F.conv2d
        xt = x.to("trn")
        if layout == "channels_last":  # 1-D: a transposed [N, L, C] sequence
            xt = (xt.transpose(1, 2).contiguous().transpose(1, 2) if dims == 1
                  else xt.contiguous(memory_format=torch.channels_last))
        got = f(xt, w.to("trn"), None if b is None else b.to("trn"), **kw).cpu()
        exact = f(x.double(), w.double(), None if b is None else b.double(), **kw)
        mag = f(x.double().abs(), w.double().abs(), None if b is None else b.double().abs(), **kw)
        assert got.dtype == BF16 and got.shape == exact.shape
        err = (got.double() - exact).abs()
        bound = exact.abs() * 2.0**-8 * 1.001 + mag * 2e-6
        assert (err <= bound).all(), (err - bound).max()
    finally:
        ops._set_amx(True)


@pytest.mark.parametrize("dims", [1, 2])
def test_bfloat16_conv_relu_compiled_rounds_once(dims):
    """The compiled conv + relu kernel in bfloat16: the activation on the float32 sum
    (the AMX paths' float32 tiles; 1-D: Note [AMX implicit conv]), rounded once."""
    shape, wshape = ((2, 64, 40), (32, 64, 5)) if dims == 1 else ((2, 8, 20, 20), (16, 8, 3, 3))
    x, w, b = make(shape, BF16, "x"), make(wshape, BF16, "w"), make((wshape[0],), BF16)
    f = F.conv1d if dims == 1 else F.conv2d
    fn = torch.compile(lambda x, w, b: torch.relu(f(x, w, b, padding=2)), backend="trn")
    got = fn(x.to("trn"), w.to("trn"), b.to("trn")).cpu()
    assert trnscope.compile_stats()[-1]["kernels"] == ["fused[convolution,relu]"]
    exact = torch.relu(f(x.double(), w.double(), b.double(), padding=2))
    mag = f(x.double().abs(), w.double().abs(), b.double().abs(), padding=2)
    err = (got.double() - exact).abs()
    assert (err <= exact.abs() * 2.0**-8 * 1.001 + mag * 2e-6).all(), err.max()


@pytest.mark.parametrize("groups", [1, 2])
@pytest.mark.parametrize("amx", [True, False], ids=["amx", "float32-gemm"])
def test_bfloat16_compiled_conv_batch_norm_relu_rounds_once(groups, amx):
    """A ResNet block's conv-bn-relu compiled in bfloat16 is one kernel; on AMX the
    batch norm's factors scale the float32 tile per channel (Note [bf16 conv on AMX]),
    on the float32 GEMM they scale the weights: either way the result is the exact
    one rounded once, up to the float32 sum's error (scaled by the factor)."""
    ops = torch.ops.trnscope
    if ops._set_amx(amx) != amx:
        ops._set_amx(True)
        pytest.skip("this CPU has no AMX-BF16 (or the OS refused the tile state)")
    try:
        x, w = make((2, 64, 10, 10), BF16, "x"), make((48, 64 // groups, 3, 3), BF16, "w")
        mean, var = make((48,), F32, "m") * 0.3, make((48,), F32, "v").abs() + 0.5
        gamma, beta = make((48,), F32, "g"), make((48,), F32, "b")
        torch._dynamo.reset()

        def fn(x, w, mean, var, gamma, beta):
            y = F.conv2d(x, w, padding=1, groups=groups)
            y = F.batch_norm(y, mean, var, gamma, beta, training=False, eps=1e-3)
            return torch.relu(y)

        args = (x, w, mean.to(BF16), var.to(BF16), gamma.to(BF16), beta.to(BF16))
        got = torch.compile(fn, backend="trn")(*(a.to("trn") for a in args)).cpu()
        assert trnscope.compile_stats()[-1]["kernels"] == ["fused[convolution,batch_norm,relu]"]
        d = [a.double() for a in args]
        s = (d[4] / (d[3] + 1e-3).sqrt()).view(1, -1, 1, 1)
        conv = F.conv2d(d[0], d[1], padding=1, groups=groups)
        exact = torch.relu((conv - d[2].view(1, -1, 1, 1)) * s + d[5].view(1, -1, 1, 1))
        mag = F.conv2d(d[0].abs(), d[1].abs(), padding=1, groups=groups) * s.abs() + 1
        err = (got.double() - exact).abs()
        assert (err <= exact.abs() * 2.0**-8 * 1.001 + mag * 2e-6).all(), err.max()
    finally:
        ops._set_amx(True)


@pytest.mark.parametrize("pad", [(7, 0), (3, 5), (0, 2)], ids=str)
@pytest.mark.parametrize("amx", [True, False], ids=["amx", "float32-gemm"])
def test_bfloat16_compiled_asymmetric_padding_rounds_once(pad, amx):
    """A zero pad before a conv (a causal conv's F.pad(x, (k - 1, 0))) becomes the conv
    kernel's own asymmetric padding; 64 channels a group and 8 taps take the AMX
    implicit path (Note [AMX implicit conv]), whose left and right borders differ."""
    ops = torch.ops.trnscope
    if ops._set_amx(amx) != amx:
        ops._set_amx(True)
        pytest.skip("this CPU has no AMX-BF16 (or the OS refused the tile state)")
    try:
        x, w, b = make((2, 128, 37), BF16, "x"), make((64, 64, 8), BF16, "w"), make((64,), BF16)
        torch._dynamo.reset()  # the same lambda with the other AMX setting compiles again
        fn = torch.compile(lambda x, w, b: F.conv1d(F.pad(x, pad), w, b, groups=2), backend="trn")
        got = fn(x.to("trn"), w.to("trn"), b.to("trn")).cpu()
        assert trnscope.compile_stats()[-1]["kernels"] == ["convolution"]
        xp = F.pad(x.double(), pad)
        exact = F.conv1d(xp, w.double(), b.double(), groups=2)
        mag = F.conv1d(xp.abs(), w.double().abs(), b.double().abs(), groups=2)
        err = (got.double() - exact).abs()
        assert got.shape == exact.shape
        assert (err <= exact.abs() * 2.0**-8 * 1.001 + mag * 2e-6).all(), err.max()
    finally:
        ops._set_amx(True)


@pytest.mark.parametrize("amx", [True, False], ids=["amx", "float32-gemm"])
def test_bfloat16_conv1d_over_a_transposed_sequence_rounds_once(amx):
    """wav2vec2's positional conv reads the hidden states transposed ([N, L, C] viewed
    as [N, C, L]); its output lands in the model's layout either way."""
    ops = torch.ops.trnscope
    if ops._set_amx(amx) != amx:
        ops._set_amx(True)
        pytest.skip("this CPU has no AMX-BF16 (or the OS refused the tile state)")
    try:
        h = make((2, 57, 128), BF16, "h")
        w, b = make((128, 32, 16), BF16, "w"), make((128,), BF16, "b")
        kw = dict(padding=8, groups=4)
        got = F.conv1d(h.to("trn").transpose(1, 2), w.to("trn"), b.to("trn"), **kw).cpu()
        x = h.transpose(1, 2).double()
        exact = F.conv1d(x, w.double(), b.double(), **kw)
        mag = F.conv1d(x.abs(), w.double().abs(), b.double().abs(), **kw)
        err = (got.double() - exact).abs()
        assert (err <= exact.abs() * 2.0**-8 * 1.001 + mag * 2e-6).all(), err.max()
    finally:
        ops._set_amx(True)


# ---- 3-D pooling and upsampling (Note [Separable 3-D]: two 2-D passes) ----------------------
VOLUME_OPS = {
    "avg_pool3d": lambda t: F.avg_pool3d(t, 2),
    "avg_pool3d_pad_ceil": lambda t: F.avg_pool3d(t, 3, 2, 1, ceil_mode=True),
    "avg_pool3d_exclude_pad": lambda t: F.avg_pool3d(t, (3, 2, 3), (2, 1, 2), (1, 1, 1),
                                                     count_include_pad=False),
    "avg_pool3d_divisor": lambda t: F.avg_pool3d(t, (2, 3, 2), (1, 2, 2), (1, 1, 0),
                                                 divisor_override=5),
    "adaptive_avg_pool3d": lambda t: F.adaptive_avg_pool3d(t, (2, 3, 4)),
    "adaptive_avg_pool3d_1": lambda t: F.adaptive_avg_pool3d(t, 1),  # video classifier heads
    "adaptive_avg_pool3d_up": lambda t: F.adaptive_avg_pool3d(t, (7, 9, 8)),
    "nearest3d": lambda t: F.interpolate(t, scale_factor=(2, 1.5, 2), mode="nearest"),
    "nearest3d_size": lambda t: F.interpolate(t, size=(3, 11, 4), mode="nearest"),
    "trilinear": lambda t: F.interpolate(t, size=(9, 4, 11), mode="trilinear"),
    "trilinear_align": lambda t: F.interpolate(t, scale_factor=2, mode="trilinear",
                                               align_corners=True),
    "trilinear_scale": lambda t: F.interpolate(t, scale_factor=(1.7, 2.0, 0.6),
                                               mode="trilinear"),
    "local_response_norm": lambda t: F.local_response_norm(t[:, :, 0], 3),  # avg_pool3d inside
}


@pytest.mark.parametrize("layout", ["contig", "channels_last_3d", "strided"])
@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
@pytest.mark.parametrize("name", list(VOLUME_OPS))
def test_3d_pooling_and_upsampling(name, dtype, layout):
    x = make((2, 3, 5, 7, 6), dtype, name)
    if layout == "channels_last_3d":
        t = x.to(memory_format=torch.channels_last_3d).to("trn")
    else:
        t = to_trn(x, layout)
    try:
        want = VOLUME_OPS[name](x)
    except NotImplementedError:  # CPU's avg_pool3d has no bfloat16 kernel: its float32 result
        want = VOLUME_OPS[name](x.float()).to(dtype)
    check(VOLUME_OPS[name](t), want)


def test_3d_pooling_unbatched_and_modules():
    x = make((3, 4, 6, 6), F32)  # C, D, H, W
    check(F.avg_pool3d(x.to("trn"), 2), F.avg_pool3d(x, 2))
    check(F.adaptive_avg_pool3d(x.to("trn"), 2), F.adaptive_avg_pool3d(x, 2))
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv3d(3, 4, 3, padding=1), nn.AvgPool3d(2), nn.ReLU(),
                        nn.Upsample(scale_factor=2, mode="trilinear"),
                        nn.AdaptiveAvgPool3d(1)).eval()
    v = make((2, 3, 4, 8, 8), F32)
    with torch.no_grad():
        check(copy.deepcopy(net).to("trn")(v.to("trn")), net(v), conv=True)


# ---- adaptive max pooling and 3-D max pooling (with indices) ------------------------------
@pytest.mark.parametrize("out", [1, 3, (4, 5), (9, 10), (12, 7)])
@pytest.mark.parametrize("layout", ["contig", "channels_last", "strided"])
def test_adaptive_max_pool2d(out, layout):
    x = make((2, 3, 9, 10))
    x[0, 1, 2, 3] = x[1, 2, 4, 4] = float("nan")
    want, want_idx = F.adaptive_max_pool2d(x, out, return_indices=True)
    got, got_idx = F.adaptive_max_pool2d(to_trn(x, layout), out, return_indices=True)
    check(got, want)
    assert torch.equal(got_idx.cpu(), want_idx)


@pytest.mark.parametrize("dtype", [BF16, F16])
def test_adaptive_max_pool_dtypes_unbatched_1d(dtype):
    x = make((3, 7, 11), dtype)
    check(F.adaptive_max_pool2d(x.to("trn"), (3, 4)), F.adaptive_max_pool2d(x, (3, 4)))
    check(F.adaptive_max_pool1d(x.to("trn"), 5), F.adaptive_max_pool1d(x, 5))


MAXPOOL3D = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(3, 2, 3), stride=(2, 1, 2), padding=(1, 0, 1), dilation=(1, 2, 1)),
    dict(kernel_size=3, stride=2, ceil_mode=True),
]


@pytest.mark.parametrize("case", range(len(MAXPOOL3D)))
@pytest.mark.parametrize("layout", ["contig", "channels_last_3d"])
@pytest.mark.parametrize("dtype", [F32, BF16])
def test_max_pool3d(case, layout, dtype):
    x = make((2, 3, 6, 7, 8), dtype)
    x[0, 0, 1, 2, 3] = float("nan")
    x[1, 1, :3, :3, :3] = float("-inf")
    want, want_idx = F.max_pool3d(x, return_indices=True, **MAXPOOL3D[case])
    t = x.to("trn")
    if layout == "channels_last_3d":
        t = t.contiguous(memory_format=torch.channels_last_3d)
    got, got_idx = F.max_pool3d(t, return_indices=True, **MAXPOOL3D[case])
    check(got, want)
    assert torch.equal(got_idx.cpu(), want_idx)
    check(F.max_pool3d(x[0].to("trn"), **MAXPOOL3D[case]), F.max_pool3d(x[0], **MAXPOOL3D[case]))


def test_adaptive_and_3d_max_pool_bad_input():
    with pytest.raises(RuntimeError, match="Expected 3D or 4D tensor"):
        F.adaptive_max_pool2d(torch.randn(4, 4).to("trn"), 2)
    with pytest.raises(RuntimeError, match="pad should be"):
        F.max_pool3d(torch.randn(1, 1, 4, 4, 4).to("trn"), 2, padding=2)
