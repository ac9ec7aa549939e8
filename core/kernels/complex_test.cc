// The complex kernels against double-precision references: FFTs (every kind,
// lengths with every radix path and large primes, strided lines, conjugated
// input) against a plain DFT; arithmetic, polar and abs against std::complex.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "core/kernels/complex.h"
#include "core/kernels/kernels_test_util.h"

namespace trn::kernels {
namespace {

using cd = std::complex<double>;

// A float32 TensorRef over `data` with sizes and element strides (pairs: the
// strides count floats, Note [Complex as pairs]).
TensorRef View(std::vector<float>& data, std::vector<int64_t> sizes, std::vector<int64_t> strides) {
  TensorRef r;
  r.data = data.data();
  r.dtype = DType::kFloat32;
  r.ndim = static_cast<int>(sizes.size());
  for (int d = 0; d < r.ndim; ++d) r.sizes[d] = sizes[d], r.strides[d] = strides[d];
  return r;
}

std::vector<float> Random(size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = u(g);
  return v;
}

std::vector<cd> Dft(const std::vector<cd>& x, bool forward) {
  const size_t n = x.size();
  std::vector<cd> y(n);
  for (size_t k = 0; k < n; ++k) {
    for (size_t j = 0; j < n; ++j) {
      const double a = (forward ? -2 : 2) * std::numbers::pi * static_cast<double>(j * k % n) / n;
      y[k] += x[j] * cd(std::cos(a), std::sin(a));
    }
  }
  return y;
}

// Lines of length n along dim 0 of a [n, 19] tensor (19 pairs apart): groups
// of full and partial SIMD lanes (Note [FFT across lines]), every line strided.
TEST(Fft, C2CMatchesDftOverLengths) {
  constexpr int64_t kLines = 19;
  testing::ForEachTarget([&](const char*) {
    for (int64_t n : {1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 30, 49, 64, 97, 100, 128, 210, 243, 400,
                      2 * 101, 3 * 211}) {
      for (bool forward : {true, false}) {
        for (bool conj : {false, true}) {
          SCOPED_TRACE("n " + std::to_string(n) + (forward ? " forward" : " backward") +
                       (conj ? " conj" : ""));
          std::vector<float> in = Random(static_cast<size_t>(n * kLines * 2), n);
          std::vector<float> out(in.size());
          ComplexOperand op;
          op.t = View(in, {n, kLines}, {2 * kLines, 2});
          op.conj = conj;
          ASSERT_TRUE(Fft(FftKind::kC2C, View(out, {n, kLines}, {2 * kLines, 2}), op, 0,
                          forward, 0.5).ok());
          const double tol = 2e-6 * std::sqrt(static_cast<double>(n)) * std::log2(n + 1.0) + 1e-6;
          for (int64_t line = 0; line < kLines; ++line) {
            std::vector<cd> x(n);
            for (int64_t j = 0; j < n; ++j) {
              const int64_t e = (j * kLines + line) * 2;
              x[j] = cd(in[e], (conj ? -1 : 1) * in[e + 1]);
            }
            const std::vector<cd> y = Dft(x, forward);
            for (int64_t k = 0; k < n; ++k) {
              const int64_t e = (k * kLines + line) * 2;
              ASSERT_NEAR(out[e], 0.5 * y[k].real(), tol * std::sqrt(n)) << "line " << line;
              ASSERT_NEAR(out[e + 1], 0.5 * y[k].imag(), tol * std::sqrt(n)) << "line " << line;
            }
          }
        }
      }
    }
  });
}

// Along the last dim: rows of pairs, moved through 8 x 8 blocks where the
// target has them (Note [Last-dim lines]), the rest of a row and the last
// lines a float at a time.
TEST(Fft, C2CAlongLastDim) {
  constexpr int64_t kLines = 19;
  testing::ForEachTarget([&](const char*) {
    for (int64_t n : {3, 8, 12, 30, 64, 100}) {
      for (bool conj : {false, true}) {
        SCOPED_TRACE("n " + std::to_string(n) + (conj ? " conj" : ""));
        std::vector<float> in = Random(static_cast<size_t>(n * kLines * 2), n + 1);
        std::vector<float> out(in.size());
        ComplexOperand op;
        op.t = View(in, {kLines, n}, {2 * n, 2});
        op.conj = conj;
        ASSERT_TRUE(
            Fft(FftKind::kC2C, View(out, {kLines, n}, {2 * n, 2}), op, 1, true, 2.0).ok());
        for (int64_t line = 0; line < kLines; ++line) {
          std::vector<cd> x(n);
          for (int64_t j = 0; j < n; ++j) {
            const int64_t e = (line * n + j) * 2;
            x[j] = cd(in[e], (conj ? -1 : 1) * in[e + 1]);
          }
          const std::vector<cd> y = Dft(x, true);
          for (int64_t k = 0; k < n; ++k) {
            const int64_t e = (line * n + k) * 2;
            ASSERT_NEAR(out[e], 2.0 * y[k].real(), 1e-5 * n) << "line " << line << " bin " << k;
            ASSERT_NEAR(out[e + 1], 2.0 * y[k].imag(), 1e-5 * n) << "line " << line << " bin " << k;
          }
        }
      }
    }
  });
}

TEST(Fft, C2CInPlace) {
  std::vector<float> data = Random(2 * 24, 3);
  std::vector<cd> x(24);
  for (int j = 0; j < 24; ++j) x[j] = cd(data[2 * j], data[2 * j + 1]);
  ComplexOperand op;
  op.t = View(data, {24}, {2});
  ASSERT_TRUE(Fft(FftKind::kC2C, op.t, op, 0, true, 1.0).ok());
  const std::vector<cd> y = Dft(x, true);
  for (int k = 0; k < 24; ++k) {
    EXPECT_NEAR(data[2 * k], y[k].real(), 1e-5);
    EXPECT_NEAR(data[2 * k + 1], y[k].imag(), 1e-5);
  }
}

// 19 lines: full groups of lanes and a partial one.
TEST(Fft, R2CAndC2RMatchDft) {
  constexpr int64_t kLines = 19;
  testing::ForEachTarget([&](const char*) {
    for (int64_t n : {1, 2, 5, 6, 8, 9, 10, 14, 22, 64, 81, 100, 101, 202, 400}) {
      SCOPED_TRACE("n " + std::to_string(n));
      // r2c along the last dim of [kLines, n], onesided.
      std::vector<float> in = Random(static_cast<size_t>(kLines * n), 7);
      const int64_t bins = n / 2 + 1;
      std::vector<float> spec(static_cast<size_t>(kLines * bins * 2));
      ComplexOperand op;
      op.t = View(in, {kLines, n}, {n, 1});
      op.real = true;
      ASSERT_TRUE(
          Fft(FftKind::kR2C, View(spec, {kLines, bins}, {2 * bins, 2}), op, 1, true, 1.0).ok());
      for (int64_t r = 0; r < kLines; ++r) {
        std::vector<cd> x(n);
        for (int64_t j = 0; j < n; ++j) x[j] = in[r * n + j];
        const std::vector<cd> y = Dft(x, true);
        for (int64_t k = 0; k < bins; ++k) {
          ASSERT_NEAR(spec[(r * bins + k) * 2], y[k].real(), 1e-5 * n) << "line " << r;
          ASSERT_NEAR(spec[(r * bins + k) * 2 + 1], y[k].imag(), 1e-5 * n) << "line " << r;
        }
      }
      // c2r of those bins with the self-conjugate bins' imaginary parts set:
      // they must be ignored (torch's irfft), giving back n * in.
      for (int64_t r = 0; r < kLines; ++r) {
        spec[r * bins * 2 + 1] = 5.0f + r;
        if (n % 2 == 0) spec[(r * bins + bins - 1) * 2 + 1] = -3.0f - r;
      }
      std::vector<float> back(static_cast<size_t>(kLines * n));
      ComplexOperand sp;
      sp.t = View(spec, {kLines, bins}, {2 * bins, 2});
      ASSERT_TRUE(
          Fft(FftKind::kC2R, View(back, {kLines, n}, {n, 1}), sp, 1, false, 1.0 / n).ok());
      for (int64_t j = 0; j < kLines * n; ++j) ASSERT_NEAR(back[j], in[j], 1e-5) << "value " << j;
    }
  });
}

// All n bins of a real line (torch.fft.fft of a real tensor: onesided=False):
// bins past n / 2 are the conjugates of their mirrors, for even n (the
// half-length transform, Note [Real transforms]) and odd n.
TEST(Fft, R2CAllBins) {
  constexpr int64_t kLines = 11;
  testing::ForEachTarget([&](const char*) {
    for (int64_t n : {2, 7, 12, 30, 64}) {
      SCOPED_TRACE("n " + std::to_string(n));
      std::vector<float> in = Random(static_cast<size_t>(kLines * n), 9);
      std::vector<float> spec(static_cast<size_t>(kLines * n * 2));
      ComplexOperand op;
      op.t = View(in, {kLines, n}, {n, 1});
      op.real = true;
      ASSERT_TRUE(Fft(FftKind::kR2C, View(spec, {kLines, n}, {2 * n, 2}), op, 1, true, 1.0).ok());
      for (int64_t r = 0; r < kLines; ++r) {
        std::vector<cd> x(n);
        for (int64_t j = 0; j < n; ++j) x[j] = in[r * n + j];
        const std::vector<cd> y = Dft(x, true);
        for (int64_t k = 0; k < n; ++k) {
          ASSERT_NEAR(spec[(r * n + k) * 2], y[k].real(), 1e-5 * n) << "line " << r << " bin " << k;
          ASSERT_NEAR(spec[(r * n + k) * 2 + 1], y[k].imag(), 1e-5 * n) << "line " << r << " bin " << k;
        }
      }
    }
  });
}

// Along dim 0 of [n, 37]: the lines lie side by side (Note [Adjacent lines]),
// full groups of lanes and a partial one.
TEST(Fft, R2CAndC2RAlongAdjacentLines) {
  constexpr int64_t kLines = 37;
  testing::ForEachTarget([&](const char*) {
    for (int64_t n : {1, 2, 6, 9, 16, 25}) {
      SCOPED_TRACE("n " + std::to_string(n));
      std::vector<float> in = Random(static_cast<size_t>(kLines * n), 11);
      const int64_t bins = n / 2 + 1;
      std::vector<float> spec(static_cast<size_t>(kLines * bins * 2));
      ComplexOperand op;
      op.t = View(in, {n, kLines}, {kLines, 1});
      op.real = true;
      ASSERT_TRUE(Fft(FftKind::kR2C, View(spec, {bins, kLines}, {2 * kLines, 2}), op, 0, true,
                      2.0).ok());
      for (int64_t r = 0; r < kLines; ++r) {
        std::vector<cd> x(n);
        for (int64_t j = 0; j < n; ++j) x[j] = in[j * kLines + r];
        const std::vector<cd> y = Dft(x, true);
        for (int64_t k = 0; k < bins; ++k) {
          ASSERT_NEAR(spec[(k * kLines + r) * 2], 2 * y[k].real(), 2e-5 * n) << "line " << r;
          ASSERT_NEAR(spec[(k * kLines + r) * 2 + 1], 2 * y[k].imag(), 2e-5 * n) << "line " << r;
        }
      }
      for (int64_t r = 0; r < kLines; ++r) {  // ignored: the self-conjugate bins' imaginary parts
        spec[r * 2 + 1] = 1.0f + r;
        if (n % 2 == 0) spec[((bins - 1) * kLines + r) * 2 + 1] = -2.0f - r;
      }
      std::vector<float> back(static_cast<size_t>(kLines * n));
      ComplexOperand sp;
      sp.t = View(spec, {bins, kLines}, {2 * kLines, 2});
      ASSERT_TRUE(Fft(FftKind::kC2R, View(back, {n, kLines}, {kLines, 1}), sp, 0, false,
                      0.5 / n).ok());
      for (int64_t j = 0; j < kLines * n; ++j) ASSERT_NEAR(back[j], in[j], 1e-5) << "value " << j;
    }
  });
}

// Rows of 37: vector runs and a scalar tail (and the scalar path for division
// and a conjugated broadcast), on every target. Sums and products equal
// std::complex's naive formulas bit for bit (CPU PyTorch's rounding).
// Each line is transformed on its own: a NaN or a huge value in one line does
// not reach the others (lines share SIMD vectors, never arithmetic).
TEST(Fft, LinesAreIndependent) {
  testing::ForEachTarget([&](const char*) {
    for (FftKind kind : {FftKind::kR2C, FftKind::kC2C}) {
      const bool real = kind == FftKind::kR2C;
      constexpr int64_t kLines = 16, n = 16;
      std::vector<float> in = Random(static_cast<size_t>(kLines * n * 2), 5);
      in[0] = std::nanf("");
      for (int64_t j = 0; j < n; ++j) in[(real ? 1 : 2) * (n + j)] *= 1e6f;  // line 1: huge
      std::vector<float> out(static_cast<size_t>(kLines * n * 2));
      ComplexOperand op;
      op.t = real ? View(in, {kLines, n}, {n, 1}) : View(in, {kLines, n}, {2 * n, 2});
      op.real = real;
      const int64_t bins = real ? n / 2 + 1 : n;
      ASSERT_TRUE(Fft(kind, View(out, {kLines, bins}, {2 * bins, 2}), op, 1, true, 1.0).ok());
      for (int64_t r = 2; r < kLines; ++r) {
        std::vector<cd> x(n);
        for (int64_t j = 0; j < n; ++j) {
          x[j] = real ? cd(in[r * n + j], 0) : cd(in[(r * n + j) * 2], in[(r * n + j) * 2 + 1]);
        }
        const std::vector<cd> y = Dft(x, true);
        for (int64_t k = 0; k < bins; ++k) {
          ASSERT_NEAR(out[(r * bins + k) * 2], y[k].real(), 1e-5 * n) << "line " << r;
          ASSERT_NEAR(out[(r * bins + k) * 2 + 1], y[k].imag(), 1e-5 * n) << "line " << r;
        }
      }
      EXPECT_TRUE(std::isnan(out[0]));
    }
  });
}

// One long line (Note [Few lines]): one-lane vectors, checked against the DFT.
TEST(Fft, OneLongLine) {
  testing::ForEachTarget([&](const char*) {
    constexpr int64_t n = 1000;
    std::vector<float> in = Random(2 * n, 8), out(2 * n);
    ComplexOperand op;
    op.t = View(in, {n}, {2});
    ASSERT_TRUE(Fft(FftKind::kC2C, View(out, {n}, {2}), op, 0, false, 1.0).ok());
    std::vector<cd> x(n);
    for (int64_t j = 0; j < n; ++j) x[j] = cd(in[2 * j], in[2 * j + 1]);
    const std::vector<cd> y = Dft(x, false);
    for (int64_t k = 0; k < n; ++k) {
      ASSERT_NEAR(out[2 * k], y[k].real(), 1e-4) << "bin " << k;
      ASSERT_NEAR(out[2 * k + 1], y[k].imag(), 1e-4) << "bin " << k;
    }
  });
}

TEST(ComplexBinary, MatchesStdComplex) {
  constexpr int64_t kCols = 37;
  std::vector<float> a = Random(3 * kCols * 2, 1), b = Random(kCols * 2, 2),
                     c = Random(3 * kCols, 4);
  b[0] = 0, b[1] = 0;  // a division by zero
  testing::ForEachTarget([&](const char*) {
    for (ComplexBinaryOp op : {ComplexBinaryOp::kAdd, ComplexBinaryOp::kSub,
                               ComplexBinaryOp::kMul, ComplexBinaryOp::kDiv}) {
      for (int other : {0, 1, 2}) {  // conj broadcast row, real tensor, plain row
        SCOPED_TRACE(std::to_string(static_cast<int>(op)) + " other " + std::to_string(other));
        std::vector<float> out(3 * kCols * 2);
        ComplexOperand x, y;
        x.t = View(a, {3, kCols}, {2 * kCols, 2});
        if (other == 1) {
          y.t = View(c, {3, kCols}, {kCols, 1});
          y.real = true;
        } else {
          y.t = View(b, {3, kCols}, {0, 2});
          y.conj = other == 0;
        }
        ASSERT_TRUE(ComplexBinary(op, View(out, {3, kCols}, {2 * kCols, 2}), x, y, 2.0).ok());
        for (int64_t i = 0; i < 3; ++i) {
          for (int64_t j = 0; j < kCols; ++j) {
            const float ar = a[(i * kCols + j) * 2], ai = a[(i * kCols + j) * 2 + 1];
            float br = other == 1 ? c[i * kCols + j] : b[2 * j];
            float bi = other == 1 ? 0.0f : b[2 * j + 1];
            if (other == 0) bi = -bi;
            float wr, wi;
            switch (op) {
              case ComplexBinaryOp::kAdd: wr = ar + 2.0f * br, wi = ai + 2.0f * bi; break;
              case ComplexBinaryOp::kSub: wr = ar + -2.0f * br, wi = ai + -2.0f * bi; break;
              case ComplexBinaryOp::kMul: {
                const float p1 = ar * br, p2 = ai * bi, p3 = ar * bi, p4 = ai * br;
                wr = p1 - p2, wi = p3 + p4;
                break;
              }
              case ComplexBinaryOp::kDiv: {
                const std::complex<float> q =
                    std::complex<float>(ar, ai) / std::complex<float>(br, bi);
                wr = q.real(), wi = q.imag();
                break;
              }
            }
            const float re = out[(i * kCols + j) * 2], im = out[(i * kCols + j) * 2 + 1];
            if (op == ComplexBinaryOp::kDiv) {
              if (br == 0 && bi == 0) {
                EXPECT_TRUE(!std::isfinite(re) && !std::isfinite(im));
              } else {
                const double tol = 1e-5 * (1 + std::hypot(wr, wi));
                EXPECT_NEAR(re, wr, tol);
                EXPECT_NEAR(im, wi, tol);
              }
              continue;
            }
            EXPECT_EQ(re, wr) << i << " " << j;  // bit for bit (no fused multiply-add)
            EXPECT_EQ(im, wi) << i << " " << j;
          }
        }
      }
    }
  });
}

TEST(ComplexBinary, ScalarOperand) {
  std::vector<float> a = Random(6, 9), out(6);
  ComplexOperand x, s;
  x.t = View(a, {3}, {2});
  s.re = 0.5, s.im = -2.0;
  ASSERT_TRUE(ComplexBinary(ComplexBinaryOp::kMul, View(out, {3}, {2}), x, s).ok());
  for (int i = 0; i < 3; ++i) {
    const std::complex<float> want = std::complex<float>(a[2 * i], a[2 * i + 1]) *
                                     std::complex<float>(0.5f, -2.0f);
    EXPECT_NEAR(out[2 * i], want.real(), 1e-6);
    EXPECT_NEAR(out[2 * i + 1], want.imag(), 1e-6);
  }
}

TEST(Polar, AbsAngleAndExp) {
  std::vector<float> r = Random(5, 3), t = Random(5, 4), pairs(10), back(5), ang(5);
  for (float& x : r) x = std::fabs(x) + 0.1f;
  for (float& x : t) x *= 3.0f;
  ASSERT_TRUE(Polar(View(pairs, {5}, {2}), View(r, {5}, {1}), View(t, {5}, {1})).ok());
  ComplexOperand p;
  p.t = View(pairs, {5}, {2});
  ASSERT_TRUE(ComplexUnary(ComplexUnaryOp::kAbs, View(back, {5}, {1}), p).ok());
  ASSERT_TRUE(ComplexUnary(ComplexUnaryOp::kAngle, View(ang, {5}, {1}), p).ok());
  std::vector<float> e(10);  // exp of the pairs, against std::exp
  ASSERT_TRUE(ComplexUnary(ComplexUnaryOp::kExp, View(e, {5}, {2}), p).ok());
  for (int i = 0; i < 5; ++i) {
    EXPECT_NEAR(pairs[2 * i], r[i] * std::cos(t[i]), 1e-6);
    EXPECT_NEAR(pairs[2 * i + 1], r[i] * std::sin(t[i]), 1e-6);
    EXPECT_NEAR(back[i], r[i], 1e-6);
    EXPECT_NEAR(ang[i], t[i], 1e-5);
    const std::complex<float> want = std::exp(std::complex<float>(pairs[2 * i], pairs[2 * i + 1]));
    EXPECT_EQ(e[2 * i], want.real());
    EXPECT_EQ(e[2 * i + 1], want.imag());
  }
}

}  // namespace
}  // namespace trn::kernels
