// Neural-network aten kernels of the trn device: softmax / log_softmax, the
// matmul family (mm, bmm, addmm, baddbmm; linear and matmul decompose onto
// them), layer_norm, the fused rms_norm, embedding, index_select, cat, clone.
//
// Note [rms_norm routing]: in torch 2.13 aten::rms_norm is
// CompositeImplicitAutograd and always calls aten::_fused_rms_norm, which is
// CompositeImplicitAutograd on CPU (the pow/mean/add/rsqrt/mul decomposition)
// and has an Autograd kernel. Registering _fused_rms_norm for PrivateUse1
// makes F.rms_norm one launch of the fused kernel while autograd still
// records it (rstd is returned for the backward). aten::rms_norm itself is
// left alone: a PrivateUse1 kernel there would shadow the autograd formula.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/core/IListRef.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/empty_strided.h>
#include <c10/util/accumulate.h>
#include <torch/library.h>

#include <limits>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

#include "torch_bridge/device.h"
#include "torch_bridge/fallback.h"
#include "torch_bridge/ops_complex.h"
#include "torch_bridge/ops_util.h"

namespace trn::bridge::ops {
namespace {

// ---- softmax ------------------------------------------------------------------------
at::Tensor& SoftmaxInto(const at::Tensor& self, int64_t dim, bool half_to_float, bool log,
                        at::Tensor& res, const char* name) {
  TORCH_CHECK(!half_to_float, name, ": half_to_float=True is not supported on trn");
  const int device = CommonDevice(name, {&self, &res});
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  ComputeDType(self.scalar_type(), name);
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), name,
              ": expected a floating dtype, got ", self.scalar_type());
  if (self.numel() == 0) return res;
  TensorRef o = Ref(res, name);
  TensorRef i = Ref(self, name);
  if (self.dim() == 0) {  // a scalar is a row of one element
    o.ndim = i.ndim = 1;
    o.sizes[0] = i.sizes[0] = 1;
    o.strides[0] = i.strides[0] = 1;
  }
  const int kd = static_cast<int>(d);
  Launch(device, kernels::DescribeSoftmax(o, log, name),
         [=] { return kernels::Softmax(o, i, kd, log); });
  return res;
}

at::Tensor Softmax(const at::Tensor& self, int64_t dim, bool half_to_float) {
  at::Tensor res = Empty(self.sizes(), self.scalar_type(), DeviceIndex(self));
  return SoftmaxInto(self, dim, half_to_float, false, res, "aten::_softmax");
}
at::Tensor& SoftmaxOut(const at::Tensor& self, int64_t dim, bool half_to_float,
                       at::Tensor& out) {
  PrepareOut(out, self.sizes(), self.scalar_type(), "aten::_softmax");
  return SoftmaxInto(self, dim, half_to_float, false, out, "aten::_softmax");
}
at::Tensor LogSoftmax(const at::Tensor& self, int64_t dim, bool half_to_float) {
  at::Tensor res = Empty(self.sizes(), self.scalar_type(), DeviceIndex(self));
  return SoftmaxInto(self, dim, half_to_float, true, res, "aten::_log_softmax");
}
at::Tensor& LogSoftmaxOut(const at::Tensor& self, int64_t dim, bool half_to_float,
                          at::Tensor& out) {
  PrepareOut(out, self.sizes(), self.scalar_type(), "aten::_log_softmax");
  return SoftmaxInto(self, dim, half_to_float, true, out, "aten::_log_softmax");
}

// ---- glu ---------------------------------------------------------------------------
// glu(x, dim) = a * sigmoid(b) over x's halves a, b along dim: one kernel
// reading both halves in place (Speech2Text's conv subsampler).
at::Tensor& GluInto(const at::Tensor& self, int64_t dim, at::Tensor& out) {
  const char* name = "aten::glu";
  const int device = CommonDevice(name, {&self, &out});
  TORCH_CHECK(self.dim() > 0, "glu does not support scalars because halving size must be even");
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()),
                              "\"glu\" not implemented for '",
                              c10::toString(self.scalar_type()), "'");
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  const int64_t n = self.size(d);
  TORCH_CHECK(n % 2 == 0, "Halving dimension must be even, but dimension ", d, " is size ", n);
  std::vector<int64_t> sizes = self.sizes().vec();
  sizes[d] = n / 2;
  PrepareOut(out, sizes, self.scalar_type(), name);
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), name, ": expected out dtype ",
              self.scalar_type(), ", got ", out.scalar_type());
  if (out.numel() == 0) return out;
  ComputeDType(self.scalar_type(), name);
  const TensorRef o = Ref(out, name), a = Ref(self.narrow(d, 0, n / 2), name);
  const TensorRef b = Ref(self.narrow(d, n / 2, n / 2), name);
  Launch(device, kernels::DescribeBinary(kernels::BinaryOp::kGlu, o, a, &b, name),
         [=] { return kernels::Binary(kernels::BinaryOp::kGlu, o, a, b); });
  return out;
}
at::Tensor Glu(const at::Tensor& self, int64_t dim) {
  at::Tensor out = Empty({0}, self.scalar_type(), DeviceIndex(self));
  return GluInto(self, dim, out);
}
at::Tensor& GluOut(const at::Tensor& self, int64_t dim, at::Tensor& out) {
  return GluInto(self, dim, out);
}

// ---- matmul family -------------------------------------------------------------------
// Note [Packed weight cache] (core/kernels/matmul.cc): a 2-D B operand (the
// weight of mm / addmm / linear) or grouped_mm's 3-D experts is keyed by its
// storage and _version(), taken here at enqueue. Inference tensors have no
// version counter and are never cached. The allocator tells the cache about
// every free.
[[maybe_unused]] const bool kPacksForgottenOnFree =
    (rt::SetFreeObserver(&kernels::ForgetPackedB), true);

std::shared_ptr<kernels::PackedB> PackedWeight(const at::Tensor& b, const TensorRef& rb) {
  if ((b.dim() != 2 && b.dim() != 3) || b.is_inference() || !b.has_storage()) return nullptr;
  return kernels::AcquirePackedB(rb, b.storage().data(), b._version());
}

// torch.ops.trnscope._gemm_pack_cache_stats(): [hits, packs, evictions,
// forgotten, entries, bytes, capacity] (kernels::PackCacheStats).
std::vector<int64_t> PackCacheStatsOp() {
  const kernels::PackCacheStats s = kernels::GetPackCacheStats();
  return {static_cast<int64_t>(s.hits),    static_cast<int64_t>(s.packs),
          static_cast<int64_t>(s.evictions), static_cast<int64_t>(s.forgotten),
          static_cast<int64_t>(s.entries), static_cast<int64_t>(s.bytes),
          static_cast<int64_t>(s.capacity)};
}
void PackCacheCapacityOp(int64_t bytes) {
  TORCH_CHECK(bytes >= 0, "_gemm_pack_cache_capacity: expected bytes >= 0, got ", bytes);
  kernels::SetPackCacheCapacity(static_cast<uint64_t>(bytes));
}
void PackCacheClearOp() {
  rt::Runtime::Get().WaitIdleAll();  // no queued GEMM is counted after the clear
  kernels::ClearPackCache();
}

