// What a launch is: the descriptor a kernel fills in, the engine it runs on and
// the kind of command. Shared by the layers that describe launches (kernels,
// compiler), run them (runtime), record them (trace) and name them (export,
// the torch bridge); it lives here so that none of those includes a layer
// above it. Names of these things: core/common/names.h.
#pragma once

#include <cstdint>

#include "core/common/engine.h"

namespace trn::rt {

using ::trn::Engine;  // core/common/engine.h
enum class CommandKind : uint8_t { kKernel, kCopyH2D, kCopyD2H, kCopyD2D, kCopyH2H };

// What the profiler needs about one launch. name and op are static strings
// (string literals or entries of static tables): no allocation per launch.
struct KernelInfo {
  const char* name = "";  // kernel, e.g. "mul_f32"
  const char* op = "";    // aten op that launched it, e.g. "aten::mul"
  CommandKind kind = CommandKind::kKernel;
  Engine engine = Engine::kVector;
  uint64_t flops = 0;
  uint64_t bytes_read = 0;
  uint64_t bytes_written = 0;
};

}  // namespace trn::rt
