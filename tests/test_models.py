"""Real models on trn: Hugging Face transformers families (built from small
configs, random weights) and a ResNet-style CNN, eager and compiled, against
CPU PyTorch on the same weights and inputs; greedy generate() with a KV cache,
eager and compiled with a static cache, against CPU's tokens.

Tolerances: float32 end to end. The trn kernels sum in a different order than
CPU PyTorch (blocked GEMM, fused reductions), so logits of a 2-layer model
differ by ~1e-6 relative; 1e-4 leaves room for the longer chains (T5, the CNN).
No op of these models may run through the CPU fallback (trnscope.fallback_ops()).
"""

import warnings

import pytest
import torch

import trnscope
from trnscope.studies import zoo

pytest.importorskip("transformers")

RTOL = ATOL = 1e-4


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _cpu_reference(name):
    spec = zoo.get(name)
    model, inputs = spec.build("tiny")
    with torch.no_grad():
        want = zoo.output_of(spec, model(**inputs))
    return spec, model, inputs, want


def _assert_no_fallback():
    assert trnscope.fallback_ops() == {}, trnscope.fallback_ops()


@pytest.mark.parametrize("name", zoo.NAMES)
def test_eager_matches_cpu(name):
    spec, model, inputs, want = _cpu_reference(name)
    model.to("trn")
    with torch.no_grad():
        got = zoo.output_of(spec, model(**zoo.to_device(inputs, "trn")))
    assert got.device.type == "trn"
    torch.testing.assert_close(got.cpu(), want, rtol=RTOL, atol=ATOL)
    _assert_no_fallback()


@pytest.mark.parametrize("name", zoo.NAMES)
def test_compiled_matches_cpu(name):
    spec, model, inputs, want = _cpu_reference(name)
    model.to("trn")
    compiled = torch.compile(model, backend="trn")
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # eager-node notices; asserted in test_compile.py
        got = zoo.output_of(spec, compiled(**zoo.to_device(inputs, "trn")))
    torch.testing.assert_close(got.cpu(), want, rtol=RTOL, atol=ATOL)
    stats = trnscope.compile_stats()
    assert stats, "the trn backend compiled nothing"
    assert all(s["fallback"] is None for s in stats), [s["fallback"] for s in stats]
    assert sum(s["num_kernels"] for s in stats) > 0
    _assert_no_fallback()