TORCH_LIBRARY_FRAGMENT(trnscope, m) {
  m.def("_gemm_pack_cache_stats() -> int[]", &PackCacheStatsOp);
  m.def("_gemm_pack_cache_capacity(int bytes) -> ()", &PackCacheCapacityOp);
  m.def("_gemm_pack_cache_clear() -> ()", &PackCacheClearOp);
  m.def("gathered_bmm(Tensor w, Tensor ids, Tensor x, bool w_first) -> Tensor");
}

// res = beta * bias + alpha * (a @ b); a/b are [M,K]/[K,N] or [B,M,K]/[B,K,N].
// bias undefined (or beta == 0, where torch ignores it, NaNs included) = none.
void MatmulInto(const at::Tensor& res, const at::Tensor& a, const at::Tensor& b,
                const at::Tensor& bias, double beta, double alpha, const char* name) {
  const int device = CommonDevice(name, {&res, &a, &b, &bias});
  const at::ScalarType dtype = a.scalar_type();
  TORCH_CHECK(b.scalar_type() == dtype && (!bias.defined() || bias.scalar_type() == dtype),
              name, ": expected operands of one dtype, but got ", dtype, " and ",
              b.scalar_type(), bias.defined() ? " and " : "",
              bias.defined() ? c10::toString(bias.scalar_type()) : "");
  ComputeDType(dtype, name);
  TORCH_CHECK(at::isFloatingType(dtype), name, ": trn matmul supports floating dtypes, got ",
              dtype);
  if (res.numel() == 0) return;
  const bool use_bias = bias.defined() && beta != 0.0;
  const TensorRef o = Ref(res, name);
  if (a.size(-1) == 0) {  // empty K: the product is zero
    if (use_bias) {
      const TensorRef rbias = RefExpanded(bias, res.sizes(), name);
      Launch(device, kernels::DescribeBinary(kernels::BinaryOp::kMul, o, rbias, nullptr, name),
             [=] { return kernels::BinaryScalar(kernels::BinaryOp::kMul, o, rbias, beta); });
    } else {
      Launch(device, kernels::DescribeFill(o, name), [=] { return kernels::Fill(o, 0.0); });
    }
    return;
  }
  const TensorRef ra = Ref(a, name), rb = Ref(b, name);
  const TensorRef rbias = use_bias ? RefExpanded(bias, res.sizes(), name) : NoRef();
  // A 3-D b (bmm) is an activation as often as a weight: only 2-D ones are cached.
  std::shared_ptr<kernels::PackedB> packed = b.dim() == 2 ? PackedWeight(b, rb) : nullptr;
  // Moved in, not copied: no refcount decrement on this thread after the launch
  // (Note [No tensor copies around a launch] in ops_elementwise.cc).
  Launch(device, kernels::DescribeMatmul(o, ra, rb, rbias, name),
         [=, packed = std::move(packed)] {
           return kernels::Matmul(o, ra, rb, rbias, alpha, beta, packed.get());
         });
}

void CheckMm(const at::Tensor& a, const at::Tensor& b, const char* name) {
  TORCH_CHECK(a.dim() == 2, name, ": self must be a matrix, got ", a.dim(), "-D");
  TORCH_CHECK(b.dim() == 2, name, ": mat2 must be a matrix, got ", b.dim(), "-D");
  TORCH_CHECK(a.size(1) == b.size(0), name, ": mat1 and mat2 shapes cannot be multiplied (",
              a.size(0), "x", a.size(1), " and ", b.size(0), "x", b.size(1), ")");
}
void CheckBmm(const at::Tensor& a, const at::Tensor& b, const char* name) {
  TORCH_CHECK(a.dim() == 3 && b.dim() == 3, name, ": batch1 and batch2 must be 3-D, got ",
              a.dim(), "-D and ", b.dim(), "-D");
  TORCH_CHECK(a.size(0) == b.size(0) && a.size(2) == b.size(1), name,
              ": batch shapes cannot be multiplied (", a.sizes(), " and ", b.sizes(), ")");
}

at::Tensor Mm(const at::Tensor& a, const at::Tensor& b) {
  CheckMm(a, b, "aten::mm");
  at::Tensor res = Empty({a.size(0), b.size(1)}, a.scalar_type(), DeviceIndex(a));
  MatmulInto(res, a, b, at::Tensor(), 0.0, 1.0, "aten::mm");
  return res;
}
at::Tensor& MmOut(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  CheckMm(a, b, "aten::mm");
  PrepareOut(out, {a.size(0), b.size(1)}, a.scalar_type(), "aten::mm");
  TORCH_CHECK(out.scalar_type() == a.scalar_type(), "aten::mm: out dtype ", out.scalar_type(),
              " must match the input dtype ", a.scalar_type());
  MatmulInto(out, a, b, at::Tensor(), 0.0, 1.0, "aten::mm");
  return out;
}
at::Tensor Bmm(const at::Tensor& a, const at::Tensor& b) {
  CheckBmm(a, b, "aten::bmm");
  at::Tensor res = Empty({a.size(0), a.size(1), b.size(2)}, a.scalar_type(), DeviceIndex(a));
  MatmulInto(res, a, b, at::Tensor(), 0.0, 1.0, "aten::bmm");
  return res;
}
at::Tensor& BmmOut(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  CheckBmm(a, b, "aten::bmm");
  PrepareOut(out, {a.size(0), a.size(1), b.size(2)}, a.scalar_type(), "aten::bmm");
  TORCH_CHECK(out.scalar_type() == a.scalar_type(), "aten::bmm: out dtype ", out.scalar_type(),
              " must match the input dtype ", a.scalar_type());
  MatmulInto(out, a, b, at::Tensor(), 0.0, 1.0, "aten::bmm");
  return out;
}

