// Complex64 on the trn device (core/kernels/complex.h, Note [Complex as pairs]):
// add / sub / mul / div with complex operands (Meta's rotary embedding,
// view_as_complex(x) * freqs_cis), abs and angle of complex tensors, polar and
// complex, device-to-device copies, and the FFTs (_fft_r2c / _fft_c2r /
// _fft_c2c: torch.fft.*, FNet's fftn, Autoformer's rfft / irfft). complex128
// (and complex32) keep the CPU fallback, as do float64 FFTs.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_fft_c2c.h>
#include <ATen/ops/_fft_c2r.h>
#include <ATen/ops/_fft_r2c.h>
#include <ATen/ops/add.h>
#include <ATen/ops/div.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/conj_physical.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/view_as_real.h>
#include <ATen/ops/view_as_complex.h>
#include <ATen/ops/reciprocal.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/roll.h>
#include <ATen/ops/angle.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/log.h>
#include <ATen/ops/sqrt.h>
#include <ATen/ops/imag.h>
#include <ATen/ops/real.h>
#include <ATen/ops/_conj_physical.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/complex.h>
#include <ATen/ops/polar.h>
#include <c10/util/complex.h>
#include <torch/library.h>

#include <cmath>
#include <vector>

#include "core/kernels/complex.h"
#include "torch_bridge/fallback.h"
#include "torch_bridge/ops_complex.h"
#include "torch_bridge/ops_util.h"

