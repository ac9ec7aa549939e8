"""CNN training on trn against CPU PyTorch's autograd: the convolution, pooling,
upsampling, batch norm and group norm backwards, batch norm's training mode (running
statistics), and a ResNet-style network's SGD steps, with no op through the
CPU fallback (except the tests of the fallback's remaining cases).

Gradients are compared relative to their largest magnitude: float32 1e-4 for
convolutions (GEMM sums in another order), 1e-5 for the rest; bfloat16 /
float16 3e-2 / 4e-3 (the same inputs on both sides, trn computes in float32
and rounds once, CPU's 16-bit kernels round in other places).
"""

import zlib

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import trnscope
from conftest import launch_counts
from test_conv import AVGPOOL, MAXPOOL  # the forward tests' window geometries

F32, BF16, F16 = torch.float32, torch.bfloat16, torch.float16
pytestmark = pytest.mark.usefixtures("no_fallback")


def make(shape, dtype=F32, salt=""):
    g = torch.Generator().manual_seed(zlib.crc32(repr((shape, str(dtype), salt)).encode()))
    return torch.randn(shape, generator=g).to(dtype)


def close(got, want, rel):
    """got (trn) equals want (CPU) within rel of want's largest magnitude."""
    assert got.device.type == "trn" and got.dtype == want.dtype and got.shape == want.shape, (
        got.device, got.dtype, want.dtype, got.shape, want.shape)
    scale = max(want.abs().max().item(), 1e-6) if want.numel() else 1.0
    torch.testing.assert_close(got.cpu().double(), want.double(), rtol=0, atol=rel * scale)


REL = {F32: 1e-5, BF16: 3e-2, F16: 4e-3}


def lay(x, layout):
    """A trn leaf with x's values: contiguous, channels_last (4-D) or strided."""
    if layout == "channels_last" and x.dim() == 4:
        t = x.to(memory_format=torch.channels_last).to("trn")
    elif layout == "strided":
        t = torch.stack([x, torch.zeros_like(x)], -1).flatten(-2).to("trn")[..., ::2]
    else:
        t = x.to("trn")
    return t.detach().requires_grad_()


def grads(fn, tensors, dev, layout="contig", seed=0):
    """fn(*leaves) and the leaves' gradients under a fixed random upstream gradient."""
    leaves = [None if t is None else (lay(t, layout) if dev == "trn" else
                                      t.detach().clone().requires_grad_()) for t in tensors]
    y = fn(*leaves)
    g = torch.randn(y.shape, generator=torch.Generator().manual_seed(seed)).to(y.dtype)
    y.backward(g.to(dev))
    return y.detach(), [None if t is None else t.grad for t in leaves]


def compare(fn, tensors, rel, layout="contig"):
    y_cpu, g_cpu = grads(fn, tensors, "cpu")
    y_trn, g_trn = grads(fn, tensors, "trn", layout)
    close(y_trn, y_cpu, rel)
    for got, want in zip(g_trn, g_cpu):
        if want is not None:
            close(got, want, rel)


# ---- convolution backward ------------------------------------------------------------------
CONV = [
    # (N, C, *spatial), (Cout, *kernel), kwargs; 1-D and 2-D, plain and transposed
    ((2, 3, 9, 9), (4, 3, 3), {}),
    ((2, 3, 9, 10), (4, 3, 3), dict(stride=2, padding=1)),  # the stride drops a row
    ((1, 4, 10, 7), (6, 3, 2), dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2))),
    ((2, 6, 8, 8), (4, 3, 3), dict(groups=2, padding=1)),
    ((2, 8, 7, 7), (8, 3, 3), dict(groups=8, padding=1)),  # depthwise
    ((2, 4, 7, 7), (8, 3, 3), dict(groups=4, stride=2)),  # depthwise, multiplier 2
    ((2, 16, 5, 5), (8, 1, 1), {}),  # pointwise
    ((2, 3, 21, 19), (8, 7, 7), dict(stride=2, padding=3)),  # a ResNet stem
    ((1, 3, 16, 16), (8, 4, 4), dict(stride=4)),  # a patch embedding
    ((2, 4, 15), (6, 3), dict(stride=2, padding=1)),  # 1-D
    ((2, 6, 12), (6, 5), dict(padding=4, dilation=2, groups=3)),
]


