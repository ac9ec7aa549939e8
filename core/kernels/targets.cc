// SIMD target selection: which Highway targets this binary compiled and this
// CPU runs, and a test hook that pins one of them for every HWY_DYNAMIC_DISPATCH
// in the kernels (all kernel TUs share Highway's global chosen target).

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/kernels/targets.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace trn::kernels::HWY_NAMESPACE {
int64_t ThisTarget() { return HWY_TARGET; }
}  // namespace trn::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <algorithm>

#include "core/common/assert.h"
#include "core/kernels/kernels.h"

namespace trn::kernels {

HWY_EXPORT(ThisTarget);

std::vector<int64_t> CompiledTargets() {
  // Computed before any SetTarget mock (SetTarget calls this first).
  static const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  return targets;
}

const char* TargetName(int64_t target) {
  return target == 0 ? "best" : hwy::TargetName(target);
}

void SetTarget(int64_t target) {
  const std::vector<int64_t> compiled = CompiledTargets();
  TRN_ASSERT(target == 0 || std::find(compiled.begin(), compiled.end(), target) != compiled.end(),
             "SetTarget: target not compiled or not supported by this CPU");
  // Resets Highway's chosen target, so the next dispatch re-resolves.
  hwy::SetSupportedTargetsForTest(target);
}

int64_t ActiveTarget() { return HWY_DYNAMIC_DISPATCH(ThisTarget)(); }

}  // namespace trn::kernels
#endif  // HWY_ONCE
