// One-dimensional FFTs of every line of a tensor (kernels::Fft, complex.h).
//
// Note [Mixed-radix FFT]: a recursive decimation in time. A length-n DFT of a
// strided line splits into p DFTs of length m = n / p over the p interleaved
// subsequences, written one after another, then combined in place: for each
// k < m the p values at q m + k, times the twiddles W_n^(q k), go through a
// length-p DFT into the same p slots (k + s m). Radices 4 and 2 first, then 3,
// 5 and any other prime factor (a plain DFT: O(n p) for a prime n). Twiddles
// are tabulated per level in double, stored as float.
//
// Note [FFT across lines]: the transform runs on a vector of lines at once,
// one line per SIMD lane: a group of lines is gathered into split re / im
// buffers, element j of every line in one vector, so every butterfly is
// vector arithmetic without shuffles, and the recursion's bookkeeping is
// shared by the lanes. A tensor's FFT has many lines (a batch, FNet's
// sequence x hidden planes, an STFT's frames).

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/kernels/fft.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"

#ifndef TRN_KERNELS_FFT_PLAN_
#define TRN_KERNELS_FFT_PLAN_
#include <cstdint>
#include <vector>

namespace trn::kernels::fft {

struct Plan {
  int64_t n = 0;
  bool forward = true;
  std::vector<int64_t> radices;     // product n
  std::vector<int64_t> tw_offset;   // per level: its twiddles' start in tw_*
  std::vector<float> tw_re, tw_im;  // level i: W_{n_i}^(q k) at [k (p_i - 1) + q - 1]
  std::vector<float> w_re, w_im;    // W_n^j, j < n (the generic radices' W_p)
  int64_t max_radix = 1;
};

}  // namespace trn::kernels::fft
#endif

HWY_BEFORE_NAMESPACE();
namespace trn::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using fft::Plan;

// Split re / im buffers of lane-interleaved elements: element e of the group
// is re[e * N .. e * N + N) (one lane per line).
template <class D>
class LaneFft {
 public:
  using V = hn::Vec<D>;

  LaneFft(const Plan& plan, float* tmp_re, float* tmp_im)
      : plan_(plan), N_(static_cast<int64_t>(hn::Lanes(D()))), tmp_re_(tmp_re), tmp_im_(tmp_im) {}

  // out = DFT of in[0], in[s], ..., in[(n - 1) s] (elements).
  void Run(const float* in_re, const float* in_im, int64_t s, float* out_re, float* out_im,
           int64_t n, size_t level) const {
    const int64_t p = plan_.radices[level], m = n / p;
    if (m == 1) {
      Butterfly(p, in_re, in_im, s, out_re, out_im, 1, nullptr, nullptr);
      return;
    }
    for (int64_t q = 0; q < p; ++q) {
      Run(in_re + q * s * N_, in_im + q * s * N_, s * p, out_re + q * m * N_,
          out_im + q * m * N_, m, level + 1);
    }
    const float* twr = plan_.tw_re.data() + plan_.tw_offset[level];
    const float* twi = plan_.tw_im.data() + plan_.tw_offset[level];
    for (int64_t k = 0; k < m; ++k) {
      float* xr = out_re + k * N_;
      float* xi = out_im + k * N_;
      Butterfly(p, xr, xi, m, xr, xi, m, k == 0 ? nullptr : twr + k * (p - 1),
                twi + k * (p - 1));
    }
  }

 private:
  static V MulRe(V ar, V ai, V br, V bi) { return hn::NegMulAdd(ai, bi, hn::Mul(ar, br)); }
  static V MulIm(V ar, V ai, V br, V bi) { return hn::MulAdd(ar, bi, hn::Mul(ai, br)); }

