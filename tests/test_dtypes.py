"""dtypes the native kernels do not take (Note [dtypes the kernels do not take]):
complex, uint8, int8, int16 and float8 tensors, complex Scalars and dtype
arguments send the op through the CPU fallback. The reference is CPU PyTorch:
trn gives CPU's result exactly (the CPU computes it), or raises CPU's exception
type where CPU raises; each such op is counted in trnscope.fallback_ops().
Integer matmul and convolution (the kernels compute floating dtypes only) do
the same."""

import math

import pytest
import torch
import torch.nn.functional as F

import trnscope
from conftest import run_python

C64, C128 = torch.complex64, torch.complex128
U8, I8, I16 = torch.uint8, torch.int8, torch.int16
OTHER = [C64, C128, U8, I8, I16, torch.float8_e4m3fn, torch.float8_e5m2]


def sample(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_complex:
        return torch.randn(shape, dtype=dtype, generator=g) * 3
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g) * 3).to(dtype)
    lo = 0 if dtype == U8 else -60
    return torch.randint(lo, 60, shape, generator=g).to(dtype)


def bits(t):
    """The tensor as its bit patterns where equality must be exact (NaN == NaN)."""
    t = t.contiguous()
    if t.dtype.is_complex:
        t = torch.view_as_real(t)
    if t.dtype.is_floating_point:
        ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
        return t.view(ints[t.dtype.itemsize])
    return t


def new_fallbacks(before):
    torch.trn.synchronize()
    after = trnscope.fallback_ops()
    return {op: n - before.get(op, 0) for op, n in after.items() if n != before.get(op, 0)}


def same_as_cpu(fn, *cpu_args, fallback=True):
    """fn on CPU and on trn copies: equal results (the CPU computes both) and the
    trn run counted as fallback (or not, for data movement that takes every
    dtype natively), or the same exception type."""
    try:
        want, error = fn(*cpu_args), None
    except Exception as e:  # noqa: BLE001 - CPU's own verdict is the reference
        want, error = None, e
    before = trnscope.fallback_ops()
    trn_args = [a.to("trn") if isinstance(a, torch.Tensor) else a for a in cpu_args]
    if error is not None:
        with pytest.raises(type(error)):
            fn(*trn_args)
            torch.trn.synchronize()
        return
    got = fn(*trn_args)
    wants = want if isinstance(want, (tuple, list)) else (want,)
    gots = got if isinstance(got, (tuple, list)) else (got,)
    for w, g in zip(wants, gots):
        assert g.device.type == "trn" and g.dtype == w.dtype and g.shape == w.shape
        assert torch.equal(bits(g.cpu()), bits(w)), (g.cpu(), w)
    if fallback:
        assert new_fallbacks(before), "expected the op to be counted as a CPU fallback"
    else:
        assert new_fallbacks(before) == {}


OPS = {
    "add": lambda a, b: a + b,
    "mul_scalar": lambda a, b: a * 3,
    "sub_": lambda a, b: a.clone().sub_(b),
    "eq": lambda a, b: a == b,
    "sum": lambda a, b: a.sum(-1),
    "amax": lambda a, b: a.amax(0),
    "exp": lambda a, b: torch.exp(a),
    "neg": lambda a, b: -a,
    "abs": lambda a, b: a.abs(),
    "where": lambda a, b: torch.where(a == b, a, b),
    "clone_permuted": lambda a, b: a.permute(1, 0).contiguous(),
    "cat": lambda a, b: torch.cat([a, b], 1),
    "index_select": lambda a, b: a.index_select(0, torch.tensor([2, 0], device=a.device)),
    "getitem_mask": lambda a, b: a[torch.tensor([True, False, True, False], device=a.device)],
    "zeros_like": lambda a, b: torch.zeros_like(a),
    "fill": lambda a, b: torch.empty_like(a).fill_(1),
    "softmax": lambda a, b: torch.softmax(a, -1),
    "matmul": lambda a, b: a @ b.T,
}


EVERY_DTYPE = {"clone_permuted"}  # clone copies any dtype on the device (host copy)
# complex64's own kernels (tests/test_complex.py): no fallback, CPU's bits; exp
# (polar of exp and the angle) and sum within float32 rounding of CPU's.
COMPLEX64 = {"add", "mul_scalar", "sub_", "abs", "neg", "cat", "zeros_like"}


@pytest.mark.uses_fallback
@pytest.mark.parametrize("dtype", OTHER, ids=str)
@pytest.mark.parametrize("op", list(OPS))
def test_op_on_a_dtype_the_kernels_do_not_take_equals_cpu(op, dtype):
    if dtype == C64 and op in ("exp", "sum"):  # float32 rounding (sum: its own order)
        a = sample((4, 6), dtype, 0)
        before = trnscope.fallback_ops()
        torch.testing.assert_close(OPS[op](a.to("trn"), None).cpu(), OPS[op](a, None))
        assert new_fallbacks(before) == {}
        return
    native = op in EVERY_DTYPE or (dtype == C64 and op in COMPLEX64)
    same_as_cpu(OPS[op], sample((4, 6), dtype, 0), sample((4, 6), dtype, 1), fallback=not native)


