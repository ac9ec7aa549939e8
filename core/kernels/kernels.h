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
#include <memory>
#include <vector>

#include "core/common/launch.h"
#include "core/common/tensor_ref.h"
#include "core/kernels/indexing.h"

namespace trn::kernels {

using rt::KernelInfo;

// ---- Elementwise --------------------------------------------------------------
enum class BinaryOp : uint8_t {
  kAdd, kSub, kMul, kDiv, kPow, kMaximum, kMinimum,
  kGlu,    // a * sigmoid(b), floating only: torch.glu of the two halves a, b
  kPrelu,  // a > 0 ? a : a * b, floating only: torch's _prelu_kernel (b the weight)
  // Floating and integer dtypes, torch's rules (Note [Integer division]):
  kDivTrunc, kDivFloor,  // div(rounding_mode="trunc" / "floor"), floor_divide; bf16/f16
                         // round intermediates to storage as torch's CPU does
  kRemainder,            // python %: the result has the divisor's sign
  kFmod,                 // C fmod: the result has the dividend's sign
  kAtan2,                // atan2(a, b), floating only (the caller promotes integers)
  // torch's CPU formulas in float32, floating only (hypot .. xlogy; the caller
  // promotes integers for copysign and xlogy, torch rejects them for the rest):
  kHypot, kLogAddExp, kLogAddExp2, kCopysign,
  kXlogy,                // a == 0 ? 0 : a * log(b); NaN b gives NaN
  // Every dtype: fmax / fmin ignore a NaN operand; heaviside is a == 0 ? b : a > 0.
  kFmax, kFmin, kHeaviside,
  // Integer and bool dtypes only (the caller rejects floats); shifts: ints.
  kBitwiseAnd, kBitwiseOr, kBitwiseXor, kShiftLeft, kShiftRight,
  kEq, kNe, kLt, kLe, kGt, kGe,   // comparisons: out is kBool
  kLogicalAnd, kLogicalOr, kLogicalXor,  // out is kBool, inputs any dtype (nonzero = true)
};
bool IsComparison(BinaryOp op);  // comparisons and logical ops
bool IsBitwise(BinaryOp op);     // kBitwiseAnd .. kShiftRight

// out = a op b, with b scaled by alpha for kAdd/kSub (torch's add(alpha=)).
// a and b are already broadcast to out's sizes (stride 0 on broadcast dims)
// and share one dtype; out has that dtype, or kBool for comparisons.
// kDiv of integers is true division: the caller makes out (and a, b) floating.
// Note [Integer division]: integer kDivTrunc/kDivFloor/kRemainder/kFmod by
// zero return a Status error ("ZeroDivisionError", as torch raises; out is
// partly written); INT_MIN / -1 wraps to INT_MIN (remainder 0) as in torch.
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
  kErf,
  kFloor, kCeil, kTrunc,  // identity on integers
  kRound,                 // half to even; identity on integers
  kSign,                  // -1/0/+1 (NaN -> 0, as torch); bool: identity
  kBitwiseNot,            // integers; bool is logical_not
  kLog1p, kExpm1,         // log(1 + x), exp(x) - 1: accurate near 0
  // Floating only, libm in float32 as torch's CPU (elementwise_math.cc): the
  // rarer functions, kept off the vector path.
  kTan, kAsin, kAcos, kAtan, kSinh, kCosh, kAsinh, kAcosh, kAtanh,
  kLog2, kLog10, kExp2, kErfc, kLgamma,
  kFrac,                  // x - trunc(x)
  kSinc,                  // sin(pi x) / (pi x), 1 at 0
  kIsNan, kIsInf, kIsPosInf, kIsNegInf, kIsFinite,  // out kBool; any dtype
  kSignbit,                                         // out kBool; any dtype (-0 and -NaN: true)
};
// True for the ops whose out is kBool whatever in's dtype.
bool UnaryOutIsBool(UnaryOp op);
// out and in have the same dtype (kBool out where UnaryOutIsBool); transcendental
// ops need a floating dtype.
Status Unary(UnaryOp op, const TensorRef& out, const TensorRef& in);
KernelInfo DescribeUnary(UnaryOp op, const TensorRef& out, const TensorRef& in,
                         const char* aten_op);

