// Helpers shared by the aten compute kernels (ops_*.cc): operand checks,
// device-side casts, out= handling and refs in the layouts the core kernels
// expect. Stateless; any thread may call.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>
#include <c10/core/ScalarType.h>

#include <initializer_list>

#include "core/kernels/kernels.h"
#include "torch_bridge/bridge.h"

namespace trn::bridge::ops {

// A 0-dim CPU tensor next to trn tensors is a scalar (python numbers arrive
// as such "wrapped numbers"); torch lets any 0-dim CPU tensor mix with device
// tensors, so every one of them is read on the host.
inline bool IsCpuScalar(const at::Tensor& t) { return t.dim() == 0 && t.device().is_cpu(); }

// Value of a 0-dim CPU tensor, read without a dispatch.
double CpuScalarValue(const at::Tensor& t);

// bridge::Launch, counted per kernel name while counting is on: the
// debug ops torch.ops.trnscope._count_launches(bool) (turns it on/off and
// clears) and torch.ops.trnscope._launch_counts() -> "name=n;name=n" let tests
// check how many kernels an aten op launched (F.rms_norm: one). Shadows
// bridge::Launch inside this namespace; off, it costs one relaxed load.
void Launch(int device, const rt::KernelInfo& info, rt::Task&& task);

// Device index shared by every trn tensor in `ts` (undefined ones skipped);
// TORCH_CHECK naming the op when they live on different cores.
int CommonDevice(const char* op, std::initializer_list<const at::Tensor*> ts);

// Enqueues dst <- src (same sizes, any dtypes): the device Copy kernel.
void LaunchCopy(int device, const at::Tensor& dst, const at::Tensor& src, const char* op);

// t itself when it already has `dtype`, else a new contiguous cast on the device.
at::Tensor CastTo(const at::Tensor& t, at::ScalarType dtype, const char* op);

// out= contract of structured ops: resize (torch's resize_output) and check
// that the computed dtype can be written into out.
void PrepareOut(at::Tensor& out, at::IntArrayRef sizes, at::ScalarType result, const char* op);
void CheckCanCast(at::ScalarType result, at::ScalarType out, const char* op);
// CPU's (TensorIterator's) memory-overlap errors for a tensor an op writes: no
// two of its elements at one address, no input overlapping it in part (fully
// is the in-place case). Null inputs and CPU scalars are skipped.
void CheckWriteOverlaps(const at::Tensor& out, std::initializer_list<const at::Tensor*> inputs);
// The out= overload of an op composed of other trn ops: its functional
// result, resized (PrepareOut) and copied into out (nothing when out is it).
at::Tensor& CopyIntoOut(const at::Tensor& result, at::Tensor& out, const char* op);

// torch.get_default_dtype() as a ScalarType (integer inputs of float ops).
at::ScalarType DefaultFloat();

// Ref of a reduction output `out` seen with the input's rank: reduced dims
// get size 1 (the "keepdim layout" of kernels::Reduce) whether or not out
// kept them.
TensorRef KeepdimRef(const at::Tensor& out, int64_t in_ndim, uint32_t reduce_mask,
                     const char* op);

// Ref of a contiguous tensor seen as 1-D.
TensorRef FlatRef(const at::Tensor& t, const char* op);

}  // namespace trn::bridge::ops
