// Shared helpers of the torch bridge: tensor conversion, the current stream,
// launching on a device, the dtype policy. Kept light: no torch/extension.h.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "core/common/tensor_ref.h"
#include "core/runtime/runtime.h"

namespace trn::bridge {

// Current stream of a device for the calling thread (c10 semantics: thread
// local, default stream 0 until set through the guard / torch.trn.stream).
rt::Stream& CurrentStream(int device_index);
void SetCurrentStream(int device_index, int stream_id);

// Device index of a trn tensor (TORCH_CHECK that it is on trn).
int DeviceIndex(const at::Tensor& t);

// Storage dtype of a scalar type for a compute op. Throws a c10::Error naming
// the dtype and the op for complex, float8 and other unsupported dtypes.
// float64 maps to DType::kFloat64 and calls NoteFloat64(op): Note [float64 policy].
DType ComputeDType(at::ScalarType s, const char* op);
// Same mapping without the policy (copies and factories move any of our dtypes).
bool ToDType(at::ScalarType s, DType* out);

// Warns once per process (UserWarning) and counts per op.
void NoteFloat64(const char* op);

// TensorRef of a trn tensor (sizes/strides/data pointer incl. storage offset).
TensorRef Ref(const at::Tensor& t, const char* op);
// Ref broadcast to `sizes` (stride 0 on expanded dims); t must be broadcastable.
TensorRef RefExpanded(const at::Tensor& t, at::IntArrayRef sizes, const char* op);
// An absent optional operand (data == nullptr).
inline TensorRef NoRef() { return TensorRef{}; }

// New contiguous trn tensor on `device_index`.
at::Tensor Empty(at::IntArrayRef sizes, at::ScalarType dtype, int device_index);

// New trn tensor for an elementwise result of `inputs` (nullptr entries are
// scalars): laid out as CPU PyTorch lays it out (Note [Output layout]).
at::Tensor EmptyElementwise(at::IntArrayRef sizes, at::ScalarType dtype, int device_index,
                            std::initializer_list<const at::Tensor*> inputs);

// Enqueue a kernel on the current stream of device_index. Never waits.
void Launch(int device_index, const rt::KernelInfo& info, rt::Task&& task);

// Run a runtime call, translating rt errors to the matching torch errors
// (OutOfMemory -> torch.OutOfMemoryError, InvalidArgument -> ValueError/IndexError,
// DeviceError -> RuntimeError).
template <typename F>
auto Guarded(F&& f) -> decltype(f());

}  // namespace trn::bridge

#include "torch_bridge/bridge_inl.h"
