// The boxed CPU fallback of the trn device (Note [CPU fallback] in docs/device.md),
// and the registration of native kernels that sends the dtypes they do not take
// to it (Note [dtypes the kernels do not take]).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/boxing/KernelFunction.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/ScalarType.h>
#include <torch/library.h>

#include <cstdint>
#include <climits>
#include <optional>
#include <string>
#include <utility>

namespace trn::bridge {

// Runs `op` on the CPU (warned once per op, counted in FallbackCounts, an
// error under TRN_DISABLE_FALLBACK=1). Ops without a CPU kernel
// (*_overrideable) run their CPU equivalent. Native kernels call it for the
// cases they do not run themselves, through
// at::native::call_fallback_fn_symint<&CpuFallback, at::_ops::OP>::call(...).
void CpuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Note [dtypes the kernels do not take]
// The native kernels compute float32 (float64 as float32, Note [float64 policy]),
// bfloat16, float16, int32, int64 and bool. An op given any other dtype (complex,
// uint8, int8, int16, float8, ...) in a tensor, a complex Scalar (or an integer
// one beyond int32) or a dtype argument runs
// through the CPU fallback, as an op without a kernel does: the CPU's result (or
// the CPU's error), counted and warned once, never an error the CPU would not give.
// The check is a few loads per argument, made before the kernel runs.
namespace dtypes {

// The dtypes ToDType (bridge.cc) maps to a kernel DType, as a mask: one load per check.
constexpr uint64_t Bit(at::ScalarType s) { return uint64_t{1} << static_cast<int>(s); }
constexpr uint64_t kNative = Bit(at::kFloat) | Bit(at::kDouble) | Bit(at::kBFloat16) |
                             Bit(at::kHalf) | Bit(at::kInt) | Bit(at::kLong) | Bit(at::kBool);

inline bool Native(at::ScalarType s) {
  const auto i = static_cast<unsigned>(s);
  return i < 64 && ((kNative >> i) & 1) != 0;
}
inline bool Native(std::optional<at::ScalarType> s) { return !s.has_value() || Native(*s); }
inline bool InInt32(int64_t v) { return v >= INT32_MIN && v <= INT32_MAX; }
inline bool Native(const at::Tensor& t) {
  if (!t.defined()) return true;
  if (!Native(t.scalar_type())) return false;
  // A Python int beside a trn tensor arrives as a 0-dim CPU int64 tensor.
  if (t.scalar_type() == at::kLong && t.dim() == 0 && t.is_cpu()) {
    return InInt32(*static_cast<const int64_t*>(t.const_data_ptr()));
  }
  return true;
}
inline bool Native(const std::optional<at::Tensor>& t) { return !t.has_value() || Native(*t); }
inline bool Native(at::TensorList list) {
  for (const at::Tensor& t : list) {
    if (!Native(t)) return false;
  }
  return true;
}
inline bool Native(const at::ITensorListRef& list) {
  for (const at::Tensor& t : list) {
    if (!Native(t)) return false;
  }
  return true;
}
inline bool Native(const c10::List<std::optional<at::Tensor>>& list) {
  for (const std::optional<at::Tensor> t : list) {
    if (!Native(t)) return false;
  }
  return true;
}
// Integer Scalars (and Python ints, 0-dim CPU int64 tensors) reach the kernels
// as doubles and saturate into int32: one outside int32's range (2**40,
// 2**62 + 1) computes on the CPU, exactly.
inline bool Native(const at::Scalar& s) {
  if (s.isComplex()) return false;
  if (!s.isIntegral(/*includeBool=*/false)) return true;
  return InInt32(s.toLong());
}
inline bool Native(const std::optional<at::Scalar>& s) { return !s.has_value() || Native(*s); }
// Sizes, flags, strings, generators: nothing to check.
template <class T>
bool Native(const T&) {
  return true;
}

// Matmul and convolution kernels compute floating dtypes only; the CPU also
// multiplies integers.
inline bool Floating(const at::Tensor& t) {
  return !t.defined() || at::isFloatingType(t.scalar_type());
}
inline bool Floating(const std::optional<at::Tensor>& t) { return !t.has_value() || Floating(*t); }
template <class T>
bool Floating(const T&) {
  return true;
}

// The op a kernel function is registered for, set once at registration (a
// function-local static: registration runs during static initialization).
struct OpName {
  std::string name, overload;
};
template <auto fn>
OpName& OpOf() {
  static OpName op;
  return op;
}

// Note [Complex kernels]: a few ops (arithmetic, abs) have a second kernel for
// complex64 (ops_complex.cc). It runs when every tensor is complex64 (no
// negative bit) or a native dtype, or a 0-dim CPU scalar of any complex dtype.
inline bool ComplexNative(const at::Tensor& t) {
  if (!t.defined() || Native(t)) return true;
  if (t.dim() == 0 && t.is_cpu() && at::isComplexType(t.scalar_type())) return true;
  return t.scalar_type() == at::kComplexFloat && !t.is_neg();
}
inline bool ComplexNative(const at::Scalar& s) { return !s.isIntegral(false) || InInt32(s.toLong()); }
inline bool ComplexNative(const at::ITensorListRef& list) {
  for (const at::Tensor& t : list) {
    if (!ComplexNative(t)) return false;
  }
  return true;
}
template <class T>
bool ComplexNative(const T&) {
  return true;
}

// The op on the CPU, through the boxed fallback.
template <auto fn, class R, class... A>
R ToFallback(A... args) {
  static const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow(
      OpOf<fn>().name.c_str(), OpOf<fn>().overload.c_str());
  return c10::impl::BoxedKernelWrapper<R(A...)>::call(
      c10::BoxedKernel::makeFromFunction<&CpuFallback>(), op, c10::DispatchKeySet(),
      std::forward<A>(args)...);
}

template <auto fn, bool floating, class Sig>
struct Guarded;
template <auto fn, bool floating, class R, class... A>
struct Guarded<fn, floating, R(A...)> {
  static R call(A... args) {
    if ((Native(args) && ...) && (!floating || (Floating(args) && ...))) {
      return fn(std::forward<A>(args)...);
    }
    return ToFallback<fn, R, A...>(std::forward<A>(args)...);
  }
};

template <auto fn, auto complex_fn, class Sig>
struct GuardedComplex;
template <auto fn, auto complex_fn, class R, class... A>
struct GuardedComplex<fn, complex_fn, R(A...)> {
  static R call(A... args) {
    if ((Native(args) && ...)) return fn(std::forward<A>(args)...);
    if ((ComplexNative(args) && ...)) return complex_fn(std::forward<A>(args)...);
    return ToFallback<fn, R, A...>(std::forward<A>(args)...);
  }
};

}  // namespace dtypes

// Registers aten kernels at PrivateUse1 with the dtype check in front
// (Note [dtypes the kernels do not take]):
//   TORCH_LIBRARY_IMPL(aten, PrivateUse1, lib) {
//     NativeKernels m(lib);
//     m.impl("add.Tensor", TORCH_FN(Add));
class NativeKernels {
 public:
  explicit NativeKernels(torch::Library& lib) : lib_(lib) {}

