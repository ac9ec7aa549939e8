"""torch.nn layers with fused ops of their own: trn (one core = one thread) vs
CPU PyTorch with torch.set_num_threads(1), measured side by side in this run.

  python bench/bench_nn.py [--rounds N] [--same-core CPU]

Each line: a forward in eval mode under torch.no_grad of
- nn.LSTM / nn.GRU over a padded batch (Note [Sequence-level RNN] in
  torch_bridge/ops_rnn.cc: one input GEMM per layer and direction, then a GEMM
  and a fused cell per step; CPU PyTorch runs oneDNN's fused RNN);
- nn.TransformerEncoder (Note [nn.Transformer fast path] in
  torch_bridge/ops_transformer.cc; both sides take torch's fast path), with a
  padding mask (nested tensors between the layers) and without;
- nn.EmbeddingBag (a recommender's sparse features: one kernel reading indices
  and offsets on the device), sum and mean over bags of 20 rows;
- torch.linalg.solve_triangular: the gated delta rule's unit-lower chunk systems
  (Qwen3-Next / Qwen3.5: 64 x 64, batch x heads x chunks of them) and larger
  systems (Note [Blocked triangular solve] in core/kernels/linalg.cc; CPU
  PyTorch calls its BLAS's trsm);
- complex64 and torch.fft (Note [Complex kernels] in docs/device.md): FNet's
  token mixing (fftn over sequence and hidden, .real), rfft / irfft lines, a
  complex FFT of length 400, Whisper's |stft|^2 features, Meta's complex rotary
  product (CPU PyTorch runs pocketfft / MKL).
A round times one synchronized trn call and one CPU call back to back; the
ratio is the median over rounds of trn / cpu (lower is better; target <= 1.0x),
with the range of the rounds.
"""

import argparse
import copy
import os
import statistics
import time

import torch
from torch import nn

import trnscope  # noqa: F401  (registers the trn device)
from benchlib import add_same_core_flag, cpu_model, pin_to_core

RNNS = [
    # kind, input, hidden, layers, bidirectional, batch, steps
    ("LSTM", 256, 512, 1, False, 8, 50),
    ("GRU", 256, 512, 1, False, 8, 50),
    ("LSTM", 64, 128, 2, True, 32, 100),
    ("GRU", 80, 256, 2, False, 16, 200),
]
ENCODERS = [
    # d_model, heads, feed-forward, layers, batch, seq, padded (tokens cut from the last rows)
    (256, 8, 1024, 4, 4, 128, False),
    (256, 8, 1024, 4, 4, 128, True),
]

BAGS = [
    # rows, dim, mode, bags, rows per bag
    (100_000, 64, "sum", 512, 20),
    (100_000, 64, "mean", 512, 20),
    (1_000, 128, "sum", 2048, 8),
]

SOLVES = [
    # batch, n, right-hand sides
    ((2, 8, 4), 64, 128),
    ((), 512, 512),
    ((), 1024, 1024),
    ((16,), 128, 1),
]


