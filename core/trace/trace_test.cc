#include "core/trace/trace.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <thread>

namespace trn::trace {
namespace {

Record KernelRecord(int device, int stream, uint64_t id) {
  Record r;
  r.kind = RecordKind::kKernel;
  r.device = static_cast<int16_t>(device);
  r.stream = static_cast<int16_t>(stream);
  r.launch_id = id;
  r.start = Ticks();
  r.end = Ticks();
  r.name = "k";
  return r;
}

TEST(TraceClock, TicksAgreeWithTheWallClock) {
  for (int i = 0; i < 5; ++i) {
    int64_t wall = WallNs();
    int64_t traced = TicksToNs(Ticks());
    EXPECT_LT(std::llabs(traced - wall), 200'000) << "tick conversion off by " << traced - wall;
  }
}

TEST(Trace, InactiveSessionWantsNothing) {
  EXPECT_FALSE(Active());
  EXPECT_FALSE(Wants(RecordKind::kKernel, 0, 0));
}

TEST(Trace, CollectsRecordsInWallClockOrder) {
  int64_t before = WallNs();
  ASSERT_TRUE(Start(Config{}));
  EXPECT_FALSE(Start(Config{})) << "only one session at a time";
  for (uint64_t i = 1; i <= 100; ++i) {
    ASSERT_TRUE(Wants(RecordKind::kKernel, 0, 0));
    Emit(KernelRecord(0, 0, i));
  }
  Stop();
  EXPECT_FALSE(Wants(RecordKind::kKernel, 0, 0));
  int64_t after = WallNs();
  Collected c = Collect();
  ASSERT_EQ(c.records.size(), 100u);
  EXPECT_EQ(c.dropped_total, 0u);
  for (size_t i = 0; i < c.records.size(); ++i) {
    const Record& r = c.records[i];
    EXPECT_EQ(r.launch_id, i + 1);
    EXPECT_GE(r.start, before - 200'000);
    EXPECT_LE(r.end, after + 200'000);
    EXPECT_LE(r.start, r.end);
    EXPECT_GT(r.tid, 0);
  }
  // A new session starts empty.
  ASSERT_TRUE(Start(Config{}));
  Stop();
  EXPECT_TRUE(Collect().records.empty());
}

TEST(Trace, FiltersByModeDeviceAndStream) {
  Config cfg;
  cfg.modes = kModeDevice;
  cfg.device_mask = 1u << 1;
  cfg.stream_mask = 1u << 3;
  ASSERT_TRUE(Start(cfg));
  EXPECT_TRUE(Wants(RecordKind::kKernel, 1, 3));
  EXPECT_TRUE(Wants(RecordKind::kCopy, 1, 3));
  EXPECT_FALSE(Wants(RecordKind::kKernel, 0, 3)) << "device 0 not selected";
  EXPECT_FALSE(Wants(RecordKind::kKernel, 1, 0)) << "stream 0 not selected";
  EXPECT_FALSE(Wants(RecordKind::kLaunch, 1, 3)) << "runtime mode off";
  EXPECT_FALSE(Wants(RecordKind::kAlloc, 1, -1)) << "memory mode off";
  EXPECT_FALSE(Wants(RecordKind::kKernel, 99, 0));
  Stop();
  Collect();
}

TEST(Trace, OverflowIsCountedPerDeviceAndNeverBlocks) {
  Config cfg;
  cfg.max_events_per_core = 10;
  ASSERT_TRUE(Start(cfg));
  for (int i = 0; i < 100; ++i) Emit(KernelRecord(0, 0, i + 1));
  for (int i = 0; i < 5; ++i) Emit(KernelRecord(1, 0, i + 1));
  Stop();
  Collected c = Collect();
  EXPECT_EQ(c.records.size(), 15u);
  EXPECT_EQ(c.dropped_per_device[0], 90u);
  EXPECT_EQ(c.dropped_per_device[1], 0u);
  EXPECT_EQ(c.dropped_total, 90u);
}

TEST(Trace, ManyThreadsManyChunks) {
  constexpr int kThreads = 4, kPerThread = 10'000;  // several chunks per thread
  ASSERT_TRUE(Start(Config{}));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < kPerThread; ++i) Emit(KernelRecord(t % 2, t, uint64_t(t) << 32 | i));
    });
  }
  for (auto& th : threads) th.join();
  Stop();
  Collected c = Collect();
  ASSERT_EQ(c.records.size(), size_t{kThreads} * kPerThread);
  std::set<uint64_t> ids;
  for (const Record& r : c.records) {
    EXPECT_EQ(r.stream >> 0, static_cast<int16_t>(r.launch_id >> 32));
    ids.insert(r.launch_id);
  }
  EXPECT_EQ(ids.size(), c.records.size()) << "no record lost or duplicated";
}

TEST(Trace, CorrelationIdsNest) {
  EXPECT_EQ(CurrentCorrelation(), 0u);
  PushCorrelation(7);
  PushCorrelation(9);
  EXPECT_EQ(CurrentCorrelation(), 9u);
  PopCorrelation();
  EXPECT_EQ(CurrentCorrelation(), 7u);
  std::thread([] { EXPECT_EQ(CurrentCorrelation(), 0u) << "per thread"; }).join();
  PopCorrelation();
  EXPECT_EQ(CurrentCorrelation(), 0u);
  PopCorrelation();  // unbalanced pop is harmless
  EXPECT_EQ(CurrentCorrelation(), 0u);
}

TEST(Trace, LaunchIdsAreUniqueAndNonZero) {
  std::set<uint64_t> ids;
  for (int i = 0; i < 1000; ++i) ids.insert(NextLaunchId());
  EXPECT_EQ(ids.size(), 1000u);
  EXPECT_EQ(ids.count(0), 0u);
}

}  // namespace
}  // namespace trn::trace
