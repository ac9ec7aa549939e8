// Elementwise kernels on every compiled SIMD target against plain double
// references, across dtypes, sizes that straddle vector widths, misaligned,
// transposed, step-2 and broadcast layouts.
//
// Tolerances (relative to the double reference on the stored inputs; floats
// are computed in float32, so float64 inputs are first rounded to float32):
//   add/sub/mul/div/pow/max/min/neg/abs/relu/sqrt/reciprocal: 1e-6
//   rsqrt (two roundings): 1e-6; exp/log/sigmoid/tanh/silu/sin/cos: 4e-6
//   (+1e-7 absolute where the result crosses zero); gelu: 1e-5 (+1e-7 abs);
//   bf16/f16 outputs: plus one ulp of the storage type.
//   Comparisons, logical ops, integer ops, casts, where, fill: exact.

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/kernels/convert.h"
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
using testing::StorageTol;
using testing::TestTensor;
using testing::kFloatTypes;
using testing::kNumTypes;
using testing::kAllTypes;


// 1-D sizes around vector widths plus 2-D shapes (for the transposed layout).
std::vector<std::vector<int64_t>> Shapes() {
  return {{0}, {1}, {3}, {17}, {1000}, {4099}, {7, 33}, {64, 65}, {2, 3, 17}};
}

// The value a kernel computes with: float32 for floating dtypes.
double Compute(DType dt, double v) { return IsFloating(dt) ? static_cast<float>(v) : v; }

std::string Ctx(DType dt, Layout l, const std::vector<int64_t>& shape) {
  std::string s = std::string(DTypeName(dt)) + " " + LayoutName(l) + " [";
  for (int64_t d : shape) s += std::to_string(d) + ",";
  return s + "]";
}

// ---- convert.h -------------------------------------------------------------------
TEST(Convert, HalfDecodeIsExactForEveryBitPattern) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const double bf = testing::DecodeBF16(static_cast<uint16_t>(h));
    const double f16 = testing::DecodeF16(static_cast<uint16_t>(h));
    const float got_bf = internal::BF16ToF32(static_cast<uint16_t>(h));
    const float got_f16 = internal::F16ToF32(static_cast<uint16_t>(h));
    if (std::isnan(bf)) EXPECT_TRUE(std::isnan(got_bf)) << h;
    else ASSERT_EQ(got_bf, bf) << h;
    if (std::isnan(f16)) EXPECT_TRUE(std::isnan(got_f16)) << h;
    else ASSERT_EQ(got_f16, f16) << h;
  }
}

TEST(Convert, HalfEncodeRoundsToNearestEven) {
  std::mt19937 rng(7);
  std::vector<float> values = {0.0f, -0.0f, 1.0f, 65504.0f, 65519.99f, 65520.0f, 1e-8f,
                               2.98e-8f, 2.9802322e-8f, 5.96e-8f, 6.1e-5f, 3.4e38f, -3.4e38f,
                               INFINITY, -INFINITY, 1.00390625f, 1.01171875f};
  for (int i = 0; i < 200000; ++i) {
    const uint32_t bits = rng();
    float f;
    std::memcpy(&f, &bits, 4);
    values.push_back(f);
    values.push_back(std::ldexp(static_cast<float>(rng() % 4096) + 0.5f, -int(rng() % 40)));
  }
  for (float f : values) {
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(internal::BF16ToF32(internal::F32ToBF16(f))));
      EXPECT_TRUE(std::isnan(internal::F16ToF32(internal::F32ToF16(f))));
      continue;
    }
    ASSERT_EQ(internal::F32ToBF16(f), testing::EncodeBF16(f)) << f;
    ASSERT_EQ(internal::F32ToF16(f), testing::EncodeF16(f)) << f;
  }
}

// ---- Targets -----------------------------------------------------------------------
TEST(Targets, SetTargetPinsDispatch) {
  const std::vector<int64_t> targets = CompiledTargets();
  ASSERT_FALSE(targets.empty());
  const int64_t best = ActiveTarget();
  for (int64_t t : targets) {
    SetTarget(t);
    EXPECT_EQ(ActiveTarget(), t) << TargetName(t);
  }
  SetTarget(0);
  EXPECT_EQ(ActiveTarget(), best);
  EXPECT_EQ(best, targets.front());  // best first: Highway orders by preference bit
}

// ---- Binary ------------------------------------------------------------------------
double RefBinary(BinaryOp op, DType dt, double a, double b, double alpha) {
  const bool fl = IsFloating(dt);
  a = Compute(dt, a), b = Compute(dt, b);
  switch (op) {
    case BinaryOp::kAdd: return a + (fl ? static_cast<float>(alpha) : alpha) * b;
    case BinaryOp::kSub: return a - (fl ? static_cast<float>(alpha) : alpha) * b;
    case BinaryOp::kMul: return a * b;
    case BinaryOp::kDiv: return a / b;
    case BinaryOp::kPow:
      if (!fl) {
        if (b < 0) return a == 1 ? 1 : a == -1 ? (std::fmod(b, 2) != 0 ? -1 : 1) : 0;
        return std::pow(a, b);
      }
      return std::pow(a, b);
    case BinaryOp::kMaximum: return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
    case BinaryOp::kMinimum: return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
    case BinaryOp::kGlu: return a / (1 + std::exp(-b));
    case BinaryOp::kPrelu: return a > 0 ? a : a * b;
    case BinaryOp::kEq: return a == b;
    case BinaryOp::kNe: return a != b;
    case BinaryOp::kLt: return a < b;
    case BinaryOp::kLe: return a <= b;
    case BinaryOp::kGt: return a > b;
    case BinaryOp::kGe: return a >= b;
    case BinaryOp::kLogicalAnd: return a != 0 && b != 0;
    case BinaryOp::kLogicalOr: return a != 0 || b != 0;
    case BinaryOp::kLogicalXor: return (a != 0) != (b != 0);
    default: break;  // kDivTrunc .. kShiftRight: elementwise_math_test.cc
  }
  return 0;
}

