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


@pytest.mark.parametrize("name", ["llama", "gpt2", "mixtral"])
def test_generate_compiled_static_cache_compiles_prefill_and_decode_once(name):
    """The recipe of docs/compile.md: static cache, compiled forward."""
    model, _ = zoo.get(name).build("tiny")
    ids = _prompt(model)
    with torch.no_grad():
        want = model.generate(ids, cache_implementation="static", **GEN)
    model.to("trn")
    model.forward = torch.compile(model.forward, backend="trn")
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = model.generate(ids.to("trn"), cache_implementation="static", **GEN)
        assert torch.equal(got.cpu(), want)
        first = trnscope.compile_stats()
        # A second generation with the same shapes compiles nothing new.
        again = model.generate(ids.to("trn"), cache_implementation="static", **GEN)
    assert torch.equal(again.cpu(), want)
    # One program for the prefill (seq 6) and one for every decode step (seq 1).
    assert len(first) == 2, [(s["signature"][0]["shape"], s["recompile"]) for s in first]
    assert len(trnscope.compile_stats()) == 2
    assert all(s["fallback"] is None for s in first)
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