@pytest.mark.uses_fallback
def test_complex_scalars_and_dtype_arguments_run_on_the_cpu():
    x = sample((3, 5), torch.float32)
    # complex64's own kernels take these (tests/test_complex.py)
    same_as_cpu(lambda a: a * 1j, x, fallback=False)
    same_as_cpu(lambda a: a + (2 - 1j), x, fallback=False)
    # Scalar arguments proper (Python numbers above become wrapped tensors).
    same_as_cpu(lambda a: torch.pow(a, 0.5j), x)
    same_as_cpu(lambda a: torch.pow(1j, a), x)
    same_as_cpu(lambda a: torch.ops.aten.mul.Scalar(a, 1j), x, fallback=False)
    same_as_cpu(lambda a: torch.where(a > 0, a, 1j), x)
    same_as_cpu(lambda a: a.masked_fill(a > 0, 1j), x)  # CPU's error
    same_as_cpu(lambda a: a.sum(dtype=C64), x)
    same_as_cpu(lambda a: torch.cumsum(a, 0, dtype=C128), x)
    same_as_cpu(lambda a: torch.zeros(3, dtype=C64, device=a.device) + a[0, :3], x,
                fallback=False)  # complex64 zero_ and add: its own kernels


@pytest.mark.uses_fallback
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, U8], ids=str)
def test_integer_matmul_and_convolution_equal_cpu(dtype):
    a, b = sample((5, 7), dtype, 0), sample((7, 3), dtype, 1)
    same_as_cpu(torch.mm, a, b)
    same_as_cpu(lambda x, y: torch.addmm(x[:, :3], x, y), a, b)
    same_as_cpu(torch.bmm, a.unsqueeze(0), b.unsqueeze(0))
    same_as_cpu(lambda x, y: F.linear(x, y.T), a, b)
    same_as_cpu(torch.mv, a, b[:, 0])
    same_as_cpu(torch.dot, a[0], b[:, 0])
    same_as_cpu(F.conv1d, sample((1, 2, 9), dtype), sample((3, 2, 3), dtype, 1))


def test_native_dtypes_do_not_fall_back():
    before = trnscope.fallback_ops()
    for dtype in [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int32,
                  torch.int64, torch.bool]:
        a = sample((4, 6), dtype).to("trn")
        (a == a).sum()
        torch.cat([a, a]).permute(1, 0).contiguous()
        if dtype.is_floating_point:
            a @ a.T
    assert new_fallbacks(before) == {}


def rope_complex(x, freqs_cis):
    """Meta's reference Llama rotary embedding: a complex product."""
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(xc * freqs_cis).flatten(-2).type_as(x)


