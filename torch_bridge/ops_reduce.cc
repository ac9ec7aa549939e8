// Reduction aten kernels of the trn device: sum, mean, amax, amin, argmax,
// argmin, all, any, max/min (full, max.dim and min.dim), var/std (alone or
// with the mean), linalg_vector_norm, over dims with keepdim, dtype=
// honoured; _weight_norm_interface (a norm over all dims but one); and as
// compositions of those: aminmax, nansum, count_nonzero, trace, cdist.
#include <ATen/WrapDimUtils.h>
#include <ATen/core/Formatting.h>
#include <ATen/core/Tensor.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/_euclidean_dist.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/linalg_vector_norm.h>
#include <ATen/ops/where.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <tuple>

#include "torch_bridge/fallback.h"
#include "torch_bridge/ops_complex.h"
#include "torch_bridge/ops_util.h"

namespace trn::bridge::ops {
namespace {

using kernels::ReduceOp;

// Bit d set = dim d reduced; no dims (or an empty list) = all dims, as torch.
uint32_t ReduceMask(const at::Tensor& self, at::OptionalIntArrayRef dims) {
  const int64_t nd = self.dim();
  TORCH_CHECK(nd <= kMaxDims, "trn reductions support at most ", kMaxDims, " dims, got ", nd);
  if (!dims.has_value() || dims->empty()) return nd == 0 ? 0u : (1u << nd) - 1;
  uint32_t mask = 0;
  for (int64_t d : *dims) {
    const int64_t w = at::maybe_wrap_dim(d, nd);
    if (nd == 0) continue;
    TORCH_CHECK(!(mask & (1u << w)), "dim ", w, " appears multiple times in the list of dims");
    mask |= 1u << w;
  }
  return mask;
}

at::DimVector ReducedSizes(const at::Tensor& self, uint32_t mask, bool keepdim) {
  at::DimVector sizes;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (!(mask & (1u << d))) {
      sizes.push_back(self.size(d));
    } else if (keepdim) {
      sizes.push_back(1);
    }
  }
  return sizes;
}

bool ReducesEmpty(const at::Tensor& self, uint32_t mask) {
  for (int64_t d = 0; d < self.dim(); ++d) {
    if ((mask & (1u << d)) && self.size(d) == 0) return true;
  }
  return false;
}

const char* OpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "aten::sum";
    case ReduceOp::kMean: return "aten::mean";
    case ReduceOp::kAmax: return "aten::amax";
    case ReduceOp::kAmin: return "aten::amin";
    case ReduceOp::kArgmax: return "aten::argmax";
    case ReduceOp::kArgmin: return "aten::argmin";
    case ReduceOp::kAll: return "aten::all";
    case ReduceOp::kAny: return "aten::any";
    case ReduceOp::kProd: return "aten::prod";
  }
  return "aten::?";
}

// Enqueues res <- op(self) over `mask`; res has the reduced sizes (keepdim or
// not) and dtype `result`. Casts the input / the output on the device when the
// kernel's dtype contract differs from what torch asked for.
void ReduceInto(ReduceOp op, const char* name, const at::Tensor& self, uint32_t mask,
                const at::Tensor& res, at::ScalarType result) {
  const int device = CommonDevice(name, {&self, &res});
  at::ScalarType in = self.scalar_type();
  at::ScalarType kernel_out = in;
  if (op == ReduceOp::kSum || op == ReduceOp::kMean || op == ReduceOp::kProd) {
    // Kernel: floating in -> same dtype out; int/bool in -> int64 out (sum, prod).
    if (at::isFloatingType(result) || !at::isIntegralType(in, /*includeBool=*/true)) in = result;
    kernel_out = at::isFloatingType(in) ? in : at::kLong;
  } else if (op == ReduceOp::kArgmax || op == ReduceOp::kArgmin) {
    kernel_out = at::kLong;
  } else if (op == ReduceOp::kAll || op == ReduceOp::kAny) {
    kernel_out = at::kBool;
  }
  if (op == ReduceOp::kAll || op == ReduceOp::kAny) {
    // Logical reductions do no arithmetic: no float64 note, only the dtype check.
    (void)Ref(self, name);
  } else {
    ComputeDType(in, name);
  }
  if (res.numel() == 0) return;
  if (ReducesEmpty(self, mask)) {
    TORCH_CHECK(op == ReduceOp::kSum || op == ReduceOp::kMean || op == ReduceOp::kAll ||
                    op == ReduceOp::kAny || op == ReduceOp::kProd,
                name, "(): expected a reduction dim of non-zero size, got input of shape ",
                self.sizes());
    const double v = op == ReduceOp::kMean                            ? std::numeric_limits<double>::quiet_NaN()
                     : op == ReduceOp::kAll || op == ReduceOp::kProd ? 1.0
                                                                      : 0.0;
    const TensorRef o = Ref(res, name);
    Launch(device, kernels::DescribeFill(o, name), [=] { return kernels::Fill(o, v); });
    return;
  }
  const at::Tensor src = CastTo(self, in, name);
  const at::Tensor dst =
      res.scalar_type() == kernel_out ? res : Empty(res.sizes(), kernel_out, device);
  const TensorRef o = KeepdimRef(dst, self.dim(), mask, name);
  const TensorRef i = Ref(src, name);
  Launch(device, kernels::DescribeReduce(op, o, i, name),
         [=] { return kernels::Reduce(op, o, i, mask); });
  if (!dst.is_same(res)) LaunchCopy(device, res, dst, name);
}

