// Note [AMX bf16 GEMM]
// Sapphire and Emerald Rapids cores carry AMX, a matrix unit: TDPBF16PS adds
// a 16 x 32 bfloat16 tile times a 32 x 16 one (pairs of k interleaved) into a
// 16 x 16 float32 tile. CPU PyTorch runs its bfloat16 linears there (oneDNN:
// 560 GFLOP/s at 128 x 256 x 768 on one Emerald Rapids core, against 130 for
// trn's float32 GEMM on converted operands), so a bfloat16 model on trn ran
// 1.7x slower than on the CPU. trn's bfloat16 products use it too, where the
// CPU has it and the OS grants the tile state (Linux: arch_prctl, asked once).
// Layout: A's 16-row x 32-column tiles load from A itself (Note [AMX A in
// place]; packed where its columns are strided), B (the weight, cached: Note
// [Packed weight cache]) is packed into 32 x 16 tiles of k pairs; packed tiles
// are zero past the matrix, so edges need no other tile shape. A block is 2 x 2 C tiles
// (tiles 0-3) fed by two A tiles (4, 5) and two B tiles (6, 7), the eight tile
// registers. Products of bfloat16 are exact and summed in float32 (bfloat16
// denormals read as 0), as on the CPU's own path.
#include "core/kernels/amx.h"

#include "core/common/assert.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

#if defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#define TRN_AMX_BUILD 1
#endif

namespace trn::kernels::amx {
namespace {

constexpr int64_t kRows = 16;        // rows of every tile
constexpr int64_t kDepth = 32;       // bfloat16 per A tile row: k per tile
constexpr int64_t kTileElems = 512;  // uint16 per A or B tile (16 rows of 64 bytes)
constexpr int64_t kRowChunk = 256;   // rows of A per pass over B (in L2 for k up to ~2048)

std::atomic<bool> enabled{true};


bool Detect() {
#ifdef TRN_AMX_BUILD
  const char* env = std::getenv("TRN_AMX");
  if (env != nullptr && std::strcmp(env, "0") == 0) return false;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  const bool bf16 = (edx >> 22) & 1, tile = (edx >> 24) & 1;
  if (!bf16 || !tile) return false;
  constexpr long kReqXcompPerm = 0x1023, kXtileData = 18;
  return syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) == 0;
#else
  return false;
#endif
}

}  // namespace

bool Available() {
  static const bool detected = Detect();
  return detected && enabled.load(std::memory_order_relaxed);
}
void SetEnabled(bool on) { enabled.store(on, std::memory_order_relaxed); }

int64_t PackedBElems(int64_t k, int64_t n) {
  return (n + kRows - 1) / kRows * ((k + kDepth - 1) / kDepth) * kTileElems;
}

void PackB(const uint16_t* b, int64_t rs, int64_t cs, int64_t k, int64_t n, uint16_t* dst,
           int64_t dst_block_stride) {
  const int64_t kb = (k + kDepth - 1) / kDepth, nb = (n + kRows - 1) / kRows;
  const int64_t block = dst_block_stride > 0 ? dst_block_stride : kb * kTileElems;
  for (int64_t jb = 0; jb < nb; ++jb) {
    const int64_t cols = std::min(kRows, n - jb * kRows);
    for (int64_t pb = 0; pb < kb; ++pb) {
      uint16_t* tile = dst + jb * block + pb * kTileElems;
      std::fill(tile, tile + kTileElems, uint16_t{0});
      const int64_t depth = std::min(kDepth, k - pb * kDepth);
      for (int64_t q = 0; q < depth; ++q) {  // tile row q / 2 holds k pair (2r, 2r + 1)
        const uint16_t* row = b + (pb * kDepth + q) * rs + jb * kRows * cs;
        uint16_t* out = tile + (q / 2) * kDepth + (q % 2);
        for (int64_t j = 0; j < cols; ++j) out[2 * j] = row[j * cs];
      }
    }
  }
}

