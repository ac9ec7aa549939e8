// The elementwise ops of real models (rounding, predicates, erf, sign,
// rounding division, remainder/fmod, bitwise ops and shifts, clamp, the
// parametrized activations, log1p/expm1, round(decimals), nan_to_num, lerp)
// on every compiled SIMD target against scalar references written from
// torch's documented semantics, with edge values (inf, -inf, NaN, -0.0, x.5,
// INT_MIN / -1, shifts past the width).
//
// Tolerances: floor/ceil/trunc/round/sign, predicates, integer and bitwise
// ops, clamp, nan_to_num, div/remainder/fmod on quarter-valued inputs: exact.
// erf: 1e-6 relative + 1e-7 absolute; lerp: 1e-6 relative to the operands'
// magnitude; leaky_relu 1e-7, hardswish/hardsigmoid 2.5e-7, elu/softplus and
// log1p/expm1 1e-6, mish 2e-6 relative (+1e-7 absolute for the activations);
// bf16/f16 outputs: plus one ulp of the storage type.

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <cstring>
#include <random>

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
using testing::kIntTypes;
using testing::kNumTypes;


std::vector<std::vector<int64_t>> Shapes() { return {{0}, {1}, {5}, {17}, {1000}, {7, 33}}; }

uint32_t F32BitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

double Compute(DType dt, double v) { return IsFloating(dt) ? static_cast<float>(v) : v; }

std::string Ctx(const char* op, DType dt, Layout l, const std::vector<int64_t>& shape) {
  std::string s = std::string(op) + " " + DTypeName(dt) + " " + LayoutName(l) + " [";
  for (int64_t d : shape) s += std::to_string(d) + ",";
  return s + "]";
}

// 1-D tensor of `dt` holding `values` (rounded as the dtype stores them).
TestTensor FromValues(DType dt, const std::vector<double>& values) {
  TestTensor t = Empty(dt, {static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i) t.Set(static_cast<int64_t>(i), values[i]);
  return t;
}

const std::vector<double> kSpecials = {NAN,  INFINITY, -INFINITY, 0.0,  -0.0,   0.5, -0.5,
                                       1.5,  2.5,      -2.5,      1e30, -1e-30, 3.0, -7.25};

// ---- Vectorized float16 runs (convert.h) ---------------------------------------------
// Every target must agree bit for bit with the scalar conversions, which
// elementwise_test.cc checks against independent encoders.
TEST(ConvertRuns, HalfFloatsMatchScalarOnEveryTarget) {
  std::vector<uint16_t> halves(65536 + 13);  // odd length: vector body and scalar tail
  for (size_t i = 0; i < halves.size(); ++i) halves[i] = static_cast<uint16_t>(i);
  std::vector<float> floats = {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, -65520.0f, 5.96e-8f,
                               2.98e-8f, 2.9802322e-8f, 6.1e-5f, 1e-10f, 3.4e38f, INFINITY,
                               -INFINITY, NAN, 1.00048828125f, 1.00146484375f};
  std::mt19937 rng(3);
  for (int i = 0; i < 100003; ++i) {
    const uint32_t bits = rng();
    float f;
    std::memcpy(&f, &bits, 4);
    floats.push_back(i % 2 ? f : std::ldexp(static_cast<float>(rng() % 8192) + 0.5f, -int(rng() % 40)));
  }
  ForEachTarget([&](const char*) {
    std::vector<float> wide(halves.size());
    for (size_t off : {size_t{0}, size_t{1}}) {  // misaligned too
      internal::F16ToF32Contiguous(halves.data() + off, wide.data(),
                                   static_cast<int64_t>(halves.size() - off));
      for (size_t i = 0; i + off < halves.size(); ++i) {
        const float e = internal::F16ToF32(halves[i + off]);
        if (std::isnan(e)) ASSERT_TRUE(std::isnan(wide[i])) << i;
        else ASSERT_EQ(F32BitsOf(wide[i]), F32BitsOf(e)) << "half bits " << halves[i + off];
      }
    }
    std::vector<uint16_t> narrow(floats.size());
    internal::F32ToF16Contiguous(floats.data(), narrow.data(), static_cast<int64_t>(floats.size()));
    for (size_t i = 0; i < floats.size(); ++i) {
      if (std::isnan(floats[i])) {
        ASSERT_TRUE(std::isnan(internal::F16ToF32(narrow[i]))) << i;
      } else {
        ASSERT_EQ(narrow[i], internal::F32ToF16(floats[i])) << floats[i];
      }
    }
    // bfloat16: bit-identical including NaN.
    for (size_t off : {size_t{0}, size_t{1}}) {
      internal::BF16ToF32Contiguous(halves.data() + off, wide.data(),
                                    static_cast<int64_t>(halves.size() - off));
      for (size_t i = 0; i + off < halves.size(); ++i) {
        ASSERT_EQ(F32BitsOf(wide[i]), F32BitsOf(internal::BF16ToF32(halves[i + off])))
            << "bf16 bits " << halves[i + off];
      }
    }
    internal::F32ToBF16Contiguous(floats.data(), narrow.data(), static_cast<int64_t>(floats.size()));
    for (size_t i = 0; i < floats.size(); ++i) {
      ASSERT_EQ(narrow[i], internal::F32ToBF16(floats[i])) << floats[i];
    }
  });
}

// ---- Unary -------------------------------------------------------------------------
struct UnaryCase {
  UnaryOp op;
  const char* name;
  double (*ref)(double);
};
double SignRef(double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; }
const UnaryCase kRoundingCases[] = {
    {UnaryOp::kFloor, "floor", [](double x) { return std::floor(x); }},
    {UnaryOp::kCeil, "ceil", [](double x) { return std::ceil(x); }},
    {UnaryOp::kTrunc, "trunc", [](double x) { return std::trunc(x); }},
    {UnaryOp::kRound, "round", [](double x) { return std::nearbyint(x); }},  // half to even
    {UnaryOp::kSign, "sign", SignRef},
};

TEST(UnaryMath, RoundingAndSignOnEveryTarget) {
  ForEachTarget([](const char*) {
    for (const UnaryCase& c : kRoundingCases) {
      for (DType dt : kNumTypes) {
        uint32_t seed = 21;
        for (const auto& shape : Shapes()) {
          for (Layout l : AllLayouts()) {
            TestTensor in = MakeRandom(dt, shape, l, seed++, -6, 6);
            for (int64_t i = 0; i < in.numel(); i += 2) {  // half of them on x.5
              in.Set(i, std::round(in.At(i) * 2) / 2);
            }
            TestTensor out = Empty(dt, shape, l == Layout::kMisaligned ? 1 : 0);
            ASSERT_TRUE(Unary(c.op, out.ref, in.ref).ok());
            for (int64_t i = 0; i < out.numel(); ++i) {
              const double e = RoundTo(dt, c.ref(Compute(dt, in.At(i))));
              ASSERT_EQ(out.At(i), e) << Ctx(c.name, dt, l, shape) << " x=" << in.At(i);
            }
          }
        }
      }
      // Specials: NaN stays NaN (sign: 0), infinities stay, -0.0 keeps its sign.
      for (DType dt : kFloatTypes) {
        TestTensor in = FromValues(dt, kSpecials);
        TestTensor out = Empty(dt, {static_cast<int64_t>(kSpecials.size())});
        ASSERT_TRUE(Unary(c.op, out.ref, in.ref).ok());
        for (int64_t i = 0; i < out.numel(); ++i) {
          const double x = Compute(dt, in.At(i));
          const double e = c.op == UnaryOp::kSign && std::isnan(x) ? 0.0 : RoundTo(dt, c.ref(x));
          if (std::isnan(e)) {
            EXPECT_TRUE(std::isnan(out.At(i))) << c.name << " " << DTypeName(dt) << " x=" << x;
          } else {
            EXPECT_EQ(out.At(i), e) << c.name << " " << DTypeName(dt) << " x=" << x;
            if (c.op != UnaryOp::kSign) {
              EXPECT_EQ(std::signbit(out.At(i)), std::signbit(e)) << c.name << " x=" << x;
            }
          }
        }
      }
    }
  });
}

TEST(UnaryMath, IntegerExtremesAreExact) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  const int64_t small = std::numeric_limits<int64_t>::min();
  TestTensor in = Empty(DType::kInt64, {3});
  int64_t* p = static_cast<int64_t*>(in.ref.data);
  p[0] = big, p[1] = small, p[2] = (int64_t{1} << 60) + 1;
  for (UnaryOp op : {UnaryOp::kFloor, UnaryOp::kRound, UnaryOp::kSign, UnaryOp::kBitwiseNot}) {
    TestTensor out = Empty(DType::kInt64, {3});
    ASSERT_TRUE(Unary(op, out.ref, in.ref).ok());
    for (int64_t i = 0; i < 3; ++i) {
      int64_t e = p[i];
      if (op == UnaryOp::kSign) e = p[i] > 0 ? 1 : -1;
      if (op == UnaryOp::kBitwiseNot) e = ~p[i];
      EXPECT_EQ(out.AtInt(i), e) << static_cast<int>(op) << " " << i;
    }
  }
}