// torch._grouped_mm (F.grouped_mm; transformers' MoE experts off the CPU):
// one kernel reads the group offsets on the device, where ATen's composite
// reads each offset back to the host (a sync per expert). Checks and messages
// as torch's CPU; bad offsets (decreasing, past the end) fail the kernel with
// the offset named, where the CPU silently computes clipped slices.
at::Tensor GroupedMm(const at::Tensor& a, const at::Tensor& b, const std::optional<at::Tensor>& offs,
                     const std::optional<at::Tensor>& bias,
                     std::optional<at::ScalarType> out_dtype) {
  const char* name = "aten::_grouped_mm";
  const at::Tensor no_offs;
  const at::Tensor& o = offs.has_value() ? *offs : no_offs;
  const int device = CommonDevice(name, {&a, &b, &o});
  TORCH_CHECK(a.dim() == 2 || a.dim() == 3, name, ": mat_a must be 2-D or 3-D, got ", a.dim(), "-D");
  TORCH_CHECK(b.dim() == 2 || b.dim() == 3, name, ": mat_b must be 2-D or 3-D, got ", b.dim(), "-D");
  const at::ScalarType dtype = a.scalar_type();
  TORCH_CHECK(dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf, name,
              ": expected mat_a to be Float32, BFloat16 or Float16 matrix, got ", dtype);
  TORCH_CHECK(b.scalar_type() == dtype, name, ": expected mat_b of mat_a's dtype ", dtype,
              ", got ", b.scalar_type());
  TORCH_CHECK(!bias.has_value(), name, ": bias is not supported (as torch's CPU)");
  TORCH_CHECK(!out_dtype.has_value() || *out_dtype == dtype, name,
              ": output dtype must match mat_a's dtype ", dtype, ", got ", *out_dtype);
  const bool a2 = a.dim() == 2, b2 = b.dim() == 2;
  TORCH_CHECK(o.defined() == (a2 || b2), name,
              ": offs must be given when an operand is 2-D and absent when both are 3-D (mat_a ",
              a.dim(), "-D, mat_b ", b.dim(), "-D, offs ", o.defined() ? "given" : "absent", ")");
  TORCH_CHECK(a.size(-1) == b.size(-2), name, ": contraction dims of mat_a ", a.sizes(),
              " and mat_b ", b.sizes(), " must match");
  at::DimVector sizes;
  if (o.defined()) {
    TORCH_CHECK(o.scalar_type() == at::kInt && o.dim() == 1, name,
                ": offs must be a 1-D int32 tensor, got ", o.dim(), "-D ", o.scalar_type());
    const int64_t groups = o.size(0);
    if (!a2) TORCH_CHECK(a.size(0) == groups, name, ": mat_a has ", a.size(0), " groups, offs ", groups);
    if (!b2) TORCH_CHECK(b.size(0) == groups, name, ": mat_b has ", b.size(0), " groups, offs ", groups);
    sizes = a2 && b2 ? at::DimVector{groups, a.size(0), b.size(1)}
                     : at::DimVector{a.size(-2), b.size(-1)};
  } else {
    TORCH_CHECK(a.size(0) == b.size(0), name, ": batch sizes of mat_a ", a.sizes(), " and mat_b ",
                b.sizes(), " must match");
    sizes = {a.size(0), a.size(1), b.size(2)};
  }
  at::Tensor res = Empty(sizes, dtype, device);
  if (res.numel() == 0) return res;
  const TensorRef ro = Ref(res, name), ra = Ref(a, name), rb = Ref(b, name);
  const TensorRef roffs = o.defined() ? Ref(o, name) : NoRef();
  // The experts' weights: packed once (Note [Packed weight cache]).
  std::shared_ptr<kernels::PackedB> packed = a2 && !b2 ? PackedWeight(b, rb) : nullptr;
  Launch(device, kernels::DescribeGroupedMatmul(ro, ra, rb, name),
         [=, packed = std::move(packed)] {
           return kernels::GroupedMatmul(ro, ra, rb, roffs, packed.get());
         });
  return res;
}

// torch.ops.trnscope.gathered_bmm(w, ids, x, w_first): bmm(w[ids], x) (or
// bmm(x, w[ids])) without the gather's copy; the compiler rewrites a MoE
// decode step's index + bmm into it (Note [Gathered bmm] in compile/backend.py).
at::Tensor GatheredBmm(const at::Tensor& w, const at::Tensor& ids, const at::Tensor& x,
                       bool w_first) {
  const char* name = "trnscope::gathered_bmm";
  const int device = CommonDevice(name, {&w, &ids, &x});
  TORCH_CHECK(w.dim() == 3 && x.dim() == 3, name, ": w and x must be 3-D, got ", w.dim(),
              "-D and ", x.dim(), "-D");
  TORCH_CHECK(ids.dim() == 1 && (ids.scalar_type() == at::kLong || ids.scalar_type() == at::kInt),
              name, ": ids must be a 1-D int64 or int32 tensor, got ", ids.dim(), "-D ",
              ids.scalar_type());
  TORCH_CHECK(ids.size(0) == x.size(0), name, ": ", ids.size(0), " ids for a batch of ", x.size(0));
  TORCH_CHECK(w.scalar_type() == x.scalar_type() && at::isFloatingType(w.scalar_type()), name,
              ": expected w and x of one floating dtype, got ", w.scalar_type(), " and ",
              x.scalar_type());
  const int64_t k = w_first ? w.size(2) : w.size(1);
  TORCH_CHECK(k == (w_first ? x.size(1) : x.size(2)), name, ": w ", w.sizes(), " and x ",
              x.sizes(), " cannot be multiplied");
  const at::DimVector sizes = w_first ? at::DimVector{x.size(0), w.size(1), x.size(2)}
                                      : at::DimVector{x.size(0), x.size(1), w.size(2)};
  at::Tensor res = Empty(sizes, w.scalar_type(), device);
  if (res.numel() == 0) return res;
  const TensorRef ro = Ref(res, name), rw = Ref(w, name), ri = Ref(ids, name), rx = Ref(x, name);
  Launch(device, kernels::DescribeGatheredMatmul(ro, rw, rx, w_first, name),
         [=] { return kernels::GatheredMatmul(ro, rw, ri, rx, w_first); });
  return res;
}

// A 1-D vector as a [1,K] row or a [K,1] column for the GEMM.
TensorRef AsMatrix(const at::Tensor& v, bool row, const char* name) {
  TensorRef r = Ref(v, name);
  const int64_t n = r.sizes[0], s = r.strides[0];
  r.ndim = 2;
  r.sizes[0] = row ? 1 : n;
  r.sizes[1] = row ? n : 1;
  r.strides[0] = row ? 0 : s;
  r.strides[1] = row ? s : 0;
  return r;
}

// dot and mv (matmul's 1-D paths) are GEMMs with a unit dimension.
void GemvInto(const at::Tensor& res, const TensorRef& a, const TensorRef& b,
              at::ScalarType dtype, const char* name) {
  const int device = CommonDevice(name, {&res});
  ComputeDType(dtype, name);
  TORCH_CHECK(at::isFloatingType(dtype), name, ": trn matmul supports floating dtypes, got ",
              dtype);
  if (res.numel() == 0) return;
  TensorRef o = Ref(res, name);
  o.ndim = 2;
  o.sizes[0] = a.sizes[0];
  o.sizes[1] = 1;
  o.strides[0] = res.dim() == 1 ? res.stride(0) : 0;
  o.strides[1] = 0;
  if (a.sizes[1] == 0) {
    Launch(device, kernels::DescribeFill(o, name), [=] { return kernels::Fill(o, 0.0); });
    return;
  }
  const TensorRef none = NoRef();
  Launch(device, kernels::DescribeMatmul(o, a, b, none, name),
         [=] { return kernels::Matmul(o, a, b, none, 1.0, 0.0); });
}

