"""nll_loss / cross_entropy on trn against CPU PyTorch: every reduction, class
weights, ignore_index, 1-D input, non-contiguous input, every floating dtype
(uint8 targets take the CPU fallback); bad targets and shapes fail with torch's messages; a causal
LM's loss with labels runs without the CPU fallback.

Tolerances: the kernel sums in float64, CPU PyTorch in the element type, so
float32 agrees to 1e-6 relative; 16-bit results are rounded once (one ulp).
"""

import re

import pytest
import torch
import torch.nn.functional as F

import trnscope
from conftest import profiled_kernel

FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
TOL = {torch.float32: 1e-6, torch.float64: 1e-12, torch.bfloat16: 1e-2, torch.float16: 1e-3}


pytestmark = pytest.mark.usefixtures("no_fallback")


def _inputs(n=13, c=7, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, c, generator=g).log_softmax(-1).to(dtype)
    t = torch.randint(0, c, (n,), generator=g)
    t[::4] = -100  # ignored rows
    w = torch.rand(c, generator=g).to(dtype)
    return x, t, w


def _close(got, want, dtype):
    assert got.device.type == "trn" and got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got.cpu(), want, rtol=TOL[dtype], atol=TOL[dtype], equal_nan=True)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss_matches_cpu(dtype, reduction, weighted):
    x, t, w = _inputs(dtype=dtype)
    w = w if weighted else None
    want = F.nll_loss(x, t, weight=w, reduction=reduction)
    got = F.nll_loss(x.to("trn"), t.to("trn"), weight=None if w is None else w.to("trn"),
                     reduction=reduction)
    _close(got, want, dtype)


@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_total_weight_and_the_out_overload(reduction):
    x, t, w = _inputs()
    want, want_tw = torch.ops.aten.nll_loss_forward(x, t, w, reduction, -100)
    out = torch.empty(5, device="trn")  # resized like torch's out=
    tw = torch.empty(2, device="trn")
    got, got_tw = torch.ops.aten.nll_loss_forward.output(
        x.to("trn"), t.to("trn"), w.to("trn"), reduction, -100, output=out, total_weight=tw
    )
    assert got is out and got_tw is tw  # out= returns the tensors it was given, resized
    _close(got, want, torch.float32)
    _close(got_tw, want_tw, torch.float32)


def test_ignore_index_everywhere_gives_nan_mean_and_zero_sum():
    x, _, _ = _inputs()
    t = torch.full((x.shape[0],), 5)
    for reduction in ["mean", "sum", "none"]:
        want = F.nll_loss(x, t, ignore_index=5, reduction=reduction)
        got = F.nll_loss(x.to("trn"), t.to("trn"), ignore_index=5, reduction=reduction)
        _close(got, want, torch.float32)


@pytest.mark.uses_fallback
def test_uint8_targets_use_the_cpu_fallback():
    x, t, w = _inputs(n=6, c=9)
    tb = t.clamp(min=0).to(torch.uint8)
    before = trnscope.fallback_ops().get("aten::nll_loss_forward", 0)
    _close(F.nll_loss(x.to("trn"), tb.to("trn"), w.to("trn")), F.nll_loss(x, tb, w), torch.float32)
    assert trnscope.fallback_ops().get("aten::nll_loss_forward", 0) == before + 1


def test_one_dim_input_and_strided_input():
    x, t, w = _inputs(n=6, c=9)
    for reduction in ["none", "mean", "sum"]:  # [C] input, 0-dim target
        want = F.nll_loss(x[2], t[1], reduction=reduction)
        got = F.nll_loss(x[2].to("trn"), t[1].to("trn"), reduction=reduction)
        _close(got, want, torch.float32)
    xt = x.t().contiguous().to("trn").t()  # column-major [N, C]
    assert not xt.is_contiguous()
    _close(F.nll_loss(xt, t.to("trn"), reduction="none"), F.nll_loss(x, t, reduction="none"),
           torch.float32)


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
def test_cross_entropy_matches_cpu(label_smoothing):
    g = torch.Generator().manual_seed(4)
    logits, t = torch.randn(3, 10, 11, generator=g), torch.randint(0, 11, (3, 10), generator=g)
    want = F.cross_entropy(logits.flatten(0, 1), t.flatten(), label_smoothing=label_smoothing)
    got = F.cross_entropy(logits.to("trn").flatten(0, 1), t.to("trn").flatten(),
                          label_smoothing=label_smoothing)
    _close(got, want, torch.float32)


