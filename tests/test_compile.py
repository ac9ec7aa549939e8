"""torch.compile(backend="trn"): numerics, kernel counts, recompiles, fallback, artifacts.

References: CPU PyTorch (float32: rtol = atol = 1e-4) and the same module run
eagerly on trn (float32: 1e-5). bfloat16: the compiled program computes fused
chains in float32 and rounds only what it stores, eager trn and CPU round
every op to bfloat16, so both comparisons use 5e-2 (the tolerance of
test_decoder.py), and the CPU float32 model on the same bfloat16 weights
bounds the compiled error tighter (3e-2).

Kernels are counted with torch.ops.trnscope._count_launches, which counts
every launch by kernel name, eager or compiled alike.
"""

import json
import math
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils._pytree as pytree

import trnscope
import trnscope.compile
from trnscope import shapes
from conftest import launch_counts, run_python
from test_decoder import HEADS, SEQ
from test_decoder import HIDDEN as DECODER_HIDDEN
from trnscope.studies import models

DIM, HIDDEN = 64, 96


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    trnscope.reset_compile_stats()
    yield
    torch._dynamo.reset()


def launches(fn, *args):
    """{kernel name: launches} of fn(*args), after a warm-up call (compiles)."""
    out = []
    with torch.inference_mode():
        fn(*args)
        counts = launch_counts(lambda: out.append(fn(*args)))
    return counts, out[0]


# ---- Models ----------------------------------------------------------------------------------
def rms_norm():  # the seed's naive form: pow/mean/add/rsqrt/mul/mul
    return models.NaiveRMSNorm(DIM)


def fused_rms_norm():
    return models.FusedRMSNorm(DIM)


class LayerNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(DIM)
        with torch.no_grad():
            self.ln.weight.uniform_(0.5, 1.5)
            self.ln.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return self.ln(x)


class Softmax(nn.Module):
    def forward(self, x):
        return torch.softmax(x * 0.5, dim=-1)


class GeluMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up, self.down = nn.Linear(DIM, HIDDEN), nn.Linear(HIDDEN, DIM)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(x), approximate="tanh"))


def swiglu_mlp():
    return models.SwiGLU(DIM, HIDDEN)


def decoder_block(fused_rms_norm=True):
    """A Llama block (trnscope.studies.models) at test_decoder.py's sizes."""
    return models.DecoderBlockModel(DIM, HEADS, DECODER_HIDDEN, SEQ, fused_rms_norm)


MODELS = {
    "rms_norm": rms_norm,
    "fused_rms_norm": fused_rms_norm,
    "layer_norm": LayerNorm,
    "softmax": Softmax,
    "gelu_mlp": GeluMLP,
    "swiglu_mlp": swiglu_mlp,
    "decoder_block": decoder_block,
}


def make(name, dtype=torch.float32, seed=0):
    torch.manual_seed(seed)
    model = MODELS[name]().eval().to(dtype)
    x = torch.randn(2, SEQ, DIM).to(dtype)
    return model, x


@pytest.mark.parametrize("name", list(MODELS))
def test_float32_matches_eager_trn_and_cpu(name):
    model, x = make(name)
    with torch.inference_mode():
        want_cpu = model(x)
        model.to("trn")
        xt = x.to("trn")
        want_trn = model(xt)
        got = torch.compile(model, backend="trn", dynamic=False)(xt)
    assert got.device.type == "trn" and got.dtype == torch.float32
    assert got.shape == want_trn.shape and got.stride() == want_trn.stride()
    torch.testing.assert_close(got.cpu(), want_trn.cpu(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got.cpu(), want_cpu, rtol=1e-4, atol=1e-4)
    (stats,) = trnscope.compile_stats()
    assert stats["fallback"] is None and stats["num_kernels"] >= 1


@pytest.mark.parametrize(
    "name", ["rms_norm", "layer_norm", "softmax", "gelu_mlp", "swiglu_mlp", "decoder_block"]
)
def test_bfloat16_matches_eager_trn_and_cpu(name):
    model, x = make(name, torch.bfloat16, seed=1)
    with torch.inference_mode():
        want_cpu = model(x).float()
        want_f32 = model.float()(x.float())  # same bf16-rounded weights and input, f32 math
        model.to(torch.bfloat16).to("trn")
        xt = x.to("trn")
        want_trn = model(xt).cpu().float()
        got = torch.compile(model, backend="trn", dynamic=False)(xt)
    assert got.dtype == torch.bfloat16
    got = got.cpu().float()
    torch.testing.assert_close(got, want_trn, rtol=5e-2, atol=5e-2)
    torch.testing.assert_close(got, want_cpu, rtol=5e-2, atol=5e-2)
    torch.testing.assert_close(got, want_f32, rtol=3e-2, atol=3e-2)


# ---- Kernel counts ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["rms_norm", "fused_rms_norm"])
def test_compiled_rms_norm_is_one_kernel(name):
    model, x = make(name)
    model.to("trn")
    eager, _ = launches(model, x.to("trn"))
    compiled, _ = launches(torch.compile(model, backend="trn", dynamic=False), x.to("trn"))
    assert compiled == {"fused[pow,mean,add,rsqrt,mul,mul]": 1}
    assert sum(eager.values()) == (6 if name == "rms_norm" else 1), eager


def test_compiled_rms_norm_device_time_is_one_kernel_in_the_profiler():
    from torch.profiler import ProfilerActivity, profile

    model, x = make("rms_norm")
    model.to("trn")
    x = x.to("trn")
    compiled = torch.compile(model, backend="trn", dynamic=False)
    with torch.inference_mode():
        compiled(x)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            compiled(x)
            torch.trn.synchronize()
    device = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1]
    assert [e.name for e in device] == ["fused[pow,mean,add,rsqrt,mul,mul]"]
    rows = {r.key: r for r in prof.key_averages()}
    assert rows["fused[pow,mean,add,rsqrt,mul,mul]"].self_device_time_total > 0


def test_decoder_block_launches_far_fewer_kernels_than_eager():
    model, x = make("decoder_block")
    model.block.attn_norm.fused = model.block.mlp_norm.fused = False  # the naive RMSNorm
    model.to("trn")
    x = x.to("trn")
    eager, want = launches(model, x)
    compiled, got = launches(torch.compile(model, backend="trn", dynamic=False), x)
    torch.testing.assert_close(got.cpu(), want.cpu(), rtol=1e-5, atol=1e-5)
    (stats,) = trnscope.compile_stats()
    # Every program kernel is one launch and nothing runs eagerly; each rotary
    # embedding, rotate_half's neg and cat included, is one kernel (Note [Rotate half]).
    program = sum(n for k, n in compiled.items() if k in stats["kernels"])
    assert program == stats["num_kernels"] == sum(compiled.values())
    assert stats["eager_nodes"] == []
    assert stats["kernels"].count("fused[rotate_half,mul,mul,add]") == 2, stats["kernels"]
    assert not any(k in ("cat", "neg") for k in stats["kernels"]), stats["kernels"]
    # Each naive RMSNorm chain (plus the residual add before it) is one kernel.
    assert sum(1 for k in stats["kernels"] if k.endswith("pow,mean,add,rsqrt,mul,mul]")) == 2
    # Rope's results keep q's and k's [B, S, H, D] memory order, as on CPU (Note
    # [Output layout]), so eager matmul's reshape copies them: 2 of the 42.
    assert sum(eager.values()) == 42
    assert sum(compiled.values()) <= 0.65 * sum(eager.values()), (eager, compiled)


# ---- Recompiles and static shapes ------------------------------------------------------------
def test_new_shapes_with_dynamic_false_are_counted_and_explained():
    model, _ = make("rms_norm")
    model.to("trn")
    compiled = torch.compile(model, backend="trn", dynamic=False)
    with torch.inference_mode():
        for rows in (4, 6, 6, 4):
            compiled(torch.randn(rows, DIM, device="trn"))
    stats = trnscope.compile_stats()
    assert len(stats) == 2  # the repeated shapes hit Dynamo's cache
    assert stats[0]["graph_hash"] == stats[1]["graph_hash"]
    assert not stats[0]["recompile"] and stats[1]["recompile"]
    (change,) = stats[1]["changed_inputs"]
    assert change["index"] == 0 and "x" in change["name"]
    assert change["what"] == "shape" and change["old"] == [4, DIM] and change["new"] == [6, DIM]
    assert stats[1]["signature"][0]["shape"] == [6, DIM]


def test_number_inputs_key_programs_only_when_tensor_ops_read_them():
    """Note [Number inputs]: a SymInt a tensor op reads is baked into the
    program, so each value gets its own (never the first value's); one that
    only feeds number outputs is computed per call by one program."""
    x = torch.zeros(4, device="trn")
    add = torch.compile(lambda x, n: x + n, backend="trn", dynamic=True)
    for n in (2, 3, 4):
        assert add(x, n).cpu().tolist() == [float(n)] * 4
    stats = trnscope.compile_stats()
    assert len(stats) == 3 and len({s["graph_hash"] for s in stats}) == 1
    (change,) = stats[2]["changed_inputs"]
    assert change["what"] == "value" and (change["old"], change["new"]) == (3, 4)
    assert {"value": 4, "dtype": "int"} in stats[2]["signature"]
    trnscope.reset_compile_stats()
    counts = torch.compile(lambda x, n: (x * 2, n + 1, n * 3 - 1), backend="trn", dynamic=True)
    for n in (2, 3, 4, 7):
        y, a, b = counts(x, n)
        assert (a, b) == (n + 1, n * 3 - 1)
        assert y.cpu().tolist() == [0.0] * 4
    assert len(trnscope.compile_stats()) == 1


def test_a_number_input_passed_through_is_the_calls_own():
    """A graph that returns a size unchanged (the part before a graph break, as
    JetMoE's router has) returned the first dynamic call's value forever."""
    def f(x):
        n = x.size(1)
        torch._dynamo.graph_break()
        return x.new_full((n,), 1.0) * x.mean()

    compiled = torch.compile(f, backend="trn")
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for length in (12, 7, 10, 5):
            x = torch.randn(2, length, 4, generator=torch.Generator().manual_seed(length))
            torch.testing.assert_close(compiled(x.to("trn")).cpu(), f(x))


def test_many_signatures_warn_once_with_a_bucket_list(monkeypatch):
    monkeypatch.setattr(trnscope.compile.config, "max_signatures_before_warning", 2)
    model = Softmax()
    compiled = torch.compile(model, backend="trn", dynamic=False)
    with warnings.catch_warnings(record=True) as caught, torch.inference_mode():
        warnings.simplefilter("always")
        for n in (5, 9, 17, 30):
            compiled(torch.randn(2, n, device="trn"))
    ours = [w for w in caught if "input signatures" in str(w.message)]
    assert len(ours) == 1, [str(w.message) for w in caught]
    msg = str(ours[0].message)
    assert "[5, 9, 17]" in msg and "[4, 8, 16, 32]" in msg
    assert trnscope.compile_stats()[-1]["num_signatures"] == 4


def test_many_signatures_of_a_dynamic_graph_pair_inputs_by_name(monkeypatch):
    # dynamic=None: the second length makes Dynamo's graph dynamic, which gains a
    # size input (s0) in front of x; the sizes are still x's, paired by name.
    monkeypatch.setattr(trnscope.compile.config, "max_signatures_before_warning", 2)
    torch._dynamo.reset()
    compiled = torch.compile(lambda x: torch.softmax(x * 2, -1), backend="trn")
    with warnings.catch_warnings(record=True) as caught, torch.inference_mode():
        warnings.simplefilter("always")
        for n in (5, 9, 17):
            compiled(torch.randn(2, n, device="trn"))
    ours = [str(w.message) for w in caught if "input signatures" in str(w.message)]
    assert len(ours) == 1, ours
    assert "'l_x_ dim 1': [5, 9, 17]" in ours[0] and "[4, 8, 16, 32]" in ours[0], ours[0]


def _layer_block(lin, x):
    return torch.relu(lin(x)) * 2


def test_many_signatures_from_weights_say_padding_does_not_apply(monkeypatch):
    # One function run for layers of different sizes: the weights change shape,
    # so each layer gets a program; the warning must not advise padding.
    monkeypatch.setattr(trnscope.compile.config, "max_signatures_before_warning", 2)
    torch._dynamo.reset()
    torch.manual_seed(0)
    sizes = [3, 5, 7, 9]
    layers = [torch.nn.Linear(a, b) for a, b in zip(sizes, sizes[1:])]
    on_trn = [torch.nn.Linear(a, b).to("trn") for a, b in zip(sizes, sizes[1:])]
    for cpu, trn in zip(layers, on_trn):
        trn.load_state_dict(cpu.state_dict())
    compiled = torch.compile(_layer_block, backend="trn")
    x = torch.randn(2, 3)
    with warnings.catch_warnings(record=True) as caught, torch.inference_mode():
        warnings.simplefilter("always")
        got, want = x.to("trn"), x
        for cpu, trn in zip(layers, on_trn):
            got, want = compiled(trn, got), _layer_block(cpu, want)
    torch.testing.assert_close(got.cpu(), want)
    ours = [str(w.message) for w in caught if "input signatures" in str(w.message)]
    assert len(ours) == 1, ours
    assert "Weights change shape" in ours[0] and "'l_lin_parameters_weight_ dim 0': [5, 7, 9]" \
        in ours[0] and "padding does not apply" in ours[0], ours[0]
    assert "pad_to_bucket" not in ours[0]


def masked_attention(q, k, v, key_bias):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) + key_bias
    return torch.softmax(scores, dim=-1) @ v


def test_bucket_recipe_keeps_one_program_for_20_lengths():
    buckets = shapes.buckets(32, 64)
    assert buckets == [32, 64]
    compiled = torch.compile(masked_attention, backend="trn", dynamic=False)
    lengths = range(41, 61)
    with torch.inference_mode():
        for n in lengths:
            q, k, v = (torch.randn(2, n, 16) for _ in range(3))
            want = torch.softmax(q @ k.transpose(-2, -1) / 4.0, -1) @ v
            padded = [shapes.pad_to_bucket(t.to("trn"), 1, buckets) for t in (q, k, v)]
            info = padded[0][1]
            assert info.bucket == 64 and info.length == n
            bias = info.attention_bias(device="trn")
            out = compiled(*(p for p, _ in padded), bias)
            got = shapes.unpad(out, info)
            torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-4)
    assert len(trnscope.compile_stats()) == 1


