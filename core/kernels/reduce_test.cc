// Reductions and softmax on every compiled SIMD target against double
// references, over dtypes, every dim mask of 1-3-D shapes and odd layouts.
//
// Tolerances: sum/mean |err| <= 1e-5 * sum|x| (float32 accumulation; the
// worst case grows with n, four vector accumulators keep it far below this)
// plus one storage ulp for bf16/f16; amax/amin/argmax and integer sums exact;
// softmax 1e-5 relative + 1e-7 absolute, log_softmax 1e-5 relative + 2e-6
// absolute (plus one storage ulp); var/std and mean 1e-6 relative (double
// accumulation) plus one storage ulp; vector norms 1e-6 relative.

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "core/kernels/kernels.h"
#include "core/kernels/kernels_test_util.h"

namespace trn::kernels {
namespace {

using testing::AllLayouts;
using testing::CheckClose;
using testing::Empty;
using testing::ForEachTarget;
using testing::Layout;
using testing::LayoutName;
using testing::MakeRandom;
using testing::RoundTo;
using testing::TestTensor;
using testing::kAllTypes;


std::vector<std::vector<int64_t>> Shapes() {
  return {{}, {1}, {17}, {4099}, {3, 1000}, {2, 3, 17}, {5, 1, 33}, {0, 3}, {4, 0}};
}

std::string Ctx(DType dt, Layout l, const std::vector<int64_t>& shape, uint32_t mask) {
  std::string s = std::string(DTypeName(dt)) + " " + LayoutName(l) + " [";
  for (int64_t d : shape) s += std::to_string(d) + ",";
  return s + "] mask " + std::to_string(mask);
}

std::vector<int64_t> KeepDim(const std::vector<int64_t>& shape, uint32_t mask) {
  std::vector<int64_t> out = shape;
  for (size_t d = 0; d < shape.size(); ++d) {
    if ((mask >> d) & 1) out[d] = 1;
  }
  return out;
}

// {output elements, elements reduced into each} of a reduction over `mask`.
std::pair<int64_t, int64_t> Extent(const std::vector<int64_t>& shape, uint32_t mask) {
  int64_t onumel = 1, count = 1;
  for (size_t d = 0; d < shape.size(); ++d) ((mask >> d) & 1 ? count : onumel) *= shape[d];
  return {onumel, count};
}

// Logical index of `in` -> index of the keepdim output it reduces into.
int64_t OutIndex(const std::vector<int64_t>& shape, uint32_t mask, int64_t i) {
  int64_t o = 0, scale = 1;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    const int64_t idx = i % shape[d];
    i /= shape[d];
    if (!((mask >> d) & 1)) o += idx * scale, scale *= shape[d];
  }
  return o;
}

double Compute(DType dt, double v) { return IsFloating(dt) ? static_cast<float>(v) : v; }

TEST(Reduce, SumMeanAmaxAminOverEveryMaskOnEveryTarget) {
  ForEachTarget([](const char*) {
    for (DType dt : kAllTypes) {
      uint32_t seed = 1;
      for (const auto& shape : Shapes()) {
        const uint32_t nmask = 1u << shape.size();
        for (uint32_t mask = 0; mask < nmask; ++mask) {
          for (Layout l : AllLayouts()) {
            TestTensor in = MakeRandom(dt, shape, l, seed++, -3, 3);
            const auto osizes = KeepDim(shape, mask);
            const auto [onumel, count] = Extent(shape, mask);
            std::vector<double> sum(onumel, 0), asum(onumel, 0), mx(onumel, -INFINITY),
                mn(onumel, INFINITY);
            for (int64_t i = 0; i < in.numel(); ++i) {
              const int64_t o = OutIndex(shape, mask, i);
              const double v = Compute(dt, in.At(i));
              sum[o] += v, asum[o] += std::fabs(v);
              mx[o] = std::max(mx[o], v), mn[o] = std::min(mn[o], v);
            }
            for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kAmax, ReduceOp::kAmin}) {
              const bool floating = IsFloating(dt);
              if (op == ReduceOp::kMean && !floating) continue;
              const DType odt = op == ReduceOp::kSum && !floating ? DType::kInt64
                                : op == ReduceOp::kMean || op == ReduceOp::kSum ? dt
                                                                                 : dt;
              TestTensor out = Empty(odt, osizes);
              const Status st = Reduce(op, out.ref, in.ref, mask);
              const std::string ctx = Ctx(dt, l, shape, mask) + " op " + std::to_string(int(op));
              if (count == 0 && onumel > 0 && (op == ReduceOp::kAmax || op == ReduceOp::kAmin)) {
                EXPECT_FALSE(st.ok()) << ctx;  // torch errors on an empty max
                EXPECT_NE(st.error.find("empty"), std::string::npos) << st.error;
                continue;
              }
              ASSERT_TRUE(st.ok()) << ctx << ": " << st.error;
              for (int64_t o = 0; o < onumel; ++o) {
                double e, tol = 0;
                switch (op) {
                  case ReduceOp::kSum: e = sum[o], tol = 1e-5 * asum[o]; break;
                  case ReduceOp::kMean:
                    e = count ? sum[o] / count : NAN, tol = count ? 1e-5 * asum[o] / count : 0;
                    break;
                  case ReduceOp::kAmax: e = mx[o]; break;
                  default: e = mn[o]; break;
                }
                if (floating) tol += testing::Ulp(odt, e);
                ASSERT_EQ(CheckClose(out.At(o), RoundTo(odt, e), 0, tol), "") << ctx << " at " << o;
              }
            }
          }
        }
      }
    }
  });
}

