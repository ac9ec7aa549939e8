// Elementwise aten kernels of the trn device: binary ops with broadcasting,
// type promotion and scalars (arithmetic, comparisons, rounding division,
// remainder/fmod, bitwise ops and shifts), unary ops (math, rounding, sign,
// predicates isnan/isinf/...), clamp and hardtanh, the activations with
// parameters (leaky_relu, elu, softplus, hardswish, hardsigmoid, mish,
// hardshrink, softshrink, threshold, log_sigmoid, rrelu in eval),
// nan_to_num, lerp, where / masked_fill, fill_ / zero_, linalg_cross. Where CPU PyTorch
// rejects a dtype (bitwise on floats, rounding of bool, activations of
// integers) the same NotImplementedError is raised here.
// Each launches core kernels asynchronously on the current stream.
//
// Note [elementwise dispatch]: the functional, in-place and out= overloads
// of the structured ops are all registered. Registering only out= works
// (CompositeExplicitAutogradNonFunctional wraps it), but costs a meta
// function and a second dispatch per op on the eager hot path.
// Scalar overloads (add.Scalar, mul.Scalar, ...) are CompositeExplicitAutograd
// and reach the Tensor overloads with a 0-dim CPU "wrapped number", which is
// read on the host and passed to the kernel as a scalar.
#include <ATen/Dispatch.h>
#include <ATen/ExpandUtils.h>
#include <ATen/TensorOperators.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/rrelu_with_noise_ops.h>
#include <ATen/ops/threshold_ops.h>
#include <c10/util/string_view.h>
#include <torch/library.h>

#include <limits>
#include <optional>

#include "torch_bridge/fallback.h"
#include "torch_bridge/ops_complex.h"
#include "torch_bridge/ops_util.h"

namespace trn::bridge::ops {
namespace {

using kernels::BinaryOp;
using kernels::UnaryOp;

// One operand of a binary op: a trn tensor, or a host scalar.
struct Operand {
  const at::Tensor* tensor = nullptr;  // null: scalar
  double scalar = 0;
};

Operand Of(const at::Tensor& t) {
  if (IsCpuScalar(t)) return {nullptr, CpuScalarValue(t)};
  return {&t, 0};
}
Operand Of(const at::Scalar& s) { return {nullptr, s.toDouble()}; }

bool IsArith(BinaryOp op) { return !kernels::IsComparison(op); }

// torch's bool arithmetic: + is or, * is and; the kernels only define
// arithmetic on numbers.
BinaryOp BoolArith(BinaryOp op, const char* name) {
  switch (op) {
    case BinaryOp::kAdd:
    case BinaryOp::kMaximum:
    case BinaryOp::kFmax:
    case BinaryOp::kHeaviside: return BinaryOp::kLogicalOr;  // a ? true : b
    case BinaryOp::kMul:
    case BinaryOp::kMinimum:
    case BinaryOp::kFmin: return BinaryOp::kLogicalAnd;
    default: break;
  }
  TORCH_CHECK(false, name, ": not supported for two bool operands");
}

// Integer div(rounding_mode=), remainder and fmod: division by zero is an error.
bool IsIntegerDivision(BinaryOp op, at::ScalarType common) {
  return op >= BinaryOp::kDivTrunc && op <= BinaryOp::kFmod &&
         at::isIntegralType(common, /*includeBool=*/false);
}

// How the result is produced: a new tensor, into self, or into out=. BinaryImpl,
// UnaryImpl and MapInto return the new tensor for kNew and an undefined one
// otherwise: their callers return *out (Note [No tensor copies around a launch]).
enum class Into { kNew, kSelf, kOut };

// result <- a op b. `common` is at::result_type of the operands; comparisons
// produce bool, true division of integers produces the default float dtype.

// CPU's overlap errors for an in-place or out= result.
void CheckOverlaps(Into into, const at::Tensor* out,
                   std::initializer_list<const at::Tensor*> inputs) {
  if (into != Into::kNew) CheckWriteOverlaps(*out, inputs);
}

at::Tensor BinaryImpl(BinaryOp op, const char* name, Operand a, Operand b,
                      at::ScalarType common, double alpha, at::Tensor* out, Into into) {
  const bool integral = at::isIntegralType(common, /*includeBool=*/true);
  if (integral && (op == BinaryOp::kDiv || op == BinaryOp::kAtan2 ||
                   op == BinaryOp::kCopysign || op == BinaryOp::kXlogy)) {
    common = DefaultFloat();
  }
  TORCH_CHECK_NOT_IMPLEMENTED(!(integral && (op == BinaryOp::kHypot || op == BinaryOp::kLogAddExp ||
                                             op == BinaryOp::kLogAddExp2)),
                              name, ": not implemented for '", c10::toString(common),
                              "' (it takes floating tensors)");
  TORCH_CHECK(!(op == BinaryOp::kPow && b.tensor == nullptr && b.scalar < 0 &&
                at::isIntegralType(common, /*includeBool=*/false)),
              "Integers to negative integer powers are not allowed.");
  if (kernels::IsBitwise(op)) {  // torch's NotImplementedError for other dtypes
    const bool shift = op == BinaryOp::kShiftLeft || op == BinaryOp::kShiftRight;
    TORCH_CHECK_NOT_IMPLEMENTED(at::isIntegralType(common, /*includeBool=*/!shift), name,
                                ": not implemented for '", c10::toString(common),
                                "' (bitwise ops take integer", shift ? "" : " or bool",
                                " tensors)");
  }
  TORCH_CHECK_NOT_IMPLEMENTED(!(op >= BinaryOp::kDivTrunc && op <= BinaryOp::kFmod &&
                                common == at::kBool),
                              name, ": not implemented for 'Bool'");
  if (IsIntegerDivision(op, common)) {  // Note [Integer division]: a scalar 0 is caught here
    TORCH_CHECK(b.tensor != nullptr || b.scalar != 0, "ZeroDivisionError: ", name,
                ": integer division by zero");
  }
  const at::ScalarType result = IsArith(op) ? common : at::kBool;
  if (common == at::kBool && IsArith(op) && !kernels::IsBitwise(op)) {
    if (op == BinaryOp::kPow) {
      common = at::kLong;  // 0/1 powers are exact in int64; the result casts back
    } else {
      op = BoolArith(op, name);
    }
  }
  const at::ScalarType kernel_out = IsArith(op) ? common : at::kBool;
  const at::Tensor* ta = a.tensor;
  const at::Tensor* tb = b.tensor;
  TORCH_CHECK(ta != nullptr || tb != nullptr, name, ": expected a trn tensor operand");
  const int device = CommonDevice(name, {ta, tb, out});
  const at::DimVector sizes = ta == nullptr   ? at::DimVector(tb->sizes())
                              : tb == nullptr ? at::DimVector(ta->sizes())
                                              : at::infer_size_dimvector(ta->sizes(), tb->sizes());
  // Note [No tensor copies around a launch]: the common case (no cast, an
  // in-place or out= result) holds references, not at::Tensor copies. A copy's
  // destructor after the launch is an atomic decrement, which waits for the
  // command's stores to reach the worker's core (Note [Launch stores] in
  // core/runtime/runtime.cc): a.add_(b) on 16 floats took 1.22 us with the
  // copies, 1.06 us without, on Sapphire Rapids.
  at::Tensor new_res;
  CheckOverlaps(into, out, {ta, tb});
  if (into == Into::kNew) {
    new_res = EmptyElementwise(sizes, result, device, {ta, tb});
  } else if (into == Into::kSelf) {
    TORCH_CHECK(out->sizes().equals(sizes), name, ": output with shape ", out->sizes(),
                " doesn't match the broadcast shape ", at::IntArrayRef(sizes));
    CheckCanCast(result, out->scalar_type(), name);
  } else {
    PrepareOut(*out, sizes, result, name);
  }
  const at::Tensor& res = into == Into::kNew ? new_res : *out;
  ComputeDType(common, name);  // float64 policy / unsupported dtypes
  if (res.numel() == 0) return new_res;

  at::Tensor cast_a, cast_b, cast_dst;
  if (ta != nullptr && ta->scalar_type() != common) cast_a = CastTo(*ta, common, name);
  if (tb != nullptr && tb->scalar_type() != common) cast_b = CastTo(*tb, common, name);
  if (res.scalar_type() != kernel_out) {
    cast_dst = EmptyElementwise(sizes, kernel_out, device, {&res});
  }
  const at::Tensor& ca = cast_a.defined() || ta == nullptr ? cast_a : *ta;
  const at::Tensor& cb = cast_b.defined() || tb == nullptr ? cast_b : *tb;
  const at::Tensor& dst = cast_dst.defined() ? cast_dst : res;
  const TensorRef o = Ref(dst, name);
  const bool scaled = op == BinaryOp::kAdd || op == BinaryOp::kSub;
  if (ta != nullptr && tb != nullptr) {
    const TensorRef ra = RefExpanded(ca, sizes, name);
    const TensorRef rb = RefExpanded(cb, sizes, name);
    Launch(device, kernels::DescribeBinary(op, o, ra, &rb, name),
           [=] { return kernels::Binary(op, o, ra, rb, alpha); });
  } else if (ta != nullptr) {
    const TensorRef ra = Ref(ca, name);
    const double s = scaled ? b.scalar * alpha : b.scalar;
    Launch(device, kernels::DescribeBinary(op, o, ra, nullptr, name),
           [=] { return kernels::BinaryScalar(op, o, ra, s, false); });
  } else {
    at::Tensor scaled_b = cb;  // s - alpha * b: scale first (rare: rsub with alpha)
    if (scaled && alpha != 1.0) {
      scaled_b = EmptyElementwise(sizes, common, device, {&cb});
      const TensorRef so = Ref(scaled_b, name);
      const TensorRef si = Ref(cb, name);
      Launch(device, kernels::DescribeBinary(BinaryOp::kMul, so, si, nullptr, name),
             [=] { return kernels::BinaryScalar(BinaryOp::kMul, so, si, alpha, false); });
    }
    const TensorRef rb = Ref(scaled_b, name);
    const double s = a.scalar;
    Launch(device, kernels::DescribeBinary(op, o, rb, nullptr, name),
           [=] { return kernels::BinaryScalar(op, o, rb, s, true); });
  }
  if (!dst.is_same(res)) LaunchCopy(device, res, dst, name);
  return new_res;
}

// ---- Tensor (op) Tensor overloads, registered for every op below --------------
at::Tensor Bin(BinaryOp op, const char* name, const at::Tensor& a, const at::Tensor& b,
               double alpha = 1.0) {
  return BinaryImpl(op, name, Of(a), Of(b), at::result_type(a, b), alpha, nullptr, Into::kNew);
}
at::Tensor& BinSelf(BinaryOp op, const char* name, at::Tensor& self, const at::Tensor& b,
                    double alpha = 1.0) {
  BinaryImpl(op, name, Of(self), Of(b), at::result_type(self, b), alpha, &self, Into::kSelf);
  return self;
}
at::Tensor& BinOut(BinaryOp op, const char* name, const at::Tensor& a, const at::Tensor& b,
                   at::Tensor& out, double alpha = 1.0) {
  BinaryImpl(op, name, Of(a), Of(b), at::result_type(a, b), alpha, &out, Into::kOut);
  return out;
}
at::Tensor BinS(BinaryOp op, const char* name, const at::Tensor& a, const at::Scalar& b) {
  return BinaryImpl(op, name, Of(a), Of(b), at::result_type(a, b), 1.0, nullptr, Into::kNew);
}
at::Tensor& BinSelfS(BinaryOp op, const char* name, at::Tensor& self, const at::Scalar& b) {
  BinaryImpl(op, name, Of(self), Of(b), at::result_type(self, b), 1.0, &self, Into::kSelf);
  return self;
}
at::Tensor& BinOutS(BinaryOp op, const char* name, const at::Tensor& a, const at::Scalar& b,
                    at::Tensor& out) {
  BinaryImpl(op, name, Of(a), Of(b), at::result_type(a, b), 1.0, &out, Into::kOut);
  return out;
}

// add / sub / rsub carry alpha.
at::Tensor Add(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  return Bin(BinaryOp::kAdd, "aten::add", a, b, alpha.toDouble());
}
at::Tensor& Add_(at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  return BinSelf(BinaryOp::kAdd, "aten::add_", a, b, alpha.toDouble());
}
at::Tensor& AddOut(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha,
                   at::Tensor& out) {
  return BinOut(BinaryOp::kAdd, "aten::add", a, b, out, alpha.toDouble());
}
at::Tensor Sub(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  return Bin(BinaryOp::kSub, "aten::sub", a, b, alpha.toDouble());
}
at::Tensor& Sub_(at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  return BinSelf(BinaryOp::kSub, "aten::sub_", a, b, alpha.toDouble());
}
at::Tensor& SubOut(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha,
                   at::Tensor& out) {
  return BinOut(BinaryOp::kSub, "aten::sub", a, b, out, alpha.toDouble());
}
// rsub(self, other, alpha) = other - alpha * self.
at::Tensor Rsub(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  return Bin(BinaryOp::kSub, "aten::rsub", other, self, alpha.toDouble());
}

// Ops without alpha: one macro stamps the three overloads.
// nn.PReLU / F.prelu: the composite prelu shapes the weight to broadcast over
// dim 1 and calls _prelu_kernel (it took the CPU fallback): one kernel.
at::Tensor PreluKernel(const at::Tensor& self, const at::Tensor& weight) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()) && at::isFloatingType(weight.scalar_type()),
              "aten::_prelu_kernel: expected floating operands, got ", self.scalar_type(), " and ",
              weight.scalar_type());
  return Bin(BinaryOp::kPrelu, "aten::_prelu_kernel", self, weight);
}