def test_bad_targets_and_shapes():
    x, t, w = _inputs()
    xt = x.to("trn")
    bad = t.clone()
    bad[3] = 7  # == C
    with pytest.raises(RuntimeError, match="Target 7 is out of bounds"):
        F.nll_loss(xt, bad.to("trn")).cpu()
    bad[3] = -2
    with pytest.raises(RuntimeError, match="Target -2 is out of bounds"):
        F.nll_loss(xt, bad.to("trn")).cpu()
    with pytest.raises(RuntimeError, match="expected target dtype to be Long or Byte"):
        F.nll_loss(xt, t.to(torch.int32).to("trn"))
    with pytest.raises(RuntimeError, match="size mismatch"):
        torch.ops.aten.nll_loss_forward(xt, t[:5].to("trn"), None, 1, -100)
    with pytest.raises(RuntimeError, match="weight tensor should be defined"):
        F.nll_loss(xt, t.to("trn"), weight=w[:3].to("trn"))


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_nll_loss2d_forward_and_backward(reduction, weighted, dtype):
    """cross_entropy over [N, C, H, W] (segmentation) reaches nll_loss2d: nll_loss over the
    pixels, forward and backward, ignored pixels included; a channels_last input too."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2, 5, 4, 3, generator=g).to(dtype)
    t = torch.randint(0, 5, (2, 4, 3), generator=g)
    t[0, 1] = -100
    w = torch.rand(5, generator=g).to(dtype) if weighted else None
    for layout in (torch.contiguous_format, torch.channels_last):
        xc = x.clone().requires_grad_()
        xt = x.to("trn").contiguous(memory_format=layout).requires_grad_()
        want = F.cross_entropy(xc, t, weight=w, reduction=reduction)
        got = F.cross_entropy(xt, t.to("trn"), weight=None if w is None else w.to("trn"),
                              reduction=reduction)
        tol = 2e-2 if dtype == torch.bfloat16 else 1e-6
        torch.testing.assert_close(got.detach().cpu(), want.detach(), rtol=tol, atol=tol)
        up = torch.randn(want.shape, generator=g).to(dtype)
        want.backward(up)
        got.backward(up.to("trn"))
        torch.testing.assert_close(xt.grad.cpu(), xc.grad, rtol=tol, atol=tol)
    out, tw = torch.empty(0).to("trn"), torch.empty(0).to("trn")
    torch.ops.aten.nll_loss2d_forward.output(x.float().to("trn"), t.to("trn"), None, 2, -100,
                                             output=out, total_weight=tw)
    want_out, want_tw = torch.ops.aten.nll_loss2d_forward(x.float(), t, None, 2, -100)
    torch.testing.assert_close(out.cpu(), want_out, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(tw.cpu(), want_tw)


def test_nll_loss2d_bad_shapes():
    x = torch.randn(2, 5, 4, 3).to("trn")
    with pytest.raises(RuntimeError, match="only batches of spatial targets supported"):
        torch.ops.aten.nll_loss2d_forward(x, torch.zeros(2, 12, dtype=torch.long).to("trn"),
                                          None, 1, -100)
    with pytest.raises(RuntimeError, match="size mismatch"):
        torch.ops.aten.nll_loss2d_forward(x, torch.zeros(2, 4, 4, dtype=torch.long).to("trn"),
                                          None, 1, -100)


def test_profiled_as_one_kernel():
    x, t, _ = _inputs()
    xt, tt = x.to("trn"), t.to("trn")
    assert profiled_kernel(lambda: F.nll_loss(xt, tt), "nll_loss_f32").count == 1


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_causal_lm_loss_with_labels(name):
    pytest.importorskip("transformers")
    from trnscope.studies import zoo

    spec = zoo.get(name)
    model, inputs = spec.build("tiny")
    ids = inputs["input_ids"]
    with torch.no_grad():
        want = model(**inputs, labels=ids).loss
        model.to("trn")
        got = model(**zoo.to_device(inputs, "trn"), labels=ids.to("trn")).loss
    assert got.device.type == "trn"
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)


# ---- Regression and binary losses (torch_bridge/ops_loss.cc) ------------------------
# Compositions of native ops; float32 agrees to 1e-5 (CPU reduces in another order).
LOSS_TOL = {torch.float32: 1e-5, torch.float64: 1e-5, torch.bfloat16: 2e-2, torch.float16: 2e-3}
REGRESSION = {
    "mse": lambda x, y, r: F.mse_loss(x, y, reduction=r),
    "smooth_l1": lambda x, y, r: F.smooth_l1_loss(x, y, reduction=r),
    "smooth_l1_beta0": lambda x, y, r: F.smooth_l1_loss(x, y, reduction=r, beta=0.0),
    "smooth_l1_beta": lambda x, y, r: F.smooth_l1_loss(x, y, reduction=r, beta=0.3),
    "huber": lambda x, y, r: F.huber_loss(x, y, reduction=r),
    "huber_delta": lambda x, y, r: F.huber_loss(x, y, reduction=r, delta=2.5),
    "l1": lambda x, y, r: F.l1_loss(x, y, reduction=r),
}


def _loss_close(got, want, dtype):
    assert got.device.type == "trn" and got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got.cpu(), want, rtol=LOSS_TOL[dtype], atol=LOSS_TOL[dtype],
                               equal_nan=True)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("name", list(REGRESSION))
def test_regression_losses_and_gradients_match_cpu(name, reduction, dtype):
    g = torch.Generator().manual_seed(1)
    x = (torch.randn(6, 9, generator=g) * 2).to(dtype)
    y = (torch.randn(6, 9, generator=g) * 2).to(dtype)
    fn = REGRESSION[name]
    xc = x.clone().requires_grad_()
    want = fn(xc, y, reduction)
    xt = x.to("trn").requires_grad_()
    got = fn(xt, y.to("trn"), reduction)
    _loss_close(got, want.detach(), dtype)
    grad = torch.randn(want.shape, generator=g).to(dtype)
    want.backward(grad)
    got.backward(grad.to("trn"))
    _loss_close(xt.grad, xc.grad, dtype)


@pytest.mark.parametrize("name", ["mse", "smooth_l1", "huber"])
def test_regression_losses_broadcast_strided_empty_and_out(name):
    fn = REGRESSION[name]
    x = torch.randn(5, 8)
    y = torch.randn(8)
    with pytest.warns(UserWarning):  # torch's broadcasting warning, on both devices
        want = fn(x, y, "mean")
    with pytest.warns(UserWarning):
        got = fn(x.to("trn"), y.to("trn"), "mean")
    _loss_close(got, want, torch.float32)
    xs = torch.randn(8, 5)
    _loss_close(fn(xs.to("trn").t(), x.to("trn")[:, ::1], "none"), fn(xs.t(), x, "none"), torch.float32)
    empty = torch.randn(0, 3)
    _loss_close(fn(empty.to("trn"), empty.to("trn"), "mean"), fn(empty, empty, "mean"), torch.float32)
    op = {"mse": torch.ops.aten.mse_loss, "smooth_l1": torch.ops.aten.smooth_l1_loss,
          "huber": torch.ops.aten.huber_loss}[name]
    out = torch.empty(3, device="trn")
    op.out(x.to("trn"), x.to("trn") * 0.5, 2, out=out)
    _loss_close(out, op(x, x * 0.5, 2), torch.float32)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True])
def test_binary_cross_entropy_and_gradient_match_cpu(weighted, reduction, dtype):
    g = torch.Generator().manual_seed(2)
    x = torch.rand(7, 5, generator=g).to(dtype)
    x[0, :3] = torch.tensor([0.0, 1.0, 1e-30]).to(dtype)  # the -100 clamp of log 0
    y = torch.rand(7, 5, generator=g).to(dtype)
    y[1] = (y[1] > 0.5).to(dtype)
    w = torch.rand(5, generator=g).to(dtype) if weighted else None
    xc = x.clone().requires_grad_()
    want = F.binary_cross_entropy(xc, y, weight=w, reduction=reduction)
    xt = x.to("trn").requires_grad_()
    got = F.binary_cross_entropy(xt, y.to("trn"), weight=None if w is None else w.to("trn"),
                                 reduction=reduction)
    _loss_close(got, want.detach(), dtype)
    grad = torch.rand(want.shape, generator=g).to(dtype)
    want.backward(grad)
    got.backward(grad.to("trn"))
    tol = {torch.float32: 1e-4, torch.float64: 1e-4, torch.bfloat16: 5e-2, torch.float16: 5e-3}[dtype]
    # x = 0 and 1 divide by the 1e-12 floor: gradients of ~1e12 on both sides.
    torch.testing.assert_close(xt.grad.cpu(), xc.grad, rtol=tol, atol=tol)


def test_loss_errors_follow_cpu():
    x, y = torch.rand(4), torch.rand(4)
    cases = [
        lambda d: F.binary_cross_entropy(x.to(d) * 2, y.to(d)),
        lambda d: F.binary_cross_entropy(torch.tensor([0.5, float("nan")], device=d), y[:2].to(d)),
        lambda d: F.binary_cross_entropy(x.to(d), y.to(d) + 1),
        lambda d: F.binary_cross_entropy(x.to(d), y[:3].to(d)),
        lambda d: F.smooth_l1_loss(x.to(d), y.to(d), beta=-1.0),
        lambda d: F.huber_loss(x.to(d), y.to(d), delta=0.0),
        lambda d: F.mse_loss(torch.arange(4, device=d), torch.arange(4, device=d)),
        lambda d: F.huber_loss(torch.arange(4, device=d), torch.arange(4, device=d)),
        lambda d: F.binary_cross_entropy(x.to(d), y.to(d).double()),
        lambda d: F.binary_cross_entropy(x.to(d), y.to(d), weight=torch.rand(2, 4, device=d)),
    ]
    for case in cases:
        with pytest.raises(Exception) as cpu_error:
            case("cpu")
        with pytest.raises(cpu_error.type, match=re.escape(str(cpu_error.value).splitlines()[0][:40])):
            case("trn")


def test_regression_training_step_runs_without_fallback():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    x, y = torch.randn(32, 8), torch.randn(32, 1)
    trn_model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    trn_model.load_state_dict(model.state_dict())
    trn_model.to("trn")
    for m, d in ((model, "cpu"), (trn_model, "trn")):
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        for loss_fn in (torch.nn.MSELoss(), torch.nn.SmoothL1Loss(), torch.nn.HuberLoss()):
            opt.zero_grad()
            loss_fn(m(x.to(d)), y.to(d)).backward()
            opt.step()
    for p, q in zip(model.parameters(), trn_model.parameters()):
        torch.testing.assert_close(q.detach().cpu(), p.detach(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("one_dim", [False, True])
def test_nll_loss_gradient_matches_cpu(one_dim, weighted, reduction, dtype):
    x, t, w = _inputs(dtype=dtype, seed=3)
    if one_dim:
        x, t = x[1], t[1]
    grads = []
    for dev in ("cpu", "trn"):
        leaf = x.clone().to(dev).requires_grad_()
        loss = F.nll_loss(leaf, t.to(dev), weight=w.to(dev) if weighted else None, reduction=reduction)
        loss.backward(torch.full_like(loss, 0.5) if reduction == "none" else None)
        grads.append(leaf.grad.cpu())
    tol = 1e-6 if dtype == torch.float32 else 1e-2
    torch.testing.assert_close(grads[1], grads[0], rtol=tol, atol=tol)


def test_nll_loss_gradient_with_every_row_ignored_is_zero():
    x = torch.randn(3, 4).to("trn").requires_grad_()
    F.nll_loss(x, torch.full((3,), -100, device="trn")).backward()
    assert torch.equal(x.grad.cpu(), torch.zeros(3, 4))  # not NaN: the mean divides by 0