namespace trn::bridge::ops {

using kernels::ComplexBinaryOp;
using kernels::ComplexOperand;
using kernels::FftKind;

namespace {

// Note [Complex as pairs]: a complex64 tensor's sizes, its strides in floats.
TensorRef Pairs(const at::Tensor& t) {
  TORCH_CHECK(t.dim() <= kMaxDims, "trn: complex tensors support at most ", kMaxDims,
              " dimensions, got ", t.dim());
  TensorRef r;
  r.data = t.numel() == 0 ? nullptr : t.data_ptr();
  r.dtype = DType::kFloat32;
  r.ndim = static_cast<int>(t.dim());
  for (int d = 0; d < r.ndim; ++d) {
    r.sizes[d] = t.size(d);
    r.strides[d] = 2 * t.stride(d);
  }
  return r;
}

// A complex64 tensor as a kernel operand (its conj bit read by the kernel).
ComplexOperand PairsOperand(const at::Tensor& t) {
  ComplexOperand o;
  o.t = Pairs(t);
  o.conj = t.is_conj();
  return o;
}

// An operand of a complex op broadcast to `sizes`: a CPU scalar, a complex64
// tensor (its conj bit read by the kernel) or a real one (cast to float32).
ComplexOperand OperandOf(const at::Tensor& t, at::IntArrayRef sizes, const char* op) {
  ComplexOperand o;
  if (IsCpuScalar(t)) {
    const c10::complex<double> v = t.item().toComplexDouble();
    o.re = v.real(), o.im = v.imag();
    return o;
  }
  if (t.scalar_type() == at::kComplexFloat) return PairsOperand(t.expand(sizes));
  o.t = RefExpanded(CastTo(t, at::kFloat, op), sizes, op);
  o.real = true;
  return o;
}

std::vector<int64_t> BroadcastSizes(const at::Tensor& a, const at::Tensor& b) {
  if (IsCpuScalar(b)) return a.sizes().vec();
  if (IsCpuScalar(a)) return b.sizes().vec();
  return at::infer_size(a.sizes(), b.sizes());
}

at::Tensor Binary(ComplexBinaryOp op, const at::Tensor& a, const at::Tensor& b, double alpha,
                  const char* name) {
  const int device = CommonDevice(name, {IsCpuScalar(a) ? nullptr : &a,
                                         IsCpuScalar(b) ? nullptr : &b});
  const std::vector<int64_t> sizes = BroadcastSizes(a, b);
  at::Tensor out = Empty(sizes, at::kComplexFloat, device);
  if (out.numel() == 0) return out;
  const TensorRef o = Pairs(out);
  const ComplexOperand x = OperandOf(a, sizes, name), y = OperandOf(b, sizes, name);
  Launch(device, kernels::DescribeComplex("complex_binary_c64", o, 6, name),
         [=] { return kernels::ComplexBinary(op, o, x, y, alpha); });
  return out;
}

// The dtype a complex op computes in: complex64, or the fallback's (complex128).
bool TakesComplex64(const at::Tensor& a, const at::Tensor& b) {
  const at::ScalarType t = at::result_type(a, b);
  return t == at::kComplexFloat;
}

}  // namespace

at::Tensor ComplexAdd(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  if (!TakesComplex64(a, b) || alpha.isComplex()) {
    return at::native::call_fallback_fn<&CpuFallback, at::_ops::add_Tensor>::call(a, b, alpha);
  }
  return Binary(ComplexBinaryOp::kAdd, a, b, alpha.toDouble(), "aten::add");
}
at::Tensor ComplexSub(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  if (!TakesComplex64(a, b) || alpha.isComplex() || a.scalar_type() == at::kBool ||
      b.scalar_type() == at::kBool) {  // CPU's error for a bool operand
    return at::native::call_fallback_fn<&CpuFallback, at::_ops::sub_Tensor>::call(a, b, alpha);
  }
  return Binary(ComplexBinaryOp::kSub, a, b, alpha.toDouble(), "aten::sub");
}
at::Tensor ComplexMul(const at::Tensor& a, const at::Tensor& b) {
  if (!TakesComplex64(a, b)) {
    return at::native::call_fallback_fn<&CpuFallback, at::_ops::mul_Tensor>::call(a, b);
  }
  return Binary(ComplexBinaryOp::kMul, a, b, 1.0, "aten::mul");
}
at::Tensor ComplexDiv(const at::Tensor& a, const at::Tensor& b) {
  if (!TakesComplex64(a, b)) {
    return at::native::call_fallback_fn<&CpuFallback, at::_ops::div_Tensor>::call(a, b);
  }
  return Binary(ComplexBinaryOp::kDiv, a, b, 1.0, "aten::div");
}

namespace {

// Whether self op= other runs on the complex kernel: self complex64 without
// conj / negative bits, the result complex64, other broadcast to self's sizes.
// Anything else takes the fallback (CPU's promotion and errors). Overlaps
// raise CPU's errors first: other may be self itself (or a conj view of it),
// whose elements the kernel reads at the index it writes.
bool InPlaceNative(const at::Tensor& self, const at::Tensor& other) {
  CheckWriteOverlaps(self, {&other});  // the fallback's copies would lose the aliasing
  if (self.scalar_type() != at::kComplexFloat || self.is_conj() || self.is_neg() ||
      !TakesComplex64(self, other)) {
    return false;
  }
  if (IsCpuScalar(other)) return true;
  if (other.device() != self.device() || other.is_neg() ||
      !at::is_expandable_to(other.sizes(), self.sizes())) {
    return false;
  }
  return true;
}

at::Tensor& InPlace(ComplexBinaryOp op, at::Tensor& self, const at::Tensor& other, double alpha,
                    const char* name) {
  if (self.numel() == 0) return self;
  const TensorRef o = Pairs(self);
  const ComplexOperand x = PairsOperand(self), y = OperandOf(other, self.sizes(), name);
  Launch(DeviceIndex(self), kernels::DescribeComplex("complex_binary_c64", o, 6, name),
         [=] { return kernels::ComplexBinary(op, o, x, y, alpha); });
  return self;
}

}  // namespace

at::Tensor& ComplexAdd_(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  if (!InPlaceNative(self, other) || alpha.isComplex()) {
    return at::native::call_fallback_fn<&CpuFallback, at::_ops::add__Tensor>::call(self, other,
                                                                                    alpha);
  }
  return InPlace(ComplexBinaryOp::kAdd, self, other, alpha.toDouble(), "aten::add_");
}
at::Tensor& ComplexSub_(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  if (!InPlaceNative(self, other) || alpha.isComplex() || other.scalar_type() == at::kBool) {
    return at::native::call_fallback_fn<&CpuFallback, at::_ops::sub__Tensor>::call(self, other,
                                                                                    alpha);
  }
  return InPlace(ComplexBinaryOp::kSub, self, other, alpha.toDouble(), "aten::sub_");
}
at::Tensor& ComplexMul_(at::Tensor& self, const at::Tensor& other) {
  if (!InPlaceNative(self, other)) {
    return at::native::call_fallback_fn<&CpuFallback, at::_ops::mul__Tensor>::call(self, other);
  }
  return InPlace(ComplexBinaryOp::kMul, self, other, 1.0, "aten::mul_");
}
at::Tensor& ComplexDiv_(at::Tensor& self, const at::Tensor& other) {
  if (!InPlaceNative(self, other)) {
    return at::native::call_fallback_fn<&CpuFallback, at::_ops::div__Tensor>::call(self, other);
  }
  return InPlace(ComplexBinaryOp::kDiv, self, other, 1.0, "aten::div_");
}

namespace {

// Note [Complex reductions]: a sum (mean) of complex values is the sums
// (means) of their parts: the real kernels over the pairs (view_as_real) with
// the pair dim kept, viewed as complex again. A conj bit is taken off before
// and applied after. 0-dim tensors (whose reduced dims would be the pair
// dim's), other dtypes and complex128 results take the fallback.
bool Reducible(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  return self.scalar_type() == at::kComplexFloat && !self.is_neg() && self.dim() > 0 &&
         PairsViewFits(self) && (!dtype.has_value() || *dtype == at::kComplexFloat);
}

at::Tensor ReduceParts(bool mean, const at::Tensor& self, at::OptionalIntArrayRef dim,
                       bool keepdim) {
  std::vector<int64_t> dims;
  if (dim.has_value() && !dim->empty()) {
    for (int64_t d : *dim) dims.push_back(at::maybe_wrap_dim(d, self.dim()));
  } else {
    for (int64_t d = 0; d < self.dim(); ++d) dims.push_back(d);
  }
  const at::Tensor parts = at::view_as_real(self.is_conj() ? self.conj() : self);
  const at::Tensor r =
      at::view_as_complex(mean ? at::mean(parts, dims, keepdim) : at::sum(parts, dims, keepdim));
  return self.is_conj() ? at::conj_physical(r) : r;
}

}  // namespace

at::Tensor ComplexSum(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  if (!Reducible(self, dtype)) {
    return at::native::call_fallback_fn<&CpuFallback, at::_ops::sum>::call(self, dtype);
  }
  return ReduceParts(false, self, std::nullopt, false);
}
at::Tensor ComplexSumDim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                         std::optional<at::ScalarType> dtype) {
  if (!Reducible(self, dtype)) {
    return at::native::call_fallback_fn<&CpuFallback, at::_ops::sum_dim_IntList>::call(
        self, dim, keepdim, dtype);
  }
  return ReduceParts(false, self, dim, keepdim);
}
at::Tensor ComplexMean(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  if (!Reducible(self, dtype)) {
    return at::native::call_fallback_fn<&CpuFallback, at::_ops::mean>::call(self, dtype);
  }
  return ReduceParts(true, self, std::nullopt, false);
}
at::Tensor ComplexMeanDim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                          std::optional<at::ScalarType> dtype) {
  if (!Reducible(self, dtype)) {
    return at::native::call_fallback_fn<&CpuFallback, at::_ops::mean_dim>::call(self, dim,
                                                                                keepdim, dtype);
  }
  return ReduceParts(true, self, dim, keepdim);
}

