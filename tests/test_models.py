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


SAMPLED = dict(max_new_tokens=8, min_new_tokens=8, do_sample=True, top_k=20, top_p=0.9,
               temperature=0.7)


@pytest.mark.parametrize("name", ["llama", "gpt2", "mixtral"])
def test_generate_sampled_draws_cpu_tokens_from_one_seed(name):
    """do_sample=True (top-k, top-p, temperature): multinomial runs on trn from the
    variates CPU draws (Note [Multinomial]), so one seed gives CPU's tokens, eager
    and with the compiled-static recipe, with no fallback."""
    model, _ = zoo.get(name).build("tiny")
    ids = _prompt(model)
    with torch.no_grad():
        torch.manual_seed(42)
        want = model.generate(ids, **SAMPLED)
        torch.manual_seed(42)
        want_static = model.generate(ids, cache_implementation="static", **SAMPLED)
        model.to("trn")
        torch.manual_seed(42)
        got = model.generate(ids.to("trn"), **SAMPLED)
    assert torch.equal(got.cpu(), want)
    model.forward = torch.compile(model.forward, backend="trn")
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(42)
        got = model.generate(ids.to("trn"), cache_implementation="static", **SAMPLED)
    assert torch.equal(got.cpu(), want_static)
    assert len(trnscope.compile_stats()) == 2
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
    """Tiny configs of families that exercise what the zoo's models do not (each
    line says what), with their inputs and whether to redraw their weights."""
    import transformers as T

    layers = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)
    ids = torch.randint(3, 200, (2, 16), generator=torch.Generator().manual_seed(0))
    mask = torch.ones(2, 16, dtype=torch.long)
    mask[1, 12:] = 0  # a padded row: the padding mask's advanced indexing
    text = {"input_ids": ids, "attention_mask": mask}
    pixels = {"pixel_values": torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))}
    pixels64 = {"pixel_values": torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(0))}
    audio = {"input_values": torch.randn(2, 800, generator=torch.Generator().manual_seed(0))}
    speech = dict(conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
                  num_conv_pos_embeddings=8, num_conv_pos_embedding_groups=4, **layers)
    seq2seq = dict(vocab_size=256, d_model=64, encoder_layers=2, decoder_layers=2,
                   encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                   decoder_ffn_dim=128)
    features = {"input_features": torch.randn(2, 40, 16, generator=torch.Generator().manual_seed(0)),
                "decoder_input_ids": ids[:, :8]}
    return {
        # a torch.tensor literal on the CPU (Note [Host constants]), a transposed
        # attention output viewed after rope (Note [Output layout]), a sliding window
        "mistral": (T.MistralConfig(vocab_size=256, num_key_value_heads=2, sliding_window=8,
                                    **layers), T.MistralForCausalLM, text, False),
        # logit soft-capping, alternating sliding-window layers
        "gemma2": (T.Gemma2Config(vocab_size=256, num_key_value_heads=2, head_dim=16,
                                  sliding_window=8, **layers), T.Gemma2ForCausalLM, text, False),
        # partial rotary embeddings, a parallel attention/MLP block
        "phi": (T.PhiConfig(vocab_size=256, **layers), T.PhiForCausalLM, text, False),
        "gpt_neox": (T.GPTNeoXConfig(vocab_size=256, **layers), T.GPTNeoXForCausalLM, text, False),
        # interleaved rotary embeddings (not Note [Rotate half]'s pattern)
        "gptj": (T.GPTJConfig(vocab_size=256, n_embd=64, n_layer=2, n_head=4, n_inner=128,
                              rotary_dim=8, n_positions=64), T.GPTJForCausalLM, text, False),
        # alibi position biases
        "bloom": (T.BloomConfig(vocab_size=256, hidden_size=64, n_layer=2, n_head=4),
                  T.BloomForCausalLM, text, False),
        "falcon": (T.FalconConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2,
                                  num_attention_heads=4), T.FalconForCausalLM, text, False),
        # cumsum positions, gather
        "opt": (T.OPTConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2,
                            num_attention_heads=4, ffn_dim=128, word_embed_proj_dim=64),
                T.OPTForCausalLM, text, False),
        # shift_tokens_right: a copy into a select, viewed by its strides
        "bart": (T.BartConfig(**seq2seq), T.BartModel, text, False),
        # 0-dim CPU constants through mul and sqrt
        "deberta-v2": (T.DebertaV2Config(vocab_size=256, **layers), T.DebertaV2Model, text, False),
        # relative-position buckets: int64 neg of an unsqueezed value, sign, ceil
        "deberta-v2-relative": (T.DebertaV2Config(
            vocab_size=256, relative_attention=True, pos_att_type=["p2c", "c2p"],
            position_buckets=32, max_relative_positions=64, position_biased_input=False, **layers),
            T.DebertaV2Model, text, False),
        # glu convolutions, sinusoidal positions by index_select
        "speech_to_text": (T.Speech2TextConfig(input_feat_per_channel=16, num_conv_layers=2,
                                               conv_channels=32, max_source_positions=64,
                                               max_target_positions=64, **seq2seq),
                           T.Speech2TextModel, features, False),
        # a relative-position table built on the CPU with torch.arange
        "beit": (T.BeitConfig(image_size=32, patch_size=8, use_relative_position_bias=True, **layers),
                 T.BeitModel, pixels, False),
        # padding="valid" (one value for both dims)
        "siglip-vision": (T.SiglipVisionConfig(image_size=32, patch_size=8, **layers),
                          T.SiglipVisionModel, pixels, False),
        # two towers and a logit scale
        "clip": (T.CLIPConfig(text_config=dict(vocab_size=256, max_position_embeddings=32, **layers),
                              vision_config=dict(image_size=32, patch_size=8, **layers),
                              projection_dim=32), T.CLIPModel, {**text, **pixels}, False),
        # shifted windows: roll, window partition views
        "swin": (T.SwinConfig(image_size=32, patch_size=2, embed_dim=32, depths=[1, 1],
                              num_heads=[2, 4], window_size=4, num_labels=10),
                 T.SwinForImageClassification, pixels, True),
        # depthwise 7x7 convolutions, channels-last layer norms, layer scale
        "convnext": (T.ConvNextConfig(num_stages=2, hidden_sizes=[16, 32], depths=[1, 1],
                                      image_size=32, num_labels=10),
                     T.ConvNextForImageClassification, pixels, True),
        # conv-bn-silu (Note [Conv epilogue]), squeeze-and-excitation
        "efficientnet": (T.EfficientNetConfig(image_size=64, width_coefficient=0.25,
                                              depth_coefficient=0.25, hidden_dim=320, num_labels=10),
                         T.EfficientNetForImageClassification, pixels64, True),
        # overlapping patch embeddings, reduced-resolution attention, bilinear upsampling
        "segformer": (T.SegformerConfig(num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1],
                                        hidden_sizes=[16, 32], patch_sizes=[7, 3], strides=[4, 2],
                                        num_attention_heads=[1, 2], mlp_ratios=[2, 2],
                                        decoder_hidden_size=32, num_labels=5),
                      T.SegformerForSemanticSegmentation, pixels64, True),
        # repeat viewed as contiguous, group norm, weight norm
        "wavlm": (T.WavLMConfig(**speech), T.WavLMModel, audio, False),
        # linear attention: the chunked gated delta rule's unit-lower chunk systems
        # (linalg_solve_triangular), a depthwise causal conv1d
        "qwen3_5": (T.Qwen3_5TextConfig(vocab_size=256, num_key_value_heads=2, head_dim=16,
                                        linear_num_value_heads=4, linear_num_key_heads=2,
                                        linear_key_head_dim=16, linear_value_head_dim=16,
                                        layer_types=["linear_attention", "full_attention"],
                                        **layers), T.Qwen3_5ForCausalLM, text, False),
        # transient-global attention: a 5-D unsqueeze(1).repeat (10 dims in ATen's composite)
        "longt5": (T.LongT5Config(vocab_size=256, d_model=64, d_kv=16, d_ff=128, num_layers=2,
                                  num_heads=4, decoder_start_token_id=0, pad_token_id=0,
                                  encoder_attention_type="transient-global", local_radius=4,
                                  global_block_size=4),
                   T.LongT5Model, {**text, "decoder_input_ids": ids[:, :8]}, False),
        # the rotary embedding as a complex product with freqs_cis (Note [Complex
        # values]), top-1 MoE layers, chunked attention
        "llama4": (T.Llama4TextConfig(vocab_size=256, num_key_value_heads=2, head_dim=16,
                                      intermediate_size_mlp=128, num_local_experts=4,
                                      num_experts_per_tok=1, interleave_moe_layer_step=1,
                                      no_rope_layers=[1, 1], attention_chunk_size=8,
                                      pad_token_id=0, **layers),
                   T.Llama4ForCausalLM, text, False),
        # an audio codec: transposed 1-D convolutions upsample, ELU, an LSTM
        "encodec": (T.EncodecConfig(hidden_size=16, num_filters=4, upsampling_ratios=[4, 2],
                                    codebook_size=32, codebook_dim=16, num_lstm_layers=1),
                    T.EncodecModel,
                    {"input_values": torch.randn(1, 1, 400, generator=torch.Generator().manual_seed(2))},
                    False),
    }