  // Length-p DFT of the elements at in + q is (q < p) into out + j os, each
  // input q >= 1 first multiplied by the twiddle (twr, twi)[q - 1] (none when
  // twr is null); in may be out.
  void Butterfly(int64_t p, const float* in_re, const float* in_im, int64_t is, float* out_re,
                 float* out_im, int64_t os, const float* twr, const float* twi) const {
    const D d;
    const int64_t N = N_;
    const auto load = [&](int64_t q, V& r, V& i) {
      r = hn::Load(d, in_re + q * is * N);
      i = hn::Load(d, in_im + q * is * N);
      if (twr != nullptr && q > 0) {
        const V wr = hn::Set(d, twr[q - 1]), wi = hn::Set(d, twi[q - 1]);
        const V nr = MulRe(r, i, wr, wi);
        i = MulIm(r, i, wr, wi);
        r = nr;
      }
    };
    const auto store = [&](int64_t j, V r, V i) {
      hn::Store(r, d, out_re + j * os * N);
      hn::Store(i, d, out_im + j * os * N);
    };
    // sigma: the sign of the exponent (-1 forward).
    const float sigma = plan_.forward ? -1.0f : 1.0f;
    if (p == 2) {
      V ar, ai, br, bi;
      load(0, ar, ai), load(1, br, bi);
      store(0, hn::Add(ar, br), hn::Add(ai, bi));
      store(1, hn::Sub(ar, br), hn::Sub(ai, bi));
      return;
    }
    if (p == 4) {  // W_4 = sigma i
      V ar, ai, br, bi, cr, ci, dr, di;
      load(0, ar, ai), load(1, br, bi), load(2, cr, ci), load(3, dr, di);
      const V t0r = hn::Add(ar, cr), t0i = hn::Add(ai, ci);
      const V t1r = hn::Sub(ar, cr), t1i = hn::Sub(ai, ci);
      const V t2r = hn::Add(br, dr), t2i = hn::Add(bi, di);
      const V s = hn::Set(d, sigma);
      const V t3r = hn::Mul(s, hn::Sub(di, bi)), t3i = hn::Mul(s, hn::Sub(br, dr));  // W_4 (b - d)
      store(0, hn::Add(t0r, t2r), hn::Add(t0i, t2i));
      store(1, hn::Add(t1r, t3r), hn::Add(t1i, t3i));
      store(2, hn::Sub(t0r, t2r), hn::Sub(t0i, t2i));
      store(3, hn::Sub(t1r, t3r), hn::Sub(t1i, t3i));
      return;
    }
    if (p == 3) {  // W_3 = -1/2 + sigma i sqrt(3)/2
      V ar, ai, br, bi, cr, ci;
      load(0, ar, ai), load(1, br, bi), load(2, cr, ci);
      const V sr = hn::Add(br, cr), si = hn::Add(bi, ci);
      const V mr = hn::NegMulAdd(hn::Set(d, 0.5f), sr, ar);
      const V mi = hn::NegMulAdd(hn::Set(d, 0.5f), si, ai);
      const V h = hn::Set(d, sigma * 0.86602540378443864676f);
      const V er = hn::Mul(h, hn::Sub(ci, bi)), ei = hn::Mul(h, hn::Sub(br, cr));  // h i (b - c)
      store(0, hn::Add(ar, sr), hn::Add(ai, si));
      store(1, hn::Add(mr, er), hn::Add(mi, ei));
      store(2, hn::Sub(mr, er), hn::Sub(mi, ei));
      return;
    }
    // Any other radix: a plain DFT through the scratch elements.
    for (int64_t q = 0; q < p; ++q) {
      V r, i;
      load(q, r, i);
      hn::Store(r, d, tmp_re_ + q * N);
      hn::Store(i, d, tmp_im_ + q * N);
    }
    const int64_t step = plan_.n / p;
    for (int64_t j = 0; j < p; ++j) {
      V accr = hn::Load(d, tmp_re_), acci = hn::Load(d, tmp_im_);
      for (int64_t q = 1; q < p; ++q) {
        const int64_t e = (q * j % p) * step;
        const V wr = hn::Set(d, plan_.w_re[e]), wi = hn::Set(d, plan_.w_im[e]);
        const V xr = hn::Load(d, tmp_re_ + q * N), xi = hn::Load(d, tmp_im_ + q * N);
        accr = hn::Add(accr, MulRe(xr, xi, wr, wi));
        acci = hn::Add(acci, MulIm(xr, xi, wr, wi));
      }
      store(j, accr, acci);
    }
  }

  const Plan& plan_;
  const int64_t N_;
  float* tmp_re_;
  float* tmp_im_;
};

int64_t FftLanes() { return static_cast<int64_t>(hn::Lanes(hn::ScalableTag<float>())); }

// Note [Adjacent lines]: when a group's lines lie side by side in memory (a
// transform along any dim but the last: line g + 1 starts where line g's first
// element ends), element j of all of them is one run of floats, moved to and
// from the lane buffers with vector (interleaved) loads and stores instead of
// a float at a time.

