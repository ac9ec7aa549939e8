// Buffer binding (Note [Buffer binding]) and the step walk.
#include "core/compiler/executor.h"

#include "core/common/assert.h"

namespace trn::compiler {

namespace internal {

void BindBuffer(const Program& p, size_t b, const InputMemory& input, void* arena,
                Bindings* bindings) {
  TRN_ASSERT(bindings->base.size() == p.buffers().size(),
             "bindings->base must be sized like the program's buffers");
  const Buffer& buf = p.buffers()[b];
  const int64_t item = static_cast<int64_t>(ItemSize(buf.dtype));
  int64_t& offset = bindings->storage_offset[b];
  switch (buf.kind) {
    case Buffer::Kind::kInput:
      offset = input.storage_offset - p.input_views()[buf.index].offset;
      bindings->base[b] = static_cast<char*>(input.storage) + offset * item;
      break;
    case Buffer::Kind::kTemp:
      offset = buf.arena_offset / item;
      bindings->base[b] = static_cast<char*>(arena) + buf.arena_offset;
      break;
    case Buffer::Kind::kOutput:
      offset = 0;  // its own allocation; the caller set the base
      break;
  }
}

}  // namespace internal

void RunSteps(const Program& p, StepRunner& runner) {
  for (const Step& step : p.steps()) {
    if (step.kind == Step::Kind::kKernel) {
      runner.RunKernel(step.index);
    } else {
      runner.RunEager(step.index);
    }
  }
}

}  // namespace trn::compiler
