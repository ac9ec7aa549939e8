// Indexing and layout kernels beyond index_select/cat: arange, tril/triu,
// gather/scatter, advanced indexing (index / index_put), cumulative sums and
// products, sort/topk, flip/roll, nonzero and repeat_interleave's index.
// Mostly data movement: every dtype is handled by its storage type; the
// arithmetic ones (scatter_add, index_put accumulate, cumsum/cumprod) compute
// floating dtypes in float32 (cumulative ones in double, as torch's CPU) and
// integers exactly. Included by kernels.h (its "Indexing" section).
// Index values are read from kInt32/kInt64 tensors; an index out of range
// returns a Status naming the index, the dim and its size (nothing written).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/common/launch.h"
#include "core/common/tensor_ref.h"

namespace trn::kernels {

using rt::KernelInfo;

// out[i] = start + i * step, out 1-D of any dtype but kBool. Floating dtypes
// are computed in double and rounded (torch's CPU accumulates in double);
// integer dtypes as int64(start) + i * int64(step).
Status Arange(const TensorRef& out, double start, double step);
// torch.linspace (base <= 0) / torch.logspace (base^linspace): out 1-D of n =
// out.sizes[0] points, torch's CPU formula: step = (end - start) / (n - 1), the
// first n/2 points start + step*i, the rest end - step*(n-1-i) (symmetric
// rounding); computed in float32 for float32 and 16-bit floats, double for
// float64 and integers (the value truncated, as torch). n == 1 gives start.
Status Linspace(const TensorRef& out, double start, double end, double base);

// tril (upper = false) keeps in[..., i, j] where j - i <= diagonal, triu
// (upper = true) where j - i >= diagonal; the rest is 0. out and in have the
// same sizes (ndim >= 2) and dtype; out may alias in (in-place).
Status Triangle(const TensorRef& out, const TensorRef& in, int64_t diagonal, bool upper);

// out[p] = in[p with p[dim] = index[p]]; out and index have one shape, and
// in's sizes are >= index's on every dim but `dim` (the caller checks).
// Negative indices are out of range, as torch's gather.
Status Gather(const TensorRef& out, const TensorRef& in, int dim, const TensorRef& index);

// out[p with p[dim] = index[p]] = src[p] for every p of index's shape, or
// combined with what is there by `reduce` (torch's scatter_reduce: add, mul,
// max / min with NaN winning as on CPU); out already holds self. `src`
// absent (data == nullptr) means the scalar `value`. src (when present) has
// sizes >= index's on every dim.
enum class ScatterReduce : uint8_t { kNone, kAdd, kMul, kMax, kMin };
Status Scatter(const TensorRef& out, int dim, const TensorRef& index, const TensorRef& src,
               double value, ScatterReduce reduce);

// Advanced indexing. `in` is seen with its k indexed dims first (the caller
// permutes the view); indices are k int32/int64 tensors of one shape B
// (already broadcast, stride 0 allowed). out = [B..., rest...] where rest are
// in's dims k.. : out[b, r] = in[indices[0][b], ..., indices[k-1][b], r].
// Negative indices count from the end (as torch's indexing).
// `dims` (optional, k entries) are the indexed dims' numbers in the caller's
// tensor, for error messages.
Status Index(const TensorRef& out, const TensorRef& in, const std::vector<TensorRef>& indices,
             const std::vector<int>& dims = {});
// self[indices[0][b], ..., r] = values[b, r] (+= when accumulate); values has
// out-of-Index's shape [B..., rest...] (broadcast views allowed). Duplicate
// indices without accumulate: the last write wins. negative = false makes a
// negative index out of range (index_add / index_copy) instead of counting
// from the end.
Status IndexPut(const TensorRef& self, const std::vector<TensorRef>& indices,
                const TensorRef& values, bool accumulate, const std::vector<int>& dims = {},
                bool negative = true);

// Inclusive scan along dim: out[..., i, ...] = in[..., 0] op ... op in[..., i].
// out and in have one shape and dtype (the caller casts for dtype=).
// kLogSumExp (logcumsumexp, floating only) accumulates log(exp(acc) + exp(x))
// stably, in double.
enum class ScanOp : uint8_t { kSum, kProd, kLogSumExp };
Status Scan(ScanOp op, const TensorRef& out, const TensorRef& in, int dim);
// cummax / cummin along dim: values[i] = the max (min) of in[0..i] and
// indices[i] (kInt64) its position. As torch's CPU: a tie moves the index to
// the later element, a NaN wins and holds until a later NaN. values has in's
// dtype (or is absent: the compiler gathers them); all three one shape.
Status ScanExtremum(const TensorRef& values, const TensorRef& indices, const TensorRef& in,
                    int dim, bool max);

// Sorts every line of `in` along dim into values (in's dtype) and indices
// (kInt64), both of in's shape. Stable; NaN sorts as the largest value (torch).
// values may be absent (data == nullptr) for Sort and TopK: the compiler's
// nodes compute the indices alone and gather the values.
Status Sort(const TensorRef& values, const TensorRef& indices, const TensorRef& in, int dim,
            bool descending);
// The k largest (or smallest) of every line along dim, in sorted order (ties
// keep the lower index first); values/indices have in's shape with k at dim.
Status TopK(const TensorRef& values, const TensorRef& indices, const TensorRef& in, int dim,
            int64_t k, bool largest);

// out = in flipped along every dim whose bit is set in `mask`.
Status Flip(const TensorRef& out, const TensorRef& in, uint32_t mask);
// out = in rolled by shifts[d] along every dim d (0 = not rolled).
Status Roll(const TensorRef& out, const TensorRef& in, const int64_t* shifts);

// out (0-d kInt64) = number of nonzero elements of in (NaN counts as nonzero).
Status CountNonzero(const TensorRef& out, const TensorRef& in);
// out [n, ndim] kInt64: the multi-indices of in's nonzero elements in
// row-major order; n must equal CountNonzero(in) (else a Status error).
Status Nonzero(const TensorRef& out, const TensorRef& in);

// repeat_interleave's index: out (1-D kInt64, sum(repeats) long) holds i
// repeats[i] times; repeats 1-D kInt32/kInt64. A negative repeat or a sum
// different from out's size is a Status error.
Status RepeatIndex(const TensorRef& out, const TensorRef& repeats);

// out[p] = elements[p] is equal to some element of `test` (!= when invert);
// out kBool of elements' shape, elements and test of one dtype (any shapes).
// NaN is in nothing (torch).
Status IsIn(const TensorRef& out, const TensorRef& elements, const TensorRef& test, bool invert);

// torch.histc: counts of `in` in `bins` equal-width bins over [lo, hi] (x == hi
// in the last bin; NaN and values outside are not counted). lo == hi: the
// data's own min and max, widened by 1 each way if still equal (as torch); a
// non-finite data range is a Status error. Floating dtypes bin as torch's CPU:
// (x - lo) * bins / (hi - lo) in the element type (float32 for bf16/f16);
// integers as CUDA's histc (the CPU has none) in exact int64 arithmetic, lo and
// hi truncated. out 1-D [bins] of in's dtype.
Status Histc(const TensorRef& out, const TensorRef& in, int64_t bins, double lo, double hi);

// nll_loss (cross_entropy after log_softmax: a causal LM's loss with labels):
// in [N, C] floating (or [C] with a 0-dim target), target [N] int64,
// weight absent or [C] of in's dtype. Row i counts unless target[i] ==
// ignore_index: loss_i = -w[t] * in[i, t]. reduction 0 (none): out [N] (0-dim
// for 1-D in) holds loss_i, 0 where ignored; 1 (mean): out 0-dim = sum loss_i /
// sum w[t] (NaN when nothing counts, as torch); 2 (sum): the sum. total_weight
// 0-dim of in's dtype: sum w[t] over the counted rows (0 for none). Sums in
// float64. A target outside [0, C) that is not ignore_index is a Status
// error naming it ("Target 7 is out of bounds."), nothing written.
Status NllLoss(const TensorRef& out, const TensorRef& total_weight, const TensorRef& in,
               const TensorRef& target, const TensorRef& weight, int reduction,
               int64_t ignore_index);

// torch.searchsorted / bucketize: out[p] = the insertion index of values[p]
// in the sorted innermost row of seq: the first i with !(seq[i] < v) (left)
// or !(seq[i] <= v) (right), so a NaN value goes to the end as torch's. seq
// 1-D (one row for every value) or of values' rank with equal leading dims;
// values and seq of one dtype, out kInt32/kInt64 of values' shape.
Status SearchSorted(const TensorRef& out, const TensorRef& seq, const TensorRef& values,
                    bool right);

// torch.bincount: out[k] = the number of entries of in equal to k (or the sum
// of their weights); in 1-D int32/int64, every entry in [0, out.sizes[0]) (a
// Status error names one outside, nothing written); weights absent or [n] of
// any dtype, summed in double; out int64 without weights, else floating.
Status Bincount(const TensorRef& out, const TensorRef& in, const TensorRef& weights);

// torch.multinomial over the rows of probs [R, C] (floating; computed in
// float32, float64 too: Note [float64 policy]) into out [R, n] int64, as CPU
// PyTorch samples, so that one seed gives CPU's samples (Note [Multinomial]):
// - without replacement (or n == 1): draws [R, C] of probs' dtype holds Exp(1)
//   variates q; row i takes the indices of its n largest p / q (the quotient
//   rounded to probs' dtype), largest first, NaN largest, equal ones in the
//   order CPU's topk gives them (n == 1: the lowest index).
// - with replacement: draws [R, n] float64 holds U[0, 1) variates u; sample k
//   is the first j with cdf[j] >= u[k], cdf the float32 running sum over the
//   row divided by its total, its last entry 1.
// Invalid rows are a Status error with CPU's message (nothing written): an
// entry negative, infinite or NaN, or a row summing to 0.
Status Multinomial(const TensorRef& out, const TensorRef& probs, const TensorRef& draws,
                   bool replacement);

// torch._assert_async: a Status error with `message` when the one element of
// `in` (any dtype) is zero; NaN is nonzero.
Status AssertNonzero(const TensorRef& in, const std::string& message);

// torch's EmbeddingBag forward (_embedding_bag): bag b reduces weight's rows
// indices[offsets[b] .. end_b), end_b = offsets[b + 1] (indices' length for
// the last bag unless include_last_offset, where offsets has B + 1 entries),
// skipping rows equal to padding_idx (-1: none). mode 0 sums (each row scaled
// by per_sample_weights[i] when given), 1 averages over the rows kept, 2 takes
// the elementwise max (the first kept row wins ties; NaN only from the first).
// A bag with no row kept gives 0. weight [V, D] floating; indices [n] and
// offsets int32/int64; out [B, D] of weight's dtype; sums in float32 in index
// order, mean's sum rounded to the dtype before the division (as CPU's).
// The auxiliary outputs follow CPU PyTorch (its backward reads them), of
// indices' dtype: offset2bag [n] the bag of each index (skipped when empty),
// bag_size [B] the rows kept (0 for mode 0), max_indices: [B, D] the row of
// each max (0 where none) for mode 2, bag_size's values for mode 1, 0s for 0
// (an empty bag_size / max_indices is skipped).
// An index outside [0, V), offsets[0] != 0, decreasing offsets or one past n
// are a Status error with CPU's message, nothing written.
struct EmbeddingBagRefs {
  TensorRef out, offset2bag, bag_size, max_indices;
  TensorRef weight, indices, offsets, per_sample_weights;  // per_sample_weights may be absent
  int mode = 0;
  bool include_last_offset = false;
  int64_t padding_idx = -1;
};
Status EmbeddingBag(const EmbeddingBagRefs& r);
KernelInfo DescribeEmbeddingBag(const EmbeddingBagRefs& r, const char* aten_op);

// KernelInfo of the kernels above: the name is the kernel's stem with the
// dtype of `data` ("gather_f32", "sort_bf16"); bytes: `out` written, `in`
// (when given) read.
enum class IndexingKernel : uint8_t {
  kArange, kTril, kTriu, kGather, kScatter, kScatterAdd, kIndex, kIndexPut, kIndexPutAdd,
  kCumsum, kCumprod, kSort, kTopk, kFlip, kRoll, kNonzero, kRepeatIndex, kIsIn, kHistc,
  kNllLoss, kLinspace, kSearchSorted, kBincount, kMultinomial, kAssert, kScatterReduce,
  kLogcumsumexp, kCummax, kCummin,
};
KernelInfo DescribeIndexing(IndexingKernel kernel, const TensorRef& out, const TensorRef* in,
                            const char* aten_op);

}  // namespace trn::kernels