// Lane buffers from N adjacent lines, element j at x + j * step: complex ones
// (c2c; im_sign -1 conjugates) or real ones (r2c: imaginary parts 0).
void GatherAdjacent(bool real, const float* x, int64_t step, int64_t n, float im_sign, float* re,
                    float* im) {
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const auto sign = hn::Set(d, im_sign);
  for (int64_t j = 0; j < n; ++j) {
    if (real) {
      hn::Store(hn::LoadU(d, x + j * step), d, re + j * N);
      hn::Store(hn::Zero(d), d, im + j * N);
      continue;
    }
    hn::Vec<decltype(d)> r, i;
    hn::LoadInterleaved2(d, x + j * step, r, i);
    hn::Store(r, d, re + j * N);
    hn::Store(hn::Mul(i, sign), d, im + j * N);
  }
}

// C2R: lane buffers from N adjacent complex lines holding the first `given`
// bins of Hermitian lines of n points, extended (bin n - j = conj bin j), the
// self-conjugate bins (0 and n / 2) made real as torch's irfft reads them.
void GatherAdjacentC2R(const float* x, int64_t step, int64_t n, int64_t given, float im_sign,
                       float* re, float* im) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const int64_t half = n / 2 + 1;
  const V sign = hn::Set(d, im_sign), zero = hn::Zero(d);
  for (int64_t j = 0; j < half; ++j) {
    V ar = zero, ai = zero;
    if (j < given) {
      hn::LoadInterleaved2(d, x + j * step, ar, ai);
      ai = j == 0 || 2 * j == n ? zero : hn::Mul(ai, sign);
    }
    hn::Store(ar, d, re + j * N);
    hn::Store(ai, d, im + j * N);
    if (j > 0 && n - j >= half) {
      hn::Store(ar, d, re + (n - j) * N);
      hn::Store(hn::Neg(ai), d, im + (n - j) * N);
    }
  }
}

// Elements 0..len-1 of the lane buffers, scaled, to N adjacent lines at
// o + j * step: complex (c2c, r2c) or the real parts alone (c2r).
void ScatterAdjacent(bool real, const float* re, const float* im, int64_t len, float scale,
                     float* o, int64_t step) {
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const auto sc = hn::Set(d, scale);
  for (int64_t j = 0; j < len; ++j) {
    const auto r = hn::Mul(hn::Load(d, re + j * N), sc);
    if (real) {
      hn::StoreU(r, d, o + j * step);
    } else {
      hn::StoreInterleaved2(r, hn::Mul(hn::Load(d, im + j * N), sc), d, o + j * step);
    }
  }
}

// One group of lines: line_* hold the gathered input elements (SoA), out_* receive the DFT.
void FftGroup(const Plan& plan, const float* line_re, const float* line_im, float* out_re,
              float* out_im, float* tmp_re, float* tmp_im) {
  const LaneFft<hn::ScalableTag<float>> f(plan, tmp_re, tmp_im);
  f.Run(line_re, line_im, 1, out_re, out_im, plan.n, 0);
}

// Note [Few lines]: a transform of fewer lines than lanes runs one line at a
// time, in one-lane vectors: a full-width group would transform zeros in the
// other lanes (a single long signal: N times the work and the scratch).
void FftLine(const Plan& plan, const float* line_re, const float* line_im, float* out_re,
             float* out_im, float* tmp_re, float* tmp_im) {
  const LaneFft<hn::CappedTag<float, 1>> f(plan, tmp_re, tmp_im);
  f.Run(line_re, line_im, 1, out_re, out_im, plan.n, 0);
}

}  // namespace trn::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
#include <string>

#include "core/common/assert.h"
#include "core/kernels/complex.h"
#include "core/kernels/scratch.h"
#include "core/kernels/strided.h"

