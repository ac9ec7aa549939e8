// Host-side cost of a launch: enqueue an empty Task on a core and let its
// worker run it, against the peer of a std::function pushed to a
// mutex-guarded std::deque and called on the same thread (the least any
// queue of type-erased work costs). BM_LaunchVsPeer reports the ratio.
#include <benchmark/benchmark.h>

#include <chrono>
#include <deque>
#include <functional>
#include <mutex>

#include "core/runtime/runtime.h"

namespace trn::rt {
namespace {

Device& BenchDevice() {
  static Device* device = new Device(0, 0, uint64_t{1} << 30);  // leaked like the runtime's
  return *device;
}

const KernelInfo kEmpty = [] {
  KernelInfo info;
  info.name = "empty";
  info.op = "bench::empty";
  return info;
}();

void LaunchBatch(Stream& s, int n) {
  for (int i = 0; i < n; ++i) s.Launch(kEmpty, [] { return Status::Ok(); });
  s.Synchronize();
}

struct Peer {
  std::mutex mu;
  std::deque<std::function<Status()>> queue;
  void Batch(int n) {
    for (int i = 0; i < n; ++i) {
      std::lock_guard<std::mutex> lock(mu);
      queue.emplace_back([] { return Status::Ok(); });
    }
    for (;;) {
      std::function<Status()> f;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (queue.empty()) break;
        f = std::move(queue.front());
        queue.pop_front();
      }
      benchmark::DoNotOptimize(f());
    }
  }
};

// N launches of an empty Task, then one Stream::Synchronize.
void BM_LaunchEmpty(benchmark::State& state) {
  Stream& s = BenchDevice().DefaultStream();
  const int n = static_cast<int>(state.range(0));
  for (auto _ : state) LaunchBatch(s, n);
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_LaunchEmpty)->Arg(1)->Arg(64)->Arg(1024)->UseRealTime();

void BM_DequePeer(benchmark::State& state) {
  Peer peer;
  const int n = static_cast<int>(state.range(0));
  for (auto _ : state) peer.Batch(n);
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_DequePeer)->Arg(1)->Arg(64)->Arg(1024)->UseRealTime();

// Both measured alternately in one loop, so machine noise hits them alike.
void BM_LaunchVsPeer(benchmark::State& state) {
  using Clock = std::chrono::steady_clock;
  Stream& s = BenchDevice().DefaultStream();
  Peer peer;
  const int n = static_cast<int>(state.range(0));
  Clock::duration launch{}, plain{};
  for (auto _ : state) {
    const auto t0 = Clock::now();
    LaunchBatch(s, n);
    const auto t1 = Clock::now();
    peer.Batch(n);
    launch += t1 - t0;
    plain += Clock::now() - t1;
  }
  const double count = static_cast<double>(state.iterations()) * n;
  const double launch_ns = std::chrono::duration<double, std::nano>(launch).count() / count;
  const double peer_ns = std::chrono::duration<double, std::nano>(plain).count() / count;
  state.counters["launch_ns"] = launch_ns;
  state.counters["peer_ns"] = peer_ns;
  state.counters["launch_over_peer"] = launch_ns / peer_ns;
}
BENCHMARK(BM_LaunchVsPeer)->Arg(1)->Arg(64)->Arg(1024)->UseRealTime();

}  // namespace
}  // namespace trn::rt