// torch.round(in, decimals): x * 10^d rounded half to even, / 10^d (d < 0:
// x / 10^-d rounded, * 10^-d), in float32. Floating dtypes; out like in.
Status RoundDecimals(const TensorRef& out, const TensorRef& in, int64_t decimals);

// out = min(max(in, lo), hi), NaN stays NaN; lo > hi gives hi (as torch).
// An absent bound is -inf / +inf. Floating dtypes compute in float32 with the
// bounds rounded to float32; integers compare exactly against the bounds.
Status Clamp(const TensorRef& out, const TensorRef& in, double lo, double hi);
KernelInfo DescribeClamp(const TensorRef& out, const TensorRef& in, const char* aten_op);

// Activation functions with scalar parameters, torch's CPU formulas in
// float32 (parameters rounded to float32, NaN in -> NaN out):
enum class ActivationOp : uint8_t {
  kLeakyRelu,    // x > 0 ? x : x * p0                         (negative_slope)
  kElu,          // x > 0 ? x * p1 : expm1(x * p2) * (p0 * p1) (alpha, scale, input_scale;
                 //                                              selu and celu too)
  kSoftplus,     // x * p0 > p1 ? x : log1p(exp(x * p0)) / p0  (beta, threshold)
  kHardswish,    // x * min(max(x + 3, 0), 6) / 6
  kHardsigmoid,  // min(max(x + 3, 0), 6) / 6
  kMish,         // x * tanh(log1p(exp(x)))
  kHardshrink,   // -p0 <= x <= p0 ? 0 : x                       (lambd)
  kSoftshrink,   // x > p0 ? x - p0 : x < -p0 ? x + p0 : x * 0   (lambd; keeps -0)
  kThreshold,    // x <= p0 ? p1 : x                             (threshold, value)
  kLogSigmoid,   // min(x, 0) - log1p(exp(-|x|))
};
// Floating dtypes only (torch rejects the others; the caller checks); out like in.
Status Activation(ActivationOp op, const TensorRef& out, const TensorRef& in, double p0 = 0,
                  double p1 = 0, double p2 = 0);
KernelInfo DescribeActivation(ActivationOp op, const TensorRef& out, const TensorRef& in,
                              const char* aten_op);

// torch.nan_to_num: NaN -> nan, +inf -> posinf, -inf -> neginf, each value
// rounded to in's own dtype (float64 is exact here: a pure select). Integers
// and bool are copied. out like in.
Status NanToNum(const TensorRef& out, const TensorRef& in, double nan, double posinf,
                double neginf);
KernelInfo DescribeNanToNum(const TensorRef& out, const TensorRef& in, const char* aten_op);

// torch.lerp: out = a + w * (b - a), evaluated as torch does (from b when
// |w| >= 0.5) so that lerp(a, b, 1) == b. Floating dtypes; a, b, weight and
// out share one dtype except that weight may be a float32 stride-0 scalar.
Status Lerp(const TensorRef& out, const TensorRef& a, const TensorRef& b,
            const TensorRef& weight);
KernelInfo DescribeLerp(const TensorRef& out, const TensorRef& a, const char* aten_op);

// out = cond ? a : b; cond kBool, a/b/out one dtype, all broadcast to out.
Status Where(const TensorRef& out, const TensorRef& cond, const TensorRef& a,
             const TensorRef& b);
KernelInfo DescribeWhere(const TensorRef& out, const char* aten_op);

Status Fill(const TensorRef& out, double value);
KernelInfo DescribeFill(const TensorRef& out, const char* aten_op);