def conv_operands(case, transposed):
    shape, (cout, *kernel), kw = CONV[case]
    groups = kw.get("groups", 1)
    x = make(shape, salt="x")
    if transposed:  # weight [Cin, Cout/groups, *k]
        w = make((shape[1], cout // groups, *kernel), salt="w")
    else:
        w = make((cout, shape[1] // groups, *kernel), salt="w")
    b = make(((cout // groups) * groups if transposed else cout,), salt="b")
    return x, w, b, kw


def conv_fn(dims, transposed, kw):
    if transposed:
        f = F.conv_transpose1d if dims == 1 else F.conv_transpose2d
    else:
        f = F.conv1d if dims == 1 else F.conv2d
    return lambda x, w, b: f(x, w, b, **kw)


@pytest.mark.parametrize("case", range(len(CONV)))
@pytest.mark.parametrize("transposed", [False, True], ids=["conv", "transposed"])
@pytest.mark.parametrize("bias", [True, False])
def test_conv_backward_geometry(case, transposed, bias):
    x, w, b, kw = conv_operands(case, transposed)
    stride = kw.get("stride", 1)
    stride = stride if isinstance(stride, tuple) else (stride,) * (x.dim() - 2)
    if transposed and max(stride) > 1:  # rows only output_padding reaches
        kw = dict(kw, output_padding=tuple(int(s > 1) for s in stride))
    compare(conv_fn(x.dim() - 2, transposed, kw), [x, w, b if bias else None], 1e-4)


@pytest.mark.parametrize("dtype", [F32, BF16, F16])
@pytest.mark.parametrize("layout", ["contig", "channels_last", "strided"])
@pytest.mark.parametrize("transposed", [False, True], ids=["conv", "transposed"])
def test_conv_backward_dtypes_and_layouts(dtype, layout, transposed):
    x, w, b, kw = conv_operands(1, transposed)
    x, w, b = x.to(dtype), w.to(dtype), b.to(dtype)
    compare(conv_fn(2, transposed, kw), [x, w, b], max(REL[dtype], 1e-4), layout)


@pytest.mark.parametrize("needs", ["input", "weight", "bias"])
def test_conv_backward_computes_only_what_is_asked(needs):
    x, w, b, kw = conv_operands(3, False)
    xt, wt, bt = (t.to("trn").requires_grad_(needs == n) for t, n in
                  zip((x, w, b), ("input", "weight", "bias")))
    xc, wc, bc = (t.clone().requires_grad_(needs == n) for t, n in
                  zip((x, w, b), ("input", "weight", "bias")))
    F.conv2d(xt, wt, bt, **kw).square().sum().backward()
    F.conv2d(xc, wc, bc, **kw).square().sum().backward()
    for got, want in zip((xt, wt, bt), (xc, wc, bc)):
        assert (got.grad is None) == (want.grad is None)
        if want.grad is not None:
            close(got.grad, want.grad, 1e-4)


def test_conv_backward_launches():
    """grad_input one transposed-conv launch, grad_weight an im2col and one GEMM per group."""
    for case in (1, 3):  # stride 2; stride 1 with 2 groups
        x, w, b, kw = conv_operands(case, False)
        xt, wt = x.to("trn").requires_grad_(), w.to("trn").requires_grad_()
        y = F.conv2d(xt, wt, **kw)
        counts = launch_counts(lambda: y.backward(torch.ones_like(y)))
        assert counts.get("conv_transpose2d_f32") == 1, counts
        assert counts.get("im2col_f32") == 1 and counts.get("matmul_f32") == 1, counts


def test_conv_weight_gradient_keeps_non_finite_inputs_where_cpu_does():
    """A NaN or inf pixel reaches only the taps that read it, as on CPU."""
    for bad in (float("nan"), float("inf")):
        x = torch.ones(1, 1, 3, 3)
        x[0, 0, 2, 2] = bad
        x[0, 0, 0, 2] = -bad if bad != bad else 1.0
        grads = []
        for dev in ("cpu", "trn"):
            w = torch.ones(1, 1, 2, 2, device=dev, requires_grad=True)
            F.conv2d(x.to(dev), w).sum().backward()
            grads.append(w.grad.cpu())
        torch.testing.assert_close(grads[1], grads[0], equal_nan=True)
        assert torch.isfinite(grads[0]).any()  # the taps that never read the bad pixels


@pytest.mark.uses_fallback
def test_conv_backward_cpu_cases():
    """3-D convolutions, and transposed ones whose output_padding reaches the
    stride, still take the CPU fallback: correct, and counted."""
    x, w = make((2, 3, 4, 5, 5)), make((4, 3, 3, 3, 3), salt="w")
    before = trnscope.fallback_ops().get("aten::convolution_backward_overrideable", 0)
    compare(lambda a, b: F.conv3d(a, b, stride=2, padding=1), [x, w], 1e-4)
    x, w = make((2, 3, 6, 6)), make((3, 2, 3, 3), salt="w")
    compare(lambda a, b: F.conv_transpose2d(a, b, output_padding=1, dilation=2), [x, w], 1e-4)
    assert trnscope.fallback_ops()["aten::convolution_backward_overrideable"] == before + 2


# ---- batch norm: training mode and backward ---------------------------------------------
@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 7), (4, 3, 5, 5), (2, 3, 2, 3, 4)])
@pytest.mark.parametrize("momentum", [0.1, 0.7, None])
def test_batch_norm_training_updates_running_stats(shape, momentum):
    cls = {2: nn.BatchNorm1d, 3: nn.BatchNorm1d, 4: nn.BatchNorm2d, 5: nn.BatchNorm3d}
    m = cls[len(shape)](3, momentum=momentum)
    with torch.no_grad():
        m.running_mean.normal_()
        m.running_var.uniform_(0.5, 2)
        m.weight.normal_()
        m.bias.normal_()
    mt = cls[len(shape)](3, momentum=momentum)
    mt.load_state_dict(m.state_dict())
    mt = mt.to("trn")
    for step in range(3):
        x = make(shape, salt=step) * 2 + 0.5
        close(mt(x.to("trn")).detach(), m(x).detach(), 1e-5)
        close(mt.running_mean, m.running_mean, 1e-6)
        close(mt.running_var, m.running_var, 1e-6)
    assert mt.num_batches_tracked.item() == 3


@pytest.mark.parametrize("dtype", [F32, BF16, F16])
def test_batch_norm_training_save_stats_and_16_bit_running_stats(dtype):
    x = (make((4, 3, 5, 6)) * 3 + 1).to(dtype)
    rm, rv = make((3,), salt="m").to(dtype), make((3,), salt="v").abs().to(dtype) + 1
    w, b = make((3,), salt="w").to(dtype), make((3,), salt="b").to(dtype)
    rm_t, rv_t = rm.to("trn"), rv.to("trn")
    want = torch.ops.aten._native_batch_norm_legit(x, w, b, rm, rv, True, 0.3, 1e-5)
    got = torch.ops.aten._native_batch_norm_legit(x.to("trn"), w.to("trn"), b.to("trn"), rm_t,
                                                  rv_t, True, 0.3, 1e-5)
    for g, wnt in zip(got, want):
        close(g, wnt, REL[dtype])
    close(rm_t, rm, REL[dtype])
    close(rv_t, rv, REL[dtype])


@pytest.mark.parametrize("dtype", [F32, BF16, F16])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("layout", ["contig", "channels_last"])
def test_batch_norm_backward(dtype, affine, train, layout):
    x = (make((4, 5, 3, 6)) * 2 + 1).to(dtype)
    rm, rv = make((5,), salt="m"), make((5,), salt="v").abs() + 0.5
    w, b = (make((5,), salt="w").to(dtype), make((5,), salt="b").to(dtype)) if affine else (None, None)

    def fn(x, w, b):
        dev = x.device
        return F.batch_norm(x, rm.to(dtype).to(dev), rv.to(dtype).to(dev), w, b, training=train,
                            eps=1e-3)

    compare(fn, [x, w, b], REL[dtype], layout)


@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 7), (2, 3, 2, 3, 4)])
def test_batch_norm_backward_ranks_and_float32_params(shape):
    """BatchNorm1d / 3d, and a bfloat16 input with float32 parameters (mixed precision)."""
    compare(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
            [make(shape), make((3,), salt="w"), make((3,), salt="b")], 1e-5)
    compare(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
            [make(shape).to(BF16), make((3,), salt="w"), make((3,), salt="b")], 3e-2)


# ---- group norm backward ------------------------------------------------------------------
@pytest.mark.parametrize("shape,groups", [((4, 12), 3), ((2, 6, 7), 2), ((2, 8, 5, 5), 4),
                                          ((2, 8, 5, 5), 1), ((2, 4, 3, 3), 4),
                                          ((1, 4, 2, 3, 2), 2)])
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm_backward(shape, groups, affine):
    c = shape[1]
    w, b = (make((c,), salt="w"), make((c,), salt="b")) if affine else (None, None)
    compare(lambda x, w, b: F.group_norm(x, groups, w, b, eps=1e-4),
            [make(shape) * 2 + 0.3, w, b], 1e-5)


@pytest.mark.parametrize("dtype", [BF16, F16])
@pytest.mark.parametrize("layout", ["contig", "channels_last"])
def test_group_norm_backward_dtypes(dtype, layout):
    compare(lambda x, w, b: F.group_norm(x, 2, w, b),
            [make((2, 6, 4, 5)).to(dtype), make((6,), salt="w").to(dtype),
             make((6,), salt="b").to(dtype)], REL[dtype], layout)


# ---- pooling backward ----------------------------------------------------------------------
@pytest.mark.parametrize("case", range(len(MAXPOOL)))
@pytest.mark.parametrize("layout", ["contig", "channels_last", "strided"])
def test_max_pool2d_backward(case, layout):
    compare(lambda x: F.max_pool2d(x, **MAXPOOL[case]), [make((2, 3, 9, 10))], 1e-6, layout)


@pytest.mark.parametrize("case", range(len(AVGPOOL)))
@pytest.mark.parametrize("layout", ["contig", "channels_last", "strided"])
def test_avg_pool2d_backward(case, layout):
    compare(lambda x: F.avg_pool2d(x, **AVGPOOL[case]), [make((2, 3, 9, 10))], 1e-6, layout)


@pytest.mark.parametrize("out", [1, 3, (4, 5), (7, 2), (9, 10), (12, 13)])
@pytest.mark.parametrize("layout", ["contig", "channels_last"])
def test_adaptive_avg_pool2d_backward(out, layout):
    compare(lambda x: F.adaptive_avg_pool2d(x, out), [make((2, 3, 9, 10))], 1e-6, layout)


@pytest.mark.parametrize("dtype", [BF16, F16])
def test_pool_backward_dtypes_unbatched_and_1d(dtype):
    x3, x1 = make((3, 8, 9)).to(dtype), make((2, 3, 15)).to(dtype)
    for fn, x in [(lambda t: F.max_pool2d(t, 3, 2, 1), x3),
                  (lambda t: F.avg_pool2d(t, 3, 2, 1, ceil_mode=True), x3),
                  (lambda t: F.adaptive_avg_pool2d(t, (3, 4)), x3),
                  (lambda t: F.max_pool1d(t, 3, 2, 1), x1),
                  (lambda t: F.avg_pool1d(t, 4, 3, count_include_pad=False), x1),
                  (lambda t: F.adaptive_avg_pool1d(t, 4), x1)]:
        compare(fn, [x], REL[dtype])


def test_pool_backward_bad_input():
    x = make((1, 2, 6, 6)).to("trn")
    go = torch.ones(1, 2, 3, 3).to("trn")
    _, idx = F.max_pool2d(x, 2, return_indices=True)
    mp = torch.ops.aten.max_pool2d_with_indices_backward
    with pytest.raises(RuntimeError, match=r"expected grad_output of size \[1, 2, 3, 3\].*got"):
        mp(torch.ones(1, 2, 4, 3).to("trn"), x, [2, 2], [2, 2], [0, 0], [1, 1], False, idx)
    with pytest.raises(RuntimeError, match="expected grad_output of Float"):
        mp(go.double(), x, [2, 2], [2, 2], [0, 0], [1, 1], False, idx)
    with pytest.raises(RuntimeError, match="expected int64 indices"):
        mp(go, x, [2, 2], [2, 2], [0, 0], [1, 1], False, idx.int())
    with pytest.raises(RuntimeError, match="index 36 is outside the input plane of 36"):
        mp(go, x, [2, 2], [2, 2], [0, 0], [1, 1], False, torch.full_like(idx, 36)).cpu()
    with pytest.raises(RuntimeError, match="divisor must be not zero"):
        torch.ops.aten.avg_pool2d_backward(go, x, [2, 2], [2, 2], [0, 0], False, True, 0)
    out = torch.empty(0, dtype=torch.float64).to("trn")
    with pytest.raises(RuntimeError, match="expected grad_input of Float"):
        torch.ops.aten.avg_pool2d_backward.grad_input(go, x, [2, 2], [2, 2], [0, 0], False, True,
                                                     None, grad_input=out)
    gi = torch.empty(0).to("trn")  # the out= form, resized
    torch.ops.aten._adaptive_avg_pool2d_backward.out(go, x, out=gi)
    close(gi, torch.ops.aten._adaptive_avg_pool2d_backward(go.cpu(), x.cpu()), 1e-6)


# ---- upsample backward ---------------------------------------------------------------------
UPSAMPLE = [dict(scale_factor=2), dict(scale_factor=(1.5, 2.5)), dict(scale_factor=0.5),
            dict(size=(7, 5)), dict(size=(13, 3)), dict(size=(9, 10))]  # the last: same size


@pytest.mark.parametrize("case", range(len(UPSAMPLE)))
@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "bilinear", "bilinear_ac",
                                  "bicubic", "bicubic_ac"])
