#include "core/isa/isa.h"

#include <cstring>
#include <iterator>

#include "core/common/assert.h"

namespace trn::isa {

// Names in enum order (the static_asserts catch an enum that grew).
const char* TargetName(Target v) {
  static constexpr const char* kNames[] = {"trn1", "trn2"};
  static_assert(std::size(kNames) == static_cast<size_t>(Target::kTrn2) + 1);
  TRN_ASSERT(static_cast<size_t>(v) < std::size(kNames), "unknown Target");
  return kNames[static_cast<size_t>(v)];
}

const char* MemoryName(Memory v) {
  static constexpr const char* kNames[] = {"hbm", "sbuf", "psum"};
  static_assert(std::size(kNames) == static_cast<size_t>(Memory::kPsum) + 1);
  TRN_ASSERT(static_cast<size_t>(v) < std::size(kNames), "unknown Memory");
  return kNames[static_cast<size_t>(v)];
}

const char* OpcodeName(Opcode v) {
  static constexpr const char* kNames[] = {
      "load_stationary", "multiply_moving",   "nc_transpose", "tensor_tensor",  "tensor_scalar",
      "tensor_reduce",   "tensor_copy",       "memset",       "bn_stats",       "bn_aggr",
      "activation",      "activation_reduce", "iota",         "semaphore_wait", "semaphore_signal",
      "dma_copy"};
  static_assert(std::size(kNames) == static_cast<size_t>(Opcode::kDmaCopy) + 1);
  TRN_ASSERT(static_cast<size_t>(v) < std::size(kNames), "unknown Opcode");
  return kNames[static_cast<size_t>(v)];
}

const char* AluOpName(AluOp v) {
  static constexpr const char* kNames[] = {"bypass", "add", "subtract", "multiply", "divide",
                                           "max",    "min", "pow",      "is_equal", "is_greater"};
  static_assert(std::size(kNames) == static_cast<size_t>(AluOp::kIsGreater) + 1);
  TRN_ASSERT(static_cast<size_t>(v) < std::size(kNames), "unknown AluOp");
  return kNames[static_cast<size_t>(v)];
}

const char* ActivationFuncName(ActivationFunc v) {
  static constexpr const char* kNames[] = {
      "copy", "exp",    "log",  "tanh",  "sigmoid",   "relu", "gelu", "gelu_apprx_tanh",
      "silu", "square", "sqrt", "rsqrt", "reciprocal"};
  static_assert(std::size(kNames) == static_cast<size_t>(ActivationFunc::kReciprocal) + 1);
  TRN_ASSERT(static_cast<size_t>(v) < std::size(kNames), "unknown ActivationFunc");
  return kNames[static_cast<size_t>(v)];
}

namespace {

template <typename E>
bool ParseName(std::string_view name, E last, const char* (*name_of)(E), E* out) {
  for (int v = 0; v <= static_cast<int>(last); ++v) {
    if (name == name_of(static_cast<E>(v))) {
      *out = static_cast<E>(v);
      return true;
    }
  }
  return false;
}

}  // namespace

bool ParseMemory(std::string_view n, Memory* out) {
  return ParseName(n, Memory::kPsum, MemoryName, out);
}
bool ParseOpcode(std::string_view n, Opcode* out) {
  return ParseName(n, Opcode::kDmaCopy, OpcodeName, out);
}
bool ParseAluOp(std::string_view n, AluOp* out) {
  return ParseName(n, AluOp::kIsGreater, AluOpName, out);
}
bool ParseActivationFunc(std::string_view n, ActivationFunc* out) {
  return ParseName(n, ActivationFunc::kReciprocal, ActivationFuncName, out);
}

bool Tile::operator==(const Tile& o) const {
  if (memory != o.memory || dtype != o.dtype || buffer != o.buffer ||
      partition_start != o.partition_start || partitions != o.partitions ||
      partition_stride != o.partition_stride || offset != o.offset || ndim != o.ndim) {
    return false;
  }
  for (int d = 0; d < kMaxFreeDims; ++d) {
    if (sizes[d] != o.sizes[d] || strides[d] != o.strides[d]) return false;
  }
  return true;
}

bool Instruction::operator==(const Instruction& o) const {
  return opcode == o.opcode && engine == o.engine && op0 == o.op0 && op1 == o.op1 &&
         func == o.func && accumulate == o.accumulate && queue == o.queue &&
         semaphore == o.semaphore && value == o.value &&
         std::memcmp(&imm0, &o.imm0, sizeof imm0) == 0 &&
         std::memcmp(&imm1, &o.imm1, sizeof imm1) == 0 && dst == o.dst && src0 == o.src0 &&
         src1 == o.src1 && source == o.source;
}

Engine DefaultEngine(Opcode op) {
  switch (op) {
    case Opcode::kLoadStationary:
    case Opcode::kMultiplyMoving:
    case Opcode::kTranspose:
      return Engine::kTensor;
    case Opcode::kTensorTensor:
    case Opcode::kTensorScalar:
    case Opcode::kTensorReduce:
    case Opcode::kTensorCopy:
    case Opcode::kMemset:
    case Opcode::kBnStats:
    case Opcode::kBnAggr:
      return Engine::kVector;
    case Opcode::kActivation:
    case Opcode::kActivationReduce:
      return Engine::kScalar;
    case Opcode::kIota:
      return Engine::kGpSimd;
    case Opcode::kSemaphoreWait:
    case Opcode::kSemaphoreSignal:
      return Engine::kSync;
    case Opcode::kDmaCopy:
      return Engine::kDma;
  }
  TRN_ASSERT(false, "unknown Opcode");
  return Engine::kVector;
}

bool RunsOn(Opcode op, Engine e) {
  switch (op) {
    case Opcode::kTranspose:  // the PE array, or Vector's 32x32 blocks
      return e == Engine::kTensor || e == Engine::kVector;
    case Opcode::kTensorScalar:
    case Opcode::kTensorCopy:
    case Opcode::kMemset:
      return e == Engine::kVector || e == Engine::kScalar || e == Engine::kGpSimd;
    case Opcode::kTensorTensor:
    case Opcode::kTensorReduce:
      return e == Engine::kVector || e == Engine::kGpSimd;
    case Opcode::kIota:
      return e == Engine::kGpSimd;
    default:
      return e == DefaultEngine(op);
  }
}

}  // namespace trn::isa