// Functional and out= (logaddexp, logaddexp2, fmax and fmin have no in-place form).
#define TRN_BINARY_NO_SELF(Fn, OP, NAME)                                            \
  at::Tensor Fn(const at::Tensor& a, const at::Tensor& b) {                        \
    return Bin(OP, "aten::" NAME, a, b);                                            \
  }                                                                                 \
  at::Tensor& Fn##Out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) { \
    return BinOut(OP, "aten::" NAME, a, b, out);                                    \
  }
#define TRN_BINARY_TT(Fn, OP, NAME)                          \
  TRN_BINARY_NO_SELF(Fn, OP, NAME)                           \
  at::Tensor& Fn##_(at::Tensor& a, const at::Tensor& b) {    \
    return BinSelf(OP, "aten::" NAME "_", a, b);             \
  }
#define TRN_BINARY_TS(Fn, OP, NAME)                                                    \
  at::Tensor Fn##S(const at::Tensor& a, const at::Scalar& b) {                        \
    return BinS(OP, "aten::" NAME, a, b);                                              \
  }                                                                                    \
  at::Tensor& Fn##S_(at::Tensor& a, const at::Scalar& b) {                            \
    return BinSelfS(OP, "aten::" NAME "_", a, b);                                      \
  }                                                                                    \
  at::Tensor& Fn##SOut(const at::Tensor& a, const at::Scalar& b, at::Tensor& out) {   \
    return BinOutS(OP, "aten::" NAME, a, b, out);                                      \
  }

TRN_BINARY_TT(Mul, BinaryOp::kMul, "mul")
TRN_BINARY_TT(Div, BinaryOp::kDiv, "div")
TRN_BINARY_TT(Maximum, BinaryOp::kMaximum, "maximum")
TRN_BINARY_TT(Minimum, BinaryOp::kMinimum, "minimum")
TRN_BINARY_TT(LogicalAnd, BinaryOp::kLogicalAnd, "logical_and")
TRN_BINARY_TT(LogicalOr, BinaryOp::kLogicalOr, "logical_or")
TRN_BINARY_TT(PowTT, BinaryOp::kPow, "pow")
TRN_BINARY_TT(BitwiseAnd, BinaryOp::kBitwiseAnd, "bitwise_and")
TRN_BINARY_TT(BitwiseOr, BinaryOp::kBitwiseOr, "bitwise_or")
TRN_BINARY_TT(BitwiseXor, BinaryOp::kBitwiseXor, "bitwise_xor")
TRN_BINARY_TT(ShiftLeft, BinaryOp::kShiftLeft, "bitwise_left_shift")
TRN_BINARY_TS(ShiftLeft, BinaryOp::kShiftLeft, "__lshift__")
TRN_BINARY_TT(ShiftRight, BinaryOp::kShiftRight, "bitwise_right_shift")
TRN_BINARY_TS(ShiftRight, BinaryOp::kShiftRight, "__rshift__")
TRN_BINARY_TT(Remainder, BinaryOp::kRemainder, "remainder")
TRN_BINARY_TT(Fmod, BinaryOp::kFmod, "fmod")
TRN_BINARY_TT(Atan2, BinaryOp::kAtan2, "atan2")
TRN_BINARY_TT(FloorDivide, BinaryOp::kDivFloor, "floor_divide")
TRN_BINARY_TT(Hypot, BinaryOp::kHypot, "hypot")
TRN_BINARY_TT(Copysign, BinaryOp::kCopysign, "copysign")
TRN_BINARY_TS(Copysign, BinaryOp::kCopysign, "copysign")
TRN_BINARY_TT(Xlogy, BinaryOp::kXlogy, "xlogy")
TRN_BINARY_TS(Xlogy, BinaryOp::kXlogy, "xlogy")
TRN_BINARY_TT(LogicalXor, BinaryOp::kLogicalXor, "logical_xor")
TRN_BINARY_TS(Pow, BinaryOp::kPow, "pow")
TRN_BINARY_TT(Eq, BinaryOp::kEq, "eq")
TRN_BINARY_TS(Eq, BinaryOp::kEq, "eq")
TRN_BINARY_TT(Ne, BinaryOp::kNe, "ne")
TRN_BINARY_TS(Ne, BinaryOp::kNe, "ne")
TRN_BINARY_TT(Lt, BinaryOp::kLt, "lt")
TRN_BINARY_TS(Lt, BinaryOp::kLt, "lt")
TRN_BINARY_TT(Le, BinaryOp::kLe, "le")
TRN_BINARY_TS(Le, BinaryOp::kLe, "le")
TRN_BINARY_TT(Gt, BinaryOp::kGt, "gt")
TRN_BINARY_TS(Gt, BinaryOp::kGt, "gt")
TRN_BINARY_TT(Ge, BinaryOp::kGe, "ge")
TRN_BINARY_TS(Ge, BinaryOp::kGe, "ge")
TRN_BINARY_NO_SELF(LogAddExp, BinaryOp::kLogAddExp, "logaddexp")
TRN_BINARY_NO_SELF(LogAddExp2, BinaryOp::kLogAddExp2, "logaddexp2")
TRN_BINARY_NO_SELF(Fmax, BinaryOp::kFmax, "fmax")
TRN_BINARY_NO_SELF(Fmin, BinaryOp::kFmin, "fmin")
#undef TRN_BINARY_NO_SELF
#undef TRN_BINARY_TT
#undef TRN_BINARY_TS

// xlogy(Scalar self, Tensor other).
at::Tensor XlogyScalarFirst(const at::Scalar& a, const at::Tensor& b) {
  return BinaryImpl(BinaryOp::kXlogy, "aten::xlogy", Of(a), Of(b), at::result_type(a, b), 1.0,
                    nullptr, Into::kNew);
}
at::Tensor& XlogyScalarFirstOut(const at::Scalar& a, const at::Tensor& b, at::Tensor& out) {
  BinaryImpl(BinaryOp::kXlogy, "aten::xlogy", Of(a), Of(b), at::result_type(a, b), 1.0, &out,
             Into::kOut);
  return out;
}

// heaviside(input, values): torch takes only one dtype for both.
void CheckHeaviside(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(),
              "heaviside is not yet implemented for tensors with different dtypes");
}
at::Tensor Heaviside(const at::Tensor& a, const at::Tensor& b) {
  CheckHeaviside(a, b);
  return Bin(BinaryOp::kHeaviside, "aten::heaviside", a, b);
}
at::Tensor& Heaviside_(at::Tensor& a, const at::Tensor& b) {
  CheckHeaviside(a, b);
  return BinSelf(BinaryOp::kHeaviside, "aten::heaviside_", a, b);
}
at::Tensor& HeavisideOut(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  CheckHeaviside(a, out);  // CPU's meta function requires out's dtype too
  CheckHeaviside(a, b);
  return BinOut(BinaryOp::kHeaviside, "aten::heaviside", a, b, out);
}

// pow(Scalar self, Tensor exponent): the scalar comes first.
at::Tensor PowScalarBase(const at::Scalar& base, const at::Tensor& exp) {
  return BinaryImpl(BinaryOp::kPow, "aten::pow", Of(base), Of(exp), at::result_type(base, exp),
                    1.0, nullptr, Into::kNew);
}
at::Tensor& PowScalarBaseOut(const at::Scalar& base, const at::Tensor& exp, at::Tensor& out) {
  BinaryImpl(BinaryOp::kPow, "aten::pow", Of(base), Of(exp), at::result_type(base, exp), 1.0,
             &out, Into::kOut);
  return out;
}

// remainder(Scalar self, Tensor other).
at::Tensor RemainderScalarFirst(const at::Scalar& a, const at::Tensor& b) {
  return BinaryImpl(BinaryOp::kRemainder, "aten::remainder", Of(a), Of(b),
                    at::result_type(a, b), 1.0, nullptr, Into::kNew);
}
at::Tensor& RemainderScalarFirstOut(const at::Scalar& a, const at::Tensor& b, at::Tensor& out) {
  BinaryImpl(BinaryOp::kRemainder, "aten::remainder", Of(a), Of(b), at::result_type(a, b), 1.0,
             &out, Into::kOut);
  return out;
}