@pytest.mark.parametrize("layout", ["contig", "channels_last"])
def test_upsample2d_backward(case, mode, layout):
    kw = dict(UPSAMPLE[case], mode=mode.removesuffix("_ac"))
    if kw["mode"] in ("bilinear", "bicubic"):
        kw["align_corners"] = mode.endswith("_ac")
    compare(lambda x: F.interpolate(x, **kw), [make((2, 3, 9, 10))], 1e-5, layout)


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "linear", "linear_ac"])
@pytest.mark.parametrize("dtype", [F32, BF16, F16])
def test_upsample1d_backward_and_dtypes(mode, dtype):
    kw = dict(scale_factor=2.5, mode=mode.removesuffix("_ac"))
    if kw["mode"] == "linear":
        kw["align_corners"] = mode.endswith("_ac")
    compare(lambda x: F.interpolate(x, **kw), [make((2, 3, 11)).to(dtype)], REL[dtype])
    kw2 = dict(size=(5, 17), mode="bilinear" if kw["mode"] == "linear" else kw["mode"])
    compare(lambda x: F.interpolate(x, **kw2), [make((2, 3, 7, 6)).to(dtype)], REL[dtype])


def test_upsample_backward_bad_input():
    go = torch.ones(1, 2, 8, 8).to("trn")
    up = torch.ops.aten.upsample_nearest2d_backward
    with pytest.raises(RuntimeError, match=r"expected grad_output of size \[1, 2, 6, 8\]"):
        up(go, [6, 8], [1, 2, 3, 4], None, None)
    with pytest.raises(RuntimeError, match="expected input_size of 4 values"):
        up(go, [8, 8], [1, 2, 4], None, None)
    out = torch.empty(0, dtype=torch.float64).to("trn")
    with pytest.raises(RuntimeError, match="expected grad_input of Float"):
        torch.ops.aten.upsample_bilinear2d_backward.grad_input(go, [8, 8], [1, 2, 4, 4], False,
                                                              None, None, grad_input=out)
    gi = torch.empty(0).to("trn")  # the out= form, resized
    torch.ops.aten.upsample_bilinear2d_backward.grad_input(go, [8, 8], [1, 2, 4, 4], True, None,
                                                          None, grad_input=gi)
    want = torch.ops.aten.upsample_bilinear2d_backward(go.cpu(), [8, 8], [1, 2, 4, 4], True, None,
                                                       None)
    close(gi, want, 1e-6)


