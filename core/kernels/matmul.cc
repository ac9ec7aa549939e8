// mm / bmm / addmm / linear: batches and bias around the packed f32 GEMM of
// gemm-inl.h (Note [GEMM blocking]).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/kernels/matmul.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "core/kernels/gemm-inl.h"
#include "hwy/highway.h"

#if HWY_ONCE
#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/common/assert.h"
#include "core/kernels/amx.h"
#include "core/kernels/scratch.h"
#include "core/kernels/convert.h"
#include "core/kernels/indexing_internal.h"
#include "core/kernels/kernels.h"

namespace trn::kernels {
namespace gemm {
HWY_EXPORT(GemmF32);
HWY_EXPORT(PackWholeB);
HWY_EXPORT(PackedBSize);
}  // namespace gemm

// Note [Packed weight cache]
// The GEMM packs B (Note [GEMM blocking]); for a linear layer B is the weight,
// the same bytes call after call, so its pack is made once and kept.
//  - Key: the storage (allocation base), the view (data pointer, sizes,
//    strides, dtype) and the version its owner bumps on every write (torch's
//    _version(), shared by all views of a tensor, bumped by in-place ops,
//    copy_, out= and optimizer steps). A newer version replaces the entry; the
//    allocator's free observer (ForgetPackedB) drops every entry of a freed
//    allocation, so a tensor later allocated at the same address starts over.
//  - What is cached: only 2-D floating B of at least kMinPackElems elements,
//    or 3-D ones (grouped_mm's experts [G, K, N]: the G packs one after the
//    other), and only once the same (storage, view, version) is seen a second
//    time while alive. Activations are fresh allocations each call (freed,
//    hence forgotten, before they could be seen twice); the bridge offers bmm
//    operands, activations as often as weights, to the cache only when 2-D.
//    Entries seen once cost a few dozen bytes and
//    are capped at kMaxEntries, and at kMaxViewsPerStorage per storage (the
//    growing slices of a static KV cache are so many views of one storage).
//  - When: the entry is taken on the launching thread at enqueue
//    (AcquirePackedB), before any later free or write can be enqueued, and is
//    filled by the first kernel that runs with it, on its worker, after the
//    writes enqueued before it (stream order). An in-flight kernel holds its
//    entry by shared_ptr, so dropping an entry never pulls a pack from under it.
//  - Bound: a byte cap (default 1 GiB of host memory, outside the device's
//    capacity), least recently acquired packs evicted first. LRU because
//    the common case is a model's weights reused every forward pass, all of
//    which fit. A working set larger than the cap thrashes: each call packs
//    its weight again, about the cost of no cache for tall products, more than
//    the unpacked GEMV path (Note [GEMV path]) for few rows; raise the cap
//    (SetPackCacheCapacity) for such models.
//  - Layout: a pack is in the SIMD target's layout (NR, KC differ); a kernel
//    running under another target (tests pin targets) packs again.
//  - Threads: one mutex guards the map and counters; each entry has its own
//    mutex guarding its pack (two cores may share a weight). Lock order:
//    entry, then cache; the cache never takes an entry's lock.
//  - Not seen: a write that does not bump the version, i.e. through `.data`
//    (a tensor with its own version counter) or raw pointers. ClearPackCache
//    drops everything.
// One cached operand: its identity and, once a kernel made it, its pack.
// Shared by the cache and the launches holding it; thread-safe as marked.
struct PackedB {
  struct Pack {
    int64_t target;  // the SIMD target whose layout `floats` has, or kAmxLayout
    hwy::AlignedFreeUniquePtr<float[]> floats;
    hwy::AlignedFreeUniquePtr<uint16_t[]> tiles;  // bfloat16 AMX tiles (Note [AMX bf16 GEMM])
  };
  // Immutable after construction: what the pack describes.
  const void* storage;
  TensorRef view;
  uint64_t version;

  std::mutex mu;
  std::shared_ptr<const Pack> pack;  // guarded by mu
  // Guarded by the cache's mutex:
  bool in_cache = true;
  uint64_t uses = 0;
  uint64_t last_use = 0;
  uint64_t counted_bytes = 0;
};

namespace {

constexpr int64_t kMinPackElems = 4096;
constexpr size_t kMaxEntries = 4096;
constexpr size_t kMaxViewsPerStorage = 8;

bool SameView(const TensorRef& x, const TensorRef& y) {
  if (x.data != y.data || x.dtype != y.dtype || x.ndim != y.ndim) return false;
  for (int d = 0; d < x.ndim; ++d) {
    if (x.sizes[d] != y.sizes[d] || x.strides[d] != y.strides[d]) return false;
  }
  return true;
}

// The process's packs, by storage. Any thread may call.
class PackCache {
 public:
  static PackCache& Get() {
    static PackCache* cache = new PackCache;  // leaked: kernels may run at exit
    return *cache;
  }

