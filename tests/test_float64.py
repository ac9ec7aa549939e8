"""float64 policy (Note [float64 policy]): float64 tensors keep their dtype on
trn, every compute kernel runs them in float32, the first time a UserWarning
says so and trnscope.float64_downcasts() counts per aten op. Data movement
(copies, casts, fill, cat, index_select, embedding, where/masked_fill) stays
exact and is not counted.

Results are compared with CPU float64 at float32 tolerances: 1e-5 rel /
1e-6 abs for arithmetic, 1e-4 for transcendental ops and normalizations,
matmul atol scaled by sqrt(K).
"""

import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F

import trnscope

F64 = torch.float64


def r64(*shape, positive=False, seed=0):
    g = torch.Generator().manual_seed(seed + 7 * len(shape))
    x = torch.randn(shape, generator=g, dtype=F64)
    return x.abs() + 0.5 if positive else x


ARITH, TRANS = (1e-5, 1e-6), (1e-4, 1e-4)

# name: (fn, inputs, counted aten op, tolerance)
OPS = {
    "add": (lambda a, b: a + b, lambda: (r64(3, 5), r64(5)), "aten::add", ARITH),
    "sub_scalar": (lambda a: a - 0.25, lambda: (r64(17),), "aten::sub", ARITH),
    "mul": (lambda a, b: a * b, lambda: (r64(3, 5), r64(3, 1)), "aten::mul", ARITH),
    "div": (lambda a, b: a / b, lambda: (r64(4, 4), r64(4, 4, positive=True)), "aten::div", ARITH),
    "pow": (lambda a: a.pow(2), lambda: (r64(9),), "aten::pow", TRANS),
    "maximum": (torch.maximum, lambda: (r64(6), r64(6, seed=1)), "aten::maximum", ARITH),
    "lt": (torch.lt, lambda: (r64(6), r64(6, seed=1)), "aten::lt", ARITH),
    "neg": (torch.neg, lambda: (r64(2, 3),), "aten::neg", ARITH),
    "exp": (torch.exp, lambda: (r64(2, 3),), "aten::exp", TRANS),
    "log": (torch.log, lambda: (r64(7, positive=True),), "aten::log", TRANS),
    "rsqrt": (torch.rsqrt, lambda: (r64(7, positive=True),), "aten::rsqrt", TRANS),
    "sigmoid": (torch.sigmoid, lambda: (r64(7),), "aten::sigmoid", TRANS),
    "tanh": (torch.tanh, lambda: (r64(7),), "aten::tanh", TRANS),
    "silu": (F.silu, lambda: (r64(7),), "aten::silu", TRANS),
    "gelu": (F.gelu, lambda: (r64(7),), "aten::gelu", TRANS),
    "sin": (torch.sin, lambda: (r64(7),), "aten::sin", TRANS),
    "sum": (lambda a: a.sum(-1), lambda: (r64(3, 33),), "aten::sum", TRANS),
    "mean": (lambda a: a.mean(), lambda: (r64(3, 33),), "aten::mean", TRANS),
    "amax": (lambda a: a.amax(0), lambda: (r64(3, 33),), "aten::amax", ARITH),
    "argmax": (lambda a: a.argmax(1), lambda: (r64(3, 33),), "aten::argmax", (0, 0)),
    "softmax": (lambda a: F.softmax(a, -1), lambda: (r64(4, 19),), "aten::_softmax", TRANS),
    "log_softmax": (lambda a: F.log_softmax(a, -1), lambda: (r64(4, 19),), "aten::_log_softmax", TRANS),
    "mm": (torch.mm, lambda: (r64(5, 40), r64(40, 6)), "aten::mm", (1e-4, 1e-5 * 40**0.5)),
    "bmm": (torch.bmm, lambda: (r64(2, 5, 40), r64(2, 40, 6)), "aten::bmm", (1e-4, 1e-5 * 40**0.5)),
    "linear": (F.linear, lambda: (r64(2, 5, 40), r64(6, 40), r64(6)), "aten::addmm", (1e-4, 1e-4)),
    "layer_norm": (lambda a, w, b: F.layer_norm(a, (33,), w, b), lambda: (r64(3, 33), r64(33), r64(33)), "aten::native_layer_norm", TRANS),
    "rms_norm": (lambda a, w: F.rms_norm(a, (33,), w, 1e-6), lambda: (r64(3, 33), r64(33)), "aten::rms_norm", TRANS),
}


