// What a compiled kernel executes (Note [Row programs]): shared by lower_rows.cc
// and lower.cc (which build it), program.cc (which runs it) and interpreter-inl.h (the
// per-target SIMD loops). Immutable after Compile(); any thread may run it.
//
// Note [Row programs]
// A fused kernel iterates over rows: the outer dims of its domain (any strides,
// 0 for broadcasts) times one row of the inner extent R (the reduced trailing
// dims, or the coalesced innermost dim of a pure elementwise kernel). A row is
// run in phases: a phase walks the row in chunks of `chunk` floats and runs its
// instruction list on each chunk; a row reduction accumulates during one phase
// and its per-row scalar is available from the next phase on (rms_norm is two
// phases: sum of squares, then scale). Per-row scalar math runs between
// phases. Values live in chunk registers (L1-sized, per thread); a value made
// in one phase and read in a later one is written to a row-long spill buffer.
// Contiguous f32 inputs are read in place, and a value stored to a contiguous
// f32 output is computed straight into it (streamed past the cache when the
// output is huge and the value is not read again). Everything is computed in
// f32; other dtypes are converted on load and store (float64 policy).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/common/tensor_ref.h"
#include "core/compiler/program.h"
#include "core/kernels/conv.h"

namespace trn::compiler::internal {

// Floats per chunk register: kMaxChunk when at most one register lives in the
// register file (the others read or write memory in place), fewer when more
// do, so that the file stays L1-sized (Note [Chunk length] in lower_rows.cc).
constexpr int64_t kMinChunk = 1024;
constexpr int64_t kMaxChunk = 4096;

enum class VOp : uint8_t {
  // unary (a)
  kCopy, kNeg, kAbs, kRelu, kExp, kLog, kSqrt, kRsqrt, kReciprocal, kSigmoid, kTanh,
  kSilu, kGelu, kGeluTanh, kSin, kCos, kLog1p, kExpm1, kErf, kSquare,
  kRound,  // a through `dtype`
  // binary (a, b)
  kAdd, kSub, kMul, kDiv, kPow, kMax, kMin, kEq, kNe, kLt, kLe, kGt, kGe,
  // ternary
  kWhere,   // a != 0 ? b : c
  kMulMul,  // a * b * c (x * rstd * weight in one pass)
  kExpSub,  // exp(a - b) (softmax's shifted exponent in one pass)
};

enum class RedOp : uint8_t { kSum, kSumSq, kMax, kMin };

// Ops whose chunk loops can also fold the next row's sum (Note [Row pipelining]
// in interpreter.cc): few, because each is compiled once more per variant.
inline bool FoldsSide(VOp op) {
  return op == VOp::kSub || op == VOp::kMul || op == VOp::kMulMul;  // layer_norm, rms_norm
}

// An instruction argument: a chunk register, or a per-row scalar register
// (broadcast over the chunk).
struct Arg {
  bool scalar = false;
  int reg = -1;
};

// How an operand is addressed: element (row r, i) of the operand is at
// offset + sum_d idx_d(r) * outer_strides[d] + inner(i), with inner(i) =
// i * inner_stride; or, for a row of segments (a slice of each of several
// rows, a broadcast table), (i / seg_len) * seg_stride + (i % seg_len) *
// inner_stride; or gather[i] for rows neither describes. A load with
// rotate_half = h > 0 reads each 2h-block of the row as rotate_half does:
// -x[j + h] for j < h, x[j - h] after (Note [Rotate half]).
struct Operand {
  int buffer = -1;  // -1: the matmul kernel's f32 scratch block (row-major, ld = inner)
  DType dtype = DType::kFloat32;
  int64_t offset = 0;
  int64_t outer_strides[kMaxDims] = {};
  int64_t inner_stride = 1;
  int64_t seg_len = 0;  // > 0: the row is segments of seg_len elements
  int64_t seg_stride = 0;
  std::vector<int64_t> gather;  // non-empty: per-element inner offsets
  int64_t rotate_half = 0;
  bool direct() const {
    return dtype == DType::kFloat32 && gather.empty() && seg_len == 0 && inner_stride == 1 &&
           rotate_half == 0;
  }
};

// A chunk instruction. kLoad: dst <- operand (in place when direct) or spill
// slot; kCompute: dst <- op(a, b, c); kReduce: acc[dst] op= a; kStore:
// operand[dst] <- a (converting). A kCompute with `out_operand` >= 0 writes
// its result straight into that (direct) operand; with spill >= 0 into the
// spill slot (the value is read again in a later phase).
struct Instr {
  enum class Kind : uint8_t { kLoad, kCompute, kReduce, kStore };
  Kind kind = Kind::kCompute;
  VOp op = VOp::kCopy;
  RedOp red = RedOp::kSum;
  DType round = DType::kFloat32;  // kRound
  int dst = -1;
  Arg a, b, c;
  int operand = -1;      // kLoad source / kStore destination
  int spill = -1;        // kLoad from / kCompute into a spill slot
  int out_operand = -1;  // kCompute straight into a direct operand
  bool stream = false;   // ... with non-temporal stores
  double scalar = 0;     // kPow exponent when b is absent
};

// Per-row scalar work between phases. kLoad: s[dst] <- operand at the row;
// kCompute: s[dst] <- op(s[a], s[b], s[c]); kStore: operand[dst] <- s[a];
// kFinish: s[dst] <- acc[a] * scale (mean: 1/R).
struct ScalarInstr {
  enum class Kind : uint8_t { kLoad, kCompute, kStore, kFinish };
  Kind kind = Kind::kCompute;
  VOp op = VOp::kCopy;
  DType round = DType::kFloat32;
  int dst = -1, a = -1, b = -1, c = -1;
  float scale = 1;
};

struct Reduction {
  int acc = -1;
  RedOp op = RedOp::kSum;
};

struct Phase {
  std::vector<ScalarInstr> pre;   // before the chunk loop
  std::vector<Instr> body;        // per chunk
  std::vector<Reduction> reductions;  // accumulators reset at phase start
  std::vector<ScalarInstr> post;  // kFinish of this phase's reductions
};

struct RowProgram {
  int nouter = 0;
  int64_t outer_sizes[kMaxDims] = {};
  int64_t rows = 1;   // product of outer_sizes
  int64_t inner = 1;  // R
  std::vector<Operand> operands;
  std::vector<Phase> phases;
  std::vector<float> scalar_init;  // initial scalar registers (constants)
  int num_vregs = 0, num_accs = 0, num_spills = 0;
  int64_t chunk = kMinChunk;  // floats per chunk (kMinChunk..kMaxChunk)
  bool stream = false;  // some instruction streams: fence at the end
  // >= 0: this compute instruction of the last phase also runs phase 0 (one
  // load and one sum reduction) for the next row (Note [Row pipelining]).
  int pipeline_instr = -1;
};

// The GEMM in front of a matmul kernel's epilogue.
struct GemmSpec {
  View out, a, b, bias;  // bias.buffer < 0: none; out.buffer < 0: scratch only
  double alpha = 1, beta = 1;
};

// One compiled kernel.
struct KernelImpl {
  enum class Kind : uint8_t { kRows, kMatmul, kCopy, kLibrary };
  Kind kind = Kind::kRows;
  RowProgram prog;      // kRows; kMatmul epilogue when has_epilogue
  bool has_epilogue = false;
  GemmSpec gemm;        // kMatmul
  View copy_out, copy_in;  // kCopy (clone of a view no strides describe)
  // kLibrary: a single node run by a core kernel (Note [Library kernels]):
  // reductions over leading dims, softmax over a non-last dim, the library
  // ops, integer/bool elementwise math.
  Op lib_op = Op::kSum;
  std::vector<int64_t> lib_dims;
  View lib_out;
  std::vector<View> lib_ins;  // one per node input
  double lib_scalar = 0, lib_alpha = 1, lib_eps = 0;
  bool lib_has_scalar = false, lib_scalar_first = false;
  bool lib_causal = false;  // kSdpa
  // kConv's epilogue (Note [Conv epilogue]): a folded batch norm's inputs
  // (mean, var[, weight, bias]) follow the conv's in lib_ins, lib_eps its eps;
  // then lib_act: kClamp to [lib_lo, lib_hi] (relu: [0, inf]), kGelu, kSilu.
  int lib_bn_inputs = 0;
  kernels::ConvActivation lib_act = kernels::ConvActivation::kNone;
  double lib_lo = 0, lib_hi = 0;
  Node::ConvAttrs lib_conv;  // kConv
  Node::PoolAttrs lib_pool;  // kMaxPool2d, kAvgPool2d, kIm2Col, kCol2Im
  // What the kernel reads and writes in memory (JSON shapes, bytes).
  std::vector<View> reads, writes;
};

}  // namespace trn::compiler::internal

namespace trn::compiler {
struct Program::Impl {
  std::vector<internal::KernelImpl> kernels;
};
}  // namespace trn::compiler

namespace trn::compiler::internal {
// Per-target entry (interpreter.cc): runs rows [begin, end) of `p`. `scratch`
// is the matmul scratch block holding rows [begin, end) (ld = p.inner).
void RunRows(const RowProgram& p, const std::vector<void*>& buffers, const float* scratch,
             int64_t begin, int64_t end);
}  // namespace trn::compiler::internal