def test_buckets_pad_and_unpad():
    assert shapes.buckets(1, 100) == [1, 2, 4, 8, 16, 32, 64, 128]
    assert shapes.buckets(20, 100) == [16, 32, 64, 128]
    assert shapes.buckets(10, 100, step=32) == [32, 64, 96, 128]
    assert shapes.buckets(64, 128, step=32) == [64, 96, 128]
    with pytest.raises(ValueError, match="min_size"):
        shapes.buckets(0, 10)
    x = torch.arange(12.0).reshape(2, 6).to("trn")
    p, info = shapes.pad_to_bucket(x, -1, [4, 8], value=-1)
    assert p.shape == (2, 8) and (info.length, info.bucket, info.dim) == (6, 8, 1)
    assert p.cpu()[:, 6:].eq(-1).all()
    torch.testing.assert_close(shapes.unpad(p, info).cpu(), x.cpu())
    assert info.mask().tolist() == [True] * 6 + [False] * 2
    with pytest.raises(ValueError, match="exceeds the largest bucket 4"):
        shapes.pad_to_bucket(x, 1, [2, 4])


# ---- Fallback, artifacts, float64 ------------------------------------------------------------
def test_unsupported_node_runs_eagerly_inside_the_program():
    def fn(x, y):
        h = torch.hypot(x * 2, y) + y  # hypot: not a core op
        return torch.relu(h) + 1

    x, y = torch.randn(3, 5), torch.randn(3, 5)
    compiled = torch.compile(fn, backend="trn", dynamic=False)
    with torch.inference_mode(), pytest.warns(UserWarning, match="aten.hypot.default runs as an eager"):
        got = compiled(x.to("trn"), y.to("trn"))
    torch.testing.assert_close(got.cpu(), fn(x, y))
    (stats,) = trnscope.compile_stats()
    assert stats["eager_nodes"] == ["aten.hypot.default"] and stats["fallback"] is None
    assert stats["eager_reasons"] == ["no core op for aten.hypot.default"]
    assert stats["num_kernels"] == 2  # x * 2 before it, + y, relu, + 1 after it


def test_eager_step_with_an_out_overload_writes_the_program_buffer():
    """An eager node with an out= overload (atan2, which the core does not take)
    writes its planned buffer through atan2.out: no copy after it."""
    from torch.profiler import ProfilerActivity, profile

    def fn(x, y):
        return torch.atan2(x.abs(), y) * y  # the eager step feeds a core op

    x, y = torch.randn(3, 5), torch.randn(3, 5)
    compiled = torch.compile(fn, backend="trn", dynamic=False)
    args = (x.to("trn"), y.to("trn"))
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled(*args)
        torch.trn.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as p:
            got = compiled(*args)
            torch.trn.synchronize()
    torch.testing.assert_close(got.cpu(), fn(x, y))
    (stats,) = trnscope.compile_stats()
    assert stats["eager_nodes"] == ["aten.atan2.default"]
    keys = {k.key for k in p.key_averages()}
    assert "atan2_f32" in keys and not any(k.startswith("copy_") for k in keys), keys


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_log1p_and_expm1_fuse(dtype):
    """Mamba's softplus, log1p(exp(x)), and expm1 are row-interpreter ops: one fused
    kernel, accurate near 0 where log(1 + x) and exp(x) - 1 lose every digit."""

    def fn(x):
        return torch.log1p(torch.exp(x)) + torch.expm1(x) * torch.log1p(x)

    x = torch.cat([torch.randn(4, 100) * 4, torch.randn(4, 100) * 1e-6, torch.rand(4, 100) * 30], 1)
    x[0, :3] = torch.tensor([-1.0, 0.0, float("nan")])  # log1p(-1) = -inf
    x = x.to(dtype)
    compiled = torch.compile(fn, backend="trn", dynamic=False)
    with torch.inference_mode():
        got = compiled(x.to("trn")).cpu()
    want = fn(x.double()).to(dtype)
    (stats,) = trnscope.compile_stats()
    # Two row kernels: sibling chains of one input start groups of their own.
    assert stats["eager_nodes"] == [], stats["eager_reasons"]
    assert stats["kernels"] == ["fused[exp,log1p]", "fused[expm1,log1p,mul,add]"]
    tol = 2e-6 if dtype == torch.float32 else 1e-2
    torch.testing.assert_close(got, want, rtol=tol, atol=0, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_erf_spelled_gelu_is_one_fused_kernel(dtype):
    """ESM's and SEW-D's gelu, x * 0.5 * (1 + erf(x / sqrt 2)): erf was an eager step."""

    def fn(x):
        return x * 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))

    x = torch.cat([torch.randn(4, 100) * 3, torch.randn(4, 100) * 1e-4], 1)
    x[0, :4] = torch.tensor([float("inf"), -float("inf"), float("nan"), -0.0])
    x = x.to(dtype)
    got = torch.compile(fn, backend="trn", dynamic=False)(x.to("trn")).cpu()
    (stats,) = trnscope.compile_stats()
    assert stats["eager_nodes"] == [], stats["eager_reasons"]
    assert len(stats["kernels"]) == 1, stats["kernels"]
    tol = 2e-6 if dtype == torch.float32 else 1e-2
    torch.testing.assert_close(got, fn(x.double()).to(dtype), rtol=tol, atol=1e-7, equal_nan=True)


class _HostTable(nn.Module):
    """VideoMAE's pattern: a plain tensor attribute (not a buffer, so .to("trn")
    leaves it on the CPU) moved to the input's device on every call."""

    def __init__(self, cpu_output: bool = False):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.table = torch.randn(1, 4, 8)
        self.cpu_output = cpu_output

    def forward(self, x):
        pos = self.table.detach().type_as(x).to(x.device, copy=True)
        y = self.lin(x + pos * 2)
        return (y, self.table * 3) if self.cpu_output else y


def test_a_cpu_tensor_moved_to_the_device_per_call_is_a_program_input():
    # Note [Host inputs]: the table is copied to trn when the program runs.
    m = _HostTable().eval()
    x = torch.randn(2, 4, 8)
    with torch.no_grad():
        want = m(x)
        m.to("trn")
        assert m.table.device.type == "cpu"
        compiled = torch.compile(m, backend="trn")
        got = compiled(x.to("trn"))
        torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
        m.table.add_(1.0)  # changed on the host: the next call copies the new values
        got = compiled(x.to("trn"))
        torch.testing.assert_close(got.cpu(), m.cpu()(x), rtol=1e-5, atol=1e-5)
    (stats,) = trnscope.compile_stats()
    assert stats["fallback"] is None and stats["num_kernels"] >= 1


def test_a_graph_returning_a_cpu_tensor_still_runs_eagerly():
    m = _HostTable(cpu_output=True).eval()
    x = torch.randn(2, 4, 8)
    with torch.no_grad():
        want_y, want_t = m(x)
        m.to("trn")
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            got_y, got_t = torch.compile(m, backend="trn")(x.to("trn"))
    assert got_t.device.type == "cpu" and got_y.device.type == "trn"
    torch.testing.assert_close(got_t, want_t)
    torch.testing.assert_close(got_y.cpu(), want_y, rtol=1e-5, atol=1e-5)
    stats = trnscope.compile_stats()
    assert stats and "cpu" in str(stats[0]["fallback"]), stats


class _HostConstants(torch.nn.Module):
    """Tensors built on the CPU from constants alone, as Mistral's mask value
    (a torch.tensor literal) and BEiT's relative position table (torch.arange
    without a device) are."""

    def __init__(self, cpu_output=False):
        super().__init__()
        self.cpu_output = cpu_output

    def forward(self, x):
        floor = torch.tensor(-0.25)  # 0-dim, on the CPU
        n = x.shape[-1]
        pos = torch.arange(n)
        rel = (pos[:, None] - pos[None, :]).abs().clamp(max=3)  # [n, n] on the CPU
        bias = torch.tensor([0.5, -1.0, 2.0, 0.25])[rel].to(x.device)
        y = torch.maximum(x @ bias, floor)
        return (y, rel) if self.cpu_output else y


def test_tensors_built_on_the_host_from_constants_are_folded_at_compile_time():
    # Note [Host constants]: before, such a graph ran eagerly as a whole.
    m = _HostConstants()
    x = torch.randn(2, 3, 6)
    want = m(x)
    with torch.no_grad():
        got = torch.compile(m, backend="trn")(x.to("trn"))
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
    (stats,) = trnscope.compile_stats()
    assert stats["fallback"] is None and stats["eager_nodes"] == [], stats
    assert "arange" not in stats["kernels"]  # computed once, not per call


