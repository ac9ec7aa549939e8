// Training-only ops on trn, composed of native trn ops with CPU PyTorch's
// formulas (aten/src/ATen/native/cpu/Activation.cpp, SoftMax.cpp,
// layer_norm_kernel.cpp, batch_norm_kernel.cpp, group_norm_kernel.cpp,
// WeightNorm.cpp, Embedding.cpp, Dropout.cpp): the backwards of the
// activations, softmax, layer / batch / group norm, weight norm and embedding,
// and dropout. They took the CPU
// fallback: every backward copied its activations to the host. The
// convolution and pooling backwards sit in ops_conv.cc next to their forwards,
// log_sigmoid_backward in ops_elementwise.cc.
#include <ATen/OpMathType.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/bincount.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/erf.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/tanh.h>
#include <ATen/ops/where.h>
#include <c10/util/string_view.h>
#include <torch/library.h>

#include <cmath>
#include <numbers>
#include <tuple>
#include <vector>

#include "torch_bridge/fallback.h"
#include "torch_bridge/ops_util.h"

namespace trn::bridge::ops {
namespace {

// Each op below is Fn(args) plus FnOut(args, out) = CopyIntoOut(Fn(args)).
// CPU's backward kernels compute the 16-bit dtypes in float32 (opmath); so do
// the formulas here (float16's exp(12) or x * x of 300 would be inf), rounding
// once at the end. Pure selects (threshold, hardtanh) need no widening.
at::Tensor OpMath(const at::Tensor& t) { return t.to(at::toOpMathType(t.scalar_type())); }
at::Tensor Stored(const at::Tensor& r, const at::Tensor& grad, const at::Tensor& x) {
  return r.to(at::result_type(grad, x));
}

at::Tensor ThresholdBackward(const at::Tensor& grad, const at::Tensor& self,
                             const at::Scalar& threshold) {
  return grad.masked_fill(self <= threshold, 0);
}
at::Tensor& ThresholdBackwardOut(const at::Tensor& grad, const at::Tensor& self,
                                 const at::Scalar& threshold, at::Tensor& out) {
  return CopyIntoOut(ThresholdBackward(grad, self, threshold), out, "aten::threshold_backward");
}

at::Tensor TanhBackward(const at::Tensor& grad_, const at::Tensor& y_) {
  const at::Tensor grad = OpMath(grad_), y = OpMath(y_);
  return Stored(grad * (1 - y * y), grad_, y_);
}
at::Tensor& TanhBackwardOut(const at::Tensor& grad, const at::Tensor& y, at::Tensor& out) {
  return CopyIntoOut(TanhBackward(grad, y), out, "aten::tanh_backward");
}

at::Tensor SigmoidBackward(const at::Tensor& grad_, const at::Tensor& y_) {
  const at::Tensor grad = OpMath(grad_), y = OpMath(y_);
  return Stored(grad * (1 - y) * y, grad_, y_);
}
at::Tensor& SigmoidBackwardOut(const at::Tensor& grad, const at::Tensor& y, at::Tensor& out) {
  return CopyIntoOut(SigmoidBackward(grad, y), out, "aten::sigmoid_backward");
}

at::Tensor SiluBackward(const at::Tensor& grad_, const at::Tensor& x_) {
  const at::Tensor grad = OpMath(grad_), x = OpMath(x_);
  const at::Tensor s = at::sigmoid(x);
  return Stored(grad * s * (1 + x * (1 - s)), grad_, x_);
}
at::Tensor& SiluBackwardOut(const at::Tensor& grad, const at::Tensor& x, at::Tensor& out) {
  return CopyIntoOut(SiluBackward(grad, x), out, "aten::silu_backward");
}

// d/dx x Phi(x) = Phi(x) + x phi(x); the tanh form differentiates
// 0.5 x (1 + tanh(b (x + k x^3))).
at::Tensor GeluBackward(const at::Tensor& grad_, const at::Tensor& x_,
                        c10::string_view approximate) {
  const at::Tensor grad = OpMath(grad_), x = OpMath(x_);
  if (approximate == "tanh") {
    const double b = std::numbers::sqrt2 * 2 / std::sqrt(std::numbers::pi) * 0.5, k = 0.044715;
    const at::Tensor x2 = x * x;
    const at::Tensor t = at::tanh((x + x2 * x * k) * b);
    const at::Tensor left = (1 + t) * 0.5;
    const at::Tensor right = x * 0.5 * (1 - t * t) * ((x2 * (3 * k) + 1) * b);
    return Stored(grad * (left + right), grad_, x_);
  }
  TORCH_CHECK(approximate == "none", "approximate argument must be either none or tanh.");
  const at::Tensor cdf = (at::erf(x * std::numbers::sqrt2 * 0.5) + 1) * 0.5;
  const at::Tensor pdf = at::exp(x * x * -0.5) * (0.5 * std::numbers::inv_sqrtpi * std::numbers::sqrt2);
  return Stored(grad * (cdf + x * pdf), grad_, x_);
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
at::Tensor EluBackward(const at::Tensor& grad_, const at::Scalar& alpha, const at::Scalar& scale,
                       const at::Scalar& input_scale, bool is_result, const at::Tensor& v_) {
  const at::Tensor grad = OpMath(grad_), v = OpMath(v_);
  const double neg = alpha.toDouble() * scale.toDouble(), in = input_scale.toDouble();
  TORCH_CHECK(!is_result || alpha.toDouble() >= 0.0,
              "In-place elu backward calculation is triggered with a negative slope which is not "
              "supported. This is caused by calling in-place forward function with a negative "
              "slope, please call out-of-place version instead.");
  const at::Tensor inside = is_result ? grad * in * (v + neg) : grad * (in * neg) * at::exp(v * in);
  return Stored(at::where(v <= 0, inside, grad * scale), grad_, v_);
}
at::Tensor& EluBackwardOut(const at::Tensor& grad, const at::Scalar& alpha, const at::Scalar& scale,
                           const at::Scalar& input_scale, bool is_result, const at::Tensor& v,
                           at::Tensor& out) {
  return CopyIntoOut(EluBackward(grad, alpha, scale, input_scale, is_result, v), out,
                     "aten::elu_backward");
}

// x beta > threshold ? g : g z / (z + 1), z = exp(x beta).
at::Tensor SoftplusBackward(const at::Tensor& grad_, const at::Tensor& x_, const at::Scalar& beta,
                            const at::Scalar& threshold) {
  const at::Tensor grad = OpMath(grad_), x = OpMath(x_);
  const at::Tensor xb = x * beta;
  const at::Tensor z = at::exp(xb);
  return Stored(at::where(xb > threshold, grad, grad * z / (z + 1)), grad_, x_);
}
at::Tensor& SoftplusBackwardOut(const at::Tensor& grad, const at::Tensor& x,
                                const at::Scalar& beta, const at::Scalar& threshold,
                                at::Tensor& out) {
  return CopyIntoOut(SoftplusBackward(grad, x, beta, threshold), out, "aten::softplus_backward");
}

// torch 2.13's definition (CPU's kernel and its decomposition): x <= -3 gives 0,
// x < 3 grad (x / 3 + 1/2), else grad.
at::Tensor HardswishBackward(const at::Tensor& grad_, const at::Tensor& x_) {
  const at::Tensor grad = OpMath(grad_), x = OpMath(x_);
  return Stored(
      at::where(x < 3, grad * (x / 3 + 0.5), grad).masked_fill(x <= -3, 0),
      grad_, x_);
}
at::Tensor& HardswishBackwardOut(const at::Tensor& grad, const at::Tensor& x, at::Tensor& out) {
  return CopyIntoOut(HardswishBackward(grad, x), out, "aten::hardswish_backward");
}

at::Tensor HardsigmoidBackward(const at::Tensor& grad, const at::Tensor& x) {
  return (grad / 6).masked_fill((x > -3).logical_and(x < 3).logical_not(), 0);
}
at::Tensor& HardsigmoidBackwardOut(const at::Tensor& grad, const at::Tensor& x, at::Tensor& out) {
  return CopyIntoOut(HardsigmoidBackward(grad, x), out, "aten::hardsigmoid_backward");
}

at::Tensor HardtanhBackward(const at::Tensor& grad, const at::Tensor& x, const at::Scalar& lo,
                            const at::Scalar& hi) {
  return grad.masked_fill((x <= lo).logical_or(x >= hi), 0);
}
at::Tensor& HardtanhBackwardOut(const at::Tensor& grad, const at::Tensor& x, const at::Scalar& lo,
                                const at::Scalar& hi, at::Tensor& out) {
  return CopyIntoOut(HardtanhBackward(grad, x, lo, hi), out, "aten::hardtanh_backward");
}

// softmax: (g - sum(g y)) y; log_softmax: g - exp(y) sum(g); sums over dim.
at::Tensor SoftmaxBackward(const at::Tensor& grad_, const at::Tensor& y_, int64_t dim,
                           at::ScalarType input_dtype) {
  const at::Tensor grad = OpMath(grad_), y = OpMath(y_);
  return ((grad - (grad * y).sum(dim, /*keepdim=*/true)) * y).to(input_dtype);
}
at::Tensor& SoftmaxBackwardOut(const at::Tensor& grad, const at::Tensor& y, int64_t dim,
                               at::ScalarType input_dtype, at::Tensor& out) {
  return CopyIntoOut(SoftmaxBackward(grad, y, dim, input_dtype), out,
                     "aten::_softmax_backward_data");
}
at::Tensor LogSoftmaxBackward(const at::Tensor& grad_, const at::Tensor& y_, int64_t dim,
                              at::ScalarType input_dtype) {
  const at::Tensor grad = OpMath(grad_), y = OpMath(y_);
  return (grad - at::exp(y) * grad.sum(dim, /*keepdim=*/true)).to(input_dtype);
}
at::Tensor& LogSoftmaxBackwardOut(const at::Tensor& grad, const at::Tensor& y, int64_t dim,
                                  at::ScalarType input_dtype, at::Tensor& out) {
  return CopyIntoOut(LogSoftmaxBackward(grad, y, dim, input_dtype), out,
                     "aten::_log_softmax_backward_data");
}

// ---- layer_norm backward: x_hat = (x - mean) rstd, g = dy w over the normalized dims ----
// dx = rstd (g - mean(g) - x_hat mean(g x_hat)), dw = sum(dy x_hat), db = sum(dy)
// over the batch dims; 16-bit inputs compute in float32 as CPU's kernel.
std::tuple<at::Tensor, at::Tensor, at::Tensor> LayerNormBackward(
    const at::Tensor& grad_out, const at::Tensor& input, c10::SymIntArrayRef normalized_shape,
    const at::Tensor& mean, const at::Tensor& rstd, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, std::array<bool, 3> output_mask) {
  const int64_t norm_dims = static_cast<int64_t>(normalized_shape.size());
  const int64_t batch_dims = input.dim() - norm_dims;
  std::vector<int64_t> inner, outer;
  for (int64_t d = batch_dims; d < input.dim(); ++d) inner.push_back(d);
  for (int64_t d = 0; d < batch_dims; ++d) outer.push_back(d);
  const at::Tensor x = OpMath(input), dy = OpMath(grad_out), r = OpMath(rstd);
  const at::Tensor x_hat = (x - OpMath(mean)) * r;
  const bool has_w = weight.has_value() && weight->defined();
  at::Tensor dx, dw, db;
  if (output_mask[0]) {
    const at::Tensor g = has_w ? dy * OpMath(*weight) : dy;
    dx = ((g - g.mean(inner, true) - x_hat * (g * x_hat).mean(inner, true)) * r)
             .to(input.scalar_type());
  }
  // No batch dims: nothing to sum (an empty dim list would reduce everything).
  auto over_batch = [&](const at::Tensor& t) { return outer.empty() ? t : t.sum(outer); };
  if (output_mask[1] && has_w) dw = over_batch(dy * x_hat).to(weight->scalar_type());
  if (output_mask[2] && bias.has_value() && bias->defined()) {
    db = over_batch(dy).to(bias->scalar_type());
  }
  return {dx, dw, db};
}

// ---- batch norm and group norm backwards: x_hat = (x - mean) * invstd ---------------------
// d x = w * invstd * (dy - mean(dy) - x_hat * mean(dy * x_hat)) over the
// normalized set (a channel's elements over the batch; a group of one
// sample); an inference batch norm (running statistics) is affine: dy * w *
// invstd. d weight = sum(dy * x_hat), d bias = sum(dy) per channel.
std::tuple<at::Tensor, at::Tensor, at::Tensor> BatchNormBackward(
    const at::Tensor& grad_out, const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    const std::optional<at::Tensor>& save_mean, const std::optional<at::Tensor>& save_invstd,
    bool train, double eps, std::array<bool, 3> output_mask) {
  constexpr const char* kName = "aten::native_batch_norm_backward";
  TORCH_CHECK(input.dim() >= 2, kName, ": expected an input of at least 2 dims, got ",
              input.sizes());
  auto given = [](const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); };
  const std::optional<at::Tensor>& mean_t = train ? save_mean : running_mean;
  const std::optional<at::Tensor>& stat_t = train ? save_invstd : running_var;
  TORCH_CHECK(given(mean_t) && given(stat_t), kName, ": expected ",
              train ? "save_mean and save_invstd when training"
                    : "running_mean and running_var in evaluation mode");
  const int64_t c = input.size(1);
  std::vector<int64_t> reduce, shape(static_cast<size_t>(input.dim()), 1);
  for (int64_t d = 0; d < input.dim(); ++d) {
    if (d != 1) reduce.push_back(d);
  }
  shape[1] = c;
  const at::Tensor dy = OpMath(grad_out);
  const at::Tensor invstd =
      (train ? OpMath(*stat_t) : (OpMath(*stat_t) + eps).rsqrt()).view(shape);
  const bool has_w = given(weight);
  // x_hat and the sums only where asked: a frozen batch norm's grad_input is dy * scale.
  at::Tensor x_hat, sum_dy, sum_dy_xhat;
  if (train || output_mask[1]) {
    x_hat = (OpMath(input) - OpMath(*mean_t).view(shape)) * invstd;
    sum_dy_xhat = (dy * x_hat).sum(reduce);
  }
  if (train || output_mask[2]) sum_dy = dy.sum(reduce);
  at::Tensor dx, dw, db;
  if (output_mask[0]) {
    const at::Tensor scale = has_w ? invstd * OpMath(*weight).view(shape) : invstd;
    if (train) {
      const double m = static_cast<double>(input.numel() / std::max<int64_t>(c, 1));
      dx = (dy - (sum_dy / m).view(shape) - x_hat * (sum_dy_xhat / m).view(shape)) * scale;
    } else {
      dx = dy * scale;
    }
    dx = dx.to(input.scalar_type());
  }
  const at::ScalarType param = has_w ? weight->scalar_type() : input.scalar_type();
  if (output_mask[1]) dw = sum_dy_xhat.to(param);
  if (output_mask[2]) db = sum_dy.to(param);
  return {dx, dw, db};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> GroupNormBackward(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean,
    const at::Tensor& rstd, const std::optional<at::Tensor>& weight, c10::SymInt n_,
    c10::SymInt c_, c10::SymInt hxw_, int64_t group, std::array<bool, 3> output_mask) {
  constexpr const char* kName = "aten::native_group_norm_backward";
  const int64_t n = n_.guard_int(__FILE__, __LINE__), c = c_.guard_int(__FILE__, __LINE__);
  const int64_t hxw = hxw_.guard_int(__FILE__, __LINE__);
  TORCH_CHECK(group > 0 && c % group == 0, kName, ": expected groups (", group,
              ") to divide the channels (", c, ")");
  TORCH_CHECK(input.numel() == n * c * hxw && grad_out.sizes() == input.sizes(), kName,
              ": expected input and grad_out of N * C * HxW = ", n, " * ", c, " * ", hxw,
              " elements, got ", input.sizes(), " and ", grad_out.sizes());
  TORCH_CHECK(mean.numel() == n * group && rstd.numel() == n * group, kName,
              ": expected mean and rstd of N * group = ", n * group, " elements, got ",
              mean.sizes(), " and ", rstd.sizes());
  const std::vector<int64_t> grouped = {n, group, c / group, hxw};
  const at::Tensor x = OpMath(input).reshape(grouped), dy = OpMath(grad_out).reshape(grouped);
  const at::Tensor r = OpMath(rstd).reshape({n, group, 1, 1});
  const at::Tensor x_hat = (x - OpMath(mean).reshape({n, group, 1, 1})) * r;
  const bool has_w = weight.has_value() && weight->defined();
  at::Tensor dx, dw, db;
  if (output_mask[0]) {
    const at::Tensor g = has_w ? dy * OpMath(*weight).reshape({1, group, c / group, 1}) : dy;
    dx = ((g - g.mean({2, 3}, true) - x_hat * (g * x_hat).mean({2, 3}, true)) * r)
             .reshape(input.sizes())
             .to(input.scalar_type());
  }
  const at::ScalarType param = has_w ? weight->scalar_type() : input.scalar_type();
  if (output_mask[1]) dw = (dy * x_hat).sum({0, 3}).reshape({c}).to(param);
  if (output_mask[2]) db = dy.sum({0, 3}).reshape({c}).to(param);
  return {dx, dw, db};
}

// ---- _weight_norm_interface backward (nn.utils weight_norm: wav2vec2's positional conv) ----
// With s = sum(grad_w * v) over every dim but `dim`: grad_g = s / norm and
// grad_v = g / norm * (grad_w - v * s / norm^2), as CPU's WeightNormKernel.
std::tuple<at::Tensor, at::Tensor> WeightNormInterfaceBackward(const at::Tensor& grad_w,
                                                               const at::Tensor& v,
                                                               const at::Tensor& g,
                                                               const at::Tensor& norms,
                                                               int64_t dim) {
  constexpr const char* kName = "aten::_weight_norm_interface_backward";
  TORCH_CHECK(v.dim() > 0 && (dim == 0 || dim == v.dim() - 1), kName,
              ": expected dim 0 or ", v.dim() - 1, " (the first or last of v), got ", dim);
  TORCH_CHECK(grad_w.sizes() == v.sizes() && g.numel() == v.size(dim) &&
                  norms.numel() == v.size(dim),
              kName, ": expected grad_w of v's shape ", v.sizes(), " and g, norms of ",
              v.size(dim), " elements, got ", grad_w.sizes(), ", ", g.sizes(), ", ",
              norms.sizes());
  std::vector<int64_t> others, along(static_cast<size_t>(v.dim()), 1);
  for (int64_t d = 0; d < v.dim(); ++d) {
    if (d != dim) others.push_back(d);
  }
  along[dim] = v.size(dim);
  const at::Tensor gw = OpMath(grad_w), x = OpMath(v);
  const at::Tensor n = OpMath(norms).reshape(along), gg = OpMath(g).reshape(along);
  const at::Tensor sum = others.empty() ? gw * x : (gw * x).sum(others, true);
  const at::Tensor grad_g = sum / n;
  const at::Tensor grad_v = gg / n * (gw - x * (sum / (n * n)));
  return {grad_v.to(v.scalar_type()), grad_g.reshape(g.sizes()).to(g.scalar_type())};
}

// ---- embedding backward: the rows of grad summed into their indices' rows ---------------
// padding_idx's row gets nothing; scale_grad_by_freq divides each row by
// its index's count in the batch.
at::Tensor EmbeddingDenseBackward(const at::Tensor& grad, const at::Tensor& indices,
                                  c10::SymInt num_weights, c10::SymInt padding_idx,
                                  bool scale_grad_by_freq) {
  const int64_t rows = num_weights.guard_int(__FILE__, __LINE__);
  const int64_t pad = padding_idx.guard_int(__FILE__, __LINE__);
  const int64_t dim = grad.size(-1);
  const at::Tensor idx = indices.reshape({-1});
  at::Tensor dw = at::zeros({rows, dim}, grad.options());
  dw.index_add_(0, idx, grad.reshape({idx.numel(), dim}));
  if (scale_grad_by_freq) {
    const at::Tensor counts = at::bincount(idx, {}, rows).clamp_min(1).unsqueeze(1);
    dw = dw / counts.to(grad.scalar_type());
  }
  if (pad >= 0 && pad < rows) dw.select(0, pad).zero_();
  return dw;
}

// ---- dropout: a bool mask of keep-probability 1 - p (the trn generator), x mask / (1 - p) --
std::tuple<at::Tensor, at::Tensor> NativeDropout(const at::Tensor& input, double p,
                                                 std::optional<bool> train) {
  TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  if (train.has_value() && !*train) {
    return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  }
  at::Tensor mask = at::empty_like(input, input.options().dtype(at::kBool));
  mask.bernoulli_(1 - p);
  const double scale = p == 1 ? 0.0 : 1.0 / (1 - p);
  return {input * mask * scale, mask};
}
at::Tensor NativeDropoutBackward(const at::Tensor& grad, const at::Tensor& mask, double scale) {
  return grad * mask * scale;
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
  m.impl("native_layer_norm_backward", TORCH_FN(LayerNormBackward));
  m.impl("native_batch_norm_backward", TORCH_FN(BatchNormBackward));
  m.impl("native_group_norm_backward", TORCH_FN(GroupNormBackward));
  m.impl("_weight_norm_interface_backward", TORCH_FN(WeightNormInterfaceBackward));
  m.impl("embedding_dense_backward", TORCH_FN(EmbeddingDenseBackward));
  m.impl("native_dropout", TORCH_FN(NativeDropout));
  m.impl("native_dropout_backward", TORCH_FN(NativeDropoutBackward));
}

}  // namespace trn::bridge::ops