#ifdef TRN_AMX_BUILD
namespace {

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Tiles [pb0, kb) of the row tile of A at row i (rows < 16 valid, the rest
// zero) into dst, tile pb at dst + pb * kTileElems.
void PackRowTile(const uint16_t* a, int64_t rs, int64_t cs, const int64_t* k_offsets, int64_t i,
                 int64_t rows, int64_t k, int64_t pb0, uint16_t* dst) {
  const int64_t kb = (k + kDepth - 1) / kDepth;
  for (int64_t pb = pb0; pb < kb; ++pb) {
    uint16_t* tile = dst + pb * kTileElems;
    const int64_t depth = std::min(kDepth, k - pb * kDepth);
    for (int64_t r = 0; r < kRows; ++r) {
      uint16_t* out = tile + r * kDepth;
      if (r >= rows) {
        std::fill(out, out + kDepth, uint16_t{0});
        continue;
      }
      const uint16_t* in = a + (i + r) * rs + (k_offsets ? k_offsets[pb] : pb * kDepth * cs);
      if (cs == 1) {
        std::memcpy(out, in, static_cast<size_t>(depth) * sizeof(uint16_t));
      } else {
        for (int64_t p = 0; p < depth; ++p) out[p] = in[p * cs];
      }
      std::fill(out + depth, out + kDepth, uint16_t{0});
    }
  }
}

// Where one row tile of A is read: k tile pb < kb_main at ptr + pb * step
// (or ptr + offsets[pb]) with rows `stride` bytes apart, the partial last k
// tile (k % 32 columns, zero-padded) packed at tail.
struct ARows {
  const uint16_t* ptr;
  size_t stride;
  int64_t step;
  const uint16_t* tail;
  const int64_t* offsets = nullptr;
  const uint16_t* Tile(int64_t pb) const { return ptr + (offsets ? offsets[pb] : pb * step); }
};

// AVX512-BF16's VCVTNEPS2BF16 (every AMX CPU so far has it; checked anyway).
bool HasCvtBF16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) != 0 && ((eax >> 5) & 1) != 0;
}
const bool kHasCvtBF16 = HasCvtBF16();

// x rounded to bfloat16 as convert.h's F32ToBF16 (nearest even, NaN quieted;
// elementwise-inl.h's BF16HighBits in AVX-512 intrinsics, as this file is not
// per target) in the lanes of `valid`. VCVTNEPS2BF16 rounds so too, except
// that it flushes float32 subnormals to zero: vectors holding one take the
// integer ops (maskz forms: GCC 12 warns about the plain ones' undefined
// vector). The integer ops alone made the epilogue of a 1598 x 256 x 256
// linear 27 % of its time.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"), always_inline)) inline __m256i
RoundBF16(__m512 x, __mmask16 valid) {
  const bool cvt = kHasCvtBF16;
  const __m512i u = _mm512_castps_si512(x);
  const __mmask16 subnormal = _mm512_mask_test_epi32_mask(
      _mm512_testn_epi32_mask(u, _mm512_set1_epi32(0x7f800000)), u,
      _mm512_set1_epi32(0x007fffff));
  if (cvt && subnormal == 0) return reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(x));
  const __m512i high = _mm512_maskz_srli_epi32(valid, u, 16);
  const __m512i lsb = _mm512_and_si512(high, _mm512_set1_epi32(1));
  __m512i h = _mm512_maskz_srli_epi32(
      valid, _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  h = _mm512_mask_or_epi32(h, nan, high, _mm512_set1_epi32(0x40));
  return _mm512_maskz_cvtepi32_epi16(valid, h);
}