namespace {

// |z| or arg z of a complex64 tensor, float32.
at::Tensor AbsOrAngle(const at::Tensor& self, bool angle) {
  const char* name = angle ? "aten::angle" : "aten::abs";
  const int device = DeviceIndex(self);
  at::Tensor out = Empty(self.sizes(), at::kFloat, device);
  if (out.numel() == 0) return out;
  const TensorRef o = Ref(out, name);
  const ComplexOperand in = PairsOperand(self);
  Launch(device, kernels::DescribeComplex(angle ? "angle_c64" : "abs_c64", o, angle ? 20 : 4, name),
         [=] {
           return kernels::ComplexUnary(
               angle ? kernels::ComplexUnaryOp::kAngle : kernels::ComplexUnaryOp::kAbs, o, in);
         });
  return out;
}

}  // namespace

at::Tensor ComplexAbs(const at::Tensor& self) { return AbsOrAngle(self, false); }

at::Tensor ComplexReciprocal(const at::Tensor& self) {
  if (self.scalar_type() != at::kComplexFloat) {
    return at::native::call_fallback_fn<&CpuFallback, at::_ops::reciprocal>::call(self);
  }
  return Binary(ComplexBinaryOp::kDiv, at::scalar_tensor(1.0), self, 1.0, "aten::reciprocal");
}

