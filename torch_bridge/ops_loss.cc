// Regression and binary losses on trn: mse_loss, smooth_l1_loss, huber_loss,
// binary_cross_entropy and their backwards, as compositions of native trn ops
// (each a kernel the profiler sees) with CPU PyTorch's elementwise formulas
// (aten/src/ATen/native/Loss.cpp and its CPU kernels). They took the CPU
// fallback. nll_loss's forward, an indexing kernel, is in ops_index.cc; its
// backward (cross_entropy's) is here, and nll_loss2d (cross_entropy over
// [N, C, H, W]: segmentation) as nll_loss over the pixels.
#include <ATen/core/Reduction.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/log.h>
#include <ATen/ops/log1p.h>
#include <ATen/ops/nll_loss_forward.h>
#include <ATen/ops/logical_and.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

#include <optional>

#include "torch_bridge/fallback.h"
#include "torch_bridge/ops_util.h"

namespace trn::bridge::ops {
namespace {

// CPU's kernels are instantiated for floating dtypes only.
at::ScalarType LossDType(const at::Tensor& self, const at::Tensor& target, const char* cpu_name) {
  const at::ScalarType t = at::result_type(self, target);
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(t), "\"", cpu_name, "\" not implemented for '",
                              c10::toString(t), "'");
  return t;
}

// apply_loss_reduction: mean of an empty loss is NaN, as CPU's.
at::Tensor Reduce(const at::Tensor& loss, int64_t reduction) {
  if (reduction == at::Reduction::Mean) return loss.mean();
  if (reduction == at::Reduction::Sum) return loss.sum();
  return loss;
}

// 1 / numel for a mean, as the backward formulas scale the gradient.
double Norm(const at::Tensor& self, int64_t reduction) {
  return reduction == at::Reduction::Mean ? 1.0 / static_cast<double>(self.numel()) : 1.0;
}

// ---- mse_loss: (x - y)^2 ---------------------------------------------------------------
at::Tensor MseLoss(const at::Tensor& self, const at::Tensor& target, int64_t reduction) {
  LossDType(self, target, "mse_cpu");
  const at::Tensor d = self - target;
  return Reduce(d * d, reduction);
}
at::Tensor& MseLossOut(const at::Tensor& self, const at::Tensor& target, int64_t reduction,
                       at::Tensor& out) {
  return CopyIntoOut(MseLoss(self, target, reduction), out, "aten::mse_loss");
}
at::Tensor MseLossBackward(const at::Tensor& grad, const at::Tensor& self,
                           const at::Tensor& target, int64_t reduction) {
  return (self - target) * grad * (2.0 * Norm(self, reduction));
}
at::Tensor& MseLossBackwardOut(const at::Tensor& grad, const at::Tensor& self,
                               const at::Tensor& target, int64_t reduction, at::Tensor& out) {
  return CopyIntoOut(MseLossBackward(grad, self, target, reduction), out, "aten::mse_loss_backward");
}

// ---- smooth_l1_loss and huber_loss: quadratic inside a band, linear outside ----------------
// smooth_l1: z < beta ? 0.5 z^2 / beta : z - 0.5 beta (beta 0: |x - y|);
// huber:     z < delta ? 0.5 z^2 : delta (z - 0.5 delta); z = |x - y|.
at::Tensor BandLoss(const at::Tensor& self, const at::Tensor& target, double band, bool huber) {
  const at::Tensor z = at::abs(self - target);
  if (!huber && band == 0) return z;
  const at::Tensor quad = z * z * (huber ? 0.5 : 0.5 / band);
  const at::Tensor lin = huber ? (z - 0.5 * band) * band : z - 0.5 * band;
  return at::where(z < band, quad, lin);
}
// The gradient: -g, g (times delta for huber) outside the band, x g / beta (x g) inside.
at::Tensor BandLossBackward(const at::Tensor& grad, const at::Tensor& self,
                            const at::Tensor& target, int64_t reduction, double band, bool huber) {
  const at::Tensor x = self - target;
  const at::Tensor gn = grad * Norm(self, reduction);
  const at::Tensor outside = huber ? gn * band : gn;
  const at::Tensor inside = huber ? x * gn : x * gn / band;
  return at::where(x <= -band, -outside, at::where(x >= band, outside, inside));
}

at::Tensor SmoothL1Loss(const at::Tensor& self, const at::Tensor& target, int64_t reduction,
                        double beta) {
  LossDType(self, target, "smooth_l1_cpu");
  TORCH_CHECK(beta >= 0, "smooth_l1_loss does not support negative values for beta.");
  return Reduce(BandLoss(self, target, beta, false), reduction);
}
at::Tensor& SmoothL1LossOut(const at::Tensor& self, const at::Tensor& target, int64_t reduction,
                            double beta, at::Tensor& out) {
  return CopyIntoOut(SmoothL1Loss(self, target, reduction, beta), out, "aten::smooth_l1_loss");
}
at::Tensor SmoothL1LossBackward(const at::Tensor& grad, const at::Tensor& self,
                                const at::Tensor& target, int64_t reduction, double beta) {
  return BandLossBackward(grad, self, target, reduction, beta, false);
}
at::Tensor& SmoothL1LossBackwardOut(const at::Tensor& grad, const at::Tensor& self,
                                   const at::Tensor& target, int64_t reduction, double beta,
                                   at::Tensor& out) {
  return CopyIntoOut(SmoothL1LossBackward(grad, self, target, reduction, beta), out,
                 "aten::smooth_l1_loss_backward");
}

at::Tensor HuberLoss(const at::Tensor& self, const at::Tensor& target, int64_t reduction,
                     double delta) {
  LossDType(self, target, "huber_cpu");
  TORCH_CHECK(delta > 0, "huber_loss does not support non-positive values for delta.");
  return Reduce(BandLoss(self, target, delta, true), reduction);
}
at::Tensor& HuberLossOut(const at::Tensor& self, const at::Tensor& target, int64_t reduction,
                         double delta, at::Tensor& out) {
  return CopyIntoOut(HuberLoss(self, target, reduction, delta), out, "aten::huber_loss");
}
at::Tensor HuberLossBackward(const at::Tensor& grad, const at::Tensor& self,
                             const at::Tensor& target, int64_t reduction, double delta) {
  return BandLossBackward(grad, self, target, reduction, delta, true);
}
at::Tensor& HuberLossBackwardOut(const at::Tensor& grad, const at::Tensor& self,
                                 const at::Tensor& target, int64_t reduction, double delta,
                                 at::Tensor& out) {
  return CopyIntoOut(HuberLossBackward(grad, self, target, reduction, delta), out,
                 "aten::huber_loss_backward");
}

// ---- binary_cross_entropy: -w (y max(log x, -100) + (1 - y) max(log(1 - x), -100)) ---------
// CPU checks every element (NaN included) lies in [0, 1]: here one reduction
// per tensor and one read-back of both flags, instead of the fallback's copies.
at::Tensor InUnitInterval(const at::Tensor& t) { return at::logical_and(t >= 0, t <= 1).all(); }

at::Tensor BinaryCrossEntropy(const at::Tensor& self, const at::Tensor& target,
                              const std::optional<at::Tensor>& weight, int64_t reduction) {
  LossDType(self, target, "binary_cross_entropy");
  TORCH_CHECK(target.scalar_type() == self.scalar_type(), "Found dtype ", target.scalar_type(),
              " but expected ", self.scalar_type());
  TORCH_CHECK(self.sizes() == target.sizes(), "The size of target (", target.sizes(),
              ") must be the same as the size of input (", self.sizes(), ")");
  const at::Tensor ok = at::stack({InUnitInterval(self), InUnitInterval(target)}).cpu();
  TORCH_CHECK(ok[0].item<bool>(), "all elements of input should be between 0 and 1");
  TORCH_CHECK(ok[1].item<bool>(), "all elements of target should be between 0 and 1");
  at::Tensor loss = (target - 1) * at::clamp(at::log1p(-self), -100) -
                    target * at::clamp(at::log(self), -100);
  if (weight.has_value() && weight->defined()) loss.mul_(*weight);  // CPU's: no broadcast past input
  return Reduce(loss, reduction);
}
at::Tensor& BinaryCrossEntropyOut(const at::Tensor& self, const at::Tensor& target,
                                  const std::optional<at::Tensor>& weight, int64_t reduction,
                                  at::Tensor& out) {
  return CopyIntoOut(BinaryCrossEntropy(self, target, weight, reduction), out,
                 "aten::binary_cross_entropy");
}
// grad (x - y) / max((1 - x) x, 1e-12), times weight, over numel for a mean.
at::Tensor BinaryCrossEntropyBackward(const at::Tensor& grad, const at::Tensor& self,
                                      const at::Tensor& target,
                                      const std::optional<at::Tensor>& weight,
                                      int64_t reduction) {
  at::Tensor g = grad * (self - target) / at::clamp((1 - self) * self, 1e-12);
  if (weight.has_value() && weight->defined()) g = g * *weight;
  return reduction == at::Reduction::Mean ? g * Norm(self, reduction) : g;
}
at::Tensor& BinaryCrossEntropyBackwardOut(const at::Tensor& grad, const at::Tensor& self,
                                          const at::Tensor& target,
                                          const std::optional<at::Tensor>& weight,
                                          int64_t reduction, at::Tensor& out) {
  return CopyIntoOut(BinaryCrossEntropyBackward(grad, self, target, weight, reduction), out,
                 "aten::binary_cross_entropy_backward");
}

// ---- nll_loss_backward ------------------------------------------------------------------
// The gradient of nll_loss (2-D) and nll_loss2d (4-D) with respect to `in`,
// classes on dim 1 and `t` its shape without that dim: -w[t] grad (over
// total_weight for a mean) at each target's class, zero elsewhere and where
// the target is ignored (a fill, not a product: a mean over only ignored
// targets divides by a total weight of 0). Contiguous, as CPU's.
at::Tensor ClassGradient(const at::Tensor& grad, const at::Tensor& in, const at::Tensor& t,
                         const std::optional<at::Tensor>& weight, int64_t reduction,
                         const c10::SymInt& ignore_index, const at::Tensor& total_weight) {
  const at::Tensor keep = t != ignore_index.guard_int(__FILE__, __LINE__);
  const at::Tensor column = t.masked_fill(keep.logical_not(), 0);
  at::Tensor coef = grad.dim() == 0 ? -grad.expand(t.sizes()) : -grad.reshape(t.sizes());
  if (reduction == at::Reduction::Mean) coef = coef / total_weight;
  if (weight.has_value() && weight->defined()) {
    coef = coef * weight->reshape({-1}).index_select(0, column.reshape({-1})).view(t.sizes());
  }
  coef = coef.masked_fill(keep.logical_not(), 0);
  at::Tensor grad_input = at::zeros(in.sizes(), in.options());
  grad_input.scatter_(1, column.unsqueeze(1), coef.unsqueeze(1).to(in.scalar_type()));
  return grad_input;
}

// A 1-D input is one row.
at::Tensor NllLossBackward(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                           const std::optional<at::Tensor>& weight, int64_t reduction,
                           c10::SymInt ignore_index, const at::Tensor& total_weight) {
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "input tensor should be 1D or 2D");
  const at::Tensor t = target.reshape({-1});
  const at::Tensor in = self.dim() == 1 ? self.unsqueeze(0) : self;
  TORCH_CHECK(t.size(0) == in.size(0), "size mismatch (got input: ", self.sizes(), ", target: ",
              target.sizes(), ")");
  return ClassGradient(grad, in, t, weight, reduction, ignore_index, total_weight)
      .view(self.sizes());
}
at::Tensor& NllLossBackwardOut(const at::Tensor& grad, const at::Tensor& self,
                               const at::Tensor& target, const std::optional<at::Tensor>& weight,
                               int64_t reduction, c10::SymInt ignore_index,
                               const at::Tensor& total_weight, at::Tensor& out) {
  return CopyIntoOut(NllLossBackward(grad, self, target, weight, reduction, std::move(ignore_index),
                                     total_weight),
                     out, "aten::nll_loss_backward");
}

