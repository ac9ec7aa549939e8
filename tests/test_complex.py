"""complex64 on trn against CPU PyTorch (core/kernels/complex.h, torch_bridge/ops_complex.cc):
arithmetic with complex, real and scalar operands (broadcast, conjugate views), in place too,
sum and mean,
neg, reciprocal, abs, angle, exp, log, sqrt, polar, complex, conj_physical, cat, zero
padding, roll, copies and casts, every torch.fft transform the three
_fft_* ops reach (norms, lengths, dims, non-contiguous inputs), stft, Meta's
complex rotary embedding and Hugging Face's FNet, eagerly and compiled, with no
CPU fallback. Arithmetic is exact or within an ulp of CPU's; FFTs within
rtol/atol 1e-4 relative to the spectrum's scale (float32 FFTs round
differently in every library)."""

import warnings

import pytest
import torch

import trnscope

pytestmark = pytest.mark.usefixtures("no_fallback")

C64 = torch.complex64


def cplx(*shape, seed=0):
    return torch.randn(*shape, dtype=C64, generator=torch.Generator().manual_seed(seed))


def real(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def close(got, want, rtol=1e-5, atol=1e-5):
    assert got.device.type == "trn" and got.dtype == want.dtype and got.shape == want.shape
    scale = max(1.0, want.abs().max().item()) if want.numel() else 1.0
    torch.testing.assert_close(got.cpu(), want, rtol=rtol, atol=atol * scale)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "add_alpha"])
@pytest.mark.parametrize("other", ["complex", "broadcast", "conj", "real", "real_scalar",
                                   "complex_scalar", "transposed"])
def test_arithmetic_matches_cpu(op, other):
    a = cplx(3, 4, 5)
    b = {"complex": cplx(3, 4, 5, seed=1), "broadcast": cplx(4, 1, seed=1),
         "conj": cplx(4, 5, seed=1).conj(), "real": real(3, 4, 5, seed=1),
         "real_scalar": 2.5, "complex_scalar": 0.5 - 2j,
         "transposed": cplx(5, 4, 3, seed=1).permute(2, 1, 0)}[other]
    fn = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
          "div": lambda x, y: x / y, "add_alpha": lambda x, y: torch.add(x, y, alpha=3)}[op]
    if op == "add_alpha" and not isinstance(b, torch.Tensor):
        b = torch.tensor(b).expand(3, 4, 5)  # add's alpha needs a tensor
    tb = b.to("trn") if isinstance(b, torch.Tensor) else b
    close(fn(a.to("trn"), tb), fn(a, b))
    close(fn(tb, a.to("trn")), fn(b, a))  # the other operand first


@pytest.mark.parametrize("op", ["add_", "sub_", "mul_", "div_", "add_alpha_"])
@pytest.mark.parametrize("other", ["complex", "broadcast", "conj", "real", "real_scalar",
                                   "complex_scalar", "transposed", "itself", "its_conj"])
def test_in_place_arithmetic_matches_cpu(op, other):
    def run(a):
        b = {"complex": cplx(3, 4, 5, seed=1), "broadcast": cplx(4, 1, seed=1),
             "conj": cplx(4, 5, seed=1).conj(), "real": real(3, 4, 5, seed=1),
             "real_scalar": 2.5, "complex_scalar": 0.5 - 2j,
             "transposed": cplx(5, 4, 3, seed=1).permute(2, 1, 0), "itself": a,
             "its_conj": a.conj()}[other]
        if isinstance(b, torch.Tensor) and b.device != a.device:
            b = b.to(a.device)
        if op == "add_alpha_":
            return a.add_(b, alpha=3)
        return getattr(a, op)(b)

    want = run(cplx(3, 4, 5))
    got_self = cplx(3, 4, 5).to("trn")
    got = run(got_self)
    assert got.data_ptr() == got_self.data_ptr()
    close(got, want)