at::Tensor Dot(const at::Tensor& a, const at::Tensor& b) {
  const char* name = "aten::dot";
  TORCH_CHECK(a.dim() == 1 && b.dim() == 1, "1D tensors expected, but got ", a.dim(), "D and ",
              b.dim(), "D tensors");
  TORCH_CHECK(a.numel() == b.numel(), "inconsistent tensor size, expected tensor [", a.numel(),
              "] and src [", b.numel(), "] to have the same number of elements, but got ",
              a.numel(), " and ", b.numel(), " elements respectively");
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "dot : expected both vectors to have same dtype, but found ",
              a.scalar_type(), " and ", b.scalar_type());
  at::Tensor res = Empty({}, a.scalar_type(), CommonDevice(name, {&a, &b}));
  GemvInto(res, AsMatrix(a, true, name), AsMatrix(b, false, name), a.scalar_type(), name);
  return res;
}

at::Tensor Mv(const at::Tensor& m, const at::Tensor& v) {
  const char* name = "aten::mv";
  TORCH_CHECK(m.dim() == 2 && v.dim() == 1, "vector + matrix @ vector expected, got ", m.dim(),
              ", ", v.dim());
  TORCH_CHECK(m.size(1) == v.size(0), "size mismatch, got input (", m.size(0), "), mat (",
              m.size(0), "x", m.size(1), "), vec (", v.size(0), ")");
  TORCH_CHECK(m.scalar_type() == v.scalar_type(), name, ": expected operands of one dtype, got ",
              m.scalar_type(), " and ", v.scalar_type());
  at::Tensor res = Empty({m.size(0)}, m.scalar_type(), CommonDevice(name, {&m, &v}));
  GemvInto(res, Ref(m, name), AsMatrix(v, false, name), m.scalar_type(), name);
  return res;
}

void CheckBias(const at::Tensor& bias, at::IntArrayRef sizes, const char* name) {
  TORCH_CHECK(at::is_expandable_to(bias.sizes(), sizes), name, ": self of shape ",
              bias.sizes(), " is not broadcastable to the result shape ", sizes);
}

at::Tensor Addmm(const at::Tensor& bias, const at::Tensor& a, const at::Tensor& b,
                 const at::Scalar& beta, const at::Scalar& alpha) {
  CheckMm(a, b, "aten::addmm");
  const at::DimVector sizes{a.size(0), b.size(1)};
  CheckBias(bias, sizes, "aten::addmm");
  at::Tensor res = Empty(sizes, a.scalar_type(), DeviceIndex(a));
  MatmulInto(res, a, b, bias, beta.toDouble(), alpha.toDouble(), "aten::addmm");
  return res;
}
at::Tensor& AddmmOut(const at::Tensor& bias, const at::Tensor& a, const at::Tensor& b,
                     const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  CheckMm(a, b, "aten::addmm");
  const at::DimVector sizes{a.size(0), b.size(1)};
  CheckBias(bias, sizes, "aten::addmm");
  // The GEMM writes out tile by tile; a bias aliasing out is read from a copy.
  at::Tensor b_copy = bias;
  if (bias.is_same(out)) {
    b_copy = Empty(bias.sizes(), bias.scalar_type(), DeviceIndex(bias));
    LaunchCopy(DeviceIndex(bias), b_copy, bias, "aten::addmm");
  }
  PrepareOut(out, sizes, a.scalar_type(), "aten::addmm");
  MatmulInto(out, a, b, b_copy, beta.toDouble(), alpha.toDouble(), "aten::addmm");
  return out;
}
at::Tensor& Addmm_(at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                   const at::Scalar& beta, const at::Scalar& alpha) {
  return AddmmOut(self, a, b, beta, alpha, self);
}

at::Tensor Baddbmm(const at::Tensor& bias, const at::Tensor& a, const at::Tensor& b,
                   const at::Scalar& beta, const at::Scalar& alpha) {
  CheckBmm(a, b, "aten::baddbmm");
  const at::DimVector sizes{a.size(0), a.size(1), b.size(2)};
  CheckBias(bias, sizes, "aten::baddbmm");
  at::Tensor res = Empty(sizes, a.scalar_type(), DeviceIndex(a));
  MatmulInto(res, a, b, bias, beta.toDouble(), alpha.toDouble(), "aten::baddbmm");
  return res;
}
at::Tensor& BaddbmmOut(const at::Tensor& bias, const at::Tensor& a, const at::Tensor& b,
                       const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  CheckBmm(a, b, "aten::baddbmm");
  const at::DimVector sizes{a.size(0), a.size(1), b.size(2)};
  CheckBias(bias, sizes, "aten::baddbmm");
  at::Tensor b_copy = bias;
  if (bias.is_same(out)) {
    b_copy = Empty(bias.sizes(), bias.scalar_type(), DeviceIndex(bias));
    LaunchCopy(DeviceIndex(bias), b_copy, bias, "aten::baddbmm");
  }
  PrepareOut(out, sizes, a.scalar_type(), "aten::baddbmm");
  MatmulInto(out, a, b, b_copy, beta.toDouble(), alpha.toDouble(), "aten::baddbmm");
  return out;
}
at::Tensor& Baddbmm_(at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                     const at::Scalar& beta, const at::Scalar& alpha) {
  return BaddbmmOut(self, a, b, beta, alpha, self);
}

// ---- normalization --------------------------------------------------------------------
// Leading sizes + one 1 per normalized dim: torch's mean/rstd shape.
at::DimVector StatSizes(const at::Tensor& input, size_t norm_dims) {
  at::DimVector s(input.sizes().begin(), input.sizes().end());
  for (size_t i = 0; i < norm_dims; ++i) s[s.size() - 1 - i] = 1;
  return s;
}

void CheckNormalized(const at::Tensor& input, at::IntArrayRef shape,
                     const std::optional<at::Tensor>& weight, const char* name) {
  const int64_t n = static_cast<int64_t>(shape.size());
  TORCH_CHECK(n >= 1 && input.dim() >= n &&
                  input.sizes().slice(input.dim() - n).equals(shape),
              name, ": expected input with shape [*, ", shape, "], but got input of size ",
              input.sizes());
  if (weight.has_value() && weight->defined()) {
    TORCH_CHECK(weight->sizes().equals(shape), name, ": expected weight of shape ", shape,
                ", got ", weight->sizes());
  }
}

