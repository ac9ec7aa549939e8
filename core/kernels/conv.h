// Convolution on the packed GEMM (kernels::Matmul): im2col into a workspace,
// one GEMM per image and group, bias and activation fused into the same
// kernel (Note [conv as GEMM] in conv.cc).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/common/launch.h"
#include "core/common/tensor_ref.h"

namespace trn::kernels {

// Epilogue applied to every output element after the bias (and batch norm):
// kClamp is min(max(x, clamp_lo), clamp_hi) (relu6 = hardtanh(0, 6)); NaN stays.
// kGelu (erf form) and kSilu compute as the elementwise kernels do.
enum class ConvActivation : uint8_t { kNone, kRelu, kClamp, kGelu, kSilu };

// Geometry of a 2-D convolution, dims in (H, W) order. A 1-D convolution is
// the 2-D one with H = KH = 1, stride/dilation 1 and no padding on H.
// Padding may be asymmetric (pad_begin = top/left, pad_end = bottom/right).
struct ConvParams {
  int64_t stride[2] = {1, 1};
  int64_t pad_begin[2] = {0, 0};
  int64_t pad_end[2] = {0, 0};
  int64_t dilation[2] = {1, 1};
  int64_t groups = 1;
  ConvActivation activation = ConvActivation::kNone;
  float clamp_lo = 0, clamp_hi = 0;  // kClamp
};

// An inference batch norm folded into the convolution (the compiler's
// conv-bn-activation kernel): per output channel o the weights are scaled by
// s = gamma[o] / sqrt(var[o] + eps) and the bias becomes (bias[o] - mean[o]) *
// s + beta[o]. mean and var [Cout] are required, weight (gamma) and bias
// (beta) may be absent; any floating dtypes.
struct ConvBatchNorm {
  TensorRef mean, var, weight, bias;
  double eps = 1e-5;
};

// Output extent of one spatial dim (torch's formula); may be <= 0 for a
// kernel larger than the padded input (the caller rejects that).
inline int64_t ConvOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t pad_begin,
                              int64_t pad_end, int64_t dilation) {
  return (in + pad_begin + pad_end - dilation * (kernel - 1) - 1) / stride + 1;
}

// in [N, C, H, W], weight [Cout, C/groups, KH, KW], bias absent (data ==
// nullptr) or [Cout], out [N, Cout, OH, OW] with OH/OW from ConvOutputSize.
// Any strides (channels_last is a stride pattern); in/weight/out share one
// floating dtype, bias any floating dtype; computed in float32.
// workspace: a float32 buffer of at least ConvWorkspaceBytes() bytes (data
// and size only are used), or absent, when the kernel allocates its own.
size_t ConvWorkspaceBytes(const TensorRef& out, const TensorRef& in, const TensorRef& weight,
                          const ConvParams& p);
Status Conv2d(const TensorRef& out, const TensorRef& in, const TensorRef& weight,
              const TensorRef& bias, const ConvParams& p, const TensorRef& workspace,
              const ConvBatchNorm* bn = nullptr);
// Transposed convolution (the gradient of Conv2d with respect to its input):
// in [N, Cin, H, W], weight [Cin, Cout/groups, KH, KW], bias absent or
// [Cout], out [N, Cout, OH, OW] with OH = (H - 1) * stride - pad_begin -
// pad_end + dilation * (KH - 1) + 1 + output_padding (the caller sizes out; an
// output_padding row receives only the bias). Per image and group one GEMM
// col = W^T X on the packed GEMM, then col2im adds col into out. Any strides,
// floating dtypes, float32 compute; p.activation must be kNone. 1-D as 2-D
// with H = KH = 1.
Status ConvTranspose2d(const TensorRef& out, const TensorRef& in, const TensorRef& weight,
                       const TensorRef& bias, const ConvParams& p);
rt::KernelInfo DescribeConvTranspose2d(const TensorRef& out, const TensorRef& in,
                                       const TensorRef& weight, const TensorRef& bias,
                                       const char* aten_op);

// 3-D convolution (video patch embeddings, 3-D CNNs), dims in (T, H, W)
// order with symmetric padding: in [N, C, T, H, W], weight [Cout, C/groups,
// KT, KH, KW], bias absent or [Cout], out [N, Cout, OT, OH, OW] (sizes from
// ConvOutputSize). Any strides, floating dtypes (one for in/weight/out),
// float32 compute; per image, group and output frame one GEMM on im2col
// (Note [conv3d] in conv.cc).
struct Conv3dParams {
  int64_t stride[3] = {1, 1, 1};
  int64_t pad[3] = {0, 0, 0};
  int64_t dilation[3] = {1, 1, 1};
  int64_t groups = 1;
};
Status Conv3d(const TensorRef& out, const TensorRef& in, const TensorRef& weight,
              const TensorRef& bias, const Conv3dParams& p);
rt::KernelInfo DescribeConv3d(const TensorRef& out, const TensorRef& in, const TensorRef& weight,
                              const TensorRef& bias, const char* aten_op);

rt::KernelInfo DescribeConv2d(const TensorRef& out, const TensorRef& in,
                              const TensorRef& weight, const TensorRef& bias,
                              const ConvParams& p, const char* aten_op);

}  // namespace trn::kernels
