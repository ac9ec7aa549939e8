// Device-infrastructure internals of the bridge shared by its own .cc files
// and module.cc: current device, per-device allocators and generators,
// synchronization helpers and the counters behind trnscope.fallback_ops() /
// trnscope.float64_downcasts(). The ops files use bridge.h only.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/GeneratorImpl.h>

#include <cstdint>
#include <map>
#include <string>

#include "core/runtime/runtime.h"

namespace trn::bridge {

// Number of devices; throws a ValueError naming TRN_VISIBLE_CORES when it is malformed.
int DeviceCount();
// The runtime device, with an out-of-range index translated to a ValueError.
rt::Device& GetDevice(int device_index);

// Thread-local current device (c10 semantics), 0 until set.
int CurrentDevice();
void SetCurrentDevice(int device_index);  // checks the index
int CurrentStreamId(int device_index);

// Allocator that allocates on `device_index`'s current stream; -1 = the
// calling thread's current device (the one registered for PrivateUse1).
c10::Allocator* DeviceAllocator(int device_index);

// Whether ptr is the start of a block of the pinned host allocator (Note [Pinned memory]).
bool IsPinned(const void* ptr);

// Blocks until the calling thread's current stream of the device is idle;
// surfaces kernel failures as RuntimeError.
void SyncCurrentStream(int device_index);

// The host view of device memory (copy.cc): the same bytes as a CPU tensor,
// without conj / neg bits; valid only once the tensor's stream is idle.
at::Tensor HostView(const at::Tensor& t);
// Waits for every stream of every device (no-op before the runtime exists).
void SyncAllDevices();

// The per-device RNG: a CPU Philox/MT state drawn on the host.
// Note [trn random numbers]: random ops fill a host tensor with this
// generator's CPU state, then copy it to the device asynchronously.
class TrnGenerator final : public c10::GeneratorImpl {
 public:
  explicit TrnGenerator(int device_index, uint64_t seed = c10::default_rng_seed_val);
  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }
  at::Generator& cpu() { return cpu_; }

 private:
  TrnGenerator* clone_impl() const override;
  at::Generator cpu_;
};
const at::Generator& DefaultGenerator(int device_index);  // -1 = current device

// H2D copy from a host tensor the caller will not touch again (no staging).
void CopyFromPrivateHost(const at::Tensor& dst, const at::Tensor& host);

// Counters, merged by op name.
std::map<std::string, int64_t> Float64Counts();
std::map<std::string, int64_t> FallbackCounts();
void ResetCounters();
void ResetFloat64Counts();  // part of ResetCounters

}  // namespace trn::bridge
