"""Training-only ops on trn (torch_bridge/ops_training.cc) against CPU PyTorch's
autograd: every activation module's input gradient over float32 / bfloat16 /
float16, non-contiguous inputs, the in-place forms, layer_norm's and embedding's
backwards, dropout (its statistics, as the trn generator draws other masks than
CPU's), an MLP's training steps and transformers models' gradients, with no op
through the CPU fallback.

Tolerances: float32 1e-5 (compositions of native ops, CPU fuses them), bfloat16
and float16 a few ulps (each intermediate is rounded to storage, CPU computes the
whole formula in float32); model gradients 1e-4 relative to their largest.
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


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("shape,normalized", [((6, 10), (10,)), ((2, 3, 4, 5), (4, 5)), ((3, 7), (7,)), ((8,), (8,))],
                         ids=str)
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_gradients_match_cpu(shape, normalized, affine, dtype):
    g = torch.Generator().manual_seed(5)
    x = (torch.randn(shape, generator=g) * 3 + 1).to(dtype)
    w = (torch.rand(normalized, generator=g) + 0.5).to(dtype) if affine else None
    b = torch.randn(normalized, generator=g).to(dtype) if affine else None
    dy = torch.randn(shape, generator=g).to(dtype)
    grads = []
    for dev in ("cpu", "trn"):
        leaves = [t.detach().clone().to(dev).requires_grad_() for t in (x, w, b) if t is not None]
        xs = leaves[0]
        if dev == "trn" and x.dim() == 4:
            xs = leaves[0].transpose(0, 1).contiguous().transpose(0, 1)  # a strided input
        y = torch.nn.functional.layer_norm(xs, normalized, *(leaves[1:] if affine else ()))
        y.backward(dy.to(dev))
        grads.append([t.grad.cpu() for t in leaves])
    tol = 1e-4 if dtype == torch.float32 else 3e-2
    for got, want in zip(grads[1], grads[0]):
        torch.testing.assert_close(got, want, rtol=tol, atol=tol * max(1.0, want.abs().max().item()))


@pytest.mark.parametrize("padding_idx", [None, 2])
@pytest.mark.parametrize("scale", [False, True])
def test_embedding_gradient_matches_cpu(padding_idx, scale):
    idx = torch.tensor([[1, 2, 4, 1], [4, 4, 0, 2]])  # repeats and the padding row
    weights = []
    for dev in ("cpu", "trn"):
        emb = torch.nn.Embedding(6, 5, padding_idx=padding_idx, scale_grad_by_freq=scale)
        torch.nn.init.normal_(emb.weight, generator=torch.Generator().manual_seed(0))
        emb.to(dev)
        out = emb(idx.to(dev))
        out.backward(torch.arange(40.0).reshape(2, 4, 5).to(dev))
        weights.append(emb.weight.grad.cpu())
    torch.testing.assert_close(weights[1], weights[0], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 1.0])
def test_dropout_masks_scale_and_gradient(p):
    x = torch.randn(200, 500).to("trn").requires_grad_()
    torch.trn.manual_seed(3)
    y = torch.nn.functional.dropout(x, p, training=True)
    kept = y != 0
    scale = 0.0 if p == 1 else 1 / (1 - p)
    torch.testing.assert_close(y[kept].cpu(), (x[kept] * scale).detach().cpu())
    assert abs(kept.float().mean().item() - (1 - p)) < 0.01  # 1e5 draws: 5 sigma is < 0.01
    y.backward(torch.ones_like(y))
    torch.testing.assert_close(x.grad.cpu(), kept.float().cpu() * scale)
    torch.trn.manual_seed(3)
    again = torch.nn.functional.dropout(x.detach(), p, training=True)
    assert torch.equal(again.cpu(), y.detach().cpu())  # the trn generator's seed decides the mask
    assert torch.equal(torch.nn.functional.dropout(x, p, training=False).detach().cpu(), x.detach().cpu())
    with pytest.raises(ValueError, match="dropout probability"):
        torch.nn.functional.dropout(x, 1.5)


@pytest.mark.parametrize("dim", [0, -1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_weight_norm_gradients_match_cpu(dim, dtype):
    """_weight_norm_interface's backward (wav2vec2's positional convolution)."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(4, 6, 9, generator=g).to(dtype)
    results = []
    for dev in ("cpu", "trn"):
        torch.manual_seed(4)
        conv = torch.nn.Conv1d(6, 8, 3, padding=1).to(dtype)
        conv = torch.nn.utils.parametrizations.weight_norm(conv, dim=dim).to(dev)
        conv(x.to(dev)).square().sum().backward()
        results.append([p.grad.cpu() for p in conv.parameters()])
    tol = 3e-2 if dtype == torch.bfloat16 else 1e-5
    for got, want in zip(*reversed(results)):
        scale = want.abs().max().item()
        torch.testing.assert_close(got, want, rtol=tol, atol=tol * scale)


