"""F.scaled_dot_product_attention on trn (one fused kernel) against CPU PyTorch.

The reference is CPU PyTorch's math sdpa on the same values computed in
float32 (bfloat16/float16 inputs are upcast, the result cast back), so the
reference does not carry the rounding of low-precision intermediates.
Tolerances (rtol, atol): float32 1e-4/2e-5 (f32 accumulation over Skv and D in
another order), bfloat16 2e-2/2e-2, float16 2e-3/2e-3 (one rounding of the
output plus f32 error). The autouse fixture asserts nothing fell back to CPU.
"""

import math
import warnings
import zlib

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import trnscope

F32, BF16, F16 = torch.float32, torch.bfloat16, torch.float16
FLOATS = [F32, BF16, F16]
# Tests that run torch's math sdpa on trn, which may use ops (tril) that still
# fall back to the CPU; the fused path is checked fallback-free everywhere else.
MATH_PATH_TESTS = {"test_math_backend_when_asked"}
OVERRIDEABLE = torch.ops.aten._scaled_dot_product_fused_attention_overrideable.default


@pytest.fixture(autouse=True)
def no_fallback(request):
    before = trnscope.fallback_ops()
    yield
    torch.trn.synchronize()
    if request.node.originalname in MATH_PATH_TESTS:
        return
    assert trnscope.fallback_ops() == before, "an op went through the CPU fallback"


def tol(dtype):
    return {F32: (1e-4, 2e-5), BF16: (2e-2, 2e-2), F16: (2e-3, 2e-3)}[dtype]


def rand(shape, dtype, tag):
    g = torch.Generator().manual_seed(zlib.crc32(repr((shape, str(dtype), tag)).encode()))
    t = torch.randn(shape, generator=g)
    return t.to(dtype)


def reference(q, k, v, **kw):
    """CPU math sdpa in float32 on the (already rounded) CPU values."""
    mask = kw.pop("attn_mask", None)
    if mask is not None and mask.dtype != torch.bool:
        mask = mask.float()
    with sdpa_kernel(SDPBackend.MATH):
        out = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask, **kw)
    return out.to(q.dtype)


def run(q, k, v, attn_mask=None, **kw):
    """(trn result on copies of the CPU inputs, CPU reference)."""
    tm = attn_mask.to("trn") if attn_mask is not None else None
    got = F.scaled_dot_product_attention(q.to("trn"), k.to("trn"), v.to("trn"), attn_mask=tm, **kw)
    return got, reference(q, k, v, attn_mask=attn_mask, **kw)


def check(got, want):
    assert got.device.type == "trn"
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.shape)
    r, a = tol(want.dtype)
    torch.testing.assert_close(got.cpu(), want, rtol=r, atol=a)


def launch_counts(fn):
    torch.trn.synchronize()
    torch.ops.trnscope._count_launches(True)
    try:
        out = fn()
        torch.trn.synchronize()
        counts = torch.ops.trnscope._launch_counts()
    finally:
        torch.ops.trnscope._count_launches(False)
    return {k: int(n) for k, n in (kv.split("=") for kv in counts.split(";") if kv)}, out


# (B, Hq, Hkv, Sq, Skv, D): decode (Sq = 1), Sq != Skv both ways, odd sizes,
# head dims 16/64/80/128 and one across no vector width.
SHAPES = [
    (1, 1, 1, 1, 1, 16),
    (2, 4, 4, 7, 13, 64),
    (1, 2, 2, 1, 37, 80),
    (2, 2, 2, 65, 33, 128),
    (1, 3, 3, 17, 130, 16),
    (1, 2, 2, 9, 9, 20),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES)
def test_shapes_and_dtypes(shape, dtype):
    b, hq, hkv, sq, skv, d = shape
    q, k, v = (rand(s, dtype, t) for s, t in
               [((b, hq, sq, d), "q"), ((b, hkv, skv, d), "k"), ((b, hkv, skv, d), "v")])
    check(*run(q, k, v))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("sq,skv", [(1, 1), (1, 40), (24, 24), (10, 70), (70, 10), (100, 100)])
