// Complex64 kernels other files register or call (ops_complex.cc, Note
// [Complex kernels] in fallback.h).
#pragma once

#include <ATen/core/Tensor.h>

namespace trn::bridge::ops {

// The complex64 twins of add / sub / mul / div.Tensor and abs: a complex64
// result (complex128 and complex alpha go to the CPU fallback).
at::Tensor ComplexAdd(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha);
at::Tensor ComplexSub(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha);
at::Tensor ComplexMul(const at::Tensor& a, const at::Tensor& b);
at::Tensor ComplexDiv(const at::Tensor& a, const at::Tensor& b);
// In place: self complex64 (anything else, overlapping operands too: the fallback).
at::Tensor& ComplexAdd_(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha);
at::Tensor& ComplexSub_(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha);
at::Tensor& ComplexMul_(at::Tensor& self, const at::Tensor& other);
at::Tensor& ComplexDiv_(at::Tensor& self, const at::Tensor& other);
// sum / mean of complex64 (Note [Complex reductions]).
at::Tensor ComplexSum(const at::Tensor& self, std::optional<at::ScalarType> dtype);
at::Tensor ComplexSumDim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                         std::optional<at::ScalarType> dtype);
at::Tensor ComplexMean(const at::Tensor& self, std::optional<at::ScalarType> dtype);
at::Tensor ComplexMeanDim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                          std::optional<at::ScalarType> dtype);
at::Tensor ComplexAbs(const at::Tensor& self);
at::Tensor ComplexNeg(const at::Tensor& self);
at::Tensor ComplexExp(const at::Tensor& self);
at::Tensor ComplexLog(const at::Tensor& self);
at::Tensor ComplexSqrt(const at::Tensor& self);
at::Tensor& ComplexZero_(at::Tensor& self);
at::Tensor ComplexReciprocal(const at::Tensor& self);
// Data movement on the (re, im) pairs (view_as_real): padding with 0 (another
// value, or a complex one, and a roll without dims: the fallback).
at::Tensor ComplexConstantPadNd(const at::Tensor& self, c10::SymIntArrayRef pad,
                                const at::Scalar& value);
at::Tensor ComplexCat(const at::ITensorListRef& tensors, int64_t dim);
at::Tensor ComplexRoll(const at::Tensor& self, c10::SymIntArrayRef shifts, at::IntArrayRef dims);

// Whether t's pairs view (view_as_real: one more dim) fits the kernels' dims.
bool PairsViewFits(const at::Tensor& t);

// dst = src on one device: dst complex64, src complex64 or of a native real
// dtype (a cast: imaginary part 0), broadcast to dst; src's conj and negative
// bits resolved, bit-exact.
void CopyComplex(const at::Tensor& dst, const at::Tensor& src);

}  // namespace trn::bridge::ops