def test_a_host_constant_the_graph_returns_stays_on_the_host():
    m = _HostConstants(cpu_output=True)
    x = torch.randn(2, 3, 6)
    want_y, want_rel = m(x)
    with torch.no_grad(), warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        got_y, got_rel = torch.compile(m, backend="trn")(x.to("trn"))
    assert got_rel.device.type == "cpu" and got_y.device.type == "trn"
    torch.testing.assert_close(got_rel, want_rel)
    torch.testing.assert_close(got_y.cpu(), want_y, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_integer_operands_of_floating_ops_fuse(dtype):
    # torch casts the integers to the floating result type first; the fused
    # kernel widens them as it loads them (before: one eager step per op).
    def fn(x, i, j):
        return ((x - i) * 2, x * i + j, x**j, (x > i).to(x.dtype) + x, torch.where(x > 0, x, i),
                i / x, (i / 3).to(x.dtype), (j * 0.5).to(x.dtype), i.clamp(0.5, 2).to(x.dtype))

    x = torch.randn(4, 6).to(dtype)
    i = torch.randint(-3, 4, (4, 6))
    j = torch.randint(0, 3, (6,), dtype=torch.int32)
    want = fn(x, i, j)
    got = torch.compile(fn, backend="trn", dynamic=False)(x.to("trn"), i.to("trn"), j.to("trn"))
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        torch.testing.assert_close(g.cpu(), w, rtol=tol, atol=tol)
    (stats,) = trnscope.compile_stats()
    assert stats["eager_nodes"] == [], stats["eager_reasons"]


@pytest.mark.parametrize("shape,reps", [((2, 3, 4, 5), (1, 2, 1, 1, 1)), ((2, 3, 4, 5, 6), (2, 2, 2, 2, 2)),
                                        ((3,), (2, 2, 2, 2, 2, 2, 2, 2))], ids=str)
def test_repeat_of_many_dims_compiles_to_core_ops(shape, reps):
    # torch's repeat decomposition viewed 5-D inputs in 10 dims: the whole graph
    # fell back (LongT5's transient-global attention, unsqueeze(1).repeat).
    x = torch.randn(shape)
    got = torch.compile(lambda t: t.repeat(*reps) * 2, backend="trn", dynamic=False)(x.to("trn"))
    torch.testing.assert_close(got.cpu(), x.repeat(*reps) * 2, rtol=0, atol=0)
    (stats,) = trnscope.compile_stats()
    assert stats["fallback"] is None and stats["eager_nodes"] == [], stats


def test_integers_of_two_widths_and_bool_reductions_are_core_ops():
    # LongT5's int64 positions against int32 block ids; any / all of masks.
    def fn(a, b, x):
        return a == b, a - b, (a > b) & (b != 0), (x > 0).any(-1), (x > 0).all(), (x > 3).any()

    a = torch.randint(-5, 5, (4, 6))
    b = torch.randint(-5, 5, (6,), dtype=torch.int32)
    x = torch.randn(4, 6)
    got = torch.compile(fn, backend="trn", dynamic=False)(a.to("trn"), b.to("trn"), x.to("trn"))
    for g, w in zip(got, fn(a, b, x)):
        assert g.dtype == w.dtype
        assert torch.equal(g.cpu(), w)
    (stats,) = trnscope.compile_stats()
    assert stats["eager_nodes"] == [], stats["eager_reasons"]
    # over no elements any / all are False / True: an eager step, not amax / amin
    empty = torch.randn(3, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = torch.compile(lambda t: ((t > 0).any(-1), (t > 0).all(-1)), backend="trn", dynamic=False)(empty.to("trn"))
    assert got[0].cpu().tolist() == [False] * 3 and got[1].cpu().tolist() == [True] * 3


def test_one_hot_range_check_runs_after_the_program():
    # Note [Graph asserts]: one_hot's decomposition asserts its class range with
    # _assert_async, which has no output; it made the whole graph run eagerly.
    fn = torch.compile(lambda i, w: F.one_hot(i, 5).to(w.dtype) @ w, backend="trn", dynamic=False)
    i = torch.tensor([[0, 3, 4], [1, 2, 2]])
    w = torch.randn(5, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the any() eager-node notice
        got = fn(i.to("trn"), w.to("trn"))
    torch.testing.assert_close(got.cpu(), F.one_hot(i, 5).float() @ w)
    (stats,) = trnscope.compile_stats()
    assert stats["fallback"] is None, stats["fallback"]
    with pytest.raises(RuntimeError, match="Class values must be smaller than num_classes"):
        fn(torch.tensor([[0, 3, 7], [1, 2, 2]], device="trn"), w.to("trn"))
    with pytest.raises(RuntimeError, match="Class values must be non-negative"):
        fn(torch.tensor([[0, -3, 1], [1, 2, 2]], device="trn"), w.to("trn"))


def test_composites_models_use_compile_to_core_ops():
    # repeat (WavLM, GPT-J; its result viewed as contiguous), vector norms and
    # group norm (HuBERT, ConvNeXt V2), clamp with tensor bounds, and a
    # convolution whose padding is one value for both dims (SigLIP's "valid").
    def fn(x, img, w, gw, gb, lo, hi):
        r = x.repeat(2, 1, 3).view(4, -1)
        n = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
        g = F.group_norm(img, 2, gw, gb)
        c = torch.clamp(x, min=lo, max=hi)
        v = F.conv2d(img, w, padding="valid")
        return r, x / n, g, c, v

    torch.manual_seed(0)
    args = (
        torch.randn(2, 3, 5),
        torch.randn(2, 4, 6, 6),
        torch.randn(3, 4, 3, 3),
        torch.randn(4),
        torch.randn(4),
        torch.full((5,), -0.5),
        torch.full((3, 5), 0.5),
    )
    want = fn(*args)
    got = torch.compile(fn, backend="trn", dynamic=False)(*(a.to("trn") for a in args))
    for g, w in zip(got, want):
        assert g.stride() == w.stride()
        torch.testing.assert_close(g.cpu(), w, rtol=1e-4, atol=1e-5)
    (stats,) = trnscope.compile_stats()
    assert stats["fallback"] is None and stats["eager_nodes"] == [], stats["eager_reasons"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_group_norm_is_the_core_kernel(dtype):
    """native_group_norm is one library kernel of the program (its decomposition
    was a row kernel 2.2x slower), with or without weights, from a permuted input
    (the composite's contiguous copy comes first), against CPU."""
    def fn(x, w, b, y):
        return F.group_norm(x, 4, w, b), F.group_norm(y.transpose(1, 2), 2)

    torch.manual_seed(0)
    args = (torch.randn(2, 8, 33), torch.randn(8), torch.randn(8), torch.randn(2, 9, 6))
    args = tuple(a.to(dtype) for a in args)
    want = fn(*args)
    got = torch.compile(fn, backend="trn", dynamic=False)(*(a.to("trn") for a in args))
    tol = 1e-5 if dtype == torch.float32 else 3e-2
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        torch.testing.assert_close(g.cpu(), w, rtol=tol, atol=tol)
    (stats,) = trnscope.compile_stats()
    assert stats["eager_nodes"] == [], stats["eager_reasons"]
    assert stats["kernels"].count("group_norm") == 2, stats["kernels"]


INDEXING = {
    # transformers' padding mask: mask[batch_idx, kv_idx] with broadcast aranges
    "mask": lambda x, i, j: x[:, 0][i[:2, None, None, None], j[None, None, None, :]],
    "adjacent_inner": lambda x, i, j: x[:, i, j],  # B after the leading dim
    "separated": lambda x, i, j: x[i, :, j],  # B first (torch's rule)
    "one_dim_negative": lambda x, i, j: x[:, :, i - 5],
    "int32_index": lambda x, i, j: x[i.int()],
    "gather_dim0": lambda x, i, j: torch.gather(x, 0, i.view(-1, 1, 1).expand(-1, 3, 2)),
    "gather_last_transposed": lambda x, i, j: torch.gather(x.transpose(1, 2), 2, i.view(1, 1, -1).expand(2, 5, -1)),
    "cumsum": lambda x, i, j: torch.cumsum(x, 1) + torch.cumsum(i, 0)[0],
    "cumsum_int64_mask": lambda x, i, j: (torch.cumsum(j * 0 + 1, 0) * j)[None, None, :].to(x.dtype) + x[..., :4],
    # RoBERTa's positions: an int32 mask summed in int64
    "cumsum_int32_mask": lambda x, i, j: (torch.cumsum(j.ne(0).int(), 0).type_as(j) * j)[None, None, :] + x[..., :4],
    "embedding_broadcast_index": lambda x, i, j: F.embedding(i.view(1, -1).expand(3, -1), x[0]),
}


@pytest.mark.parametrize("name", list(INDEXING))
def test_indexing_ops_run_as_core_kernels(name):
    # gather, advanced indexing and cumsum were eager steps (a call back into
    # Python per call) in nearly every transformers model's graph.
    torch.manual_seed(0)
    x = torch.randn(2, 3, 5)
    i = torch.tensor([1, 0, 1, 1])
    j = torch.tensor([4, 0, 2, 3])
    fn = INDEXING[name]
    want = fn(x, i, j)
    got = torch.compile(fn, backend="trn", dynamic=False)(x.to("trn"), i.to("trn"), j.to("trn"))
    assert got.shape == want.shape
    torch.testing.assert_close(got.cpu(), want, rtol=1e-6, atol=1e-6)
    (stats,) = trnscope.compile_stats()
    assert stats["fallback"] is None and stats["eager_nodes"] == [], stats["eager_reasons"]


def test_an_out_of_range_index_in_a_compiled_program_is_an_error():
    fn = torch.compile(lambda x, i: x[i] * 2, backend="trn", dynamic=False)
    x = torch.randn(4, 3, device="trn")
    fn(x, torch.tensor([0, 3], device="trn"))
    with pytest.raises((IndexError, RuntimeError), match="out of"):
        fn(x, torch.tensor([0, 4], device="trn"))
        torch.trn.synchronize()


def test_layer_norm_without_bias_or_weight_is_the_layer_norm_kernel():
    # ModernBERT's norms have no bias; before, each ran as an eager step.
    def fn(x, w, b):
        return (F.layer_norm(x, (8,), w, None) * 2, F.layer_norm(x, (8,)) + 1,
                F.layer_norm(x, (4, 8)), F.layer_norm(x, (8,), w, b))

    x, w, b = torch.randn(3, 4, 8), torch.randn(8), torch.randn(8)
    want = fn(x, w, b)
    got = torch.compile(fn, backend="trn", dynamic=False)(x.to("trn"), w.to("trn"), b.to("trn"))
    for g, t in zip(got, want):
        torch.testing.assert_close(g.cpu(), t, rtol=1e-5, atol=1e-5)
    (stats,) = trnscope.compile_stats()
    assert stats["eager_nodes"] == [] and stats["kernels"].count("layer_norm") == 4, stats


def test_integer_clamp_with_integer_bounds_stays_integer_and_compiles():
    # BEiT's and SegFormer's position indices: maximum / minimum on int64.
    def fn(i, j):
        return i.clamp(-2, 3) * 2, j.clamp(min=0), i.clamp(max=1)

    i = torch.randint(-5, 6, (4, 5))
    j = torch.randint(-5, 6, (7,), dtype=torch.int32)
    want = fn(i, j)
    got = torch.compile(fn, backend="trn", dynamic=False)(i.to("trn"), j.to("trn"))
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        torch.testing.assert_close(g.cpu(), w)
    (stats,) = trnscope.compile_stats()
    assert stats["eager_nodes"] == [], stats["eager_reasons"]


def test_argmax_and_constant_pad_are_core_kernels():
    # CLIP's text pooling (argmax of the ids) and Swin's window padding.
    def fn(x, i):
        return (x.argmax(-1), x.argmax(1, keepdim=True), i.argmax(0), F.pad(x, (1, 2)) * 2,
                F.pad(x.transpose(1, 2), (0, 1, 2, 0), value=-1.5),
                F.pad(i, (1, 1, 0, 0, 1, 0), value=7),
                F.pad(x, (-1, 2, 1, -2)) + 1)  # negative pads crop

    x = torch.randn(2, 3, 5)
    x[0, 1, 2] = x[0, 1, 4] = 9.0  # a tie: the first index, as on CPU
    i = torch.randint(-4, 5, (3, 4, 2))
    want = fn(x, i)
    got = torch.compile(fn, backend="trn", dynamic=False)(x.to("trn"), i.to("trn"))
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        torch.testing.assert_close(g.cpu(), w)
    (stats,) = trnscope.compile_stats()
    assert stats["eager_nodes"] == [], stats["eager_reasons"]
    assert stats["kernels"].count("argmax") == 3 and stats["kernels"].count("constant_pad_nd") == 4


def _shift_right_first_column(ids, table):
    # BART's shift_tokens_right, functionalized: copy(select(buf, 1, 0), x) is
    # a FakeTensor with buf's row stride, and the views after it index by it.
    shifted = ids.new_zeros(ids.shape)
    shifted[:, 1:] = ids[:, :-1].clone()
    shifted[:, 0] = 2
    first = shifted[:, 0].unsqueeze(1).expand(-1, ids.shape[1])
    return table[shifted] + table[first]


def _column_then_views(x):
    # A column of a 3-D buffer set, then read transposed and sliced with a step:
    # the copy's FakeTensor is [3, 5] with strides (20, 1), and so are the views'.
    buf = x * 1
    buf[:, 0] = 7
    v = buf[:, 0]
    return v.t() * 3 + buf.sum(), v[1:, ::2] + 1


def _chunk_mask_then_expand(y, cond):
    # Longformer's chunked attention mask: part of a plane of a buffer set, then
    # that plane (a slice_scatter's FakeTensor with the buffer's strides)
    # unsqueezed and expanded over the buffer's planes.
    out = torch.zeros(8, 8, 2, 5, device=y.device)
    out[:, 0, :, :3] = y[:, :2, :3]
    m = out[:, 0].unsqueeze(1).expand(8, 8, 2, 5)
    return torch.where(cond, m, out * 2 + 1)


def _scatter_into_last_row_then_views(a, b):
    # Longformer's sliding-chunk mask at other lengths: part of the last row of a
    # buffer set (a slice_scatter whose FakeTensor starts at the row's storage
    # offset), then that row read back unsqueezed and expanded over the rows.
    out = b * 1
    out[:, -1, :, 2:] = a[:, -1, :, :3]
    return out[:, -1].unsqueeze(1).expand(2, 6, 2, 5) * 2 + out


@pytest.mark.parametrize("fn, args", [
    (_shift_right_first_column, (torch.randint(0, 10, (3, 7)), torch.randn(10, 4))),
    (_column_then_views, (torch.randn(3, 4, 5),)),
    (_chunk_mask_then_expand, (torch.randn(8, 4, 5), torch.rand(1, 8, 1, 1) > 0.5)),
    (_scatter_into_last_row_then_views, (torch.randn(2, 6, 2, 5), torch.randn(2, 6, 2, 5))),
])
def test_views_of_a_strided_copy_index_its_strides(fn, args):
    """Note [Functional copy]: a copy (or a slice_scatter) into a strided part of a
    buffer keeps the FakeTensor's strides in its buffer, holes and all, as its views
    expect."""
    want = fn(*args)
    got, stats = compiled_on_trn(fn, *args)
    for g, w in zip(pytree.tree_leaves(got), pytree.tree_leaves(want)):
        torch.testing.assert_close(g.cpu(), w)
    assert stats["eager_nodes"] == [] and stats["fallback"] is None, stats


def _scan_into_columns(x, a):
    # RecurrentGemma's _rnn_scan: each step written into a column of a buffer with
    # a transposed layout (strides (T*C, 1, T), as after a conv1d).
    h = x.transpose(1, 2) * 2
    out = torch.zeros_like(h)
    s = torch.zeros(h.shape[0], h.shape[2], device=h.device)
    for t in range(h.shape[1]):
        s = a[:, t] * s + h[:, t]
        out[:, t] = s
    return out


def test_copies_into_views_of_a_dynamic_graph_compile_at_every_length():
    """A dynamic graph is re-derived per signature under FakeTensorMode, whose copy
    kept the destination view's storage offset (the traced copy starts at 0): each
    step's copy became an eager step, the expand after it was refused, and from the
    third length on (over 8 refusals) the whole graph ran eagerly."""
    compiled = torch.compile(_scan_into_columns, backend="trn")
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for t in (12, 7, 10):
            x, a = torch.randn(2, 16, t, generator=gen), torch.rand(2, t, 16, generator=gen)
            got = compiled(x.to("trn"), a.to("trn"))
            torch.testing.assert_close(got.cpu(), _scan_into_columns(x, a), rtol=1e-5, atol=1e-5)
    stats = trnscope.compile_stats()
    assert len(stats) == 3 and stats[-1]["specialized"], stats
    for s in stats:
        assert s["eager_nodes"] == [] and s["fallback"] is None, s


@pytest.mark.parametrize("w_first", [True, False])
def test_bmm_of_gathered_expert_weights_is_one_kernel(w_first):
    """Note [Gathered bmm]: transformers' batched_mm experts (MoE decode off the
    CPU) gather w[ids] and bmm it; the program multiplies w[ids[b]] in place."""
    torch.manual_seed(0)
    w = torch.randn(4, 12, 8) if w_first else torch.randn(4, 8, 12)
    ids = torch.tensor([3, 0, 3, 1, -1])  # repeats and a negative id, as indexing allows

    def fn(w, ids, x):
        g = w[ids]
        y = torch.bmm(g, x.unsqueeze(-1)).squeeze(-1) if w_first else torch.bmm(x.unsqueeze(1), g).squeeze(1)
        return y * 2

    x = torch.randn(5, 8)
    with torch.inference_mode(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = torch.compile(fn, backend="trn", dynamic=False)(w.to("trn"), ids.to("trn"), x.to("trn"))
    torch.testing.assert_close(got.cpu(), fn(w, ids, x), rtol=1e-5, atol=1e-5)
    (stats,) = trnscope.compile_stats()
    assert stats["eager_nodes"] == ["trnscope.gathered_bmm.default"], stats  # the gather is gone
    assert not [w for w in caught if "runs as an eager trn op" in str(w.message)]


def test_gathered_bmm_checks_its_ids():
    w, x = torch.randn(3, 4, 5, device="trn"), torch.randn(2, 5, 1, device="trn")
    op = torch.ops.trnscope.gathered_bmm
    with pytest.raises(RuntimeError, match="index 3 at position 1 is out of range for 3"):
        op(w, torch.tensor([0, 3], device="trn"), x, True)
        torch.trn.synchronize()
    with pytest.raises(RuntimeError, match="1-D int64 or int32"):
        op(w, torch.tensor([0.0, 1.0], device="trn"), x, True)
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        op(w, torch.tensor([0, 1], device="trn"), x, False)


def test_eager_step_out_overload_is_found_only_for_native_single_results():
    from trnscope.compile.backend import _out_overload

    aten = torch.ops.aten
    assert _out_overload(aten.index.Tensor) is aten.index.Tensor_out
    assert _out_overload(aten.div.Tensor_mode) is aten.div.out_mode
    assert _out_overload(aten.topk.default) is None  # two results
    assert _out_overload(aten.add_.Tensor) is None  # in place
    assert _out_overload(aten.nonzero.default) is None or torch._C._dispatch_has_kernel_for_dispatch_key(
        "aten::nonzero.out", "PrivateUse1"
    )


def test_call_path_binds_cpu_scalars_constants_and_non_tensor_outputs():
    """Note [Call path]: what a call binds is settled at compile time; a 0-dim CPU
    tensor argument, a constant tensor of the graph, outputs that are an input, a
    number or one value twice, and a graph with no eager steps still give eager's
    values on every call."""

    def fn(x, step, y):
        c = torch.tensor([0.5, 2.0, -1.0, 3.0], device=x.device)  # a get_attr constant
        z = x * step + c
        return z, y, z.sum(-1), z, x.shape[0]

    compiled = torch.compile(fn, backend="trn", dynamic=False)
    x, y = torch.randn(3, 4), torch.randn(2)
    with torch.inference_mode():
        for k in range(3):
            step = torch.tensor(float(k) + 0.5)  # CPU, as generate() passes a counter
            got = compiled(x.to("trn"), step, y.to("trn"))
            want = fn(x, step, y)
            assert got[4] == want[4] == 3
            for g, w in zip(got[:4], want[:4]):
                torch.testing.assert_close(g.cpu(), w, rtol=1e-6, atol=1e-6)
    (stats,) = trnscope.compile_stats()
    assert stats["fallback"] is None and stats["eager_nodes"] == []


def test_library_kernels_cat_embedding_and_integer_math():
    """Ops the row interpreter does not take run as single core kernels inside
    the program (Note [Library kernels]), over their own dtypes."""

    def fn(table, ids, mask, x, y):
        pos = ids * 3 + 1  # int64 arithmetic
        keep = torch.logical_and(mask, pos > 4) | torch.logical_not(mask)
        emb = torch.nn.functional.embedding(ids, table)
        return torch.cat([emb, x], -1), torch.where(keep, pos, -pos), torch.cat([x, y], 0)

    g = torch.Generator().manual_seed(0)
    table = torch.randn(10, 4, generator=g)
    ids = torch.randint(0, 10, (2, 3), generator=g)
    mask = torch.rand(2, 3, generator=g) > 0.5
    x, y = torch.randn(2, 3, 5, generator=g), torch.randn(1, 3, 5, generator=g)
    args = (table, ids, mask, x, y)
    compiled = torch.compile(fn, backend="trn", dynamic=False)
    with torch.inference_mode():
        got = compiled(*(a.to("trn") for a in args))
    for g_, w in zip(got, fn(*args)):
        assert g_.dtype == w.dtype
        torch.testing.assert_close(g_.cpu(), w)
    (stats,) = trnscope.compile_stats()
    assert stats["eager_nodes"] == [], stats["eager_nodes"]
    for k in ("embedding", "cat", "logical_and", "logical_not", "where"):
        assert k in stats["kernels"], (k, stats["kernels"])


@pytest.mark.parametrize(
    "fn,kernel",
    [
        (lambda a: -(a + 1).unsqueeze(0), "neg"),  # DeBERTa-v2's relative positions
        (lambda a: torch.abs(a - 5).unsqueeze(0).unsqueeze(0), "abs"),
        (lambda a: torch.relu(a - 5).unsqueeze(0), "relu"),
        (lambda a: (a * 3).unsqueeze(0).to(torch.int32), "_to_copy"),
        (lambda a: torch.logical_not((a > 3).unsqueeze(0)), "logical_not"),
    ],
)
def test_integer_unary_library_kernel_reads_its_input_without_leading_ones(fn, kernel):
    """A consumer of an unsqueezed value reads the value itself (Note
    [Pass-through reshapes]); a library unary kernel broadcasts it back."""
    a = torch.arange(16)
    with torch.inference_mode():
        got = torch.compile(fn, backend="trn", dynamic=False)(a.to("trn"))
    want = fn(a)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert torch.equal(got.cpu(), want)
    (stats,) = trnscope.compile_stats()
    assert kernel in stats["kernels"] and stats["eager_nodes"] == [], stats


def test_embedding_index_out_of_range_is_an_error():
    compiled = torch.compile(torch.nn.functional.embedding, backend="trn", dynamic=False)
    table = torch.randn(4, 3, device="trn")
    with torch.inference_mode(), pytest.raises((IndexError, RuntimeError), match="out of range"):
        compiled(torch.tensor([[1, 7]], device="trn"), table)
        torch.trn.synchronize()


def test_dump_dir_writes_a_parseable_program(tmp_path, monkeypatch):
    monkeypatch.setenv("TRNSCOPE_DUMP_DIR", str(tmp_path))
    model, x = make("rms_norm")
    with torch.inference_mode():
        torch.compile(model.to("trn"), backend="trn", dynamic=False)(x.to("trn"))
    (path,) = tmp_path.iterdir()
    assert trnscope.compile_stats()[0]["artifact"] == str(path)
    doc = json.loads(path.read_text())
    assert doc["format"] == "trnscope.program" and doc["version"] == 1
    (kernel,) = doc["kernels"]
    assert kernel["name"] == "fused[pow,mean,add,rsqrt,mul,mul]"
    assert [op.split(".")[0] for op in kernel["aten_ops"]] == [
        "aten::pow",
        "aten::mean",
        "aten::add",
        "aten::rsqrt",
        "aten::mul",
        "aten::mul",
    ]
    rows = x.numel() // DIM
    assert kernel["bytes_written"] == x.numel() * 4 and kernel["flops"] > 0
    assert doc["inputs"][0]["sizes"] == [2, SEQ, DIM] and rows == 2 * SEQ


def test_compile_option_dump_dir(tmp_path):
    with torch.inference_mode():
        torch.compile(torch.exp, backend="trn", options={"dump_dir": str(tmp_path)})(
            torch.ones(3, device="trn")
        )
    assert len(list(tmp_path.glob("trn_program_*.json"))) == 1


def test_float64_is_counted_per_op_like_eager():
    def fn(x):
        return torch.exp(x) * 2

    x = torch.randn(4, 8, dtype=torch.float64)
    compiled = torch.compile(fn, backend="trn", dynamic=False)
    with warnings.catch_warnings(), torch.inference_mode():
        warnings.simplefilter("ignore")
        compiled(x.to("trn"))
        trnscope.reset_counters()
        got = compiled(x.to("trn"))
    assert got.dtype == torch.float64
    torch.testing.assert_close(got.cpu(), fn(x), rtol=1e-5, atol=1e-5)  # float32 precision
    assert trnscope.float64_downcasts() == {"aten::exp": 1, "aten::mul": 1}


def test_float64_warns_in_a_fresh_process():
    r = run_python(
        """
        import warnings, torch, trnscope
        with warnings.catch_warnings(record=True) as w, torch.inference_mode():
            warnings.simplefilter("always")
            x = torch.ones(3, dtype=torch.float64, device="trn")
            torch.compile(torch.exp, backend="trn")(x)
        print(sum("float64 as float32" in str(x.message) for x in w))
        """
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "1"


def test_compiles_are_spans_in_the_profiler():
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof, torch.inference_mode():
        torch.compile(torch.sigmoid, backend="trn")(torch.ones(7, 3, device="trn"))
    names = [e.name for e in prof.events()]
    assert "trn::compile [7x3]" in names


def test_dynamic_graphs_are_specialized_per_signature_at_run_time():
    model, _ = make("layer_norm")
    cpu_model, _ = make("layer_norm")
    compiled = torch.compile(model.to("trn"), backend="trn")  # dynamic=None: Dynamo goes symbolic
    with torch.inference_mode():
        for rows in (3, 5, 7, 5):
            x = torch.randn(rows, DIM)
            got = compiled(x.to("trn"))
            torch.testing.assert_close(got.cpu(), cpu_model(x), rtol=1e-4, atol=1e-4)
    stats = trnscope.compile_stats()

    def x_of(s):  # the dynamic graph also takes the row count as a SymInt input
        return s["signature"][s["input_names"].index("l_x_")]

    assert [x_of(s)["shape"] for s in stats] == [[3, DIM], [5, DIM], [7, DIM]]
    assert len({s["graph_hash"] for s in stats}) == 1
    for s, old, new in ((stats[1], 3, 5), (stats[2], 5, 7)):
        change = [c for c in s["changed_inputs"] if c["what"] == "shape"]
        assert [(c["name"], c["old"], c["new"]) for c in change] == [("l_x_", [old, DIM], [new, DIM])]
    assert stats[-1]["specialized"]
    assert all(s["fallback"] is None and s["num_kernels"] == 1 for s in stats)


# ---- Robustness: ops the compiler does not take ------------------------------------------------
# Each maps a float [R, C] tensor to one of the same shape: core ops, library
# ops (some eager steps the core chose: int arithmetic is not fused), and ops
# the compiler does not take, which run as eager steps; each chain has one.
_CORE_OPS = [
    lambda x: x * 2 + 1,
    torch.relu,
    lambda x: torch.softmax(x, -1),
    lambda x: torch.exp(-x.abs()),
]
_EAGER_OPS = [
    lambda x: torch.fmax(x, x.flip(0) * 0.5),
    lambda x: torch.hypot(x, x * 0.5),
    lambda x: x.scatter_reduce(-1, torch.argsort(x, -1), x * 2, "amax"),
    lambda x: torch.atan2(x, x.flip(0) + 0.5),
]
_OTHER_OPS = _EAGER_OPS + [
    lambda x: torch.cummax(x, -1).values,
    lambda x: torch.cummin(x, 0).values,
    lambda x: torch.logcumsumexp(x, -1) * 0.1,
    lambda x: torch.flip(x, [-1]),
    lambda x: torch.div(x * 3, 0.7, rounding_mode="floor") * 0.1,
    lambda x: torch.cumsum(x, -1) * 0.1,
    lambda x: torch.sort(x, -1).values,
    torch.erf,
    lambda x: torch.clamp(x, -0.5, 0.5),
    torch.floor,
    lambda x: torch.roll(x, 1, -1),
    torch.sign,
    lambda x: torch.topk(x, x.shape[-1], -1).values,
    lambda x: torch.cat([x[:, 1:], x[:, :1]], -1),
    lambda x: ((x * 10).to(torch.int64) % 3 + 1).to(x.dtype),
    lambda x: torch.gather(x, -1, torch.argsort(x, -1)),
    lambda x: x.masked_fill(x > 0.5, 0.5),
]


@pytest.mark.parametrize("seed", range(6))
def test_random_mix_of_unsupported_ops_matches_eager(seed, monkeypatch):
    import random

    from trnscope.compile import backend

    monkeypatch.setattr(backend, "_warned_eager", set())  # every notice is new
    rng = random.Random(seed)
    chain = [rng.choice(_CORE_OPS + _OTHER_OPS) for _ in range(7)]
    chain.insert(rng.randrange(len(chain)), rng.choice(_EAGER_OPS))  # at least one

    def fn(x):
        for op in chain:
            x = op(x)
        return x

    x = torch.randn(4, 9, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        want_cpu = fn(x)
        want_trn = fn(x.to("trn")).cpu()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = torch.compile(fn, backend="trn", dynamic=False)(x.to("trn")).cpu()
    torch.testing.assert_close(got, want_trn, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got, want_cpu, rtol=1e-4, atol=1e-4)
    stats = trnscope.compile_stats()
    assert stats and all(s["fallback"] is None for s in stats)
    notices = [str(w.message) for w in caught if "runs as an eager trn op" in str(w.message)]
    eager = [(t, r) for s in stats for t, r in zip(s["eager_nodes"], s["eager_reasons"])]
    assert eager, "the chain has an op the compiler does not take"
    for target, reason in eager:
        assert reason, target
        assert any(target in n and reason in n for n in notices), (target, notices)


def test_compile_error_falls_back_to_the_whole_graph(monkeypatch):
    """An internal compiler error never reaches the user: the graph runs eagerly."""
    from trnscope import _C

    def broken(*args, **kwargs):
        raise RuntimeError("injected compiler failure")

    monkeypatch.setattr(_C, "_compile_graph", broken)
    x = torch.randn(3, 5)
    with torch.no_grad(), pytest.warns(UserWarning, match="injected compiler failure"):
        got = torch.compile(lambda t: torch.relu(t) * 3, backend="trn")(x.to("trn"))
    torch.testing.assert_close(got.cpu(), torch.relu(x) * 3)
    (stats,) = trnscope.compile_stats()
    assert "injected compiler failure" in stats["fallback"]


@pytest.mark.parametrize("refuse", ["expand", "neg", "native_layer_norm", "view", "every"])
def test_a_node_the_compiler_refuses_runs_eagerly(refuse, monkeypatch):
    """Note [Refused nodes]: a core compile error naming a node (the core refuses a
    view whose strides do not fit its source's memory) makes that node an eager step
    and the graph compiles again; a view, an elementwise op or one output of a
    multi-output op alike; not a view whose result depends on its input's layout
    (aten.view needs viewable strides), nor refusing again and again: then the whole
    graph runs eagerly. The refusals are injected: no graph the lowering makes is
    known to trigger one (Longformer's did before slice_scatter kept its strides)."""
    from trnscope import _C
    from trnscope.compile import backend

    lowerings, compiles = [], []
    lower = backend._Lowering.lower
    monkeypatch.setattr(backend._Lowering, "lower", lambda self: (lowerings.append(self), lower(self))[1])
    compile_graph = _C._compile_graph

    def refusing(g, **kw):
        compiles.append(1)
        calls = lowerings[-1].calls
        for gid, (node, _, idx) in calls.items():
            name = getattr(node.target, "__name__", str(node.target))
            if gid not in lowerings[-1].reasons and (refuse == "every" or name.startswith(refuse)):
                raise ValueError(f"trn compile: trn compiler: node {gid} (view {name}): refused")
        return compile_graph(g, **kw)

    monkeypatch.setattr(_C, "_compile_graph", refusing)
    monkeypatch.setattr(backend, "_MAX_REFUSED", 2)
    ln = nn.LayerNorm(5).eval()

    def fn(x):
        return ln((-x.unsqueeze(1).expand(3, 4, 5) * 2).reshape(12, 5)) + 1

    x = torch.randn(3, 5)
    with torch.no_grad():
        want = fn(x)
        ln.to("trn")
        got = torch.compile(fn, backend="trn", dynamic=False)(x.to("trn"))
    torch.testing.assert_close(got.cpu(), want)
    (stats,) = trnscope.compile_stats()
    if refuse in ("every", "view"):
        assert "refused" in stats["fallback"]
        assert len(compiles) == (3 if refuse == "every" else 1)  # _MAX_REFUSED + 1
        return
    assert stats["fallback"] is None and len(compiles) == 2
    (target,) = stats["eager_nodes"]
    (reason,) = stats["eager_reasons"]
    assert target.startswith(f"aten.{refuse}")
    assert reason.startswith("the compiler refused it (trn compile: trn compiler: node ")
    assert f"(view {refuse}" in reason


# ---- Fused attention and convolution in programs ----------------------------------------------
@pytest.mark.parametrize(
    "case", ["plain", "causal", "bool_mask", "float_mask", "gqa_causal", "scale", "decode"]
)
def test_sdpa_is_one_fused_kernel_in_the_program(case):
    g = torch.Generator().manual_seed(1)
    hq, hkv, sq, skv, d = 4, (2 if case.startswith("gqa") else 4), 7, 7, 16
    if case == "decode":
        sq = 1
    q = torch.randn(2, hq, sq, d, generator=g)
    k = torch.randn(2, hkv, skv, d, generator=g)
    v = torch.randn(2, hkv, skv, d, generator=g)
    mask = None
    if case == "bool_mask":
        mask = torch.rand(2, 1, sq, skv, generator=g) > 0.3
        mask[..., 0] = True  # no fully masked row
    elif case == "float_mask":
        mask = torch.randn(1, hq, sq, skv, generator=g)
    kw = dict(
        attn_mask=mask,
        is_causal=case in ("causal", "gqa_causal"),
        scale=0.3 if case == "scale" else None,
        enable_gqa=hq != hkv,
    )

    def fn(q, k, v, *m):
        return F.scaled_dot_product_attention(q, k, v, **{**kw, "attn_mask": m[0] if m else None})

    args = [q, k, v] + ([mask] if mask is not None else [])
    want = fn(*args)
    with torch.inference_mode():
        got = torch.compile(fn, backend="trn", dynamic=False)(*(a.to("trn") for a in args))
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
    (stats,) = trnscope.compile_stats()
    assert stats["kernels"] == ["scaled_dot_product_attention"], stats
    assert stats["eager_nodes"] == []


@pytest.mark.parametrize("inputs_are_clones", [False, True])
def test_attention_reads_past_head_split_clones(inputs_are_clones):
    """Whisper's and BART's attention: the projection split into heads and made
    contiguous (view + transpose + clone) before sdpa. The kernel reads the strided
    heads itself (Note [Clones before attention]); a clone something else reads (the
    returned key, a KV cache) stays, and so does a clone of a graph input."""
    g = torch.Generator().manual_seed(2)
    b, s, h, d = 2, 9, 4, 8
    wq, wk, wv = (torch.randn(h * d, h * d, generator=g) for _ in range(3))
    x = torch.randn(b, s, h * d, generator=g)

    def heads(t):
        return t.view(b, s, h, d).transpose(1, 2).contiguous()

    def fn(x, wq, wk, wv):
        if inputs_are_clones:  # the heads are the graph input's memory: the clone stays
            q = x.view(b, s, h, d).transpose(1, 2).contiguous()
            return (F.scaled_dot_product_attention(q, q, q),)
        q, k, v = heads(x @ wq), heads(x @ wk), heads(x @ wv)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True), k

    want = fn(x, wq, wk, wv)
    with torch.inference_mode():
        got = torch.compile(fn, backend="trn", dynamic=False)(
            *(t.to("trn") for t in (x, wq, wk, wv)))
    for a, e in zip(got, want):
        torch.testing.assert_close(a.cpu(), e, rtol=1e-5, atol=1e-5)
    (stats,) = trnscope.compile_stats()
    clones = [k for k in stats["kernels"] if "clone" in k]
    # q's and v's clones are gone, k's stays for the second output; the input's stays.
    assert len(clones) == 1, stats["kernels"]
    assert stats["eager_nodes"] == []


@pytest.mark.parametrize(
    "geom",
    [
        dict(stride=1, padding=1, dilation=1, groups=1),
        dict(stride=2, padding=3, dilation=1, groups=1),
        dict(stride=1, padding=2, dilation=2, groups=2),
        dict(stride=1, padding=0, dilation=1, groups=8),  # depthwise
    ],
)
@pytest.mark.parametrize("bias", [True, False])
def test_conv_relu_is_one_kernel_in_the_program(geom, bias):
    torch.manual_seed(0)
    conv = nn.Conv2d(8, 16, 3, bias=bias, **geom).eval()
    fn = nn.Sequential(conv, nn.ReLU())
    x = torch.randn(2, 8, 11, 13)
    want = fn(x)
    fn.to("trn")
    with torch.inference_mode():
        got = torch.compile(fn, backend="trn", dynamic=False)(x.to("trn"))
    torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-4)
    (stats,) = trnscope.compile_stats()
    assert stats["kernels"] == ["fused[convolution,relu]"], stats
    assert stats["eager_nodes"] == []


@pytest.mark.parametrize(
    "geom",
    [
        dict(stride=1, padding=1, dilation=1, groups=1),
        dict(stride=2, padding=1, dilation=1, groups=1),  # Whisper's second conv
        dict(stride=1, padding=4, dilation=2, groups=4),
        dict(stride=3, padding=0, dilation=1, groups=8),  # depthwise
    ],
)
@pytest.mark.parametrize("bias", [True, False])
def test_conv1d_relu_is_one_kernel_in_the_program(geom, bias):
    """1-D convolutions (Whisper, wav2vec2) run as the 2-D kernel with H = 1."""
    torch.manual_seed(0)
    fn = nn.Sequential(nn.Conv1d(8, 16, 3, bias=bias, **geom), nn.ReLU()).eval()
    x = torch.randn(2, 8, 29)
    want = fn(x)
    fn.to("trn")
    with torch.inference_mode():
        got = torch.compile(fn, backend="trn", dynamic=False)(x.to("trn").transpose(1, 2).contiguous().transpose(1, 2))
    torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-4)
    (stats,) = trnscope.compile_stats()
    assert stats["kernels"] == ["fused[convolution,relu]"], stats
    assert stats["eager_nodes"] == []


@pytest.mark.parametrize(
    "geom",
    [
        dict(stride=2, padding=1, output_padding=1, dilation=1, groups=1),
        dict(stride=4, padding=2, output_padding=0, dilation=1, groups=1),  # EnCodec's upsampling
        dict(stride=1, padding=3, output_padding=0, dilation=2, groups=4),
        dict(stride=3, padding=0, output_padding=2, dilation=1, groups=8),
    ],
)
@pytest.mark.parametrize("rank", [1, 2])
@pytest.mark.parametrize("bias", [True, False])
def test_transposed_conv_is_a_library_kernel(geom, rank, bias):
    """The audio codecs' upsampling (EnCodec, Mimi, DAC) and DPT's reassembly: a
    transposed 1-D / 2-D convolution is one kernel of the program, output_padding
    and a non-contiguous input included."""
    torch.manual_seed(0)
    conv = (nn.ConvTranspose1d if rank == 1 else nn.ConvTranspose2d)(8, 16, 5, bias=bias, **geom)
    fn = conv.eval()
    x = torch.randn(2, 8, 13) if rank == 1 else torch.randn(2, 8, 7, 6)
    want = fn(x)
    fn.to("trn")
    xt = x.to("trn").transpose(1, -1).contiguous().transpose(1, -1)  # channels last
    with torch.inference_mode():
        got = torch.compile(fn, backend="trn", dynamic=False)(xt)
    torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-4)
    (stats,) = trnscope.compile_stats()
    assert stats["kernels"] == ["convolution"] and stats["eager_nodes"] == [], stats


@pytest.mark.parametrize("hw, out", [((8, 8), (2, 2)), ((7, 7), (3, 3)), ((6, 10), (4, 5)),
                                     ((5, 3), (7, 6))])
def test_adaptive_avg_pool_to_any_size_is_a_library_kernel(hw, out):
    """TextNet's 2 x 2 head (it was an eager step; 1 x 1 arrives as a mean):
    uneven, overlapping and upsampling windows, on a channels-last input."""
    x = torch.randn(2, 3, *hw, generator=torch.Generator().manual_seed(0))
    x = x.to(memory_format=torch.channels_last)

    def fn(x):
        return F.adaptive_avg_pool2d(x * 2, out) + 1

    got, stats = compiled_on_trn(fn, x)
    torch.testing.assert_close(got.cpu(), fn(x))
    assert stats["eager_nodes"] == [] and stats["fallback"] is None, stats
    assert any("adaptive_avg_pool2d" in k for k in stats["kernels"]), stats


def _weight_standardized_conv(x):
    # BiT's StdConv2d: the weight normalized per output channel by a batch norm
    # over its own batch statistics (no running ones) before the convolution.
    w = x[:2, :3, :3, :3] * 1.5
    w = F.batch_norm(w.reshape(1, 2, -1), None, None, training=True, momentum=0.0, eps=1e-8)
    return F.conv2d(x, w.reshape(2, 3, 3, 3))


@pytest.mark.parametrize("fn", [
    lambda x: F.instance_norm(x * 2),
    lambda x: F.instance_norm(x, weight=torch.arange(1.0, 4.0, device=x.device),
                              bias=torch.full((3,), 0.5, device=x.device)),
    lambda x: F.batch_norm(x.transpose(2, 3), None, None, training=True),
    _weight_standardized_conv,
])
def test_batch_statistics_normalize_without_eager_steps(fn):
    """_native_batch_norm_legit.no_stats (instance_norm, BiT's weight
    standardization) decomposes into mean / variance rows (it was an eager step)."""
    x = torch.randn(4, 3, 6, 5, generator=torch.Generator().manual_seed(0))
    got, stats = compiled_on_trn(fn, x)
    torch.testing.assert_close(got.cpu(), fn(x), rtol=1e-4, atol=1e-4)
    assert stats["eager_nodes"] == [] and stats["fallback"] is None, stats


@pytest.mark.parametrize("geom", [dict(kernel_size=3, padding=1, stride=2),
                                  dict(kernel_size=(2, 3), dilation=(2, 1), stride=(1, 2)),
                                  dict(kernel_size=2, stride=2)])  # MobileViTV2's patches
def test_unfold_and_fold_are_library_kernels(geom):
    """F.unfold (im2col) and F.fold (col2im: overlapping columns summed) are one
    kernel each (fold's decomposition, an accumulating index_put, was an eager step)."""
    x = torch.randn(2, 3, 9, 8, generator=torch.Generator().manual_seed(0)).transpose(2, 3)

    def fn(x):
        cols = F.unfold(x * 2, **geom)
        return cols, F.fold(cols.sin(), x.shape[-2:], **geom)

    got, stats = compiled_on_trn(fn, x)
    for g, w in zip(got, fn(x)):
        torch.testing.assert_close(g.cpu(), w, rtol=1e-5, atol=1e-5)
    assert stats["eager_nodes"] == [] and stats["fallback"] is None, stats
    assert "im2col" in stats["kernels"] and "col2im" in stats["kernels"], stats


_MATH_DOMAINS = {
    "tan": (-1.2, 1.2), "asin": (-0.95, 0.95), "acos": (-0.95, 0.95), "atan": (-4, 4),
    "sinh": (-4, 4), "cosh": (-4, 4), "asinh": (-4, 4), "acosh": (1.05, 5), "atanh": (-0.95, 0.95),
    "log2": (0.05, 8), "log10": (0.05, 8), "exp2": (-6, 6), "erfc": (-3, 3), "lgamma": (0.1, 6),
    "sinc": (-3, 3),
}


@pytest.mark.parametrize("name", sorted(_MATH_DOMAINS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_floating_functions_are_library_kernels(name, dtype):
    """YOSO's acos and the other libm functions the fused rows do not compute: one
    library kernel each (they were eager steps), on a transposed input."""
    lo, hi = _MATH_DOMAINS[name]
    x = (torch.rand(6, 9, generator=torch.Generator().manual_seed(0)) * (hi - lo) + lo).to(dtype)

    def fn(x):
        return getattr(torch, name)(x.t()) * 2

    got, stats = compiled_on_trn(fn, x)
    torch.testing.assert_close(got.cpu(), fn(x), rtol=1e-5, atol=1e-5)
    assert stats["eager_nodes"] == [] and stats["fallback"] is None, stats


@pytest.mark.parametrize("fn", [F.elu, F.selu, lambda x: F.elu(x, alpha=0.5),
                                lambda x: F.leaky_relu(x, 0.1), F.leaky_relu])
def test_elu_and_leaky_relu_fuse_into_one_kernel(fn):
    """EnCodec's ELU and leaky_relu arrive decomposed (they were eager steps)."""
    x = torch.randn(4, 33, generator=torch.Generator().manual_seed(0))
    got, stats = compiled_on_trn(lambda x: fn(x * 2) + 1, x)
    torch.testing.assert_close(got.cpu(), fn(x * 2) + 1)
    assert len(stats["kernels"]) == 1 and stats["eager_nodes"] == [], stats


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: F.relu6(x * 3) + 1,  # MobileNet's activation: aten.hardtanh
        lambda x: F.hardtanh(x, -0.5, 0.25) * 2,
        lambda x: x.clamp(min=-0.3) - x,
        lambda x: x.clamp(max=0.1).exp(),
        lambda x: torch.clamp(x, 0.5, -0.5),  # lo > hi gives hi
    ],
)
def test_clamp_and_hardtanh_fuse_with_their_neighbours(fn):
    x = torch.randn(4, 33)
    x[0, 0] = float("nan")  # stays NaN
    with torch.inference_mode():
        got = torch.compile(fn, backend="trn", dynamic=False)(x.to("trn"))
    torch.testing.assert_close(got.cpu(), fn(x), equal_nan=True)
    (stats,) = trnscope.compile_stats()
    assert stats["num_kernels"] == 1 and stats["eager_nodes"] == [], stats


@pytest.mark.parametrize(
    "pad,shape,conv",
    [
        ((0, 1, 0, 1), (2, 3, 10, 10), dict(stride=2)),  # TF "same" for stride 2: asymmetric
        ((1, 1, 2, 0), (1, 3, 7, 9), dict(stride=1, padding=1)),  # adds to the conv's own
        ((3, 2), (2, 4, 17), dict(stride=2)),  # 1-D
    ],
)
def test_zero_pad_before_a_conv_is_its_padding(pad, shape, conv):
    """HF MobileNet pads explicitly before each conv: the pad is folded into the
    convolution's (possibly asymmetric) padding and no eager step is left."""
    torch.manual_seed(0)
    x = torch.randn(*shape)
    w = torch.randn(5, shape[1], *([3] * (len(shape) - 2)))
    f = F.conv2d if len(shape) == 4 else F.conv1d
    fn = lambda x, w: torch.relu(f(F.pad(x, pad), w, **conv))  # noqa: E731
    with torch.inference_mode():
        got = torch.compile(fn, backend="trn", dynamic=False)(x.to("trn"), w.to("trn"))
    torch.testing.assert_close(got.cpu(), fn(x, w), rtol=1e-4, atol=1e-4)
    (stats,) = trnscope.compile_stats()
    assert stats["kernels"] == ["fused[convolution,relu]"] and stats["eager_nodes"] == [], stats


def test_nonzero_pad_before_a_conv_stays_a_pad():
    x, w = torch.randn(1, 2, 6, 6), torch.randn(3, 2, 3, 3)
    fn = lambda x, w: F.conv2d(F.pad(x, (1, 1, 1, 1), value=0.5), w)  # noqa: E731
    with torch.inference_mode(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = torch.compile(fn, backend="trn", dynamic=False)(x.to("trn"), w.to("trn"))
    torch.testing.assert_close(got.cpu(), fn(x, w), rtol=1e-4, atol=1e-4)
    (stats,) = trnscope.compile_stats()
    # Not folded into the conv's zero padding: the pad kernel runs first.
    assert stats["eager_nodes"] == [] and stats["kernels"][0] == "constant_pad_nd", stats


@pytest.mark.parametrize(
    "act,name",
    [
        (nn.ReLU(), "fused[convolution,batch_norm,relu]"),
        (nn.ReLU6(), "fused[convolution,batch_norm,hardtanh,hardtanh]"),  # MobileNet
        (nn.Hardtanh(-0.5, 0.25), "fused[convolution,batch_norm,hardtanh,hardtanh]"),
        (nn.Identity(), "fused[convolution,batch_norm]"),
        (nn.GELU(), "fused[convolution,batch_norm,gelu]"),
        (nn.SiLU(), "fused[convolution,batch_norm,silu]"),  # EfficientNet
    ],
)
@pytest.mark.parametrize("affine,groups", [(True, 1), (False, 1), (True, 8)])
def test_conv_batch_norm_activation_is_one_kernel(act, name, affine, groups):
    """Note [Conv epilogue]: inference batch norm folds into the conv's weights
    and bias, the activation clamps its output, in one kernel."""
    torch.manual_seed(0)
    bn = nn.BatchNorm2d(16, affine=affine)
    bn.running_mean.uniform_(-1, 1)
    bn.running_var.uniform_(0.3, 3)
    if affine:
        bn.weight.data.uniform_(-2, 2)
        bn.bias.data.uniform_(-1, 1)
    fn = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1, groups=groups), bn, act).eval()
    x = torch.randn(2, 8, 9, 11)
    x[0, 0, 0, 0] = float("nan")  # NaN flows through the folded kernel as through eager's three
    want = fn(x)
    fn.to("trn")
    with torch.inference_mode():
        got = torch.compile(fn, backend="trn", dynamic=False)(x.to("trn"))
    torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-4, equal_nan=True)
    (stats,) = trnscope.compile_stats()
    assert stats["kernels"] == [name], stats
    assert stats["eager_nodes"] == []


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_conv1d_gelu_is_one_kernel_unless_tanh(approximate):
    """Whisper's and wav2vec2's feature convs: conv1d then exact gelu is one
    kernel (Note [Conv epilogue]); the tanh approximation stays its own kernel."""
    torch.manual_seed(0)
    fn = nn.Sequential(nn.Conv1d(6, 12, 3, stride=2, padding=1), nn.GELU(approximate)).eval()
    x = torch.randn(2, 6, 37) * 3
    want = fn(x)
    got, stats = compiled_on_trn(fn.to("trn"), x)
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
    want_kernels = ["fused[convolution,gelu]"] if approximate == "none" else ["convolution", "gelu"]
    assert stats["kernels"] == want_kernels and stats["eager_nodes"] == [], stats


def test_conv_whose_output_is_also_read_keeps_its_batch_norm_apart():
    torch.manual_seed(0)
    conv, bn = nn.Conv2d(3, 4, 3).eval(), nn.BatchNorm2d(4).eval()

    def fn(x):
        y = conv(x)
        return bn(y) + y  # the raw conv output is needed: no fold

    x = torch.randn(1, 3, 6, 6)
    want = fn(x)
    conv.to("trn"), bn.to("trn")
    with torch.inference_mode():
        got = torch.compile(fn, backend="trn", dynamic=False)(x.to("trn"))
    torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-4)
    (stats,) = trnscope.compile_stats()
    assert stats["kernels"][:2] == ["convolution", "batch_norm"], stats