at::ScalarType SumDType(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  if (dtype.has_value()) return *dtype;
  return at::isIntegralType(self.scalar_type(), /*includeBool=*/true) ? at::kLong
                                                                        : self.scalar_type();
}

at::ScalarType MeanDType(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  const at::ScalarType t = dtype.value_or(self.scalar_type());
  TORCH_CHECK(at::isFloatingType(t),
              "mean(): could not infer output dtype. ",
              dtype.has_value() ? "Optional" : "Input",
              " dtype must be either a floating point or complex dtype. Got: ", t);
  return t;
}

// A new result of `sizes` on self's device, or out= resized (out == nullptr: new).
at::Tensor ResultOf(at::Tensor* out, const at::Tensor& self, at::IntArrayRef sizes,
                    at::ScalarType result, const char* name) {
  if (out == nullptr) return Empty(sizes, result, DeviceIndex(self));
  PrepareOut(*out, sizes, result, name);
  return *out;
}

// Functional / out= driver of the dim reductions.
at::Tensor ReduceDims(ReduceOp op, const at::Tensor& self, at::OptionalIntArrayRef dims,
                      bool keepdim, at::ScalarType result, at::Tensor* out) {
  const char* name = OpName(op);
  const uint32_t mask = ReduceMask(self, dims);
  const at::Tensor res = ResultOf(out, self, ReducedSizes(self, mask, keepdim), result, name);
  ReduceInto(op, name, self, mask, res, result);
  return res;
}

at::Tensor SumDim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                  std::optional<at::ScalarType> dtype) {
  return ReduceDims(ReduceOp::kSum, self, dim, keepdim, SumDType(self, dtype), nullptr);
}
at::Tensor& SumDimOut(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                      std::optional<at::ScalarType> dtype, at::Tensor& out) {
  ReduceDims(ReduceOp::kSum, self, dim, keepdim, SumDType(self, dtype), &out);
  return out;
}
at::Tensor Sum(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  return ReduceDims(ReduceOp::kSum, self, std::nullopt, false, SumDType(self, dtype), nullptr);
}
// prod: the dtypes of sum (int/bool -> int64); Qwen2/3-VL's grid_thw.prod(-1).
at::Tensor Prod(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  return ReduceDims(ReduceOp::kProd, self, std::nullopt, false, SumDType(self, dtype), nullptr);
}
at::Tensor& ProdOut(const at::Tensor& self, std::optional<at::ScalarType> dtype, at::Tensor& out) {
  ReduceDims(ReduceOp::kProd, self, std::nullopt, false, SumDType(self, dtype), &out);
  return out;
}
at::Tensor ProdDim(const at::Tensor& self, int64_t dim, bool keepdim,
                   std::optional<at::ScalarType> dtype) {
  return ReduceDims(ReduceOp::kProd, self, at::IntArrayRef{dim}, keepdim, SumDType(self, dtype),
                    nullptr);
}
at::Tensor& ProdDimOut(const at::Tensor& self, int64_t dim, bool keepdim,
                       std::optional<at::ScalarType> dtype, at::Tensor& out) {
  ReduceDims(ReduceOp::kProd, self, at::IntArrayRef{dim}, keepdim, SumDType(self, dtype), &out);
  return out;
}
at::Tensor MeanDim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                   std::optional<at::ScalarType> dtype) {
  return ReduceDims(ReduceOp::kMean, self, dim, keepdim, MeanDType(self, dtype), nullptr);
}
at::Tensor& MeanDimOut(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                       std::optional<at::ScalarType> dtype, at::Tensor& out) {
  ReduceDims(ReduceOp::kMean, self, dim, keepdim, MeanDType(self, dtype), &out);
  return out;
}
at::Tensor Mean(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  return ReduceDims(ReduceOp::kMean, self, std::nullopt, false, MeanDType(self, dtype),
                    nullptr);
}
at::Tensor Amax(const at::Tensor& self, at::IntArrayRef dim, bool keepdim) {
  return ReduceDims(ReduceOp::kAmax, self, dim, keepdim, self.scalar_type(), nullptr);
}
at::Tensor& AmaxOut(const at::Tensor& self, at::IntArrayRef dim, bool keepdim, at::Tensor& out) {
  ReduceDims(ReduceOp::kAmax, self, dim, keepdim, self.scalar_type(), &out);
  return out;
}
at::Tensor Amin(const at::Tensor& self, at::IntArrayRef dim, bool keepdim) {
  return ReduceDims(ReduceOp::kAmin, self, dim, keepdim, self.scalar_type(), nullptr);
}
at::Tensor& AminOut(const at::Tensor& self, at::IntArrayRef dim, bool keepdim, at::Tensor& out) {
  ReduceDims(ReduceOp::kAmin, self, dim, keepdim, self.scalar_type(), &out);
  return out;
}
// max() / min() without dim: a full amax / amin (0-dim result).
at::Tensor MaxAll(const at::Tensor& self) {
  TORCH_CHECK(self.numel() > 0,
              "max(): Expected reduction dim to be specified for input.numel() == 0. "
              "Specify the reduction dim with the 'dim' argument.");
  return ReduceDims(ReduceOp::kAmax, self, std::nullopt, false, self.scalar_type(), nullptr);
}
at::Tensor MinAll(const at::Tensor& self) {
  TORCH_CHECK(self.numel() > 0,
              "min(): Expected reduction dim to be specified for input.numel() == 0. "
              "Specify the reduction dim with the 'dim' argument.");
  return ReduceDims(ReduceOp::kAmin, self, std::nullopt, false, self.scalar_type(), nullptr);
}