def test_deberta_v2_relative_attention_compiled_matches_cpu():
    """DeBERTa-v2's relative positions negate an int64 value viewed with a
    leading 1 (the program's library neg once aborted the process), and their
    buckets take sign and ceil: library kernels, no eager step."""
    from transformers import DebertaV2Config, DebertaV2Model

    cfg = DebertaV2Config(
        vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, relative_attention=True, pos_att_type=["p2c", "c2p"],
        position_buckets=32, max_relative_positions=64, position_biased_input=False,
    )
    torch.manual_seed(0)
    model = DebertaV2Model(cfg).eval()
    ids = torch.randint(3, 1000, (2, 16), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = model(ids).last_hidden_state
        model.to("trn")
        got = torch.compile(model, backend="trn")(ids.to("trn")).last_hidden_state
    torch.testing.assert_close(got.cpu(), want, rtol=RTOL, atol=ATOL)
    stats = trnscope.compile_stats()
    assert all(s["fallback"] is None and s["eager_nodes"] == [] for s in stats), stats
    _assert_no_fallback()


GEN = dict(max_new_tokens=8, min_new_tokens=8, do_sample=False)


def _prompt(model):
    g = torch.Generator().manual_seed(3)
    return torch.randint(3, model.config.vocab_size, (2, 6), generator=g)


@pytest.mark.parametrize("name", ["llama", "gpt2", "mixtral"])
def test_generate_eager_matches_cpu(name):
    model, _ = zoo.get(name).build("tiny")
    ids = _prompt(model)
    with torch.no_grad():
        want = model.generate(ids, **GEN)
        model.to("trn")
        got = model.generate(ids.to("trn"), **GEN)
    assert got.shape == want.shape == (2, 6 + GEN["max_new_tokens"])
    assert torch.equal(got.cpu(), want)
    _assert_no_fallback()


def _generate_compiled_static(model):
    """The recipe of docs/compile.md on `model` (moved to trn, forward compiled);
    asserts its greedy tokens equal CPU's. Returns the prompt and the tokens."""
    ids = _prompt(model)
    with torch.no_grad():
        want = model.generate(ids, cache_implementation="static", **GEN)
    model.to("trn")
    model.forward = torch.compile(model.forward, backend="trn")
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = model.generate(ids.to("trn"), cache_implementation="static", **GEN)
    assert torch.equal(got.cpu(), want)
    return ids, want


@pytest.mark.parametrize("name", ["llama", "gpt2", "mixtral"])
def test_generate_compiled_static_cache_compiles_prefill_and_decode_once(name):
    """The recipe of docs/compile.md: static cache, compiled forward."""
    model, _ = zoo.get(name).build("tiny")
    ids, want = _generate_compiled_static(model)
    first = trnscope.compile_stats()
    # A second generation with the same shapes compiles nothing new.
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = model.generate(ids.to("trn"), cache_implementation="static", **GEN)
    assert torch.equal(again.cpu(), want)
    # One program for the prefill (seq 6) and one for every decode step (seq 1).
    assert len(first) == 2, [(s["signature"][0]["shape"], s["recompile"]) for s in first]
    assert len(trnscope.compile_stats()) == 2
    assert all(s["fallback"] is None for s in first)
    _assert_no_fallback()


@pytest.mark.parametrize("window,programs", [(4096, 2), (8, 3)])
def test_generate_compiled_sliding_window_cache_matches_cpu(window, programs):
    """Mistral's sliding-window static cache passes its length as a Python int,
    which Dynamo makes a SymInt input; the decode program must not bake in the
    first step's value (Note [Number inputs] in backend.py). Window 8 fills up
    during the 14 tokens: its roll branch is a third graph."""
    from transformers import MistralConfig, MistralForCausalLM

    cfg = MistralConfig(
        vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, sliding_window=window,
        pad_token_id=0, bos_token_id=1, eos_token_id=2,
    )
    torch.manual_seed(0)
    _generate_compiled_static(MistralForCausalLM(cfg).eval())
    stats = trnscope.compile_stats()
    assert len(stats) == programs
    assert all(s["eager_nodes"] == [] and s["fallback"] is None for s in stats), stats
    _assert_no_fallback()


@pytest.mark.parametrize("name", ["llama", "mixtral", "vit", "resnet"])
def test_bfloat16_eager_and_compiled_match_cpu(name):
    """bfloat16 weights and inputs: trn computes in float32 and rounds what it
    stores, CPU PyTorch rounds every op, so both sit within a few bf16 ulps
    of each other (3e-2 of the output's scale)."""
    spec = zoo.get(name)
    model, inputs = spec.build("tiny")
    model = model.to(torch.bfloat16)
    inputs = {k: v.to(torch.bfloat16) if v.is_floating_point() else v for k, v in inputs.items()}
    with torch.no_grad():
        want = zoo.output_of(spec, model(**inputs)).float()
        model.to("trn")
        tin = zoo.to_device(inputs, "trn")
        eager = zoo.output_of(spec, model(**tin))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled = zoo.output_of(spec, torch.compile(model, backend="trn")(**tin))
    atol = 3e-2 * want.abs().max().item()
    for got in (eager, compiled):
        assert got.dtype == torch.bfloat16
        torch.testing.assert_close(got.float().cpu(), want, rtol=3e-2, atol=atol)
    _assert_no_fallback()


def test_vit_at_another_resolution_interpolates_its_position_embeddings():
    # interpolate_pos_encoding=True: a bicubic upsample of the patch-position grid.
    spec = zoo.get("vit")
    model, _ = spec.build("tiny")
    x = torch.randn(2, 3, 48, 40, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        want = model(pixel_values=x, interpolate_pos_encoding=True).logits
        model.to("trn")
        xt = x.to("trn")
        got = model(pixel_values=xt, interpolate_pos_encoding=True).logits
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled = torch.compile(model, backend="trn")(pixel_values=xt, interpolate_pos_encoding=True)
    torch.testing.assert_close(got.cpu(), want, rtol=RTOL, atol=ATOL)
    torch.testing.assert_close(compiled.logits.cpu(), want, rtol=RTOL, atol=ATOL)
    assert all(s["fallback"] is None for s in trnscope.compile_stats())
    _assert_no_fallback()


# ---- More families, compiled as a whole -------------------------------------------------------
def _families():
    """Tiny configs of families whose graphs ran eagerly as a whole or failed to
    compile before (each line says what they exercise)."""
    import transformers as T

    layers = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)
    ids = torch.randint(3, 200, (2, 16), generator=torch.Generator().manual_seed(0))
    mask = torch.ones(2, 16, dtype=torch.long)
    mask[1, 12:] = 0  # a padded row: the padding mask's advanced indexing
    text = {"input_ids": ids, "attention_mask": mask}
    pixels = {"pixel_values": torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))}
    audio = {"input_values": torch.randn(2, 800, generator=torch.Generator().manual_seed(0))}
    speech = dict(conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
                  num_conv_pos_embeddings=8, num_conv_pos_embedding_groups=4, **layers)
    return {
        # a torch.tensor literal on the CPU (Note [Host constants]) and a transposed
        # attention output viewed after rope (Note [Output layout])
        "mistral": (T.MistralConfig(vocab_size=256, num_key_value_heads=2, **layers),
                    T.MistralForCausalLM, text),
        "gemma2": (T.Gemma2Config(vocab_size=256, num_key_value_heads=2, head_dim=16, **layers),
                   T.Gemma2ForCausalLM, text),
        # shift_tokens_right: an eager copy into a select, viewed by its strides
        "bart": (T.BartConfig(vocab_size=256, d_model=64, encoder_layers=2, decoder_layers=2,
                              encoder_attention_heads=4, decoder_attention_heads=4,
                              encoder_ffn_dim=128, decoder_ffn_dim=128), T.BartModel, text),
        # 0-dim CPU constants through mul and sqrt
        "deberta-v2": (T.DebertaV2Config(vocab_size=256, **layers), T.DebertaV2Model, text),
        # a relative-position table built on the CPU with torch.arange
        "beit": (T.BeitConfig(image_size=32, patch_size=8, use_relative_position_bias=True, **layers),
                 T.BeitModel, pixels),
        # padding="valid" (one value for both dims)
        "siglip-vision": (T.SiglipVisionConfig(image_size=32, patch_size=8, **layers),
                          T.SiglipVisionModel, pixels),
        # repeat viewed as contiguous, group norm, weight norm
        "wavlm": (T.WavLMConfig(**speech), T.WavLMModel, audio),
        # cumsum positions, gather
        "opt": (T.OPTConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2,
                            num_attention_heads=4, ffn_dim=128, word_embed_proj_dim=64),
                T.OPTForCausalLM, text),
    }


FAMILIES = ["mistral", "gemma2", "bart", "deberta-v2", "beit", "siglip-vision", "wavlm", "opt"]


@pytest.mark.parametrize("name", FAMILIES)
def test_more_families_compile_as_one_program(name):
    config, cls, inputs = _families()[name]
    torch.manual_seed(0)
    model = cls(config).eval()
    out = "logits" if hasattr(model, "lm_head") else "last_hidden_state"
    with torch.no_grad():
        want = getattr(model(**inputs), out)
        model.to("trn")
        x = zoo.to_device(inputs, "trn")
        eager = getattr(model(**x), out)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the eager-node warnings
            compiled = getattr(torch.compile(model, backend="trn")(**x), out)
    torch.testing.assert_close(eager.cpu(), want, rtol=RTOL, atol=ATOL)
    torch.testing.assert_close(compiled.cpu(), want, rtol=RTOL, atol=ATOL)
    stats = trnscope.compile_stats()
    assert stats and all(s["fallback"] is None for s in stats), [s["fallback"] for s in stats]
    _assert_no_fallback()
