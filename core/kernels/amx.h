// bfloat16 GEMM on Intel AMX, the host core's matrix unit (Note [AMX bf16 GEMM]
// in amx.cc). Internal to the kernels: matmul.cc calls it for bfloat16 products.
#pragma once

#include <cstdint>

namespace trn::kernels::amx {

// The CPU has AMX-TILE and AMX-BF16 and the OS granted this process the tile
// state (asked once); false when TRN_AMX=0 or set so by SetEnabled.
bool Available();
// Tests and benchmarks compare both paths: false makes Available() false.
void SetEnabled(bool enabled);

// A k x n bfloat16 B (element (p, j) at b[p * rs + j * cs], raw bits) packed
// into tiles: PackedBElems(k, n) uint16 elements (tile loads need no alignment).
int64_t PackedBElems(int64_t k, int64_t n);
// dst_block_stride (uint16 elements between 16-column blocks; 0: PackedBElems(k,
// 16)) writes b as rows [p0, p0 + k) of a taller pack (dst = its tiles + (p0 /
// 32) * 512, p0 a multiple of 32), as Gemm's b_block_stride reads them.
void PackB(const uint16_t* b, int64_t rs, int64_t cs, int64_t k, int64_t n, uint16_t* dst,
           int64_t dst_block_stride = 0);

// Where Gemm writes C, element (i, j) at i * ld + j: float32 (which
// `accumulate` adds onto) or bfloat16, each element the float32 sum (plus
// bias) rounded once to nearest even, as convert.h's F32ToBF16 rounds it.
struct Out {
  float* f32 = nullptr;
  uint16_t* bf16 = nullptr;
  int64_t ld = 0;
  static Out F32(float* c, int64_t ld) { return {c, nullptr, ld}; }
  static Out BF16(uint16_t* c, int64_t ld) { return {nullptr, c, ld}; }
};

// A float32 bias added to C before it is stored (not with accumulate): one
// value per column j (linear's bias) or, with per_row, per row i (a
// convolution's per-channel bias when C is W @ col).
struct Bias {
  const float* data = nullptr;
  bool per_row = false;
};

// c (+= when accumulate: float32 only) sum_p a(i, p) * b(p, j) in float32 for
// i < m, j < n, plus the bias: a bfloat16 (element (i, p) at a[i * rs + p *
// cs]; with cs == 1 its whole rows are read in place), b packed by PackB.
// b_block_stride (uint16 elements between b's 16-column blocks; 0:
// PackedBElems(k, 16), one whole pack) lets b be rows [p0, p0 + k) of a
// taller pack: b_packed = its tiles + (p0 / 32) * 512, p0 a multiple of 32.
// a_k_offsets (unit column stride, k a multiple of 32): columns [32 pb, 32 pb
// + 32) of A's row i start at a + i * a_rs + a_k_offsets[pb], so k tiles may
// lie anywhere (an implicit-GEMM convolution's taps: Note [AMX implicit conv]
// in conv.cc). Requires Available(); k >= 1.
void Gemm(int64_t m, int64_t n, int64_t k, const uint16_t* a, int64_t a_rs, int64_t a_cs,
          const uint16_t* b_packed, const Out& c, bool accumulate, Bias bias = {},
          int64_t b_block_stride = 0, const int64_t* a_k_offsets = nullptr);

// PackB of a float32 b (element (p, j) at b[p * rs + j], unit column stride),
// each element rounded to bfloat16 as convert.h's F32ToBF16: a convolution's
// im2col operand. Requires Available().
void PackBFromF32(const float* b, int64_t rs, int64_t k, int64_t n, uint16_t* dst);

}  // namespace trn::kernels::amx