// argmax / argmin over one dim, or over the flattened tensor when dim is absent.
at::Tensor& ArgInto(ReduceOp op, const at::Tensor& self, std::optional<int64_t> dim,
                    bool keepdim, at::Tensor& res) {
  const char* name = OpName(op);
  const char* fn = op == ReduceOp::kArgmax ? "argmax" : "argmin";
  const int device = CommonDevice(name, {&self, &res});
  ComputeDType(self.scalar_type(), name);
  TORCH_CHECK(self.numel() > 0, fn, "(): Expected reduction dim ",
              dim.has_value() ? std::to_string(*dim) : std::string("to be specified"),
              " to have non-zero size.");
  if (self.dim() == 0) {  // the only element is the maximum
    const TensorRef o = Ref(res, name);
    Launch(device, kernels::DescribeFill(o, name), [=] { return kernels::Fill(o, 0.0); });
    return res;
  }
  if (dim.has_value()) {
    const uint32_t mask = 1u << at::maybe_wrap_dim(*dim, self.dim());
    TORCH_CHECK(!ReducesEmpty(self, mask), fn, "(): Expected reduction dim ", *dim,
                " to have non-zero size.");
    if (res.numel() == 0) return res;
    const TensorRef o = KeepdimRef(res, self.dim(), mask, name);
    const TensorRef i = Ref(self, name);
    Launch(device, kernels::DescribeReduce(op, o, i, name),
           [=] { return kernels::Reduce(op, o, i, mask); });
    return res;
  }
  // Flat argmax: the kernel reduces a 1-D view, so materialise a contiguous input.
  at::Tensor src = self;
  if (!self.is_contiguous()) {
    src = Empty(self.sizes(), self.scalar_type(), device);
    LaunchCopy(device, src, self, name);
  }
  const TensorRef i = FlatRef(src, name);
  TensorRef o = Ref(res, name);
  o.ndim = 1;
  o.sizes[0] = 1;
  o.strides[0] = 1;
  Launch(device, kernels::DescribeReduce(op, o, i, name),
         [=] { return kernels::Reduce(op, o, i, 1u); });
  return res;
}

at::DimVector ArgmaxSizes(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  if (dim.has_value()) {
    const uint32_t mask = self.dim() == 0 ? 0u : 1u << at::maybe_wrap_dim(*dim, self.dim());
    return ReducedSizes(self, mask, keepdim);
  }
  return keepdim ? at::DimVector(self.dim(), 1) : at::DimVector();
}

template <ReduceOp kOp>
at::Tensor ArgFn(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  at::Tensor res = Empty(ArgmaxSizes(self, dim, keepdim), at::kLong, DeviceIndex(self));
  return ArgInto(kOp, self, dim, keepdim, res);
}
template <ReduceOp kOp>
at::Tensor& ArgOut(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                   at::Tensor& out) {
  PrepareOut(out, ArgmaxSizes(self, dim, keepdim), at::kLong, OpName(kOp));
  return ArgInto(kOp, self, dim, keepdim, out);
}