TEST(Reduce, ArgmaxArgminFirstIndexTiesAndNaN) {
  ForEachTarget([](const char*) {
    for (ReduceOp op : {ReduceOp::kArgmax, ReduceOp::kArgmin}) {
    const bool is_max = op == ReduceOp::kArgmax;
    for (DType dt : kAllTypes) {
      uint32_t seed = 9;
      for (const auto& shape : std::vector<std::vector<int64_t>>{{17}, {4099}, {3, 1000}, {2, 3, 17}}) {
        for (int dim = 0; dim < static_cast<int>(shape.size()); ++dim) {
          for (Layout l : AllLayouts()) {
            // Few distinct values: ties are everywhere.
            TestTensor in = MakeRandom(dt, shape, l, seed++, -3, 3);
            for (int64_t i = 0; i < in.numel(); ++i) in.Set(i, std::round(in.At(i)));
            const uint32_t mask = 1u << dim;
            TestTensor out = Empty(DType::kInt64, KeepDim(shape, mask));
            ASSERT_TRUE(Reduce(op, out.ref, in.ref, mask).ok());
            std::vector<int64_t> best(out.numel(), -1);
            std::vector<double> best_v(out.numel(), 0);
            for (int64_t i = 0; i < in.numel(); ++i) {  // row-major: along-dim index ascends
              const int64_t o = OutIndex(shape, mask, i);
              int64_t j = i;
              for (int d = static_cast<int>(shape.size()) - 1; d > dim; --d) j /= shape[d];
              j %= shape[dim];
              const double v = in.At(i);
              if (best[o] < 0 || (is_max ? v > best_v[o] : v < best_v[o])) best[o] = j, best_v[o] = v;
            }
            for (int64_t o = 0; o < out.numel(); ++o) {
              ASSERT_EQ(out.AtInt(o), best[o]) << Ctx(dt, l, shape, mask) << " at " << o;
            }
          }
        }
      }
    }
    }
    // NaN is the maximum, first NaN wins (torch), for argmin too.
    TestTensor v = Empty(DType::kFloat32, {6});
    const double xs[] = {1, 5, NAN, 7, NAN, 2};
    for (int i = 0; i < 6; ++i) v.Set(i, xs[i]);
    TestTensor out = Empty(DType::kInt64, {1});
    ASSERT_TRUE(Reduce(ReduceOp::kArgmax, out.ref, v.ref, 1).ok());
    EXPECT_EQ(out.AtInt(0), 2);
    ASSERT_TRUE(Reduce(ReduceOp::kArgmin, out.ref, v.ref, 1).ok());
    EXPECT_EQ(out.AtInt(0), 2);
    TestTensor mx = Empty(DType::kFloat32, {1});
    ASSERT_TRUE(Reduce(ReduceOp::kAmax, mx.ref, v.ref, 1).ok());
    EXPECT_TRUE(std::isnan(mx.At(0)));
    TestTensor empty = Empty(DType::kFloat32, {0});
    EXPECT_FALSE(Reduce(ReduceOp::kArgmax, out.ref, empty.ref, 1).ok());
    EXPECT_FALSE(Reduce(ReduceOp::kArgmin, out.ref, empty.ref, 1).ok());
  });
}

