// Note [Host peak]
// "% of host peak" must never pass 100 %, so the peak is the best rate of every
// way we know to stream memory on this thread: libc memcpy, a non-temporal copy
// (stores that skip the cache and its read-for-ownership), and our own kernels.
// A study kernel faster than all of them raises the peak (profiling.py
// share_of_peak) rather than printing more than 100 %.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/kernels/bandwidth.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/cache_control.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace trn::kernels::bandwidth::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void CopyNonTemporal(float* dst, const float* src, size_t count) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  for (; i < count && reinterpret_cast<uintptr_t>(dst + i) % (N * sizeof(float)) != 0; ++i) {
    dst[i] = src[i];
  }
  for (; i + 2 * N <= count; i += 2 * N) {
    const auto v0 = hn::LoadU(d, src + i);
    const auto v1 = hn::LoadU(d, src + i + N);
    hn::Stream(v0, d, dst + i);
    hn::Stream(v1, d, dst + i + N);
  }
  for (; i < count; ++i) dst[i] = src[i];
  hwy::FlushStream();  // the stores are weakly ordered: visible before we return
}

}  // namespace trn::kernels::bandwidth::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/common/assert.h"
#include "core/kernels/bandwidth.h"
#include "core/kernels/kernels.h"

namespace trn::kernels {
namespace bandwidth {
HWY_EXPORT(CopyNonTemporal);
}  // namespace bandwidth

void CopyNonTemporal(float* dst, const float* src, size_t count) {
  HWY_DYNAMIC_DISPATCH(bandwidth::CopyNonTemporal)(dst, src, count);
}

namespace {

TensorRef Flat(float* data, size_t count) {
  TensorRef t;
  t.data = data;
  t.dtype = DType::kFloat32;
  t.ndim = 1;
  t.sizes[0] = static_cast<int64_t>(count);
  t.strides[0] = 1;
  return t;
}

template <typename F>
double BestSeconds(int repeats, F&& run) {
  double best = 1e300;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    const auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
  }
  return std::max(best, 1e-9);
}

}  // namespace

std::vector<BandwidthSample> MeasureBandwidth(float* a, float* b, float* c, size_t count,
                                              int repeats) {
  TRN_ASSERT(count > 0 && repeats > 0, "MeasureBandwidth: empty buffers or no repeats");
  const double bytes = static_cast<double>(count) * sizeof(float);
  std::fill(a, a + count, 1.0f);
  std::fill(b, b + count, 2.0f);
  const TensorRef ta = Flat(a, count), tb = Flat(b, count), tc = Flat(c, count);
  std::vector<BandwidthSample> out;
  out.push_back({"memcpy", 2 * bytes / BestSeconds(repeats, [&] {
                             std::memcpy(c, a, count * sizeof(float));
                           })});
  out.push_back({"copy_nontemporal", 2 * bytes / BestSeconds(repeats, [&] {
                                       CopyNonTemporal(c, a, count);
                                     })});
  out.push_back({"copy", 2 * bytes / BestSeconds(repeats, [&] {
                           TRN_ASSERT(Copy(tc, ta).ok(), "f32 copy cannot fail");
                         })});
  out.push_back({"add", 3 * bytes / BestSeconds(repeats, [&] {
                          TRN_ASSERT(Binary(BinaryOp::kAdd, tc, ta, tb).ok(),
                                     "f32 add cannot fail");
                        })});
  return out;
}

}  // namespace trn::kernels
#endif  // HWY_ONCE
