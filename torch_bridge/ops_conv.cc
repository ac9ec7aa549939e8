// Convolution and the vision ops around it (padding, pooling, upsampling):
// the aten kernels over core/kernels/conv.h, vision.h and kernels.h.
//
// Note [convolution routing]: in torch 2.13 F.conv1d/conv2d, nn.Conv1d/2d and
// aten::convolution all reach aten::_convolution (CompositeExplicitAutograd),
// which checks the shapes (torch's own errors for wrong channels or groups)
// and sends any device that is not CPU/CUDA/MPS/... to
// aten::convolution_overrideable. Registering that op makes every 1-D/2-D
// convolution one conv2d_* launch while autograd still records
// ConvolutionBackward0 on aten::convolution. Transposed 1-D / 2-D ones are one
// conv_transpose2d_* launch, 3-D ones one conv3d_* launch; transposed 3-D
// convolutions go to the CPU fallback (Note [overrideable ops on the CPU] in
// fallback.cc).
//
// batch_norm: F.batch_norm reaches aten::native_batch_norm in eager mode and
// aten::_native_batch_norm_legit_no_training in AOTAutograd inference graphs;
// both run the inference kernel with running statistics. Training mode (batch
// statistics, running ones updated when given) is one native launch too.
#include <ATen/core/Tensor.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Pool.h>
#include <ATen/native/UpSample.h>
#include <ATen/native/im2col_shape_check.h>
#include <ATen/ops/_native_batch_norm_legit_ops.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/convolution_backward_overrideable_ops.h>
#include <ATen/ops/convolution_overrideable_ops.h>
#include <ATen/ops/grid_sampler_2d_ops.h>
#include <ATen/ops/native_batch_norm_ops.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <tuple>
#include <vector>

#include "core/kernels/conv.h"
#include "core/kernels/convert.h"
#include "core/kernels/kernels.h"
#include "core/kernels/vision.h"
#include "torch_bridge/fallback.h"
#include "torch_bridge/ops_complex.h"
#include "torch_bridge/ops_util.h"

namespace trn::bridge::ops {
namespace {

// TensorRef of t with a size-1 dim inserted at `dim` (1-D ops as 2-D, an
// unbatched input as a batch of one).
TensorRef Unsqueezed(TensorRef r, int dim) {
  for (int d = r.ndim; d > dim; --d) {
    r.sizes[d] = r.sizes[d - 1];
    r.strides[d] = r.strides[d - 1];
  }
  r.sizes[dim] = 1;
  r.strides[dim] = dim < r.ndim ? r.sizes[dim + 1] * r.strides[dim + 1] : 1;
  ++r.ndim;
  return r;
}

// New trn tensor laid out like `like` would be by torch: channels_last (4-D) or
// channels_last_3d (5-D) when like suggests it, contiguous otherwise.
at::Tensor EmptyLikeInput(at::IntArrayRef sizes, const at::Tensor& like, int device) {
  const at::MemoryFormat f = like.suggest_memory_format();
  if (sizes.size() == 4 && f == at::MemoryFormat::ChannelsLast) {
    return Empty({sizes[0], sizes[2], sizes[3], sizes[1]}, like.scalar_type(), device)
        .permute({0, 3, 1, 2});
  }
  if (sizes.size() == 5 && f == at::MemoryFormat::ChannelsLast3d) {
    return Empty({sizes[0], sizes[2], sizes[3], sizes[4], sizes[1]}, like.scalar_type(), device)
        .permute({0, 4, 1, 2, 3});
  }
  return Empty(sizes, like.scalar_type(), device);
}

void CheckFloating(const at::Tensor& t, const char* name) {
  ComputeDType(t.scalar_type(), name);
  TORCH_CHECK(at::isFloatingType(t.scalar_type()), name,
              ": expected a floating dtype, got ", t.scalar_type());
}

// Debug switch for tests: TRN_NATIVE_CONV=0 sends every convolution to the CPU fallback.
bool NativeConvDisabled() {
  const char* v = std::getenv("TRN_NATIVE_CONV");
  return v != nullptr && std::strcmp(v, "0") == 0;
}

// ---- convolution ----------------------------------------------------------------------
// The kernel's 4-D views of a convolution's operands: a 1-D one with H = 1.
std::array<TensorRef, 4> ConvRefs(const at::Tensor& input, const at::Tensor& weight,
                                  const at::Tensor& bias, const at::Tensor& out, const char* name) {
  TensorRef ri = Ref(input, name), rw = Ref(weight, name), ro = Ref(out, name);
  if (input.dim() == 3) {
    ri = Unsqueezed(ri, 2);
    rw = Unsqueezed(rw, 2);
    ro = Unsqueezed(ro, 2);
  }
  return {ri, rw, ro, bias.defined() ? Ref(bias, name) : NoRef()};
}

// Transposed 1-D / 2-D convolutions (UNet and GAN decoders, SAM's mask
// upscaler): aten::_convolution has checked the shapes; one kernel launch.
at::Tensor ConvTranspose(const at::Tensor& input, const at::Tensor& weight,
                         const std::optional<at::Tensor>& bias_opt, c10::SymIntArrayRef stride,
                         c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation,
                         c10::SymIntArrayRef output_padding, const c10::SymInt& groups) {
  constexpr const char* kName = "aten::convolution";  // transposed
  const int64_t dims = input.dim() - 2;
  const at::Tensor bias = bias_opt.has_value() ? *bias_opt : at::Tensor();
  const int device = CommonDevice(kName, {&input, &weight, &bias});
  CheckFloating(input, kName);
  TORCH_CHECK(weight.scalar_type() == input.scalar_type() &&
                  (!bias.defined() || bias.scalar_type() == input.scalar_type()),
              kName, ": input, weight and bias must have one dtype, got ", input.scalar_type(),
              ", ", weight.scalar_type(), bias.defined() ? ", " : "",
              bias.defined() ? c10::toString(bias.scalar_type()) : "");
  kernels::ConvParams p;
  p.groups = groups.guard_int(__FILE__, __LINE__);
  auto at_d = [](c10::SymIntArrayRef v, int64_t d) {
    return v[v.size() == 1 ? 0 : d].guard_int(__FILE__, __LINE__);
  };
  std::vector<int64_t> out_sizes = {input.size(0), weight.size(1) * p.groups};
  for (int64_t d = 0; d < dims; ++d) {
    const int k = static_cast<int>(d + 2 - dims);  // 1-D fills the W slot
    p.stride[k] = at_d(stride, d);
    p.pad_begin[k] = p.pad_end[k] = at_d(padding, d);
    p.dilation[k] = at_d(dilation, d);
    const int64_t o = (input.size(d + 2) - 1) * p.stride[k] - 2 * p.pad_begin[k] +
                      p.dilation[k] * (weight.size(d + 2) - 1) + at_d(output_padding, d) + 1;
    TORCH_CHECK(o > 0, kName, ": transposed convolution of ", input.sizes(), " by ",
                weight.sizes(), " gives an empty output (size ", o, ")");
    out_sizes.push_back(o);
  }
  at::Tensor out = EmptyLikeInput(out_sizes, input, device);
  if (out.numel() == 0) return out;
  const auto [ri, rw, ro, rb] = ConvRefs(input, weight, bias, out, kName);
  Launch(device, kernels::DescribeConvTranspose2d(ro, ri, rw, rb, kName),
         [=] { return kernels::ConvTranspose2d(ro, ri, rw, rb, p); });
  return out;
}

// 3-D convolutions (VideoMAE's and ViViT's patch embeddings, 3-D CNNs): one
// conv3d_* launch (Note [conv3d] in conv.cc). Dtypes, the weight's rank and the
// groups are checked by the caller.
at::Tensor Conv3d(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                  c10::SymIntArrayRef stride, c10::SymIntArrayRef padding,
                  c10::SymIntArrayRef dilation, int64_t groups, int device) {
  constexpr const char* kName = "aten::convolution";
  kernels::Conv3dParams p;
  p.groups = groups;
  std::vector<int64_t> out_sizes = {input.size(0), weight.size(0)};
  for (int d = 0; d < 3; ++d) {
    const auto at_d = [d](c10::SymIntArrayRef v) {
      return v[v.size() == 1 ? 0 : d].guard_int(__FILE__, __LINE__);
    };
    p.stride[d] = at_d(stride);
    p.pad[d] = at_d(padding);
    p.dilation[d] = at_d(dilation);
    const int64_t o = kernels::ConvOutputSize(input.size(d + 2), weight.size(d + 2), p.stride[d],
                                              p.pad[d], p.pad[d], p.dilation[d]);
    TORCH_CHECK(o > 0, kName, ": kernel size ", weight.sizes(), " (dilated) is larger than the ",
                "padded input ", input.sizes());
    out_sizes.push_back(o);
  }
  at::Tensor out = EmptyLikeInput(out_sizes, input, device);
  if (out.numel() == 0) return out;
  const TensorRef ri = Ref(input, kName), rw = Ref(weight, kName), ro = Ref(out, kName);
  const TensorRef rb = bias.defined() ? Ref(bias, kName) : NoRef();
  Launch(device, kernels::DescribeConv3d(ro, ri, rw, rb, kName),
         [=] { return kernels::Conv3d(ro, ri, rw, rb, p); });
  return out;
}

at::Tensor ConvolutionOverrideable(const at::Tensor& input, const at::Tensor& weight,
                                   const std::optional<at::Tensor>& bias_opt,
                                   c10::SymIntArrayRef stride, c10::SymIntArrayRef padding,
                                   c10::SymIntArrayRef dilation, bool transposed,
                                   c10::SymIntArrayRef output_padding, c10::SymInt groups) {
  constexpr const char* kName = "aten::convolution";
  const int64_t dims = input.dim() - 2;
  if (transposed && (dims == 1 || dims == 2) && !NativeConvDisabled()) {
    return ConvTranspose(input, weight, bias_opt, stride, padding, dilation, output_padding, groups);
  }
  if (transposed || dims < 1 || dims > 3 || NativeConvDisabled()) {
    return at::native::call_fallback_fn_symint<&CpuFallback,
                                               at::_ops::convolution_overrideable>::
        call(input, weight, bias_opt, stride, padding, dilation, transposed, output_padding,
             groups);
  }
  const at::Tensor bias = bias_opt.has_value() ? *bias_opt : at::Tensor();
  const int device = CommonDevice(kName, {&input, &weight, &bias});
  CheckFloating(input, kName);
  TORCH_CHECK(weight.scalar_type() == input.scalar_type(), kName, ": input type (",
              input.scalar_type(), ") and weight type (", weight.scalar_type(),
              ") should be the same");
  TORCH_CHECK(!bias.defined() || bias.scalar_type() == input.scalar_type(), kName,
              ": input type (", input.scalar_type(), ") and bias type (", bias.scalar_type(),
              ") should be the same");
  TORCH_CHECK(weight.dim() == input.dim(), kName, ": expected a ", input.dim(),
              "-D weight for a ", input.dim(), "-D input, got ", weight.sizes());
  const int64_t g = groups.guard_int(__FILE__, __LINE__);
  TORCH_CHECK(g > 0 && input.size(1) % g == 0 && weight.size(0) % g == 0,
              kName, ": groups=", g, " must divide the input channels (", input.size(1),
              ") and the output channels (", weight.size(0), ")");
  TORCH_CHECK(weight.size(1) * g == input.size(1), kName, ": given groups=", g,
              ", weight of size ", weight.sizes(), ", expected input", input.sizes(), " to have ",
              weight.size(1) * g, " channels, but got ", input.size(1), " channels");
  if (dims == 3) return Conv3d(input, weight, bias, stride, padding, dilation, g, device);
  kernels::ConvParams p;
  p.groups = g;
  for (int64_t d = 0; d < dims; ++d) {
    const int k = static_cast<int>(d + 2 - dims);  // 1-D fills the W slot
    p.stride[k] = stride[stride.size() == 1 ? 0 : d].guard_int(__FILE__, __LINE__);
    p.pad_begin[k] = p.pad_end[k] = padding[padding.size() == 1 ? 0 : d].guard_int(__FILE__, __LINE__);
    p.dilation[k] = dilation[dilation.size() == 1 ? 0 : d].guard_int(__FILE__, __LINE__);
  }
  std::vector<int64_t> out_sizes = {input.size(0), weight.size(0)};
  for (int64_t d = 0; d < dims; ++d) {
    const int k = static_cast<int>(d + 2 - dims);
    const int64_t o = kernels::ConvOutputSize(input.size(d + 2), weight.size(d + 2), p.stride[k],
                                              p.pad_begin[k], p.pad_end[k], p.dilation[k]);
    TORCH_CHECK(o > 0, kName, ": kernel size ", weight.sizes(), " (dilated) is larger than the ",
                "padded input ", input.sizes());
    out_sizes.push_back(o);
  }
  at::Tensor out = EmptyLikeInput(out_sizes, input, device);
  if (out.numel() == 0) return out;
  const auto [ri, rw, ro, rb] = ConvRefs(input, weight, bias, out, kName);
  const size_t ws_bytes = kernels::ConvWorkspaceBytes(ro, ri, rw, p);
  const at::Tensor ws =
      Empty({static_cast<int64_t>(ws_bytes / sizeof(float))}, at::kFloat, device);
  const TensorRef rws = Ref(ws, kName);
  Launch(device, kernels::DescribeConv2d(ro, ri, rw, rb, p, kName),
         [=] { return kernels::Conv2d(ro, ri, rw, rb, p, rws); });
  return out;
}

// constant_pad_nd (F.pad, mode "constant"): one kernel, one pass over the
// output. Its composite was an empty, a fill_ of the whole output and a copy_
// into the interior: two launches, two passes and five host dispatches
// (MobileNetV2's TF "same" padding before each strided conv). Negative pads crop.
// Output layout as torch's: the input's suggested memory format.
at::Tensor ConstantPadNd(const at::Tensor& self, c10::SymIntArrayRef pad, const at::Scalar& value) {
  constexpr const char* kName = "aten::constant_pad_nd";
  const int64_t nd = self.dim();
  TORCH_CHECK(pad.size() % 2 == 0, "Length of pad must be even but instead it equals ",
              pad.size());
  TORCH_CHECK(static_cast<int64_t>(pad.size()) / 2 <= nd,
              "Length of pad should be no more than twice the number of dimensions of the input. "
              "Pad length is ", pad.size(), " while the input has ", nd, " dimensions.");
  const int device = CommonDevice(kName, {&self});
  TORCH_CHECK(nd <= kMaxDims, "trn: ", kName, " supports at most ", kMaxDims, " dims, got ", nd);
  std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end());
  std::array<int64_t, kMaxDims> before{};
  bool crop_only = true;
  for (size_t i = 0; i < pad.size() / 2; ++i) {  // pads run from the last dim backwards
    const int64_t d = nd - 1 - static_cast<int64_t>(i);
    const int64_t b = pad[2 * i].guard_int(__FILE__, __LINE__);
    const int64_t a = pad[2 * i + 1].guard_int(__FILE__, __LINE__);
    const int64_t n = sizes[d] + b + a;
    TORCH_CHECK(n >= 0, "The input size ", sizes[d], ", plus negative padding ", b, " and ", a,
                " resulted in a negative output size, which is invalid. Check dimension ", d,
                " of your input.");
    before[d] = b;
    sizes[d] = n;
    crop_only = crop_only && b <= 0 && a <= 0;
  }
  if (crop_only) {  // as torch: a crop is a clone of the narrowed input (its layout kept)
    at::Tensor c = self;
    for (int64_t d = 0; d < nd; ++d) c = c.narrow(d, -before[d], sizes[d]);
    return c.clone();
  }
  at::Tensor out = EmptyLikeInput(sizes, self, device);
  if (out.numel() == 0) return out;
  const TensorRef ro = Ref(out, kName), ri = Ref(self, kName);
  const double v = value.toDouble();
  Launch(device, kernels::DescribeConstantPad(ro, ri, kName),
         [=] { return kernels::ConstantPad(ro, ri, before.data(), v); });
  return out;
}

// reflection_pad{1,2,3}d / replication_pad{1,2,3}d (F.pad modes "reflect" and
// "replicate", Conv*d(padding_mode=...)): one IndexPad launch; they went
// through the CPU fallback (EnCodec's convolutions pad by reflection, 18 times
// per forward). `k` padded dims; input [N, C, *k] or [C, *k].
struct PadPlan {
  std::vector<int64_t> sizes;  // of the output
  std::array<int64_t, kMaxDims> before{};
  int device = 0;
};

PadPlan PlanIndexPad(const at::Tensor& self, at::IntArrayRef pad, int k, kernels::PadMode mode,
                     const char* name) {
  const int64_t nd = self.dim();
  TORCH_CHECK(static_cast<int64_t>(pad.size()) == 2 * k, name, ": expected a padding of ", 2 * k,
              " values, got ", pad.size());
  TORCH_CHECK(nd == k + 1 || nd == k + 2, name, ": expected a ", k + 1, "-D or ", k + 2,
              "-D (batch mode) input, got ", self.sizes());
  for (int64_t d = nd == k + 2 ? 1 : 0; d < nd; ++d) {
    TORCH_CHECK(self.size(d) > 0, name, ": expected an input with non-zero sizes except the ",
                "batch, got ", self.sizes());
  }
  PadPlan plan;
  plan.device = CommonDevice(name, {&self});
  plan.sizes.assign(self.sizes().begin(), self.sizes().end());
  for (int i = 0; i < k; ++i) {  // pads run from the last dim backwards
    const int64_t d = nd - 1 - i, b = pad[2 * i], a = pad[2 * i + 1], n = plan.sizes[d];
    if (mode == kernels::PadMode::kReflect) {
      TORCH_CHECK(b < n && a < n, name, ": padding (", b, ", ", a, ") at dimension ", d,
                  " of input ", self.sizes(), " should be less than that dimension's size");
    }
    TORCH_CHECK(n + b + a >= 1, name, ": input of ", self.sizes(), " is too small for padding (",
                b, ", ", a, ") at dimension ", d, ": the output would have ", n + b + a,
                " elements");
    plan.before[d] = b;
    plan.sizes[d] = n + b + a;
  }
  return plan;
}

void LaunchIndexPad(const PadPlan& plan, const at::Tensor& self, const at::Tensor& out,
                    kernels::PadMode mode, const char* name) {
  if (out.numel() == 0) return;
  const TensorRef ro = Ref(out, name), ri = Ref(self, name);
  const std::array<int64_t, kMaxDims> before = plan.before;
  Launch(plan.device, kernels::DescribeIndexPad(ro, ri, mode, name),
         [=] { return kernels::IndexPad(ro, ri, before.data(), mode); });
}

template <kernels::PadMode M>
constexpr const char* PadName() {
  return M == kernels::PadMode::kReflect ? "aten::reflection_pad" : "aten::replication_pad";
}

template <int K, kernels::PadMode M>
at::Tensor& IndexPadOut(const at::Tensor& self, at::IntArrayRef pad, at::Tensor& out) {
  const PadPlan plan = PlanIndexPad(self, pad, K, M, PadName<M>());
  CommonDevice(PadName<M>(), {&self, &out});
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), PadName<M>(), ": expected out of ",
              self.scalar_type(), ", got ", out.scalar_type());
  PrepareOut(out, plan.sizes, self.scalar_type(), PadName<M>());
  LaunchIndexPad(plan, self, out, M, PadName<M>());
  return out;
}