TEST(UnaryMath, BitwiseNotIntsAndBool) {
  for (DType dt : {DType::kInt32, DType::kInt64, DType::kBool}) {
    for (Layout l : AllLayouts()) {
      TestTensor in = MakeRandom(dt, {7, 33}, l, 5, -100, 100);
      TestTensor out = Empty(dt, {7, 33});
      ASSERT_TRUE(Unary(UnaryOp::kBitwiseNot, out.ref, in.ref).ok());
      for (int64_t i = 0; i < out.numel(); ++i) {
        const double e = dt == DType::kBool ? (in.At(i) == 0) : static_cast<double>(~in.AtInt(i));
        ASSERT_EQ(out.At(i), e) << DTypeName(dt) << " " << LayoutName(l) << " " << i;
      }
    }
  }
}

TEST(UnaryMath, PredicatesOnEveryTarget) {
  struct {
    UnaryOp op;
    const char* name;
    bool (*ref)(double);
  } cases[] = {
      {UnaryOp::kIsNan, "isnan", [](double x) { return std::isnan(x); }},
      {UnaryOp::kIsInf, "isinf", [](double x) { return std::isinf(x); }},
      {UnaryOp::kIsPosInf, "isposinf", [](double x) { return x == INFINITY; }},
      {UnaryOp::kIsNegInf, "isneginf", [](double x) { return x == -INFINITY; }},
      {UnaryOp::kIsFinite, "isfinite", [](double x) { return std::isfinite(x); }},
  };
  ForEachTarget([&](const char*) {
    for (const auto& c : cases) {
      for (DType dt : {DType::kFloat32, DType::kBFloat16, DType::kFloat16, DType::kFloat64,
                       DType::kInt32, DType::kInt64, DType::kBool}) {
        for (Layout l : AllLayouts()) {
          for (const auto& shape : Shapes()) {
            TestTensor in = MakeRandom(dt, shape, l, 9, -3, 3);
            if (IsFloating(dt)) {  // sprinkle the specials (1e30 is inf in f16)
              for (int64_t i = 0; i < in.numel(); i += 3) {
                in.Set(i, kSpecials[static_cast<size_t>(i / 3) % kSpecials.size()]);
              }
            }
            TestTensor out = Empty(DType::kBool, shape, l == Layout::kMisaligned ? 1 : 0);
            ASSERT_TRUE(Unary(c.op, out.ref, in.ref).ok());
            for (int64_t i = 0; i < out.numel(); ++i) {
              ASSERT_EQ(out.At(i), c.ref(in.At(i)) ? 1.0 : 0.0)
                  << Ctx(c.name, dt, l, shape) << " x=" << in.At(i);
            }
          }
        }
      }
    }
  });
}

TEST(UnaryMath, ErfOnEveryTarget) {
  ForEachTarget([](const char*) {
    for (DType dt : kFloatTypes) {
      uint32_t seed = 3;
      for (const auto& shape : Shapes()) {
        for (Layout l : AllLayouts()) {
          TestTensor in = MakeRandom(dt, shape, l, seed++, -5, 5);
          for (int64_t i = 0; i < in.numel(); i += 4) in.Set(i, in.At(i) * 1e-3);  // near 0
          TestTensor out = Empty(dt, shape);
          ASSERT_TRUE(Unary(UnaryOp::kErf, out.ref, in.ref).ok());
          for (int64_t i = 0; i < out.numel(); ++i) {
            const double e = std::erf(Compute(dt, in.At(i)));
            const std::string err =
                CheckClose(out.At(i), RoundTo(dt, e), 0, 1e-7 + StorageTol(dt, e, 1e-6));
            ASSERT_EQ(err, "") << Ctx("erf", dt, l, shape) << " x=" << in.At(i);
          }
        }
      }
    }
    TestTensor in = FromValues(DType::kFloat32, {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e-30});
    TestTensor out = Empty(DType::kFloat32, {6});
    ASSERT_TRUE(Unary(UnaryOp::kErf, out.ref, in.ref).ok());
    EXPECT_TRUE(std::isnan(out.At(0)));
    EXPECT_EQ(out.At(1), 1.0);
    EXPECT_EQ(out.At(2), -1.0);
    EXPECT_EQ(out.At(3), 0.0);
    EXPECT_TRUE(std::signbit(out.At(4)));
    EXPECT_EQ(CheckClose(out.At(5), std::erf(static_cast<float>(1e-30)), 1e-6), "");
  });
}