// Note [AMX epilogue]: C tiles go straight into a float32 C when all 16 x 16
// lie inside it; edge tiles and bfloat16 C go through a staging tile in L1,
// where the bias is added and bfloat16 rounded while the tile is hot. A
// bfloat16 linear used to store float32 C, then convert it in a second pass
// over memory (1598 x 256 x 256: 26 % of the kernel's time in the pass and
// the bias, `perf`).
struct CTile {
  float* c;
  uint16_t* c16;
  int64_t ldc, rows, cols;
  alignas(64) float stage[kRows * kRows];
  bool InPlace() const { return c16 == nullptr && rows == kRows && cols == kRows; }
  float* ptr() { return InPlace() ? c : stage; }
  size_t stride() const { return static_cast<size_t>(InPlace() ? ldc : kRows) * sizeof(float); }
  // The stage's lanes past rows / cols are never stored: left as they are.
  void Stage(bool accumulate) {
    if (InPlace() || !accumulate) return;
    for (int64_t r = 0; r < rows; ++r) std::copy_n(c + r * ldc, cols, stage + r * kRows);
  }
  // The tile's valid part plus the bias of its 16 columns (col_bias) or 16
  // rows (row_bias) when given, into C. A tile row is one 16-float vector
  // (AMX CPUs have AVX-512).
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void Unstage(
      const float* col_bias, const float* row_bias) {
    if (InPlace() && col_bias == nullptr && row_bias == nullptr) return;
    const __mmask16 valid = static_cast<__mmask16>((1u << cols) - 1);
    const __m512 b =
        col_bias != nullptr ? _mm512_maskz_loadu_ps(valid, col_bias) : _mm512_setzero_ps();
    float* p = ptr();
    const int64_t ld = InPlace() ? ldc : kRows;
    for (int64_t r = 0; r < rows; ++r, p += ld) {
      __m512 x = _mm512_add_ps(_mm512_maskz_loadu_ps(valid, p), b);
      if (row_bias != nullptr) x = _mm512_add_ps(x, _mm512_set1_ps(row_bias[r]));
      if (c16 != nullptr) {
        _mm256_mask_storeu_epi16(c16 + r * ldc, valid, RoundBF16(x, valid));
      } else {
        _mm512_mask_storeu_ps(c + r * ldc, valid, x);
      }
    }
  }
};

// A 2 x 2 block of C tiles (fewer at the edges: kTwoRows / kTwoCols false)
// over kb_main whole k tiles and the k tail when `tail`. Tile numbers are
// immediates, hence one body per shape.
template <bool kTwoRows, bool kTwoCols>
__attribute__((target("amx-tile,amx-bf16"))) void Block(const ARows& a0, const ARows& a1,
                                                         const uint16_t* b0, const uint16_t* b1,
                                                         int64_t kb_main, bool tail, CTile* t,
                                                         bool accumulate) {
  constexpr size_t kStride = kDepth * sizeof(uint16_t);  // 64-byte packed tile rows
  if (accumulate) {
    _tile_loadd(0, t[0].ptr(), t[0].stride());
    if constexpr (kTwoCols) _tile_loadd(1, t[1].ptr(), t[1].stride());
    if constexpr (kTwoRows) _tile_loadd(2, t[2].ptr(), t[2].stride());
    if constexpr (kTwoRows && kTwoCols) _tile_loadd(3, t[3].ptr(), t[3].stride());
  } else {
    _tile_zero(0);
    if constexpr (kTwoCols) _tile_zero(1);
    if constexpr (kTwoRows) _tile_zero(2);
    if constexpr (kTwoRows && kTwoCols) _tile_zero(3);
  }
  auto step = [&](const uint16_t* x0, size_t s0, const uint16_t* x1, size_t s1, int64_t off) {
    _tile_loadd(4, x0, s0);
    if constexpr (kTwoRows) _tile_loadd(5, x1, s1);
    _tile_loadd(6, b0 + off, kStride);
    if constexpr (kTwoCols) _tile_loadd(7, b1 + off, kStride);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (kTwoCols) _tile_dpbf16ps(1, 4, 7);
    if constexpr (kTwoRows) _tile_dpbf16ps(2, 5, 6);
    if constexpr (kTwoRows && kTwoCols) _tile_dpbf16ps(3, 5, 7);
  };
  for (int64_t pb = 0; pb < kb_main; ++pb) {
    step(a0.Tile(pb), a0.stride, a1.Tile(pb), a1.stride, pb * kTileElems);
  }
  if (tail) step(a0.tail, kStride, a1.tail, kStride, kb_main * kTileElems);
  _tile_stored(0, t[0].ptr(), t[0].stride());
  if constexpr (kTwoCols) _tile_stored(1, t[1].ptr(), t[1].stride());
  if constexpr (kTwoRows) _tile_stored(2, t[2].ptr(), t[2].stride());
  if constexpr (kTwoRows && kTwoCols) _tile_stored(3, t[3].ptr(), t[3].stride());
}

