// Kernel benchmarks, each next to a peer measured in the same run:
// - fused rms_norm 4096x4096 f32 vs memcpy and a streaming copy of the same
//   bytes (bytes/s counts read + write for all; "x_memcpy"/"x_streamcopy" are
//   the bandwidth ratios measured interleaved);
// - packed GEMM 1024^3 f32 (FLOP/s), and GEMM vs a naive triple loop at 256^3;
// - linear (x @ w.T) with the weight's pack cached vs packed every call.
// Run: build/trn_core_bench --benchmark_filter='RmsNorm|Memcpy|Gemm'
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "core/kernels/amx.h"
#include "core/kernels/convert.h"
#include "core/kernels/kernels.h"
#include "hwy/aligned_allocator.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace trn::kernels {
namespace {

TensorRef Ref2D(void* data, int64_t rows, int64_t cols, bool transposed = false) {
  TensorRef t;
  t.data = data;
  t.dtype = DType::kFloat32;
  t.ndim = 2;
  t.sizes[0] = rows;
  t.sizes[1] = cols;
  t.strides[0] = transposed ? 1 : cols;
  t.strides[1] = transposed ? rows : 1;
  return t;
}

TensorRef Ref1D(void* data, int64_t n) {
  TensorRef t;
  t.data = data;
  t.ndim = 1;
  t.sizes[0] = n;
  t.strides[0] = 1;
  return t;
}

hwy::AlignedFreeUniquePtr<float[]> Random(size_t n, uint32_t seed) {
  auto p = hwy::AllocateAligned<float>(n);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (size_t i = 0; i < n; ++i) p[i] = dist(rng);
  return p;
}

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A copy loop with non-temporal stores: about the best one core reaches, a
// stricter peer than glibc's memcpy (which is slower than this on some hosts).
void StreamCopy(float* out, const float* in, size_t elems) {
#if defined(__SSE2__)
  size_t i = 0;
  for (; i + 4 <= elems; i += 4) _mm_stream_ps(out + i, _mm_load_ps(in + i));
  for (; i < elems; ++i) out[i] = in[i];
  _mm_sfence();
#else
  std::memcpy(out, in, elems * sizeof(float));
#endif
}

// rms_norm timed per iteration, then memcpy and the streaming copy of the same
// bytes: interleaved, the ratios survive the machine's load changing.
void BM_RmsNormVsMemcpy(benchmark::State& state) {
  const int64_t n = state.range(0);
  const size_t elems = static_cast<size_t>(n * n);
  auto in = Random(elems, 1), weight = Random(static_cast<size_t>(n), 2);
  auto out = hwy::AllocateAligned<float>(elems);
  std::memset(out.get(), 0, elems * sizeof(float));
  const TensorRef in_ref = Ref2D(in.get(), n, n), out_ref = Ref2D(out.get(), n, n);
  const TensorRef w_ref = Ref1D(weight.get(), n);
  double norm_s = 0, copy_s = 0, stream_s = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    const Status st = RmsNorm(out_ref, in_ref, w_ref, 1, 1e-6, TensorRef{});
    const double dt = Seconds(t0);
    state.SetIterationTime(dt);
    norm_s += dt;
    if (!st.ok()) state.SkipWithError(st.error.c_str());
    state.PauseTiming();
    t0 = std::chrono::steady_clock::now();
    std::memcpy(out.get(), in.get(), elems * sizeof(float));
    benchmark::DoNotOptimize(out.get());
    copy_s += Seconds(t0);
    t0 = std::chrono::steady_clock::now();
    StreamCopy(out.get(), in.get(), elems);
    benchmark::DoNotOptimize(out.get());
    stream_s += Seconds(t0);
    state.ResumeTiming();
  }
  const double bytes = 2.0 * static_cast<double>(elems * sizeof(float));
  const double iters = static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(iters * bytes));
  state.counters["memcpy_GB/s"] = bytes * iters / copy_s / 1e9;
  state.counters["streamcopy_GB/s"] = bytes * iters / stream_s / 1e9;
  state.counters["x_memcpy"] = copy_s / norm_s;  // rms_norm bandwidth / memcpy bandwidth
  state.counters["x_streamcopy"] = stream_s / norm_s;
}
BENCHMARK(BM_RmsNormVsMemcpy)->Arg(4096)->UseManualTime()->Unit(benchmark::kMillisecond);