def _hf_models():
    T = pytest.importorskip("transformers")
    small = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)
    return {
        "gpt2": (T.GPT2Config(vocab_size=256, n_embd=64, n_layer=2, n_head=4, n_positions=64,
                              resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0), T.GPT2LMHeadModel),
        "llama": (T.LlamaConfig(vocab_size=256, num_key_value_heads=2, **small), T.LlamaForCausalLM),
        "bert": (T.BertConfig(vocab_size=256, hidden_dropout_prob=0.0,
                              attention_probs_dropout_prob=0.0, **small), T.BertForSequenceClassification),
    }


@pytest.mark.parametrize("name", ["gpt2", "llama", "bert"])
def test_transformers_gradients_match_cpu(name):
    """A training step's loss and gradients (dropout at p = 0: the models' dropout is an identity)."""
    config, cls = _hf_models()[name]
    torch.manual_seed(0)
    model = cls(config).train()
    ids = torch.randint(0, 256, (2, 16), generator=torch.Generator().manual_seed(1))
    labels = torch.tensor([0, 1]) if name == "bert" else ids
    results = []
    for dev in ("cpu", "trn"):
        model.zero_grad()
        model.to(dev)
        loss = model(input_ids=ids.to(dev), labels=labels.to(dev)).loss
        loss.backward()
        results.append((loss.item(), {n: p.grad.cpu() for n, p in model.named_parameters()}))
    (cpu_loss, cpu_grads), (trn_loss, trn_grads) = results
    assert trn_loss == pytest.approx(cpu_loss, rel=1e-5)
    for n, want in cpu_grads.items():
        scale = max(1e-6, want.abs().max().item())
        torch.testing.assert_close(trn_grads[n], want, rtol=1e-4, atol=1e-4 * scale, msg=n)


def test_module_to_trn_keeps_tied_weights():
    """Note [Shallow copies between CPU and trn]: .to("trn") moves a parameter in
    place, as to CUDA, so weights shared between modules stay one tensor."""
    T = pytest.importorskip("transformers")
    model = T.GPT2LMHeadModel(T.GPT2Config(vocab_size=256, n_embd=64, n_layer=1, n_head=4, n_positions=32))
    wte = model.transformer.wte.weight
    model.to("trn")
    assert model.lm_head.weight is wte and model.transformer.wte.weight is wte
    assert wte.device.type == "trn"
    shared = nn.Linear(4, 4)
    seq = nn.Sequential(shared, nn.ReLU(), shared)
    shared.weight.grad = torch.ones(4, 4)
    seq.to("trn")
    assert seq[0].weight is seq[2].weight and seq[0].weight.device.type == "trn"
    assert shared.weight.grad.device.type == "trn"
    seq.to("cpu")
    assert seq[0].weight is seq[2].weight and seq[0].weight.device.type == "cpu"


def test_half_precision_gradients_do_not_overflow_where_cpu_does_not():
    """CPU computes these backwards in float32 for float16: exp(12) and 300 ** 2
    overflow float16 storage, and inf / inf was NaN."""
    x = torch.tensor([12.0, 15.0, -300.0, 300.0, 0.5], dtype=torch.float16)
    for fn in (torch.nn.functional.softplus, lambda t: torch.nn.functional.gelu(t, approximate="tanh"),
               torch.nn.functional.gelu, torch.nn.functional.silu, torch.nn.functional.elu):
        grads = []
        for dev in ("cpu", "trn"):
            leaf = x.clone().to(dev).requires_grad_()
            fn(leaf).backward(torch.full_like(leaf, 3.0))
            grads.append(leaf.grad.cpu())
        assert torch.isfinite(grads[0]).all()
        torch.testing.assert_close(grads[1], grads[0], rtol=5e-3, atol=5e-3)
