// Pass 6, schedule: the program's steps in dependency order (a group runs
// after the groups whose memory it reads), graph order among independent ones.
#include <set>
#include <vector>

#include "core/common/assert.h"
#include "core/compiler/kernel_graph.h"

namespace trn::compiler::internal {

std::vector<Step> Schedule(const KernelGraph& ir, const std::vector<Step>& step_of_group) {
  std::vector<Step> steps;
  std::vector<int> waiting(ir.groups.size(), 0);
  std::vector<std::vector<int>> consumers(ir.groups.size());
  for (size_t gi = 0; gi < ir.groups.size(); ++gi) {
    for (int d : ir.groups[gi].deps) {
      waiting[gi]++;
      consumers[d].push_back(static_cast<int>(gi));
    }
  }
  std::set<int> ready;
  for (size_t gi = 0; gi < ir.groups.size(); ++gi) {
    if (waiting[gi] == 0) ready.insert(static_cast<int>(gi));
  }
  while (!ready.empty()) {
    const int gi = *ready.begin();
    ready.erase(ready.begin());
    steps.push_back(step_of_group[gi]);
    for (int c : consumers[gi]) {
      if (--waiting[c] == 0) ready.insert(c);
    }
  }
  TRN_ASSERT(steps.size() == ir.groups.size(), "kernel dependencies form a cycle");
  return steps;
}

}  // namespace trn::compiler::internal
