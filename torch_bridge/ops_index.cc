// Indexing and layout aten kernels of the trn device: arange, tril/triu,
// gather/scatter/scatter_add, advanced indexing (index.Tensor,
// _index_put_impl_, masked_select, masked_scatter_, take, nonzero),
// scatter_reduce, cumsum/cumprod/logcumsumexp/cummax/cummin, sort/topk,
// flip/roll, repeat_interleave's index, isin and histc. Data-dependent output shapes
// (nonzero, bool-mask indexing, repeat_interleave without output_size) read
// one count back from the device: a host sync, as on CUDA.
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/tril_indices.h>
#include <ATen/ops/triu_indices.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros_like.h>
#include <ATen/core/List.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/_local_scalar_dense.h>
#include <ATen/ops/nll_loss_forward_ops.h>
#include <ATen/ops/searchsorted_ops.h>
#include <torch/library.h>

#include <cmath>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "torch_bridge/fallback.h"
#include "torch_bridge/ops_complex.h"
#include "torch_bridge/ops_util.h"

namespace trn::bridge::ops {
namespace {

using kernels::IndexingKernel;

void LaunchIndexing(int device, IndexingKernel kernel, const TensorRef& out, const TensorRef* in,
                    const char* name, rt::Task task) {
  Launch(device, kernels::DescribeIndexing(kernel, out, in, name), std::move(task));
}

void CheckLongIndex(const at::Tensor& index, const char* name) {
  TORCH_CHECK(index.scalar_type() == at::kLong, name, "(): Expected dtype int64 for index, got ",
              index.scalar_type());
}

// ---- arange ----------------------------------------------------------------------
at::Tensor& ArangeOut(const at::Scalar& start, const at::Scalar& end, const at::Scalar& step,
                      at::Tensor& out) {
  const char* name = "aten::arange";
  const at::ScalarType dtype = out.scalar_type();
  TORCH_CHECK(dtype != at::kBool, "arange: dtype bool is not supported, got out dtype ", dtype);
  const double xs = start.to<double>(), xe = end.to<double>(), xstep = step.to<double>();
  TORCH_CHECK(xstep != 0, "arange: step must be nonzero, got ", xstep);
  TORCH_CHECK(std::isfinite(xs) && std::isfinite(xe), "arange: unsupported range: ", xs,
              " -> ", xe);
  TORCH_CHECK((xstep > 0 && xe >= xs) || (xstep < 0 && xe <= xs),
              "arange: upper bound and larger bound inconsistent with step sign (start ", xs,
              ", end ", xe, ", step ", xstep, ")");
  double size_d;
  if (dtype == at::kLong && start.isIntegral(false) && end.isIntegral(false) &&
      step.isIntegral(false)) {  // torch's exact int64 formula
    const int64_t s = start.to<int64_t>(), e = end.to<int64_t>(), st = step.to<int64_t>();
    const int64_t sgn = (st > 0) - (st < 0);
    // Integer division: (e - s + st - sgn) / st is ceil((e - s) / st) exactly.
    // Dividing in double and taking ceil counted one element too many whenever
    // (e - s) % st was not 1 (arange(0, 24, 6) had 5 elements).
    size_d = static_cast<double>((e - s + st - sgn) / st);
  } else {
    size_d = std::ceil((xe - xs) / xstep);
  }
  TORCH_CHECK(size_d >= 0 && size_d <= static_cast<double>(std::numeric_limits<int64_t>::max()),
              "arange: invalid size ", size_d, ", possible overflow?");
  const int64_t size = static_cast<int64_t>(size_d);
  PrepareOut(out, {size}, dtype, name);
  const int device = DeviceIndex(out);
  if (size == 0) return out;
  // Integer dtypes: torch casts start and step to the dtype first.
  const double s0 = at::isIntegralType(dtype, false) ? static_cast<double>(start.to<int64_t>()) : xs;
  const double st = at::isIntegralType(dtype, false) ? static_cast<double>(step.to<int64_t>()) : xstep;
  const TensorRef o = Ref(out, name);
  LaunchIndexing(device, IndexingKernel::kArange, o, nullptr, name,
                 [=] { return kernels::Arange(o, s0, st); });
  return out;
}

// ---- linspace / logspace -----------------------------------------------------------
at::Tensor& LinspaceInto(const at::Scalar& start, const at::Scalar& end, int64_t steps, double base,
                         at::Tensor& out, const char* name) {
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  TORCH_CHECK(out.scalar_type() != at::kBool, name, ": dtype bool is not supported");
  const double xs = start.to<double>(), xe = end.to<double>();
  PrepareOut(out, {steps}, out.scalar_type(), name);
  const int device = DeviceIndex(out);
  if (steps == 0) return out;
  const TensorRef o = Ref(out, name);
  LaunchIndexing(device, IndexingKernel::kLinspace, o, nullptr, name,
                 [=] { return kernels::Linspace(o, xs, xe, base); });
  return out;
}
at::Tensor& LinspaceOut(const at::Scalar& start, const at::Scalar& end, int64_t steps,
                        at::Tensor& out) {
  return LinspaceInto(start, end, steps, 0.0, out, "aten::linspace");
}
at::Tensor& LogspaceOut(const at::Scalar& start, const at::Scalar& end, int64_t steps, double base,
                        at::Tensor& out) {
  TORCH_CHECK(base > 0, "aten::logspace: trn supports a positive base, got ", base);
  return LinspaceInto(start, end, steps, base, out, "aten::logspace");
}

// ---- tril / triu -----------------------------------------------------------------
at::Tensor& TriangleInto(const at::Tensor& self, int64_t diagonal, bool upper, at::Tensor& out) {
  const char* name = upper ? "aten::triu" : "aten::tril";
  TORCH_CHECK(self.dim() >= 2, name, ": input tensor must have at least 2 dimensions, got ",
              self.dim());
  const int device = CommonDevice(name, {&self, &out});
  if (out.numel() == 0) return out;
  const TensorRef o = Ref(out, name), i = Ref(self, name);
  LaunchIndexing(device, upper ? IndexingKernel::kTriu : IndexingKernel::kTril, o, &i, name,
                 [=] { return kernels::Triangle(o, i, diagonal, upper); });
  return out;
}
template <bool kUpper>
at::Tensor Triangle(const at::Tensor& self, c10::SymInt diagonal) {
  at::Tensor out = Empty(self.sizes(), self.scalar_type(), DeviceIndex(self));
  return TriangleInto(self, diagonal.expect_int(), kUpper, out);
}
template <bool kUpper>
at::Tensor& TriangleOut(const at::Tensor& self, c10::SymInt diagonal, at::Tensor& out) {
  PrepareOut(out, self.sizes(), self.scalar_type(), kUpper ? "aten::triu" : "aten::tril");
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "tril/triu: out dtype ",
              out.scalar_type(), " must match self dtype ", self.scalar_type());
  return TriangleInto(self, diagonal.expect_int(), kUpper, out);
}
template <bool kUpper>
at::Tensor& TriangleInplace(at::Tensor& self, c10::SymInt diagonal) {
  return TriangleInto(self, diagonal.expect_int(), kUpper, self);
}

// ---- gather / scatter ------------------------------------------------------------
// torch's shape rules: index has self's ndim, index.size(d) <= src.size(d)
// on every dim, and <= self.size(d) on every dim but `dim`.
void CheckScatterGatherShapes(const char* name, const at::Tensor& self, int64_t dim,
                              const at::Tensor& index, const at::Tensor* src) {
  CheckLongIndex(index, name);
  TORCH_CHECK(index.dim() == self.dim(), name,
              "(): Index tensor must have the same number of dimensions as input tensor (",
              self.dim(), "), got ", index.dim());
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (d != dim) {
      TORCH_CHECK(index.size(d) <= self.size(d), name, "(): Size does not match at dimension ",
                  d, " expected index ", index.sizes(), " to be no larger than self ",
                  self.sizes(), " apart from dimension ", dim);
    }
    if (src != nullptr) {
      TORCH_CHECK(index.size(d) <= src->size(d), name, "(): Expected index ", index.sizes(),
                  " to be no larger than src ", src->sizes(), " at dimension ", d);
    }
  }
}

at::Tensor& GatherInto(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                       at::Tensor& out) {
  const char* name = "aten::gather";
  const int device = CommonDevice(name, {&self, &index, &out});
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  CheckScatterGatherShapes(name, self, d, index, nullptr);
  if (out.numel() == 0) return out;
  const TensorRef o = Ref(out, name), i = Ref(self, name), x = Ref(index, name);
  LaunchIndexing(device, IndexingKernel::kGather, o, &i, name,
                 [=] { return kernels::Gather(o, i, static_cast<int>(d), x); });
  return out;
}
at::Tensor Gather(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool) {
  at::Tensor out = Empty(index.sizes(), self.scalar_type(), DeviceIndex(self));
  return GatherInto(self, dim, index, out);
}
at::Tensor& GatherOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool,
                      at::Tensor& out) {
  PrepareOut(out, index.sizes(), self.scalar_type(), "aten::gather");
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "gather(): out dtype ",
              out.scalar_type(), " must match self dtype ", self.scalar_type());
  return GatherInto(self, dim, index, out);
}