  std::shared_ptr<PackedB> Acquire(const TensorRef& b, const void* storage, uint64_t version) {
    if ((b.ndim != 2 && b.ndim != 3) || !IsFloating(b.dtype) || storage == nullptr) return nullptr;
    const int r = b.ndim - 2;
    const int64_t batch = b.ndim == 3 ? b.sizes[0] : 1;
    const int64_t elems = batch * b.sizes[r] * b.sizes[r + 1];
    if (elems < kMinPackElems) return nullptr;
    const uint64_t bytes = 4 * static_cast<uint64_t>(batch * b.sizes[r]) *
                           static_cast<uint64_t>((b.sizes[r + 1] + 31) / 32 * 32);
    std::lock_guard<std::mutex> lock(mu_);
    if (bytes > capacity_) return nullptr;
    std::vector<std::shared_ptr<PackedB>>& slots = by_storage_[storage];
    std::shared_ptr<PackedB> entry;
    for (auto it = slots.begin(); it != slots.end(); ++it) {
      if (!SameView((*it)->view, b)) continue;
      if ((*it)->version == version) {
        entry = *it;
      } else {  // written since: the old pack can never be used again
        Drop(**it);
        slots.erase(it);
        ++stats_.forgotten;
      }
      break;
    }
    if (entry == nullptr) {
      if (entries_ >= kMaxEntries) EvictOne(storage);
      if (slots.size() >= kMaxViewsPerStorage) {  // e.g. growing slices of a KV cache
        auto oldest = std::min_element(
            slots.begin(), slots.end(),
            [](const auto& x, const auto& y) { return x->last_use < y->last_use; });
        Drop(**oldest);
        slots.erase(oldest);
        ++stats_.evictions;
      }
      entry = std::make_shared<PackedB>(storage, b, version);
      slots.push_back(entry);
      ++entries_;
    }
    entry->last_use = ++clock_;
    return ++entry->uses >= 2 ? entry : nullptr;
  }

  void Forget(const void* storage) {
    std::lock_guard<std::mutex> lock(mu_);
    if (entries_ == 0) return;
    auto it = by_storage_.find(storage);
    if (it == by_storage_.end()) return;
    for (auto& entry : it->second) Drop(*entry);
    stats_.forgotten += it->second.size();
    by_storage_.erase(it);
  }

  // After `entry` was packed with `bytes`: count it if still cached, then
  // evict least recently used packs over the cap (never `entry` itself).
  void Packed(PackedB& entry, uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.packs;
    if (!entry.in_cache) return;
    bytes_ = bytes_ - entry.counted_bytes + bytes;
    entry.counted_bytes = bytes;
    EvictOverCap(&entry);
  }

  void Hit() {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.hits;
  }

  PackCacheStats Stats() {
    std::lock_guard<std::mutex> lock(mu_);
    PackCacheStats s = stats_;
    s.entries = entries_;
    s.bytes = bytes_;
    s.capacity = capacity_;
    return s;
  }

  void SetCapacity(uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    capacity_ = bytes;
    EvictOverCap(nullptr);
  }

  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [storage, slots] : by_storage_) {
      for (auto& e : slots) Drop(*e);
    }
    by_storage_.clear();
    stats_ = {};
  }

 private:
  // Caller holds mu_. Takes `entry` out of the accounting (not out of its vector).
  void Drop(PackedB& entry) {
    entry.in_cache = false;
    bytes_ -= entry.counted_bytes;
    entry.counted_bytes = 0;
    --entries_;
  }
  // Caller holds mu_. Drop and remove from its storage's vector.
  void Erase(PackedB& entry) {
    auto it = by_storage_.find(entry.storage);
    TRN_ASSERT(it != by_storage_.end(), "pack cache entry without its storage");
    Drop(entry);
    auto& slots = it->second;
    slots.erase(std::find_if(slots.begin(), slots.end(),
                             [&](const auto& e) { return e.get() == &entry; }));
    if (slots.empty()) by_storage_.erase(it);
  }
  // Caller holds mu_. Evicts the least recently used packs but `keep` until
  // the packs fit the cap.
  void EvictOverCap(const PackedB* keep) {
    while (bytes_ > capacity_) {
      PackedB* victim = nullptr;
      for (auto& [storage, slots] : by_storage_) {
        for (auto& e : slots) {
          if (e.get() != keep && e->counted_bytes > 0 &&
              (victim == nullptr || e->last_use < victim->last_use)) {
            victim = e.get();
          }
        }
      }
      if (victim == nullptr) return;
      Erase(*victim);
      ++stats_.evictions;
    }
  }
  // Caller holds mu_. Evicts the least recently used entry, keeping `keep`'s vector.
  void EvictOne(const void* keep) {
    PackedB* victim = nullptr;
    for (auto& [storage, slots] : by_storage_) {
      if (storage == keep) continue;
      for (auto& e : slots) {
        if (victim == nullptr || e->last_use < victim->last_use) victim = e.get();
      }
    }
    if (victim == nullptr) return;
    Erase(*victim);
    ++stats_.evictions;
  }