// ---- The libm functions (UnaryMath / the float-only binary ops) ----------------------
// References in double from the definitions; float32 in, so the tolerance is
// libm's float error plus float32 rounding of the argument's image.
struct LibmCase {
  UnaryOp op;
  const char* name;
  double lo, hi;  // input range
  double (*ref)(double);
};
const LibmCase kLibmCases[] = {
    {UnaryOp::kTan, "tan", -1.5, 1.5, [](double x) { return std::tan(x); }},
    {UnaryOp::kAsin, "asin", -1, 1, [](double x) { return std::asin(x); }},
    {UnaryOp::kAcos, "acos", -1, 1, [](double x) { return std::acos(x); }},
    {UnaryOp::kAtan, "atan", -20, 20, [](double x) { return std::atan(x); }},
    {UnaryOp::kSinh, "sinh", -10, 10, [](double x) { return std::sinh(x); }},
    {UnaryOp::kCosh, "cosh", -10, 10, [](double x) { return std::cosh(x); }},
    {UnaryOp::kAsinh, "asinh", -50, 50, [](double x) { return std::asinh(x); }},
    {UnaryOp::kAcosh, "acosh", 1, 50, [](double x) { return std::acosh(x); }},
    {UnaryOp::kAtanh, "atanh", -0.99, 0.99, [](double x) { return std::atanh(x); }},
    {UnaryOp::kLog2, "log2", 1e-3, 100, [](double x) { return std::log2(x); }},
    {UnaryOp::kLog10, "log10", 1e-3, 100, [](double x) { return std::log10(x); }},
    {UnaryOp::kExp2, "exp2", -20, 20, [](double x) { return std::exp2(x); }},
    {UnaryOp::kErfc, "erfc", -3, 9, [](double x) { return std::erfc(x); }},
    {UnaryOp::kLgamma, "lgamma", 0.1, 30, [](double x) { return std::lgamma(x); }},
    {UnaryOp::kFrac, "frac", -20, 20, [](double x) { return x - std::trunc(x); }},
    {UnaryOp::kSinc, "sinc", -4, 4,
     [](double x) { return x == 0 ? 1.0 : std::sin(M_PI * x) / (M_PI * x); }},
};

TEST(UnaryMath, LibmFunctionsAgainstDoubleReferences) {
  for (const LibmCase& c : kLibmCases) {
    for (DType dt : kFloatTypes) {
      uint32_t seed = 7;
      for (const auto& shape : Shapes()) {
        for (Layout l : AllLayouts()) {
          TestTensor in = MakeRandom(dt, shape, l, seed++, c.lo, c.hi);
          TestTensor out = Empty(dt, shape, l == Layout::kMisaligned ? 1 : 0);
          ASSERT_TRUE(Unary(c.op, out.ref, in.ref).ok());
          for (int64_t i = 0; i < out.numel(); ++i) {
            const double x = Compute(dt, in.At(i));
            const double e = c.ref(x);
            // sinc's pi * x is rounded to float32 first (torch's formula): near
            // its zeros that is an absolute error of ~pi * x * 2^-24.
            const double abs_tol = c.op == UnaryOp::kSinc ? 4e-7 : 1e-7;
            const std::string err = CheckClose(out.At(i), RoundTo(dt, e), 0,
                                               abs_tol + StorageTol(dt, e, 2e-6));
            ASSERT_EQ(err, "") << Ctx(c.name, dt, l, shape) << " x=" << x;
          }
        }
      }
    }
  }
  // Domain edges as torch's CPU: NaN outside, infinities at the poles.
  TestTensor in = FromValues(DType::kFloat32, {2.0, -1.0, 0.0, 1.0, NAN, INFINITY, -0.0});
  TestTensor out = Empty(DType::kFloat32, {7});
  ASSERT_TRUE(Unary(UnaryOp::kAsin, out.ref, in.ref).ok());
  EXPECT_TRUE(std::isnan(out.At(0)));
  ASSERT_TRUE(Unary(UnaryOp::kLog2, out.ref, in.ref).ok());
  EXPECT_TRUE(std::isnan(out.At(1)));
  EXPECT_EQ(out.At(2), -INFINITY);
  ASSERT_TRUE(Unary(UnaryOp::kAtanh, out.ref, in.ref).ok());
  EXPECT_EQ(out.At(3), INFINITY);
  ASSERT_TRUE(Unary(UnaryOp::kLgamma, out.ref, in.ref).ok());
  EXPECT_EQ(out.At(2), INFINITY);  // a pole
  ASSERT_TRUE(Unary(UnaryOp::kFrac, out.ref, in.ref).ok());
  EXPECT_TRUE(std::isnan(out.At(5)));  // inf - trunc(inf)
  EXPECT_FALSE(std::signbit(out.At(6)));  // -0 - -0 is +0, as torch's
  ASSERT_TRUE(Unary(UnaryOp::kSinc, out.ref, in.ref).ok());
  EXPECT_EQ(out.At(2), 1.0);
  EXPECT_TRUE(std::isnan(out.At(4)));
}

TEST(UnaryMath, SignbitOfEveryDtype) {
  for (DType dt : kNumTypes) {
    const std::vector<double> values = IsFloating(dt)
                                           ? std::vector<double>{-0.0, 0.0, -2.5, 3.0, -INFINITY, NAN, -NAN}
                                           : std::vector<double>{-1, 0, 5, -7};
    TestTensor in = FromValues(dt, values);
    if (dt == DType::kBFloat16 || dt == DType::kFloat16) {  // a -NaN's bits (Set makes +NaN)
      static_cast<uint16_t*>(in.ref.data)[6] = dt == DType::kBFloat16 ? 0xFFC0 : 0xFE00;
    }
    TestTensor out = Empty(DType::kBool, {static_cast<int64_t>(values.size())});
    ASSERT_TRUE(Unary(UnaryOp::kSignbit, out.ref, in.ref).ok());
    for (size_t i = 0; i < values.size(); ++i) {
      EXPECT_EQ(out.At(static_cast<int64_t>(i)), std::signbit(values[i]) ? 1.0 : 0.0)
          << DTypeName(dt) << " " << values[i];
    }
  }
  TestTensor b = FromValues(DType::kBool, {1, 0});
  TestTensor out = Empty(DType::kBool, {2});
  ASSERT_TRUE(Unary(UnaryOp::kSignbit, out.ref, b.ref).ok());
  EXPECT_EQ(out.At(0) + out.At(1), 0.0);
}

double RefLibmBinary(BinaryOp op, double a, double b) {
  switch (op) {
    case BinaryOp::kHypot: return std::sqrt(a * a + b * b);
    case BinaryOp::kLogAddExp: return std::log(std::exp(a) + std::exp(b));
    case BinaryOp::kLogAddExp2: return std::log2(std::exp2(a) + std::exp2(b));
    case BinaryOp::kCopysign: return std::copysign(a, b);
    case BinaryOp::kXlogy: return std::isnan(b) ? NAN : a == 0 ? 0.0 : a * std::log(b);
    case BinaryOp::kFmax: return std::isnan(a) ? b : std::isnan(b) ? a : std::max(a, b);
    case BinaryOp::kFmin: return std::isnan(a) ? b : std::isnan(b) ? a : std::min(a, b);
    default: return a == 0 ? b : (a > 0 ? 1.0 : 0.0);  // kHeaviside
  }
}