// out <- self (unless the same tensor), then the scatter of src (or value).
at::Tensor& ScatterInto(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                        const at::Tensor* src, const at::Scalar& value, bool add,
                        at::Tensor& out) {
  const char* name = add ? "aten::scatter_add" : "aten::scatter";
  const int device = CommonDevice(name, {&self, &index, &out, src});
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  CheckScatterGatherShapes(name, self, d, index, src);
  if (src != nullptr) {
    TORCH_CHECK(src->scalar_type() == self.scalar_type(), name,
                "(): Expected self.dtype to be equal to src.dtype, got ", self.scalar_type(),
                " and ", src->scalar_type());
  }
  if (add) ComputeDType(self.scalar_type(), name);
  if (!out.is_same(self)) LaunchCopy(device, out, self, name);
  if (index.numel() == 0) return out;
  const TensorRef o = Ref(out, name), x = Ref(index, name);
  const TensorRef s = src != nullptr ? Ref(*src, name) : NoRef();
  const double v = src != nullptr ? 0.0 : value.to<double>();
  LaunchIndexing(device, add ? IndexingKernel::kScatterAdd : IndexingKernel::kScatter, o, nullptr,
                 name, [=] {
                   return kernels::Scatter(o, static_cast<int>(d), x, s, v,
                                           add ? kernels::ScatterReduce::kAdd
                                               : kernels::ScatterReduce::kNone);
                 });
  return out;
}
at::Tensor ScatterSrc(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                      const at::Tensor& src) {
  at::Tensor out = Empty(self.sizes(), self.scalar_type(), DeviceIndex(self));
  return ScatterInto(self, dim, index, &src, 0, false, out);
}
at::Tensor ScatterValue(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                        const at::Scalar& value) {
  at::Tensor out = Empty(self.sizes(), self.scalar_type(), DeviceIndex(self));
  return ScatterInto(self, dim, index, nullptr, value, false, out);
}
at::Tensor& ScatterSrcInplace(at::Tensor& self, int64_t dim, const at::Tensor& index,
                              const at::Tensor& src) {
  return ScatterInto(self, dim, index, &src, 0, false, self);
}
at::Tensor& ScatterValueInplace(at::Tensor& self, int64_t dim, const at::Tensor& index,
                                const at::Scalar& value) {
  return ScatterInto(self, dim, index, nullptr, value, false, self);
}
at::Tensor& ScatterSrcOut(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                          const at::Tensor& src, at::Tensor& out) {
  PrepareOut(out, self.sizes(), self.scalar_type(), "aten::scatter");
  return ScatterInto(self, dim, index, &src, 0, false, out);
}
at::Tensor& ScatterValueOut(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                            const at::Scalar& value, at::Tensor& out) {
  PrepareOut(out, self.sizes(), self.scalar_type(), "aten::scatter");
  return ScatterInto(self, dim, index, nullptr, value, false, out);
}
at::Tensor ScatterAdd(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                      const at::Tensor& src) {
  at::Tensor out = Empty(self.sizes(), self.scalar_type(), DeviceIndex(self));
  return ScatterInto(self, dim, index, &src, 0, true, out);
}
at::Tensor& ScatterAddInplace(at::Tensor& self, int64_t dim, const at::Tensor& index,
                              const at::Tensor& src) {
  return ScatterInto(self, dim, index, &src, 0, true, self);
}
at::Tensor& ScatterAddOut(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                          const at::Tensor& src, at::Tensor& out) {
  PrepareOut(out, self.sizes(), self.scalar_type(), "aten::scatter_add");
  return ScatterInto(self, dim, index, &src, 0, true, out);
}

// ---- scatter_reduce.two -------------------------------------------------------------
// CPU's recipe: without include_self the scattered-to cells start from the
// reduction's identity (amax / amin: from one of their own sources, which the
// reduction then compares again: no infinity or integer limit to represent),
// then one reducing scatter; mean divides by the count of values each cell
// got (itself included), floor division for integers.
at::Tensor& ScatterReduceInto(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                              const at::Tensor& src, c10::string_view reduce, bool include_self,
                              at::Tensor& out) {
  const char* name = "aten::scatter_reduce";
  using kernels::ScatterReduce;
  ScatterReduce mode;
  const bool mean = reduce == "mean";
  if (reduce == "sum" || mean) {
    mode = ScatterReduce::kAdd;
  } else if (reduce == "prod") {
    mode = ScatterReduce::kMul;
  } else if (reduce == "amax" || reduce == "max") {  // max / min: CPU's aliases
    mode = ScatterReduce::kMax;
  } else if (reduce == "amin" || reduce == "min") {
    mode = ScatterReduce::kMin;
  } else {
    TORCH_CHECK(false, "reduce argument must be either sum, prod, mean, amax or amin, got ",
                reduce);
  }
  const int device = CommonDevice(name, {&self, &index, &src, &out});
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  CheckScatterGatherShapes(name, self, d, index, &src);
  TORCH_CHECK(src.scalar_type() == self.scalar_type(), name,
              "(): Expected self.dtype to be equal to src.dtype, got ", self.scalar_type(),
              " and ", src.scalar_type());
  ComputeDType(self.scalar_type(), name);
  if (!out.is_same(self)) LaunchCopy(device, out, self, name);
  if (index.numel() == 0) return out;
  const TensorRef o = Ref(out, name), x = Ref(index, name), sr = Ref(src, name);
  const int di = static_cast<int>(d);
  auto scatter = [&](const TensorRef& into, ScatterReduce m, bool with_src, double value) {
    LaunchIndexing(device, IndexingKernel::kScatterReduce, into, nullptr, name, [=] {
      return kernels::Scatter(into, di, x, with_src ? sr : NoRef(), value, m);
    });
  };
  if (!include_self) {
    const bool extremum = mode == ScatterReduce::kMax || mode == ScatterReduce::kMin;
    scatter(o, ScatterReduce::kNone, extremum, mode == ScatterReduce::kMul ? 1.0 : 0.0);
  }
  scatter(o, mode, true, 0.0);
  if (mean) {  // the count of values each cell got: a scatter of 1s into ones / zeros
    at::Tensor count = include_self ? at::ones_like(out) : at::zeros_like(out);
    scatter(Ref(count, name), ScatterReduce::kAdd, false, 1.0);
    if (!include_self) count.masked_fill_(count == 0, 1);
    if (at::isFloatingType(out.scalar_type())) {
      out.div_(count);
    } else {
      out.div_(count, "floor");
    }
  }
  return out;
}
at::Tensor ScatterReduceTwo(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                            const at::Tensor& src, c10::string_view reduce, bool include_self) {
  at::Tensor out = Empty(self.sizes(), self.scalar_type(), DeviceIndex(self));
  return ScatterReduceInto(self, dim, index, src, reduce, include_self, out);
}
at::Tensor& ScatterReduceTwoInplace(at::Tensor& self, int64_t dim, const at::Tensor& index,
                                    const at::Tensor& src, c10::string_view reduce,
                                    bool include_self) {
  return ScatterReduceInto(self, dim, index, src, reduce, include_self, self);
}
at::Tensor& ScatterReduceTwoOut(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                const at::Tensor& src, c10::string_view reduce, bool include_self,
                                at::Tensor& out) {
  PrepareOut(out, self.sizes(), self.scalar_type(), "aten::scatter_reduce");
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "scatter_reduce(): out dtype ",
              out.scalar_type(), " must match self dtype ", self.scalar_type());
  return ScatterReduceInto(self, dim, index, src, reduce, include_self, out);
}

// ---- masked_scatter_ / take -----------------------------------------------------------
// masked_scatter_ (VLMs put image features into the text embeddings with
// it): the k-th set mask element (row-major over self) takes source's k-th
// element. Its position among the set ones is a cumsum of the mask; one read
// back of the count checks that source has enough elements, as CPU raises.
at::Tensor& MaskedScatterInplace(at::Tensor& self, const at::Tensor& mask,
                                 const at::Tensor& source) {
  const char* name = "aten::masked_scatter_";
  CommonDevice(name, {&self, &mask, &source});
  TORCH_CHECK(mask.scalar_type() == at::kBool,
              "masked_scatter_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(),
              "masked_scatter: expected self and source to have same dtypes but got",
              self.scalar_type(), " and ", source.scalar_type());
  TORCH_CHECK(at::is_expandable_to(mask.sizes(), self.sizes()), name, ": mask of size ",
              mask.sizes(), " does not broadcast to self of size ", self.sizes());
  if (self.numel() == 0) return self;
  const at::Tensor m = mask.expand(self.sizes()).reshape({-1});
  const at::Tensor position = m.cumsum(0, at::kLong);
  const int64_t set = at::_local_scalar_dense(position[-1]).to<int64_t>();
  TORCH_CHECK(set <= source.numel(), "masked_scatter: Number of elements of source (",
              source.numel(), ") < number of ones in mask (", set, ")");
  if (set == 0) return self;
  const at::Tensor picked =
      source.reshape({-1}).index_select(0, (position - 1).clamp_min_(0)).view(self.sizes());
  self.copy_(at::where(m.view(self.sizes()), picked, self));
  return self;
}

// take: self seen flat, indices in [-n, 0) counting from the end (torch's);
// any other index out of range fails index_select's check, which names it.
at::Tensor Take(const at::Tensor& self, const at::Tensor& index) {
  CommonDevice("aten::take", {&self, &index});
  CheckLongIndex(index, "take");
  const int64_t n = self.numel();
  TORCH_CHECK(n > 0 || index.numel() == 0, "take(): tried to take from an empty tensor");
  const at::Tensor flat = index.reshape({-1});
  const at::Tensor wrapped = at::where((flat < 0) & (flat >= -n), flat + n, flat);
  return self.reshape({-1}).index_select(0, wrapped).view(index.sizes());
}
at::Tensor& TakeOut(const at::Tensor& self, const at::Tensor& index, at::Tensor& out) {
  return CopyIntoOut(Take(self, index), out, "aten::take");
}

// ---- tril_indices / triu_indices ----------------------------------------------------
// The [2, count] coordinates depend on the sizes alone: computed on the host
// and uploaded (one copy; no tensor to bring back).
at::Tensor TriangleIndices(bool upper, int64_t row, int64_t col, int64_t offset,
                           std::optional<at::ScalarType> dtype,
                           std::optional<at::Layout> layout, std::optional<at::Device> device,
                           std::optional<bool> pin_memory) {
  at::TensorOptions cpu = at::TensorOptions().dtype(dtype.value_or(at::kLong)).layout(layout);
  at::Tensor host = upper ? at::triu_indices(row, col, offset, cpu) : at::tril_indices(row, col, offset, cpu);
  return host.to(device.value_or(at::Device(c10::DeviceType::PrivateUse1)));
}
at::Tensor TrilIndices(int64_t row, int64_t col, int64_t offset,
                       std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                       std::optional<at::Device> device, std::optional<bool> pin_memory) {
  return TriangleIndices(false, row, col, offset, dtype, layout, device, pin_memory);
}
at::Tensor TriuIndices(int64_t row, int64_t col, int64_t offset,
                       std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                       std::optional<at::Device> device, std::optional<bool> pin_memory) {
  return TriangleIndices(true, row, col, offset, dtype, layout, device, pin_memory);
}

