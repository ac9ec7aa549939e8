// Helpers of the aten compute kernels: see ops_util.h.
#include "torch_bridge/ops_util.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <c10/core/DefaultDtype.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <torch/library.h>

#include <atomic>
#include <map>
#include <mutex>
#include <string>

#include "core/kernels/amx.h"

namespace trn::bridge::ops {

namespace {

// Launch counts by kernel name, for tests (see Launch in ops_util.h).
std::atomic<bool> counting{false};
std::mutex counts_mutex;
std::map<std::string, int64_t> counts;

void CountLaunches(bool enable) {
  std::lock_guard<std::mutex> lock(counts_mutex);
  counts.clear();
  counting.store(enable, std::memory_order_relaxed);
}

std::string LaunchCounts() {
  std::lock_guard<std::mutex> lock(counts_mutex);
  std::string s;
  for (const auto& [name, n] : counts) {
    if (!s.empty()) s += ';';
    s += name + "=" + std::to_string(n);
  }
  return s;
}

}  // namespace

void Launch(int device, const rt::KernelInfo& info, rt::Task&& task) {
  if (counting.load(std::memory_order_relaxed)) {
    std::lock_guard<std::mutex> lock(counts_mutex);
    ++counts[info.name];
  }
  bridge::Launch(device, info, std::move(task));
}

double CpuScalarValue(const at::Tensor& t) {
  const void* p = t.const_data_ptr();
  switch (t.scalar_type()) {
    case at::kFloat: return *static_cast<const float*>(p);
    case at::kDouble: return *static_cast<const double*>(p);
    case at::kLong: return static_cast<double>(*static_cast<const int64_t*>(p));
    case at::kInt: return *static_cast<const int32_t*>(p);
    case at::kBool: return *static_cast<const bool*>(p) ? 1.0 : 0.0;
    case at::kBFloat16: return static_cast<float>(*static_cast<const c10::BFloat16*>(p));
    case at::kHalf: return static_cast<float>(*static_cast<const c10::Half*>(p));
    default: break;
  }
  TORCH_CHECK(!t.is_complex(), "trn: complex scalar operands are not supported (got ",
              t.scalar_type(), ")");
  return t.item().toDouble();
}

int CommonDevice(const char* op, std::initializer_list<const at::Tensor*> ts) {
  int device = -1;
  for (const at::Tensor* t : ts) {
    if (t == nullptr || !t->defined()) continue;
    int d = DeviceIndex(*t);
    TORCH_CHECK(device == -1 || d == device, op,
                ": expected all tensors on one trn device, but found trn:", device,
                " and trn:", d);
    device = d;
  }
  TORCH_CHECK(device >= 0, op, ": expected at least one trn tensor");
  return device;
}

void LaunchCopy(int device, const at::Tensor& dst, const at::Tensor& src, const char* op) {
  if (dst.numel() == 0) return;
  TensorRef o = Ref(dst, op);
  TensorRef i = RefExpanded(src, dst.sizes(), op);
  Launch(device, kernels::DescribeCopy(o, i, op), [o, i] { return kernels::Copy(o, i); });
}

at::Tensor CastTo(const at::Tensor& t, at::ScalarType dtype, const char* op) {
  if (t.scalar_type() == dtype) return t;
  int device = DeviceIndex(t);
  at::Tensor out = Empty(t.sizes(), dtype, device);
  LaunchCopy(device, out, t, op);
  return out;
}

void CheckCanCast(at::ScalarType result, at::ScalarType out, const char* op) {
  TORCH_CHECK(c10::canCast(result, out), op, ": result type ", result,
              " can't be cast to the desired output type ", out);
}

void CheckWriteOverlaps(const at::Tensor& out, std::initializer_list<const at::Tensor*> inputs) {
  at::assert_no_internal_overlap(out);
  for (const at::Tensor* t : inputs) {
    if (t != nullptr && !IsCpuScalar(*t)) at::assert_no_partial_overlap(out, *t);
  }
}

at::Tensor& CopyIntoOut(const at::Tensor& result, at::Tensor& out, const char* op) {
  if (out.is_same(result)) return out;
  PrepareOut(out, result.sizes(), result.scalar_type(), op);
  return out.copy_(result);
}

void PrepareOut(at::Tensor& out, at::IntArrayRef sizes, at::ScalarType result,
                const char* op) {
  DeviceIndex(out);
  CheckCanCast(result, out.scalar_type(), op);
  at::native::resize_output(out, sizes);
}

at::ScalarType DefaultFloat() { return c10::typeMetaToScalarType(c10::get_default_dtype()); }

TensorRef KeepdimRef(const at::Tensor& out, int64_t in_ndim, uint32_t reduce_mask,
                     const char* op) {
  TensorRef r = Ref(out, op);
  if (out.dim() == in_ndim) return r;  // keepdim=true
  TensorRef k = r;
  k.ndim = static_cast<int>(in_ndim);
  int src = 0;
  for (int d = 0; d < in_ndim; ++d) {
    if (reduce_mask & (1u << d)) {
      k.sizes[d] = 1;
      k.strides[d] = 0;
    } else {
      k.sizes[d] = r.sizes[src];
      k.strides[d] = r.strides[src];
      ++src;
    }
  }
  return k;
}

TensorRef FlatRef(const at::Tensor& t, const char* op) {
  TORCH_INTERNAL_ASSERT(t.is_contiguous());
  TensorRef r = Ref(t, op);
  r.ndim = 1;
  r.sizes[0] = t.numel();
  r.strides[0] = 1;
  return r;
}

// Highway's target for this CPU ("AVX3_ZEN4", "AVX2"), for benchmark output.
std::string SimdTarget() { return kernels::TargetName(kernels::ActiveTarget()); }

// Pins the kernels to one compiled Highway target ("AVX2", ...; "best" undoes it), so a
// benchmark can time another target's code on this CPU. Call before any device work:
// kernels already running keep the target they resolved.
std::string SetSimdTarget(const std::string& name) {
  std::string known = "best";
  for (int64_t t : kernels::CompiledTargets()) {
    if (name == kernels::TargetName(t)) {
      kernels::SetTarget(t);
      return SimdTarget();
    }
    known += std::string(", ") + kernels::TargetName(t);
  }
  TORCH_CHECK(name == "best", "_set_simd_target: '", name,
              "' is not a SIMD target this binary compiled and this CPU runs (", known, ")");
  kernels::SetTarget(0);
  return SimdTarget();
}

// Whether bfloat16 products run on the host's AMX unit (Note [AMX bf16 GEMM]); `enable`
// false sends them to the float32 GEMM (tests and benchmarks compare the two).
bool SetAmx(bool enable) {
  kernels::amx::SetEnabled(enable);
  return kernels::amx::Available();
}

TORCH_LIBRARY_FRAGMENT(trnscope, m) {
  m.def("_set_amx(bool enable) -> bool", &SetAmx);
  m.def("_count_launches(bool enable) -> ()", &CountLaunches);
  m.def("_launch_counts() -> str", &LaunchCounts);
  m.def("_simd_target() -> str", &SimdTarget);
  m.def("_set_simd_target(str name) -> str", &SetSimdTarget);
}

}  // namespace trn::bridge::ops