constexpr TileConfig MakeConfig() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.rows[t] = kRows;
    cfg.colsb[t] = kDepth * sizeof(uint16_t);
  }
  return cfg;
}
// In memory for LDTILECFG: GCC 12 dropped the stores to a local config as dead.
constexpr TileConfig kConfig = MakeConfig();

__attribute__((target("amx-tile"))) void Configure() { _tile_loadconfig(&kConfig); }
__attribute__((target("amx-tile"))) void Release() { _tile_release(); }

}  // namespace

// Note [AMX A in place]: with unit column stride, A's whole 16-row x 32-column
// tiles load straight from A (rows a_rs apart); only the partial last k tile
// of each row tile and a partial last row tile are packed, zero-padded. (A
// packed in full cost a copy of A per call: 8 % of a 1598 x 256 x 256 linear.)
void Gemm(int64_t m, int64_t n, int64_t k, const uint16_t* a, int64_t a_rs, int64_t a_cs,
          const uint16_t* b_packed, const Out& c, bool accumulate, Bias bias,
          int64_t b_block_stride, const int64_t* a_k_offsets) {
  if (m <= 0 || n <= 0) return;  // an empty C may have no data at all
  TRN_ASSERT((c.f32 != nullptr) != (c.bf16 != nullptr) && (c.f32 != nullptr || !accumulate),
             "amx::Gemm: one C, float32 to accumulate");
  TRN_ASSERT(bias.data == nullptr || !accumulate, "amx::Gemm: a bias only without accumulate");
  TRN_ASSERT(a_k_offsets == nullptr || (a_cs == 1 && k % kDepth == 0),
             "amx::Gemm: A's k tile offsets need unit column stride and whole k tiles");
  const int64_t kb = (k + kDepth - 1) / kDepth, nb = (n + kRows - 1) / kRows;
  const int64_t kb_main = k / kDepth;
  const bool tail = kb_main < kb;
  const int64_t b_stride = b_block_stride > 0 ? b_block_stride : kb * kTileElems;
  thread_local std::vector<uint16_t> a_tiles;
  const int64_t chunk = std::min(m, kRowChunk);
  const size_t need = static_cast<size_t>((chunk + kRows - 1) / kRows * kb * kTileElems);
  if (a_tiles.size() < need) a_tiles.resize(need);
  ARows rows_of[kRowChunk / kRows];
  Configure();
  CTile t[4];
  for (int64_t i0 = 0; i0 < m; i0 += kRowChunk) {
    const int64_t rows = std::min(kRowChunk, m - i0), mb = (rows + kRows - 1) / kRows;
    for (int64_t ib = 0; ib < mb; ++ib) {
      uint16_t* packed = a_tiles.data() + ib * kb * kTileElems;
      const int64_t valid = std::min(kRows, rows - ib * kRows);
      const bool in_place = a_cs == 1 && valid == kRows;
      PackRowTile(a, a_rs, a_cs, a_k_offsets, i0 + ib * kRows, valid, k,
                  in_place ? kb_main : 0, packed);
      rows_of[ib] = in_place ? ARows{a + (i0 + ib * kRows) * a_rs,
                                     static_cast<size_t>(a_rs) * sizeof(uint16_t), kDepth,
                                     packed + kb_main * kTileElems, a_k_offsets}
                             : ARows{packed, kDepth * sizeof(uint16_t), kTileElems,
                                     packed + kb_main * kTileElems};
    }
    for (int64_t jb = 0; jb < nb; jb += 2) {
      const bool two_cols = jb + 1 < nb;
      const uint16_t* b0 = b_packed + jb * b_stride;
      const uint16_t* b1 = b0 + b_stride;
      for (int64_t ib = 0; ib < mb; ib += 2) {
        const bool two_rows = ib + 1 < mb;
        for (int q = 0; q < 4; ++q) {
          const int64_t r0 = (ib + q / 2) * kRows, c0 = (jb + q % 2) * kRows;
          const int64_t at = (i0 + r0) * c.ld + c0;
          t[q].c = c.f32 != nullptr ? c.f32 + at : nullptr;
          t[q].c16 = c.bf16 != nullptr ? c.bf16 + at : nullptr;
          t[q].ldc = c.ld;
          t[q].rows = std::max<int64_t>(0, std::min(kRows, rows - r0));
          t[q].cols = std::max<int64_t>(0, std::min(kRows, n - c0));
          if (t[q].rows > 0 && t[q].cols > 0) t[q].Stage(accumulate);
        }
        const ARows& a0 = rows_of[ib];
        const ARows& a1 = rows_of[two_rows ? ib + 1 : ib];
        if (two_rows && two_cols) Block<true, true>(a0, a1, b0, b1, kb_main, tail, t, accumulate);
        else if (two_rows) Block<true, false>(a0, a1, b0, b1, kb_main, tail, t, accumulate);
        else if (two_cols) Block<false, true>(a0, a1, b0, b1, kb_main, tail, t, accumulate);
        else Block<false, false>(a0, a1, b0, b1, kb_main, tail, t, accumulate);
        for (int q = 0; q < 4; ++q) {  // the bias while the tiles are in L1
          if (t[q].rows <= 0 || t[q].cols <= 0) continue;
          const float* col_bias = nullptr;
          const float* row_bias = nullptr;
          if (bias.data != nullptr && bias.per_row) {
            row_bias = bias.data + i0 + (ib + q / 2) * kRows;
          } else if (bias.data != nullptr) {
            col_bias = bias.data + (jb + q % 2) * kRows;
          }
          t[q].Unstage(col_bias, row_bias);
        }
      }
    }
  }
  Release();
}