// ---- nonzero ---------------------------------------------------------------------
// Counts on the device, reads the count back (host sync), then fills.
at::Tensor Nonzero(const at::Tensor& self) {
  const char* name = "aten::nonzero";
  const int device = DeviceIndex(self);
  TORCH_CHECK(self.dim() <= kMaxDims, name, ": at most ", kMaxDims, " dims, got ", self.dim());
  at::Tensor count = Empty({}, at::kLong, device);
  const TensorRef c = Ref(count, name), i = Ref(self, name);
  LaunchIndexing(device, IndexingKernel::kNonzero, c, &i, name,
                 [=] { return kernels::CountNonzero(c, i); });
  const int64_t n = at::_local_scalar_dense(count).to<int64_t>();
  at::Tensor out = Empty({n, self.dim()}, at::kLong, device);
  if (n == 0 || self.dim() == 0) return out;
  const TensorRef o = Ref(out, name);
  LaunchIndexing(device, IndexingKernel::kNonzero, o, &i, name,
                 [=] { return kernels::Nonzero(o, i); });
  return out;
}

// ---- advanced indexing -----------------------------------------------------------
// Note [advanced indexing layout]: the kernels see `self` with its indexed
// dims first and the result as [B..., rest...] (B = the broadcast index
// shape, rest = the other dims in order). torch puts B where the first
// indexed dim was when the indexed dims are adjacent, else in front; the
// result tensor is allocated in torch's layout and handed to the kernel as a
// permuted view, so it comes out contiguous.
struct AdvancedIndex {
  at::Tensor self_view;              // self permuted: indexed dims first
  std::vector<at::Tensor> indices;   // broadcast to B, on self's device
  std::vector<int> dims;             // the indexed dims of self
  at::DimVector result_sizes;        // torch's layout
  std::vector<int64_t> kernel_perm;  // result.permute(kernel_perm) = [B..., rest...]
  int64_t b_numel = 0;
};

AdvancedIndex MakeAdvancedIndex(const at::Tensor& self,
                                const c10::List<std::optional<at::Tensor>>& indices,
                                const char* name) {
  AdvancedIndex a;
  std::vector<at::Tensor> defined;
  int64_t dim = 0;
  for (size_t k = 0; k < indices.size(); ++k) {
    const std::optional<at::Tensor> opt = indices.get(k);
    if (!opt.has_value() || !opt->defined()) {
      ++dim;
      continue;
    }
    at::Tensor idx = *opt;
    const at::ScalarType st = idx.scalar_type();
    if (st == at::kBool || st == at::kByte) {
      TORCH_CHECK_INDEX(st == at::kBool, name, ": uint8 masks are not supported on trn, use bool");
      TORCH_CHECK_INDEX(dim + idx.dim() <= self.dim(), "too many indices for tensor of dimension ",
                        self.dim());
      for (int64_t j = 0; j < idx.dim(); ++j) {
        TORCH_CHECK_INDEX(idx.size(j) == self.size(dim + j), "The shape of the mask ",
                          idx.sizes(), " at index ", j,
                          " does not match the shape of the indexed tensor ", self.sizes(),
                          " at index ", dim + j);
      }
      if (!idx.device().is_privateuseone()) idx = idx.to(self.device());
      const at::Tensor nz = Nonzero(idx);  // [n, mask ndim]
      for (int64_t j = 0; j < idx.dim(); ++j) {
        defined.push_back(nz.select(1, j));
        a.dims.push_back(static_cast<int>(dim + j));
      }
      dim += idx.dim();
      continue;
    }
    TORCH_CHECK_INDEX(st == at::kLong || st == at::kInt,
                      "tensors used as indices must be long, int, byte or bool tensors, got ",
                      st);
    TORCH_CHECK_INDEX(dim < self.dim(), "too many indices for tensor of dimension ", self.dim(),
                      " (got ", indices.size(), ")");
    if (!idx.device().is_privateuseone()) idx = idx.to(self.device());
    defined.push_back(idx);
    a.dims.push_back(static_cast<int>(dim));
    ++dim;
  }
  TORCH_CHECK_INDEX(dim <= self.dim(), "too many indices for tensor of dimension ", self.dim(),
                    " (got ", dim, ")");
  TORCH_CHECK(!defined.empty(), name, ": at least one index must be a tensor");
  for (const at::Tensor& t : defined) CommonDevice(name, {&self, &t});
  at::DimVector b = at::DimVector(defined[0].sizes());
  for (size_t k = 1; k < defined.size(); ++k) b = at::infer_size_dimvector(b, defined[k].sizes());
  TORCH_CHECK(b.size() + self.dim() - a.dims.size() <= static_cast<size_t>(kMaxDims), name,
              ": the result would have more than ", kMaxDims, " dims");
  for (const at::Tensor& t : defined) a.indices.push_back(t.expand(b));
  a.b_numel = c10::multiply_integers(b);

  std::vector<int64_t> perm(a.dims.begin(), a.dims.end());
  std::vector<int64_t> rest;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (std::find(a.dims.begin(), a.dims.end(), d) == a.dims.end()) rest.push_back(d);
  }
  perm.insert(perm.end(), rest.begin(), rest.end());
  a.self_view = self.permute(perm);

  const bool adjacent = a.dims.back() - a.dims.front() + 1 == static_cast<int>(a.dims.size());
  const int64_t at_pos = adjacent ? a.dims.front() : 0;  // rest dims before B
  const int64_t nb = static_cast<int64_t>(b.size());
  for (int64_t j = 0; j < at_pos; ++j) a.result_sizes.push_back(self.size(rest[j]));
  a.result_sizes.insert(a.result_sizes.end(), b.begin(), b.end());
  for (size_t j = at_pos; j < rest.size(); ++j) a.result_sizes.push_back(self.size(rest[j]));
  for (int64_t j = 0; j < nb; ++j) a.kernel_perm.push_back(at_pos + j);
  for (int64_t j = 0; j < at_pos; ++j) a.kernel_perm.push_back(j);
  for (int64_t j = at_pos + nb; j < static_cast<int64_t>(a.result_sizes.size()); ++j) {
    a.kernel_perm.push_back(j);
  }
  return a;
}

std::vector<TensorRef> IndexRefs(const AdvancedIndex& a, const char* name) {
  std::vector<TensorRef> refs;
  for (const at::Tensor& t : a.indices) refs.push_back(Ref(t, name));
  return refs;
}

void IndexInto(const at::Tensor& out, const AdvancedIndex& a, int device, const char* name) {
  const TensorRef o = Ref(out.permute(a.kernel_perm), name), i = Ref(a.self_view, name);
  const std::vector<TensorRef> refs = IndexRefs(a, name);
  const std::vector<int> dims = a.dims;
  LaunchIndexing(device, IndexingKernel::kIndex, o, &i, name,
                 [=] { return kernels::Index(o, i, refs, dims); });
}
at::Tensor IndexTensor(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices) {
  const char* name = "aten::index";
  const int device = DeviceIndex(self);
  const AdvancedIndex a = MakeAdvancedIndex(self, indices, name);
  at::Tensor out = Empty(a.result_sizes, self.scalar_type(), device);
  if (out.numel() > 0) IndexInto(out, a, device, name);
  return out;
}
// Gathers straight into `out` (a compiled program's eager step passes its
// planned buffer: a MoE decode step gathers megabytes of expert weights),
// through a temporary only when out shares memory with an operand or casts.
at::Tensor& IndexTensorOut(const at::Tensor& self,
                           const c10::List<std::optional<at::Tensor>>& indices, at::Tensor& out) {
  const char* name = "aten::index";
  const int device = CommonDevice(name, {&self, &out});
  const AdvancedIndex a = MakeAdvancedIndex(self, indices, name);
  bool direct = out.scalar_type() == self.scalar_type() &&
                at::get_overlap_status(out, self) == at::MemOverlapStatus::No;
  for (const std::optional<at::Tensor>& t : indices) {
    if (t.has_value() && t->defined()) {
      direct = direct && at::get_overlap_status(out, *t) == at::MemOverlapStatus::No;
    }
  }
  if (!direct) {
    const at::Tensor res = IndexTensor(self, indices);
    PrepareOut(out, res.sizes(), res.scalar_type(), name);
    LaunchCopy(device, out, res, name);
    return out;
  }
  PrepareOut(out, a.result_sizes, self.scalar_type(), name);
  if (out.numel() > 0) IndexInto(out, a, device, name);
  return out;
}

// The IndexPut launch of index_put_ and of index_add_ / index_copy_ /
// index_fill_: values broadcast to the indexing result; `negative`: indices
// count from the end (index_add / index_copy reject them).
void LaunchIndexPut(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                    const at::Tensor& values, bool accumulate, bool negative, const char* name) {
  const AdvancedIndex a = MakeAdvancedIndex(self, indices, name);
  TORCH_CHECK(at::is_expandable_to(values.sizes(), a.result_sizes),
              "shape mismatch: value tensor of shape ", values.sizes(),
              " cannot be broadcast to indexing result of shape ",
              at::IntArrayRef(a.result_sizes));
  if (a.b_numel == 0 || c10::multiply_integers(a.result_sizes) == 0) return;
  const at::Tensor ve = values.expand(a.result_sizes).permute(a.kernel_perm);
  const TensorRef s = Ref(a.self_view, name), x = Ref(ve, name);
  const std::vector<TensorRef> refs = IndexRefs(a, name);
  const std::vector<int> dims = a.dims;
  LaunchIndexing(DeviceIndex(self),
                 accumulate ? IndexingKernel::kIndexPutAdd : IndexingKernel::kIndexPut, s, &x,
                 name, [=] { return kernels::IndexPut(s, refs, x, accumulate, dims, negative); });
}