def test_causal_top_left_aligned(sq, skv, dtype):
    q, k, v = rand((2, 2, sq, 32), dtype, "q"), rand((2, 2, skv, 32), dtype, "k"), rand(
        (2, 2, skv, 32), dtype, "v")
    check(*run(q, k, v, is_causal=True))


MASK_SHAPES = [(9, 50), (2, 1, 9, 50), (1, 4, 1, 50), (50,), (2, 4, 9, 50)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("mask_shape", MASK_SHAPES)
@pytest.mark.parametrize("kind", ["bool", "additive"])
def test_masks_broadcast(kind, mask_shape, dtype):
    q, k, v = rand((2, 4, 9, 24), dtype, "q"), rand((2, 4, 50, 24), dtype, "k"), rand(
        (2, 4, 50, 24), dtype, "v")
    if kind == "bool":
        mask = rand(mask_shape, F32, "m") > -0.5
    else:
        mask = rand(mask_shape, F32, "m").to(dtype) * 2
    check(*run(q, k, v, attn_mask=mask))


@pytest.mark.parametrize("dtype", FLOATS)
def test_mask_with_causal(dtype):
    """CPU PyTorch's default sdpa accepts a mask with is_causal=True and applies
    both (its math path refuses the pair): trn does what the default does."""
    q, k, v = rand((1, 2, 20, 16), dtype, "q"), rand((1, 2, 30, 16), dtype, "k"), rand(
        (1, 2, 30, 16), dtype, "v")
    mask = rand((20, 30), F32, "m") > -1.0
    got = F.scaled_dot_product_attention(q.to("trn"), k.to("trn"), v.to("trn"),
                                         attn_mask=mask.to("trn"), is_causal=True)
    both = mask & torch.ones(20, 30, dtype=torch.bool).tril()
    check(got, reference(q, k, v, attn_mask=both))
    check(got, F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=True))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("kind", ["bool", "additive"])
def test_fully_masked_rows_match_cpu(kind, dtype):
    """CPU PyTorch gives 0 for a query row that attends no key; so does trn."""
    q, k, v = rand((1, 2, 6, 16), dtype, "q"), rand((1, 2, 10, 16), dtype, "k"), rand(
        (1, 2, 10, 16), dtype, "v")
    keep = torch.ones(6, 10, dtype=torch.bool)
    keep[2] = False
    keep[5, 3:] = False
    mask = keep if kind == "bool" else torch.zeros(6, 10, dtype=dtype).masked_fill(~keep, -math.inf)
    got, want = run(q, k, v, attn_mask=mask)
    cpu = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # CPU's default backend
    assert torch.equal(cpu[:, :, 2], torch.zeros_like(cpu[:, :, 2]))
    check(got, want)
    check(got, cpu)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("sq", [1, 6])
def test_finfo_min_masks_match_cpu(sq, dtype):
    """Hugging Face masks with finfo(dtype).min: in float32 and bfloat16 a
    fully masked row averages the values uniformly on CPU (every score rounds
    to min), and must on trn too, though the kernel's base-2 scores would
    overflow min * log2(e) to -inf. (float16's min, -65504, is only large.)"""
    q, k, v = rand((1, 2, sq, 16), dtype, "q"), rand((1, 2, 10, 16), dtype, "k"), rand(
        (1, 2, 10, 16), dtype, "v")
    low = torch.finfo(dtype).min
    mask = torch.zeros(sq, 10, dtype=dtype)
    mask[0] = low  # every key masked
    if sq > 1:
        mask[1, 4:] = low
        mask[2, ::2] = -1e30 if dtype == F32 else low
    got, want = run(q, k, v, attn_mask=mask)
    cpu = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    if dtype != F16:
        uniform = v.float().mean(dim=2)
        torch.testing.assert_close(cpu[:, :, 0].float(), uniform, rtol=2e-2, atol=2e-2)
    check(got, want)
    check(got, cpu)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("hq,hkv", [(8, 2), (6, 3), (4, 1)])