// The peer on its own: memcpy of the bytes rms_norm reads (bytes/s = read + write).
void BM_Memcpy(benchmark::State& state) {
  const size_t elems = static_cast<size_t>(state.range(0) * state.range(0));
  auto in = Random(elems, 1);
  auto out = hwy::AllocateAligned<float>(elems);
  std::memset(out.get(), 0, elems * sizeof(float));
  for (auto _ : state) {
    std::memcpy(out.get(), in.get(), elems * sizeof(float));
    benchmark::DoNotOptimize(out.get());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * 2 * elems * sizeof(float)));
}
BENCHMARK(BM_Memcpy)->Arg(4096)->Unit(benchmark::kMillisecond);


void SetFlops(benchmark::State& state, double flops_per_iter) {
  state.counters["FLOP/s"] =
      benchmark::Counter(flops_per_iter, benchmark::Counter::kIsIterationInvariantRate);
}

// out = a @ b; range(1) = 1: b is a transposed view (linear's w.t()).
void BM_Gemm(benchmark::State& state) {
  const int64_t n = state.range(0);
  const bool bt = state.range(1) != 0;
  const size_t elems = static_cast<size_t>(n * n);
  auto a = Random(elems, 1), b = Random(elems, 2);
  auto c = hwy::AllocateAligned<float>(elems);
  const TensorRef ar = Ref2D(a.get(), n, n), br = Ref2D(b.get(), n, n, bt);
  const TensorRef cr = Ref2D(c.get(), n, n);
  for (auto _ : state) {
    const Status st = Matmul(cr, ar, br, TensorRef{});
    if (!st.ok()) state.SkipWithError(st.error.c_str());
    benchmark::DoNotOptimize(c.get());
  }
  SetFlops(state, 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n));
}
BENCHMARK(BM_Gemm)->Args({1024, 0})->Args({1024, 1})->Args({256, 0})->Unit(benchmark::kMillisecond);

// Times c = x @ w (w seen twice first when `cached`: its pack is made and kept,
// Note [Packed weight cache]) and counts its FLOPs.
void TimeLinear(benchmark::State& state, const TensorRef& c, const TensorRef& x,
                const TensorRef& w, bool cached) {
  ClearPackCache();
  std::shared_ptr<PackedB> packed;
  if (cached) {
    AcquirePackedB(w, w.data, 0);
    packed = AcquirePackedB(w, w.data, 0);
  }
  for (auto _ : state) {
    const Status st = Matmul(c, x, w, TensorRef{}, 1.0, 1.0, packed.get());
    if (!st.ok()) state.SkipWithError(st.error.c_str());
    benchmark::DoNotOptimize(c.data);
  }
  packed.reset();
  ClearPackCache();
  const double m = static_cast<double>(x.sizes[0]), k = static_cast<double>(x.sizes[1]);
  SetFlops(state, 2.0 * m * k * static_cast<double>(w.sizes[1]));
}

