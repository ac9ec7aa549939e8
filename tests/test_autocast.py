"""torch.autocast("trn", dtype=...) (Note [Autocast] in torch_bridge/autocast.cc):
CUDA's policies on the trn device. Each op's result dtype is the policy's, and
its values equal the same op on CPU over inputs cast as the policy casts them
(bfloat16 / float16 rounding: 1e-2 / 2e-3); ops without a policy pass through.
"""

import copy

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.usefixtures("no_fallback")

TOL = {torch.bfloat16: 1e-2, torch.float16: 2e-3}
LOW = [torch.bfloat16, torch.float16]


def make(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def check(got, want, tol):
    assert got.device.type == "trn" and got.dtype == want.dtype, (got.dtype, want.dtype)
    torch.testing.assert_close(got.cpu().float(), want.float(), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_lower_precision_ops(dtype):
    """GEMMs, convolutions and attention run in the autocast dtype."""
    x, w, b = make(4, 16), make(8, 16, seed=1), make(8, seed=2)
    img, k = make(2, 3, 8, 8, seed=3), make(4, 3, 3, 3, seed=4)
    q = make(2, 4, 6, 8, seed=5)
    cases = {
        "linear": (lambda x, w, b: F.linear(x, w, b), (x, w, b)),
        "mm": (lambda x, w: x @ w.t(), (x, w)),
        "bmm": (lambda a: torch.bmm(a, a.transpose(1, 2)), (q[0],)),
        "conv2d": (lambda i, k: F.conv2d(i, k, padding=1), (img, k)),
        "sdpa": (lambda q: F.scaled_dot_product_attention(q, q, q, is_causal=True), (q,)),
    }
    for name, (fn, args) in cases.items():
        with torch.autocast("trn", dtype=dtype):
            got = fn(*(a.to("trn") for a in args))
        want = fn(*(a.to(dtype) for a in args))  # CPU over the inputs autocast casts
        check(got, want, TOL[dtype])


@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_float32_and_promote_ops(dtype):
    """Softmax, norms, exp, reductions run in float32 on low-precision inputs;
    cat of mixed dtypes promotes to the widest; ops without a policy keep theirs."""
    x = make(4, 16).to(dtype)
    f32 = make(4, 16, seed=1)
    with torch.autocast("trn", dtype=dtype):
        t = x.to("trn")
        outs = {
            "softmax": (torch.softmax(t, -1), torch.softmax(x.float(), -1)),
            "log_softmax": (F.log_softmax(t, -1), F.log_softmax(x.float(), -1)),
            "layer_norm": (F.layer_norm(t, (16,)), F.layer_norm(x.float(), (16,))),
            "exp": (torch.exp(t), torch.exp(x.float())),
            "sum": (t.sum(-1), x.float().sum(-1)),
            "cat": (torch.cat([t, f32.to("trn")]), torch.cat([x.float(), f32])),
            "relu": (torch.relu(t), torch.relu(x)),  # no policy: stays in dtype
        }
    for name, (got, want) in outs.items():
        check(got, want, 1e-5 if want.dtype == torch.float32 else TOL[dtype])


def test_autocast_regions_and_banned_ops():
    x, w = make(4, 16).to("trn"), make(8, 16, seed=1).to("trn")
    with torch.autocast("trn", dtype=torch.bfloat16):
        assert F.linear(x, w).dtype == torch.bfloat16
        with torch.autocast("trn", enabled=False):
            assert F.linear(x, w).dtype == torch.float32
        with pytest.raises(RuntimeError, match="unsafe to autocast on trn"):
            F.binary_cross_entropy(torch.sigmoid(x), torch.rand(4, 16).to("trn"))
    assert F.linear(x, w).dtype == torch.float32  # outside the region


def test_llama_forward_compile_and_generate_under_autocast():
    pytest.importorskip("transformers")
    from trnscope.studies import zoo

    model, inputs = zoo.get("llama").build("tiny")
    trn_model = copy.deepcopy(model).to("trn")
    trn_inputs = zoo.to_device(inputs, "trn")
    with torch.no_grad():
        want = model(**inputs).logits  # float32 on CPU
        with torch.autocast("trn", dtype=torch.bfloat16):
            eager = trn_model(**trn_inputs).logits
            compiled = torch.compile(trn_model, backend="trn")(**trn_inputs).logits
            tokens = trn_model.generate(**trn_inputs, max_new_tokens=4, do_sample=False)
    assert eager.dtype == compiled.dtype == torch.bfloat16
    # bfloat16 GEMMs against the float32 reference: within a few bfloat16 ulps of the scale
    torch.testing.assert_close(eager.cpu().float(), want, rtol=0, atol=0.03 * want.abs().max().item())
    torch.testing.assert_close(compiled.cpu(), eager.cpu(), rtol=0, atol=0)
    assert tokens.shape == (inputs["input_ids"].shape[0], inputs["input_ids"].shape[1] + 4)
