// Reduction aten kernels of the trn device: sum, mean, amax, amin, argmax,
// argmin, all, any, max/min (full, max.dim and min.dim), over dims with
// keepdim, dtype= honoured.
#include <ATen/WrapDimUtils.h>
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include <limits>
#include <tuple>

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
  if (op == ReduceOp::kSum || op == ReduceOp::kMean) {
    // Kernel: floating in -> same dtype out; int/bool in -> int64 out (sum).
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
                    op == ReduceOp::kAny,
                name, "(): expected a reduction dim of non-zero size, got input of shape ",
                self.sizes());
    const double v = op == ReduceOp::kMean  ? std::numeric_limits<double>::quiet_NaN()
                     : op == ReduceOp::kAll ? 1.0
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

// Functional / out= driver of the dim reductions.
at::Tensor ReduceDims(ReduceOp op, const at::Tensor& self, at::OptionalIntArrayRef dims,
                      bool keepdim, at::ScalarType result, at::Tensor* out) {
  const char* name = OpName(op);
  const uint32_t mask = ReduceMask(self, dims);
  const at::DimVector sizes = ReducedSizes(self, mask, keepdim);
  at::Tensor res;
  if (out == nullptr) {
    res = Empty(sizes, result, DeviceIndex(self));
  } else {
    PrepareOut(*out, sizes, result, name);
    res = *out;
  }
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

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("sum", TORCH_FN(Sum));
  m.impl("sum.dim_IntList", TORCH_FN(SumDim));
  m.impl("sum.IntList_out", TORCH_FN(SumDimOut));
  m.impl("mean", TORCH_FN(Mean));
  m.impl("mean.dim", TORCH_FN(MeanDim));
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
}

}  // namespace trn::bridge::ops