bool PairsViewFits(const at::Tensor& t) { return t.dim() < kMaxDims; }

namespace {

// self's values without conj / negative bits, as a complex64 trn tensor whose
// pairs view_as_real can take.
at::Tensor Resolved(const at::Tensor& self) {
  if (!self.is_conj() && !self.is_neg()) return self;
  at::Tensor out = Empty(self.sizes(), at::kComplexFloat, DeviceIndex(self));
  CopyComplex(out, self);
  return out;
}

}  // namespace

at::Tensor ComplexNeg(const at::Tensor& self) {
  if (self.scalar_type() != at::kComplexFloat) {
    return at::native::call_fallback_fn<&CpuFallback, at::_ops::neg>::call(self);
  }
  // 0 - z, as CPU's complex neg (so -(0 + 0j) is +0, not -0).
  return Binary(ComplexBinaryOp::kSub, at::scalar_tensor(0.0), self, 1.0, "aten::neg");
}

at::Tensor ComplexConstantPadNd(const at::Tensor& self, c10::SymIntArrayRef pad,
                                const at::Scalar& value) {
  if (self.scalar_type() != at::kComplexFloat || value.toComplexDouble() != 0.0 ||
      !PairsViewFits(self)) {
    return at::native::call_fallback_fn_symint<&CpuFallback, at::_ops::constant_pad_nd>::call(
        self, pad, value);
  }
  std::vector<c10::SymInt> pairs_pad(pad.begin(), pad.end());
  TORCH_CHECK(pairs_pad.size() % 2 == 0, "Padding length must be divisible by 2");
  TORCH_CHECK(static_cast<int64_t>(pairs_pad.size()) <= 2 * self.dim(),
              "Padding length should be less than or equal to two times the input dimension "
              "but got padding length ", pairs_pad.size(), " and input of dimension ",
              self.dim());
  pairs_pad.insert(pairs_pad.begin(), {c10::SymInt(0), c10::SymInt(0)});  // the pair dim
  return at::view_as_complex(
      at::constant_pad_nd_symint(at::view_as_real(Resolved(self)), pairs_pad, 0.0).contiguous());
}

at::Tensor ComplexRoll(const at::Tensor& self, c10::SymIntArrayRef shifts, at::IntArrayRef dims) {
  if (self.scalar_type() != at::kComplexFloat || dims.empty() || !PairsViewFits(self)) {
    return at::native::call_fallback_fn_symint<&CpuFallback, at::_ops::roll>::call(self, shifts,
                                                                                   dims);
  }
  std::vector<int64_t> wrapped;
  for (int64_t d : dims) wrapped.push_back(at::maybe_wrap_dim(d, self.dim()));
  return at::view_as_complex(at::roll_symint(at::view_as_real(Resolved(self)), shifts, wrapped));
}

