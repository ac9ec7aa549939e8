// TraceParser: the parser half of the reader (json_tokenizer.h is the other).
// The tokenizer hands it one event at a time; it reads only the fields the
// analyses use with simdjson On-Demand and appends plain records (names
// interned). Finish() then runs the passes of passes.h. Internal to
// core/analysis/reader.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/analysis/reader/json_tokenizer.h"
#include "core/analysis/reader/passes.h"
#include "core/analysis/reader/trace_model.h"

namespace trn::analysis {

// Builds a TraceModel from tokenizer callbacks. One thread.
class TraceParser final : public TokenSink {
 public:
  explicit TraceParser(TraceModel* m) : m_(m) {}

  bool OnEvent(std::string_view json, uint64_t offset) override;
  void OnTopLevel(std::string_view key, std::string_view json) override;
  std::string_view RejectReason() const override { return reject_reason_; }

  // Runs the model passes once every event is in.
  void Finish();

  // Copies json without commas that precede '}' or ']'; false if there are none.
  static bool RemoveTrailingCommas(std::string_view json, std::string* out);

 private:
  struct Fields;  // what one event says (event_parser.cc)

  bool Parse(std::string_view json);
  // Reads the fields, rejects malformed events, then hands them to one of the
  // Add* below by phase.
  bool ParseEvent(simdjson::ondemand::object& obj);
  bool ReadFields(simdjson::ondemand::object& obj, Fields* f);
  bool ReadArgs(simdjson::ondemand::object& args, Fields* f);
  bool AddSlice(const Fields& f);
  void AddMetadata(const Fields& f);
  bool AddFlow(const Fields& f);
  bool AddCounter(const Fields& f);
  uint32_t LaneFor(const std::string& pid, const std::string& tid);

  TraceModel* m_;
  simdjson::ondemand::parser parser_;
  simdjson::dom::parser dom_;
  std::string scratch_;
  const char* obj_end_ = nullptr;  // end of the event being parsed
  const char* reject_reason_ = "malformed event";  // why OnEvent last returned false
  std::string pid_, tid_, last_pid_, last_tid_;
  uint32_t last_lane_ = kNone;
  std::unordered_map<std::string, uint32_t> lane_ids_;
  std::vector<RawFlow> raw_flows_;
  std::vector<std::vector<Slice>> open_;  // per lane: "B" events
  LaneLabels labels_;                     // from metadata events
  std::unordered_map<std::string, size_t> counter_ids_;
  std::vector<std::pair<std::string, double>> counter_args_;
};

}  // namespace trn::analysis