// Output layout as torch's: the input's suggested memory format.
template <int K, kernels::PadMode M>
at::Tensor IndexPadNew(const at::Tensor& self, at::IntArrayRef pad) {
  const PadPlan plan = PlanIndexPad(self, pad, K, M, PadName<M>());
  at::Tensor out = EmptyLikeInput(plan.sizes, self, plan.device);
  LaunchIndexPad(plan, self, out, M, PadName<M>());
  return out;
}

// Note [convolution backward]: 1-D and 2-D convolutions' gradients, native
// (convolution_backward_overrideable's CompositeExplicitAutograd kernel
// raises NotImplementedError, so the op must be registered either way):
//  - grad_input is grad_output convolved back by the same weight: a
//    transposed convolution for a plain one (output_padding restores the rows
//    the stride dropped), a plain one for a transposed one; one launch each
//    through aten::convolution.
//  - grad_weight is one GEMM per group, grad_output against the im2col of the
//    input (roles swapped for a transposed convolution). The im2col launch
//    writes its columns as [C*KH*KW, N, L], so the sum over the batch is
//    inside the GEMM's K (float32 accumulation, one rounding, as CPU). (One
//    GEMM per tap over shifted views of the padded image would skip the
//    im2col for stride 1, but its zero padding multiplies real pixels: an inf
//    or NaN in the input would spread to taps CPU keeps finite.)
//  - grad_bias sums grad_output over all dims but the channels.
// 3-D ones, empty ones, and transposed ones whose output_padding reaches the
// stride (im2col would see other blocks than the input's positions) go to
// the CPU (Note [overrideable ops on the CPU] in fallback.cc).
std::tuple<at::Tensor, at::Tensor, at::Tensor> ConvolutionBackwardOverrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    c10::SymIntArrayRef stride_, c10::SymIntArrayRef padding_, c10::SymIntArrayRef dilation_,
    bool transposed, c10::SymIntArrayRef output_padding_, c10::SymInt groups,
    std::array<bool, 3> output_mask) {
  constexpr const char* kName = "aten::convolution_backward";
  const int64_t dims = input.dim() - 2;
  auto on_cpu = [&] {
    return at::native::call_fallback_fn_symint<
        &CpuFallback, at::_ops::convolution_backward_overrideable>::call(grad_output, input,
                                                                         weight, stride_,
                                                                         padding_, dilation_,
                                                                         transposed,
                                                                         output_padding_, groups,
                                                                         output_mask);
  };
  if (dims < 1 || dims > 2 || NativeConvDisabled() || input.numel() == 0 ||
      grad_output.numel() == 0) {
    return on_cpu();
  }
  const int device = CommonDevice(kName, {&grad_output, &input, &weight});
  CheckFloating(input, kName);
  TORCH_CHECK(grad_output.scalar_type() == input.scalar_type() &&
                  weight.scalar_type() == input.scalar_type(),
              kName, ": grad_output, input and weight must have one dtype, got ",
              grad_output.scalar_type(), ", ", input.scalar_type(), ", ", weight.scalar_type());
  TORCH_CHECK(grad_output.dim() == input.dim() && weight.dim() == input.dim(), kName,
              ": expected grad_output and weight of ", input.dim(), " dims, got ",
              grad_output.sizes(), " and ", weight.sizes());
  const int64_t g = groups.guard_int(__FILE__, __LINE__);
  auto at_d = [](c10::SymIntArrayRef v, int64_t d) {
    return v.empty() ? 0 : v[v.size() == 1 ? 0 : d].guard_int(__FILE__, __LINE__);
  };
  std::vector<int64_t> stride, padding, dilation, zeros(static_cast<size_t>(dims), 0);
  for (int64_t d = 0; d < dims; ++d) {
    stride.push_back(at_d(stride_, d));
    padding.push_back(at_d(padding_, d));
    dilation.push_back(at_d(dilation_, d));
  }
  // im2col's source (the tensor the weight slides over) and its partner.
  const at::Tensor& cols_of = transposed ? grad_output : input;
  const at::Tensor& other = transposed ? input : grad_output;
  kernels::Im2ColParams p{};
  for (int k = 0; k < 2; ++k) {  // 1-D fills the W slot
    const int64_t d = k - (2 - dims);
    p.kernel[k] = d < 0 ? 1 : weight.size(d + 2);
    p.stride[k] = d < 0 ? 1 : stride[d];
    p.padding[k] = d < 0 ? 0 : padding[d];
    p.dilation[k] = d < 0 ? 1 : dilation[d];
    if (d < 0) continue;
    const int64_t blocks =
        (cols_of.size(d + 2) + 2 * p.padding[k] - p.dilation[k] * (p.kernel[k] - 1) - 1) /
            p.stride[k] + 1;
    if (blocks != other.size(d + 2)) return on_cpu();
  }
  at::Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) {
    if (transposed) {
      grad_input = at::convolution(grad_output, weight, std::nullopt, stride, padding, dilation,
                                   false, zeros, g);
    } else {
      std::vector<int64_t> output_padding;
      for (int64_t d = 0; d < dims; ++d) {
        output_padding.push_back(input.size(d + 2) -
                                 ((grad_output.size(d + 2) - 1) * stride[d] - 2 * padding[d] +
                                  dilation[d] * (weight.size(d + 2) - 1) + 1));
      }
      grad_input = at::convolution(grad_output, weight, std::nullopt, stride, padding, dilation,
                                   true, output_padding, g);
    }
  }
  if (output_mask[1]) {
    const int64_t n = input.size(0), rows = cols_of.size(1) * p.kernel[0] * p.kernel[1];
    const int64_t l = other.numel() / (other.size(0) * other.size(1));
    const at::Tensor cols = Empty({rows, n, l}, input.scalar_type(), device);
    const at::Tensor src = dims == 1 ? cols_of.unsqueeze(2) : cols_of;
    const TensorRef rc = Ref(cols.permute({1, 0, 2}), kName), rs = Ref(src, kName);
    Launch(device, kernels::DescribeVision(kernels::VisionKernel::kIm2Col, rc, rs, 0, kName),
           [=] { return kernels::Im2Col(rc, rs, p); });
    const int64_t oc = other.size(1);
    const at::Tensor a = other.transpose(0, 1).reshape({g, oc / g, n * l});
    grad_weight = at::bmm(a, cols.view({g, rows / g, n * l}).transpose(1, 2))
                      .reshape(weight.sizes());
  }
  if (output_mask[2]) {
    std::vector<int64_t> reduce = {0};
    for (int64_t d = 2; d < grad_output.dim(); ++d) reduce.push_back(d);
    grad_bias = grad_output.sum(reduce);
  }
  return {grad_input, grad_weight, grad_bias};
}

