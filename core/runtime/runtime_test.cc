// Streams, events, error propagation, devices and env parsing of the runtime.
#include "core/runtime/runtime.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace trn::rt {
namespace {

// Substring check without gmock (the test target links gtest only).
#define EXPECT_CONTAINS(text, part)                                                  \
  EXPECT_NE(std::string(text).find(part), std::string::npos)                         \
      << "expected to contain: " << (part) << "\n  actual: " << (text)

constexpr uint64_t kMiB = uint64_t{1} << 20;

// A latch a Task can block on, to hold a core's worker while the test
// enqueues more work (makes interleaving deterministic).
class Gate {
 public:
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    started_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
  }
  void WaitStarted() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return started_; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool started_ = false;
  bool open_ = false;
};

KernelInfo Info(const char* name, const char* op = "test::op") {
  KernelInfo info;
  info.name = name;
  info.op = op;
  return info;
}

// Owns devices constructed directly (the Runtime singleton reads the env once
// per process). The gate opens before the devices are joined, even when an
// assertion failed midway.
class RuntimeTest : public ::testing::Test {
 protected:
  ~RuntimeTest() override {
    gate_.Open();
    dev1_.reset();
    dev0_.reset();
  }
  Device& dev0() { return *dev0_; }
  Device& dev1() {
    if (!dev1_) dev1_ = std::make_unique<Device>(1, 1, 64 * kMiB);
    return *dev1_;
  }
  // Occupies dev's worker until gate_.Open(); returns once it is running.
  void BlockWorker(Stream& s) {
    s.Launch(Info("gate"), [this] {
      gate_.Wait();
      return Status::Ok();
    });
    gate_.WaitStarted();
  }

  Gate gate_;
  std::unique_ptr<Device> dev0_ = std::make_unique<Device>(0, 0, 64 * kMiB);
  std::unique_ptr<Device> dev1_;
};

TEST_F(RuntimeTest, CommandsOfOneStreamRunInOrder) {
  constexpr int kN = 20000;
  std::vector<int> seen;  // touched only by the worker until Synchronize
  Stream& s = dev0().DefaultStream();
  for (int i = 0; i < kN; ++i) {
    s.Launch(Info("append"), [&seen, i] {
      seen.push_back(i);
      return Status::Ok();
    });
  }
  s.Synchronize();
  ASSERT_EQ(seen.size(), static_cast<size_t>(kN));
  for (int i = 0; i < kN; ++i) ASSERT_EQ(seen[i], i);
  EXPECT_TRUE(s.Query());
}

TEST_F(RuntimeTest, ConcurrentEnqueuersKeepTheirOwnOrder) {
  constexpr int kThreads = 4, kPerThread = 3000;
  std::vector<std::pair<int, int>> seen;
  Stream& s = dev0().NewStream();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        s.Launch(Info("append"), [&seen, t, i] {
          seen.emplace_back(t, i);
          return Status::Ok();
        });
      }
    });
  }
  for (auto& th : threads) th.join();
  s.Synchronize();
  ASSERT_EQ(seen.size(), static_cast<size_t>(kThreads * kPerThread));
  std::vector<int> next(kThreads, 0);
  for (auto [t, i] : seen) ASSERT_EQ(i, next[t]++) << "thread " << t;
}

TEST_F(RuntimeTest, TwoStreamsInterleaveButEachStaysInOrder) {
  constexpr int kN = 200;
  Stream& a = dev0().NewStream();
  Stream& b = dev0().NewStream();
  ASSERT_NE(a.id(), b.id());
  BlockWorker(dev0().DefaultStream());
  std::vector<std::pair<int, int>> seen;  // (stream id, index)
  for (int i = 0; i < kN; ++i) {
    for (Stream* s : {&a, &b}) {
      s->Launch(Info("append"), [&seen, s, i] {
        seen.emplace_back(s->id(), i);
        return Status::Ok();
      });
    }
  }
  EXPECT_FALSE(a.Query());
  gate_.Open();
  dev0().Synchronize();
  ASSERT_EQ(seen.size(), static_cast<size_t>(2 * kN));
  int next_a = 0, next_b = 0, last_a_pos = -1, first_b_pos = -1;
  for (int pos = 0; pos < static_cast<int>(seen.size()); ++pos) {
    auto [id, i] = seen[pos];
    if (id == a.id()) {
      ASSERT_EQ(i, next_a++);
      last_a_pos = pos;
    } else {
      ASSERT_EQ(id, b.id());
      ASSERT_EQ(i, next_b++);
      if (first_b_pos < 0) first_b_pos = pos;
    }
  }
  // Both queues were full when the worker resumed: round-robin interleaves.
  EXPECT_LT(first_b_pos, last_a_pos);
  EXPECT_LE(first_b_pos, 1);
}

