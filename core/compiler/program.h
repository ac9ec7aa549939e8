// A compiled program: buffers plus an ordered list of steps, each one device
// kernel launch (a fused row/tile program or a matmul with an epilogue) or an
// eager node the frontend runs. Immutable after Compile(); any thread may
// read it and Run() it concurrently on different buffers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/common/launch.h"
#include "core/common/tensor_ref.h"
#include "core/compiler/graph.h"

namespace trn::kernels {
struct PackedB;  // core/kernels/kernels.h: a cached pack of a GEMM's B operand
}

namespace trn::compiler {

// A buffer is device memory the executor provides at run time.
struct Buffer {
  enum class Kind : uint8_t { kInput, kOutput, kTemp };
  Kind kind = Kind::kTemp;
  int index = 0;  // graph input / output number for kInput / kOutput
  DType dtype = DType::kFloat32;
  int64_t numel = 0;  // elements to allocate (kInput: of the input's storage extent)
  // kTemp: byte offset in the run's temp arena (Note [Temp arena]).
  int64_t arena_offset = 0;
};

// A view of a buffer: how a graph value lives in memory.
struct View {
  int buffer = -1;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> sizes, strides;  // elements
  int64_t offset = 0;                   // elements from the buffer start
  TensorRef Bind(void* base) const;     // TensorRef over a buffer's base pointer
};

// Note [Eager nodes]: a node the compiler cannot fuse (or does not know)
// stays an aten op; the frontend runs it as an eager trn op on tensors made
// from these views, between the program's kernels, on the same stream. An
// eager node always runs, unless the frontend marks it pure (Node::pure) and
// nothing reads it (a pad folded into the convolution after it).
struct EagerStep {
  int node = -1;              // graph node id
  std::string target;         // aten op
  std::vector<View> inputs;   // one per graph input of the node (tensor inputs)
  View output;
  // Why the compiler did not take a node the frontend lowered to a core op
  // (e.g. integer arithmetic); empty for kEager nodes, whose reason the
  // frontend knows.
  std::string reason;
};

struct KernelSummary {
  const char* name = "";             // interned, e.g. "fused[pow,mean,add,rsqrt,mul,mul]"
  std::vector<std::string> aten_ops; // covered aten ops in graph order
  rt::KernelInfo info;               // name, op (interned), flops, bytes, engine
};

struct Step {
  enum class Kind : uint8_t { kKernel, kEager };
  Kind kind = Kind::kKernel;
  int index = 0;  // into kernels() or eager()
};

struct CompileOptions {
  bool fuse = true;  // false: one kernel per node (for tests and comparisons)
};

class Program {
 public:
  const std::vector<Buffer>& buffers() const { return buffers_; }
  const std::vector<View>& input_views() const { return input_views_; }    // per graph input
  const std::vector<View>& output_views() const { return output_views_; }  // per graph output
  const std::vector<Step>& steps() const { return steps_; }
  const std::vector<KernelSummary>& kernels() const { return kernels_; }
  const std::vector<EagerStep>& eager() const { return eager_; }
  uint64_t graph_hash() const { return graph_hash_; }
  // Bytes of the one allocation all kTemp buffers share (Note [Temp arena]).
  int64_t arena_bytes() const { return arena_bytes_; }

  // Runs kernel k on the calling thread (a core's worker) over buffer base
  // pointers indexed like buffers(). Never throws. packed_b: a pack of the
  // GEMM's B operand for a kernel with GemmWeightInput(k) >= 0 (or null).
  Status RunKernel(int k, const std::vector<void*>& buffer_base,
                   kernels::PackedB* packed_b = nullptr) const;
  // The graph input kernel k's GEMM reads as its 2-D B operand (a weight,
  // whose pack the executor may cache: Note [Packed weight cache]), or -1;
  // GemmB binds that operand over the buffer base pointers.
  int GemmWeightInput(int k) const;
  TensorRef GemmB(int k, const std::vector<void*>& buffer_base) const;

  // Self-describing artifact (docs/compile.md): format "trnscope.program",
  // version, kernels with covered aten ops, shapes, FLOPs and bytes, buffers,
  // eager steps.
  std::string ToJson() const;
  // Human-readable compile report: kernels, eager (fallback) nodes.
  std::string Report() const;

  struct Impl;  // the compiled row/tile programs, owned here
  Program();
  ~Program();
  Program(Program&&) noexcept;
  Program& operator=(Program&&) noexcept;

 private:
  friend Program Compile(const Graph&, const CompileOptions&);
  std::vector<Buffer> buffers_;
  std::vector<View> input_views_, output_views_;
  std::vector<Step> steps_;
  std::vector<KernelSummary> kernels_;
  std::vector<EagerStep> eager_;
  uint64_t graph_hash_ = 0;
  int64_t arena_bytes_ = 0;
  std::unique_ptr<Impl> impl_;
};

// Throws trn::InvalidArgument for a malformed graph (naming the node).
Program Compile(const Graph& graph, const CompileOptions& options = {});

// Interned, never-freed copy of s: names stored in trace records outlive programs.
const char* Intern(const std::string& s);

}  // namespace trn::compiler
