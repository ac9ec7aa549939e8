// trnscope._C: the Python face of the device runtime (the only TU with pybind).
#include <pybind11/functional.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/extension.h>
#include <unistd.h>

#include "core/compiler/kernel_graph.h"
#include "core/export/chrome_trace.h"
#include "core/kernels/bandwidth.h"
#include "core/trace/trace.h"
#include "torch_bridge/bridge.h"
#include "torch_bridge/compile.h"
#include "torch_bridge/device_model.h"
#include "torch_bridge/device.h"
#include "torch_bridge/profiler.h"

namespace trn::bridge {
namespace {

int Resolve(int device_index) { return device_index < 0 ? CurrentDevice() : device_index; }

py::dict MemoryStats(int device_index) {
  const rt::MemoryStats s = GetDevice(Resolve(device_index)).allocator().Stats();
  py::dict d;
  d["allocated_bytes"] = s.allocated;
  d["reserved_bytes"] = s.reserved;
  d["peak_allocated_bytes"] = s.peak_allocated;
  d["num_allocs"] = s.num_allocs;
  d["num_frees"] = s.num_frees;
  d["capacity_bytes"] = s.capacity;
  return d;
}

// {method: GB/s} of kernels::MeasureBandwidth, run on the device's core thread
// through its current stream (Note [Host peak] in core/kernels/bandwidth.cc).
py::dict HostBandwidth(int device_index, int64_t nbytes, int repeats) {
  TORCH_CHECK_VALUE(nbytes >= 4096 && nbytes % 4 == 0,
                    "host_bandwidth: nbytes must be a multiple of 4 and at least 4096, got ",
                    nbytes);
  TORCH_CHECK_VALUE(repeats >= 1 && repeats <= 1000,
                    "host_bandwidth: repeats must be in 1..1000, got ", repeats);
  const int index = Resolve(device_index);
  const int64_t count = nbytes / 4;
  at::Tensor a = Empty({count}, at::kFloat, index), b = Empty({count}, at::kFloat, index),
             c = Empty({count}, at::kFloat, index);
  auto samples = std::make_shared<std::vector<kernels::BandwidthSample>>();
  rt::KernelInfo info;
  info.name = "host_bandwidth_probe";
  info.op = "trnscope::host_bandwidth";
  Launch(index, info,
         [samples, pa = a.data_ptr<float>(), pb = b.data_ptr<float>(), pc = c.data_ptr<float>(),
          count, repeats] {
           *samples = kernels::MeasureBandwidth(pa, pb, pc, static_cast<size_t>(count), repeats);
           return Status::Ok();
         });
  {
    py::gil_scoped_release no_gil;
    SyncCurrentStream(index);  // a, b, c stay alive until the probe has run
  }
  py::dict d;
  for (const kernels::BandwidthSample& s : *samples) d[s.method] = s.bytes_per_s / 1e9;
  return d;
}

TrnGenerator* Gen(int device_index) {
  return at::check_generator<TrnGenerator>(DefaultGenerator(Resolve(device_index)));
}

py::dict LastSessionDict() {
  const DeviceSession s = LastDeviceSession();
  py::dict d;
  d["id"] = s.id;
  d["from_profile_config"] = s.from_profile_config;
  d["started"] = s.started;
  d["synchronized_at_stop"] = s.synchronized_at_stop;
  d["commands_in_flight"] = s.commands_in_flight;
  d["device_records"] = s.device_records;
  d["unlinked"] = s.unlinked;
  py::list dropped;
  uint64_t records = 0, dropped_total = 0;
  int64_t start_ns = 0, stop_ns = 0;
  if (s.collected != nullptr) {
    records = s.collected->records.size();
    start_ns = s.collected->start_ns;
    stop_ns = s.collected->stop_ns;
    dropped_total = s.collected->dropped_total;
    for (uint64_t n : s.collected->dropped_per_device) dropped.append(n);
  }
  d["records"] = records;
  d["start_ns"] = start_ns;
  d["stop_ns"] = stop_ns;
  d["dropped_total"] = dropped_total;
  d["dropped_per_core"] = dropped;
  return d;
}

// Writes the combined trace of a torch.profiler result (prof.profiler.kineto_results)
// and the last device session. Returns the exporter's counts.
py::dict ExportChromeTrace(const torch::autograd::profiler::ProfilerResult& result,
                           const std::string& path, const std::string& metadata_json,
                           bool with_device) {
  exporter::ExportInput input;
  input.host_ops = HostOpsOf(result);
  const DeviceSession session = LastDeviceSession();
  if (with_device) input.device = session.collected.get();
  input.pid = getpid();
  input.metadata_json = metadata_json;
  exporter::ExportStats stats;
  {
    py::gil_scoped_release no_gil;
    stats = exporter::WriteChromeTrace(input, path);
  }
  py::dict d;
  d["events"] = stats.events;
  d["flows"] = stats.flows;
  d["bytes"] = stats.bytes;
  d["unlinked"] = stats.unlinked;
  d["host_ops"] = input.host_ops.size();
  return d;
}

}  // namespace
}  // namespace trn::bridge