// Cast and/or strided-to-contiguous copy between any two DTypes. Same sizes.
Status Copy(const TensorRef& out, const TensorRef& in);
KernelInfo DescribeCopy(const TensorRef& out, const TensorRef& in, const char* aten_op);

// torch's constant_pad_nd in one pass over out: out[o] = in[o - before] where
// that index lies in `in`, else `value` (before[d] per dim of out; negative
// pads crop). Same dtype and ndim.
Status ConstantPad(const TensorRef& out, const TensorRef& in, const int64_t* before,
                   double value);
KernelInfo DescribeConstantPad(const TensorRef& out, const TensorRef& in, const char* aten_op);

// torch's reflection_pad{1,2,3}d / replication_pad{1,2,3}d in one pass over out:
// out[o] = in[src(o - before)] per dim, src reflecting at the edges (without
// repeating the edge: -1 -> 1, n -> n - 2) or clamping to them. Negative pads
// crop. For kReflect every positive pad < the dim's size (the caller checks); in has
// at least one element per padded dim. Same dtype and ndim.
enum class PadMode : uint8_t { kReflect, kReplicate };
Status IndexPad(const TensorRef& out, const TensorRef& in, const int64_t* before, PadMode mode);
KernelInfo DescribeIndexPad(const TensorRef& out, const TensorRef& in, PadMode mode,
                            const char* aten_op);

// ---- Reductions ---------------------------------------------------------------
enum class ReduceOp : uint8_t { kSum, kMean, kAmax, kAmin, kArgmax, kArgmin, kAll, kAny, kProd };
// out has in's ndim with every reduced dim of size 1 (keepdim layout; the
// caller squeezes). Bit d of reduce_mask set = dim d reduced; mask 0 with
// ndim 0 is a copy. kSum/kMean: out floating like in, or int64 for int/bool
// input (sum only). kAmax/kAmin: out dtype = in dtype. kArgmax: out kInt64,
// at most one reduced dim (mask of all dims of a 1-D view for a flat argmax),
// first index of the maximum, NaN counts as maximum (as torch). kArgmin: the
// same contract, first index of the minimum (NaN still wins, as torch).
// kAll/kAny: out kBool, any input dtype (nonzero / NaN = true); over an empty
// extent all is true and any false.
// kProd: out floating like in (products in double) or int64 for int/bool input
// (wrapping, as torch); the product of nothing is 1.
// Over an empty reduced extent: kSum gives 0, kMean NaN, and kAmax/kAmin/
// kArgmax return a Status error (torch raises; the bridge should check first).
Status Reduce(ReduceOp op, const TensorRef& out, const TensorRef& in, uint32_t reduce_mask);
KernelInfo DescribeReduce(ReduceOp op, const TensorRef& out, const TensorRef& in,
                          const char* aten_op);

// var (take_sqrt: std) over `reduce_mask` in Reduce's keepdim layout:
// sum((x - mean)^2) / max(0, count - correction), two passes accumulating in
// double (Note [Double accumulation] in reduce.cc). mean_out (absent when
// data == nullptr) receives the mean, in the same layout. `in` floating;
// var_out / mean_out any floating dtypes. Over an empty extent both are NaN;
// count <= correction gives inf (or NaN when every deviation is 0), as torch.
Status VarMean(const TensorRef& var_out, const TensorRef& mean_out, const TensorRef& in,
               uint32_t reduce_mask, double correction, bool take_sqrt);
KernelInfo DescribeVarMean(const TensorRef& var_out, const TensorRef& mean_out,
                           const TensorRef& in, bool take_sqrt, const char* aten_op);

// linalg.vector_norm over `reduce_mask` (keepdim layout): ord +inf / -inf =
// max / min |x|, 0 = count of nonzeros (NaN counts), otherwise
// (sum |x|^ord)^(1/ord); terms in float32 as torch (|x|^2 of 1e20 is inf),
// summed in double. `in` floating; out any floating dtype. Over an empty
// extent the result is 0, except that ord < 0 and +inf have no identity and
// return a Status error (torch raises; the bridge checks first).
Status VectorNorm(const TensorRef& out, const TensorRef& in, uint32_t reduce_mask, double ord);
KernelInfo DescribeVectorNorm(const TensorRef& out, const TensorRef& in, double ord,
                              const char* aten_op);

