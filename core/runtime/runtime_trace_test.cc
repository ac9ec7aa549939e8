// The runtime's trace records: what a profiling session sees of a launch.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <thread>

#include "core/runtime/runtime.h"
#include "core/trace/trace.h"

namespace trn::rt {
namespace {

KernelInfo Info(const char* name, const char* op) {
  KernelInfo k;
  k.name = name;
  k.op = op;
  k.flops = 100;
  k.bytes_read = 8;
  k.bytes_written = 4;
  k.engine = Engine::kTensor;
  return k;
}

TEST(RuntimeTrace, LaunchAndKernelShareALaunchIdAndTheCorrelation) {
  Device dev(0, 0, 1 << 20);
  trace::Config cfg;
  cfg.modes = trace::kModeDevice | trace::kModeRuntime | trace::kModeMemory;
  ASSERT_TRUE(trace::Start(cfg));
  trace::PushCorrelation(42);
  dev.DefaultStream().Launch(Info("k1", "aten::mul"), [] { return Status::Ok(); });
  trace::PopCorrelation();
  char src[16] = {}, dst[16];
  dev.DefaultStream().Memcpy(dst, src, sizeof src, CommandKind::kCopyH2D, "aten::copy_");
  void* p = dev.allocator().Allocate(1000, 0);
  dev.allocator().Free(p);
  dev.Synchronize();
  trace::Stop();
  trace::Collected c = trace::Collect();

  std::map<trace::RecordKind, std::vector<trace::Record>> by_kind;
  for (const auto& r : c.records) by_kind[r.kind].push_back(r);
  ASSERT_EQ(by_kind[trace::RecordKind::kLaunch].size(), 1u);
  ASSERT_EQ(by_kind[trace::RecordKind::kKernel].size(), 1u);
  const trace::Record& launch = by_kind[trace::RecordKind::kLaunch][0];
  const trace::Record& kernel = by_kind[trace::RecordKind::kKernel][0];
  EXPECT_EQ(launch.correlation_id, 42u);
  EXPECT_EQ(kernel.correlation_id, 42u) << "captured at enqueue, not on the worker";
  EXPECT_EQ(launch.launch_id, kernel.launch_id);
  EXPECT_NE(kernel.launch_id, 0u);
  EXPECT_STREQ(kernel.name, "k1");
  EXPECT_STREQ(kernel.op, "aten::mul");
  EXPECT_EQ(kernel.flops, 100u);
  EXPECT_EQ(kernel.engine, Engine::kTensor);
  EXPECT_STREQ(launch.name, "trnLaunchKernel");
  EXPECT_LE(launch.start, kernel.start) << "a kernel cannot start before it is launched";
  EXPECT_NE(launch.tid, kernel.tid) << "host and device records come from different threads";

  ASSERT_EQ(by_kind[trace::RecordKind::kMemcpy].size(), 1u);
  ASSERT_EQ(by_kind[trace::RecordKind::kCopy].size(), 1u);
  EXPECT_EQ(by_kind[trace::RecordKind::kCopy][0].bytes_read, 16u);
  EXPECT_STREQ(by_kind[trace::RecordKind::kCopy][0].name, "Memcpy HtoD");
  EXPECT_STREQ(by_kind[trace::RecordKind::kMemcpy][0].name, "trnMemcpyAsync");
  EXPECT_EQ(by_kind[trace::RecordKind::kCopy][0].launch_id,
            by_kind[trace::RecordKind::kMemcpy][0].launch_id);

  ASSERT_EQ(by_kind[trace::RecordKind::kAlloc].size(), 1u);
  ASSERT_EQ(by_kind[trace::RecordKind::kFree].size(), 1u);
  EXPECT_EQ(by_kind[trace::RecordKind::kAlloc][0].value, 1024);  // rounded to 512 B
  EXPECT_EQ(by_kind[trace::RecordKind::kAlloc][0].in_use, 1024);
  EXPECT_EQ(by_kind[trace::RecordKind::kFree][0].in_use, 0);
  ASSERT_EQ(by_kind[trace::RecordKind::kSynchronize].size(), 1u);
  EXPECT_STREQ(by_kind[trace::RecordKind::kSynchronize][0].name, "trnDeviceSynchronize");
}

TEST(RuntimeTrace, NothingIsRecordedWithoutASession) {
  Device dev(0, 0, 1 << 20);
  dev.DefaultStream().Launch(Info("k", "aten::add"), [] { return Status::Ok(); });
  dev.Synchronize();
  ASSERT_TRUE(trace::Start(trace::Config{}));
  trace::Stop();
  EXPECT_TRUE(trace::Collect().records.empty());
}

TEST(RuntimeTrace, StreamFilterKeepsOnlySelectedStreams) {
  Device dev(1, 1, 1 << 20);
  Stream& other = dev.NewStream();
  trace::Config cfg;
  cfg.modes = trace::kModeDevice;
  cfg.stream_mask = uint64_t{1} << other.id();
  ASSERT_TRUE(trace::Start(cfg));
  dev.DefaultStream().Launch(Info("on_default", "aten::add"), [] { return Status::Ok(); });
  other.Launch(Info("on_other", "aten::add"), [] { return Status::Ok(); });
  dev.Synchronize();
  trace::Stop();
  trace::Collected c = trace::Collect();
  ASSERT_EQ(c.records.size(), 1u);
  EXPECT_STREQ(c.records[0].name, "on_other");
  EXPECT_EQ(c.records[0].device, 1);
  EXPECT_EQ(c.records[0].stream, other.id());
}

// The out-of-memory path returns cached blocks to the host only after the
// core drained: a queued kernel may still read a block its tensor freed.
TEST(RuntimeTrace, OutOfMemoryDrainsTheCoreBeforeReleasingTheCache) {
  Device dev(0, 0, 4 << 20);
  Allocator& a = dev.allocator();
  auto* block = static_cast<float*>(a.Allocate(2 << 20, 0));
  block[0] = 1.0f;
  std::atomic<bool> ran{false};
  float seen = 0;
  dev.DefaultStream().Launch(Info("slow_reader", "aten::add"), [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    seen = block[0];  // the block is cached by now, but must still be ours
    ran = true;
    return Status::Ok();
  });
  a.Free(block);  // the tensor died on the host; its kernel has not run yet
  void* big = a.Allocate(3 << 20, 1);  // other stream: needs the cache released
  EXPECT_TRUE(ran.load()) << "the cache was released while a kernel could still read it";
  EXPECT_EQ(seen, 1.0f);
  a.Free(big);
  dev.Synchronize();
}

}  // namespace
}  // namespace trn::rt

namespace trn::rt {
namespace {

TEST(RuntimeIdle, WaitIdleDrainsButKeepsTheFailureForSynchronize) {
  Device dev(0, 0, 1 << 20);
  std::atomic<bool> gate{false};
  dev.DefaultStream().Launch(Info("blocked", "aten::add"), [&] {
    while (!gate.load()) std::this_thread::yield();
    return Status::Error("boom");
  });
  EXPECT_EQ(dev.PendingCommands(), 1u);
  gate = true;
  dev.WaitIdle();
  EXPECT_EQ(dev.PendingCommands(), 0u);
  EXPECT_THROW(dev.Synchronize(), DeviceError) << "WaitIdle must not swallow the failure";
  EXPECT_NO_THROW(dev.Synchronize());
}

}  // namespace
}  // namespace trn::rt
