"""A Llama-style decoder on trn equals the same module on CPU, with no op of
the hot path going through the CPU fallback.

The model (trnscope.studies.models.TinyLlama): token embedding, decoder
blocks (RMSNorm, multi-head causal attention with rotary embeddings, matmul +
softmax, SwiGLU MLP, residual adds), a final RMSNorm, an LM head and a greedy
argmax. RMSNorm comes in the two forms of the seed's case study: F.rms_norm
(one fused launch) and the naive pow/mean/add/rsqrt/mul/mul chain.
Tolerances: float32 1e-4; bfloat16 compares against CPU bfloat16 with 5e-2
(both round every op to bfloat16, in different orders).
"""

import pytest
import torch

import trnscope
from trnscope.studies import models

DIM, HEADS, HIDDEN, VOCAB, SEQ = 64, 4, 160, 97, 11


def tiny_llama(fused=True, additive_mask=False, layers=2):
    """trnscope.studies.models.TinyLlama at this file's sizes."""
    return models.TinyLlama(VOCAB, DIM, HEADS, HIDDEN, SEQ, layers, fused, additive_mask)


def run(model, tokens):
    with torch.inference_mode():
        return model(tokens)


@pytest.mark.parametrize("additive_mask", [False, True], ids=["masked_fill", "additive"])
@pytest.mark.parametrize("fused", [True, False], ids=["fused_rms_norm", "naive_rms_norm"])
def test_decoder_float32_matches_cpu_without_fallback(fused, additive_mask):
    torch.manual_seed(0)
    model = tiny_llama(fused, additive_mask).eval()
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
    model = tiny_llama(fused=True).eval().to(torch.bfloat16)
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
        model = tiny_llama(fused, layers=1).eval().to("trn")
        torch.ops.trnscope._count_launches(True)
        run(model, tokens)
        counts = torch.ops.trnscope._launch_counts()
        torch.ops.trnscope._count_launches(False)
        counts = {k: int(v) for k, v in (kv.split("=") for kv in counts.split(";") if kv)}
        rms = sum(n for k, n in counts.items() if k.startswith("rms_norm_"))
        assert rms == (3 if fused else 0), counts
