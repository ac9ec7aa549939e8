"""torch.nn's transformer modules on trn against CPU PyTorch (Note [nn.Transformer
fast path] and Note [Nested sequences] in torch_bridge/ops_transformer.cc).

In eval mode these modules call _transformer_encoder_layer_fwd /
_native_multi_head_attention and, for nn.TransformerEncoder with a padding
mask, nested tensors; every test asserts that none of it went through the CPU
fallback. Tolerances: float32 1e-5, bfloat16 3e-2 (both sides round their
intermediates differently).
"""

import copy

import pytest
import torch
import torch.nn as nn

pytestmark = pytest.mark.usefixtures("no_fallback")

F32, BF16 = torch.float32, torch.bfloat16
TOL = {F32: 1e-5, BF16: 3e-2}
B, L, E, HEADS = 3, 7, 32, 4


def on_trn(x):
    return x.to("trn") if torch.is_tensor(x) else x


def run_both(module, *args, **kwargs):
    """(trn output, CPU output) of the module in eval mode without grad."""
    module = module.eval()
    with torch.no_grad():
        want = module(*args, **kwargs)
        got = copy.deepcopy(module).to("trn")(*map(on_trn, args),
                                              **{k: on_trn(v) for k, v in kwargs.items()})
    return got, want


def close(got, want, dtype=F32):
    if isinstance(want, tuple):
        for g, w in zip(got, want):
            close(g, w, dtype)
        return
    if want is None:
        assert got is None
        return
    assert got.device.type == "trn" and got.shape == want.shape and got.dtype == want.dtype
    torch.testing.assert_close(got.cpu().float(), want.float(), rtol=TOL[dtype], atol=TOL[dtype])


def masks(dtype=F32):
    """Key padding (left-aligned, no row fully padded) and causal masks, bool and
    float, as nn.TransformerEncoder names them (the layer calls `mask` src_mask)."""
    pad = torch.zeros(B, L, dtype=torch.bool)
    pad[0, 5:] = True
    pad[2, 3:] = True
    causal = nn.Transformer.generate_square_subsequent_mask(L, dtype=dtype)
    return {
        "none": {},
        "padding": {"src_key_padding_mask": pad},
        "causal": {"mask": causal},
        "causal_bool": {"mask": causal.isinf()},
        "both": {"mask": causal, "src_key_padding_mask": pad},
        "is_causal": {"mask": causal, "is_causal": True},
    }


@pytest.mark.parametrize("mask", list(masks()))
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
def test_encoder_layer(mask, norm_first, activation, dtype):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(E, HEADS, 64, dropout=0.0, activation=activation,
                                       batch_first=True, norm_first=norm_first).to(dtype)
    x = torch.randn(B, L, E, dtype=dtype)
    kwargs = {("src_mask" if k == "mask" else k): v for k, v in masks(dtype)[mask].items()}
    close(*run_both(layer, x, **kwargs), dtype)


@pytest.mark.parametrize("nested", [True, False])
@pytest.mark.parametrize("mask", ["none", "padding", "both"])
def test_encoder_stack(nested, mask):
    """enable_nested_tensor=True with a padding mask packs the batch into a nested
    tensor between the layers: padded positions come out as 0 on both sides."""
    torch.manual_seed(1)
    layer = nn.TransformerEncoderLayer(E, HEADS, 64, dropout=0.0, batch_first=True)
    enc = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(E), enable_nested_tensor=nested)
    close(*run_both(enc, torch.randn(B, L, E), **masks()[mask]))


@pytest.mark.parametrize("mask_check", [True, False])
def test_encoder_stack_with_a_padding_mask_not_left_aligned(mask_check):
    """mask_check=True: not left aligned, so no nested tensor; mask_check=False:
    nested anyway, each sequence taking its first len rows, as ATen does."""
    torch.manual_seed(2)
    pad = torch.zeros(B, L, dtype=torch.bool)
    pad[1, 1] = True  # a hole in row 1
    pad[2, 4:] = True
    layer = nn.TransformerEncoderLayer(E, HEADS, 64, dropout=0.0, batch_first=True)
    enc = nn.TransformerEncoder(layer, 2, mask_check=mask_check)
    close(*run_both(enc, torch.randn(B, L, E), src_key_padding_mask=pad))


def test_full_transformer():
    torch.manual_seed(3)
    model = nn.Transformer(E, HEADS, 2, 2, 64, dropout=0.0, batch_first=True)
    src, tgt = torch.randn(B, L, E), torch.randn(B, 5, E)
    tgt_mask = nn.Transformer.generate_square_subsequent_mask(5)
    pad = torch.zeros(B, L, dtype=torch.bool)
    pad[1, 6:] = True
    close(*run_both(model, src, tgt, tgt_mask=tgt_mask, src_key_padding_mask=pad,
                    memory_key_padding_mask=pad))


@pytest.mark.parametrize("need_weights,average", [(False, True), (True, True), (True, False)])
@pytest.mark.parametrize("cross", [False, True])
def test_multihead_attention(need_weights, average, cross):
    torch.manual_seed(4)
    mha = nn.MultiheadAttention(E, HEADS, batch_first=True)
    q = torch.randn(B, L, E)
    kv = torch.randn(B, 5, E) if cross else q
    pad = torch.zeros(B, kv.size(1), dtype=torch.bool)
    pad[0, 3:] = True
    close(*run_both(mha, q, kv, kv, key_padding_mask=pad, need_weights=need_weights,
                    average_attn_weights=average))


def test_native_multi_head_attention_bad_masks():
    t = torch.randn(B, L, E, device="trn")
    w, b = torch.randn(3 * E, E, device="trn"), torch.randn(3 * E, device="trn")
    pw, pb = torch.randn(E, E, device="trn"), torch.randn(E, device="trn")
    op = torch._native_multi_head_attention
    with pytest.raises(RuntimeError, match=r"key padding mask \(mask_type 1\) of \[3, 7\]"):
        op(t, t, t, E, HEADS, w, b, pw, pb, torch.zeros(B, L + 1, dtype=torch.bool, device="trn"),
           False, True, 1)
    with pytest.raises(RuntimeError, match="mask_type 0, 1 or 2, got 5"):
        op(t, t, t, E, HEADS, w, b, pw, pb, torch.zeros(L, L, dtype=torch.bool, device="trn"),
           False, True, 5)
    with pytest.raises(RuntimeError, match="divisible by num_head 5"):
        op(t, t, t, E, 5, w, b, pw, pb, None, False, True, None)
