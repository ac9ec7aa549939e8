#include "core/model/cost.h"

#include <algorithm>

#include "core/common/assert.h"

namespace trn::model {

using isa::Engine;
using isa::Memory;
using isa::Opcode;

double EngineGhz(Engine e, const isa::TargetSpec& spec) {
  switch (e) {
    case Engine::kTensor:
      return spec.tensor_ghz;
    case Engine::kVector:
      return spec.vector_ghz;
    case Engine::kScalar:
      return spec.scalar_ghz;
    case Engine::kGpSimd:
      return spec.gpsimd_ghz;
    case Engine::kSync:
      return spec.vector_ghz;  // semaphore ops: a few cycles of some clock
    case Engine::kDma:
      return 1.0;  // DMA time is bytes / bandwidth
  }
  TRN_ASSERT(false, "unknown Engine");
  return 1.0;
}

namespace {

bool Is16Bit(DType d) { return d == DType::kBFloat16 || d == DType::kFloat16; }

}  // namespace

Cost ComputeCost(const isa::Instruction& ins, const isa::TargetSpec& spec) {
  const double min_ii = spec.timing.min_ii_cycles;
  // N: elements per partition of the input; an operand the opcode does not use
  // was never validated and may hold anything.
  const double n =
      isa::OperandsOf(ins).reads_src0 ? static_cast<double>(ins.src0.free_size()) : 0.0;
  Cost c;
  switch (ins.opcode) {
    case Opcode::kLoadStationary:
      // M cycles (4x for fp32): "up to 4x cheaper" than the N = 512 matmuls that
      // follow it; the basic matmul tutorial's Tensor time, 34.82 ms for 32,768
      // loads + matmuls, is 1,063 ns each = 853 (matmul) + 213 (this, M = 128 fp32):
      // there the loads cannot hide beside the multiplies (Note [Tensor engine rows]).
      c.cycles = std::max(min_ii, n);
      if (ins.src0.dtype == DType::kFloat32) c.cycles *= 4;
      break;
    case Opcode::kMultiplyMoving: {
      const double m = static_cast<double>(ins.src1.free_size());  // stationary free size
      c.cycles = std::max(std::min(64.0, m), n);
      c.flops = 2.0 * ins.src0.partitions * m * n;
      if (ins.src0.dtype == DType::kFloat32 || ins.src1.dtype == DType::kFloat32) {
        c.cycles *= 4;  // two fp32_mode passes, each 2x
        c.hw_instructions = 2;
      }
      break;
    }
    case Opcode::kTranspose:
      if (ins.engine == Engine::kTensor) {
        // max(P, min(64, F)); an identity matmul: P x F x P FLOPs on the PE array.
        c.cycles = std::max<double>(ins.src0.partitions, std::min(64.0, n));
        c.flops = 2.0 * ins.src0.partitions * ins.src0.partitions * n;
        if (ins.src0.dtype == DType::kFloat32) c.cycles *= 4;
      } else {
        c.cycles = std::max(min_ii, n);
      }
      break;
    case Opcode::kTensorTensor: {
      const bool one_psum =
          (ins.src0.memory == Memory::kPsum) != (ins.src1.memory == Memory::kPsum);
      const bool fast_sbuf = ins.src0.memory == Memory::kSbuf && ins.src1.memory == Memory::kSbuf &&
                             Is16Bit(ins.src0.dtype) && Is16Bit(ins.src1.dtype) &&
                             (ins.op0 == isa::AluOp::kAdd || ins.op0 == isa::AluOp::kMultiply ||
                              ins.op0 == isa::AluOp::kSubtract) &&
                             ins.src0.ndim == 1 && ins.src0.strides[0] == 1 && ins.src1.ndim == 1 &&
                             ins.src1.strides[0] == 1;
      c.cycles = std::max(min_ii, one_psum || fast_sbuf ? n : 2 * n);
      break;
    }
    case Opcode::kTensorReduce: {
      const bool half = Is16Bit(ins.src0.dtype) && Is16Bit(ins.dst.dtype) &&
                        (ins.op0 == isa::AluOp::kAdd || ins.op0 == isa::AluOp::kMax);
      c.cycles = half ? n / 2 : n;
      break;
    }
    case Opcode::kMemset: {
      const double m = static_cast<double>(ins.dst.free_size());
      c.cycles = std::max(min_ii, ins.imm0 == 0.0 && Is16Bit(ins.dst.dtype) ? m / 2 : m);
      break;
    }
    case Opcode::kTensorScalar:
    case Opcode::kTensorCopy:
    case Opcode::kBnStats:
    case Opcode::kActivation:
      c.cycles = std::max(min_ii, n);
      break;
    case Opcode::kBnAggr:
      c.cycles = std::max(min_ii, 13.0 * n / 3);
      break;
    case Opcode::kActivationReduce:
      c.cycles = std::max(min_ii, n) + min_ii;
      break;
    case Opcode::kIota:
      c.cycles = 150 + static_cast<double>(ins.dst.free_size());
      break;
    case Opcode::kSemaphoreWait:
    case Opcode::kSemaphoreSignal:
      c.cycles = 1;
      break;
    case Opcode::kDmaCopy:
      TRN_ASSERT(false, "a dma_copy has a DmaPlan, not a Cost");
      break;
  }
  return c;
}

namespace {

// Elements of the longest trailing block of `t`'s free dims that is dense.
int64_t RunElements(const isa::Tile& t) {
  int64_t run = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    if (t.sizes[d] == 1) continue;
    if (t.strides[d] != run) break;
    run *= t.sizes[d];
  }
  return run;
}

// The first partition of the core that `t` occupies (HBM: its row index).
int FirstPartition(const isa::Tile& t, const isa::Executable& exe) {
  if (t.memory == Memory::kHbm) return 0;
  return exe.allocations[t.buffer].partition_start + t.partition_start;
}

}  // namespace

DmaRows PlanDma(const isa::Instruction& ins, const isa::Executable& exe) {
  const isa::Tile& rows = ins.dst.memory != Memory::kHbm ? ins.dst : ins.src0;
  const int64_t row_elems = rows.free_size();
  // A run must be contiguous on both sides; runs of a row are whole blocks.
  int64_t run = std::min(RunElements(ins.dst), RunElements(ins.src0));
  run = std::max<int64_t>(1, std::min(run, row_elems));
  DmaRows r;
  r.first = FirstPartition(rows, exe);
  r.partitions = rows.partitions;
  r.row_bytes = row_elems * static_cast<int64_t>(ItemSize(rows.dtype));
  r.runs_per_row = (row_elems + run - 1) / run;
  return r;
}

}  // namespace trn::model