@pytest.mark.uses_fallback
def test_in_place_cases_the_kernel_leaves_to_the_fallback():
    """Overlapping operands, a conjugate view as self, a complex128 operand and
    a bool one: CPU's results and errors, through the fallback."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for fn in (lambda t: t[1:].add_(t[:-1]),            # partial overlap
                   lambda t: t.conj().mul_(2j),             # writes through a conj view
                   lambda t: t.mul_(torch.ones(5, dtype=torch.complex128, device=t.device))):
            want, got = cplx(6, 5), cplx(6, 5).to("trn")
            raised = None
            try:
                fn(want)
            except RuntimeError as e:
                raised = type(e)
            if raised:
                with pytest.raises(raised):
                    fn(got)
            else:
                fn(got)
                close(got, want)
        with pytest.raises(RuntimeError):
            cplx(3).to("trn").sub_(torch.ones(3, dtype=torch.bool, device="trn"))
        with pytest.raises(RuntimeError):  # complex into a real tensor
            real(3).to("trn").mul_(cplx(3).to("trn"))


@pytest.mark.parametrize("case", ["all", "dims", "neg_dim_keepdim", "empty_dims", "conj",
                                  "transposed", "empty"])
@pytest.mark.parametrize("mean", [False, True])
def test_sum_and_mean_match_cpu(case, mean):
    def run(x):
        f = torch.mean if mean else torch.sum
        return {"all": lambda: f(x), "dims": lambda: f(x, (0, 2)),
                "neg_dim_keepdim": lambda: f(x, -1, keepdim=True),
                "empty_dims": lambda: f(x, []) if not mean else f(x, (1,)),
                "conj": lambda: f(x.conj(), 1), "transposed": lambda: f(x.transpose(0, 2), 0),
                "empty": lambda: f(x[:, :0], 1)}[case]()

    x = cplx(6, 7, 9)
    got, want = run(x.to("trn")), run(x)
    assert not got.is_conj() and got.shape == want.shape
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5, equal_nan=True)


@pytest.mark.uses_fallback
def test_sum_of_a_0d_tensor_and_in_complex128_take_the_fallback():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        z = cplx(1)[0]
        close(z.to("trn").sum(), z.sum())
        want = cplx(4).sum(dtype=torch.complex128)
        got = cplx(4).to("trn").sum(dtype=torch.complex128)
        assert got.dtype == torch.complex128
        torch.testing.assert_close(got.cpu(), want)


def test_real_tensor_times_complex_scalar_and_division_by_zero():
    x = real(4, 6)
    close(x.to("trn") * 1j, x * 1j)
    close(x.to("trn") + (2 - 1j), x + (2 - 1j))
    z, zero = cplx(3), torch.zeros(3, dtype=C64)
    got = (z.to("trn") / zero.to("trn")).cpu()
    want = z / zero
    assert torch.equal(torch.isnan(got.real), torch.isnan(want.real))
    assert torch.equal(torch.isinf(got.real), torch.isinf(want.real))


def test_neg_reciprocal_pad_and_roll():
    z = cplx(4, 6)
    z[0, 0] = 0
    zt = z.to("trn")
    close(-zt, -z, 0, 0)
    assert torch.equal(torch.signbit(torch.view_as_real((-zt).cpu())),
                       torch.signbit(torch.view_as_real(-z)))  # CPU's 0 - z: +0
    close(-zt.conj(), -z.conj(), 0, 0)
    close(1 / zt[1:], 1 / z[1:])
    close(torch.nn.functional.pad(zt, (1, 2, 0, 3)), torch.nn.functional.pad(z, (1, 2, 0, 3)), 0, 0)
    close(torch.roll(zt.conj(), (2, -1), (0, -1)), torch.roll(z.conj(), (2, -1), (0, -1)), 0, 0)


def test_angle_exp_conj_physical_and_cat():
    z = cplx(4, 6)
    zt = z.to("trn")
    close(torch.angle(zt), torch.angle(z))
    close(torch.angle(zt.conj()), torch.angle(z.conj()))
    close(torch.exp(zt), torch.exp(z))
    close(torch.exp(zt.conj()), torch.exp(z.conj()))
    for f in (torch.log, torch.sqrt):  # principal branches (the cut on the negative reals)
        close(f(zt), f(z))
        close(f(zt.conj().t()), f(z.conj().t()))
    edges = torch.tensor([0, -1, complex(-1, -0.0), 1j, float("inf"), complex(-4, 1e-30)], dtype=C64)
    for f in (torch.log, torch.sqrt):
        torch.testing.assert_close(f(edges.to("trn")).cpu(), f(edges), equal_nan=True)
    close(torch.conj_physical(zt), torch.conj_physical(z), 0, 0)
    w = cplx(4, 3, seed=1)
    close(torch.cat([zt, w.to("trn").conj()], -1), torch.cat([z, w.conj()], -1), 0, 0)
    close(torch.stack([zt, zt * 2]), torch.stack([z, z * 2]), 0, 0)


@pytest.mark.uses_fallback  # in-place mul, an 8-D cat and CPU's bool error take the fallback
def test_review_cases_match_cpu():
    """Session 27's review: negative views (z.conj().imag) keep their sign eagerly,
    compiled and through solve_triangular; writes through conjugate views land;
    exp's overflow keeps a zero imaginary part; add of infinite components is
    CPU's a + alpha * b; complex minus bool raises; 8-D complex tensors copy;
    zero_ and conj_physical_ in place."""
    z = torch.tensor([1 + 2j, 3 - 4j])
    zt = z.to("trn")
    assert torch.equal(zt.conj().imag.cpu(), z.conj().imag)
    assert torch.equal((zt.conj().imag + 1).cpu(), z.conj().imag + 1)
    assert torch.equal(torch.compile(lambda a: a.conj().imag + 1, backend="trn")(zt).cpu(),
                       z.conj().imag + 1)
    a = torch.tensor([[2.0, 0.0], [1.0, 4.0]])
    b = torch.tensor([[1 + 2j, 3 - 1j], [2 + 2j, -1 + 1j]])
    want = torch.linalg.solve_triangular(a, b.conj().imag, upper=False)
    got = torch.linalg.solve_triangular(a.to("trn"), b.to("trn").conj().imag, upper=False)
    torch.testing.assert_close(got.cpu(), want)
    t = zt.clone()
    t.conj().copy_(torch.tensor([5 + 6j, 7 + 8j]))
    assert torch.equal(t.cpu(), torch.tensor([5 - 6j, 7 - 8j]))
    t.conj().mul_(2)
    assert torch.equal(t.cpu(), torch.tensor([10 - 12j, 14 - 16j]))
    big = torch.tensor([100 + 0j, 89 + 0j])
    assert torch.equal(big.to("trn").exp().cpu(), big.exp())
    inf = torch.tensor([complex(0, float("inf")), 1 + 1j])
    got = (torch.zeros(2, dtype=C64).to("trn") + inf.to("trn")).cpu()
    want = torch.zeros(2, dtype=C64) + inf
    assert torch.equal(torch.isnan(torch.view_as_real(got)), torch.isnan(torch.view_as_real(want)))
    with pytest.raises(RuntimeError, match="bool tensor is not supported"):
        zt - torch.tensor([True, False]).to("trn")
    z8 = cplx(*[2] * 8)
    close(z8.to("trn").conj().clone(), z8.conj().resolve_conj(), 0, 0)
    close(torch.cat([z8.to("trn"), z8.to("trn")]), torch.cat([z8, z8]), 0, 0)
    u = zt.clone()
    u.conj_physical_()
    assert torch.equal(u.cpu(), z.conj_physical())
    assert torch.equal(torch.zeros(2, dtype=C64, device="trn").cpu(), torch.zeros(2, dtype=C64))


@pytest.mark.parametrize("rows", [[float("nan")], [1e4]])
def test_rfft_lines_do_not_mix(rows):
    """A NaN or a huge value in one row reaches no other row (each line its own FFT)."""
    x = real(4, 256)
    x[0, 3] = rows[0]
    for fn in (torch.fft.rfft, lambda v: torch.fft.irfft(torch.fft.rfft(v))):
        got, want = fn(x.to("trn")).cpu(), fn(x)
        torch.testing.assert_close(got[1:], want[1:], rtol=1e-4, atol=1e-4)
        assert torch.equal(got[0].isnan(), want[0].isnan())


@pytest.mark.parametrize("case", ["2^20", "4 lines", "3*5*2^12 conj ortho", "2^14 inverse",
                                  "fft then ifft", "along dim 0", "no smooth split"])
def test_few_long_c2c_lines_match_cpu(case):
    """Note [Four-step]: fewer long c2c lines than lanes run as column FFTs, a
    twiddle and row FFTs into a transposed view of the output; a length with no
    split into radices 2..5 keeps the one-lane path."""
    fn, x = torch.fft.fft, {
        "2^20": lambda: cplx(1 << 20),
        "4 lines": lambda: cplx(4, 1 << 16),
        "3*5*2^12 conj ortho": lambda: cplx(2, 3 * 5 * 4096).conj(),
        "2^14 inverse": lambda: cplx(3, 1 << 14),
        "fft then ifft": lambda: cplx(2, 1 << 15),  # one length's tables, read both ways
        "along dim 0": lambda: cplx(1 << 15, 2),
        "no smooth split": lambda: cplx(16411 * 2),  # 2 x a prime: Bluestein's path
    }[case]()
    if case == "3*5*2^12 conj ortho":
        fn = lambda v: torch.fft.fft(v, norm="ortho")
    elif case == "2^14 inverse":
        fn = torch.fft.ifft
    elif case == "fft then ifft":
        fn = lambda v: torch.fft.ifft(torch.fft.fft(v) * torch.arange(1 << 15, device=v.device))
    elif case == "along dim 0":
        fn = lambda v: torch.fft.fft(v, dim=0)
    close(fn(x.to("trn")), fn(x.resolve_conj()), 1e-4, 1e-4)


def test_one_long_signal():
    """Fewer lines than SIMD lanes run one line at a time (Note [Few lines])."""
    x = real(1, 65536)
    close(torch.fft.rfft(x.to("trn")), torch.fft.rfft(x), 1e-4, 1e-4)
    close(torch.fft.fft(x[0].to("trn").to(C64)), torch.fft.fft(x[0].to(C64)), 1e-4, 1e-4)


def test_abs_polar_complex_and_copies():
    z = cplx(4, 7)
    close(z.to("trn").abs(), z.abs())
    close(z.to("trn").conj().abs(), z.abs())
    r, t = real(4, 7).abs(), real(7, seed=1)
    close(torch.polar(r.to("trn"), t.to("trn")), torch.polar(r, t))
    close(torch.complex(r.to("trn"), t.to("trn")), torch.complex(r, t))
    zt = z.to("trn")
    close(zt.t().contiguous(), z.t().contiguous(), 0, 0)
    close(zt.conj().clone(), z.conj().resolve_conj(), 0, 0)
    out = torch.empty(7, 4, dtype=C64, device="trn")
    out.copy_(zt.t().conj())
    close(out, z.t().conj().resolve_conj(), 0, 0)
    close(r.to("trn").to(C64), r.to(C64), 0, 0)  # a cast: imaginary parts 0
    close(torch.view_as_real(zt * 2), torch.view_as_real(z * 2), 0, 0)


@pytest.mark.uses_fallback
def test_complex128_and_complex_alpha_take_the_fallback():
    z = torch.randn(3, dtype=torch.complex128)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        before = dict(trnscope.fallback_ops())
        got = z.to("trn") * z.to("trn")
        got2 = torch.add(cplx(3).to("trn"), cplx(3, seed=1).to("trn"), alpha=1j)
    assert torch.equal(got.cpu(), z * z)
    torch.testing.assert_close(got2.cpu(), torch.add(cplx(3), cplx(3, seed=1), alpha=1j))
    assert trnscope.fallback_ops().get("aten::mul.Tensor", 0) > before.get("aten::mul.Tensor", 0)


FFTS = {
    "fft": lambda x: torch.fft.fft(x),
    "ifft_ortho": lambda x: torch.fft.ifft(x, norm="ortho"),
    "fft_n_pad": lambda x: torch.fft.fft(x, n=70, dim=1),
    "rfft": lambda x: torch.fft.rfft(x),
    "rfft_forward": lambda x: torch.fft.rfft(x, dim=1, norm="forward"),
    "irfft": lambda x: torch.fft.irfft(torch.fft.rfft(x)),
    "irfft_n": lambda x: torch.fft.irfft(torch.fft.rfft(x), n=77),
    "fftn": lambda x: torch.fft.fftn(x, dim=(1, 2)),
    "fftn_real": lambda x: torch.fft.fftn(x, dim=(1, 2)).real,
    "rfft2": lambda x: torch.fft.rfft2(x),
    "irfft2": lambda x: torch.fft.irfft2(torch.fft.rfft2(x), s=x.shape[-2:]),
    "irfftn_all": lambda x: torch.fft.irfftn(torch.fft.rfftn(x), s=x.shape),
    "hfft": lambda x: torch.fft.hfft(torch.fft.rfft(x)),
    "ihfft": lambda x: torch.fft.ihfft(x),
    "fftshift": lambda x: torch.fft.fftshift(torch.fft.fft2(x)),
}


@pytest.mark.parametrize("name", list(FFTS))
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_fft_matches_cpu(name, layout):
    """Lengths 60 (4 * 3 * 5), 49 (a square of a prime past the special radices)
    and 17 (a prime), complex and real inputs."""
    x = real(3, 60, 17) if layout == "contiguous" else real(3, 17, 60).transpose(1, 2)
    for inp in (x, x[:, :49, :] * (1 + 0.5j)):
        if name in ("rfft", "rfft_forward", "irfft", "irfft_n", "rfft2", "irfft2", "irfftn_all",
                    "hfft", "ihfft") and inp.is_complex():
            continue  # real-input transforms
        close(FFTS[name](inp.to("trn")), FFTS[name](inp), rtol=1e-4, atol=1e-4)


def test_fft_of_a_conjugate_view_and_length_one():
    z = cplx(4, 32)
    close(torch.fft.fft(z.to("trn").conj()), torch.fft.fft(z.conj()), 1e-4, 1e-4)
    close(torch.fft.fft(cplx(5, 1).to("trn")), torch.fft.fft(cplx(5, 1)))
    close(torch.fft.irfft(cplx(3, 1).to("trn"), n=1), torch.fft.irfft(cplx(3, 1), n=1))


def test_stft_power_spectrogram_matches_cpu():
    """Whisper's feature extractor on the device: |stft|^2 with a Hann window."""
    sig = real(2, 8000)
    win = torch.hann_window(400)

    def spec(s, w):
        return torch.stft(s, 400, 160, window=w, return_complex=True).abs() ** 2

    close(spec(sig.to("trn"), win.to("trn")), spec(sig, win), 1e-4, 1e-4)