FAMILIES = [
    "mistral", "gemma2", "phi", "gpt_neox", "gptj", "bloom", "falcon", "opt", "bart", "deberta-v2",
    "deberta-v2-relative", "speech_to_text", "beit", "siglip-vision", "clip", "swin", "convnext",
    "efficientnet", "segformer", "wavlm", "longt5", "qwen3_5", "llama4", "encodec",
]
def _redraw(model):
    """He-scaled weights and non-trivial batch-norm statistics: transformers'
    own initialisation leaves some vision models' logits nearly equal for any
    input, which would make the comparison blind."""
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)):
                fan_in = m.weight[0].numel()
                m.weight.copy_(torch.randn(m.weight.shape, generator=g) * (2 / fan_in) ** 0.5)
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.copy_(torch.rand(m.running_mean.shape, generator=g) * 0.2 - 0.1)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)
                m.weight.copy_(torch.rand(m.weight.shape, generator=g) + 0.5)


def _main_output(out):
    for key in ("logits", "logits_per_image", "last_hidden_state", "audio_values"):
        if getattr(out, key, None) is not None:
            return getattr(out, key)
    raise AssertionError(f"no output to compare in {type(out).__name__}")


@pytest.mark.parametrize("name", FAMILIES)
def test_more_families_compile_as_one_program(name):
    config, cls, inputs, redraw = _families()[name]
    torch.manual_seed(0)
    model = cls(config).eval()
    if redraw:
        _redraw(model)
    with torch.no_grad():
        want = _main_output(model(**inputs))
        model.to("trn")
        x = zoo.to_device(inputs, "trn")
        eager = _main_output(model(**x))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the eager-node warnings
            compiled = _main_output(torch.compile(model, backend="trn")(**x))
    scale = max(1.0, want.abs().max().item())
    assert want.std() > 1e-3 * scale, "a degenerate output would make the comparison blind"
    torch.testing.assert_close(eager.cpu(), want, rtol=RTOL, atol=ATOL * scale)
    torch.testing.assert_close(compiled.cpu(), want, rtol=RTOL, atol=ATOL * scale)
    stats = trnscope.compile_stats()
    assert stats and all(s["fallback"] is None for s in stats), [s["fallback"] for s in stats]
    assert [n for s in stats for n in s["eager_nodes"]] == []
    _assert_no_fallback()