TEST(BinaryMath, LibmBinaryOpsAgainstDoubleReferences) {
  const BinaryOp ops[] = {BinaryOp::kHypot, BinaryOp::kLogAddExp, BinaryOp::kLogAddExp2,
                          BinaryOp::kCopysign, BinaryOp::kXlogy, BinaryOp::kFmax,
                          BinaryOp::kFmin, BinaryOp::kHeaviside};
  for (BinaryOp op : ops) {
    const bool any_dtype = op == BinaryOp::kFmax || op == BinaryOp::kFmin || op == BinaryOp::kHeaviside;
    for (DType dt : kNumTypes) {
      if (!IsFloating(dt) && !any_dtype) continue;  // the bridge rejects or promotes them
      uint32_t seed = 11;
      for (const auto& shape : Shapes()) {
        for (Layout l : AllLayouts()) {
          TestTensor a = MakeRandom(dt, shape, l, seed++, -6, 6);
          TestTensor b = MakeRandom(dt, shape, AllLayouts()[(int(l) + 2) % 5], seed++,
                                    op == BinaryOp::kXlogy ? 0.01 : -6, 6);
          for (int64_t i = 0; i < a.numel(); i += 5) a.Set(i, 0);  // heaviside's and xlogy's zeros
          TestTensor out = Empty(dt, shape);
          ASSERT_TRUE(Binary(op, out.ref, a.ref, b.ref).ok());
          for (int64_t i = 0; i < out.numel(); ++i) {
            const double x = Compute(dt, a.At(i)), y = Compute(dt, b.At(i));
            const double e = RefLibmBinary(op, x, y);
            const std::string err =
                CheckClose(out.At(i), RoundTo(dt, e), 0,
                           IsFloating(dt) ? 1e-7 + StorageTol(dt, e, 2e-6) : 0);
            ASSERT_EQ(err, "") << Ctx("binary libm", dt, l, shape) << " op " << int(op)
                               << " x=" << x << " y=" << y;
          }
        }
      }
    }
  }
  // Specials: logaddexp of equal infinities, NaN through fmax / fmin, xlogy(0, NaN).
  TestTensor a = FromValues(DType::kFloat32, {INFINITY, -INFINITY, NAN, 0.0, 0.0, -0.0});
  TestTensor b = FromValues(DType::kFloat32, {INFINITY, -INFINITY, 1.0, NAN, 0.0, 0.5});
  TestTensor out = Empty(DType::kFloat32, {6});
  ASSERT_TRUE(Binary(BinaryOp::kLogAddExp, out.ref, a.ref, b.ref).ok());
  EXPECT_EQ(out.At(0), INFINITY);
  EXPECT_EQ(out.At(1), -INFINITY);
  EXPECT_TRUE(std::isnan(out.At(2)));
  ASSERT_TRUE(Binary(BinaryOp::kFmax, out.ref, a.ref, b.ref).ok());
  EXPECT_EQ(out.At(2), 1.0);
  EXPECT_EQ(out.At(3), 0.0);
  ASSERT_TRUE(Binary(BinaryOp::kXlogy, out.ref, a.ref, b.ref).ok());
  EXPECT_TRUE(std::isnan(out.At(3)));
  EXPECT_EQ(out.At(4), 0.0);  // 0 * log(0) is 0, not NaN
  ASSERT_TRUE(Binary(BinaryOp::kHeaviside, out.ref, a.ref, b.ref).ok());
  EXPECT_EQ(out.At(5), 0.5);  // -0 == 0
  EXPECT_EQ(out.At(2), 0.0);  // NaN is not > 0
}

// ---- Rounding division, remainder, fmod ----------------------------------------------
// References from the definitions (not torch's formulas): floor / trunc of the
// exact quotient, x - y * floor(x / y), C fmod.
double RefDivMath(BinaryOp op, double x, double y) {
  switch (op) {
    case BinaryOp::kDivTrunc: return std::trunc(x / y);
    case BinaryOp::kDivFloor: return std::floor(x / y);
    case BinaryOp::kRemainder: {
      if (y == 0) return NAN;
      return x - y * std::floor(x / y);
    }
    default: return std::fmod(x, y);
  }
}

TEST(BinaryMath, DivRemainderFmodOnEveryTarget) {
  const BinaryOp ops[] = {BinaryOp::kDivTrunc, BinaryOp::kDivFloor, BinaryOp::kRemainder,
                          BinaryOp::kFmod};
  const char* names[] = {"div_trunc", "div_floor", "remainder", "fmod"};
  ForEachTarget([&](const char*) {
    for (int k = 0; k < 4; ++k) {
      for (DType dt : kNumTypes) {
        uint32_t seed = 100;
        for (const auto& shape : Shapes()) {
          for (Layout l : AllLayouts()) {
            TestTensor a = MakeRandom(dt, shape, l, seed++, -40, 40);
            TestTensor b = MakeRandom(dt, shape, AllLayouts()[(int(l) + 2) % 5], seed++, -9, 9);
            for (int64_t i = 0; i < a.numel(); ++i) {  // quarters for floats, b != 0
              if (IsFloating(dt)) a.Set(i, std::round(a.At(i) * 4) / 4);
            }
            for (int64_t i = 0; i < b.numel(); ++i) {
              double v = IsFloating(dt) ? std::round(b.At(i) * 4) / 4 : b.At(i);
              b.Set(i, v == 0 ? 3 : v);
            }
            TestTensor out = Empty(dt, shape);
            ASSERT_TRUE(Binary(ops[k], out.ref, a.ref, b.ref).ok());
            for (int64_t i = 0; i < out.numel(); ++i) {
              // bf16/f16: trunc of the quotient rounded to storage (Note [Half rounding division]).
              const bool half = dt == DType::kBFloat16 || dt == DType::kFloat16;
              const double e = half && ops[k] == BinaryOp::kDivTrunc
                                   ? RoundTo(dt, std::trunc(RoundTo(dt, a.At(i) / b.At(i))))
                                   : RoundTo(dt, RefDivMath(ops[k], a.At(i), b.At(i)));
              ASSERT_EQ(out.At(i), e) << Ctx(names[k], dt, l, shape) << " " << a.At(i) << ", "
                                      << b.At(i);
            }
            TestTensor out2 = Empty(dt, shape);  // scalar divisor, then scalar dividend
            ASSERT_TRUE(BinaryScalar(ops[k], out2.ref, a.ref, -3.0).ok());
            for (int64_t i = 0; i < out2.numel(); ++i) {
              const bool half = dt == DType::kBFloat16 || dt == DType::kFloat16;
              const double e = half && ops[k] == BinaryOp::kDivTrunc
                                   ? std::trunc(RoundTo(dt, a.At(i) / -3.0))
                                   : RefDivMath(ops[k], a.At(i), -3.0);
              ASSERT_EQ(out2.At(i), RoundTo(dt, e)) << names[k] << " scalar " << a.At(i);
            }
            ASSERT_TRUE(BinaryScalar(ops[k], out2.ref, b.ref, 7.0, /*scalar_first=*/true).ok());
            for (int64_t i = 0; i < out2.numel(); ++i) {
              const bool half = dt == DType::kBFloat16 || dt == DType::kFloat16;
              const double e = half && ops[k] == BinaryOp::kDivTrunc
                                   ? std::trunc(RoundTo(dt, 7.0 / b.At(i)))
                                   : RefDivMath(ops[k], 7.0, b.At(i));
              ASSERT_EQ(out2.At(i), RoundTo(dt, e)) << names[k] << " scalar-first " << b.At(i);
            }
          }
        }
      }
    }
  });
}

