// Linear-algebra aten kernels of the trn device: linalg_solve_triangular (the
// chunked gated delta rule of Qwen3-Next / Qwen3.5 / OLMo-hybrid solves its
// unit-lower chunk systems with it). The rest of torch.linalg takes the CPU
// fallback (docs/device.md).
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/linalg_solve_triangular.h>
#include <torch/library.h>

#include <utility>
#include <vector>

#include "torch_bridge/fallback.h"
#include "torch_bridge/ops_util.h"

namespace trn::bridge::ops {
namespace {

constexpr const char* kSolveName = "aten::linalg_solve_triangular";

// CPU's checks and messages (BatchLinearAlgebra.cpp, checkInputsSolver).
void CheckSolveInputs(const at::Tensor& a, const at::Tensor& b, bool left) {
  TORCH_CHECK(a.dim() >= 2,
              "linalg.solve_triangular: The input tensor A must have at least 2 dimensions.");
  TORCH_CHECK(b.dim() >= 2,
              "linalg.solve_triangular: The input tensor B must have at least 2 dimensions.");
  TORCH_CHECK(a.size(-1) == a.size(-2),
              "linalg.solve_triangular: A must be batches of square matrices, but they are ",
              a.size(-2), " by ", a.size(-1), " matrices");
  TORCH_CHECK(left ? a.size(-1) == b.size(-2) : a.size(-2) == b.size(-1),
              "linalg.solve_triangular: Incompatible shapes of A and B for the equation ",
              left ? "AX = B" : "XA = B", " (", a.size(-2), "x", a.size(-1), " and ", b.size(-2),
              "x", b.size(-1), ")");
}

// The solution's sizes (b's matrices over the broadcast batch), after CPU's
// checks, which raise CPU's messages.
std::vector<int64_t> SolveSizes(const at::Tensor& a, const at::Tensor& b, bool left) {
  CheckSolveInputs(a, b, left);
  std::vector<int64_t> sizes =
      at::infer_size(b.sizes().slice(0, b.dim() - 2), a.sizes().slice(0, a.dim() - 2));
  sizes.push_back(b.size(-2));
  sizes.push_back(b.size(-1));
  return sizes;
}

at::Tensor& SolveTriangularOut(const at::Tensor& a_in, const at::Tensor& b_in, bool upper,
                               bool left, bool unitriangular, at::Tensor& out) {
  const int device = CommonDevice(kSolveName, {&a_in, &b_in, &out});
  const std::vector<int64_t> sizes = SolveSizes(a_in, b_in, left);
  at::assert_no_internal_overlap(out);  // an expanded out=, as CPU
  const at::ScalarType dtype = a_in.scalar_type();  // CPU casts B to A's dtype
  if (dtype != at::kFloat && dtype != at::kDouble) {  // CPU's result, or its error (int, bf16)
    return at::native::call_fallback_fn<&CpuFallback, at::_ops::linalg_solve_triangular_out>::
        call(a_in, b_in, upper, left, unitriangular, out);
  }
  TORCH_CHECK(out.scalar_type() == dtype, "expected scalar type ", dtype, " but found ",
              out.scalar_type());
  const std::vector<int64_t> batch(sizes.begin(), sizes.end() - 2);
  PrepareOut(out, sizes, dtype, kSolveName);
  if (out.numel() == 0) return out;
  ComputeDType(dtype, kSolveName);  // Note [float64 policy]
  // The kernel reads a matrix of b (and of a) whole before writing its solution,
  // but a later matrix could read what an earlier one wrote: overlap solves
  // into a fresh tensor.
  const bool overlap = at::get_overlap_status(out, a_in) != at::MemOverlapStatus::No ||
                       at::get_overlap_status(out, b_in) != at::MemOverlapStatus::No;
  at::Tensor result = overlap ? Empty(sizes, dtype, DeviceIndex(out)) : out;
  // Negative views (z.conj().imag) reach this op unresolved: the kernel reads raw memory.
  at::Tensor a = CastTo(a_in.is_neg() ? a_in.resolve_neg() : a_in, dtype, kSolveName);
  at::Tensor b = CastTo(b_in.is_neg() ? b_in.resolve_neg() : b_in, dtype, kSolveName);
  at::Tensor x = result;
  bool lower_form_upper = upper;
  if (!left) {  // X A = B  <=>  A^T X^T = B^T, the triangle flipped
    a = a.mT(), b = b.mT(), x = x.mT();
    lower_form_upper = !upper;
  }
  const int64_t n = a.size(-1), k = b.size(-1);
  std::vector<int64_t> a_sizes = batch, b_sizes = batch;
  a_sizes.insert(a_sizes.end(), {n, n});
  b_sizes.insert(b_sizes.end(), {n, k});
  const TensorRef ra = RefExpanded(a, a_sizes, kSolveName);
  const TensorRef rb = RefExpanded(b, b_sizes, kSolveName);
  const TensorRef rx = Ref(x, kSolveName);
  Launch(device, kernels::DescribeSolveTriangular(rx, ra, rb, kSolveName),
         [=] { return kernels::SolveTriangular(rx, ra, rb, lower_form_upper, unitriangular); });
  if (overlap) out.copy_(result);
  return out;
}

at::Tensor SolveTriangular(const at::Tensor& a, const at::Tensor& b, bool upper, bool left,
                           bool unitriangular) {
  // Column-major matrices, as CPU's (LAPACK's layout): the empty out of the
  // right sizes is laid out so before the out= form writes it.
  std::vector<int64_t> sizes = SolveSizes(a, b, left);
  std::swap(sizes[sizes.size() - 2], sizes[sizes.size() - 1]);
  at::Tensor out = Empty(sizes, a.scalar_type(), DeviceIndex(a)).mT();
  return SolveTriangularOut(a, b, upper, left, unitriangular, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, lib) {
  NativeKernels m(lib);  // Note [dtypes the kernels do not take]
  m.impl("linalg_solve_triangular", TORCH_FN(SolveTriangular));
  m.impl("linalg_solve_triangular.out", TORCH_FN(SolveTriangularOut));
}

}  // namespace trn::bridge::ops