class Fn(nn.Module):
    """A function of the inputs as a module (the FFT lines)."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *x):
        return self.fn(*x)


def _stft_power(x):
    window = torch.hann_window(400, device=x.device)
    return torch.stft(x, 400, 160, window=window, return_complex=True).abs() ** 2


def _rope(x, freqs):
    xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(xc * freqs).flatten(3)


FFTS = [
    # name, function, input shapes (the second, when given, is a complex64 rotary table)
    ("FNet fftn(dim=(1, 2)).real [4, 128, 256]", lambda x: torch.fft.fftn(x, dim=(1, 2)).real,
     [(4, 128, 256)]),
    ("rfft [64, 512]", torch.fft.rfft, [(64, 512)]),
    ("irfft(rfft) [32, 1024]", lambda x: torch.fft.irfft(torch.fft.rfft(x)), [(32, 1024)]),
    ("fft complex [256, 400]", lambda x: torch.fft.fft(x.to(torch.complex64)), [(256, 400)]),
    # Few long lines (Note [Four-step]): one signal, four signals.
    ("fft complex [1, 2^20]", lambda x: torch.fft.fft(x.to(torch.complex64)), [(1, 1 << 20)]),
    ("fft complex [4, 2^16]", lambda x: torch.fft.fft(x.to(torch.complex64)), [(4, 1 << 16)]),
    ("|stft|^2 400/160 of 120000 samples", _stft_power, [(1, 120000)]),
    ("Meta rotary x * freqs_cis [2, 128, 8, 64]", _rope, [(2, 128, 8, 64), (128, 1, 32)]),
]


class UnitLowerSolve(nn.Module):
    def forward(self, a, b):
        return torch.linalg.solve_triangular(a, b, upper=False, unitriangular=True)


def cases():
    """(name, CPU module, input tuple, kwargs) per line."""
    for kind, i, h, layers, bidir, batch, steps in RNNS:
        torch.manual_seed(0)
        m = getattr(nn, kind)(i, h, num_layers=layers, bidirectional=bidir)
        name = f"{kind}({i}, {h}, layers={layers}{', bidir' if bidir else ''}) B={batch} T={steps}"
        yield name, m, (torch.randn(steps, batch, i),), {}
    for d, heads, ff, layers, batch, seq, padded in ENCODERS:
        torch.manual_seed(0)
        layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, batch_first=True)
        m = nn.TransformerEncoder(layer, layers)
        kwargs = {}
        if padded:
            pad = torch.zeros(batch, seq, dtype=torch.bool)
            for b in range(batch):
                pad[b, seq - 16 * b:] = True  # 0, 16, 32, 48 tokens of padding
            kwargs["src_key_padding_mask"] = pad
        name = f"TransformerEncoder({d}, {heads}, {ff}) x{layers} B={batch} L={seq}" + (
            " padded" if padded else "")
        yield name, m, (torch.randn(batch, seq, d),), kwargs
    for rows, dim, mode, bags, per_bag in BAGS:
        torch.manual_seed(0)
        m = nn.EmbeddingBag(rows, dim, mode=mode)
        indices = torch.randint(0, rows, (bags * per_bag,))
        offsets = torch.arange(0, bags * per_bag, per_bag)
        name = f"EmbeddingBag({rows}, {dim}, {mode}) {bags} bags x {per_bag}"
        yield name, m, (indices, offsets), {}
    for batch, n, k in SOLVES:
        g = torch.Generator().manual_seed(0)
        a = torch.randn(*batch, n, n, generator=g) / n ** 0.5
        name = f"solve_triangular {'x'.join(map(str, batch)) or '1'} x [{n}, {n}] \\ [{n}, {k}]"
        yield name, UnitLowerSolve(), (a, torch.randn(*batch, n, k, generator=g)), {}
    for name, fn, shapes in FFTS:
        g = torch.Generator().manual_seed(0)
        x = [torch.randn(*shapes[0], generator=g)]
        if len(shapes) > 1:
            x.append(torch.polar(torch.ones(*shapes[1]), torch.randn(*shapes[1], generator=g)))
        yield name, Fn(fn), tuple(x), {}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    add_same_core_flag(ap)
    args = ap.parse_args()
    pinned = pin_to_core(args.same_core)
    torch.set_num_threads(1)
    print(f"CPU: {cpu_model()}; torch {torch.__version__}, CPU PyTorch with 1 thread"
          + (f"; {pinned}" if pinned else ""))
    print(f"{'layer':56s} {'trn ms':>8s} {'cpu ms':>8s}  trn/cpu (range)")
    for name, m, x, kwargs in cases():
        m = m.eval()
        mt = copy.deepcopy(m).to("trn")
        xt = tuple(t.to("trn") for t in x)
        kt = {k: v.to("trn") for k, v in kwargs.items()}
        ratios, t_trn, t_cpu = [], [], []
        with torch.no_grad():
            for _ in range(3):  # warm-up: packs the weights
                m(*x, **kwargs)
                mt(*xt, **kt)
            torch.trn.synchronize()
            for _ in range(args.rounds):
                start = time.perf_counter()
                mt(*xt, **kt)
                torch.trn.synchronize()
                t_trn.append(time.perf_counter() - start)
                start = time.perf_counter()
                m(*x, **kwargs)
                t_cpu.append(time.perf_counter() - start)
                ratios.append(t_trn[-1] / t_cpu[-1])
        print(f"{name:56s} {statistics.median(t_trn) * 1e3:8.2f} "
              f"{statistics.median(t_cpu) * 1e3:8.2f}  {statistics.median(ratios):.2f}x "
              f"({min(ratios):.2f}-{max(ratios):.2f})", flush=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
