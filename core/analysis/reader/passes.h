// The passes that turn the parser's raw records into a TraceModel, run in
// this order by TraceParser::Finish (event_parser.cc):
//   NameLanes        lanes.cc    lane kinds (CPU or device) and display names
//   SortSlices       nesting.cc  by lane, then start, longer first; lane ranges
//   NestCpuLanes     nesting.cc  parents, depth and self time on CPU lanes
//   MergeRepeatedOps nesting.cc  an op whose only child has its name counts once
//   ResolveFlows     flows.cc    flow starts and ends paired and bound to slices
//   LinkDeviceWork   linking.cc  kernels and copies to their ops (Note [Linking])
// Internal to core/analysis/reader; one thread per model.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/analysis/reader/trace_model.h"

namespace trn::analysis {

// Names from "M" (metadata) events, as the parser collected them.
struct LaneLabels {
  std::unordered_map<std::string, std::string> thread_names;    // pid '\0' tid -> name
  std::unordered_map<std::string, std::string> process_labels;  // pid -> labels
};

// One "s"/"f" flow event before pairing.
struct RawFlow {
  uint32_t cat;
  uint64_t id;
  int64_t ts;
  uint32_t lane;
  bool start;
  bool enclosing;  // "bp":"e" (or a start: always the enclosing slice)
};

void NameLanes(TraceModel& m, const LaneLabels& labels);
void SortSlices(TraceModel& m);
void NestCpuLanes(TraceModel& m);
// Returns, per slice, the op that stands for it in the tables (itself, or the
// same-named parent it was folded into).
std::vector<uint32_t> MergeRepeatedOps(TraceModel& m);
// Consumes *raw.
void ResolveFlows(TraceModel& m, std::vector<RawFlow>* raw);
void LinkDeviceWork(TraceModel& m, const std::vector<uint32_t>& owner);

// Lookups over a sorted model.
// Innermost slice on `lane` that contains ts (or starts exactly at it).
uint32_t Enclosing(const TraceModel& m, uint32_t lane, int64_t ts);
// First slice on `lane` that starts at or after ts.
uint32_t Next(const TraceModel& m, uint32_t lane, int64_t ts);
// i or its nearest enclosing op (kNone if none).
uint32_t OpAncestor(const TraceModel& m, uint32_t i);

}  // namespace trn::analysis