// torch.compile(backend="trn"): the graph builder and programs (compile.h),
// used by trnscope/compile/backend.py.
namespace trn::bridge {
namespace {

py::dict KernelDict(const compiler::KernelSummary& k) {
  py::dict d;
  d["name"] = k.name;
  d["aten_ops"] = k.aten_ops;
  d["flops"] = k.info.flops;
  d["bytes_read"] = k.info.bytes_read;
  d["bytes_written"] = k.info.bytes_written;
  d["engine"] = rt::EngineName(k.info.engine);
  return d;
}

void BindCompile(py::module_& m) {
  py::class_<GraphBuilder>(m, "_CompileGraph")
      .def(py::init<>())
      .def("add_input", &GraphBuilder::AddInput, py::arg("dtype"), py::arg("sizes"),
           py::arg("strides"), py::arg("storage_offset") = 0)
      .def("add_node", &GraphBuilder::AddNode, py::arg("op"), py::arg("target"),
           py::arg("inputs"), py::arg("dtype"), py::arg("sizes"), py::arg("strides"),
           py::arg("storage_offset") = 0, py::arg("dims") = std::vector<int64_t>{},
           py::arg("scalar") = std::nullopt, py::arg("scalar_first") = false,
           py::arg("alpha") = 1.0, py::arg("beta") = 1.0, py::arg("eps") = 0.0,
           py::arg("causal") = false, py::arg("conv") = std::vector<int64_t>{},
           py::arg("pool") = std::vector<int64_t>{}, py::arg("pure") = false)
      .def("set_outputs", &GraphBuilder::SetOutputs)
      .def("hash", &GraphBuilder::Hash);
  py::class_<CompiledProgram, std::shared_ptr<CompiledProgram>>(m, "_Program")
      .def_property_readonly("graph_hash",
                             [](const CompiledProgram& p) { return p.program->graph_hash(); })
      .def_property_readonly("kernels", [](const CompiledProgram& p) {
        py::list l;
        for (const auto& k : p.program->kernels()) l.append(KernelDict(k));
        return l;
      })
      .def_property_readonly("eager_targets", [](const CompiledProgram& p) {
        std::vector<std::string> t;
        for (const auto& e : p.program->eager()) t.push_back(e.target);
        return t;
      })
      .def_property_readonly("eager_reasons", [](const CompiledProgram& p) {
        std::vector<std::string> t;
        for (const auto& e : p.program->eager()) t.push_back(e.reason);
        return t;
      })
      .def_property_readonly("eager_nodes", [](const CompiledProgram& p) {
        std::vector<int> t;
        for (const auto& e : p.program->eager()) t.push_back(e.node);
        return t;
      })
      .def("to_json", [](const CompiledProgram& p) { return p.program->ToJson(); })
      .def("report", [](const CompiledProgram& p) { return p.program->Report(); })
      .def("run", [](const CompiledProgram& p, const std::vector<at::Tensor>& inputs,
                     const EagerFn& eager) {
        torch::PyWarningHandler warnings;  // TORCH_WARN (float64 policy) -> Python warnings
        return RunProgram(p, inputs, eager);
      });
  m.def("_compile_graph", &CompileGraph, py::arg("graph"), py::arg("fuse") = true);
  // The core's rule for a copy's buffer keeping its strides (Note [Functional copy]).
  m.def("_is_non_overlapping", [](const std::vector<int64_t>& sizes,
                                  const std::vector<int64_t>& strides) {
    return compiler::internal::IsNonOverlapping(sizes, strides);
  });
  m.def("_compile_math_names", [] {  // Op::kMath's functions (graph.h)
    return std::vector<std::string>(std::begin(compiler::kLibraryMathNames),
                                    std::end(compiler::kLibraryMathNames));
  });
  m.def("_program_kernel_launches", &ProgramKernelLaunches);
  m.def("_program_first_launch_ns", &ProgramFirstLaunchNs);
}

}  // namespace
}  // namespace trn::bridge