at::Tensor ComplexCat(const at::ITensorListRef& tensors, int64_t dim) {
  std::vector<at::Tensor> pairs;
  int64_t ndim = -1;
  for (const at::Tensor& t : tensors) {
    if (t.scalar_type() != at::kComplexFloat || t.dim() == 0 || !PairsViewFits(t)) {
      // CPU's promotion and errors; an 8-D operand (its pairs view: 9 dims)
      return at::native::call_fallback_fn<&CpuFallback, at::_ops::cat>::call(tensors, dim);
    }
    if (t.dim() == 1 && t.size(0) == 0) continue;  // torch's legacy empty operand
    ndim = t.dim();
    pairs.push_back(at::view_as_real(Resolved(t)));
  }
  if (pairs.empty()) {
    return at::native::call_fallback_fn<&CpuFallback, at::_ops::cat>::call(tensors, dim);
  }
  return at::view_as_complex(at::cat(pairs, at::maybe_wrap_dim(dim, ndim)));
}

namespace {
// exp / log / sqrt of complex64 (kernels::ComplexUnary); complex128 reaches
// the CPU fallback.
template <class AtenOp>
at::Tensor ComplexToComplex(const at::Tensor& self, kernels::ComplexUnaryOp op,
                            const char* aten_name, const char* kernel_name) {
  if (self.scalar_type() != at::kComplexFloat) {
    return at::native::call_fallback_fn<&CpuFallback, AtenOp>::call(self);
  }
  const int device = DeviceIndex(self);
  at::Tensor out = Empty(self.sizes(), at::kComplexFloat, device);
  if (out.numel() == 0) return out;
  const TensorRef o = Pairs(out);
  const ComplexOperand in = PairsOperand(self);
  Launch(device, kernels::DescribeComplex(kernel_name, o, 30, aten_name),
         [=] { return kernels::ComplexUnary(op, o, in); });
  return out;
}
}  // namespace

at::Tensor ComplexExp(const at::Tensor& self) {
  return ComplexToComplex<at::_ops::exp>(self, kernels::ComplexUnaryOp::kExp, "aten::exp",
                                         "exp_c64");
}

at::Tensor ComplexLog(const at::Tensor& self) {
  return ComplexToComplex<at::_ops::log>(self, kernels::ComplexUnaryOp::kLog, "aten::log",
                                         "log_c64");
}

at::Tensor ComplexSqrt(const at::Tensor& self) {
  return ComplexToComplex<at::_ops::sqrt>(self, kernels::ComplexUnaryOp::kSqrt, "aten::sqrt",
                                          "sqrt_c64");
}

at::Tensor& ComplexZero_(at::Tensor& self) {
  if (self.scalar_type() != at::kComplexFloat || !PairsViewFits(self)) {
    return at::native::call_fallback_fn<&CpuFallback, at::_ops::zero_>::call(self);
  }
  at::view_as_real(self).zero_();
  return self;
}

namespace {

at::Tensor Angle(const at::Tensor& self) {
  if (self.scalar_type() != at::kComplexFloat || self.is_neg()) {
    return at::native::call_fallback_fn<&CpuFallback, at::_ops::angle>::call(self);
  }
  return AbsOrAngle(self, true);
}

// conj_physical_: the imaginary parts negated in place (a real tensor: unchanged).
at::Tensor& ConjPhysical_(at::Tensor& self) {
  if (!self.is_complex()) return self;
  if (self.scalar_type() != at::kComplexFloat || self.is_conj() || self.is_neg() ||
      !PairsViewFits(self)) {
    return at::native::call_fallback_fn<&CpuFallback, at::_ops::conj_physical_>::call(self);
  }
  at::view_as_real(self).select(-1, 1).neg_();
  return self;
}

// conj_physical: the conjugate values, materialized.
at::Tensor ConjPhysical(const at::Tensor& self) {
  if (self.scalar_type() != at::kComplexFloat || !PairsViewFits(self)) {
    return at::native::call_fallback_fn<&CpuFallback, at::_ops::_conj_physical>::call(self);
  }
  at::Tensor out = Empty(self.sizes(), at::kComplexFloat, DeviceIndex(self));
  CopyComplex(out, self.conj());
  return out;
}

}  // namespace

