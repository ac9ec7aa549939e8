// One-dimensional FFTs of every line of a tensor (kernels::Fft, complex.h).
//
// Note [Mixed-radix FFT]: a length-n DFT factored into radices 4 and 2 first,
// then 3, 5 and any other prime factor (a plain DFT: O(n p); a large one
// makes the whole line a convolution instead, Note [Bluestein]),
// one Stockham level per radix (Note [Stockham levels]; butterflies written
// out for 2, 3, 4 and 5). Twiddles are tabulated per level in double, stored
// as float. A real line of even length is a complex one of half its length
// (Note [Real transforms]).
//
// Note [FFT across lines]: the transform runs on a vector of lines at once,
// one line per SIMD lane: a group of lines is gathered into split re / im
// buffers, element j of every line in one vector, so every butterfly is
// vector arithmetic without shuffles, and the levels' bookkeeping is
// shared by the lanes. A tensor's FFT has many lines (a batch, FNet's
// sequence x hidden planes, an STFT's frames).

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/kernels/fft.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"

#ifndef TRN_KERNELS_FFT_PLAN_
#define TRN_KERNELS_FFT_PLAN_
#include <algorithm>
#include <cstdint>
#include <memory>
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
  // A real transform of real_n = 2 n points (Note [Real transforms]); 0: complex.
  int64_t real_n = 0;
  std::vector<float> real_re, real_im;  // W_real_n^k, k <= n
  // Note [Bluestein]: set when n is transformed as a convolution of sub->n
  // points (sub: their forward plan): chirp w_j = exp(sigma pi i j^2 / n), j < n,
  // kernel = the sub->n-point DFT of conj(w) wrapped around, over sub->n.
  std::shared_ptr<const Plan> sub;
  std::vector<float> chirp_re, chirp_im, kernel_re, kernel_im;
  // Elements of each lane buffer the transform needs.
  int64_t lane_elems() const { return sub != nullptr ? std::max(n, sub->n) : n; }
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

  // Note [Stockham levels]: the DFT of the plan.n elements in (xr, xi), with
  // (yr, yi) as the other buffer of a ping-pong pair. Level i (radix p, n_i
  // points in s interleaved sequences, m = n_i / p) writes, for each k < m and
  // each sequence t < s, the p-point DFT of the elements t + s (k + r m),
  // output j times W_{n_i}^(j k), to t + s (p k + j). The output is in
  // natural order after the last level (the Stockham autosort), each level is
  // one tight loop per radix, and a level's twiddles are shared by its s
  // sequences. True when the result is in (yr, yi).
  bool Run(float* xr, float* xi, float* yr, float* yi) const {
    if (plan_.sub != nullptr) return Bluestein(xr, xi, yr, yi);
    int64_t n = plan_.n, s = 1;
    bool swapped = false;
    for (size_t level = 0; level < plan_.radices.size(); ++level) {
      const int64_t p = plan_.radices[level], m = n / p;
      const float* twr = plan_.tw_re.data() + plan_.tw_offset[level];
      const float* twi = plan_.tw_im.data() + plan_.tw_offset[level];
      switch (p) {
        case 2: Level<2>(xr, xi, yr, yi, m, s, twr, twi); break;
        case 3: Level<3>(xr, xi, yr, yi, m, s, twr, twi); break;
        case 4: Level<4>(xr, xi, yr, yi, m, s, twr, twi); break;
        case 5: Level<5>(xr, xi, yr, yi, m, s, twr, twi); break;
        default: Level<0>(xr, xi, yr, yi, m, s, twr, twi, p); break;
      }
      std::swap(xr, yr);
      std::swap(xi, yi);
      swapped = !swapped;
      n = m;
      s *= p;
    }
    return swapped;
  }

  // Note [Bluestein]: with j k = (j^2 + k^2 - (k - j)^2) / 2, the DFT is
  //   X_k = w_k sum_j (x_j w_j) conj(w_(k-j)),  w_j = exp(sigma pi i j^2 / n),
  // a convolution, done as a cyclic one of M >= 2n - 1 points (a power of 2)
  // by two M-point FFTs (the inverse as conj FFT conj) and the tabulated
  // transform of conj(w): O(M log M) where the plain DFT of a large prime
  // factor p costs O(n p). Same contract as Run; both pairs hold M elements.
  bool Bluestein(float* xr, float* xi, float* yr, float* yi) const {
    const D d;
    const int64_t N = N_, n = plan_.n, M = plan_.sub->n;
    const float* cr = plan_.chirp_re.data();
    const float* ci = plan_.chirp_im.data();
    for (int64_t j = 0; j < n; ++j) {
      const V ar = hn::Load(d, xr + j * N), ai = hn::Load(d, xi + j * N);
      const V wr = hn::Set(d, cr[j]), wi = hn::Set(d, ci[j]);
      hn::Store(MulRe(ar, ai, wr, wi), d, yr + j * N);
      hn::Store(MulIm(ar, ai, wr, wi), d, yi + j * N);
    }
    std::fill(yr + n * N, yr + M * N, 0.0f);
    std::fill(yi + n * N, yi + M * N, 0.0f);
    const LaneFft<D> conv(*plan_.sub, tmp_re_, tmp_im_);
    float *pr = yr, *pi = yi, *qr = xr, *qi = xi;
    if (conv.Run(pr, pi, qr, qi)) std::swap(pr, qr), std::swap(pi, qi);
    for (int64_t k = 0; k < M; ++k) {  // times the kernel, conjugated
      const V ar = hn::Load(d, pr + k * N), ai = hn::Load(d, pi + k * N);
      const V kr = hn::Set(d, plan_.kernel_re[k]), ki = hn::Set(d, plan_.kernel_im[k]);
      hn::Store(MulRe(ar, ai, kr, ki), d, pr + k * N);
      hn::Store(hn::Neg(MulIm(ar, ai, kr, ki)), d, pi + k * N);
    }
    if (conv.Run(pr, pi, qr, qi)) std::swap(pr, qr), std::swap(pi, qi);
    for (int64_t k = 0; k < n; ++k) {  // w_k times the convolution (conjugated back)
      const V ar = hn::Load(d, pr + k * N), ai = hn::Neg(hn::Load(d, pi + k * N));
      const V wr = hn::Set(d, cr[k]), wi = hn::Set(d, ci[k]);
      hn::Store(MulRe(ar, ai, wr, wi), d, pr + k * N);
      hn::Store(MulIm(ar, ai, wr, wi), d, pi + k * N);
    }
    return pr == yr;
  }

  // Note [Real transforms]: a real line of even length n is the complex line
  // z_t = x_2t + i x_2t+1 of h = n / 2 points; the plan transforms h points.
  // R2C: its spectrum Z gives bin k <= h of x's as
  //   X_k = (Z_k + conj Z_(h-k)) / 2 - i W_n^k (Z_k - conj Z_(h-k)) / 2
  // (indices of Z mod h), bins past h as conj X_(n-k): half the work of an
  // n-point complex transform with zero imaginary parts.
  void SplitR2C(const float* zr, const float* zi, int64_t bins, float* xr, float* xi) const {
    const D d;
    const int64_t N = N_, h = plan_.n;
    const V half = hn::Set(d, 0.5f);
    for (int64_t k = 0; k < bins && k <= h; ++k) {
      const int64_t a = k == h ? 0 : k, b = k == 0 ? 0 : h - k;
      const V ar = hn::Load(d, zr + a * N), ai = hn::Load(d, zi + a * N);
      const V br = hn::Load(d, zr + b * N), bi = hn::Neg(hn::Load(d, zi + b * N));
      const V er = hn::Mul(half, hn::Add(ar, br)), ei = hn::Mul(half, hn::Add(ai, bi));
      // O = (A - B) / (2 i)
      const V orr = hn::Mul(half, hn::Sub(ai, bi)), oi = hn::Mul(half, hn::Sub(br, ar));
      const V wr = hn::Set(d, plan_.real_re[k]), wi = hn::Set(d, plan_.real_im[k]);
      hn::Store(hn::Add(er, MulRe(orr, oi, wr, wi)), d, xr + k * N);
      hn::Store(hn::Add(ei, MulIm(orr, oi, wr, wi)), d, xi + k * N);
    }
    for (int64_t k = h + 1; k < bins; ++k) {
      hn::Store(hn::Load(d, xr + (2 * h - k) * N), d, xr + k * N);
      hn::Store(hn::Neg(hn::Load(d, xi + (2 * h - k) * N)), d, xi + k * N);
    }
  }

  // C2R (Note [Real transforms]): from bins 0..h of a Hermitian line (bins
  // k + h = conj H_(h-k)), the spectrum of z:
  //   Z_k = (H_k + conj H_(h-k)) + i W_n^-k (H_k - conj H_(h-k)),
  // whose unnormalized inverse is n (x_2t + i x_2t+1), as the n-point one's.
  void MergeC2R(const float* hr, const float* hi, float* zr, float* zi) const {
    const D d;
    const int64_t N = N_, h = plan_.n;
    for (int64_t k = 0; k < h; ++k) {
      const V ar = hn::Load(d, hr + k * N), ai = hn::Load(d, hi + k * N);
      const V br = hn::Load(d, hr + (h - k) * N), bi = hn::Neg(hn::Load(d, hi + (h - k) * N));
      const V wr = hn::Set(d, plan_.real_re[k]), wi = hn::Set(d, plan_.real_im[k]);
      const V dr = hn::Sub(ar, br), di = hn::Sub(ai, bi);
      const V orr = MulRe(dr, di, wr, wi), oi = MulIm(dr, di, wr, wi);
      hn::Store(hn::Sub(hn::Add(ar, br), oi), d, zr + k * N);  // E + i O
      hn::Store(hn::Add(hn::Add(ai, bi), orr), d, zi + k * N);
    }
  }

 private:
  static V MulRe(V ar, V ai, V br, V bi) { return hn::NegMulAdd(ai, bi, hn::Mul(ar, br)); }
  static V MulIm(V ar, V ai, V br, V bi) { return hn::MulAdd(ar, bi, hn::Mul(ai, br)); }

  // One level of Note [Stockham levels]; P = 0: any radix p, a plain DFT
  // through the scratch elements.
  template <int P>
  void Level(const float* HWY_RESTRICT xr, const float* HWY_RESTRICT xi, float* HWY_RESTRICT yr,
             float* HWY_RESTRICT yi, int64_t m, int64_t s, const float* twr, const float* twi,
             int64_t p = P) const {
    const D d;
    const int64_t N = N_;
    // sigma: the sign of the exponent (-1 forward).
    const float sigma = plan_.forward ? -1.0f : 1.0f;
    const int64_t in_step = s * m * N, out_step = s * N;
    for (int64_t k = 0; k < m; ++k) {
      const float* wr = k == 0 ? nullptr : twr + k * (p - 1);
      const float* wi = twi + k * (p - 1);
      const float* inr = xr + k * s * N;
      const float* ini = xi + k * s * N;
      float* outr = yr + p * k * s * N;
      float* outi = yi + p * k * s * N;
      // The twiddles of a fixed radix in registers for the whole loop over t.
      V vwr[P > 1 ? P - 1 : 1], vwi[P > 1 ? P - 1 : 1];
      if constexpr (P > 1) {
        for (int64_t j = 0; j < P - 1 && wr != nullptr; ++j) {
          vwr[j] = hn::Set(d, wr[j]);
          vwi[j] = hn::Set(d, wi[j]);
        }
      }
      const auto store = [&](int64_t j, int64_t t, V r, V i) {
        if (j > 0 && wr != nullptr) {
          const V w_r = P > 1 ? vwr[j - 1] : hn::Set(d, wr[j - 1]);
          const V w_i = P > 1 ? vwi[j - 1] : hn::Set(d, wi[j - 1]);
          const V nr = MulRe(r, i, w_r, w_i);
          i = MulIm(r, i, w_r, w_i);
          r = nr;
        }
        hn::Store(r, d, outr + j * out_step + t);
        hn::Store(i, d, outi + j * out_step + t);
      };
      for (int64_t t = 0; t < s * N; t += N) {
        const auto load = [&](int64_t r, V& re, V& im) {
          re = hn::Load(d, inr + r * in_step + t);
          im = hn::Load(d, ini + r * in_step + t);
        };
        if constexpr (P == 2) {
          V ar, ai, br, bi;
          load(0, ar, ai), load(1, br, bi);
          store(0, t, hn::Add(ar, br), hn::Add(ai, bi));
          store(1, t, hn::Sub(ar, br), hn::Sub(ai, bi));
        } else if constexpr (P == 4) {  // W_4 = sigma i
          V ar, ai, br, bi, cr, ci, dr, di;
          load(0, ar, ai), load(1, br, bi), load(2, cr, ci), load(3, dr, di);
          const V t0r = hn::Add(ar, cr), t0i = hn::Add(ai, ci);
          const V t1r = hn::Sub(ar, cr), t1i = hn::Sub(ai, ci);
          const V t2r = hn::Add(br, dr), t2i = hn::Add(bi, di);
          const V sg = hn::Set(d, sigma);
          const V t3r = hn::Mul(sg, hn::Sub(di, bi)), t3i = hn::Mul(sg, hn::Sub(br, dr));
          store(0, t, hn::Add(t0r, t2r), hn::Add(t0i, t2i));
          store(1, t, hn::Add(t1r, t3r), hn::Add(t1i, t3i));
          store(2, t, hn::Sub(t0r, t2r), hn::Sub(t0i, t2i));
          store(3, t, hn::Sub(t1r, t3r), hn::Sub(t1i, t3i));
        } else if constexpr (P == 3) {  // W_3 = -1/2 + sigma i sqrt(3)/2
          V ar, ai, br, bi, cr, ci;
          load(0, ar, ai), load(1, br, bi), load(2, cr, ci);
          const V sr = hn::Add(br, cr), si = hn::Add(bi, ci);
          const V mr = hn::NegMulAdd(hn::Set(d, 0.5f), sr, ar);
          const V mi = hn::NegMulAdd(hn::Set(d, 0.5f), si, ai);
          const V hh = hn::Set(d, sigma * 0.86602540378443864676f);
          const V er = hn::Mul(hh, hn::Sub(ci, bi)), ei = hn::Mul(hh, hn::Sub(br, cr));
          store(0, t, hn::Add(ar, sr), hn::Add(ai, si));
          store(1, t, hn::Add(mr, er), hn::Add(mi, ei));
          store(2, t, hn::Sub(mr, er), hn::Sub(mi, ei));
        } else if constexpr (P == 5) {
          // With t1 = a1 + a4, t2 = a2 + a3, t3 = a1 - a4, t4 = a2 - a3 and
          // W_5^j = cos + sigma i sin: outputs j and 5 - j share their real
          // combination and differ in the sign of sigma i times the other.
          V a0r, a0i, a1r, a1i, a2r, a2i, a3r, a3i, a4r, a4i;
          load(0, a0r, a0i), load(1, a1r, a1i), load(2, a2r, a2i), load(3, a3r, a3i);
          load(4, a4r, a4i);
          const V t1r = hn::Add(a1r, a4r), t1i = hn::Add(a1i, a4i);
          const V t2r = hn::Add(a2r, a3r), t2i = hn::Add(a2i, a3i);
          const V t3r = hn::Sub(a1r, a4r), t3i = hn::Sub(a1i, a4i);
          const V t4r = hn::Sub(a2r, a3r), t4i = hn::Sub(a2i, a3i);
          const V c1 = hn::Set(d, 0.30901699437494742410f), c2 = hn::Set(d, -0.80901699437494742410f);
          const V s1 = hn::Set(d, sigma * 0.95105651629515357212f);
          const V s2 = hn::Set(d, sigma * 0.58778525229247312917f);
          const V p1r = hn::MulAdd(c2, t2r, hn::MulAdd(c1, t1r, a0r));
          const V p1i = hn::MulAdd(c2, t2i, hn::MulAdd(c1, t1i, a0i));
          const V p2r = hn::MulAdd(c1, t2r, hn::MulAdd(c2, t1r, a0r));
          const V p2i = hn::MulAdd(c1, t2i, hn::MulAdd(c2, t1i, a0i));
          // sigma i u = -sigma u_i + i sigma u_r (sigma folded into s1, s2).
          const V q1r = hn::MulAdd(s2, t4r, hn::Mul(s1, t3r));
          const V q1i = hn::MulAdd(s2, t4i, hn::Mul(s1, t3i));
          const V q2r = hn::NegMulAdd(s1, t4r, hn::Mul(s2, t3r));
          const V q2i = hn::NegMulAdd(s1, t4i, hn::Mul(s2, t3i));
          store(0, t, hn::Add(a0r, hn::Add(t1r, t2r)), hn::Add(a0i, hn::Add(t1i, t2i)));
          store(1, t, hn::Sub(p1r, q1i), hn::Add(p1i, q1r));
          store(4, t, hn::Add(p1r, q1i), hn::Sub(p1i, q1r));
          store(2, t, hn::Sub(p2r, q2i), hn::Add(p2i, q2r));
          store(3, t, hn::Add(p2r, q2i), hn::Sub(p2i, q2r));
        } else {
          for (int64_t r = 0; r < p; ++r) {
            V re, im;
            load(r, re, im);
            hn::Store(re, d, tmp_re_ + r * N);
            hn::Store(im, d, tmp_im_ + r * N);
          }
          const int64_t step = plan_.n / p;  // W_p = W_n^(n / p)
          for (int64_t j = 0; j < p; ++j) {
            V accr = hn::Load(d, tmp_re_), acci = hn::Load(d, tmp_im_);
            for (int64_t r = 1; r < p; ++r) {
              const int64_t e = (r * j % p) * step;
              const V w_r = hn::Set(d, plan_.w_re[e]), w_i = hn::Set(d, plan_.w_im[e]);
              const V x_r = hn::Load(d, tmp_re_ + r * N), x_i = hn::Load(d, tmp_im_ + r * N);
              accr = hn::Add(accr, MulRe(x_r, x_i, w_r, w_i));
              acci = hn::Add(acci, MulIm(x_r, x_i, w_r, w_i));
            }
            store(j, t, accr, acci);
          }
        }
      }
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
// (c2c; im_sign -1 conjugates), real ones with imaginary parts 0 (r2c of odd
// length) or real ones as z_t = x_2t + i x_2t+1 (`split`: Note [Real
// transforms]).
void GatherAdjacent(bool real, bool split, const float* x, int64_t step, int64_t n,
                    float im_sign, float* re, float* im) {
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const auto sign = hn::Set(d, im_sign);
  for (int64_t j = 0; j < n; ++j) {
    if (split) {
      hn::Store(hn::LoadU(d, x + j * step), d, (j % 2 == 0 ? re : im) + j / 2 * N);
      continue;
    }
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
// bins of Hermitian lines of n points, the self-conjugate bins (0 and n / 2)
// made real as torch's irfft reads them; bins 0..n/2 alone when `half_only`
// (Note [Real transforms]), else extended to n (bin n - j = conj bin j).
void GatherAdjacentC2R(const float* x, int64_t step, int64_t n, int64_t given, float im_sign,
                       bool half_only, float* re, float* im) {
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
    if (!half_only && j > 0 && n - j >= half) {
      hn::Store(ar, d, re + (n - j) * N);
      hn::Store(hn::Neg(ai), d, im + (n - j) * N);
    }
  }
}

// Elements 0..len-1 of the lane buffers, scaled, to N adjacent lines at
// o + j * step: complex (c2c, r2c), the real parts alone (c2r of odd length)
// or z_t's parts as values 2t and 2t + 1 (`split`: c2r of even length).
void ScatterAdjacent(bool real, bool split, const float* re, const float* im, int64_t len,
                     float scale, float* o, int64_t step) {
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const auto sc = hn::Set(d, scale);
  for (int64_t j = 0; j < len; ++j) {
    if (split) {
      hn::StoreU(hn::Mul(hn::Load(d, (j % 2 == 0 ? re : im) + j / 2 * N), sc), d, o + j * step);
      continue;
    }
    const auto r = hn::Mul(hn::Load(d, re + j * N), sc);
    if (real) {
      hn::StoreU(r, d, o + j * step);
    } else {
      hn::StoreInterleaved2(r, hn::Mul(hn::Load(d, im + j * N), sc), d, o + j * step);
    }
  }
}

// Note [Last-dim lines]: along the last dim a group's lines are rows apart
// and element j of all of them lies in N places. Blocks of 8 lines x 8
// (re, im) elements are loaded a row at a time (deinterleaved), transposed in
// registers and stored as 8 lanes of 8 elements, and back the same way; where
// the target has no 8-float vectors, and for the last elements of a row, a
// float at a time. (AVX2 gathers measured slower on Zen 3.)
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
using D8 = hn::FixedTag<float, 8>;
using V8 = hn::Vec<D8>;
constexpr int64_t kBlock8 = 8;

// Rows r[0..7] to columns: r[c] lane l = row l's lane c.
HWY_INLINE void Transpose8(V8* r) {
  const D8 d;
  const hn::Repartition<double, D8> dd;
  const auto lo64 = [&](V8 a, V8 b) {
    return hn::BitCast(d, hn::InterleaveLower(dd, hn::BitCast(dd, a), hn::BitCast(dd, b)));
  };
  const auto hi64 = [&](V8 a, V8 b) {
    return hn::BitCast(d, hn::InterleaveUpper(dd, hn::BitCast(dd, a), hn::BitCast(dd, b)));
  };
  V8 t[8], u[8];
  for (int i = 0; i < 4; ++i) {  // a0 b0 a1 b1 | a4 b4 a5 b5 and a2 b2 a3 b3 | a6 b6 a7 b7
    t[2 * i] = hn::InterleaveLower(d, r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = hn::InterleaveUpper(d, r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {  // a0 b0 c0 d0 | a4 b4 c4 d4 ...
    u[4 * i] = lo64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = hi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = lo64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = hi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    r[c] = hn::ConcatLowerLower(d, u[4 + c], u[c]);
    r[c + 4] = hn::ConcatUpperUpper(d, u[4 + c], u[c]);
  }
}
#endif

// Lane buffers (N lanes) from N lines `stride` floats apart whose elements
// are (re, im) pairs side by side: `count` elements, im times im_sign.
void GatherPairs(const float* x, int64_t stride, int64_t count, float im_sign, float* re,
                 float* im) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(hn::ScalableTag<float>()));
  int64_t done = 0;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  const D8 d;
  const V8 sign = hn::Set(d, im_sign);
  done = count / kBlock8 * kBlock8;
  for (int64_t g0 = 0; g0 < N; g0 += kBlock8) {
    for (int64_t j0 = 0; j0 < done; j0 += kBlock8) {
      V8 r[8], i[8];
      for (int64_t l = 0; l < kBlock8; ++l) {
        hn::LoadInterleaved2(d, x + (g0 + l) * stride + 2 * j0, r[l], i[l]);
      }
      Transpose8(r);
      Transpose8(i);
      for (int64_t c = 0; c < kBlock8; ++c) {
        hn::StoreU(r[c], d, re + (j0 + c) * N + g0);
        hn::StoreU(hn::Mul(i[c], sign), d, im + (j0 + c) * N + g0);
      }
    }
  }
#endif
  for (int64_t g = 0; g < N; ++g) {
    for (int64_t j = done; j < count; ++j) {
      re[j * N + g] = x[g * stride + 2 * j];
      im[j * N + g] = im_sign * x[g * stride + 2 * j + 1];
    }
  }
}

// The inverse: `count` elements of the lane buffers, scaled, to N lines
// `stride` floats apart as (re, im) pairs side by side.
void ScatterPairs(const float* re, const float* im, int64_t count, float scale, float* o,
                  int64_t stride) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(hn::ScalableTag<float>()));
  int64_t done = 0;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  const D8 d;
  const V8 sc = hn::Set(d, scale);
  done = count / kBlock8 * kBlock8;
  for (int64_t g0 = 0; g0 < N; g0 += kBlock8) {
    for (int64_t j0 = 0; j0 < done; j0 += kBlock8) {
      V8 r[8], i[8];
      for (int64_t c = 0; c < kBlock8; ++c) {
        r[c] = hn::Mul(hn::LoadU(d, re + (j0 + c) * N + g0), sc);
        i[c] = hn::Mul(hn::LoadU(d, im + (j0 + c) * N + g0), sc);
      }
      Transpose8(r);
      Transpose8(i);
      for (int64_t l = 0; l < kBlock8; ++l) {
        hn::StoreInterleaved2(r[l], i[l], d, o + (g0 + l) * stride + 2 * j0);
      }
    }
  }
#endif
  for (int64_t g = 0; g < N; ++g) {
    for (int64_t j = done; j < count; ++j) {
      o[g * stride + 2 * j] = re[j * N + g] * scale;
      o[g * stride + 2 * j + 1] = im[j * N + g] * scale;
    }
  }
}

// One group's transform on its lane buffers b[0..3] (the gathered input in
// b[0], b[1]; b[2], b[3] the other pair) with the real split's steps around
// it (Note [Real transforms]; `bins`: R2C's output length). Returns the index
// of the pair holding the result (0 or 2).
template <class D>
int TransformLanes(const Plan& plan, float* const* b, int64_t bins, float* tmp_re,
                   float* tmp_im) {
  const LaneFft<D> f(plan, tmp_re, tmp_im);
  int at = 0;
  if (plan.real_n != 0 && !plan.forward) {
    f.MergeC2R(b[0], b[1], b[2], b[3]);
    at = 2;
  }
  if (plan.n > 1 && f.Run(b[at], b[at + 1], b[2 - at], b[3 - at])) at = 2 - at;
  if (plan.real_n != 0 && plan.forward) {
    f.SplitR2C(b[at], b[at + 1], bins, b[2 - at], b[3 - at]);
    at = 2 - at;
  }
  return at;
}

int FftGroup(const Plan& plan, float* const* b, int64_t bins, float* tmp_re, float* tmp_im) {
  return TransformLanes<hn::ScalableTag<float>>(plan, b, bins, tmp_re, tmp_im);
}

// Note [Few lines]: a transform of fewer lines than lanes runs one line at a
// time, in one-lane vectors: a full-width group would transform zeros in the
// other lanes (a single long signal: N times the work and the scratch).
int FftLine(const Plan& plan, float* const* b, int64_t bins, float* tmp_re, float* tmp_im) {
  return TransformLanes<hn::CappedTag<float, 1>>(plan, b, bins, tmp_re, tmp_im);
}

}  // namespace trn::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE

#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <new>
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
HWY_EXPORT(GatherPairs);
HWY_EXPORT(ScatterPairs);

namespace {

// In-place forward DFT of a power-of-2 length in double (Note [Bluestein]'s
// kernel, once per plan): iterative radix 2, twiddles from one table.
void ForwardFftDouble(std::vector<std::complex<double>>& a) {
  const size_t n = a.size();
  for (size_t i = 1, j = 0; i < n; ++i) {  // bit-reversal permutation
    size_t bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) std::swap(a[i], a[j]);
  }
  std::vector<std::complex<double>> w(n / 2);
  for (size_t k = 0; k < n / 2; ++k) {
    w[k] = std::polar(1.0, -2.0 * std::numbers::pi * static_cast<double>(k) /
                               static_cast<double>(n));
  }
  for (size_t len = 2; len <= n; len <<= 1) {
    const size_t stride = n / len;
    for (size_t i = 0; i < n; i += len) {
      for (size_t k = 0; k < len / 2; ++k) {
        const std::complex<double> u = a[i + k], v = a[i + k + len / 2] * w[k * stride];
        a[i + k] = u + v;
        a[i + k + len / 2] = u - v;
      }
    }
  }
}

// The plan of an n-point transform; real_n = 2 n for the half-length
// transform of a real line (Note [Real transforms]), else 0.
void MakePlan(fft::Plan& plan, int64_t n, bool forward, int64_t real_n) {
  plan.n = n;
  plan.forward = forward;
  plan.real_n = real_n;
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
  // Note [Bluestein]: where its cost model wins. A plain level of a prime p
  // costs ~8 n p flops; the convolution two M-point FFTs and three products.
  plan.sub.reset();
  plan.chirp_re.clear(), plan.chirp_im.clear(), plan.kernel_re.clear(), plan.kernel_im.clear();
  int64_t conv = 1;
  while (conv < 2 * n - 1) conv *= 2;
  const double conv_cost = 10.0 * static_cast<double>(conv) * std::log2(conv) + 20.0 * conv;
  if (plan.max_radix > 5 && conv_cost < 8.0 * static_cast<double>(n) * plan.max_radix) {
    auto sub = std::make_shared<fft::Plan>();
    MakePlan(*sub, conv, true, 0);
    std::vector<std::complex<double>> b(static_cast<size_t>(conv));
    for (int64_t j = 0; j < n; ++j) {
      const int64_t sq = j * j % (2 * n);  // the angle mod 2 pi, exactly
      const double a = std::numbers::pi * static_cast<double>(sq) / static_cast<double>(n);
      plan.chirp_re.push_back(static_cast<float>(std::cos(a)));
      plan.chirp_im.push_back(static_cast<float>(sign * std::sin(a)));
      b[static_cast<size_t>(j)] = std::polar(1.0, -sign * a);  // conj(w_j)
      if (j > 0) b[static_cast<size_t>(conv - j)] = b[static_cast<size_t>(j)];
    }
    ForwardFftDouble(b);
    for (const auto& v : b) {
      plan.kernel_re.push_back(static_cast<float>(v.real() / static_cast<double>(conv)));
      plan.kernel_im.push_back(static_cast<float>(v.imag() / static_cast<double>(conv)));
    }
    plan.sub = std::move(sub);
    plan.radices.clear();
    plan.max_radix = 1;
  }
  // W_n^j for the plain DFT levels (radices above 5).
  plan.w_re.resize(plan.max_radix > 5 ? static_cast<size_t>(n) : 0);
  plan.w_im.resize(plan.w_re.size());
  for (int64_t j = 0; j < static_cast<int64_t>(plan.w_re.size()); ++j) {
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
  plan.real_re.clear();
  plan.real_im.clear();
  for (int64_t k = 0; real_n != 0 && k <= n; ++k) {
    const double a = 2.0 * std::numbers::pi * static_cast<double>(k) / static_cast<double>(real_n);
    plan.real_re.push_back(static_cast<float>(std::cos(a)));
    plan.real_im.push_back(static_cast<float>(sign * std::sin(a)));
  }
}

// Note [Four-step]: fewer long c2c lines than lanes would run one lane wide
// (Note [Few lines]) over buffers far larger than the caches. Seen as a matrix
// [n1][n2] (j = j1 n2 + j2), a line's DFT is n2 column DFTs of n1 points
// (n2 lanes), the twiddle W_n^(k1 j2), then n1 row DFTs of n2 points whose
// element k2 is bin k1 + n1 k2 (the rows written into a transposed view of
// the output). A factor pair near sqrt(n) of radices 2..5, both sides at least
// a vector wide; 0 when n has none. Up to 2^22 points: the tables a thread
// keeps (below) are then at most 64 MiB.
constexpr int64_t kFourStepMin = int64_t{1} << 14, kFourStepMax = int64_t{1} << 22;

int64_t FourStepSplit(int64_t n, int64_t lanes) {
  const auto smooth = [](int64_t m) {
    for (int64_t p : {2, 3, 5}) {
      while (m % p == 0) m /= p;
    }
    return m == 1;
  };
  int64_t best = 0;
  for (int64_t n1 = lanes; n1 * n1 <= n; ++n1) {
    if (n % n1 == 0 && smooth(n1) && smooth(n / n1)) best = n1;
  }
  return best;
}

// The four-step's per-thread state for its last n, kept as a plan's twiddles
// are (Note [FFT plans]): the forward twiddles W_n^(k1 j2) as pairs of the
// [n1][n2] matrix (tabulated in double, once per n; an inverse reads them
// conjugated, so fft and ifft of one length share them), and the scratch
// matrix itself.
struct FourStepTables {
  int64_t n = 0, n1 = 0;
  std::vector<float> twiddle;
  std::vector<float> matrix;
};

// nullptr when the host has no memory for them (kernels do not throw).
FourStepTables* FourStepFor(int64_t n, int64_t n1) {
  thread_local FourStepTables t;
  if (t.n == n && t.n1 == n1) return &t;
  const int64_t n2 = n / n1;
  t.n = 0;
  try {
    t.twiddle.resize(static_cast<size_t>(2 * n));
    t.matrix.resize(static_cast<size_t>(2 * n));
  } catch (const std::bad_alloc&) {
    t.twiddle = {}, t.matrix = {};
    return nullptr;
  }
  for (int64_t k1 = 0; k1 < n1; ++k1) {
    for (int64_t j2 = 0; j2 < n2; ++j2) {
      const int64_t e = k1 * j2 % n;  // the angle mod 2 pi, exactly
      const double a = -2.0 * std::numbers::pi * static_cast<double>(e) / static_cast<double>(n);
      t.twiddle[static_cast<size_t>(2 * (k1 * n2 + j2))] = static_cast<float>(std::cos(a));
      t.twiddle[static_cast<size_t>(2 * (k1 * n2 + j2) + 1)] = static_cast<float>(std::sin(a));
    }
  }
  t.n = n, t.n1 = n1;
  return &t;
}

Status FourStep(const TensorRef& out, const ComplexOperand& in_op, int dim, bool forward,
                double scale, int64_t n1) {
  const TensorRef& in = in_op.t;
  const int64_t n = in.sizes[dim], n2 = n / n1;
  FourStepTables* tables = FourStepFor(n, n1);
  if (tables == nullptr) {
    return Status::Error("fft: no host memory for a line of " + std::to_string(n));
  }
  TensorRef mat;  // the scratch matrix [n1][n2] of pairs
  mat.data = tables->matrix.data();
  mat.ndim = 2;
  mat.sizes[0] = n1, mat.sizes[1] = n2;
  mat.strides[0] = 2 * n2, mat.strides[1] = 2;
  ComplexOperand twiddle;
  twiddle.t = mat;
  twiddle.t.data = tables->twiddle.data();
  twiddle.conj = !forward;
  TensorRef out_lines = out, in_lines = in;
  out_lines.sizes[dim] = in_lines.sizes[dim] = 1;
  Status status;
  internal::ForEachRun<2>(
      {&out_lines, &in_lines},
      [&](const std::array<char*, 2>& p, int64_t count, const std::array<int64_t, 2>& st) {
        for (int64_t r = 0; r < count && status.ok(); ++r) {
          ComplexOperand cols = in_op;  // the line as [n1][n2], columns transformed
          cols.t.data = reinterpret_cast<float*>(p[1]) + r * st[1];
          cols.t.ndim = 2;
          cols.t.sizes[0] = n1, cols.t.sizes[1] = n2;
          cols.t.strides[0] = n2 * in.strides[dim], cols.t.strides[1] = in.strides[dim];
          status = Fft(FftKind::kC2C, mat, cols, 0, forward, 1.0);
          ComplexOperand rows;
          rows.t = mat;
          if (status.ok()) status = ComplexBinary(ComplexBinaryOp::kMul, mat, rows, twiddle);
          TensorRef bins = out;  // bin k1 + n1 k2 at [k1][k2]
          bins.data = reinterpret_cast<float*>(p[0]) + r * st[0];
          bins.ndim = 2;
          bins.sizes[0] = n1, bins.sizes[1] = n2;
          bins.strides[0] = out.strides[dim], bins.strides[1] = n1 * out.strides[dim];
          if (status.ok()) status = Fft(FftKind::kC2C, bins, rows, 1, forward, scale);
        }
      });
  return status;
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
  const int64_t total_lines = out.numel() / out_len;
  const int64_t full_lanes = HWY_DYNAMIC_DISPATCH(FftLanes)();
  if (kind == FftKind::kC2C && total_lines < full_lanes && n >= kFourStepMin &&
      n <= kFourStepMax) {
    if (const int64_t n1 = FourStepSplit(n, full_lanes); n1 > 0) {  // Note [Four-step]
      return FourStep(out, in_op, dim, forward, scale, n1);
    }
  }
  // Note [Real transforms]: a real line of even length is a complex one of half.
  const bool split = kind != FftKind::kC2C && n % 2 == 0;
  const int64_t fft_n = split ? n / 2 : n, real_n = split ? n : 0;
  // Note [FFT plans]: a few plans per thread, so a 2-D transform of unequal
  // sides or alternating rfft / irfft does not recompute its twiddles per pass.
  thread_local std::array<fft::Plan, 4> plans;
  thread_local size_t next_plan = 0;
  fft::Plan* found = nullptr;
  for (fft::Plan& p : plans) {
    if (p.n == fft_n && p.forward == forward && p.real_n == real_n) found = &p;
  }
  if (found == nullptr) {
    found = &plans[next_plan];
    next_plan = (next_plan + 1) % plans.size();
    MakePlan(*found, fft_n, forward, real_n);
  }
  const fft::Plan& plan = *found;
  const int64_t N = total_lines < full_lanes ? 1 : full_lanes;  // Note [Few lines]
  const auto group_fn = N == 1 ? HWY_DYNAMIC_DISPATCH(FftLine) : HWY_DYNAMIC_DISPATCH(FftGroup);
  // Four SoA line buffers (two pairs of re and im) and the generic radix's scratch.
  const int64_t elems = std::max(n, plan.lane_elems()) * N;
  internal::ScratchBuffer<float> scratch;
  float* const buf = scratch.Get(4 * elems + 2 * plan.max_radix * N);
  if (buf == nullptr) return Status::Error("fft: no host memory for lines of " + std::to_string(n));
  float* const bufs[4] = {buf, buf + elems, buf + 2 * elems, buf + 3 * elems};
  float* const lre = bufs[0];
  float* const lim = bufs[1];
  float* const tre = buf + 4 * elems;
  float* const tim = tre + plan.max_radix * N;
  const int64_t in_step = in.strides[dim], out_step = out.strides[dim];
  const float sc = static_cast<float>(scale);
  const float im_sign = in_op.conj ? -1.0f : 1.0f;
  const int64_t half = n / 2 + 1, given = std::min(in_len, half);  // kC2R
  const bool real_in = kind == FftKind::kR2C, real_out = kind == FftKind::kC2R;
  // Note [Last-dim lines]: elements as (re, im) pairs side by side in each line
  // (complex ones, or a real line's z_t of Note [Real transforms]). Not for
  // C2R of odd n, whose line buffers hold the extended Hermitian line.
  const bool pairs_in = N > 1 && (kind == FftKind::kC2C ? in_step == 2
                                  : split               ? in_step == (real_in ? 1 : 2)
                                                        : false);
  const bool pairs_out = N > 1 && (real_out ? split && out_step == 1 : out_step == 2);
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
              HWY_DYNAMIC_DISPATCH(GatherAdjacentC2R)(x0, in_step, n, given, im_sign, split, lre,
                                                      lim);
            } else {
              HWY_DYNAMIC_DISPATCH(GatherAdjacent)(real_in, split, x0, in_step, n, im_sign, lre,
                                                   lim);
            }
          } else if (pairs_in && lanes == N) {  // Note [Last-dim lines]
            const int64_t count = kind == FftKind::kC2R ? given : split ? n / 2 : n;
            HWY_DYNAMIC_DISPATCH(GatherPairs)(x0, st[1], count, im_sign, lre, lim);
            if (kind == FftKind::kC2R) {  // as GatherAdjacentC2R (split: bins 0..n/2 alone)
              std::fill(lim, lim + N, 0.0f);
              std::fill(lre + given * N, lre + half * N, 0.0f);
              std::fill(lim + given * N, lim + half * N, 0.0f);
              if (n % 2 == 0) std::fill(lim + (n / 2) * N, lim + (n / 2 + 1) * N, 0.0f);
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
                  if (split) {  // z_t = x_2t + i x_2t+1
                    for (int64_t t = 0; t < n / 2; ++t) {
                      lre[t * N + g] = x[2 * t * in_step];
                      lim[t * N + g] = x[(2 * t + 1) * in_step];
                    }
                    break;
                  }
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
                    if (!split && j > 0 && n - j >= half) {
                      lre[(n - j) * N + g] = re;
                      lim[(n - j) * N + g] = -im;
                    }
                  }
                  break;
              }
            }
          }
          const int at = group_fn(plan, bufs, out_len, tre, tim);
          const float* rre = bufs[at];
          const float* rim = bufs[at + 1];
          const int64_t len = real_out ? n : out_len;
          if (out_adjacent) {
            HWY_DYNAMIC_DISPATCH(ScatterAdjacent)(real_out, split && real_out, rre, rim, len, sc,
                                                  o0, out_step);
            continue;
          }
          if (pairs_out && lanes == N) {  // Note [Last-dim lines]
            HWY_DYNAMIC_DISPATCH(ScatterPairs)(rre, rim, real_out ? n / 2 : len, sc, o0, st[0]);
            continue;
          }
          for (int64_t g = 0; g < lanes; ++g) {
            float* o = o0 + g * st[0];
            if (split && real_out) {  // values 2t and 2t + 1 are z_t's parts
              for (int64_t t = 0; t < n / 2; ++t) {
                o[2 * t * out_step] = rre[t * N + g] * sc;
                o[(2 * t + 1) * out_step] = rim[t * N + g] * sc;
              }
              continue;
            }
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