// The stat tensors seen with the leading dims only (trailing 1s dropped).
TensorRef LeadingRef(const at::Tensor& stat, size_t norm_dims, const char* name) {
  TensorRef r = Ref(stat, name);
  r.ndim -= static_cast<int>(norm_dims);
  return r;
}

// A norm's weight and bias (undefined when absent), device and floating dtype.
struct NormOperands {
  at::Tensor weight, bias;
  int device = 0;
  at::ScalarType dtype = at::kFloat;
};
NormOperands NormInputs(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                        const std::optional<at::Tensor>& bias, const char* name) {
  NormOperands r;
  r.weight = weight.value_or(at::Tensor());
  r.bias = bias.value_or(at::Tensor());
  r.device = CommonDevice(name, {&input, &r.weight, &r.bias});
  r.dtype = input.scalar_type();
  ComputeDType(r.dtype, name);
  TORCH_CHECK(at::isFloatingType(r.dtype), name, ": expected a floating dtype, got ", r.dtype);
  return r;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> NativeLayerNorm(
    const at::Tensor& input, at::IntArrayRef shape, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, double eps) {
  const char* name = "aten::native_layer_norm";
  CheckNormalized(input, shape, weight, name);
  const auto [w, bi, device, dtype] = NormInputs(input, weight, bias, name);
  const at::Tensor cw = w.defined() ? CastTo(w, dtype, name) : w;
  const at::Tensor cb = bi.defined() ? CastTo(bi, dtype, name) : bi;
  at::Tensor out = Empty(input.sizes(), dtype, device);
  const at::DimVector stat_sizes = StatSizes(input, shape.size());
  at::Tensor mean = Empty(stat_sizes, dtype, device);
  at::Tensor rstd = Empty(stat_sizes, dtype, device);
  if (input.numel() == 0) return {out, mean, rstd};
  const TensorRef o = Ref(out, name), i = Ref(input, name);
  const TensorRef rw = cw.defined() ? Ref(cw, name) : NoRef();
  const TensorRef rb = cb.defined() ? Ref(cb, name) : NoRef();
  const TensorRef rm = LeadingRef(mean, shape.size(), name);
  const TensorRef rr = LeadingRef(rstd, shape.size(), name);
  const int nd = static_cast<int>(shape.size());
  Launch(device, kernels::DescribeLayerNorm(o, i, rw, name),
         [=] { return kernels::LayerNorm(o, i, rw, rb, nd, eps, rm, rr); });
  return {out, mean, rstd};
}

// F.group_norm on trn calls native_group_norm with a contiguous input (the
// composite makes it so off the CPU); its CompositeExplicit decomposition
// took six kernels (var_mean, sub, mul, add, ...). mean / rstd are [N, group]
// in the input's dtype, or the parameters' when they differ (torch's mixed type).
std::tuple<at::Tensor, at::Tensor, at::Tensor> NativeGroupNorm(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, int64_t n, int64_t c, int64_t hw, int64_t group,
    double eps) {
  const char* name = "aten::native_group_norm";
  const auto [w, bi, device, dtype] = NormInputs(input, weight, bias, name);
  TORCH_CHECK(input.dim() >= 2 && input.size(0) == n && input.size(1) == c &&
                  n * c * hw == input.numel(),
              name, ": input of shape ", input.sizes(), " is not N=", n, ", C=", c, ", HxW=", hw);
  TORCH_CHECK(group > 0 && c % group == 0, name,
              ": expected the number of channels (", c, ") to be divisible by num_groups (",
              group, ")");
  for (const at::Tensor* p : {&w, &bi}) {
    TORCH_CHECK(!p->defined() || p->numel() == c, name, ": expected weight and bias of ", c,
                " elements, got ", p->defined() ? p->sizes() : at::IntArrayRef{});
    // torch's mixed type: half inputs may take float32 parameters, nothing else mixes.
    TORCH_CHECK(!p->defined() || p->scalar_type() == dtype || p->scalar_type() == at::kFloat,
                name, ": weight and bias must be ", dtype, " or float32, got ", p->scalar_type());
  }
  const at::ScalarType stat_dtype =
      w.defined() && w.scalar_type() != dtype ? w.scalar_type() : dtype;
  const at::Tensor x = input.is_contiguous() ? input : input.contiguous();
  at::Tensor out = Empty(input.sizes(), dtype, device);
  at::Tensor mean = Empty({n, group}, stat_dtype, device);
  at::Tensor rstd = Empty({n, group}, stat_dtype, device);
  if (mean.numel() == 0) return {out, mean, rstd};
  const TensorRef o = Ref(out, name), i = Ref(x, name);
  const TensorRef rw = w.defined() ? Ref(w, name) : NoRef();
  const TensorRef rb = bi.defined() ? Ref(bi, name) : NoRef();
  const TensorRef rm = Ref(mean, name), rr = Ref(rstd, name);
  Launch(device, kernels::DescribeGroupNorm(o, i, rw, name),
         [=] { return kernels::GroupNorm(o, i, rw, rb, group, eps, rm, rr); });
  return {out, mean, rstd};
}

// Note [rms_norm routing]. rstd is float32 (the opmath type) except for
// float64 inputs, where torch returns float64: the fused kernel writes a
// float32 rstd and the same launch widens it.
std::tuple<at::Tensor, at::Tensor> FusedRmsNorm(const at::Tensor& input, at::IntArrayRef shape,
                                                const std::optional<at::Tensor>& weight,
                                                std::optional<double> eps) {
  const char* name = "aten::rms_norm";
  CheckNormalized(input, shape, weight, name);
  const at::Tensor w = weight.value_or(at::Tensor());
  const int device = CommonDevice(name, {&input, &w});
  const at::ScalarType dtype = input.scalar_type();
  ComputeDType(dtype, name);
  TORCH_CHECK(at::isFloatingType(dtype), name, ": expected a floating dtype, got ", dtype);
  const bool is_double = dtype == at::kDouble;
  // torch's default eps is the epsilon of the opmath type.
  const double e = eps.has_value() ? *eps
                   : is_double     ? std::numeric_limits<double>::epsilon()
                                   : std::numeric_limits<float>::epsilon();
  const at::Tensor cw = w.defined() ? CastTo(w, dtype, name) : w;
  at::Tensor out = Empty(input.sizes(), dtype, device);
  const at::DimVector stat_sizes = StatSizes(input, shape.size());
  at::Tensor rstd = Empty(stat_sizes, is_double ? at::kDouble : at::kFloat, device);
  if (input.numel() == 0) return {out, rstd};
  at::Tensor rstd32 = is_double ? Empty(stat_sizes, at::kFloat, device) : rstd;
  const TensorRef o = Ref(out, name), i = Ref(input, name);
  const TensorRef rw = cw.defined() ? Ref(cw, name) : NoRef();
  const TensorRef r32 = LeadingRef(rstd32, shape.size(), name);
  const TensorRef r64 = is_double ? LeadingRef(rstd, shape.size(), name) : NoRef();
  const int nd = static_cast<int>(shape.size());
  Launch(device, kernels::DescribeRmsNorm(o, i, rw, name), [=]() -> Status {
    Status s = kernels::RmsNorm(o, i, rw, nd, e, r32);
    if (!s.ok() || r64.data == nullptr) return s;
    return kernels::Copy(r64, r32);
  });
  return {out, rstd};
}

// ---- indexing and layout ---------------------------------------------------------------
void CheckIndex(const at::Tensor& index, const char* name) {
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt, name,
              ": expected an index of dtype int64 or int32, but got ", index.scalar_type());
}