TEST(Reduce, AllAnyOverEveryMaskOnEveryTarget) {
  ForEachTarget([](const char*) {
    for (DType dt : kAllTypes) {
      uint32_t seed = 40;
      for (const auto& shape : std::vector<std::vector<int64_t>>{{17}, {3, 4, 5}, {2, 0, 3}}) {
        const int nd = static_cast<int>(shape.size());
        for (uint32_t mask = 0; mask < (1u << nd); ++mask) {
          for (Layout l : AllLayouts()) {
            TestTensor in = MakeRandom(dt, shape, l, seed++, -1, 1);
            for (int64_t i = 0; i < in.numel(); ++i) in.Set(i, in.At(i) > 0.3 ? 0.0 : in.At(i));
            for (ReduceOp op : {ReduceOp::kAll, ReduceOp::kAny}) {
              const bool all = op == ReduceOp::kAll;
              TestTensor out = Empty(DType::kBool, KeepDim(shape, mask));
              ASSERT_TRUE(Reduce(op, out.ref, in.ref, mask).ok());
              std::vector<bool> want(out.numel(), all);
              for (int64_t i = 0; i < in.numel(); ++i) {
                const int64_t o = OutIndex(shape, mask, i);
                const bool nz = in.At(i) != 0;
                want[o] = all ? (want[o] && nz) : (want[o] || nz);
              }
              for (int64_t o = 0; o < out.numel(); ++o) {
                ASSERT_EQ(out.At(o) != 0, want[o]) << Ctx(dt, l, shape, mask) << " at " << o;
              }
            }
          }
        }
      }
    }
  });
}

TEST(Softmax, SoftmaxAndLogSoftmaxEveryDimOnEveryTarget) {
  ForEachTarget([](const char*) {
    for (DType dt : {DType::kFloat32, DType::kBFloat16, DType::kFloat16, DType::kFloat64}) {
      uint32_t seed = 21;
      for (const auto& shape : std::vector<std::vector<int64_t>>{{1}, {17}, {4099}, {3, 1000}, {5, 3, 17}, {0, 4}}) {
        for (int dim = 0; dim < static_cast<int>(shape.size()); ++dim) {
          for (Layout l : AllLayouts()) {
            for (bool log : {false, true}) {
              TestTensor in = MakeRandom(dt, shape, l, seed++, -8, 8);
              TestTensor out = Empty(dt, shape, l == Layout::kMisaligned ? 1 : 0);
              ASSERT_TRUE(Softmax(out.ref, in.ref, dim, log).ok());
              const uint32_t mask = 1u << dim;
              int64_t onumel = 1;
              for (int64_t s : KeepDim(shape, mask)) onumel *= s;
              std::vector<double> mx(onumel, -INFINITY), sum(onumel, 0);
              for (int64_t i = 0; i < in.numel(); ++i) {
                const int64_t o = OutIndex(shape, mask, i);
                mx[o] = std::max(mx[o], Compute(dt, in.At(i)));
              }
              for (int64_t i = 0; i < in.numel(); ++i) {
                const int64_t o = OutIndex(shape, mask, i);
                sum[o] += std::exp(Compute(dt, in.At(i)) - mx[o]);
              }
              for (int64_t i = 0; i < in.numel(); ++i) {
                const int64_t o = OutIndex(shape, mask, i);
                const double z = Compute(dt, in.At(i)) - mx[o];
                const double e = log ? z - std::log(sum[o]) : std::exp(z) / sum[o];
                const double tol = (log ? 2e-6 : 1e-7) + 1e-5 * std::fabs(e) + testing::Ulp(dt, e);
                ASSERT_EQ(CheckClose(out.At(i), RoundTo(dt, e), 0, tol), "")
                    << Ctx(dt, l, shape, mask) << (log ? " log" : "") << " at " << i;
              }
            }
          }
        }
      }
    }
  });
}

