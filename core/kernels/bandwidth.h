// The host's streaming bandwidth, the peak that "% of host peak" divides by
// (Note [Host peak] in bandwidth.cc). Torch-free; runs on the calling thread,
// which for a device is its core's worker (the bridge launches it there).
#pragma once

#include <cstddef>
#include <vector>

namespace trn::kernels {

// One way of streaming memory and the best rate it reached.
struct BandwidthSample {
  const char* method;  // "memcpy", "copy_nontemporal", "copy", "add"
  double bytes_per_s;  // bytes read + written per second (STREAM's convention)
};

// Best of `repeats` runs of each method over three caller-owned float32
// buffers of `count` elements (a, b, c; contents overwritten): memcpy, a copy
// with non-temporal stores, and our own kernels (kernels::Copy, kernels::Binary
// add). count must be > 0 and repeats > 0 (the caller checks user input).
std::vector<BandwidthSample> MeasureBandwidth(float* a, float* b, float* c, size_t count,
                                              int repeats);

// dst[i] = src[i] with non-temporal stores (they bypass the cache: a copy
// larger than the last-level cache moves 2 bytes per byte copied instead of 3).
void CopyNonTemporal(float* dst, const float* src, size_t count);

}  // namespace trn::kernels