# ---- a ResNet-style network's training steps ---------------------------------------------
class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.skip = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                     if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x):
        return F.relu(self.b2(self.c2(F.relu(self.b1(self.c1(x))))) + self.skip(x))


class ResNetish(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 7, 2, 3, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        self.layers = nn.Sequential(Block(8, 8, 1), Block(8, 16, 2))
        self.dw = nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.gn = nn.GroupNorm(4, 16)
        self.head = nn.Linear(16, 5)

    def forward(self, x):
        x = self.gn(self.dw(self.layers(self.stem(x))))
        return self.head(F.adaptive_avg_pool2d(F.avg_pool2d(x, 2, ceil_mode=True), 1).flatten(1))


def test_resnet_training_steps_match_cpu():
    torch.manual_seed(0)
    cpu = ResNetish()
    trn = ResNetish()
    trn.load_state_dict(cpu.state_dict())
    trn = trn.to("trn")
    opt_c = torch.optim.SGD(cpu.parameters(), lr=0.05, momentum=0.9)
    opt_t = torch.optim.SGD(trn.parameters(), lr=0.05, momentum=0.9)
    for step in range(3):
        x, y = make((4, 3, 32, 32), salt=step), torch.tensor([0, 3, 1, 4])
        for model, opt, dev in ((cpu, opt_c, "cpu"), (trn, opt_t, "trn")):
            opt.zero_grad()
            loss = F.cross_entropy(model(x.to(dev)), y.to(dev))
            loss.backward()
            opt.step()
            if dev == "cpu":
                want = loss.item()
            else:
                assert abs(loss.item() - want) <= 1e-4 * abs(want), (step, loss.item(), want)
    for (name, p), q in zip(cpu.state_dict().items(), trn.state_dict().values()):
        if p.is_floating_point():
            close(q, p, 1e-4)
        else:
            assert torch.equal(q.cpu(), p), name


def _hf_vision_models():
    T = pytest.importorskip("transformers")
    images = lambda: {"pixel_values": make((2, 3, 32, 32), salt="px"),  # noqa: E731
                      "labels": torch.tensor([1, 0])}
    return {
        "resnet": (lambda: T.ResNetForImageClassification(T.ResNetConfig(
            embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], num_labels=3)), images),
        "convnext": (lambda: T.ConvNextForImageClassification(T.ConvNextConfig(
            num_stages=2, hidden_sizes=[8, 16], depths=[1, 1], num_labels=3)), images),
        # nll_loss2d and the bilinear upsampling backward
        "segformer": (lambda: T.SegformerForSemanticSegmentation(T.SegformerConfig(
            num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[8, 16],
            num_attention_heads=[1, 2], decoder_hidden_size=16, num_labels=3,
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
            classifier_dropout_prob=0.0, drop_path_rate=0.0)),
            lambda: {"pixel_values": make((2, 3, 32, 32), salt="px"),
                     "labels": torch.randint(0, 3, (2, 32, 32),
                                             generator=torch.Generator().manual_seed(2))}),
        # conv1d feature extractor, group norm, weight-normed positional convolution
        "wav2vec2": (lambda: T.Wav2Vec2ForSequenceClassification(T.Wav2Vec2Config(
            hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
            conv_dim=(8, 8), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
            num_conv_pos_embedding_groups=2, num_labels=3, hidden_dropout=0.0,
            activation_dropout=0.0, attention_dropout=0.0, feat_proj_dropout=0.0, layerdrop=0.0,
            mask_time_prob=0.0)),
            lambda: {"input_values": make((2, 400), salt="wav"), "labels": torch.tensor([1, 2])}),
    }