// div(rounding_mode=None | "trunc" | "floor"): integers stay integers when rounded.
BinaryOp DivOp(std::optional<c10::string_view> mode) {
  if (!mode.has_value()) return BinaryOp::kDiv;
  if (*mode == "trunc") return BinaryOp::kDivTrunc;
  TORCH_CHECK(*mode == "floor",
              "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '",
              std::string(*mode), "'");
  return BinaryOp::kDivFloor;
}
at::Tensor DivMode(const at::Tensor& a, const at::Tensor& b,
                   std::optional<c10::string_view> mode) {
  return Bin(DivOp(mode), "aten::div", a, b);
}
at::Tensor& DivMode_(at::Tensor& a, const at::Tensor& b, std::optional<c10::string_view> mode) {
  return BinSelf(DivOp(mode), "aten::div_", a, b);
}
at::Tensor& DivModeOut(const at::Tensor& a, const at::Tensor& b,
                       std::optional<c10::string_view> mode, at::Tensor& out) {
  return BinOut(DivOp(mode), "aten::div", a, b, out);
}

// ---- where / masked_fill --------------------------------------------------------
// One side of a select: a trn tensor cast to the common dtype, or a host
// scalar materialised as a 0-dim device tensor filled inside the same launch.
struct Side {
  at::Tensor tensor;
  bool fill = false;
  double value = 0;
};

Side MakeSide(const Operand& op, at::ScalarType dtype, int device, const char* name) {
  if (op.tensor != nullptr) return {CastTo(*op.tensor, dtype, name), false, 0};
  return {Empty({}, dtype, device), true, op.scalar};
}

void CheckBoolMask(const at::Tensor& mask, const char* name) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, name,
              ": expected a boolean mask/condition, but got a tensor with dtype ",
              mask.scalar_type());
}

// out <- cond ? a : b, everything broadcast to out's sizes.
void LaunchWhere(int device, const at::Tensor& out, const at::Tensor& cond, const Side& a,
                 const Side& b, const char* name) {
  if (out.numel() == 0) return;
  const TensorRef o = Ref(out, name);
  const TensorRef rc = RefExpanded(cond, out.sizes(), name);
  const TensorRef fa = Ref(a.tensor, name), fb = Ref(b.tensor, name);
  const TensorRef ra = RefExpanded(a.tensor, out.sizes(), name);
  const TensorRef rb = RefExpanded(b.tensor, out.sizes(), name);
  const bool fill_a = a.fill, fill_b = b.fill;
  const double va = a.value, vb = b.value;
  Launch(device, kernels::DescribeWhere(o, name), [=]() -> Status {
    if (fill_a) {
      Status s = kernels::Fill(fa, va);
      if (!s.ok()) return s;
    }
    if (fill_b) {
      Status s = kernels::Fill(fb, vb);
      if (!s.ok()) return s;
    }
    return kernels::Where(o, rc, ra, rb);
  });
}

at::Tensor WhereImpl(const at::Tensor& cond, const at::Tensor& self, const at::Tensor& other,
                     at::Tensor* out) {
  const char* name = "aten::where";
  CheckBoolMask(cond, name);
  const Operand a = Of(self), b = Of(other);
  const at::ScalarType common = at::result_type(self, other);
  const int device = CommonDevice(name, {&cond, a.tensor, b.tensor, out});
  at::DimVector sizes(cond.sizes());
  if (a.tensor != nullptr) sizes = at::infer_size_dimvector(sizes, a.tensor->sizes());
  if (b.tensor != nullptr) sizes = at::infer_size_dimvector(sizes, b.tensor->sizes());
  at::Tensor res;
  if (out == nullptr) {
    res = EmptyElementwise(sizes, common, device, {&cond, a.tensor, b.tensor});
  } else {
    PrepareOut(*out, sizes, common, name);
    res = *out;
  }
  // Selection moves float64 values exactly: no float64 policy (Ref checks the dtype).
  const at::Tensor dst =
      res.scalar_type() == common ? res : EmptyElementwise(sizes, common, device, {&res});
  LaunchWhere(device, dst, cond, MakeSide(a, common, device, name),
              MakeSide(b, common, device, name), name);
  if (!dst.is_same(res)) LaunchCopy(device, res, dst, name);
  return res;
}

at::Tensor Where(const at::Tensor& cond, const at::Tensor& self, const at::Tensor& other) {
  return WhereImpl(cond, self, other, nullptr);
}
at::Tensor& WhereOut(const at::Tensor& cond, const at::Tensor& self, const at::Tensor& other,
                     at::Tensor& out) {
  WhereImpl(cond, self, other, &out);
  return out;
}

// masked_fill: value is a Scalar, or a 0-dim tensor (trn or CPU).
Operand FillValue(const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0,
              "masked_fill only supports a 0-dimensional value tensor, but got tensor with ",
              value.dim(), " dimension(s).");
  return Of(value);
}

void MaskedFillInto(const at::Tensor& out, const at::Tensor& self, const at::Tensor& mask,
                    const Operand& value, const char* name) {
  CheckBoolMask(mask, name);
  const at::ScalarType dtype = self.scalar_type();
  const int device = CommonDevice(name, {&out, &self, &mask, value.tensor});
  LaunchWhere(device, out, mask, MakeSide(value, dtype, device, name),
              Side{self, false, 0}, name);
}

at::Tensor& MaskedFillImpl_(at::Tensor& self, const at::Tensor& mask, const Operand& value) {
  const char* name = "aten::masked_fill_";
  TORCH_CHECK(at::is_expandable_to(mask.sizes(), self.sizes()), name, ": mask of shape ",
              mask.sizes(), " is not broadcastable to self of shape ", self.sizes());
  MaskedFillInto(self, self, mask, value, name);
  return self;
}
at::Tensor MaskedFillImpl(const at::Tensor& self, const at::Tensor& mask, const Operand& value) {
  const char* name = "aten::masked_fill";
  const at::DimVector sizes = at::infer_size_dimvector(self.sizes(), mask.sizes());
  // Contiguous, as CPU's (a contiguous clone of self, then masked_fill_).
  at::Tensor out = Empty(sizes, self.scalar_type(), DeviceIndex(self));
  MaskedFillInto(out, self, mask, value, name);
  return out;
}
at::Tensor& MaskedFillS_(at::Tensor& self, const at::Tensor& mask, const at::Scalar& v) {
  return MaskedFillImpl_(self, mask, Of(v));
}
at::Tensor& MaskedFillT_(at::Tensor& self, const at::Tensor& mask, const at::Tensor& v) {
  return MaskedFillImpl_(self, mask, FillValue(v));
}
at::Tensor MaskedFillS(const at::Tensor& self, const at::Tensor& mask, const at::Scalar& v) {
  return MaskedFillImpl(self, mask, Of(v));
}
at::Tensor MaskedFillT(const at::Tensor& self, const at::Tensor& mask, const at::Tensor& v) {
  return MaskedFillImpl(self, mask, FillValue(v));
}

// ---- Unary ----------------------------------------------------------------------
// float_op: integer/bool inputs compute in the default float dtype (torch's
// "int to float" unary ops); otherwise the dtype is kept.
// The one-input tail of UnaryImpl and MapInto: `launch(o, i)` launches the
// kernel writing `kernel_out` elements at o from `self` cast to `compute` at i;
// into res directly when res has that dtype, else through a temporary copied
// into res. No at::Tensor copies (Note [No tensor copies around a launch]).
template <typename LaunchFn>
void LaunchMap(const char* name, const at::Tensor& self, at::ScalarType compute,
               const at::Tensor& res, at::ScalarType kernel_out, int device, LaunchFn launch) {
  at::Tensor cast_src, cast_dst;
  if (self.scalar_type() != compute) cast_src = CastTo(self, compute, name);
  if (res.scalar_type() != kernel_out) {
    cast_dst = EmptyElementwise(self.sizes(), kernel_out, device, {&res});
  }
  const at::Tensor& src = cast_src.defined() ? cast_src : self;
  const at::Tensor& dst = cast_dst.defined() ? cast_dst : res;
  launch(Ref(dst, name), Ref(src, name));
  if (cast_dst.defined()) LaunchCopy(device, res, dst, name);
}

at::Tensor UnaryImpl(UnaryOp op, const char* name, bool float_op, const at::Tensor& self,
                     at::Tensor* out, Into into) {
  const at::ScalarType in = self.scalar_type();
  const bool logical = kernels::UnaryOutIsBool(op);
  at::ScalarType compute = in;
  if (float_op && at::isIntegralType(in, /*includeBool=*/true)) compute = DefaultFloat();
  const bool rounding = op == UnaryOp::kFloor || op == UnaryOp::kCeil ||
                        op == UnaryOp::kTrunc || op == UnaryOp::kRound;
  TORCH_CHECK_NOT_IMPLEMENTED(!(rounding && in == at::kBool), name,
                              ": not implemented for 'Bool'");
  TORCH_CHECK_NOT_IMPLEMENTED(op != UnaryOp::kFrac || at::isFloatingType(in), name,
                              ": not implemented for '", c10::toString(in),
                              "' (it takes floating tensors)");
  TORCH_CHECK_NOT_IMPLEMENTED(op != UnaryOp::kBitwiseNot || !at::isFloatingType(in), name,
                              ": not implemented for '", c10::toString(in),
                              "' (bitwise ops take integer or bool tensors)");
  TORCH_CHECK(logical || float_op || in != at::kBool || op == UnaryOp::kSign ||
                  op == UnaryOp::kBitwiseNot || rounding,
              name, ": not supported for bool tensors");
  const at::ScalarType result = logical ? at::kBool : compute;
  const int device = CommonDevice(name, {&self, out});
  CheckOverlaps(into, out, {&self});
  at::Tensor new_res;  // Note [No tensor copies around a launch]
  if (into == Into::kNew) {
    new_res = EmptyElementwise(self.sizes(), result, device, {&self});
  } else if (into == Into::kSelf) {
    CheckCanCast(result, in, name);
  } else {
    PrepareOut(*out, self.sizes(), result, name);
  }
  const at::Tensor& res = into == Into::kNew ? new_res : *out;
  ComputeDType(compute, name);
  if (res.numel() == 0) return new_res;
  LaunchMap(name, self, compute, res, result, device, [&](const TensorRef& o, const TensorRef& i) {
    Launch(device, kernels::DescribeUnary(op, o, i, name),
           [=] { return kernels::Unary(op, o, i); });
  });
  return new_res;
}

#define TRN_UNARY(Fn, OP, NAME, FLOAT_OP)                                       \
  at::Tensor Fn(const at::Tensor& a) {                                          \
    return UnaryImpl(OP, "aten::" NAME, FLOAT_OP, a, nullptr, Into::kNew);      \
  }                                                                             \
  at::Tensor& Fn##_(at::Tensor& a) {                                            \
    UnaryImpl(OP, "aten::" NAME "_", FLOAT_OP, a, &a, Into::kSelf);             \
    return a;                                                                   \
  }                                                                             \
  at::Tensor& Fn##Out(const at::Tensor& a, at::Tensor& out) {                   \
    UnaryImpl(OP, "aten::" NAME, FLOAT_OP, a, &out, Into::kOut);                \
    return out;                                                                 \
  }

