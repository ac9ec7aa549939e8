// Human-readable numbers used in every text the analyzer writes (insights,
// summary, compare); deterministic. Pure; any thread.
#pragma once

#include <cstdint>
#include <string>

namespace trn::analysis {

std::string FormatNs(int64_t ns);
std::string FormatBytes(uint64_t bytes);
std::string FormatCount(double v);  // 12.6 G, 3.4 M, ...

}  // namespace trn::analysis