// ---- VarMean, VectorNorm ------------------------------------------------------------
// Two-pass double references over the float32 values the kernels compute with.
TEST(VarMean, EveryMaskCorrectionAndLayoutOnEveryTarget) {
  ForEachTarget([](const char*) {
    for (DType dt : testing::kFloatTypes) {
      uint32_t seed = 50;
      for (const auto& shape : Shapes()) {
        const uint32_t nmask = 1u << shape.size();
        for (uint32_t mask = 0; mask < nmask; ++mask) {
          for (Layout l : AllLayouts()) {
            TestTensor in = MakeRandom(dt, shape, l, seed++, -3, 5);
            const auto osizes = KeepDim(shape, mask);
            const auto [onumel, count] = Extent(shape, mask);
            std::vector<double> mean(onumel, 0), m2(onumel, 0);
            for (int64_t i = 0; i < in.numel(); ++i) {
              mean[OutIndex(shape, mask, i)] += Compute(dt, in.At(i));
            }
            for (double& m : mean) m /= static_cast<double>(count);
            for (int64_t i = 0; i < in.numel(); ++i) {
              const int64_t o = OutIndex(shape, mask, i);
              m2[o] += std::pow(Compute(dt, in.At(i)) - mean[o], 2);
            }
            for (double correction : {0.0, 1.0, 2.5}) {
              for (bool take_sqrt : {false, true}) {
                TestTensor var = Empty(dt, osizes), avg = Empty(dt, osizes);
                ASSERT_TRUE(VarMean(var.ref, avg.ref, in.ref, mask, correction, take_sqrt).ok());
                const std::string ctx = Ctx(dt, l, shape, mask) + " correction " +
                                        std::to_string(correction) + (take_sqrt ? " std" : " var");
                for (int64_t o = 0; o < onumel; ++o) {
                  // count <= correction: M2 / 0 is inf (NaN when M2 is 0), as torch
                  double v = count == 0 ? NAN : m2[o] / std::max(0.0, count - correction);
                  if (take_sqrt) v = std::sqrt(v);
                  const double m = count == 0 ? NAN : mean[o];
                  auto tol = [dt](double e) { return 1e-6 * std::fabs(e) + testing::Ulp(dt, e); };
                  ASSERT_EQ(CheckClose(var.At(o), RoundTo(dt, v), 0, tol(v)), "")
                      << ctx << " var at " << o;
                  ASSERT_EQ(CheckClose(avg.At(o), RoundTo(dt, m), 0, tol(m)), "")
                      << ctx << " mean at " << o;
                }
              }
            }
          }
        }
      }
    }
  });
}

// A large mean over a small spread: a float32 accumulation loses var
// entirely here (sum((x - mean)^2) is ~1e-8 of sum(x)^2 / n).
TEST(VarMean, StaysAccurateWhenTheMeanDominates) {
  TestTensor in = Empty(DType::kFloat32, {200003});
  std::mt19937 rng(5);
  std::normal_distribution<double> noise(0.0, 0.01);
  for (int64_t i = 0; i < in.numel(); ++i) in.Set(i, 1e4 + noise(rng));
  double mean = 0, m2 = 0;
  for (int64_t i = 0; i < in.numel(); ++i) mean += in.At(i);
  mean /= static_cast<double>(in.numel());
  for (int64_t i = 0; i < in.numel(); ++i) m2 += (in.At(i) - mean) * (in.At(i) - mean);
  ForEachTarget([&](const char*) {
    TestTensor var = Empty(DType::kFloat32, {1});
    ASSERT_TRUE(VarMean(var.ref, TensorRef{}, in.ref, 1u, 1.0, false).ok());
    EXPECT_EQ(CheckClose(var.At(0), m2 / (in.numel() - 1), 1e-6), "");
  });
}

TEST(VarMean, NaNAndInfPropagate) {
  TestTensor in = Empty(DType::kFloat32, {2, 5});
  for (int64_t i = 0; i < 10; ++i) in.Set(i, static_cast<double>(i));
  in.Set(1, NAN);
  in.Set(7, INFINITY);
  TestTensor var = Empty(DType::kFloat32, {2, 1});
  ASSERT_TRUE(VarMean(var.ref, TensorRef{}, in.ref, 2u, 1.0, false).ok());
  EXPECT_TRUE(std::isnan(var.At(0)));
  EXPECT_TRUE(std::isnan(var.At(1)));  // inf - inf in the deviations, as torch
}

double RefNorm(const std::vector<double>& xs, double ord) {
  if (std::isinf(ord)) {
    double r = ord > 0 ? 0 : INFINITY;
    for (double x : xs) {
      const double a = std::fabs(x);
      r = std::isnan(x) || std::isnan(r) ? NAN : ord > 0 ? std::max(r, a) : std::min(r, a);
    }
    return r;
  }
  double sum = 0;
  for (double x : xs) {
    if (ord == 0) sum += x != 0;
    else if (ord == 2) sum += static_cast<float>(x * x);  // float32 terms, as the kernel
    else sum += std::pow(std::fabs(x), ord);
  }
  return ord == 0 ? sum : std::pow(sum, 1 / ord);
}

