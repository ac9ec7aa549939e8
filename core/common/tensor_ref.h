// Torch-free description of a strided tensor, the common currency between the
// torch bridge, the runtime and the kernels. A TensorRef does not own memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace trn {

// Storage dtypes the device knows. float64 is stored as float64 but every
// kernel computes it in float32 (Note [float64 policy] in docs/device.md).
enum class DType : uint8_t {
  kFloat32,
  kFloat64,
  kBFloat16,
  kFloat16,
  kInt32,
  kInt64,
  kBool,  // one byte per element, 0 or 1
  // The device model's integer tiles (trnscope.nki); no runtime kernel takes these.
  kInt8,
  kUInt8,
  kInt16,
  kUInt16,
  kUInt32,
};
inline constexpr DType kLastDType = DType::kUInt32;

// False for the dtypes only the device model uses (the runtime has no kernels for them).
inline bool IsRuntimeDType(DType d) { return d <= DType::kBool; }

inline size_t ItemSize(DType d) {
  switch (d) {
    case DType::kFloat32: return 4;
    case DType::kFloat64: return 8;
    case DType::kBFloat16: return 2;
    case DType::kFloat16: return 2;
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
    case DType::kBool: return 1;
    case DType::kInt8: return 1;
    case DType::kUInt8: return 1;
    case DType::kInt16: return 2;
    case DType::kUInt16: return 2;
    case DType::kUInt32: return 4;
  }
  return 0;
}

inline const char* DTypeName(DType d) {
  switch (d) {
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat16: return "float16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kBool: return "bool";
    case DType::kInt8: return "int8";
    case DType::kUInt8: return "uint8";
    case DType::kInt16: return "int16";
    case DType::kUInt16: return "uint16";
    case DType::kUInt32: return "uint32";
  }
  return "?";
}

// The DType named `name` (DTypeName's names); false if there is none.
inline bool ParseDType(std::string_view name, DType* out) {
  for (int v = 0; v <= static_cast<int>(kLastDType); ++v) {
    if (name == DTypeName(static_cast<DType>(v))) {
      *out = static_cast<DType>(v);
      return true;
    }
  }
  return false;
}

inline bool IsFloating(DType d) {
  return d == DType::kFloat32 || d == DType::kFloat64 || d == DType::kBFloat16 ||
         d == DType::kFloat16;
}

constexpr int kMaxDims = 8;

// sizes/strides are in elements; strides may be 0 (broadcast) or any positive
// value (views). ndim == 0 is a scalar with one element.
struct TensorRef {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  int ndim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};

  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= sizes[i];
    return n;
  }
  size_t nbytes() const { return static_cast<size_t>(numel()) * ItemSize(dtype); }
  bool is_contiguous() const {
    int64_t expected = 1;
    for (int i = ndim - 1; i >= 0; --i) {
      if (sizes[i] != 1 && strides[i] != expected) return false;
      expected *= sizes[i];
    }
    return true;
  }
  template <typename T>
  T* ptr() const {
    return static_cast<T*>(data);
  }
};

// Result of a kernel: empty error means success. Kernels never throw; a failed
// kernel (e.g. an index out of range) returns a message that the runtime
// reports at the next synchronizing call.
struct Status {
  std::string error;
  bool ok() const { return error.empty(); }
  static Status Ok() { return {}; }
  static Status Error(std::string message) { return {std::move(message)}; }
};

}  // namespace trn