// max.dim / min.dim: values (amax / amin) and indices (argmax / argmin), two launches.
template <bool kMax>
std::tuple<at::Tensor, at::Tensor> ExtremumDim(const at::Tensor& self, int64_t dim,
                                               bool keepdim) {
  TORCH_CHECK(self.dim() == 0 || self.size(at::maybe_wrap_dim(dim, self.dim())) > 0,
              kMax ? "max" : "min", "(): Expected reduction dim ", dim,
              " to have non-zero size.");
  at::Tensor values = ReduceDims(kMax ? ReduceOp::kAmax : ReduceOp::kAmin, self,
                                 at::IntArrayRef(dim), keepdim, self.scalar_type(), nullptr);
  at::Tensor indices = Empty(values.sizes(), at::kLong, DeviceIndex(self));
  ArgInto(kMax ? ReduceOp::kArgmax : ReduceOp::kArgmin, self, dim, keepdim, indices);
  return {values, indices};
}

// all / any: bool result whatever the input dtype (uint8 input is not a trn dtype).
template <ReduceOp kOp>
at::Tensor LogicalDims(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim) {
  return ReduceDims(kOp, self, dim, keepdim, at::kBool, nullptr);
}
template <ReduceOp kOp>
at::Tensor LogicalDim(const at::Tensor& self, int64_t dim, bool keepdim) {
  return ReduceDims(kOp, self, at::IntArrayRef(dim), keepdim, at::kBool, nullptr);
}
template <ReduceOp kOp>
at::Tensor LogicalAll(const at::Tensor& self) {
  return ReduceDims(kOp, self, std::nullopt, false, at::kBool, nullptr);
}
template <ReduceOp kOp>
at::Tensor& LogicalDimsOut(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                           at::Tensor& out) {
  ReduceDims(kOp, self, dim, keepdim, at::kBool, &out);
  return out;
}
template <ReduceOp kOp>
at::Tensor& LogicalDimOut(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& out) {
  ReduceDims(kOp, self, at::IntArrayRef(dim), keepdim, at::kBool, &out);
  return out;
}
template <ReduceOp kOp>
at::Tensor& LogicalAllOut(const at::Tensor& self, at::Tensor& out) {
  ReduceDims(kOp, self, std::nullopt, false, at::kBool, &out);
  return out;
}

// ---- var / std, alone or with the mean: one VarMean launch ------------------------
// The result of var/std (and mean): new tensors, or the out= ones resized;
// torch's dtype error and degrees-of-freedom warning. `name` is "aten::<fn>".
// Returns {var, mean}; mean is undefined unless with_mean.
std::tuple<at::Tensor, at::Tensor> Moments(const char* name, bool take_sqrt, bool with_mean,
                                           const at::Tensor& self, at::OptionalIntArrayRef dim,
                                           const std::optional<at::Scalar>& correction,
                                           bool keepdim, at::Tensor* out_var,
                                           at::Tensor* out_mean) {
  const char* fn = name + 6;  // past "aten::"
  TORCH_CHECK(at::isFloatingType(self.scalar_type()) || at::isComplexType(self.scalar_type()),
              with_mean ? fn : "std and var", " only support floating point and complex dtypes");
  const uint32_t mask = ReduceMask(self, dim);
  const at::DimVector sizes = ReducedSizes(self, mask, keepdim);
  const at::ScalarType dtype = self.scalar_type();
  at::Tensor var = ResultOf(out_var, self, sizes, dtype, name);
  at::Tensor mean = with_mean ? ResultOf(out_mean, self, sizes, dtype, name) : at::Tensor();
  const int device = CommonDevice(name, {&self, &var, &mean});
  ComputeDType(dtype, name);
  const double c = correction.has_value() ? correction->toDouble() : 1.0;
  // torch's count: input numel per output element (0 when nothing is output)
  const int64_t count = var.numel() == 0 ? 0 : self.numel() / var.numel();
  if (static_cast<double>(count) - c <= 0) {
    TORCH_WARN(fn, "(): degrees of freedom is <= 0. Correction should be strictly less than the "
                   "reduction factor (input numel divided by output numel).");
  }
  if (var.numel() == 0) return {var, mean};
  const TensorRef o = KeepdimRef(var, self.dim(), mask, name);
  const TensorRef m = with_mean ? KeepdimRef(mean, self.dim(), mask, name) : NoRef();
  const TensorRef i = Ref(self, name);
  Launch(device, kernels::DescribeVarMean(o, m, i, take_sqrt, name),
         [=] { return kernels::VarMean(o, m, i, mask, c, take_sqrt); });
  return {var, mean};
}