at::Tensor& IndexPutImpl(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                         const at::Tensor& values, bool accumulate, bool /*unsafe*/) {
  const char* name = "aten::_index_put_impl_";
  at::Tensor v = values;
  if (!v.device().is_privateuseone()) {
    TORCH_CHECK(v.dim() == 0, name, ": values on ", v.device(),
                " must be a 0-dim tensor to be used with a trn tensor");
    v = v.to(self.device(), self.scalar_type());
  }
  TORCH_CHECK(v.scalar_type() == self.scalar_type(),
              "Index put requires the source and destination dtypes match, got ",
              self.scalar_type(), " for the destination and ", v.scalar_type(), " for the source.");
  CommonDevice(name, {&self, &v});
  at::assert_no_internal_overlap(self);
  at::assert_no_overlap(self, v);
  if (accumulate) ComputeDType(self.scalar_type(), name);
  LaunchIndexPut(self, indices, v, accumulate, /*negative=*/true, name);
  return self;
}

// index_add_ / index_copy_ / index_fill_ along dim are index_put_ with the
// index at dim (the other dims whole): one IndexPut kernel, accumulating for
// index_add. index_add / index_copy reject negative indices (CPU's rule;
// index_put and index_fill count them from the end). Functional forms clone.
enum class IndexAlong { kAdd, kCopy, kFill };
at::Tensor& IndexAlongImpl(IndexAlong kind, at::Tensor& self, int64_t dim, const at::Tensor& index,
                           const at::Tensor& source, const char* name) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK_INDEX(index.dim() <= 1, name, ": Index is supposed to be a vector, got ",
                    index.dim(), "-D");
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt, name,
              ": Expected dtype int32/int64 for index but got ", index.scalar_type());
  const at::Tensor idx = index.reshape({-1});
  if (kind != IndexAlong::kFill) {
    TORCH_CHECK(source.scalar_type() == self.scalar_type(), name, ": self (",
                self.scalar_type(), ") and source (", source.scalar_type(),
                ") must have the same scalar type");
    at::DimVector want(self.sizes().begin(), self.sizes().end());
    if (self.dim() > 0) want[dim] = idx.numel();
    TORCH_CHECK(self.dim() == 0 ? source.numel() == idx.numel()
                                : source.sizes() == at::IntArrayRef(want),
                      name, ": source of shape ", source.sizes(), " does not match self of shape ",
                      self.sizes(), " with ", idx.numel(), " indices along dim ", dim);
  }
  if (idx.numel() == 0 || self.numel() == 0) return self;
  CommonDevice(name, {&self, &source});
  if (kind == IndexAlong::kAdd) ComputeDType(self.scalar_type(), name);
  const at::Tensor view = self.dim() == 0 ? self.reshape({1}) : self;
  c10::List<std::optional<at::Tensor>> indices;
  for (int64_t d = 0; d < dim; ++d) indices.push_back(std::nullopt);
  indices.push_back(idx);
  // A 0-dim self's source has idx.numel() elements in any shape.
  const at::Tensor values = kind == IndexAlong::kFill || self.dim() > 0
                                ? source
                                : source.reshape({idx.numel()});
  LaunchIndexPut(view, indices, values, kind == IndexAlong::kAdd,
                 /*negative=*/kind == IndexAlong::kFill, name);
  return self;
}
at::Tensor& IndexAdd_(at::Tensor& self, int64_t dim, const at::Tensor& index,
                      const at::Tensor& source, const at::Scalar& alpha) {
  const at::Tensor src = alpha.equal(1) ? source : at::mul(source, alpha);
  return IndexAlongImpl(IndexAlong::kAdd, self, dim, index, src, "aten::index_add_");
}
at::Tensor IndexAdd(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                    const at::Tensor& source, const at::Scalar& alpha) {
  at::Tensor out = self.clone();
  return IndexAdd_(out, dim, index, source, alpha);
}
at::Tensor& IndexAddOut(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                        const at::Tensor& source, const at::Scalar& alpha, at::Tensor& out) {
  CopyIntoOut(self, out, "aten::index_add");  // out= forms start from a copy of self
  return IndexAdd_(out, dim, index, source, alpha);
}
at::Tensor& IndexCopy_(at::Tensor& self, int64_t dim, const at::Tensor& index,
                       const at::Tensor& source) {
  return IndexAlongImpl(IndexAlong::kCopy, self, dim, index, source, "aten::index_copy_");
}
at::Tensor IndexCopy(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                     const at::Tensor& source) {
  at::Tensor out = self.clone();
  return IndexCopy_(out, dim, index, source);
}
at::Tensor& IndexCopyOut(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                         const at::Tensor& source, at::Tensor& out) {
  CopyIntoOut(self, out, "aten::index_copy");
  return IndexCopy_(out, dim, index, source);
}
at::Tensor& IndexFillS_(at::Tensor& self, int64_t dim, const at::Tensor& index,
                        const at::Scalar& value) {
  const at::Tensor v = at::scalar_tensor(value, self.options());
  return IndexAlongImpl(IndexAlong::kFill, self, dim, index, v, "aten::index_fill_");
}
at::Tensor& IndexFillT_(at::Tensor& self, int64_t dim, const at::Tensor& index,
                        const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "index_fill_ only supports a 0-dimensional value tensor, but got "
              "tensor with ", value.dim(), " dimension(s).");
  return IndexAlongImpl(IndexAlong::kFill, self, dim, index,
                        value.to(self.device(), self.scalar_type()), "aten::index_fill_");
}
at::Tensor IndexFillS(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                      const at::Scalar& value) {
  at::Tensor out = self.clone();
  return IndexFillS_(out, dim, index, value);
}
at::Tensor IndexFillT(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                      const at::Tensor& value) {
  at::Tensor out = self.clone();
  return IndexFillT_(out, dim, index, value);
}

at::Tensor MaskedSelect(const at::Tensor& self, const at::Tensor& mask) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_select: expected BoolTensor for mask, got ",
              mask.scalar_type());
  const at::DimVector sizes = at::infer_size_dimvector(self.sizes(), mask.sizes());
  c10::List<std::optional<at::Tensor>> idx;
  idx.push_back(mask.expand(sizes));
  return IndexTensor(self.expand(sizes), idx);
}

// ---- cumsum / cumprod ------------------------------------------------------------
at::ScalarType ScanDType(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  if (dtype.has_value()) return *dtype;
  return at::isIntegralType(self.scalar_type(), /*includeBool=*/true) ? at::kLong
                                                                        : self.scalar_type();
}

at::Tensor& ScanInto(kernels::ScanOp op, const at::Tensor& self, int64_t dim,
                     at::ScalarType dtype, at::Tensor& out) {
  const char* name = op == kernels::ScanOp::kSum    ? "aten::cumsum"
                     : op == kernels::ScanOp::kProd ? "aten::cumprod"
                                                    : "aten::logcumsumexp";
  const int device = CommonDevice(name, {&self, &out});
  TORCH_CHECK(dtype != at::kBool, name, ": dtype bool is not supported");
  ComputeDType(dtype, name);
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  if (out.numel() == 0) return out;
  const at::Tensor src = CastTo(self, dtype, name);
  const at::Tensor dst = out.scalar_type() == dtype ? out : Empty(out.sizes(), dtype, device);
  const TensorRef o = Ref(dst, name), i = Ref(src, name);
  LaunchIndexing(device, op == kernels::ScanOp::kSum    ? IndexingKernel::kCumsum
                         : op == kernels::ScanOp::kProd ? IndexingKernel::kCumprod
                                                        : IndexingKernel::kLogcumsumexp,
                 o, &i, name, [=] { return kernels::Scan(op, o, i, static_cast<int>(d)); });
  if (!dst.is_same(out)) LaunchCopy(device, out, dst, name);
  return out;
}
template <kernels::ScanOp kOp>
at::Tensor ScanFn(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype) {
  const at::ScalarType t = ScanDType(self, dtype);
  at::Tensor out = Empty(self.sizes(), t, DeviceIndex(self));
  return ScanInto(kOp, self, dim, t, out);
}
template <kernels::ScanOp kOp>
at::Tensor& ScanOut(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype,
                    at::Tensor& out) {
  const at::ScalarType t = ScanDType(self, dtype);
  PrepareOut(out, self.sizes(), t, kOp == kernels::ScanOp::kSum ? "aten::cumsum" : "aten::cumprod");
  return ScanInto(kOp, self, dim, t, out);
}
template <kernels::ScanOp kOp>
at::Tensor& ScanInplace(at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype) {
  return ScanInto(kOp, self, dim, dtype.value_or(self.scalar_type()), self);
}

// ---- logcumsumexp / cummax / cummin (the scan kernels) ------------------------------
at::Tensor& LogcumsumexpOut(const at::Tensor& self, int64_t dim, at::Tensor& out) {
  const char* name = "aten::logcumsumexp";
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), name, ": expected a floating input, got ",
              self.scalar_type());
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), name, ": expected out of ",
              self.scalar_type(), ", got ", out.scalar_type());
  PrepareOut(out, self.sizes(), self.scalar_type(), name);
  return ScanInto(kernels::ScanOp::kLogSumExp, self, dim, self.scalar_type(), out);
}
at::Tensor Logcumsumexp(const at::Tensor& self, int64_t dim) {
  at::Tensor out = Empty(self.sizes(), self.scalar_type(), DeviceIndex(self));
  return LogcumsumexpOut(self, dim, out);
}

