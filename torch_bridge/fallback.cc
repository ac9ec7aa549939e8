// The boxed CPU fallback for aten ops without a native trn kernel
// (Note [CPU fallback] in docs/device.md): warns once per op, counts every
// call, and is an error under TRN_DISABLE_FALLBACK=1.
//
// Note [overrideable ops on the CPU]
// Some ops exist only as hooks for out-of-tree backends and have no CPU kernel:
// aten::_convolution sends every non-CPU/CUDA convolution to
// convolution_overrideable (and its backward to
// convolution_backward_overrideable). The generic cpu_fallback would ask the
// CPU for that very op and raise NotImplementedError, so these ops run their
// CPU equivalent instead (at::convolution / at::convolution_backward on CPU
// copies of the arguments), counted and warned like any fallback.
#include "torch_bridge/fallback.h"

#include <ATen/core/Tensor.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <torch/library.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "torch_bridge/bridge.h"
#include "torch_bridge/device.h"

namespace trn::bridge {
namespace {

std::mutex fallback_mu;
std::unordered_map<std::string, int64_t> fallback_counts;

bool FallbackDisabled() {
  static const bool disabled = [] {
    const char* v = std::getenv("TRN_DISABLE_FALLBACK");
    return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
  }();
  return disabled;
}

std::string OpName(const c10::OperatorHandle& op) {
  const c10::OperatorName& name = op.schema().operator_name();
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

at::Tensor ToCpu(const at::Tensor& t) { return t.defined() ? t.to(at::kCPU) : t; }
at::Tensor ToDevice(const at::Tensor& t, c10::Device device) {
  return t.defined() ? t.to(device) : t;
}
std::vector<int64_t> IntList(const c10::IValue& v) {
  if (v.isIntList()) return v.toIntVector();
  std::vector<int64_t> out;
  for (const c10::SymInt& s : v.toSymIntList()) out.push_back(s.guard_int(__FILE__, __LINE__));
  return out;
}

// convolution_overrideable(input, weight, bias?, stride, padding, dilation,
// transposed, output_padding, groups) -> Tensor
void ConvolutionOnCpu(torch::jit::Stack* stack) {
  auto args = torch::jit::last(*stack, 9);
  const at::Tensor input = args[0].toTensor();
  const at::Tensor weight = args[1].toTensor();
  const std::optional<at::Tensor> bias = args[2].toOptional<at::Tensor>();
  const auto stride = IntList(args[3]), padding = IntList(args[4]), dilation = IntList(args[5]);
  const bool transposed = args[6].toBool();
  const auto output_padding = IntList(args[7]);
  const int64_t groups = args[8].toInt();
  std::optional<at::Tensor> cpu_bias;
  if (bias.has_value() && bias->defined()) cpu_bias = ToCpu(*bias);
  at::Tensor out = at::convolution(ToCpu(input), ToCpu(weight), cpu_bias, stride, padding,
                                   dilation, transposed, output_padding, groups);
  torch::jit::drop(*stack, 9);
  torch::jit::push(*stack, ToDevice(out, input.device()));
}

// convolution_backward_overrideable(grad_output, input, weight, stride, padding,
// dilation, transposed, output_padding, groups, output_mask) -> (gi, gw, gb)
void ConvolutionBackwardOnCpu(torch::jit::Stack* stack) {
  auto args = torch::jit::last(*stack, 10);
  const at::Tensor grad = args[0].toTensor();
  const at::Tensor input = args[1].toTensor();
  const at::Tensor weight = args[2].toTensor();
  const auto stride = IntList(args[3]), padding = IntList(args[4]), dilation = IntList(args[5]);
  const bool transposed = args[6].toBool();
  const auto output_padding = IntList(args[7]);
  const int64_t groups = args[8].toInt();
  const auto mask_list = args[9].toBoolList();
  const std::array<bool, 3> mask = {mask_list.get(0), mask_list.get(1), mask_list.get(2)};
  // The bias gradient's size: Cout (weight dim 0, or dim 1 * groups transposed).
  const int64_t cout = transposed ? weight.size(1) * groups : weight.size(0);
  std::optional<std::vector<int64_t>> bias_sizes;
  if (mask[2]) bias_sizes = std::vector<int64_t>{cout};
  auto [gi, gw, gb] = at::convolution_backward(
      ToCpu(grad), ToCpu(input), ToCpu(weight),
      bias_sizes ? at::OptionalIntArrayRef(*bias_sizes) : std::nullopt, stride, padding,
      dilation, transposed, output_padding, groups, mask);
  torch::jit::drop(*stack, 10);
  const c10::Device device = input.device();
  torch::jit::push(*stack, ToDevice(gi, device), ToDevice(gw, device), ToDevice(gb, device));
}

}  // namespace

void CpuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const std::string name = OpName(op);
  TORCH_CHECK_NOT_IMPLEMENTED(!FallbackDisabled(), "trn: ", name,
                              " is not implemented natively and TRN_DISABLE_FALLBACK=1 forbids "
                              "running it on the CPU");
  bool first;
  {
    std::lock_guard<std::mutex> lock(fallback_mu);
    first = fallback_counts[name]++ == 0;
  }
  if (first) {
    TORCH_WARN("trn: ", name,
               " is not implemented natively; running on the CPU (copies to and from the host)");
  }
  // Inputs may still be written by queued kernels on any stream.
  SyncAllDevices();
  // Note [overrideable ops on the CPU]
  if (name == "aten::convolution_overrideable") return ConvolutionOnCpu(stack);
  if (name == "aten::convolution_backward_overrideable") return ConvolutionBackwardOnCpu(stack);
  at::native::cpu_fallback(op, stack);
}

namespace {
TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&CpuFallback>());
}
}  // namespace

std::map<std::string, int64_t> FallbackCounts() {
  std::lock_guard<std::mutex> lock(fallback_mu);
  return {fallback_counts.begin(), fallback_counts.end()};
}

void ResetCounters() {
  {
    std::lock_guard<std::mutex> lock(fallback_mu);
    fallback_counts.clear();
  }
  ResetFloat64Counts();
}

}  // namespace trn::bridge
