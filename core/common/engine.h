// The engines of a NeuronCore, named once for both sides of trnscope
// (Note [One list of engines]).
//
// Note [One list of engines]
// The host-side runtime and the device model describe the same hardware: a
// host kernel records the engine it imitates (KernelInfo::engine: tensor,
// vector, scalar or dma, never gpsimd or sync) and the device model runs an
// instruction stream per engine (all six). One enum keeps "which engine" one
// question with one answer; each side uses the subset it has.
#pragma once

#include <cstdint>
#include <string_view>

namespace trn {

enum class Engine : uint8_t { kTensor, kVector, kScalar, kGpSimd, kSync, kDma };
inline constexpr int kNumEngines = 6;

// "tensor", "vector", "scalar", "gpsimd", "sync", "dma".
inline const char* EngineName(Engine e) {
  switch (e) {
    case Engine::kTensor: return "tensor";
    case Engine::kVector: return "vector";
    case Engine::kScalar: return "scalar";
    case Engine::kGpSimd: return "gpsimd";
    case Engine::kSync: return "sync";
    case Engine::kDma: return "dma";
  }
  return "?";
}

// The engine with that name; false if there is none.
inline bool ParseEngine(std::string_view name, Engine* out) {
  for (int e = 0; e < kNumEngines; ++e) {
    if (name == EngineName(static_cast<Engine>(e))) {
      *out = static_cast<Engine>(e);
      return true;
    }
  }
  return false;
}

}  // namespace trn