// _cummax_helper / _cummin_helper: the composites cummax / cummin allocate
// values and indices of self's shape, then call these.
template <bool kMax>
void CumExtremumHelper(const at::Tensor& self, at::Tensor& values, at::Tensor& indices,
                       int64_t dim) {
  const char* name = kMax ? "aten::cummax" : "aten::cummin";
  const int device = CommonDevice(name, {&self, &values, &indices});
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  TORCH_CHECK(values.sizes() == self.sizes() && indices.sizes() == self.sizes() &&
                  values.scalar_type() == self.scalar_type() &&
                  indices.scalar_type() == at::kLong,
              name, ": expected values of ", self.scalar_type(), " and int64 indices of size ",
              self.sizes());
  if (self.numel() == 0) return;
  const TensorRef v = Ref(values, name), x = Ref(indices, name), i = Ref(self, name);
  LaunchIndexing(device, kMax ? IndexingKernel::kCummax : IndexingKernel::kCummin, v, &i, name,
                 [=] { return kernels::ScanExtremum(v, x, i, static_cast<int>(d), kMax); });
}

// ---- sort / topk -----------------------------------------------------------------
// Kernel outputs are fresh contiguous tensors; out= variants copy into theirs.
std::tuple<at::Tensor, at::Tensor> SortOrTopK(const at::Tensor& self, int64_t dim,
                                              std::optional<int64_t> k, bool descending,
                                              const char* name) {
  const int device = DeviceIndex(self);
  TORCH_CHECK(self.scalar_type() != at::kBool || !k.has_value(), name,
              ": bool input is not supported by topk (torch: \"topk_cpu\" not implemented for 'Bool')");
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  const int64_t size = self.dim() == 0 ? 1 : self.size(d);
  at::DimVector sizes(self.sizes().begin(), self.sizes().end());
  if (k.has_value()) {
    TORCH_CHECK(*k >= 0 && *k <= size, "selected index k out of range (k = ", *k,
                ", dim ", d, " has size ", size, ")");
    if (self.dim() > 0) sizes[d] = *k;
  }
  at::Tensor values = Empty(sizes, self.scalar_type(), device);
  at::Tensor indices = Empty(sizes, at::kLong, device);
  if (values.numel() == 0) return {values, indices};
  const TensorRef v = Ref(values, name), x = Ref(indices, name), i = Ref(self, name);
  const int di = static_cast<int>(d);
  if (k.has_value()) {
    const int64_t kk = *k;
    LaunchIndexing(device, IndexingKernel::kTopk, v, &i, name,
                   [=] { return kernels::TopK(v, x, i, di, kk, descending); });
  } else {
    LaunchIndexing(device, IndexingKernel::kSort, v, &i, name,
                   [=] { return kernels::Sort(v, x, i, di, descending); });
  }
  return {values, indices};
}
std::tuple<at::Tensor, at::Tensor> SortStable(const at::Tensor& self, std::optional<bool>,
                                              int64_t dim, bool descending) {
  return SortOrTopK(self, dim, std::nullopt, descending, "aten::sort");
}
void CopyPair(const std::tuple<at::Tensor, at::Tensor>& res, at::Tensor& values,
              at::Tensor& indices, const char* name) {
  const at::Tensor& v = std::get<0>(res);
  const at::Tensor& x = std::get<1>(res);
  PrepareOut(values, v.sizes(), v.scalar_type(), name);
  PrepareOut(indices, x.sizes(), at::kLong, name);
  TORCH_CHECK(values.scalar_type() == v.scalar_type() && indices.scalar_type() == at::kLong, name,
              ": out dtypes must be ", v.scalar_type(), " and int64");
  LaunchCopy(DeviceIndex(values), values, v, name);
  LaunchCopy(DeviceIndex(indices), indices, x, name);
}
std::tuple<at::Tensor&, at::Tensor&> SortStableOut(const at::Tensor& self, std::optional<bool>,
                                                   int64_t dim, bool descending,
                                                   at::Tensor& values, at::Tensor& indices) {
  CopyPair(SortOrTopK(self, dim, std::nullopt, descending, "aten::sort"), values, indices,
           "aten::sort");
  return {values, indices};
}
std::tuple<at::Tensor, at::Tensor> TopK(const at::Tensor& self, c10::SymInt k, int64_t dim,
                                        bool largest, bool /*sorted*/) {
  return SortOrTopK(self, dim, k.expect_int(), largest, "aten::topk");
}
std::tuple<at::Tensor&, at::Tensor&> TopKOut(const at::Tensor& self, c10::SymInt k, int64_t dim,
                                             bool largest, bool, at::Tensor& values,
                                             at::Tensor& indices) {
  CopyPair(SortOrTopK(self, dim, k.expect_int(), largest, "aten::topk"), values, indices,
           "aten::topk");
  return {values, indices};
}

// ---- flip / roll -----------------------------------------------------------------
at::Tensor Flip(const at::Tensor& self, at::IntArrayRef dims) {
  const char* name = "aten::flip";
  const int device = DeviceIndex(self);
  uint32_t mask = 0;
  for (int64_t d : dims) {
    const int64_t w = at::maybe_wrap_dim(d, self.dim());
    TORCH_CHECK(!(mask & (1u << w)), "dim ", w, " appears multiple times in the list of dims");
    mask |= 1u << w;
  }
  at::Tensor out = Empty(self.sizes(), self.scalar_type(), device);
  if (out.numel() == 0) return out;
  const TensorRef o = Ref(out, name), i = Ref(self, name);
  LaunchIndexing(device, IndexingKernel::kFlip, o, &i, name,
                 [=] { return kernels::Flip(o, i, mask); });
  return out;
}

at::Tensor Roll(const at::Tensor& self, c10::SymIntArrayRef shifts_sym, at::IntArrayRef dims) {
  const char* name = "aten::roll";
  const int device = DeviceIndex(self);
  const at::IntArrayRef shifts = C10_AS_INTARRAYREF_SLOW(shifts_sym);
  if (dims.empty()) {  // roll the flattened tensor
    TORCH_CHECK(shifts.size() == 1, "roll: shifts must be one value when dims is empty, got ",
                shifts.size());
    at::Tensor flat = self.is_contiguous() ? self : self.contiguous();
    return Roll(flat.view({-1}), shifts_sym, {0}).view(self.sizes());
  }
  TORCH_CHECK(shifts.size() == dims.size(), "shifts and dimensions must align. shifts: ",
              shifts.size(), ", dims:", dims.size());
  int64_t per_dim[kMaxDims] = {};
  for (size_t j = 0; j < dims.size(); ++j) per_dim[at::maybe_wrap_dim(dims[j], self.dim())] += shifts[j];
  at::Tensor out = Empty(self.sizes(), self.scalar_type(), device);
  if (out.numel() == 0) return out;
  const TensorRef o = Ref(out, name), i = Ref(self, name);
  std::array<int64_t, kMaxDims> s;
  std::copy(per_dim, per_dim + kMaxDims, s.begin());
  LaunchIndexing(device, IndexingKernel::kRoll, o, &i, name,
                 [=] { return kernels::Roll(o, i, s.data()); });
  return out;
}

// ---- repeat_interleave -----------------------------------------------------------
at::Tensor RepeatInterleaveIndex(const at::Tensor& repeats, std::optional<c10::SymInt> output_size) {
  const char* name = "aten::repeat_interleave";
  const int device = DeviceIndex(repeats);
  TORCH_CHECK(repeats.dim() <= 1, "repeat_interleave: repeats must be 0-dim or 1-dim, got ",
              repeats.dim(), "-dim");
  TORCH_CHECK(repeats.scalar_type() == at::kLong || repeats.scalar_type() == at::kInt,
              "repeat_interleave: repeats has to be Long or Int tensor, got ",
              repeats.scalar_type());
  const at::Tensor r = repeats.dim() == 0 ? repeats.reshape({1}) : repeats;
  int64_t total;
  if (output_size.has_value()) {
    total = output_size->expect_int();
  } else {
    total = r.numel() == 0 ? 0 : at::_local_scalar_dense(r.sum()).to<int64_t>();  // host sync
  }
  TORCH_CHECK(total >= 0, "repeat_interleave: repeats can not be negative (sum ", total, ")");
  at::Tensor out = Empty({total}, at::kLong, device);
  const TensorRef o = Ref(out, name), x = Ref(r, name);
  LaunchIndexing(device, IndexingKernel::kRepeatIndex, o, &x, name,
                 [=] { return kernels::RepeatIndex(o, x); });
  return out;
}

// ---- isin -----------------------------------------------------------------------
// generate()'s stopping criteria: isin(next_tokens, eos_token_ids).
at::Tensor& IsInInto(const at::Tensor& elements, const at::Tensor& test, bool invert,
                     at::Tensor& out) {
  const char* name = "aten::isin";
  const int device = CommonDevice(name, {&elements, &test, &out});
  TORCH_CHECK(out.scalar_type() == at::kBool, name, ": out must be bool, got ", out.scalar_type());
  const at::ScalarType common = at::result_type(elements, test);
  TORCH_CHECK(common != at::kBool, "Unsupported input type encountered for isin(): ", common);
  const at::Tensor e = CastTo(elements, common, name), t = CastTo(test, common, name);
  if (out.numel() == 0) return out;
  const TensorRef o = Ref(out, name), re = Ref(e, name), rt = Ref(t, name);
  LaunchIndexing(device, IndexingKernel::kIsIn, o, &re, name,
                 [=] { return kernels::IsIn(o, re, rt, invert); });
  return out;
}
at::Tensor IsIn(const at::Tensor& elements, const at::Tensor& test, bool, bool invert) {
  at::Tensor out = Empty(elements.sizes(), at::kBool, DeviceIndex(elements));
  return IsInInto(elements, test, invert, out);
}
at::Tensor& IsInOut(const at::Tensor& elements, const at::Tensor& test, bool, bool invert,
                    at::Tensor& out) {
  PrepareOut(out, elements.sizes(), at::kBool, "aten::isin");
  return IsInInto(elements, test, invert, out);
}
at::Tensor IsInScalar(const at::Tensor& elements, const at::Scalar& test, bool, bool invert) {
  at::Tensor t = Empty({}, elements.scalar_type(), DeviceIndex(elements));
  t.fill_(test);
  at::Tensor out = Empty(elements.sizes(), at::kBool, DeviceIndex(elements));
  return IsInInto(elements, t, invert, out);
}

