// Automatic mixed precision on the trn device: torch.autocast("trn", dtype=...).
//
// Note [Autocast]: inside an autocast region every op dispatches through the
// AutocastPrivateUse1 key first. With no kernel there (and no fallback) every
// op raised NotImplementedError, so torch.autocast("trn", dtype=torch.bfloat16)
// could not run a single linear. Ops without a policy fall through; the
// policies are CUDA's (ATen's op lists in ATen/autocast_mode.h): GEMMs,
// convolutions, attention and RNN cells in the autocast dtype, reductions and
// numerically sensitive ops (softmax, norms, exp/log, losses) in float32, and
// ops that mix dtypes promoted to the widest. trn computes bfloat16 and
// float16 in float32 and rounds on store (kernels.h), so the lower precision
// costs storage, not the accumulation.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace trn::bridge {
namespace {

// As on CUDA: binary_cross_entropy is unsafe in float16 / bfloat16.
at::Tensor BinaryCrossEntropyBanned(const at::Tensor&, const at::Tensor&,
                                    const std::optional<at::Tensor>&, int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to "
              "autocast on trn (as on CUDA): use binary_cross_entropy_with_logits / "
              "BCEWithLogitsLoss, which combine the sigmoid and the loss and are safe.");
}

}  // namespace

// ATen's policy macros name at:: types unqualified (they expand inside
// namespace at::autocast upstream).
using namespace at;  // NOLINT(build/namespaces)

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define TRN_AUTOCAST_LOWER(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
  AT_FORALL_LOWER_PRECISION_FP(TRN_AUTOCAST_LOWER)
#undef TRN_AUTOCAST_LOWER
#define TRN_AUTOCAST_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
  AT_FORALL_FP32(TRN_AUTOCAST_FP32)
#undef TRN_AUTOCAST_FP32
#define TRN_AUTOCAST_FP32_OPT(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
  AT_FORALL_FP32_SET_OPT_DTYPE(TRN_AUTOCAST_FP32_OPT)
#undef TRN_AUTOCAST_FP32_OPT
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
#define TRN_AUTOCAST_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_PROMOTE(TRN_AUTOCAST_PROMOTE)
#undef TRN_AUTOCAST_PROMOTE
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"),
         TORCH_FN(BinaryCrossEntropyBanned));
}

}  // namespace trn::bridge
