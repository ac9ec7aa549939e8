// The boxed CPU fallback of the trn device (Note [CPU fallback] in docs/device.md).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace trn::bridge {

// Runs `op` on the CPU (warned once per op, counted in FallbackCounts, an
// error under TRN_DISABLE_FALLBACK=1). Ops without a CPU kernel
// (*_overrideable) run their CPU equivalent. Native kernels call it for the
// cases they do not run themselves, through
// at::native::call_fallback_fn_symint<&CpuFallback, at::_ops::OP>::call(...).
void CpuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace trn::bridge