// ---- batch_norm -------------------------------------------------------------------------
std::tuple<at::Tensor, at::Tensor, at::Tensor> BatchNormInference(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, const at::Tensor& mean, const at::Tensor& var,
    double eps, const char* name) {
  const at::Tensor w = weight.has_value() ? *weight : at::Tensor();
  const at::Tensor b = bias.has_value() ? *bias : at::Tensor();
  const int device = CommonDevice(name, {&input, &w, &b, &mean, &var});
  CheckFloating(input, name);
  TORCH_CHECK(input.dim() >= 2, name, ": expected an input of at least 2 dims, got ",
              input.sizes());
  const int64_t c = input.size(1);
  for (const at::Tensor* t : {&w, &b, &mean, &var}) {
    TORCH_CHECK(!t->defined() || (t->dim() == 1 && t->size(0) == c), name,
                ": expected running_mean/running_var/weight/bias of size [", c, "], got ",
                t->sizes());
    if (t->defined()) CheckFloating(*t, name);
  }
  at::Tensor out = EmptyLikeInput(input.sizes(), input, device);
  // torch returns empty save_mean / save_invstd in inference.
  at::Tensor save_mean = Empty({0}, input.scalar_type(), device);
  at::Tensor save_invstd = Empty({0}, input.scalar_type(), device);
  if (input.numel() == 0) return {out, save_mean, save_invstd};
  const TensorRef ro = Ref(out, name), ri = Ref(input, name);
  const TensorRef rm = Ref(mean, name), rv = Ref(var, name);
  const TensorRef rw = w.defined() ? Ref(w, name) : NoRef();
  const TensorRef rb = b.defined() ? Ref(b, name) : NoRef();
  Launch(device, kernels::DescribeBatchNorm(ro, ri, name),
         [=] { return kernels::BatchNormInference(ro, ri, rm, rv, rw, rb, eps); });
  return {out, save_mean, save_invstd};
}

