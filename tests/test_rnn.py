"""Recurrent layers on trn against CPU PyTorch (Note [RNN cells off the CPU] in
torch_bridge/ops_rnn.cc): nn.LSTM, nn.GRU, nn.RNN and their cells, forward and
backward, and the fused cell ops themselves against a float64 formula.

The no_fallback fixture asserts that nothing went through the CPU fallback.
Tolerances: float32 2e-5 (the gates' GEMMs sum in another order, and a
sequence carries the difference forward), bfloat16 3e-2 (torch's CPU LSTM rounds
every intermediate to bfloat16, the trn cell rounds once), gradients 1e-4.
"""

import copy

import pytest
import torch
import torch.nn as nn

from conftest import launch_counts, profiled_kernel

F32, BF16 = torch.float32, torch.bfloat16
TOL = {F32: 2e-5, BF16: 3e-2}


pytestmark = pytest.mark.usefixtures("no_fallback")


def close(got, want, tol):
    if isinstance(want, nn.utils.rnn.PackedSequence):  # a tuple too: first
        close(got.data, want.data, tol)
        assert torch.equal(got.batch_sizes, want.batch_sizes)
        return
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            close(g, w, tol)
        return
    assert got.device.type == "trn" and got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got.cpu().float(), want.float(), rtol=tol, atol=tol)


def to_trn(x):
    if isinstance(x, (tuple, list)):
        return type(x)(to_trn(t) for t in x)
    return x.to("trn")


LAYERS = {
    "lstm": lambda **kw: nn.LSTM(6, 10, **kw),
    "gru": lambda **kw: nn.GRU(6, 10, **kw),
    "rnn_tanh": lambda **kw: nn.RNN(6, 10, **kw),
    "rnn_relu": lambda **kw: nn.RNN(6, 10, nonlinearity="relu", **kw),
}
CONFIGS = [
    dict(),
    dict(num_layers=2, bidirectional=True),
    dict(num_layers=2, batch_first=True),
    dict(bias=False, bidirectional=True),
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "default")
@pytest.mark.parametrize("kind", list(LAYERS))
@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
def test_layer_matches_cpu(kind, config, dtype):
    torch.manual_seed(0)
    m = LAYERS[kind](**config).eval().to(dtype)
    x = torch.randn(4, 3, 6, dtype=dtype)  # (seq, batch) or (batch, seq)
    with torch.no_grad():
        want = m(x)
        got = copy.deepcopy(m).to("trn")(x.to("trn"))
    close(got, want, TOL[dtype])


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_layer_with_initial_state_unbatched_and_packed(kind):
    torch.manual_seed(1)
    m = LAYERS[kind](num_layers=2, bidirectional=True).eval()
    mt = copy.deepcopy(m).to("trn")
    h0 = torch.randn(4, 3, 10)
    state = (h0, torch.randn(4, 3, 10)) if kind == "lstm" else h0
    x = torch.randn(5, 3, 6)
    with torch.no_grad():
        close(mt(x.to("trn"), to_trn(state)), m(x, state), TOL[F32])
        # unbatched: (seq, features), states (layers * directions, hidden)
        close(mt(x[:, 0].to("trn")), m(x[:, 0]), TOL[F32])
        # variable lengths: the cell runs on the shrinking batch of each step
        packed = nn.utils.rnn.pack_padded_sequence(x, torch.tensor([5, 3, 2]))
        got_p, got_s = mt(nn.utils.rnn.PackedSequence(
            packed.data.to("trn"), packed.batch_sizes, packed.sorted_indices,
            packed.unsorted_indices))
        want_p, want_s = m(packed)
    close(got_p, want_p, TOL[F32])
    close(got_s, want_s, TOL[F32])


def test_lstm_with_projections():
    torch.manual_seed(2)
    m = nn.LSTM(6, 12, proj_size=5, num_layers=2, bidirectional=True).eval()
    x = torch.randn(4, 2, 6)
    with torch.no_grad():
        close(copy.deepcopy(m).to("trn")(x.to("trn")), m(x), TOL[F32])


@pytest.mark.parametrize("cell", [nn.LSTMCell, nn.GRUCell, nn.RNNCell])
@pytest.mark.parametrize("bias", [True, False])
def test_cells(cell, bias):
    torch.manual_seed(3)
    m = cell(7, 9, bias=bias)
    x = torch.randn(4, 7)
    h = torch.randn(4, 9)
    state = (h, torch.randn(4, 9)) if cell is nn.LSTMCell else h
    mt = copy.deepcopy(m).to("trn")
    with torch.no_grad():
        close(mt(x.to("trn"), to_trn(state)), m(x, state), TOL[F32])
        close(mt(x.to("trn")), m(x), TOL[F32])  # zero state
        close(mt(x[0].to("trn")), m(x[0]), TOL[F32])  # unbatched