def test_conv_whose_result_is_reused_keeps_relu_apart():
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 4, 3, padding=1).eval()

    def fn(x):
        y = conv(x)
        return torch.relu(y) + y  # the pre-activation is needed: no fusion

    x = torch.randn(1, 3, 6, 6)
    want = fn(x)
    conv.to("trn")
    with torch.inference_mode():
        got = torch.compile(fn, backend="trn", dynamic=False)(x.to("trn"))
    torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-4)
    (stats,) = trnscope.compile_stats()
    assert stats["kernels"][0] == "convolution", stats


def test_layer_norm_is_the_hand_written_kernel_in_the_program():
    model, x = make("layer_norm")
    want = model(x)
    model.to("trn")
    got_launches, got = launches(torch.compile(model, backend="trn", dynamic=False), x.to("trn"))
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
    assert got_launches == {"layer_norm": 1}, got_launches


def compiled_on_trn(fn, *xs):
    """fn compiled on trn over copies of the CPU inputs xs, and its compile_stats."""
    with torch.inference_mode():
        got = torch.compile(fn, backend="trn", dynamic=False)(*(x.to("trn") for x in xs))
    (stats,) = trnscope.compile_stats()
    return got, stats


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "sliced"])
def test_batch_norm_is_a_library_kernel_in_the_program(dtype, affine, layout):
    torch.manual_seed(0)
    bn = nn.BatchNorm2d(6, affine=affine).eval()
    with torch.no_grad():
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        if affine:
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-1, 1)
    bn = bn.to(dtype)
    x = torch.randn(2, 6, 7, 10, dtype=dtype)
    if layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    elif layout == "sliced":
        x = x[:, :, :, ::2]
    want = bn(x)
    bn.to("trn")
    got, stats = compiled_on_trn(bn, x)
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(got.cpu(), want, rtol=tol, atol=tol)
    assert stats["kernels"] == ["batch_norm"], stats
    assert stats["eager_nodes"] == []