// A contiguous copy of `t` when needed (the kernels take a 1-D index).
at::Tensor Contiguous(const at::Tensor& t, const char* name) {
  if (t.is_contiguous()) return t;
  at::Tensor c = Empty(t.sizes(), t.scalar_type(), DeviceIndex(t));
  LaunchCopy(DeviceIndex(t), c, t, name);
  return c;
}

void IndexSelectInto(const at::Tensor& out, const at::Tensor& self, int64_t dim,
                     const at::Tensor& index, const char* name) {
  const int device = CommonDevice(name, {&out, &self, &index});
  if (out.numel() == 0) return;
  const at::Tensor idx = Contiguous(index, name);
  const TensorRef ri = FlatRef(idx, name);
  const TensorRef o = Ref(out, name), i = Ref(self, name);
  const int d = static_cast<int>(dim);
  Launch(device, kernels::DescribeIndexSelect(o, ri, name),
         [=] { return kernels::IndexSelect(o, i, d, ri); });
}

at::DimVector IndexSelectSizes(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  at::DimVector sizes(self.sizes().begin(), self.sizes().end());
  sizes[dim] = index.numel();
  return sizes;
}

at::Tensor IndexSelect(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  const char* name = "aten::index_select";
  CheckIndex(index, name);
  TORCH_CHECK(index.dim() <= 1, name, ": index must be 0-D or 1-D, got ", index.dim(), "-D");
  TORCH_CHECK(self.dim() >= 1, name, ": self must have at least one dimension");
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  at::Tensor out = Empty(IndexSelectSizes(self, d, index), self.scalar_type(), DeviceIndex(self));
  IndexSelectInto(out, self, d, index, name);
  return out;
}
at::Tensor& IndexSelectOut(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                           at::Tensor& out) {
  const char* name = "aten::index_select";
  CheckIndex(index, name);
  TORCH_CHECK(index.dim() <= 1, name, ": index must be 0-D or 1-D, got ", index.dim(), "-D");
  TORCH_CHECK(self.dim() >= 1, name, ": self must have at least one dimension");
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  PrepareOut(out, IndexSelectSizes(self, d, index), self.scalar_type(), name);
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), name, ": out dtype ", out.scalar_type(),
              " must match self dtype ", self.scalar_type());
  IndexSelectInto(out, self, d, index, name);
  return out;
}

// embedding = index_select(weight, 0, indices.flatten()) in the output's 2-D
// view. padding_idx only matters for the gradient.
at::Tensor Embedding(const at::Tensor& weight, const at::Tensor& indices, int64_t padding_idx,
                     bool scale_grad_by_freq, bool sparse) {
  const char* name = "aten::embedding";
  TORCH_CHECK(weight.dim() == 2, name, ": 'weight' must be 2-D, got ", weight.dim(), "-D");
  CheckIndex(indices, name);
  at::DimVector sizes(indices.sizes().begin(), indices.sizes().end());
  sizes.push_back(weight.size(1));
  at::Tensor out = Empty(sizes, weight.scalar_type(), DeviceIndex(weight));
  const int device = CommonDevice(name, {&weight, &indices});
  if (out.numel() == 0) return out;
  const at::Tensor idx = Contiguous(indices, name);
  const TensorRef ri = FlatRef(idx, name);
  TensorRef o = Ref(out, name);
  o.ndim = 2;
  o.sizes[0] = indices.numel();
  o.sizes[1] = weight.size(1);
  o.strides[0] = weight.size(1);
  o.strides[1] = 1;
  const TensorRef w = Ref(weight, name);
  Launch(device, kernels::DescribeIndexSelect(o, ri, name),
         [=] { return kernels::IndexSelect(o, w, 0, ri); });
  return out;
}