TEST_F(RuntimeTest, WaitEventOrdersAcrossStreams) {
  Stream& a = dev0().NewStream();
  Stream& b = dev0().NewStream();
  BlockWorker(dev0().DefaultStream());
  int value = 0;  // worker-only until Synchronize
  int observed = -1;
  Event e;
  for (int i = 0; i < 10; ++i) {
    a.Launch(Info("inc"), [&value] {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      ++value;
      return Status::Ok();
    });
  }
  e.Record(a);
  b.WaitEvent(e);
  b.Launch(Info("observe"), [&] {
    observed = value;
    return Status::Ok();
  });
  // Without the wait, round-robin would run b's command right after a's first.
  gate_.Open();
  b.Synchronize();
  EXPECT_EQ(observed, 10);
  a.Synchronize();
}

TEST_F(RuntimeTest, WaitEventAcrossDevicesWakesTheWaitingCore) {
  std::atomic<int> flag{0};
  int observed = -1;
  Event e;
  dev0().DefaultStream().Launch(Info("slow"), [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    flag.store(1);
    return Status::Ok();
  });
  e.Record(dev0().DefaultStream());
  EXPECT_EQ(e.device_index(), 0);
  Stream& s1 = dev1().NewStream();
  s1.WaitEvent(e);
  s1.Launch(Info("observe"), [&] {
    observed = flag.load();
    return Status::Ok();
  });
  s1.Synchronize();  // hangs if completing the event does not wake dev1's worker
  EXPECT_EQ(observed, 1);
  EXPECT_TRUE(e.Query());
}

// Note [Host spin] (runtime.cc): a waiting host thread polls for a bounded
// while, then sleeps. A wait far longer than the poll must cost little CPU,
// and each kind of synchronize still returns once the work is done.
TEST_F(RuntimeTest, LongHostWaitsSleepAfterPolling) {
  Stream& s = dev0().DefaultStream();
  BlockWorker(s);
  Event e;
  e.Record(s);
  std::atomic<int> returned{0};
  double cpu_ms[3] = {};
  auto waiter = [&](int which) {
    return std::thread([&, which] {
      timespec t0{}, t1{};
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
      if (which == 0) s.Synchronize();
      if (which == 1) e.Synchronize();
      if (which == 2) dev0().Synchronize();
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
      cpu_ms[which] = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) * 1e-6;
      returned.fetch_add(1);
    });
  };
  std::thread w[3] = {waiter(0), waiter(1), waiter(2)};
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_EQ(returned.load(), 0) << "a synchronize returned while the stream's work was blocked";
  gate_.Open();
  for (auto& t : w) t.join();
  EXPECT_EQ(returned.load(), 3);
  // The poll lasts 20 ms; a busy wait would have used about 400 ms.
  for (double ms : cpu_ms) EXPECT_LT(ms, 200.0);
}

TEST_F(RuntimeTest, WaitOnNeverRecordedOrCompletedEventDoesNotBlock) {
  Event never;
  int ran = 0;
  Stream& s = dev0().DefaultStream();
  s.WaitEvent(never);
  Event done;
  done.Record(s);
  done.Synchronize();
  s.WaitEvent(done);
  s.Launch(Info("run"), [&] {
    ++ran;
    return Status::Ok();
  });
  s.Synchronize();
  EXPECT_EQ(ran, 1);
}

TEST_F(RuntimeTest, UnrecordedEventBehavesLikeCuda) {
  Event e;
  EXPECT_TRUE(e.Query());
  EXPECT_FALSE(e.was_recorded());
  EXPECT_EQ(e.device_index(), -1);
  EXPECT_EQ(e.TimestampNs(), 0);
  e.Synchronize();  // returns at once
  Event other;
  other.Record(dev0().DefaultStream());
  other.Synchronize();
  try {
    e.ElapsedMs(other);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& err) {
    EXPECT_CONTAINS(err.what(), "start event was never recorded");
  }
  EXPECT_THROW(other.ElapsedMs(e), InvalidArgument);
}

