// `trnscope inspect` and `trnscope device-profile`: the device-level view of an
// executable artifact (docs/device_model.md). Modelled, never measured.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace trn::cli {

struct DeviceCommands {
  CLI::App* inspect = nullptr;
  CLI::App* profile = nullptr;
  std::string artifact, trace_out, target;
  int first = 8;
};

void AddDeviceCommands(CLI::App& app, DeviceCommands* d);
// The exit code when one of them was parsed, -1 otherwise.
int RunDeviceCommands(const DeviceCommands& d);

}  // namespace trn::cli