const char* kBinaryOpNames[] = {
    "add",       "sub",         "mul",         "div",       "pow",        "maximum",
    "minimum",   "glu",         "prelu",       "div_trunc", "div_floor",  "remainder",
    "fmod",      "atan2",       "hypot",       "logaddexp", "logaddexp2", "copysign",
    "xlogy",     "fmax",        "fmin",        "heaviside", "bitwise_and", "bitwise_or",
    "bitwise_xor", "shift_left", "shift_right", "eq",       "ne",         "lt",
    "le",        "gt",          "ge",          "and",       "or",         "xor"};
static_assert(std::size(kBinaryOpNames) == static_cast<size_t>(BinaryOp::kLogicalXor) + 1);

void ExpectBinary(BinaryOp op, DType dt, const TestTensor& out, const TestTensor& a,
                  const TestTensor* b, double scalar, bool scalar_first, double alpha,
                  const std::string& ctx) {
  const DType out_dt = out.dtype();
  int failures = 0;
  for (int64_t i = 0; i < out.numel() && failures < 5; ++i) {
    const double x = scalar_first ? scalar : a.At(i);
    const double y = b ? b->At(i) : scalar_first ? a.At(i) : scalar;
    double e = RefBinary(op, dt, x, y, alpha);
    std::string err;
    if (IsComparison(op) || !IsFloating(dt)) {
      if (dt == DType::kInt32 && !IsComparison(op)) e = static_cast<int32_t>(static_cast<int64_t>(e));
      if (out.At(i) != e) err = "actual " + std::to_string(out.At(i)) + " expected " + std::to_string(e);
    } else {
      // add with alpha may round alpha*y before adding (no FMA on SSE4): bound
      // the error by the operands' magnitude, not the (cancelled) result's.
      const bool addsub = op == BinaryOp::kAdd || op == BinaryOp::kSub;
      const double cancel = addsub ? 2e-7 * (std::fabs(x) + std::fabs(alpha * y)) : 0;
      err = CheckClose(out.At(i), RoundTo(out_dt, e), 0, cancel + StorageTol(out_dt, e, 1e-6));
    }
    if (!err.empty()) {
      ADD_FAILURE() << kBinaryOpNames[static_cast<int>(op)] << " " << ctx << " at " << i
                    << " (x=" << x << ", y=" << y << "): " << err;
      ++failures;
    }
  }
}

TEST(Binary, AllOpsDtypesLayoutsOnEveryTarget) {
  ForEachTarget([](const char*) {
    for (DType dt : kNumTypes) {
      for (int opi = 0; opi <= static_cast<int>(BinaryOp::kLogicalXor); ++opi) {
        const auto op = static_cast<BinaryOp>(opi);
        if (op == BinaryOp::kDiv && !IsFloating(dt)) continue;  // caller makes it floating
        if ((op == BinaryOp::kGlu || op == BinaryOp::kPrelu) && !IsFloating(dt)) continue;  // torch: floating only
        // Rounding division, remainder, bitwise: elementwise_math_test.cc.
        if (op >= BinaryOp::kDivTrunc && op <= BinaryOp::kShiftRight) continue;
        const bool cmp = IsComparison(op);
        // Small integer-valued inputs make ties (eq/le/ge) and exact int pow likely.
        const double lo = cmp || op == BinaryOp::kPow ? -3 : -4, hi = -lo;
        uint32_t seed = 1;
        for (const auto& shape : Shapes()) {
          for (Layout la : AllLayouts()) {
            const Layout lb = AllLayouts()[(static_cast<int>(la) + 2) % AllLayouts().size()];
            TestTensor a = MakeRandom(dt, shape, la, seed++, lo, hi);
            TestTensor b = MakeRandom(dt, shape, lb, seed++, lo, hi);
            if (cmp || op == BinaryOp::kPow) {  // round to quarters / integers
              for (int64_t i = 0; i < a.numel(); ++i) a.Set(i, std::round(a.At(i) * 4) / 4);
              for (int64_t i = 0; i < b.numel(); ++i) {
                b.Set(i, op == BinaryOp::kPow ? std::round(b.At(i)) : std::round(b.At(i) * 4) / 4);
              }
            }
            const DType out_dt = cmp ? DType::kBool : dt;
            const double alpha =
                op == BinaryOp::kAdd && la == Layout::kStep2 ? (IsFloating(dt) ? 2.5 : 2.0) : 1.0;
            TestTensor out = testing::Empty(out_dt, shape, la == Layout::kMisaligned ? 1 : 0);
            ASSERT_TRUE(Binary(op, out.ref, a.ref, b.ref, alpha).ok());
            ExpectBinary(op, dt, out, a, &b, 0, false, alpha, Ctx(dt, la, shape));
            // Scalar forms (rsub / pow(2, x) shapes).
            for (bool first : {false, true}) {
              const double s = op == BinaryOp::kPow && !first ? 3.0 : -1.5;
              const double sv = IsFloating(dt) ? s : std::trunc(s);
              TestTensor out2 = testing::Empty(out_dt, shape);
              ASSERT_TRUE(BinaryScalar(op, out2.ref, a.ref, s, first).ok());
              ExpectBinary(op, dt, out2, a, nullptr, sv, first, 1.0,
                           Ctx(dt, la, shape) + (first ? " scalar-first" : " scalar"));
            }
          }
        }
      }
    }
  });
}

