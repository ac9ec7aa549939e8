// The per-core caching allocator: rounding, per-stream reuse, stats, OOM.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/runtime/runtime.h"
#include "core/runtime/runtime_internal.h"

namespace trn::rt {
namespace {

#define EXPECT_CONTAINS(text, part)                          \
  EXPECT_NE(std::string(text).find(part), std::string::npos) \
      << "expected to contain: " << (part) << "\n  actual: " << (text)

constexpr uint64_t kKiB = 1024, kMiB = kKiB << 10, kGiB = kMiB << 10;

// The documented rule, written independently of the allocator.
uint64_t Rounded(uint64_t bytes) {
  const uint64_t unit = bytes <= kMiB ? 512 : 2 * kMiB;
  return (bytes + unit - 1) / unit * unit;
}

TEST(AllocatorTest, RoundingFollowsTheDocumentedRule) {
  for (uint64_t b : {uint64_t{1}, uint64_t{511}, uint64_t{512}, uint64_t{513}, 100 * kKiB + 1,
                     kMiB - 1, kMiB, kMiB + 1, 2 * kMiB, 3 * kMiB + 7, 1000 * kMiB + 1}) {
    EXPECT_EQ(RoundAllocationSize(b), Rounded(b)) << b;
  }
  EXPECT_EQ(RoundAllocationSize(kMiB), kMiB);
  EXPECT_EQ(RoundAllocationSize(kMiB + 1), 2 * kMiB);
}

TEST(AllocatorTest, BlocksAreAlignedAndWritable) {
  Allocator a(0, 64 * kMiB);
  EXPECT_EQ(a.Allocate(0, 0), nullptr);
  std::vector<void*> ptrs;
  for (size_t bytes : {1, 3, 100, 4096, 70000, 3 << 20}) {
    void* p = a.Allocate(bytes, 0);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
    std::memset(p, 0xab, Rounded(bytes));  // the whole rounded block is usable
    ptrs.push_back(p);
  }
  for (void* p : ptrs) a.Free(p);
  a.Free(nullptr);  // no-op, like free()
  EXPECT_EQ(a.Stats().num_frees, ptrs.size());
}

TEST(AllocatorTest, ReusesFreedBlocksOnlyOnTheSameStream) {
  Allocator a(0, 64 * kMiB);
  void* p = a.Allocate(1000, 0);
  a.Free(p);
  void* other_stream = a.Allocate(1000, 1);
  EXPECT_NE(other_stream, p);       // stream 0's cached block is not handed to stream 1
  void* same = a.Allocate(1000, 0);
  EXPECT_EQ(same, p);
  a.Free(same);
  void* same_bucket = a.Allocate(900, 0);  // rounds to the same 1024 B
  EXPECT_EQ(same_bucket, p);
  a.Free(same_bucket);
  a.Free(other_stream);
  EXPECT_EQ(a.Allocate(1000, 1), other_stream);
}

TEST(AllocatorTest, ReuseIsBestFitAndBoundsTheWaste) {
  Allocator a(0, 256 * kMiB);
  void* big = a.Allocate(64 * kMiB, 0);
  void* mid = a.Allocate(4096, 0);
  void* small = a.Allocate(2048, 0);
  a.Free(big);
  a.Free(mid);
  a.Free(small);
  void* p = a.Allocate(2000, 0);  // 2048 fits exactly: best fit
  EXPECT_EQ(p, small);
  void* q = a.Allocate(512, 0);  // a cached 4096 B block would waste 8x: fresh block
  EXPECT_NE(q, mid);
  EXPECT_NE(q, big);
  void* r = a.Allocate(60 * kMiB, 0);  // 64 MiB block: at most 25% larger, reused
  EXPECT_EQ(r, big);
  void* s = a.Allocate(4000, 0);
  EXPECT_EQ(s, mid);
  for (void* x : {p, q, r, s}) a.Free(x);
}

TEST(AllocatorTest, StatsTrackRoundedBytesAndCounts) {
  Allocator a(2, 64 * kMiB);
  MemoryStats st = a.Stats();
  EXPECT_EQ(st.allocated, 0u);
  EXPECT_EQ(st.reserved, 0u);
  EXPECT_EQ(st.capacity, 64 * kMiB);
  const std::vector<uint64_t> sizes = {1, 1000, 5000, kMiB + 1, 3 * kMiB};
  std::vector<void*> ptrs;
  uint64_t expect_alloc = 0;
  for (uint64_t b : sizes) {
    ptrs.push_back(a.Allocate(b, 0));
    expect_alloc += Rounded(b);
  }
  st = a.Stats();
  EXPECT_EQ(st.allocated, expect_alloc);
  EXPECT_EQ(st.reserved, expect_alloc);
  EXPECT_EQ(st.peak_allocated, expect_alloc);
  EXPECT_EQ(st.num_allocs, sizes.size());
  EXPECT_EQ(st.num_frees, 0u);

  a.Free(ptrs[3]);  // cached, still reserved
  a.Free(ptrs[1]);
  const uint64_t freed = Rounded(sizes[3]) + Rounded(sizes[1]);
  st = a.Stats();
  EXPECT_EQ(st.allocated, expect_alloc - freed);
  EXPECT_EQ(st.reserved, expect_alloc);
  EXPECT_EQ(st.peak_allocated, expect_alloc);
  EXPECT_EQ(st.num_frees, 2u);

  a.ResetPeak();
  EXPECT_EQ(a.Stats().peak_allocated, expect_alloc - freed);
  void* again = a.Allocate(sizes[1], 0);  // from the cache: reserved unchanged
  EXPECT_EQ(again, ptrs[1]);
  st = a.Stats();
  EXPECT_EQ(st.allocated, expect_alloc - Rounded(sizes[3]));
  EXPECT_EQ(st.reserved, expect_alloc);
  EXPECT_EQ(st.peak_allocated, expect_alloc - Rounded(sizes[3]));
  EXPECT_EQ(st.num_allocs, sizes.size() + 1);

  a.EmptyCache();  // returns the cached 2 MiB block
  st = a.Stats();
  EXPECT_EQ(st.reserved, st.allocated);
  EXPECT_EQ(st.allocated, expect_alloc - Rounded(sizes[3]));
  ptrs[1] = again;
  ptrs.erase(ptrs.begin() + 3);
  for (void* p : ptrs) a.Free(p);
  a.EmptyCache();
  st = a.Stats();
  EXPECT_EQ(st.allocated, 0u);
  EXPECT_EQ(st.reserved, 0u);
  EXPECT_EQ(st.num_allocs, st.num_frees);
}

TEST(AllocatorTest, OutOfMemoryNamesSizeFreeBytesAndCoreAndStaysUsable) {
  Allocator a(3, 64 * kMiB);
  void* live = a.Allocate(40 * kMiB, 0);
  try {
    a.Allocate(30 * kMiB, 0);
    FAIL() << "expected OutOfMemory";
  } catch (const OutOfMemory& err) {
    EXPECT_STREQ(err.what(),
                 "trn:3 out of memory: tried to allocate 30.00 MiB; 24.00 MiB free of 64.00 MiB "
                 "capacity (allocated 40.00 MiB, cached 0 B). Free tensors, or raise "
                 "TRN_DEVICE_MEMORY.");
  }
  try {
    a.Allocate(8 * kGiB, 0);
    FAIL() << "expected OutOfMemory";
  } catch (const OutOfMemory& err) {
    EXPECT_CONTAINS(err.what(), "tried to allocate 8.00 GiB");
  }
  MemoryStats st = a.Stats();
  EXPECT_EQ(st.allocated, 40 * kMiB);
  EXPECT_EQ(st.num_allocs, 1u);  // failed calls do not count
  void* fits = a.Allocate(20 * kMiB, 0);
  ASSERT_NE(fits, nullptr);
  a.Free(fits);
  a.Free(live);
  void* after = a.Allocate(60 * kMiB, 0);  // cache released to make room
  ASSERT_NE(after, nullptr);
  a.Free(after);
}

TEST(AllocatorTest, CachedBlocksOfOtherStreamsAreReleasedBeforeFailing) {
  Allocator a(0, 64 * kMiB);
  void* p = a.Allocate(40 * kMiB, 1);
  a.Free(p);  // cached for stream 1
  EXPECT_EQ(a.Stats().reserved, 40 * kMiB);
  void* q = a.Allocate(40 * kMiB, 0);  // would exceed capacity: cache released, retried
  ASSERT_NE(q, nullptr);
  MemoryStats st = a.Stats();
  EXPECT_EQ(st.reserved, 40 * kMiB);
  EXPECT_EQ(st.allocated, 40 * kMiB);
  a.Free(q);
}

TEST(AllocatorTest, ConcurrentAllocateAndFreeKeepStatsConsistent) {
  Allocator a(0, 1 * kGiB);
  auto work = [&a](int stream, unsigned seed) {
    std::mt19937 rng(seed);
    std::vector<std::pair<void*, uint64_t>> live;
    for (int i = 0; i < 3000; ++i) {
      if (live.empty() || rng() % 3 != 0) {
        const uint64_t bytes = 1 + rng() % (rng() % 8 == 0 ? 4 * kMiB : 8 * kKiB);
        auto* p = static_cast<unsigned char*>(a.Allocate(bytes, stream));
        p[0] = p[bytes - 1] = static_cast<unsigned char>(i);
        live.emplace_back(p, bytes);
      } else {
        const size_t k = rng() % live.size();
        a.Free(live[k].first);
        live[k] = live.back();
        live.pop_back();
      }
    }
    for (auto& [p, b] : live) a.Free(p);
  };
  std::thread t1(work, 1, 1u), t2(work, 2, 2u);
  work(0, 3u);
  t1.join();
  t2.join();
  const MemoryStats st = a.Stats();
  EXPECT_EQ(st.allocated, 0u);
  EXPECT_EQ(st.num_allocs, st.num_frees);
  EXPECT_GT(st.peak_allocated, 0u);
  EXPECT_LE(st.reserved, st.capacity);
}

TEST(AllocatorTest, FreeObserverSeesEveryFreeBeforeTheBlockIsReused) {
  static std::vector<const void*>* freed = new std::vector<const void*>;
  freed->clear();
  SetFreeObserver([](const void* block) { freed->push_back(block); });
  Allocator alloc(0, 1 << 20);
  void* a = alloc.Allocate(1000, 0);
  void* b = alloc.Allocate(5000, 0);
  EXPECT_TRUE(freed->empty());  // allocation is not a free
  alloc.Free(a);
  ASSERT_EQ(freed->size(), 1u);
  EXPECT_EQ((*freed)[0], a);
  void* again = alloc.Allocate(1000, 0);  // reuses a's cached block
  EXPECT_EQ(again, a);
  EXPECT_EQ(freed->size(), 1u);
  alloc.Free(again);
  alloc.Free(b);
  ASSERT_EQ(freed->size(), 3u);
  EXPECT_EQ((*freed)[1], a);
  EXPECT_EQ((*freed)[2], b);
  alloc.EmptyCache();  // returning cached blocks to the host is not a second free
  EXPECT_EQ(freed->size(), 3u);
  SetFreeObserver(nullptr);
  alloc.Free(alloc.Allocate(64, 0));
  EXPECT_EQ(freed->size(), 3u);
}

TEST(AllocatorDeathTest, FreeOfAForeignPointerAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Allocator a(0, 64 * kMiB);
  int x = 0;
  EXPECT_DEATH(a.Free(&x), "did not allocate");
}

TEST(FormatBytesTest, BinaryUnitsTwoDecimals) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1536), "1.50 KiB");
  EXPECT_EQ(FormatBytes(kMiB + kMiB / 5), "1.20 MiB");
  EXPECT_EQ(FormatBytes(4 * kGiB - 10 * kMiB), "3.99 GiB");
}

}  // namespace
}  // namespace trn::rt