@pytest.mark.parametrize(
    "geom",
    [
        dict(kernel_size=3, stride=2, padding=1),
        dict(kernel_size=2),
        dict(kernel_size=3, stride=2, ceil_mode=True),
        dict(kernel_size=3, padding=1, dilation=2),
        dict(kernel_size=(3, 2), stride=(1, 2)),
    ],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_max_pool_is_a_library_kernel_in_the_program(geom, dtype):
    torch.manual_seed(0)
    pool = nn.MaxPool2d(**geom)
    x = torch.randn(2, 3, 10, 9, dtype=dtype).transpose(2, 3)  # non-contiguous
    want = pool(x)
    got, stats = compiled_on_trn(pool, x)
    torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0)
    assert stats["kernels"] == ["max_pool2d"], stats
    assert stats["eager_nodes"] == []


@pytest.mark.parametrize(
    "geom",
    [
        dict(kernel_size=3, stride=2, padding=1),  # EfficientNet / ResNet-D shortcuts
        dict(kernel_size=3, stride=1, padding=1, count_include_pad=False),  # Inception
        dict(kernel_size=(2, 3), stride=(2, 1), padding=(1, 1), ceil_mode=True),
        dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, divisor_override=5),
        dict(kernel_size=2),
    ],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_avg_pool_is_a_library_kernel_in_the_program(geom, dtype):
    torch.manual_seed(0)
    pool = nn.AvgPool2d(**geom)
    x = torch.randn(2, 3, 10, 9, dtype=dtype).transpose(2, 3)  # non-contiguous
    want = pool(x.double()).to(dtype)  # an independent reference: float64 sums
    got, stats = compiled_on_trn(pool, x)
    tol = 1e-6 if dtype == torch.float32 else 1e-2
    torch.testing.assert_close(got.cpu(), want, rtol=tol, atol=tol)
    assert stats["kernels"] == ["avg_pool2d"], stats
    assert stats["eager_nodes"] == []