@pytest.mark.uses_fallback
def test_meta_style_complex_rotary_embedding_equals_cpu():
    b, s, h, d = 2, 6, 4, 8
    freqs = 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
    angles = torch.outer(torch.arange(s).float(), freqs)
    freqs_cis = torch.polar(torch.ones_like(angles), angles).view(1, s, 1, d // 2)
    x = torch.randn(b, s, h, d)
    want = rope_complex(x, freqs_cis)
    got = rope_complex(x.to("trn"), freqs_cis.to("trn"))
    torch.testing.assert_close(got.cpu(), want)
    # The same product through real arithmetic: what the complex numbers mean.
    xr, xi = x[..., 0::2], x[..., 1::2]
    cr, ci = freqs_cis.real, freqs_cis.imag
    by_hand = torch.stack([xr * cr - xi * ci, xr * ci + xi * cr], -1).flatten(-2)
    torch.testing.assert_close(got.cpu(), by_hand, rtol=1e-5, atol=1e-5)


@pytest.mark.uses_fallback
def test_uint8_image_preprocessing_equals_cpu():
    img = torch.randint(0, 256, (2, 32, 24, 3), dtype=U8)  # N H W C, as decoded

    def prep(t):
        x = t.permute(0, 3, 1, 2).contiguous()
        x = F.interpolate(x, size=(16, 12), mode="nearest")
        x = x.float().div(255)
        mean = torch.tensor([0.485, 0.456, 0.406], device=t.device).view(1, 3, 1, 1)
        return (x - mean) / 0.25

    torch.testing.assert_close(prep(img.to("trn")).cpu(), prep(img))


@pytest.mark.uses_fallback
def test_fft_spectrogram_equals_cpu():
    wave = torch.randn(2, 400)
    window = torch.hann_window(64)

    def spec(w, win):
        return torch.stft(w, 64, 16, window=win, return_complex=True).abs().pow(2)

    torch.testing.assert_close(spec(wave.to("trn"), window.to("trn")).cpu(), spec(wave, window))


@pytest.mark.uses_fallback
def test_compiled_graph_with_complex_ops_equals_eager():
    def f(x, freqs_cis):
        return rope_complex(x, freqs_cis) * 2 + 1

    s, d = 6, 8
    angles = torch.outer(torch.arange(s).float(), torch.arange(d // 2).float() / d)
    freqs_cis = torch.polar(torch.ones_like(angles), angles)
    x = torch.randn(2, s, d)
    compiled = torch.compile(f, backend="trn")
    got = compiled(x.to("trn"), freqs_cis.to("trn"))
    torch.testing.assert_close(got.cpu(), f(x, freqs_cis))


def test_disabled_fallback_names_the_op_and_dtype():
    out = run_python(
        "import torch, trnscope\n"
        "z = torch.tensor([1 + 2j]).to('trn')\n"
        "try:\n"
        "    z == z\n"
        "except NotImplementedError as e:\n"
        "    print('raised', 'aten::eq' in str(e))\n",
        env={"TRN_DISABLE_FALLBACK": "1"},
    )
    assert out.stdout.strip().splitlines()[-1] == "raised True", out.stdout + out.stderr


def test_inplace_and_out_variants_write_the_trn_tensor():
    a = sample((3, 4), C64)
    t = a.to("trn")
    ptr = t.data_ptr()
    t.mul_(2j)
    assert t.data_ptr() == ptr
    torch.testing.assert_close(t.cpu(), a * 2j)
    out = torch.empty(3, 4, dtype=C64, device="trn")
    r = torch.add(t, t, out=out)
    assert r is out and out.data_ptr() != ptr
    torch.testing.assert_close(out.cpu(), a * 4j)
    assert math.isclose(t[0, 0].item().imag, (a[0, 0] * 2j).imag, rel_tol=1e-6)


@pytest.mark.uses_fallback
def test_conjugate_views_and_complex_views_write_through():
    """A conj-bit tensor is cloned on the host (the fallback would recurse);
    view_as_real / view_as_complex are views, so .real / .imag write through."""
    z = sample((5,), C64)
    torch.testing.assert_close(z.to("trn").conj().cpu(), z.conj())
    torch.testing.assert_close((z.to("trn").conj() * z.to("trn")).cpu(), z.conj() * z)
    torch.testing.assert_close(z.to("trn").conj().clone().cpu(), z.conj().clone())
    c = torch.zeros(3, dtype=C64, device="trn")
    c.real.fill_(1)
    c.imag.add_(2)
    torch.testing.assert_close(c.cpu(), torch.full((3,), 1 + 2j, dtype=C64))
    x = torch.randn(4, 6, device="trn")
    assert torch.view_as_complex(x.view(4, 3, 2)).data_ptr() == x.data_ptr()


@pytest.mark.uses_fallback
def test_complex_rotary_backward_and_adam_on_a_complex_parameter_equal_cpu():
    x = torch.randn(2, 4, 8)
    freqs = torch.polar(torch.ones(4, 4), torch.randn(4, 4))

    def grad(x, f):
        x = x.clone().requires_grad_()
        y = torch.view_as_real(torch.view_as_complex(x.reshape(2, 4, 4, 2)) * f).flatten(-2)
        y.pow(2).sum().backward()
        return x.grad

    torch.testing.assert_close(grad(x.to("trn"), freqs.to("trn")).cpu(), grad(x, freqs))
    params = [torch.nn.Parameter(torch.ones(2, dtype=C64, device=d)) for d in ("cpu", "trn")]
    for p in params:
        opt = torch.optim.Adam([p], lr=0.1)
        p.grad = torch.ones_like(p)
        opt.step()
    torch.testing.assert_close(params[1].detach().cpu(), params[0].detach())


@pytest.mark.uses_fallback
def test_integers_beyond_int32_compute_exactly():
    """Python ints and Scalars reach the kernels as doubles: beyond int32 they go
    to the CPU, which wraps and rounds as torch does."""
    big = 2**62 + 1
    a64, a32 = torch.tensor([1, -3]), torch.tensor([1, -3], dtype=torch.int32)
    for fn in [lambda t: t + big, lambda t: t * 3 - big, lambda t: t + 2**40,
               lambda t: torch.full_like(t, 7).fill_(big) if t.dtype == torch.int64 else t,
               lambda t: torch.where(t > 0, t, big) if t.dtype == torch.int64 else t]:
        for t in (a64, a32):
            assert torch.equal(fn(t.to("trn")).cpu(), fn(t)), (fn, t.dtype)
    assert (torch.tensor([5], device="trn") + 7).item() == 12  # small ints stay native