TEST(Binary, FloatSpecialValuesFollowTorch) {
  ForEachTarget([](const char*) {
    const std::vector<double> xs = {NAN, 1.0, -2.0, 0.0, INFINITY, -8.0, -0.0, 2.0};
    const std::vector<double> ys = {1.0, NAN, 0.0, 0.0, 2.0, 3.0, -1.0, -INFINITY};
    const int64_t n = static_cast<int64_t>(xs.size());
    TestTensor a = Empty(DType::kFloat32, {n}), b = Empty(DType::kFloat32, {n});
    for (int64_t i = 0; i < n; ++i) a.Set(i, xs[i]), b.Set(i, ys[i]);
    for (BinaryOp op : {BinaryOp::kDiv, BinaryOp::kPow, BinaryOp::kMaximum, BinaryOp::kMinimum,
                        BinaryOp::kGlu, BinaryOp::kPrelu, BinaryOp::kEq, BinaryOp::kNe,
                        BinaryOp::kLt, BinaryOp::kGe,
                        BinaryOp::kLogicalAnd}) {
      TestTensor out = Empty(IsComparison(op) ? DType::kBool : DType::kFloat32, {n});
      ASSERT_TRUE(Binary(op, out.ref, a.ref, b.ref).ok());
      ExpectBinary(op, DType::kFloat32, out, a, &b, 0, false, 1.0, "specials");
    }
  });
}

// ---- Unary -------------------------------------------------------------------------
struct UnaryCase {
  UnaryOp op;
  const char* name;
  double lo, hi;     // input range
  double rel, abs;   // float32 tolerance
  double (*ref)(double);
};

double Erf(double x) { return std::erf(x); }
const UnaryCase kUnaryCases[] = {
    {UnaryOp::kNeg, "neg", -4, 4, 0, 0, [](double x) { return -x; }},
    {UnaryOp::kAbs, "abs", -4, 4, 0, 0, [](double x) { return std::fabs(x); }},
    {UnaryOp::kRelu, "relu", -4, 4, 0, 0, [](double x) { return x < 0 ? 0.0 : x; }},
    {UnaryOp::kExp, "exp", -10, 10, 4e-6, 0, [](double x) { return std::exp(x); }},
    {UnaryOp::kLog, "log", 0.01, 10, 4e-6, 1e-7, [](double x) { return std::log(x); }},
    {UnaryOp::kSqrt, "sqrt", 0, 10, 1e-6, 0, [](double x) { return std::sqrt(x); }},
    {UnaryOp::kRsqrt, "rsqrt", 0.01, 10, 1e-6, 0, [](double x) { return 1 / std::sqrt(x); }},
    {UnaryOp::kReciprocal, "reciprocal", 0.1, 10, 1e-6, 0, [](double x) { return 1 / x; }},
    {UnaryOp::kSigmoid, "sigmoid", -12, 12, 4e-6, 0, [](double x) { return 1 / (1 + std::exp(-x)); }},
    {UnaryOp::kTanh, "tanh", -6, 6, 4e-6, 1e-7, [](double x) { return std::tanh(x); }},
    {UnaryOp::kSilu, "silu", -12, 12, 4e-6, 1e-7, [](double x) { return x / (1 + std::exp(-x)); }},
    {UnaryOp::kGelu, "gelu", -8, 8, 1e-5, 1e-7,
     [](double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }},
    {UnaryOp::kGeluTanh, "gelu_tanh", -8, 8, 1e-5, 1e-7,
     [](double x) {
       return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
     }},
    {UnaryOp::kSin, "sin", -10, 10, 4e-6, 1e-7, [](double x) { return std::sin(x); }},
    {UnaryOp::kCos, "cos", -10, 10, 4e-6, 1e-7, [](double x) { return std::cos(x); }},
    {UnaryOp::kLogicalNot, "logical_not", -1, 1, 0, 0, [](double x) { return double(x == 0); }},
};