@pytest.mark.parametrize(
    "name, fn, kernel",
    [
        ("bool sum over a dim", lambda m, i: m.sum(-1), "sum"),  # mBART's mask.sum()
        ("bool sum of all", lambda m, i: m.sum(), "sum"),
        ("int64 sum, keepdim", lambda m, i: i.sum(0, keepdim=True), "sum"),
        ("int32 sum to int64", lambda m, i: i.int().sum(-1), "sum"),
        ("int64 amax", lambda m, i: i.amax(-1), "amax"),
        ("int32 amin over two dims", lambda m, i: i.int().amin((0, 1)), "amin"),
        ("sum of a transposed view", lambda m, i: i.transpose(0, 2).sum(1), "sum"),
        ("int64 max of all", lambda m, i: i.max(), "max"),  # aten.max.default: amax over all
        ("int32 min of all", lambda m, i: i.int().transpose(0, 2).min(), "min"),
    ],
)
def test_integer_and_bool_reductions_are_library_kernels(name, fn, kernel):
    torch.manual_seed(0)
    m = torch.rand(3, 4, 5) > 0.5
    i = torch.randint(-(2**40), 2**40, (3, 4, 5))  # sums beyond float32's exact integers
    got, stats = compiled_on_trn(fn, m, i)
    want = fn(m, i)
    assert got.dtype == want.dtype and torch.equal(got.cpu(), want), name
    assert stats["eager_nodes"] == [] and kernel in stats["kernels"], stats


@pytest.mark.parametrize("number", [1, 2.5])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.int32])
def test_a_number_first_operand_is_a_swapped_scalar_op(number, dtype):
    """aten.sub.Tensor(1, x) (RWKV's `1 - time_mix`), div, add and mul with a number
    first are the core's scalar ops with the operands swapped, type promotion as torch's."""
    aten = torch.ops.aten
    x = torch.arange(1, 13).reshape(3, 4).to(dtype)

    def fn(t):
        return (aten.sub.Tensor(number, t), aten.div.Tensor(number, t),
                aten.add.Tensor(number, t), aten.mul.Tensor(number, t))

    got, stats = compiled_on_trn(fn, x)
    for g, w in zip(got, fn(x)):
        assert g.dtype == w.dtype
        torch.testing.assert_close(g.cpu(), w)
    assert stats["eager_nodes"] == [], stats["eager_reasons"]


