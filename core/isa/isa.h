// The NeuronCore engine instruction set of trnscope's device model
// (../shared/reference/neuroncore.md): tiles in HBM / SBUF / PSUM, instructions
// for the Tensor, Vector, Scalar, GpSimd, Sync and DMA engines. Plain data,
// torch-free; the checks live in validate.h, the file format in executable.h,
// timing in core/model. Values, not threads: any thread may use them.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/common/engine.h"
#include "core/common/tensor_ref.h"

namespace trn::isa {

// A modelled core version. NC-v2 = Trn1, NC-v3 = Trn2 (target.h has their sizes).
enum class Target : uint8_t { kTrn1, kTrn2 };

// The engines of one NeuronCore, each with its own in-order instruction stream
// (core/common/engine.h, shared with the host-side runtime).
using ::trn::Engine;
using ::trn::EngineName;
using ::trn::kNumEngines;
using ::trn::ParseEngine;

enum class Memory : uint8_t { kHbm, kSbuf, kPsum };

enum class Opcode : uint8_t {
  // Tensor engine: a matmul is LoadStationary then MultiplyMoving into PSUM.
  kLoadStationary,
  kMultiplyMoving,
  kTranspose,  // Tensor (through the PE array) or Vector (32x32 blocks)
  // Vector engine (tensor_scalar / tensor_copy also run on Scalar and GpSimd).
  kTensorTensor,
  kTensorScalar,
  kTensorReduce,
  kTensorCopy,
  kMemset,
  kBnStats,
  kBnAggr,
  // Scalar (activation) engine: dst = func(src * scale + bias).
  kActivation,
  kActivationReduce,  // activation plus a reduction of each partition's row
  // GpSimd engine.
  kIota,
  // Sync engine: semaphores order work across engines.
  kSemaphoreWait,    // waits until semaphore >= value
  kSemaphoreSignal,  // adds value to semaphore
  // DMA: a copy on one of the core's queues, split into descriptors.
  kDmaCopy,
};
inline constexpr int kNumOpcodes = static_cast<int>(Opcode::kDmaCopy) + 1;

// ALU operations of tensor_tensor / tensor_scalar / tensor_reduce.
enum class AluOp : uint8_t {
  kBypass,  // no operation (tensor_scalar's second op when there is one)
  kAdd,
  kSubtract,
  kMultiply,
  kDivide,
  kMax,
  kMin,
  kPow,
  kIsEqual,  // 1.0 or 0.0
  kIsGreater,
};

// Functions of the Scalar engine's lookup tables.
enum class ActivationFunc : uint8_t {
  kCopy,  // identity
  kExp,
  kLog,
  kTanh,
  kSigmoid,
  kRelu,
  kGelu,
  kGeluTanh,
  kSilu,
  kSquare,
  kSqrt,
  kRsqrt,
  kReciprocal,
};

const char* TargetName(Target t);   // "trn1", "trn2"
const char* MemoryName(Memory m);   // "hbm", "sbuf", "psum"
const char* OpcodeName(Opcode op);  // NKI's names: "nc_matmul", "tensor_tensor", ...
const char* AluOpName(AluOp op);
const char* ActivationFuncName(ActivationFunc f);
// The value with that name (the names above); false if there is none.
bool ParseMemory(std::string_view name, Memory* out);
bool ParseOpcode(std::string_view name, Opcode* out);
bool ParseAluOp(std::string_view name, AluOp* out);
bool ParseActivationFunc(std::string_view name, ActivationFunc* out);

inline constexpr int kMaxFreeDims = 4;

// One operand: a [partitions, free...] view of a buffer. The partition dim comes
// first (reference/neuroncore.md, tile constraints). Offsets and strides count
// elements of `dtype`.
//  - SBUF/PSUM: `buffer` indexes Executable::allocations; the tile covers
//    partitions [partition_start, partition_start + partitions) of the allocation
//    and, in each, the elements offset + sum(i_d * strides[d]).
//  - HBM: `buffer` indexes Executable::tensors; element (p, i...) is at
//    offset + p * partition_stride + sum(i_d * strides[d]) of the tensor.
struct Tile {
  Memory memory = Memory::kSbuf;
  DType dtype = DType::kFloat32;
  uint32_t buffer = 0;
  int32_t partition_start = 0;  // SBUF/PSUM only
  int32_t partitions = 1;
  int64_t partition_stride = 0;  // HBM only
  int64_t offset = 0;
  int32_t ndim = 1;  // free dims, 1..kMaxFreeDims
  int64_t sizes[kMaxFreeDims] = {1, 1, 1, 1};
  int64_t strides[kMaxFreeDims] = {1, 1, 1, 1};