// linear: out[m, n] = x[m, k] @ w[n, k].T, the weight's pack cached
// (range(3) = 1, Note [Packed weight cache]) or not (its peer).
void BM_GemmLinear(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const bool cached = state.range(3) != 0;
  auto x = Random(static_cast<size_t>(m * k), 1), w = Random(static_cast<size_t>(n * k), 2);
  auto c = hwy::AllocateAligned<float>(static_cast<size_t>(m * n));
  const TensorRef xr = Ref2D(x.get(), m, k), wr = Ref2D(w.get(), k, n, true);
  const TensorRef cr = Ref2D(c.get(), m, n);
  TimeLinear(state, cr, xr, wr, cached);
  state.counters["weight_B/s"] = benchmark::Counter(
      4.0 * static_cast<double>(n * k), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_GemmLinear)
    ->ArgsProduct({{1, 4, 16}, {4096}, {4096}, {0, 1}})
    ->ArgsProduct({{128}, {256, 1024}, {256, 1024}, {0, 1}})
    // The bench models' linears (bench/bench_models.py, size "bench": M = 2 x 64).
    ->ArgsProduct({{128}, {256}, {128, 512, 688, 768}, {1}})
    ->ArgsProduct({{128}, {688}, {256}, {1}})
    // Mixtral's experts at size "bench": about 64 rows per expert (F.grouped_mm).
    ->ArgsProduct({{64}, {256}, {1376}, {1}})
    ->ArgsProduct({{64}, {688}, {256}, {1}})
    // Short k slices: attention-sized products, the first conv layers.
    ->ArgsProduct({{512}, {64, 128}, {512}, {1}})
    ->ArgsProduct({{1024}, {1024}, {1024}, {0, 1}})
    ->Unit(benchmark::kMillisecond);

// bfloat16 linear: x, w and out bfloat16 (a model run in bfloat16), the weight's
// pack cached; range(3) = 1: on AMX tiles (Note [AMX bf16 GEMM]), 0: the float32
// GEMM on converted operands, its peer.
void BM_GemmLinearBf16(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const bool on_amx = state.range(3) != 0;
  amx::SetEnabled(true);
  if (on_amx && !amx::Available()) {
    state.SkipWithError("this CPU has no AMX-BF16");
    return;
  }
  amx::SetEnabled(on_amx);
  auto bf16 = [](size_t count, uint32_t seed) {
    auto f = Random(count, seed);
    auto h = hwy::AllocateAligned<uint16_t>(count);
    for (size_t i = 0; i < count; ++i) h[i] = internal::F32ToBF16(f[i]);
    return h;
  };
  auto x = bf16(static_cast<size_t>(m * k), 1), w = bf16(static_cast<size_t>(n * k), 2);
  auto c = hwy::AllocateAligned<uint16_t>(static_cast<size_t>(m * n));
  TensorRef xr = Ref2D(x.get(), m, k), wr = Ref2D(w.get(), k, n, true), cr = Ref2D(c.get(), m, n);
  xr.dtype = wr.dtype = cr.dtype = DType::kBFloat16;
  TimeLinear(state, cr, xr, wr, true);
  amx::SetEnabled(true);
}
BENCHMARK(BM_GemmLinearBf16)
    ->ArgsProduct({{128}, {256}, {768}, {0, 1}})
    // wav2vec2's linears at size "bench" (2 x 799 frames).
    ->ArgsProduct({{1598}, {256}, {256, 1024}, {0, 1}})
    ->ArgsProduct({{1598}, {1024}, {256}, {0, 1}})
    ->ArgsProduct({{128}, {1024}, {1024}, {0, 1}})
    ->ArgsProduct({{16}, {4096}, {4096}, {0, 1}})
    ->Unit(benchmark::kMillisecond);

// The textbook i-j-p triple loop, the peer of BM_Gemm/256.
void BM_NaiveGemm(benchmark::State& state) {
  const int64_t n = state.range(0);
  const size_t elems = static_cast<size_t>(n * n);
  auto a = Random(elems, 1), b = Random(elems, 2);
  auto c = hwy::AllocateAligned<float>(elems);
  for (auto _ : state) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        float acc = 0;
        for (int64_t p = 0; p < n; ++p) acc += a[i * n + p] * b[p * n + j];
        c[i * n + j] = acc;
      }
    }
    benchmark::DoNotOptimize(c.get());
  }
  SetFlops(state, 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n));
}
BENCHMARK(BM_NaiveGemm)->Arg(256)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace trn::kernels