TEST(Unary, AllOpsDtypesLayoutsOnEveryTarget) {
  ForEachTarget([](const char*) {
    for (const UnaryCase& c : kUnaryCases) {
      for (DType dt : kNumTypes) {
        const bool exact_op = c.op == UnaryOp::kNeg || c.op == UnaryOp::kAbs ||
                              c.op == UnaryOp::kRelu || c.op == UnaryOp::kLogicalNot;
        if (!IsFloating(dt) && !exact_op) continue;
        uint32_t seed = 11;
        for (const auto& shape : Shapes()) {
          for (Layout l : AllLayouts()) {
            TestTensor in = MakeRandom(dt, shape, l, seed++, c.lo, c.hi);
            if (c.op == UnaryOp::kLogicalNot) {  // make zeros common
              for (int64_t i = 0; i < in.numel(); ++i) in.Set(i, std::round(in.At(i)));
            }
            const DType out_dt = c.op == UnaryOp::kLogicalNot ? DType::kBool : dt;
            TestTensor out = Empty(out_dt, shape, l == Layout::kMisaligned ? 1 : 0);
            ASSERT_TRUE(Unary(c.op, out.ref, in.ref).ok());
            int failures = 0;
            for (int64_t i = 0; i < out.numel() && failures < 5; ++i) {
              const double x = Compute(dt, in.At(i));
              const double e = c.ref(x);
              const std::string err =
                  CheckClose(out.At(i), RoundTo(out_dt, e), 0,
                             c.abs + StorageTol(out_dt, e, c.rel));
              if (!err.empty()) {
                ADD_FAILURE() << c.name << " " << Ctx(dt, l, shape) << " at " << i
                              << " x=" << x << ": " << err;
                ++failures;
              }
            }
          }
        }
      }
    }
  });
}

TEST(Unary, SpecialValuesFollowTorch) {
  ForEachTarget([](const char*) {
    const std::vector<double> xs = {NAN, INFINITY, -INFINITY, 0.0, -1.0, 200.0, -200.0, 88.0};
    const int64_t n = static_cast<int64_t>(xs.size());
    TestTensor in = Empty(DType::kFloat32, {n});
    for (int64_t i = 0; i < n; ++i) in.Set(i, xs[i]);
    struct {
      UnaryOp op;
      double (*ref)(double);
    } cases[] = {
        {UnaryOp::kExp, [](double x) { return std::exp(x); }},
        {UnaryOp::kLog, [](double x) { return std::log(x); }},
        {UnaryOp::kRelu, [](double x) { return std::isnan(x) ? x : x < 0 ? 0.0 : x; }},
        {UnaryOp::kSigmoid, [](double x) { return 1 / (1 + std::exp(-x)); }},
        {UnaryOp::kTanh, [](double x) { return std::tanh(x); }},
        {UnaryOp::kSqrt, [](double x) { return std::sqrt(x); }},
    };
    for (const auto& c : cases) {
      TestTensor out = Empty(DType::kFloat32, {n});
      ASSERT_TRUE(Unary(c.op, out.ref, in.ref).ok());
      for (int64_t i = 0; i < n; ++i) {
        const double e = static_cast<float>(c.ref(xs[i]));
        EXPECT_EQ(CheckClose(out.At(i), e, 4e-6), "") << static_cast<int>(c.op) << " x=" << xs[i];
      }
    }
  });
}

// Note [Fast exp] and TanhF over the float32 line: every 1009th bit pattern
// (4 million values, both signs, every exponent) and the edges of each
// path, in ulps of the float32 result against double. exp <= 1.5 ulp where
// the result is normal, within one subnormal step below; tanh <= 2 ulp (its
// worst, 1.3-1.8 depending on the target, just above the polynomial's
// range); sigmoid <= 3 (2.3-2.7 measured; 4 before SigmoidF's correction
// step on AVX2), possibly 0 where the result is subnormal. Saturation exact;
// NaN, +-inf, -0 and overflow as torch; each result the same whatever its
// vector neighbours. A 1e-6 change in one of TanhF's coefficients fails it.
double UlpError(float got, double want) {
  const float w = static_cast<float>(want);
  if (std::isnan(want)) return std::isnan(got) ? 0 : 1e9;
  if (std::isinf(w) || got == w) return got == w ? 0 : 1e9;
  const double ulp = std::nextafter(std::fabs(w), INFINITY) - std::fabs(w);
  return std::fabs(static_cast<double>(got) - want) / ulp;
}

