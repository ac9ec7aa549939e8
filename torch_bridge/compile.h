// The execution side of torch.compile(backend="trn"): builds a compiler::Graph
// from the Python frontend's calls, compiles it and runs the Program on trn
// tensors. Pybind-free (module.cc binds it); Python caches the programs.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/compiler/graph.h"
#include "core/compiler/program.h"

namespace trn::bridge {

// A graph under construction, one per FX graph and input signature. Owned by
// one Python object; the thread holding the GIL calls it.
class GraphBuilder {
 public:
  // Meta of a value: the FakeTensor's dtype, sizes, strides, storage offset.
  int AddInput(at::ScalarType dtype, std::vector<int64_t> sizes, std::vector<int64_t> strides,
               int64_t storage_offset);
  // op: the frontend's spelling ("add", "gelu_tanh", "cast", "view", "eager",
  // ...: ParseOp in compile.cc). Throws a
  // ValueError naming the node for an unknown op or a malformed node.
  int AddNode(const std::string& op, const std::string& target, std::vector<int> inputs,
              at::ScalarType dtype, std::vector<int64_t> sizes, std::vector<int64_t> strides,
              int64_t storage_offset, std::vector<int64_t> dims, std::optional<double> scalar,
              bool scalar_first, double alpha, double beta, double eps, bool causal,
              std::vector<int64_t> conv, std::vector<int64_t> pool, bool pure);
  void SetOutputs(std::vector<int> outputs);
  uint64_t Hash() const { return graph_.Hash(); }
  const compiler::Graph& graph() const { return graph_; }

 private:
  compiler::Graph graph_;
};

// A compiled program plus what running it needs besides the core's Program.
// Immutable; shared by Python and by the launched tasks (they keep it alive).
struct CompiledProgram {
  std::shared_ptr<const compiler::Program> program;
  std::vector<const char*> float64_ops;  // interned "aten::<op>" of float64 nodes
  // Per kernel, "trn::<kernel name>": the host-side profiler span of its launch,
  // named like aten ops so key_averages() does not list the kernel name twice.
  std::vector<const char*> span_names;
};

std::shared_ptr<CompiledProgram> CompileGraph(const GraphBuilder& graph, bool fuse);

// Runs an eager step: (index into Program::eager(), its input tensors, the
// output tensor to write). Called on the launching thread, between launches.
using EagerFn = std::function<void(int, const std::vector<at::Tensor>&, const at::Tensor&)>;

// Launches the program on the current stream of the inputs' device, one
// launch per kernel; returns the graph outputs with the sizes and strides of
// the program's output views. Never waits for the device.
std::vector<at::Tensor> RunProgram(const CompiledProgram& compiled,
                                   const std::vector<at::Tensor>& inputs, const EagerFn& eager);

// Kernels launched by compiled programs in this process (tests count them).
int64_t ProgramKernelLaunches();

// steady_clock (CLOCK_MONOTONIC, as Python's time.perf_counter_ns) nanoseconds
// of the first kernel launch of the latest program run; 0 before any.
int64_t ProgramFirstLaunchNs();

}  // namespace trn::bridge