TRN_UNARY(Neg, UnaryOp::kNeg, "neg", false)
TRN_UNARY(Abs, UnaryOp::kAbs, "abs", false)
TRN_UNARY(Relu, UnaryOp::kRelu, "relu", false)
TRN_UNARY(Exp, UnaryOp::kExp, "exp", true)
TRN_UNARY(Log, UnaryOp::kLog, "log", true)
TRN_UNARY(Sqrt, UnaryOp::kSqrt, "sqrt", true)
TRN_UNARY(Rsqrt, UnaryOp::kRsqrt, "rsqrt", true)
TRN_UNARY(Reciprocal, UnaryOp::kReciprocal, "reciprocal", true)
TRN_UNARY(Sigmoid, UnaryOp::kSigmoid, "sigmoid", true)
TRN_UNARY(Tanh, UnaryOp::kTanh, "tanh", true)
TRN_UNARY(Silu, UnaryOp::kSilu, "silu", true)
TRN_UNARY(Sin, UnaryOp::kSin, "sin", true)
TRN_UNARY(Cos, UnaryOp::kCos, "cos", true)
TRN_UNARY(LogicalNot, UnaryOp::kLogicalNot, "logical_not", false)
TRN_UNARY(Erf, UnaryOp::kErf, "erf", true)
TRN_UNARY(Floor, UnaryOp::kFloor, "floor", false)
TRN_UNARY(Ceil, UnaryOp::kCeil, "ceil", false)
TRN_UNARY(Trunc, UnaryOp::kTrunc, "trunc", false)
TRN_UNARY(Round, UnaryOp::kRound, "round", false)
TRN_UNARY(Sign, UnaryOp::kSign, "sign", false)
TRN_UNARY(Sgn, UnaryOp::kSign, "sgn", false)
TRN_UNARY(BitwiseNot, UnaryOp::kBitwiseNot, "bitwise_not", false)
TRN_UNARY(Log1p, UnaryOp::kLog1p, "log1p", true)
TRN_UNARY(Expm1, UnaryOp::kExpm1, "expm1", true)
TRN_UNARY(Tan, UnaryOp::kTan, "tan", true)
TRN_UNARY(Asin, UnaryOp::kAsin, "asin", true)
TRN_UNARY(Acos, UnaryOp::kAcos, "acos", true)
TRN_UNARY(Atan, UnaryOp::kAtan, "atan", true)
TRN_UNARY(Sinh, UnaryOp::kSinh, "sinh", true)
TRN_UNARY(Cosh, UnaryOp::kCosh, "cosh", true)
TRN_UNARY(Asinh, UnaryOp::kAsinh, "asinh", true)
TRN_UNARY(Acosh, UnaryOp::kAcosh, "acosh", true)
TRN_UNARY(Atanh, UnaryOp::kAtanh, "atanh", true)
TRN_UNARY(Log2, UnaryOp::kLog2, "log2", true)
TRN_UNARY(Log10, UnaryOp::kLog10, "log10", true)
TRN_UNARY(Exp2, UnaryOp::kExp2, "exp2", true)
TRN_UNARY(Erfc, UnaryOp::kErfc, "erfc", true)
TRN_UNARY(Lgamma, UnaryOp::kLgamma, "lgamma", true)
TRN_UNARY(Frac, UnaryOp::kFrac, "frac", false)
TRN_UNARY(Sinc, UnaryOp::kSinc, "sinc", true)
#undef TRN_UNARY

// Predicates (bool out, no in-place form): isnan/isinf/isfinite have only the
// functional overload, isposinf/isneginf also out=.
#define TRN_PREDICATE(Fn, OP, NAME)                                             \
  at::Tensor Fn(const at::Tensor& a) {                                          \
    return UnaryImpl(OP, "aten::" NAME, false, a, nullptr, Into::kNew);         \
  }                                                                             \
  [[maybe_unused]] at::Tensor& Fn##Out(const at::Tensor& a, at::Tensor& out) {  \
    TORCH_CHECK(out.scalar_type() == at::kBool, NAME " does not support non-boolean outputs."); \
    UnaryImpl(OP, "aten::" NAME, false, a, &out, Into::kOut);                   \
    return out;                                                                 \
  }
TRN_PREDICATE(IsNan, UnaryOp::kIsNan, "isnan")
TRN_PREDICATE(IsInf, UnaryOp::kIsInf, "isinf")
TRN_PREDICATE(IsPosInf, UnaryOp::kIsPosInf, "isposinf")
TRN_PREDICATE(IsNegInf, UnaryOp::kIsNegInf, "isneginf")
TRN_PREDICATE(IsFinite, UnaryOp::kIsFinite, "isfinite")
TRN_PREDICATE(Signbit, UnaryOp::kSignbit, "signbit")
#undef TRN_PREDICATE

// round(decimals): integers are rejected as torch does (NotImplementedError).
at::Tensor RoundDecimalsImpl(const at::Tensor& self, int64_t decimals, at::Tensor* out,
                             Into into) {
  const char* name = into == Into::kSelf ? "aten::round_" : "aten::round";
  if (decimals == 0) return UnaryImpl(UnaryOp::kRound, name, false, self, out, into);
  const at::ScalarType dtype = self.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(dtype), name, ": decimals is not implemented for '",
                              c10::toString(dtype), "'");
  const int device = CommonDevice(name, {&self, out});
  CheckOverlaps(into, out, {&self});
  at::Tensor res;
  if (into == Into::kNew) {
    res = EmptyElementwise(self.sizes(), dtype, device, {&self});
  } else if (into == Into::kSelf) {
    res = *out;
  } else {
    PrepareOut(*out, self.sizes(), dtype, name);
    res = *out;
  }
  ComputeDType(dtype, name);
  if (res.numel() == 0) return res;
  const at::Tensor dst =
      res.scalar_type() == dtype ? res : EmptyElementwise(self.sizes(), dtype, device, {&res});
  const TensorRef o = Ref(dst, name);
  const TensorRef i = Ref(self, name);
  Launch(device, kernels::DescribeUnary(UnaryOp::kRound, o, i, name),
         [=] { return kernels::RoundDecimals(o, i, decimals); });
  if (!dst.is_same(res)) LaunchCopy(device, res, dst, name);
  return res;
}
at::Tensor RoundDec(const at::Tensor& a, int64_t decimals) {
  return RoundDecimalsImpl(a, decimals, nullptr, Into::kNew);
}
at::Tensor& RoundDec_(at::Tensor& a, int64_t decimals) {
  RoundDecimalsImpl(a, decimals, &a, Into::kSelf);
  return a;
}
at::Tensor& RoundDecOut(const at::Tensor& a, int64_t decimals, at::Tensor& out) {
  RoundDecimalsImpl(a, decimals, &out, Into::kOut);
  return out;
}

// Shared tail of the one-input parametrized ops (clamp, nan_to_num): makes the
// result (new / self / out=) of `result` dtype, casts self to it and launches
// `kernel(o, i)` with its KernelInfo from `describe(o, i)`.
template <class Describe, class Kernel>
at::Tensor MapInto(const char* name, const at::Tensor& self, at::ScalarType result,
                   at::Tensor* out, Into into, bool compute, Describe describe, Kernel kernel) {
  const int device = CommonDevice(name, {&self, out});
  CheckOverlaps(into, out, {&self});
  at::Tensor new_res;  // Note [No tensor copies around a launch]
  if (into == Into::kNew) {
    new_res = EmptyElementwise(self.sizes(), result, device, {&self});
  } else if (into == Into::kSelf) {
    CheckCanCast(result, out->scalar_type(), name);
  } else {
    PrepareOut(*out, self.sizes(), result, name);
  }
  const at::Tensor& res = into == Into::kNew ? new_res : *out;
  if (compute) ComputeDType(result, name);  // float64 policy
  if (res.numel() == 0) return new_res;
  LaunchMap(name, self, result, res, result, device, [&](const TensorRef& o, const TensorRef& i) {
    Launch(device, describe(o, i), [=] { return kernel(o, i); });
  });
  return new_res;
}

// ---- clamp ------------------------------------------------------------------------
// Scalar bounds: one Clamp kernel. Tensor bounds: maximum then minimum (NaN in
// a bound propagates, as torch's clamp_stub; min > max gives max).
at::Tensor ClampScalarImpl(const char* name, const at::Tensor& self,
                           const std::optional<at::Scalar>& min,
                           const std::optional<at::Scalar>& max, at::Tensor* out, Into into) {
  TORCH_CHECK(min.has_value() || max.has_value(),
              "torch.clamp: At least one of 'min' or 'max' must not be None");
  at::native::ResultTypeState state;
  state = at::native::update_result_type_state(self, state);
  if (min.has_value()) state = at::native::update_result_type_state(*min, state);
  if (max.has_value()) state = at::native::update_result_type_state(*max, state);
  const at::ScalarType result = at::native::result_type(state);
  TORCH_CHECK_NOT_IMPLEMENTED(result != at::kBool, name,
                              ": not implemented for 'Bool' with scalar bounds");
  const double inf = std::numeric_limits<double>::infinity();
  const double lo = min.has_value() ? min->toDouble() : -inf;
  const double hi = max.has_value() ? max->toDouble() : inf;
  return MapInto(
      name, self, result, out, into, true,
      [name](const TensorRef& o, const TensorRef& i) { return kernels::DescribeClamp(o, i, name); },
      [lo, hi](const TensorRef& o, const TensorRef& i) { return kernels::Clamp(o, i, lo, hi); });
}

at::Tensor ClampTensorImpl(const char* name, const at::Tensor& self,
                           const std::optional<at::Tensor>& min,
                           const std::optional<at::Tensor>& max, at::Tensor* out, Into into) {
  const bool has_min = min.has_value() && min->defined();
  const bool has_max = max.has_value() && max->defined();
  TORCH_CHECK(has_min || has_max, "torch.clamp: At least one of 'min' or 'max' must not be None");
  at::native::ResultTypeState state;
  state = at::native::update_result_type_state(self, state);
  if (has_min) state = at::native::update_result_type_state(*min, state);
  if (has_max) state = at::native::update_result_type_state(*max, state);
  const at::ScalarType common = at::native::result_type(state);
  CheckOverlaps(into, out, {&self, has_min ? &*min : nullptr, has_max ? &*max : nullptr});
  if (!has_max) return BinaryImpl(BinaryOp::kMaximum, name, Of(self), Of(*min), common, 1.0, out, into);
  if (!has_min) return BinaryImpl(BinaryOp::kMinimum, name, Of(self), Of(*max), common, 1.0, out, into);
  const at::Tensor low = BinaryImpl(BinaryOp::kMaximum, name, Of(self), Of(*min), common, 1.0,
                                    nullptr, Into::kNew);
  return BinaryImpl(BinaryOp::kMinimum, name, Of(low), Of(*max), common, 1.0, out, into);
}