// ---- histc -----------------------------------------------------------------------
// MoE routers count tokens per expert with histc on int32 expert ids (transformers
// picks int off the CPU, as CUDA's histc takes it): one kernel, no host sync even
// when the range comes from the data (min == max).
at::Tensor& HistcOut(const at::Tensor& self, int64_t bins, const at::Scalar& min,
                     const at::Scalar& max, at::Tensor& out) {
  const char* name = "aten::histc";
  const int device = CommonDevice(name, {&self, &out});
  TORCH_CHECK(self.scalar_type() != at::kBool, "torch.histc: input dtype bool is not supported");
  TORCH_CHECK(bins > 0, "torch.histc: bins must be > 0, got ", bins);
  const double lo = min.to<double>(), hi = max.to<double>();
  TORCH_CHECK(std::isfinite(lo) && std::isfinite(hi), "torch.histc: range of [", lo, ", ", hi,
              "] is not finite");
  TORCH_CHECK(lo <= hi, "torch.histc: max must be larger than min (got min ", lo, ", max ", hi,
              ")");
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "torch.histc: out dtype ",
              out.scalar_type(), " must match the input dtype ", self.scalar_type());
  PrepareOut(out, {bins}, self.scalar_type(), name);
  const TensorRef o = Ref(out, name), i = Ref(self, name);
  LaunchIndexing(device, IndexingKernel::kHistc, o, &i, name,
                 [=] { return kernels::Histc(o, i, bins, lo, hi); });
  return out;
}
at::Tensor Histc(const at::Tensor& self, int64_t bins, const at::Scalar& min,
                 const at::Scalar& max) {
  at::Tensor out = Empty({bins > 0 ? bins : 0}, self.scalar_type(), DeviceIndex(self));
  return HistcOut(self, bins, min, max, out);
}

// ---- multinomial -------------------------------------------------------------------
// Sampled generate() draws every token with multinomial: one kernel on variates
// drawn from the trn generator as CPU PyTorch draws them (Note [Multinomial]), so
// one seed gives CPU's tokens. No host sync: a bad distribution fails the stream
// with CPU's message, raised at the next synchronization.
TensorRef AsRows(TensorRef t) {  // a 1-D ref as one row
  if (t.ndim == 1) {
    t.ndim = 2;
    t.sizes[1] = t.sizes[0];
    t.strides[1] = t.strides[0];
    t.sizes[0] = 1;
    t.strides[0] = 0;
  }
  return t;
}
at::Tensor& MultinomialOut(const at::Tensor& self, int64_t n_sample, bool replacement,
                           std::optional<at::Generator> gen, at::Tensor& result) {
  const char* name = "aten::multinomial";
  const int device = CommonDevice(name, {&self, &result});
  TORCH_CHECK(result.scalar_type() == at::kLong, "multinomial expects Long tensor out, got: ",
              result.scalar_type());
  TORCH_CHECK(at::isFloatingType(self.scalar_type()),
              "multinomial only supports floating-point dtypes for input, got: ",
              self.scalar_type());
  TORCH_CHECK(n_sample > 0, "cannot sample n_sample <= 0 samples");
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "prob_dist must be 1 or 2 dim");
  const int64_t cats = self.size(-1);
  TORCH_CHECK(replacement || n_sample <= cats,
              "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  TORCH_CHECK(cats <= (int64_t{1} << 24), "number of categories cannot exceed 2^24");
  TORCH_CHECK(cats > 0, "multinomial: cannot sample from a distribution of 0 categories");
  ComputeDType(self.scalar_type(), name);  // Note [float64 policy]
  const int64_t rows = self.dim() == 1 ? 1 : self.size(0);
  PrepareOut(result,
             self.dim() == 1 ? at::IntArrayRef{n_sample} : at::IntArrayRef{rows, n_sample},
             at::kLong, name);
  if (result.numel() == 0) return result;
  // CPU draws n uniforms per row only with replacement and n > 1, else Exp(1)
  // variates like self (its layout: the generator fills in memory order).
  const bool uniform = replacement && n_sample > 1;
  const at::Tensor draws = uniform ? Empty({rows, n_sample}, at::kDouble, device).uniform_(0, 1, gen)
                                   : at::empty_like(self).exponential_(1, gen);
  const TensorRef o = AsRows(Ref(result, name)), p = AsRows(Ref(self, name));
  const TensorRef d = AsRows(Ref(draws, name));
  LaunchIndexing(device, IndexingKernel::kMultinomial, o, &p, name,
                 [=] { return kernels::Multinomial(o, p, d, uniform); });
  return result;  // draws' block is reused only in this stream's order
}
at::Tensor Multinomial(const at::Tensor& self, int64_t n_sample, bool replacement,
                       std::optional<at::Generator> gen) {
  at::Tensor out = Empty({0}, at::kLong, DeviceIndex(self));
  return MultinomialOut(self, n_sample, replacement, std::move(gen), out);
}

// ---- _assert_async -------------------------------------------------------------------
// A check on device data without a host sync (CUDA's device-side assert): the
// stream fails with the message, raised at the next synchronization.
void AssertAsyncMsg(const at::Tensor& self, c10::string_view message) {
  const char* name = "aten::_assert_async";
  const int device = CommonDevice(name, {&self});
  TORCH_CHECK(self.numel() != 0, "Boolean value of Tensor with no values is ambiguous");
  TORCH_CHECK(self.numel() == 1, "Boolean value of Tensor with more than one value is ambiguous");
  DType dtype;  // any dtype, float64 too: the check is exact
  TORCH_CHECK(ToDType(self.scalar_type(), &dtype), name, ": unsupported dtype ",
              self.scalar_type());
  const TensorRef in = Ref(self, name);
  std::string text = message.empty() ? "Assertion is failed" : std::string(message);
  LaunchIndexing(device, IndexingKernel::kAssert, in, &in, name,
                 [in, text = std::move(text)] { return kernels::AssertNonzero(in, text); });
}
void AssertAsync(const at::Tensor& self) {
  AssertAsyncMsg(self, "Expected Tensor with single nonzero value, but got zero");
}

// ---- nll_loss ----------------------------------------------------------------------
// cross_entropy = log_softmax + nll_loss: a causal LM's loss when labels are
// given (perplexity evaluation). One kernel; the host only checks shapes.
// uint8 targets (torch allows Byte) take the CPU fallback (Note [dtypes the
// kernels do not take]).
std::tuple<at::Tensor&, at::Tensor&> NllLossForwardOut(const at::Tensor& self,
                                                       const at::Tensor& target,
                                                       const std::optional<at::Tensor>& weight_opt,
                                                       int64_t reduction, c10::SymInt ignore,
                                                       at::Tensor& output,
                                                       at::Tensor& total_weight) {
  const char* name = "aten::nll_loss_forward";
  at::Tensor weight = weight_opt.has_value() ? *weight_opt : at::Tensor();
  const int device = CommonDevice(name, {&self, &target, &weight, &output, &total_weight});
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "input tensor should be 1D or 2D");
  TORCH_CHECK(target.dim() <= 1, "0D or 1D target tensor expected, multi-target not supported");
  const bool no_batch = self.dim() == 1 && target.dim() == 0;
  TORCH_CHECK(no_batch || self.size(0) == target.size(0), "size mismatch (got input: ",
              self.sizes(), ", target: ", target.sizes(), ")");
  TORCH_CHECK(target.scalar_type() == at::kLong,
              "expected target dtype to be Long or Byte, but got ", target.scalar_type());
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), name, ": expected a floating input, got ",
              self.scalar_type());
  const int64_t classes = self.size(-1);
  TORCH_CHECK(!weight.defined() || (weight.dim() <= 1 && weight.numel() == classes),
              "weight tensor should be defined either for all ", classes,
              " classes or no classes but got weight tensor of shape: ", weight.sizes());
  TORCH_CHECK(!weight.defined() || weight.scalar_type() == self.scalar_type(), name,
              ": expected weight of dtype ", self.scalar_type(), ", got ", weight.scalar_type());
  TORCH_CHECK(reduction >= 0 && reduction <= 2, name, ": reduction must be 0 (none), 1 (mean) ",
              "or 2 (sum), got ", reduction);
  if (weight.defined() && weight.dim() == 0) weight = weight.unsqueeze(0);
  const bool rows = reduction == 0 && self.dim() == 2;
  PrepareOut(output, rows ? at::IntArrayRef{self.size(0)} : at::IntArrayRef{},
             self.scalar_type(), name);
  PrepareOut(total_weight, {}, self.scalar_type(), name);
  const TensorRef o = Ref(output, name), tw = Ref(total_weight, name), i = Ref(self, name);
  const TensorRef t = Ref(target, name), w = weight.defined() ? Ref(weight, name) : NoRef();
  const int64_t ignore_index = ignore.guard_int(__FILE__, __LINE__);
  LaunchIndexing(device, IndexingKernel::kNllLoss, o, &i, name,
                 [=] { return kernels::NllLoss(o, tw, i, t, w, static_cast<int>(reduction),
                                               ignore_index); });
  return {output, total_weight};
}

std::tuple<at::Tensor, at::Tensor> NllLossForward(const at::Tensor& self, const at::Tensor& target,
                                                  const std::optional<at::Tensor>& weight,
                                                  int64_t reduction, c10::SymInt ignore_index) {
  const int device = DeviceIndex(self);
  at::Tensor output = Empty({0}, self.scalar_type(), device);
  at::Tensor total_weight = Empty({}, self.scalar_type(), device);
  NllLossForwardOut(self, target, weight, reduction, std::move(ignore_index), output, total_weight);
  return {output, total_weight};
}

