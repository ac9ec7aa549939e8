// Note [AMX bf16 GEMM]
// Sapphire and Emerald Rapids cores carry AMX, a matrix unit: TDPBF16PS adds
// a 16 x 32 bfloat16 tile times a 32 x 16 one (pairs of k interleaved) into a
// 16 x 16 float32 tile. CPU PyTorch runs its bfloat16 linears there (oneDNN:
// 560 GFLOP/s at 128 x 256 x 768 on one Emerald Rapids core, against 130 for
// trn's float32 GEMM on converted operands), so a bfloat16 model on trn ran
// 1.7x slower than on the CPU. trn's bfloat16 products use it too, where the
// CPU has it and the OS grants the tile state (Linux: arch_prctl, asked once).
// Layout: A is packed per call into 16-row x 32-column tiles, B (the weight,
// cached: Note [Packed weight cache]) into 32 x 16 tiles of k pairs; both zero
// past the matrix, so edges need no other tile shape. A block is 2 x 2 C tiles
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
constexpr int64_t kRowChunk = 256;   // rows of A packed at a time (in L2 for k up to ~2048)

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

void PackB(const uint16_t* b, int64_t rs, int64_t cs, int64_t k, int64_t n, uint16_t* dst) {
  const int64_t kb = (k + kDepth - 1) / kDepth, nb = (n + kRows - 1) / kRows;
  std::fill(dst, dst + PackedBElems(k, n), uint16_t{0});
  for (int64_t jb = 0; jb < nb; ++jb) {
    const int64_t cols = std::min(kRows, n - jb * kRows);
    for (int64_t pb = 0; pb < kb; ++pb) {
      uint16_t* tile = dst + (jb * kb + pb) * kTileElems;
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

// rows x kb tiles of A from row i0: tile (ib, pb) at (ib * kb + pb) * kTileElems.
void PackA(const uint16_t* a, int64_t rs, int64_t cs, int64_t i0, int64_t rows, int64_t k,
           uint16_t* dst) {
  const int64_t kb = (k + kDepth - 1) / kDepth, mb = (rows + kRows - 1) / kRows;
  for (int64_t ib = 0; ib < mb; ++ib) {
    for (int64_t pb = 0; pb < kb; ++pb) {
      uint16_t* tile = dst + (ib * kb + pb) * kTileElems;
      const int64_t depth = std::min(kDepth, k - pb * kDepth);
      for (int64_t r = 0; r < kRows; ++r) {
        uint16_t* out = tile + r * kDepth;
        const int64_t i = ib * kRows + r;
        if (i >= rows) {
          std::fill(out, out + kDepth, uint16_t{0});
          continue;
        }
        const uint16_t* in = a + (i0 + i) * rs + pb * kDepth * cs;
        if (cs == 1) {
          std::memcpy(out, in, static_cast<size_t>(depth) * sizeof(uint16_t));
        } else {
          for (int64_t p = 0; p < depth; ++p) out[p] = in[p * cs];
        }
        std::fill(out + depth, out + kDepth, uint16_t{0});
      }
    }
  }
}

// One C tile: in place when all 16 x 16 lie inside C, else a staging copy.
struct CTile {
  float* c;
  int64_t ldc, rows, cols;
  alignas(64) float stage[kRows * kRows];
  float* ptr() { return Full() ? c : stage; }
  size_t stride() const { return static_cast<size_t>(Full() ? ldc : kRows) * sizeof(float); }
  bool Full() const { return rows == kRows && cols == kRows; }
  // A tile row is one 16-float vector (AMX CPUs have AVX-512).
  __attribute__((target("avx512f"))) void AddBias(const float* bias) {
    const __mmask16 valid = static_cast<__mmask16>((1u << cols) - 1);
    const __m512 b = _mm512_maskz_loadu_ps(valid, bias);
    float* p = ptr();
    const int64_t ld = Full() ? ldc : kRows;
    for (int64_t r = 0; r < rows; ++r, p += ld) {
      _mm512_mask_storeu_ps(p, valid, _mm512_add_ps(_mm512_maskz_loadu_ps(valid, p), b));
    }
  }
  void Stage(bool accumulate) {
    if (Full()) return;
    std::fill(stage, stage + kRows * kRows, 0.0f);
    if (!accumulate) return;
    for (int64_t r = 0; r < rows; ++r) std::copy_n(c + r * ldc, cols, stage + r * kRows);
  }
  // Stores the tile's valid part, plus bias[j] (the bias of its 16 columns) when given.
  void Unstage(const float* bias) {
    if (bias != nullptr) AddBias(bias);
    if (Full()) return;
    for (int64_t r = 0; r < rows; ++r) std::copy_n(stage + r * kRows, cols, c + r * ldc);
  }
};

// A 2 x 2 block of C tiles (fewer at the edges: kTwoRows / kTwoCols false)
// over kb k-tiles. Tile numbers are immediates, hence one body per shape.
template <bool kTwoRows, bool kTwoCols>
__attribute__((target("amx-tile,amx-bf16"))) void Block(const uint16_t* a0, const uint16_t* a1,
                                                         const uint16_t* b0, const uint16_t* b1,
                                                         int64_t kb, CTile* t, bool accumulate) {
  constexpr size_t kStride = kDepth * sizeof(uint16_t);  // 64-byte tile rows
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
  for (int64_t pb = 0; pb < kb; ++pb) {
    const int64_t off = pb * kTileElems;
    _tile_loadd(4, a0 + off, kStride);
    if constexpr (kTwoRows) _tile_loadd(5, a1 + off, kStride);
    _tile_loadd(6, b0 + off, kStride);
    if constexpr (kTwoCols) _tile_loadd(7, b1 + off, kStride);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (kTwoCols) _tile_dpbf16ps(1, 4, 7);
    if constexpr (kTwoRows) _tile_dpbf16ps(2, 5, 6);
    if constexpr (kTwoRows && kTwoCols) _tile_dpbf16ps(3, 5, 7);
  }
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

void Gemm(int64_t m, int64_t n, int64_t k, const uint16_t* a, int64_t a_rs, int64_t a_cs,
          const uint16_t* b_packed, float* c, int64_t ldc, bool accumulate, const float* bias,
          int64_t b_block_stride) {
  const int64_t kb = (k + kDepth - 1) / kDepth, nb = (n + kRows - 1) / kRows;
  const int64_t b_stride = b_block_stride > 0 ? b_block_stride : kb * kTileElems;
  thread_local std::vector<uint16_t> a_tiles;
  const int64_t chunk = std::min(m, kRowChunk);
  const size_t need = static_cast<size_t>((chunk + kRows - 1) / kRows * kb * kTileElems);
  if (a_tiles.size() < need) a_tiles.resize(need);
  Configure();
  CTile t[4];
  for (int64_t i0 = 0; i0 < m; i0 += kRowChunk) {
    const int64_t rows = std::min(kRowChunk, m - i0), mb = (rows + kRows - 1) / kRows;
    PackA(a, a_rs, a_cs, i0, rows, k, a_tiles.data());
    for (int64_t jb = 0; jb < nb; jb += 2) {
      const bool two_cols = jb + 1 < nb;
      const uint16_t* b0 = b_packed + jb * b_stride;
      for (int64_t ib = 0; ib < mb; ib += 2) {
        const bool two_rows = ib + 1 < mb;
        const uint16_t* a0 = a_tiles.data() + ib * kb * kTileElems;
        for (int q = 0; q < 4; ++q) {
          const int64_t r0 = (ib + q / 2) * kRows, c0 = (jb + q % 2) * kRows;
          t[q].c = c + (i0 + r0) * ldc + c0;
          t[q].ldc = ldc;
          t[q].rows = std::max<int64_t>(0, std::min(kRows, rows - r0));
          t[q].cols = std::max<int64_t>(0, std::min(kRows, n - c0));
          if (t[q].rows > 0 && t[q].cols > 0) t[q].Stage(accumulate);
        }
        const uint16_t* a1 = a0 + kb * kTileElems;
        const uint16_t* b1 = b0 + b_stride;
        if (two_rows && two_cols) Block<true, true>(a0, a1, b0, b1, kb, t, accumulate);
        else if (two_rows) Block<true, false>(a0, a1, b0, b1, kb, t, accumulate);
        else if (two_cols) Block<false, true>(a0, a1, b0, b1, kb, t, accumulate);
        else Block<false, false>(a0, a1, b0, b1, kb, t, accumulate);
        for (int q = 0; q < 4; ++q) {  // the bias while the tiles are in L1
          const float* tile_bias = bias != nullptr ? bias + (jb + q % 2) * kRows : nullptr;
          if (t[q].rows > 0 && t[q].cols > 0) t[q].Unstage(tile_bias);
        }
      }
    }
  }
  Release();
}
#else
void Gemm(int64_t, int64_t, int64_t, const uint16_t*, int64_t, int64_t, const uint16_t*, float*,
          int64_t, bool, const float*, int64_t) {
  TRN_ASSERT(false, "amx::Gemm without AMX (check Available())");
}
#endif

}  // namespace trn::kernels::amx
