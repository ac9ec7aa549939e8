// Device kernels: pure functions over TensorRefs, run single-threaded on a
// core's worker. Vectorized with Highway (runtime dispatch, see *-inl.h).
// Every kernel accepts arbitrary strides (views, broadcasts with stride 0).
// float32/bfloat16/float16/float64 are computed in float32 (float64 is stored
// as float64: Note [float64 policy]); int32/int64/bool are exact.
// Kernels never throw: bad data (an index out of range) returns a Status error.
// Shape/dtype contracts below are the caller's job (the bridge checks them);
// a violated contract is a bug and aborts via TRN_ASSERT.
#pragma once

#include <cstdint>
#include <vector>

#include "core/common/tensor_ref.h"
#include "core/runtime/runtime.h"

namespace trn::kernels {

using rt::KernelInfo;

// ---- Elementwise --------------------------------------------------------------
enum class BinaryOp : uint8_t {
  kAdd, kSub, kMul, kDiv, kPow, kMaximum, kMinimum,
  kEq, kNe, kLt, kLe, kGt, kGe,   // comparisons: out is kBool
  kLogicalAnd, kLogicalOr,        // out is kBool, inputs any dtype (nonzero = true)
};
bool IsComparison(BinaryOp op);  // comparisons and logical ops

// out = a op b, with b scaled by alpha for kAdd/kSub (torch's add(alpha=)).
// a and b are already broadcast to out's sizes (stride 0 on broadcast dims)
// and share one dtype; out has that dtype, or kBool for comparisons.
// kDiv of integers is true division: the caller makes out (and a, b) floating.
Status Binary(BinaryOp op, const TensorRef& out, const TensorRef& a, const TensorRef& b,
              double alpha = 1.0);
// out = a op s, or s op a when scalar_first (rsub, pow(2, x)). Same dtype rules.
Status BinaryScalar(BinaryOp op, const TensorRef& out, const TensorRef& a, double s,
                    bool scalar_first = false);
KernelInfo DescribeBinary(BinaryOp op, const TensorRef& out, const TensorRef& a,
                          const TensorRef* b, const char* aten_op);  // b null: scalar

enum class UnaryOp : uint8_t {
  kNeg, kAbs, kRelu,  // any dtype but bool
  kExp, kLog, kSqrt, kRsqrt, kReciprocal, kSigmoid, kTanh, kSilu,
  kGelu,      // exact (erf)
  kGeluTanh,  // approximate="tanh"
  kSin, kCos,
  kLogicalNot,  // out kBool
};
// out and in have the same dtype (kBool out for kLogicalNot); transcendental
// ops need a floating dtype.
Status Unary(UnaryOp op, const TensorRef& out, const TensorRef& in);
KernelInfo DescribeUnary(UnaryOp op, const TensorRef& out, const TensorRef& in,
                         const char* aten_op);

// out = cond ? a : b; cond kBool, a/b/out one dtype, all broadcast to out.
Status Where(const TensorRef& out, const TensorRef& cond, const TensorRef& a,
             const TensorRef& b);
KernelInfo DescribeWhere(const TensorRef& out, const char* aten_op);

Status Fill(const TensorRef& out, double value);
KernelInfo DescribeFill(const TensorRef& out, const char* aten_op);

// Cast and/or strided-to-contiguous copy between any two DTypes. Same sizes.
Status Copy(const TensorRef& out, const TensorRef& in);
KernelInfo DescribeCopy(const TensorRef& out, const TensorRef& in, const char* aten_op);

// ---- Reductions ---------------------------------------------------------------
enum class ReduceOp : uint8_t { kSum, kMean, kAmax, kAmin, kArgmax };
// out has in's ndim with every reduced dim of size 1 (keepdim layout; the
// caller squeezes). Bit d of reduce_mask set = dim d reduced; mask 0 with
// ndim 0 is a copy. kSum/kMean: out floating like in, or int64 for int/bool
// input (sum only). kAmax/kAmin: out dtype = in dtype. kArgmax: out kInt64,
// at most one reduced dim (mask of all dims of a 1-D view for a flat argmax),
// first index of the maximum, NaN counts as maximum (as torch).
// Over an empty reduced extent: kSum gives 0, kMean NaN, and kAmax/kAmin/
// kArgmax return a Status error (torch raises; the bridge should check first).
Status Reduce(ReduceOp op, const TensorRef& out, const TensorRef& in, uint32_t reduce_mask);
KernelInfo DescribeReduce(ReduceOp op, const TensorRef& out, const TensorRef& in,
                          const char* aten_op);

// softmax / log_softmax of `in` along dim; out same sizes and dtype.
Status Softmax(const TensorRef& out, const TensorRef& in, int dim, bool log);
KernelInfo DescribeSoftmax(const TensorRef& out, bool log, const char* aten_op);

// ---- Normalization --------------------------------------------------------------
// Rows are the leading dims, a row is the last `norm_dims` dims (n elements).
// A TensorRef with data == nullptr means "absent".
// rms_norm: out = in * rsqrt(mean(in^2) + eps) * weight; rstd_out (optional,
// float32 of the leading shape) receives rsqrt(mean(in^2)+eps) per row.
Status RmsNorm(const TensorRef& out, const TensorRef& in, const TensorRef& weight,
               int norm_dims, double eps, const TensorRef& rstd_out);
KernelInfo DescribeRmsNorm(const TensorRef& out, const TensorRef& in,
                           const TensorRef& weight, const char* aten_op);
// layer_norm: out = (in - mean) * rstd * weight + bias; mean_out / rstd_out
// optional, of the leading shape (keepdim sizes allowed), dtype of out or f32.
Status LayerNorm(const TensorRef& out, const TensorRef& in, const TensorRef& weight,
                 const TensorRef& bias, int norm_dims, double eps, const TensorRef& mean_out,
                 const TensorRef& rstd_out);
KernelInfo DescribeLayerNorm(const TensorRef& out, const TensorRef& in,
                             const TensorRef& weight, const char* aten_op);

// ---- Matmul ---------------------------------------------------------------------
// out = beta * bias + alpha * (a @ b), batched when ndim == 3:
// a [B,M,K] or [M,K], b [B,K,N] or [K,N], out [B,M,N] or [M,N] (a 2-D operand
// is shared by every batch). bias is absent (data == nullptr) or broadcast to
// out's sizes. Floating dtypes, one dtype for all; computed in float32 with a
// cache-blocked, packed SIMD GEMM.
//
// packed_b (optional): b's pack from AcquirePackedB, made on first use and
// reused by later calls (Note [Packed weight cache]); it must describe b.
struct PackedB;
Status Matmul(const TensorRef& out, const TensorRef& a, const TensorRef& b,
              const TensorRef& bias, double alpha = 1.0, double beta = 1.0,
              PackedB* packed_b = nullptr);
KernelInfo DescribeMatmul(const TensorRef& out, const TensorRef& a, const TensorRef& b,
                          const TensorRef& bias, const char* aten_op);

// Packed-weight cache (Note [Packed weight cache] in matmul.cc). Thread-safe.
// Called on the launching thread when the GEMM is enqueued: b is the B
// operand of a Matmul, `storage` the base of the allocation holding it (what
// ForgetPackedB is told when the allocation is freed) and `version` a counter
// its owner bumps on every write (torch's _version()). Returns the pack to hand
// to that Matmul, or null when b is not (yet) worth caching: a pack is made
// only for a 2-D floating b seen a second time with the same storage, layout
// and version. The pack is filled by the first Matmul that runs with it.
std::shared_ptr<PackedB> AcquirePackedB(const TensorRef& b, const void* storage,
                                        uint64_t version);
// The allocation at `storage` was freed: its packs are dropped, so a new tensor
// at the same address never meets them. The allocator's free observer.
void ForgetPackedB(const void* storage);
struct PackCacheStats {
  uint64_t hits = 0;       // Matmuls that found their pack made
  uint64_t packs = 0;      // packs made
  uint64_t evictions = 0;  // dropped for the byte, entry or per-storage view cap
  uint64_t forgotten = 0;  // entries dropped by ForgetPackedB or a newer version
  uint64_t entries = 0;    // operands tracked now (packed or seen once)
  uint64_t bytes = 0;      // bytes of the packs held now
  uint64_t capacity = 0;   // byte cap
};
PackCacheStats GetPackCacheStats();
void SetPackCacheCapacity(uint64_t bytes);  // default kDefaultPackCacheBytes
void ClearPackCache();                      // drops every entry, resets the counters
constexpr uint64_t kDefaultPackCacheBytes = uint64_t{1} << 30;

// ---- Indexing and layout ----------------------------------------------------------
// out = in.index_select(dim, index); index 1-D kInt32/kInt64. An index outside
// [0, size) returns an error naming the index, dim and size; negative indices
// are errors too, as in torch's CPU index_select and embedding.
// Embedding is index_select on dim 0 with a flattened index.
Status IndexSelect(const TensorRef& out, const TensorRef& in, int dim, const TensorRef& index);
KernelInfo DescribeIndexSelect(const TensorRef& out, const TensorRef& index,
                               const char* aten_op);

// out = cat(inputs, dim); all inputs share out's dtype and every size but dim.
Status Cat(const TensorRef& out, const std::vector<TensorRef>& inputs, int dim);
KernelInfo DescribeCat(const TensorRef& out, const char* aten_op);

// Names of the SIMD targets compiled into this binary, and a way to pin one
// (tests run every kernel on every target). 0 = best available.
std::vector<int64_t> CompiledTargets();
const char* TargetName(int64_t target);
void SetTarget(int64_t target);
int64_t ActiveTarget();  // the target HWY_DYNAMIC_DISPATCH resolves to now

}  // namespace trn::kernels