using OptScalar = std::optional<at::Scalar>;
using OptTensor = std::optional<at::Tensor>;
at::Tensor Clamp(const at::Tensor& a, const OptScalar& lo, const OptScalar& hi) {
  return ClampScalarImpl("aten::clamp", a, lo, hi, nullptr, Into::kNew);
}
at::Tensor& Clamp_(at::Tensor& a, const OptScalar& lo, const OptScalar& hi) {
  ClampScalarImpl("aten::clamp_", a, lo, hi, &a, Into::kSelf);
  return a;
}
at::Tensor& ClampOut(const at::Tensor& a, const OptScalar& lo, const OptScalar& hi,
                     at::Tensor& out) {
  ClampScalarImpl("aten::clamp", a, lo, hi, &out, Into::kOut);
  return out;
}
at::Tensor ClampT(const at::Tensor& a, const OptTensor& lo, const OptTensor& hi) {
  return ClampTensorImpl("aten::clamp", a, lo, hi, nullptr, Into::kNew);
}
at::Tensor& ClampT_(at::Tensor& a, const OptTensor& lo, const OptTensor& hi) {
  ClampTensorImpl("aten::clamp_", a, lo, hi, &a, Into::kSelf);
  return a;
}
at::Tensor& ClampTOut(const at::Tensor& a, const OptTensor& lo, const OptTensor& hi,
                      at::Tensor& out) {
  ClampTensorImpl("aten::clamp", a, lo, hi, &out, Into::kOut);
  return out;
}
// clamp_min / clamp_max: one bound.
#define TRN_CLAMP_ONE(Fn, NAME, LO, HI)                                                   \
  at::Tensor Fn(const at::Tensor& a, const at::Scalar& v) {                               \
    return ClampScalarImpl("aten::" NAME, a, LO, HI, nullptr, Into::kNew);                \
  }                                                                                       \
  at::Tensor& Fn##_(at::Tensor& a, const at::Scalar& v) {                                 \
    ClampScalarImpl("aten::" NAME "_", a, LO, HI, &a, Into::kSelf);                       \
    return a;                                                                             \
  }                                                                                       \
  at::Tensor& Fn##Out(const at::Tensor& a, const at::Scalar& v, at::Tensor& out) {        \
    ClampScalarImpl("aten::" NAME, a, LO, HI, &out, Into::kOut);                          \
    return out;                                                                           \
  }                                                                                       \
  at::Tensor Fn##T(const at::Tensor& a, const at::Tensor& v) {                            \
    return ClampTensorImpl("aten::" NAME, a, LO, HI, nullptr, Into::kNew);                \
  }                                                                                       \
  at::Tensor& Fn##T_(at::Tensor& a, const at::Tensor& v) {                                \
    ClampTensorImpl("aten::" NAME "_", a, LO, HI, &a, Into::kSelf);                       \
    return a;                                                                             \
  }                                                                                       \
  at::Tensor& Fn##TOut(const at::Tensor& a, const at::Tensor& v, at::Tensor& out) {       \
    ClampTensorImpl("aten::" NAME, a, LO, HI, &out, Into::kOut);                          \
    return out;                                                                           \
  }
TRN_CLAMP_ONE(ClampMin, "clamp_min", v, std::nullopt)
TRN_CLAMP_ONE(ClampMax, "clamp_max", std::nullopt, v)
#undef TRN_CLAMP_ONE

// The activations' out= must have self's dtype (torch's TensorIterator check,
// stricter than the castable outs of the arithmetic ops).
void CheckOutDType(const at::Tensor& self, const at::Tensor* out, Into into) {
  TORCH_CHECK(into != Into::kOut || out->scalar_type() == self.scalar_type(), "Found dtype ",
              out->scalar_type(), " but expected ", self.scalar_type());
}

// ---- hardtanh (relu6) ---------------------------------------------------------------
// torch's hardtanh is clamp whose bounds never promote: an integer self takes
// them truncated to integers (hardtanh(int, 0.5, 2.5) clamps to [0, 2]).
at::Tensor HardtanhImpl(const at::Tensor& self, const at::Scalar& lo, const at::Scalar& hi,
                        at::Tensor* out, Into into) {
  TORCH_CHECK(self.scalar_type() != at::kBool, "Bool inputs not supported for hardtanh");
  CheckOutDType(self, out, into);
  const bool integral = at::isIntegralType(self.scalar_type(), /*includeBool=*/false);
  const OptScalar min = integral ? at::Scalar(lo.toLong()) : lo;
  const OptScalar max = integral ? at::Scalar(hi.toLong()) : hi;
  return ClampScalarImpl(into == Into::kSelf ? "aten::hardtanh_" : "aten::hardtanh", self, min,
                         max, out, into);
}
at::Tensor Hardtanh(const at::Tensor& a, const at::Scalar& lo, const at::Scalar& hi) {
  return HardtanhImpl(a, lo, hi, nullptr, Into::kNew);
}
at::Tensor& Hardtanh_(at::Tensor& a, const at::Scalar& lo, const at::Scalar& hi) {
  HardtanhImpl(a, lo, hi, &a, Into::kSelf);
  return a;
}
at::Tensor& HardtanhOut(const at::Tensor& a, const at::Scalar& lo, const at::Scalar& hi,
                        at::Tensor& out) {
  HardtanhImpl(a, lo, hi, &out, Into::kOut);
  return out;
}

// ---- activations with parameters: one Activation kernel ------------------------------
// Floating dtypes only: torch's CPU kernels raise NotImplementedError for the others.
at::Tensor ActivationImpl(kernels::ActivationOp op, const char* name, const at::Tensor& self,
                          double p0, double p1, double p2, at::Tensor* out, Into into) {
  const at::ScalarType dtype = self.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(dtype), name, ": not implemented for '",
                              c10::toString(dtype), "'");
  CheckOutDType(self, out, into);
  return MapInto(
      name, self, dtype, out, into, true,
      [=](const TensorRef& o, const TensorRef& i) {
        return kernels::DescribeActivation(op, o, i, name);
      },
      [=](const TensorRef& o, const TensorRef& i) {
        return kernels::Activation(op, o, i, p0, p1, p2);
      });
}

// Functional, in-place and out= forms; the trailing arguments are the op's
// Scalar parameters, P0..P2 what the kernel gets from them.
#define TRN_ACTIVATION(Fn, OP, NAME, P0, P1, P2, ...)                                        \
  at::Tensor Fn(const at::Tensor& a __VA_OPT__(, ) __VA_ARGS__) {                           \
    return ActivationImpl(OP, "aten::" NAME, a, P0, P1, P2, nullptr, Into::kNew);            \
  }                                                                                         \
  [[maybe_unused]] at::Tensor& Fn##_(at::Tensor& a __VA_OPT__(, ) __VA_ARGS__) {            \
    ActivationImpl(OP, "aten::" NAME "_", a, P0, P1, P2, &a, Into::kSelf);                   \
    return a;                                                                               \
  }                                                                                         \
  at::Tensor& Fn##Out(const at::Tensor& a, __VA_ARGS__ __VA_OPT__(, ) at::Tensor& out) {    \
    ActivationImpl(OP, "aten::" NAME, a, P0, P1, P2, &out, Into::kOut);                      \
    return out;                                                                             \
  }
using kernels::ActivationOp;
TRN_ACTIVATION(LeakyRelu, ActivationOp::kLeakyRelu, "leaky_relu", slope.toDouble(), 0, 0,
               const at::Scalar& slope)
TRN_ACTIVATION(Elu, ActivationOp::kElu, "elu", alpha.toDouble(), scale.toDouble(),
               input_scale.toDouble(), const at::Scalar& alpha, const at::Scalar& scale,
               const at::Scalar& input_scale)
TRN_ACTIVATION(Softplus, ActivationOp::kSoftplus, "softplus", beta.toDouble(),
               threshold.toDouble(), 0, const at::Scalar& beta, const at::Scalar& threshold)
TRN_ACTIVATION(Hardswish, ActivationOp::kHardswish, "hardswish", 0, 0, 0)
TRN_ACTIVATION(Hardsigmoid, ActivationOp::kHardsigmoid, "hardsigmoid", 0, 0, 0)
TRN_ACTIVATION(Mish, ActivationOp::kMish, "mish", 0, 0, 0)
// hardshrink and softshrink compare in the input's dtype: CPU rounds lambd to
// bfloat16 / float16 first (threshold compares in float32).
double InDType(const at::Tensor& a, const at::Scalar& v) {
  if (a.scalar_type() == at::kBFloat16) return static_cast<float>(v.to<c10::BFloat16>());
  if (a.scalar_type() == at::kHalf) return static_cast<float>(v.to<c10::Half>());
  return v.toDouble();
}
double ShrinkLambda(const at::Tensor& a, const at::Scalar& lambd) {
  const double l = lambd.toDouble();
  TORCH_CHECK(l >= 0 && l <= static_cast<double>(std::numeric_limits<float>::max()),
              "lambda must be in range [0, ", std::numeric_limits<float>::max(),
              "] for input dtype ", a.scalar_type(), ", but found ", l);
  return InDType(a, lambd);
}
TRN_ACTIVATION(Hardshrink, ActivationOp::kHardshrink, "hardshrink", InDType(a, lambd), 0, 0,
               const at::Scalar& lambd)
TRN_ACTIVATION(Softshrink, ActivationOp::kSoftshrink, "softshrink", ShrinkLambda(a, lambd), 0,
               0, const at::Scalar& lambd)
TRN_ACTIVATION(ThresholdFloat, ActivationOp::kThreshold, "threshold", threshold.toDouble(),
               value.toDouble(), 0, const at::Scalar& threshold, const at::Scalar& value)
#undef TRN_ACTIVATION

// torch's threshold also takes integers (registered impl_floating: they go to
// the CPU) and casts into an out= of another dtype: the CPU's.
at::Tensor& ThresholdOut(const at::Tensor& a, const at::Scalar& th, const at::Scalar& v,
                         at::Tensor& out) {
  if (out.scalar_type() == a.scalar_type()) return ThresholdFloatOut(a, th, v, out);
  return at::native::call_fallback_fn<&CpuFallback, at::_ops::threshold_out>::call(a, th, v,
                                                                                    out);
}