  std::mutex mu_;
  std::unordered_map<const void*, std::vector<std::shared_ptr<PackedB>>> by_storage_;
  uint64_t entries_ = 0, bytes_ = 0, clock_ = 0;
  uint64_t capacity_ = kDefaultPackCacheBytes;
  PackCacheStats stats_;
};

constexpr int64_t kAmxLayout = -1;

// The pack of `entry` for the running target (AMX tiles with `amx_tiles`), made now
// if missing; null if the host has no memory for it (the GEMM then packs
// slice by slice).
std::shared_ptr<const PackedB::Pack> EnsurePacked(PackedB& entry, bool amx_tiles = false) {
  const int64_t target = amx_tiles ? kAmxLayout : ActiveTarget();
  uint64_t bytes = 0;
  std::shared_ptr<const PackedB::Pack> pack;
  {
    std::lock_guard<std::mutex> lock(entry.mu);
    if (entry.pack != nullptr && entry.pack->target == target) {
      pack = entry.pack;
    } else {
      // A 3-D b (grouped_mm's experts) packs as its 2-D slices one after another.
      const TensorRef& b = entry.view;
      const int r = b.ndim - 2;
      const int64_t batch = b.ndim == 3 ? b.sizes[0] : 1, k = b.sizes[r], n = b.sizes[r + 1];
      const auto slice_at = [&](int64_t i) {
        return static_cast<const char*>(b.data) +
               (r == 1 ? i * b.strides[0] : 0) * static_cast<int64_t>(ItemSize(b.dtype));
      };
      auto fresh = std::make_shared<PackedB::Pack>();
      fresh->target = target;
      if (amx_tiles) {  // a bfloat16 weight
        const int64_t slice = amx::PackedBElems(k, n);
        fresh->tiles = hwy::AllocateAligned<uint16_t>(static_cast<size_t>(slice * batch));
        if (fresh->tiles == nullptr) return nullptr;  // no host memory: run uncached
        for (int64_t i = 0; i < batch; ++i) {
          amx::PackB(reinterpret_cast<const uint16_t*>(slice_at(i)), b.strides[r],
                     b.strides[r + 1], k, n, fresh->tiles.get() + i * slice);
        }
        bytes = static_cast<uint64_t>(slice * batch) * sizeof(uint16_t);
      } else {
        const size_t slice = HWY_DYNAMIC_DISPATCH(gemm::PackedBSize)(k, n);
        fresh->floats = hwy::AllocateAligned<float>(slice * static_cast<size_t>(batch));
        if (fresh->floats == nullptr) return nullptr;
        for (int64_t i = 0; i < batch; ++i) {
          const gemm::Operand op{slice_at(i), b.dtype, k == 1 ? 0 : b.strides[r],
                                 n == 1 ? 0 : b.strides[r + 1]};
          HWY_DYNAMIC_DISPATCH(gemm::PackWholeB)(op, k, n, fresh->floats.get() + i * slice);
        }
        bytes = slice * static_cast<size_t>(batch) * sizeof(float);
      }
      entry.pack = pack = std::move(fresh);
    }
  }
  if (bytes > 0) {
    PackCache::Get().Packed(entry, bytes);
  } else {
    PackCache::Get().Hit();
  }
  return pack;
}

}  // namespace

std::shared_ptr<PackedB> AcquirePackedB(const TensorRef& b, const void* storage,
                                        uint64_t version) {
  return PackCache::Get().Acquire(b, storage, version);
}
void ForgetPackedB(const void* storage) { PackCache::Get().Forget(storage); }
PackCacheStats GetPackCacheStats() { return PackCache::Get().Stats(); }
void SetPackCacheCapacity(uint64_t bytes) { PackCache::Get().SetCapacity(bytes); }
void ClearPackCache() { PackCache::Get().Clear(); }