void CopyComplex(const at::Tensor& dst, const at::Tensor& src) {
  if (dst.numel() == 0) return;
  // Float copies of the pairs, the bits applied as sign flips: bit-exact (-0
  // and NaN payloads kept), as CPU's copy.
  at::Tensor raw = src;
  const bool conj = raw.is_conj(), neg = raw.is_neg();
  if (conj) raw = raw.conj();  // the stored values, the bit cleared
  if (neg) raw = raw._neg_view();
  raw = raw.expand(dst.sizes());
  const at::Tensor pairs = at::view_as_real(dst);
  if (raw.scalar_type() == at::kComplexFloat) {
    pairs.copy_(at::view_as_real(raw));
    if (neg) pairs.neg_();
  } else {  // a real dtype: the real parts, imaginary parts 0
    pairs.select(-1, 0).copy_(raw);
    pairs.select(-1, 1).zero_();
    if (neg) pairs.select(-1, 0).neg_();
  }
  if (conj) pairs.select(-1, 1).neg_();
}

namespace {

// torch.polar / torch.complex: float32 parts (float64 ones: the fallback).
template <bool kPolar>
at::Tensor& FromPartsOut(const at::Tensor& x, const at::Tensor& y, at::Tensor& out) {
  constexpr const char* kName = kPolar ? "aten::polar" : "aten::complex";
  const int device = CommonDevice(kName, {&x, &y, &out});
  if (x.scalar_type() != at::kFloat || y.scalar_type() != at::kFloat ||
      out.scalar_type() != at::kComplexFloat) {
    if constexpr (kPolar) {
      return at::native::call_fallback_fn<&CpuFallback, at::_ops::polar_out>::call(x, y, out);
    } else {
      return at::native::call_fallback_fn<&CpuFallback, at::_ops::complex_out>::call(x, y, out);
    }
  }
  const std::vector<int64_t> sizes = at::infer_size(x.sizes(), y.sizes());
  at::native::resize_output(out, sizes);
  if (out.numel() == 0) return out;
  if constexpr (kPolar) {
    const TensorRef o = Pairs(out);
    const TensorRef a = RefExpanded(x, sizes, kName), b = RefExpanded(y, sizes, kName);
    Launch(device, kernels::DescribeComplex("polar_c64", o, 30, kName),
           [=] { return kernels::Polar(o, a, b); });
  } else {  // re and im copied into the pairs' two float32 columns
    const at::Tensor columns = at::view_as_real(out);
    columns.select(-1, 0).copy_(x.expand(sizes));
    columns.select(-1, 1).copy_(y.expand(sizes));
  }
  return out;
}
template <bool kPolar>
at::Tensor FromParts(const at::Tensor& x, const at::Tensor& y) {
  const at::ScalarType t = x.scalar_type() == at::kDouble || y.scalar_type() == at::kDouble
                               ? at::kComplexDouble
                               : at::kComplexFloat;
  at::Tensor out = at::empty({0}, x.options().dtype(t));
  return FromPartsOut<kPolar>(x, y, out);
}

// ---- FFTs --------------------------------------------------------------------
// Note [FFT passes]: an n-dimensional transform is one 1-D pass per dim, each a
// launch of kernels::Fft: r2c first along the last dim (the onesided one), then
// c2c in place along the others; c2r the c2c passes first (into a scratch copy:
// the input is not written), then c2r along the last dim. The normalization
// scales the last pass.
double FftScale(int64_t normalization, double n) {
  switch (normalization) {
    case 0: return 1.0;
    case 1: return 1.0 / std::sqrt(n);
    case 2: return 1.0 / n;
  }
  TORCH_CHECK(false, "trn: fft normalization must be 0, 1 or 2, got ", normalization);
}

std::vector<int64_t> WrapDims(at::IntArrayRef dim, int64_t ndim) {
  std::vector<int64_t> dims;
  for (int64_t d : dim) dims.push_back(at::maybe_wrap_dim(d, ndim));
  return dims;
}

void LaunchFft(int device, FftKind kind, const TensorRef& out, const ComplexOperand& in,
               int64_t dim, bool forward, double scale, const char* name) {
  Launch(device, kernels::DescribeFft(kind, out, in.t, static_cast<int>(dim), name),
         [=] { return kernels::Fft(kind, out, in, static_cast<int>(dim), forward, scale); });
}

// c2c passes along `dims` from `in` into out (then in place), the last scaled.
void C2CPasses(int device, const at::Tensor& out, ComplexOperand in,
               const std::vector<int64_t>& dims, bool forward, double scale, const char* name) {
  const TensorRef o = Pairs(out);
  for (size_t i = 0; i < dims.size(); ++i) {
    LaunchFft(device, FftKind::kC2C, o, in, dims[i], forward, i + 1 == dims.size() ? scale : 1.0,
              name);
    in = ComplexOperand{};
    in.t = o;
  }
}

at::Tensor FftR2C(const at::Tensor& self, at::IntArrayRef dim, int64_t normalization,
                  bool onesided) {
  constexpr const char* kName = "aten::_fft_r2c";
  if (self.scalar_type() != at::kFloat || dim.empty()) {
    return at::native::call_fallback_fn<&CpuFallback, at::_ops::_fft_r2c>::call(
        self, dim, normalization, onesided);
  }
  const int device = DeviceIndex(self);
  const std::vector<int64_t> dims = WrapDims(dim, self.dim());
  const int64_t last = dims.back(), n = self.size(last);
  std::vector<int64_t> sizes = self.sizes().vec();
  if (onesided) sizes[last] = n / 2 + 1;
  at::Tensor out = Empty(sizes, at::kComplexFloat, device);
  if (out.numel() == 0) return out;
  double total = 1;
  for (int64_t d : dims) total *= static_cast<double>(self.size(d));
  const double scale = FftScale(normalization, total);
  ComplexOperand in;
  in.t = Ref(self, kName);
  in.real = true;
  LaunchFft(device, FftKind::kR2C, Pairs(out), in, last, true, dims.size() == 1 ? scale : 1.0,
            kName);
  if (dims.size() > 1) {
    ComplexOperand again;
    again.t = Pairs(out);
    C2CPasses(device, out, again, {dims.begin(), dims.end() - 1}, true, scale, kName);
  }
  return out;
}

at::Tensor FftC2R(const at::Tensor& self, at::IntArrayRef dim, int64_t normalization,
                  c10::SymInt last_dim_size) {
  constexpr const char* kName = "aten::_fft_c2r";
  if (self.scalar_type() != at::kComplexFloat || dim.empty() || self.is_neg()) {
    return at::native::call_fallback_fn_symint<&CpuFallback, at::_ops::_fft_c2r>::call(
        self, dim, normalization, last_dim_size);
  }
  const int device = DeviceIndex(self);
  const std::vector<int64_t> dims = WrapDims(dim, self.dim());
  const int64_t last = dims.back(), n = last_dim_size.guard_int(__FILE__, __LINE__);
  TORCH_CHECK(n >= 1, "Invalid number of data points (", n, ") specified");
  std::vector<int64_t> sizes = self.sizes().vec();
  sizes[last] = n;
  at::Tensor out = Empty(sizes, at::kFloat, device);
  if (out.numel() == 0) return out;
  double total = static_cast<double>(n);
  for (size_t i = 0; i + 1 < dims.size(); ++i) total *= static_cast<double>(self.size(dims[i]));
  const double scale = FftScale(normalization, total);
  ComplexOperand in = PairsOperand(self);
  if (dims.size() > 1) {  // the other dims first, into a scratch copy
    at::Tensor work = Empty(self.sizes(), at::kComplexFloat, device);
    C2CPasses(device, work, in, {dims.begin(), dims.end() - 1}, false, 1.0, kName);
    in = ComplexOperand{};
    in.t = Pairs(work);
  }
  LaunchFft(device, FftKind::kC2R, Ref(out, kName), in, last, false, scale, kName);
  return out;
}

at::Tensor FftC2C(const at::Tensor& self, c10::SymIntArrayRef dim, int64_t normalization,
                  bool forward) {
  constexpr const char* kName = "aten::_fft_c2c";
  if (self.scalar_type() != at::kComplexFloat || self.is_neg()) {
    return at::native::call_fallback_fn_symint<&CpuFallback, at::_ops::_fft_c2c>::call(
        self, dim, normalization, forward);
  }
  const int device = DeviceIndex(self);
  std::vector<int64_t> dims;
  for (const c10::SymInt& d : dim) {
    dims.push_back(at::maybe_wrap_dim(d.guard_int(__FILE__, __LINE__), self.dim()));
  }
  at::Tensor out = Empty(self.sizes(), at::kComplexFloat, device);
  if (out.numel() == 0) return out;
  if (dims.empty()) return self.clone();  // no transform: a copy
  double total = 1;
  for (int64_t d : dims) total *= static_cast<double>(self.size(d));
  C2CPasses(device, out, PairsOperand(self), dims, forward, FftScale(normalization, total), kName);
  return out;
}

// The out= forms: computed, then moved into out (resized as CPU does).
at::Tensor& FftR2COut(const at::Tensor& self, at::IntArrayRef dim, int64_t normalization,
                      bool onesided, at::Tensor& out) {
  return CopyIntoOut(FftR2C(self, dim, normalization, onesided), out, "aten::_fft_r2c");
}
at::Tensor& FftC2ROut(const at::Tensor& self, at::IntArrayRef dim, int64_t normalization,
                      c10::SymInt last_dim_size, at::Tensor& out) {
  return CopyIntoOut(FftC2R(self, dim, normalization, std::move(last_dim_size)), out,
                     "aten::_fft_c2r");
}
at::Tensor& FftC2COut(const at::Tensor& self, c10::SymIntArrayRef dim, int64_t normalization,
                      bool forward, at::Tensor& out) {
  return CopyIntoOut(FftC2C(self, dim, normalization, forward), out, "aten::_fft_c2c");
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // Complex in or out: no dtype guard (Note [dtypes the kernels do not take]);
  // each sends what it does not take to the fallback itself.
  m.impl("angle", TORCH_FN(Angle));
  m.impl("_conj_physical", TORCH_FN(ConjPhysical));
  m.impl("conj_physical_", TORCH_FN(ConjPhysical_));
  m.impl("polar", TORCH_FN(FromParts<true>));
  m.impl("polar.out", TORCH_FN(FromPartsOut<true>));
  m.impl("complex", TORCH_FN(FromParts<false>));
  m.impl("complex.out", TORCH_FN(FromPartsOut<false>));
  m.impl("_fft_r2c", TORCH_FN(FftR2C));
  m.impl("_fft_r2c.out", TORCH_FN(FftR2COut));
  m.impl("_fft_c2r", TORCH_FN(FftC2R));
  m.impl("_fft_c2r.out", TORCH_FN(FftC2ROut));
  m.impl("_fft_c2c", TORCH_FN(FftC2C));
  m.impl("_fft_c2c.out", TORCH_FN(FftC2COut));
}

}  // namespace trn::bridge::ops
