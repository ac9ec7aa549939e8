// Factories, views and metadata ops of trn tensors. These never touch data
// (except resize_ growing a storage) and must never reach the CPU fallback.
#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_local_scalar_dense_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/is_set_to_native.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "torch_bridge/bridge.h"
#include "torch_bridge/device.h"

namespace trn::bridge {
namespace {

constexpr c10::DispatchKeySet kTrnKeys(c10::DispatchKey::PrivateUse1);

int ResolveDevice(std::optional<c10::Device> device) {
  const c10::Device d = c10::device_or_default(device);
  TORCH_CHECK(d.is_privateuseone(), "trn: expected a trn device, got ", d);
  const int index = d.has_index() ? d.index() : CurrentDevice();
  GetDevice(index);  // ValueError naming the index and the count
  return index;
}

void CheckFactoryOptions(std::optional<c10::Layout> layout, std::optional<bool> pin_memory) {
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
              "trn: only strided tensors are supported");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "trn: pin_memory is for CPU tensors");
}

at::Tensor EmptyMemoryFormat(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                             std::optional<c10::Layout> layout,
                             std::optional<c10::Device> device, std::optional<bool> pin_memory,
                             std::optional<c10::MemoryFormat> memory_format) {
  CheckFactoryOptions(layout, pin_memory);
  const int index = ResolveDevice(device);
  return at::detail::empty_generic(size, DeviceAllocator(index), kTrnKeys,
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor EmptyStrided(c10::IntArrayRef size, c10::IntArrayRef stride,
                        std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                        std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  CheckFactoryOptions(layout, pin_memory);
  const int index = ResolveDevice(device);
  return at::detail::empty_strided_generic(size, stride, DeviceAllocator(index), kTrnKeys,
                                           c10::dtype_or_default(dtype));
}

at::Tensor View(const at::Tensor& self, c10::SymIntArrayRef size) {
  return at::native::view(self, C10_AS_INTARRAYREF_SLOW(size));
}

at::Tensor AsStrided(const at::Tensor& self, c10::SymIntArrayRef size,
                     c10::SymIntArrayRef stride, std::optional<c10::SymInt> storage_offset) {
  std::optional<int64_t> offset;
  if (storage_offset) offset = storage_offset->expect_int();
  return at::native::as_strided_tensorimpl(self, C10_AS_INTARRAYREF_SLOW(size),
                                           C10_AS_INTARRAYREF_SLOW(stride), offset);
}

at::Tensor ReshapeAlias(const at::Tensor& self, c10::SymIntArrayRef size,
                        c10::SymIntArrayRef stride) {
  return at::native::_reshape_alias(self, C10_AS_INTARRAYREF_SLOW(size),
                                    C10_AS_INTARRAYREF_SLOW(stride));
}

at::Tensor Unfold(const at::Tensor& self, int64_t dim, int64_t size, int64_t step) {
  return at::native::unfold(self, dim, size, step);
}

// Growing a storage copies its old bytes on the host: wait for pending writes.
const at::Tensor& Resize(const at::Tensor& self, c10::SymIntArrayRef size,
                         std::optional<c10::MemoryFormat> memory_format) {
  const int index = DeviceIndex(self);
  const c10::Storage& storage = self.unsafeGetTensorImpl()->unsafe_storage();
  if (storage && storage.nbytes() > 0) {
    int64_t numel = 1;
    for (const auto& s : size) numel *= s.expect_int();
    const uint64_t needed =
        (static_cast<uint64_t>(numel) + self.storage_offset()) * self.element_size();
    if (needed > storage.nbytes()) SyncCurrentStream(index);
  }
  const c10::DeviceGuard guard(self.device());
  return at::native::resize_(self, C10_AS_INTARRAYREF_SLOW(size), memory_format);
}

at::Tensor& SetSourceTensor(at::Tensor& self, const at::Tensor& source) {
  return at::native::set_tensor_(self, source);
}
at::Tensor& SetSourceStorage(at::Tensor& self, at::Storage source) {
  return at::native::set_(self, std::move(source));
}
at::Tensor& SetSourceStorageOffset(at::Tensor& self, at::Storage source, c10::SymInt offset,
                                   c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  return at::native::set_storage_cpu_(self, std::move(source), offset.expect_int(),
                                      C10_AS_INTARRAYREF_SLOW(size),
                                      C10_AS_INTARRAYREF_SLOW(stride));
}
// set_() with no source: an empty storage of self's device (set_cpu_ would
// give a trn tensor a CPU storage).
at::Tensor& SetEmpty(at::Tensor& self) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, DeviceAllocator(DeviceIndex(self)),
                       /*resizable=*/true);
  return at::native::set_storage_cpu_(self, std::move(storage), 0, {0}, {});
}
bool IsSetTo(const at::Tensor& self, const at::Tensor& other) {
  return at::native::is_set_to(self, other);
}

// .item(): the value is final only once the stream is idle.
at::Scalar LocalScalarDense(const at::Tensor& self) {
  SyncCurrentStream(DeviceIndex(self));
  return at::native::_local_scalar_dense_cpu(self);
}

// Note [Shallow copies between CPU and trn]: nn.Module.to() moves a parameter
// by `param.data = moved` only where c10 calls the two TensorImpls
// shallow-copy compatible; its list of dense backends leaves PrivateUse1 out,
// so .to("trn") made a new Parameter per module instead. Tied weights (GPT-2's
// lm_head and wte, T5's shared embedding) became two copies: twice the memory,
// and a training step's gradient split between them. Dense strided CPU and trn
// tensors swap as CPU and CUDA ones do (c10 lets a backend override this op).
bool HasCompatibleShallowCopyType(const at::Tensor& self, const at::Tensor& from) {
  auto dense = [](const at::Tensor& t) {
    return t.layout() == at::kStrided && !t.is_quantized() && (t.is_cpu() || t.is_privateuseone());
  };
  return dense(self) && dense(from);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", HasCompatibleShallowCopyType);
  m.impl("empty.memory_format", EmptyMemoryFormat);
  m.impl("empty_strided", EmptyStrided);
  m.impl("view", View);
  // Complex views share the storage (.real / .imag write through, as on CPU).
  m.impl("view_as_real", at::native::view_as_real);
  m.impl("view_as_complex", at::native::view_as_complex);
  m.impl("as_strided", AsStrided);
  m.impl("_reshape_alias", ReshapeAlias);
  m.impl("unfold", Unfold);
  m.impl("resize_", Resize);
  m.impl("set_.source_Tensor", SetSourceTensor);
  m.impl("set_.source_Storage", SetSourceStorage);
  m.impl("set_.source_Storage_storage_offset", SetSourceStorageOffset);
  m.impl("set_", SetEmpty);
  m.impl("is_set_to", IsSetTo);
  m.impl("_local_scalar_dense", LocalScalarDense);
}

}  // namespace
}  // namespace trn::bridge