TEST(VectorNorm, EveryOrdMaskAndLayoutOnEveryTarget) {
  const double ords[] = {2, 1, INFINITY, -INFINITY, 0, 3, 0.5, -1.5};
  ForEachTarget([&](const char*) {
    for (DType dt : testing::kFloatTypes) {
      uint32_t seed = 80;
      for (const auto& shape : Shapes()) {
        const uint32_t nmask = 1u << shape.size();
        for (uint32_t mask = 0; mask < nmask; ++mask) {
          for (Layout l : AllLayouts()) {
            TestTensor in = MakeRandom(dt, shape, l, seed++, -3, 3);
            for (int64_t i = 0; i < in.numel(); i += 9) in.Set(i, 0.0);  // ord 0 counts
            const auto osizes = KeepDim(shape, mask);
            const auto [onumel, count] = Extent(shape, mask);
            std::vector<std::vector<double>> groups(onumel);
            for (int64_t i = 0; i < in.numel(); ++i) {
              groups[OutIndex(shape, mask, i)].push_back(Compute(dt, in.At(i)));
            }
            for (double ord : ords) {
              // out float32 for every input dtype: dtype= of torch
              TestTensor out = Empty(DType::kFloat32, osizes);
              const Status st = VectorNorm(out.ref, in.ref, mask, ord);
              const std::string ctx = Ctx(dt, l, shape, mask) + " ord " + std::to_string(ord);
              if (count == 0 && onumel > 0 && (ord < 0 || ord == INFINITY)) {
                EXPECT_FALSE(st.ok()) << ctx;  // no identity: torch raises
                continue;
              }
              ASSERT_TRUE(st.ok()) << ctx << ": " << st.error;
              for (int64_t o = 0; o < onumel; ++o) {
                const double e = RefNorm(groups[o], ord);
                ASSERT_EQ(CheckClose(out.At(o), static_cast<float>(e), 1e-6), "")
                    << ctx << " at " << o;
              }
            }
          }
        }
      }
    }
  });
}

TEST(VectorNorm, SpecialsFollowTorch) {
  const std::vector<double> xs = {1e20, 1.0, NAN, 0.0, -2.0};
  TestTensor in = Empty(DType::kFloat32, {5, 1});
  for (int64_t i = 0; i < 5; ++i) in.Set(i, xs[i]);
  TestTensor out = Empty(DType::kFloat32, {1, 1});
  auto norm = [&](TestTensor t, double ord) {
    EXPECT_TRUE(VectorNorm(out.ref, t.ref, 1u, ord).ok());
    return out.At(0);
  };
  EXPECT_TRUE(std::isnan(norm(in, 2)));
  EXPECT_EQ(norm(in, 0), 4.0);  // NaN is nonzero
  TestTensor big = in.Slice(0, 0, 1, 2);  // {1e20, 1}: 1e20^2 overflows float32, as in torch
  EXPECT_EQ(norm(big, 2), INFINITY);
  EXPECT_EQ(norm(big, 1), static_cast<float>(1e20 + 1));
  EXPECT_EQ(norm(big, -INFINITY), 1.0);
  TestTensor zeros = in.Slice(0, 3, 1, 1);
  EXPECT_EQ(norm(zeros, -1), 0.0);  // 0^-1 = inf, inf^-1 = 0
}

TEST(Describe, ReduceAndSoftmax) {
  TestTensor in = Empty(DType::kBFloat16, {8, 128});
  TestTensor out = Empty(DType::kBFloat16, {8, 1});
  KernelInfo r = DescribeReduce(ReduceOp::kMean, out.ref, in.ref, "aten::mean");
  EXPECT_STREQ(r.name, "mean_bf16");
  EXPECT_EQ(r.bytes_read, 8u * 128 * 2);
  EXPECT_EQ(r.bytes_written, 8u * 2);
  EXPECT_EQ(r.engine, rt::Engine::kVector);
  KernelInfo v = DescribeVarMean(out.ref, out.ref, in.ref, true, "aten::std_mean");
  EXPECT_STREQ(v.name, "std_mean_bf16");
  EXPECT_EQ(v.bytes_read, 2u * 8 * 128 * 2);  // two passes over in
  EXPECT_EQ(v.bytes_written, 2u * 8 * 2);
  EXPECT_STREQ(DescribeVarMean(out.ref, TensorRef{}, in.ref, false, "aten::var").name, "var_bf16");
  KernelInfo n = DescribeVectorNorm(out.ref, in.ref, 2.0, "aten::linalg_vector_norm");
  EXPECT_STREQ(n.name, "vector_norm_bf16");
  EXPECT_STREQ(n.op, "aten::linalg_vector_norm");
  EXPECT_EQ(n.bytes_read, 8u * 128 * 2);
  KernelInfo s = DescribeSoftmax(in.ref, true, "aten::_log_softmax");
  EXPECT_STREQ(s.name, "log_softmax_bf16");
  EXPECT_EQ(s.bytes_written, 8u * 128 * 2);
}

}  // namespace
}  // namespace trn::kernels
