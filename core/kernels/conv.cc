// Convolution as GEMM.
//
// Note [conv as GEMM]
// For image n and group g, out[n, g] (Og x P, P = OH*OW) = W_g (Og x K) @
// col (K x P), K = Cg*KH*KW, where col holds the input patch of every output
// pixel (im2col). Everything the GEMM reads is float32 in one workspace (a
// bfloat16 conv on AMX reads its weight in place and rounds col into tiles:
// Note [bf16 conv on AMX]):
//  - the weight, converted and reordered once per call into the K order of col;
//  - the bias (f32), loaded by Matmul as the accumulator start (fused bias);
//  - col, rebuilt per (n, g). Its layout follows the input: NCHW input gives
//    rows of one (c, kh, kw) over all pixels (row copies out of per-channel
//    phase planes, Note [im2col from phase planes]), channels-last
//    input gives rows of one pixel over (kh, kw, c) (loads along C). Matmul's
//    packers take either orientation, so no transpose is ever materialised;
//  - col covers a band of output rows at a time (about kColBytes), so it is
//    still in cache when the GEMM packs it; the weight is repacked per band,
//    1/band-pixels of the band's GEMM work;
//  - a 1x1 / stride-1 / unpadded f32 convolution skips im2col: the input
//    itself is the K x P operand;
//  - small NCHW images (under kMergePixels outputs, all cols within one band)
//    sit side by side in one col [K][N*P]: one GEMM over N*P pixels instead
//    of N skinny ones, its f32 tile then stored into out.
// The GEMM orientation follows the output: out with unit W stride is computed
// as W @ col, channels-last out as col^T @ W^T, both straight into out when it
// is f32; other dtypes and odd strides go through an f32 tile in the workspace
// that is converted while stored. The activation runs on that tile / the
// freshly written output rows of the same kernel, while they are in cache.
// Depthwise convolutions (one input channel per group) are no GEMM at all
// (M = 1 per group): they run directly, each input plane copied once into
// zero-bordered f32 phase planes (Note [im2col from phase planes]) and each
// output row summed over its KH*KW taps in registers (conv-inl.h).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/kernels/conv.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "core/kernels/conv-inl.h"
#include "hwy/highway.h"

#if HWY_ONCE
#include "core/kernels/conv.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "core/common/assert.h"
#include "core/kernels/amx.h"
#include "core/kernels/convert.h"
#include "core/kernels/kernels.h"
#include "core/kernels/scratch.h"
#include "hwy/aligned_allocator.h"