TEST(Unary, TranscendentalsInUlpsAcrossFloat32) {
  std::vector<float> xs;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 1009) {
    float f;
    const uint32_t u = static_cast<uint32_t>(b);
    std::memcpy(&f, &u, 4);
    if (!std::isnan(f)) xs.push_back(f);
  }
  // Edges: ExpCoreF's range, exp's overflow and last subnormal, TanhF's
  // switch and saturation. 64 floats down and 64 up from each, and from its
  // negation, in runs of one sign (so whole vectors sit on one side).
  for (float edge : {87.33654475f, 88.37626266f, 88.7228394f, 103.9720840f, 0.75f, 9.0f, 9.1f,
                     20.0f, 1e-30f, 0.0f}) {
    for (float sign : {1.0f, -1.0f}) {
      float e = sign * edge;
      for (int k = 0; k < 64; ++k) e = std::nextafter(e, -INFINITY);
      for (int k = 0; k < 128; ++k, e = std::nextafter(e, INFINITY)) xs.push_back(e);
    }
  }
  for (float s : {NAN, INFINITY, -INFINITY, -0.0f}) xs.push_back(s);
  const int64_t n = static_cast<int64_t>(xs.size());
  struct {
    UnaryOp op;
    const char* name;
    double (*ref)(double);
    double max_ulp;
  } cases[] = {
      {UnaryOp::kExp, "exp", [](double x) { return std::exp(x); }, 1.5},
      {UnaryOp::kTanh, "tanh", [](double x) { return std::tanh(x); }, 2},
      {UnaryOp::kSigmoid, "sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }, 3},
  };
  ForEachTarget([&](const char* target) {
    for (const auto& c : cases) {
      TestTensor in = Empty(DType::kFloat32, {n}), out = Empty(DType::kFloat32, {n});
      std::memcpy(in.ref.data, xs.data(), xs.size() * sizeof(float));
      ASSERT_TRUE(Unary(c.op, out.ref, in.ref).ok());
      const float* y = static_cast<const float*>(out.ref.data);
      double worst = 0;
      float worst_x = 0;
      int failures = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double want = c.ref(xs[i]);
        double err = UlpError(y[i], want);
        // Subnormal results: exp's hwy path within one subnormal step,
        // sigmoid's flushed to 0 (SigmoidF's e^-|x| is 0 below ln(FLT_MIN)).
        if (std::fabs(want) < FLT_MIN) {
          const bool ok = std::fabs(y[i] - want) <= std::ldexp(1.0, -149) ||
                          (c.op == UnaryOp::kSigmoid && y[i] == 0);
          err = ok ? 0 : 1e9;
        }
        const bool sign_ok = std::isnan(want) || std::signbit(y[i]) == std::signbit(want);
        if ((err > c.max_ulp || !sign_ok) && ++failures <= 5) {
          ADD_FAILURE() << target << " " << c.name << "(" << xs[i] << ") = " << y[i]
                        << ", want " << want << " (" << err << " ulp)";
        }
        if (err > worst) worst = err, worst_x = xs[i];
      }
      std::printf("%s %s: %lld values, worst %.2f ulp at %g\n", target, c.name,
                  static_cast<long long>(n), worst, worst_x);
      // Lane independence: the same values one element later (other vector
      // neighbours) give the same bits.
      TestTensor in1 = Empty(DType::kFloat32, {n + 1}), out1 = Empty(DType::kFloat32, {n + 1});
      static_cast<float*>(in1.ref.data)[0] = 1e6f;  // an out-of-range neighbour
      std::memcpy(static_cast<float*>(in1.ref.data) + 1, xs.data(), xs.size() * sizeof(float));
      ASSERT_TRUE(Unary(c.op, out1.ref, in1.ref).ok());
      const float* y1 = static_cast<const float*>(out1.ref.data) + 1;
      int differ = 0;
      for (int64_t i = 0; i < n; ++i) {
        if (std::memcmp(&y[i], &y1[i], 4) != 0 && !(std::isnan(y[i]) && std::isnan(y1[i])) &&
            ++differ <= 3) {
          ADD_FAILURE() << target << " " << c.name << "(" << xs[i] << "): " << y[i] << " vs "
                        << y1[i] << " one element later";
        }
      }
    }
  });
}

// Note [Tiled elementwise]: float32 operands contiguous along different dims,
// at strides that map a run's lines to few L1 sets (tiled), or not (run by
// run), with tile edges on both tile dims, broadcast operands (along the
// tile's rows and columns) and a permuted output, against a scalar reference.
TEST(Binary, MixedLayoutsTiledOrRunByRun) {
  ForEachTarget([](const char*) {
    // a: [2, 70, 512] contiguous along dim 1, 128 floats apart along dim 2
    // (8 of 64 L1 sets: tiled); or 75 floats apart (run by run).
    for (int64_t pad : {128, 75}) {
      SCOPED_TRACE(pad);
      const TestTensor a =
          MakeRandom(DType::kFloat32, {2, 512, pad}, Layout::kContiguous, 11).Slice(2, 0, 1, 70).Transpose(1, 2);
      const TestTensor b = MakeRandom(DType::kFloat32, {2, 70, 512}, Layout::kContiguous, 12);
      const TestTensor row = MakeRandom(DType::kFloat32, {512}, Layout::kContiguous, 13).Expand({2, 70, 512});
      const TestTensor col = MakeRandom(DType::kFloat32, {2, 70, 1}, Layout::kContiguous, 14).Expand({2, 70, 512});
      for (const TestTensor* other : {&b, &row, &col}) {
        TestTensor out = Empty(DType::kFloat32, {2, 70, 512});
        ASSERT_TRUE(Binary(BinaryOp::kAdd, out.ref, a.ref, other->ref, 2.5).ok());
        ExpectBinary(BinaryOp::kAdd, DType::kFloat32, out, a, other, 0, false, 2.5, "mixed");
        ASSERT_TRUE(Binary(BinaryOp::kMul, out.ref, other->ref, a.ref, 1.0).ok());
        ExpectBinary(BinaryOp::kMul, DType::kFloat32, out, *other, &a, 0, false, 1.0, "mixed");
      }
      TestTensor neg = Empty(DType::kFloat32, {2, 70, 512});
      ASSERT_TRUE(Unary(UnaryOp::kNeg, neg.ref, a.ref).ok());
      for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(neg.At(i), -a.At(i)) << i;
      TestTensor lerp = Empty(DType::kFloat32, {2, 70, 512});
      ASSERT_TRUE(Lerp(lerp.ref, b.ref, a.ref, col.ref).ok());
      for (int64_t i = 0; i < a.numel(); ++i) {
        const double e = b.At(i) + col.At(i) * (a.At(i) - b.At(i));
        ASSERT_NEAR(lerp.At(i), e, 1e-5 * (1 + std::fabs(b.At(i)) + std::fabs(a.At(i)))) << i;
      }
    }
    // The output permuted like one input (Whisper's residual add): the other is
    // read 512 floats apart along out's runs of 150.
    TestTensor out = Empty(DType::kFloat32, {2, 512, 150}).Transpose(1, 2);
    const TestTensor x = MakeRandom(DType::kFloat32, {2, 512, 150}, Layout::kContiguous, 15).Transpose(1, 2);
    const TestTensor y = MakeRandom(DType::kFloat32, {2, 150, 512}, Layout::kContiguous, 16);
    ASSERT_TRUE(Binary(BinaryOp::kSub, out.ref, x.ref, y.ref, 1.0).ok());
    ExpectBinary(BinaryOp::kSub, DType::kFloat32, out, x, &y, 0, false, 1.0, "permuted out");
  });
}