// Note [log_sigmoid buffer]: CPU's log_sigmoid_forward also returns
// exp(-|x|) for its backward; CUDA's returns an empty buffer and its backward
// recomputes from x. trn does as CUDA (one kernel forward, nothing kept):
// d/dx log_sigmoid(x) = sigmoid(-x), three trn ops.
std::tuple<at::Tensor, at::Tensor> LogSigmoidForward(const at::Tensor& self) {
  at::Tensor out = ActivationImpl(ActivationOp::kLogSigmoid, "aten::log_sigmoid_forward", self, 0,
                                  0, 0, nullptr, Into::kNew);
  return {out, at::empty({0}, self.options())};
}
std::tuple<at::Tensor&, at::Tensor&> LogSigmoidForwardOut(const at::Tensor& self,
                                                          at::Tensor& output,
                                                          at::Tensor& buffer) {
  ActivationImpl(ActivationOp::kLogSigmoid, "aten::log_sigmoid_forward", self, 0, 0, 0, &output,
                 Into::kOut);
  buffer.resize_({0});
  return {output, buffer};
}
at::Tensor LogSigmoidBackward(const at::Tensor& grad, const at::Tensor& self,
                              const at::Tensor& /*buffer*/) {
  return at::mul(grad, at::sigmoid(at::neg(self)));
}
at::Tensor& LogSigmoidBackwardOut(const at::Tensor& grad, const at::Tensor& self,
                                  const at::Tensor& /*buffer*/, at::Tensor& grad_input) {
  return at::mul_out(grad_input, grad, at::sigmoid(at::neg(self)));
}

// rrelu in eval mode is leaky_relu with the mean slope (torch's formula);
// training draws a slope per element into `noise` on the CPU generator.
double RreluSlope(const at::Scalar& lower, const at::Scalar& upper) {
  return (lower.toDouble() + upper.toDouble()) / 2;
}
at::Tensor RreluWithNoise(const at::Tensor& self, at::Tensor& noise, const at::Scalar& lower,
                          const at::Scalar& upper, bool training,
                          std::optional<at::Generator> gen) {
  if (training) {
    return at::native::call_fallback_fn<&CpuFallback, at::_ops::rrelu_with_noise>::call(
        self, noise, lower, upper, training, std::move(gen));
  }
  return ActivationImpl(ActivationOp::kLeakyRelu, "aten::rrelu_with_noise", self,
                        RreluSlope(lower, upper), 0, 0, nullptr, Into::kNew);
}
at::Tensor& RreluWithNoise_(at::Tensor& self, at::Tensor& noise, const at::Scalar& lower,
                            const at::Scalar& upper, bool training,
                            std::optional<at::Generator> gen) {
  if (training) {
    return at::native::call_fallback_fn<&CpuFallback, at::_ops::rrelu_with_noise_>::call(
        self, noise, lower, upper, training, std::move(gen));
  }
  ActivationImpl(ActivationOp::kLeakyRelu, "aten::rrelu_with_noise_", self,
                 RreluSlope(lower, upper), 0, 0, &self, Into::kSelf);
  return self;
}
at::Tensor& RreluWithNoiseOut(const at::Tensor& self, at::Tensor& noise,
                              const at::Scalar& lower, const at::Scalar& upper, bool training,
                              std::optional<at::Generator> gen, at::Tensor& out) {
  if (training) {
    return at::native::call_fallback_fn<&CpuFallback, at::_ops::rrelu_with_noise_out>::call(
        self, noise, lower, upper, training, std::move(gen), out);
  }
  ActivationImpl(ActivationOp::kLeakyRelu, "aten::rrelu_with_noise", self,
                 RreluSlope(lower, upper), 0, 0, &out, Into::kOut);
  return out;
}

// ---- addcmul / addcdiv: self + value * (t1 op t2) ---------------------------------
// Two trn ops (the product, then add with alpha), with torch's broadcasting and
// promotion. CPU rounds (value * t1) * t2 in one expression: float32 results
// may differ in the last bit, bfloat16 / float16 round the product once more.
at::Tensor Addcdiv12(const at::Tensor& t1, const at::Tensor& t2) {
  TORCH_CHECK(!(at::isIntegralType(t1.scalar_type(), true) &&
                at::isIntegralType(t2.scalar_type(), true)),
              "Integer division with addcdiv is no longer supported, and in a future release "
              "addcdiv will perform a true division of tensor1 and tensor2. The historic "
              "addcdiv behavior can be implemented as (input + value * torch.trunc(tensor1 / "
              "tensor2)).to(input.dtype) for integer inputs and as (input + value * tensor1 / "
              "tensor2) for float inputs. The future addcdiv behavior is just the latter "
              "implementation: (input + value * tensor1 / tensor2), for all dtypes.");
  return at::div(t1, t2);
}
at::Tensor Addcmul12(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      at::promote_types(self.scalar_type(), at::promote_types(t1.scalar_type(),
                                                              t2.scalar_type())) != at::kBool,
      "\"addcmul_cpu_out\" not implemented for 'Bool'");
  return at::mul(t1, t2);
}
at::Tensor Addcmul(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2,
                   const at::Scalar& value) {
  return at::add(self, Addcmul12(self, t1, t2), value);
}
at::Tensor& Addcmul_(at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2,
                     const at::Scalar& value) {
  return self.add_(Addcmul12(self, t1, t2), value);
}
at::Tensor& AddcmulOut(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2,
                       const at::Scalar& value, at::Tensor& out) {
  return at::add_out(out, self, Addcmul12(self, t1, t2), value);
}
at::Tensor Addcdiv(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2,
                   const at::Scalar& value) {
  return at::add(self, Addcdiv12(t1, t2), value);
}
at::Tensor& Addcdiv_(at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2,
                     const at::Scalar& value) {
  return self.add_(Addcdiv12(t1, t2), value);
}
at::Tensor& AddcdivOut(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2,
                       const at::Scalar& value, at::Tensor& out) {
  return at::add_out(out, self, Addcdiv12(t1, t2), value);
}

// ---- eye: zeros, then ones on the diagonal (a strided view) -----------------------------
at::Tensor& EyeMOut(int64_t n, int64_t m, at::Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be greater or equal to 0, got ", n);
  TORCH_CHECK(m >= 0, "m must be greater or equal to 0, got ", m);
  out.resize_({n, m});
  out.zero_();
  if (n > 0 && m > 0) out.diagonal().fill_(1);
  return out;
}
at::Tensor& EyeOut(int64_t n, at::Tensor& out) { return EyeMOut(n, n, out); }

// ---- nan_to_num --------------------------------------------------------------------
// Absent replacements are 0 / the dtype's largest / lowest finite value.
at::Tensor NanToNumImpl(const at::Tensor& self, std::optional<double> nan,
                        std::optional<double> posinf, std::optional<double> neginf,
                        at::Tensor* out, Into into) {
  const char* name = into == Into::kSelf ? "aten::nan_to_num_" : "aten::nan_to_num";
  const at::ScalarType dtype = self.scalar_type();
  double big = 0;
  if (at::isFloatingType(dtype)) {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, dtype, "nan_to_num", [&] {
      big = static_cast<double>(std::numeric_limits<scalar_t>::max());
    });
  }
  const double vn = nan.value_or(0.0), vp = posinf.value_or(big), vm = neginf.value_or(-big);
  return MapInto(
      name, self, dtype, out, into, false,
      [name](const TensorRef& o, const TensorRef& i) { return kernels::DescribeNanToNum(o, i, name); },
      [vn, vp, vm](const TensorRef& o, const TensorRef& i) {
        return kernels::NanToNum(o, i, vn, vp, vm);
      });
}
at::Tensor NanToNum(const at::Tensor& a, std::optional<double> n, std::optional<double> p,
                    std::optional<double> m) {
  return NanToNumImpl(a, n, p, m, nullptr, Into::kNew);
}
at::Tensor& NanToNum_(at::Tensor& a, std::optional<double> n, std::optional<double> p,
                      std::optional<double> m) {
  NanToNumImpl(a, n, p, m, &a, Into::kSelf);
  return a;
}
at::Tensor& NanToNumOut(const at::Tensor& a, std::optional<double> n, std::optional<double> p,
                        std::optional<double> m, at::Tensor& out) {
  NanToNumImpl(a, n, p, m, &out, Into::kOut);
  return out;
}

// ---- lerp --------------------------------------------------------------------------
// torch requires self, end (and a tensor weight) to share one floating dtype.
at::Tensor LerpImpl(const at::Tensor& self, const at::Tensor& end, const Operand& weight,
                    at::Tensor* out, Into into) {
  const char* name = into == Into::kSelf ? "aten::lerp_" : "aten::lerp";
  const at::ScalarType dtype = self.scalar_type();
  TORCH_CHECK(end.scalar_type() == dtype, name, ": expected dtype ", dtype,
              " for `end` but got dtype ", end.scalar_type());
  TORCH_CHECK(weight.tensor == nullptr || weight.tensor->scalar_type() == dtype, name,
              ": expected dtype ", dtype, " for `weight` but got dtype ",
              weight.tensor->scalar_type());
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(dtype), name, ": not implemented for '",
                              c10::toString(dtype), "'");
  const int device = CommonDevice(name, {&self, &end, weight.tensor, out});
  CheckOverlaps(into, out, {&self, &end, weight.tensor});
  at::DimVector sizes = at::infer_size_dimvector(self.sizes(), end.sizes());
  if (weight.tensor != nullptr) sizes = at::infer_size_dimvector(sizes, weight.tensor->sizes());
  at::Tensor res;
  if (into == Into::kNew) {
    res = EmptyElementwise(sizes, dtype, device, {&self, &end, weight.tensor});
  } else if (into == Into::kSelf) {
    TORCH_CHECK(out->sizes().equals(sizes), name, ": output with shape ", out->sizes(),
                " doesn't match the broadcast shape ", at::IntArrayRef(sizes));
    res = *out;
  } else {
    PrepareOut(*out, sizes, dtype, name);
    res = *out;
  }
  ComputeDType(dtype, name);
  if (res.numel() == 0) return res;
  const at::Tensor dst =
      res.scalar_type() == dtype ? res : EmptyElementwise(sizes, dtype, device, {&res});
  const TensorRef o = Ref(dst, name);
  const TensorRef ra = RefExpanded(self, sizes, name);
  const TensorRef rb = RefExpanded(end, sizes, name);
  TensorRef rw;
  const float w = static_cast<float>(weight.scalar);
  if (weight.tensor != nullptr) {
    rw = RefExpanded(*weight.tensor, sizes, name);
  } else {  // a float32 stride-0 view of the captured value (filled in the task)
    rw = o;
    rw.dtype = DType::kFloat32;
    for (int d = 0; d < rw.ndim; ++d) rw.strides[d] = 0;
  }
  const bool scalar_w = weight.tensor == nullptr;
  Launch(device, kernels::DescribeLerp(o, ra, name), [=]() mutable {
    float value = w;
    if (scalar_w) rw.data = &value;
    return kernels::Lerp(o, ra, rb, rw);
  });
  if (!dst.is_same(res)) LaunchCopy(device, res, dst, name);
  return res;
}
at::Tensor LerpS(const at::Tensor& a, const at::Tensor& b, const at::Scalar& w) {
  return LerpImpl(a, b, Of(w), nullptr, Into::kNew);
}
at::Tensor& LerpS_(at::Tensor& a, const at::Tensor& b, const at::Scalar& w) {
  LerpImpl(a, b, Of(w), &a, Into::kSelf);
  return a;
}
at::Tensor& LerpSOut(const at::Tensor& a, const at::Tensor& b, const at::Scalar& w,
                     at::Tensor& out) {
  LerpImpl(a, b, Of(w), &out, Into::kOut);
  return out;
}
at::Tensor LerpT(const at::Tensor& a, const at::Tensor& b, const at::Tensor& w) {
  return LerpImpl(a, b, Of(w), nullptr, Into::kNew);
}
at::Tensor& LerpT_(at::Tensor& a, const at::Tensor& b, const at::Tensor& w) {
  LerpImpl(a, b, Of(w), &a, Into::kSelf);
  return a;
}
at::Tensor& LerpTOut(const at::Tensor& a, const at::Tensor& b, const at::Tensor& w,
                     at::Tensor& out) {
  LerpImpl(a, b, Of(w), &out, Into::kOut);
  return out;
}