// ---- unique -----------------------------------------------------------------------
// torch.unique without dim (ViLT, Grounding DINO, SAM 3 video call it in their
// forward) as trn ops: a stable sort, the group starts (each value unlike the
// one before it, so every NaN is its own group, sorted last, as CPU PyTorch),
// then masked_select, and for the inverse / counts a cumsum scattered back
// through the sort's permutation / the distances between starts. The output
// size is data-dependent: masked_select synchronizes, as on CUDA. Always
// sorted (torch's CPU result for sorted=False too).
std::tuple<at::Tensor, at::Tensor, at::Tensor> Unique2(const at::Tensor& self, bool /*sorted*/,
                                                       bool return_inverse, bool return_counts) {
  const int device = DeviceIndex(self);
  const at::Tensor flat = self.reshape({-1});
  const int64_t n = flat.numel();
  const auto longs = [&](at::IntArrayRef sizes) { return Empty(sizes, at::kLong, device); };
  if (n == 0) {
    at::Tensor inverse = return_inverse ? longs(self.sizes()) : longs({0});
    return {Empty({0}, self.scalar_type(), device), inverse, longs({0})};
  }
  const at::Tensor keys = self.scalar_type() == at::kBool ? flat.to(at::kLong) : flat;
  const auto [sorted, perm] = keys.sort(/*stable=*/true, 0, /*descending=*/false);
  at::Tensor start = Empty({n}, at::kBool, device);
  start.slice(0, 0, 1).fill_(true);
  if (n > 1) {
    at::Tensor rest = start.slice(0, 1);
    at::ne_out(rest, sorted.slice(0, 1), sorted.slice(0, 0, n - 1));
  }
  at::Tensor values = sorted.masked_select(start);
  if (self.scalar_type() == at::kBool) values = values.to(at::kBool);
  at::Tensor inverse = longs({0}), counts = longs({0});
  if (return_inverse) {
    const at::Tensor group = start.cumsum(0, at::kLong).sub_(1);
    inverse = longs({n}).scatter_(0, perm, group).view(self.sizes());
  }
  if (return_counts) {
    const at::Tensor first = start.nonzero().squeeze(1);
    const at::Tensor ends = at::cat({first.slice(0, 1), at::full({1}, n, first.options())});
    counts = ends.sub_(first);
  }
  return {values, inverse, counts};
}

// ---- kthvalue / median / nanmedian -------------------------------------------------
// Order statistics as trn ops: a stable sort along dim, then one gather at
// the wanted position. Stable, so ties give the first index (CPU PyTorch's
// for the lower median) and NaNs sort last in input order: median returns
// the first NaN of a row holding one, nanmedian the lower median of the rest.
enum class OrderStat { kKth, kMedian, kNanMedian };

std::tuple<at::Tensor, at::Tensor> SelectSorted(const at::Tensor& self, int64_t k, int64_t dim,
                                                bool keepdim, OrderStat stat, const char* name) {
  const at::Tensor x = self.dim() == 0 ? self.unsqueeze(0) : self;
  dim = at::maybe_wrap_dim(dim, x.dim());
  const int64_t n = x.size(dim);
  TORCH_CHECK(n > 0, name, "(): Expected reduction dim ", dim, " to have non-zero size.");
  if (stat == OrderStat::kKth) {
    TORCH_CHECK(k >= 1 && k <= n, "kthvalue(): selected number k out of range for dimension ",
                dim);
  }
  const auto [sorted, order] = x.sort(/*stable=*/true, dim, /*descending=*/false);
  std::vector<int64_t> one(static_cast<size_t>(x.dim()));
  for (int64_t d = 0; d < x.dim(); ++d) one[d] = d == dim ? 1 : x.size(d);
  at::Tensor pos;
  if (stat == OrderStat::kKth || !at::isFloatingType(x.scalar_type())) {
    const int64_t p = stat == OrderStat::kKth ? k - 1 : (n - 1) / 2;
    pos = at::full(one, p, order.options());
  } else {
    const at::Tensor valid = at::rsub(x.isnan().sum(dim, /*keepdim=*/true, at::kLong), n);
    if (stat == OrderStat::kMedian) {  // a NaN row: its first NaN, else the lower median
      pos = at::where(valid.lt(n), valid, at::full(one, (n - 1) / 2, order.options()));
    } else {  // the lower median of the non-NaN values (index 0 of an all-NaN row)
      pos = at::div(valid.sub(1), 2, "trunc").clamp_min_(0);
    }
  }
  at::Tensor values = sorted.gather(dim, pos), indices = order.gather(dim, pos);
  if (!keepdim || self.dim() == 0) {
    values = values.squeeze(dim);
    indices = indices.squeeze(dim);
  }
  return {values, indices};
}

std::tuple<at::Tensor&, at::Tensor&> SelectSortedInto(std::tuple<at::Tensor, at::Tensor> res,
                                                       at::Tensor& values, at::Tensor& indices,
                                                       const char* name) {
  PrepareOut(values, std::get<0>(res).sizes(), std::get<0>(res).scalar_type(), name);
  PrepareOut(indices, std::get<1>(res).sizes(), at::kLong, name);
  values.copy_(std::get<0>(res));
  indices.copy_(std::get<1>(res));
  return {values, indices};
}

std::tuple<at::Tensor, at::Tensor> Kthvalue(const at::Tensor& self, c10::SymInt k, int64_t dim,
                                            bool keepdim) {
  return SelectSorted(self, k.guard_int(__FILE__, __LINE__), dim, keepdim, OrderStat::kKth,
                      "kthvalue");
}
std::tuple<at::Tensor&, at::Tensor&> KthvalueOut(const at::Tensor& self, c10::SymInt k,
                                                 int64_t dim, bool keepdim, at::Tensor& values,
                                                 at::Tensor& indices) {
  return SelectSortedInto(Kthvalue(self, std::move(k), dim, keepdim), values, indices,
                          "aten::kthvalue");
}
template <OrderStat kStat>
std::tuple<at::Tensor, at::Tensor> MedianDim(const at::Tensor& self, int64_t dim, bool keepdim) {
  return SelectSorted(self, 0, dim, keepdim, kStat,
                      kStat == OrderStat::kMedian ? "median" : "nanmedian");
}
template <OrderStat kStat>
std::tuple<at::Tensor&, at::Tensor&> MedianDimOut(const at::Tensor& self, int64_t dim, bool keepdim,
                                                  at::Tensor& values, at::Tensor& indices) {
  return SelectSortedInto(MedianDim<kStat>(self, dim, keepdim), values, indices,
                          kStat == OrderStat::kMedian ? "aten::median" : "aten::nanmedian");
}
template <OrderStat kStat>
at::Tensor MedianAll(const at::Tensor& self) {
  if (self.numel() == 0) {  // torch: the median of nothing is NaN
    return at::full({}, std::numeric_limits<double>::quiet_NaN(), self.options());
  }
  return std::get<0>(MedianDim<kStat>(self.reshape({-1}), 0, false));
}
template <OrderStat kStat>
at::Tensor& MedianAllOut(const at::Tensor& self, at::Tensor& out) {
  const at::Tensor r = MedianAll<kStat>(self);
  PrepareOut(out, {}, r.scalar_type(), kStat == OrderStat::kMedian ? "aten::median"
                                                                   : "aten::nanmedian");
  return out.copy_(r);
}

// ---- searchsorted / bucketize / bincount ------------------------------------------
at::Tensor& SearchSortedInto(const at::Tensor& seq, const at::Tensor& self, bool out_int32,
                             bool right, at::Tensor& out, const char* name) {
  const int device = CommonDevice(name, {&seq, &self, &out});
  TORCH_CHECK(seq.dim() > 0, "torch.searchsorted(): boundaries tensor should have positive "
              "dimension, but got 0 dimension");
  TORCH_CHECK(seq.dim() == 1 || (seq.dim() == self.dim() &&
                                 seq.sizes().slice(0, seq.dim() - 1).equals(
                                     self.sizes().slice(0, self.dim() - 1))),
              "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
              "dimensions of boundaries tensor and input value tensor must match, but we got "
              "boundaries tensor ", seq.sizes(), " and input value tensor ", self.sizes());
  TORCH_CHECK(seq.scalar_type() != at::kBool && self.scalar_type() != at::kBool, name,
              ": bool tensors are not supported");
  const at::ScalarType common = at::result_type(seq, self);
  const at::Tensor s = seq.scalar_type() == common ? seq : seq.to(common);
  const at::Tensor v = self.scalar_type() == common ? self : self.to(common);
  PrepareOut(out, self.sizes(), out_int32 ? at::kInt : at::kLong, name);
  if (out.numel() == 0) return out;
  const TensorRef o = Ref(out, name), rs = Ref(s, name), rv = Ref(v, name);
  LaunchIndexing(device, IndexingKernel::kSearchSorted, o, &rv, name,
                 [=] { return kernels::SearchSorted(o, rs, rv, right); });
  return out;
}

bool SearchRight(bool right, std::optional<c10::string_view> side) {
  if (!side.has_value()) return right;
  const std::string s(*side);
  TORCH_CHECK(s == "left" || s == "right",
              "torch.searchsorted(): side can only be 'left' or 'right' but got ", s);
  TORCH_CHECK(!(s == "left" && right), "torch.searchsorted(): side and right can't be set to "
              "opposites, got side of left while right was True");
  return s == "right";
}

at::Tensor& SearchSortedOut(const at::Tensor& seq, const at::Tensor& self, bool out_int32,
                            bool right, std::optional<c10::string_view> side,
                            const std::optional<at::Tensor>& sorter, at::Tensor& out) {
  if (sorter.has_value() && sorter->defined()) {  // rare: CPU PyTorch sorts through it
    return at::native::call_fallback_fn_symint<&CpuFallback, at::_ops::searchsorted_Tensor_out>::
        call(seq, self, out_int32, right, side, sorter, out);
  }
  return SearchSortedInto(seq, self, out_int32, SearchRight(right, side), out,
                          "aten::searchsorted");
}
at::Tensor SearchSorted(const at::Tensor& seq, const at::Tensor& self, bool out_int32, bool right,
                        std::optional<c10::string_view> side,
                        const std::optional<at::Tensor>& sorter) {
  at::Tensor out = Empty({0}, out_int32 ? at::kInt : at::kLong, DeviceIndex(self));
  return SearchSortedOut(seq, self, out_int32, right, side, sorter, out);
}
at::Tensor& BucketizeOut(const at::Tensor& self, const at::Tensor& boundaries, bool out_int32,
                         bool right, at::Tensor& out) {
  TORCH_CHECK(boundaries.dim() == 1, "boundaries tensor must be 1 dimension, but got dim(",
              boundaries.dim(), ")");
  return SearchSortedInto(boundaries, self, out_int32, right, out, "aten::bucketize");
}
at::Tensor Bucketize(const at::Tensor& self, const at::Tensor& boundaries, bool out_int32,
                     bool right) {
  at::Tensor out = Empty({0}, out_int32 ? at::kInt : at::kLong, DeviceIndex(self));
  return BucketizeOut(self, boundaries, out_int32, right, out);
}