namespace trn::kernels {
namespace conv {
HWY_EXPORT(DepthwiseRow);
HWY_EXPORT(ClampRow);
HWY_EXPORT(SmoothActivationRow);
HWY_EXPORT(CopyRuns);
}  // namespace conv
namespace {

// Slack after phase-plane rows and the depthwise output row, read in pairs of
// whole vectors by DepthwiseRow (the widest Highway vector holds 64 floats).
constexpr int64_t kVecPad = 128;

// Target size of one band of col (Note [conv as GEMM]): a Zen 4 L2. Smaller
// bands cut small images into GEMMs with more partial NR panels and weight
// repacks (256 KiB made ResNet's 3x3 convs at 12x12 and 24x24 1.2-1.3x slower).
constexpr int64_t kColBytes = int64_t{1024} << 10;

// Images with fewer output pixels than this share one GEMM when their cols fit
// in one band: a GEMM over 144 pixels runs well below peak (ResNet's 3x3 conv
// at 12x12: 64x576x144 twice took 0.35 ms, 64x576x288 once 0.23 ms).
constexpr int64_t kMergePixels = 512;

// Note [Implicit GEMM]: narrower taps (kw * C, the k of each tap row's GEMM)
// take im2col: a GEMM with k of a few dozen runs far below peak.
constexpr int64_t kImplicitMinK = 64;

// Every size and layout decision of one call, shared by ConvWorkspaceBytes
// and Conv2d so they agree on the workspace.
struct Plan {
  int64_t n, c, h, w, cout, kh, kw, oh, ow, groups, cg, og, k, p;
  bool cl_in;        // col rows are pixels (channels-last input)
  bool direct_in;    // 1x1 f32: the input is the GEMM operand
  bool transposed;   // out^T = col^T @ W^T (channels-last output)
  bool direct_out;   // GEMM writes straight into out
  bool depthwise;    // one input channel per group: direct loops, no GEMM
  bool merge_n;      // all images in one GEMM (Note [conv as GEMM])
  bool patchify;     // stride = kernel width: im2col without phases (Note [Patchify im2col])
  bool implicit;     // channels-last, stride 1: no im2col (Note [Implicit GEMM])
  int64_t hp, wp;    // zero-bordered input plane (depthwise, phase planes, implicit GEMM)
  int64_t wq;        // phase plane row: ceil(wp / stride_w) + slack (Note [im2col from phase planes])
  int64_t band;      // output rows per GEMM (col band), bp = band * ow pixels
  int64_t bp;
  int64_t col_ld;    // NCHW col's row stride: read in place by the GEMM (Note [B in place])
  int64_t out_ps;    // out's stride over the merged pixel dim (direct_out)
  // Workspace offsets in floats.
  int64_t w_off, b_off, col_off, tile_off, phase_off, total;
};

bool PixelsMerge(const TensorRef& t, int64_t* ps) {  // dims 2, 3 as one dim
  if (t.sizes[3] == 1) {
    *ps = t.strides[2];
    return true;
  }
  *ps = t.strides[3];
  return t.sizes[2] == 1 || t.strides[2] == t.sizes[3] * t.strides[3];
}

Plan MakePlan(const TensorRef& out, const TensorRef& in, const TensorRef& weight,
              const ConvParams& prm) {
  TRN_ASSERT(in.ndim == 4 && weight.ndim == 4 && out.ndim == 4, "conv2d operands must be 4-D");
  Plan p{};
  p.n = in.sizes[0];
  p.c = in.sizes[1];
  p.h = in.sizes[2];
  p.w = in.sizes[3];
  p.cout = weight.sizes[0];
  p.kh = weight.sizes[2];
  p.kw = weight.sizes[3];
  p.groups = prm.groups;
  TRN_ASSERT(p.groups >= 1 && p.c % p.groups == 0 && p.cout % p.groups == 0,
             "conv2d groups must divide the channels");
  p.cg = p.c / p.groups;
  p.og = p.cout / p.groups;
  TRN_ASSERT(weight.sizes[1] == p.cg, "conv2d weight must have C/groups input channels");
  p.oh = ConvOutputSize(p.h, p.kh, prm.stride[0], prm.pad_begin[0], prm.pad_end[0],
                        prm.dilation[0]);
  p.ow = ConvOutputSize(p.w, p.kw, prm.stride[1], prm.pad_begin[1], prm.pad_end[1],
                        prm.dilation[1]);
  TRN_ASSERT(out.sizes[0] == p.n && out.sizes[1] == p.cout && out.sizes[2] == p.oh &&
                 out.sizes[3] == p.ow,
             "conv2d out has the wrong shape");
  TRN_ASSERT(IsFloating(in.dtype) && weight.dtype == in.dtype && out.dtype == in.dtype,
             "conv2d needs one floating dtype");
  p.k = p.cg * p.kh * p.kw;
  p.p = p.oh * p.ow;
  p.cl_in = p.c > 1 && in.strides[1] < in.strides[3];
  int64_t in_ps = 0;
  p.direct_in = p.kh == 1 && p.kw == 1 && prm.stride[0] == 1 && prm.stride[1] == 1 &&
                prm.pad_begin[0] == 0 && prm.pad_begin[1] == 0 && prm.pad_end[0] == 0 &&
                prm.pad_end[1] == 0 && in.dtype == DType::kFloat32 && PixelsMerge(in, &in_ps);
  const bool merge_out = PixelsMerge(out, &p.out_ps);
  p.transposed = p.og > 1 && out.strides[1] == 1 && !(merge_out && p.out_ps == 1 && p.p > 1);
  p.direct_out = out.dtype == DType::kFloat32 && merge_out;
  p.depthwise = p.cg == 1 && p.groups > 1;
  p.hp = p.h + prm.pad_begin[0] + prm.pad_end[0];
  p.wp = p.w + prm.pad_begin[1] + prm.pad_end[1];
  // Only DepthwiseRow reads past a row; im2col copies exact runs, and dense
  // rows keep the zero fill and the planes small (slack made them 6x larger
  // than ResNet's 24x24 images, a 512 KiB fill per call).
  p.wq = (p.wp + prm.stride[1] - 1) / prm.stride[1] + (p.depthwise ? kVecPad : 0);
  p.w_off = 0;
  p.b_off = p.cout * p.k;
  p.col_off = (p.b_off + p.cout + 15) / 16 * 16;  // 64-byte aligned (Note [B in place])
  if (p.depthwise) {  // col holds one channel's phase planes, tile one output row
    p.tile_off = p.col_off + prm.stride[1] * p.hp * p.wq;
    p.total = p.tile_off + p.ow + kVecPad;
    return p;
  }
  p.implicit = p.cl_in && !p.direct_in && !p.depthwise && p.groups == 1 &&
               prm.stride[0] == 1 && prm.stride[1] == 1 && prm.dilation[1] == 1 &&
               p.kh * p.kw > 1 && p.cg * p.kw >= kImplicitMinK;
  if (p.implicit) {  // col holds the zero-bordered input, tile a band of output rows
    // Tile rows (band * padded width) at most the GEMM's in-place-B rows, so it
    // reads the weight slices in place (Note [B in place]); the tile stays in L2.
    p.band = std::clamp<int64_t>(kInPlaceBMaxRows / p.wp, 1, std::max<int64_t>(p.oh, 1));
    p.bp = p.band * p.wp;
    // The last tile row reads (kw - 1) * C floats past the padded input.
    p.tile_off = (p.col_off + p.hp * p.wp * p.cg + (p.kw - 1) * p.cg + 15) / 16 * 16;
    p.phase_off = p.tile_off + p.bp * p.cout;
    p.total = p.phase_off;
    return p;
  }
  p.band = p.direct_in ? p.oh
                       : std::clamp<int64_t>(kColBytes / (4 * std::max<int64_t>(p.k * p.ow, 1)),
                                             1, std::max<int64_t>(p.oh, 1));
  p.bp = p.band * p.ow;
  p.merge_n = p.n > 1 && p.groups == 1 && !p.direct_in && !p.cl_in && !p.transposed &&
              p.p < kMergePixels && 4 * p.k * p.n * p.p <= kColBytes;
  if (p.merge_n) p.bp = p.n * p.p;
  p.col_ld = p.cl_in ? p.k : InPlaceBStride(p.bp);
  p.tile_off = p.col_off + (p.direct_in ? 0 : p.cl_in ? p.k * p.bp : p.k * p.col_ld);
  p.phase_off = p.tile_off + (p.direct_out && !p.merge_n ? 0 : p.og * p.bp);
  p.patchify = !p.direct_in && !p.cl_in && in.dtype == DType::kFloat32 && in.strides[3] == 1 &&
               prm.stride[1] == p.kw && prm.dilation[1] == 1 && prm.pad_begin[1] == 0 &&
               prm.pad_end[1] == 0;
  p.total = p.phase_off +
            (p.direct_in || p.cl_in || p.patchify ? 0 : p.cg * prm.stride[1] * p.hp * p.wq);
  return p;
}

const char* At(const TensorRef& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  const int64_t off =
      i0 * t.strides[0] + i1 * t.strides[1] + i2 * t.strides[2] + i3 * t.strides[3];
  return static_cast<const char*>(t.data) + off * static_cast<int64_t>(ItemSize(t.dtype));
}

// Weight as f32 [Cout][K] in col's K order: (c, kh, kw), or (kh, kw, c) for
// channels-last col. A float32 weight already in that layout is used where it
// is when `in_place` (nothing scales it), else it is written to dst.
const float* PackWeight(const Plan& p, const TensorRef& weight, bool in_place, float* dst) {
  const bool kck_order = !(p.cl_in && !p.direct_in);
  // Already [Cout][K]; size-1 dims may have any stride (a 1-D conv's H): the
  // per-row repack below took 0.4-0.6 ms of Whisper's 256x256x3 conv.
  if (kck_order && weight.is_contiguous()) {
    if (in_place && weight.dtype == DType::kFloat32) return weight.ptr<float>();
    internal::LoadAsF32(weight.dtype, weight.data, 1, p.cout * p.k, dst);
    return dst;
  }
  for (int64_t o = 0; o < p.cout; ++o) {
    float* row = dst + o * p.k;
    if (p.cl_in && !p.direct_in) {
      for (int64_t y = 0; y < p.kh; ++y) {
        for (int64_t x = 0; x < p.kw; ++x) {
          internal::LoadAsF32(weight.dtype, At(weight, o, 0, y, x), weight.strides[1], p.cg,
                              row + (y * p.kw + x) * p.cg);
        }
      }
    } else {
      for (int64_t c = 0; c < p.cg; ++c) {
        for (int64_t y = 0; y < p.kh; ++y) {
          internal::LoadAsF32(weight.dtype, At(weight, o, c, y, 0), weight.strides[3], p.kw,
                              row + (c * p.kh + y) * p.kw);
        }
      }
    }
  }
  return dst;
}

// [lo, hi) of output positions whose input position o*stride + off is in [0, size).
void ValidRange(int64_t out, int64_t stride, int64_t off, int64_t size, int64_t* lo,
                int64_t* hi) {
  int64_t a = 0, b = out;
  while (a < b && a * stride + off < 0) ++a;
  while (b > a && (b - 1) * stride + off >= size) --b;
  *lo = a;
  *hi = b;
}

// col for image n, group g, output rows [y0, y1) (Note [conv as GEMM]).
void Im2Col(const Plan& p, const ConvParams& prm, const TensorRef& in, int64_t n, int64_t g,
            int64_t y0, int64_t y1, const float* phases, float* col, int64_t ld) {
  const int64_t sh = prm.stride[0], sw = prm.stride[1];
  const int64_t dh = prm.dilation[0], dw = prm.dilation[1];
  const int64_t ph = prm.pad_begin[0], pw = prm.pad_begin[1];
  const int64_t c0 = g * p.cg;
  if (p.cl_in) {  // rows of one pixel: [P][(kh, kw, c)]
    for (int64_t y = y0; y < y1; ++y) {
      for (int64_t x = 0; x < p.ow; ++x) {
        float* dst = col + ((y - y0) * p.ow + x) * p.k;
        for (int64_t ky = 0; ky < p.kh; ++ky) {
          const int64_t iy = y * sh - ph + ky * dh;
          for (int64_t kx = 0; kx < p.kw; ++kx) {
            const int64_t ix = x * sw - pw + kx * dw;
            float* seg = dst + (ky * p.kw + kx) * p.cg;
            if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w) {
              std::fill(seg, seg + p.cg, 0.0f);
            } else {
              internal::LoadAsF32(in.dtype, At(in, n, c0, iy, ix), in.strides[1], p.cg, seg);
            }
          }
        }
      }
    }
    return;
  }
  if (p.patchify) {  // Note [Patchify im2col]
    for (int64_t c = 0; c < p.cg; ++c) {
      for (int64_t ky = 0; ky < p.kh; ++ky) {
        float* rows = col + (c * p.kh + ky) * p.kw * ld;
        for (int64_t y = y0; y < y1; ++y) {
          const int64_t iy = y * sh - ph + ky * dh;
          float* dst = rows + (y - y0) * p.ow;
          if (iy < 0 || iy >= p.h) {
            for (int64_t kx = 0; kx < p.kw; ++kx) std::fill_n(dst + kx * ld, p.ow, 0.0f);
            continue;
          }
          const float* src = reinterpret_cast<const float*>(At(in, n, c0 + c, iy, 0));
          for (int64_t kx = 0; kx < p.kw; ++kx) {
            for (int64_t x = 0; x < p.ow; ++x) dst[kx * ld + x] = src[x * sw + kx];
          }
        }
      }
    }
    return;
  }
  // rows of one (c, kh, kw): [(c, kh, kw)][P], plain row copies out of the
  // phase planes (Note [im2col from phase planes]).
  const auto copy_runs = HWY_DYNAMIC_DISPATCH(conv::CopyRuns);
  for (int64_t c = 0; c < p.cg; ++c) {
    const float* plane = phases + c * sw * p.hp * p.wq;
    for (int64_t ky = 0; ky < p.kh; ++ky) {
      for (int64_t kx = 0; kx < p.kw; ++kx) {
        float* row = col + ((c * p.kh + ky) * p.kw + kx) * ld;
        const float* src = plane + (kx * dw % sw) * p.hp * p.wq + kx * dw / sw;
        copy_runs(src + (y0 * sh + ky * dh) * p.wq, sh * p.wq, row, p.ow,
                  static_cast<size_t>(y1 - y0), static_cast<size_t>(p.ow));
      }
    }
  }
}

// Note [Patchify im2col]: when the stride equals the kernel width (a vision
// transformer's patch embedding: 16x16/16), columns of different taps never
// overlap and the phase planes would be a second copy of col with a function
// call per OW-element run (a third of the 16x16/16 patch embedding's time on
// 224^2). col is then filled straight from the input: per (c, ky, output
// row) one input row, read contiguously, spread over the KW rows of col.
// Padding in H gives zero runs; padding in W, dilation or another dtype take
// the phase planes.
// Note [im2col from phase planes]: for NCHW input, each channel of image n,
// group g is converted once into f32 planes with a zero border (the padding),
// split by column phase: phase q of a stride-s row holds padded columns
// q, q + s, q + 2s, ... Then every col row segment -- input columns
// x*s - pad + kx*dilation for x < OW -- is one contiguous run of phase
// (kx*dilation) % s, copied without bounds checks, conversion or strided
// loads (the stem's 7x7/2 conv read each input element 49/4 times strided).
void BuildPhases(const Plan& p, const ConvParams& prm, const TensorRef& in, int64_t n,
                 int64_t g, float* phases) {
  const int64_t sw = prm.stride[1], pw = prm.pad_begin[1], ph = prm.pad_begin[0];
  for (int64_t c = 0; c < p.cg; ++c) {
    for (int64_t q = 0; q < sw; ++q) {
      int64_t lo, hi;  // phase columns j whose input column j*sw + q - pw is inside
      ValidRange(p.wq, sw, q - pw, p.w, &lo, &hi);
      if (lo >= hi) continue;
      float* dst = phases + ((c * sw + q) * p.hp + ph) * p.wq;
      for (int64_t y = 0; y < p.h; ++y) {
        internal::LoadAsF32(in.dtype, At(in, n, g * p.cg + c, y, lo * sw + q - pw),
                            in.strides[3] * sw, hi - lo, dst + y * p.wq + lo);
      }
    }
  }
}

TensorRef Mat2(void* data, DType dtype, int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  TensorRef t;
  t.data = data;
  t.dtype = dtype;
  t.ndim = 2;
  t.sizes[0] = rows;
  t.sizes[1] = cols;
  t.strides[0] = rs;
  t.strides[1] = cs;
  return t;
}

// In place on n floats `stride` apart (relu is clamp(0, inf)), by the
// vectorized row kernels: a scalar loop cost 1.5 ns per element. Strided
// elements go through a small contiguous buffer.
void Activate(const ConvParams& p, float* x, int64_t n, int64_t stride) {
  if (p.activation == ConvActivation::kNone || n <= 0) return;
  if (stride != 1) {
    float buf[256];
    for (int64_t i0 = 0; i0 < n; i0 += 256) {
      const int64_t m = std::min<int64_t>(256, n - i0);
      for (int64_t i = 0; i < m; ++i) buf[i] = x[(i0 + i) * stride];
      Activate(p, buf, m, 1);
      for (int64_t i = 0; i < m; ++i) x[(i0 + i) * stride] = buf[i];
    }
    return;
  }
  if (p.activation == ConvActivation::kGelu || p.activation == ConvActivation::kSilu) {
    return HWY_DYNAMIC_DISPATCH(conv::SmoothActivationRow)(x, static_cast<size_t>(n),
                                                           p.activation == ConvActivation::kGelu);
  }
  const bool relu = p.activation == ConvActivation::kRelu;
  const float lo = relu ? 0.0f : p.clamp_lo;
  const float hi = relu ? std::numeric_limits<float>::infinity() : p.clamp_hi;
  HWY_DYNAMIC_DISPATCH(conv::ClampRow)(x, static_cast<size_t>(n), lo, hi);
}

float Activate(const ConvParams& p, float v) {
  Activate(p, &v, 1, 1);
  return v;
}

// Note [conv as GEMM]: the depthwise path. wf is [Cout][KH*KW], bf the bias
// or null, plane the channel's phase planes, row one output row.
void Depthwise(const Plan& p, const ConvParams& prm, const TensorRef& out, const TensorRef& in,
               const float* wf, const float* bf, float* plane, float* row) {
  const int64_t sh = prm.stride[0], sw = prm.stride[1];
  const int64_t dh = prm.dilation[0], dw = prm.dilation[1];
  std::fill(plane, row, 0.0f);  // borders stay zero, interiors are rewritten
  thread_local std::vector<const float*> taps;
  taps.resize(static_cast<size_t>(p.kh * p.kw));
  const auto row_fn = HWY_DYNAMIC_DISPATCH(conv::DepthwiseRow);
  for (int64_t n = 0; n < p.n; ++n) {
    for (int64_t c = 0; c < p.c; ++c) {
      BuildPhases(p, prm, in, n, c, plane);
      for (int64_t y = 0; y < p.oh; ++y) {
        for (int64_t ky = 0; ky < p.kh; ++ky) {
          for (int64_t kx = 0; kx < p.kw; ++kx) {
            taps[ky * p.kw + kx] = plane + (kx * dw % sw) * p.hp * p.wq +
                                   (y * sh + ky * dh) * p.wq + kx * dw / sw;
          }
        }
        for (int64_t m = 0; m < p.og; ++m) {
          const int64_t o = c * p.og + m;
          row_fn(taps.data(), wf + o * p.k, taps.size(), static_cast<size_t>(p.ow),
                 bf ? bf[o] : 0.0f, row);
          Activate(prm, row, p.ow, 1);
          internal::StoreFromF32(out.dtype, const_cast<char*>(At(out, n, o, y, 0)),
                                 out.strides[3], p.ow, row);
        }
      }
    }
  }
}

// ConvBatchNorm: scales the packed weights ([Cout][K] f32) and rewrites the
// f32 bias in place. The per-channel factors are computed in double; the
// weights are scaled in float (one rounding, a vectorized loop: a per-call
// cost of one pass over the weights).
// Weight element (o, j) is at wf[o * o_stride + j * k_stride]. With wf null
// (the bfloat16 weights on AMX, read in place) the factors go to scale[o]
// instead, for the float32 tile (Note [bf16 conv on AMX]).
void FoldBatchNorm(const Plan& p, const ConvBatchNorm& bn, float* wf, int64_t o_stride,
                   int64_t k_stride, float* bf, float* scale = nullptr) {
  auto at = [](const TensorRef& t, int64_t o) {
    float v;
    internal::LoadAsF32(t.dtype, static_cast<const char*>(t.data) +
                                     o * (t.ndim == 1 ? t.strides[0] : 1) * ItemSize(t.dtype),
                        1, 1, &v);
    return static_cast<double>(v);
  };
  for (int64_t o = 0; o < p.cout; ++o) {
    const double gamma = bn.weight.data != nullptr ? at(bn.weight, o) : 1.0;
    const double beta = bn.bias.data != nullptr ? at(bn.bias, o) : 0.0;
    const double s = gamma / std::sqrt(at(bn.var, o) + bn.eps);
    const float sf = static_cast<float>(s);
    if (wf == nullptr) {
      scale[o] = sf;
    } else {
      float* row = wf + o * o_stride;
      for (int64_t j = 0; j < p.k; ++j) row[j * k_stride] *= sf;
    }
    bf[o] = static_cast<float>((bf[o] - at(bn.mean, o)) * s + beta);
  }
}

// Note [Implicit GEMM]: the weight as f32 [K][Cout], K in (kh, kw, c) order:
// tap row kh is the K/KH x Cout slice at kh * KW * C.
void PackWeightTransposed(const Plan& p, const TensorRef& weight, float* dst) {
  for (int64_t y = 0; y < p.kh; ++y) {
    for (int64_t x = 0; x < p.kw; ++x) {
      for (int64_t c = 0; c < p.cg; ++c) {
        internal::LoadAsF32(weight.dtype, At(weight, 0, c, y, x), weight.strides[0], p.cout,
                            dst + ((y * p.kw + x) * p.cg + c) * p.cout);
      }
    }
  }
}

// Note [Implicit GEMM]: a stride-1 convolution over channels-last input needs
// no im2col. In the zero-bordered input xp ([Hp][Wp][C], f32), output pixel
// (y, x) of tap row kh reads the KW * C floats at ((y + kh * dh) * Wp + x) * C
// -- consecutive x one C apart. So with the tile's rows numbered y * Wp + x
// over the padded width, tap row kh is one GEMM: A = xp + kh * dh * Wp * C
// with row stride C and k = KW * C, B = the weight's kh slice, accumulated
// onto the tile (Matmul with the tile as its own bias). Columns x >= OW are
// computed and dropped ((KW - 1) / Wp of the work); what im2col wrote and
// re-read (KH * KW times the input) is gone. A 3x3 conv of 64 channels on
// 56x56 with this host's GEMM, in one process against im2col: 10-27 % faster.
Status ImplicitGemm(const Plan& p, const ConvParams& prm, const TensorRef& out,
                    const TensorRef& in, const float* wt, const float* bf, float* xp,
                    float* tile) {
  const int64_t c = p.cg, wp = p.wp, kwc = p.kw * p.cg;
  const int64_t xp_floats = p.hp * wp * c + (p.kw - 1) * c;
  std::fill(xp, xp + xp_floats, 0.0f);  // borders and the slack stay zero
  const bool in_rows = in.strides[1] == 1 && in.strides[3] == c;  // a row: W * C contiguous
  const bool out_rows = out.dtype == DType::kFloat32 && out.strides[1] == 1 &&
                        out.strides[3] == p.cout;
  for (int64_t n = 0; n < p.n; ++n) {
    for (int64_t y = 0; y < p.h; ++y) {
      float* row = xp + ((y + prm.pad_begin[0]) * wp + prm.pad_begin[1]) * c;
      if (in_rows) {
        internal::LoadAsF32(in.dtype, At(in, n, 0, y, 0), 1, p.w * c, row);
        continue;
      }
      for (int64_t x = 0; x < p.w; ++x) {
        internal::LoadAsF32(in.dtype, At(in, n, 0, y, x), in.strides[1], c, row + x * c);
      }
    }
    for (int64_t y0 = 0; y0 < p.oh; y0 += p.band) {
      const int64_t y1 = std::min(p.oh, y0 + p.band);
      const int64_t rows = (y1 - y0) * wp;
      const TensorRef t = Mat2(tile, DType::kFloat32, rows, p.cout, p.cout, 1);
      for (int64_t ky = 0; ky < p.kh; ++ky) {
        const TensorRef a = Mat2(xp + (y0 + ky * prm.dilation[0]) * wp * c, DType::kFloat32,
                                 rows, kwc, c, 1);
        const TensorRef b = Mat2(const_cast<float*>(wt) + ky * kwc * p.cout, DType::kFloat32,
                                 kwc, p.cout, p.cout, 1);
        TensorRef bias;
        if (ky > 0) {
          bias = t;  // accumulate onto the tile
        } else if (bf != nullptr) {
          bias = Mat2(const_cast<float*>(bf), DType::kFloat32, rows, p.cout, 0, 1);
        }
        const Status st = Matmul(t, a, b, bias);
        if (!st.ok()) return st;
      }
      for (int64_t y = y0; y < y1; ++y) {
        float* src = tile + (y - y0) * wp * p.cout;  // pixels 0..OW-1 of the row
        Activate(prm, src, p.ow * p.cout, 1);
        if (out_rows) {
          std::copy_n(src, p.ow * p.cout, reinterpret_cast<float*>(const_cast<char*>(
                                              At(out, n, 0, y, 0))));
          continue;
        }
        for (int64_t x = 0; x < p.ow; ++x) {
          internal::StoreFromF32(out.dtype, const_cast<char*>(At(out, n, 0, y, x)),
                                 out.strides[1], p.cout, src + x * p.cout);
        }
      }
    }
  }
  return Status::Ok();
}

// The caller's workspace of at least `total` floats, or `own` allocated to
// that size (cache-line aligned, as the allocator's blocks).
float* WorkspaceFloats(const TensorRef& workspace, int64_t total,
                       hwy::AlignedFreeUniquePtr<float[]>* own) {
  if (workspace.data != nullptr) {
    TRN_ASSERT(workspace.dtype == DType::kFloat32 && workspace.numel() >= total,
               "conv2d workspace too small");
    return workspace.ptr<float>();
  }
  *own = hwy::AllocateAligned<float>(static_cast<size_t>(total));
  TRN_ASSERT(*own != nullptr, "conv2d: out of memory for the workspace");
  return own->get();
}

// Note [Grouped channels-last]: a grouped convolution (not depthwise) over
// channels-last input copies the input to NCHW in the workspace and runs the
// NCHW path. Per group, channels-last im2col gives col as [pixels][K], which
// the GEMM must pack transposed, while NCHW col is [K][pixels], read in
// place (Note [B in place]); computing col @ W^T instead did not help. In one
// process against the channels-last path, NCHW alone took 1/1.13-1/1.56 of its
// time (wav2vec2's positional conv, 256 channels, groups 4, k 16, 799 steps:
// 1/1.13), and the copy is a few percent of the convolution. (torch's own
// _convolution makes every 1-D input contiguous, so eager 1-D convolutions
// were NCHW already; compiled ones kept the transposed view.)
bool GroupedChannelsLast(const TensorRef& in, const TensorRef& weight, const ConvParams& prm) {
  return prm.groups > 1 && weight.sizes[1] > 1 && in.sizes[1] > 1 &&
         in.strides[1] < in.strides[3];
}

// in as a contiguous NCHW tensor at data.
TensorRef Nchw(const TensorRef& in, void* data) {
  TensorRef t = in;
  t.data = data;
  int64_t stride = 1;
  for (int d = 3; d >= 0; --d) {
    t.strides[d] = stride;
    stride *= t.sizes[d];
  }
  return t;
}

// Floats of the workspace the NCHW copy takes (64-byte multiples: the plan
// after it stays aligned).
int64_t NchwFloats(const TensorRef& in) {
  return (static_cast<int64_t>(in.nbytes()) + 63) / 64 * 16;
}

// Note [bf16 conv on AMX]: a bfloat16 convolution over NCHW input (not
// depthwise) runs its GEMMs on AMX where the CPU has it, as CPU PyTorch's
// oneDNN convolutions do: C (Og x np) = W_g (bfloat16, read in place) @ col.
// col is built as for every dtype (float32, so im2col is shared) and rounded
// into B tiles, exactly: it holds bfloat16 inputs and zeros. The bias is
// added per output channel and C rounded once into out, or kept in float32
// for the activation. A folded batch norm cannot scale weights read in
// place: its factors scale the float32 tile per channel, then its bias
// (ScaleShift; the compiled ResNet's conv-bn-relu blocks). wav2vec2's
// convolutions in bfloat16 took 1.6x CPU PyTorch's time on the float32 GEMM;
// compiled bfloat16 ResNet 1.15x eager with its batch-norm convs there, 1.00-1.02x
// on AMX (`bench_models.py --dtype bfloat16 --models resnet,mobilenet_v2`, twice).
// Shorter k pads a 32-deep tile with zeros: wav2vec2's first conv (k = 10)
// took 1.4x its float32-GEMM time on AMX.
constexpr int64_t kAmxMinK = 32;

bool ConvOnAmx(const Plan& p, const TensorRef& in) {
  return in.dtype == DType::kBFloat16 && !p.depthwise && !p.cl_in &&
         !p.implicit && p.k >= kAmxMinK && amx::Available();
}

// The weight as bfloat16 [Cout][K] in col's (c, kh, kw) order: in place when
// contiguous, else copied into own.
const uint16_t* WeightBF16(const Plan& p, const TensorRef& weight, std::vector<uint16_t>* own) {
  if (weight.is_contiguous()) return static_cast<const uint16_t*>(weight.data);
  own->resize(static_cast<size_t>(p.cout * p.k));
  for (int64_t o = 0; o < p.cout; ++o) {
    for (int64_t c = 0; c < p.cg; ++c) {
      for (int64_t y = 0; y < p.kh; ++y) {
        for (int64_t x = 0; x < p.kw; ++x) {
          std::memcpy(own->data() + ((o * p.cg + c) * p.kh + y) * p.kw + x, At(weight, o, c, y, x),
                      sizeof(uint16_t));
        }
      }
    }
  }
  return own->data();
}

// C = w (og x k, rows k apart) @ col (float32 k x np, rows col_ld apart) plus
// the per-row bias on AMX (Note [bf16 conv on AMX]).
Status AmxConvGemm(const uint16_t* w, int64_t og, int64_t k, const float* col, int64_t col_ld,
                   int64_t np, const float* bias, const amx::Out& c) {
  internal::ScratchBuffer<uint16_t> scratch;
  uint16_t* tiles = scratch.Get(amx::PackedBElems(k, np));
  if (tiles == nullptr) return Status::Error("conv2d: no host memory for the AMX tiles of col");
  amx::PackBFromF32(col, col_ld, k, np, tiles);
  amx::Gemm(og, np, k, w, k, 1, tiles, c, false, amx::Bias{bias, true});
  return Status::Ok();
}

// The workspace of the im2col / implicit-GEMM paths (Plan).
size_t GemmWorkspaceBytes(const TensorRef& out, const TensorRef& in, const TensorRef& weight,
                          const ConvParams& p) {
  if (GroupedChannelsLast(in, weight, p)) {
    return static_cast<size_t>(NchwFloats(in) + MakePlan(out, Nchw(in, nullptr), weight, p).total) *
           sizeof(float);
  }
  return static_cast<size_t>(MakePlan(out, in, weight, p).total) * sizeof(float);
}

// Note [AMX implicit conv]: a 1-D bfloat16 convolution whose groups have
// whole k tiles of channels (Cg % 32 == 0; wav2vec2's positional conv: 256
// channels, groups 4, kernel 16) needs no im2col on AMX. The input is copied
// once into xp ([Lp][C], zero borders: the padding); then output p of tap kx
// reads xp row p * s + kx * d, so A = xp with rows s * C apart and k tile pb
// (32 channels c0.. of tap kx) at xp + kx * d * C + c0: amx::Gemm's per-tile
// offsets. One GEMM per image and group over all taps, C = out^T [OL][Og]:
// straight into a bfloat16 out with unit channel stride and no activation,
// else into c16 (bfloat16 [OL][Og]; through a float32 tile and the activation
// when there is one), then copied into out (a tiled transpose for NCHW). im2col made 16 copies of the input and packed them: 3x CPU PyTorch's
// time on that conv. The copy is a row copy for channels-last input, a tiled
// transpose for NCHW (which eager 1-D convs always get from torch; Note
// [Tiled transpose]). With an element-by-element transposing copy and
// transposed store, wav2vec2's k = 3 feature convs took 1.8x their im2col
// time; tiled both ways, 0.6-0.8x (k = 3, stride 2, [2, 128, 3199]) and
// 0.83-0.87x (k = 2), medians of 7 in-process alternations: from 2 taps.
struct Implicit1d {
  int64_t n, c, l, lp, cout, kw, groups, cg, og, ol, k, kb;
  // Workspace offsets in bytes.
  int64_t xp_off, w_off, b_off, c_off, c16_off, offs_off, total;
};

// NCHW input costs a transposing copy into xp: worth it where im2col would
// copy the input this many times (Note [AMX implicit conv]).
constexpr int64_t kImplicitMinTaps = 2;

// The shapes Note [AMX implicit conv] takes; ConvWorkspaceBytes sizes for
// them whether or not AMX is on, so a later SetEnabled cannot outgrow it.
bool Implicit1dShape(const TensorRef& out, const TensorRef& in, const TensorRef& weight,
                     const ConvParams& prm) {
  if (in.ndim != 4 || weight.ndim != 4 || out.ndim != 4) return false;
  const int64_t groups = prm.groups, cg = weight.sizes[1];
  return in.dtype == DType::kBFloat16 && weight.dtype == in.dtype && out.dtype == in.dtype &&
         in.sizes[2] == 1 && weight.sizes[2] == 1 && out.sizes[2] == 1 && prm.pad_begin[0] == 0 &&
         prm.pad_end[0] == 0 && groups >= 1 && cg > 0 && cg % 32 == 0 &&
         (in.strides[1] == 1 || weight.sizes[3] >= kImplicitMinTaps) &&
         in.sizes[1] == cg * groups && weight.sizes[0] % groups == 0 && out.numel() > 0;
}

Implicit1d PlanImplicit1d(const TensorRef& out, const TensorRef& in, const TensorRef& weight,
                          const ConvParams& prm) {
  Implicit1d q{};
  q.n = in.sizes[0];
  q.c = in.sizes[1];
  q.l = in.sizes[3];
  q.lp = q.l + prm.pad_begin[1] + prm.pad_end[1];
  q.cout = weight.sizes[0];
  q.kw = weight.sizes[3];
  q.groups = prm.groups;
  q.cg = q.c / q.groups;
  q.og = q.cout / q.groups;
  q.ol = out.sizes[3];
  q.k = q.kw * q.cg;
  q.kb = q.k / 32;
  auto align = [](int64_t bytes) { return (bytes + 63) / 64 * 64; };
  q.xp_off = 0;
  q.w_off = align(q.lp * q.c * 2);
  q.b_off = q.w_off + align(q.groups * amx::PackedBElems(q.k, q.og) * 2);
  q.c_off = q.b_off + align(q.cout * 4);
  q.c16_off = q.c_off + align(q.ol * q.og * 4);
  q.offs_off = q.c16_off + align(q.ol * q.og * 2);
  q.total = q.offs_off + q.kb * 8;
  return q;
}

Status AmxImplicitConv1d(const TensorRef& out, const TensorRef& in, const TensorRef& weight,
                         const TensorRef& bias, const ConvParams& prm, char* ws) {
  const Implicit1d q = PlanImplicit1d(out, in, weight, prm);
  const int64_t stride = prm.stride[1];
  TRN_ASSERT(q.ol == (q.lp - prm.dilation[1] * (q.kw - 1) - 1) / stride + 1,
             "conv1d out has the wrong length");
  auto* xp = reinterpret_cast<uint16_t*>(ws + q.xp_off);
  auto* tiles = reinterpret_cast<uint16_t*>(ws + q.w_off);
  auto* bf = reinterpret_cast<float*>(ws + q.b_off);
  auto* cbuf = reinterpret_cast<float*>(ws + q.c_off);
  auto* offs = reinterpret_cast<int64_t*>(ws + q.offs_off);
  // B of group g: W_g^T [K][Og] with k = kx * Cg + c (A's k order): per tap
  // kx its Cg whole k tiles, packed from the weight's strides.
  const int64_t slice = amx::PackedBElems(q.k, q.og);
  const auto* w = static_cast<const uint16_t*>(weight.data);
  for (int64_t g = 0; g < q.groups; ++g) {
    for (int64_t kx = 0; kx < q.kw; ++kx) {
      amx::PackB(w + g * q.og * weight.strides[0] + kx * weight.strides[3], weight.strides[1],
                 weight.strides[0], q.cg, q.og, tiles + g * slice + kx * q.cg / 32 * 512,
                 q.kb * 512);
    }
  }
  for (int64_t pb = 0; pb < q.kb; ++pb) {
    offs[pb] = (pb * 32 / q.cg) * prm.dilation[1] * q.c + pb * 32 % q.cg;
  }
  if (bias.data != nullptr) {
    TRN_ASSERT(bias.numel() == q.cout && IsFloating(bias.dtype), "conv1d bias must be [Cout]");
    internal::LoadAsF32(bias.dtype, bias.data, bias.ndim == 1 ? bias.strides[0] : 1, q.cout, bf);
  }
  auto* c16 = reinterpret_cast<uint16_t*>(ws + q.c16_off);
  const bool act = prm.activation != ConvActivation::kNone;
  const int64_t pad = prm.pad_begin[1];
  auto view = [](const void* data, int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
    return Mat2(const_cast<void*>(data), DType::kBFloat16, rows, cols, rs, cs);
  };
  std::fill(xp, xp + pad * q.c, uint16_t{0});  // the borders (the padding)
  std::fill(xp + (pad + q.l) * q.c, xp + q.lp * q.c, uint16_t{0});
  for (int64_t n = 0; n < q.n; ++n) {
    // x[n] as [L][C] into xp's rows: row copies for channels-last input, a
    // tiled transpose for NCHW (Note [Tiled transpose]).
    Status st = Copy(view(xp + pad * q.c, q.l, q.c, q.c, 1),
                     view(At(in, n, 0, 0, 0), q.l, q.c, in.strides[3], in.strides[1]));
    if (!st.ok()) return st;
    for (int64_t g = 0; g < q.groups; ++g) {
      const amx::Bias b{bias.data != nullptr ? bf + g * q.og : nullptr, false};
      auto* dst = reinterpret_cast<uint16_t*>(const_cast<char*>(At(out, n, g * q.og, 0, 0)));
      // C = out^T [OL][Og]: straight into an out with unit channel stride;
      // else into c16 (through a float32 tile for the activation), then
      // transposed into out's [Og][OL] in tiles.
      const bool direct = !act && out.strides[1] == 1;
      const amx::Out c = direct ? amx::Out::BF16(dst, out.strides[3])
                         : act  ? amx::Out::F32(cbuf, q.og)
                                : amx::Out::BF16(c16, q.og);
      amx::Gemm(q.ol, q.og, q.k, xp + g * q.cg, stride * q.c, 1, tiles + g * slice, c, false, b,
                0, offs);
      if (direct) continue;
      if (act) {
        Activate(prm, cbuf, q.ol * q.og, 1);
        internal::StoreFromF32(DType::kBFloat16, c16, 1, q.ol * q.og, cbuf);
      }
      st = Copy(view(dst, q.og, q.ol, out.strides[1], out.strides[3]),
                view(c16, q.og, q.ol, 1, q.og));
      if (!st.ok()) return st;
    }
  }
  return Status::Ok();
}

}  // namespace