// ---- Where / Fill / Copy -----------------------------------------------------------
TEST(Where, AllDtypesLayoutsOnEveryTarget) {
  ForEachTarget([](const char*) {
    for (DType dt : kAllTypes) {
      uint32_t seed = 3;
      for (const auto& shape : Shapes()) {
        for (Layout l : AllLayouts()) {
          TestTensor c = MakeRandom(DType::kBool, shape, AllLayouts()[(int(l) + 1) % 5], seed++);
          TestTensor a = MakeRandom(dt, shape, l, seed++);
          // b broadcast from one element half of the time (the where(mask, x, -inf) shape).
          TestTensor b = (seed % 2) ? MakeRandom(dt, {1}, Layout::kContiguous, seed++).Expand(shape)
                                    : MakeRandom(dt, shape, Layout::kStep2, seed++);
          TestTensor out = Empty(dt, shape, l == Layout::kMisaligned ? 1 : 0);
          ASSERT_TRUE(Where(out.ref, c.ref, a.ref, b.ref).ok());
          for (int64_t i = 0; i < out.numel(); ++i) {
            ASSERT_EQ(out.At(i), c.At(i) ? a.At(i) : b.At(i)) << Ctx(dt, l, shape) << " " << i;
          }
        }
      }
    }
  });
}

TEST(Fill, AllDtypesStridedOut) {
  for (DType dt : kAllTypes) {
    TestTensor base = Empty(dt, {2 * 1000 + 1});
    TestTensor out = base.Slice(0, 1, 2, 1000);
    ASSERT_TRUE(Fill(out.ref, -2.75).ok());
    for (int64_t i = 0; i < base.numel(); ++i) {
      const double e = i % 2 ? RoundTo(dt, dt == DType::kInt32 || dt == DType::kInt64 ? -2 : -2.75) : 0;
      ASSERT_EQ(base.At(i), e) << DTypeName(dt) << " " << i;
    }
  }
}

// torch cast semantics: float -> int truncates, nonzero -> true, float64 -> half
// goes through float32.
double RefCast(DType from, DType to, double v) {
  if (from == DType::kFloat64 && (to == DType::kBFloat16 || to == DType::kFloat16)) {
    return RoundTo(to, static_cast<float>(v));
  }
  return RoundTo(to, v);
}

TEST(Copy, CastsAmongAllDtypesAndLayouts) {
  ForEachTarget([](const char*) {
    for (DType from : kAllTypes) {
      for (DType to : kAllTypes) {
        uint32_t seed = 5;
        for (const auto& shape : Shapes()) {
          for (Layout l : AllLayouts()) {
            TestTensor in = MakeRandom(from, shape, l, seed++, -300.0, 300.0);
            TestTensor out = Empty(to, shape, l == Layout::kMisaligned ? 1 : 0);
            ASSERT_TRUE(Copy(out.ref, in.ref).ok());
            for (int64_t i = 0; i < out.numel(); ++i) {
              ASSERT_EQ(out.At(i), RefCast(from, to, in.At(i)))
                  << DTypeName(from) << "->" << Ctx(to, l, shape) << " at " << i;
            }
          }
        }
      }
    }
  });
}

TEST(Copy, ToTransposedOutAndInt64Exact) {
  TestTensor in = MakeRandom(DType::kInt64, {33, 7}, Layout::kContiguous, 1);
  in.Set(5, 9007199254740993.0);  // not representable in float: must not pass through float
  int64_t big = (int64_t{1} << 62) + 1;
  std::memcpy(static_cast<char*>(in.ref.data) + 6 * 8, &big, 8);
  TestTensor out = Empty(DType::kInt64, {7, 33}).Transpose(0, 1);
  ASSERT_TRUE(Copy(out.ref, in.ref).ok());
  for (int64_t i = 0; i < in.numel(); ++i) ASSERT_EQ(out.AtInt(i), in.AtInt(i)) << i;
  EXPECT_EQ(out.AtInt(6), big);
}

