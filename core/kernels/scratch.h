// Scratch arrays of kernel runs, bounded per thread.
#pragma once

#include <algorithm>
#include <cstdint>

#include "hwy/aligned_allocator.h"

namespace trn::kernels::internal {

// A scratch array of a kernel run: a thread's buffer reused call after call
// up to kKeptBytes (no allocation in steady state), a fresh one freed with
// this object above (a bfloat16 lm_head's logits would pin a GiB per thread).
// Get returns null when the host has no memory; a later Get may reuse the
// memory of an earlier one. At most one live object per T and thread: the
// kernels of every file share the kept buffer.
template <typename T>
class ScratchBuffer {
 public:
  T* Get(int64_t elems) {
    static constexpr int64_t kKeptBytes = int64_t{16} << 20;
    thread_local hwy::AlignedFreeUniquePtr<T[]> kept;
    thread_local int64_t kept_elems = 0;
    const size_t n = static_cast<size_t>(std::max<int64_t>(elems, 1));
    if (elems * static_cast<int64_t>(sizeof(T)) > kKeptBytes) {
      own_ = hwy::AllocateAligned<T>(n);
      return own_.get();
    }
    if (kept_elems < elems) {
      kept = hwy::AllocateAligned<T>(n);
      kept_elems = kept != nullptr ? elems : 0;
    }
    return kept.get();
  }

 private:
  hwy::AlignedFreeUniquePtr<T[]> own_;
};

}  // namespace trn::kernels::internal