size_t ConvWorkspaceBytes(const TensorRef& out, const TensorRef& in, const TensorRef& weight,
                          const ConvParams& p) {
  // Sized for both paths: a batch norm folded in takes the other (Conv2d).
  const size_t implicit = Implicit1dShape(out, in, weight, p)
                              ? static_cast<size_t>(PlanImplicit1d(out, in, weight, p).total)
                              : 0;
  return std::max(implicit, GemmWorkspaceBytes(out, in, weight, p));
}

// A folded batch norm on AMX's float32 tile row of channel o (the GEMM ran
// without the bias): row * scale[o] + bias[o].
void ScaleShift(float* row, int64_t n, const float* scale, const float* bias, int64_t o) {
  if (scale == nullptr) return;
  const float s = scale[o], b = bias != nullptr ? bias[o] : 0.0f;
  for (int64_t i = 0; i < n; ++i) row[i] = row[i] * s + b;
}

// Note [conv as GEMM]: small NCHW images side by side, col [K][N*P] and the
// f32 tile [Cout][N*P], then the tile into out.
Status MergedImages(const Plan& p, const ConvParams& prm, const TensorRef& out,
                    const TensorRef& in, const float* wf, const uint16_t* w16, const float* bf,
                    const float* scale, float* col, float* tile, float* phases) {
  const int64_t np = p.n * p.p;
  for (int64_t n = 0; n < p.n; ++n) {
    if (!p.patchify) BuildPhases(p, prm, in, n, 0, phases);
    Im2Col(p, prm, in, n, 0, 0, p.oh, phases, col + n * p.p, p.col_ld);
  }
  if (w16 != nullptr) {
    const Status st = AmxConvGemm(w16, p.cout, p.k, col, p.col_ld, np,
                                  scale != nullptr ? nullptr : bf, amx::Out::F32(tile, np));
    if (!st.ok()) return st;
  } else {
    TensorRef bias_ref;
    if (bf != nullptr) bias_ref = Mat2(const_cast<float*>(bf), DType::kFloat32, p.cout, np, 1, 0);
    const Status st = Matmul(Mat2(tile, DType::kFloat32, p.cout, np, np, 1),
                             Mat2(const_cast<float*>(wf), DType::kFloat32, p.cout, p.k, p.k, 1),
                             Mat2(col, DType::kFloat32, p.k, np, p.col_ld, 1), bias_ref);
    if (!st.ok()) return st;
  }
  for (int64_t o = 0; o < p.cout; ++o) {
    ScaleShift(tile + o * np, np, scale, bf, o);
    Activate(prm, tile + o * np, np, 1);
    for (int64_t n = 0; n < p.n; ++n) {
      for (int64_t y = 0; y < p.oh; ++y) {
        internal::StoreFromF32(out.dtype, const_cast<char*>(At(out, n, o, y, 0)),
                               out.strides[3], p.ow, tile + o * np + n * p.p + y * p.ow);
      }
    }
  }
  return Status::Ok();
}

