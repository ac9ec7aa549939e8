// Compiled RMSNorm f32 (weight, eps) over 4096x4096 and over 128 rows of 256
// (a small transformer's, where the per-row cost shows) side by side with the
// hand-written fused kernels::RmsNorm and with the naive program (fuse=false:
// six single-op kernels, intermediates materialized). Timed interleaved per
// iteration so the ratios survive load changes on a shared machine.
// Counters: x_fused = compiled / fused time (gate <= 1.2), x_naive = compiled /
// naive time (target <= 0.33).
// Run: trn_core_bench --benchmark_filter=CompiledRmsNorm
#include <benchmark/benchmark.h>

#include <chrono>
#include <random>
#include <vector>

#include "core/compiler/graph.h"
#include "core/compiler/program.h"
#include "core/kernels/kernels.h"
#include "hwy/aligned_allocator.h"

namespace trn::compiler {
namespace {

Graph RmsNormGraph(int64_t rows, int64_t h) {
  auto meta = [](std::vector<int64_t> s) {
    Meta m;
    m.sizes = std::move(s);
    return m;
  };
  Graph g;
  const int x = g.AddInput(meta({rows, h}));
  const int w = g.AddInput(meta({h}));
  auto node = [&](Op op, std::vector<int> in, std::vector<int64_t> out) {
    Node n;
    n.op = op;
    n.inputs = std::move(in);
    n.meta = meta(std::move(out));
    return n;
  };
  Node p = node(Op::kPow, {x}, {rows, h});
  p.scalar = 2;
  p.has_scalar = true;
  const int pi = g.AddNode(p);
  Node m = node(Op::kMean, {pi}, {rows, 1});
  m.dims = {-1};
  const int mi = g.AddNode(m);
  Node a = node(Op::kAdd, {mi}, {rows, 1});
  a.scalar = 1e-6;
  a.has_scalar = true;
  const int ai = g.AddNode(a);
  const int ri = g.AddNode(node(Op::kRsqrt, {ai}, {rows, 1}));
  const int yi = g.AddNode(node(Op::kMul, {x, ri}, {rows, h}));
  const int oi = g.AddNode(node(Op::kMul, {yi, w}, {rows, h}));
  g.SetOutputs({oi});
  return g;
}

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Buffers {
  std::vector<hwy::AlignedFreeUniquePtr<float[]>> owned;
  std::vector<void*> base;
};

Buffers Allocate(const Program& p, float* x, float* w) {
  Buffers b;
  for (const Buffer& buf : p.buffers()) {
    if (buf.kind == Buffer::Kind::kInput) {
      b.base.push_back(buf.index == 0 ? x : w);
    } else {
      b.owned.push_back(hwy::AllocateAligned<float>(static_cast<size_t>(buf.numel)));
      std::fill(b.owned.back().get(), b.owned.back().get() + buf.numel, 0.0f);
      b.base.push_back(b.owned.back().get());
    }
  }
  return b;
}

void RunAll(const Program& p, const std::vector<void*>& base) {
  for (const Step& s : p.steps()) {
    const Status st = p.RunKernel(s.index, base);
    if (!st.ok()) std::abort();
  }
}

void BM_CompiledRmsNorm(benchmark::State& state) {
  const int64_t n = state.range(0), h = state.range(1);
  const size_t elems = static_cast<size_t>(n * h);
  auto x = hwy::AllocateAligned<float>(elems);
  auto w = hwy::AllocateAligned<float>(static_cast<size_t>(h));
  auto out = hwy::AllocateAligned<float>(elems);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (size_t i = 0; i < elems; ++i) x[i] = dist(rng);
  for (int64_t i = 0; i < h; ++i) w[i] = dist(rng);
  std::fill(out.get(), out.get() + elems, 0.0f);
  const Graph g = RmsNormGraph(n, h);
  const Program fused = Compile(g), naive = Compile(g, CompileOptions{false});
  Buffers fb = Allocate(fused, x.get(), w.get()), nb = Allocate(naive, x.get(), w.get());
  TensorRef in_ref, out_ref, w_ref, none;
  in_ref.data = x.get();
  out_ref.data = out.get();
  in_ref.ndim = out_ref.ndim = 2;
  in_ref.sizes[0] = out_ref.sizes[0] = n;
  in_ref.sizes[1] = out_ref.sizes[1] = h;
  in_ref.strides[0] = out_ref.strides[0] = h;
  in_ref.strides[1] = out_ref.strides[1] = 1;
  w_ref.data = w.get();
  w_ref.ndim = 1;
  w_ref.sizes[0] = h;
  w_ref.strides[0] = 1;
  double compiled_s = 0, hand_s = 0, naive_s = 0;
  RunAll(fused, fb.base);  // warm up (page faults, register files)
  RunAll(naive, nb.base);
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    RunAll(fused, fb.base);
    const double c = Seconds(t0);
    state.SetIterationTime(c);
    compiled_s += c;
    t0 = std::chrono::steady_clock::now();
    if (!kernels::RmsNorm(out_ref, in_ref, w_ref, 1, 1e-6, none).ok()) std::abort();
    hand_s += Seconds(t0);
    t0 = std::chrono::steady_clock::now();
    RunAll(naive, nb.base);
    naive_s += Seconds(t0);
  }
  state.counters["x_fused"] = compiled_s / hand_s;
  state.counters["x_naive"] = compiled_s / naive_s;
  state.counters["kernels"] = static_cast<double>(fused.kernels().size());
  state.counters["naive_kernels"] = static_cast<double>(naive.kernels().size());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 2 *
                          static_cast<int64_t>(elems * sizeof(float)));
}
BENCHMARK(BM_CompiledRmsNorm)->Args({4096, 4096})->UseManualTime()
    ->Unit(benchmark::kMillisecond)->Iterations(15);
BENCHMARK(BM_CompiledRmsNorm)->Args({128, 256})->UseManualTime()
    ->Unit(benchmark::kMicrosecond)->Iterations(20000);

}  // namespace
}  // namespace trn::compiler