// softmax / log_softmax of `in` along dim; out same sizes and dtype.
Status Softmax(const TensorRef& out, const TensorRef& in, int dim, bool log);
KernelInfo DescribeSoftmax(const TensorRef& out, bool log, const char* aten_op);

// ---- Recurrent cells -------------------------------------------------------------
// One time step of torch's fused cells (_thnn_fused_lstm_cell / _gru_cell), which
// nn.LSTM, nn.GRU, LSTMCell and GRUCell call off the CPU after their two GEMMs.
// Gates are [B, k * H], states [B, H], biases absent (data == nullptr) or [k * H];
// any strides, one floating dtype for all; math in float32.
// LSTM (k = 4: i, f, g, o): a = igates + hgates + ibias + hbias; i, f, o =
// sigmoid, g = tanh; cy = f * cx + i * g, hy = o * tanh(cy). workspace (optional,
// [B, 4H]) receives the activated gates (i, f, g, o), as CUDA's cell stores them.
Status LstmCell(const TensorRef& hy, const TensorRef& cy, const TensorRef& workspace,
                const TensorRef& igates, const TensorRef& hgates, const TensorRef& cx,
                const TensorRef& ibias, const TensorRef& hbias);
// GRU (k = 3: r, z, n): r, z = sigmoid(igate + hgate + both biases), hn = hgate_n +
// hbias_n, n = tanh(igate_n + ibias_n + r * hn), hy = n + z * (hx - n). workspace
// (optional, [B, 5H]) receives (r, z, n, hx, hn), as CUDA's cell stores them.
Status GruCell(const TensorRef& hy, const TensorRef& workspace, const TensorRef& igates,
               const TensorRef& hgates, const TensorRef& hx, const TensorRef& ibias,
               const TensorRef& hbias);
KernelInfo DescribeRnnCell(bool lstm, const TensorRef& hy, const TensorRef& igates,
                           const char* aten_op);

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
// native_group_norm over contiguous [N, C, *] in and out: each of the N x
// groups groups of C / groups channels is normalized by its own mean and
// biased variance, then scaled per channel (weight, bias: C elements or
// absent). mean_out / rstd_out (optional): contiguous N x groups, any floating dtype.
Status GroupNorm(const TensorRef& out, const TensorRef& in, const TensorRef& weight,
                 const TensorRef& bias, int64_t groups, double eps, const TensorRef& mean_out,
                 const TensorRef& rstd_out);
KernelInfo DescribeGroupNorm(const TensorRef& out, const TensorRef& in,
                             const TensorRef& weight, const char* aten_op);

// torch._weight_norm_interface: norm = ||v||_2 over every dim of v but `dim`
// (VectorNorm), w = v * (g / norm). g and norm are given in v's rank, size 1
// on every dim but `dim` (keepdim layout); floating dtypes, w like v.
Status WeightNorm(const TensorRef& w, const TensorRef& norm, const TensorRef& v,
                  const TensorRef& g, int dim);
KernelInfo DescribeWeightNorm(const TensorRef& w, const TensorRef& v, const char* aten_op);

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
// A row stride (in floats, >= cols) at which Matmul reads a float32 b with
// 64-byte aligned data in place instead of packing it (Note [B in place],
// gemm-inl.h): for scratch matrices a kernel builds as b, such as im2col.
// Only products of at most kInPlaceBMaxRows rows read b in place.
int64_t InPlaceBStride(int64_t cols);
inline constexpr int64_t kInPlaceBMaxRows = 512;