// Note [Tiled transpose]: transposes of two dims of >= kTile elements with edges
// that are not whole tiles, a batch dim, every element size; and NCHW to
// channels-last. Bit-exact against the element-by-element reference.
TEST(Copy, TiledTransposes) {
  for (DType dt : {DType::kFloat32, DType::kBFloat16, DType::kInt64, DType::kBool}) {
    SCOPED_TRACE(DTypeName(dt));
    TestTensor in = MakeRandom(dt, {3, 37, 45}, Layout::kContiguous, 7, -100.0, 100.0);
    TestTensor out = Empty(dt, {3, 45, 37}).Transpose(1, 2);  // in's sizes, out-major [3][45][37]
    ASSERT_TRUE(Copy(out.ref, in.ref).ok());
    for (int64_t i = 0; i < in.numel(); ++i) ASSERT_EQ(out.At(i), in.At(i)) << i;
  }
  TestTensor nchw = MakeRandom(DType::kFloat32, {2, 40, 3, 36}, Layout::kContiguous, 8);
  TestTensor nhwc = Empty(DType::kFloat32, {2, 3, 36, 40});  // channels-last [2, 40, 3, 36]
  TestTensor cl = nhwc.Transpose(2, 3).Transpose(1, 2);
  ASSERT_TRUE(Copy(cl.ref, nchw.ref).ok());
  for (int64_t i = 0; i < nchw.numel(); ++i) ASSERT_EQ(cl.At(i), nchw.At(i)) << i;
}

// torch's constant_pad_nd: out[o] = in[o - before] inside `in`, else the value;
// pads on several dims, negative ones (crops), a 1-D tensor, a strided input
// and a channels-last out, against an element-by-element reference.
TEST(ConstantPad, PadsCropsLayoutsAndDtypes) {
  struct Case {
    std::vector<int64_t> in, before, after;
  };
  const std::vector<Case> cases = {
      {{2, 3, 4, 5}, {0, 0, 0, 0}, {0, 0, 1, 1}},   // TF "same" padding
      {{2, 3, 4, 5}, {0, 1, 2, -1}, {1, 0, -1, 3}},  // pads and crops on every dim
      {{7}, {3}, {2}},                                // 1-D: one row
      {{3, 6}, {-2, 0}, {-1, -4}},                    // crops only
  };
  for (DType dt : {DType::kFloat32, DType::kBFloat16, DType::kInt64, DType::kBool}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(DTypeName(dt)) + " rank " + std::to_string(c.in.size()));
      const int nd = static_cast<int>(c.in.size());
      std::vector<int64_t> out_sizes(c.in.size());
      for (int d = 0; d < nd; ++d) out_sizes[d] = c.in[d] + c.before[d] + c.after[d];
      for (bool strided : {false, true}) {
        TestTensor in = MakeRandom(dt, c.in, Layout::kContiguous, 9, -50.0, 50.0);
        if (strided && nd == 4) in = MakeRandom(dt, {2, 3, 5, 4}, Layout::kContiguous, 9, -50.0, 50.0).Transpose(2, 3);
        TestTensor out = Empty(dt, out_sizes);
        if (strided && nd == 4) {  // channels-last out
          out = Empty(dt, {out_sizes[0], out_sizes[2], out_sizes[3], out_sizes[1]});
          out = out.Transpose(2, 3).Transpose(1, 2);
        }
        ASSERT_TRUE(ConstantPad(out.ref, in.ref, c.before.data(), 3.0).ok());
        for (int64_t i = 0; i < out.numel(); ++i) {
          int64_t rem = i, in_lin = 0, in_stride = 1;
          bool inside = true;
          std::vector<int64_t> o_idx(nd);
          for (int d = nd - 1; d >= 0; --d) {
            o_idx[d] = rem % out_sizes[d];
            rem /= out_sizes[d];
          }
          for (int d = nd - 1; d >= 0; --d) {
            const int64_t k = o_idx[d] - c.before[d];
            inside = inside && k >= 0 && k < in.ref.sizes[d];
            in_lin += k * in_stride;
            in_stride *= in.ref.sizes[d];
          }
          const double want = inside ? in.At(in_lin) : RoundTo(dt, 3.0);
          ASSERT_EQ(out.At(i), want) << "element " << i;
        }
      }
    }
  }
}