// nn.EmbeddingBag (F.embedding_bag): one kernel reads the indices and offsets
// on the device, no sync. _embedding_bag (weights that require grad, also
// under no_grad) and _embedding_bag_forward_only give the same outputs; the
// auxiliary ones follow CPU's conventions, which its backward reads.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> EmbeddingBagImpl(
    const char* name, const at::Tensor& weight, const at::Tensor& indices,
    const at::Tensor& offsets, int64_t mode, const std::optional<at::Tensor>& psw_opt,
    bool include_last_offset, int64_t padding_idx, bool forward_only) {
  TORCH_CHECK(weight.dim() == 2, name, ": weight has to be a 2D Tensor, but got Tensor of "
              "dimension ", weight.dim());
  TORCH_CHECK(indices.dim() == 1, name, ": input has to be a 1D or 2D Tensor, but got Tensor "
              "of dimension ", indices.dim());
  TORCH_CHECK(offsets.dim() == 1, name, ": offsets has to be a 1D Tensor, but got Tensor of "
              "dimension ", offsets.dim());
  CheckIndex(indices, name);
  CheckIndex(offsets, name);
  TORCH_CHECK(at::isFloatingType(weight.scalar_type()), name, ": expected a floating weight, "
              "got ", weight.scalar_type());
  TORCH_CHECK(mode >= 0 && mode <= 2, name, ": mode has to be 0 (sum), 1 (mean) or 2 (max), "
              "got ", mode);
  const at::Tensor psw = psw_opt.has_value() ? *psw_opt : at::Tensor();
  if (psw.defined()) {
    TORCH_CHECK(mode == 0, "embedding_bag: per_sample_weights was not None. "
                "per_sample_weights is only supported for mode='sum' (got mode='",
                mode == 1 ? "mean" : "max", "'). Please open a feature request on GitHub.");
    TORCH_CHECK(psw.dim() == 1 && psw.numel() == indices.numel(), name,
                ": expected per_sample_weights to be 1D with the same number of elements as "
                "indices (", indices.numel(), "), got ", psw.sizes());
    TORCH_CHECK(psw.scalar_type() == weight.scalar_type(), name, ": expected per_sample_weights "
                "of dtype ", weight.scalar_type(), ", got ", psw.scalar_type());
  }
  const int64_t bags = offsets.size(0) - (include_last_offset ? 1 : 0);
  TORCH_CHECK(bags >= 0, name, ": include_last_offset needs at least one offset");
  const int device = CommonDevice(name, {&weight, &indices, &offsets, &psw});
  const int64_t n = indices.size(0), dim = weight.size(1);
  // The auxiliary outputs' dtype: CPU promotes indices and offsets first.
  const at::ScalarType aux_dtype = at::promote_types(indices.scalar_type(), offsets.scalar_type());
  ComputeDType(weight.scalar_type(), name);  // counts float64 (Note [float64 policy])
  at::Tensor out = Empty({bags, dim}, weight.scalar_type(), device);
  at::Tensor offset2bag = Empty({mode == 0 && padding_idx < 0 ? 0 : n}, aux_dtype, device);
  at::Tensor bag_size, max_indices;
  if (mode == 0) {  // zeros; forward_only's have one per offset (CPU's sizes)
    const int64_t aux = forward_only ? offsets.size(0) : bags;
    bag_size = at::zeros({aux}, offsets.options().dtype(aux_dtype));
    max_indices = at::zeros({aux}, offsets.options().dtype(aux_dtype));
  } else {
    bag_size = Empty({bags}, aux_dtype, device);
    max_indices = Empty(mode == 2 ? at::IntArrayRef{bags, dim} : at::IntArrayRef{bags}, aux_dtype,
                        device);
  }
  if (bags > 0) {
    kernels::EmbeddingBagRefs r;
    r.out = Ref(out, name);
    r.offset2bag = Ref(offset2bag, name);
    r.bag_size = mode == 0 ? NoRef() : Ref(bag_size, name);
    r.max_indices = mode == 0 ? NoRef() : Ref(max_indices, name);
    r.weight = Ref(weight, name);
    r.indices = Ref(indices, name);
    r.offsets = Ref(offsets, name);
    r.per_sample_weights = psw.defined() ? Ref(psw, name) : NoRef();
    r.mode = static_cast<int>(mode);
    r.include_last_offset = include_last_offset;
    r.padding_idx = padding_idx;
    Launch(device, kernels::DescribeEmbeddingBag(r, name),
           [=] { return kernels::EmbeddingBag(r); });
  }
  return {out, offset2bag, bag_size, max_indices};
}
template <bool kForwardOnly>
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> EmbeddingBag(
    const at::Tensor& weight, const at::Tensor& indices, const at::Tensor& offsets,
    bool /*scale_grad_by_freq*/, int64_t mode, bool /*sparse*/,
    const std::optional<at::Tensor>& per_sample_weights, bool include_last_offset,
    int64_t padding_idx) {
  return EmbeddingBagImpl(kForwardOnly ? "aten::_embedding_bag_forward_only"
                                       : "aten::_embedding_bag",
                          weight, indices, offsets, mode, per_sample_weights,
                          include_last_offset, padding_idx, kForwardOnly);
}

// cat: torch's legacy rule skips 1-D empty inputs; dtypes promote.
at::Tensor CatImpl(const at::ITensorListRef& tensors, int64_t dim, at::Tensor* out) {
  const char* name = "aten::cat";
  const auto mat = tensors.materialize();
  TORCH_CHECK(!mat.empty(), "torch.cat(): expected a non-empty list of Tensors");
  std::vector<at::Tensor> inputs;
  inputs.reserve(mat.size());
  at::ScalarType dtype = mat[0].get().scalar_type();
  const at::Tensor* ref = nullptr;  // first non-skipped input: gives the shape
  for (const at::Tensor& t : mat) {
    dtype = at::promote_types(dtype, t.scalar_type());
    if (t.dim() == 1 && t.size(0) == 0) continue;
    if (ref == nullptr) ref = &t;
    inputs.push_back(t);
  }
  const int device = DeviceIndex(out != nullptr ? *out : mat[0].get());
  if (ref == nullptr) {  // only legacy empty inputs
    if (out == nullptr) return Empty({0}, dtype, device);
    PrepareOut(*out, {0}, dtype, name);
    return *out;
  }
  TORCH_CHECK(ref->dim() > 0, "zero-dimensional tensor (at position 0) cannot be concatenated");
  const int64_t d = at::maybe_wrap_dim(dim, ref->dim());
  at::DimVector sizes(ref->sizes().begin(), ref->sizes().end());
  sizes[d] = 0;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const at::Tensor& t = inputs[k];
    TORCH_CHECK(t.dim() == ref->dim(), "Tensors must have same number of dimensions: got ",
                ref->dim(), " and ", t.dim());
    for (int64_t j = 0; j < t.dim(); ++j) {
      TORCH_CHECK(j == d || t.size(j) == ref->size(j),
                  "Sizes of tensors must match except in dimension ", d,
                  ". Expected size ", ref->size(j), " but got size ", t.size(j),
                  " for tensor number ", k, " in the list.");
    }
    TORCH_CHECK(DeviceIndex(t) == device, name, ": expected all tensors on trn:", device);
    sizes[d] += t.size(d);
  }
  // A copy: float64 values move exactly, no float64 policy (Ref checks the dtype).
  at::Tensor res;
  if (out == nullptr) {
    res = Empty(sizes, dtype, device);
  } else {
    PrepareOut(*out, sizes, dtype, name);
    res = *out;
  }
  if (res.numel() == 0) return res;
  const at::Tensor dst = res.scalar_type() == dtype ? res : Empty(sizes, dtype, device);
  std::vector<TensorRef> refs;
  refs.reserve(inputs.size());
  for (at::Tensor& t : inputs) {
    t = CastTo(t, dtype, name);
    refs.push_back(Ref(t, name));
  }
  const TensorRef o = Ref(dst, name);
  const int kd = static_cast<int>(d);
  Launch(device, kernels::DescribeCat(o, name),
         [o, refs = std::move(refs), kd] { return kernels::Cat(o, refs, kd); });
  if (!dst.is_same(res)) LaunchCopy(device, res, dst, name);
  return res;
}

at::Tensor Cat(const at::ITensorListRef& tensors, int64_t dim) {
  return CatImpl(tensors, dim, nullptr);
}
at::Tensor& CatOut(const at::ITensorListRef& tensors, int64_t dim, at::Tensor& out) {
  CatImpl(tensors, dim, &out);
  return out;
}