TEST_F(RuntimeTest, EventQuerySynchronizeAndElapsedTime) {
  Stream& s = dev0().DefaultStream();
  BlockWorker(s);
  Event start, end;
  start.Record(s);
  s.Launch(Info("sleep"), [] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return Status::Ok();
  });
  end.Record(s);
  EXPECT_TRUE(start.was_recorded());
  EXPECT_FALSE(start.Query());
  EXPECT_EQ(start.TimestampNs(), 0);
  try {
    start.ElapsedMs(end);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& err) {
    EXPECT_CONTAINS(err.what(), "has not completed");
  }
  const int64_t before = NowNs();
  gate_.Open();
  end.Synchronize();
  const int64_t after = NowNs();
  EXPECT_TRUE(start.Query());
  EXPECT_TRUE(end.Query());
  EXPECT_GE(start.TimestampNs(), before);
  EXPECT_LE(end.TimestampNs(), after);
  const double ms = start.ElapsedMs(end);
  EXPECT_GE(ms, 19.5);  // at least the sleep (small slack for wall-clock slewing)
  EXPECT_LT(ms, 10000.0);
  EXPECT_DOUBLE_EQ(ms, (end.TimestampNs() - start.TimestampNs()) / 1e6);
}

TEST_F(RuntimeTest, ReRecordingRefersToTheLatestRecording) {
  Stream& s = dev0().DefaultStream();
  Event e;
  e.Record(s);
  e.Synchronize();
  const int64_t first = e.TimestampNs();
  BlockWorker(s);
  e.Record(s);
  EXPECT_FALSE(e.Query());  // the new recording is pending
  gate_.Open();
  e.Synchronize();
  EXPECT_GT(e.TimestampNs(), first);
}

TEST_F(RuntimeTest, FailedKernelIsReportedAtSynchronizeAndDeviceStaysUsable) {
  Stream& s = dev0().DefaultStream();
  int later = 0;
  s.Launch(Info("index_select_f32", "aten::index_select"),
           [] { return Status::Error("index 7 is out of range for dimension of size 5"); });
  s.Launch(Info("other_f32", "aten::other"), [] { return Status::Error("second failure"); });
  s.Launch(Info("later"), [&] {
    ++later;
    return Status::Ok();
  });
  try {
    s.Synchronize();
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& err) {
    EXPECT_STREQ(err.what(),
                 "trn kernel 'index_select_f32' (aten::index_select) failed on trn:0 stream 0: "
                 "index 7 is out of range for dimension of size 5");
  }
  EXPECT_EQ(later, 1);  // commands after the failure still ran
  s.Synchronize();      // the error was cleared
  s.Launch(Info("again"), [&] {
    ++later;
    return Status::Ok();
  });
  s.Synchronize();
  EXPECT_EQ(later, 2);
}

TEST_F(RuntimeTest, DeviceAndEventSynchronizeReportFailures) {
  Stream& s = dev0().NewStream();
  s.Launch(Info("mul_f32", "aten::mul"), [] { return Status::Error("bad"); });
  try {
    dev0().Synchronize();
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& err) {
    EXPECT_CONTAINS(err.what(), "'mul_f32' (aten::mul) failed on trn:0 stream " +
                                      std::to_string(s.id()) + ": bad");
  }
  dev0().Synchronize();

  Event e;
  s.Launch(Info("div_f32", "aten::div"), [] { return Status::Error("worse"); });
  e.Record(s);
  try {
    e.Synchronize();
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& err) {
    EXPECT_CONTAINS(err.what(), "'div_f32' (aten::div)");
  }
  s.Synchronize();  // cleared by the event synchronize
}