def _vision_language(name):
    """LLaVA and Qwen2-VL: image features put into the text embeddings with
    masked_scatter (Qwen2-VL: a Conv3d patch embedding and multimodal RoPE too)."""
    import transformers as T

    g = torch.Generator().manual_seed(3)
    if name == "llava":
        config = T.LlavaConfig(
            vision_config=T.CLIPVisionConfig(hidden_size=32, intermediate_size=64,
                                             num_hidden_layers=2, num_attention_heads=2,
                                             image_size=32, patch_size=8),
            text_config=T.LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2),
            image_token_index=100, vision_feature_layer=-1)
        ids = torch.cat([torch.tensor([[1]]), torch.full((1, 16), 100),
                         torch.randint(2, 99, (1, 5), generator=g)], 1).repeat(2, 1)
        inputs = {"input_ids": ids, "pixel_values": torch.randn(2, 3, 32, 32, generator=g),
                  "attention_mask": torch.ones_like(ids)}
        return T.LlavaForConditionalGeneration(config), inputs
    config = T.Qwen2VLConfig(
        text_config=dict(vocab_size=160, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2,
                         rope_scaling={"type": "mrope", "mrope_section": [2, 1, 1]}),
        vision_config=dict(depth=1, embed_dim=32, hidden_size=32, num_heads=2, patch_size=4,
                           spatial_merge_size=2, temporal_patch_size=2, in_chans=3),
        image_token_id=150, video_token_id=151, vision_start_token_id=152)
    ids = torch.cat([torch.tensor([[1, 152]]), torch.full((1, 4), 150),
                     torch.randint(2, 99, (1, 5), generator=g)], 1)
    inputs = {"input_ids": ids, "pixel_values": torch.randn(16, 96, generator=g),
              "image_grid_thw": torch.tensor([[1, 4, 4]]), "attention_mask": torch.ones_like(ids),
              "mm_token_type_ids": (ids == 150).long()}
    return T.Qwen2VLForConditionalGeneration(config), inputs


@pytest.mark.parametrize("name", ["llava", "qwen2vl"])
def test_vision_language_models_match_cpu(name):
    torch.manual_seed(0)
    model, inputs = _vision_language(name)
    model.eval()
    with torch.no_grad():
        want = model(**inputs).logits
        want_tokens = model.generate(**inputs, max_new_tokens=6, do_sample=False)
        model.to("trn")
        x = zoo.to_device(inputs, "trn")
        torch.testing.assert_close(model(**x).logits.cpu(), want, rtol=RTOL, atol=ATOL)
        assert torch.equal(model.generate(**x, max_new_tokens=6, do_sample=False).cpu(),
                           want_tokens)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # graph breaks and eager-node warnings
            compiled = torch.compile(model, backend="trn")(**x).logits
        torch.testing.assert_close(compiled.cpu(), want, rtol=RTOL, atol=ATOL)
    assert all(s["fallback"] is None for s in trnscope.compile_stats())
    _assert_no_fallback()