@pytest.mark.parametrize("name", ["resnet", "convnext", "segformer", "wav2vec2"])
def test_transformers_vision_and_audio_gradients_match_cpu(name):
    """A training step of transformers' CNN / vision / audio families: loss, every
    parameter's gradient and the batch norms' running statistics equal CPU's. Each
    gradient within 1e-4 of its largest element (floored at 1e-3 of the model's
    largest: a bias feeding a batch norm has a gradient of ~0, all rounding)."""
    build, inputs = _hf_vision_models()[name]
    torch.manual_seed(0)
    cpu = build().train()
    trn = build().train()
    trn.load_state_dict(cpu.state_dict())
    trn.to("trn")
    batch = inputs()
    results = []
    for model, dev in ((cpu, "cpu"), (trn, "trn")):
        loss = model(**{k: v.to(dev) for k, v in batch.items()}).loss
        loss.backward()
        results.append((loss.item(), {n: p.grad.cpu() for n, p in model.named_parameters()},
                        {n: b.cpu() for n, b in model.named_buffers()}))
    (cpu_loss, cpu_grads, cpu_bufs), (trn_loss, trn_grads, trn_bufs) = results
    assert trn_loss == pytest.approx(cpu_loss, rel=1e-5)
    top = max(g.abs().max().item() for g in cpu_grads.values())
    for n, want in cpu_grads.items():
        scale = max(want.abs().max().item(), 1e-3 * top)
        torch.testing.assert_close(trn_grads[n], want, rtol=0, atol=1e-4 * scale, msg=n)
    for n, want in cpu_bufs.items():
        torch.testing.assert_close(trn_bufs[n], want, rtol=1e-5, atol=1e-6, msg=n)