TEST_F(RuntimeTest, DeviceSynchronizeReportsTheEarliestFailure) {
  Stream& a = dev0().NewStream();
  Stream& b = dev0().NewStream();
  a.Launch(Info("first"), [] { return Status::Error("e1"); });
  Event after_a;
  after_a.Record(a);
  b.WaitEvent(after_a);
  b.Launch(Info("second"), [] { return Status::Error("e2"); });
  try {
    dev0().Synchronize();
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& err) {
    EXPECT_CONTAINS(err.what(), "'first' (test::op) failed on trn:0 stream " +
                                    std::to_string(a.id()) + ": e1");
    EXPECT_CONTAINS(err.what(), "and 1 more failed streams");
    EXPECT_EQ(std::string(err.what()).find("e2"), std::string::npos);
  }
  dev0().Synchronize();  // both cleared
  a.Synchronize();
  b.Synchronize();
}

TEST_F(RuntimeTest, ThrowingTaskDoesNotKillTheWorker) {
  Stream& s = dev0().DefaultStream();
  s.Launch(Info("thrower", "aten::boom"), []() -> Status { throw std::runtime_error("boom"); });
  try {
    s.Synchronize();
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& err) {
    EXPECT_CONTAINS(err.what(), "'thrower' (aten::boom) failed on trn:0 stream 0");
    EXPECT_CONTAINS(err.what(), "boom");
  }
  s.Launch(Info("int_thrower"), []() -> Status { throw 42; });
  EXPECT_THROW(s.Synchronize(), DeviceError);
  s.HostCallback([] { throw std::logic_error("callback broke"); });
  try {
    s.Synchronize();
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& err) {
    EXPECT_CONTAINS(err.what(), "host callback failed on trn:0 stream 0");
    EXPECT_CONTAINS(err.what(), "callback broke");
  }
  int ran = 0;
  s.Launch(Info("ok"), [&] {
    ++ran;
    return Status::Ok();
  });
  s.Synchronize();
  EXPECT_EQ(ran, 1);
}

TEST_F(RuntimeTest, MemcpyAndHostCallbackRunInStreamOrder) {
  Stream& s = dev0().DefaultStream();
  std::vector<char> src(1000), dst(1000, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 7);
  auto keepalive = std::make_shared<int>(1);
  std::weak_ptr<int> watch = keepalive;
  BlockWorker(s);
  s.Memcpy(dst.data(), src.data(), src.size(), CommandKind::kCopyH2D, "aten::_copy_from",
           std::move(keepalive));
  bool copied_before_callback = false;
  s.HostCallback([&] { copied_before_callback = std::memcmp(dst.data(), src.data(), 1000) == 0; });
  EXPECT_FALSE(watch.expired());  // the queued copy holds it
  gate_.Open();
  s.Synchronize();
  EXPECT_EQ(dst, src);
  EXPECT_TRUE(copied_before_callback);
  EXPECT_TRUE(watch.expired());  // released once the copy ran
}

TEST_F(RuntimeTest, StreamPoolHandsOutIdsRoundRobin) {
  Device& d = dev0();
  EXPECT_EQ(d.num_streams(), 1);
  EXPECT_EQ(d.DefaultStream().id(), 0);
  EXPECT_EQ(&d.GetStream(0), &d.DefaultStream());
  EXPECT_THROW(d.GetStream(3), InvalidArgument);  // not handed out yet
  std::vector<Stream*> first;
  for (int i = 1; i <= Device::kStreamPoolSize; ++i) {
    Stream& s = d.NewStream();
    EXPECT_EQ(s.id(), i);
    EXPECT_EQ(s.device_index(), 0);
    EXPECT_EQ(&s.device(), &d);
    EXPECT_EQ(&d.GetStream(i), &s);
    first.push_back(&s);
  }
  EXPECT_EQ(d.num_streams(), Device::kStreamPoolSize + 1);
  EXPECT_EQ(&d.NewStream(), first[0]);  // wraps around, pointers stable
  EXPECT_EQ(&d.NewStream(), first[1]);
  EXPECT_EQ(d.num_streams(), Device::kStreamPoolSize + 1);
  try {
    d.GetStream(Device::kStreamPoolSize + 1);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& err) {
    EXPECT_CONTAINS(err.what(), "stream id 33 is invalid on trn:0");
  }
  EXPECT_THROW(d.GetStream(-1), InvalidArgument);
}

TEST_F(RuntimeTest, DestroyingADeviceRunsWhatWasQueued) {
  std::atomic<int> ran{0};
  for (int i = 0; i < 100; ++i) {
    dev0().DefaultStream().Launch(Info("count"), [&] {
      ran.fetch_add(1);
      return Status::Ok();
    });
  }
  dev0_.reset();
  EXPECT_EQ(ran.load(), 100);
}

