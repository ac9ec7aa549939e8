// Elementwise benchmarks, each against a peer timed interleaved in the same run:
// - float16 <-> float32 conversion of a contiguous run: the dispatched
//   F16ToF32Contiguous / F32ToF16Contiguous (F16C where the target has it)
//   vs the scalar F16ToF32 / F32ToF16 loops they replaced ("x_scalar" =
//   scalar time / dispatched time);
// - mul of two 1M-element float16 tensors vs the same in bfloat16 (both
//   through the vectorized runs; "x_bf16" = bf16 time / f16 time, 1.0 means
//   float16 costs what bfloat16 does).
// Run: build/trn_core_bench --benchmark_filter='F16|Half'
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/kernels/convert.h"
#include "core/kernels/kernels.h"

namespace trn::kernels {
namespace {

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The CPU model in the benchmark's context header (results differ by machine).
const bool kCpuContext = [] {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      benchmark::AddCustomContext("elementwise_cpu_model", line.substr(line.find(':') + 2));
      break;
    }
  }
  benchmark::AddCustomContext("elementwise_simd_target", TargetName(ActiveTarget()));
  return true;
}();

std::vector<float> RandomFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-100.0f, 100.0f);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

// arg 0: decode (f16 -> f32), 1: encode (f32 -> f16).
void BM_F16ConvertVsScalar(benchmark::State& state) {
  const bool encode = state.range(0) == 1;
  constexpr int64_t kN = 1 << 20;
  std::vector<float> wide = RandomFloats(kN, 1);
  std::vector<uint16_t> narrow(kN);
  for (int64_t i = 0; i < kN; ++i) narrow[i] = internal::F32ToF16(wide[i]);
  double fast_s = 0, scalar_s = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    if (encode) internal::F32ToF16Contiguous(wide.data(), narrow.data(), kN);
    else internal::F16ToF32Contiguous(narrow.data(), wide.data(), kN);
    benchmark::DoNotOptimize(encode ? static_cast<void*>(narrow.data()) : wide.data());
    const double dt = Seconds(t0);
    state.SetIterationTime(dt);
    fast_s += dt;
    state.PauseTiming();
    t0 = std::chrono::steady_clock::now();
    if (encode) {
      for (int64_t i = 0; i < kN; ++i) narrow[i] = internal::F32ToF16(wide[i]);
    } else {
      for (int64_t i = 0; i < kN; ++i) wide[i] = internal::F16ToF32(narrow[i]);
    }
    benchmark::DoNotOptimize(encode ? static_cast<void*>(narrow.data()) : wide.data());
    scalar_s += Seconds(t0);
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * kN);
  state.counters["x_scalar"] = scalar_s / fast_s;
}
BENCHMARK(BM_F16ConvertVsScalar)->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMicrosecond);

TensorRef Ref1D(void* data, DType dtype, int64_t n) {
  TensorRef t;
  t.data = data;
  t.dtype = dtype;
  t.ndim = 1;
  t.sizes[0] = n;
  t.strides[0] = 1;
  return t;
}

void BM_HalfMulF16VsBF16(benchmark::State& state) {
  constexpr int64_t kN = 1 << 20;
  const std::vector<float> x = RandomFloats(kN, 2), y = RandomFloats(kN, 3);
  std::vector<uint16_t> h[3], b[3];  // a, b, out
  for (auto* v : {h, b}) {
    for (int k = 0; k < 3; ++k) v[k].resize(kN);
  }
  for (int64_t i = 0; i < kN; ++i) {
    h[0][i] = internal::F32ToF16(x[i]), h[1][i] = internal::F32ToF16(y[i]);
    b[0][i] = internal::F32ToBF16(x[i]), b[1][i] = internal::F32ToBF16(y[i]);
  }
  auto refs = [&](std::vector<uint16_t>* v, DType dt) {
    return std::vector<TensorRef>{Ref1D(v[0].data(), dt, kN), Ref1D(v[1].data(), dt, kN),
                                  Ref1D(v[2].data(), dt, kN)};
  };
  const auto rh = refs(h, DType::kFloat16), rb = refs(b, DType::kBFloat16);
  double f16_s = 0, bf16_s = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    Status st = Binary(BinaryOp::kMul, rh[2], rh[0], rh[1]);
    const double dt = Seconds(t0);
    state.SetIterationTime(dt);
    f16_s += dt;
    if (!st.ok()) state.SkipWithError(st.error.c_str());
    state.PauseTiming();
    t0 = std::chrono::steady_clock::now();
    st = Binary(BinaryOp::kMul, rb[2], rb[0], rb[1]);
    bf16_s += Seconds(t0);
    state.ResumeTiming();
  }
  state.SetBytesProcessed(state.iterations() * kN * 6);
  state.counters["x_bf16"] = bf16_s / f16_s;
}
BENCHMARK(BM_HalfMulF16VsBF16)->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace trn::kernels