def test_one_fused_cell_kernel_per_step():
    torch.manual_seed(4)
    x, h, c = torch.randn(2, 5).to("trn"), torch.randn(2, 8).to("trn"), torch.randn(2, 8).to("trn")
    lstm = nn.LSTMCell(5, 8).to("trn")
    gru = nn.GRUCell(5, 8).to("trn")
    with torch.no_grad():
        profiled_lstm = profiled_kernel(lambda: lstm(x, (h, c)), "lstm_cell_f32")
        profiled_gru = profiled_kernel(lambda: gru(x, h), "gru_cell_f32")
    assert profiled_lstm.count == 1 and profiled_gru.count == 1


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_sequence_takes_one_input_gemm_per_layer_and_direction(kind):
    """Note [Sequence-level RNN]: without autograd, each layer and direction runs
    one GEMM over all steps, then per step one GEMM and one cell; with autograd,
    ATen's composite runs two GEMMs per step."""
    layers, dirs, steps = 2, 2, 5
    m = LAYERS[kind](num_layers=layers, bidirectional=True).to("trn")
    x = torch.randn(steps, 3, 6).to("trn")
    with torch.no_grad():
        counts = launch_counts(lambda: m(x))
    cell = f"{kind}_cell_f32"
    assert counts[cell] == layers * dirs * steps, counts
    assert counts["matmul_f32"] == layers * dirs * (steps + 1), counts
    counts = launch_counts(lambda: m(x))  # parameters require grad: ATen's per-step path
    assert counts[cell] == layers * dirs * steps, counts
    assert counts["matmul_f32"] == layers * dirs * 2 * steps, counts


# ---- the fused ops themselves ---------------------------------------------------------------
def lstm_reference(ig, hg, cx, ib, hb):
    a = ig.double() + hg.double()
    if ib is not None:
        a = a + ib.double()
    if hb is not None:
        a = a + hb.double()
    i, f, g, o = a.chunk(4, 1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    cy = f * cx.double() + i * g
    return o * cy.tanh(), cy, torch.cat([i, f, g, o], 1)


def gru_reference(ig, hg, hx, ib, hb):
    ig, hg, hx = ig.double(), hg.double(), hx.double()
    if ib is not None:
        ig = ig + ib.double()
    if hb is not None:
        hg = hg + hb.double()
    ir, iz, in_ = ig.chunk(3, 1)
    hr, hz, hn = hg.chunk(3, 1)
    r, z = (ir + hr).sigmoid(), (iz + hz).sigmoid()
    n = (in_ + r * hn).tanh()
    return n + z * (hx - n), torch.cat([r, z, n, hx, hn], 1)


def strided(t, layout):
    """A trn copy of t: contiguous, transposed storage, or every second column."""
    if layout == "transposed":
        return t.t().contiguous().to("trn").t()
    if layout == "step2":
        return torch.stack([t, torch.zeros_like(t)], -1).flatten(-2).to("trn")[..., ::2]
    return t.to("trn")


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "step2"])
@pytest.mark.parametrize("biases", ["both", "input", "none"])
@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
def test_fused_cell_ops_against_a_float64_formula(layout, biases, dtype):
    g = torch.Generator().manual_seed(5)
    b, h = 3, 13
    def rand(*s):
        return (torch.randn(*s, generator=g) * 2).to(dtype)
    ib = rand(4 * h) if biases != "none" else None
    hb = rand(4 * h) if biases == "both" else None
    ig, hg, cx = rand(b, 4 * h), rand(b, 4 * h), rand(b, h)
    got = torch.ops.aten._thnn_fused_lstm_cell(
        strided(ig, layout), strided(hg, layout), strided(cx, layout),
        None if ib is None else ib.to("trn"), None if hb is None else hb.to("trn"))
    tol = 1e-5 if dtype == F32 else 1e-2
    for x, w in zip(got, lstm_reference(ig, hg, cx, ib, hb)):
        assert x.dtype == dtype
        torch.testing.assert_close(x.cpu().double(), w, rtol=tol, atol=tol)
    ib, hb = (None if t is None else t[: 3 * h] for t in (ib, hb))
    ig, hg = ig[:, : 3 * h].contiguous(), hg[:, : 3 * h].contiguous()
    got = torch.ops.aten._thnn_fused_gru_cell(
        strided(ig, layout), strided(hg, layout), strided(cx, layout),
        None if ib is None else ib.to("trn"), None if hb is None else hb.to("trn"))
    for x, w in zip(got, gru_reference(ig, hg, cx, ib, hb)):
        assert x.dtype == dtype
        torch.testing.assert_close(x.cpu().double(), w, rtol=tol, atol=tol)


