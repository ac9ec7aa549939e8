"""The models of the studies and of the tests: RMSNorm three ways and a Llama-style decoder.

RMSNorm comes in the three forms of the seed's case study:
- naive: pow, mean, add, rsqrt, mul, mul as separate aten ops; every intermediate is a
  tensor in device memory (`RMSNorm(dim, fused=False)`, `naive_rms_norm`);
- fused: `torch.nn.functional.rms_norm`, one native kernel (`RMSNorm(dim, fused=True)`);
- compiled: the naive module through `torch.compile(backend="trn")`, which the compiler
  turns into one `fused[pow,mean,add,rsqrt,mul,mul]` kernel (`compile_for_trn`).

The decoder is the Llama block: RMSNorm, multi-head causal attention with rotary
embeddings (matmul + softmax), RMSNorm, SwiGLU MLP, residual adds. `DecoderBlock` is the one
definition; `DecoderBlockModel` is one block with its own rotary tables and mask (the
decoder study, tests/test_compile.py) and `TinyLlama` stacks blocks between an embedding
and an LM head (tests/test_decoder.py). Rotary tables and masks are built on the CPU at
init and move with `.to()`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "RMS_NORM_VARIANTS",
    "Attention",
    "DecoderBlock",
    "DecoderBlockModel",
    "FusedRMSNorm",
    "NaiveRMSNorm",
    "RMSNorm",
    "SwiGLU",
    "TinyLlama",
    "causal_mask",
    "compile_for_trn",
    "fused_rms_norm",
    "naive_rms_norm",
    "rms_norm_variant",
    "rotary_tables",
    "rotate_half",
    "set_rms_norm",
]

RMS_NORM_VARIANTS = ("naive", "fused", "compiled")


def naive_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """pow, mean, add, rsqrt, mul, mul: each a kernel whose output goes through memory."""
    variance = x.pow(2).mean(-1, keepdim=True)
    return x * torch.rsqrt(variance + eps) * weight


def fused_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """The native fused kernel: one launch, x read once from memory and written once."""
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


class RMSNorm(nn.Module):
    """RMSNorm over the last dim; `fused` picks F.rms_norm or the naive aten chain.

    The weight starts at uniform [0.5, 1.5) so that a wrong weight broadcast shows up.
    """

    def __init__(self, dim: int, fused: bool = True, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(dim) + 0.5)
        self.fused, self.eps = fused, eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Spelled out rather than calling the functions above: Dynamo numbers a compiled
        # graph's inputs in order of first use, and x comes first (compile reports say
        # "input 0 changed" for a new batch size).
        if self.fused:
            return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)
        variance = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(variance + self.eps) * self.weight

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, fused={self.fused}, eps={self.eps}"


class NaiveRMSNorm(RMSNorm):
    """The seed's naive form: pow/mean/add/rsqrt/mul/mul."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__(dim, fused=False, eps=eps)


class FusedRMSNorm(RMSNorm):
    """torch.nn.functional.rms_norm: one native kernel."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__(dim, fused=True, eps=eps)


def compile_for_trn(module: nn.Module) -> nn.Module:
    """torch.compile(module, backend="trn", dynamic=False): static shapes, one program each."""
    import trnscope.compile  # noqa: F401  registers the backend by name

    return torch.compile(module, backend="trn", dynamic=False)


def rms_norm_variant(variant: str, dim: int, eps: float = 1e-6) -> nn.Module:
    """A fresh RMSNorm module of `variant` ("naive", "fused" or "compiled").

    The compiled one wraps a naive module: the compiler, not the author, fuses the chain.
    Its weight is `module._orig_mod.weight`.
    """
    if variant == "naive":
        return NaiveRMSNorm(dim, eps)
    if variant == "fused":
        return FusedRMSNorm(dim, eps)
    if variant == "compiled":
        return compile_for_trn(NaiveRMSNorm(dim, eps))
    raise ValueError(
        f"rms_norm_variant: unknown variant {variant!r}; expected one of {RMS_NORM_VARIANTS}"
    )


def set_rms_norm(model: nn.Module, fused: bool) -> nn.Module:
    """Switch every RMSNorm of `model` to the fused or the naive form; returns model."""
    for m in model.modules():
        if isinstance(m, RMSNorm):
            m.fused = fused
    return model


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    # Written with torch.cat as in Llama: the compiler keeps cat as an eager node.
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def rotary_tables(
    seq: int, head_dim: int, base: float = 10000.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin), each [seq, head_dim], for rotary position embeddings."""
    inv = 1.0 / (base ** (torch.arange(0, head_dim, 2).float() / head_dim))
    ang = torch.outer(torch.arange(seq).float(), inv)
    ang = torch.cat((ang, ang), dim=-1)
    return ang.cos(), ang.sin()