using OptScalar = std::optional<at::Scalar>;
template <bool kStd>
at::Tensor VarStd(const at::Tensor& self, at::OptionalIntArrayRef dim, const OptScalar& c,
                  bool keepdim) {
  return std::get<0>(Moments(kStd ? "aten::std" : "aten::var", kStd, false, self, dim, c,
                             keepdim, nullptr, nullptr));
}
template <bool kStd>
at::Tensor& VarStdOut(const at::Tensor& self, at::OptionalIntArrayRef dim, const OptScalar& c,
                      bool keepdim, at::Tensor& out) {
  Moments(kStd ? "aten::std" : "aten::var", kStd, false, self, dim, c, keepdim, &out, nullptr);
  return out;
}
template <bool kStd>
std::tuple<at::Tensor, at::Tensor> VarStdMean(const at::Tensor& self, at::OptionalIntArrayRef dim,
                                              const OptScalar& c, bool keepdim) {
  return Moments(kStd ? "aten::std_mean" : "aten::var_mean", kStd, true, self, dim, c, keepdim,
                 nullptr, nullptr);
}
template <bool kStd>
std::tuple<at::Tensor&, at::Tensor&> VarStdMeanOut(const at::Tensor& self,
                                                   at::OptionalIntArrayRef dim, const OptScalar& c,
                                                   bool keepdim, at::Tensor& out0,
                                                   at::Tensor& out1) {
  Moments(kStd ? "aten::std_mean" : "aten::var_mean", kStd, true, self, dim, c, keepdim, &out0,
          &out1);
  return {out0, out1};
}

// ---- linalg_vector_norm -----------------------------------------------------------
// torch's argument checks (messages included); out= must have the result dtype.
at::Tensor VectorNormImpl(const at::Tensor& self, const at::Scalar& ord,
                          at::OptionalIntArrayRef dim, bool keepdim,
                          std::optional<at::ScalarType> dtype, at::Tensor* out) {
  const char* name = "aten::linalg_vector_norm";
  const at::ScalarType in = self.scalar_type();
  TORCH_CHECK(at::isFloatingType(in) || at::isComplexType(in),
              "linalg.vector_norm: Expected a floating point or complex tensor as input. Got ", in);
  if (dtype.has_value()) {
    TORCH_CHECK(at::isFloatingType(*dtype) || at::isComplexType(*dtype),
                "linalg.vector_norm: dtype should be floating point or complex, but got ", *dtype);
    TORCH_CHECK(at::promoteTypes(in, *dtype) == *dtype,
                "linalg.vector_norm: the dtype of the input (", in,
                ") should be convertible without narrowing to the specified dtype (", *dtype, ")");
  }
  const double p = ord.toDouble();
  if (self.numel() == 0 && (p < 0 || p == std::numeric_limits<double>::infinity())) {
    TORCH_CHECK(dim.has_value() && !dim->empty(), "linalg.vector_norm cannot compute the ", ord,
                " norm on an empty tensor because the operation does not have an identity");
    for (int64_t d : *dim) {
      TORCH_CHECK(self.size(d) != 0, "linalg.vector_norm cannot compute the ", ord,
                  " norm on the dimension ", d,
                  "because this dimension is empty and the operation does not have an identity");
    }
  }
  const at::ScalarType result = dtype.value_or(in);
  TORCH_CHECK(out == nullptr || out->scalar_type() == result, "Expected out tensor to have dtype ",
              c10::scalarTypeToTypeMeta(result), ", but got ", out->dtype(), " instead");
  const uint32_t mask = ReduceMask(self, dim);
  const at::Tensor res = ResultOf(out, self, ReducedSizes(self, mask, keepdim), result, name);
  const int device = CommonDevice(name, {&self, &res});
  ComputeDType(in, name);
  ComputeDType(result, name);
  if (res.numel() == 0) return res;
  const TensorRef o = KeepdimRef(res, self.dim(), mask, name);
  const TensorRef i = Ref(self, name);
  Launch(device, kernels::DescribeVectorNorm(o, i, p, name),
         [=] { return kernels::VectorNorm(o, i, mask, p); });
  return res;
}
at::Tensor VectorNorm(const at::Tensor& self, const at::Scalar& ord, at::OptionalIntArrayRef dim,
                      bool keepdim, std::optional<at::ScalarType> dtype) {
  return VectorNormImpl(self, ord, dim, keepdim, dtype, nullptr);
}
at::Tensor& VectorNormOut(const at::Tensor& self, const at::Scalar& ord,
                          at::OptionalIntArrayRef dim, bool keepdim,
                          std::optional<at::ScalarType> dtype, at::Tensor& out) {
  VectorNormImpl(self, ord, dim, keepdim, dtype, &out);
  return out;
}

// aten::norm (the legacy op that C++ callers such as pairwise_distance and
// cdist reach; Python's torch.norm already calls linalg_vector_norm): the same
// kernel, p absent meaning 2 and an empty dim list every dim, as torch's.
at::Tensor NormDim(const at::Tensor& self, const std::optional<at::Scalar>& p, at::IntArrayRef dim,
                   bool keepdim) {
  return VectorNormImpl(self, p.value_or(2), dim, keepdim, std::nullopt, nullptr);
}
at::Tensor NormDimDtype(const at::Tensor& self, const std::optional<at::Scalar>& p,
                        at::IntArrayRef dim, bool keepdim, at::ScalarType dtype) {
  return VectorNormImpl(self, p.value_or(2), dim, keepdim, dtype, nullptr);
}
at::Tensor& NormDimOut(const at::Tensor& self, const std::optional<at::Scalar>& p,
                       at::IntArrayRef dim, bool keepdim, at::Tensor& out) {
  VectorNormImpl(self, p.value_or(2), dim, keepdim, std::nullopt, &out);
  return out;
}
at::Tensor NormAll(const at::Tensor& self, const at::Scalar& p) {
  return VectorNormImpl(self, p, std::nullopt, false, std::nullopt, nullptr);
}

