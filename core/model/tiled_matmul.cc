#include "core/model/tiled_matmul.h"

#include "core/common/assert.h"

namespace trn::model {

using isa::Instruction;
using isa::Memory;
using isa::Opcode;
using isa::Tile;

namespace {

Instruction Op(Opcode op, const Tile& dst, const Tile& src0, const Tile& src1 = Tile{}) {
  Instruction ins;
  ins.opcode = op;
  ins.engine = isa::DefaultEngine(op);
  ins.dst = dst;
  ins.src0 = src0;
  ins.src1 = src1;
  return ins;
}

}  // namespace

isa::Executable BasicTiledMatmul(int64_t m, int64_t k, int64_t n, DType dt, isa::Target target,
                                 int buffers) {
  constexpr int kTm = 128, kTk = 128, kTn = 512;
  TRN_ASSERT(m % kTm == 0 && k % kTk == 0 && n % kTn == 0 && buffers >= 1,
             "BasicTiledMatmul: sizes are whole tiles");
  const int64_t item = static_cast<int64_t>(ItemSize(dt));
  isa::Executable x;
  x.name = "matmul_basic_tiled";
  x.target = target;
  x.tensors = {{"lhsT", isa::TensorKind::kInput, dt, {k, m}},
               {"rhs", isa::TensorKind::kInput, dt, {k, n}},
               {"result", isa::TensorKind::kOutput, DType::kFloat32, {m, n}}};
  x.sources = {{"matmul_basic.py", 1, "nl.load", -1},
               {"matmul_basic.py", 2, "nisa.nc_matmul", -1},
               {"matmul_basic.py", 3, "nl.copy", -1},
               {"matmul_basic.py", 4, "nl.store", -1}};
  // SBUF: `buffers` lhsT tiles, `buffers` rhs tiles, 2 result tiles; PSUM: 2 banks.
  int64_t at = 0;
  const auto sbuf = [&](const char* name, int64_t bytes) {
    x.allocations.push_back({name, Memory::kSbuf, 0, 128, at, bytes});
    at += bytes;
    return static_cast<uint32_t>(x.allocations.size() - 1);
  };
  uint32_t lhs_buf[16], rhs_buf[16], out_buf[2], acc_buf[2];
  TRN_ASSERT(buffers <= 16, "BasicTiledMatmul: at most 16 buffers");
  for (int b = 0; b < buffers; ++b) lhs_buf[b] = sbuf("lhsT_tile", kTm * item);
  for (int b = 0; b < buffers; ++b) rhs_buf[b] = sbuf("rhs_tile", kTn * item);
  for (int b = 0; b < 2; ++b) out_buf[b] = sbuf("res_sb", kTn * 4);
  for (int b = 0; b < 2; ++b) {
    x.allocations.push_back({"res_psum", Memory::kPsum, 0, 128, b * 2048, 2048});
    acc_buf[b] = static_cast<uint32_t>(x.allocations.size() - 1);
  }
  int64_t step = 0, tile = 0;
  for (int64_t mi = 0; mi < m / kTm; ++mi) {
    for (int64_t ni = 0; ni < n / kTn; ++ni, ++tile) {
      const Tile acc = isa::OnChipTile(Memory::kPsum, acc_buf[tile % 2], kTm, kTn, DType::kFloat32);
      for (int64_t ki = 0; ki < k / kTk; ++ki, ++step) {
        const Tile lhs = isa::OnChipTile(Memory::kSbuf, lhs_buf[step % buffers], kTk, kTm, dt);
        const Tile rhs = isa::OnChipTile(Memory::kSbuf, rhs_buf[step % buffers], kTk, kTn, dt);
        Instruction load_l =
            Op(Opcode::kDmaCopy, lhs, isa::HbmTile(0, m, ki * kTk, kTk, mi * kTm, kTm, dt));
        Instruction load_r =
            Op(Opcode::kDmaCopy, rhs, isa::HbmTile(1, n, ki * kTk, kTk, ni * kTn, kTn, dt));
        load_l.queue = static_cast<uint8_t>(step % 16);
        load_r.queue = static_cast<uint8_t>((step + 8) % 16);
        load_l.source = load_r.source = 0;
        Instruction stationary = Op(Opcode::kLoadStationary, Tile{}, lhs);
        Instruction mm = Op(Opcode::kMultiplyMoving, acc, rhs, lhs);
        mm.accumulate = ki > 0;
        stationary.source = mm.source = 1;
        x.instructions.insert(x.instructions.end(), {load_l, load_r, stationary, mm});
      }
      const Tile out = isa::OnChipTile(Memory::kSbuf, out_buf[tile % 2], kTm, kTn, DType::kFloat32);
      Instruction copy = Op(Opcode::kTensorCopy, out, acc);
      copy.source = 2;
      const Tile dst = isa::HbmTile(2, n, mi * kTm, kTm, ni * kTn, kTn, DType::kFloat32);
      Instruction store = Op(Opcode::kDmaCopy, dst, out);
      store.source = 3;
      x.instructions.insert(x.instructions.end(), {copy, store});
    }
  }
  return x;
}

}  // namespace trn::model