namespace {

// A 2-D or 3-D operand seen as [batch, rows, cols]; a 2-D operand has batch
// stride 0 (shared by every batch).
struct Mat {
  const TensorRef* t;
  int64_t rows, cols, bs, rs, cs;

  explicit Mat(const TensorRef& ref) : t(&ref) {
    TRN_ASSERT(ref.ndim == 2 || ref.ndim == 3, "matmul operands must be 2-D or 3-D");
    const int r = ref.ndim - 2;
    rows = ref.sizes[r];
    cols = ref.sizes[r + 1];
    rs = ref.sizes[r] == 1 ? 0 : ref.strides[r];
    cs = ref.sizes[r + 1] == 1 ? 0 : ref.strides[r + 1];
    bs = ref.ndim == 3 && ref.sizes[0] != 1 ? ref.strides[0] : 0;
  }
  int64_t batch() const { return t->ndim == 3 ? t->sizes[0] : 1; }
  const char* At(int64_t b) const {
    return static_cast<const char*>(t->data) +
           b * bs * static_cast<int64_t>(ItemSize(t->dtype));
  }
  gemm::Operand Operand(int64_t b) const { return {At(b), t->dtype, rs, cs}; }
  void Transpose() {
    std::swap(rows, cols);
    std::swap(rs, cs);
  }
  // [B, R, C] can be walked as one [B*R, C] matrix.
  bool BatchFoldsIntoRows() const { return bs == 0 ? rs == 0 : (rows == 1 || bs == rows * rs); }
  void FoldBatchIntoRows(int64_t batch) {
    if (rows == 1) rs = bs;
    rows *= batch;
    bs = 0;
  }
};

// bias right-aligned against out's [batch, M, N], stride 0 on broadcast dims.
Mat BiasAsMat(const TensorRef& bias, const TensorRef& out, TensorRef& storage) {
  storage = bias;
  storage.ndim = out.ndim;
  for (int d = out.ndim - 1, s = bias.ndim - 1; d >= 0; --d, --s) {
    const bool present = s >= 0 && bias.sizes[s] != 1;
    TRN_ASSERT(!present || bias.sizes[s] == out.sizes[d], "bias must broadcast to out");
    storage.sizes[d] = out.sizes[d];
    storage.strides[d] = present ? bias.strides[s] : 0;
  }
  return Mat(storage);
}

uint64_t RealBytes(const TensorRef& t) {  // elements behind a (broadcast) view
  uint64_t n = 1;
  for (int d = 0; d < t.ndim; ++d) {
    if (t.strides[d] != 0) n *= static_cast<uint64_t>(t.sizes[d]);
  }
  return n * ItemSize(t.dtype);
}

// Whether the bytes behind a and b (non-negative strides) are disjoint.
bool Disjoint(const TensorRef& a, const TensorRef& b) {
  const auto span = [](const TensorRef& t) {
    const char* lo = static_cast<const char*>(t.data);
    int64_t last = 0;
    for (int d = 0; d < t.ndim; ++d) last += (t.sizes[d] - 1) * t.strides[d];
    return std::pair<const char*, const char*>(
        lo, lo + (last + 1) * static_cast<int64_t>(ItemSize(t.dtype)));
  };
  if (a.numel() == 0 || b.numel() == 0) return true;
  const auto [alo, ahi] = span(a);
  const auto [blo, bhi] = span(b);
  return ahi <= blo || bhi <= alo;
}

// bfloat16 products run on the host's matrix unit where there is one (Note
// [AMX bf16 GEMM]); alpha != 1 keeps the float32 GEMM.
bool OnAmx(const TensorRef& a, double alpha) {
  return a.dtype == DType::kBFloat16 && alpha == 1.0 && a.sizes[a.ndim - 1] > 0 &&
         amx::Available();
}

// How a product reads b: on AMX tiles or the float32 GEMM, from a cached pack
// (made by EnsurePacked, b's batches one after another) or packed per call (null).
struct BPack {
  bool amx = false;
  const float* floats = nullptr;
  const uint16_t* tiles = nullptr;
};

// Slice i of `pack` (a grouped_mm's experts) for a k x n b, or per-call packing
// when nothing is cached.
BPack SliceOf(const PackedB::Pack* pack, bool amx, int64_t k, int64_t n, int64_t i) {
  BPack bp{amx, nullptr, nullptr};
  if (pack != nullptr && amx) bp.tiles = pack->tiles.get() + i * amx::PackedBElems(k, n);
  if (pack != nullptr && !amx) {
    bp.floats = pack->floats.get() + i * HWY_DYNAMIC_DISPATCH(gemm::PackedBSize)(k, n);
  }
  return bp;
}

Status MatmulPacked(const TensorRef& out, const TensorRef& a, const TensorRef& b,
                    const TensorRef& bias, double alpha, double beta, const BPack& bp) {
  const bool amx = bp.amx;
  const float* const b_pack = bp.floats;
  const uint16_t* const b_tiles = bp.tiles;
  Mat ma(a), mb(b), mo(out);
  const int64_t batch = mo.batch(), m = mo.rows, n = mo.cols, k = ma.cols;
  TRN_ASSERT(IsFloating(out.dtype) && a.dtype == out.dtype && b.dtype == out.dtype,
             "matmul needs one floating dtype");
  TRN_ASSERT(ma.rows == m && mb.rows == k && mb.cols == n, "matmul shapes do not match");
  TRN_ASSERT((ma.batch() == batch || a.ndim == 2) && (mb.batch() == batch || b.ndim == 2),
             "matmul batch sizes do not match");
  TRN_ASSERT(out.ndim == std::max(a.ndim, b.ndim), "matmul out rank");
  const bool has_bias = bias.data != nullptr && beta != 0.0;  // beta 0 ignores bias (torch)
  TensorRef bias_storage;
  Mat mc = has_bias ? BiasAsMat(bias, out, bias_storage) : mo;
  if (has_bias) TRN_ASSERT(bias.dtype == out.dtype, "bias must have out's dtype");
  // A matrix times a vector (n == 1: transformers' batched MoE experts run
  // bmm(W, x[..., None])) runs as its transpose out^T = b^T a^T, one row that
  // the GEMV path streams (Note [GEMV path]); the blocked GEMM would pack all
  // of A to pad one column to a micro-tile.
  if (n == 1 && m > 1 && b_pack == nullptr && b_tiles == nullptr) {
    std::swap(ma, mb);
    ma.Transpose();
    mb.Transpose();
    mo.Transpose();
    mc.Transpose();
  }

  // Batches of A against one shared B fold into one tall GEMM, so B is packed once.
  int64_t batches = batch;
  if (batch > 1 && mb.bs == 0 && ma.BatchFoldsIntoRows() && mo.BatchFoldsIntoRows() &&
      (!has_bias || mc.BatchFoldsIntoRows())) {
    batches = 1;
    ma.FoldBatchIntoRows(batch);
    mo.FoldBatchIntoRows(batch);
    if (has_bias) mc.FoldBatchIntoRows(batch);
  }
  const int64_t rows = mo.rows, cols = mo.cols;

  // f32 outputs with unit column stride take the GEMM's stores directly;
  // others go through an f32 scratch matrix and are converted once at the end,
  // as does an out that shares memory with a or b (mm(a, b, out=a)): the GEMM
  // reads A in place and B slice by slice after tiles have stored C.
  const bool unit_cols = (mo.cs == 1 || cols == 1) && Disjoint(out, a) && Disjoint(out, b);
  const bool direct = out.dtype == DType::kFloat32 && unit_cols;
  // A bias row inside out (an in-place addmm of an expanded row) must be read
  // before any tile overwrites it: those take the fill below.
  const bool fused_bias = has_bias && mc.rs == 0 && mc.cs == 1 &&
                          (bias.dtype == DType::kFloat32 || amx) && beta == 1.0 &&
                          Disjoint(bias, out);
  // bfloat16 C straight from AMX's tiles, rounded once (Note [AMX epilogue] in amx.cc).
  const bool direct16 = amx && out.dtype == DType::kBFloat16 && unit_cols &&
                        (!has_bias || fused_bias);
  // Not zeroed: the GEMM (or the bias fill) writes all of it.
  internal::ScratchBuffer<float> scratch_buffer;
  float* const scratch = direct || direct16 ? nullptr : scratch_buffer.Get(rows * cols);
  if (!direct && !direct16 && scratch == nullptr) {
    return Status::Error("matmul: no host memory for a " + std::to_string(rows) + " x " +
                         std::to_string(cols) + " float32 scratch matrix");
  }
  const size_t pack_batch_stride =
      b_pack != nullptr && mb.bs != 0 ? HWY_DYNAMIC_DISPATCH(gemm::PackedBSize)(k, n) : 0;
  const auto gemm_fn = HWY_DYNAMIC_DISPATCH(gemm::GemmF32);
  // out += a @ b (c.addmm_(a, b); a convolution's taps, Note [Implicit GEMM] in
  // conv.cc): the bias is out itself, which the GEMM accumulates onto in place.
  const bool onto_out = has_bias && direct && beta == 1.0 && SameView(bias, out);
  internal::ScratchBuffer<uint16_t> b_tiles_buffer;
  for (int64_t bi = 0; bi < batches; ++bi) {
    gemm::Args args;
    args.m = rows;
    args.n = cols;
    args.k = k;
    args.a = ma.Operand(bi);
    args.b = mb.Operand(bi);
    if (b_pack != nullptr) args.b_packed = b_pack + static_cast<size_t>(bi) * pack_batch_stride;
    args.alpha = static_cast<float>(alpha);
    if (direct) {
      args.c = const_cast<float*>(reinterpret_cast<const float*>(mo.At(bi)));
      args.ldc = mo.rs;
    } else if (direct16) {
      args.ldc = mo.rs;
    } else {
      args.c = scratch;
      args.ldc = cols;
    }
    if (onto_out) {
      args.accumulate = true;
    } else if (fused_bias) {
      // Note [Bias in the epilogue] (gemm-inl.h): a row broadcast over C (AMX: below).
      if (!amx) args.row_bias = reinterpret_cast<const float*>(mc.At(bi));
    } else if (has_bias) {
      // Note [GEMM blocking]: the GEMM accumulates onto C, so C starts as beta * bias.
      const char* base = mc.At(bi);
      for (int64_t i = 0; i < rows; ++i) {
        float* crow = args.c + i * args.ldc;
        const char* brow = base + i * mc.rs * ItemSize(bias.dtype);
        if (mc.cs == 0) {  // one value per row (a conv's per-channel bias): a fill
          float v;
          internal::LoadAsF32(bias.dtype, brow, 1, 1, &v);
          std::fill(crow, crow + cols, v * static_cast<float>(beta));
          continue;
        }
        internal::LoadAsF32(bias.dtype, brow, mc.cs, cols, crow);
        if (beta != 1.0) {
          for (int64_t j = 0; j < cols; ++j) crow[j] *= static_cast<float>(beta);
        }
      }
      args.accumulate = true;
    }
    if (amx) {
      // b's cached tiles hold its batches one after another.
      const uint16_t* tiles =
          b_tiles != nullptr && mb.bs != 0 ? b_tiles + bi * amx::PackedBElems(k, cols) : b_tiles;
      if (tiles == nullptr) {  // b's tiles for this batch (once for a shared 2-D b)
        uint16_t* own = b_tiles_buffer.Get(amx::PackedBElems(k, cols));
        if (own == nullptr) return Status::Error("matmul: no host memory for b's AMX tiles");
        if (bi == 0 || mb.bs != 0) {
          amx::PackB(reinterpret_cast<const uint16_t*>(args.b.data), args.b.rs, args.b.cs, k,
                     cols, own);
        }
        tiles = own;
      }
      const float* bias_row = nullptr;  // linear's bias, as float32
      if (fused_bias) {
        thread_local std::vector<float> row;
        row.resize(static_cast<size_t>(cols));
        internal::LoadAsF32(bias.dtype, mc.At(bi), 1, cols, row.data());
        bias_row = row.data();
      }
      const amx::Out c = direct16 ? amx::Out::BF16(reinterpret_cast<uint16_t*>(
                                                       const_cast<char*>(mo.At(bi))),
                                                   args.ldc)
                                  : amx::Out::F32(args.c, args.ldc);
      amx::Gemm(rows, cols, k, static_cast<const uint16_t*>(args.a.data), args.a.rs, args.a.cs,
                tiles, c, args.accumulate, amx::Bias{bias_row});
    } else {
      gemm_fn(args);
    }
    if (!direct && !direct16) {
      char* obase = const_cast<char*>(mo.At(bi));
      for (int64_t i = 0; i < rows; ++i) {
        internal::StoreFromF32(out.dtype, obase + i * mo.rs * ItemSize(out.dtype), mo.cs, cols,
                               scratch + i * cols);
      }
    }
  }
  return Status::Ok();
}

}  // namespace