// reflection / replication pads against an element-by-element reference:
// 1-3 padded dims, pads as large as the kernel allows, negative ones, a
// transposed input and a channels-last out, several dtypes.
TEST(IndexPad, ReflectAndReplicate) {
  struct Case {
    std::vector<int64_t> in, before, after;
  };
  const std::vector<Case> cases = {
      {{2, 3, 9}, {0, 0, 2}, {0, 0, 3}},          // 1-D pad over [N, C, W]
      {{2, 3, 4, 5}, {0, 0, 3, 4}, {0, 0, 1, 0}},  // 2-D, pads up to size - 1
      {{1, 2, 3, 4, 5}, {0, 0, 2, 1, 1}, {0, 0, 0, 3, 4}},  // 3-D
      {{2, 6}, {0, -2}, {0, 5}},                   // a crop and a pad
      {{3, 1}, {0, 0}, {0, 0}},                    // nothing to pad
  };
  for (PadMode mode : {PadMode::kReflect, PadMode::kReplicate}) {
    for (DType dt : {DType::kFloat32, DType::kBFloat16, DType::kInt64}) {
      for (const Case& c : cases) {
        const int nd = static_cast<int>(c.in.size());
        SCOPED_TRACE(std::string(mode == PadMode::kReflect ? "reflect " : "replicate ") +
                     DTypeName(dt) + " rank " + std::to_string(nd));
        std::vector<int64_t> out_sizes(c.in.size());
        for (int d = 0; d < nd; ++d) out_sizes[d] = c.in[d] + c.before[d] + c.after[d];
        for (bool strided : {false, true}) {
          TestTensor in = MakeRandom(dt, c.in, strided ? Layout::kTransposed : Layout::kContiguous,
                                     11, -50.0, 50.0);
          TestTensor out = Empty(dt, out_sizes);
          if (strided && nd == 4) {  // channels-last out
            out = Empty(dt, {out_sizes[0], out_sizes[2], out_sizes[3], out_sizes[1]});
            out = out.Transpose(2, 3).Transpose(1, 2);
          }
          ASSERT_TRUE(IndexPad(out.ref, in.ref, c.before.data(), mode).ok());
          for (int64_t i = 0; i < out.numel(); ++i) {
            int64_t rem = i, in_lin = 0, in_stride = 1;
            std::vector<int64_t> o_idx(nd);
            for (int d = nd - 1; d >= 0; --d) {
              o_idx[d] = rem % out_sizes[d];
              rem /= out_sizes[d];
            }
            for (int d = nd - 1; d >= 0; --d) {
              const int64_t n = c.in[d];
              int64_t k = o_idx[d] - c.before[d];
              if (mode == PadMode::kReplicate) {
                k = k < 0 ? 0 : k >= n ? n - 1 : k;
              } else {
                k = k < 0 ? -k : k >= n ? 2 * (n - 1) - k : k;
              }
              in_lin += k * in_stride;
              in_stride *= n;
            }
            ASSERT_EQ(out.At(i), in.At(in_lin)) << "element " << i;
          }
        }
      }
    }
  }
}

// ---- Describe ----------------------------------------------------------------------
TEST(Describe, NamesEnginesAndBytes) {
  TestTensor a = Empty(DType::kFloat32, {64, 32});
  TestTensor b = Empty(DType::kFloat32, {32}).Expand({64, 32});  // broadcast row
  TestTensor out = Empty(DType::kFloat32, {64, 32});
  KernelInfo mul = DescribeBinary(BinaryOp::kMul, out.ref, a.ref, &b.ref, "aten::mul");
  EXPECT_STREQ(mul.name, "mul_f32");
  EXPECT_STREQ(mul.op, "aten::mul");
  EXPECT_EQ(mul.engine, rt::Engine::kVector);
  EXPECT_EQ(mul.flops, 64u * 32);
  EXPECT_EQ(mul.bytes_read, 64u * 32 * 4 + 32 * 4);
  EXPECT_EQ(mul.bytes_written, 64u * 32 * 4);
  KernelInfo s = DescribeBinary(BinaryOp::kAdd, out.ref, a.ref, nullptr, "aten::add");
  EXPECT_EQ(s.bytes_read, 64u * 32 * 4);

  TestTensor h = Empty(DType::kBFloat16, {64, 32});
  KernelInfo e = DescribeUnary(UnaryOp::kExp, h.ref, h.ref, "aten::exp");
  EXPECT_STREQ(e.name, "exp_bf16");
  EXPECT_GT(e.flops, 64u * 32);  // transcendental: several ops per element

  KernelInfo same = DescribeCopy(out.ref, a.ref, "aten::copy_");
  EXPECT_EQ(same.engine, rt::Engine::kDma);
  EXPECT_STREQ(same.name, "copy_f32");
  KernelInfo cast = DescribeCopy(h.ref, a.ref, "aten::_to_copy");
  EXPECT_EQ(cast.engine, rt::Engine::kVector);
  EXPECT_STREQ(cast.name, "cast_f32_bf16");
  EXPECT_EQ(cast.bytes_read, 64u * 32 * 4);
  EXPECT_EQ(cast.bytes_written, 64u * 32 * 2);

  TestTensor bo = Empty(DType::kBool, {64, 32});
  EXPECT_STREQ(DescribeBinary(BinaryOp::kLt, bo.ref, a.ref, &a.ref, "aten::lt").name, "lt_f32");
  EXPECT_STREQ(DescribeFill(bo.ref, "aten::fill_").name, "fill_bool");
  EXPECT_STREQ(DescribeWhere(out.ref, "aten::where").name, "where_f32");
}

}  // namespace
}  // namespace trn::kernels
