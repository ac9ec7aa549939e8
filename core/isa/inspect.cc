#include "core/isa/inspect.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/isa/target.h"

namespace trn::isa {

std::string FormatOperand(const Executable& exe, const Tile& t) {
  const std::string& buffer =
      t.memory == Memory::kHbm ? exe.tensors[t.buffer].name : exe.allocations[t.buffer].name;
  std::string shape = fmt::format("{}", t.partitions);
  for (int d = 0; d < t.ndim; ++d) shape += fmt::format(", {}", t.sizes[d]);
  std::string s =
      fmt::format("{} {}[{}] {}", MemoryName(t.memory), buffer, shape, DTypeName(t.dtype));
  if (t.memory != Memory::kHbm && t.partition_start != 0) {
    s += fmt::format(" @p{}", t.partition_start);
  }
  if (t.offset != 0) s += fmt::format(" +{}", t.offset);
  return s;
}

namespace {

std::string Shape(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += fmt::format("{}{}", i ? ", " : "", shape[i]);
  return s + "]";
}

}  // namespace

std::string FormatInstruction(const Executable& exe, const Instruction& ins) {
  std::string s = OpcodeName(ins.opcode);
  const Operands io = OperandsOf(ins);
  if (io.writes_dst || io.reads_dst) s += " dst=" + FormatOperand(exe, ins.dst);
  if (io.reads_src0) s += " src0=" + FormatOperand(exe, ins.src0);
  if (io.reads_src1 || io.writes_src1) s += " src1=" + FormatOperand(exe, ins.src1);
  switch (ins.opcode) {
    case Opcode::kTensorTensor:
    case Opcode::kTensorReduce:
      s += fmt::format(" op={}", AluOpName(ins.op0));
      break;
    case Opcode::kTensorScalar:
      s += fmt::format(" op0={} {} op1={} {}", AluOpName(ins.op0), ins.imm0, AluOpName(ins.op1),
                       ins.imm1);
      break;
    case Opcode::kActivation:
    case Opcode::kActivationReduce:
      s += fmt::format(" func={} scale={} bias={}", ActivationFuncName(ins.func), ins.imm0,
                       ins.imm1);
      break;
    case Opcode::kMemset:
      s += fmt::format(" value={}", ins.imm0);
      break;
    case Opcode::kSemaphoreWait:
    case Opcode::kSemaphoreSignal:
      s += fmt::format(" semaphore={} value={}", ins.semaphore, ins.value);
      break;
    case Opcode::kDmaCopy:
      s += fmt::format(" queue={}", ins.queue);
      break;
    case Opcode::kMultiplyMoving:
      if (ins.accumulate) s += " accumulate";
      break;
    default:
      break;
  }
  if (ins.source != kNone) {
    const SourceLoc& src = exe.sources[ins.source];
    std::string where = src.file.empty() ? "" : fmt::format("{}:{}", src.file, src.line);
    if (!src.op.empty()) where += (where.empty() ? "" : " ") + src.op;
    if (src.kernel_id >= 0) where += fmt::format(" kernel {}", src.kernel_id);
    s += " (" + where + ")";
  }
  return s;
}

std::string FormatInspect(const Executable& exe, int first) {
  const TargetSpec& spec = Spec(exe.target);
  std::string s = fmt::format("executable {}: format version {}, target {} ({})\n", exe.name,
                              Executable::kFormatVersion, spec.name, spec.core);
  s += fmt::format("\nHBM tensors ({}):\n", exe.tensors.size());
  for (const TensorDecl& t : exe.tensors) {
    s += fmt::format("  {:<9}{:<20}{:<10}{}\n", TensorKindName(t.kind), t.name, DTypeName(t.dtype),
                     Shape(t.shape));
  }
  int64_t sbuf = 0, psum = 0;
  for (const Allocation& a : exe.allocations) {
    (a.memory == Memory::kSbuf ? sbuf : psum) =
        std::max(a.memory == Memory::kSbuf ? sbuf : psum, a.byte_offset + a.bytes);
  }
  s += fmt::format(
      "\nSBUF/PSUM plan ({} allocations; per partition, SBUF up to byte {} of {}, PSUM up to "
      "{} of {}):\n",
      exe.allocations.size(), sbuf, spec.sbuf_partition_bytes, psum, spec.psum_partition_bytes);
  s += fmt::format("  {:<7}{:<20}{:>11}{:>10}{:>12}\n", "memory", "name", "partitions", "bytes",
                   "offset");
  for (const Allocation& a : exe.allocations) {
    s += fmt::format("  {:<7}{:<20}{:>11}{:>10}{:>12}\n", MemoryName(a.memory), a.name,
                     fmt::format("{}..{}", a.partition_start, a.partition_start + a.partitions - 1),
                     a.bytes, a.byte_offset);
  }
  s += fmt::format("\ninstructions ({}):\n", exe.instructions.size());
  for (int e = 0; e < kNumEngines; ++e) {
    const std::vector<uint32_t> stream = exe.Stream(static_cast<Engine>(e));
    s += fmt::format("  {:<8}{:>10}", EngineName(static_cast<Engine>(e)), stream.size());
    if (static_cast<Engine>(e) == Engine::kDma && !stream.empty()) {
      std::string queues;
      for (int q = 0; q < spec.dma_queues; ++q) {
        const size_t n = exe.DmaQueue(q).size();
        if (n > 0) queues += fmt::format(" q{}:{}", q, n);
      }
      s += "  queues" + queues;
    }
    s += "\n";
  }
  for (int e = 0; e < kNumEngines; ++e) {
    const std::vector<uint32_t> stream = exe.Stream(static_cast<Engine>(e));
    if (stream.empty() || first <= 0) continue;
    s += fmt::format("\n{} (first {} of {}):\n", EngineName(static_cast<Engine>(e)),
                     std::min<size_t>(first, stream.size()), stream.size());
    for (size_t k = 0; k < stream.size() && k < static_cast<size_t>(first); ++k) {
      s += fmt::format("  {:>8}  {}\n", stream[k],
                       FormatInstruction(exe, exe.instructions[stream[k]]));
    }
  }
  return s;
}

}  // namespace trn::isa
