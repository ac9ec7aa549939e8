// Per-core caching allocator. See Note [Allocator rounding and reuse].
#include <atomic>
#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "core/common/assert.h"
#include "core/trace/trace.h"
#include "core/runtime/runtime.h"
#include "core/runtime/runtime_internal.h"

namespace trn::rt {

// Note [Allocator rounding and reuse]
// Every block is its own 64-byte aligned host allocation (no splitting of
// segments: simple, and the host's malloc already does that job).
//  - Sizes are rounded up to 512 B up to 1 MiB, and to 2 MiB multiples above,
//    so tensors of nearby sizes can share cached blocks.
//  - A freed block is cached under the stream that allocated it and is only
//    reused by that stream: commands of one stream run in order, so the old
//    user's kernels have finished before the new user's run.
//  - Reuse is best fit, and only if the cached block is at most 25% larger
//    than the rounded request: a tiny tensor never pins a huge block.
//  - Free first tells the free observer (SetFreeObserver), so caches keyed
//    by address (Note [Packed weight cache]) never outlive a block's user.
//  - Capacity bounds reserved bytes (live + cached). Before failing, the cache
//    is returned to the host and the request retried.
namespace {

constexpr size_t kAlignment = 64;
constexpr size_t kSmallRound = 512;
constexpr size_t kSmallLimit = size_t{1} << 20;  // 1 MiB
constexpr size_t kLargeRound = size_t{2} << 20;  // 2 MiB

std::atomic<FreeObserver> free_observer{nullptr};

}  // namespace

void SetFreeObserver(FreeObserver observer) { free_observer.store(observer); }

size_t RoundAllocationSize(size_t bytes) {
  const size_t unit = bytes <= kSmallLimit ? kSmallRound : kLargeRound;
  if (bytes > SIZE_MAX - unit) return SIZE_MAX;  // cannot be satisfied anyway
  return (bytes + unit - 1) / unit * unit;
}

std::string FormatBytes(uint64_t bytes) {
  constexpr uint64_t kKiB = 1024, kMiB = kKiB << 10, kGiB = kMiB << 10;
  const double b = static_cast<double>(bytes);
  if (bytes >= kGiB) return fmt::format("{:.2f} GiB", b / kGiB);
  if (bytes >= kMiB) return fmt::format("{:.2f} MiB", b / kMiB);
  if (bytes >= kKiB) return fmt::format("{:.2f} KiB", b / kKiB);
  return fmt::format("{} B", bytes);
}

struct Allocator::Impl {
  struct Block {
    size_t size;
    int stream_id;
  };

  int device_index;
  mutable std::mutex mu;
  MemoryStats stats;                                  // guarded by mu
  std::unordered_map<void*, Block> live;              // guarded by mu
  std::map<int, std::multimap<size_t, void*>> cache;  // stream id -> size -> block
  uint64_t cached_bytes = 0;
  std::function<void()> wait_idle;  // set once by the owning Device

  void Trace(trace::RecordKind kind, size_t size, int stream_id) {
    if (!trace::Wants(kind, device_index, -1)) return;
    trace::Record r;
    r.kind = kind;
    r.name = kind == trace::RecordKind::kAlloc ? "alloc" : "free";
    r.device = static_cast<int16_t>(device_index);
    r.stream = static_cast<int16_t>(stream_id);
    r.value = static_cast<int64_t>(size);
    r.in_use = static_cast<int64_t>(stats.allocated);
    r.correlation_id = trace::CurrentCorrelation();
    r.start = r.end = trace::Ticks();
    trace::Emit(r);
  }

  // Caller holds mu.
  void* TakeCached(size_t size, int stream_id) {
    auto s = cache.find(stream_id);
    if (s == cache.end()) return nullptr;
    auto it = s->second.lower_bound(size);
    if (it == s->second.end() || it->first > size + size / 4) return nullptr;
    void* ptr = it->second;
    live.emplace(ptr, Block{it->first, stream_id});
    cached_bytes -= it->first;
    stats.allocated += it->first;
    s->second.erase(it);
    return ptr;
  }

