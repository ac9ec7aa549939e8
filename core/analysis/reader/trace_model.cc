#include "core/analysis/reader/trace_model.h"

#include <algorithm>
#include <cstring>

namespace trn::analysis {

StringTable::StringTable() {
  views_.emplace_back();
  ids_.emplace(std::string_view(), 0);
}

uint32_t StringTable::Intern(std::string_view s) {
  auto it = ids_.find(s);
  if (it != ids_.end()) return it->second;
  if (s.size() > block_left_) {
    const size_t n = std::max<size_t>(s.size(), 64 << 10);
    blocks_.emplace_back(new char[n]);
    block_pos_ = blocks_.back().get();
    block_left_ = n;
  }
  std::memcpy(block_pos_, s.data(), s.size());
  std::string_view stored(block_pos_, s.size());
  block_pos_ += s.size();
  block_left_ -= s.size();
  const auto id = static_cast<uint32_t>(views_.size());
  views_.push_back(stored);
  ids_.emplace(stored, id);
  return id;
}

const char* SliceKindName(SliceKind k) {
  switch (k) {
    case SliceKind::kOp: return "op";
    case SliceKind::kRuntime: return "runtime";
    case SliceKind::kKernel: return "kernel";
    case SliceKind::kCopy: return "copy";
  }
  return "?";
}

const char* LinkViaName(LinkVia v) {
  switch (v) {
    case LinkVia::kNone: return "";
    case LinkVia::kExternalId: return "external_id";
    case LinkVia::kCorrelation: return "correlation";
    case LinkVia::kFlow: return "flow";
  }
  return "";
}

}  // namespace trn::analysis
