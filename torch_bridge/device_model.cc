#include "torch_bridge/device_model.h"

#include <fmt/format.h>

#include <string>

#include "core/export/device_trace.h"
#include "core/isa/executable.h"
#include "core/isa/target.h"
#include "core/model/report.h"
#include "core/model/simulator.h"

namespace trn::bridge {
namespace {

namespace py = pybind11;

[[noreturn]] void Bad(const std::string& what) { throw py::value_error(what); }

template <typename E>
E Parse(bool (*parse)(std::string_view, E*), const std::string& name, const char* what) {
  E v;
  if (!parse(name, &v)) Bad(fmt::format("device model: unknown {} '{}'", what, name));
  return v;
}

// (memory, dtype, buffer, partition_start, partitions, partition_stride,
//  offset, sizes, strides) or None.
isa::Tile TileOf(const py::handle& h) {
  isa::Tile t;
  if (h.is_none()) return t;
  const py::tuple x = h.cast<py::tuple>();
  if (x.size() != 9) Bad(fmt::format("device model: a tile has 9 fields, got {}", x.size()));
  t.memory = Parse(isa::ParseMemory, x[0].cast<std::string>(), "memory");
  t.dtype = Parse(ParseDType, x[1].cast<std::string>(), "dtype");
  t.buffer = x[2].cast<uint32_t>();
  t.partition_start = x[3].cast<int32_t>();
  t.partitions = x[4].cast<int32_t>();
  t.partition_stride = x[5].cast<int64_t>();
  t.offset = x[6].cast<int64_t>();
  const auto sizes = x[7].cast<std::vector<int64_t>>();
  const auto strides = x[8].cast<std::vector<int64_t>>();
  if (sizes.empty() || sizes.size() > isa::kMaxFreeDims || sizes.size() != strides.size()) {
    Bad(
        fmt::format("device model: a tile has 1..{} free dims with one stride each, got {} "
                    "sizes and {} strides",
                    isa::kMaxFreeDims, sizes.size(), strides.size()));
  }
  t.ndim = static_cast<int32_t>(sizes.size());
  for (size_t d = 0; d < sizes.size(); ++d) {
    t.sizes[d] = sizes[d];
    t.strides[d] = strides[d];
  }
  return t;
}

isa::Executable Build(const py::dict& p) {
  isa::Executable exe;
  exe.name = p["name"].cast<std::string>();
  const std::string target = p["target"].cast<std::string>();
  if (!isa::ParseTarget(target, &exe.target)) {
    Bad(fmt::format("target '{}' is not a target; expected \"trn1\" or \"trn2\"", target));
  }
  for (const py::handle& h : p["tensors"]) {
    const py::tuple x = h.cast<py::tuple>();
    exe.tensors.push_back(
        {x[0].cast<std::string>(), Parse(isa::ParseTensorKind, x[1].cast<std::string>(), "tensor kind"),
         Parse(ParseDType, x[2].cast<std::string>(), "dtype"), x[3].cast<std::vector<int64_t>>()});
  }
  for (const py::handle& h : p["allocations"]) {
    const py::tuple x = h.cast<py::tuple>();
    exe.allocations.push_back(
        {x[0].cast<std::string>(), Parse(isa::ParseMemory, x[1].cast<std::string>(), "memory"),
         x[2].cast<int32_t>(), x[3].cast<int32_t>(), x[4].cast<int64_t>(), x[5].cast<int64_t>()});
  }
  for (const py::handle& h : p["sources"]) {
    const py::tuple x = h.cast<py::tuple>();
    exe.sources.push_back({x[0].cast<std::string>(), x[1].cast<int32_t>(), x[2].cast<std::string>(),
                           x[3].cast<int64_t>()});
  }
  // (opcode, engine, op0, op1, func, accumulate, queue, semaphore, value, imm0,
  //  imm1, dst, src0, src1, source)
  for (const py::handle& h : p["instructions"]) {
    const py::tuple x = h.cast<py::tuple>();
    if (x.size() != 15) {
      Bad(fmt::format("device model: an instruction has 15 fields, got {}", x.size()));
    }
    isa::Instruction ins;
    ins.opcode = Parse(isa::ParseOpcode, x[0].cast<std::string>(), "opcode");
    ins.engine = Parse(isa::ParseEngine, x[1].cast<std::string>(), "engine");
    ins.op0 = Parse(isa::ParseAluOp, x[2].cast<std::string>(), "ALU op");
    ins.op1 = Parse(isa::ParseAluOp, x[3].cast<std::string>(), "ALU op");
    ins.func = Parse(isa::ParseActivationFunc, x[4].cast<std::string>(), "activation function");
    ins.accumulate = x[5].cast<bool>();
    ins.queue = x[6].cast<uint8_t>();
    ins.semaphore = x[7].cast<uint16_t>();
    ins.value = x[8].cast<uint32_t>();
    ins.imm0 = x[9].cast<double>();
    ins.imm1 = x[10].cast<double>();
    ins.dst = TileOf(x[11]);
    ins.src0 = TileOf(x[12]);
    ins.src1 = TileOf(x[13]);
    ins.source = x[14].is_none() ? isa::kNone : x[14].cast<uint32_t>();
    exe.instructions.push_back(ins);
  }
  return exe;
}

py::object Run(const py::dict& program, const std::string& save_path, const std::string& trace_path,
               bool tensor_throttle, bool simulate) {
  const isa::Executable exe = Build(program);
  if (!simulate) {  // validate, and save when asked (Save validates)
    const Status s = save_path.empty() ? isa::Validate(exe) : isa::Save(exe, save_path);
    if (!s.ok()) throw py::value_error(s.error);
    return py::none();
  }
  model::SimOptions options;
  options.tensor_throttle = tensor_throttle;
  options.record_dependencies = !trace_path.empty();
  model::Timeline t;
  {
    py::gil_scoped_release no_gil;
    if (Status s = model::Simulate(exe, options, &t); !s.ok()) throw py::value_error(s.error);
  }
  if (!save_path.empty()) {
    if (Status s = isa::Save(exe, save_path); !s.ok()) throw py::value_error(s.error);
  }
  if (!trace_path.empty()) {
    exporter::DeviceTraceStats stats;
    if (Status s = exporter::WriteDeviceTrace(exe, t, trace_path, &stats); !s.ok()) {
      throw py::value_error(s.error);
    }
  }
  const model::Metrics m = model::ComputeMetrics(exe, t);
  py::dict active, counts;
  for (int e = 0; e < isa::kNumEngines; ++e) {
    const char* name = isa::EngineName(static_cast<isa::Engine>(e));
    active[name] = t.engine_active_ns[e];
    counts[name] = t.instruction_counts[e];
  }
  py::dict r;
  r["target"] = isa::Spec(exe.target).name;
  r["total_ns"] = t.total_ns;
  r["engine_active_ns"] = active;
  r["instruction_counts"] = counts;
  r["hfu"] = m.hfu;
  r["mfu"] = m.mfu;
  r["mbu"] = m.mbu;
  r["arithmetic_intensity"] = m.arithmetic_intensity;
  r["ridge_point"] = m.ridge_point;
  r["bound"] = m.memory_bound ? "memory" : "compute";
  r["average_dma_bytes"] = m.average_dma_bytes;
  r["hbm_bytes"] = t.hbm_bytes;
  r["tensor_flops"] = t.tensor_flops;
  r["recommendations"] = model::Recommendations(exe, t);
  r["summary"] = model::FormatDeviceProfile(exe, t);
  r["error_bound_pct"] = model::kErrorBoundPct;
  return r;
}

}  // namespace

void BindDeviceModel(py::module_& m) {
  m.def("_device_model_run", &Run, py::arg("program"), py::arg("save_path") = "",
        py::arg("trace_path") = "", py::arg("tensor_throttle") = false, py::arg("simulate") = true,
        "Build, validate and simulate an engine program (trnscope.nki); optionally save the "
        "executable and write the device trace. simulate=False only validates (and saves).");
}

}  // namespace trn::bridge