// ---- nll_loss2d: nll_loss over the pixels, input [N, C, H, W] seen as [N*H*W, C] ----------
void CheckSpatial(const at::Tensor& self, const at::Tensor& target) {
  TORCH_CHECK(target.dim() == 3, "only batches of spatial targets supported (3D tensors) but got "
              "targets of dimension: ", target.dim());
  TORCH_CHECK(self.dim() == 4, "only batches of spatial inputs supported (4D tensors), but got "
              "input of dimension: ", self.dim());
  TORCH_CHECK(self.size(0) == target.size(0) && self.size(2) == target.size(1) &&
                  self.size(3) == target.size(2),
              "size mismatch (got input: ", self.sizes(), " , target: ", target.sizes(), ")");
}

std::tuple<at::Tensor, at::Tensor> NllLoss2dForward(const at::Tensor& self,
                                                    const at::Tensor& target,
                                                    const std::optional<at::Tensor>& weight,
                                                    int64_t reduction, c10::SymInt ignore_index) {
  CheckSpatial(self, target);
  auto [out, total_weight] = at::nll_loss_forward_symint(
      self.movedim(1, -1).reshape({-1, self.size(1)}), target.reshape({-1}), weight, reduction,
      std::move(ignore_index));
  if (reduction == at::Reduction::None) out = out.view(target.sizes());
  return {out, total_weight};
}
std::tuple<at::Tensor&, at::Tensor&> NllLoss2dForwardOut(
    const at::Tensor& self, const at::Tensor& target, const std::optional<at::Tensor>& weight,
    int64_t reduction, c10::SymInt ignore_index, at::Tensor& output, at::Tensor& total_weight) {
  auto [out, tw] = NllLoss2dForward(self, target, weight, reduction, std::move(ignore_index));
  CopyIntoOut(out, output, "aten::nll_loss2d_forward");
  CopyIntoOut(tw, total_weight, "aten::nll_loss2d_forward");
  return {output, total_weight};
}

