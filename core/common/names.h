// Every name trnscope gives a runtime call, a copy or an engine, defined once.
// The runtime stores these pointers in its trace records; trace.json,
// torch.profiler and the analyzer's tables show them as they are.
//
// Note [One name per thing]
// A thing shown in two places must read the same in both, or a user cannot
// match a torch.profiler table with the trace. The names follow CUDA's, so a
// trn profile reads like a CUDA one: host-side runtime calls are
// trn<CudaName> (trnLaunchKernel, trnMemcpyAsync, ...), device-side copies
// are "Memcpy HtoD" and friends (CUDA's names without the memory kinds, which
// are all pageable host memory here). Exporters never rename a record.
#pragma once

#include <cstdint>

#include "core/common/launch.h"

namespace trn::rt {

// Host-side runtime calls that the tracer records.
enum class RuntimeCall : uint8_t {
  kLaunchKernel,
  kMemcpyAsync,
  kStreamSynchronize,
  kDeviceSynchronize,
  kEventSynchronize,
  kEventRecord,
  kStreamWaitEvent,
};

inline const char* RuntimeCallName(RuntimeCall c) {
  switch (c) {
    case RuntimeCall::kLaunchKernel: return "trnLaunchKernel";
    case RuntimeCall::kMemcpyAsync: return "trnMemcpyAsync";
    case RuntimeCall::kStreamSynchronize: return "trnStreamSynchronize";
    case RuntimeCall::kDeviceSynchronize: return "trnDeviceSynchronize";
    case RuntimeCall::kEventSynchronize: return "trnEventSynchronize";
    case RuntimeCall::kEventRecord: return "trnEventRecord";
    case RuntimeCall::kStreamWaitEvent: return "trnStreamWaitEvent";
  }
  return "trnUnknownCall";
}

// The device-side name of a copy; a kernel's name is its own (KernelInfo::name).
inline const char* CopyName(CommandKind k) {
  switch (k) {
    case CommandKind::kCopyH2D: return "Memcpy HtoD";
    case CommandKind::kCopyD2H: return "Memcpy DtoH";
    case CommandKind::kCopyD2D: return "Memcpy DtoD";
    case CommandKind::kCopyH2H: return "Memcpy HtoH";
    case CommandKind::kKernel: break;
  }
  return "Memcpy";
}

using ::trn::EngineName;  // core/common/engine.h

// trace.json categories (torch.profiler's own, where it has one) and lanes.
inline constexpr const char* kRuntimeCategory = "trn_runtime";
inline constexpr const char* kKernelCategory = "kernel";
inline constexpr const char* kCopyCategory = "gpu_memcpy";

}  // namespace trn::rt