// repeat: one Copy of `self` broadcast into a view of the result. ATen's own
// composite views the result with 2 dims per input dim ((repeat, size)
// pairs), past the kernels' 8 dims from 5-D inputs on (LongT5's
// transient-global attention); here a pair keeps only the members that are
// not 1, and a view still over 8 dims repeats one dim at a time in 3-D.
at::Tensor Repeat(const at::Tensor& self, c10::SymIntArrayRef repeats_sym) {
  const at::DimVector repeats(C10_AS_INTARRAYREF_SLOW(repeats_sym).begin(),
                              C10_AS_INTARRAYREF_SLOW(repeats_sym).end());
  const int64_t n = static_cast<int64_t>(repeats.size());
  TORCH_CHECK(n >= self.dim(), "Number of dimensions of repeat dims can not be smaller than "
              "number of dimensions of tensor");
  at::DimVector sizes(static_cast<size_t>(n - self.dim()), 1);
  sizes.append(self.sizes().begin(), self.sizes().end());
  at::DimVector target, src_shape, tiled;
  for (int64_t d = 0; d < n; ++d) {
    TORCH_CHECK(repeats[d] >= 0, "Trying to create tensor with negative dimension ", repeats[d],
                ": ", at::IntArrayRef(repeats));
    target.push_back(repeats[d] * sizes[d]);
    if (repeats[d] != 1) src_shape.push_back(1), tiled.push_back(repeats[d]);
    if (sizes[d] != 1) src_shape.push_back(sizes[d]), tiled.push_back(sizes[d]);
  }
  if (static_cast<int>(tiled.size()) > kMaxDims) {
    // One dim at a time, each a 3-D copy: [A, 1, B] broadcast into [A, r, B].
    at::Tensor y = self.reshape(sizes);
    for (int64_t d = 0; d < n; ++d) {
      if (repeats[d] == 1) continue;
      const int64_t a = c10::multiply_integers(y.sizes().begin(), y.sizes().begin() + d);
      const int64_t b = c10::multiply_integers(y.sizes().begin() + d, y.sizes().end());
      at::DimVector grown(y.sizes().begin(), y.sizes().end());
      grown[d] *= repeats[d];
      at::Tensor next = Empty(grown, self.scalar_type(), DeviceIndex(self));
      if (next.numel() != 0) {
        next.view({a, repeats[d], b}).copy_(y.reshape({a, 1, b}).expand({a, repeats[d], b}));
      }
      y = next;
    }
    return y;
  }
  at::Tensor result = Empty(target, self.scalar_type(), DeviceIndex(self));
  if (result.numel() == 0) return result;
  result.view(tiled).copy_(self.reshape(src_shape).expand(tiled));
  return result;
}

// clone: one Copy launch; Preserve lays the copy out as torch's empty_like
// does (dense strides kept; a non-dense view, such as a slice of a
// channels_last tensor, keeps its stride order), and channels_last(_3d)
// gives that layout (model.to(memory_format=...)).
// Every dtype: data movement. A dtype the kernels do not take (complex, uint8,
// ...) is copied on the host after a sync (device memory is host memory),
// resolving a conj / neg bit as CPU's copy does. Neither the CPU fallback nor
// copy_ may do it: both resolve the conj bit by cloning on the device first.
at::Tensor Clone(const at::Tensor& self, std::optional<at::MemoryFormat> memory_format) {
  const char* name = "aten::clone";
  const int device = DeviceIndex(self);
  const auto fmt = memory_format.value_or(at::MemoryFormat::Preserve);
  at::Tensor out;
  if (fmt == at::MemoryFormat::Preserve) {
    out = self.is_contiguous() ? Empty(self.sizes(), self.scalar_type(), device)
                               : at::empty_like(self);
  } else if (fmt == at::MemoryFormat::Contiguous) {
    out = Empty(self.sizes(), self.scalar_type(), device);
  } else {  // channels_last needs 4-D, channels_last_3d 5-D: torch's own check names it
    out = at::empty(self.sizes(), self.options().memory_format(fmt));
  }
  if (self.scalar_type() == at::kComplexFloat && PairsViewFits(self)) {  // bits resolved
    CopyComplex(out, self);
    return out;
  }
  if (self.is_neg() && dtypes::Native(self)) {  // a negative view (z.conj().imag): resolved
    LaunchCopy(device, out, self, name);
    return out.neg_();
  }
  if (!dtypes::Native(self)) {
    SyncCurrentStream(device);
    at::Tensor src = HostView(self);
    if (self.is_conj()) src = src.conj();
    if (self.is_neg()) src = src._neg_view();
    HostView(out).copy_(src);
    return out;
  }
  LaunchCopy(device, out, self, name);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, lib) {
  NativeKernels m(lib);  // Note [dtypes the kernels do not take]
  m.impl("_softmax", TORCH_FN(Softmax));
  m.impl("glu", TORCH_FN(Glu));
  m.impl("glu.out", TORCH_FN(GluOut));
  m.impl("_softmax.out", TORCH_FN(SoftmaxOut));
  m.impl("_log_softmax", TORCH_FN(LogSoftmax));
  m.impl("_log_softmax.out", TORCH_FN(LogSoftmaxOut));
  m.impl_floating("mm", TORCH_FN(Mm));
  m.impl_floating("mm.out", TORCH_FN(MmOut));
  m.impl_floating("bmm", TORCH_FN(Bmm));
  m.impl("_grouped_mm", TORCH_FN(GroupedMm));
  m.impl_floating("bmm.out", TORCH_FN(BmmOut));
  m.impl_floating("dot", TORCH_FN(Dot));
  m.impl_floating("mv", TORCH_FN(Mv));
  m.impl_floating("addmm", TORCH_FN(Addmm));
  m.impl_floating("addmm_", TORCH_FN(Addmm_));
  m.impl_floating("addmm.out", TORCH_FN(AddmmOut));
  m.impl_floating("baddbmm", TORCH_FN(Baddbmm));
  m.impl_floating("baddbmm_", TORCH_FN(Baddbmm_));
  m.impl_floating("baddbmm.out", TORCH_FN(BaddbmmOut));
  m.impl("native_layer_norm", TORCH_FN(NativeLayerNorm));
  m.impl("native_group_norm", TORCH_FN(NativeGroupNorm));
  m.impl("_fused_rms_norm", TORCH_FN(FusedRmsNorm));
  m.impl("index_select", TORCH_FN(IndexSelect));
  m.impl("index_select.out", TORCH_FN(IndexSelectOut));
  m.impl("embedding", TORCH_FN(Embedding));
  m.impl("_embedding_bag", TORCH_FN(EmbeddingBag<false>));
  m.impl("_embedding_bag_forward_only", TORCH_FN(EmbeddingBag<true>));
  m.impl("repeat", TORCH_FN(Repeat));
  m.impl_complex("cat", TORCH_FN(Cat), TORCH_FN(ComplexCat));
  m.impl("cat.out", TORCH_FN(CatOut));
  m.impl_all_dtypes("clone", TORCH_FN(Clone));
}

TORCH_LIBRARY_IMPL(trnscope, PrivateUse1, m) {
  m.impl("gathered_bmm", TORCH_FN(GatheredBmm));
}

}  // namespace trn::bridge::ops