@pytest.mark.parametrize("number", [2, 2.5, -0.5, float("inf")])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool, torch.float32])
def test_comparisons_with_a_number(number, dtype):
    """x < 2.5 on an integer tensor compares as torch does (2 < 2.5): an eager step,
    since the core compares in the tensor's dtype; integral numbers and float
    tensors are core kernels."""
    x = torch.arange(-3, 9).reshape(3, 4).to(dtype)

    def fn(t):
        return t < number, t <= number, t > number, t >= number, t == number, t != number

    got, stats = compiled_on_trn(fn, x)
    for g, w in zip(got, fn(x)):
        assert g.dtype == torch.bool and torch.equal(g.cpu(), w)
    fractional = not float(number).is_integer()
    if fractional and not dtype.is_floating_point:
        assert stats["eager_reasons"] == ["an integer tensor compared with a fractional number"] * 6
    else:
        assert stats["eager_nodes"] == [], stats["eager_reasons"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("nan", [False, True])
def test_max_and_min_of_every_element_are_kernels(dtype, nan):
    """torch.max(x) / x.min() without a dim (Reformer's mask value) are the core's
    amax / amin over every dim: NaN propagates, -inf and inf are values."""
    x = (torch.randn(6, 7) * 100).to(dtype)
    x[2, 3], x[4, 1] = float("-inf"), float("inf")
    if nan:
        x[5, 6] = float("nan")
    got, stats = compiled_on_trn(lambda t: (t.max(), t[:, 1:].min(), t.min() * 2), x)
    want = (x.max(), x[:, 1:].min(), x.min() * 2)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == ()
        torch.testing.assert_close(g.cpu(), w, equal_nan=True, rtol=0, atol=0)
    assert stats["eager_nodes"] == [], stats["eager_reasons"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_max_and_min_over_a_dim_are_kernels(dtype):
    """x.max(dim) / torch.min(x, dim, keepdim) (EnCodec's quantizer; greedy picks):
    the values as amax / amin, the indices as argmax / argmin; ties give the first
    index and a NaN wins both, as on CPU; argmin too."""
    def fn(x):
        v, i = x.max(dim=1)
        w, j = torch.min(x, -1, keepdim=True)
        return v * 2, i, w, j, x.argmin(0), x.argmin(-1, keepdim=True)

    x = (torch.randn(4, 6, 5) * 10).to(dtype)
    x[1, :, 3] = 7  # a tie along both dims
    if dtype.is_floating_point:
        x[0, 2, 1] = float("nan")
    got, stats = compiled_on_trn(fn, x)
    for g, w in zip(got, fn(x)):
        assert g.dtype == w.dtype and g.shape == w.shape
        torch.testing.assert_close(g.cpu(), w, equal_nan=True, rtol=0, atol=0)
    assert stats["eager_nodes"] == [], stats["eager_reasons"]
    assert stats["kernels"].count("argmin") == 2


@pytest.mark.parametrize(
    "name, fn",
    [
        # BART's shift_tokens_right: zeros, then shifted[:, 1:] = ids[:, :-1]
        ("shift right", lambda x: _shift_right(x)),
        ("step and negative start", lambda x: _assign(x, (slice(None), slice(-7, None, 3)))),
        ("first dim", lambda x: _assign(x, (slice(1, 3),))),
        ("empty slice", lambda x: _assign(x, (slice(None), slice(4, 4)))),
        ("end past the size", lambda x: _assign(x, (slice(None), slice(5, 100)))),
    ],
)
@pytest.mark.parametrize("dtype", [torch.int64, torch.float32])
def test_slice_assignments_are_slice_scatter_kernels(name, fn, dtype):
    torch.manual_seed(0)
    x = torch.randint(-50, 50, (3, 10)).to(dtype)
    got, stats = compiled_on_trn(fn, x)
    assert torch.equal(got.cpu(), fn(x)), name
    assert stats["eager_nodes"] == [] and "slice_scatter" in stats["kernels"], stats


def _shift_right(ids):
    shifted = ids.new_zeros(ids.shape)
    shifted[:, 1:] = ids[:, :-1].clone()
    return shifted * 2


def _assign(x, index):
    y = x * 3
    y[index] = x[index] + 1
    return y


def test_a_copy_into_a_contiguous_tensor_is_a_clone():
    """Mamba's cache updates (`state.copy_(new)`) functionalize into aten.copy, whose
    result a clone can store: no eager step, and the input is still mutated."""

    def fn(state, x):
        state.copy_(x[:, 1:] * 2)
        return state + 1

    state, x = torch.zeros(4, 6), torch.randn(4, 7)
    s_trn = state.to("trn")
    compiled = torch.compile(fn, backend="trn", dynamic=False)
    with torch.inference_mode():
        got = compiled(s_trn, x.to("trn")).cpu()
    want = fn(state, x)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(s_trn.cpu(), state)
    (stats,) = trnscope.compile_stats()
    assert stats["eager_nodes"] == [], stats["eager_reasons"]


@pytest.mark.parametrize(
    "name, fn",
    [
        ("// scalar (MoE routing: expert slot // top_k)", lambda x, y: x // 3),
        ("floor_divide", lambda x, y: torch.floor_divide(x, y)),
        ("div trunc", lambda x, y: torch.div(x, y, rounding_mode="trunc")),
        ("div floor by a negative scalar", lambda x, y: torch.div(x, -4, rounding_mode="floor")),
        ("div trunc, broadcast", lambda x, y: torch.div(x, y[:1], rounding_mode="trunc")),
        ("fmod by a scalar (roll's index)", lambda x, y: torch.fmod(x, 7)),
        ("fmod", lambda x, y: torch.fmod(x, y)),
        ("remainder by a negative scalar", lambda x, y: torch.remainder(x, -5)),
        ("%", lambda x, y: x % y),
    ],
)
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_integer_rounding_division_is_a_library_kernel(name, fn, dtype):
    torch.manual_seed(0)
    x = torch.randint(-1000, 1000, (3, 17)).to(dtype)
    y = torch.randint(1, 9, (3, 17)).to(dtype) * torch.where(torch.rand(3, 17) < 0.5, -1, 1).to(dtype)
    got, stats = compiled_on_trn(fn, x, y)
    want = fn(x, y)
    assert got.dtype == want.dtype and torch.equal(got.cpu(), want), name
    assert stats["eager_nodes"] == [] and len(stats["kernels"]) == 1, stats  # one library kernel


def test_integer_division_by_zero_in_a_program_is_an_error():
    compiled = torch.compile(lambda x, y: x // y + 1, backend="trn", dynamic=False)
    x, y = torch.arange(6, device="trn"), torch.tensor([1, 2, 0, 1, 1, 1], device="trn")
    with torch.inference_mode(), pytest.raises(RuntimeError, match="ZeroDivisionError"):
        compiled(x, y).cpu()
    torch.trn.synchronize()  # the device stays usable
    assert compiled(x, y.clamp(min=1)).cpu().tolist() == (x // y.clamp(min=1) + 1).cpu().tolist()


@pytest.mark.parametrize("dim,index_dtype", [(0, torch.int64), (1, torch.int32), (-1, torch.int64)])
def test_index_select_is_a_library_kernel(dim, index_dtype):
    """Speech2Text's sinusoidal positions, roll's gather: one index_select
    kernel; an index outside [0, size), negative included, is an error as on CPU."""
    torch.manual_seed(0)
    w = torch.randn(6, 9, 5)
    i = torch.tensor([3, 1, 4, 1], dtype=index_dtype)
    fn = lambda w, i: w.index_select(dim, i) * 2  # noqa: E731
    got, stats = compiled_on_trn(fn, w, i)
    assert torch.equal(got.cpu(), fn(w, i))
    assert stats["eager_nodes"] == [] and "index_select" in stats["kernels"], stats
    compiled = torch.compile(fn, backend="trn", dynamic=False)
    for bad in (-1, w.shape[dim]):
        with torch.inference_mode(), pytest.raises(RuntimeError, match=f"index {bad} is out of range"):
            compiled(w.to("trn"), torch.tensor([0, bad], dtype=index_dtype, device="trn")).cpu()
        torch.trn.synchronize()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int32])
@pytest.mark.parametrize("fn", [torch.floor, torch.ceil, torch.trunc, torch.round, torch.sign])
def test_rounding_and_sign_are_library_kernels(fn, dtype):
    """DeBERTa's position buckets (sign of int64 positions, ceil of a log):
    library kernels, halves rounded to even, NaN and infinities as on CPU."""
    x = torch.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -0.0, 0.0, -3.7, 3.7, 1e6 + 0.5])
    if dtype.is_floating_point:
        x = torch.cat([x, torch.tensor([float("nan"), float("inf"), -float("inf")])]).to(dtype)
    else:
        x = torch.arange(-5, 6).to(dtype)
    got, stats = compiled_on_trn(lambda a: fn(a) + 1, x)
    want = fn(x) + 1
    assert got.dtype == want.dtype
    torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0, equal_nan=True)
    assert stats["eager_nodes"] == [] and fn.__name__ in stats["kernels"], stats


def test_roll_compiles_without_eager_steps():
    """A full sliding-window cache rolls its keys: arange, fmod, index_select."""
    x = torch.randn(2, 2, 8, 4)
    fn = lambda x: x.roll(-1, dims=-2) + 1  # noqa: E731
    got, stats = compiled_on_trn(fn, x)
    assert torch.equal(got.cpu(), fn(x))
    assert stats["eager_nodes"] == [] and {"fmod", "index_select"} <= set(stats["kernels"]), stats


def test_max_pool_indices_come_from_the_eager_op():
    torch.manual_seed(0)
    pool = nn.MaxPool2d(3, stride=2, padding=1, return_indices=True)
    x = torch.randn(1, 2, 9, 9)
    want, want_idx = pool(x)
    with pytest.warns(UserWarning, match="max_pool2d_with_indices"):
        (got, got_idx), stats = compiled_on_trn(pool, x)
    torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0)
    assert torch.equal(got_idx.cpu(), want_idx)
    eager = [e.split("[")[0] for e in stats["eager_nodes"]]
    assert eager == ["aten.max_pool2d_with_indices.default"], stats
    assert "max_pool2d" in stats["kernels"], stats


def test_cat_with_a_legacy_empty_part_is_a_copy_not_an_eager_step():
    def fn(x, cache):  # a KV cache's first update: cat([empty, k])
        return torch.cat([cache, x * 2], dim=-2)

    x = torch.randn(2, 4, 5, 8).transpose(1, 2)
    cache = torch.tensor([])
    got, stats = compiled_on_trn(fn, x, cache)
    torch.testing.assert_close(got.cpu(), fn(x, cache))
    assert stats["eager_nodes"] == [], stats


@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
@pytest.mark.parametrize("dim", [0, 2])
def test_index_put_on_one_dim_is_a_library_kernel(index_dtype, dim):
    # A static KV cache's update: cache.index_copy_(2, pos, k) functionalized.
    def fn(cache, pos, k):
        idx = [None] * dim + [pos]
        return torch.ops.aten.index_put.default(cache, idx, k * 2)

    torch.manual_seed(0)
    cache = torch.randn(3, 4, 7, 5)
    pos = torch.tensor([2, 0], dtype=index_dtype)
    shape = list(cache.shape)
    shape[dim] = 2
    k = torch.randn(shape[::-1]).permute(3, 2, 1, 0)  # non-contiguous values
    got, stats = compiled_on_trn(fn, cache, pos, k)
    torch.testing.assert_close(got.cpu(), fn(cache, pos, k))
    assert "index_put" in stats["kernels"], stats
    assert stats["eager_nodes"] == []


def test_index_put_broadcasts_values_and_rejects_out_of_range_indices():
    def fn(cache, pos, v):
        return torch.ops.aten.index_put.default(cache, [None, pos], v)

    cache, v = torch.zeros(2, 6, 3), torch.arange(3.0)  # v broadcasts to [2, 1, 3]
    got, _ = compiled_on_trn(fn, cache, torch.tensor([4]), v)
    torch.testing.assert_close(got.cpu(), fn(cache, torch.tensor([4]), v))
    torch._dynamo.reset()
    with pytest.raises(RuntimeError, match="index 6 is out of bounds for dimension 1 with size 6"):
        with torch.inference_mode():
            compiled = torch.compile(fn, backend="trn", dynamic=False)
            compiled(cache.to("trn"), torch.tensor([6]).to("trn"), v.to("trn"))
            torch.trn.synchronize()


def _sparse_attention_put(context, index, update):
    # Informer's ProbSparse attention: context[arange(B)[:, None, None],
    # arange(H)[None, :, None], index, :] = update (three broadcasting indices).
    b, h = context.shape[:2]
    context = context * 2
    context[torch.arange(b)[:, None, None], torch.arange(h)[None, :, None], index, :] = update
    return context + 1


def _put_apart(x, rows, cols, v):
    # Indexed dims 0 and 2, not adjacent: torch puts B first in the values' order.
    return torch.ops.aten.index_put.default(x * 2, [rows, None, cols], v)


def _put_accumulate(x, rows, cols, v):
    return torch.ops.aten.index_put.default(x, [None, rows, cols], v, True) - 1


@pytest.mark.parametrize("case", ["informer", "apart", "accumulate"])
def test_index_put_with_several_index_tensors_is_the_library_kernel(case):
    torch.manual_seed(0)
    if case == "informer":
        fn = _sparse_attention_put
        args = (torch.randn(2, 3, 9, 4), torch.randint(0, 9, (2, 3, 5)),
                torch.randn(2, 3, 5, 4).transpose(0, 1).contiguous().transpose(0, 1))
    elif case == "apart":  # B = [2, 3] (rows [2, 1] by cols [3]), values [B..., 5]
        fn = _put_apart
        args = (torch.randn(4, 5, 6), torch.tensor([[3], [-1]]), torch.tensor([0, 5, 2]),
                torch.randn(5, 3, 2).permute(2, 1, 0))
    else:  # repeated index pairs sum, values broadcast over B = [4]
        fn = _put_accumulate
        args = (torch.randn(2, 3, 4), torch.tensor([1, 1, 0, 1]), torch.tensor([2, 2, 3, -2]),
                torch.randn(2, 1))
    got, stats = compiled_on_trn(fn, *args)
    torch.testing.assert_close(got.cpu(), fn(*args), rtol=1e-5, atol=1e-5)
    assert "index_put" in stats["kernels"] and stats["eager_nodes"] == [], stats


@pytest.mark.parametrize("dim", [0, 1])
def test_index_add_is_the_index_put_kernel_accumulating(dim):
    # JetMoE's expert outputs summed per token: index_add is index_put(accumulate=True),
    # repeated and negative indices included.
    def fn(x, idx, src):
        return (x * 2).index_add(dim, idx, src * 3) + 1

    torch.manual_seed(0)
    x = torch.randn(5, 6, 3)
    idx = torch.tensor([4, 0, 4, 2, 4])
    shape = [5, 6, 3]
    shape[dim] = 5
    src = torch.randn(shape)
    got, stats = compiled_on_trn(fn, x, idx, src)
    torch.testing.assert_close(got.cpu(), fn(x, idx, src), rtol=1e-5, atol=1e-5)
    assert "index_put" in stats["kernels"] and stats["eager_nodes"] == [], stats


def _mask_fill_leading(x, mask):
    y = x * 2
    y[mask] = 7.0  # mask over the leading dims: each selected row set
    return y + 1


def _mask_fill_all(x, mask):
    y = x.transpose(0, 1) * 2
    y[mask.transpose(0, 1)] = -3.0  # mask over every dim, both non-contiguous
    return y


def _mask_fill_middle(x, mask):
    y = x - 1
    y[:, mask[0]] = torch.tensor(5.0)  # after a leading slice; a CPU 0-dim value
    return y


@pytest.mark.parametrize("fn, mask_shape", [
    (_mask_fill_leading, (4, 6)), (_mask_fill_all, (4, 6, 3)), (_mask_fill_middle, (4, 6)),
])
def test_a_boolean_mask_put_of_one_value_is_a_where(fn, mask_shape):
    """Longformer's global-attention mask: index_put with a boolean mask and one value
    is a where on the mask (given unit dims for the dims after it)."""
    torch.manual_seed(0)
    x, mask = torch.randn(4, 6, 3), torch.rand(mask_shape) > 0.5
    got, stats = compiled_on_trn(fn, x, mask)
    torch.testing.assert_close(got.cpu(), fn(x, mask))
    assert stats["eager_nodes"] == [] and stats["fallback"] is None, stats


