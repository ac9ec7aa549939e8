// bridge.h: current streams, dtype policy, tensor conversion, launches.
#include "torch_bridge/bridge.h"

#include <ATen/EmptyTensor.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "torch_bridge/device.h"

namespace trn::bridge {
namespace {

// Stream id per device for the calling thread; grows on demand.
thread_local std::vector<int> tls_stream_ids;

// Torch's Python spelling of a dtype ("complex64"), which users know.
std::string TorchDTypeName(at::ScalarType s) {
  switch (s) {
    case at::kFloat: return "float32";
    case at::kDouble: return "float64";
    case at::kHalf: return "float16";
    case at::kComplexHalf: return "complex32";
    case at::kComplexFloat: return "complex64";
    case at::kComplexDouble: return "complex128";
    case at::kByte: return "uint8";
    case at::kChar: return "int8";
    case at::kShort: return "int16";
    case at::kInt: return "int32";
    case at::kLong: return "int64";
    default: break;
  }
  std::string name = c10::toString(s);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

[[noreturn]] void UnsupportedDType(at::ScalarType s, const char* op) {
  // RuntimeError, not TypeError: Tensor.__add__ turns a TypeError into NotImplemented.
  TORCH_CHECK(false, "trn: ", op, " does not support dtype ", TorchDTypeName(s),
                   "; supported: float32, bfloat16, float16, int32, int64, bool "
                   "(float64 is computed as float32)");
}

// Per-op float64 counts keyed by the (static) op string; merged by content on read.
std::mutex float64_mu;
std::unordered_map<const char*, int64_t> float64_counts;
std::atomic<bool> float64_warned{false};

}  // namespace

rt::Stream& CurrentStream(int device_index) {
  rt::Device& device = GetDevice(device_index);
  return Guarded([&]() -> rt::Stream& { return device.GetStream(CurrentStreamId(device_index)); });
}

int CurrentStreamId(int device_index) {
  if (device_index < 0 || static_cast<size_t>(device_index) >= tls_stream_ids.size()) return 0;
  return tls_stream_ids[device_index];
}

void SetCurrentStream(int device_index, int stream_id) {
  TORCH_CHECK_VALUE(device_index >= 0, "trn: invalid device index ", device_index);
  if (tls_stream_ids.size() <= static_cast<size_t>(device_index)) {
    tls_stream_ids.resize(device_index + 1, 0);
  }
  tls_stream_ids[device_index] = stream_id;
}

int DeviceIndex(const at::Tensor& t) {
  TORCH_CHECK(t.device().is_privateuseone(), "trn: expected a tensor on trn, got one on ",
              t.device());
  return t.device().index();
}

bool ToDType(at::ScalarType s, DType* out) {
  switch (s) {
    case at::kFloat: *out = DType::kFloat32; return true;
    case at::kDouble: *out = DType::kFloat64; return true;
    case at::kBFloat16: *out = DType::kBFloat16; return true;
    case at::kHalf: *out = DType::kFloat16; return true;
    case at::kInt: *out = DType::kInt32; return true;
    case at::kLong: *out = DType::kInt64; return true;
    case at::kBool: *out = DType::kBool; return true;
    default: return false;
  }
}

DType ComputeDType(at::ScalarType s, const char* op) {
  DType d;
  if (!ToDType(s, &d)) UnsupportedDType(s, op);
  if (d == DType::kFloat64) NoteFloat64(op);
  return d;
}

void NoteFloat64(const char* op) {
  {
    std::lock_guard<std::mutex> lock(float64_mu);
    ++float64_counts[op];
  }
  // Note [float64 policy]: one warning per process, counts per op.
  if (!float64_warned.exchange(true)) {
    TORCH_WARN("trn computes float64 as float32: ", op,
               " and every later float64 op keep float64 storage but results have float32 "
               "precision (counts: trnscope.float64_downcasts())");
  }
}

std::map<std::string, int64_t> Float64Counts() {
  std::lock_guard<std::mutex> lock(float64_mu);
  std::map<std::string, int64_t> merged;
  for (const auto& [op, n] : float64_counts) merged[op] += n;
  return merged;
}

void ResetFloat64Counts() {
  std::lock_guard<std::mutex> lock(float64_mu);
  float64_counts.clear();
}

TensorRef Ref(const at::Tensor& t, const char* op) {
  TensorRef r;
  if (!ToDType(t.scalar_type(), &r.dtype)) UnsupportedDType(t.scalar_type(), op);
  TORCH_CHECK(t.dim() <= kMaxDims, "trn: ", op, " supports at most ", kMaxDims,
              " dimensions, got a tensor with ", t.dim());
  r.data = t.numel() == 0 ? nullptr : t.data_ptr();
  r.ndim = static_cast<int>(t.dim());
  // The arrays once, not size(i) / stride(i): each of those wraps and checks i.
  const at::IntArrayRef sizes = t.sizes(), strides = t.strides();
  std::copy(sizes.begin(), sizes.end(), r.sizes);
  std::copy(strides.begin(), strides.end(), r.strides);
  return r;
}

TensorRef RefExpanded(const at::Tensor& t, at::IntArrayRef sizes, const char* op) {
  TensorRef in = Ref(t, op);
  const int ndim = static_cast<int>(sizes.size());
  TORCH_CHECK(ndim <= kMaxDims && ndim >= in.ndim, "trn: ", op, ": cannot broadcast ",
              t.sizes(), " to ", sizes);
  TensorRef r = in;
  r.ndim = ndim;
  const int lead = ndim - in.ndim;
  for (int i = 0; i < ndim; ++i) {
    r.sizes[i] = sizes[i];
    if (i < lead) {
      r.strides[i] = 0;
      continue;
    }
    const int64_t s = in.sizes[i - lead];
    TORCH_CHECK(s == sizes[i] || s == 1, "trn: ", op, ": cannot broadcast ", t.sizes(), " to ",
                sizes);
    r.strides[i] = (s == sizes[i]) ? in.strides[i - lead] : 0;
  }
  return r;
}

at::Tensor Empty(at::IntArrayRef sizes, at::ScalarType dtype, int device_index) {
  constexpr c10::DispatchKeySet kKeys(c10::DispatchKey::PrivateUse1);
  return at::detail::empty_generic(sizes, DeviceAllocator(device_index), kKeys, dtype,
                                   std::nullopt);
}

// Note [Output layout]: TensorIterator's rule (reorder_dimensions and
// allocate_or_resize_outputs in TensorIterator.cpp), which CPU kernels and the
// meta kernels of FakeTensors follow. Inputs of one shape that are all
// contiguous, all channels_last, or all dense with one set of strides give that
// layout. Otherwise dims are sorted by the inputs' strides, the first input
// with a strict order deciding (broadcast dims do not vote, equal strides
// put the smaller dim inside), and the result is dense in that order.
at::Tensor EmptyElementwise(at::IntArrayRef sizes, at::ScalarType dtype, int device_index,
                            std::initializer_list<const at::Tensor*> inputs) {
  const int64_t nd = static_cast<int64_t>(sizes.size());
  constexpr size_t kMaxInputs = 4;  // where and lerp take three
  TORCH_CHECK(inputs.size() <= kMaxInputs, "trn: at most ", kMaxInputs, " elementwise inputs");
  std::array<const at::Tensor*, kMaxInputs> ins;
  size_t n = 0;
  for (const at::Tensor* t : inputs) {
    if (t != nullptr && t->defined()) ins[n++] = t;
  }
  if (nd <= 1 || n == 0) return Empty(sizes, dtype, device_index);
  bool same_shape = true, contiguous = true, channels_last = true, dense = true;
  bool same_strides = true;
  for (size_t k = 0; k < n; ++k) {
    const at::Tensor* t = ins[k];
    same_shape &= t->sizes().equals(ins[0]->sizes());
    same_strides &= t->strides().equals(ins[0]->strides());
    contiguous &= t->is_contiguous();
    channels_last &= t->is_contiguous(at::MemoryFormat::ChannelsLast);
    dense &= t->is_non_overlapping_and_dense();
  }
  constexpr c10::DispatchKeySet kKeys(c10::DispatchKey::PrivateUse1);
  auto strided = [&](at::IntArrayRef strides) {
    return at::detail::empty_strided_generic(sizes, strides, DeviceAllocator(device_index), kKeys,
                                             dtype);
  };
  if (same_shape && ins[0]->sizes().equals(sizes)) {
    if (contiguous) return Empty(sizes, dtype, device_index);
    if (channels_last) {
      return strided(c10::get_channels_last_strides_2d(sizes));
    }
    if (dense && same_strides) return strided(ins[0]->strides());
  }
  // Each input's strides over the broadcast dims (0 where it broadcasts).
  std::array<std::array<int64_t, kMaxDims>, kMaxInputs> st;
  TORCH_CHECK(nd <= kMaxDims, "trn: at most ", kMaxDims, " dims, got ", nd);
  for (size_t k = 0; k < n; ++k) {
    const at::Tensor& t = *ins[k];
    const int64_t lead = nd - t.dim();
    for (int64_t d = 0; d < nd; ++d) {
      const bool broadcast = d < lead || (t.size(d - lead) == 1 && sizes[d] != 1);
      st[k][d] = broadcast ? 0 : t.stride(d - lead);
    }
  }
  auto should_swap = [&](int64_t d0, int64_t d1) {
    for (size_t k = 0; k < n; ++k) {
      const auto& s = st[k];
      if (s[d0] == 0 || s[d1] == 0) continue;
      if (s[d0] != s[d1]) return s[d0] < s[d1] ? -1 : 1;
      if (sizes[d0] > sizes[d1]) return 1;
    }
    return 0;
  };
  std::array<int64_t, kMaxDims> perm;  // perm[0] the innermost dim
  for (int64_t i = 0; i < nd; ++i) perm[i] = nd - 1 - i;
  for (int64_t i = 1; i < nd; ++i) {  // insertion sort that tolerates ambiguous pairs
    int64_t d1 = i;
    for (int64_t d0 = i - 1; d0 >= 0; --d0) {
      const int c = should_swap(perm[d0], perm[d1]);
      if (c > 0) {
        std::swap(perm[d0], perm[d1]);
        d1 = d0;
      } else if (c < 0) {
        break;
      }
    }
  }
  bool reversed = true;
  for (int64_t i = 0; i < nd; ++i) reversed &= perm[i] == nd - 1 - i;
  if (reversed) return Empty(sizes, dtype, device_index);
  std::array<int64_t, kMaxDims> strides;
  int64_t next = 1;
  for (int64_t i = 0; i < nd; ++i) {
    strides[perm[i]] = next;
    next *= sizes[perm[i]];
  }
  return strided(at::IntArrayRef(strides.data(), nd));
}

void Launch(int device_index, const rt::KernelInfo& info, rt::Task&& task) {
  rt::Stream& stream = CurrentStream(device_index);
  Guarded([&] { stream.Launch(info, std::move(task)); });
}

}  // namespace trn::bridge