@pytest.mark.parametrize("name", list(OPS))
def test_float64_op_matches_cpu_and_is_counted(name):
    fn, inputs, op, (rtol, atol) = OPS[name]
    args = inputs()
    want = fn(*args)
    trnscope.reset_counters()
    got = fn(*(a.to("trn") for a in args))
    torch.trn.synchronize()
    assert got.device.type == "trn"
    assert got.dtype == want.dtype  # float64 stays float64 (bool / int64 for lt / argmax)
    torch.testing.assert_close(got.cpu(), want, rtol=rtol, atol=atol)
    counts = trnscope.float64_downcasts()
    assert counts.get(op, 0) >= 1, counts
    assert trnscope.fallback_ops() == {}


def test_float64_rms_norm_rstd_stays_float64():
    x = r64(4, 33)
    _, rstd = torch.ops.aten._fused_rms_norm(x.to("trn"), [33], None, 1e-6)
    _, want = torch.ops.aten._fused_rms_norm(x, [33], None, 1e-6)
    assert rstd.dtype == F64
    torch.testing.assert_close(rstd.cpu(), want, rtol=1e-4, atol=1e-4)


def test_float64_counts_per_call_and_per_op():
    x = torch.ones(4, 4, dtype=F64, device="trn")
    trnscope.reset_counters()
    y = x * 2
    y = y * 3
    s = y.sum()
    torch.trn.synchronize()
    assert trnscope.float64_downcasts() == {"aten::mul": 2, "aten::sum": 1}
    assert s.dtype == F64 and s.item() == 96.0


def test_float64_data_movement_is_exact_and_not_counted():
    third = torch.full((3, 5), 1.0, dtype=F64) / 3  # not representable in float32
    two_thirds = third * 2
    t, t2 = third.to("trn"), two_thirds.to("trn")
    trnscope.reset_counters()
    idx = torch.tensor([2, 0], device="trn")
    mask = torch.tensor([True, False, True, False, True], device="trn")
    outs = {
        "to/cpu": t,
        "clone": t.t().clone(),
        "cat": torch.cat([t, t], 1),
        "index_select": t.index_select(0, idx),
        "embedding": F.embedding(idx, t),
        "where": torch.where(mask, t, t2),
        "masked_fill": t.masked_fill(mask, 1.0 / 3),
        "fill_": torch.empty(2, dtype=F64, device="trn").fill_(1.0 / 3),
        "cast": t.to(torch.float32).to(F64),
    }
    want = {
        "to/cpu": third,
        "clone": third.t().clone(),
        "cat": torch.cat([third, third], 1),
        "index_select": third.index_select(0, idx.cpu()),
        "embedding": F.embedding(idx.cpu(), third),
        "where": torch.where(mask.cpu(), third, two_thirds),
        "masked_fill": third.masked_fill(mask.cpu(), 1.0 / 3),
        "fill_": torch.full((2,), 1.0 / 3, dtype=F64),
        "cast": third.to(torch.float32).to(F64),
    }
    for k, v in outs.items():
        assert v.dtype == F64, k
        assert torch.equal(v.cpu(), want[k]), k
    assert trnscope.float64_downcasts() == {}


def test_float64_warning_once_per_process():
    """A fresh process: the first float64 compute warns once, later ones do not."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(trnscope.__file__)))
    script = textwrap.dedent(
        """
        import warnings, torch, trnscope
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            x = torch.ones(8, dtype=torch.float64, device="trn")
            y = torch.exp(x * 2).sum()
            z = torch.softmax(x, 0)
            torch.trn.synchronize()
        msgs = [str(w.message) for w in caught
                if issubclass(w.category, UserWarning) and "float64" in str(w.message)]
        print(len(msgs))
        print(msgs[0] if msgs else "")
        print(sorted(trnscope.float64_downcasts().items()))
        print(y.dtype, z.dtype)
        """
    )
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = [l for l in out.stdout.splitlines() if not l.startswith("USDT")]
    assert lines[0] == "1", out.stdout
    assert "float32" in lines[1] and "aten::mul" in lines[1], lines[1]
    assert lines[2] == str(
        [("aten::_softmax", 1), ("aten::exp", 1), ("aten::mul", 1), ("aten::sum", 1)]
    ), lines[2]
    assert lines[3] == "torch.float64 torch.float64"
