// Vision kernels around convolution: batch norm (inference), max / average /
// adaptive-average pooling and nearest / bilinear upsampling. Same contract as
// kernels.h: pure functions over TensorRefs, any strides, float32/bfloat16/
// float16/float64 computed in float32; shapes are the caller's job (TRN_ASSERT).
// Spatial kernels take [N, C, H, W]; 1-D variants are H = 1.
#pragma once

#include <cstdint>

#include "core/common/launch.h"
#include "core/common/tensor_ref.h"

namespace trn::kernels {

// out = (in - mean) / sqrt(var + eps) * weight + bias over channel dim 1 of
// in [N, C, *] (rank >= 2). mean/var [C]; weight/bias [C] or absent
// (data == nullptr). Statistics may have another floating dtype than in.
Status BatchNormInference(const TensorRef& out, const TensorRef& in, const TensorRef& mean,
                          const TensorRef& var, const TensorRef& weight, const TensorRef& bias,
                          double eps);
rt::KernelInfo DescribeBatchNorm(const TensorRef& out, const TensorRef& in, const char* aten_op);

// Window geometry of a 2-D pooling, (H, W) order. Output sizes come from out
// (the caller applies ceil_mode); windows start at o * stride - padding.
struct PoolParams {
  int64_t kernel[2] = {1, 1};
  int64_t stride[2] = {1, 1};
  int64_t padding[2] = {0, 0};
  int64_t dilation[2] = {1, 1};   // max pool only
  bool count_include_pad = true;  // avg pool only
  int64_t divisor_override = 0;   // avg pool only; 0 = none
};

// Max over each window (padding never wins; NaN propagates as in torch).
// indices: absent or kInt64 of out's sizes, the argmax as ih * W + iw.
Status MaxPool2d(const TensorRef& out, const TensorRef& indices, const TensorRef& in,
                 const PoolParams& p);
// torch's avg_pool2d: a window clipped to input + padding; divided by
// divisor_override, the clipped window (count_include_pad) or its in-input part.
Status AvgPool2d(const TensorRef& out, const TensorRef& in, const PoolParams& p);
// Window [floor(o*I/O), ceil((o+1)*I/O)) per output index, any output size.
Status AdaptiveAvgPool2d(const TensorRef& out, const TensorRef& in);

// torch's adaptive_max_pool2d: the max over window [floor(o*I/O),
// ceil((o+1)*I/O)) per output index, indices (kInt64, out's sizes) ih * W + iw
// of the first maximum; a NaN wins and a later NaN replaces it (CPU's rule).
Status AdaptiveMaxPool2d(const TensorRef& out, const TensorRef& indices, const TensorRef& in);

// torch's max_pool3d_with_indices over [N, C, D, H, W], (D, H, W) order;
// output sizes come from out (ceil_mode applied by the caller); indices
// (kInt64, out's sizes) (id * H + ih) * W + iw, the window's first in-input
// cell when nothing beats -inf; NaN as AdaptiveMaxPool2d.
struct Pool3dParams {
  int64_t kernel[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1};
  int64_t padding[3] = {0, 0, 0};
  int64_t dilation[3] = {1, 1, 1};
};
Status MaxPool3d(const TensorRef& out, const TensorRef& indices, const TensorRef& in,
                 const Pool3dParams& p);

// The pools' input gradients (training): grad_in [N, C, H, W] is written
// whole, grad_out has the pool's output sizes, one floating dtype. Each plane
// accumulates in float32 and is rounded once. Max adds grad_out to the cell
// its index names (ih * W + iw, as MaxPool2d writes them; an index outside the
// plane is an error); the average pools spread grad_out / divisor over each
// window, with the forward's windows and divisors (adaptive: grad / KH / KW,
// as torch).
Status MaxPool2dBackward(const TensorRef& grad_in, const TensorRef& grad_out,
                         const TensorRef& indices);
Status AvgPool2dBackward(const TensorRef& grad_in, const TensorRef& grad_out, const PoolParams& p);
Status AdaptiveAvgPool2dBackward(const TensorRef& grad_in, const TensorRef& grad_out);

enum class UpsampleMode : uint8_t {
  kNearest, kBilinear, kBicubic, kNearestExact, kBilinearAntialias, kBicubicAntialias
};
// torch's upsample_nearest2d / upsample_bilinear2d / upsample_bicubic2d (no
// antialias) / _upsample_nearest_exact2d (source floor((o + 0.5) * scale), where
// nearest takes floor(o * scale)); scale_h/scale_w are the user's scale factors or <= 0 when
// output sizes were given (then in/out). align_corners: bilinear and bicubic.
// The antialias modes are torch's _upsample_bilinear2d_aa / _upsample_bicubic2d_aa
// (F.interpolate(antialias=True), PIL's filters): separable, W then H (a dim
// whose size does not change is left as it is), each output the normalized
// filter-weighted sum of the inputs within its support, widened by the scale
// when downsampling (Note [Antialiased resize] in vision.cc).
// one_dim: a 1-D op seen with H = 1. torch's 2-D nearest maps out == in and
// out == 2 * in by size whatever the scale (o, o / 2); its 1-D nearest and
// nearest-exact always use the scale.
Status Upsample2d(const TensorRef& out, const TensorRef& in, UpsampleMode mode,
                  bool align_corners, double scale_h, double scale_w, bool one_dim = false);
// Its input gradient (training): each grad_out element spread over the taps
// its output read, with their weights (the adjoint of Upsample2d, same
// arguments); grad_in [N, C, H, W] written whole, float32 accumulation.
Status Upsample2dBackward(const TensorRef& grad_in, const TensorRef& grad_out, UpsampleMode mode,
                          bool align_corners, double scale_h, double scale_w,
                          bool one_dim = false);

// torch's im2col (F.unfold, nn.Unfold: Llama 4's vision patch embedding):
// in [N, C, H, W] any dtype and strides, out [N, C*KH*KW, OH*OW] with
// out[n, (c*KH + i)*KW + j, y*OW + x] = in[n, c, y*sh - ph + i*dh, x*sw - pw +
// j*dw], 0 outside the input. A copy: exact for every dtype.
struct Im2ColParams {
  int64_t kernel[2], dilation[2], padding[2], stride[2];
};
Status Im2Col(const TensorRef& out, const TensorRef& in, const Im2ColParams& p);
// Its adjoint, torch's col2im (F.fold, and unfold's backward): in [N,
// C*KH*KW, OH*OW] (OH, OW from out's H, W and p), out [N, C, H, W] written
// whole, each element the sum of the columns that read it (float32 per
// plane, rounded once); floating dtypes.
Status Col2Im(const TensorRef& out, const TensorRef& in, const Im2ColParams& p);

// torch's grid_sampler_2d (F.grid_sample; deformable attention) for bilinear and
// nearest modes: in [N, C, H, W], grid [N, HO, WO, 2] of (x, y) in [-1, 1], out
// [N, C, HO, WO]; any strides, floating dtypes (in, grid and out one dtype),
// float32 math. Source coordinates and their padding (zeros, border,
// reflection) as torch's grid_sampler_compute_source_index; nearest rounds half
// to even. Bicubic is not here (the caller's job).
enum class GridSampleMode : uint8_t { kBilinear, kNearest };
enum class GridSamplePadding : uint8_t { kZeros, kBorder, kReflection };
Status GridSample2d(const TensorRef& out, const TensorRef& in, const TensorRef& grid,
                    GridSampleMode mode, GridSamplePadding padding, bool align_corners);

// Kernel info of the pools and upsamplers: name like "max_pool2d_f32"; flops
// per output element = the window size (pools), 1 (nearest), 7 (bilinear),
// 15 (bicubic). The backwards take (grad_in, grad_out): flops per grad_out
// element = the window size (pools), 2 per tap (upsample).
enum class VisionKernel : uint8_t {
  kMaxPool2d, kAvgPool2d, kAdaptiveAvgPool2d, kUpsampleNearest2d, kUpsampleBilinear2d,
  kUpsampleBicubic2d, kIm2Col, kUpsampleNearestExact2d, kGridSample2d,
  kMaxPool2dBackward, kAvgPool2dBackward, kAdaptiveAvgPool2dBackward, kUpsample2dBackward,
  kAdaptiveMaxPool2d, kMaxPool3d, kCol2Im, kUpsampleAntialias2d,
};
rt::KernelInfo DescribeVision(VisionKernel kernel, const TensorRef& out, const TensorRef& in,
                              uint64_t window, const char* aten_op);

}  // namespace trn::kernels
