// A small valid program for the isa and model tests: C[128, 512] = A^T B on one
// tile (A is lhsT [K = 128, M = 128], B is [128, 512]), two loads on two DMA
// queues, a matmul into PSUM, a PSUM -> SBUF copy and a store.
#pragma once

#include "core/isa/executable.h"

namespace trn::isa::testing {

inline Tile Sbuf(uint32_t alloc, int partitions, int64_t free, DType dt = DType::kFloat32,
                 Memory m = Memory::kSbuf) {
  return OnChipTile(m, alloc, partitions, free, dt);
}

// Rows [0, partitions) of a tensor with `row_stride` elements per row, from `offset`.
inline Tile Hbm(uint32_t tensor, int partitions, int64_t free, int64_t row_stride,
                int64_t offset = 0) {
  Tile t = HbmTile(tensor, row_stride, 0, partitions, 0, free);
  t.offset = offset;
  return t;
}

inline Instruction Make(Opcode op, Tile dst, Tile src0, Tile src1 = Tile{}) {
  Instruction ins;
  ins.opcode = op;
  ins.engine = DefaultEngine(op);
  ins.dst = dst;
  ins.src0 = src0;
  ins.src1 = src1;
  return ins;
}

inline Executable MatmulTile(Target target = Target::kTrn2) {
  Executable exe;
  exe.name = "matmul_tile";
  exe.target = target;
  exe.tensors = {{"lhsT", TensorKind::kInput, DType::kFloat32, {128, 128}},
                 {"rhs", TensorKind::kInput, DType::kFloat32, {128, 512}},
                 {"out", TensorKind::kOutput, DType::kFloat32, {128, 512}}};
  exe.allocations = {{"a", Memory::kSbuf, 0, 128, 0, 128 * 4},
                     {"b", Memory::kSbuf, 0, 128, 128 * 4, 512 * 4},
                     {"c", Memory::kSbuf, 0, 128, 640 * 4, 512 * 4},
                     {"acc", Memory::kPsum, 0, 128, 0, 2048}};
  exe.sources = {{"matmul.py", 7, "nl.load", -1},
                 {"matmul.py", 9, "nisa.nc_matmul", -1},
                 {"matmul.py", 11, "nl.store", 3}};
  Instruction load_a = Make(Opcode::kDmaCopy, Sbuf(0, 128, 128), Hbm(0, 128, 128, 128));
  load_a.source = 0;
  Instruction load_b = Make(Opcode::kDmaCopy, Sbuf(1, 128, 512), Hbm(1, 128, 512, 512));
  load_b.queue = 1;
  load_b.source = 0;
  Instruction stationary = Make(Opcode::kLoadStationary, Tile{}, Sbuf(0, 128, 128));
  stationary.source = 1;
  Instruction mm = Make(Opcode::kMultiplyMoving, Sbuf(3, 128, 512, DType::kFloat32, Memory::kPsum),
                        Sbuf(1, 128, 512), Sbuf(0, 128, 128));
  mm.source = 1;
  Instruction copy = Make(Opcode::kTensorCopy, Sbuf(2, 128, 512),
                          Sbuf(3, 128, 512, DType::kFloat32, Memory::kPsum));
  Instruction store = Make(Opcode::kDmaCopy, Hbm(2, 128, 512, 512), Sbuf(2, 128, 512));
  store.queue = 2;
  store.source = 2;
  exe.instructions = {load_a, load_b, stationary, mm, copy, store};
  return exe;
}

}  // namespace trn::isa::testing
