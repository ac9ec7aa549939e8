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
void PackB(const uint16_t* b, int64_t rs, int64_t cs, int64_t k, int64_t n, uint16_t* dst);

// c[i * ldc + j] (+= when accumulate) sum_p a(i, p) * b(p, j) in float32 for
// i < m, j < n: a bfloat16 (element (i, p) at a[i * rs + p * cs]), b packed by
// PackB; plus bias[j] when bias is given (a float32 row, linear's bias; not with
// accumulate). b_block_stride (uint16 elements between b's 16-column blocks;
// 0: PackedBElems(k, 16), one whole pack) lets b be rows [p0, p0 + k) of a
// taller pack: b_packed = its tiles + (p0 / 32) * 512, p0 a multiple of 32.
// Requires Available(); k >= 1.
void Gemm(int64_t m, int64_t n, int64_t k, const uint16_t* a, int64_t a_rs, int64_t a_cs,
          const uint16_t* b_packed, float* c, int64_t ldc, bool accumulate,
          const float* bias = nullptr, int64_t b_block_stride = 0);

}  // namespace trn::kernels::amx
