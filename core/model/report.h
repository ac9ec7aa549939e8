// The text summary of a modelled device profile, shaped like Neuron
// Explorer's summary page (reference/neuroncore.md, "The device view Neuron
// Explorer shows"), and its recommendations from thresholds.
#pragma once

#include <string>
#include <vector>

#include "core/isa/executable.h"
#include "core/model/simulator.h"

namespace trn::model {

// 1 to 4 recommendations, most important first (thresholds in report.cc).
std::vector<std::string> Recommendations(const isa::Executable& exe, const Timeline& t);

// total time, HFU / MFU / MBU, arithmetic intensity against the ridge point,
// per-engine active time and instruction counts, average DMA size, and the
// recommendations; labelled modelled, with the target and the error bound.
std::string FormatDeviceProfile(const isa::Executable& exe, const Timeline& t);

}  // namespace trn::model