def test_grouped_query_heads(hq, hkv, dtype):
    q, k, v = rand((2, hq, 5, 32), dtype, "q"), rand((2, hkv, 21, 32), dtype, "k"), rand(
        (2, hkv, 21, 32), dtype, "v")
    check(*run(q, k, v, enable_gqa=True))
    check(*run(q, k, v, enable_gqa=True, is_causal=True))


def test_repeat_kv_layouts():
    """transformers' repeat_kv (expand + reshape) and a bare stride-0 expand."""
    q, k, v = rand((2, 8, 7, 16), F32, "q"), rand((2, 2, 19, 16), F32, "k"), rand(
        (2, 2, 19, 16), F32, "v")
    tq, tk, tv = q.to("trn"), k.to("trn"), v.to("trn")

    def repeat_kv(x, n):
        b, h, s, d = x.shape
        return x[:, :, None].expand(b, h, n, s, d).reshape(b, h * n, s, d)

    want = reference(q, k, v, enable_gqa=True)
    check(F.scaled_dot_product_attention(tq, repeat_kv(tk, 4), repeat_kv(tv, 4)), want)
    k1, v1 = k[:, :1], v[:, :1]
    want1 = reference(q, k1.expand(2, 8, 19, 16), v1.expand(2, 8, 19, 16))
    ek, ev = tk[:, :1].expand(2, 8, 19, 16), tv[:, :1].expand(2, 8, 19, 16)
    assert ek.stride(1) == 0
    check(F.scaled_dot_product_attention(tq, ek, ev), want1)


@pytest.mark.parametrize("dtype", FLOATS)
def test_non_contiguous_inputs(dtype):
    """q/k/v transposed from [B, S, H, D] (how models build them) and sliced."""
    b, s, h, d = 2, 11, 4, 32
    qkv = rand((b, s, 3 * h, 2 * d), dtype, "qkv")
    q = qkv[:, :, :h, :d].transpose(1, 2)
    k = qkv[:, :, h:2 * h, d:].transpose(1, 2)
    v = qkv[:, :, 2 * h:, ::2].transpose(1, 2)
    tqkv = qkv.to("trn")
    tq = tqkv[:, :, :h, :d].transpose(1, 2)
    tk = tqkv[:, :, h:2 * h, d:].transpose(1, 2)
    tv = tqkv[:, :, 2 * h:, ::2].transpose(1, 2)
    assert not tq.is_contiguous() and not tv.is_contiguous()
    got = F.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
    check(got, reference(q, k, v, is_causal=True))
    # The output follows the query's memory order, as the meta kernel says.
    assert got.stride() == torch.empty(b, s, h, d).transpose(1, 2).stride()


@pytest.mark.parametrize("scale", [0.05, 1.0, -0.3])
def test_given_scale(scale):
    q, k, v = rand((1, 2, 8, 16), F32, "q"), rand((1, 2, 12, 16), F32, "k"), rand(
        (1, 2, 12, 16), F32, "v")
    check(*run(q, k, v, scale=scale))


def test_three_d_inputs():
    q, k, v = rand((3, 8, 16), F32, "q"), rand((3, 10, 16), F32, "k"), rand((3, 10, 16), F32, "v")
    check(*run(q, k, v, is_causal=True))


def test_value_dim_differs():
    q, k, v = rand((1, 2, 8, 16), F32, "q"), rand((1, 2, 12, 16), F32, "k"), rand(
        (1, 2, 12, 40), F32, "v")
    check(*run(q, k, v))