def _one_hot_by_scatter(logits, _):
    # The MoE routers' expert mask: zeros scattered with 1 at the top-k experts.
    top = logits.topk(2, dim=-1).indices
    return torch.zeros_like(logits).scatter(-1, top, 1.0) * logits.softmax(-1)


def _scatter_src_strided(x, idx):
    src = (x * 3).transpose(0, 1)  # non-contiguous src, index smaller than src
    return (x + 1).scatter(0, idx, src[: idx.shape[0], : idx.shape[1]])


def _scatter_add_repeats(x, idx):
    return torch.zeros(4, 5, 3, device=x.device).scatter_add(1, idx.unsqueeze(-1).expand(-1, -1, 3) % 5,
                                            x[:, :4].unsqueeze(-1).expand(-1, -1, 3) * 2)


def _scatter_int_mask(x, idx):
    hits = torch.zeros(4, 6, dtype=torch.int64, device=x.device).scatter(1, idx % 6, 7)
    mask = torch.zeros(4, 6, dtype=torch.bool, device=x.device).scatter(1, idx % 6, True)
    return x * hits[:, :5], mask


@pytest.mark.parametrize("fn", [_one_hot_by_scatter, _scatter_src_strided, _scatter_add_repeats,
                                _scatter_int_mask])
def test_scatter_is_a_library_kernel(fn):
    torch.manual_seed(0)
    x = torch.randn(4, 5)
    idx = torch.randint(0, 4, (3, 4))  # repeats: the last write wins, as eager on CPU
    if fn is _scatter_src_strided:  # one write per target so the order cannot matter
        idx = torch.stack([torch.randperm(4)[:3] for _ in range(4)], 1)
    got, stats = compiled_on_trn(fn, x, idx)
    for g, w in zip(pytree.tree_leaves(got), pytree.tree_leaves(fn(x, idx))):
        torch.testing.assert_close(g.cpu(), w, rtol=1e-5, atol=1e-5)
    assert stats["eager_nodes"] == [] and stats["fallback"] is None, stats
    assert any("scatter" in k for k in stats["kernels"]), stats


@pytest.mark.parametrize("dtype", [torch.int64, torch.float32])
def test_arange_of_constants_is_a_library_kernel(dtype):
    def fn(x):
        return x + torch.arange(2, 2 + 3 * x.shape[0], 3, dtype=dtype, device=x.device)

    x = torch.randn(9).to(dtype)
    got, stats = compiled_on_trn(fn, x)
    torch.testing.assert_close(got.cpu(), fn(x))
    assert any("arange" in k for k in stats["kernels"]), stats
    assert stats["eager_nodes"] == []


@pytest.mark.parametrize("target", ["best", "AVX2", "SSE4", "SCALAR"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_rounding_through_16_bit_floats_inside_a_fused_kernel_matches_cpu(dtype, target):
    """A bfloat16 / float16 model's casts inside fused kernels round in SIMD: ties to
    even, overflow to inf, subnormals, signed zeros and NaN exactly as CPU's casts, on
    every SIMD target (Note [float16 conversion targets]: SSE4 emulates float16 badly)."""
    try:
        torch.ops.trnscope._set_simd_target(target)
    except RuntimeError:
        pytest.skip(f"{target} is not compiled or not run by this CPU")
    try:
        _check_rounding_through(dtype)
    finally:
        torch.ops.trnscope._set_simd_target("best")


def _check_rounding_through(dtype):
    def fn(x):
        return (x * 1.0).to(dtype).to(torch.float32) * 1.0

    tiny = torch.finfo(dtype).tiny
    edges = [0.0, -0.0, 1.0, 1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-11, 1 + 3 * 2**-11, -2.5,
             torch.finfo(dtype).max, 3.0e38, 65519.0, 65520.0, tiny, tiny / 3, -tiny / 7,
             1e-8, 6e-8, float("inf"), -float("inf"), float("nan"), 0.1, -7.3e-3]
    g = torch.Generator().manual_seed(0)
    x = torch.cat([torch.tensor(edges), torch.randn(1000, generator=g) * 1e3,
                   torch.randn(1000, generator=g) * 1e-5])
    got, stats = compiled_on_trn(fn, x)
    want = fn(x)
    assert torch.equal(got.cpu().isnan(), want.isnan())
    keep = ~want.isnan()
    assert torch.equal(got.cpu()[keep], want[keep])
    assert torch.equal(got.cpu()[keep].signbit(), want[keep].signbit())
    assert stats["eager_nodes"] == [] and len(stats["kernels"]) == 1, stats["kernels"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
@pytest.mark.parametrize("dim", [-1, 0])
def test_topk_and_sort_are_library_kernels(dtype, dim):
    """MoE routing's topk / sort: the indices one core kernel each (shared by both
    outputs), the values a gather by them; eager's order, ties by index, NaN largest."""
    g = torch.Generator().manual_seed(4)
    x = torch.randint(-3, 4, (6, 8), generator=g).to(dtype)  # ties
    if dtype.is_floating_point:
        x[1, 2] = x[4, 5] = float("nan")

    def fn(a):
        v, i = a.topk(3, dim=dim)
        w, j = torch.topk(a, 2, dim=dim, largest=False)
        s, k = a.sort(dim=dim, descending=True)
        t, m = torch.sort(a, dim=dim, stable=True)
        return v, i, w, j, s, k, t, m

    got, stats = compiled_on_trn(fn, x)
    for g_, w_ in zip(got, fn(x.to("trn"))):  # the eager kernels' answer, exactly
        torch.testing.assert_close(g_.cpu(), w_.cpu(), rtol=0, atol=0, equal_nan=True)
    want = fn(x)
    for n in range(0, 8, 2):  # CPU: the same values; indices that pick them (CPU's tie
        values, indices = got[n].cpu(), got[n + 1].cpu()  # order is unspecified but
        torch.testing.assert_close(values, want[n], rtol=0, atol=0, equal_nan=True)  # stable's)
        torch.testing.assert_close(x.gather(dim, indices), values, rtol=0, atol=0, equal_nan=True)
    assert torch.equal(got[7].cpu(), want[7])  # the stable sort's indices
    assert stats["eager_nodes"] == [], stats
    # Per call an indices kernel and the values' gather, both named after the call's op.
    assert sorted(stats["kernels"]) == ["sort"] * 4 + ["topk"] * 4, stats["kernels"]


def test_histc_and_empty_are_core_nodes():
    """MoE's expert counts (histc of int64 ids, as CUDA; floats as CPU) and an
    empty_permuted buffer that the graph fills: no eager steps."""
    ids = torch.tensor([[0, 3], [3, 1], [7, 7], [2, 0]])
    x = torch.randn(4, 2, generator=torch.Generator().manual_seed(1))

    def fn(i, a):
        counts = torch.histc(i, bins=8, min=0, max=7)
        spread = torch.histc(a, bins=5)  # min = max = 0: the data's range
        buf = torch.empty_permuted((4, 2), (1, 0), device=a.device)
        buf.copy_(a * 2)
        return counts, spread, buf + 1

    got, stats = compiled_on_trn(fn, ids, x)
    want_counts = torch.histc(ids.float(), bins=8, min=0, max=7).long()  # CPU: floats only
    assert torch.equal(got[0].cpu(), want_counts)
    torch.testing.assert_close(got[1].cpu(), torch.histc(x, bins=5))
    torch.testing.assert_close(got[2].cpu(), x * 2 + 1)
    assert stats["eager_nodes"] == [], stats
    assert stats["kernels"].count("histc") == 2, stats["kernels"]


@pytest.mark.parametrize("n,m,dtype", [(16, None, torch.float32), (5, 9, torch.bool),
                                         (300, 2, torch.int64)], ids=str)
def test_eye_compiles_without_a_byte_range(n, m, dtype):
    """torch's reference eye builds uint8 ranges below 256 rows (a dtype trn has
    no kernels for: the whole graph ran eagerly); trn's decomposition uses int64."""
    x = torch.ones(n, n if m is None else m, dtype=dtype)

    def fn(a):
        eye = torch.eye(n, device=a.device, dtype=dtype) if m is None else \
            torch.eye(n, m, device=a.device, dtype=dtype)
        return eye, (eye + a) if dtype != torch.bool else eye & a

    got, stats = compiled_on_trn(fn, x)
    for g_, w_ in zip(got, fn(x)):
        assert g_.dtype == w_.dtype and torch.equal(g_.cpu(), w_)
    assert stats["fallback"] is None and stats["eager_nodes"] == [], stats


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_float_rounding_division_and_flip_are_library_kernels(dtype):
    """DETR's sine positions (float div with rounding_mode), LED's flip: library
    kernels, eager's results (floats: 0 divides to inf / NaN; bfloat16 rounds as CPU)."""
    g = torch.Generator().manual_seed(6)
    x = (torch.randn(5, 7, generator=g) * 20).to(dtype)
    y = (torch.randn(5, 7, generator=g) * 3).to(dtype)
    if dtype.is_floating_point:
        y[0, 0] = 0
    else:
        y = y.masked_fill(y == 0, 1)

    def fn(a, b):
        return (torch.div(a, b, rounding_mode="floor"), torch.div(a, b, rounding_mode="trunc"),
                a // 3, torch.flip(a, [0, -1]), torch.flip(b, [1]) + 1)

    got, stats = compiled_on_trn(fn, x, y)
    for g_, w_ in zip(got, fn(x, y)):
        torch.testing.assert_close(g_.cpu(), w_, rtol=0, atol=0, equal_nan=True)
    assert stats["eager_nodes"] == [], stats
    assert sorted(stats["kernels"]) == ["add", "div", "div", "div", "flip", "flip"], stats


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_cumulative_extrema_and_logcumsumexp_are_library_kernels(dtype):
    """cummax / cummin (indices a scan kernel, values gathered) and logcumsumexp:
    eager's kernels, ties and NaN as CPU."""
    g = torch.Generator().manual_seed(8)
    x = torch.randint(-2, 3, (5, 7), generator=g).to(dtype)
    if dtype.is_floating_point:
        x[1, 2] = float("nan")

    def fn(a):
        v, i = torch.cummax(a, 1)
        w, j = torch.cummin(a, 0)
        out = (v, i, w, j)
        return out + (torch.logcumsumexp(a * 3, 1),) if a.is_floating_point() else out

    got, stats = compiled_on_trn(fn, x)
    for g_, w_ in zip(got, fn(x)):
        tol = 1e-2 if dtype == torch.bfloat16 else 1e-5
        torch.testing.assert_close(g_.cpu(), w_, rtol=tol, atol=tol, equal_nan=True)
    assert stats["eager_nodes"] == [], stats


def test_cpu_constant_output_runs_in_the_host_prelude():
    """Note [Host prelude]: a torch.tensor literal returned by the graph (DeBERTa's
    attention span, read with .item() after it) stays a CPU tensor, computed per
    call, and the rest of the graph is one program (it ran the whole graph eagerly)."""
    def fn(x):
        span = torch.tensor(4)
        return (x @ x.T).relu() * 2, span

    x = torch.randn(8, 8, generator=torch.Generator().manual_seed(0))
    compiled = torch.compile(fn, backend="trn", dynamic=False)
    with torch.no_grad():
        y, span = compiled(x.to("trn"))
        y2, span2 = compiled(x.to("trn"))
    (stats,) = trnscope.compile_stats()
    assert stats["fallback"] is None and stats["eager_nodes"] == [], stats
    torch.testing.assert_close(y.cpu(), fn(x)[0])
    assert span.device.type == "cpu" and span.item() == 4
    span.add_(1)  # a fresh tensor per call, as eagerly
    assert span2.item() == 4 and span2.data_ptr() != span.data_ptr()


def test_cpu_random_index_runs_in_the_host_prelude():
    """Note [Host prelude]: torch.randint without a device (Informer's ProbSparse
    key sample) draws from the CPU generator per call, in eager's order, and the
    trn tensor it indexes stays in the program."""
    def fn(k):
        idx = torch.randint(8, (4,))
        j = torch.randint(3, (2,))
        return (k[:, idx] * 2).sum(-1) + j.sum()

    k = torch.randn(3, 8, generator=torch.Generator().manual_seed(1))
    compiled = torch.compile(fn, backend="trn", dynamic=False)
    torch.manual_seed(0)
    want = [fn(k) for _ in range(3)]
    torch.manual_seed(0)
    with torch.no_grad():
        got = [compiled(k.to("trn")) for _ in range(3)]
    (stats,) = trnscope.compile_stats()
    assert stats["fallback"] is None, stats
    for g_, w_ in zip(got, want):
        torch.testing.assert_close(g_.cpu(), w_)
    assert not torch.equal(want[0], want[1])  # fresh draws per call


def test_cpu_value_from_a_dynamic_size_runs_in_the_host_prelude():
    """Note [Host prelude]: a 0-dim CPU tensor computed from a symbolic size
    (Longformer's and LED's chunk count, torch.div(seq_len, w) - 1) is computed
    per call from the call's sizes; the graph ran eagerly at every length."""
    def fn(x):
        chunks = torch.div(x.shape[1], 4, rounding_mode="trunc") - 1
        return (x @ x.transpose(1, 2)).softmax(-1) * chunks, chunks

    compiled = torch.compile(fn, backend="trn", dynamic=True)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for seq in (12, 7, 21):
            x = torch.randn(2, seq, 16, generator=gen)
            got, chunks = compiled(x.to("trn"))
            want, want_chunks = fn(x)
            torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
            assert chunks.device.type == "cpu" and chunks.item() == want_chunks.item() == seq // 4 - 1
    stats = trnscope.compile_stats()
    assert len(stats) == 3 and stats[-1]["specialized"], stats
    for s in stats:
        assert s["fallback"] is None and s["eager_nodes"] == [], s