@pytest.mark.parametrize("out", [1, 3, (4, 5), (12, 7)])
@pytest.mark.parametrize("layout", ["contig", "channels_last"])
def test_adaptive_max_pool2d_backward(out, layout):
    compare(lambda x: F.adaptive_max_pool2d(x, out), [make((2, 3, 9, 10))], 1e-6, layout)


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=(3, 2, 3), stride=(2, 1, 2), dilation=(1, 2, 1))])
def test_max_pool3d_backward(kw):
    compare(lambda x: F.max_pool3d(x, **kw), [make((2, 3, 6, 7, 8))], 1e-6)
    compare(lambda x: F.max_pool3d(x, **kw), [make((3, 6, 7, 8)).to(BF16)], REL[BF16])


@pytest.mark.parametrize("kw", [dict(kernel_size=3), dict(kernel_size=4, stride=4),
                                dict(kernel_size=(2, 3), dilation=(2, 1), padding=(1, 2),
                                     stride=(2, 3))])
def test_unfold_and_fold_backward(kw):
    """unfold's backward is col2im, fold's is im2col: both native."""
    compare(lambda x: F.unfold(x, **kw), [make((2, 3, 9, 12))], 1e-6)
    cols = F.unfold(make((2, 3, 9, 12)), **kw)
    compare(lambda c: F.fold(c, (9, 12), **kw), [make(tuple(cols.shape), salt="c")], 1e-6)


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=(3, 2, 3), stride=(2, 1, 2), padding=(1, 0, 1),
                                     ceil_mode=True, count_include_pad=False),
                                dict(kernel_size=2, stride=1, divisor_override=3)])
