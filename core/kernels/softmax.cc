// softmax / log_softmax along one dim, numerically stable (the row maximum is
// subtracted before exp). Each row is processed in float32: in place when it
// is a contiguous float32 run, otherwise gathered into a per-thread row buffer.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/kernels/softmax.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"

#include "core/kernels/elementwise-inl.h"
#include "core/kernels/kernels.h"
#include "core/kernels/reduce-inl.h"

HWY_BEFORE_NAMESPACE();
namespace trn::kernels::HWY_NAMESPACE {

// y = softmax(x) or log_softmax(x) over n > 0 contiguous floats; y may be x.
void SoftmaxRowF32(const float* x, float* y, size_t n, bool log) {
  const float m = ExtremumRun<true>(x, n);  // NaN row -> NaN everywhere, as torch
  const hn::ScalableTag<float> d;
  if (log) {
    // sum exp(x - m) without storing it, then y = x - (m + log(sum)).
    float sum = 0;
    size_t i = 0;
    const size_t N = hn::Lanes(d);
    auto acc = hn::Zero(d);
    const auto vm = hn::Set(d, m);
    for (; i + N <= n; i += N) {
      acc = hn::Add(acc, ExpNonPositiveNaNF(d, hn::Sub(hn::LoadU(d, x + i), vm)));
    }
    sum = hn::GetLane(hn::SumOfLanes(d, acc));
    if (i < n) {  // tail (< N elements) through a buffer: y may alias x
      HWY_ALIGN float tail[kMaxLanesF32];
      MapUnary(x + i, tail, n - i,
               [m](auto dd, auto v) { return ExpNonPositiveNaNF(dd, hn::Sub(v, hn::Set(dd, m))); });
      for (size_t j = 0; i + j < n; ++j) sum += tail[j];
    }
    const float shift = m + std::log(sum);
    MapUnary(x, y, n, [shift](auto dd, auto v) { return hn::Sub(v, hn::Set(dd, shift)); });
    return;
  }
  MapUnary(x, y, n,
           [m](auto dd, auto v) { return ExpNonPositiveNaNF(dd, hn::Sub(v, hn::Set(dd, m))); });
  const float inv = 1.0f / SumRun(y, n);
  MapUnary(y, y, n, [inv](auto dd, auto v) { return hn::Mul(v, hn::Set(dd, inv)); });
}

}  // namespace trn::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE

#include <vector>

#include "core/common/assert.h"
#include "core/kernels/convert.h"
#include "core/kernels/strided.h"

namespace trn::kernels {

HWY_EXPORT(SoftmaxRowF32);

Status Softmax(const TensorRef& out, const TensorRef& in, int dim, bool log) {
  TRN_ASSERT(out.dtype == in.dtype && out.ndim == in.ndim && IsFloating(in.dtype),
             "Softmax: out must match in, floating dtype");
  if (in.ndim == 0) return Fill(out, log ? 0.0 : 1.0);
  TRN_ASSERT(dim >= 0 && dim < in.ndim, "Softmax: dim out of range");
  const int64_t n = in.sizes[dim];
  if (n == 0 || in.numel() == 0) return Status::Ok();
  const int64_t in_stride = in.strides[dim], out_stride = out.strides[dim];
  const size_t in_item = ItemSize(in.dtype);
  const size_t out_item = ItemSize(out.dtype);
  // One "row start" per element of these views.
  TensorRef in_rows = in, out_rows = out;
  in_rows.sizes[dim] = out_rows.sizes[dim] = 1;
  const auto row_fn = HWY_DYNAMIC_DISPATCH(SoftmaxRowF32);
  static thread_local std::vector<float> row;  // grows to the longest row seen
  const bool direct_in = in.dtype == DType::kFloat32 && in_stride == 1;
  const bool direct_out = out.dtype == DType::kFloat32 && out_stride == 1;
  if (!(direct_in && direct_out) && row.size() < static_cast<size_t>(n)) row.resize(n);
  internal::ForEachRun<2>(
      {&out_rows, &in_rows},
      [&](const std::array<char*, 2>& p, int64_t count, const std::array<int64_t, 2>& s) {
        for (int64_t r = 0; r < count; ++r) {
          char* o = p[0] + r * s[0] * static_cast<int64_t>(out_item);
          const char* x = p[1] + r * s[1] * static_cast<int64_t>(in_item);
          const float* src = reinterpret_cast<const float*>(x);
          if (!direct_in) {
            internal::LoadAsF32(in.dtype, x, in_stride, n, row.data());
            src = row.data();
          }
          float* dst = direct_out ? reinterpret_cast<float*>(o) : row.data();
          row_fn(src, dst, static_cast<size_t>(n), log);
          if (!direct_out) internal::StoreFromF32(out.dtype, o, out_stride, n, dst);
        }
      });
  return Status::Ok();
}

KernelInfo DescribeSoftmax(const TensorRef& out, bool log, const char* aten_op) {
  static constexpr const char* kNames[2][7] = {TRN_DTYPE_NAMES("softmax"),
                                               TRN_DTYPE_NAMES("log_softmax")};
  KernelInfo info;
  info.name = kNames[log ? 1 : 0][static_cast<int>(out.dtype)];
  info.op = aten_op;
  info.engine = rt::Engine::kVector;
  // max, subtract, exp (~10), sum, scale: ~14 vector ops per element.
  info.flops = static_cast<uint64_t>(out.numel()) * 14;
  info.bytes_read = out.nbytes();  // in has out's sizes and dtype
  info.bytes_written = out.nbytes();
  return info;
}

}  // namespace trn::kernels
#endif  // HWY_ONCE