// ---- _weight_norm_interface ----------------------------------------------------------
// A contiguous tensor of v.size(dim) elements seen in v's rank, size 1 on
// every other dim (WeightNorm's layout for g and norm).
TensorRef AlongDim(const at::Tensor& t, int64_t ndim, int64_t dim, const char* op) {
  TensorRef r = FlatRef(t, op);
  const int64_t n = r.sizes[0];
  r.ndim = static_cast<int>(ndim);
  for (int d = 0; d < r.ndim; ++d) {
    r.sizes[d] = d == dim ? n : 1;
    r.strides[d] = d == dim ? 1 : 0;
  }
  return r;
}

// (w, norm) = (v * g / ||v||, ||v||) with the norm over every dim but `dim`
// (0 or the last, as torch's CPU kernel); norm has g's sizes, float32 when g
// is bfloat16/float16 (torch).
std::tuple<at::Tensor, at::Tensor> WeightNormInterface(const at::Tensor& v, const at::Tensor& g,
                                                       int64_t dim) {
  const char* name = "aten::_weight_norm_interface";
  const int device = CommonDevice(name, {&v, &g});
  TORCH_CHECK(v.dim() > 0 && (dim == 0 || dim == v.dim() - 1), name,
              ": the fused kernel normalizes over every dim but the first or the last (dim 0 or ",
              v.dim() - 1, "), got dim ", dim, " for v of shape ", v.sizes());
  const at::ScalarType dtype = v.scalar_type();
  TORCH_CHECK(g.scalar_type() == dtype, "expected scalar type ", dtype, " but found ",
              g.scalar_type());
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(dtype), name, ": not implemented for '",
                              c10::toString(dtype), "'");
  TORCH_CHECK(g.numel() == v.size(dim), name, ": expected g of v.size(", dim, ") = ",
              v.size(dim), " elements, got g of shape ", g.sizes());
  ComputeDType(dtype, name);
  const at::ScalarType norm_dtype = at::isReducedFloatingType(dtype) ? at::kFloat : dtype;
  at::Tensor w = Empty(v.sizes(), dtype, device);
  at::Tensor norm = Empty(g.sizes(), norm_dtype, device);
  at::Tensor gc = g;
  if (!g.is_contiguous()) {
    gc = Empty(g.sizes(), dtype, device);
    LaunchCopy(device, gc, g, name);
  }
  if (norm.numel() == 0) return {w, norm};
  const TensorRef wr = Ref(w, name), vr = Ref(v, name);
  const TensorRef gr = AlongDim(gc, v.dim(), dim, name);
  const TensorRef nr = AlongDim(norm, v.dim(), dim, name);
  const int d = static_cast<int>(dim);
  Launch(device, kernels::DescribeWeightNorm(wr, vr, name),
         [=] { return kernels::WeightNorm(wr, nr, vr, gr, d); });
  return {w, norm};
}

// ---- compositions of the reductions above -----------------------------------------
std::tuple<at::Tensor, at::Tensor> Aminmax(const at::Tensor& self, std::optional<int64_t> dim,
                                           bool keepdim) {
  TORCH_CHECK(dim.has_value() || self.numel() > 0, "aminmax(): cannot compute aminmax over an "
              "empty dimension as the operation has no identity.");
  if (dim.has_value()) {
    const int64_t d = at::maybe_wrap_dim(*dim, self.dim());
    TORCH_CHECK_INDEX(self.dim() == 0 || self.size(d) != 0, "aminmax: Expected reduction dim ",
                      *dim, " to have non-zero size.");
    return {Amin(self, {*dim}, keepdim), Amax(self, {*dim}, keepdim)};
  }
  if (self.dim() == 0) return {self.clone(), self.clone()};
  return {Amin(self, {}, keepdim), Amax(self, {}, keepdim)};
}
std::tuple<at::Tensor&, at::Tensor&> AminmaxOut(const at::Tensor& self,
                                                std::optional<int64_t> dim, bool keepdim,
                                                at::Tensor& min, at::Tensor& max) {
  auto [lo, hi] = Aminmax(self, dim, keepdim);
  CopyIntoOut(lo, min, "aten::aminmax");
  CopyIntoOut(hi, max, "aten::aminmax");
  return {min, max};
}