def test_avg_pool3d_backward(kw):
    """The two separable passes' backwards in reverse (Note [Separable 3-D])."""
    compare(lambda x: F.avg_pool3d(x, **kw), [make((2, 3, 6, 7, 8))], 1e-6)
    compare(lambda x: F.avg_pool3d(x, **kw), [make((3, 6, 7, 8))], 1e-6)  # unbatched


@pytest.mark.parametrize("kw", [dict(scale_factor=2, mode="nearest"),
                                dict(size=(5, 9, 4), mode="nearest"),
                                dict(scale_factor=(1.5, 2, 0.5), mode="trilinear"),
                                dict(size=(5, 9, 4), mode="trilinear", align_corners=True)])
def test_upsample3d_backward(kw):
    compare(lambda x: F.interpolate(x, **kw), [make((2, 3, 4, 6, 5))], 1e-5)


@pytest.mark.uses_fallback
def test_integer_max_pools_use_the_cpu_fallback_not_an_error():
    """max_pool2d / max_pool3d of integers: CPU computes them, so trn hands them to
    the fallback rather than raising."""
    x = torch.randint(0, 9, (1, 2, 4, 4, 4))
    for fn in (lambda t: F.max_pool3d(t, 2), lambda t: F.max_pool2d(t[:, :, 0], 2)):
        assert torch.equal(fn(x.to("trn")).cpu(), fn(x))


def test_frozen_batch_norm_backward_and_nll_loss2d_gradient_layout():
    """Eval-mode batch norm with frozen parameters: grad_input only; nll_loss2d's
    gradient is contiguous (CPU's layout) for a channels_last input."""
    compare(lambda x: F.batch_norm(x, torch.zeros(3, device=x.device),
                                   torch.ones(3, device=x.device) * 2,
                                   torch.full((3,), 0.5, device=x.device), None, training=False),
            [make((2, 3, 4, 4))], 1e-6)
    logp = make((2, 5, 4, 3)).log_softmax(1)
    t = torch.randint(0, 5, (2, 4, 3))
    _, tw = torch.ops.aten.nll_loss2d_forward(logp, t, None, 1, -100)
    want = torch.ops.aten.nll_loss2d_backward(torch.tensor(1.0), logp, t, None, 1, -100, tw)
    x = logp.to("trn").contiguous(memory_format=torch.channels_last)
    got = torch.ops.aten.nll_loss2d_backward(torch.tensor(1.0).to("trn"), x, t.to("trn"), None, 1,
                                             -100, tw.to("trn"))
    assert got.is_contiguous()  # CPU's nll_loss2d backward writes only contiguous gradients
    torch.testing.assert_close(got.cpu(), want)


def test_upsample_backward_checks_output_size_rank():
    go = torch.ones(1, 2, 8).to("trn")
    with pytest.raises(RuntimeError, match="expected output_size equals to 2, but got size 1"):
        torch.ops.aten.upsample_nearest2d_backward(go, [8], [1, 2, 4], None, None)