def causal_mask(seq: int, additive: bool = False) -> torch.Tensor:
    """[seq, seq]: True above the diagonal (masked_fill form), or 0 / -inf (additive form)."""
    causal = torch.ones(seq, seq, dtype=torch.bool).triu(1)
    return torch.zeros(seq, seq).masked_fill(causal, float("-inf")) if additive else causal


class Attention(nn.Module):
    """Multi-head causal self-attention with rotary embeddings, softmax in float32."""

    def __init__(self, dim: int, heads: int, additive_mask: bool = False):
        super().__init__()
        if dim % heads or (dim // heads) % 2:
            raise ValueError(f"Attention: dim={dim} must split into {heads} heads of even size")
        self.heads = heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.additive_mask = additive_mask

    def forward(self, x, cos, sin, mask):
        b, t, c = x.shape
        d = c // self.heads
        q = self.wq(x).view(b, t, self.heads, d).transpose(1, 2)
        k = self.wk(x).view(b, t, self.heads, d).transpose(1, 2)
        v = self.wv(x).view(b, t, self.heads, d).transpose(1, 2)
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


class SwiGLU(nn.Module):
    """Llama's MLP: w2(silu(w1 x) * w3 x)."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class DecoderBlock(nn.Module):
    """One Llama decoder block: h = x + attn(norm(x)); out = h + mlp(norm(h)).

    forward(x, cos, sin, mask): x [batch, seq, dim]; cos/sin [seq, dim // heads] in x's
    dtype; mask from causal_mask(seq, additive_mask).
    """

    def __init__(
        self,
        dim: int,
        heads: int,
        hidden: int,
        fused_rms_norm: bool = True,
        additive_mask: bool = False,
    ):
        super().__init__()
        self.attn_norm = RMSNorm(dim, fused_rms_norm)
        self.attn = Attention(dim, heads, additive_mask)
        self.mlp_norm = RMSNorm(dim, fused_rms_norm)
        self.mlp = SwiGLU(dim, hidden)

    def forward(self, x, cos, sin, mask):
        h = x + self.attn(self.attn_norm(x), cos, sin, mask)
        return h + self.mlp(self.mlp_norm(h))


class DecoderBlockModel(nn.Module):
    """One DecoderBlock (`.block`) with its own rotary tables and causal mask: forward(x)."""

    def __init__(
        self,
        dim: int,
        heads: int,
        hidden: int,
        seq: int,
        fused_rms_norm: bool = True,
        additive_mask: bool = False,
    ):
        super().__init__()
        self.block = DecoderBlock(dim, heads, hidden, fused_rms_norm, additive_mask)
        cos, sin = rotary_tables(seq, dim // heads)
        self.register_buffer("cos", cos)
        self.register_buffer("sin", sin)
        self.register_buffer("mask", causal_mask(seq, additive_mask))

    def forward(self, x):
        return self.block(x, self.cos.to(x.dtype), self.sin.to(x.dtype), self.mask)


class TinyLlama(nn.Module):
    """Token embedding, `layers` DecoderBlocks, final RMSNorm, LM head, greedy argmax.

    forward(tokens [batch, seq]) -> (logits [batch, seq, vocab], argmax ids [batch, seq]).
    """

    def __init__(
        self,
        vocab: int,
        dim: int,
        heads: int,
        hidden: int,
        seq: int,
        layers: int = 2,
        fused: bool = True,
        additive_mask: bool = False,
    ):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(
            DecoderBlock(dim, heads, hidden, fused, additive_mask) for _ in range(layers)
        )
        self.norm = RMSNorm(dim, fused)
        self.head = nn.Linear(dim, vocab, bias=True)
        cos, sin = rotary_tables(seq, dim // heads)
        self.register_buffer("cos", cos)
        self.register_buffer("sin", sin)
        self.register_buffer("mask", causal_mask(seq, additive_mask))

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, self.cos.to(x.dtype), self.sin.to(x.dtype), self.mask)
        logits = self.head(self.norm(x))
        return logits, logits.argmax(-1)
