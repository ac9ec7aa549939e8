// The compiler's graph IR: what torch.compile(backend="trn") hands the core,
// built node by node through the bindings (never by parsing Python text).
// Torch-free. One Graph per FX graph and input signature; not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/common/tensor_ref.h"

namespace trn::compiler {

// The aten ops the compiler understands (after AOTAutograd's decompositions).
// Anything else is added as kEager and run by the frontend as an eager trn op
// inside the program (Note [Eager nodes]).
enum class Op : uint8_t {
  kInput,     // a graph input (a placeholder)
  kConstant,  // a scalar broadcast to the node's sizes: attr value
  // Elementwise, broadcasting (inputs are broadcast to the output sizes).
  // Binary ops take two tensor inputs, or one tensor and attr `scalar`
  // (with attr scalar_first for rsub-like ops).
  kAdd, kSub, kMul, kDiv, kPow, kMaximum, kMinimum,
  kEq, kNe, kLt, kLe, kGt, kGe,
  kWhere,  // inputs: cond, a, b
  kNeg, kAbs, kRelu, kExp, kLog, kSqrt, kRsqrt, kReciprocal, kSigmoid, kTanh, kSilu,
  kGelu, kGeluTanh, kSin, kCos, kLog1p, kExpm1, kErf,
  kCast,  // to the node's dtype
  // rotate_half(x) = cat([-x[..., h:], x[..., :h]], -1) over x's last dim (2h):
  // made by the compiler's Prepare from that cat (Note [Rotate half] in
  // core/compiler/prepare.cc), never by a frontend.
  kRotateHalf,
  // Reductions over attr dims (keepdim layout decided by the output sizes).
  kSum, kMean, kAmax, kAmin,
  kSoftmax, kLogSoftmax,  // attr dim
  // Layout: the output is a view of input 0's storage described by the
  // output meta (sizes, strides, storage offset relative to the input's
  // storage), exactly as the FakeTensor says. Compiled to strides, no copy.
  kView,
  kClone,  // a contiguous copy of input 0 (also `contiguous`, `_to_copy` without cast)
  // Matmul family; alpha/beta attrs for addmm.
  kMm, kBmm, kAddmm,  // addmm inputs: bias, a, b
  // Library ops: never fused, each runs as one core kernel (Note [Library kernels]).
  kCat,  // attr dims = {dim}; inputs share the output dtype
  kLogicalAnd, kLogicalOr, kLogicalNot,  // bool output
  kEmbedding,  // inputs: table [V, ...], contiguous int32/int64 index; out index.shape + [...]
  // Fused attention: inputs q [B,Hq,Sq,D], k, v [B,Hkv,Skv,D(v)], optional mask
  // broadcasting to [B,Hq,Sq,Skv] (bool: attend, floating: added); attr
  // scalar = scale, causal.
  kSdpa,
  // Convolution (1-D as 2-D with H = 1): inputs x [N,C,H,W], weight, optional
  // bias [Cout]; attr conv. A following relu joins it (Note [Library kernels]).
  kConv,
  // Transposed convolution, 1-D or 2-D (the audio codecs' upsampling: EnCodec,
  // Mimi, DAC; DPT's reassembly): inputs x [N,Cin,(H,)W], weight [Cin,Cout/groups,
  // (KH,)KW], optional bias [Cout]; attr conv (padding alike on both sides);
  // output_padding is what out's sizes add to the formula (below max(stride,
  // dilation)). No epilogue joins it.
  kConvTranspose,
  // A floating function the fused rows do not compute (tan, asin .. atanh,
  // sinh, cosh, log2, log10, exp2, erfc, lgamma, frac, sinc: YOSO's acos):
  // attr dims = {kernels::UnaryOp}, input x, out like x; libm in float32 as the
  // eager kernel (kernels::Unary). IsLibraryMath names the ops it takes.
  kMath,
  // complex64 values as their (re, im) float32 pairs, a trailing dim of 2
  // (Note [Complex values] in backend.py; kernels/complex.h): attr dims =
  // {ComplexCode, real inputs (bit i: input i is float32 values, imaginary 0)}.
  // kComplexAdd .. kComplexDiv: a op b, a and b broadcasting to out (Llama 4's
  // and DeepSeek-V2's rotary: x * freqs_cis); kComplexPolar: abs, angle float32
  // -> pairs; kComplexConj: conj(a); kComplexFromReal: float32 a -> a + 0i;
  // kAbs, kAngle: |a|, arg a as float32 values (|stft|); kExp, kLog, kSqrt:
  // exp(a), log(a), sqrt(a) (principal branches).
  kComplex,
  // One 1-D FFT pass along attr dims[1] of every line (kernels::Fft): dims =
  // {FftCode (0 c2c, 1 r2c, 2 c2r), dim, forward}, scalar = the scale; input and
  // output pairs or float32 values as the kind says, sizes equal but at dim.
  // An n-dimensional torch.fft op is one node per dim (Note [FFT passes]).
  kFft,
  // layer_norm over the last attr dims[0] dims: inputs x, weight, bias; attr eps.
  kLayerNorm,
  // group_norm of x [N, C, *] in attr dims[0] groups of channels: inputs x,
  // optionally weight, then bias [C]; attr eps.
  kGroupNorm,
  // Batch norm with running statistics (inference): inputs x [N,C,*], mean,
  // var [C], then optionally weight, bias [C]; attr eps.
  kBatchNorm,
  // Max pooling over H, W of x [N,C,H,W]; attr pool (output sizes already
  // apply ceil_mode). The indices output stays an eager op.
  kMaxPool2d,
  // Average pooling over H, W of x [N,C,H,W] (torch's avg_pool2d: the window
  // clipped to input + padding); attr pool, dilation 1.
  kAvgPool2d,
  // Adaptive average pooling of x [N,C,H,W] to out [N,C,OH,OW]: window
  // [floor(o*I/O), ceil((o+1)*I/O)) per output index (TextNet's 2 x 2 head;
  // 1 x 1 arrives as a mean).
  kAdaptiveAvgPool2d,
  // F.unfold / F.fold (kernels::Im2Col / Col2Im; MobileViTV2's patches): im2col
  // x [N,C,H,W] -> out [N, C*KH*KW, OH*OW]; col2im x [N, C*KH*KW, OH*OW] -> out
  // [N,C,H,W], each element the sum of the columns that read it; attr pool
  // (kernel, stride, padding, dilation), OH / OW from H / W as a convolution's.
  kIm2Col, kCol2Im,
  // out = self with out[i0, i1, ...] = values (index_put: a static KV cache's
  // update, Informer's sparse attention), or += with the last attr dim 1
  // (accumulate: index_add, MoE experts' outputs summed): inputs self, one
  // int32/int64 index per indexed dim (attr dims before the last, ascending;
  // the indices broadcast), values broadcasting to what kIndex would give.
  kIndexPut,
  // out[i] = scalar + i * alpha, 1-D, no inputs (an arange of constants).
  kArange,
  // torch.gather on attr dims[0]: inputs self, int64 index; out has index's sizes.
  kGather,
  // torch.scatter / scatter_add on attr dims = {dim, add}: out = self with
  // out[p with p[dim] = index[p]] = src[p] (+= when add) for every p of index's
  // sizes; inputs self, int64 index (sizes <= self's but on dim, <= src's) and
  // src, or no src: the attr scalar (scatter.value: the MoE routers' one-hot).
  kScatter,
  // self.index_select(dims[0], index): inputs self, 1-D int32/int64 index; out
  // is self with that dim's size replaced by the index's (an index outside
  // [0, size), negatives included, is an error as in torch).
  kIndexSelect,
  // Advanced indexing self[..., i0, i1, ...]: inputs self, then one int32/int64
  // index per indexed dim (attr dims, ascending; the indices broadcast to B).
  // out: self's dims before the indexed ones, B, the dims after (adjacent
  // indexed dims), or B then the unindexed dims (torch's rule otherwise).
  kIndex,
  // Inclusive cumulative sum on attr dims[0]; out has input 0's sizes and dtype.
  kCumsum,
  // Index of the first maximum / minimum along attr dims[0], int64 (keepdim or
  // not, from the output's rank); NaN counts as the extremum, as torch's.
  kArgmax,
  kArgmin,
  // Constant padding: attr dims = (before, after) per padded dim from the last
  // dim backwards (torch's pad order, non-negative), attr scalar = the value.
  kPad,
  // out = input 0 with out[..., start:end:step, ...] on dim d = input 1 (torch's
  // slice_scatter: BART's shift_tokens_right); attr dims = {d, start, end, step},
  // 0 <= start <= end <= size, step > 0.
  kSliceScatter,
  // Division rounding toward zero / down (div(rounding_mode="trunc" /
  // "floor"), floor_divide: MoE routing's expert // top_k, DETR's positions)
  // and its remainders (remainder: the divisor's sign; fmod: the dividend's,
  // roll's index): inputs a, b broadcasting to the output, or a and attr
  // scalar; one dtype, not bool (Note [Integer division] in
  // core/kernels/kernels.h: an integer divided by 0 is an error).
  kDivTrunc, kDivFloor, kRemainder, kFmod,
  // Rounding to an integral value (round: half to even) and sign, over any
  // dtype but bool (integers are unchanged / their sign): input x, out like x
  // (DeBERTa's relative-position buckets).
  kFloor, kCeil, kTrunc, kRound, kSign,
  // The int64 indices of torch.topk / torch.sort along attr dims[0] (MoE
  // routing): topk's dims = {dim, k, largest}, out = x's sizes with k at dim
  // (sorted, ties by index as eager); sort's dims = {dim, descending}, stable,
  // out = x's sizes. The values are a gather of x by these indices: a node has
  // one output.
  kTopk, kSort,
  // torch.histc (MoE expert counts; integers as CUDA's): attr dims = {bins},
  // scalar = min, alpha = max (equal: the data's range); out [bins], x's dtype.
  kHistc,
  // torch.flip over the attr dims (LED's attention chunks): out like x.
  kFlip,
  // Scans on attr dims[0], out of x's sizes: logcumsumexp (floating, x's
  // dtype), and the int64 indices of cummax / cummin (values gathered, as topk).
  kLogcumsumexp, kCummax, kCummin,
  // torch.linalg.solve_triangular with left=True (Qwen3-Next's chunk systems):
  // inputs a [..., n, n], b [..., n, k], their batch dims broadcasting to out's
  // [..., n, k]; attr dims = {upper, unitriangular}; floating, one dtype.
  kSolveTriangular,
  kEager,  // anything else: attr target names the aten op
};

// Op categories, by the enum's ranges.
inline bool IsBinaryOp(Op op) { return op >= Op::kAdd && op <= Op::kGe; }
inline bool IsUnaryOp(Op op) { return op >= Op::kNeg && op <= Op::kCast; }
inline bool IsReductionOp(Op op) { return op >= Op::kSum && op <= Op::kAmin; }

const char* OpName(Op op);  // "add", "mul", ... (aten spelling without namespace)

struct Meta {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;  // in elements; empty = contiguous
  int64_t storage_offset = 0;    // kView only: relative to input 0's storage
};

// The kernels::UnaryOp codes kMath takes: floating in and out, the libm ones.
bool IsLibraryMath(int64_t unary_op);
// kMath's functions by torch's name (the aten op), in UnaryOp order from kTan:
// the one list the bindings parse and the Python lowering reads.
inline constexpr const char* kLibraryMathNames[] = {
    "tan",   "asin",  "acos", "atan",   "sinh", "cosh", "asinh", "acosh",
    "atanh", "log2",  "log10", "exp2",  "erfc", "lgamma", "frac", "sinc",
};

// Op::kComplex's dims[0].
enum class ComplexCode : int64_t {
  kAdd, kSub, kMul, kDiv, kPolar, kConj, kFromReal,
  kAbs, kAngle,  // float32 values out
  kExp, kLog, kSqrt,
};

struct Node {
  Op op = Op::kEager;
  std::string target;          // aten op as the frontend saw it, e.g. "aten.mul.Tensor"
  std::vector<int> inputs;     // value ids (= node ids)
  Meta meta;                   // output
  // Attributes (unused ones stay empty / default).
  std::vector<int64_t> dims;   // reductions, softmax (one dim)
  double scalar = 0;           // binary op with a scalar operand, kConstant value
  bool has_scalar = false;
  bool scalar_first = false;
  double alpha = 1, beta = 1;  // add/sub alpha, addmm alpha/beta
  double eps = 0;
  bool causal = false;  // kSdpa
  bool pure = false;    // kEager: no side effect (no RNG, no mutation): dropped when unused
  // kConv, per spatial dim (T, H, W); padding before / after. A convolution of
  // rank r (3: 1-D, 4: 2-D, 5: 3-D) uses the last r - 2 entries; the others
  // stay stride 1, padding 0, dilation 1.
  static constexpr int kConvDims = 3;
  struct ConvAttrs {
    int64_t stride[kConvDims] = {1, 1, 1}, padding[kConvDims] = {0, 0, 0},
            padding_end[kConvDims] = {0, 0, 0};
    int64_t dilation[kConvDims] = {1, 1, 1};
    int64_t groups = 1;
  } conv;
  struct PoolAttrs {  // kMaxPool2d, kAvgPool2d, per spatial dim (H, W); padding on both sides
    int64_t kernel[2] = {1, 1}, stride[2] = {1, 1}, padding[2] = {0, 0}, dilation[2] = {1, 1};
    bool count_include_pad = true;  // kAvgPool2d: divide by the padded window
    int64_t divisor_override = 0;   // kAvgPool2d: divide by this instead (0 = none)
  } pool;
};

// Throws trn::InvalidArgument "trn compiler: node <index> (<op> <target>): <problem>",
// the form the backend reads a refused node's index from (Note [Refused nodes]).
[[noreturn]] void FailNode(size_t index, const Node& node, const std::string& problem);

// Builder and container. Node ids are dense, in topological order.
class Graph {
 public:
  int AddInput(const Meta& meta);
  // Validates inputs (ids exist, arity of the op, dims in range) and throws
  // trn::InvalidArgument naming the node and the problem otherwise.
  int AddNode(Node node);
  void SetOutputs(std::vector<int> outputs);

  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int>& inputs() const { return inputs_; }
  const std::vector<int>& outputs() const { return outputs_; }
  // Structural hash (ops, attrs, input wiring, dtypes; not sizes): the same
  // model code gives the same hash for every input signature.
  uint64_t Hash() const;

 private:
  std::vector<Node> nodes_;
  std::vector<int> inputs_;
  std::vector<int> outputs_;
};

}  // namespace trn::compiler