  template <class F, F* fn>
  NativeKernels& impl(const char* schema_name, c10::CompileTimeFunctionPointer<F, fn>) {
    return Register<F, fn, false>(schema_name);
  }
  // A kernel that takes every dtype itself (data movement), without the check.
  template <class F, F* fn>
  NativeKernels& impl_all_dtypes(const char* schema_name,
                                 c10::CompileTimeFunctionPointer<F, fn> kernel) {
    lib_.impl(schema_name, kernel);
    return *this;
  }
  // A kernel with a complex64 twin (Note [Complex kernels]).
  template <class F, F* fn, F* complex_fn>
  NativeKernels& impl_complex(const char* schema_name, c10::CompileTimeFunctionPointer<F, fn>,
                              c10::CompileTimeFunctionPointer<F, complex_fn>) {
    NameOp<fn>(schema_name);
    lib_.impl(schema_name, TORCH_FN((dtypes::GuardedComplex<fn, complex_fn, F>::call)));
    return *this;
  }
  // A kernel whose tensors must all be floating (matmul, convolution).
  template <class F, F* fn>
  NativeKernels& impl_floating(const char* schema_name, c10::CompileTimeFunctionPointer<F, fn>) {
    return Register<F, fn, true>(schema_name);
  }

 private:
  // The op fn's fallback runs. A function registered for several ops
  // (aliases such as __lshift__ and bitwise_left_shift) computes one thing:
  // the first op stands for all.
  template <auto fn>
  static void NameOp(const char* schema_name) {
    const std::string full(schema_name);
    const size_t dot = full.find('.');
    dtypes::OpName& op = dtypes::OpOf<fn>();
    if (op.name.empty()) {
      op = {"aten::" + full.substr(0, dot), dot == std::string::npos ? "" : full.substr(dot + 1)};
    }
  }
  template <class F, F* fn, bool floating>
  NativeKernels& Register(const char* schema_name) {
    NameOp<fn>(schema_name);
    lib_.impl(schema_name, TORCH_FN((dtypes::Guarded<fn, floating, F>::call)));
    return *this;
  }

  torch::Library& lib_;
};

}  // namespace trn::bridge
