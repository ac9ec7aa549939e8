// Pass 7, memory plan: the temp buffers placed in one arena by lifetime.
#include <algorithm>
#include <utility>
#include <vector>

#include "core/compiler/kernel_graph.h"

namespace trn::compiler::internal {

// Note [Temp arena]
// Temp buffers share one allocation per run, placed by lifetime: a buffer
// whose last reader has run lends its bytes to one written later. Besides
// one allocation instead of dozens, this keeps a run's working set as small
// as eager's (whose allocator reuses a freed block at once): a kernel then
// writes cache-hot memory instead of fresh lines, which measured 10-35 %
// slower kernels on Llama. Steps run in order on one stream, so a step's
// buffers are the only ones it can touch while it runs.
constexpr int64_t kArenaAlign = 64;  // a cache line; any dtype's alignment

namespace {

// First and last step index that touches each buffer (-1: never).
std::vector<std::pair<int, int>> BufferLifetimes(const std::vector<Step>& steps,
                                                 const std::vector<EagerStep>& eager,
                                                 const std::vector<KernelImpl>& kernels,
                                                 size_t num_buffers) {
  std::vector<std::pair<int, int>> life(num_buffers, {-1, -1});
  auto touch = [&](int buffer, int step) {
    if (buffer < 0) return;
    auto& l = life[static_cast<size_t>(buffer)];
    if (l.first < 0) l.first = step;
    l.second = step;
  };
  for (size_t s = 0; s < steps.size(); ++s) {
    const int at = static_cast<int>(s);
    const Step& st = steps[s];
    if (st.kind == Step::Kind::kEager) {
      const EagerStep& e = eager[st.index];
      for (const View& v : e.inputs) touch(v.buffer, at);
      touch(e.output.buffer, at);
      continue;
    }
    const KernelImpl& k = kernels[st.index];
    for (const View* v : {&k.gemm.out, &k.gemm.a, &k.gemm.b, &k.gemm.bias, &k.copy_in,
                          &k.copy_out, &k.lib_out}) {
      touch(v->buffer, at);
    }
    for (const auto* vs : {&k.reads, &k.writes, &k.lib_ins}) {
      for (const View& v : *vs) touch(v.buffer, at);
    }
    for (const Operand& o : k.prog.operands) touch(o.buffer, at);
  }
  return life;
}

}  // namespace

// Places the temp buffers in the arena (largest first, lowest free offset
// among those alive at the same time) and returns the arena's size.
int64_t PlanTempArena(const std::vector<Step>& steps, const std::vector<EagerStep>& eager,
                      const std::vector<KernelImpl>& kernels, std::vector<Buffer>* buffers) {
  std::vector<Buffer>& bufs = *buffers;
  const std::vector<std::pair<int, int>> life = BufferLifetimes(steps, eager, kernels, bufs.size());
  std::vector<int> temps;
  for (size_t b = 0; b < bufs.size(); ++b) {
    if (bufs[b].kind == Buffer::Kind::kTemp) temps.push_back(static_cast<int>(b));
  }
  auto bytes = [&](int b) {
    const Buffer& buf = bufs[b];
    const int64_t n = std::max<int64_t>(buf.numel, 1) * static_cast<int64_t>(ItemSize(buf.dtype));
    return (n + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
  };
  std::stable_sort(temps.begin(), temps.end(), [&](int a, int b) { return bytes(a) > bytes(b); });
  std::vector<int> placed;
  int64_t total = 0;
  for (int b : temps) {
    // Untouched buffers (none expected) stay alive for the whole run.
    const int first = life[b].first < 0 ? 0 : life[b].first;
    const int last = life[b].first < 0 ? static_cast<int>(steps.size()) : life[b].second;
    std::vector<std::pair<int64_t, int64_t>> busy;  // [begin, end) bytes
    for (int o : placed) {
      const int of = life[o].first < 0 ? 0 : life[o].first;
      const int ol = life[o].first < 0 ? static_cast<int>(steps.size()) : life[o].second;
      if (of <= last && first <= ol) {
        busy.emplace_back(bufs[o].arena_offset, bufs[o].arena_offset + bytes(o));
      }
    }
    std::sort(busy.begin(), busy.end());
    int64_t at = 0;
    for (const auto& [begin, end] : busy) {
      if (at + bytes(b) <= begin) break;
      at = std::max(at, end);
    }
    bufs[b].arena_offset = at;
    total = std::max(total, at + bytes(b));
    placed.push_back(b);
  }
  return total;
}

}  // namespace trn::compiler::internal
