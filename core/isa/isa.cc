#include "core/isa/isa.h"

#include <cstring>

#include "core/common/assert.h"

namespace trn::isa {

const char* TargetName(Target t) {
  switch (t) {
    case Target::kTrn1: return "trn1";
    case Target::kTrn2: return "trn2";
  }
  TRN_ASSERT(false, "unknown Target");
  return "";
}

const char* EngineName(Engine e) {
  switch (e) {
    case Engine::kTensor: return "tensor";
    case Engine::kVector: return "vector";
    case Engine::kScalar: return "scalar";
    case Engine::kGpSimd: return "gpsimd";
    case Engine::kSync: return "sync";
    case Engine::kDma: return "dma";
  }
  TRN_ASSERT(false, "unknown Engine");
  return "";
}

const char* MemoryName(Memory m) {
  switch (m) {
    case Memory::kHbm: return "hbm";
    case Memory::kSbuf: return "sbuf";
    case Memory::kPsum: return "psum";
  }
  TRN_ASSERT(false, "unknown Memory");
  return "";
}

const char* OpcodeName(Opcode op) {
  switch (op) {
    case Opcode::kLoadStationary: return "load_stationary";
    case Opcode::kMultiplyMoving: return "multiply_moving";
    case Opcode::kTranspose: return "nc_transpose";
    case Opcode::kTensorTensor: return "tensor_tensor";
    case Opcode::kTensorScalar: return "tensor_scalar";
    case Opcode::kTensorReduce: return "tensor_reduce";
    case Opcode::kTensorCopy: return "tensor_copy";
    case Opcode::kMemset: return "memset";
    case Opcode::kBnStats: return "bn_stats";
    case Opcode::kBnAggr: return "bn_aggr";
    case Opcode::kActivation: return "activation";
    case Opcode::kActivationReduce: return "activation_reduce";
    case Opcode::kIota: return "iota";
    case Opcode::kSemaphoreWait: return "semaphore_wait";
    case Opcode::kSemaphoreSignal: return "semaphore_signal";
    case Opcode::kDmaCopy: return "dma_copy";
  }
  TRN_ASSERT(false, "unknown Opcode");
  return "";
}

const char* AluOpName(AluOp op) {
  switch (op) {
    case AluOp::kBypass: return "bypass";
    case AluOp::kAdd: return "add";
    case AluOp::kSubtract: return "subtract";
    case AluOp::kMultiply: return "multiply";
    case AluOp::kDivide: return "divide";
    case AluOp::kMax: return "max";
    case AluOp::kMin: return "min";
    case AluOp::kPow: return "pow";
    case AluOp::kIsEqual: return "is_equal";
    case AluOp::kIsGreater: return "is_greater";
  }
  TRN_ASSERT(false, "unknown AluOp");
  return "";
}

const char* ActivationFuncName(ActivationFunc f) {
  switch (f) {
    case ActivationFunc::kCopy: return "copy";
    case ActivationFunc::kExp: return "exp";
    case ActivationFunc::kLog: return "log";
    case ActivationFunc::kTanh: return "tanh";
    case ActivationFunc::kSigmoid: return "sigmoid";
    case ActivationFunc::kRelu: return "relu";
    case ActivationFunc::kGelu: return "gelu";
    case ActivationFunc::kGeluTanh: return "gelu_apprx_tanh";
    case ActivationFunc::kSilu: return "silu";
    case ActivationFunc::kSquare: return "square";
    case ActivationFunc::kSqrt: return "sqrt";
    case ActivationFunc::kRsqrt: return "rsqrt";
    case ActivationFunc::kReciprocal: return "reciprocal";
  }
  TRN_ASSERT(false, "unknown ActivationFunc");
  return "";
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

Operands OperandsOf(const Instruction& ins) {
  Operands r;
  switch (ins.opcode) {
    case Opcode::kLoadStationary:
      r.reads_src0 = true;
      break;
    case Opcode::kMultiplyMoving:
      r.writes_dst = r.reads_src0 = r.reads_src1 = true;
      r.reads_dst = ins.accumulate;
      break;
    case Opcode::kTensorTensor:
      r.writes_dst = r.reads_src0 = r.reads_src1 = true;
      break;
    case Opcode::kTranspose:
    case Opcode::kTensorScalar:
    case Opcode::kTensorReduce:
    case Opcode::kTensorCopy:
    case Opcode::kBnStats:
    case Opcode::kBnAggr:
    case Opcode::kActivation:
    case Opcode::kDmaCopy:
      r.writes_dst = r.reads_src0 = true;
      break;
    case Opcode::kActivationReduce:
      r.writes_dst = r.reads_src0 = r.writes_src1 = true;
      break;
    case Opcode::kMemset:
    case Opcode::kIota:
      r.writes_dst = true;
      break;
    case Opcode::kSemaphoreWait:
    case Opcode::kSemaphoreSignal:
      break;
  }
  return r;
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