// PackB's layout (a tile row: 16 columns of one k pair, zipped) from two
// float32 row segments rounded by RoundBF16.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void PackBFromF32(
    const float* b, int64_t rs, int64_t k, int64_t n, uint16_t* dst) {
  const int64_t kb = (k + kDepth - 1) / kDepth, nb = (n + kRows - 1) / kRows;
  for (int64_t jb = 0; jb < nb; ++jb) {
    const int64_t cols = std::min(kRows, n - jb * kRows);
    const __mmask16 valid = static_cast<__mmask16>((1u << cols) - 1);
    for (int64_t pb = 0; pb < kb; ++pb) {
      uint16_t* tile = dst + (jb * kb + pb) * kTileElems;
      for (int64_t r = 0; r < kRows; ++r) {
        const int64_t q = pb * kDepth + 2 * r;
        __m512i pair = _mm512_setzero_si512();
        if (q < k) {
          const float* row = b + q * rs + jb * kRows;
          const __m256i lo = RoundBF16(_mm512_maskz_loadu_ps(valid, row), valid);
          __m256i hi = _mm256_setzero_si256();
          if (q + 1 < k) hi = RoundBF16(_mm512_maskz_loadu_ps(valid, row + rs), valid);
          const __mmask16 all = 0xffff;  // maskz forms, as in RoundBF16
          const __m512i second = _mm512_maskz_cvtepu16_epi32(all, hi);
          pair = _mm512_or_si512(_mm512_maskz_cvtepu16_epi32(all, lo),
                                 _mm512_maskz_slli_epi32(all, second, 16));
        }
        _mm512_storeu_si512(tile + r * kDepth, pair);
      }
    }
  }
}

#else
void Gemm(int64_t, int64_t, int64_t, const uint16_t*, int64_t, int64_t, const uint16_t*,
          const Out&, bool, Bias, int64_t, const int64_t*) {
  TRN_ASSERT(false, "amx::Gemm without AMX (check Available())");
}
void PackBFromF32(const float*, int64_t, int64_t, int64_t, uint16_t*) {
  TRN_ASSERT(false, "amx::PackBFromF32 without AMX (check Available())");
}
#endif

}  // namespace trn::kernels::amx
