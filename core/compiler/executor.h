// The program executor's frontend-neutral half: binds a Program's buffers to
// memory for one run and walks its steps. The torch bridge and the core tests
// both run programs through it; they differ only in how they allocate memory
// and what a step does (launch on a core, run in place, call an eager op).
// Stateless functions; any thread may call them.
#pragma once

#include <cstdint>
#include <vector>

#include "core/common/tensor_ref.h"
#include "core/compiler/program.h"

namespace trn::compiler {

// A graph input's memory: the start of its storage and where the input
// starts there (elements of its dtype), as torch's storage_offset().
struct InputMemory {
  void* storage = nullptr;
  int64_t storage_offset = 0;
};

// Note [Buffer binding]
// Every buffer is bound to a base pointer (what kernels read) and to the
// element offset of that base within the storage holding it (what a frontend
// that rebuilds views over storage, torch's as_strided, needs). An input's
// buffer starts `input_views()[i].offset` elements before the input itself,
// so its base is storage + (storage_offset - view offset); a temp lies at its
// arena offset (Note [Temp arena]); an output buffer is its own allocation.
struct Bindings {
  std::vector<void*> base;              // per buffer, indexed like buffers()
  std::vector<int64_t> storage_offset;  // per buffer, elements of its dtype
};

namespace internal {
void BindBuffer(const Program& p, size_t buffer, const InputMemory& input, void* arena,
                Bindings* bindings);
}  // namespace internal

// Binds every buffer of `p`. input_memory(i): the InputMemory of graph input
// i. arena: at least arena_bytes() (unused when that is 0). The caller
// allocates the kOutput buffers and sets their entries of bindings->base
// (sized like buffers()) first. Allocates nothing but bindings->storage_offset.
template <typename InputFn>
void BindBuffers(const Program& p, const InputFn& input_memory, void* arena, Bindings* bindings) {
  bindings->storage_offset.resize(p.buffers().size());
  for (size_t b = 0; b < p.buffers().size(); ++b) {
    const Buffer& buf = p.buffers()[b];
    const InputMemory in =
        buf.kind == Buffer::Kind::kInput ? input_memory(buf.index) : InputMemory{};
    internal::BindBuffer(p, b, in, arena, bindings);
  }
}

// Element offset of view `v` within the storage of its buffer.
inline int64_t StorageOffset(const Bindings& b, const View& v) {
  return b.storage_offset[v.buffer] + v.offset;
}
inline TensorRef BindView(const Bindings& b, const View& v) { return v.Bind(b.base[v.buffer]); }

// What a frontend does for a step; RunSteps calls it in program order.
class StepRunner {
 public:
  virtual ~StepRunner() = default;
  virtual void RunKernel(int kernel) = 0;   // index into Program::kernels()
  virtual void RunEager(int eager) = 0;     // index into Program::eager()
};

// Walks the steps of `p` in order. Allocation-free.
void RunSteps(const Program& p, StepRunner& runner);

}  // namespace trn::compiler