// One band of output rows [y0, y1) of image n, group g on AMX: straight into
// a bfloat16 out whose pixels are contiguous when there is no activation or
// batch norm (scale), else through the float32 tile ([Og][np]).
Status AmxBand(const Plan& p, const ConvParams& prm, const TensorRef& out, int64_t n, int64_t g,
               int64_t y0, int64_t y1, const uint16_t* w16, const float* bf, const float* scale,
               const TensorRef& kp, float* tile) {
  const int64_t np = (y1 - y0) * p.ow;
  const uint16_t* wg = w16 + g * p.og * p.k;
  const float* bias = bf != nullptr ? bf + g * p.og : nullptr;
  const float* sg = scale != nullptr ? scale + g * p.og : nullptr;
  const float* col = static_cast<const float*>(kp.data);
  int64_t ps;
  if (prm.activation == ConvActivation::kNone && sg == nullptr && PixelsMerge(out, &ps) &&
      ps == 1) {
    auto* dst = reinterpret_cast<uint16_t*>(const_cast<char*>(At(out, n, g * p.og, y0, 0)));
    return AmxConvGemm(wg, p.og, p.k, col, kp.strides[0], np, bias,
                       amx::Out::BF16(dst, out.strides[1]));
  }
  const Status st = AmxConvGemm(wg, p.og, p.k, col, kp.strides[0], np,
                                sg != nullptr ? nullptr : bias, amx::Out::F32(tile, np));
  if (!st.ok()) return st;
  for (int64_t o = 0; o < p.og; ++o) {
    ScaleShift(tile + o * np, np, sg, bias, o);
    Activate(prm, tile + o * np, np, 1);
    for (int64_t y = y0; y < y1; ++y) {
      internal::StoreFromF32(out.dtype, const_cast<char*>(At(out, n, g * p.og + o, y, 0)),
                             out.strides[3], p.ow, tile + o * np + (y - y0) * p.ow);
    }
  }
  return Status::Ok();
}