  int64_t free_size() const {  // elements per partition
    int64_t n = 1;
    for (int d = 0; d < ndim; ++d) n *= sizes[d];
    return n;
  }
  int64_t numel() const { return free_size() * partitions; }
  bool operator==(const Tile& o) const;
};

// A [partitions, free] tile at the start of an SBUF/PSUM allocation.
inline Tile OnChipTile(Memory memory, uint32_t allocation, int32_t partitions, int64_t free,
                       DType dtype = DType::kFloat32) {
  Tile t;
  t.memory = memory;
  t.dtype = dtype;
  t.buffer = allocation;
  t.partitions = partitions;
  t.sizes[0] = free;
  return t;
}

// Rows [row, row + rows) x columns [col, col + cols) of a row-major HBM tensor
// with `pitch` elements per row.
inline Tile HbmTile(uint32_t tensor, int64_t pitch, int64_t row, int32_t rows, int64_t col,
                    int64_t cols, DType dtype = DType::kFloat32) {
  Tile t;
  t.memory = Memory::kHbm;
  t.dtype = dtype;
  t.buffer = tensor;
  t.partitions = rows;
  t.partition_stride = pitch;
  t.offset = row * pitch + col;
  t.sizes[0] = cols;
  return t;
}

// No operand.
inline constexpr uint32_t kNone = 0xffffffffu;

// One instruction. Which fields mean something depends on the opcode
// (validate.h checks them):
//  kLoadStationary    src0 = stationary [K, M] (SBUF)
//  kMultiplyMoving    dst = PSUM [M, N] fp32, src0 = moving [K, N] (SBUF), src1 = the
//                     stationary operand it multiplies (the one loaded before);
//                     accumulate: add into dst instead of overwriting it
//  kTranspose         dst [F, P] = src0 [P, F]
//  kTensorTensor      dst = src0 op0 src1
//  kTensorScalar      dst = (src0 op0 imm0) op1 imm1; `value` bit 0 (bit 1): operand 0
//                     (1) is src1 [P, 1] instead, one scalar per partition
//  kTensorReduce      dst [P, G] = reduce op0 over src0's innermost free dims, those
//                     after the ones whose sizes multiply to G (G = 1: all of them)
//  kTensorCopy        dst = src0 (with a cast when dtypes differ)
//  kMemset            dst = imm0
//  kBnStats           dst [P, 6] = per-partition count, mean, variance halves of src0
//  kBnAggr            dst [P, 2] = mean, variance aggregated from bn_stats rows in src0
//  kActivation        dst = func(src0 * imm0 + imm1), imm0 = scale, imm1 = bias; `value`
//                     bit 0 (bit 1): the bias (scale) is src1 [P, 1] instead
//  kActivationReduce  kActivation, plus src1 [P, 1] = sum of dst's row
//  kIota              dst[p, i] = imm0 + p * imm1 + i (an index pattern)
//  kSemaphoreWait     semaphore >= value
//  kSemaphoreSignal   semaphore += value
//  kDmaCopy           dst = src0 across memories, on DMA queue `queue`
struct Instruction {
  Opcode opcode = Opcode::kTensorCopy;
  Engine engine = Engine::kVector;
  AluOp op0 = AluOp::kBypass;
  AluOp op1 = AluOp::kBypass;
  ActivationFunc func = ActivationFunc::kCopy;
  bool accumulate = false;
  uint8_t queue = 0;       // kDmaCopy
  uint16_t semaphore = 0;  // kSemaphoreWait / kSemaphoreSignal
  uint32_t value = 0;
  double imm0 = 0.0;
  double imm1 = 0.0;
  Tile dst;
  Tile src0;
  Tile src1;
  uint32_t source = kNone;  // index into Executable::sources (debug info), or kNone

  bool operator==(const Instruction& o) const;
};

// kTensorScalar / kActivation: bits of `value` naming the scalars src1 holds.
inline constexpr uint32_t kScalarFromTile = 3;

// Which operands an instruction reads and writes (the simulator derives its
// dependencies from them; validate.h checks that exactly these are set).
struct Operands {
  bool writes_dst = false;
  bool reads_dst = false;  // an accumulating matmul adds into dst
  bool reads_src0 = false;
  bool reads_src1 = false;
  bool writes_src1 = false;  // kActivationReduce's row sums
};
inline Operands OperandsOf(const Instruction& ins) {
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
    case Opcode::kActivationReduce:
      r.writes_dst = r.reads_src0 = r.writes_src1 = true;
      break;
    case Opcode::kTensorScalar:
    case Opcode::kActivation:
      r.writes_dst = r.reads_src0 = true;
      r.reads_src1 = (ins.value & kScalarFromTile) != 0;
      break;
    case Opcode::kMemset:
    case Opcode::kIota:
      r.writes_dst = true;
      break;
    case Opcode::kSemaphoreWait:
    case Opcode::kSemaphoreSignal:
      break;
    default:  // one input, one output
      r.writes_dst = r.reads_src0 = true;
      break;
  }
  return r;
}

// The engine an opcode runs on when the kernel does not choose (NKI's default).
Engine DefaultEngine(Opcode op);
// Whether `op` may run on `e` (tensor_scalar and tensor_copy may move engines).
bool RunsOn(Opcode op, Engine e);

}  // namespace trn::isa