namespace trn::kernels {

HWY_EXPORT(FftLanes);
HWY_EXPORT(FftGroup);
HWY_EXPORT(FftLine);
HWY_EXPORT(GatherAdjacent);
HWY_EXPORT(GatherAdjacentC2R);
HWY_EXPORT(ScatterAdjacent);

namespace {

void MakePlan(fft::Plan& plan, int64_t n, bool forward) {
  plan.n = n;
  plan.forward = forward;
  plan.radices.clear();
  int64_t rest = n;
  for (int64_t p : {int64_t{4}, int64_t{2}, int64_t{3}, int64_t{5}}) {
    while (rest % p == 0) plan.radices.push_back(p), rest /= p;
  }
  for (int64_t p = 7; p * p <= rest; p += 2) {
    while (rest % p == 0) plan.radices.push_back(p), rest /= p;
  }
  if (rest > 1) plan.radices.push_back(rest);
  plan.max_radix = 1;
  for (int64_t p : plan.radices) plan.max_radix = std::max(plan.max_radix, p);
  const double sign = forward ? -1.0 : 1.0;
  const auto angle = [n](int64_t j) {
    return 2.0 * std::numbers::pi * static_cast<double>(j % n) / static_cast<double>(n);
  };
  plan.w_re.resize(static_cast<size_t>(n));
  plan.w_im.resize(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    plan.w_re[j] = static_cast<float>(std::cos(angle(j)));
    plan.w_im[j] = static_cast<float>(sign * std::sin(angle(j)));
  }
  plan.tw_offset.clear();
  plan.tw_re.clear();
  plan.tw_im.clear();
  int64_t ni = n, step = 1;  // level i transforms n_i = n / step points
  for (int64_t p : plan.radices) {
    plan.tw_offset.push_back(static_cast<int64_t>(plan.tw_re.size()));
    const int64_t m = ni / p;
    for (int64_t k = 0; k < m; ++k) {
      for (int64_t q = 1; q < p; ++q) {
        const double a = angle(q * k * step);
        plan.tw_re.push_back(static_cast<float>(std::cos(a)));
        plan.tw_im.push_back(static_cast<float>(sign * std::sin(a)));
      }
    }
    ni = m;
    step *= p;
  }
}

}  // namespace

Status Fft(FftKind kind, const TensorRef& out, const ComplexOperand& in_op, int dim, bool forward,
           double scale) {
  const TensorRef& in = in_op.t;
  TRN_ASSERT(out.dtype == DType::kFloat32 && in.dtype == DType::kFloat32 && out.ndim == in.ndim,
             "Fft: float32 pairs / values of one rank");
  TRN_ASSERT(dim >= 0 && dim < out.ndim, "Fft: dim out of range");
  for (int d = 0; d < out.ndim; ++d) {
    TRN_ASSERT(d == dim || out.sizes[d] == in.sizes[d], "Fft: sizes must match but at dim");
  }
  const int64_t n = kind == FftKind::kC2R ? out.sizes[dim] : in.sizes[dim];
  const int64_t in_len = in.sizes[dim], out_len = out.sizes[dim];
  TRN_ASSERT(kind != FftKind::kC2C || in_len == out_len, "Fft: c2c keeps the length");
  TRN_ASSERT(kind != FftKind::kR2C || out_len <= n, "Fft: r2c keeps at most n bins");
  if (out.numel() == 0) return Status::Ok();
  TRN_ASSERT(n >= 1, "Fft: an empty transform with a nonempty output");
  // Note [FFT plans]: a few plans per thread, so a 2-D transform of unequal
  // sides or alternating rfft / irfft does not recompute its twiddles per pass.
  thread_local std::array<fft::Plan, 4> plans;
  thread_local size_t next_plan = 0;
  fft::Plan* found = nullptr;
  for (fft::Plan& p : plans) {
    if (p.n == n && p.forward == forward) found = &p;
  }
  if (found == nullptr) {
    found = &plans[next_plan];
    next_plan = (next_plan + 1) % plans.size();
    MakePlan(*found, n, forward);
  }
  const fft::Plan& plan = *found;
  const int64_t total_lines = out.numel() / out_len;
  const int64_t full_lanes = HWY_DYNAMIC_DISPATCH(FftLanes)();
  const int64_t N = total_lines < full_lanes ? 1 : full_lanes;  // Note [Few lines]
  const auto group_fn = N == 1 ? HWY_DYNAMIC_DISPATCH(FftLine) : HWY_DYNAMIC_DISPATCH(FftGroup);
  // Four SoA line buffers (input and output, re and im) and the generic radix's scratch.
  internal::ScratchBuffer<float> scratch;
  float* const buf = scratch.Get(4 * n * N + 2 * plan.max_radix * N);
  if (buf == nullptr) return Status::Error("fft: no host memory for lines of " + std::to_string(n));
  float* const lre = buf;
  float* const lim = lre + n * N;
  float* const ore = lim + n * N;
  float* const oim = ore + n * N;
  float* const tre = oim + n * N;
  float* const tim = tre + plan.max_radix * N;
  const int64_t in_step = in.strides[dim], out_step = out.strides[dim];
  const float sc = static_cast<float>(scale);
  const float im_sign = in_op.conj ? -1.0f : 1.0f;
  const int64_t half = n / 2 + 1, given = std::min(in_len, half);  // kC2R
  const bool real_in = kind == FftKind::kR2C, real_out = kind == FftKind::kC2R;
  TensorRef out_lines = out, in_lines = in;
  out_lines.sizes[dim] = in_lines.sizes[dim] = 1;
  internal::ForEachRun<2>(
      {&out_lines, &in_lines},
      [&](const std::array<char*, 2>& p, int64_t count, const std::array<int64_t, 2>& st) {
        for (int64_t r0 = 0; r0 < count; r0 += N) {
          const int64_t lanes = std::min(N, count - r0);
          const float* x0 = reinterpret_cast<const float*>(p[1]) + r0 * st[1];
          float* o0 = reinterpret_cast<float*>(p[0]) + r0 * st[0];
          // Note [Adjacent lines]: a full group of side-by-side lines.
          const bool in_adjacent = N > 1 && lanes == N && st[1] == (real_in ? 1 : 2);
          const bool out_adjacent = N > 1 && lanes == N && st[0] == (real_out ? 1 : 2);
          if (in_adjacent) {
            if (kind == FftKind::kC2R) {
              HWY_DYNAMIC_DISPATCH(GatherAdjacentC2R)(x0, in_step, n, given, im_sign, lre, lim);
            } else {
              HWY_DYNAMIC_DISPATCH(GatherAdjacent)(real_in, x0, in_step, n, im_sign, lre, lim);
            }
          } else {
            if (lanes < N) {  // unused lanes transform zeros (Note [FFT across lines])
              std::fill(lre, lre + n * N, 0.0f);
              std::fill(lim, lim + n * N, 0.0f);
            }
            for (int64_t g = 0; g < lanes; ++g) {
              const float* x = x0 + g * st[1];
              switch (kind) {
                case FftKind::kC2C:
                  for (int64_t j = 0; j < n; ++j) {
                    lre[j * N + g] = x[j * in_step];
                    lim[j * N + g] = im_sign * x[j * in_step + 1];
                  }
                  break;
                case FftKind::kR2C:
                  for (int64_t j = 0; j < n; ++j) {
                    lre[j * N + g] = x[j * in_step];
                    lim[j * N + g] = 0.0f;
                  }
                  break;
                case FftKind::kC2R:  // the Hermitian line, as GatherAdjacentC2R
                  for (int64_t j = 0; j < half; ++j) {
                    const bool have = j < given;
                    const bool self_conjugate = j == 0 || 2 * j == n;
                    const float re = have ? x[j * in_step] : 0.0f;
                    const float im =
                        have && !self_conjugate ? im_sign * x[j * in_step + 1] : 0.0f;
                    lre[j * N + g] = re;
                    lim[j * N + g] = im;
                    if (j > 0 && n - j >= half) {
                      lre[(n - j) * N + g] = re;
                      lim[(n - j) * N + g] = -im;
                    }
                  }
                  break;
              }
            }
          }
          const float* rre = lre;
          const float* rim = lim;
          if (n > 1) {
            group_fn(plan, lre, lim, ore, oim, tre, tim);
            rre = ore, rim = oim;
          }
          const int64_t len = real_out ? n : out_len;
          if (out_adjacent) {
            HWY_DYNAMIC_DISPATCH(ScatterAdjacent)(real_out, rre, rim, len, sc, o0, out_step);
            continue;
          }
          for (int64_t g = 0; g < lanes; ++g) {
            float* o = o0 + g * st[0];
            for (int64_t j = 0; j < len; ++j) {
              o[j * out_step] = rre[j * N + g] * sc;
              if (!real_out) o[j * out_step + 1] = rim[j * N + g] * sc;
            }
          }
        }
      });
  return Status::Ok();
}

KernelInfo DescribeFft(FftKind kind, const TensorRef& out, const TensorRef& in, int dim,
                       const char* aten_op) {
  static constexpr const char* kNames[3] = {"fft_c2c_c64", "fft_r2c_f32", "fft_c2r_c64"};
  const int64_t n = kind == FftKind::kC2R ? out.sizes[dim] : in.sizes[dim];
  const uint64_t lines =
      n == 0 || out.sizes[dim] == 0 ? 0 : static_cast<uint64_t>(out.numel() / out.sizes[dim]);
  KernelInfo info;
  info.name = kNames[static_cast<int>(kind)];
  info.op = aten_op;
  info.engine = rt::Engine::kVector;
  // ~5 n log2 n real flops per complex line (the radix-2 count).
  info.flops = static_cast<uint64_t>(5.0 * static_cast<double>(lines) * static_cast<double>(n) *
                                     std::log2(std::max<double>(2.0, static_cast<double>(n))));
  info.bytes_read = internal::DistinctBytes(in) * (kind == FftKind::kR2C ? 1 : 2);
  info.bytes_written = out.nbytes() * (kind == FftKind::kC2R ? 1 : 2);
  return info;
}

}  // namespace trn::kernels
#endif  // HWY_ONCE