TEST(BinaryMath, FloatDivisionByZeroAndSpecials) {
  TestTensor a = FromValues(DType::kFloat32, {1.0, -1.0, 0.0, NAN, INFINITY, 5.0, -0.0});
  TestTensor b = FromValues(DType::kFloat32, {0.0, 0.0, 0.0, 1.0, 2.0, INFINITY, 3.0});
  TestTensor out = Empty(DType::kFloat32, {7});
  ASSERT_TRUE(Binary(BinaryOp::kDivFloor, out.ref, a.ref, b.ref).ok());
  EXPECT_EQ(out.At(0), INFINITY);
  EXPECT_EQ(out.At(1), -INFINITY);
  EXPECT_TRUE(std::isnan(out.At(2)));
  EXPECT_TRUE(std::isnan(out.At(3)));
  EXPECT_TRUE(std::isnan(out.At(4)));  // torch: fmod(inf, 2) is NaN
  EXPECT_EQ(out.At(5), 0.0);
  EXPECT_TRUE(std::signbit(out.At(6)));  // -0 // 3 is -0
  ASSERT_TRUE(Binary(BinaryOp::kRemainder, out.ref, a.ref, b.ref).ok());
  EXPECT_TRUE(std::isnan(out.At(0)));
  EXPECT_EQ(out.At(5), 5.0);
}

TEST(BinaryMath, IntegerDivisionEdges) {
  for (DType dt : kIntTypes) {
    const bool i64 = dt == DType::kInt64;
    TestTensor a = Empty(dt, {4}), b = Empty(dt, {4});
    const int64_t mn = i64 ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int32_t>::min();
    if (i64) {
      int64_t* pa = static_cast<int64_t*>(a.ref.data);
      int64_t* pb = static_cast<int64_t*>(b.ref.data);
      pa[0] = mn, pa[1] = -7, pa[2] = 7, pa[3] = mn;
      pb[0] = -1, pb[1] = 2, pb[2] = -2, pb[3] = 1;
    } else {
      int32_t* pa = static_cast<int32_t*>(a.ref.data);
      int32_t* pb = static_cast<int32_t*>(b.ref.data);
      pa[0] = static_cast<int32_t>(mn), pa[1] = -7, pa[2] = 7, pa[3] = static_cast<int32_t>(mn);
      pb[0] = -1, pb[1] = 2, pb[2] = -2, pb[3] = 1;
    }
    struct {
      BinaryOp op;
      int64_t e[4];
    } cases[] = {
        {BinaryOp::kDivTrunc, {mn, -3, -3, mn}},  // INT_MIN / -1 wraps (torch on x86)
        {BinaryOp::kDivFloor, {mn, -4, -4, mn}},
        {BinaryOp::kRemainder, {0, 1, -1, 0}},
        {BinaryOp::kFmod, {0, -1, 1, 0}},
    };
    for (const auto& c : cases) {
      TestTensor out = Empty(dt, {4});
      ASSERT_TRUE(Binary(c.op, out.ref, a.ref, b.ref).ok());
      for (int i = 0; i < 4; ++i) EXPECT_EQ(out.AtInt(i), c.e[i]) << DTypeName(dt) << " " << i;
      // Division by zero is an error, never a trap.
      TestTensor zero = Empty(dt, {4});
      const Status s = Binary(c.op, out.ref, a.ref, zero.ref);
      EXPECT_FALSE(s.ok());
      EXPECT_NE(s.error.find("ZeroDivisionError"), std::string::npos) << s.error;
      EXPECT_FALSE(BinaryScalar(c.op, out.ref, a.ref, 0.0).ok());
    }
  }
}

// ---- Bitwise ---------------------------------------------------------------------------
TEST(BinaryMath, BitwiseAndOrXorOverLayouts) {
  for (DType dt : {DType::kInt32, DType::kInt64, DType::kBool}) {
    uint32_t seed = 40;
    for (const auto& shape : Shapes()) {
      for (Layout l : AllLayouts()) {
        TestTensor a = MakeRandom(dt, shape, l, seed++, -1000, 1000);
        TestTensor b = MakeRandom(dt, shape, AllLayouts()[(int(l) + 3) % 5], seed++, -1000, 1000);
        for (BinaryOp op : {BinaryOp::kBitwiseAnd, BinaryOp::kBitwiseOr, BinaryOp::kBitwiseXor}) {
          TestTensor out = Empty(dt, shape);
          ASSERT_TRUE(Binary(op, out.ref, a.ref, b.ref).ok());
          for (int64_t i = 0; i < out.numel(); ++i) {
            const int64_t x = a.AtInt(i), y = b.AtInt(i);
            const int64_t e = op == BinaryOp::kBitwiseAnd ? (x & y)
                              : op == BinaryOp::kBitwiseOr ? (x | y)
                                                           : (x ^ y);
            ASSERT_EQ(out.AtInt(i), e) << Ctx("bitwise", dt, l, shape) << " " << x << "," << y;
          }
        }
      }
    }
  }
}

TEST(BinaryMath, ShiftsFollowTorch) {
  // Expected values written out by hand: negative or too-wide shifts give 0
  // (left) or the sign fill (right); left shifts wrap.
  const std::vector<double> xs = {1, 1, -8, -8, 3, 1, 1, 5, -1};
  const std::vector<double> ys = {3, -1, 1, 70, 62, 63, 64, 0, 200};
  const int64_t left64[] = {8, 0, -16, 0, static_cast<int64_t>(0xC000000000000000ull),
                            std::numeric_limits<int64_t>::min(), 0, 5, 0};
  const int64_t right64[] = {0, 0, -4, -1, 0, 0, 0, 5, -1};
  TestTensor a = FromValues(DType::kInt64, xs), b = FromValues(DType::kInt64, ys);
  TestTensor out = Empty(DType::kInt64, {9});
  ASSERT_TRUE(Binary(BinaryOp::kShiftLeft, out.ref, a.ref, b.ref).ok());
  for (int i = 0; i < 9; ++i) EXPECT_EQ(out.AtInt(i), left64[i]) << "<< " << i;
  ASSERT_TRUE(Binary(BinaryOp::kShiftRight, out.ref, a.ref, b.ref).ok());
  for (int i = 0; i < 9; ++i) EXPECT_EQ(out.AtInt(i), right64[i]) << ">> " << i;

  const std::vector<double> ys32 = {3, -1, 1, 40, 30, 31, 32, 0, 200};
  const int64_t left32[] = {8, 0, -16, 0, -1073741824, std::numeric_limits<int32_t>::min(), 0, 5, 0};
  TestTensor a32 = FromValues(DType::kInt32, xs), b32 = FromValues(DType::kInt32, ys32);
  TestTensor out32 = Empty(DType::kInt32, {9});
  ASSERT_TRUE(Binary(BinaryOp::kShiftLeft, out32.ref, a32.ref, b32.ref).ok());
  for (int i = 0; i < 9; ++i) EXPECT_EQ(out32.AtInt(i), left32[i]) << "i32 << " << i;
  ASSERT_TRUE(BinaryScalar(BinaryOp::kShiftRight, out32.ref, a32.ref, 1.0).ok());
  EXPECT_EQ(out32.AtInt(2), -4);
}