Status Conv2d(const TensorRef& out, const TensorRef& in, const TensorRef& weight,
              const TensorRef& bias, const ConvParams& prm, const TensorRef& workspace,
              const ConvBatchNorm* bn) {
  // Note [AMX implicit conv]
  if (bn == nullptr && Implicit1dShape(out, in, weight, prm) && amx::Available()) {
    const int64_t total = static_cast<int64_t>(ConvWorkspaceBytes(out, in, weight, prm) / 4);
    hwy::AlignedFreeUniquePtr<float[]> own;
    float* ws = WorkspaceFloats(workspace, total, &own);
    return AmxImplicitConv1d(out, in, weight, bias, prm, reinterpret_cast<char*>(ws));
  }
  if (GroupedChannelsLast(in, weight, prm) && out.numel() > 0) {  // Note [Grouped channels-last]
    const int64_t total = static_cast<int64_t>(ConvWorkspaceBytes(out, in, weight, prm) / 4);
    hwy::AlignedFreeUniquePtr<float[]> own;
    float* ws = WorkspaceFloats(workspace, total, &own);
    const TensorRef nchw = Nchw(in, ws);
    const Status st = Copy(nchw, in);
    if (!st.ok()) return st;
    const int64_t used = NchwFloats(in);
    const TensorRef rest = Mat2(ws + used, DType::kFloat32, 1, total - used, total - used, 1);
    return Conv2d(out, nchw, weight, bias, prm, rest, bn);
  }
  const Plan p = MakePlan(out, in, weight, prm);
  if (out.numel() == 0) return Status::Ok();
  hwy::AlignedFreeUniquePtr<float[]> own;
  float* ws = WorkspaceFloats(workspace, p.total, &own);
  float* wpack = ws + p.w_off;
  float* bf = ws + p.b_off;
  float* col = ws + p.col_off;
  float* tile = ws + p.tile_off;
  float* phases = ws + p.phase_off;
  const bool has_bias = bias.data != nullptr || bn != nullptr;
  if (bias.data != nullptr) {
    TRN_ASSERT(bias.numel() == p.cout && IsFloating(bias.dtype), "conv2d bias must be [Cout]");
    internal::LoadAsF32(bias.dtype, bias.data, bias.ndim == 1 ? bias.strides[0] : 1, p.cout, bf);
  } else if (bn != nullptr) {
    std::fill(bf, bf + p.cout, 0.0f);
  }
  if (p.k == 0) {  // no input channels: out = bias (or zero), then the activation
    if (bn != nullptr) FoldBatchNorm(p, *bn, wpack, p.k, 1, bf);  // the bias only: K is empty
    for (int64_t i = 0; i < p.cout; ++i) {
      float v = has_bias ? bf[i] : 0.0f;
      v = Activate(prm, v);
      for (int64_t b = 0; b < p.n; ++b) {
        for (int64_t y = 0; y < p.oh; ++y) {
          for (int64_t x = 0; x < p.ow; ++x) {
            internal::StoreFromF32(out.dtype, const_cast<char*>(At(out, b, i, y, x)), 1, 1, &v);
          }
        }
      }
    }
    return Status::Ok();
  }
  if (p.implicit) {
    PackWeightTransposed(p, weight, wpack);
    if (bn != nullptr) FoldBatchNorm(p, *bn, wpack, 1, p.cout, bf);
    return ImplicitGemm(p, prm, out, in, wpack, has_bias ? bf : nullptr, col, tile);
  }
  std::vector<uint16_t> w16_own;  // a non-contiguous weight's copy (rare)
  const uint16_t* w16 = ConvOnAmx(p, in) ? WeightBF16(p, weight, &w16_own) : nullptr;
  const float* wf =
      w16 != nullptr ? nullptr : PackWeight(p, weight, /*in_place=*/bn == nullptr, wpack);
  // A batch norm scales the f32 weights, or (AMX) the f32 tile: the factors
  // then live where the f32 weights would.
  float* scale = bn != nullptr && w16 != nullptr ? wpack : nullptr;
  if (bn != nullptr) FoldBatchNorm(p, *bn, w16 != nullptr ? nullptr : wpack, p.k, 1, bf, scale);
  // Phase planes: borders stay zero, interiors are rewritten.
  if (!p.depthwise && !p.direct_in && !p.cl_in && !p.patchify) {
    std::fill(phases, ws + p.total, 0.0f);
  }
  if (p.depthwise) {
    Depthwise(p, prm, out, in, wf, has_bias ? bf : nullptr, col, tile);
    return Status::Ok();
  }
  if (p.merge_n) {
    return MergedImages(p, prm, out, in, wf, w16, has_bias ? bf : nullptr, scale, col, tile,
                        phases);
  }
  char* const out_base = static_cast<char*>(out.data);
  const int64_t osz = static_cast<int64_t>(ItemSize(out.dtype));
  for (int64_t n = 0; n < p.n; ++n) {
    for (int64_t g = 0; g < p.groups; ++g) {
      for (int64_t y0 = 0; y0 < p.oh; y0 += p.band) {
        const int64_t y1 = std::min(p.oh, y0 + p.band);
        const int64_t np = (y1 - y0) * p.ow;  // pixels of this band
        // The K x np operand: col (layout per p.cl_in) or the input itself.
        TensorRef kp;
        if (p.direct_in) {  // one band of all rows
          int64_t in_ps;
          PixelsMerge(in, &in_ps);
          kp = Mat2(const_cast<char*>(At(in, n, g * p.cg, 0, 0)), DType::kFloat32, p.k, np,
                    in.strides[1], in_ps);
        } else {
          if (y0 == 0 && !p.cl_in && !p.patchify) BuildPhases(p, prm, in, n, g, phases);
          Im2Col(p, prm, in, n, g, y0, y1, phases, col, p.col_ld);
          kp = p.cl_in ? Mat2(col, DType::kFloat32, p.k, np, 1, p.k)
                       : Mat2(col, DType::kFloat32, p.k, np, p.col_ld, 1);
        }
        if (w16 != nullptr) {  // Note [bf16 conv on AMX]
          const Status st = AmxBand(p, prm, out, n, g, y0, y1, w16, has_bias ? bf : nullptr,
                                    scale, kp, tile);
          if (!st.ok()) return st;
          continue;
        }
        const TensorRef wg =
            Mat2(const_cast<float*>(wf) + g * p.og * p.k, DType::kFloat32, p.og, p.k, p.k, 1);
        // Destination: out itself or the f32 tile ([Og][np], or [np][Og] transposed).
        float* dst;
        int64_t ds_o, ds_p;  // element strides of dst over (o, pixel)
        if (p.direct_out) {
          dst = reinterpret_cast<float*>(
              out_base +
              (n * out.strides[0] + g * p.og * out.strides[1] + y0 * p.ow * p.out_ps) * osz);
          ds_o = out.strides[1];
          ds_p = p.out_ps;
        } else {
          dst = tile;
          ds_o = p.transposed ? 1 : np;
          ds_p = p.transposed ? p.og : 1;
        }
        TensorRef bias_ref;
        Status st;
        if (p.transposed) {
          const TensorRef o = Mat2(dst, DType::kFloat32, np, p.og, ds_p, ds_o);
          if (has_bias) bias_ref = Mat2(bf + g * p.og, DType::kFloat32, np, p.og, 0, 1);
          const TensorRef a =
              Mat2(kp.data, DType::kFloat32, np, p.k, kp.strides[1], kp.strides[0]);
          const TensorRef b = Mat2(wg.data, DType::kFloat32, p.k, p.og, 1, p.k);
          st = Matmul(o, a, b, bias_ref);
        } else {
          const TensorRef o = Mat2(dst, DType::kFloat32, p.og, np, ds_o, ds_p);
          if (has_bias) bias_ref = Mat2(bf + g * p.og, DType::kFloat32, p.og, np, 1, 0);
          st = Matmul(o, wg, kp, bias_ref);
        }
        if (!st.ok()) return st;
        if (prm.activation != ConvActivation::kNone) {
          for (int64_t o = 0; o < p.og; ++o) Activate(prm, dst + o * ds_o, np, ds_p);
        }
        if (p.direct_out) continue;
        // Convert the tile into out.
        if (p.transposed) {
          for (int64_t y = y0; y < y1; ++y) {
            for (int64_t x = 0; x < p.ow; ++x) {
              internal::StoreFromF32(out.dtype, const_cast<char*>(At(out, n, g * p.og, y, x)),
                                     out.strides[1], p.og, tile + ((y - y0) * p.ow + x) * p.og);
            }
          }
        } else {
          for (int64_t o = 0; o < p.og; ++o) {
            for (int64_t y = y0; y < y1; ++y) {
              internal::StoreFromF32(out.dtype,
                                     const_cast<char*>(At(out, n, g * p.og + o, y, 0)),
                                     out.strides[3], p.ow, tile + o * np + (y - y0) * p.ow);
            }
          }
        }
      }
    }
  }
  return Status::Ok();
}

