// The boxed CPU fallback for aten ops without a native trn kernel
// (Note [CPU fallback] in docs/device.md): warns once per op, counts every
// call, and is an error under TRN_DISABLE_FALLBACK=1.
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "torch_bridge/bridge.h"
#include "torch_bridge/device.h"

namespace trn::bridge {
namespace {

std::mutex fallback_mu;
std::unordered_map<std::string, int64_t> fallback_counts;

bool FallbackDisabled() {
  static const bool disabled = [] {
    const char* v = std::getenv("TRN_DISABLE_FALLBACK");
    return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
  }();
  return disabled;
}

std::string OpName(const c10::OperatorHandle& op) {
  const c10::OperatorName& name = op.schema().operator_name();
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

void TrnFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const std::string name = OpName(op);
  TORCH_CHECK_NOT_IMPLEMENTED(!FallbackDisabled(), "trn: ", name,
                              " is not implemented natively and TRN_DISABLE_FALLBACK=1 forbids "
                              "running it on the CPU");
  bool first;
  {
    std::lock_guard<std::mutex> lock(fallback_mu);
    first = fallback_counts[name]++ == 0;
  }
  if (first) {
    TORCH_WARN("trn: ", name,
               " is not implemented natively; running on the CPU (copies to and from the host)");
  }
  // Inputs may still be written by queued kernels on any stream.
  SyncAllDevices();
  at::native::cpu_fallback(op, stack);
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&TrnFallback>());
}

}  // namespace

std::map<std::string, int64_t> FallbackCounts() {
  std::lock_guard<std::mutex> lock(fallback_mu);
  return {fallback_counts.begin(), fallback_counts.end()};
}

void ResetCounters() {
  {
    std::lock_guard<std::mutex> lock(fallback_mu);
    fallback_counts.clear();
  }
  ResetFloat64Counts();
}

}  // namespace trn::bridge
