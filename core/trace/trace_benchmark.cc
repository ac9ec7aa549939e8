// Tracer record cost (target <= 25 ns per event), next to its peers: the
// inactive check alone and a plain clock_gettime.
#include <benchmark/benchmark.h>

#include "core/trace/trace.h"

namespace trn::trace {
namespace {

void BM_TraceRecordInactive(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(Wants(RecordKind::kKernel, 0, 0));
}
BENCHMARK(BM_TraceRecordInactive);

// One complete event as the worker records it: two tick reads and an Emit.
void BM_TraceRecordActive(benchmark::State& state) {
  Config cfg;
  cfg.max_events_per_core = ~uint64_t{0};
  Start(cfg);
  Record r;
  r.kind = RecordKind::kKernel;
  r.device = 0;
  r.stream = 0;
  r.name = "bench";
  int64_t n = 0;
  for (auto _ : state) {
    if (Wants(RecordKind::kKernel, 0, 0)) {
      r.start = Ticks();
      r.launch_id = NextLaunchId();
      r.end = Ticks();
      Emit(r);
    }
    // Keep memory bounded: collect every 1M records (excluded from timing).
    if (++n == (1 << 20)) {
      state.PauseTiming();
      Stop();
      Collect();
      Start(cfg);
      n = 0;
      state.ResumeTiming();
    }
  }
  Stop();
  Collect();
}
BENCHMARK(BM_TraceRecordActive);

void BM_PeerClockGettime(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(WallNs());
}
BENCHMARK(BM_PeerClockGettime);

}  // namespace
}  // namespace trn::trace