Status ConvTranspose2d(const TensorRef& out, const TensorRef& in, const TensorRef& weight,
                       const TensorRef& bias, const ConvParams& p) {
  const int64_t n = in.sizes[0], cin = in.sizes[1], h = in.sizes[2], w = in.sizes[3];
  const int64_t cout = out.sizes[1], oh = out.sizes[2], ow = out.sizes[3];
  const int64_t kh = weight.sizes[2], kw = weight.sizes[3], groups = p.groups;
  const int64_t cig = cin / groups, cog = cout / groups, k = cog * kh * kw, pix = h * w;
  TRN_ASSERT(groups > 0 && cin % groups == 0 && weight.sizes[0] == cin && weight.sizes[1] == cog &&
                 out.sizes[0] == n && p.activation == ConvActivation::kNone,
             "conv_transpose2d: weight [Cin, Cout/groups, KH, KW], out [N, Cout, OH, OW]");
  if (out.numel() == 0) return Status::Ok();
  std::vector<float> x(static_cast<size_t>(cig * pix)), wt(static_cast<size_t>(cig * k));
  std::vector<float> col(static_cast<size_t>(k * pix)), acc(static_cast<size_t>(cout * oh * ow));
  std::vector<float> bf(static_cast<size_t>(cout), 0.0f);
  if (bias.data != nullptr) {
    internal::LoadAsF32(bias.dtype, bias.data, bias.ndim == 1 ? bias.strides[0] : 1, cout, bf.data());
  }
  const TensorRef none;
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t o = 0; o < cout; ++o) std::fill_n(acc.data() + o * oh * ow, oh * ow, bf[o]);
    for (int64_t g = 0; g < groups; ++g) {
      for (int64_t c = 0; c < cig; ++c) {
        for (int64_t y = 0; y < h; ++y) {
          internal::LoadAsF32(in.dtype, At(in, b, g * cig + c, y, 0), in.strides[3], w,
                              x.data() + c * pix + y * w);
        }
        for (int64_t o = 0; o < cog; ++o) {
          for (int64_t y = 0; y < kh; ++y) {
            internal::LoadAsF32(weight.dtype, At(weight, g * cig + c, o, y, 0), weight.strides[3], kw,
                                wt.data() + c * k + (o * kh + y) * kw);
          }
        }
      }
      if (cig == 0 || pix == 0 || k == 0) continue;  // nothing to add to the bias
      // col [K, H*W] = wt^T [K, cig] x [cig, H*W]
      const Status st = Matmul(Mat2(col.data(), DType::kFloat32, k, pix, pix, 1),
                               Mat2(wt.data(), DType::kFloat32, k, cig, 1, k),
                               Mat2(x.data(), DType::kFloat32, cig, pix, pix, 1), none);
      if (!st.ok()) return st;
      for (int64_t o = 0; o < cog; ++o) {  // col2im
        float* dst = acc.data() + (g * cog + o) * oh * ow;
        for (int64_t ky = 0; ky < kh; ++ky) {
          for (int64_t kx = 0; kx < kw; ++kx) {
            const float* row = col.data() + ((o * kh + ky) * kw + kx) * pix;
            for (int64_t y = 0; y < h; ++y) {
              const int64_t oy = y * p.stride[0] - p.pad_begin[0] + ky * p.dilation[0];
              if (oy < 0 || oy >= oh) continue;
              for (int64_t xx = 0; xx < w; ++xx) {
                const int64_t ox = xx * p.stride[1] - p.pad_begin[1] + kx * p.dilation[1];
                if (ox >= 0 && ox < ow) dst[oy * ow + ox] += row[y * w + xx];
              }
            }
          }
        }
      }
    }
    for (int64_t o = 0; o < cout; ++o) {
      for (int64_t y = 0; y < oh; ++y) {
        internal::StoreFromF32(out.dtype, const_cast<char*>(At(out, b, o, y, 0)), out.strides[3], ow,
                               acc.data() + (o * oh + y) * ow);
      }
    }
  }
  return Status::Ok();
}