def test_float64_computed_as_float32():
    q, k, v = (rand((1, 2, 6, 16), torch.float64, t) for t in "qkv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the once-per-process float64 warning
        got = F.scaled_dot_product_attention(q.to("trn"), k.to("trn"), v.to("trn"))
    assert got.dtype == torch.float64
    torch.testing.assert_close(got.cpu(), F.scaled_dot_product_attention(q, k, v),
                               rtol=1e-4, atol=2e-5)
    assert any("attention" in op for op in trnscope.float64_downcasts())


def test_logsumexp_of_the_fused_op():
    q, k, v = rand((2, 2, 5, 16), F32, "q"), rand((2, 2, 9, 16), F32, "k"), rand(
        (2, 2, 9, 16), F32, "v")
    res = OVERRIDEABLE(q.to("trn"), k.to("trn"), v.to("trn"), None, 0.0, True)
    scores = (q @ k.transpose(-1, -2)) / 4.0
    scores = scores.masked_fill(~torch.ones(5, 9, dtype=torch.bool).tril(), -math.inf)
    torch.testing.assert_close(res[1].cpu(), torch.logsumexp(scores, -1), rtol=1e-5, atol=1e-5)
    assert res[4] == 5 and res[5] == 9


# ---- one launch ------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS)
def test_one_launch(dtype):
    q, k, v = (rand((2, 4, 16, 32), dtype, t).to("trn") for t in "qkv")
    name = {F32: "sdpa_f32", BF16: "sdpa_bf16", F16: "sdpa_f16"}[dtype]
    counts, _ = launch_counts(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    assert counts == {name: 1}, counts
    mask = rand((16, 16), dtype, "m").to("trn")
    counts, _ = launch_counts(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    assert counts == {name: 1}, counts
    counts, _ = launch_counts(
        lambda: F.scaled_dot_product_attention(q, k[:, :2], v[:, :2], enable_gqa=True))
    assert counts == {name: 1}, counts


def test_bool_mask_is_one_launch():
    """A bool mask goes to the fused kernel as it is, without torch's
    conversion to an additive mask (Note [sdpa routing]), with and without
    inference mode (which skips the autograd key)."""
    q, k, v = (rand((1, 2, 8, 16), F32, t).to("trn") for t in "qkv")
    mask = torch.ones(8, 8, dtype=torch.bool).tril().to("trn")
    for ctx in (torch.no_grad, torch.inference_mode):
        with ctx():
            counts, _ = launch_counts(
                lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
        assert counts == {"sdpa_f32": 1}, counts


def test_math_backend_when_asked():
    """sdpa_kernel(SDPBackend.MATH) turns the fused kernel off, as on CPU/CUDA."""
    q, k, v = (rand((1, 2, 8, 16), F32, t) for t in "qkv")
    with sdpa_kernel(SDPBackend.MATH), torch.no_grad():
        counts, got = launch_counts(
            lambda: F.scaled_dot_product_attention(q.to("trn"), k.to("trn"), v.to("trn")))
    assert "sdpa_f32" not in counts and counts, counts
    check(got, reference(q, k, v))


@pytest.mark.parametrize(
    "hq,hkv,sq,skv,causal,mask_kind,dtype",
    [
        (2, 2, 5, 7, False, None, F32),
        (4, 2, 6, 6, True, None, F32),
        (4, 1, 9, 5, False, "bool", F32),  # a fully masked row: zero gradients
        (2, 2, 4, 8, False, "float", F32),
        (6, 3, 7, 7, True, None, F32),
        (2, 2, 5, 7, True, None, BF16),
    ],
)
def test_backward_of_the_fused_op(hq, hkv, sq, skv, causal, mask_kind, dtype):
    """Inputs that require grad take the fused forward too; its backward
    (aten ops on trn from the saved logsumexp) matches CPU autograd."""
    q, k, v = rand((2, hq, sq, 16), dtype, "q"), rand((2, hkv, skv, 16), dtype, "k"), rand(
        (2, hkv, skv, 24), dtype, "v")
    grad = rand((2, hq, sq, 24), dtype, "g")
    mask = None
    if mask_kind == "bool":
        mask = rand((sq, skv), F32, "m") > -0.5
        mask[1] = False
    elif mask_kind == "float":
        mask = rand((sq, skv), F32, "m").to(dtype)
    gqa = hq != hkv
    cq, ck, cv = (t.float().clone().requires_grad_() for t in (q, k, v))
    cmask = mask if mask is None or mask.dtype == torch.bool else mask.float()
    with sdpa_kernel(SDPBackend.MATH):
        F.scaled_dot_product_attention(cq, ck, cv, attn_mask=cmask, is_causal=causal,
                                       enable_gqa=gqa).backward(grad.float())
    tq, tk, tv = (t.to("trn").requires_grad_() for t in (q, k, v))
    out = F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal, enable_gqa=gqa,
                                         attn_mask=None if mask is None else mask.to("trn"))
    assert out.grad_fn.name() == "ScaledDotProductFusedAttentionOverrideableBackward0"
    out.backward(grad.to("trn"))
    r, a = tol(dtype)
    for t, c in ((tq, cq), (tk, ck), (tv, cv)):
        assert t.grad.dtype == dtype
        torch.testing.assert_close(t.grad.cpu().float(), c.grad, rtol=r, atol=a * 4)


# ---- bad input -------------------------------------------------------------------------------
def test_heads_not_divisible():
    q, k = rand((1, 6, 4, 16), F32, "q").to("trn"), rand((1, 4, 4, 16), F32, "k").to("trn")
    with pytest.raises(RuntimeError, match="heads"):
        F.scaled_dot_product_attention(q, k, k, enable_gqa=True)
    with pytest.raises(RuntimeError, match=r"query heads \(6\) must be a multiple"):
        OVERRIDEABLE(q, k, k)


def test_mismatched_head_dim():
    q = rand((1, 2, 4, 16), F32, "q").to("trn")
    k = rand((1, 2, 4, 8), F32, "k").to("trn")
    with pytest.raises(RuntimeError, match="head dim 16"):
        F.scaled_dot_product_attention(q, k, k)


def test_mismatched_sequence_and_mask():
    q, k = rand((1, 2, 4, 16), F32, "q").to("trn"), rand((1, 2, 5, 16), F32, "k").to("trn")
    v = rand((1, 2, 6, 16), F32, "v").to("trn")
    with pytest.raises(RuntimeError, match="same sequence length"):
        F.scaled_dot_product_attention(q, k, v)
    bad_mask = torch.zeros(3, 5, device="trn")
    with pytest.raises(RuntimeError):
        F.scaled_dot_product_attention(q, k, k, attn_mask=bad_mask)


def test_dropout_is_refused_by_the_fused_op():
    q = rand((1, 2, 4, 16), F32, "q").to("trn")
    with pytest.raises(RuntimeError, match="dropout_p must be 0"):
        OVERRIDEABLE(q, q, q, None, 0.1)


# ---- torch.compile ---------------------------------------------------------------------------
def test_aot_graph_has_the_fused_op():
    """AOTAutograd traces sdpa on trn fake tensors to the overrideable op
    (the op the trn compiler takes as a fused kernel)."""
    from torch._dynamo.backends.common import aot_autograd

    graphs = []

    def capture(gm, example_inputs):
        graphs.append(gm)
        return gm

    def attn(q, k, v, m):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m)

    q, k, v = (rand((1, 2, 8, 16), F32, t).to("trn") for t in "qkv")
    m = rand((8, 8), F32, "m").to("trn")
    fn = torch.compile(attn, backend=aot_autograd(fw_compiler=capture), dynamic=False)
    with torch.inference_mode():
        got = fn(q, k, v, m)
    check(got, reference(q.cpu(), k.cpu(), v.cpu(), attn_mask=m.cpu()))
    targets = [n.target for g in graphs for n in g.graph.nodes if n.op == "call_function"]
    assert OVERRIDEABLE in targets, targets


def test_backward_three_d():
    q, k, v = rand((2, 5, 16), F32, "q"), rand((2, 7, 16), F32, "k"), rand((2, 7, 16), F32, "v")
    cq, tq = q.clone().requires_grad_(), q.to("trn").requires_grad_()
    F.scaled_dot_product_attention(cq, k, v, is_causal=True).sum().backward()
    F.scaled_dot_product_attention(tq, k.to("trn"), v.to("trn"), is_causal=True).sum().backward()
    assert tq.grad.shape == q.shape
    torch.testing.assert_close(tq.grad.cpu(), cq.grad, rtol=1e-4, atol=1e-5)


def test_aot_training_graphs_have_the_fused_op_and_its_backward():
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    targets = []

    def capture(gm, example_inputs):
        targets.extend(n.target for n in gm.graph.nodes if n.op == "call_function")
        return make_boxed_func(gm)

    q = rand((1, 2, 8, 16), F32, "q")
    k, v = rand((1, 2, 8, 16), F32, "k"), rand((1, 2, 8, 16), F32, "v")
    tq = q.to("trn").requires_grad_()
    fn = torch.compile(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                       backend=aot_autograd(fw_compiler=capture, bw_compiler=capture))
    fn(tq, k.to("trn"), v.to("trn")).sum().backward()
    cq = q.clone().requires_grad_()
    F.scaled_dot_product_attention(cq, k, v, is_causal=True).sum().backward()
    torch.testing.assert_close(tq.grad.cpu(), cq.grad, rtol=1e-4, atol=1e-5)
    assert OVERRIDEABLE in targets, targets
    bw = torch.ops.aten._scaled_dot_product_fused_attention_overrideable_backward.default
    assert bw in targets, targets


@pytest.mark.parametrize("shape,causal,mask,gqa", [
    ((1, 4, 300, 600, 64), False, None, False),  # key blocks of 256: the third one partial
    ((2, 4, 280, 280, 40), True, None, True),  # d off the 32-wide tile depth, grouped heads
    ((1, 2, 64, 520, 128), False, "bool", False),
    ((1, 2, 33, 300, 64), False, "additive", True),
])
def test_bfloat16_attention_on_amx_is_as_close_as_cpus(shape, causal, mask, gqa):
    """Note [AMX attention]: bfloat16 panels run their products on AMX tiles where the
    CPU has them, P rounded to bfloat16 as CPU PyTorch's flash attention rounds it. Their
    error against a float64 reference stays within twice the CPU's own (and the
    float32-GEMM path's, TRN_AMX=0)."""
    b, h, sq, skv, d = shape
    g = torch.Generator().manual_seed(sq + skv)
    hkv = h // 2 if gqa else h
    q = torch.randn(b, h, sq, d, generator=g).bfloat16()
    k = torch.randn(b, hkv, skv, d, generator=g).bfloat16()
    v = torch.randn(b, hkv, skv, d, generator=g).bfloat16()
    m = None
    if mask == "bool":
        m = torch.rand(1, 1, sq, skv, generator=g) > 0.3
        m[..., 0] = True
    elif mask == "additive":
        m = (torch.randn(1, 1, sq, skv, generator=g) * 2).bfloat16()
    kw = dict(is_causal=causal, enable_gqa=gqa)
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                         attn_mask=None if m is None else m.double()
                                         if m.is_floating_point() else m, **kw)
    cpu = F.scaled_dot_product_attention(q, k, v, attn_mask=m, **kw)
    on = lambda x: None if x is None else x.to("trn")  # noqa: E731
    errs = {}
    for amx in (True, False):
        used = torch.ops.trnscope._set_amx(amx)
        try:
            got = F.scaled_dot_product_attention(on(q), on(k), on(v), attn_mask=on(m), **kw)
            errs[used] = (got.cpu().double() - ref).abs().max().item()
        finally:
            torch.ops.trnscope._set_amx(True)
    cpu_err = (cpu.double() - ref).abs().max().item()
    for used, err in errs.items():
        assert err <= 2 * cpu_err + 1e-3, (used, err, cpu_err)
