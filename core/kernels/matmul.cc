// mm / bmm / addmm / linear: batches and bias around the packed f32 GEMM of
// gemm-inl.h (Note [GEMM blocking]).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/kernels/matmul.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "core/kernels/gemm-inl.h"
#include "hwy/highway.h"

#if HWY_ONCE
#include <vector>

#include "core/common/assert.h"
#include "core/kernels/convert.h"
#include "core/kernels/kernels.h"

namespace trn::kernels {
namespace gemm {
HWY_EXPORT(GemmF32);
}  // namespace gemm

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

}  // namespace

Status Matmul(const TensorRef& out, const TensorRef& a, const TensorRef& b,
              const TensorRef& bias, double alpha, double beta) {
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

  // Batches of A against one shared B fold into one tall GEMM, so B is packed once.
  int64_t batches = batch;
  if (batch > 1 && mb.bs == 0 && ma.BatchFoldsIntoRows() && mo.BatchFoldsIntoRows() &&
      (!has_bias || mc.BatchFoldsIntoRows())) {
    batches = 1;
    ma.FoldBatchIntoRows(batch);
    mo.FoldBatchIntoRows(batch);
    if (has_bias) mc.FoldBatchIntoRows(batch);
  }
  const int64_t rows = mo.rows;

  // f32 outputs with unit column stride take the GEMM's stores directly;
  // others go through an f32 scratch matrix and are converted once at the end.
  const bool direct = out.dtype == DType::kFloat32 && (mo.cs == 1 || n == 1);
  std::vector<float> scratch(direct ? 0 : static_cast<size_t>(rows * n));
  const auto gemm_fn = HWY_DYNAMIC_DISPATCH(gemm::GemmF32);
  for (int64_t bi = 0; bi < batches; ++bi) {
    gemm::Args args;
    args.m = rows;
    args.n = n;
    args.k = k;
    args.a = ma.Operand(bi);
    args.b = mb.Operand(bi);
    args.alpha = static_cast<float>(alpha);
    if (direct) {
      args.c = const_cast<float*>(reinterpret_cast<const float*>(mo.At(bi)));
      args.ldc = mo.rs;
    } else {
      args.c = scratch.data();
      args.ldc = n;
    }
    if (has_bias) {
      // Note [GEMM blocking]: the GEMM accumulates onto C, so C starts as beta * bias.
      const char* base = mc.At(bi);
      for (int64_t i = 0; i < rows; ++i) {
        float* crow = args.c + i * args.ldc;
        internal::LoadAsF32(bias.dtype, base + i * mc.rs * ItemSize(bias.dtype), mc.cs, n, crow);
        if (beta != 1.0) {
          for (int64_t j = 0; j < n; ++j) crow[j] *= static_cast<float>(beta);
        }
      }
      args.accumulate = true;
    }
    gemm_fn(args);
    if (!direct) {
      char* obase = const_cast<char*>(mo.At(bi));
      for (int64_t i = 0; i < rows; ++i) {
        internal::StoreFromF32(out.dtype, obase + i * mo.rs * ItemSize(out.dtype), mo.cs, n,
                               scratch.data() + i * n);
      }
    }
  }
  return Status::Ok();
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
