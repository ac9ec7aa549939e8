"""A Llama-style decoder on trn equals the same module on CPU, with no op of
the hot path going through the CPU fallback.

The model: token embedding, decoder blocks (RMSNorm, multi-head causal
attention with rotary embeddings, matmul + softmax, SwiGLU MLP, residual
adds), a final RMSNorm, an LM head and a greedy argmax. RMSNorm comes in the
two forms of the seed's case study: F.rms_norm (one fused launch) and the
naive pow/mean/add/rsqrt/mul/mul chain. Tolerances: float32 1e-4; bfloat16
compares against CPU bfloat16 with 5e-2 (both round every op to bfloat16,
in different orders).
"""

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import trnscope

DIM, HEADS, HIDDEN, VOCAB, SEQ = 64, 4, 160, 97, 11


class RMSNorm(nn.Module):
    def __init__(self, dim, fused, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(dim) + 0.5)
        self.fused, self.eps = fused, eps

    def forward(self, x):
        if self.fused:
            return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)
        var = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(var + self.eps) * self.weight


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


class Attention(nn.Module):
    def __init__(self, additive_mask):
        super().__init__()
        self.wq = nn.Linear(DIM, DIM, bias=False)
        self.wk = nn.Linear(DIM, DIM, bias=False)
        self.wv = nn.Linear(DIM, DIM, bias=False)
        self.wo = nn.Linear(DIM, DIM, bias=False)
        self.additive_mask = additive_mask

    def forward(self, x, cos, sin, mask):
        b, t, c = x.shape
        d = c // HEADS
        q = self.wq(x).view(b, t, HEADS, d).transpose(1, 2)
        k = self.wk(x).view(b, t, HEADS, d).transpose(1, 2)
        v = self.wv(x).view(b, t, HEADS, d).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d)
        if self.additive_mask:
            scores = scores + mask
        else:
            scores = scores.masked_fill(mask, float("-inf"))
        probs = torch.softmax(scores.float(), dim=-1).type_as(q)
        out = torch.matmul(probs, v).transpose(1, 2).reshape(b, t, c)
        return self.wo(out)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Linear(DIM, HIDDEN, bias=False)
        self.w3 = nn.Linear(DIM, HIDDEN, bias=False)
        self.w2 = nn.Linear(HIDDEN, DIM, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, fused, additive_mask):
        super().__init__()
        self.attn_norm = RMSNorm(DIM, fused)
        self.attn = Attention(additive_mask)
        self.mlp_norm = RMSNorm(DIM, fused)
        self.mlp = MLP()

    def forward(self, x, cos, sin, mask):
        h = x + self.attn(self.attn_norm(x), cos, sin, mask)
        return h + self.mlp(self.mlp_norm(h))


class TinyLlama(nn.Module):
    """Buffers (rotary tables, causal mask) are built on the CPU at init and
    move with .to(); the forward pass is the hot path."""

    def __init__(self, fused=True, additive_mask=False, layers=2):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.blocks = nn.ModuleList(Block(fused, additive_mask) for _ in range(layers))
        self.norm = RMSNorm(DIM, fused)
        self.head = nn.Linear(DIM, VOCAB, bias=True)
        d = DIM // HEADS
        inv = 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
        ang = torch.outer(torch.arange(SEQ).float(), inv)
        ang = torch.cat((ang, ang), dim=-1)
        self.register_buffer("cos", ang.cos())
        self.register_buffer("sin", ang.sin())
        causal = torch.ones(SEQ, SEQ, dtype=torch.bool).triu(1)
        self.register_buffer(
            "mask",
            torch.zeros(SEQ, SEQ).masked_fill(causal, float("-inf")) if additive_mask else causal,
        )

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, self.cos.to(x.dtype), self.sin.to(x.dtype), self.mask)
        logits = self.head(self.norm(x))
        return logits, logits.argmax(-1)


def run(model, tokens):
    with torch.inference_mode():
        return model(tokens)


@pytest.mark.parametrize("additive_mask", [False, True], ids=["masked_fill", "additive"])
@pytest.mark.parametrize("fused", [True, False], ids=["fused_rms_norm", "naive_rms_norm"])
def test_decoder_float32_matches_cpu_without_fallback(fused, additive_mask):
    torch.manual_seed(0)
    model = TinyLlama(fused, additive_mask).eval()
    tokens = torch.randint(0, VOCAB, (2, SEQ))
    want_logits, want_ids = run(model, tokens)

    model.to("trn")
    before = trnscope.fallback_ops()
    logits, ids = run(model, tokens.to("trn"))
    torch.trn.synchronize()
    fell_back = {k: v - before.get(k, 0) for k, v in trnscope.fallback_ops().items() if v != before.get(k, 0)}
    assert fell_back == {}, f"ops on the hot path fell back to the CPU: {fell_back}"

    assert logits.device.type == "trn" and logits.dtype == torch.float32
    torch.testing.assert_close(logits.cpu(), want_logits, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(ids.cpu(), want_ids)


def test_decoder_bfloat16_matches_cpu():
    torch.manual_seed(1)
    model = TinyLlama(fused=True).eval().to(torch.bfloat16)
    tokens = torch.randint(0, VOCAB, (2, SEQ))
    want, _ = run(model, tokens)
    before = trnscope.fallback_ops()
    got, _ = run(model.to("trn"), tokens.to("trn"))
    torch.trn.synchronize()
    assert trnscope.fallback_ops() == before
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.cpu().float(), want.float(), rtol=5e-2, atol=5e-2)


def test_fused_rms_norm_in_the_block_is_one_launch_per_norm():
    """The fused form launches one rms_norm kernel per norm and no pow/mean
    chain; the naive form launches the six elementwise/reduce kernels."""
    tokens = torch.randint(0, VOCAB, (1, SEQ), device="trn")
    for fused in (True, False):
        model = TinyLlama(fused, layers=1).eval().to("trn")
        torch.ops.trnscope._count_launches(True)
        run(model, tokens)
        counts = torch.ops.trnscope._launch_counts()
        torch.ops.trnscope._count_launches(False)
        counts = {k: int(v) for k, v in (kv.split("=") for kv in counts.split(";") if kv)}
        rms = sum(n for k, n in counts.items() if k.startswith("rms_norm_"))
        assert rms == (3 if fused else 0), counts