def test_fused_cell_bad_input():
    t = lambda *s: torch.zeros(*s, device="trn")  # noqa: E731
    lstm = torch.ops.aten._thnn_fused_lstm_cell
    with pytest.raises(RuntimeError, match="multiple of 4"):
        lstm(t(2, 10), t(2, 10), t(2, 2))
    with pytest.raises(RuntimeError, match=r"previous state of \[2, 3\]"):
        lstm(t(2, 12), t(2, 12), t(2, 4))
    with pytest.raises(RuntimeError, match=r"hidden_gates of the size"):
        lstm(t(2, 12), t(3, 12), t(2, 3))
    with pytest.raises(RuntimeError, match=r"biases of \[12\]"):
        lstm(t(2, 12), t(2, 12), t(2, 3), t(11))
    with pytest.raises(RuntimeError, match="every operand in Float"):
        torch.ops.aten._thnn_fused_gru_cell(t(2, 9), t(2, 9), t(2, 3).bfloat16())
    with pytest.raises(RuntimeError, match="floating dtype"):
        lstm(t(2, 12).long(), t(2, 12).long(), t(2, 3).long())


# ---- backward ---------------------------------------------------------------------------------
def grads(m, x, state, loss_fn):
    x = x.clone().requires_grad_(True)
    out = m(x, state)
    loss_fn(out).backward()
    return [x.grad] + [p.grad for p in m.parameters()]


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_layer_backward_matches_cpu(kind):
    torch.manual_seed(6)
    m = LAYERS[kind](num_layers=2, bidirectional=True)
    mt = copy.deepcopy(m).to("trn")
    x = torch.randn(5, 3, 6)
    def loss(out):
        y, s = out
        s = s if isinstance(s, tuple) else (s,)
        return (y * y).sum() + sum((t * t).sum() for t in s)
    want = grads(m, x, None, loss)
    got = grads(mt, x.to("trn"), None, loss)
    for g, w in zip(got, want):
        torch.testing.assert_close(g.cpu(), w, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("used", ["hy", "cy", "both"])
def test_lstm_cell_backward_with_one_state_unused(used):
    torch.manual_seed(7)
    m = nn.LSTMCell(5, 8)
    mt = copy.deepcopy(m).to("trn")
    x, h, c = torch.randn(3, 5), torch.randn(3, 8), torch.randn(3, 8)
    def loss(out):
        hy, cy = out
        return {"hy": hy.sum(), "cy": (cy * cy).sum(), "both": hy.sum() + (cy * cy).sum()}[used]
    want = grads(m, x, (h, c), loss)
    got = grads(mt, x.to("trn"), (h.to("trn"), c.to("trn")), loss)
    for g, w in zip(got, want):
        torch.testing.assert_close(g.cpu(), w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_layer_under_autocast_without_grad(kind):
    """Under torch.autocast the sequence path gives way to ATen's composite, whose
    cells cast their gates (it aborted: bfloat16 GEMMs beside float32 states)."""
    torch.manual_seed(9)
    m = LAYERS[kind](num_layers=2, bidirectional=True).eval()
    x = torch.randn(4, 3, 6)
    with torch.no_grad():
        want = m(x)[0]
        with torch.autocast("trn", dtype=BF16):
            got = copy.deepcopy(m).to("trn")(x.to("trn"))[0]
    assert got.dtype == BF16
    torch.testing.assert_close(got.cpu().float(), want, rtol=0.03, atol=0.03)


@pytest.mark.uses_fallback  # forward AD's zero tangents: aten::_efficientzerotensor
def test_forward_ad_through_a_layer_is_not_dropped():
    """A tangent makes the sequence path give way to the composite: CPU's GRU gives
    a tangent, and so must trn, or raise as CUDA does (no forward formula for the
    fused cell) - never a silent None (review)."""
    import torch.autograd.forward_ad as fwAD

    m = nn.GRU(6, 10).to("trn")
    x, t = torch.randn(4, 3, 6).to("trn"), torch.randn(4, 3, 6).to("trn")
    with torch.no_grad(), fwAD.dual_level():
        try:
            tangent = fwAD.unpack_dual(m(fwAD.make_dual(x, t))[0]).tangent
        except NotImplementedError as e:
            assert "forward AD" in str(e)
            return
    assert tangent is not None


def test_compiled_model_with_recurrent_layers():
    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(30, 6)
            self.lstm = nn.LSTM(6, 10, batch_first=True, bidirectional=True)
            self.gru = nn.GRU(20, 8, batch_first=True)
            self.head = nn.Linear(8, 5)

        def forward(self, ids):
            y, _ = self.lstm(self.emb(ids))
            y, _ = self.gru(torch.relu(y))
            return self.head(y).log_softmax(-1)

    torch.manual_seed(8)
    m = Tagger().eval()
    ids = torch.randint(0, 30, (2, 7))
    with torch.no_grad():
        want = m(ids)
        got = torch.compile(copy.deepcopy(m).to("trn"), backend="trn")(ids.to("trn"))
    close(got, want, TOL[F32])