// nansum: NaNs count as 0 (integers have none).
at::Tensor Nansum(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                  std::optional<at::ScalarType> dtype) {
  const at::Tensor x =
      at::isFloatingType(self.scalar_type()) ? at::where(at::isnan(self), 0, self) : self;
  return SumDim(x, dim, keepdim, dtype);
}
at::Tensor& NansumOut(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                      std::optional<at::ScalarType> dtype, at::Tensor& out) {
  return CopyIntoOut(Nansum(self, dim, keepdim, dtype), out, "aten::nansum");
}

at::Tensor CountNonzero(const at::Tensor& self, at::IntArrayRef dim) {
  return SumDim(self != 0, dim, false, at::kLong);
}
at::Tensor& CountNonzeroOut(const at::Tensor& self, at::IntArrayRef dim, at::Tensor& out) {
  return CopyIntoOut(CountNonzero(self, dim), out, "aten::count_nonzero");
}

at::Tensor Trace(const at::Tensor& self) {
  TORCH_CHECK(self.dim() == 2, "trace: expected a matrix, but got tensor with dim ", self.dim());
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != at::kBool,
                              "\"trace\" not implemented for 'Bool'");
  return SumDim(self.diagonal(), std::nullopt, false, std::nullopt);
}
at::Tensor& TraceOut(const at::Tensor& self, at::Tensor& out) {
  return CopyIntoOut(Trace(self), out, "aten::trace");
}