at::Tensor NllLoss2dBackward(const at::Tensor& grad, const at::Tensor& self,
                             const at::Tensor& target, const std::optional<at::Tensor>& weight,
                             int64_t reduction, c10::SymInt ignore_index,
                             const at::Tensor& total_weight) {
  CheckSpatial(self, target);
  return ClassGradient(grad, self, target, weight, reduction, ignore_index, total_weight);
}
at::Tensor& NllLoss2dBackwardOut(const at::Tensor& grad, const at::Tensor& self,
                                 const at::Tensor& target, const std::optional<at::Tensor>& weight,
                                 int64_t reduction, c10::SymInt ignore_index,
                                 const at::Tensor& total_weight, at::Tensor& out) {
  return CopyIntoOut(NllLoss2dBackward(grad, self, target, weight, reduction,
                                       std::move(ignore_index), total_weight),
                     out, "aten::nll_loss2d_backward");
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, lib) {
  NativeKernels m(lib);  // Note [dtypes the kernels do not take]
  m.impl("mse_loss", TORCH_FN(MseLoss));
  m.impl("mse_loss.out", TORCH_FN(MseLossOut));
  m.impl("mse_loss_backward", TORCH_FN(MseLossBackward));
  m.impl("mse_loss_backward.grad_input", TORCH_FN(MseLossBackwardOut));
  m.impl("smooth_l1_loss", TORCH_FN(SmoothL1Loss));
  m.impl("smooth_l1_loss.out", TORCH_FN(SmoothL1LossOut));
  m.impl("smooth_l1_loss_backward", TORCH_FN(SmoothL1LossBackward));
  m.impl("smooth_l1_loss_backward.grad_input", TORCH_FN(SmoothL1LossBackwardOut));
  m.impl("huber_loss", TORCH_FN(HuberLoss));
  m.impl("huber_loss.out", TORCH_FN(HuberLossOut));
  m.impl("huber_loss_backward", TORCH_FN(HuberLossBackward));
  m.impl("huber_loss_backward.out", TORCH_FN(HuberLossBackwardOut));
  m.impl("binary_cross_entropy", TORCH_FN(BinaryCrossEntropy));
  m.impl("binary_cross_entropy.out", TORCH_FN(BinaryCrossEntropyOut));
  m.impl("binary_cross_entropy_backward", TORCH_FN(BinaryCrossEntropyBackward));
  m.impl("binary_cross_entropy_backward.grad_input", TORCH_FN(BinaryCrossEntropyBackwardOut));
  m.impl("nll_loss_backward", TORCH_FN(NllLossBackward));
  m.impl("nll_loss_backward.grad_input", TORCH_FN(NllLossBackwardOut));
  m.impl("nll_loss2d_forward", TORCH_FN(NllLoss2dForward));
  m.impl("nll_loss2d_forward.output", TORCH_FN(NllLoss2dForwardOut));
  m.impl("nll_loss2d_backward", TORCH_FN(NllLoss2dBackward));
  m.impl("nll_loss2d_backward.grad_input", TORCH_FN(NllLoss2dBackwardOut));
}

}  // namespace trn::bridge::ops
