// Reductions and softmax on every compiled SIMD target against double
// references, over dtypes, every dim mask of 1-3-D shapes and odd layouts.
//
// Tolerances: sum/mean |err| <= 1e-5 * sum|x| (float32 accumulation; the
// worst case grows with n, four vector accumulators keep it far below this)
// plus one storage ulp for bf16/f16; amax/amin/argmax and integer sums exact;
// softmax 1e-5 relative + 1e-7 absolute, log_softmax 1e-5 relative + 2e-6
// absolute (plus one storage ulp).

#include <cmath>
#include <string>
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
            int64_t onumel = 1, count = 1;
            for (size_t d = 0; d < shape.size(); ++d) {
              onumel *= osizes[d];
              if ((mask >> d) & 1) count *= shape[d];
            }
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

TEST(Describe, ReduceAndSoftmax) {
  TestTensor in = Empty(DType::kBFloat16, {8, 128});
  TestTensor out = Empty(DType::kBFloat16, {8, 1});
  KernelInfo r = DescribeReduce(ReduceOp::kMean, out.ref, in.ref, "aten::mean");
  EXPECT_STREQ(r.name, "mean_bf16");
  EXPECT_EQ(r.bytes_read, 8u * 128 * 2);
  EXPECT_EQ(r.bytes_written, 8u * 2);
  EXPECT_EQ(r.engine, rt::Engine::kVector);
  KernelInfo s = DescribeSoftmax(in.ref, true, "aten::_log_softmax");
  EXPECT_STREQ(s.name, "log_softmax_bf16");
  EXPECT_EQ(s.bytes_written, 8u * 128 * 2);
}

}  // namespace
}  // namespace trn::kernels