UnaryOp GeluOp(c10::string_view approximate) {
  if (approximate == "none") return UnaryOp::kGelu;
  TORCH_CHECK(approximate == "tanh", "gelu: approximate must be 'none' or 'tanh', got '",
              std::string(approximate), "'");
  return UnaryOp::kGeluTanh;
}
at::Tensor Gelu(const at::Tensor& a, c10::string_view approximate) {
  return UnaryImpl(GeluOp(approximate), "aten::gelu", true, a, nullptr, Into::kNew);
}
at::Tensor& Gelu_(at::Tensor& a, c10::string_view approximate) {
  UnaryImpl(GeluOp(approximate), "aten::gelu_", true, a, &a, Into::kSelf);
  return a;
}
at::Tensor& GeluOut(const at::Tensor& a, c10::string_view approximate, at::Tensor& out) {
  UnaryImpl(GeluOp(approximate), "aten::gelu", true, a, &out, Into::kOut);
  return out;
}

// ---- fill_ / zero_ ------------------------------------------------------------------
// Data movement, not compute: float64 is written without the float64 policy.
at::Tensor& FillValue_(at::Tensor& self, double value, const char* name) {
  const int device = DeviceIndex(self);
  if (self.numel() == 0) return self;
  const TensorRef o = Ref(self, name);
  Launch(device, kernels::DescribeFill(o, name), [=] { return kernels::Fill(o, value); });
  return self;
}
at::Tensor& FillS_(at::Tensor& self, const at::Scalar& value) {
  return FillValue_(self, value.toDouble(), "aten::fill_");
}
// A 0-dim trn value is broadcast by the Copy kernel: no host round trip.
at::Tensor& FillT_(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0,
              "fill_ only supports 0-dimension value tensor but got tensor with ", value.dim(),
              " dimensions.");
  if (value.device().is_cpu()) return FillValue_(self, CpuScalarValue(value), "aten::fill_");
  const int device = CommonDevice("aten::fill_", {&self, &value});
  LaunchCopy(device, self, value, "aten::fill_");
  return self;
}
at::Tensor& Zero_(at::Tensor& self) { return FillValue_(self, 0.0, "aten::zero_"); }