// The output length depends on the data: like CUDA, the host reads the range
// (min and max on the device, one synchronizing copy of both), then one kernel counts.
at::Tensor Bincount(const at::Tensor& self, const std::optional<at::Tensor>& weights_opt,
                    c10::SymInt minlength_s) {
  const char* name = "aten::bincount";
  const at::Tensor weights = weights_opt.has_value() ? *weights_opt : at::Tensor();
  const int device = CommonDevice(name, {&self, &weights});
  const int64_t minlength = minlength_s.guard_int(__FILE__, __LINE__);
  TORCH_CHECK(minlength >= 0, "minlength should be >= 0");
  TORCH_CHECK(self.dim() == 1 && at::isIntegralType(self.scalar_type(), /*includeBool=*/false),
              "bincount only supports 1-d non-negative integral inputs.");
  TORCH_CHECK(!weights.defined() || (weights.dim() == 1 && weights.size(0) == self.size(0)),
              "weights should be 1-d and have the same length as input");
  const at::Tensor in = (self.scalar_type() == at::kInt || self.scalar_type() == at::kLong)
                            ? self : self.to(at::kLong);
  int64_t bins = minlength;
  if (in.numel() > 0) {
    const at::Tensor range = at::cat({in.min().reshape({1}), in.max().reshape({1})}).cpu();
    const int64_t lo = range[0].item<int64_t>(), hi = range[1].item<int64_t>();
    TORCH_CHECK(lo >= 0, "bincount only supports 1-d non-negative integral inputs.");
    bins = std::max<int64_t>(bins, hi + 1);
  }
  // torch's CPU: float32 weights count in float32, any other weights in float64.
  const at::ScalarType dtype = !weights.defined()                      ? at::kLong
                               : weights.scalar_type() == at::kFloat ? at::kFloat
                                                                      : at::kDouble;
  at::Tensor out = Empty({bins}, dtype, device);
  if (bins == 0) return out;
  const TensorRef o = Ref(out, name), ri = Ref(in, name);
  const TensorRef rw = weights.defined() ? Ref(weights, name) : NoRef();
  LaunchIndexing(device, IndexingKernel::kBincount, o, &ri, name,
                 [=] { return kernels::Bincount(o, ri, rw); });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, lib) {
  NativeKernels m(lib);  // Note [dtypes the kernels do not take]
  m.impl("arange.start_out", TORCH_FN(ArangeOut));
  m.impl("linspace.out", TORCH_FN(LinspaceOut));
  m.impl("logspace.out", TORCH_FN(LogspaceOut));
  m.impl("tril", TORCH_FN(Triangle<false>));
  m.impl("tril.out", TORCH_FN(TriangleOut<false>));
  m.impl("tril_", TORCH_FN(TriangleInplace<false>));
  m.impl("triu", TORCH_FN(Triangle<true>));
  m.impl("triu.out", TORCH_FN(TriangleOut<true>));
  m.impl("triu_", TORCH_FN(TriangleInplace<true>));
  m.impl("gather", TORCH_FN(Gather));
  m.impl("gather.out", TORCH_FN(GatherOut));
  m.impl("scatter.src", TORCH_FN(ScatterSrc));
  m.impl("scatter.value", TORCH_FN(ScatterValue));
  m.impl("scatter_.src", TORCH_FN(ScatterSrcInplace));
  m.impl("scatter_.value", TORCH_FN(ScatterValueInplace));
  m.impl("scatter.src_out", TORCH_FN(ScatterSrcOut));
  m.impl("scatter.value_out", TORCH_FN(ScatterValueOut));
  m.impl("scatter_reduce.two", TORCH_FN(ScatterReduceTwo));
  m.impl("scatter_reduce_.two", TORCH_FN(ScatterReduceTwoInplace));
  m.impl("scatter_reduce.two_out", TORCH_FN(ScatterReduceTwoOut));
  m.impl("masked_scatter_", TORCH_FN(MaskedScatterInplace));
  m.impl("take", TORCH_FN(Take));
  m.impl("take.out", TORCH_FN(TakeOut));
  m.impl("_logcumsumexp", TORCH_FN(Logcumsumexp));
  m.impl("_logcumsumexp.out", TORCH_FN(LogcumsumexpOut));
  m.impl("_cummax_helper", TORCH_FN(CumExtremumHelper<true>));
  m.impl("_cummin_helper", TORCH_FN(CumExtremumHelper<false>));
  m.impl_all_dtypes("tril_indices", TORCH_FN(TrilIndices));
  m.impl_all_dtypes("triu_indices", TORCH_FN(TriuIndices));
  m.impl("scatter_add", TORCH_FN(ScatterAdd));
  m.impl("scatter_add_", TORCH_FN(ScatterAddInplace));
  m.impl("scatter_add.out", TORCH_FN(ScatterAddOut));
  m.impl("nonzero", TORCH_FN(Nonzero));
  m.impl("index.Tensor", TORCH_FN(IndexTensor));
  m.impl("index.Tensor_out", TORCH_FN(IndexTensorOut));
  m.impl("_index_put_impl_", TORCH_FN(IndexPutImpl));
  m.impl("masked_select", TORCH_FN(MaskedSelect));
  m.impl("index_add", TORCH_FN(IndexAdd));
  m.impl("index_add_", TORCH_FN(IndexAdd_));
  m.impl("index_add.out", TORCH_FN(IndexAddOut));
  m.impl("index_copy", TORCH_FN(IndexCopy));
  m.impl("index_copy_", TORCH_FN(IndexCopy_));
  m.impl("index_copy.out", TORCH_FN(IndexCopyOut));
  m.impl("index_fill.int_Scalar", TORCH_FN(IndexFillS));
  m.impl("index_fill_.int_Scalar", TORCH_FN(IndexFillS_));
  m.impl("index_fill.int_Tensor", TORCH_FN(IndexFillT));
  m.impl("index_fill_.int_Tensor", TORCH_FN(IndexFillT_));
  m.impl("cumsum", TORCH_FN(ScanFn<kernels::ScanOp::kSum>));
  m.impl("cumsum.out", TORCH_FN(ScanOut<kernels::ScanOp::kSum>));
  m.impl("cumsum_", TORCH_FN(ScanInplace<kernels::ScanOp::kSum>));
  m.impl("cumprod", TORCH_FN(ScanFn<kernels::ScanOp::kProd>));
  m.impl("cumprod.out", TORCH_FN(ScanOut<kernels::ScanOp::kProd>));
  m.impl("cumprod_", TORCH_FN(ScanInplace<kernels::ScanOp::kProd>));
  m.impl("sort.stable", TORCH_FN(SortStable));
  m.impl("sort.values_stable", TORCH_FN(SortStableOut));
  m.impl("topk", TORCH_FN(TopK));
  m.impl("topk.values", TORCH_FN(TopKOut));
  m.impl("flip", TORCH_FN(Flip));
  m.impl_complex("roll", TORCH_FN(Roll), TORCH_FN(ComplexRoll));
  m.impl("repeat_interleave.Tensor", TORCH_FN(RepeatInterleaveIndex));
  m.impl("isin.Tensor_Tensor", TORCH_FN(IsIn));
  m.impl("isin.Tensor_Tensor_out", TORCH_FN(IsInOut));
  m.impl("isin.Tensor_Scalar", TORCH_FN(IsInScalar));
  m.impl("histc", TORCH_FN(Histc));
  m.impl("histc.out", TORCH_FN(HistcOut));
  m.impl("multinomial", TORCH_FN(Multinomial));
  m.impl("multinomial.out", TORCH_FN(MultinomialOut));
  m.impl("_assert_async", TORCH_FN(AssertAsync));
  m.impl("_assert_async.msg", TORCH_FN(AssertAsyncMsg));
  m.impl("nll_loss_forward", TORCH_FN(NllLossForward));
  m.impl("nll_loss_forward.output", TORCH_FN(NllLossForwardOut));
  m.impl("searchsorted.Tensor", TORCH_FN(SearchSorted));
  m.impl("searchsorted.Tensor_out", TORCH_FN(SearchSortedOut));
  m.impl("bucketize.Tensor", TORCH_FN(Bucketize));
  m.impl("bucketize.Tensor_out", TORCH_FN(BucketizeOut));
  m.impl("bincount", TORCH_FN(Bincount));
  m.impl("_unique2", TORCH_FN(Unique2));
  m.impl("kthvalue", TORCH_FN(Kthvalue));
  m.impl("kthvalue.values", TORCH_FN(KthvalueOut));
  m.impl("median", TORCH_FN(MedianAll<OrderStat::kMedian>));
  m.impl("median.out", TORCH_FN(MedianAllOut<OrderStat::kMedian>));
  m.impl("median.dim", TORCH_FN(MedianDim<OrderStat::kMedian>));
  m.impl("median.dim_values", TORCH_FN(MedianDimOut<OrderStat::kMedian>));
  m.impl("nanmedian", TORCH_FN(MedianAll<OrderStat::kNanMedian>));
  m.impl("nanmedian.out", TORCH_FN(MedianAllOut<OrderStat::kNanMedian>));
  m.impl("nanmedian.dim", TORCH_FN(MedianDim<OrderStat::kNanMedian>));
  m.impl("nanmedian.dim_values", TORCH_FN(MedianDimOut<OrderStat::kNanMedian>));
}

}  // namespace trn::bridge::ops