// Note [conv3d]: per image n, group g and output frame t, one GEMM
// out[n, g, t] (Og x P, P = a band of OH*OW) = W_g (Og x K) @ col (K x P),
// K = Cg*KT*KH*KW in the weight's own (c, kt, kh, kw) order, so a contiguous
// weight needs no reordering. col rows of a tap outside the padded input are
// zero; the valid run of each row is one strided load. Bands of output rows
// (n, t, y) flattened keep col near kColBytes and span frames and images: a
// video patch embedding (VideoMAE: 4x4 patches per frame) is one GEMM, not one
// per frame (2.4 ms as 4 GEMMs of 16 pixels for VideoMAE at bench size).
Status Conv3d(const TensorRef& out, const TensorRef& in, const TensorRef& weight,
              const TensorRef& bias, const Conv3dParams& p) {
  TRN_ASSERT(in.ndim == 5 && weight.ndim == 5 && out.ndim == 5, "conv3d operands must be 5-D");
  const int64_t n = in.sizes[0], cin = in.sizes[1], cout = out.sizes[1], groups = p.groups;
  TRN_ASSERT(groups > 0 && cin % groups == 0 && cout % groups == 0 &&
                 weight.sizes[0] == cout && weight.sizes[1] * groups == cin && out.sizes[0] == n,
             "conv3d: weight [Cout, Cin/groups, KT, KH, KW], out [N, Cout, OT, OH, OW]");
  const int64_t cg = cin / groups, og = cout / groups;
  const int64_t kdim[3] = {weight.sizes[2], weight.sizes[3], weight.sizes[4]};
  const int64_t idim[3] = {in.sizes[2], in.sizes[3], in.sizes[4]};
  const int64_t odim[3] = {out.sizes[2], out.sizes[3], out.sizes[4]};
  for (int d = 0; d < 3; ++d) {
    TRN_ASSERT(odim[d] == ConvOutputSize(idim[d], kdim[d], p.stride[d], p.pad[d], p.pad[d],
                                         p.dilation[d]),
               "conv3d: out's spatial sizes do not match the geometry");
  }
  if (out.numel() == 0) return Status::Ok();
  const int64_t taps = kdim[0] * kdim[1] * kdim[2], k = cg * taps, ow = odim[2];
  // Output rows (n, t, y) flattened: a band spans frames and images, so small
  // frames (a patch embedding's 4x4) share one GEMM instead of many skinny ones.
  const int64_t total_rows = n * odim[0] * odim[1];
  const int64_t band = std::clamp<int64_t>(kColBytes / (4 * std::max<int64_t>(k * ow, 1)), 1,
                                           total_rows);
  std::vector<float> wf(static_cast<size_t>(cout * k)), bf(static_cast<size_t>(cout), 0.0f);
  const bool w_dense = weight.is_contiguous();
  if (w_dense) internal::LoadAsF32(weight.dtype, weight.data, 1, cout * k, wf.data());
  for (int64_t o = 0; o < (w_dense ? 0 : cout); ++o) {  // [Cout][K], K in (c, kt, kh, kw) order
    for (int64_t c = 0; c < cg; ++c) {
      for (int64_t kt = 0; kt < kdim[0]; ++kt) {
        for (int64_t kh = 0; kh < kdim[1]; ++kh) {
          const int64_t off = o * weight.strides[0] + c * weight.strides[1] +
                              kt * weight.strides[2] + kh * weight.strides[3];
          internal::LoadAsF32(weight.dtype,
                              static_cast<const char*>(weight.data) + off * ItemSize(weight.dtype),
                              weight.strides[4], kdim[2],
                              wf.data() + o * k + ((c * kdim[0] + kt) * kdim[1] + kh) * kdim[2]);
        }
      }
    }
  }
  if (bias.data != nullptr) internal::LoadAsF32(bias.dtype, bias.data, bias.strides[0], cout, bf.data());
  std::vector<float> col(static_cast<size_t>(k * band * ow)), tile(static_cast<size_t>(og * band * ow));
  const int64_t in_item = static_cast<int64_t>(ItemSize(in.dtype));
  const int64_t out_item = static_cast<int64_t>(ItemSize(out.dtype));
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t r0 = 0; r0 < total_rows; r0 += band) {
      const int64_t rows = std::min(band, total_rows - r0), np = rows * ow;
      for (int64_t r = r0; r < r0 + rows; ++r) {
        const int64_t y = r % odim[1], t = (r / odim[1]) % odim[0], b = r / (odim[1] * odim[0]);
        for (int64_t c = 0; c < cg; ++c) {
          for (int64_t kt = 0; kt < kdim[0]; ++kt) {
            const int64_t it = t * p.stride[0] - p.pad[0] + kt * p.dilation[0];
            for (int64_t kh = 0; kh < kdim[1]; ++kh) {
              const int64_t iy = y * p.stride[1] - p.pad[1] + kh * p.dilation[1];
              const bool inside = it >= 0 && it < idim[0] && iy >= 0 && iy < idim[1];
              for (int64_t kw = 0; kw < kdim[2]; ++kw) {
                float* dst = col.data() +
                             (((c * kdim[0] + kt) * kdim[1] + kh) * kdim[2] + kw) * np +
                             (r - r0) * ow;
                int64_t x_lo = 0, x_hi = 0;
                const int64_t x_off = kw * p.dilation[2] - p.pad[2];
                if (inside) ValidRange(ow, p.stride[2], x_off, idim[2], &x_lo, &x_hi);
                if (x_lo >= x_hi) {
                  std::fill_n(dst, ow, 0.0f);
                  continue;
                }
                std::fill_n(dst, x_lo, 0.0f);
                std::fill(dst + x_hi, dst + ow, 0.0f);
                const int64_t off = b * in.strides[0] + (g * cg + c) * in.strides[1] +
                                    it * in.strides[2] + iy * in.strides[3] +
                                    (x_lo * p.stride[2] + x_off) * in.strides[4];
                internal::LoadAsF32(in.dtype, static_cast<const char*>(in.data) + off * in_item,
                                    in.strides[4] * p.stride[2], x_hi - x_lo, dst + x_lo);
              }
            }
          }
        }
      }
      const TensorRef bias_ref = Mat2(bf.data() + g * og, DType::kFloat32, og, np, 1, 0);
      const Status st = Matmul(Mat2(tile.data(), DType::kFloat32, og, np, np, 1),
                               Mat2(wf.data() + g * og * k, DType::kFloat32, og, k, k, 1),
                               Mat2(col.data(), DType::kFloat32, k, np, np, 1), bias_ref);
      if (!st.ok()) return st;
      for (int64_t r = r0; r < r0 + rows; ++r) {
        const int64_t y = r % odim[1], t = (r / odim[1]) % odim[0], b = r / (odim[1] * odim[0]);
        for (int64_t o = 0; o < og; ++o) {
          const int64_t off = b * out.strides[0] + (g * og + o) * out.strides[1] +
                              t * out.strides[2] + y * out.strides[3];
          internal::StoreFromF32(out.dtype, static_cast<char*>(out.data) + off * out_item,
                                 out.strides[4], ow, tile.data() + o * np + (r - r0) * ow);
        }
      }
    }
  }
  return Status::Ok();
}