// Note [Launch queue] under load: producers on several threads and streams,
// the worker crossing segment boundaries while they enqueue, host threads
// synchronizing and querying concurrently, and idle gaps around the spin
// time so that the worker keeps falling asleep and being woken.
TEST_F(RuntimeTest, LaunchQueueStressManyProducersStreamsAndWaiters) {
  constexpr int kThreads = 4, kPerThread = 5000;
  Stream* streams[2] = {&dev0().DefaultStream(), &dev0().NewStream()};
  struct Seen {
    std::vector<std::pair<int, int>> order;  // touched only by the worker
  } seen[2];
  std::atomic<int> ran{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const int which = t % 2;
      Stream& s = *streams[which];
      for (int i = 0; i < kPerThread; ++i) {
        s.Launch(Info("append"), [&seen, &ran, which, t, i] {
          seen[which].order.emplace_back(t, i);
          ran.fetch_add(1, std::memory_order_relaxed);
          return Status::Ok();
        });
        if (i % 997 == 0) s.Synchronize();  // a waiter while others enqueue
        if (i % 1500 == 0) std::this_thread::sleep_for(std::chrono::microseconds(60 * t));
        if (i % 500 == 0) (void)s.Query();
      }
    });
  }
  threads.emplace_back([&] {  // a pure waiter
    for (int k = 0; k < 50; ++k) {
      dev0().Synchronize();
      EXPECT_LE(dev0().PendingCommands(), uint64_t{kThreads} * kPerThread);
    }
  });
  for (auto& th : threads) th.join();
  dev0().Synchronize();
  EXPECT_EQ(ran.load(), kThreads * kPerThread);
  EXPECT_EQ(dev0().PendingCommands(), 0u);
  for (int which = 0; which < 2; ++which) {
    EXPECT_TRUE(streams[which]->Query());
    ASSERT_EQ(seen[which].order.size(), static_cast<size_t>(kThreads / 2 * kPerThread));
    std::vector<int> next(kThreads, 0);
    for (auto [t, i] : seen[which].order) {
      ASSERT_EQ(t % 2, which);
      ASSERT_EQ(i, next[t]++) << "thread " << t;
    }
  }
}

// A launch after the worker fell asleep must wake it (no lost wake-up): gaps
// below, around and above Note [Worker spin]'s 50 us.
TEST_F(RuntimeTest, LaunchAfterIdleGapsAlwaysRuns) {
  Stream& s = dev0().DefaultStream();
  int ran = 0;
  for (int i = 0; i < 300; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds((i * 37) % 200));
    s.Launch(Info("one"), [&ran] {
      ++ran;
      return Status::Ok();
    });
    if (i % 3 == 0) s.Synchronize();
  }
  s.Synchronize();
  EXPECT_EQ(ran, 300);
}

// Note [Inline tasks]: small and large captures, move-only captures, and
// captures destroyed on the worker before Synchronize returns.
TEST_F(RuntimeTest, TasksHoldSmallLargeAndMoveOnlyCapturesUntilTheyRan) {
  Stream& s = dev0().DefaultStream();
  auto alive = std::make_shared<int>(7);
  std::weak_ptr<int> watch = alive;
  struct Big {
    char bytes[4 * Task::kInlineBytes];
  } big{};
  big.bytes[sizeof big.bytes - 1] = 42;
  auto owned = std::make_unique<int>(5);
  int sum = 0;
  s.Launch(Info("small"), [&sum, p = std::move(alive)] {
    sum += *p;
    return Status::Ok();
  });
  s.Launch(Info("large"), [&sum, big] {
    sum += big.bytes[sizeof big.bytes - 1];
    return Status::Ok();
  });
  s.Launch(Info("move_only"), [&sum, q = std::move(owned)] {
    sum += *q;
    return Status::Ok();
  });
  s.Synchronize();
  EXPECT_EQ(sum, 7 + 42 + 5);
  EXPECT_TRUE(watch.expired()) << "a finished command still holds its captures";

  Task moved = [] { return Status::Error("moved"); };
  Task target = std::move(moved);
  EXPECT_TRUE(moved == nullptr);
  ASSERT_FALSE(target == nullptr);
  EXPECT_EQ(target().error, "moved");
  target = nullptr;
  EXPECT_TRUE(target == nullptr);
}

