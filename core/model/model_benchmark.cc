// Simulation speed (issue 11: at least 10 M simulated instructions per second):
// the basic tiled matmul of the NKI tutorial, 4096 x 8192 x 8192 fp32 on trn2
// (132 k instructions, 526 k DMA transfers).
#include <benchmark/benchmark.h>

#include "core/model/simulator.h"
#include "core/model/tiled_matmul.h"

namespace trn::model {
namespace {

void BM_SimulateBasicTiledMatmul(benchmark::State& state) {
  const isa::Executable x = BasicTiledMatmul(4096, 8192, 8192, DType::kFloat32, isa::Target::kTrn2);
  SimOptions o;
  o.record_dependencies = o.record_transfers = state.range(0) != 0;
  Timeline t;
  for (auto _ : state) {
    const Status s = Simulate(x, o, &t);
    benchmark::DoNotOptimize(s);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(x.instructions.size()));
  state.counters["modelled_ms"] = t.total_ns / 1e6;
  state.counters["target_instr_per_s"] = 10e6;
}
// Arg 0: timing only; 1: also the dependencies and DMA transfers a trace shows.
BENCHMARK(BM_SimulateBasicTiledMatmul)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace trn::model
