// Backward ops of the activations and softmax (a training step's autograd
// calls them), composed of native trn ops with CPU PyTorch's formulas
// (aten/src/ATen/native/cpu/Activation.cpp, SoftMax.cpp). They took the CPU
// fallback: every backward of an MLP copied its activations to the host.
// Normalization, convolution, pooling and embedding backwards still do;
// log_sigmoid_backward sits in ops_elementwise.cc next to its forward.
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/erf.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/tanh.h>
#include <ATen/ops/where.h>
#include <c10/util/string_view.h>
#include <torch/library.h>

#include <cmath>
#include <numbers>

#include "torch_bridge/fallback.h"
#include "torch_bridge/ops_util.h"

namespace trn::bridge::ops {
namespace {

// Each op below is Fn(args) plus FnOut(args, out) = CopyIntoOut(Fn(args)).
at::Tensor ThresholdBackward(const at::Tensor& grad, const at::Tensor& self,
                             const at::Scalar& threshold) {
  return at::where(self <= threshold, at::zeros_like(grad), grad);
}
at::Tensor& ThresholdBackwardOut(const at::Tensor& grad, const at::Tensor& self,
                                 const at::Scalar& threshold, at::Tensor& out) {
  return CopyIntoOut(ThresholdBackward(grad, self, threshold), out, "aten::threshold_backward");
}

at::Tensor TanhBackward(const at::Tensor& grad, const at::Tensor& y) { return grad * (1 - y * y); }
at::Tensor& TanhBackwardOut(const at::Tensor& grad, const at::Tensor& y, at::Tensor& out) {
  return CopyIntoOut(TanhBackward(grad, y), out, "aten::tanh_backward");
}

at::Tensor SigmoidBackward(const at::Tensor& grad, const at::Tensor& y) {
  return grad * (1 - y) * y;
}
at::Tensor& SigmoidBackwardOut(const at::Tensor& grad, const at::Tensor& y, at::Tensor& out) {
  return CopyIntoOut(SigmoidBackward(grad, y), out, "aten::sigmoid_backward");
}

at::Tensor SiluBackward(const at::Tensor& grad, const at::Tensor& x) {
  const at::Tensor s = at::sigmoid(x);
  return grad * s * (1 + x * (1 - s));
}
at::Tensor& SiluBackwardOut(const at::Tensor& grad, const at::Tensor& x, at::Tensor& out) {
  return CopyIntoOut(SiluBackward(grad, x), out, "aten::silu_backward");
}

// d/dx x Phi(x) = Phi(x) + x phi(x); the tanh form differentiates
// 0.5 x (1 + tanh(b (x + k x^3))).
at::Tensor GeluBackward(const at::Tensor& grad, const at::Tensor& x, c10::string_view approximate) {
  if (approximate == "tanh") {
    const double b = std::numbers::sqrt2 * 2 / std::sqrt(std::numbers::pi) * 0.5, k = 0.044715;
    const at::Tensor x2 = x * x;
    const at::Tensor t = at::tanh((x + x2 * x * k) * b);
    const at::Tensor left = (1 + t) * 0.5;
    const at::Tensor right = x * 0.5 * (1 - t * t) * ((x2 * (3 * k) + 1) * b);
    return grad * (left + right);
  }
  TORCH_CHECK(approximate == "none", "approximate argument must be either none or tanh.");
  const at::Tensor cdf = (at::erf(x * std::numbers::sqrt2 * 0.5) + 1) * 0.5;
  const at::Tensor pdf = at::exp(x * x * -0.5) * (0.5 * std::numbers::inv_sqrtpi * std::numbers::sqrt2);
  return grad * (cdf + x * pdf);
}
at::Tensor& GeluBackwardOut(const at::Tensor& grad, const at::Tensor& x,
                            c10::string_view approximate, at::Tensor& out) {
  return CopyIntoOut(GeluBackward(grad, x, approximate), out, "aten::gelu_backward");
}

at::Tensor LeakyReluBackward(const at::Tensor& grad, const at::Tensor& self,
                             const at::Scalar& slope, bool self_is_result) {
  TORCH_CHECK(!self_is_result || slope.toDouble() >= 0.0,
              "In-place leakyReLu backward calculation is triggered with a negative slope which "
              "is not supported. This is caused by calling in-place forward function with a "
              "negative slope, please call out-of-place version instead.");
  return at::where(self > 0, grad, grad * slope);
}
at::Tensor& LeakyReluBackwardOut(const at::Tensor& grad, const at::Tensor& self,
                                 const at::Scalar& slope, bool self_is_result, at::Tensor& out) {
  return CopyIntoOut(LeakyReluBackward(grad, self, slope, self_is_result), out,
                     "aten::leaky_relu_backward");
}

// From the result y: y <= 0 ? g * input_scale * (y + alpha * scale); from x:
// y <= 0 ? g * input_scale * alpha * scale * exp(x * input_scale); else g * scale.
at::Tensor EluBackward(const at::Tensor& grad, const at::Scalar& alpha, const at::Scalar& scale,
                       const at::Scalar& input_scale, bool is_result, const at::Tensor& v) {
  const double neg = alpha.toDouble() * scale.toDouble(), in = input_scale.toDouble();
  TORCH_CHECK(!is_result || alpha.toDouble() >= 0.0,
              "In-place elu backward calculation is triggered with a negative slope which is not "
              "supported. This is caused by calling in-place forward function with a negative "
              "slope, please call out-of-place version instead.");
  const at::Tensor inside = is_result ? grad * in * (v + neg) : grad * (in * neg) * at::exp(v * in);
  return at::where(v <= 0, inside, grad * scale);
}
at::Tensor& EluBackwardOut(const at::Tensor& grad, const at::Scalar& alpha, const at::Scalar& scale,
                           const at::Scalar& input_scale, bool is_result, const at::Tensor& v,
                           at::Tensor& out) {
  return CopyIntoOut(EluBackward(grad, alpha, scale, input_scale, is_result, v), out,
                     "aten::elu_backward");
}

// x beta > threshold ? g : g z / (z + 1), z = exp(x beta).
at::Tensor SoftplusBackward(const at::Tensor& grad, const at::Tensor& x, const at::Scalar& beta,
                            const at::Scalar& threshold) {
  const at::Tensor xb = x * beta;
  const at::Tensor z = at::exp(xb);
  return at::where(xb > threshold, grad, grad * z / (z + 1));
}
at::Tensor& SoftplusBackwardOut(const at::Tensor& grad, const at::Tensor& x,
                                const at::Scalar& beta, const at::Scalar& threshold,
                                at::Tensor& out) {
  return CopyIntoOut(SoftplusBackward(grad, x, beta, threshold), out, "aten::softplus_backward");
}

at::Tensor HardswishBackward(const at::Tensor& grad, const at::Tensor& x) {
  // CPU's vectorized kernel: the ends of [-3, 3] take the outer slopes.
  return at::where(x <= -3, at::zeros_like(grad), at::where(x < 3, grad * (x / 3 + 0.5), grad));
}
at::Tensor& HardswishBackwardOut(const at::Tensor& grad, const at::Tensor& x, at::Tensor& out) {
  return CopyIntoOut(HardswishBackward(grad, x), out, "aten::hardswish_backward");
}

at::Tensor HardsigmoidBackward(const at::Tensor& grad, const at::Tensor& x) {
  return at::where((x > -3).logical_and(x < 3), grad / 6, at::zeros_like(grad));
}
at::Tensor& HardsigmoidBackwardOut(const at::Tensor& grad, const at::Tensor& x, at::Tensor& out) {
  return CopyIntoOut(HardsigmoidBackward(grad, x), out, "aten::hardsigmoid_backward");
}

at::Tensor HardtanhBackward(const at::Tensor& grad, const at::Tensor& x, const at::Scalar& lo,
                            const at::Scalar& hi) {
  return at::where((x <= lo).logical_or(x >= hi), at::zeros_like(grad), grad);
}
at::Tensor& HardtanhBackwardOut(const at::Tensor& grad, const at::Tensor& x, const at::Scalar& lo,
                                const at::Scalar& hi, at::Tensor& out) {
  return CopyIntoOut(HardtanhBackward(grad, x, lo, hi), out, "aten::hardtanh_backward");
}

// softmax: (g - sum(g y)) y; log_softmax: g - exp(y) sum(g); sums over dim.
at::Tensor SoftmaxBackward(const at::Tensor& grad, const at::Tensor& y, int64_t dim,
                           at::ScalarType input_dtype) {
  return ((grad - (grad * y).sum(dim, /*keepdim=*/true)) * y).to(input_dtype);
}
at::Tensor& SoftmaxBackwardOut(const at::Tensor& grad, const at::Tensor& y, int64_t dim,
                               at::ScalarType input_dtype, at::Tensor& out) {
  return CopyIntoOut(SoftmaxBackward(grad, y, dim, input_dtype), out,
                     "aten::_softmax_backward_data");
}
at::Tensor LogSoftmaxBackward(const at::Tensor& grad, const at::Tensor& y, int64_t dim,
                              at::ScalarType input_dtype) {
  return (grad - at::exp(y) * grad.sum(dim, /*keepdim=*/true)).to(input_dtype);
}
at::Tensor& LogSoftmaxBackwardOut(const at::Tensor& grad, const at::Tensor& y, int64_t dim,
                                  at::ScalarType input_dtype, at::Tensor& out) {
  return CopyIntoOut(LogSoftmaxBackward(grad, y, dim, input_dtype), out,
                     "aten::_log_softmax_backward_data");
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, lib) {
  NativeKernels m(lib);  // Note [dtypes the kernels do not take]
  m.impl("threshold_backward", TORCH_FN(ThresholdBackward));
  m.impl("threshold_backward.grad_input", TORCH_FN(ThresholdBackwardOut));
  m.impl("tanh_backward", TORCH_FN(TanhBackward));
  m.impl("tanh_backward.grad_input", TORCH_FN(TanhBackwardOut));
  m.impl("sigmoid_backward", TORCH_FN(SigmoidBackward));
  m.impl("sigmoid_backward.grad_input", TORCH_FN(SigmoidBackwardOut));
  m.impl("silu_backward", TORCH_FN(SiluBackward));
  m.impl("silu_backward.grad_input", TORCH_FN(SiluBackwardOut));
  m.impl("gelu_backward", TORCH_FN(GeluBackward));
  m.impl("gelu_backward.grad_input", TORCH_FN(GeluBackwardOut));
  m.impl("leaky_relu_backward", TORCH_FN(LeakyReluBackward));
  m.impl("leaky_relu_backward.grad_input", TORCH_FN(LeakyReluBackwardOut));
  m.impl("elu_backward", TORCH_FN(EluBackward));
  m.impl("elu_backward.grad_input", TORCH_FN(EluBackwardOut));
  m.impl("softplus_backward", TORCH_FN(SoftplusBackward));
  m.impl("softplus_backward.grad_input", TORCH_FN(SoftplusBackwardOut));
  m.impl("hardswish_backward", TORCH_FN(HardswishBackward));
  m.impl("hardswish_backward.out", TORCH_FN(HardswishBackwardOut));
  m.impl("hardsigmoid_backward", TORCH_FN(HardsigmoidBackward));
  m.impl("hardsigmoid_backward.grad_input", TORCH_FN(HardsigmoidBackwardOut));
  m.impl("hardtanh_backward", TORCH_FN(HardtanhBackward));
  m.impl("hardtanh_backward.grad_input", TORCH_FN(HardtanhBackwardOut));
  m.impl("_softmax_backward_data", TORCH_FN(SoftmaxBackward));
  m.impl("_softmax_backward_data.out", TORCH_FN(SoftmaxBackwardOut));
  m.impl("_log_softmax_backward_data", TORCH_FN(LogSoftmaxBackward));
  m.impl("_log_softmax_backward_data.out", TORCH_FN(LogSoftmaxBackwardOut));
}

}  // namespace trn::bridge::ops
