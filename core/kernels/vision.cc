// Batch norm (inference), pooling and upsampling. Each (n, c) plane is
// gathered into a float32 scratch plane (a strided or channels-last input is
// read once, in order), the windows are computed from there, and each output
// row is converted while stored. Index math follows torch's CPU kernels
// (aten/src/ATen/native/cpu/*Pool*, UpSample.h) so results match bit for bit
// in float32 up to summation order.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/kernels/vision.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "core/kernels/vision-inl.h"
#include "hwy/highway.h"

#if HWY_ONCE
#include "core/kernels/vision.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/common/assert.h"
#include "core/kernels/convert.h"
#include "core/kernels/scratch.h"
#include "core/kernels/strided.h"

namespace trn::kernels {
namespace vision {
HWY_EXPORT(MaxPoolRow);
HWY_EXPORT(Deinterleave2);
HWY_EXPORT(GatherRow);
}  // namespace vision
namespace {

// Slack after scratch rows that row kernels read in pairs of whole vectors
// (the widest Highway vector holds 64 floats).
constexpr int64_t kVecPad = 128;

char* At4(const TensorRef& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  const int64_t off =
      i0 * t.strides[0] + i1 * t.strides[1] + i2 * t.strides[2] + i3 * t.strides[3];
  return static_cast<char*>(t.data) + off * static_cast<int64_t>(ItemSize(t.dtype));
}

// Per-thread scratch that grows to the largest plane seen and is then reused
// (kernels run on one worker thread each; no allocation once warm).
float* Scratch(int slot, int64_t n) {
  thread_local std::vector<float> buf[4];
  if (static_cast<int64_t>(buf[slot].size()) < n) buf[slot].resize(static_cast<size_t>(n));
  return buf[slot].data();
}

void CheckPlanes(const TensorRef& out, const TensorRef& in) {
  TRN_ASSERT(in.ndim == 4 && out.ndim == 4, "pool/upsample operands must be 4-D");
  TRN_ASSERT(out.sizes[0] == in.sizes[0] && out.sizes[1] == in.sizes[1],
             "pool/upsample keeps N and C");
  TRN_ASSERT(IsFloating(in.dtype) && out.dtype == in.dtype, "pool/upsample: one floating dtype");
}

// Calls f(plane, n, c, out_row) for each (n, c): plane = in[n, c] as f32
// [H][W]; f fills out_row(y) (an f32 row of OW; unchanged, it still holds
// row y - 1 of this plane) and the row is stored.
template <typename F>
void ForEachPlane(const TensorRef& out, const TensorRef& in, F&& f) {
  const int64_t h = in.sizes[2], w = in.sizes[3], oh = out.sizes[2], ow = out.sizes[3];
  float* plane = Scratch(0, h * w);
  float* row = Scratch(1, ow);
  for (int64_t n = 0; n < in.sizes[0]; ++n) {
    for (int64_t c = 0; c < in.sizes[1]; ++c) {
      for (int64_t y = 0; y < h; ++y) {
        internal::LoadAsF32(in.dtype, At4(in, n, c, y, 0), in.strides[3], w, plane + y * w);
      }
      for (int64_t y = 0; y < oh; ++y) {
        f(plane, n, c, y, row);
        internal::StoreFromF32(out.dtype, At4(out, n, c, y, 0), out.strides[3], ow, row);
      }
    }
  }
}

// dst[j] = src[j] * sc + sh for j < n (batch norm's per-channel affine map).
void Affine(float* __restrict dst, const float* __restrict src, int64_t n, float sc, float sh) {
  for (int64_t j = 0; j < n; ++j) dst[j] = src[j] * sc + sh;
}

const char* DTypeSuffixed(const char* const names[4], DType dt) {
  switch (dt) {
    case DType::kFloat64: return names[1];
    case DType::kBFloat16: return names[2];
    case DType::kFloat16: return names[3];
    default: return names[0];
  }
}

}  // namespace

Status BatchNormInference(const TensorRef& out, const TensorRef& in, const TensorRef& mean,
                          const TensorRef& var, const TensorRef& weight, const TensorRef& bias,
                          double eps) {
  TRN_ASSERT(in.ndim >= 2 && out.ndim == in.ndim && out.dtype == in.dtype,
             "batch_norm: out must match in, rank >= 2");
  const int64_t channels = in.sizes[1];
  for (const TensorRef* t : {&mean, &var, &weight, &bias}) {
    TRN_ASSERT(t->data == nullptr || (t->ndim == 1 && t->sizes[0] == channels),
               "batch_norm statistics/parameters must be [C]");
  }
  float* scale = Scratch(2, channels);
  float* shift = Scratch(3, channels);
  float* m = Scratch(0, 2 * channels);  // mean, then var
  internal::LoadAsF32(mean.dtype, mean.data, mean.strides[0], channels, m);
  internal::LoadAsF32(var.dtype, var.data, var.strides[0], channels, m + channels);
  if (weight.data) {
    internal::LoadAsF32(weight.dtype, weight.data, weight.strides[0], channels, scale);
  } else {
    std::fill(scale, scale + channels, 1.0f);
  }
  if (bias.data) {
    internal::LoadAsF32(bias.dtype, bias.data, bias.strides[0], channels, shift);
  } else {
    std::fill(shift, shift + channels, 0.0f);
  }
  for (int64_t c = 0; c < channels; ++c) {
    // The same float32 formula as torch's CPU batch_norm_cpu_collect_linear_and_constant_terms.
    const float invstd = 1.0f / std::sqrt(m[channels + c] + static_cast<float>(eps));
    const float w = scale[c];
    scale[c] = invstd * w;
    shift[c] = shift[c] - m[c] * invstd * w;
  }
  const int64_t osz = static_cast<int64_t>(ItemSize(out.dtype));
  const int64_t isz = static_cast<int64_t>(ItemSize(in.dtype));
  const bool f32 = in.dtype == DType::kFloat32 && out.dtype == DType::kFloat32;
  // Note [batch norm walk]: the strided shape of what is walked is built once,
  // not per (n, c) plane: at 3x3 planes (MobileNetV2's last layers) building
  // it per plane made the kernel 4.5-7.6x CPU PyTorch's time. float32 with
  // unit-stride channels (channels_last) runs per pixel over C.
  if (f32 && in.strides[1] == 1 && out.strides[1] == 1 && channels > 1) {
    TensorRef o = out, i = in;  // the pixels: every dim but C
    o.ndim = i.ndim = in.ndim - 1;
    for (int d = 0, k = 0; d < in.ndim; ++d) {
      if (d == 1) continue;
      o.sizes[k] = out.sizes[d];
      o.strides[k] = out.strides[d];
      i.sizes[k] = in.sizes[d];
      i.strides[k] = in.strides[d];
      ++k;
    }
    internal::ForEachRun<2>({&o, &i}, [&](const std::array<char*, 2>& ptr, int64_t len,
                                          const std::array<int64_t, 2>& st) {
      for (int64_t p = 0; p < len; ++p) {
        const float* __restrict src = reinterpret_cast<const float*>(ptr[1]) + p * st[1];
        float* __restrict dst = reinterpret_cast<float*>(ptr[0]) + p * st[0];
        for (int64_t c = 0; c < channels; ++c) dst[c] = src[c] * scale[c] + shift[c];
      }
    });
    return Status::Ok();
  }
  // Each (n, c) slice [*] is one strided loop over the same shape.
  TensorRef o = out, i = in;
  o.ndim = i.ndim = in.ndim - 2;
  for (int d = 0; d < o.ndim; ++d) {
    o.sizes[d] = out.sizes[d + 2];
    o.strides[d] = out.strides[d + 2];
    i.sizes[d] = in.sizes[d + 2];
    i.strides[d] = in.strides[d + 2];
  }
  const internal::StridedShape<2> plane = internal::MakeShape<2>({&o, &i});
  if (f32 && plane.ndim == 1 && plane.strides[0][0] == 1 && plane.strides[1][0] == 1) {
    for (int64_t n = 0; n < in.sizes[0]; ++n) {  // contiguous planes (NCHW): no walk at all
      for (int64_t c = 0; c < channels; ++c) {
        Affine(out.ptr<float>() + n * out.strides[0] + c * out.strides[1],
               in.ptr<float>() + n * in.strides[0] + c * in.strides[1], plane.sizes[0], scale[c],
               shift[c]);
      }
    }
    return Status::Ok();
  }
  float* buf = internal::ScratchF32(0);
  for (int64_t n = 0; n < in.sizes[0]; ++n) {
    for (int64_t c = 0; c < channels; ++c) {
      char* op = static_cast<char*>(out.data) + (n * out.strides[0] + c * out.strides[1]) * osz;
      char* ip = static_cast<char*>(in.data) + (n * in.strides[0] + c * in.strides[1]) * isz;
      const float sc = scale[c], sh = shift[c];
      internal::ForEachRun<2>(
          plane, {op, ip}, {static_cast<size_t>(osz), static_cast<size_t>(isz)},
          [&](const std::array<char*, 2>& ptr, int64_t len, const std::array<int64_t, 2>& st) {
            if (f32 && st[0] == 1 && st[1] == 1) {  // unit-stride f32: straight through
              Affine(reinterpret_cast<float*>(ptr[0]), reinterpret_cast<const float*>(ptr[1]),
                     len, sc, sh);
              return;
            }
            for (int64_t j0 = 0; j0 < len; j0 += internal::kChunk) {
              const int64_t m = std::min(internal::kChunk, len - j0);
              internal::LoadAsF32(in.dtype, ptr[1] + j0 * st[1] * isz, st[1], m, buf);
              for (int64_t j = 0; j < m; ++j) buf[j] = buf[j] * sc + sh;
              internal::StoreFromF32(out.dtype, ptr[0] + j0 * st[0] * osz, st[0], m, buf);
            }
          });
    }
  }
  return Status::Ok();
}

// Note [max pool layout]: each input plane is copied into f32 "phase" planes
// with a -inf border wide enough for every window (padding and ceil_mode
// overhang): phase q of a stride-s row holds padded columns q, q + s, q + 2s,
// ... so window cell (ky, kx) of all outputs of a row is one contiguous run of
// phase (kx*dilation) % s. MaxPoolRow (vision-inl.h) then takes the window
// cells as whole vectors with compare-and-select, no bounds checks, no index
// math: with indices it tracks only the winning window slot, and the flat
// index is rebuilt once per output. A border cell never wins (strict >), so
// indices and NaN handling are torch's: the first maximum in window order, a
// NaN replaces anything, a later NaN replaces an earlier one; when nothing
// beats -inf the index is the window's first in-input cell.
Status MaxPool2d(const TensorRef& out, const TensorRef& indices, const TensorRef& in,
                 const PoolParams& p) {
  CheckPlanes(out, in);
  if (indices.data != nullptr) {
    TRN_ASSERT(indices.dtype == DType::kInt64 && indices.ndim == 4, "max_pool2d indices int64");
  }
  const int64_t h = in.sizes[2], w = in.sizes[3], oh = out.sizes[2], ow = out.sizes[3];
  if (out.numel() == 0) return Status::Ok();
  const int64_t ph = p.padding[0], pw = p.padding[1];
  const int64_t sh = p.stride[0], sw = p.stride[1], dh = p.dilation[0], dw = p.dilation[1];
  const int64_t kh = p.kernel[0], kw = p.kernel[1];
  const int64_t hp = std::max((oh - 1) * sh + (kh - 1) * dh + 1, h + ph);
  const int64_t wp = std::max((ow - 1) * sw + (kw - 1) * dw + 1, w + pw);
  const int64_t wq = (wp + sw - 1) / sw + kVecPad;  // phase row, readable in whole vectors
  float* plane = Scratch(0, sw * hp * wq);
  float* row = Scratch(1, ow + kVecPad);
  std::fill(plane, plane + sw * hp * wq, -std::numeric_limits<float>::infinity());
  thread_local std::vector<const float*> src;
  thread_local std::vector<int32_t> win, slot;
  thread_local std::vector<int64_t> first_x, cell;
  src.resize(static_cast<size_t>(kh * kw));
  win.resize(src.size());
  cell.resize(src.size());  // window slot -> its input offset from the window origin
  for (int64_t k = 0; k < kh * kw; ++k) cell[k] = (k / kw) * dh * w + (k % kw) * dw;
  thread_local std::vector<int64_t> col_at;  // window column -> its offset in the phase planes
  col_at.resize(static_cast<size_t>(kw));
  for (int64_t kx = 0; kx < kw; ++kx) col_at[kx] = (kx * dw % sw) * hp * wq + kx * dw / sw;
  const bool want_idx = indices.data != nullptr;
  if (want_idx) {
    slot.resize(static_cast<size_t>(ow + kVecPad));
    first_x.resize(static_cast<size_t>(ow));
    for (int64_t x = 0; x < ow; ++x) {
      int64_t x0 = x * sw - pw;
      while (x0 < 0) x0 += dw;
      first_x[x] = x0;
    }
  }
  for (int64_t n = 0; n < in.sizes[0]; ++n) {
    for (int64_t c = 0; c < in.sizes[1]; ++c) {
      if (sw == 2) {  // rows as f32, split into the two phases by vector shuffles
        float* tmp = Scratch(2, w);
        // Input column 2i goes to phase pw % 2 at column pw / 2 + i, 2i + 1 to the other one.
        const int64_t q0 = pw % 2, j0 = pw / 2;
        for (int64_t y = 0; y < h; ++y) {
          internal::LoadAsF32(in.dtype, At4(in, n, c, y, 0), in.strides[3], w, tmp);
          float* even = plane + (q0 * hp + y + ph) * wq + j0;
          float* odd = plane + ((1 - q0) * hp + y + ph) * wq + j0 + q0;
          HWY_DYNAMIC_DISPATCH(vision::Deinterleave2)(tmp, static_cast<size_t>(w / 2), even, odd);
          if (w % 2 != 0) even[w / 2] = tmp[w - 1];
        }
      } else {
        for (int64_t q = 0; q < sw; ++q) {
          int64_t lo = 0, hi = (wp - q + sw - 1) / sw;  // phase columns j, input j*sw + q - pw
          while (lo < hi && lo * sw + q - pw < 0) ++lo;
          while (hi > lo && (hi - 1) * sw + q - pw >= w) --hi;
          if (lo >= hi) continue;
          for (int64_t y = 0; y < h; ++y) {
            internal::LoadAsF32(in.dtype, At4(in, n, c, y, lo * sw + q - pw),
                                in.strides[3] * sw, hi - lo, plane + (q * hp + y + ph) * wq + lo);
          }
        }
      }
      for (int64_t y = 0; y < oh; ++y) {
        size_t nwin = 0;
        for (int64_t ky = 0; ky < kh; ++ky) {
          const int64_t py = y * sh + ky * dh;
          if (py < ph || py >= ph + h) continue;  // a border row never wins
          for (int64_t kx = 0; kx < kw; ++kx) {
            src[nwin] = plane + py * wq + col_at[kx];
            win[nwin++] = static_cast<int32_t>(ky * kw + kx);
          }
        }
        HWY_DYNAMIC_DISPATCH(vision::MaxPoolRow)(src.data(), win.data(), nwin,
                                                 static_cast<size_t>(ow), row,
                                                 want_idx ? slot.data() : nullptr);
        internal::StoreFromF32(out.dtype, At4(out, n, c, y, 0), out.strides[3], ow, row);
        if (!want_idx) continue;
        int64_t y0 = y * sh - ph;  // torch's start: the first in-input cell of the window
        while (y0 < 0) y0 += dh;
        int64_t* dst = reinterpret_cast<int64_t*>(At4(indices, n, c, y, 0));
        const int64_t st = indices.strides[3];
        const int64_t origin = (y * sh - ph) * w - pw;
        for (int64_t x = 0; x < ow; ++x) {
          const int32_t k = slot[x];
          dst[x * st] = k < 0 ? y0 * w + first_x[x] : origin + x * sw + cell[k];
        }
      }
    }
  }
  return Status::Ok();
}

// Same plane layout as Note [max pool layout] with a zero border: each output
// row sums kernel-many shifted input rows, then divides by the per-window
// divisor (torch's: the window clipped to input + padding, or to the input).
Status AvgPool2d(const TensorRef& out, const TensorRef& in, const PoolParams& p) {
  CheckPlanes(out, in);
  const int64_t h = in.sizes[2], w = in.sizes[3], oh = out.sizes[2], ow = out.sizes[3];
  if (out.numel() == 0) return Status::Ok();
  const int64_t ph = p.padding[0], pw = p.padding[1], sw = p.stride[1];
  const int64_t hp = std::max((oh - 1) * p.stride[0] + p.kernel[0], h + ph);
  const int64_t wp = std::max((ow - 1) * sw + p.kernel[1], w + pw);
  float* plane = Scratch(0, hp * wp);
  float* row = Scratch(1, ow);
  // Per output column: the window's width clipped to input + padding, and to the input.
  thread_local std::vector<int64_t> widths;
  widths.assign(static_cast<size_t>(2 * ow), 0);
  for (int64_t x = 0; x < ow; ++x) {
    const int64_t x0 = x * sw - pw, x1 = std::min(x0 + p.kernel[1], w + pw);
    widths[2 * x] = x1 - x0;
    widths[2 * x + 1] = std::max<int64_t>(std::min(x1, w) - std::max<int64_t>(x0, 0), 0);
  }
  std::fill(plane, plane + hp * wp, 0.0f);
  for (int64_t n = 0; n < in.sizes[0]; ++n) {
    for (int64_t c = 0; c < in.sizes[1]; ++c) {
      for (int64_t y = 0; y < h; ++y) {
        internal::LoadAsF32(in.dtype, At4(in, n, c, y, 0), in.strides[3], w,
                            plane + (y + ph) * wp + pw);
      }
      for (int64_t y = 0; y < oh; ++y) {
        const int64_t y0 = y * p.stride[0] - ph, y1 = std::min(y0 + p.kernel[0], h + ph);
        const int64_t rows_pad = y1 - y0;
        const int64_t rows_in = std::max<int64_t>(std::min(y1, h) - std::max<int64_t>(y0, 0), 0);
        std::fill(row, row + ow, 0.0f);
        for (int64_t ky = 0; ky < p.kernel[0]; ++ky) {
          const float* src = plane + (y * p.stride[0] + ky) * wp;
          for (int64_t kx = 0; kx < p.kernel[1]; ++kx) {
            const float* __restrict s = src + kx;
            float* __restrict r = row;
            for (int64_t x = 0; x < ow; ++x) r[x] += s[x * sw];
          }
        }
        for (int64_t x = 0; x < ow; ++x) {
          const int64_t inside = rows_in * widths[2 * x + 1];
          const int64_t div = p.divisor_override != 0 ? p.divisor_override
                              : p.count_include_pad   ? rows_pad * widths[2 * x]
                                                      : inside;
          row[x] = inside == 0 ? 0.0f : row[x] / static_cast<float>(div);
        }
        internal::StoreFromF32(out.dtype, At4(out, n, c, y, 0), out.strides[3], ow, row);
      }
    }
  }
  return Status::Ok();
}

Status AdaptiveAvgPool2d(const TensorRef& out, const TensorRef& in) {
  CheckPlanes(out, in);
  const int64_t h = in.sizes[2], w = in.sizes[3], oh = out.sizes[2], ow = out.sizes[3];
  ForEachPlane(out, in, [&](const float* plane, int64_t, int64_t, int64_t y, float* row) {
    const int64_t y0 = (y * h) / oh, y1 = ((y + 1) * h + oh - 1) / oh;
    for (int64_t x = 0; x < ow; ++x) {
      const int64_t x0 = (x * w) / ow, x1 = ((x + 1) * w + ow - 1) / ow;
      float sum = 0.0f;
      for (int64_t iy = y0; iy < y1; ++iy) {
        for (int64_t ix = x0; ix < x1; ++ix) sum += plane[iy * w + ix];
      }
      row[x] = sum / static_cast<float>((y1 - y0) * (x1 - x0));
    }
  });
  return Status::Ok();
}

namespace {

// The running max of CPU's max pools: a NaN wins, a later NaN replaces it.
struct MaxCell {
  float value = -std::numeric_limits<float>::infinity();
  int64_t index;
  void Offer(float v, int64_t i) {
    if (v > value || std::isnan(v)) {
      value = v;
      index = i;
    }
  }
};

}  // namespace

Status AdaptiveMaxPool2d(const TensorRef& out, const TensorRef& indices, const TensorRef& in) {
  CheckPlanes(out, in);
  TRN_ASSERT(indices.dtype == DType::kInt64 && indices.ndim == 4, "adaptive_max_pool2d indices");
  const int64_t h = in.sizes[2], w = in.sizes[3], oh = out.sizes[2], ow = out.sizes[3];
  ForEachPlane(out, in, [&](const float* plane, int64_t n, int64_t c, int64_t y, float* row) {
    const int64_t y0 = (y * h) / oh, y1 = ((y + 1) * h + oh - 1) / oh;
    auto* idx = reinterpret_cast<int64_t*>(At4(indices, n, c, y, 0));
    for (int64_t x = 0; x < ow; ++x) {
      const int64_t x0 = (x * w) / ow, x1 = ((x + 1) * w + ow - 1) / ow;
      MaxCell m{.index = y0 * w + x0};
      for (int64_t iy = y0; iy < y1; ++iy) {
        for (int64_t ix = x0; ix < x1; ++ix) m.Offer(plane[iy * w + ix], iy * w + ix);
      }
      row[x] = m.value;
      idx[x * indices.strides[3]] = m.index;
    }
  });
  return Status::Ok();
}

Status MaxPool3d(const TensorRef& out, const TensorRef& indices, const TensorRef& in,
                 const Pool3dParams& p) {
  TRN_ASSERT(in.ndim == 5 && out.ndim == 5 && indices.ndim == 5 &&
                 indices.dtype == DType::kInt64 && out.dtype == in.dtype && IsFloating(in.dtype),
             "max_pool3d: 5-D operands of one floating dtype, int64 indices");
  const int64_t dd = in.sizes[2], h = in.sizes[3], w = in.sizes[4];
  const int64_t od = out.sizes[2], oh = out.sizes[3], ow = out.sizes[4];
  if (out.numel() == 0) return Status::Ok();
  float* vol = Scratch(0, dd * h * w);
  float* row = Scratch(1, ow);
  const size_t item = ItemSize(in.dtype);
  for (int64_t n = 0; n < in.sizes[0]; ++n) {
    for (int64_t c = 0; c < in.sizes[1]; ++c) {
      const char* base = static_cast<const char*>(in.data) +
                         (n * in.strides[0] + c * in.strides[1]) * static_cast<int64_t>(item);
      for (int64_t z = 0; z < dd; ++z) {
        for (int64_t y = 0; y < h; ++y) {
          internal::LoadAsF32(in.dtype,
                              base + (z * in.strides[2] + y * in.strides[3]) *
                                         static_cast<int64_t>(item),
                              in.strides[4], w, vol + (z * h + y) * w);
        }
      }
      for (int64_t z = 0; z < od; ++z) {
        for (int64_t y = 0; y < oh; ++y) {
          char* orow = static_cast<char*>(out.data) +
                       (n * out.strides[0] + c * out.strides[1] + z * out.strides[2] +
                        y * out.strides[3]) * static_cast<int64_t>(item);
          int64_t* irow = static_cast<int64_t*>(indices.data) + n * indices.strides[0] +
                          c * indices.strides[1] + z * indices.strides[2] + y * indices.strides[3];
          for (int64_t x = 0; x < ow; ++x) {
            int64_t s[3] = {z * p.stride[0] - p.padding[0], y * p.stride[1] - p.padding[1],
                            x * p.stride[2] - p.padding[2]};
            const int64_t o[3] = {s[0], s[1], s[2]};
            for (int k = 0; k < 3; ++k) {  // torch's start: the first in-input cell
              while (s[k] < 0) s[k] += p.dilation[k];
            }
            MaxCell m{.index = (s[0] * h + s[1]) * w + s[2]};
            const int64_t lim[3] = {dd, h, w};
            int64_t e[3];
            for (int k = 0; k < 3; ++k) {
              e[k] = std::min(o[k] + (p.kernel[k] - 1) * p.dilation[k] + 1, lim[k]);
            }
            for (int64_t iz = s[0]; iz < e[0]; iz += p.dilation[0]) {
              for (int64_t iy = s[1]; iy < e[1]; iy += p.dilation[1]) {
                for (int64_t ix = s[2]; ix < e[2]; ix += p.dilation[2]) {
                  const int64_t cell = (iz * h + iy) * w + ix;
                  m.Offer(vol[cell], cell);
                }
              }
            }
            row[x] = m.value;
            irow[x * indices.strides[4]] = m.index;
          }
          internal::StoreFromF32(out.dtype, orow, out.strides[4], ow, row);
        }
      }
    }
  }
  return Status::Ok();
}

namespace {

// Calls f(grad_plane, grad_out_plane, n, c) for each (n, c) with grad_plane a
// zeroed float32 [H][W] scratch and grad_out_plane grad_out[n, c] as float32
// [OH][OW]; grad_plane is then stored into grad_in[n, c]. Stops at the first
// error f returns.
template <typename F>
Status ForEachGradPlane(const TensorRef& grad_in, const TensorRef& grad_out, F&& f) {
  CheckPlanes(grad_out, grad_in);
  const int64_t h = grad_in.sizes[2], w = grad_in.sizes[3];
  const int64_t oh = grad_out.sizes[2], ow = grad_out.sizes[3];
  float* plane = Scratch(0, h * w);
  float* go = Scratch(1, oh * ow);
  for (int64_t n = 0; n < grad_in.sizes[0]; ++n) {
    for (int64_t c = 0; c < grad_in.sizes[1]; ++c) {
      for (int64_t y = 0; y < oh; ++y) {
        internal::LoadAsF32(grad_out.dtype, At4(grad_out, n, c, y, 0), grad_out.strides[3], ow,
                            go + y * ow);
      }
      std::fill(plane, plane + h * w, 0.0f);
      if (Status s = f(plane, static_cast<const float*>(go), n, c); !s.ok()) return s;
      for (int64_t y = 0; y < h; ++y) {
        internal::StoreFromF32(grad_in.dtype, At4(grad_in, n, c, y, 0), grad_in.strides[3], w,
                               plane + y * w);
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Status MaxPool2dBackward(const TensorRef& grad_in, const TensorRef& grad_out,
                         const TensorRef& indices) {
  TRN_ASSERT(indices.dtype == DType::kInt64 && indices.ndim == 4 &&
                 std::equal(indices.sizes, indices.sizes + 4, grad_out.sizes),
             "max_pool2d backward: int64 indices of grad_out's sizes");
  const int64_t cells = grad_in.sizes[2] * grad_in.sizes[3];
  const int64_t oh = grad_out.sizes[2], ow = grad_out.sizes[3];
  return ForEachGradPlane(grad_in, grad_out, [&](float* plane, const float* go, int64_t n,
                                                 int64_t c) {
    for (int64_t y = 0; y < oh; ++y) {
      const auto* idx = reinterpret_cast<const int64_t*>(At4(indices, n, c, y, 0));
      for (int64_t x = 0; x < ow; ++x) {
        const int64_t i = idx[x * indices.strides[3]];
        if (i < 0 || i >= cells) {
          return Status::Error("max_pool2d backward: index " + std::to_string(i) +
                               " is outside the input plane of " + std::to_string(cells) +
                               " elements");
        }
        plane[i] += go[y * ow + x];
      }
    }
    return Status::Ok();
  });
}

Status AvgPool2dBackward(const TensorRef& grad_in, const TensorRef& grad_out, const PoolParams& p) {
  const int64_t h = grad_in.sizes[2], w = grad_in.sizes[3];
  const int64_t oh = grad_out.sizes[2], ow = grad_out.sizes[3];
  return ForEachGradPlane(grad_in, grad_out, [&](float* plane, const float* go, int64_t,
                                                 int64_t) {
    for (int64_t y = 0; y < oh; ++y) {  // the windows and divisors of AvgPool2d
      const int64_t y0 = y * p.stride[0] - p.padding[0];
      const int64_t y1 = std::min(y0 + p.kernel[0], h + p.padding[0]);
      const int64_t iy0 = std::max<int64_t>(y0, 0), iy1 = std::min(y1, h);
      for (int64_t x = 0; x < ow; ++x) {
        const int64_t x0 = x * p.stride[1] - p.padding[1];
        const int64_t x1 = std::min(x0 + p.kernel[1], w + p.padding[1]);
        const int64_t ix0 = std::max<int64_t>(x0, 0), ix1 = std::min(x1, w);
        if (iy1 <= iy0 || ix1 <= ix0) continue;
        const int64_t div = p.divisor_override != 0 ? p.divisor_override
                            : p.count_include_pad   ? (y1 - y0) * (x1 - x0)
                                                    : (iy1 - iy0) * (ix1 - ix0);
        const float delta = go[y * ow + x] / static_cast<float>(div);
        for (int64_t iy = iy0; iy < iy1; ++iy) {
          for (int64_t ix = ix0; ix < ix1; ++ix) plane[iy * w + ix] += delta;
        }
      }
    }
    return Status::Ok();
  });
}

Status AdaptiveAvgPool2dBackward(const TensorRef& grad_in, const TensorRef& grad_out) {
  const int64_t h = grad_in.sizes[2], w = grad_in.sizes[3];
  const int64_t oh = grad_out.sizes[2], ow = grad_out.sizes[3];
  return ForEachGradPlane(grad_in, grad_out, [&](float* plane, const float* go, int64_t,
                                                 int64_t) {
    for (int64_t y = 0; y < oh; ++y) {
      const int64_t y0 = (y * h) / oh, y1 = ((y + 1) * h + oh - 1) / oh;
      for (int64_t x = 0; x < ow; ++x) {
        const int64_t x0 = (x * w) / ow, x1 = ((x + 1) * w + ow - 1) / ow;
        const float delta =
            go[y * ow + x] / static_cast<float>(y1 - y0) / static_cast<float>(x1 - x0);
        for (int64_t iy = y0; iy < y1; ++iy) {
          for (int64_t ix = x0; ix < x1; ++ix) plane[iy * w + ix] += delta;
        }
      }
    }
    return Status::Ok();
  });
}

namespace {

// torch's compute_scales_value: 1/scale when the user gave one, else in/out.
float ScaleValue(double scale, int64_t in, int64_t out) {
  return scale > 0 ? static_cast<float>(1.0 / scale)
                   : static_cast<float>(in) / static_cast<float>(out);
}

// The source index of output o: floor(o * s), or floor((o + 0.5) * s) for
// nearest-exact; by size alone for out == in / 2 * in when `by_size` (torch's
// 2-D nearest, Upsample2d).
int64_t NearestIndex(int64_t o, int64_t in, int64_t out, double scale, bool exact, bool by_size) {
  if (by_size && out == in) return o;
  if (by_size && out == 2 * in) return o >> 1;
  const float s = ScaleValue(scale, in, out);
  const float src = exact ? (static_cast<float>(o) + 0.5f) * s : static_cast<float>(o) * s;
  return std::min(static_cast<int64_t>(std::floor(src)), in - 1);
}

// torch's compute_source_index_and_lambda for linear modes.
struct Tap {
  int64_t i0, i1;
  float l0, l1;
};
Tap LinearTap(int64_t o, int64_t in, int64_t out, bool align_corners, double scale) {
  if (out == in && !align_corners) return {o, o, 1.0f, 0.0f};
  const float s = align_corners ? (out > 1 ? static_cast<float>(in - 1) / (out - 1) : 0.0f)
                                : ScaleValue(scale, in, out);
  const float real = align_corners ? s * o : std::max(s * (o + 0.5f) - 0.5f, 0.0f);
  const int64_t i0 = std::min(static_cast<int64_t>(std::floor(real)), in - 1);
  const float lambda = std::min(std::max(real - static_cast<float>(i0), 0.0f), 1.0f);
  return {i0, i0 + (i0 < in - 1 ? 1 : 0), 1.0f - lambda, lambda};
}

// torch's bicubic taps (A = -0.75, Keys' kernel): source x = floor(real) - 1
// .. + 2, clamped to the input, with the cubic convolution weights of the
// fraction t. Unlike linear modes the source index is not clamped at 0.
struct CubicTap {
  int64_t i[4];
  float w[4];
};
CubicTap CubicTapOf(int64_t o, int64_t in, int64_t out, bool align_corners, double scale) {
  const float s = align_corners ? (out > 1 ? static_cast<float>(in - 1) / (out - 1) : 0.0f)
                                : ScaleValue(scale, in, out);
  const float real = align_corners ? s * o : s * (o + 0.5f) - 0.5f;
  const float fl = std::floor(real);
  const float t = real - fl;
  constexpr float kA = -0.75f;
  const auto near = [](float x) { return ((kA + 2) * x - (kA + 3)) * x * x + 1; };  // |x| <= 1
  const auto far = [](float x) { return ((kA * x - 5 * kA) * x + 8 * kA) * x - 4 * kA; };  // 1 < |x| < 2
  CubicTap tap;
  tap.w[0] = far(t + 1.0f);
  tap.w[1] = near(t);
  tap.w[2] = near(1.0f - t);
  tap.w[3] = far(2.0f - t);
  const int64_t base = static_cast<int64_t>(fl) - 1;
  for (int k = 0; k < 4; ++k) tap.i[k] = std::clamp<int64_t>(base + k, 0, in - 1);
  return tap;
}

}  // namespace

namespace {

// Note [Antialiased resize]: torch's (PIL's) filters for F.interpolate(...,
// antialias=True). Output o of a dim of `in` inputs reads [start, start +
// count), weights normalized to sum 1: with scale = in / out (or 1 / the
// user's factor; align_corners: (in - 1) / (out - 1)), center = scale (o +
// 0.5), support = taps / 2 (2 taps bilinear, 4 bicubic) times the scale when
// it is >= 1, the weight of input j is filter((j - center + 0.5) / max(scale,
// 1)). In float, as CPU's float path.
struct AntialiasTaps {
  std::vector<int64_t> start, count;
  std::vector<float> w;  // `width` per output
  int64_t width = 0;
};

AntialiasTaps AntialiasTapsOf(int64_t in, int64_t out, bool align_corners, double user_scale,
                              bool cubic) {
  float scale;
  if (align_corners) {
    scale = out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.0f;
  } else {
    scale = user_scale > 0 ? static_cast<float>(1.0 / user_scale)
                           : static_cast<float>(in) / static_cast<float>(out);
  }
  const auto filter = [cubic](float x) {
    x = std::fabs(x);
    if (!cubic) return x < 1.0f ? 1.0f - x : 0.0f;
    constexpr float a = -0.5f;  // PIL's bicubic
    if (x < 1.0f) return ((a + 2.0f) * x - (a + 3.0f)) * x * x + 1.0f;
    if (x < 2.0f) return (((x - 5.0f) * x + 8.0f) * x - 4.0f) * a;
    return 0.0f;
  };
  const float taps = cubic ? 4.0f : 2.0f;
  const float support = scale >= 1.0f ? taps * 0.5f * scale : taps * 0.5f;
  const float invscale = scale >= 1.0f ? 1.0f / scale : 1.0f;
  AntialiasTaps t;
  t.width = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  t.start.resize(static_cast<size_t>(out));
  t.count.resize(static_cast<size_t>(out));
  t.w.assign(static_cast<size_t>(out * t.width), 0.0f);
  for (int64_t o = 0; o < out; ++o) {
    const float center = scale * (static_cast<float>(o) + 0.5f);
    const int64_t lo = std::max(static_cast<int64_t>(center - support + 0.5f), int64_t{0});
    const int64_t n = std::min(static_cast<int64_t>(center + support + 0.5f), in) - lo;
    float* wo = t.w.data() + o * t.width;
    float total = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
      wo[j] = filter((static_cast<float>(j + lo) - center + 0.5f) * invscale);
      total += wo[j];
    }
    for (int64_t j = 0; j < n && total != 0.0f; ++j) wo[j] /= total;
    t.start[o] = lo;
    t.count[o] = n;
  }
  return t;
}

// dst[o] = sum_j taps.w[o][j] * src[(taps.start[o] + j) * stride] for o < out.
void AntialiasPass(const AntialiasTaps& t, const float* src, int64_t stride, float* dst,
                   int64_t out) {
  for (int64_t o = 0; o < out; ++o) {
    const float* wo = t.w.data() + o * t.width;
    const float* s = src + t.start[o] * stride;
    float acc = wo[0] * s[0];
    for (int64_t j = 1; j < t.count[o]; ++j) acc += wo[j] * s[j * stride];
    dst[o] = acc;
  }
}

}  // namespace

Status Upsample2d(const TensorRef& out, const TensorRef& in, UpsampleMode mode,
                  bool align_corners, double scale_h, double scale_w, bool one_dim) {
  CheckPlanes(out, in);
  const int64_t h = in.sizes[2], w = in.sizes[3], oh = out.sizes[2], ow = out.sizes[3];
  if (out.numel() == 0) return Status::Ok();
  if (mode == UpsampleMode::kBilinearAntialias || mode == UpsampleMode::kBicubicAntialias) {
    // Note [Antialiased resize]: every input row along W once per plane, then
    // each output row along H (columns: a row of W taps per tap).
    const bool cubic = mode == UpsampleMode::kBicubicAntialias;
    const AntialiasTaps xs = AntialiasTapsOf(w, ow, align_corners, scale_w, cubic);
    const AntialiasTaps ys = AntialiasTapsOf(h, oh, align_corners, scale_h, cubic);
    float* rows = Scratch(2, h * ow);
    ForEachPlane(out, in, [&](const float* plane, int64_t, int64_t, int64_t y, float* row) {
      const float* src = plane;  // [h][ow] once W is done
      if (w != ow) {
        if (y == 0) {
          for (int64_t iy = 0; iy < h; ++iy) AntialiasPass(xs, plane + iy * w, 1, rows + iy * ow, ow);
        }
        src = rows;
      }
      if (h == oh) {
        std::copy(src + y * ow, src + (y + 1) * ow, row);
        return;
      }
      const float* wy = ys.w.data() + y * ys.width;
      const float* r0 = src + ys.start[y] * ow;
      for (int64_t x = 0; x < ow; ++x) row[x] = wy[0] * r0[x];
      for (int64_t j = 1; j < ys.count[y]; ++j) {
        const float* r = r0 + j * ow;
        for (int64_t x = 0; x < ow; ++x) row[x] += wy[j] * r[x];
      }
    });
    return Status::Ok();
  }
  if (mode == UpsampleMode::kNearest || mode == UpsampleMode::kNearestExact) {
    const bool exact = mode == UpsampleMode::kNearestExact, by_size = !exact && !one_dim;
    TRN_ASSERT(w <= std::numeric_limits<int32_t>::max(), "upsample_nearest2d: W fits int32");
    std::vector<int32_t> xs(static_cast<size_t>(ow));
    for (int64_t x = 0; x < ow; ++x) {
      xs[x] = static_cast<int32_t>(NearestIndex(x, w, ow, scale_w, exact, by_size));
    }
    const auto gather = HWY_DYNAMIC_DISPATCH(vision::GatherRow);
    int64_t last = -1;  // input row that row holds: an upscaled row repeats it
    ForEachPlane(out, in, [&](const float* plane, int64_t, int64_t, int64_t y, float* row) {
      const int64_t iy = NearestIndex(y, h, oh, scale_h, exact, by_size);
      if (y != 0 && iy == last) return;
      gather(plane + iy * w, xs.data(), static_cast<size_t>(ow), row);
      last = iy;
    });
    return Status::Ok();
  }
  if (mode == UpsampleMode::kBicubic) {
    // Separable: every input row of the plane interpolated along W once, then
    // each output row blends four of them along H. Same sizes copy (torch).
    std::vector<CubicTap> xs(static_cast<size_t>(ow)), ys(static_cast<size_t>(oh));
    for (int64_t x = 0; x < ow; ++x) xs[x] = CubicTapOf(x, w, ow, align_corners, scale_w);
    for (int64_t y = 0; y < oh; ++y) ys[y] = CubicTapOf(y, h, oh, align_corners, scale_h);
    const bool same = h == oh && w == ow;
    float* rows = Scratch(2, h * ow);
    ForEachPlane(out, in, [&](const float* plane, int64_t, int64_t, int64_t y, float* row) {
      if (same) {
        std::copy(plane + y * w, plane + (y + 1) * w, row);
        return;
      }
      if (y == 0) {  // a new plane
        for (int64_t iy = 0; iy < h; ++iy) {
          const float* src = plane + iy * w;
          float* dst = rows + iy * ow;
          for (int64_t x = 0; x < ow; ++x) {
            const CubicTap& t = xs[x];
            dst[x] = t.w[0] * src[t.i[0]] + t.w[1] * src[t.i[1]] + t.w[2] * src[t.i[2]] +
                     t.w[3] * src[t.i[3]];
          }
        }
      }
      const CubicTap& t = ys[y];
      const float* r[4] = {rows + t.i[0] * ow, rows + t.i[1] * ow, rows + t.i[2] * ow,
                           rows + t.i[3] * ow};
      for (int64_t x = 0; x < ow; ++x) {
        row[x] = t.w[0] * r[0][x] + t.w[1] * r[1][x] + t.w[2] * r[2][x] + t.w[3] * r[3][x];
      }
    });
    return Status::Ok();
  }
  // Separable: each needed input row is interpolated along W once (two
  // cached rows), then each output row blends two of them along H.
  std::vector<Tap> xs(static_cast<size_t>(ow));
  for (int64_t x = 0; x < ow; ++x) xs[x] = LinearTap(x, w, ow, align_corners, scale_w);
  std::vector<Tap> ys(static_cast<size_t>(oh));
  for (int64_t y = 0; y < oh; ++y) ys[y] = LinearTap(y, h, oh, align_corners, scale_h);
  float* hrow[2] = {Scratch(2, ow), Scratch(3, ow)};
  int64_t cached[2];
  const auto horizontal = [&](const float* src, float* dst) {
    for (int64_t x = 0; x < ow; ++x) dst[x] = xs[x].l0 * src[xs[x].i0] + xs[x].l1 * src[xs[x].i1];
  };
  ForEachPlane(out, in, [&](const float* plane, int64_t, int64_t, int64_t y, float* row) {
    if (y == 0) cached[0] = cached[1] = -1;  // a new plane
    const Tap& ty = ys[y];
    const int64_t want[2] = {ty.i0, ty.i1};
    const float* r[2];
    for (int k = 0; k < 2; ++k) {
      int slot = cached[0] == want[k] ? 0 : cached[1] == want[k] ? 1 : -1;
      if (slot < 0) {  // load into the slot that does not hold the other row
        slot = cached[0] == want[1 - k] ? 1 : 0;
        horizontal(plane + want[k] * w, hrow[slot]);
        cached[slot] = want[k];
      }
      r[k] = hrow[slot];
    }
    for (int64_t x = 0; x < ow; ++x) row[x] = ty.l0 * r[0][x] + ty.l1 * r[1][x];
  });
  return Status::Ok();
}

namespace {

// Up to 4 source taps of one output index along one dim, any mode.
struct Taps {
  int64_t i[4];
  float w[4];
  int n;
};
Taps TapsOf(UpsampleMode mode, int64_t o, int64_t in, int64_t out, bool align_corners,
            double scale, bool by_size) {
  Taps t{};
  if (mode == UpsampleMode::kNearest || mode == UpsampleMode::kNearestExact) {
    t.i[0] = NearestIndex(o, in, out, scale, mode == UpsampleMode::kNearestExact, by_size);
    t.w[0] = 1.0f;
    t.n = 1;
  } else if (mode == UpsampleMode::kBilinear) {
    const Tap l = LinearTap(o, in, out, align_corners, scale);
    t = {{l.i0, l.i1}, {l.l0, l.l1}, 2};
  } else {
    const CubicTap c = CubicTapOf(o, in, out, align_corners, scale);
    t = {{c.i[0], c.i[1], c.i[2], c.i[3]}, {c.w[0], c.w[1], c.w[2], c.w[3]}, 4};
  }
  return t;
}

}  // namespace

Status Upsample2dBackward(const TensorRef& grad_in, const TensorRef& grad_out, UpsampleMode mode,
                          bool align_corners, double scale_h, double scale_w, bool one_dim) {
  const int64_t h = grad_in.sizes[2], w = grad_in.sizes[3];
  const int64_t oh = grad_out.sizes[2], ow = grad_out.sizes[3];
  const bool by_size = mode == UpsampleMode::kNearest && !one_dim;
  std::vector<Taps> xs(static_cast<size_t>(ow)), ys(static_cast<size_t>(oh));
  for (int64_t x = 0; x < ow; ++x) xs[x] = TapsOf(mode, x, w, ow, align_corners, scale_w, by_size);
  for (int64_t y = 0; y < oh; ++y) ys[y] = TapsOf(mode, y, h, oh, align_corners, scale_h, by_size);
  if (mode == UpsampleMode::kBicubic && h == oh && w == ow) {  // the forward copies
    for (auto* v : {&xs, &ys}) {
      for (size_t o = 0; o < v->size(); ++o) (*v)[o] = {{static_cast<int64_t>(o)}, {1.0f}, 1};
    }
  }
  return ForEachGradPlane(grad_in, grad_out, [&](float* plane, const float* go, int64_t,
                                                 int64_t) {
    for (int64_t y = 0; y < oh; ++y) {
      const Taps& ty = ys[y];
      for (int64_t x = 0; x < ow; ++x) {
        const Taps& tx = xs[x];
        const float g = go[y * ow + x];
        for (int a = 0; a < ty.n; ++a) {
          float* row = plane + ty.i[a] * w;
          for (int b = 0; b < tx.n; ++b) row[tx.i[b]] += ty.w[a] * tx.w[b] * g;
        }
      }
    }
    return Status::Ok();
  });
}

namespace {

// The [lo, hi) outputs whose tap o * stride - pad + offset lands in [0, n).
std::pair<int64_t, int64_t> InsideRange(int64_t n, int64_t outs, int64_t stride, int64_t pad,
                                        int64_t offset) {
  const auto ceil_div = [](int64_t a, int64_t b) { return a <= 0 ? 0 : (a + b - 1) / b; };
  const int64_t lo = std::min(ceil_div(pad - offset, stride), outs);
  const int64_t hi = std::max(std::min(ceil_div(n + pad - offset, stride), outs), lo);
  return {lo, hi};
}

// Per (image, channel, tap) one output row of OH*OW: the rows a tap reads
// outside the input are zeros, each inside row a zero head and tail around a
// strided (stride 1 and unit strides: contiguous) copy. No per-element bounds
// checks: the backward's im2col of every training convolution runs here.
template <typename U>
void Im2ColTyped(const TensorRef& out, const TensorRef& in, const Im2ColParams& p) {
  const int64_t n = in.sizes[0], c = in.sizes[1], h = in.sizes[2], w = in.sizes[3];
  const int64_t kh = p.kernel[0], kw = p.kernel[1];
  const int64_t oh = (h + 2 * p.padding[0] - p.dilation[0] * (kh - 1) - 1) / p.stride[0] + 1;
  const int64_t ow = (w + 2 * p.padding[1] - p.dilation[1] * (kw - 1) - 1) / p.stride[1] + 1;
  const U* src = static_cast<const U*>(in.data);
  U* dst = static_cast<U*>(out.data);
  const int64_t so = out.strides[2], sx = in.strides[3] * p.stride[1];
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const U* plane = src + b * in.strides[0] + ch * in.strides[1];
      for (int64_t i = 0; i < kh; ++i) {
        const auto [y_lo, y_hi] = InsideRange(h, oh, p.stride[0], p.padding[0], i * p.dilation[0]);
        for (int64_t j = 0; j < kw; ++j) {
          const int64_t row = (ch * kh + i) * kw + j;
          U* o = dst + b * out.strides[0] + row * out.strides[1];
          const auto [x_lo, x_hi] = InsideRange(w, ow, p.stride[1], p.padding[1], j * p.dilation[1]);
          for (int64_t y = 0; y < oh; ++y) {
            U* __restrict orow = o + y * ow * so;
            if (y < y_lo || y >= y_hi) {
              for (int64_t x = 0; x < ow; ++x) orow[x * so] = U{0};
              continue;
            }
            const int64_t iy = y * p.stride[0] - p.padding[0] + i * p.dilation[0];
            const U* __restrict irow =
                plane + iy * in.strides[2] +
                (x_lo * p.stride[1] - p.padding[1] + j * p.dilation[1]) * in.strides[3];
            for (int64_t x = 0; x < x_lo; ++x) orow[x * so] = U{0};
            if (so == 1 && sx == 1) {
              std::copy(irow, irow + (x_hi - x_lo), orow + x_lo);
            } else {
              for (int64_t x = x_lo; x < x_hi; ++x) orow[x * so] = irow[(x - x_lo) * sx];
            }
            for (int64_t x = x_hi; x < ow; ++x) orow[x * so] = U{0};
          }
        }
      }
    }
  }
}

}  // namespace

Status Im2Col(const TensorRef& out, const TensorRef& in, const Im2ColParams& p) {
  TRN_ASSERT(in.ndim == 4 && out.ndim == 3 && out.dtype == in.dtype && out.sizes[0] == in.sizes[0] &&
                 out.sizes[1] == in.sizes[1] * p.kernel[0] * p.kernel[1],
             "im2col: in [N, C, H, W], out [N, C*KH*KW, L] of in's dtype");
  switch (ItemSize(in.dtype)) {  // a copy: the element's bytes are all that matter
    case 1: Im2ColTyped<uint8_t>(out, in, p); break;
    case 2: Im2ColTyped<uint16_t>(out, in, p); break;
    case 4: Im2ColTyped<uint32_t>(out, in, p); break;
    default: Im2ColTyped<uint64_t>(out, in, p); break;
  }
  return Status::Ok();
}

Status Col2Im(const TensorRef& out, const TensorRef& in, const Im2ColParams& p) {
  const int64_t n = out.sizes[0], c = out.sizes[1], h = out.sizes[2], w = out.sizes[3];
  const int64_t kh = p.kernel[0], kw = p.kernel[1];
  const int64_t oh = (h + 2 * p.padding[0] - p.dilation[0] * (kh - 1) - 1) / p.stride[0] + 1;
  const int64_t ow = (w + 2 * p.padding[1] - p.dilation[1] * (kw - 1) - 1) / p.stride[1] + 1;
  TRN_ASSERT(in.ndim == 3 && out.ndim == 4 && in.dtype == out.dtype && IsFloating(in.dtype) &&
                 in.sizes[0] == n && in.sizes[1] == c * kh * kw && in.sizes[2] == oh * ow,
             "col2im: in [N, C*KH*KW, OH*OW], out [N, C, H, W] of one floating dtype");
  float* plane = Scratch(0, h * w);
  float* row = Scratch(1, oh * ow);
  const size_t item = ItemSize(in.dtype);
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t ch = 0; ch < c; ++ch) {
      std::fill(plane, plane + h * w, 0.0f);
      for (int64_t i = 0; i < kh; ++i) {
        const auto [y_lo, y_hi] = InsideRange(h, oh, p.stride[0], p.padding[0], i * p.dilation[0]);
        for (int64_t j = 0; j < kw; ++j) {
          const auto [x_lo, x_hi] =
              InsideRange(w, ow, p.stride[1], p.padding[1], j * p.dilation[1]);
          const int64_t r = (ch * kh + i) * kw + j;
          internal::LoadAsF32(in.dtype,
                              static_cast<const char*>(in.data) +
                                  (b * in.strides[0] + r * in.strides[1]) *
                                      static_cast<int64_t>(item),
                              in.strides[2], oh * ow, row);
          for (int64_t y = y_lo; y < y_hi; ++y) {
            const int64_t iy = y * p.stride[0] - p.padding[0] + i * p.dilation[0];
            float* dst = plane + iy * w;
            for (int64_t x = x_lo; x < x_hi; ++x) {
              dst[x * p.stride[1] - p.padding[1] + j * p.dilation[1]] += row[y * ow + x];
            }
          }
        }
      }
      for (int64_t y = 0; y < h; ++y) {
        internal::StoreFromF32(out.dtype, At4(out, b, ch, y, 0), out.strides[3], w, plane + y * w);
      }
    }
  }
  return Status::Ok();
}

namespace {

// torch's grid_sampler_compute_source_index for one coordinate.
float GridSource(float coord, int64_t size, GridSamplePadding padding, bool align_corners) {
  const float n = static_cast<float>(size);
  float c = align_corners ? (coord + 1) / 2 * (n - 1) : ((coord + 1) * n - 1) / 2;
  const auto clip = [n](float v) { return std::min(n - 1, std::max(v, 0.0f)); };
  if (padding == GridSamplePadding::kBorder) return clip(c);
  if (padding == GridSamplePadding::kReflection) {
    // Reflect over [lo, hi] (twice the bounds: corners or pixel edges), then clip.
    const int64_t twice_lo = align_corners ? 0 : -1;
    const int64_t twice_hi = align_corners ? 2 * (size - 1) : 2 * size - 1;
    if (twice_lo == twice_hi) return 0.0f;
    const float lo = static_cast<float>(twice_lo) / 2;
    const float span = static_cast<float>(twice_hi - twice_lo) / 2;
    const float d = std::fabs(c - lo);
    const float extra = std::fmod(d, span);
    const int flips = static_cast<int>(std::floor(d / span));
    c = flips % 2 == 0 ? extra + lo : span - extra + lo;
    return clip(c);
  }
  return c;
}


// Note [Grid sample taps]: the taps of every output position of an image are
// computed once (4 plane offsets and weights; nearest: 1 tap of weight 1, an
// outside one of weight 0), then applied channel by channel, so each pass
// reads one input plane that stays in cache. Per position and channel that
// is 4 loads and FMAs. [2, 64, 32, 32] with a 32 x 32 grid, trn / CPU PyTorch
// (1 thread, 7 rounds of 10 calls): bilinear 0.80x, nearest 0.67x; with the
// channels walked per position 1.55x / 1.74x, through the dtype converters
// 11x / 3.5x. kF32: in and out float32, read and written directly.
template <bool kF32>
Status GridSampleImpl(const TensorRef& out, const TensorRef& in, const TensorRef& grid,
                      GridSampleMode mode, GridSamplePadding padding, bool align_corners) {
  const int64_t n = in.sizes[0], c = in.sizes[1], h = in.sizes[2], w = in.sizes[3];
  const int64_t ho = out.sizes[2], wo = out.sizes[3], positions = ho * wo;
  const int64_t item = static_cast<int64_t>(ItemSize(in.dtype));
  const auto load = [item](const TensorRef& t, int64_t offset) {
    if constexpr (kF32) {
      return static_cast<const float*>(t.data)[offset];
    } else {
      float v;
      internal::LoadAsF32(t.dtype, static_cast<const char*>(t.data) + offset * item, 1, 1, &v);
      return v;
    }
  };
  internal::ScratchBuffer<float> weight_buffer;
  internal::ScratchBuffer<int64_t> offset_buffer;
  float* const wt = weight_buffer.Get(4 * positions);
  int64_t* const src = offset_buffer.Get(4 * positions);
  if (wt == nullptr || src == nullptr) return Status::Error("grid_sample: no host memory for the taps");
  const bool nearest = mode == GridSampleMode::kNearest;
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t y = 0, p = 0; y < ho; ++y) {
      for (int64_t x = 0; x < wo; ++x, ++p) {
        const int64_t g = b * grid.strides[0] + y * grid.strides[1] + x * grid.strides[2];
        const float ix = GridSource(load(grid, g), w, padding, align_corners);
        const float iy = GridSource(load(grid, g + grid.strides[3]), h, padding, align_corners);
        float* pw = wt + 4 * p;
        int64_t* ps = src + 4 * p;
        int64_t ys[4], xs[4];
        if (nearest) {  // round half to even, as torch
          ys[0] = static_cast<int64_t>(std::nearbyint(iy));
          xs[0] = static_cast<int64_t>(std::nearbyint(ix));
          pw[0] = 1.0f;
          for (int k = 1; k < 4; ++k) ys[k] = xs[k] = 0, pw[k] = 0.0f;
        } else {
          const float fx = std::floor(ix), fy = std::floor(iy);
          const int64_t x0 = static_cast<int64_t>(fx), y0 = static_cast<int64_t>(fy);
          const float tx = ix - fx, ty = iy - fy;
          pw[0] = (1 - tx) * (1 - ty), pw[1] = tx * (1 - ty), pw[2] = (1 - tx) * ty, pw[3] = tx * ty;
          ys[0] = ys[1] = y0, ys[2] = ys[3] = y0 + 1;
          xs[0] = xs[2] = x0, xs[1] = xs[3] = x0 + 1;
        }
        for (int k = 0; k < 4; ++k) {  // an outside tap reads the plane's start with weight 0
          const bool ok = ys[k] >= 0 && ys[k] < h && xs[k] >= 0 && xs[k] < w;
          ps[k] = ok ? ys[k] * in.strides[2] + xs[k] * in.strides[3] : 0;
          if (!ok) pw[k] = 0.0f;
        }
      }
    }
    for (int64_t ch = 0; ch < c; ++ch) {
      const int64_t plane = b * in.strides[0] + ch * in.strides[1];
      const int64_t oplane = b * out.strides[0] + ch * out.strides[1];
      for (int64_t y = 0, p = 0; y < ho; ++y) {
        for (int64_t x = 0; x < wo; ++x, ++p) {
          const float* pw = wt + 4 * p;
          const int64_t* ps = src + 4 * p;
          float v = load(in, plane + ps[0]) * pw[0];
          if (!nearest) {
            v += load(in, plane + ps[1]) * pw[1];
            v += load(in, plane + ps[2]) * pw[2];
            v += load(in, plane + ps[3]) * pw[3];
          }
          const int64_t o = oplane + y * out.strides[2] + x * out.strides[3];
          if constexpr (kF32) {
            static_cast<float*>(out.data)[o] = v;
          } else {
            internal::StoreFromF32(out.dtype, static_cast<char*>(out.data) + o * item, 1, 1, &v);
          }
        }
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Status GridSample2d(const TensorRef& out, const TensorRef& in, const TensorRef& grid,
                    GridSampleMode mode, GridSamplePadding padding, bool align_corners) {
  TRN_ASSERT(in.ndim == 4 && grid.ndim == 4 && out.ndim == 4 && grid.sizes[3] == 2 &&
                 grid.sizes[0] == in.sizes[0] && out.sizes[0] == in.sizes[0] &&
                 out.sizes[1] == in.sizes[1] && out.sizes[2] == grid.sizes[1] &&
                 out.sizes[3] == grid.sizes[2] && IsFloating(in.dtype) &&
                 grid.dtype == in.dtype && out.dtype == in.dtype,
             "grid_sample: in [N, C, H, W], grid [N, HO, WO, 2], out [N, C, HO, WO], one dtype");
  if (out.numel() == 0) return Status::Ok();
  return in.dtype == DType::kFloat32
             ? GridSampleImpl<true>(out, in, grid, mode, padding, align_corners)
             : GridSampleImpl<false>(out, in, grid, mode, padding, align_corners);
}

rt::KernelInfo DescribeBatchNorm(const TensorRef& out, const TensorRef& in, const char* aten_op) {
  static const char* const kNames[4] = {"batch_norm_f32", "batch_norm_f64", "batch_norm_bf16",
                                        "batch_norm_f16"};
  rt::KernelInfo info;
  info.name = DTypeSuffixed(kNames, in.dtype);
  info.op = aten_op;
  info.engine = rt::Engine::kVector;
  info.flops = 2 * static_cast<uint64_t>(in.numel());  // one FMA per element
  info.bytes_read = internal::DistinctBytes(in);
  info.bytes_written = out.nbytes();
  return info;
}

rt::KernelInfo DescribeVision(VisionKernel kernel, const TensorRef& out, const TensorRef& in,
                              uint64_t window, const char* aten_op) {
  static const char* const kNames[17][4] = {
      {"max_pool2d_f32", "max_pool2d_f64", "max_pool2d_bf16", "max_pool2d_f16"},
      {"avg_pool2d_f32", "avg_pool2d_f64", "avg_pool2d_bf16", "avg_pool2d_f16"},
      {"adaptive_avg_pool2d_f32", "adaptive_avg_pool2d_f64", "adaptive_avg_pool2d_bf16",
       "adaptive_avg_pool2d_f16"},
      {"upsample_nearest2d_f32", "upsample_nearest2d_f64", "upsample_nearest2d_bf16",
       "upsample_nearest2d_f16"},
      {"upsample_bilinear2d_f32", "upsample_bilinear2d_f64", "upsample_bilinear2d_bf16",
       "upsample_bilinear2d_f16"},
      {"upsample_bicubic2d_f32", "upsample_bicubic2d_f64", "upsample_bicubic2d_bf16",
       "upsample_bicubic2d_f16"},
      {"im2col_f32", "im2col_f64", "im2col_bf16", "im2col_f16"},
      {"upsample_nearest_exact2d_f32", "upsample_nearest_exact2d_f64",
       "upsample_nearest_exact2d_bf16", "upsample_nearest_exact2d_f16"},
      {"grid_sampler_2d_f32", "grid_sampler_2d_f64", "grid_sampler_2d_bf16",
       "grid_sampler_2d_f16"},
      {"max_pool2d_backward_f32", "max_pool2d_backward_f64", "max_pool2d_backward_bf16",
       "max_pool2d_backward_f16"},
      {"avg_pool2d_backward_f32", "avg_pool2d_backward_f64", "avg_pool2d_backward_bf16",
       "avg_pool2d_backward_f16"},
      {"adaptive_avg_pool2d_backward_f32", "adaptive_avg_pool2d_backward_f64",
       "adaptive_avg_pool2d_backward_bf16", "adaptive_avg_pool2d_backward_f16"},
      {"upsample2d_backward_f32", "upsample2d_backward_f64", "upsample2d_backward_bf16",
       "upsample2d_backward_f16"},
      {"adaptive_max_pool2d_f32", "adaptive_max_pool2d_f64", "adaptive_max_pool2d_bf16",
       "adaptive_max_pool2d_f16"},
      {"max_pool3d_f32", "max_pool3d_f64", "max_pool3d_bf16", "max_pool3d_f16"},
      {"col2im_f32", "col2im_f64", "col2im_bf16", "col2im_f16"},
      {"upsample_aa2d_f32", "upsample_aa2d_f64", "upsample_aa2d_bf16", "upsample_aa2d_f16"},
  };
  rt::KernelInfo info;
  info.name = DTypeSuffixed(kNames[static_cast<int>(kernel)], in.dtype);
  info.op = aten_op;
  info.engine = kernel == VisionKernel::kIm2Col ? rt::Engine::kDma : rt::Engine::kVector;
  uint64_t per_out = window;
  if (kernel == VisionKernel::kUpsampleNearest2d) per_out = 1;
  if (kernel == VisionKernel::kUpsampleNearestExact2d) per_out = 1;
  if (kernel == VisionKernel::kGridSample2d) per_out = 12;  // coordinates + 4 taps
  if (kernel == VisionKernel::kUpsampleBilinear2d) per_out = 7;
  if (kernel == VisionKernel::kUpsampleBicubic2d) per_out = 15;  // 4 + 4 taps, one per FMA pair
  // Antialiased: the caller passes the taps of both passes (W and H) as `window`.
  if (kernel == VisionKernel::kUpsampleAntialias2d) per_out = 2 * window;
  if (kernel == VisionKernel::kIm2Col) per_out = 0;                // a copy
  const bool backward = kernel == VisionKernel::kMaxPool2dBackward ||
                        kernel == VisionKernel::kAvgPool2dBackward ||
                        kernel == VisionKernel::kAdaptiveAvgPool2dBackward ||
                        kernel == VisionKernel::kUpsample2dBackward ||
                        kernel == VisionKernel::kCol2Im;
  info.flops = per_out * static_cast<uint64_t>(backward ? in.numel() : out.numel());
  info.bytes_read = internal::DistinctBytes(in);
  info.bytes_written = out.nbytes();
  return info;
}

}  // namespace trn::kernels
#endif  // HWY_ONCE