rt::KernelInfo DescribeConv3d(const TensorRef& out, const TensorRef& in, const TensorRef& weight,
                              const TensorRef& bias, const char* aten_op) {
  rt::KernelInfo info;
  switch (out.dtype) {
    case DType::kFloat64: info.name = "conv3d_f64"; break;
    case DType::kBFloat16: info.name = "conv3d_bf16"; break;
    case DType::kFloat16: info.name = "conv3d_f16"; break;
    default: info.name = "conv3d_f32"; break;
  }
  info.op = aten_op;
  info.engine = rt::Engine::kTensor;
  const uint64_t k = static_cast<uint64_t>(weight.sizes[1] * weight.sizes[2] * weight.sizes[3] *
                                           weight.sizes[4]);
  info.flops = 2 * static_cast<uint64_t>(out.numel()) * k;
  info.bytes_read = in.nbytes() + weight.nbytes() + (bias.data ? bias.nbytes() : 0);
  info.bytes_written = out.nbytes();
  return info;
}

rt::KernelInfo DescribeConvTranspose2d(const TensorRef& out, const TensorRef& in,
                                       const TensorRef& weight, const TensorRef& bias,
                                       const char* aten_op) {
  rt::KernelInfo info = DescribeConv2d(out, in, weight, bias, ConvParams {}, aten_op);
  switch (out.dtype) {
    case DType::kFloat64: info.name = "conv_transpose2d_f64"; break;
    case DType::kBFloat16: info.name = "conv_transpose2d_bf16"; break;
    case DType::kFloat16: info.name = "conv_transpose2d_f16"; break;
    default: info.name = "conv_transpose2d_f32"; break;
  }
  // Every input pixel meets every weight of its group once.
  const uint64_t per_in = static_cast<uint64_t>(weight.sizes[1] * weight.sizes[2] * weight.sizes[3]);
  info.flops = 2 * static_cast<uint64_t>(in.numel()) * per_in;
  return info;
}

rt::KernelInfo DescribeConv2d(const TensorRef& out, const TensorRef& in,
                              const TensorRef& weight, const TensorRef& bias,
                              const ConvParams& p, const char* aten_op) {
  rt::KernelInfo info;
  switch (out.dtype) {
    case DType::kFloat64: info.name = "conv2d_f64"; break;
    case DType::kBFloat16: info.name = "conv2d_bf16"; break;
    case DType::kFloat16: info.name = "conv2d_f16"; break;
    default: info.name = "conv2d_f32"; break;
  }
  info.op = aten_op;
  info.engine = rt::Engine::kTensor;
  const uint64_t k = static_cast<uint64_t>(weight.sizes[1] * weight.sizes[2] * weight.sizes[3]);
  info.flops = 2 * static_cast<uint64_t>(out.numel()) * k;
  info.bytes_read = in.nbytes() + weight.nbytes() + (bias.data ? bias.nbytes() : 0);
  info.bytes_written = out.nbytes();
  return info;
}

}  // namespace trn::kernels
#endif  // HWY_ONCE
