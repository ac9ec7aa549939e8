// NameLanes: a lane that holds a kernel or copy is a device lane; names come
// from thread_name / process_labels metadata, else from pid and tid.
#include <fmt/format.h>

#include "core/analysis/reader/json_values.h"
#include "core/analysis/reader/passes.h"

namespace trn::analysis {

void NameLanes(TraceModel& m, const LaneLabels& labels) {
  std::vector<uint8_t> device(m.lanes.size(), 0);
  for (const Slice& s : m.slices)
    if (s.on_device()) device[s.lane] = 1;
  for (size_t i = 0; i < m.lanes.size(); ++i) {
    Lane& l = m.lanes[i];
    l.kind = device[i] ? LaneKind::kDevice : LaneKind::kCpu;
    auto tn = labels.thread_names.find(l.pid + '\0' + l.tid);
    std::string thread = tn != labels.thread_names.end() ? std::string(Trim(tn->second)) : "";
    if (l.kind == LaneKind::kCpu) {
      l.name = !thread.empty() ? thread : fmt::format("thread {}", l.tid);
    } else if (thread.find(':') != std::string::npos) {
      l.name = thread;  // "trn:0 stream 0"
    } else {
      std::string proc;
      if (auto pl = labels.process_labels.find(l.pid); pl != labels.process_labels.end())
        proc = pl->second;
      if (proc.empty()) proc = fmt::format("device {}", l.pid);
      l.name = fmt::format("{} {}", proc, !thread.empty() ? thread : fmt::format("stream {}", l.tid));
    }
  }
}

}  // namespace trn::analysis