int64_t InPlaceBStride(int64_t cols) {
  int64_t rs = (std::max<int64_t>(cols, 1) + gemm::kInPlaceBAlign - 1) / gemm::kInPlaceBAlign *
               gemm::kInPlaceBAlign;
  if (!gemm::InPlaceBRowStride(rs)) rs += gemm::kInPlaceBAlign;
  return rs;
}

Status Matmul(const TensorRef& out, const TensorRef& a, const TensorRef& b,
              const TensorRef& bias, double alpha, double beta, PackedB* packed_b) {
  const bool amx = OnAmx(a, alpha);
  std::shared_ptr<const PackedB::Pack> pack;
  if (packed_b != nullptr) {
    TRN_ASSERT(SameView(packed_b->view, b), "Matmul: packed_b does not describe b");
    pack = EnsurePacked(*packed_b, amx);
  }
  return MatmulPacked(out, a, b, bias, alpha, beta,
                      SliceOf(pack.get(), amx, b.sizes[b.ndim - 2], b.sizes[b.ndim - 1], 0));
}

namespace {
using internal::Narrow;
TensorRef Pick(const TensorRef& t, int64_t i) { return internal::Select(t, 0, i); }
}  // namespace

Status GroupedMatmul(const TensorRef& out, const TensorRef& a, const TensorRef& b,
                     const TensorRef& offs, PackedB* packed_b) {
  TRN_ASSERT(IsFloating(out.dtype) && a.dtype == out.dtype && b.dtype == out.dtype,
             "grouped_mm needs one floating dtype");
  const TensorRef none;
  if (offs.data == nullptr) {  // 3-D x 3-D
    TRN_ASSERT(a.ndim == 3 && b.ndim == 3, "grouped_mm without offs is 3-D x 3-D");
    return a.sizes[2] == 0 ? Fill(out, 0.0) : Matmul(out, a, b, none);
  }
  TRN_ASSERT(offs.dtype == DType::kInt32 && offs.ndim == 1, "grouped_mm: offs 1-D int32");
  const int64_t groups = offs.sizes[0];
  // The grouped extent: a's rows (2-D x 3-D), b's columns (3-D x 2-D) or K (2-D x 2-D).
  const int64_t extent = a.ndim == 2 && b.ndim == 3 ? a.sizes[0]
                         : a.ndim == 3              ? b.sizes[1]
                                                    : a.sizes[1];
  const int32_t* o = offs.ptr<const int32_t>();
  int64_t prev = 0;
  for (int64_t g = 0; g < groups; ++g) {  // validate before writing anything
    const int64_t end = o[g * offs.strides[0]];
    if (end < prev || end > extent) {
      return Status::Error("grouped_mm: offs[" + std::to_string(g) + "] = " + std::to_string(end) +
                           (end < prev ? " is less than the previous offset " + std::to_string(prev)
                                       : " exceeds the grouped size " + std::to_string(extent)) +
                           " (offs must be non-decreasing cumulative group ends)");
    }
    prev = end;
  }
  if (prev < extent && b.ndim == 3) {  // rows no expert took (2-D x 2-D: K no group used)
    Status s = Fill(Narrow(out, 0, prev, extent - prev), 0.0);
    if (!s.ok()) return s;
  } else if (prev < extent && a.ndim == 3) {
    Status s = Fill(Narrow(out, 1, prev, extent - prev), 0.0);
    if (!s.ok()) return s;
  }
  // The experts' weights (b [G,K,N]) packed once and kept (Note [Packed weight cache]).
  std::shared_ptr<const PackedB::Pack> pack;
  const bool amx = OnAmx(a, 1.0);  // the 2-D x 3-D experts' products below
  if (packed_b != nullptr && a.ndim == 2 && b.ndim == 3) {
    TRN_ASSERT(SameView(packed_b->view, b), "GroupedMatmul: packed_b does not describe b");
    pack = EnsurePacked(*packed_b, amx);
  }
  int64_t start = 0;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t end = o[g * offs.strides[0]], len = end - start;
    Status s = Status::Ok();
    if (a.ndim == 2 && b.ndim == 3) {
      if (len > 0 && a.sizes[1] > 0) {
        s = MatmulPacked(Narrow(out, 0, start, len), Narrow(a, 0, start, len), Pick(b, g), none,
                         1.0, 1.0, SliceOf(pack.get(), amx, b.sizes[1], b.sizes[2], g));
      } else if (len > 0) {
        s = Fill(Narrow(out, 0, start, len), 0.0);
      }
    } else if (a.ndim == 3) {
      if (len > 0 && a.sizes[2] > 0) {
        s = Matmul(Narrow(out, 1, start, len), Pick(a, g), Narrow(b, 1, start, len), none);
      } else if (len > 0) {
        s = Fill(Narrow(out, 1, start, len), 0.0);
      }
    } else {
      const TensorRef og = Pick(out, g);
      s = len > 0 ? Matmul(og, Narrow(a, 1, start, len), Narrow(b, 0, start, len), none)
                  : Fill(og, 0.0);
    }
    if (!s.ok()) return s;
    start = end;
  }
  return Status::Ok();
}