// Batch statistics (training mode; _native_batch_norm_legit.no_stats:
// F.instance_norm, which views [N, C, ...] as [1, N*C, ...], and batch_norm
// with track_running_stats=False): one launch computes the per-channel mean
// and biased variance over every dim but 1 (in double), normalizes with the
// inference kernel and, given running statistics, updates them in place as
// torch: r = (1 - momentum) * r + momentum * stat, with the unbiased variance.
// save_mean / save_invstd in the input's dtype, as torch.
std::tuple<at::Tensor, at::Tensor, at::Tensor> BatchNormBatchStats(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, double eps, const char* name,
    const at::Tensor& running_mean = {}, const at::Tensor& running_var = {},
    double momentum = 0) {
  const at::Tensor w = weight.has_value() ? *weight : at::Tensor();
  const at::Tensor b = bias.has_value() ? *bias : at::Tensor();
  const at::Tensor& rm = running_mean;
  const at::Tensor& rv = running_var;
  const int device = CommonDevice(name, {&input, &w, &b, &rm, &rv});
  CheckFloating(input, name);
  TORCH_CHECK(input.dim() >= 2, name, ": expected an input of at least 2 dims, got ",
              input.sizes());
  const int64_t c = input.size(1);
  for (const at::Tensor* t : {&w, &b, &rm, &rv}) {
    TORCH_CHECK(!t->defined() || (t->dim() == 1 && t->size(0) == c), name,
                ": expected weight/bias/running_mean/running_var of size [", c, "], got ",
                t->sizes());
  }
  for (const at::Tensor* t : {&rm, &rv}) {
    if (t->defined()) CheckFloating(*t, name);
  }
  TORCH_CHECK(input.numel() / std::max<int64_t>(c, 1) > 1, name,
              ": expected more than 1 value per channel when training, got input size ",
              input.sizes());
  at::Tensor out = EmptyLikeInput(input.sizes(), input, device);
  at::Tensor save_mean = Empty({c}, input.scalar_type(), device);
  at::Tensor save_invstd = Empty({c}, input.scalar_type(), device);
  const at::Tensor stats = Empty({2, c}, at::kFloat, device);  // mean, var
  const TensorRef ro = Ref(out, name), ri = Ref(input, name);
  const TensorRef rw = w.defined() ? Ref(w, name) : NoRef();
  const TensorRef rb = b.defined() ? Ref(b, name) : NoRef();
  const TensorRef rsm = Ref(save_mean, name), rsi = Ref(save_invstd, name);
  const TensorRef rmean = Ref(stats[0], name), rvar = Ref(stats[1], name);
  const TensorRef rrm = rm.defined() ? Ref(rm, name) : NoRef();
  const TensorRef rrv = rv.defined() ? Ref(rv, name) : NoRef();
  const double count = static_cast<double>(input.numel() / c);
  uint32_t mask = 0;
  for (int d = 0; d < input.dim(); ++d) mask |= d == 1 ? 0u : 1u << d;
  Launch(device, kernels::DescribeBatchNorm(ro, ri, name), [=] {
    auto keepdim = [&](TensorRef r) {  // [C] in Reduce's keepdim layout [1, C, 1, ...]
      r.ndim = ri.ndim;
      for (int d = 0; d < ri.ndim; ++d) {
        r.sizes[d] = d == 1 ? c : 1;
        r.strides[d] = d == 1 ? rmean.strides[0] : 0;
      }
      return r;
    };
    Status s = kernels::VarMean(keepdim(rvar), keepdim(rmean), ri, mask, 0.0, false);
    if (s.ok()) s = kernels::BatchNormInference(ro, ri, rmean, rvar, rw, rb, eps);
    if (!s.ok()) return s;
    std::vector<float> v(static_cast<size_t>(c));
    kernels::internal::LoadAsF32(DType::kFloat32, rvar.data, rvar.strides[0], c, v.data());
    for (float& x : v) x = static_cast<float>(1.0 / std::sqrt(static_cast<double>(x) + eps));
    kernels::internal::StoreFromF32(rsi.dtype, rsi.data, rsi.strides[0], c, v.data());
    kernels::internal::LoadAsF32(DType::kFloat32, rmean.data, rmean.strides[0], c, v.data());
    kernels::internal::StoreFromF32(rsm.dtype, rsm.data, rsm.strides[0], c, v.data());
    // Running statistics: one [C] pass each, in double (torch's accumulate type).
    const auto update = [&](const TensorRef& running, const TensorRef& stat, double unbias) {
      if (running.data == nullptr) return;
      std::vector<float> r(static_cast<size_t>(c));
      kernels::internal::LoadAsF32(DType::kFloat32, stat.data, stat.strides[0], c, v.data());
      kernels::internal::LoadAsF32(running.dtype, running.data, running.strides[0], c, r.data());
      for (int64_t i = 0; i < c; ++i) {
        r[i] = static_cast<float>(momentum * (static_cast<double>(v[i]) * unbias) +
                                  (1 - momentum) * static_cast<double>(r[i]));
      }
      kernels::internal::StoreFromF32(running.dtype, running.data, running.strides[0], c, r.data());
    };
    update(rrm, rmean, 1.0);
    update(rrv, rvar, count / (count - 1));
    return Status::Ok();
  });
  return {out, save_mean, save_invstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> BatchNormLegitNoStats(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, bool training, double /*momentum*/, double eps) {
  TORCH_CHECK(training, "aten::_native_batch_norm_legit.no_stats: running statistics are "
              "required when not training");
  return BatchNormBatchStats(input, weight, bias, eps, "aten::_native_batch_norm_legit");
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> NativeBatchNorm(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& running_mean,
    const std::optional<at::Tensor>& running_var, bool training, double momentum,
    double eps) {
  const bool stats = running_mean.has_value() && running_mean->defined() &&
                     running_var.has_value() && running_var->defined();
  if (training) {
    return stats ? BatchNormBatchStats(input, weight, bias, eps, "aten::native_batch_norm",
                                       *running_mean, *running_var, momentum)
                 : BatchNormBatchStats(input, weight, bias, eps, "aten::native_batch_norm");
  }
  if (!stats) {
    return at::native::call_fallback_fn<&CpuFallback, at::_ops::native_batch_norm>::call(
        input, weight, bias, running_mean, running_var, training, momentum, eps);
  }
  return BatchNormInference(input, weight, bias, *running_mean, *running_var, eps,
                            "aten::native_batch_norm");
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> BatchNormLegitNoTraining(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, const at::Tensor& running_mean,
    const at::Tensor& running_var, double momentum, double eps) {
  return BatchNormInference(input, weight, bias, running_mean, running_var, eps,
                            "aten::_native_batch_norm_legit_no_training");
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> BatchNormLegit(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, at::Tensor& running_mean, at::Tensor& running_var,
    bool training, double momentum, double eps) {
  if (training) {
    return BatchNormBatchStats(input, weight, bias, eps, "aten::_native_batch_norm_legit",
                               running_mean, running_var, momentum);
  }
  return BatchNormInference(input, weight, bias, running_mean, running_var, eps,
                            "aten::_native_batch_norm_legit");
}

// ---- pooling ------------------------------------------------------------------------------
// [N, C, H, W] refs of a 3-D (C, H, W) or 4-D pooling operand.
TensorRef PoolRef(const at::Tensor& t, const char* name) {
  TensorRef r = Ref(t, name);
  return r.ndim == 3 ? Unsqueezed(r, 0) : r;
}

int64_t Pick(at::IntArrayRef v, int i, int64_t dflt) {
  if (v.empty()) return dflt;
  return v.size() == 1 ? v[0] : v[i];
}

struct PoolGeometry {
  kernels::PoolParams p;
  int64_t c, h, w, oh, ow;
  std::vector<int64_t> out_sizes;
};

PoolGeometry MakePool(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
                      at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode,
                      const char* name) {
  TORCH_CHECK(kernel.size() == 1 || kernel.size() == 2, name,
              ": kernel_size must either be a single int, or a tuple of two ints");
  TORCH_CHECK(stride.empty() || stride.size() == 1 || stride.size() == 2, name,
              ": stride must either be omitted, a single int, or a tuple of two ints");
  TORCH_CHECK(padding.size() == 1 || padding.size() == 2, name,
              ": padding must either be a single int, or a tuple of two ints");
  TORCH_CHECK(dilation.size() == 1 || dilation.size() == 2, name,
              ": dilation must be either a single int, or a tuple of two ints");
  TORCH_CHECK(self.dim() == 3 || self.dim() == 4, name,
              ": expected a 3D or 4D input, got ", self.sizes());
  CheckFloating(self, name);
  PoolGeometry g;
  for (int i = 0; i < 2; ++i) {
    g.p.kernel[i] = Pick(kernel, i, 1);
    g.p.stride[i] = Pick(stride, i, g.p.kernel[i]);
    g.p.padding[i] = Pick(padding, i, 0);
    g.p.dilation[i] = Pick(dilation, i, 1);
  }
  const int64_t nd = self.dim();
  g.c = self.size(nd - 3);
  g.h = self.size(nd - 2);
  g.w = self.size(nd - 1);
  g.oh = at::native::pooling_output_shape<int64_t>(g.h, g.p.kernel[0], g.p.padding[0],
                                                   g.p.stride[0], g.p.dilation[0], ceil_mode);
  g.ow = at::native::pooling_output_shape<int64_t>(g.w, g.p.kernel[1], g.p.padding[1],
                                                   g.p.stride[1], g.p.dilation[1], ceil_mode);
  at::native::pool2d_shape_check(self, g.p.kernel[0], g.p.kernel[1], g.p.stride[0],
                                 g.p.stride[1], g.p.padding[0], g.p.padding[1],
                                 g.p.dilation[0], g.p.dilation[1], g.c, g.h, g.w, g.oh, g.ow,
                                 self.suggest_memory_format());
  if (nd == 4) g.out_sizes.push_back(self.size(0));
  g.out_sizes.insert(g.out_sizes.end(), {g.c, g.oh, g.ow});
  return g;
}

std::tuple<at::Tensor, at::Tensor> MaxPool2dWithIndices(const at::Tensor& self,
                                                         at::IntArrayRef kernel,
                                                         at::IntArrayRef stride,
                                                         at::IntArrayRef padding,
                                                         at::IntArrayRef dilation,
                                                         bool ceil_mode) {
  constexpr const char* kName = "aten::max_pool2d_with_indices";
  const int device = DeviceIndex(self);
  const PoolGeometry g = MakePool(self, kernel, stride, padding, dilation, ceil_mode, kName);
  at::Tensor out = EmptyLikeInput(g.out_sizes, self, device);
  at::Tensor indices;
  if (out.dim() == 4 && self.suggest_memory_format() == at::MemoryFormat::ChannelsLast) {
    indices = Empty({g.out_sizes[0], g.oh, g.ow, g.c}, at::kLong, device).permute({0, 3, 1, 2});
  } else {
    indices = Empty(g.out_sizes, at::kLong, device);
  }
  if (out.numel() == 0) return {out, indices};
  const TensorRef ro = PoolRef(out, kName), ri = PoolRef(self, kName);
  const TensorRef rx = PoolRef(indices, kName);
  const kernels::PoolParams p = g.p;
  Launch(device,
         kernels::DescribeVision(kernels::VisionKernel::kMaxPool2d, ro, ri,
                                 static_cast<uint64_t>(p.kernel[0] * p.kernel[1]), kName),
         [=] { return kernels::MaxPool2d(ro, rx, ri, p); });
  return {out, indices};
}

at::Tensor AvgPool2d(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
                     at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                     std::optional<int64_t> divisor_override) {
  constexpr const char* kName = "aten::avg_pool2d";
  const int device = DeviceIndex(self);
  TORCH_CHECK(!divisor_override.has_value() || *divisor_override != 0, kName,
              ": divisor must be not zero");
  PoolGeometry g = MakePool(self, kernel, stride, padding, {1}, ceil_mode, kName);
  g.p.count_include_pad = count_include_pad;
  g.p.divisor_override = divisor_override.value_or(0);
  at::Tensor out = EmptyLikeInput(g.out_sizes, self, device);
  if (out.numel() == 0) return out;
  const TensorRef ro = PoolRef(out, kName), ri = PoolRef(self, kName);
  const kernels::PoolParams p = g.p;
  Launch(device,
         kernels::DescribeVision(kernels::VisionKernel::kAvgPool2d, ro, ri,
                                 static_cast<uint64_t>(p.kernel[0] * p.kernel[1]), kName),
         [=] { return kernels::AvgPool2d(ro, ri, p); });
  return out;
}

// The largest bin of an adaptive pool from [H, W] to [OH, OW] (its FLOPs per output).
uint64_t AdaptiveWindow(int64_t h, int64_t w, int64_t oh, int64_t ow) {
  return static_cast<uint64_t>(((h + oh - 1) / std::max<int64_t>(oh, 1) + 1) *
                               ((w + ow - 1) / std::max<int64_t>(ow, 1) + 1));
}

at::Tensor AdaptiveAvgPool2d(const at::Tensor& self, c10::SymIntArrayRef output_size) {
  constexpr const char* kName = "aten::_adaptive_avg_pool2d";
  const int device = DeviceIndex(self);
  TORCH_CHECK(output_size.size() == 2, kName, ": output_size must be 2, got ",
              output_size.size());
  TORCH_CHECK(self.dim() == 3 || self.dim() == 4, kName,
              ": expected a 3D or 4D input, got ", self.sizes());
  for (int64_t d = 1; d < self.dim(); ++d) {
    TORCH_CHECK(self.size(d) > 0, kName, ": expected input to have non-zero size for non-batch "
                "dimensions, but input has sizes ", self.sizes(), " with dimension ", d,
                " being empty");
  }
  CheckFloating(self, kName);
  const int64_t oh = output_size[0].guard_int(__FILE__, __LINE__);
  const int64_t ow = output_size[1].guard_int(__FILE__, __LINE__);
  TORCH_CHECK(oh >= 0 && ow >= 0, kName, ": output_size must be non-negative, got ", oh, "x", ow);
  std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end());
  sizes[sizes.size() - 2] = oh;
  sizes[sizes.size() - 1] = ow;
  at::Tensor out = EmptyLikeInput(sizes, self, device);
  if (out.numel() == 0) return out;
  const TensorRef ro = PoolRef(out, kName), ri = PoolRef(self, kName);
  const uint64_t window = AdaptiveWindow(self.size(-2), self.size(-1), oh, ow);
  Launch(device,
         kernels::DescribeVision(kernels::VisionKernel::kAdaptiveAvgPool2d, ro, ri, window, kName),
         [=] { return kernels::AdaptiveAvgPool2d(ro, ri); });
  return out;
}

// ---- channel_shuffle (ShuffleNet): [N, g, C/g, *] -> [N, C/g, g, *], one copy -----------
at::Tensor ChannelShuffle(const at::Tensor& self, c10::SymInt groups_) {
  const int64_t groups = groups_.guard_int(__FILE__, __LINE__);
  TORCH_CHECK(self.dim() > 2, "channel_shuffle expects input to have at least 3 dimensions, but "
              "got input with sizes ", self.sizes());
  TORCH_CHECK(groups > 0, "Number of groups to divide channels in must be positive. Value of "
              "groups:", groups);
  const int64_t c = self.size(1);
  TORCH_CHECK(c % groups == 0, "Number of channels must be divisible by groups. Got ", c,
              " channels and ", groups, " groups.");
  std::vector<int64_t> grouped = {self.size(0), groups, c / groups};
  for (int64_t d = 2; d < self.dim(); ++d) grouped.push_back(self.size(d));
  at::Tensor out = EmptyLikeInput(self.sizes(), self, DeviceIndex(self));
  out.copy_(self.reshape(grouped).transpose(1, 2).reshape(self.sizes()));
  return out;
}
at::Tensor& ChannelShuffleOut(const at::Tensor& self, c10::SymInt groups, at::Tensor& out) {
  return CopyIntoOut(ChannelShuffle(self, std::move(groups)), out, "aten::channel_shuffle");
}

// A 3-D pool's kernel / stride / padding / dilation: one int or three
// (empty: `fallback`, the kernel for a stride).
std::array<int64_t, 3> Triple(at::IntArrayRef v, at::IntArrayRef fallback, const char* what,
                              const char* name) {
  if (v.empty()) v = fallback;
  TORCH_CHECK(v.size() == 1 || v.size() == 3, name, ": ", what,
              " must either be a single int, or a tuple of three ints");
  return v.size() == 1 ? std::array<int64_t, 3>{v[0], v[0], v[0]}
                       : std::array<int64_t, 3>{v[0], v[1], v[2]};
}

// ---- adaptive_max_pool2d and max_pool3d (with indices) ---------------------------------
// Indices laid out as the output, which is laid out as the input.
at::Tensor IndicesLike(const at::Tensor& out) {
  return at::empty_like(out, out.options().dtype(at::kLong));
}

std::tuple<at::Tensor, at::Tensor> AdaptiveMaxPool2d(const at::Tensor& self,
                                                     at::IntArrayRef output_size) {
  constexpr const char* kName = "aten::adaptive_max_pool2d";
  const int device = DeviceIndex(self);
  TORCH_CHECK(output_size.size() == 2, kName, ": internal error: output_size.size() must be 2");
  TORCH_CHECK(self.dim() == 3 || self.dim() == 4, kName, ": Expected 3D or 4D tensor, but got: ",
              self.sizes());
  for (int64_t d = self.dim() - 2; d < self.dim(); ++d) {
    TORCH_CHECK(self.size(d) > 0, kName, ": Expected input to have non-zero size for non-batch "
                "dimensions, but input has sizes ", self.sizes(), " with dimension ", d,
                " being empty");
  }
  CheckFloating(self, kName);
  TORCH_CHECK(output_size[0] >= 0 && output_size[1] >= 0, kName,
              ": output_size must be non-negative, got ", output_size);
  std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end());
  sizes[sizes.size() - 2] = output_size[0];
  sizes[sizes.size() - 1] = output_size[1];
  at::Tensor out = EmptyLikeInput(sizes, self, device);
  at::Tensor indices = IndicesLike(out);
  if (out.numel() == 0) return {out, indices};
  const TensorRef ro = PoolRef(out, kName), ri = PoolRef(self, kName);
  const TensorRef rx = PoolRef(indices, kName);
  const uint64_t window = AdaptiveWindow(self.size(-2), self.size(-1), output_size[0],
                                         output_size[1]);
  Launch(device,
         kernels::DescribeVision(kernels::VisionKernel::kAdaptiveMaxPool2d, ro, ri, window, kName),
         [=] { return kernels::AdaptiveMaxPool2d(ro, rx, ri); });
  return {out, indices};
}
std::tuple<at::Tensor&, at::Tensor&> AdaptiveMaxPool2dOut(const at::Tensor& self,
                                                          at::IntArrayRef output_size,
                                                          at::Tensor& out, at::Tensor& indices) {
  auto [o, i] = AdaptiveMaxPool2d(self, output_size);
  CopyIntoOut(o, out, "aten::adaptive_max_pool2d");
  CopyIntoOut(i, indices, "aten::adaptive_max_pool2d");
  return {out, indices};
}

std::tuple<at::Tensor, at::Tensor> MaxPool3dWithIndices(const at::Tensor& self,
                                                        at::IntArrayRef kernel,
                                                        at::IntArrayRef stride,
                                                        at::IntArrayRef padding,
                                                        at::IntArrayRef dilation, bool ceil_mode) {
  constexpr const char* kName = "aten::max_pool3d_with_indices";
  const int device = DeviceIndex(self);
  const auto k = Triple(kernel, kernel, "kernel_size", kName);
  const auto st = Triple(stride, kernel, "stride", kName);
  const auto pad = Triple(padding, {0}, "padding", kName);
  const auto dil = Triple(dilation, {1}, "dilation", kName);
  TORCH_CHECK(self.dim() == 4 || self.dim() == 5, "non-empty 4D or 5D (batch mode) tensor "
              "expected for input, but got: ", self.sizes());
  CheckFloating(self, kName);
  const int64_t nd = self.dim();
  std::array<int64_t, 3> in{self.size(nd - 3), self.size(nd - 2), self.size(nd - 1)}, out{};
  for (int i = 0; i < 3; ++i) {
    out[i] = at::native::pooling_output_shape<int64_t>(in[i], k[i], pad[i], st[i], dil[i],
                                                       ceil_mode);
  }
  at::native::pool3d_shape_check(self, self.size(nd - 4), k[0], k[1], k[2], st[0], st[1], st[2],
                                 pad[0], pad[1], pad[2], dil[0], dil[1], dil[2], in[0], in[1],
                                 in[2], out[0], out[1], out[2], "max_pool3d_with_indices()");
  std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end() - 3);
  sizes.insert(sizes.end(), out.begin(), out.end());
  at::Tensor result = EmptyLikeInput(sizes, self, device);
  at::Tensor indices = IndicesLike(result);
  if (result.numel() == 0) return {result, indices};
  const at::Tensor x5 = nd == 4 ? self.unsqueeze(0) : self;
  const TensorRef ro = Ref(nd == 4 ? result.unsqueeze(0) : result, kName), ri = Ref(x5, kName);
  const TensorRef rx = Ref(nd == 4 ? indices.unsqueeze(0) : indices, kName);
  kernels::Pool3dParams p;
  for (int i = 0; i < 3; ++i) {
    p.kernel[i] = k[i];
    p.stride[i] = st[i];
    p.padding[i] = pad[i];
    p.dilation[i] = dil[i];
  }
  Launch(device,
         kernels::DescribeVision(kernels::VisionKernel::kMaxPool3d, ro, ri,
                                 static_cast<uint64_t>(k[0] * k[1] * k[2]), kName),
         [=] { return kernels::MaxPool3d(ro, rx, ri, p); });
  return {result, indices};
}
std::tuple<at::Tensor&, at::Tensor&> MaxPool3dWithIndicesOut(
    const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
    at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode, at::Tensor& out,
    at::Tensor& indices) {
  auto [o, i] = MaxPool3dWithIndices(self, kernel, stride, padding, dilation, ceil_mode);
  CopyIntoOut(o, out, "aten::max_pool3d_with_indices");
  CopyIntoOut(i, indices, "aten::max_pool3d_with_indices");
  return {out, indices};
}

// ---- pooling backwards (training) -----------------------------------------------------
// One launch each over core/kernels/vision.h's backward kernels. grad_input
// is laid out as the input (channels_last stays channels_last); the out=
// overloads (.grad_input) write into a given tensor of the input's dtype.
enum class PoolGrad { kMax, kAvg, kAdaptiveAvg };

void LaunchPoolBackward(PoolGrad kind, const at::Tensor& grad_output, at::IntArrayRef self_sizes,
                        at::ScalarType dtype, at::IntArrayRef out_sizes,
                        const kernels::PoolParams& p, uint64_t window, const at::Tensor& indices,
                        at::Tensor& grad_input, int device, const char* name) {
  TORCH_CHECK(grad_output.sizes() == out_sizes, name, ": expected grad_output of size ",
              out_sizes, " (the pool's output for input ", self_sizes, "), got ",
              grad_output.sizes());
  TORCH_CHECK(grad_output.scalar_type() == dtype, name, ": expected grad_output of ", dtype,
              " (the input's dtype), got ", grad_output.scalar_type());
  TORCH_CHECK(grad_input.scalar_type() == dtype, name, ": expected grad_input of ", dtype,
              " (the input's dtype), got ", grad_input.scalar_type());
  if (indices.defined()) {
    TORCH_CHECK(indices.scalar_type() == at::kLong && indices.sizes() == out_sizes, name,
                ": expected int64 indices of size ", out_sizes, ", got ", indices.scalar_type(),
                " of size ", indices.sizes());
  }
  if (grad_input.numel() == 0) return;
  const TensorRef rgi = PoolRef(grad_input, name), rgo = PoolRef(grad_output, name);
  const TensorRef rx = indices.defined() ? PoolRef(indices, name) : NoRef();
  const kernels::VisionKernel k = kind == PoolGrad::kMax   ? kernels::VisionKernel::kMaxPool2dBackward
                                  : kind == PoolGrad::kAvg ? kernels::VisionKernel::kAvgPool2dBackward
                                                           : kernels::VisionKernel::kAdaptiveAvgPool2dBackward;
  Launch(device, kernels::DescribeVision(k, rgi, rgo, window, name), [=] {
    switch (kind) {
      case PoolGrad::kMax: return kernels::MaxPool2dBackward(rgi, rgo, rx);
      case PoolGrad::kAvg: return kernels::AvgPool2dBackward(rgi, rgo, p);
      default: return kernels::AdaptiveAvgPool2dBackward(rgi, rgo);
    }
  });
}

at::Tensor& MaxPool2dBackwardOut(const at::Tensor& grad_output, const at::Tensor& self,
                                 at::IntArrayRef kernel, at::IntArrayRef stride,
                                 at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode,
                                 const at::Tensor& indices, at::Tensor& grad_input) {
  constexpr const char* kName = "aten::max_pool2d_with_indices_backward";
  const int device = CommonDevice(kName, {&grad_output, &self, &indices, &grad_input});
  const PoolGeometry g = MakePool(self, kernel, stride, padding, dilation, ceil_mode, kName);
  PrepareOut(grad_input, self.sizes(), self.scalar_type(), kName);
  LaunchPoolBackward(PoolGrad::kMax, grad_output, self.sizes(), self.scalar_type(), g.out_sizes,
                     g.p, 1, indices, grad_input, device, kName);
  return grad_input;
}
at::Tensor MaxPool2dBackwardNew(const at::Tensor& grad_output, const at::Tensor& self,
                                at::IntArrayRef kernel, at::IntArrayRef stride,
                                at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode,
                                const at::Tensor& indices) {
  at::Tensor grad_input = EmptyLikeInput(self.sizes(), self, DeviceIndex(self));
  return MaxPool2dBackwardOut(grad_output, self, kernel, stride, padding, dilation, ceil_mode,
                              indices, grad_input);
}

// adaptive_max_pool2d's and max_pool3d's gradients: the max pool's scatter
// of grad_output into the cells the indices name (3-D as [N, C, D*H, W] and
// [N, C, OD*OH, OW]: the index is over the whole volume either way).
at::Tensor& IndexedPoolBackwardInto(const at::Tensor& grad_output, const at::Tensor& self,
                                    const at::Tensor& indices, at::Tensor& grad_input,
                                    int spatial, const char* name) {
  const int device = CommonDevice(name, {&grad_output, &self, &indices, &grad_input});
  CheckFloating(self, name);
  TORCH_CHECK(self.dim() == spatial + 1 || self.dim() == spatial + 2, name, ": expected a ",
              spatial + 1, "-D or ", spatial + 2, "-D input, got ", self.sizes());
  TORCH_CHECK(grad_output.dim() == self.dim() && indices.sizes() == grad_output.sizes(), name,
              ": expected grad_output and indices of one size and the input's rank, got ",
              grad_output.sizes(), " and ", indices.sizes());
  PrepareOut(grad_input, self.sizes(), self.scalar_type(), name);
  at::Tensor gi = grad_input, go = grad_output, ix = indices;
  if (spatial == 3) {  // fold D into H
    TORCH_CHECK(grad_input.is_contiguous() ||
                    grad_input.is_contiguous(at::MemoryFormat::ChannelsLast3d),
                name, ": expected a dense grad_input");
    gi = gi.flatten(-3, -2);
    go = go.flatten(-3, -2);
    ix = ix.flatten(-3, -2);
  }
  std::vector<int64_t> out_sizes(gi.sizes().begin(), gi.sizes().end());
  out_sizes[out_sizes.size() - 2] = go.size(-2);
  out_sizes[out_sizes.size() - 1] = go.size(-1);
  LaunchPoolBackward(PoolGrad::kMax, go, gi.sizes(), self.scalar_type(), out_sizes, {}, 1, ix, gi,
                     device, name);
  return grad_input;
}
at::Tensor& AdaptiveMaxPool2dBackwardOut(const at::Tensor& grad_output, const at::Tensor& self,
                                         const at::Tensor& indices, at::Tensor& grad_input) {
  return IndexedPoolBackwardInto(grad_output, self, indices, grad_input, 2,
                                 "aten::adaptive_max_pool2d_backward");
}
at::Tensor AdaptiveMaxPool2dBackward(const at::Tensor& grad_output, const at::Tensor& self,
                                     const at::Tensor& indices) {
  at::Tensor grad_input = EmptyLikeInput(self.sizes(), self, DeviceIndex(self));
  return AdaptiveMaxPool2dBackwardOut(grad_output, self, indices, grad_input);
}
at::Tensor& MaxPool3dBackwardOut(const at::Tensor& grad_output, const at::Tensor& self,
                                 at::IntArrayRef, at::IntArrayRef, at::IntArrayRef,
                                 at::IntArrayRef, bool, const at::Tensor& indices,
                                 at::Tensor& grad_input) {
  return IndexedPoolBackwardInto(grad_output, self, indices, grad_input, 3,
                                 "aten::max_pool3d_with_indices_backward");
}
at::Tensor MaxPool3dBackward(const at::Tensor& grad_output, const at::Tensor& self,
                             at::IntArrayRef kernel, at::IntArrayRef stride,
                             at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode,
                             const at::Tensor& indices) {
  at::Tensor grad_input = EmptyLikeInput(self.sizes(), self, DeviceIndex(self));
  return MaxPool3dBackwardOut(grad_output, self, kernel, stride, padding, dilation, ceil_mode,
                              indices, grad_input);
}

at::Tensor& AvgPool2dBackwardOut(const at::Tensor& grad_output, const at::Tensor& self,
                                 at::IntArrayRef kernel, at::IntArrayRef stride,
                                 at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                                 std::optional<int64_t> divisor_override, at::Tensor& grad_input) {
  constexpr const char* kName = "aten::avg_pool2d_backward";
  const int device = CommonDevice(kName, {&grad_output, &self, &grad_input});
  TORCH_CHECK(!divisor_override.has_value() || *divisor_override != 0, kName,
              ": divisor must be not zero");
  PoolGeometry g = MakePool(self, kernel, stride, padding, {1}, ceil_mode, kName);
  g.p.count_include_pad = count_include_pad;
  g.p.divisor_override = divisor_override.value_or(0);
  PrepareOut(grad_input, self.sizes(), self.scalar_type(), kName);
  LaunchPoolBackward(PoolGrad::kAvg, grad_output, self.sizes(), self.scalar_type(), g.out_sizes,
                     g.p, static_cast<uint64_t>(g.p.kernel[0] * g.p.kernel[1]), at::Tensor(),
                     grad_input, device, kName);
  return grad_input;
}
at::Tensor AvgPool2dBackwardNew(const at::Tensor& grad_output, const at::Tensor& self,
                                at::IntArrayRef kernel, at::IntArrayRef stride,
                                at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                                std::optional<int64_t> divisor_override) {
  at::Tensor grad_input = EmptyLikeInput(self.sizes(), self, DeviceIndex(self));
  return AvgPool2dBackwardOut(grad_output, self, kernel, stride, padding, ceil_mode,
                              count_include_pad, divisor_override, grad_input);
}

at::Tensor& AdaptiveAvgPool2dBackwardOut(const at::Tensor& grad_output, const at::Tensor& self,
                                         at::Tensor& grad_input) {
  constexpr const char* kName = "aten::_adaptive_avg_pool2d_backward";
  const int device = CommonDevice(kName, {&grad_output, &self, &grad_input});
  TORCH_CHECK(self.dim() == 3 || self.dim() == 4, kName, ": expected a 3D or 4D input, got ",
              self.sizes());
  CheckFloating(self, kName);
  TORCH_CHECK(grad_output.dim() == self.dim(), kName, ": expected grad_output of ", self.dim(),
              " dims, got ", grad_output.sizes());
  std::vector<int64_t> out_sizes(self.sizes().begin(), self.sizes().end());
  out_sizes[out_sizes.size() - 2] = grad_output.size(-2);
  out_sizes[out_sizes.size() - 1] = grad_output.size(-1);
  PrepareOut(grad_input, self.sizes(), self.scalar_type(), kName);
  LaunchPoolBackward(PoolGrad::kAdaptiveAvg, grad_output, self.sizes(), self.scalar_type(),
                     out_sizes, {},
                     AdaptiveWindow(self.size(-2), self.size(-1), grad_output.size(-2),
                                    grad_output.size(-1)),
                     at::Tensor(),
                     grad_input, device, kName);
  return grad_input;
}
at::Tensor AdaptiveAvgPool2dBackwardNew(const at::Tensor& grad_output, const at::Tensor& self) {
  at::Tensor grad_input = EmptyLikeInput(self.sizes(), self, DeviceIndex(self));
  return AdaptiveAvgPool2dBackwardOut(grad_output, self, grad_input);
}

// ---- 3-D pooling and upsampling as two 2-D passes ----------------------------------------
// Note [Separable 3-D]: an average over a D x H x W box (torch's window and
// divisor rules are per dim), an adaptive bin, nearest and trilinear
// interpolation all factor into the H x W op on [N, C*D, H, W], then the same
// op along D on [N, C, D, H'*W'] with the second dim left alone (size kept,
// window 1). Two native kernels; the result differs from a one-pass kernel by
// one rounding (two divisions, or the interpolation's two steps).
struct Frames {  // the input as [N, C*D, H, W], with its batch dim restored later
  at::Tensor x;
  int64_t n, c, d;
  bool batched;
};
Frames AsFrames(const at::Tensor& self, const char* name) {
  TORCH_CHECK(self.dim() == 4 || self.dim() == 5, name,
              ": expected a 4D or 5D input (C, D, H, W or N, C, D, H, W), got ", self.sizes());
  const at::Tensor x = self.dim() == 5 ? self : self.unsqueeze(0);
  return {x.reshape({x.size(0), x.size(1) * x.size(2), x.size(3), x.size(4)}), x.size(0),
          x.size(1), x.size(2), self.dim() == 5};
}
// [N, C*D, H', W'] -> [N, C, D, H'*W'] for the pass along D.
at::Tensor AlongDepth(const Frames& f, const at::Tensor& y) {
  return y.reshape({f.n, f.c, f.d, y.size(2) * y.size(3)});
}
// [N, C, D', H'*W'] -> [N, C, D', H', W'] (no batch dim when the input had none).
at::Tensor Volume(const Frames& f, const at::Tensor& z, const at::Tensor& frames) {
  at::Tensor v = z.reshape({f.n, f.c, z.size(2), frames.size(2), frames.size(3)});
  return f.batched ? v : v.squeeze(0);
}

// avg_pool3d's kernel, stride and padding, (D, H, W), checked as torch.
std::array<std::array<int64_t, 3>, 3> AvgPool3dGeometry(at::IntArrayRef kernel,
                                                        at::IntArrayRef stride,
                                                        at::IntArrayRef padding,
                                                        std::optional<int64_t> divisor_override,
                                                        const char* name) {
  TORCH_CHECK(!divisor_override.has_value() || *divisor_override != 0, name,
              ": divisor must be not zero");
  return {Triple(kernel, kernel, "kernel_size", name), Triple(stride, kernel, "stride", name),
          Triple(padding, {0}, "padding", name)};
}

at::Tensor AvgPool3d(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
                     at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                     std::optional<int64_t> divisor_override) {
  constexpr const char* kName = "aten::avg_pool3d";
  const auto [k, st, pad] = AvgPool3dGeometry(kernel, stride, padding, divisor_override, kName);
  const Frames f = AsFrames(self, kName);
  // With divisor_override both passes sum (divisor 1), then one division.
  const std::optional<int64_t> pass_divisor =
      divisor_override.has_value() ? std::optional<int64_t>(1) : std::nullopt;
  const at::Tensor hw = AvgPool2d(f.x, {k[1], k[2]}, {st[1], st[2]}, {pad[1], pad[2]}, ceil_mode,
                                  count_include_pad, pass_divisor);
  at::Tensor z = AvgPool2d(AlongDepth(f, hw), {k[0], 1}, {st[0], 1}, {pad[0], 0}, ceil_mode,
                           count_include_pad, pass_divisor);
  if (divisor_override.has_value()) z = z.div(static_cast<double>(*divisor_override));
  return Volume(f, z, hw);
}
at::Tensor& AvgPool3dOut(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
                         at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                         std::optional<int64_t> divisor_override, at::Tensor& out) {
  return CopyIntoOut(AvgPool3d(self, kernel, stride, padding, ceil_mode, count_include_pad,
                               divisor_override),
                     out, "aten::avg_pool3d");
}

// avg_pool3d's backward: the two passes' backwards in reverse order (Note
// [Separable 3-D]); a divisor_override divides the gradient once, first.
at::Tensor AvgPool3dBackward(const at::Tensor& grad_output, const at::Tensor& self,
                             at::IntArrayRef kernel, at::IntArrayRef stride,
                             at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                             std::optional<int64_t> divisor_override) {
  constexpr const char* kName = "aten::avg_pool3d_backward";
  CommonDevice(kName, {&grad_output, &self});
  const auto [k, st, pad] = AvgPool3dGeometry(kernel, stride, padding, divisor_override, kName);
  const Frames f = AsFrames(self, kName);
  std::vector<int64_t> want(self.sizes().begin(), self.sizes().end() - 3);
  for (int i = 0; i < 3; ++i) {
    want.push_back(at::native::pooling_output_shape<int64_t>(self.size(self.dim() - 3 + i), k[i],
                                                             pad[i], st[i], 1, ceil_mode));
  }
  TORCH_CHECK(grad_output.sizes() == at::IntArrayRef(want), kName,
              ": expected grad_output of size ", at::IntArrayRef(want), ", got ",
              grad_output.sizes());
  const int64_t od = want[want.size() - 3], oh = want[want.size() - 2], ow = want[want.size() - 1];
  const std::optional<int64_t> pass_divisor =
      divisor_override.has_value() ? std::optional<int64_t>(1) : std::nullopt;
  at::Tensor g = grad_output.reshape({f.n, f.c, od, oh * ow});
  if (divisor_override.has_value()) g = g.div(static_cast<double>(*divisor_override));
  // Sizes-only stand-ins for the passes' inputs (their values are never read).
  const auto shaped = [&](at::IntArrayRef sizes) { return g.new_empty({1}).expand(sizes); };
  const at::Tensor depth = AvgPool2dBackwardNew(g, shaped({f.n, f.c, f.d, oh * ow}), {k[0], 1},
                                                {st[0], 1}, {pad[0], 0}, ceil_mode,
                                                count_include_pad, pass_divisor);
  const at::Tensor frames = AvgPool2dBackwardNew(
      depth.reshape({f.n, f.c * f.d, oh, ow}), shaped(f.x.sizes()), {k[1], k[2]}, {st[1], st[2]},
      {pad[1], pad[2]}, ceil_mode, count_include_pad, pass_divisor);
  return frames.reshape(self.sizes());
}
at::Tensor& AvgPool3dBackwardOut(const at::Tensor& grad_output, const at::Tensor& self,
                                 at::IntArrayRef kernel, at::IntArrayRef stride,
                                 at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                                 std::optional<int64_t> divisor_override, at::Tensor& grad_input) {
  return CopyIntoOut(AvgPool3dBackward(grad_output, self, kernel, stride, padding, ceil_mode,
                                       count_include_pad, divisor_override),
                     grad_input, "aten::avg_pool3d_backward");
}

at::Tensor AdaptiveAvgPool3d(const at::Tensor& self, c10::SymIntArrayRef output_size) {
  constexpr const char* kName = "aten::_adaptive_avg_pool3d";
  TORCH_CHECK(output_size.size() == 3, kName, ": output_size must be 3, got ",
              output_size.size());
  const Frames f = AsFrames(self, kName);
  TORCH_CHECK(f.d > 0, kName, ": expected input to have non-zero size for non-batch "
              "dimensions, but input has sizes ", self.sizes());
  const at::Tensor hw = AdaptiveAvgPool2d(f.x, output_size.slice(1));
  const std::array<c10::SymInt, 2> depth = {output_size[0], c10::SymInt(hw.size(2) * hw.size(3))};
  return Volume(f, AdaptiveAvgPool2d(AlongDepth(f, hw), depth), hw);
}

// ---- upsample -----------------------------------------------------------------------------
// in [N, C, (H,) W] -> out of output_size; 1-D ops run as H = 1.
at::Tensor Upsample(const at::Tensor& self, c10::SymIntArrayRef output_size,
                    kernels::UpsampleMode mode, bool align_corners, std::optional<double> sh,
                    std::optional<double> sw, const char* name) {
  const int device = DeviceIndex(self);
  const int64_t spatial = static_cast<int64_t>(output_size.size());
  TORCH_CHECK(self.dim() == spatial + 2, name, ": expected a ", spatial + 2,
              "-D input, got ", self.sizes());
  CheckFloating(self, name);
  std::vector<int64_t> sizes = {self.size(0), self.size(1)};
  for (int64_t d = 0; d < spatial; ++d) {
    const int64_t o = output_size[d].guard_int(__FILE__, __LINE__);
    TORCH_CHECK(self.size(d + 2) > 0 && o > 0, name,
                ": input and output sizes should be greater than 0, but got input (",
                self.sizes(), ") output (", output_size, ")");
    sizes.push_back(o);
  }
  at::Tensor out = EmptyLikeInput(sizes, self, device);
  if (out.numel() == 0) return out;
  TensorRef ro = Ref(out, name), ri = Ref(self, name);
  double scale_h = sh.value_or(0.0), scale_w = sw.value_or(0.0);
  if (spatial == 1) {
    ro = Unsqueezed(ro, 2);
    ri = Unsqueezed(ri, 2);
    scale_w = scale_h;  // the 1-D op's only scale
    scale_h = 0.0;
  }
  using kernels::UpsampleMode, kernels::VisionKernel;
  const bool antialias =
      mode == UpsampleMode::kBilinearAntialias || mode == UpsampleMode::kBicubicAntialias;
  const VisionKernel k = mode == UpsampleMode::kNearest        ? VisionKernel::kUpsampleNearest2d
                         : mode == UpsampleMode::kNearestExact ? VisionKernel::kUpsampleNearestExact2d
                         : mode == UpsampleMode::kBilinear     ? VisionKernel::kUpsampleBilinear2d
                         : antialias                           ? VisionKernel::kUpsampleAntialias2d
                                                               : VisionKernel::kUpsampleBicubic2d;
  uint64_t taps = 1;  // antialiased: about the filter's taps per output, both passes
  if (antialias) {
    const double per = mode == UpsampleMode::kBicubicAntialias ? 4.0 : 2.0;
    const auto along = [&](int d) {
      return per * std::max(1.0, static_cast<double>(ri.sizes[d]) / static_cast<double>(ro.sizes[d]));
    };
    taps = static_cast<uint64_t>(std::ceil(along(2) + along(3)));
  }
  Launch(device, kernels::DescribeVision(k, ro, ri, taps, name), [=] {
    return kernels::Upsample2d(ro, ri, mode, align_corners, scale_h, scale_w, spatial == 1);
  });
  return out;
}

at::Tensor UpsampleNearest2d(const at::Tensor& self, c10::SymIntArrayRef output_size,
                             std::optional<double> sh, std::optional<double> sw) {
  return Upsample(self, output_size, kernels::UpsampleMode::kNearest, false, sh, sw,
                  "aten::upsample_nearest2d");
}
at::Tensor UpsampleBilinear2d(const at::Tensor& self, c10::SymIntArrayRef output_size,
                              bool align_corners, std::optional<double> sh,
                              std::optional<double> sw) {
  return Upsample(self, output_size, kernels::UpsampleMode::kBilinear, align_corners, sh, sw,
                  "aten::upsample_bilinear2d");
}
// F.interpolate(..., antialias=True): Siglip2's position-embedding resize.
template <kernels::UpsampleMode kMode>
at::Tensor UpsampleAntialias2d(const at::Tensor& self, c10::SymIntArrayRef output_size,
                               bool align_corners, std::optional<double> sh,
                               std::optional<double> sw) {
  return Upsample(self, output_size, kMode, align_corners, sh, sw,
                  kMode == kernels::UpsampleMode::kBilinearAntialias ? "aten::_upsample_bilinear2d_aa"
                                                                     : "aten::_upsample_bicubic2d_aa");
}
template <kernels::UpsampleMode kMode>
at::Tensor& UpsampleAntialias2dOut(const at::Tensor& self, c10::SymIntArrayRef output_size,
                                   bool align_corners, std::optional<double> sh,
                                   std::optional<double> sw, at::Tensor& out) {
  return CopyIntoOut(UpsampleAntialias2d<kMode>(self, output_size, align_corners, sh, sw), out,
                     kMode == kernels::UpsampleMode::kBilinearAntialias
                         ? "aten::_upsample_bilinear2d_aa"
                         : "aten::_upsample_bicubic2d_aa");
}
// ---- upsample backwards (training): one Upsample2dBackward launch --------------------
const char* UpsampleBackwardName(kernels::UpsampleMode mode, size_t spatial) {
  using kernels::UpsampleMode;
  const bool one = spatial == 1;
  switch (mode) {
    case UpsampleMode::kNearest:
      return one ? "aten::upsample_nearest1d_backward" : "aten::upsample_nearest2d_backward";
    case UpsampleMode::kNearestExact:
      return one ? "aten::_upsample_nearest_exact1d_backward"
                 : "aten::_upsample_nearest_exact2d_backward";
    case UpsampleMode::kBilinear:
      return one ? "aten::upsample_linear1d_backward" : "aten::upsample_bilinear2d_backward";
    default: return "aten::upsample_bicubic2d_backward";
  }
}

at::Tensor& UpsampleBackwardInto(const at::Tensor& grad_output, c10::SymIntArrayRef output_size,
                                 c10::SymIntArrayRef input_size, kernels::UpsampleMode mode,
                                 bool align_corners, std::optional<double> sh,
                                 std::optional<double> sw, size_t spatial,
                                 at::Tensor& grad_input) {
  const char* name = UpsampleBackwardName(mode, spatial);
  TORCH_CHECK(output_size.size() == spatial, name, ": expected output_size equals to ", spatial,
              ", but got size ", output_size.size());
  const int device = CommonDevice(name, {&grad_output, &grad_input});
  CheckFloating(grad_output, name);
  TORCH_CHECK(input_size.size() == spatial + 2, name, ": expected input_size of ", spatial + 2,
              " values, got ", input_size);
  std::vector<int64_t> in_sizes, out_sizes;
  for (const c10::SymInt& v : input_size) in_sizes.push_back(v.guard_int(__FILE__, __LINE__));
  out_sizes = {in_sizes[0], in_sizes[1]};
  for (const c10::SymInt& v : output_size) out_sizes.push_back(v.guard_int(__FILE__, __LINE__));
  TORCH_CHECK(grad_output.sizes() == at::IntArrayRef(out_sizes), name,
              ": expected grad_output of size ", at::IntArrayRef(out_sizes), ", got ",
              grad_output.sizes());
  TORCH_CHECK(grad_input.scalar_type() == grad_output.scalar_type(), name,
              ": expected grad_input of ", grad_output.scalar_type(), ", got ",
              grad_input.scalar_type());
  PrepareOut(grad_input, in_sizes, grad_output.scalar_type(), name);
  if (grad_input.numel() == 0) return grad_input;
  TensorRef rgi = Ref(grad_input, name), rgo = Ref(grad_output, name);
  double scale_h = sh.value_or(0.0), scale_w = sw.value_or(0.0);
  if (spatial == 1) {  // as the forward: H = 1, the only scale is W's
    rgi = Unsqueezed(rgi, 2);
    rgo = Unsqueezed(rgo, 2);
    scale_w = scale_h;
    scale_h = 0.0;
  }
  const uint64_t taps = mode == kernels::UpsampleMode::kBilinear  ? 4
                        : mode == kernels::UpsampleMode::kBicubic ? 16
                                                                  : 1;
  Launch(device,
         kernels::DescribeVision(kernels::VisionKernel::kUpsample2dBackward, rgi, rgo, 2 * taps,
                                 name),
         [=] {
           return kernels::Upsample2dBackward(rgi, rgo, mode, align_corners, scale_h, scale_w,
                                              spatial == 1);
         });
  return grad_input;
}
at::Tensor UpsampleBackward(const at::Tensor& grad_output, c10::SymIntArrayRef output_size,
                            c10::SymIntArrayRef input_size, kernels::UpsampleMode mode,
                            bool align_corners, std::optional<double> sh,
                            std::optional<double> sw, size_t spatial) {
  at::Tensor grad_input = Empty({0}, grad_output.scalar_type(), DeviceIndex(grad_output));
  return UpsampleBackwardInto(grad_output, output_size, input_size, mode, align_corners, sh, sw,
                              spatial, grad_input);
}

// The schemas' four shapes: nearest / linear modes, 1-D / 2-D.
template <kernels::UpsampleMode M>
at::Tensor NearestBackward1d(const at::Tensor& go, c10::SymIntArrayRef os, c10::SymIntArrayRef is,
                             std::optional<double> s) {
  return UpsampleBackward(go, os, is, M, false, s, std::nullopt, 1);
}
template <kernels::UpsampleMode M>
at::Tensor& NearestBackward1dOut(const at::Tensor& go, c10::SymIntArrayRef os,
                                 c10::SymIntArrayRef is, std::optional<double> s, at::Tensor& gi) {
  return UpsampleBackwardInto(go, os, is, M, false, s, std::nullopt, 1, gi);
}
template <kernels::UpsampleMode M>
at::Tensor NearestBackward2d(const at::Tensor& go, c10::SymIntArrayRef os, c10::SymIntArrayRef is,
                             std::optional<double> sh, std::optional<double> sw) {
  return UpsampleBackward(go, os, is, M, false, sh, sw, 2);
}
template <kernels::UpsampleMode M>
at::Tensor& NearestBackward2dOut(const at::Tensor& go, c10::SymIntArrayRef os,
                                 c10::SymIntArrayRef is, std::optional<double> sh,
                                 std::optional<double> sw, at::Tensor& gi) {
  return UpsampleBackwardInto(go, os, is, M, false, sh, sw, 2, gi);
}
at::Tensor LinearBackward1d(const at::Tensor& go, c10::SymIntArrayRef os, c10::SymIntArrayRef is,
                            bool align_corners, std::optional<double> s) {
  return UpsampleBackward(go, os, is, kernels::UpsampleMode::kBilinear, align_corners, s,
                          std::nullopt, 1);
}
at::Tensor& LinearBackward1dOut(const at::Tensor& go, c10::SymIntArrayRef os,
                                c10::SymIntArrayRef is, bool align_corners,
                                std::optional<double> s, at::Tensor& gi) {
  return UpsampleBackwardInto(go, os, is, kernels::UpsampleMode::kBilinear, align_corners, s,
                              std::nullopt, 1, gi);
}
template <kernels::UpsampleMode M>
at::Tensor LinearBackward2d(const at::Tensor& go, c10::SymIntArrayRef os, c10::SymIntArrayRef is,
                            bool align_corners, std::optional<double> sh,
                            std::optional<double> sw) {
  return UpsampleBackward(go, os, is, M, align_corners, sh, sw, 2);
}
template <kernels::UpsampleMode M>
at::Tensor& LinearBackward2dOut(const at::Tensor& go, c10::SymIntArrayRef os,
                                c10::SymIntArrayRef is, bool align_corners,
                                std::optional<double> sh, std::optional<double> sw,
                                at::Tensor& gi) {
  return UpsampleBackwardInto(go, os, is, M, align_corners, sh, sw, 2, gi);
}

// 3-D: Note [Separable 3-D].
at::Tensor Upsample3d(const at::Tensor& self, c10::SymIntArrayRef output_size,
                      kernels::UpsampleMode mode, bool align_corners, std::optional<double> sd,
                      std::optional<double> sh, std::optional<double> sw, const char* name) {
  TORCH_CHECK(self.dim() == 5 && output_size.size() == 3, name,
              ": expected a 5-D input and 3 output sizes, got ", self.sizes(), " and ",
              output_size);
  const Frames f = AsFrames(self, name);
  const at::Tensor hw = Upsample(f.x, output_size.slice(1), mode, align_corners, sh, sw, name);
  const std::array<c10::SymInt, 2> depth = {output_size[0], c10::SymInt(hw.size(2) * hw.size(3))};
  return Volume(f, Upsample(AlongDepth(f, hw), depth, mode, align_corners, sd, std::nullopt, name),
                hw);
}
// The 3-D upsampling backwards: the two passes' backwards in reverse order.
at::Tensor Upsample3dBackward(const at::Tensor& grad_output, c10::SymIntArrayRef output_size,
                              c10::SymIntArrayRef input_size, kernels::UpsampleMode mode,
                              bool align_corners, std::optional<double> sd,
                              std::optional<double> sh, std::optional<double> sw,
                              const char* name) {
  TORCH_CHECK(output_size.size() == 3 && input_size.size() == 5, name,
              ": expected 3 output sizes and 5 input sizes, got ", output_size, " and ",
              input_size);
  std::vector<int64_t> in, out;
  for (const c10::SymInt& v : input_size) in.push_back(v.guard_int(__FILE__, __LINE__));
  for (const c10::SymInt& v : output_size) out.push_back(v.guard_int(__FILE__, __LINE__));
  const std::vector<int64_t> want = {in[0], in[1], out[0], out[1], out[2]};
  TORCH_CHECK(grad_output.sizes() == at::IntArrayRef(want), name,
              ": expected grad_output of size ", at::IntArrayRef(want), ", got ",
              grad_output.sizes());
  const int64_t hw = out[1] * out[2];
  const std::array<c10::SymInt, 2> depth_out = {c10::SymInt(out[0]), c10::SymInt(hw)};
  const std::array<c10::SymInt, 4> depth_in = {c10::SymInt(in[0]), c10::SymInt(in[1]),
                                               c10::SymInt(in[2]), c10::SymInt(hw)};
  const at::Tensor depth =
      UpsampleBackward(grad_output.reshape({in[0], in[1], out[0], hw}), depth_out, depth_in, mode,
                       align_corners, sd, std::nullopt, 2);
  const std::array<c10::SymInt, 4> frames_in = {c10::SymInt(in[0]), c10::SymInt(in[1] * in[2]),
                                                c10::SymInt(in[3]), c10::SymInt(in[4])};
  return UpsampleBackward(depth.reshape({in[0], in[1] * in[2], out[1], out[2]}),
                          output_size.slice(1), frames_in, mode, align_corners, sh, sw, 2)
      .reshape(in);
}
at::Tensor UpsampleNearest3dBackward(const at::Tensor& grad_output,
                                     c10::SymIntArrayRef output_size,
                                     c10::SymIntArrayRef input_size, std::optional<double> sd,
                                     std::optional<double> sh, std::optional<double> sw) {
  return Upsample3dBackward(grad_output, output_size, input_size, kernels::UpsampleMode::kNearest,
                            false, sd, sh, sw, "aten::upsample_nearest3d_backward");
}
at::Tensor& UpsampleNearest3dBackwardOut(const at::Tensor& grad_output,
                                         c10::SymIntArrayRef output_size,
                                         c10::SymIntArrayRef input_size, std::optional<double> sd,
                                         std::optional<double> sh, std::optional<double> sw,
                                         at::Tensor& grad_input) {
  return CopyIntoOut(UpsampleNearest3dBackward(grad_output, output_size, input_size, sd, sh, sw),
                     grad_input, "aten::upsample_nearest3d_backward");
}
at::Tensor UpsampleTrilinear3dBackward(const at::Tensor& grad_output,
                                       c10::SymIntArrayRef output_size,
                                       c10::SymIntArrayRef input_size, bool align_corners,
                                       std::optional<double> sd, std::optional<double> sh,
                                       std::optional<double> sw) {
  return Upsample3dBackward(grad_output, output_size, input_size,
                            kernels::UpsampleMode::kBilinear, align_corners, sd, sh, sw,
                            "aten::upsample_trilinear3d_backward");
}
at::Tensor& UpsampleTrilinear3dBackwardOut(const at::Tensor& grad_output,
                                           c10::SymIntArrayRef output_size,
                                           c10::SymIntArrayRef input_size, bool align_corners,
                                           std::optional<double> sd, std::optional<double> sh,
                                           std::optional<double> sw, at::Tensor& grad_input) {
  return CopyIntoOut(UpsampleTrilinear3dBackward(grad_output, output_size, input_size,
                                                 align_corners, sd, sh, sw),
                     grad_input, "aten::upsample_trilinear3d_backward");
}

at::Tensor UpsampleNearest3d(const at::Tensor& self, c10::SymIntArrayRef output_size,
                             std::optional<double> sd, std::optional<double> sh,
                             std::optional<double> sw) {
  return Upsample3d(self, output_size, kernels::UpsampleMode::kNearest, false, sd, sh, sw,
                    "aten::upsample_nearest3d");
}
at::Tensor UpsampleTrilinear3d(const at::Tensor& self, c10::SymIntArrayRef output_size,
                               bool align_corners, std::optional<double> sd,
                               std::optional<double> sh, std::optional<double> sw) {
  return Upsample3d(self, output_size, kernels::UpsampleMode::kBilinear, align_corners, sd, sh,
                    sw, "aten::upsample_trilinear3d");
}

// Bicubic without antialias (ViT / DINOv2 / CLIP position-embedding
// interpolation); the antialiased form takes the CPU fallback.
at::Tensor UpsampleBicubic2d(const at::Tensor& self, c10::SymIntArrayRef output_size,
                             bool align_corners, std::optional<double> sh,
                             std::optional<double> sw) {
  return Upsample(self, output_size, kernels::UpsampleMode::kBicubic, align_corners, sh, sw,
                  "aten::upsample_bicubic2d");
}
// F.grid_sample, 2-D (deformable attention, spatial transformers): bilinear
// and nearest run natively; bicubic takes the CPU fallback.
at::Tensor GridSampler2d(const at::Tensor& input, const at::Tensor& grid, int64_t mode,
                         int64_t padding, bool align_corners) {
  constexpr const char* kName = "aten::grid_sampler_2d";
  const int device = CommonDevice(kName, {&input, &grid});
  TORCH_CHECK(input.dim() == 4 && grid.dim() == 4 && grid.size(3) == 2 &&
                  grid.size(0) == input.size(0),
              kName, ": expected input [N, C, H, W] and grid [N, H_out, W_out, 2] of one batch, "
              "got ", input.sizes(), " and ", grid.sizes());
  TORCH_CHECK(input.size(2) > 0 && input.size(3) > 0, kName,
              ": expected an input with non-empty spatial dims, got ", input.sizes());
  TORCH_CHECK(mode >= 0 && mode <= 2, kName, ": expected interpolation_mode 0 (bilinear), ",
              "1 (nearest) or 2 (bicubic), got ", mode);
  TORCH_CHECK(padding >= 0 && padding <= 2, kName, ": expected padding_mode 0 (zeros), ",
              "1 (border) or 2 (reflection), got ", padding);
  CheckFloating(input, kName);
  TORCH_CHECK(grid.scalar_type() == input.scalar_type(), kName,
              ": expected grid and input of one dtype, got ", grid.scalar_type(), " and ",
              input.scalar_type());
  if (mode == 2) {
    return at::native::call_fallback_fn<&CpuFallback, at::_ops::grid_sampler_2d>::call(
        input, grid, mode, padding, align_corners);
  }
  at::Tensor out =
      Empty({input.size(0), input.size(1), grid.size(1), grid.size(2)}, input.scalar_type(), device);
  if (out.numel() == 0) return out;
  const TensorRef ro = Ref(out, kName), ri = Ref(input, kName), rg = Ref(grid, kName);
  const auto m = mode == 0 ? kernels::GridSampleMode::kBilinear : kernels::GridSampleMode::kNearest;
  const auto p = static_cast<kernels::GridSamplePadding>(padding);
  Launch(device, kernels::DescribeVision(kernels::VisionKernel::kGridSample2d, ro, ri, 1, kName),
         [=] { return kernels::GridSample2d(ro, ri, rg, m, p, align_corners); });
  return out;
}

// mode="nearest-exact" (torch's fix of nearest's half-pixel shift): it took the fallback.
at::Tensor UpsampleNearestExact2d(const at::Tensor& self, c10::SymIntArrayRef output_size,
                                  std::optional<double> sh, std::optional<double> sw) {
  return Upsample(self, output_size, kernels::UpsampleMode::kNearestExact, false, sh, sw,
                  "aten::_upsample_nearest_exact2d");
}
at::Tensor UpsampleNearestExact1d(const at::Tensor& self, c10::SymIntArrayRef output_size,
                                  std::optional<double> s) {
  return Upsample(self, output_size, kernels::UpsampleMode::kNearestExact, false, s, std::nullopt,
                  "aten::_upsample_nearest_exact1d");
}
at::Tensor UpsampleNearest1d(const at::Tensor& self, c10::SymIntArrayRef output_size,
                             std::optional<double> s) {
  return Upsample(self, output_size, kernels::UpsampleMode::kNearest, false, s, std::nullopt,
                  "aten::upsample_nearest1d");
}
at::Tensor UpsampleLinear1d(const at::Tensor& self, c10::SymIntArrayRef output_size,
                            bool align_corners, std::optional<double> s) {
  return Upsample(self, output_size, kernels::UpsampleMode::kBilinear, align_corners, s,
                  std::nullopt, "aten::upsample_linear1d");
}

// im2col / col2im geometry from the ops' (H, W) argument pairs.
kernels::Im2ColParams Im2ColParamsOf(at::IntArrayRef kernel_size, at::IntArrayRef dilation,
                                     at::IntArrayRef padding, at::IntArrayRef stride) {
  kernels::Im2ColParams p;
  for (int d = 0; d < 2; ++d) {
    p.kernel[d] = kernel_size[d];
    p.dilation[d] = dilation[d];
    p.padding[d] = padding[d];
    p.stride[d] = stride[d];
  }
  return p;
}

// ---- im2col (F.unfold) ----------------------------------------------------------------
// Llama 4's vision patch embedding is nn.Unfold then a linear: one copy kernel.
at::Tensor& Im2ColOut(const at::Tensor& self, at::IntArrayRef kernel_size, at::IntArrayRef dilation,
                      at::IntArrayRef padding, at::IntArrayRef stride, at::Tensor& out) {
  constexpr const char* kName = "aten::im2col";
  const int device = CommonDevice(kName, {&self, &out});
  CheckFloating(self, kName);
  TORCH_CHECK(kernel_size.size() == 2 && dilation.size() == 2 && padding.size() == 2 &&
                  stride.size() == 2,
              "im2col: kernel_size, dilation, padding and stride must have 2 elements each");
  TORCH_CHECK(kernel_size[0] > 0 && kernel_size[1] > 0, "kernel size should be greater than zero, "
              "but got kernel_height: ", kernel_size[0], " kernel_width: ", kernel_size[1]);
  TORCH_CHECK(dilation[0] > 0 && dilation[1] > 0, "dilation should be greater than zero, but got "
              "dilation_height: ", dilation[0], " dilation_width: ", dilation[1]);
  TORCH_CHECK(padding[0] >= 0 && padding[1] >= 0, "padding should be non-negative, but got "
              "pad_height: ", padding[0], " pad_width: ", padding[1]);
  TORCH_CHECK(stride[0] > 0 && stride[1] > 0, "stride should be greater than zero, but got "
              "stride_height: ", stride[0], " stride_width: ", stride[1]);
  TORCH_CHECK((self.dim() == 3 || self.dim() == 4) && self.size(-1) > 0 && self.size(-2) > 0 &&
                  self.size(-3) > 0,
              "Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and other "
              "non-zero dimensions for input, but got: ", self.sizes());
  const at::Tensor in = self.dim() == 3 ? self.unsqueeze(0) : self;
  const kernels::Im2ColParams p = Im2ColParamsOf(kernel_size, dilation, padding, stride);
  const int64_t h = in.size(2), w = in.size(3);
  const int64_t oh = (h + 2 * p.padding[0] - p.dilation[0] * (p.kernel[0] - 1) - 1) / p.stride[0] + 1;
  const int64_t ow = (w + 2 * p.padding[1] - p.dilation[1] * (p.kernel[1] - 1) - 1) / p.stride[1] + 1;
  TORCH_CHECK(oh > 0 && ow > 0, "Given input with spatial size (", h, ", ", w,
              "), kernel_size=(", p.kernel[0], ", ", p.kernel[1], "), dilation=(", p.dilation[0],
              ", ", p.dilation[1], "), padding=(", p.padding[0], ", ", p.padding[1],
              "), calculated shape of the array of sliding blocks as (", oh, ", ", ow,
              "), but its components must be at least one.");
  const int64_t rows = in.size(1) * p.kernel[0] * p.kernel[1];
  if (self.dim() == 3) {
    PrepareOut(out, {rows, oh * ow}, self.scalar_type(), kName);
  } else {
    PrepareOut(out, {in.size(0), rows, oh * ow}, self.scalar_type(), kName);
  }
  if (out.numel() == 0) return out;
  const at::Tensor o3 = self.dim() == 3 ? out.unsqueeze(0) : out;
  const TensorRef ro = Ref(o3, kName), ri = Ref(in, kName);
  Launch(device, kernels::DescribeVision(kernels::VisionKernel::kIm2Col, ro, ri, 0, kName),
         [=] { return kernels::Im2Col(ro, ri, p); });
  return out;
}
at::Tensor Im2Col(const at::Tensor& self, at::IntArrayRef kernel_size, at::IntArrayRef dilation,
                  at::IntArrayRef padding, at::IntArrayRef stride) {
  at::Tensor out = Empty({0}, self.scalar_type(), DeviceIndex(self));
  return Im2ColOut(self, kernel_size, dilation, padding, stride, out);
}

// col2im (F.fold; unfold's backward): the adjoint of im2col, one launch.
at::Tensor& Col2ImOut(const at::Tensor& self, c10::SymIntArrayRef output_size,
                      at::IntArrayRef kernel_size, at::IntArrayRef dilation,
                      at::IntArrayRef padding, at::IntArrayRef stride, at::Tensor& out) {
  constexpr const char* kName = "aten::col2im";
  const int device = CommonDevice(kName, {&self, &out});
  CheckFloating(self, kName);
  TORCH_CHECK(output_size.size() == 2 && kernel_size.size() == 2 && dilation.size() == 2 &&
                  padding.size() == 2 && stride.size() == 2,
              "col2im: output_size, kernel_size, dilation, padding and stride must have 2 "
              "elements each");
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), kName, ": expected out of ",
              self.scalar_type(), ", got ", out.scalar_type());
  const int64_t oh = output_size[0].guard_int(__FILE__, __LINE__);
  const int64_t ow = output_size[1].guard_int(__FILE__, __LINE__);
  at::native::col2im_shape_check(self, at::Tensor(), oh, ow, kernel_size[0], kernel_size[1],
                                 dilation[0], dilation[1], padding[0], padding[1], stride[0],
                                 stride[1]);
  const at::Tensor in = self.dim() == 2 ? self.unsqueeze(0) : self;
  const int64_t c = in.size(1) / (kernel_size[0] * kernel_size[1]);
  if (self.dim() == 2) {
    PrepareOut(out, {c, oh, ow}, self.scalar_type(), kName);
  } else {
    PrepareOut(out, {in.size(0), c, oh, ow}, self.scalar_type(), kName);
  }
  if (out.numel() == 0) return out;
  const at::Tensor o4 = self.dim() == 2 ? out.unsqueeze(0) : out;
  const kernels::Im2ColParams p = Im2ColParamsOf(kernel_size, dilation, padding, stride);
  const TensorRef ro = Ref(o4, kName), ri = Ref(in, kName);
  Launch(device, kernels::DescribeVision(kernels::VisionKernel::kCol2Im, ro, ri, 1, kName),
         [=] { return kernels::Col2Im(ro, ri, p); });
  return out;
}
at::Tensor Col2Im(const at::Tensor& self, c10::SymIntArrayRef output_size,
                  at::IntArrayRef kernel_size, at::IntArrayRef dilation, at::IntArrayRef padding,
                  at::IntArrayRef stride) {
  at::Tensor out = Empty({0}, self.scalar_type(), DeviceIndex(self));
  return Col2ImOut(self, output_size, kernel_size, dilation, padding, stride, out);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, lib) {
  NativeKernels m(lib);  // Note [dtypes the kernels do not take]
  m.impl_complex("constant_pad_nd", TORCH_FN(ConstantPadNd), TORCH_FN(ComplexConstantPadNd));
  m.impl_all_dtypes("channel_shuffle", TORCH_FN(ChannelShuffle));
  m.impl_all_dtypes("channel_shuffle.out", TORCH_FN(ChannelShuffleOut));
  m.impl_all_dtypes("native_channel_shuffle", TORCH_FN(ChannelShuffle));
  using kernels::PadMode;
  m.impl("reflection_pad1d", TORCH_FN((IndexPadNew<1, PadMode::kReflect>)));
  m.impl("reflection_pad1d.out", TORCH_FN((IndexPadOut<1, PadMode::kReflect>)));
  m.impl("reflection_pad2d", TORCH_FN((IndexPadNew<2, PadMode::kReflect>)));
  m.impl("reflection_pad2d.out", TORCH_FN((IndexPadOut<2, PadMode::kReflect>)));
  m.impl("reflection_pad3d", TORCH_FN((IndexPadNew<3, PadMode::kReflect>)));
  m.impl("reflection_pad3d.out", TORCH_FN((IndexPadOut<3, PadMode::kReflect>)));
  m.impl("replication_pad1d", TORCH_FN((IndexPadNew<1, PadMode::kReplicate>)));
  m.impl("replication_pad1d.out", TORCH_FN((IndexPadOut<1, PadMode::kReplicate>)));
  m.impl("replication_pad2d", TORCH_FN((IndexPadNew<2, PadMode::kReplicate>)));
  m.impl("replication_pad2d.out", TORCH_FN((IndexPadOut<2, PadMode::kReplicate>)));
  m.impl("replication_pad3d", TORCH_FN((IndexPadNew<3, PadMode::kReplicate>)));
  m.impl("replication_pad3d.out", TORCH_FN((IndexPadOut<3, PadMode::kReplicate>)));
  m.impl("im2col", TORCH_FN(Im2Col));
  m.impl("im2col.out", TORCH_FN(Im2ColOut));
  m.impl("col2im", TORCH_FN(Col2Im));
  m.impl("col2im.out", TORCH_FN(Col2ImOut));
  m.impl_floating("convolution_overrideable", TORCH_FN(ConvolutionOverrideable));
  m.impl_floating("convolution_backward_overrideable", TORCH_FN(ConvolutionBackwardOverrideable));
  m.impl("native_batch_norm", TORCH_FN(NativeBatchNorm));
  m.impl("_native_batch_norm_legit_no_training", TORCH_FN(BatchNormLegitNoTraining));
  m.impl("_native_batch_norm_legit.no_stats", TORCH_FN(BatchNormLegitNoStats));
  m.impl("_native_batch_norm_legit", TORCH_FN(BatchNormLegit));
  m.impl_floating("max_pool2d_with_indices", TORCH_FN(MaxPool2dWithIndices));
  m.impl_floating("adaptive_max_pool2d", TORCH_FN(AdaptiveMaxPool2d));
  m.impl_floating("adaptive_max_pool2d.out", TORCH_FN(AdaptiveMaxPool2dOut));
  m.impl("adaptive_max_pool2d_backward", TORCH_FN(AdaptiveMaxPool2dBackward));
  m.impl("adaptive_max_pool2d_backward.grad_input", TORCH_FN(AdaptiveMaxPool2dBackwardOut));
  m.impl_floating("max_pool3d_with_indices", TORCH_FN(MaxPool3dWithIndices));
  m.impl_floating("max_pool3d_with_indices.out", TORCH_FN(MaxPool3dWithIndicesOut));
  m.impl("max_pool3d_with_indices_backward", TORCH_FN(MaxPool3dBackward));
  m.impl("max_pool3d_with_indices_backward.grad_input", TORCH_FN(MaxPool3dBackwardOut));
  m.impl("max_pool2d_with_indices_backward", TORCH_FN(MaxPool2dBackwardNew));
  m.impl("max_pool2d_with_indices_backward.grad_input", TORCH_FN(MaxPool2dBackwardOut));
  m.impl("avg_pool2d_backward", TORCH_FN(AvgPool2dBackwardNew));
  m.impl("avg_pool2d_backward.grad_input", TORCH_FN(AvgPool2dBackwardOut));
  m.impl("_adaptive_avg_pool2d_backward", TORCH_FN(AdaptiveAvgPool2dBackwardNew));
  m.impl("_adaptive_avg_pool2d_backward.out", TORCH_FN(AdaptiveAvgPool2dBackwardOut));
  m.impl("avg_pool2d", TORCH_FN(AvgPool2d));
  m.impl("avg_pool3d", TORCH_FN(AvgPool3d));
  m.impl("avg_pool3d.out", TORCH_FN(AvgPool3dOut));
  m.impl("avg_pool3d_backward", TORCH_FN(AvgPool3dBackward));
  m.impl("avg_pool3d_backward.grad_input", TORCH_FN(AvgPool3dBackwardOut));
  m.impl("upsample_nearest3d_backward", TORCH_FN(UpsampleNearest3dBackward));
  m.impl("upsample_nearest3d_backward.grad_input", TORCH_FN(UpsampleNearest3dBackwardOut));
  m.impl("upsample_trilinear3d_backward", TORCH_FN(UpsampleTrilinear3dBackward));
  m.impl("upsample_trilinear3d_backward.grad_input", TORCH_FN(UpsampleTrilinear3dBackwardOut));
  m.impl("_adaptive_avg_pool3d", TORCH_FN(AdaptiveAvgPool3d));
  m.impl("upsample_nearest3d", TORCH_FN(UpsampleNearest3d));
  m.impl("upsample_trilinear3d", TORCH_FN(UpsampleTrilinear3d));
  m.impl("_adaptive_avg_pool2d", TORCH_FN(AdaptiveAvgPool2d));
  m.impl("upsample_nearest2d", TORCH_FN(UpsampleNearest2d));
  m.impl("upsample_bilinear2d", TORCH_FN(UpsampleBilinear2d));
  m.impl("upsample_bicubic2d", TORCH_FN(UpsampleBicubic2d));
  m.impl("_upsample_bilinear2d_aa",
         TORCH_FN(UpsampleAntialias2d<kernels::UpsampleMode::kBilinearAntialias>));
  m.impl("_upsample_bilinear2d_aa.out",
         TORCH_FN(UpsampleAntialias2dOut<kernels::UpsampleMode::kBilinearAntialias>));
  m.impl("_upsample_bicubic2d_aa",
         TORCH_FN(UpsampleAntialias2d<kernels::UpsampleMode::kBicubicAntialias>));
  m.impl("_upsample_bicubic2d_aa.out",
         TORCH_FN(UpsampleAntialias2dOut<kernels::UpsampleMode::kBicubicAntialias>));
  m.impl("upsample_nearest1d", TORCH_FN(UpsampleNearest1d));
  m.impl("_upsample_nearest_exact2d", TORCH_FN(UpsampleNearestExact2d));
  m.impl("grid_sampler_2d", TORCH_FN(GridSampler2d));
  m.impl("_upsample_nearest_exact1d", TORCH_FN(UpsampleNearestExact1d));
  m.impl("upsample_linear1d", TORCH_FN(UpsampleLinear1d));
  using kernels::UpsampleMode;
  m.impl("upsample_nearest1d_backward", TORCH_FN(NearestBackward1d<UpsampleMode::kNearest>));
  m.impl("upsample_nearest1d_backward.grad_input",
         TORCH_FN(NearestBackward1dOut<UpsampleMode::kNearest>));
  m.impl("_upsample_nearest_exact1d_backward",
         TORCH_FN(NearestBackward1d<UpsampleMode::kNearestExact>));
  m.impl("_upsample_nearest_exact1d_backward.grad_input",
         TORCH_FN(NearestBackward1dOut<UpsampleMode::kNearestExact>));
  m.impl("upsample_nearest2d_backward", TORCH_FN(NearestBackward2d<UpsampleMode::kNearest>));
  m.impl("upsample_nearest2d_backward.grad_input",
         TORCH_FN(NearestBackward2dOut<UpsampleMode::kNearest>));
  m.impl("_upsample_nearest_exact2d_backward",
         TORCH_FN(NearestBackward2d<UpsampleMode::kNearestExact>));
  m.impl("_upsample_nearest_exact2d_backward.grad_input",
         TORCH_FN(NearestBackward2dOut<UpsampleMode::kNearestExact>));
  m.impl("upsample_linear1d_backward", TORCH_FN(LinearBackward1d));
  m.impl("upsample_linear1d_backward.grad_input", TORCH_FN(LinearBackward1dOut));
  m.impl("upsample_bilinear2d_backward", TORCH_FN(LinearBackward2d<UpsampleMode::kBilinear>));
  m.impl("upsample_bilinear2d_backward.grad_input",
         TORCH_FN(LinearBackward2dOut<UpsampleMode::kBilinear>));
  m.impl("upsample_bicubic2d_backward", TORCH_FN(LinearBackward2d<UpsampleMode::kBicubic>));
  m.impl("upsample_bicubic2d_backward.grad_input",
         TORCH_FN(LinearBackward2dOut<UpsampleMode::kBicubic>));
}

}  // namespace
}  // namespace trn::bridge::ops
