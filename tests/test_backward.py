"""Backward ops of the activations and softmax on trn (torch_bridge/ops_backward.cc)
against CPU PyTorch's autograd: every activation module's input gradient over
float32 / bfloat16 / float16, non-contiguous inputs, the in-place forms, and an
MLP training step, with no op through the CPU fallback.

Tolerances: float32 1e-5 (compositions of native ops, CPU fuses them), bfloat16
and float16 a few ulps (each intermediate is rounded to storage, CPU computes the
whole formula in float32).
"""

import pytest
import torch
import torch.nn as nn

pytestmark = pytest.mark.usefixtures("no_fallback")

TOL = {torch.float32: (1e-5, 1e-5), torch.bfloat16: (4e-2, 4e-2), torch.float16: (5e-3, 5e-3)}
MODULES = {
    "relu": lambda: nn.ReLU(),
    "relu6": lambda: nn.ReLU6(),
    "threshold": lambda: nn.Threshold(0.3, -2.0),
    "gelu": lambda: nn.GELU(),
    "gelu_tanh": lambda: nn.GELU("tanh"),
    "silu": lambda: nn.SiLU(),
    "tanh": lambda: nn.Tanh(),
    "sigmoid": lambda: nn.Sigmoid(),
    "leaky_relu": lambda: nn.LeakyReLU(0.2),
    "elu": lambda: nn.ELU(0.7),
    "selu": lambda: nn.SELU(),
    "celu": lambda: nn.CELU(1.3),
    "softplus": lambda: nn.Softplus(2.0, 3.0),
    "hardswish": lambda: nn.Hardswish(),
    "hardsigmoid": lambda: nn.Hardsigmoid(),
    "hardtanh": lambda: nn.Hardtanh(-0.5, 1.5),
    "softmax": lambda: nn.Softmax(-1),
    "softmax0": lambda: nn.Softmax(0),
    "log_softmax": lambda: nn.LogSoftmax(-1),
}


def _grads(module, x, dev, seed=0):
    xd = x.detach().clone().to(dev).requires_grad_()
    y = module.to(dev)(xd)
    g = torch.randn(y.shape, generator=torch.Generator().manual_seed(seed)).to(y.dtype)
    y.backward(g.to(dev))
    return y.detach().cpu(), xd.grad.cpu()


@pytest.mark.parametrize("dtype", list(TOL), ids=str)
@pytest.mark.parametrize("name", list(MODULES))
def test_activation_gradients_match_cpu(name, dtype):
    x = torch.randn(6, 37, generator=torch.Generator().manual_seed(1)) * 4
    x[0, :6] = torch.tensor([-3.0, 3.0, 0.0, -0.5, 1.5, 0.3])  # the formulas' boundaries
    x = x.to(dtype)
    y_cpu, g_cpu = _grads(MODULES[name](), x, "cpu")
    y_trn, g_trn = _grads(MODULES[name](), x, "trn")
    rtol, atol = TOL[dtype]
    torch.testing.assert_close(y_trn, y_cpu, rtol=rtol, atol=atol)
    torch.testing.assert_close(g_trn, g_cpu, rtol=rtol, atol=atol * max(1.0, g_cpu.abs().max().item()))


@pytest.mark.parametrize("name", ["relu", "gelu", "tanh", "sigmoid", "softmax", "log_softmax", "elu"])
def test_gradients_of_transposed_inputs(name):
    base = torch.randn(37, 6, generator=torch.Generator().manual_seed(2)) * 3
    xc = base.t().clone().requires_grad_()
    xt = base.to("trn").t().detach().requires_grad_()
    g = torch.randn(6, 37, generator=torch.Generator().manual_seed(3))
    MODULES[name]()(xc).backward(g)
    MODULES[name]().to("trn")(xt).backward(g.to("trn").t().contiguous().t())
    torch.testing.assert_close(xt.grad.cpu(), xc.grad, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["relu", "leaky_relu", "elu", "hardtanh", "sigmoid", "tanh"])
def test_in_place_forward_then_backward(name):
    make = {"relu": lambda: nn.ReLU(inplace=True), "leaky_relu": lambda: nn.LeakyReLU(0.1, inplace=True),
            "elu": lambda: nn.ELU(inplace=True), "hardtanh": lambda: nn.Hardtanh(inplace=True),
            "sigmoid": lambda: (lambda t: t.sigmoid_()), "tanh": lambda: (lambda t: t.tanh_())}[name]
    x = torch.randn(5, 9, generator=torch.Generator().manual_seed(4)) * 2
    grads = []
    for dev in ("cpu", "trn"):
        leaf = x.detach().clone().to(dev).requires_grad_()
        y = make()(leaf * 1.0)  # in place on a non-leaf
        y.backward(torch.ones_like(y))
        grads.append(leaf.grad.cpu())
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-5, atol=1e-5)


def test_mlp_training_steps_equal_cpu():
    torch.manual_seed(0)
    layers = [nn.Linear(12, 32), nn.GELU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 5)]
    cpu = nn.Sequential(*layers)
    trn = nn.Sequential(*[type(m)(m.in_features, m.out_features) if isinstance(m, nn.Linear) else m
                          for m in layers])
    trn.load_state_dict(cpu.state_dict())
    trn.to("trn")
    x = torch.randn(64, 12)
    labels = torch.randint(0, 5, (64,))
    for model, dev in ((cpu, "cpu"), (trn, "trn")):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        for _ in range(3):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x.to(dev)), labels.to(dev))
            loss.backward()
            opt.step()
    for p, q in zip(cpu.parameters(), trn.parameters()):
        torch.testing.assert_close(q.detach().cpu(), p.detach(), rtol=1e-4, atol=1e-5)