// ---- linalg_cross: component i = a[i+1] b[i+2] - a[i+2] b[i+1] (mod 3), by rolls ---------
at::Tensor LinalgCross(const at::Tensor& self, const at::Tensor& other, int64_t dim) {
  CommonDevice("aten::linalg_cross", {&self, &other});
  TORCH_CHECK(self.dim() == other.dim(), "linalg.cross: inputs must have the same number of "
              "dimensions.");
  TORCH_CHECK(self.scalar_type() == other.scalar_type(), "linalg.cross: expected both inputs to "
              "have same dtype, but input has dtype ", self.scalar_type(), " and other has dtype ",
              other.scalar_type());
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK(self.size(d) == 3 && other.size(d) == 3, "linalg.cross: inputs dimension ", dim,
              " must have length 3. Got ", self.size(d), " and ", other.size(d));
  return self.roll(-1, d) * other.roll(-2, d) - self.roll(-2, d) * other.roll(-1, d);
}
at::Tensor& LinalgCrossOut(const at::Tensor& self, const at::Tensor& other, int64_t dim,
                           at::Tensor& out) {
  return CopyIntoOut(LinalgCross(self, other, dim), out, "aten::linalg_cross");
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, lib) {
  NativeKernels m(lib);  // Note [dtypes the kernels do not take]
  m.impl("linalg_cross", TORCH_FN(LinalgCross));
  m.impl("linalg_cross.out", TORCH_FN(LinalgCrossOut));
  m.impl_complex("add.Tensor", TORCH_FN(Add), TORCH_FN(ComplexAdd));
  m.impl_complex("add_.Tensor", TORCH_FN(Add_), TORCH_FN(ComplexAdd_));
  m.impl("add.out", TORCH_FN(AddOut));
  m.impl_complex("sub.Tensor", TORCH_FN(Sub), TORCH_FN(ComplexSub));
  m.impl_complex("sub_.Tensor", TORCH_FN(Sub_), TORCH_FN(ComplexSub_));
  m.impl("sub.out", TORCH_FN(SubOut));
  m.impl("rsub.Tensor", TORCH_FN(Rsub));
  m.impl_complex("mul.Tensor", TORCH_FN(Mul), TORCH_FN(ComplexMul));
  m.impl_complex("mul_.Tensor", TORCH_FN(Mul_), TORCH_FN(ComplexMul_));
  m.impl("mul.out", TORCH_FN(MulOut));
  m.impl_complex("div.Tensor", TORCH_FN(Div), TORCH_FN(ComplexDiv));
  m.impl_complex("div_.Tensor", TORCH_FN(Div_), TORCH_FN(ComplexDiv_));
  m.impl("div.out", TORCH_FN(DivOut));
  m.impl("maximum", TORCH_FN(Maximum));
  m.impl("maximum.out", TORCH_FN(MaximumOut));
  m.impl("minimum", TORCH_FN(Minimum));
  m.impl("minimum.out", TORCH_FN(MinimumOut));
  m.impl("logical_and", TORCH_FN(LogicalAnd));
  m.impl("logical_and_", TORCH_FN(LogicalAnd_));
  m.impl("logical_and.out", TORCH_FN(LogicalAndOut));
  m.impl("logical_or", TORCH_FN(LogicalOr));
  m.impl("logical_or_", TORCH_FN(LogicalOr_));
  m.impl("logical_or.out", TORCH_FN(LogicalOrOut));
  m.impl("pow.Tensor_Tensor", TORCH_FN(PowTT));
  m.impl("pow_.Tensor", TORCH_FN(PowTT_));
  m.impl("pow.Tensor_Tensor_out", TORCH_FN(PowTTOut));
  m.impl("pow.Tensor_Scalar", TORCH_FN(PowS));
  m.impl("pow_.Scalar", TORCH_FN(PowS_));
  m.impl("pow.Tensor_Scalar_out", TORCH_FN(PowSOut));
  m.impl("pow.Scalar", TORCH_FN(PowScalarBase));
  m.impl("pow.Scalar_out", TORCH_FN(PowScalarBaseOut));
#define TRN_REGISTER_CMP(NAME, Fn)                   \
  m.impl(NAME ".Tensor", TORCH_FN(Fn));              \
  m.impl(NAME "_.Tensor", TORCH_FN(Fn##_));          \
  m.impl(NAME ".Tensor_out", TORCH_FN(Fn##Out));     \
  m.impl(NAME ".Scalar", TORCH_FN(Fn##S));           \
  m.impl(NAME "_.Scalar", TORCH_FN(Fn##S_));         \
  m.impl(NAME ".Scalar_out", TORCH_FN(Fn##SOut));
  TRN_REGISTER_CMP("eq", Eq)
  TRN_REGISTER_CMP("ne", Ne)
  TRN_REGISTER_CMP("lt", Lt)
  TRN_REGISTER_CMP("le", Le)
  TRN_REGISTER_CMP("gt", Gt)
  TRN_REGISTER_CMP("ge", Ge)
#undef TRN_REGISTER_CMP
  m.impl("div.Tensor_mode", TORCH_FN(DivMode));
  m.impl("div_.Tensor_mode", TORCH_FN(DivMode_));
  m.impl("div.out_mode", TORCH_FN(DivModeOut));
  m.impl("floor_divide", TORCH_FN(FloorDivide));
  m.impl("floor_divide_.Tensor", TORCH_FN(FloorDivide_));
  m.impl("floor_divide.out", TORCH_FN(FloorDivideOut));
#define TRN_REGISTER_TT(NAME, Fn)               \
  m.impl(NAME ".Tensor", TORCH_FN(Fn));         \
  m.impl(NAME "_.Tensor", TORCH_FN(Fn##_));     \
  m.impl(NAME ".Tensor_out", TORCH_FN(Fn##Out));
  TRN_REGISTER_TT("remainder", Remainder)
  TRN_REGISTER_TT("fmod", Fmod)
  m.impl("atan2", TORCH_FN(Atan2));  // atan2's overloads have no .Tensor suffix
  m.impl("_prelu_kernel", TORCH_FN(PreluKernel));
  m.impl("atan2_", TORCH_FN(Atan2_));
  m.impl("atan2.out", TORCH_FN(Atan2Out));
  m.impl("hypot", TORCH_FN(Hypot));
  m.impl("hypot_", TORCH_FN(Hypot_));
  m.impl("hypot.out", TORCH_FN(HypotOut));
  m.impl("logaddexp", TORCH_FN(LogAddExp));
  m.impl("logaddexp.out", TORCH_FN(LogAddExpOut));
  m.impl("logaddexp2", TORCH_FN(LogAddExp2));
  m.impl("logaddexp2.out", TORCH_FN(LogAddExp2Out));
  m.impl("fmax", TORCH_FN(Fmax));
  m.impl("fmax.out", TORCH_FN(FmaxOut));
  m.impl("fmin", TORCH_FN(Fmin));
  m.impl("fmin.out", TORCH_FN(FminOut));
  m.impl("heaviside", TORCH_FN(Heaviside));
  m.impl("heaviside_", TORCH_FN(Heaviside_));
  m.impl("heaviside.out", TORCH_FN(HeavisideOut));
  m.impl("logical_xor", TORCH_FN(LogicalXor));
  m.impl("logical_xor_", TORCH_FN(LogicalXor_));
  m.impl("logical_xor.out", TORCH_FN(LogicalXorOut));
  m.impl("copysign.Tensor", TORCH_FN(Copysign));
  m.impl("copysign_.Tensor", TORCH_FN(Copysign_));
  m.impl("copysign.out", TORCH_FN(CopysignOut));
  m.impl("copysign.Scalar", TORCH_FN(CopysignS));
  m.impl("copysign_.Scalar", TORCH_FN(CopysignS_));
  m.impl("copysign.Scalar_out", TORCH_FN(CopysignSOut));
  m.impl("xlogy.Tensor", TORCH_FN(Xlogy));
  m.impl("xlogy_.Tensor", TORCH_FN(Xlogy_));
  m.impl("xlogy.OutTensor", TORCH_FN(XlogyOut));
  m.impl("xlogy.Scalar_Other", TORCH_FN(XlogyS));
  m.impl("xlogy_.Scalar_Other", TORCH_FN(XlogyS_));
  m.impl("xlogy.OutScalar_Other", TORCH_FN(XlogySOut));
  m.impl("xlogy.Scalar_Self", TORCH_FN(XlogyScalarFirst));
  m.impl("xlogy.OutScalar_Self", TORCH_FN(XlogyScalarFirstOut));
  TRN_REGISTER_TT("bitwise_and", BitwiseAnd)
  TRN_REGISTER_TT("bitwise_or", BitwiseOr)
  TRN_REGISTER_TT("bitwise_xor", BitwiseXor)
  TRN_REGISTER_TT("bitwise_left_shift", ShiftLeft)
  TRN_REGISTER_TT("bitwise_right_shift", ShiftRight)
#undef TRN_REGISTER_TT
  m.impl("remainder.Scalar_Tensor", TORCH_FN(RemainderScalarFirst));
  m.impl("remainder.Scalar_Tensor_out", TORCH_FN(RemainderScalarFirstOut));
  m.impl("__lshift__.Tensor", TORCH_FN(ShiftLeft));
  m.impl("__ilshift__.Tensor", TORCH_FN(ShiftLeft_));
  m.impl("__lshift__.Scalar", TORCH_FN(ShiftLeftS));
  m.impl("__ilshift__.Scalar", TORCH_FN(ShiftLeftS_));
  m.impl("__rshift__.Tensor", TORCH_FN(ShiftRight));
  m.impl("__irshift__.Tensor", TORCH_FN(ShiftRight_));
  m.impl("__rshift__.Scalar", TORCH_FN(ShiftRightS));
  m.impl("__irshift__.Scalar", TORCH_FN(ShiftRightS_));
  m.impl("clamp", TORCH_FN(Clamp));
  m.impl("clamp_", TORCH_FN(Clamp_));
  m.impl("clamp.out", TORCH_FN(ClampOut));
  m.impl("clamp.Tensor", TORCH_FN(ClampT));
  m.impl("clamp_.Tensor", TORCH_FN(ClampT_));
  m.impl("clamp.Tensor_out", TORCH_FN(ClampTOut));
#define TRN_REGISTER_CLAMP_ONE(NAME, Fn)        \
  m.impl(NAME, TORCH_FN(Fn));                   \
  m.impl(NAME "_", TORCH_FN(Fn##_));            \
  m.impl(NAME ".out", TORCH_FN(Fn##Out));       \
  m.impl(NAME ".Tensor", TORCH_FN(Fn##T));      \
  m.impl(NAME "_.Tensor", TORCH_FN(Fn##T_));    \
  m.impl(NAME ".Tensor_out", TORCH_FN(Fn##TOut));
  TRN_REGISTER_CLAMP_ONE("clamp_min", ClampMin)
  TRN_REGISTER_CLAMP_ONE("clamp_max", ClampMax)
#undef TRN_REGISTER_CLAMP_ONE
  m.impl("nan_to_num", TORCH_FN(NanToNum));
  m.impl("nan_to_num_", TORCH_FN(NanToNum_));
  m.impl("nan_to_num.out", TORCH_FN(NanToNumOut));
  m.impl("addcmul", TORCH_FN(Addcmul));
  m.impl("addcmul_", TORCH_FN(Addcmul_));
  m.impl("addcmul.out", TORCH_FN(AddcmulOut));
  m.impl("addcdiv", TORCH_FN(Addcdiv));
  m.impl("addcdiv_", TORCH_FN(Addcdiv_));
  m.impl("addcdiv.out", TORCH_FN(AddcdivOut));
  m.impl("eye.out", TORCH_FN(EyeOut));
  m.impl("eye.m_out", TORCH_FN(EyeMOut));
  m.impl("lerp.Scalar", TORCH_FN(LerpS));
  m.impl("lerp_.Scalar", TORCH_FN(LerpS_));
  m.impl("lerp.Scalar_out", TORCH_FN(LerpSOut));
  m.impl("lerp.Tensor", TORCH_FN(LerpT));
  m.impl("lerp_.Tensor", TORCH_FN(LerpT_));
  m.impl("lerp.Tensor_out", TORCH_FN(LerpTOut));
  m.impl("isnan", TORCH_FN(IsNan));
  m.impl("isinf", TORCH_FN(IsInf));
  m.impl("isfinite", TORCH_FN(IsFinite));
  m.impl("isposinf", TORCH_FN(IsPosInf));
  m.impl("isposinf.out", TORCH_FN(IsPosInfOut));
  m.impl("isneginf", TORCH_FN(IsNegInf));
  m.impl("isneginf.out", TORCH_FN(IsNegInfOut));
  m.impl("signbit", TORCH_FN(Signbit));
  m.impl("signbit.out", TORCH_FN(SignbitOut));
  m.impl("round.decimals", TORCH_FN(RoundDec));
  m.impl("round_.decimals", TORCH_FN(RoundDec_));
  m.impl("round.decimals_out", TORCH_FN(RoundDecOut));
  m.impl("where.self", TORCH_FN(Where));
  m.impl("where.self_out", TORCH_FN(WhereOut));
  m.impl("masked_fill.Scalar", TORCH_FN(MaskedFillS));
  m.impl("masked_fill_.Scalar", TORCH_FN(MaskedFillS_));
  m.impl("masked_fill.Tensor", TORCH_FN(MaskedFillT));
  m.impl("masked_fill_.Tensor", TORCH_FN(MaskedFillT_));
#define TRN_REGISTER_UNARY(NAME, Fn)       \
  m.impl(NAME, TORCH_FN(Fn));              \
  m.impl(NAME "_", TORCH_FN(Fn##_));       \
  m.impl(NAME ".out", TORCH_FN(Fn##Out));
// The functional form also takes complex64 (ops_complex.cc); in place and out= do not.
#define TRN_REGISTER_UNARY_COMPLEX(NAME, Fn)                       \
  m.impl_complex(NAME, TORCH_FN(Fn), TORCH_FN(Complex##Fn));       \
  m.impl(NAME "_", TORCH_FN(Fn##_));                               \
  m.impl(NAME ".out", TORCH_FN(Fn##Out));
  TRN_REGISTER_UNARY_COMPLEX("neg", Neg)
  TRN_REGISTER_UNARY_COMPLEX("abs", Abs)
  TRN_REGISTER_UNARY("relu", Relu)
  TRN_REGISTER_UNARY_COMPLEX("exp", Exp)
  TRN_REGISTER_UNARY_COMPLEX("log", Log)
  TRN_REGISTER_UNARY_COMPLEX("sqrt", Sqrt)
  TRN_REGISTER_UNARY("rsqrt", Rsqrt)
  TRN_REGISTER_UNARY_COMPLEX("reciprocal", Reciprocal)
  TRN_REGISTER_UNARY("sigmoid", Sigmoid)
  TRN_REGISTER_UNARY("tanh", Tanh)
  TRN_REGISTER_UNARY("silu", Silu)
  TRN_REGISTER_UNARY("sin", Sin)
  TRN_REGISTER_UNARY("cos", Cos)
  TRN_REGISTER_UNARY("logical_not", LogicalNot)
  TRN_REGISTER_UNARY("gelu", Gelu)
  TRN_REGISTER_UNARY("erf", Erf)
  TRN_REGISTER_UNARY("floor", Floor)
  TRN_REGISTER_UNARY("ceil", Ceil)
  TRN_REGISTER_UNARY("trunc", Trunc)
  TRN_REGISTER_UNARY("round", Round)
  TRN_REGISTER_UNARY("sign", Sign)
  TRN_REGISTER_UNARY("sgn", Sgn)
  TRN_REGISTER_UNARY("bitwise_not", BitwiseNot)
  TRN_REGISTER_UNARY("log1p", Log1p)
  TRN_REGISTER_UNARY("expm1", Expm1)
  TRN_REGISTER_UNARY("tan", Tan)
  TRN_REGISTER_UNARY("asin", Asin)
  TRN_REGISTER_UNARY("acos", Acos)
  TRN_REGISTER_UNARY("atan", Atan)
  TRN_REGISTER_UNARY("sinh", Sinh)
  TRN_REGISTER_UNARY("cosh", Cosh)
  TRN_REGISTER_UNARY("asinh", Asinh)
  TRN_REGISTER_UNARY("acosh", Acosh)
  TRN_REGISTER_UNARY("atanh", Atanh)
  TRN_REGISTER_UNARY("log2", Log2)
  TRN_REGISTER_UNARY("log10", Log10)
  TRN_REGISTER_UNARY("exp2", Exp2)
  TRN_REGISTER_UNARY("erfc", Erfc)
  TRN_REGISTER_UNARY("lgamma", Lgamma)
  TRN_REGISTER_UNARY("frac", Frac)
  TRN_REGISTER_UNARY("sinc", Sinc)
  TRN_REGISTER_UNARY("hardtanh", Hardtanh)
  TRN_REGISTER_UNARY("leaky_relu", LeakyRelu)
  TRN_REGISTER_UNARY("elu", Elu)
  TRN_REGISTER_UNARY("hardswish", Hardswish)
  TRN_REGISTER_UNARY("hardsigmoid", Hardsigmoid)
  TRN_REGISTER_UNARY("mish", Mish)
  TRN_REGISTER_UNARY("rrelu_with_noise", RreluWithNoise)
#undef TRN_REGISTER_UNARY
#undef TRN_REGISTER_UNARY_COMPLEX
  m.impl_floating("threshold", TORCH_FN(ThresholdFloat));
  m.impl_floating("threshold_", TORCH_FN(ThresholdFloat_));
  m.impl_floating("threshold.out", TORCH_FN(ThresholdOut));
  m.impl("hardshrink", TORCH_FN(Hardshrink));  // no in-place forms
  m.impl("hardshrink.out", TORCH_FN(HardshrinkOut));
  m.impl("softshrink", TORCH_FN(Softshrink));
  m.impl("softshrink.out", TORCH_FN(SoftshrinkOut));
  m.impl("log_sigmoid_forward", TORCH_FN(LogSigmoidForward));
  m.impl("log_sigmoid_forward.output", TORCH_FN(LogSigmoidForwardOut));
  m.impl("log_sigmoid_backward", TORCH_FN(LogSigmoidBackward));
  m.impl("log_sigmoid_backward.grad_input", TORCH_FN(LogSigmoidBackwardOut));
  m.impl("softplus", TORCH_FN(Softplus));  // no in-place form
  m.impl("softplus.out", TORCH_FN(SoftplusOut));
  m.impl("fill_.Scalar", TORCH_FN(FillS_));
  m.impl("fill_.Tensor", TORCH_FN(FillT_));
  m.impl_complex("zero_", TORCH_FN(Zero_), TORCH_FN(ComplexZero_));
}

}  // namespace trn::bridge::ops