// ---- Clamp, round(decimals), nan_to_num, lerp ---------------------------------------
TEST(Clamp, BoundsLayoutsAndNaNOnEveryTarget) {
  struct Bounds {
    double lo, hi;
  };
  const Bounds bounds[] = {{-1.5, 2.25}, {-INFINITY, 0.5}, {-2, INFINITY}, {3, -3}};
  ForEachTarget([&](const char*) {
    for (DType dt : kNumTypes) {
      uint32_t seed = 60;
      for (const auto& shape : Shapes()) {
        for (Layout l : AllLayouts()) {
          TestTensor in = MakeRandom(dt, shape, l, seed++, -5, 5);
          if (IsFloating(dt)) {
            for (int64_t i = 0; i < in.numel(); i += 5) in.Set(i, kSpecials[i % kSpecials.size()]);
          }
          for (const Bounds& bd : bounds) {
            // Integer kernels get integer bounds (the bridge promotes otherwise).
            const double lo = IsFloating(dt) || std::isinf(bd.lo) ? bd.lo : std::trunc(bd.lo);
            const double hi = IsFloating(dt) || std::isinf(bd.hi) ? bd.hi : std::trunc(bd.hi);
            TestTensor out = Empty(dt, shape, l == Layout::kMisaligned ? 1 : 0);
            ASSERT_TRUE(Clamp(out.ref, in.ref, lo, hi).ok());
            for (int64_t i = 0; i < out.numel(); ++i) {
              const double x = Compute(dt, in.At(i));
              const double e = std::isnan(x) ? x
                               : RoundTo(dt, std::min(std::max(x, Compute(dt, lo)), Compute(dt, hi)));
              if (std::isnan(e)) {
                ASSERT_TRUE(std::isnan(out.At(i))) << Ctx("clamp", dt, l, shape);
              } else {
                ASSERT_EQ(out.At(i), e) << Ctx("clamp", dt, l, shape) << " x=" << x << " [" << lo
                                        << "," << hi << "]";
              }
            }
          }
        }
      }
    }
  });
  TestTensor in = Empty(DType::kInt64, {2});  // bounds saturate to the type's range
  static_cast<int64_t*>(in.ref.data)[0] = std::numeric_limits<int64_t>::max();
  static_cast<int64_t*>(in.ref.data)[1] = std::numeric_limits<int64_t>::min();
  TestTensor out = Empty(DType::kInt64, {2});
  ASSERT_TRUE(Clamp(out.ref, in.ref, -INFINITY, INFINITY).ok());
  EXPECT_EQ(out.AtInt(0), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(out.AtInt(1), std::numeric_limits<int64_t>::min());
}

TEST(RoundDecimals, HalfToEvenAfterScaling) {
  ForEachTarget([](const char*) {
    struct {
      double x;
      int64_t decimals;
      double e;
    } cases[] = {{1.25, 1, 1.2f}, {1.35, 1, 1.4f}, {0.125, 2, 0.12f}, {15, -1, 20}, {25, -1, 20},
                 {-35, -1, -40},  {1234.5, -2, 1200}, {2.5, 0, 2}, {-0.5, 0, -0.0}};
    for (const auto& c : cases) {
      TestTensor in = FromValues(DType::kFloat32, {c.x});
      TestTensor out = Empty(DType::kFloat32, {1});
      ASSERT_TRUE(RoundDecimals(out.ref, in.ref, c.decimals).ok());
      EXPECT_EQ(out.At(0), static_cast<float>(c.e)) << c.x << " decimals=" << c.decimals;
    }
    for (DType dt : kFloatTypes) {  // random values against the float32 formula
      for (Layout l : AllLayouts()) {
        TestTensor in = MakeRandom(dt, {7, 33}, l, 8, -50, 50);
        for (int64_t dec : {-1, 2}) {
          TestTensor out = Empty(dt, {7, 33});
          ASSERT_TRUE(RoundDecimals(out.ref, in.ref, dec).ok());
          for (int64_t i = 0; i < out.numel(); ++i) {
            const float x = static_cast<float>(in.At(i));
            const float e = dec < 0 ? std::nearbyint(x / 10.0f) * 10.0f
                                    : std::nearbyint(x * 100.0f) / 100.0f;
            ASSERT_EQ(out.At(i), RoundTo(dt, e)) << DTypeName(dt) << " " << x << " " << dec;
          }
        }
      }
    }
  });
}

TEST(NanToNum, ReplacesExactlyInEveryFloatDtype) {
  for (DType dt : kFloatTypes) {
    for (Layout l : {Layout::kContiguous, Layout::kTransposed, Layout::kStep2}) {
      TestTensor in = MakeRandom(dt, {5, 14}, l, 2, -3, 3);
      for (int64_t i = 0; i < in.numel(); ++i) in.Set(i, i % 3 ? in.At(i) : kSpecials[i % 14]);
      const double big = dt == DType::kFloat64 ? std::numeric_limits<double>::max() : 65504.0;
      TestTensor out = Empty(dt, {5, 14});
      ASSERT_TRUE(NanToNum(out.ref, in.ref, -9.0, big, -big).ok());
      for (int64_t i = 0; i < out.numel(); ++i) {
        const double x = in.At(i);
        const double e = std::isnan(x) ? -9.0 : x == INFINITY ? big : x == -INFINITY ? -big : x;
        ASSERT_EQ(out.At(i), RoundTo(dt, e)) << DTypeName(dt) << " " << LayoutName(l) << " x=" << x;
        if (x == 0) ASSERT_EQ(std::signbit(out.At(i)), std::signbit(x));
      }
    }
  }
  TestTensor ints = FromValues(DType::kInt32, {1, -2, 3});
  TestTensor out = Empty(DType::kInt32, {3});
  ASSERT_TRUE(NanToNum(out.ref, ints.ref, 0, 1, -1).ok());
  EXPECT_EQ(out.Values(), ints.Values());
}

TEST(Lerp, TensorAndScalarWeightsOnEveryTarget) {
  ForEachTarget([](const char*) {
    for (DType dt : kFloatTypes) {
      for (Layout l : AllLayouts()) {
        TestTensor a = MakeRandom(dt, {7, 33}, l, 1, -4, 4);
        TestTensor b = MakeRandom(dt, {7, 33}, Layout::kStep2, 2, -4, 4);
        TestTensor w = MakeRandom(dt, {7, 33}, Layout::kContiguous, 3, -0.5, 1.5);
        TestTensor ws = Empty(DType::kFloat32, {1});
        ws.Set(0, 1.0);
        TestTensor w1 = ws.Expand({7, 33});
        for (const TestTensor* wt : {&w, &w1}) {
          TestTensor out = Empty(dt, {7, 33});
          ASSERT_TRUE(Lerp(out.ref, a.ref, b.ref, wt->ref).ok());
          for (int64_t i = 0; i < out.numel(); ++i) {
            const double x = Compute(dt, a.At(i)), y = Compute(dt, b.At(i));
            const double ww = Compute(dt, wt->At(i));
            const double e = x + ww * (y - x);
            const double tol = 1e-6 * (std::fabs(x) + std::fabs(y)) * (1 + std::fabs(ww));
            ASSERT_EQ(CheckClose(out.At(i), RoundTo(dt, e), 0, tol + StorageTol(dt, e, 0)), "")
                << DTypeName(dt) << " " << LayoutName(l) << " " << x << " " << y << " " << ww;
            if (wt == &w1) ASSERT_EQ(out.At(i), RoundTo(dt, y));  // weight 1 gives end exactly
          }
        }
      }
    }
  });
}

// ---- Activation, log1p / expm1 ----------------------------------------------------------
// References in double from the definitions, on the float32 value the kernel
// computes with; a product torch rounds to float32 before a transcendental
// (x * beta, x * input_scale) is rounded the same way in the reference, as
// are the parameters.
struct ActivationCase {
  ActivationOp op;
  const char* name;
  double p0, p1, p2;
  double rel;  // float32 tolerance, relative (+1e-7 absolute near zero crossings)
};
const ActivationCase kActivationCases[] = {
    {ActivationOp::kLeakyRelu, "leaky_relu", 0.01, 0, 0, 1e-7},
    {ActivationOp::kLeakyRelu, "leaky_relu(-1.5)", -1.5, 0, 0, 1e-7},
    {ActivationOp::kElu, "elu", 1.0, 1.0, 1.0, 1e-6},
    {ActivationOp::kElu, "selu", 1.6732632423543772, 1.0507009873554805, 1.0, 1e-6},
    {ActivationOp::kElu, "celu(0.3)", 0.3, 1.0, 1.0 / 0.3, 1e-6},
    {ActivationOp::kSoftplus, "softplus", 1.0, 20.0, 0, 1e-6},
    {ActivationOp::kSoftplus, "softplus(2, 5)", 2.0, 5.0, 0, 1e-6},
    {ActivationOp::kSoftplus, "softplus(-0.5, 3)", -0.5, 3.0, 0, 1e-6},
    {ActivationOp::kHardswish, "hardswish", 0, 0, 0, 2.5e-7},
    {ActivationOp::kHardsigmoid, "hardsigmoid", 0, 0, 0, 2.5e-7},
    {ActivationOp::kMish, "mish", 0, 0, 0, 2e-6},
    {ActivationOp::kHardshrink, "hardshrink", 0.5, 0, 0, 0},
    {ActivationOp::kHardshrink, "hardshrink(0)", 0, 0, 0, 0},
    {ActivationOp::kSoftshrink, "softshrink", 0.5, 0, 0, 1e-7},
    {ActivationOp::kSoftshrink, "softshrink(2.25)", 2.25, 0, 0, 1e-7},
    {ActivationOp::kThreshold, "threshold(0.1, 20)", 0.1, 20, 0, 0},
    {ActivationOp::kThreshold, "threshold(-1, -0.5)", -1, -0.5, 0, 0},
    {ActivationOp::kLogSigmoid, "log_sigmoid", 0, 0, 0, 2e-6},
};

double RefActivation(const ActivationCase& c, double x) {
  const auto f = [](double v) { return static_cast<double>(static_cast<float>(v)); };
  const double p0 = f(c.p0), p1 = f(c.p1), p2 = f(c.p2);
  switch (c.op) {
    case ActivationOp::kLeakyRelu: return x > 0 ? x : x * p0;
    case ActivationOp::kElu: return x > 0 ? x * p1 : std::expm1(f(x * p2)) * f(p0 * p1);
    case ActivationOp::kSoftplus: {
      const double bx = f(x * p0);
      return bx > p1 ? x : std::log1p(std::exp(bx)) / p0;
    }
    case ActivationOp::kHardswish: return x * std::min(std::max(x + 3, 0.0), 6.0) / 6;
    case ActivationOp::kHardsigmoid: return std::min(std::max(x + 3, 0.0), 6.0) / 6;
    case ActivationOp::kMish: return x * std::tanh(std::log1p(std::exp(x)));
    case ActivationOp::kHardshrink: return x >= -p0 && x <= p0 ? 0 : x;
    case ActivationOp::kSoftshrink: return x > p0 ? x - p0 : x < -p0 ? x + p0 : x * 0;
    case ActivationOp::kThreshold: return x <= p0 ? p1 : x;
    case ActivationOp::kLogSigmoid: return std::min(x, 0.0) - std::log1p(std::exp(-std::abs(x)));
  }
  return NAN;
}

TEST(Activation, EveryOpParamsDtypesLayoutsAndSpecialsOnEveryTarget) {
  ForEachTarget([](const char*) {
    for (const ActivationCase& c : kActivationCases) {
      for (DType dt : kFloatTypes) {
        uint32_t seed = 70;
        for (const auto& shape : Shapes()) {
          for (Layout l : AllLayouts()) {
            TestTensor in = MakeRandom(dt, shape, l, seed++, -30, 30);
            for (int64_t i = 0; i < in.numel(); ++i) {
              if (i % 3 == 1) in.Set(i, in.At(i) * 1e-3);  // around 0 and the hard gates
              if (i % 7 == 2) in.Set(i, kSpecials[static_cast<size_t>(i / 7) % kSpecials.size()]);
            }
            TestTensor out = Empty(dt, shape, l == Layout::kMisaligned ? 1 : 0);
            ASSERT_TRUE(Activation(c.op, out.ref, in.ref, c.p0, c.p1, c.p2).ok());
            for (int64_t i = 0; i < out.numel(); ++i) {
              const double x = Compute(dt, in.At(i));
              const double e = RefActivation(c, x);
              const std::string err =
                  CheckClose(out.At(i), RoundTo(dt, e), 0, 1e-7 + StorageTol(dt, e, c.rel));
              ASSERT_EQ(err, "") << Ctx(c.name, dt, l, shape) << " x=" << x;
            }
          }
        }
      }
    }
  });
}

// torch keeps the sign of a zero result; assert_close would not notice.
TEST(Activation, NegativeZeroKeepsItsSign) {
  TestTensor in = FromValues(DType::kFloat32, {-0.0, -0.0, -0.0, -0.0, -0.0});
  TestTensor out = Empty(DType::kFloat32, {5});
  ForEachTarget([&](const char*) {
    for (ActivationOp op : {ActivationOp::kLeakyRelu, ActivationOp::kElu, ActivationOp::kHardswish,
                            ActivationOp::kMish, ActivationOp::kSoftshrink}) {
      ASSERT_TRUE(Activation(op, out.ref, in.ref, 0.01, 1.0, 1.0).ok());
      EXPECT_TRUE(out.At(0) == 0 && std::signbit(out.At(0))) << static_cast<int>(op);
    }
    // hardshrink writes a literal 0 inside the band: +0, as torch.
    ASSERT_TRUE(Activation(ActivationOp::kHardshrink, out.ref, in.ref, 0.5).ok());
    EXPECT_TRUE(out.At(0) == 0 && !std::signbit(out.At(0)));
    for (UnaryOp op : {UnaryOp::kLog1p, UnaryOp::kExpm1}) {
      ASSERT_TRUE(Unary(op, out.ref, in.ref).ok());
      EXPECT_TRUE(out.At(0) == 0 && std::signbit(out.At(0))) << static_cast<int>(op);
    }
    ASSERT_TRUE(Clamp(out.ref, in.ref, 0.0, 6.0).ok());  // relu6(-0.0) is -0.0 in torch
    EXPECT_TRUE(out.At(0) == 0 && std::signbit(out.At(0)));
  });
}

TEST(UnaryMath, Log1pExpm1NearZeroAndEdgesOnEveryTarget) {
  ForEachTarget([](const char*) {
    for (DType dt : kFloatTypes) {
      uint32_t seed = 90;
      for (const auto& shape : Shapes()) {
        for (Layout l : AllLayouts()) {
          TestTensor in = MakeRandom(dt, shape, l, seed++, -0.99, 12);
          for (int64_t i = 0; i < in.numel(); i += 2) in.Set(i, in.At(i) * 1e-6);  // tiny
          for (UnaryOp op : {UnaryOp::kLog1p, UnaryOp::kExpm1}) {
            TestTensor out = Empty(dt, shape);
            ASSERT_TRUE(Unary(op, out.ref, in.ref).ok());
            for (int64_t i = 0; i < out.numel(); ++i) {
              const double x = Compute(dt, in.At(i));
              const double e = op == UnaryOp::kLog1p ? std::log1p(x) : std::expm1(x);
              ASSERT_EQ(CheckClose(out.At(i), RoundTo(dt, e), 0, StorageTol(dt, e, 1e-6)), "")
                  << Ctx(op == UnaryOp::kLog1p ? "log1p" : "expm1", dt, l, shape) << " x=" << x;
            }
          }
        }
      }
    }
    const std::vector<double> xs = {-1.0, -2.0, INFINITY, -INFINITY, NAN, 100.0, -200.0, 1e-30};
    TestTensor in = FromValues(DType::kFloat32, xs);
    TestTensor out = Empty(DType::kFloat32, {static_cast<int64_t>(xs.size())});
    for (UnaryOp op : {UnaryOp::kLog1p, UnaryOp::kExpm1}) {
      ASSERT_TRUE(Unary(op, out.ref, in.ref).ok());
      for (size_t i = 0; i < xs.size(); ++i) {
        const double x = static_cast<float>(xs[i]);
        const double e = static_cast<float>(op == UnaryOp::kLog1p ? std::log1p(x) : std::expm1(x));
        EXPECT_EQ(CheckClose(out.At(static_cast<int64_t>(i)), e, 1e-6), "")
            << (op == UnaryOp::kLog1p ? "log1p" : "expm1") << " x=" << x;
      }
    }
  });
}

TEST(DescribeMath, NamesAndBytes) {
  TestTensor a = Empty(DType::kFloat32, {64, 32});
  TestTensor o = Empty(DType::kFloat32, {64, 32});
  TestTensor ob = Empty(DType::kBool, {64, 32});
  TestTensor h = Empty(DType::kBFloat16, {64, 32});
  TestTensor i = Empty(DType::kInt64, {64, 32});
  EXPECT_STREQ(DescribeClamp(o.ref, a.ref, "aten::clamp").name, "clamp_f32");
  EXPECT_EQ(DescribeClamp(o.ref, a.ref, "aten::clamp").bytes_read, 64u * 32 * 4);
  EXPECT_STREQ(DescribeNanToNum(h.ref, h.ref, "aten::nan_to_num").name, "nan_to_num_bf16");
  EXPECT_STREQ(DescribeLerp(o.ref, a.ref, "aten::lerp").name, "lerp_f32");
  EXPECT_STREQ(DescribeUnary(UnaryOp::kIsNegInf, ob.ref, h.ref, "aten::isneginf").name,
               "isneginf_bf16");
  EXPECT_STREQ(DescribeUnary(UnaryOp::kRound, o.ref, a.ref, "aten::round").name, "round_f32");
  EXPECT_STREQ(DescribeUnary(UnaryOp::kErf, o.ref, a.ref, "aten::erf").name, "erf_f32");
  EXPECT_STREQ(DescribeBinary(BinaryOp::kDivFloor, i.ref, i.ref, &i.ref, "aten::div").name,
               "div_floor_i64");
  EXPECT_STREQ(DescribeBinary(BinaryOp::kBitwiseAnd, ob.ref, ob.ref, nullptr, "aten::bitwise_and").name,
               "bitwise_and_bool");
  EXPECT_STREQ(DescribeBinary(BinaryOp::kShiftRight, i.ref, i.ref, nullptr, "aten::__rshift__").name,
               "shift_right_i64");
  EXPECT_STREQ(DescribeActivation(ActivationOp::kLeakyRelu, o.ref, a.ref, "aten::leaky_relu").name,
               "leaky_relu_f32");
  const KernelInfo mish = DescribeActivation(ActivationOp::kMish, h.ref, h.ref, "aten::mish");
  EXPECT_STREQ(mish.name, "mish_bf16");
  EXPECT_STREQ(mish.op, "aten::mish");
  EXPECT_EQ(mish.bytes_read, 64u * 32 * 2);
  EXPECT_EQ(mish.bytes_written, 64u * 32 * 2);
  EXPECT_GT(mish.flops, 64u * 32);
  EXPECT_STREQ(DescribeUnary(UnaryOp::kExpm1, o.ref, a.ref, "aten::expm1").name, "expm1_f32");
  EXPECT_FALSE(UnaryOutIsBool(UnaryOp::kLog1p));
  EXPECT_FALSE(UnaryOutIsBool(UnaryOp::kExpm1));
  EXPECT_TRUE(UnaryOutIsBool(UnaryOp::kIsFinite));
  EXPECT_FALSE(UnaryOutIsBool(UnaryOp::kSign));
  EXPECT_TRUE(IsBitwise(BinaryOp::kShiftLeft));
  EXPECT_FALSE(IsComparison(BinaryOp::kFmod));
}

}  // namespace
}  // namespace trn::kernels