  // Caller holds mu.
  void ReleaseCache() {
    for (auto& [stream, blocks] : cache) {
      for (auto& [size, ptr] : blocks) {
        std::free(ptr);
        stats.reserved -= size;
      }
    }
    cache.clear();
    cached_bytes = 0;
  }
};

Allocator::Allocator(int device_index, uint64_t capacity) : impl_(std::make_unique<Impl>()) {
  impl_->device_index = device_index;
  impl_->stats.capacity = capacity;
}

Allocator::~Allocator() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->ReleaseCache();
  // Blocks still live belong to a caller that outlived the device; the
  // runtime leaks its devices (Note [Runtime lifetime]) so this only happens
  // in tests that own a Device. Free them rather than leak.
  for (auto& [ptr, block] : impl_->live) std::free(ptr);
}

void* Allocator::Allocate(size_t bytes, int stream_id) {
  if (bytes == 0) return nullptr;
  const size_t size = RoundAllocationSize(bytes);
  Impl& m = *impl_;
  std::unique_lock<std::mutex> lock(m.mu);
  void* ptr = m.TakeCached(size, stream_id);
  if (ptr == nullptr) {
    if ((m.stats.reserved + size > m.stats.capacity || size == SIZE_MAX) && m.cached_bytes > 0) {
      // Cached blocks may still be read by queued kernels: let the core drain
      // before handing them back to the host. Unlocked: the drain frees.
      if (m.wait_idle) {
        lock.unlock();
        m.wait_idle();
        lock.lock();
      }
      m.ReleaseCache();
    }
    if (m.stats.reserved + size > m.stats.capacity || size == SIZE_MAX) {
      throw OutOfMemory(fmt::format(
          "trn:{} out of memory: tried to allocate {}; {} free of {} capacity "
          "(allocated {}, cached {}). Free tensors, or raise TRN_DEVICE_MEMORY.",
          m.device_index, FormatBytes(bytes), FormatBytes(m.stats.capacity - m.stats.reserved),
          FormatBytes(m.stats.capacity), FormatBytes(m.stats.allocated),
          FormatBytes(m.cached_bytes)));
    }
    ptr = std::aligned_alloc(kAlignment, size);  // size is a multiple of 512
    if (ptr == nullptr) {
      m.ReleaseCache();
      ptr = std::aligned_alloc(kAlignment, size);
    }
    if (ptr == nullptr) {
      throw OutOfMemory(fmt::format(
          "trn:{} out of memory: tried to allocate {}; the host refused the allocation "
          "(allocated {} of {} capacity)",
          m.device_index, FormatBytes(bytes), FormatBytes(m.stats.allocated),
          FormatBytes(m.stats.capacity)));
    }
    m.live.emplace(ptr, Impl::Block{size, stream_id});
    m.stats.reserved += size;
    m.stats.allocated += size;
  }
  ++m.stats.num_allocs;
  if (m.stats.allocated > m.stats.peak_allocated) m.stats.peak_allocated = m.stats.allocated;
  if (trace::Active()) m.Trace(trace::RecordKind::kAlloc, m.live.at(ptr).size, stream_id);
  return ptr;
}

void Allocator::Free(void* ptr) {
  if (ptr == nullptr) return;
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  auto it = m.live.find(ptr);
  TRN_ASSERT(it != m.live.end(), "Allocator::Free of a pointer this core did not allocate");
  const Impl::Block block = it->second;
  m.live.erase(it);
  // Under the lock: no Allocate can hand the block out before the observer ran.
  if (const FreeObserver observer = free_observer.load(std::memory_order_acquire)) {
    observer(ptr);
  }
  m.cache[block.stream_id].emplace(block.size, ptr);
  m.cached_bytes += block.size;
  m.stats.allocated -= block.size;
  ++m.stats.num_frees;
  m.Trace(trace::RecordKind::kFree, block.size, block.stream_id);
}

void Allocator::SetWaitIdle(std::function<void()> wait_idle) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->wait_idle = std::move(wait_idle);
}

MemoryStats Allocator::Stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

void Allocator::ResetPeak() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->stats.peak_allocated = impl_->stats.allocated;
}

void Allocator::EmptyCache() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->ReleaseCache();
}

}  // namespace trn::rt
