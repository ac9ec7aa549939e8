// trnscope.nki's way into the device model (core/isa, core/model, the device
// trace): Python describes an engine program as plain lists, C++ builds the
// executable, validates, simulates and writes the artifact and the trace.
#pragma once

#include <torch/extension.h>

namespace trn::bridge {

void BindDeviceModel(pybind11::module_& m);

}  // namespace trn::bridge