Status GatheredMatmul(const TensorRef& out, const TensorRef& w, const TensorRef& ids,
                      const TensorRef& x, bool w_first) {
  TRN_ASSERT(w.ndim == 3 && x.ndim == 3 && out.ndim == 3 && ids.ndim == 1 &&
                 ids.sizes[0] == x.sizes[0] && out.sizes[0] == x.sizes[0],
             "gathered matmul: w [E,..], x and out [B,..], ids [B]");
  const int64_t experts = w.sizes[0], batch = ids.sizes[0];
  for (int64_t b = 0; b < batch; ++b) {  // validate before writing anything
    const int64_t id = internal::IndexValue(ids, b * ids.strides[0]);
    if (id < -experts || id >= experts) {
      return Status::Error("gathered matmul: index " + std::to_string(id) + " at position " +
                           std::to_string(b) + " is out of range for " + std::to_string(experts) +
                           " stacked matrices");
    }
  }
  const TensorRef none;
  for (int64_t b = 0; b < batch; ++b) {
    int64_t id = internal::IndexValue(ids, b * ids.strides[0]);
    if (id < 0) id += experts;
    const TensorRef wb = Pick(w, id), xb = Pick(x, b), ob = Pick(out, b);
    const int64_t k = w_first ? wb.sizes[1] : xb.sizes[1];
    const Status s = k == 0 ? Fill(ob, 0.0) : w_first ? Matmul(ob, wb, xb, none) : Matmul(ob, xb, wb, none);
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

KernelInfo DescribeGatheredMatmul(const TensorRef& out, const TensorRef& w, const TensorRef& x,
                                  bool w_first, const char* aten_op) {
  KernelInfo info;
  info.op = aten_op;
  info.engine = rt::Engine::kTensor;
  info.bytes_written = out.nbytes();
  switch (out.dtype) {
    case DType::kBFloat16: info.name = "gathered_matmul_bf16"; break;
    case DType::kFloat16: info.name = "gathered_matmul_f16"; break;
    default: info.name = "gathered_matmul_f32"; break;
  }
  const uint64_t k = static_cast<uint64_t>(w_first ? w.sizes[2] : w.sizes[1]);
  const uint64_t one = static_cast<uint64_t>(w.sizes[1] * w.sizes[2]) * ItemSize(w.dtype);
  info.flops = 2 * static_cast<uint64_t>(out.numel()) * k;
  info.bytes_read = static_cast<uint64_t>(x.sizes[0]) * one + RealBytes(x);  // one matrix per batch
  return info;
}

KernelInfo DescribeGroupedMatmul(const TensorRef& out, const TensorRef& a, const TensorRef& b,
                                 const char* aten_op) {
  KernelInfo info = DescribeMatmul(out, a, b, TensorRef{}, aten_op);
  switch (out.dtype) {
    case DType::kBFloat16: info.name = "grouped_matmul_bf16"; break;
    case DType::kFloat16: info.name = "grouped_matmul_f16"; break;
    default: info.name = "grouped_matmul_f32"; break;
  }
  // Every row (or K index) is in at most one group: the FLOPs of one product
  // over the whole grouped extent, an upper bound when groups leave some out.
  const int64_t k = a.ndim == 2 && b.ndim == 2 ? a.sizes[1] : a.sizes[a.ndim - 1];
  const int64_t per_group_out =
      a.ndim == 2 && b.ndim == 2 ? out.numel() / std::max<int64_t>(out.sizes[0], 1) : out.numel();
  info.flops = 2 * static_cast<uint64_t>(per_group_out) * static_cast<uint64_t>(k);
  return info;
}

KernelInfo DescribeMatmul(const TensorRef& out, const TensorRef& a, const TensorRef& b,
                          const TensorRef& bias, const char* aten_op) {
  KernelInfo info;
  switch (out.dtype) {
    case DType::kFloat64: info.name = "matmul_f64"; break;
    case DType::kBFloat16: info.name = "matmul_bf16"; break;
    case DType::kFloat16: info.name = "matmul_f16"; break;
    default: info.name = "matmul_f32"; break;
  }
  info.op = aten_op;
  info.engine = rt::Engine::kTensor;
  const int64_t k = a.sizes[a.ndim - 1];
  info.flops = 2 * static_cast<uint64_t>(out.numel()) * static_cast<uint64_t>(k);
  info.bytes_read = RealBytes(a) + RealBytes(b) + (bias.data ? RealBytes(bias) : 0);
  info.bytes_written = out.nbytes();
  return info;
}

}  // namespace trn::kernels
#endif  // HWY_ONCE
