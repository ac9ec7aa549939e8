#include "cli/device_commands.h"

#include <fmt/format.h>

#include <cstdio>

#include "core/export/device_trace.h"
#include "core/isa/executable.h"
#include "core/isa/inspect.h"
#include "core/isa/target.h"
#include "core/model/report.h"
#include "core/model/simulator.h"

namespace trn::cli {
namespace {

enum Exit { kOk = 0, kUsage = 1, kBadInput = 2, kWriteError = 4 };

int Fail(int code, const std::string& message) {
  fmt::print(stderr, "trnscope: error: {}\n", message);
  return code;
}

}  // namespace

void AddDeviceCommands(CLI::App& app, DeviceCommands* d) {
  d->inspect =
      app.add_subcommand("inspect",
                         "List an executable artifact: header, I/O tensors, SBUF/PSUM plan, "
                         "instructions per engine with operands and source lines");
  d->inspect->add_option("ARTIFACT", d->artifact, "executable (.trnx)")->required();
  d->inspect->add_option("--first", d->first, "instructions to list per engine")
      ->capture_default_str();
  d->profile = app.add_subcommand("device-profile",
                                  "Simulate an executable on a modelled NeuronCore and print a "
                                  "Neuron-Explorer-style summary (modelled, not measured)");
  d->profile->add_option("ARTIFACT", d->artifact, "executable (.trnx)")->required();
  d->profile->add_option("-o,--output", d->trace_out, "write the device trace (Chrome JSON)");
  d->profile->add_option("--target", d->target, "trn1 or trn2 (default: the artifact's)");
}

int RunDeviceCommands(const DeviceCommands& d) {
  if (!d.inspect->parsed() && !d.profile->parsed()) return -1;
  isa::Executable exe;
  if (Status s = isa::Load(d.artifact, &exe); !s.ok()) return Fail(kBadInput, s.error);
  if (d.inspect->parsed()) {
    const std::string text = isa::FormatInspect(exe, d.first);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return kOk;
  }
  if (!d.target.empty()) {
    isa::Target t;
    if (!isa::ParseTarget(d.target, &t)) {
      return Fail(kUsage,
                  fmt::format("--target '{}' is not a target; expected trn1 or trn2", d.target));
    }
    exe.target = t;
  }
  model::Timeline timeline;
  if (Status s = model::Simulate(exe, {}, &timeline); !s.ok()) {
    return Fail(kBadInput,
                fmt::format("{} on {}: {}", d.artifact, isa::Spec(exe.target).name, s.error));
  }
  const std::string text = model::FormatDeviceProfile(exe, timeline);
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (!d.trace_out.empty()) {
    exporter::DeviceTraceStats stats;
    if (Status s = exporter::WriteDeviceTrace(exe, timeline, d.trace_out, &stats); !s.ok()) {
      return Fail(kWriteError, s.error);
    }
    fmt::print("wrote {} ({} events, {} dependency flows{})\n", d.trace_out, stats.events,
               stats.flows, stats.flows_truncated ? ", truncated" : "");
  }
  return kOk;
}

}  // namespace trn::cli