// The names users see (Note [One name per thing]), spelled out independently.
TEST(RuntimeNamesTest, EngineCopyAndRuntimeCallNames) {
  EXPECT_STREQ(EngineName(Engine::kTensor), "tensor");
  EXPECT_STREQ(EngineName(Engine::kVector), "vector");
  EXPECT_STREQ(EngineName(Engine::kScalar), "scalar");
  EXPECT_STREQ(EngineName(Engine::kDma), "dma");
  EXPECT_STREQ(CopyName(CommandKind::kCopyH2D), "Memcpy HtoD");
  EXPECT_STREQ(CopyName(CommandKind::kCopyD2H), "Memcpy DtoH");
  EXPECT_STREQ(CopyName(CommandKind::kCopyD2D), "Memcpy DtoD");
  EXPECT_STREQ(CopyName(CommandKind::kCopyH2H), "Memcpy HtoH");
  EXPECT_STREQ(RuntimeCallName(RuntimeCall::kLaunchKernel), "trnLaunchKernel");
  EXPECT_STREQ(RuntimeCallName(RuntimeCall::kMemcpyAsync), "trnMemcpyAsync");
  EXPECT_STREQ(RuntimeCallName(RuntimeCall::kStreamSynchronize), "trnStreamSynchronize");
  EXPECT_STREQ(RuntimeCallName(RuntimeCall::kDeviceSynchronize), "trnDeviceSynchronize");
  EXPECT_STREQ(RuntimeCallName(RuntimeCall::kEventSynchronize), "trnEventSynchronize");
  EXPECT_STREQ(RuntimeCallName(RuntimeCall::kEventRecord), "trnEventRecord");
  EXPECT_STREQ(RuntimeCallName(RuntimeCall::kStreamWaitEvent), "trnStreamWaitEvent");
}

