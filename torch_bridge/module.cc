// trnscope._C: the Python face of the device runtime (the only TU with pybind).
#include <torch/extension.h>

#include "torch_bridge/bridge.h"
#include "torch_bridge/device.h"

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

TrnGenerator* Gen(int device_index) {
  return at::check_generator<TrnGenerator>(DefaultGenerator(Resolve(device_index)));
}

}  // namespace
}  // namespace trn::bridge

PYBIND11_MODULE(_C, m) {
  using namespace trn::bridge;
  namespace rt = trn::rt;
  m.doc() = "trnscope device runtime bindings";
  m.def("device_count", [] { return DeviceCount(); });
  m.def("current_device", [] { return CurrentDevice(); });
  m.def("set_device", [](int index) { SetCurrentDevice(index); });
  // -1: every device (torch.trn.synchronize() with no device, as the profiler calls it).
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
  m.def("parse_visible_cores", [](const std::string& spec) {
    return Guarded([&] { return rt::Runtime::ParseVisibleCores(spec); });
  });
}