// torch._grouped_mm (MoE experts): one product per group, the groups read on
// the device from offs (1-D kInt32, cumulative group ends) when an operand is
// 2-D, so the host never waits for the router:
//   a [S,K]   b [G,K,N] offs [G]  out [S,N]   rows offs[g-1]..offs[g] of a times b[g]
//   a [G,M,K] b [K,N]   offs [G]  out [M,N]   a[g] times columns offs[g-1]..offs[g] of b
//   a [M,K]   b [K,N]   offs [G]  out [G,M,N] columns / rows offs[g-1]..offs[g] of K
//   a [G,M,K] b [G,K,N] no offs   out [G,M,N] (bmm)
// Output the groups do not cover (rows past offs[G-1], an empty K range) is 0.
// offs must be non-decreasing and at most the grouped extent, else a Status
// error naming the offset (nothing is computed). Floating dtypes, one for all.
// packed_b (optional, 2-D a x 3-D b): b's pack from AcquirePackedB, the
// experts' weights packed once for every later call.
Status GroupedMatmul(const TensorRef& out, const TensorRef& a, const TensorRef& b,
                     const TensorRef& offs, PackedB* packed_b = nullptr);
KernelInfo DescribeGroupedMatmul(const TensorRef& out, const TensorRef& a, const TensorRef& b,
                                 const char* aten_op);

// A batched product with one operand gathered by index, read on the device
// (a MoE decode step's bmm(W[ids], x) without materialising W[ids]):
//   w_first: out[b] = w[ids[b]] @ x[b]   w [E,N,K], x [B,K,M], out [B,N,M]
//   else:    out[b] = x[b] @ w[ids[b]]   w [E,K,N], x [B,M,K], out [B,M,N]
// ids 1-D kInt32/kInt64 [B]; negative ids count from the end (torch's
// indexing); one outside [-E, E) is a Status error naming it (nothing written).
Status GatheredMatmul(const TensorRef& out, const TensorRef& w, const TensorRef& ids,
                      const TensorRef& x, bool w_first);
KernelInfo DescribeGatheredMatmul(const TensorRef& out, const TensorRef& w, const TensorRef& x,
                                  bool w_first, const char* aten_op);

// torch.linalg.solve_triangular with left=True (the caller transposes for
// left=False): out = a^-1 b for a triangular a [..., n, n], b and out [..., n, k],
// batch dims equal (the caller broadcasts with stride 0). Only a's triangle is
// read (and not its diagonal when unitriangular); a zero diagonal gives inf /
// NaN, as LAPACK. Floating, one dtype for all, computed in float32 (linalg.cc).
Status SolveTriangular(const TensorRef& out, const TensorRef& a, const TensorRef& b, bool upper,
                       bool unitriangular);
KernelInfo DescribeSolveTriangular(const TensorRef& out, const TensorRef& a, const TensorRef& b,
                                   const char* aten_op);

// Packed-weight cache (Note [Packed weight cache] in matmul.cc). Thread-safe.
// Called on the launching thread when the GEMM is enqueued: b is the B
// operand of a Matmul, `storage` the base of the allocation holding it (what
// ForgetPackedB is told when the allocation is freed) and `version` a counter
// its owner bumps on every write (torch's _version()). Returns the pack to hand
// to that Matmul, or null when b is not (yet) worth caching: a pack is made
// only for a 2-D (or 3-D: grouped_mm's experts, one pack per slice) floating b
// seen a second time with the same storage, layout and version. The pack is
// filled by the first Matmul (or GroupedMatmul) that runs with it.
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

// arange, tril/triu, gather/scatter, index/index_put, cumsum, sort/topk,
// flip/roll, nonzero, repeat_interleave: core/kernels/indexing.h.

// Names of the SIMD targets compiled into this binary, and a way to pin one
// (tests run every kernel on every target). 0 = best available.
std::vector<int64_t> CompiledTargets();
const char* TargetName(int64_t target);
void SetTarget(int64_t target);
int64_t ActiveTarget();  // the target HWY_DYNAMIC_DISPATCH resolves to now

}  // namespace trn::kernels
