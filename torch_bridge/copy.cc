// Copies between the host and trn and between trn tensors (_copy_from).
// Note [trn copies]:
// - H2D runs on the destination's current stream. A non_blocking copy stages
//   the source in a private host buffer kept alive by the command, so the
//   caller may modify or free the source at once (pageable-memory semantics);
//   from pinned memory it reads the source in place when the stream gets
//   there (Note [Pinned memory]); a blocking copy waits for the stream.
// - D2H always waits for the source's current stream.
// - D2D on one device is a kernels::Copy (casts, strides, broadcast).
// - Dtypes the kernels do not know, and copies across devices, synchronize and
//   copy on the host: device memory is host memory.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <torch/library.h>

#include <memory>

#include "core/kernels/kernels.h"
#include "torch_bridge/bridge.h"
#include "torch_bridge/device.h"
#include "torch_bridge/ops_complex.h"
#include "torch_bridge/ops_util.h"

namespace trn::bridge {
namespace {

constexpr const char* kOp = "aten::copy_";

bool KernelDType(const at::Tensor& t) {
  DType d;
  return ToDType(t.scalar_type(), &d);
}

// What a copy command holds until it ran: the storage only. A tensor the caller
// made in Python (a pinned source) owns a Python object, and dropping the last
// reference to it on the worker would need the GIL (at exit: a crash).
std::shared_ptr<void> KeepAlive(const at::Tensor& t) {
  return std::make_shared<c10::Storage>(t.storage());
}

// Enqueue a contiguous host -> contiguous device memcpy of dst's bytes.
void EnqueueH2D(const at::Tensor& dst, const at::Tensor& host, int index) {
  rt::Stream& stream = CurrentStream(index);
  Guarded([&] {
    stream.Memcpy(dst.data_ptr(), host.data_ptr(), dst.nbytes(), rt::CommandKind::kCopyH2D, kOp,
                  KeepAlive(host));
  });
}

// host: a CPU tensor with dst's sizes and dtype that nobody else writes.
void HostToDevice(const at::Tensor& dst, const at::Tensor& host, bool wait) {
  const int index = DeviceIndex(dst);
  if (dst.is_contiguous()) {
    EnqueueH2D(dst, host.contiguous(), index);
  } else if (KernelDType(dst)) {
    at::Tensor staged = Empty(dst.sizes(), dst.scalar_type(), index);
    EnqueueH2D(staged, host.contiguous(), index);
    const TensorRef out = Ref(dst, kOp), in = Ref(staged, kOp);
    Launch(index, kernels::DescribeCopy(out, in, kOp),
           [out, in] { return kernels::Copy(out, in); });
    // staged is freed now; its block is reused only in this stream's order.
  } else {
    SyncCurrentStream(index);
    HostView(dst).copy_(host);
    return;
  }
  if (wait) SyncCurrentStream(index);
}

void DeviceToHost(const at::Tensor& dst, const at::Tensor& src) {
  const int index = DeviceIndex(src);
  at::Tensor contiguous = src;
  if (!src.is_contiguous()) {
    if (!KernelDType(src)) {
      SyncCurrentStream(index);
      dst.copy_(HostView(src));
      return;
    }
    contiguous = Empty(src.sizes(), src.scalar_type(), index);
    const TensorRef out = Ref(contiguous, kOp), in = Ref(src, kOp);
    Launch(index, kernels::DescribeCopy(out, in, kOp),
           [out, in] { return kernels::Copy(out, in); });
  }
  const bool direct = dst.is_contiguous() && dst.scalar_type() == src.scalar_type() &&
                      dst.sizes().equals(src.sizes());
  at::Tensor host = direct ? dst : at::empty(src.sizes(), src.options().device(c10::kCPU));
  rt::Stream& stream = CurrentStream(index);
  Guarded([&] {
    stream.Memcpy(host.data_ptr(), contiguous.data_ptr(), host.nbytes(),
                  rt::CommandKind::kCopyD2H, kOp, KeepAlive(contiguous));
    stream.Synchronize();
  });
  if (!direct) dst.copy_(host);
}

void DeviceToDevice(const at::Tensor& dst, const at::Tensor& src) {
  const int index = DeviceIndex(dst);
  const int src_index = DeviceIndex(src);
  if (index == src_index && dst.scalar_type() == at::kComplexFloat && !dst.is_conj() &&
      !dst.is_neg() && ops::PairsViewFits(dst) &&
      (src.scalar_type() == at::kComplexFloat || KernelDType(src))) {
    ops::CopyComplex(dst, src);
    return;
  }
  if (index == src_index && KernelDType(dst) && KernelDType(src)) {
    const TensorRef out = Ref(dst, kOp);
    const TensorRef in = RefExpanded(src, dst.sizes(), kOp);
    Launch(index, kernels::DescribeCopy(out, in, kOp),
           [out, in] { return kernels::Copy(out, in); });
    return;
  }
  // Across cores (or exotic dtypes): both sides idle, then a host copy.
  SyncCurrentStream(src_index);
  if (index != src_index) SyncCurrentStream(index);
  HostView(dst).copy_(HostView(src));
}

at::Tensor CopyFrom(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  TORCH_CHECK(self.defined() && dst.defined(), "trn: copy_ of an undefined tensor");
  if (dst.numel() == 0) return dst;
  // CPU's copy_ errors (its TensorIterator's): an expanded destination, a
  // source overlapping it in part (copy_impl returned early for the same data).
  ops::CheckWriteOverlaps(dst, {&self});
  // Note [Copies into conjugate views]: _copy_from passes the Conjugate and
  // Negative keys through (below), so a conj / negative view of a trn tensor
  // is written itself (t.conj().copy_(x), t.conj()[0] = v): its memory takes
  // conj(x) / -x. Before, the math-bit fallback wrote a temporary resolved copy.
  if (dst.is_conj() || dst.is_neg()) {
    at::Tensor raw = dst, src = self;
    if (dst.is_conj()) raw = raw.conj(), src = src.conj();
    if (dst.is_neg()) raw = raw._neg_view(), src = src._neg_view();
    CopyFrom(src, raw, non_blocking);
    return dst;
  }
  if (self.is_conj() || self.is_neg()) {  // the values, bits applied (a clone on their side)
    if (self.is_cpu() || !dst.device().is_privateuseone() ||
        self.scalar_type() != at::kComplexFloat || dst.scalar_type() != at::kComplexFloat) {
      return CopyFrom(self.resolve_conj().resolve_neg(), dst, non_blocking);
    }
  }
  const bool src_trn = self.device().is_privateuseone();
  const bool dst_trn = dst.device().is_privateuseone();
  if (src_trn && dst_trn) {
    DeviceToDevice(dst, self);
  } else if (dst_trn) {
    TORCH_CHECK(self.is_cpu(), "trn: cannot copy from ", self.device(), " to ", dst.device());
    at::Tensor host = self;
    if (host.scalar_type() != dst.scalar_type()) host = host.to(dst.scalar_type());
    if (!host.sizes().equals(dst.sizes())) host = host.expand(dst.sizes());
    // A non_blocking copy must not read the caller's memory later: stage it,
    // unless it is pinned (CUDA's contract: not written before a sync).
    const bool aliases_source = host.is_same(self) || host.data_ptr() == self.data_ptr();
    const bool pinned = host.is_same(self) && host.is_contiguous() &&
                        IsPinned(self.storage().data());
    if (non_blocking && !pinned && (aliases_source || !host.is_contiguous())) {
      host = host.contiguous();
      if (host.data_ptr() == self.data_ptr()) host = host.clone();
    }
    HostToDevice(dst, host, /*wait=*/!non_blocking);
  } else {
    TORCH_CHECK(dst.is_cpu(), "trn: cannot copy from ", self.device(), " to ", dst.device());
    DeviceToHost(dst, self.sizes().equals(dst.sizes()) ? self : self.expand(dst.sizes()));
  }
  return dst;
}

at::Tensor CopyFromAndResize(const at::Tensor& self, const at::Tensor& dst) {
  dst.resize_(self.sizes());
  return CopyFrom(self, dst, /*non_blocking=*/false);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_copy_from", CopyFrom);
  m.impl("_copy_from_and_resize", CopyFromAndResize);
}
// Note [Copies into conjugate views]: CopyFrom handles the bits itself.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
}

}  // namespace

at::Tensor HostView(const at::Tensor& t) {
  return at::from_blob(t.data_ptr(), t.sizes(), t.strides(), t.options().device(c10::kCPU));
}

void CopyFromPrivateHost(const at::Tensor& dst, const at::Tensor& host) {
  HostToDevice(dst, host, /*wait=*/false);
}

}  // namespace trn::bridge