@pytest.mark.uses_fallback
def test_float64_ffts_take_the_fallback():
    x = torch.randn(4, 16, dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = torch.fft.rfft(x.to("trn"))
    assert got.dtype == torch.complex128
    torch.testing.assert_close(got.cpu(), torch.fft.rfft(x))


def precompute_freqs_cis(dim, end, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    return torch.polar(torch.ones(end, dim // 2), torch.outer(torch.arange(end).float(), freqs))


class MetaAttention(torch.nn.Module):
    """Meta's reference Llama attention: the rotary embedding as a complex product
    with freqs_cis, a CPU attribute moved to the device per call."""

    def __init__(self, dim=64, heads=4):
        super().__init__()
        self.heads = heads
        self.wq, self.wk, self.wv, self.wo = (torch.nn.Linear(dim, dim, bias=False) for _ in range(4))
        self.freqs_cis = precompute_freqs_cis(dim // heads, 64)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = (w(x).view(b, n, self.heads, -1) for w in (self.wq, self.wk, self.wv))
        f = self.freqs_cis.to(x.device)[:n].view(1, n, 1, -1)
        q = torch.view_as_real(torch.view_as_complex(q.float().reshape(b, n, self.heads, -1, 2)) * f)
        k = torch.view_as_real(torch.view_as_complex(k.float().reshape(b, n, self.heads, -1, 2)) * f)
        o = torch.nn.functional.scaled_dot_product_attention(
            q.flatten(3).transpose(1, 2), k.flatten(3).transpose(1, 2), v.transpose(1, 2),
            is_causal=True)
        return self.wo(o.transpose(1, 2).reshape(b, n, d))


def _eager_and_compiled(model, **inputs):
    """Outputs of CPU, trn eager and trn compiled, and the compile record."""
    with torch.no_grad():
        want = model(**inputs)
        model.to("trn")
        x = {k: v.to("trn") for k, v in inputs.items()}
        eager = model(**x)
        trnscope.reset_compile_stats()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the eager-step warnings
            compiled = torch.compile(model, backend="trn")(**x)
    return want, eager, compiled, trnscope.compile_stats()


def test_meta_complex_rotary_attention_eager_and_compiled():
    torch.manual_seed(0)
    want, eager, compiled, stats = _eager_and_compiled(MetaAttention().eval(), x=real(2, 16, 64))
    close(eager, want)
    close(compiled, want)
    # One program; the complex products are library kernels of it (Op::kComplex).
    assert len(stats) == 1 and stats[0]["fallback"] is None and stats[0]["eager_nodes"] == []


def test_compiled_graph_with_complex_inputs_and_outputs():
    def f(z, w):
        return torch.fft.ifft(torch.fft.fft(z) * w.conj()), (z.real * 2).sum()

    z, w = cplx(3, 24), cplx(24, seed=1)
    trnscope.reset_compile_stats()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = torch.compile(f, backend="trn")(z.to("trn"), w.to("trn"))
    want = f(z, w)
    close(got[0], want[0], 1e-4, 1e-4)
    close(got[1], want[1], 1e-4, 1e-4)
    (stats,) = trnscope.compile_stats()
    assert stats["fallback"] is None and stats["eager_nodes"] == [], stats


def _compiled(f, *args):
    trnscope.reset_compile_stats()
    with torch.no_grad():
        got = torch.compile(f, backend="trn", dynamic=False)(*(a.to("trn") for a in args))
    (stats,) = trnscope.compile_stats()
    return got, stats


@pytest.mark.parametrize("f", [
    lambda z, w, x: z * w + x,                      # complex op complex, then + real
    lambda z, w, x: x * z - w[:1],                  # real op complex, broadcast
    lambda z, w, x: z / (w + 2.0 * x) * 0.5,        # division, real number scales
    lambda z, w, x: torch.polar(x.abs(), x) * z.conj(),
    lambda z, w, x: (z.t() * w.t()).clone() + x.t().to(C64),  # transposed; cast of a real
    lambda z, w, x: (z * w).abs() ** 2 + z.angle() * x,     # |stft|^2; real out
    lambda z, w, x: torch.exp(z * 0.5).t() - w.t(),
    lambda z, w, x: torch.log(z * w) + torch.sqrt(z.conj()) * x,
])
def test_complex_arithmetic_is_library_kernels_of_the_program(f):
    """Note [Complex values]: arithmetic, polar, conj and casts on the pairs are core
    library ops (Op::kComplex); they were eager steps (Llama 4's and DeepSeek-V2's
    rotary: x * freqs_cis)."""
    z, w, x = cplx(5, 6), cplx(5, 6, seed=1), real(5, 6, seed=2)
    got, stats = _compiled(f, z, w, x)
    close(got, f(z, w, x))
    assert stats["fallback"] is None and stats["eager_nodes"] == [], stats


@pytest.mark.parametrize("f", [
    lambda x: torch.fft.fftn(x, dim=(1, 2)).real,   # FNet: r2c (all bins) then c2c
    lambda x: torch.fft.rfft(x, dim=1, norm="ortho"),
    lambda x: torch.fft.irfft(torch.fft.rfft(x.transpose(1, 2)), n=7, norm="forward"),
    lambda x: torch.fft.irfftn(torch.fft.rfftn(x, dim=(0, 2)), s=(4, 10), dim=(0, 2)),
    lambda x: torch.fft.ifft(torch.fft.fft(x.to(C64), dim=0), dim=0, norm="backward").imag,
])
def test_ffts_are_one_pass_per_dim_in_the_program(f):
    """Note [FFT passes]: each torch.fft op is one core kFft pass per transformed dim,
    the last one scaled (FNet's fftn, Autoformer's rfft / irfft were eager steps)."""
    x = real(4, 6, 10)
    got, stats = _compiled(f, x)
    close(got, f(x), 1e-4, 1e-4)
    assert stats["fallback"] is None and stats["eager_nodes"] == [], stats
    assert any(k == "fft" or "fft" in k for k in stats["kernels"]), stats


def test_fnet_eager_and_compiled():
    """Hugging Face's FNet: token mixing by fftn(hidden, dim=(1, 2)).real."""
    import transformers as T

    cfg = T.FNetConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, intermediate_size=128,
                       max_position_embeddings=64, use_tpu_fourier_optimizations=False)
    torch.manual_seed(0)
    ids = torch.randint(3, 200, (2, 16), generator=torch.Generator().manual_seed(0))
    want, eager, compiled, stats = _eager_and_compiled(T.FNetModel(cfg).eval(), input_ids=ids)
    close(eager.last_hidden_state, want.last_hidden_state, 1e-4, 1e-4)
    close(compiled.last_hidden_state, want.last_hidden_state, 1e-4, 1e-4)
    assert len(stats) == 1 and stats[0]["fallback"] is None and stats[0]["eager_nodes"] == []