TEST(RuntimeClockTest, NowNsIsUnixEpochNanoseconds) {
  const int64_t sys = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  const int64_t now = NowNs();
  EXPECT_LT(std::abs(now - sys), int64_t{1'000'000'000});
}

// ---- Environment ----------------------------------------------------------------

TEST(ParseVisibleCoresTest, AcceptsIdsRangesAndLists) {
  using V = std::vector<int>;
  EXPECT_EQ(Runtime::ParseVisibleCores("0-1"), (V{0, 1}));
  EXPECT_EQ(Runtime::ParseVisibleCores("0,2"), (V{0, 2}));
  EXPECT_EQ(Runtime::ParseVisibleCores("3"), (V{3}));
  EXPECT_EQ(Runtime::ParseVisibleCores("0-1,4"), (V{0, 1, 4}));
  EXPECT_EQ(Runtime::ParseVisibleCores("5,1-2"), (V{5, 1, 2}));  // listed order = index order
  EXPECT_EQ(Runtime::ParseVisibleCores(" 2 - 3 , 7 "), (V{2, 3, 7}));
  EXPECT_EQ(Runtime::ParseVisibleCores("0-63").size(), 64u);
}

TEST(ParseVisibleCoresTest, RejectsBadSpecsNamingTheValue) {
  for (const char* bad : {"", " ", "abc", "1,", ",1", "1,,2", "-1", "1-", "3-1", "0,0", "0-2,1",
                          "0-64", "1.5", "0x1", "1 2", "99999999999"}) {
    try {
      Runtime::ParseVisibleCores(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const InvalidArgument& err) {
      EXPECT_CONTAINS(err.what(), std::string("TRN_VISIBLE_CORES='") + bad + "'");
      EXPECT_CONTAINS(err.what(), "'0-1', '0,2', '3' or '0-1,4'");
    }
  }
  auto why = [](const char* spec) {
    try {
      Runtime::ParseVisibleCores(spec);
    } catch (const InvalidArgument& err) {
      return std::string(err.what());
    }
    return std::string("accepted");
  };
  EXPECT_CONTAINS(why("3-1"), "range '3-1' is descending");
  EXPECT_CONTAINS(why("0,1,0"), "0 is listed twice");
  EXPECT_CONTAINS(why("0-64"), "more than 64 ids");
}

TEST(ParseIndexListTest, NamesWhatItParsesAndHonoursTheLimit) {
  EXPECT_EQ(ParseIndexList("2,0-1", "streams", 3), (std::vector<int>{2, 0, 1}));
  try {
    ParseIndexList("0-3", "ProfileConfig: streams", 3);
    ADD_FAILURE() << "accepted four ids with a limit of three";
  } catch (const InvalidArgument& err) {
    EXPECT_CONTAINS(err.what(), "ProfileConfig: streams='0-3' is invalid: more than 3 ids");
  }
}

TEST(ParseMemorySizeTest, AcceptsBytesAndBinarySuffixes) {
  EXPECT_EQ(Runtime::ParseMemorySize("1073741824"), uint64_t{1} << 30);
  EXPECT_EQ(Runtime::ParseMemorySize("512"), 512u);
  EXPECT_EQ(Runtime::ParseMemorySize("512B"), 512u);
  EXPECT_EQ(Runtime::ParseMemorySize("4K"), 4096u);
  EXPECT_EQ(Runtime::ParseMemorySize("4KiB"), 4096u);
  EXPECT_EQ(Runtime::ParseMemorySize("64M"), 64 * kMiB);
  EXPECT_EQ(Runtime::ParseMemorySize("64mib"), 64 * kMiB);
  EXPECT_EQ(Runtime::ParseMemorySize("4G"), uint64_t{4} << 30);
  EXPECT_EQ(Runtime::ParseMemorySize(" 2 GiB "), uint64_t{2} << 30);
  EXPECT_EQ(Runtime::ParseMemorySize("3GB"), uint64_t{3} << 30);
}

TEST(ParseMemorySizeTest, RejectsBadSpecsNamingTheValue) {
  for (const char* bad : {"", "G", "abc", "-1", "0", "0G", "1.5G", "4X", "4 GiBs", "1e9",
                          "99999999999999999999", "17179869184G"}) {
    try {
      Runtime::ParseMemorySize(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const InvalidArgument& err) {
      EXPECT_CONTAINS(err.what(), std::string("TRN_DEVICE_MEMORY='") + bad + "'");
      EXPECT_CONTAINS(err.what(), "'4G'");
    }
  }
}

// The only test that touches the singleton: it reads the env once, so set it first.
TEST(RuntimeSingletonTest, CreatesDevicesFromTheEnvironment) {
  setenv("TRN_VISIBLE_CORES", "0,2,x", 1);
  EXPECT_THROW(Runtime::Get(), InvalidArgument);  // invalid env: the next call retries
  setenv("TRN_VISIBLE_CORES", "0,2", 1);
  setenv("TRN_DEVICE_MEMORY", "64M", 1);
  Runtime& rt = Runtime::Get();
  EXPECT_EQ(&rt, &Runtime::Get());
  ASSERT_EQ(rt.device_count(), 2);
  EXPECT_EQ(rt.device(0).index(), 0);
  EXPECT_EQ(rt.device(0).physical_core(), 0);
  EXPECT_EQ(rt.device(1).index(), 1);
  EXPECT_EQ(rt.device(1).physical_core(), 2);
  EXPECT_EQ(rt.device(1).allocator().Stats().capacity, 64 * kMiB);
  try {
    rt.device(5);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& err) {
    EXPECT_STREQ(err.what(),
                 "trn device index 5 is out of range: 2 devices are visible "
                 "(TRN_VISIBLE_CORES=0,2)");
  }
  EXPECT_THROW(rt.device(-1), InvalidArgument);

  // SynchronizeAll drains every device and reports a failure on any of them.
  std::atomic<int> ran{0};
  rt.device(1).DefaultStream().Launch(Info("fail_f32", "aten::fail"),
                                       [] { return Status::Error("nope"); });
  rt.device(0).DefaultStream().Launch(Info("ok"), [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ran.fetch_add(1);
    return Status::Ok();
  });
  try {
    rt.SynchronizeAll();
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& err) {
    EXPECT_CONTAINS(err.what(), "'fail_f32' (aten::fail) failed on trn:1 stream 0: nope");
  }
  EXPECT_EQ(ran.load(), 1);
  rt.SynchronizeAll();
}

}  // namespace
}  // namespace trn::rt
