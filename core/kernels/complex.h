// Complex64 kernels: elementwise arithmetic, polar, magnitudes and FFTs.
//
// Note [Complex as pairs]: the device has no complex dtype. A complex64 tensor
// reaches these kernels as a float32 TensorRef over its (re, im) pairs: the
// tensor's own sizes, strides in floats (twice the complex strides), each
// element's imaginary part the float after its real part (torch's
// view_as_real without the pair dim). Math is float32, twiddles computed in
// double.
#pragma once

#include <cstdint>

#include "core/common/launch.h"
#include "core/common/tensor_ref.h"

namespace trn::kernels {

using rt::KernelInfo;

// One operand of ComplexBinary, broadcast to out's sizes (stride 0).
struct ComplexOperand {
  TensorRef t;        // pairs (Note [Complex as pairs]), or float32 values when real
  bool real = false;  // a float32 tensor: imaginary part 0
  bool conj = false;  // read conjugated (torch's conj bit)
  // A scalar instead of a tensor (t.data == nullptr): re + i im.
  double re = 0, im = 0;
};

enum class ComplexBinaryOp : uint8_t { kAdd, kSub, kMul, kDiv };
// out = a op b (kAdd / kSub: a +- alpha * b); out pairs of out's sizes.
// Division is C99's naive formula with Smith's scaling (as torch's CPU).
Status ComplexBinary(ComplexBinaryOp op, const TensorRef& out, const ComplexOperand& a,
                     const ComplexOperand& b, double alpha = 1.0);

// out = abs * (cos(angle) + i sin(angle)) (torch.polar); abs and angle float32
// broadcast to out's sizes; out pairs.
Status Polar(const TensorRef& out, const TensorRef& abs, const TensorRef& angle);

// Elementwise functions of complex in (pairs): kAbs |z| (the pair's hypot) and
// kAngle arg z (atan2(im, re)) into float32 values of in's sizes; kExp, kLog,
// kSqrt into pairs, std::exp / log / sqrt of std::complex<float> as CPU
// PyTorch's (exp(x + 0i) is exp(x) + 0i also where exp(x) overflows; log and
// sqrt take the principal branch, the cut along the negative reals).
enum class ComplexUnaryOp : uint8_t { kAbs, kAngle, kExp, kLog, kSqrt };
Status ComplexUnary(ComplexUnaryOp op, const TensorRef& out, const ComplexOperand& in);

// One-dimensional FFTs along `dim` of every line of in, written to out
// (sizes equal but at dim), scaled by `scale`:
//   kC2C: in and out pairs, n = in's size at dim = out's; out may be in.
//   kR2C: in float32 (n = its size at dim), out pairs with the first
//         out.sizes[dim] <= n bins (n / 2 + 1 onesided).
//   kC2R: in pairs with the first bins of a Hermitian line, out float32 with
//         n = out.sizes[dim] values (torch's irfft: bins past n / 2 are taken
//         as the conjugates of their mirrors, imaginary parts of the
//         self-conjugate bins ignored, missing bins 0).
// forward: exp(-2 pi i j k / n), else exp(+...). Any n >= 1: mixed radix 4, 2,
// 3, 5, then the other prime factors as plain DFTs (O(n p) per line), or the
// whole line as a convolution where a prime factor is large (Bluestein).
enum class FftKind : uint8_t { kC2C, kR2C, kC2R };
Status Fft(FftKind kind, const TensorRef& out, const ComplexOperand& in, int dim, bool forward,
           double scale);

KernelInfo DescribeComplex(const char* name, const TensorRef& out, uint64_t flops_per_elem,
                           const char* aten_op);
KernelInfo DescribeFft(FftKind kind, const TensorRef& out, const TensorRef& in, int dim,
                       const char* aten_op);

}  // namespace trn::kernels