PYBIND11_MODULE(_C, m) {
  using namespace trn::bridge;
  namespace rt = trn::rt;
  m.doc() = "trnscope device runtime bindings";
  // Note [Errors in core]: bad input is a ValueError in Python wherever it is raised
  // (torch ops translate through Guarded(), which also maps OutOfMemory).
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const trn::InvalidArgument& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });
  BindCompile(m);
  BindDeviceModel(m);
  m.def("device_count", [] { return DeviceCount(); });
  m.def("current_device", [] { return CurrentDevice(); });
  m.def("set_device", [](int index) { SetCurrentDevice(index); });
  // -1: every device (torch.trn.synchronize(None) resolves to the current one).
  m.def(
      "synchronize",
      [](int index) {
        py::gil_scoped_release no_gil;
        if (index < 0) {
          SyncAllDevices();
        } else {
          rt::Device& d = GetDevice(index);
          Guarded([&] { d.Synchronize(); });
        }
      },
      py::arg("device") = -1);
  m.def("host_bandwidth", &HostBandwidth, py::arg("device") = -1,
        py::arg("nbytes") = int64_t{32} << 20, py::arg("repeats") = 5);
  m.def("_is_in_bad_fork", [] { return rt::InForkedChild(); });  // Note [Fork]
  m.def("current_stream_id", [](int index) { return CurrentStreamId(Resolve(index)); });
  m.def("set_stream", [](int index, int stream_id) {
    rt::Device& d = GetDevice(index);
    Guarded([&] { d.GetStream(stream_id); });
    SetCurrentStream(index, stream_id);
  });
  m.def("memory_stats", &MemoryStats, py::arg("device") = -1);
  m.def("reset_peak_memory_stats",
        [](int index) { GetDevice(Resolve(index)).allocator().ResetPeak(); },
        py::arg("device") = -1);
  m.def("empty_cache", [] {
    py::gil_scoped_release no_gil;
    SyncAllDevices();
    const int n = DeviceCount();
    for (int i = 0; i < n; ++i) GetDevice(i).allocator().EmptyCache();
  });
  m.def("manual_seed", [](int index, uint64_t seed) {
    TrnGenerator* g = Gen(index);
    std::lock_guard<std::mutex> lock(g->mutex_);
    g->set_current_seed(seed);
  });
  m.def("seed", [](int index) {
    TrnGenerator* g = Gen(index);
    std::lock_guard<std::mutex> lock(g->mutex_);
    return g->seed();
  });
  m.def("initial_seed", [](int index) {
    TrnGenerator* g = Gen(index);
    std::lock_guard<std::mutex> lock(g->mutex_);
    return g->current_seed();
  });
  m.def("get_rng_state", [](int index) {
    TrnGenerator* g = Gen(index);
    std::lock_guard<std::mutex> lock(g->mutex_);
    return at::Tensor(g->get_state());
  });
  m.def("set_rng_state", [](int index, const at::Tensor& state) {
    TrnGenerator* g = Gen(index);
    std::lock_guard<std::mutex> lock(g->mutex_);
    g->set_state(*state.unsafeGetTensorImpl());
  });
  m.def("fallback_ops", [] { return FallbackCounts(); });
  m.def("float64_downcasts", [] { return Float64Counts(); });
  m.def("reset_counters", [] { ResetCounters(); });
  // Facts Python reads instead of copying them: limits, defaults, parsers.
  m.attr("max_streams") = trn::trace::kMaxStreams;  // the tracer's stream mask
  m.attr("max_devices") = rt::Runtime::kMaxVisibleCores;
  m.attr("default_visible_cores") = rt::Runtime::kDefaultVisibleCores;
  py::dict modes;
  modes["device"] = static_cast<uint32_t>(trn::trace::kModeDevice);
  modes["runtime"] = static_cast<uint32_t>(trn::trace::kModeRuntime);
  modes["memory"] = static_cast<uint32_t>(trn::trace::kModeMemory);
  m.attr("profile_mode_bits") = modes;
  m.def("visible_cores_spec", [] {
    return Guarded([&] { return rt::Runtime::Get().visible_cores_spec(); });
  });
  m.def("parse_visible_cores", [](const std::string& spec) {
    return Guarded([&] { return rt::Runtime::ParseVisibleCores(spec); });
  });
  m.def("parse_index_list",
        [](const std::string& spec, const std::string& what, int max_count) {
          return Guarded([&] { return rt::ParseIndexList(spec, what, max_count); });
        },
        py::arg("spec"), py::arg("what"), py::arg("max_count"));

  // ---- Profiler (docs/profiling.md) ----
  m.def("_profiler_last_session", &LastSessionDict);
  m.def("_profiler_parse_config", [](const std::string& text) -> py::object {
    trn::trace::Config c;
    bool ours;
    try {
      ours = ParseProfileConfig(text, &c);
    } catch (const std::invalid_argument& e) {
      throw py::value_error(e.what());
    }
    if (!ours) return py::none();
    py::dict d;
    d["device_mask"] = c.device_mask;
    d["stream_mask"] = c.stream_mask;
    d["modes"] = c.modes;
    d["max_events_per_core"] = c.max_events_per_core;
    return d;
  });
  m.def("_export_chrome_trace", &ExportChromeTrace, py::arg("kineto_results"), py::arg("path"),
        py::arg("metadata_json") = "{}", py::arg("with_device") = true);
}