// _cdist_forward: ||x1[..., i, :] - x2[..., j, :]||_p. As CPU, p = 2 over more
// than 25 rows (or compute_mode 1) takes the matmul form (_euclidean_dist);
// otherwise the norm of the broadcast differences.
at::Tensor CdistForward(const at::Tensor& x1, const at::Tensor& x2, double p,
                        std::optional<int64_t> compute_mode) {
  CommonDevice("aten::_cdist_forward", {&x1, &x2});
  TORCH_CHECK(x1.dim() >= 2, "cdist only supports at least 2D tensors, X1 got: ", x1.dim(), "D");
  TORCH_CHECK(x2.dim() >= 2, "cdist only supports at least 2D tensors, X2 got: ", x2.dim(), "D");
  TORCH_CHECK(at::isFloatingType(x1.scalar_type()),
              "cdist only supports floating-point dtypes, X1 got: ", x1.scalar_type());
  TORCH_CHECK(at::isFloatingType(x2.scalar_type()),
              "cdist only supports floating-point dtypes, X2 got: ", x2.scalar_type());
  TORCH_CHECK(x1.size(-1) == x2.size(-1), "X1 and X2 must have the same number of columns. X1: ",
              x1.size(-1), " X2: ", x2.size(-1));
  TORCH_CHECK(x1.scalar_type() == x2.scalar_type(), "expected scalar type ", x1.scalar_type(),
              " but found ", x2.scalar_type());
  TORCH_CHECK(p >= 0, "cdist only supports non-negative p values");
  const int64_t mode = compute_mode.value_or(0);
  TORCH_CHECK(mode >= 0 && mode <= 2, "possible modes: 0, 1, 2, but was: ", mode);
  if (p == 2 && (mode == 1 || (mode == 0 && (x1.size(-2) > 25 || x2.size(-2) > 25)))) {
    return at::_euclidean_dist(x1, x2);
  }
  // The differences of a block of x1's rows at a time: at most ~16M elements
  // live, where all of them would be P * R * M.
  const int64_t rows = x1.size(-2), per_row = std::max<int64_t>(x2.size(-2) * x1.size(-1), 1);
  const int64_t block = std::max<int64_t>(1, (int64_t{1} << 24) / per_row);
  if (block >= rows) {
    return at::linalg_vector_norm(x1.unsqueeze(-2) - x2.unsqueeze(-3), p, {-1}, false,
                                  std::nullopt);
  }
  std::vector<at::Tensor> parts;
  for (int64_t r = 0; r < rows; r += block) {
    const at::Tensor a = x1.narrow(-2, r, std::min(block, rows - r));
    parts.push_back(at::linalg_vector_norm(a.unsqueeze(-2) - x2.unsqueeze(-3), p, {-1}, false,
                                           std::nullopt));
  }
  return at::cat(parts, -2);
}
at::Tensor& CdistForwardOut(const at::Tensor& x1, const at::Tensor& x2, double p,
                            std::optional<int64_t> compute_mode, at::Tensor& out) {
  return CopyIntoOut(CdistForward(x1, x2, p, compute_mode), out, "aten::_cdist_forward");
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, lib) {
  NativeKernels m(lib);  // Note [dtypes the kernels do not take]
  m.impl_complex("sum", TORCH_FN(Sum), TORCH_FN(ComplexSum));
  m.impl("prod", TORCH_FN(Prod));
  m.impl("prod.out", TORCH_FN(ProdOut));
  m.impl("prod.dim_int", TORCH_FN(ProdDim));
  m.impl("prod.int_out", TORCH_FN(ProdDimOut));
  m.impl_complex("sum.dim_IntList", TORCH_FN(SumDim), TORCH_FN(ComplexSumDim));
  m.impl("sum.IntList_out", TORCH_FN(SumDimOut));
  m.impl_complex("mean", TORCH_FN(Mean), TORCH_FN(ComplexMean));
  m.impl_complex("mean.dim", TORCH_FN(MeanDim), TORCH_FN(ComplexMeanDim));
  m.impl("mean.out", TORCH_FN(MeanDimOut));
  m.impl("amax", TORCH_FN(Amax));
  m.impl("amax.out", TORCH_FN(AmaxOut));
  m.impl("amin", TORCH_FN(Amin));
  m.impl("amin.out", TORCH_FN(AminOut));
  m.impl("argmax", TORCH_FN(ArgFn<ReduceOp::kArgmax>));
  m.impl("argmax.out", TORCH_FN(ArgOut<ReduceOp::kArgmax>));
  m.impl("argmin", TORCH_FN(ArgFn<ReduceOp::kArgmin>));
  m.impl("argmin.out", TORCH_FN(ArgOut<ReduceOp::kArgmin>));
  m.impl("max", TORCH_FN(MaxAll));
  m.impl("min", TORCH_FN(MinAll));
  m.impl("max.dim", TORCH_FN(ExtremumDim<true>));
  m.impl("min.dim", TORCH_FN(ExtremumDim<false>));
  m.impl("all", TORCH_FN(LogicalAll<ReduceOp::kAll>));
  m.impl("all.dim", TORCH_FN(LogicalDim<ReduceOp::kAll>));
  m.impl("all.dims", TORCH_FN(LogicalDims<ReduceOp::kAll>));
  m.impl("all.out", TORCH_FN(LogicalDimOut<ReduceOp::kAll>));
  m.impl("all.dims_out", TORCH_FN(LogicalDimsOut<ReduceOp::kAll>));
  m.impl("all.all_out", TORCH_FN(LogicalAllOut<ReduceOp::kAll>));
  m.impl("any", TORCH_FN(LogicalAll<ReduceOp::kAny>));
  m.impl("any.dim", TORCH_FN(LogicalDim<ReduceOp::kAny>));
  m.impl("any.dims", TORCH_FN(LogicalDims<ReduceOp::kAny>));
  m.impl("any.out", TORCH_FN(LogicalDimOut<ReduceOp::kAny>));
  m.impl("any.dims_out", TORCH_FN(LogicalDimsOut<ReduceOp::kAny>));
  m.impl("any.all_out", TORCH_FN(LogicalAllOut<ReduceOp::kAny>));
  m.impl("var.correction", TORCH_FN(VarStd<false>));
  m.impl("var.correction_out", TORCH_FN(VarStdOut<false>));
  m.impl("std.correction", TORCH_FN(VarStd<true>));
  m.impl("std.correction_out", TORCH_FN(VarStdOut<true>));
  m.impl("var_mean.correction", TORCH_FN(VarStdMean<false>));
  m.impl("var_mean.correction_out", TORCH_FN(VarStdMeanOut<false>));
  m.impl("std_mean.correction", TORCH_FN(VarStdMean<true>));
  m.impl("std_mean.correction_out", TORCH_FN(VarStdMeanOut<true>));
  m.impl("linalg_vector_norm", TORCH_FN(VectorNorm));
  m.impl("linalg_vector_norm.out", TORCH_FN(VectorNormOut));
  m.impl("norm.ScalarOpt_dim", TORCH_FN(NormDim));
  m.impl("norm.ScalarOpt_dim_dtype", TORCH_FN(NormDimDtype));
  m.impl("norm.out", TORCH_FN(NormDimOut));
  m.impl("norm.Scalar", TORCH_FN(NormAll));
  m.impl("_weight_norm_interface", TORCH_FN(WeightNormInterface));
  m.impl("aminmax", TORCH_FN(Aminmax));
  m.impl("aminmax.out", TORCH_FN(AminmaxOut));
  m.impl("nansum", TORCH_FN(Nansum));
  m.impl("nansum.out", TORCH_FN(NansumOut));
  m.impl("count_nonzero.dim_IntList", TORCH_FN(CountNonzero));
  m.impl("count_nonzero.dim_IntList_out", TORCH_FN(CountNonzeroOut));
  m.impl("trace", TORCH_FN(Trace));
  m.impl("trace.out", TORCH_FN(TraceOut));
  m.impl("_cdist_forward", TORCH_FN(CdistForward));
  m.impl("_cdist_forward.out", TORCH_FN(CdistForwardOut));
}

}  // namespace trn::bridge::ops
