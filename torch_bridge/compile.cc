// compile.h: graph building, compilation and program execution on trn.
#include "torch_bridge/compile.h"

#include <ATen/ops/as_strided.h>
#include <ATen/record_function.h>
#include <c10/util/Exception.h>

#include <array>
#include <atomic>
#include <iterator>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "core/common/error.h"
#include "core/compiler/executor.h"
#include "core/kernels/kernels.h"
#include "torch_bridge/bridge.h"
#include "torch_bridge/device.h"
#include "torch_bridge/ops_util.h"

namespace trn::bridge {
namespace {

std::atomic<int64_t> program_launches{0};
// steady_clock ns of the first kernel launch of the latest program run
// (bench/bench_models.py --host: how long the device idled at the call's start).
std::atomic<int64_t> first_launch_ns{0};

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The frontend's op names (OpName is not one-to-one: gelu / gelu_tanh).
compiler::Op ParseOp(const std::string& name) {
  using compiler::Op;
  static const std::unordered_map<std::string, Op> kOps = {
      {"full", Op::kConstant},
      {"add", Op::kAdd},
      {"sub", Op::kSub},
      {"mul", Op::kMul},
      {"div", Op::kDiv},
      {"pow", Op::kPow},
      {"maximum", Op::kMaximum},
      {"minimum", Op::kMinimum},
      {"eq", Op::kEq},
      {"ne", Op::kNe},
      {"lt", Op::kLt},
      {"le", Op::kLe},
      {"gt", Op::kGt},
      {"ge", Op::kGe},
      {"where", Op::kWhere},
      {"scatter", Op::kScatter},
      {"complex", Op::kComplex},
      {"fft", Op::kFft},
      {"neg", Op::kNeg},
      {"abs", Op::kAbs},
      {"relu", Op::kRelu},
      {"exp", Op::kExp},
      {"log", Op::kLog},
      {"sqrt", Op::kSqrt},
      {"rsqrt", Op::kRsqrt},
      {"reciprocal", Op::kReciprocal},
      {"sigmoid", Op::kSigmoid},
      {"tanh", Op::kTanh},
      {"silu", Op::kSilu},
      {"gelu", Op::kGelu},
      {"gelu_tanh", Op::kGeluTanh},
      {"sin", Op::kSin},
      {"cos", Op::kCos},
      {"log1p", Op::kLog1p},
      {"expm1", Op::kExpm1},
      {"erf", Op::kErf},
      {"cast", Op::kCast},
      {"sum", Op::kSum},
      {"mean", Op::kMean},
      {"amax", Op::kAmax},
      {"amin", Op::kAmin},
      {"softmax", Op::kSoftmax},
      {"log_softmax", Op::kLogSoftmax},
      {"view", Op::kView},
      {"clone", Op::kClone},
      {"mm", Op::kMm},
      {"bmm", Op::kBmm},
      {"addmm", Op::kAddmm},
      {"cat", Op::kCat},
      {"logical_and", Op::kLogicalAnd},
      {"logical_or", Op::kLogicalOr},
      {"logical_not", Op::kLogicalNot},
      {"embedding", Op::kEmbedding},
      {"sdpa", Op::kSdpa},
      {"conv", Op::kConv},
      {"conv_transpose", Op::kConvTranspose},
      {"layer_norm", Op::kLayerNorm},
      {"group_norm", Op::kGroupNorm},
      {"batch_norm", Op::kBatchNorm},
      {"max_pool2d", Op::kMaxPool2d},
      {"avg_pool2d", Op::kAvgPool2d},
      {"adaptive_avg_pool2d", Op::kAdaptiveAvgPool2d},
      {"im2col", Op::kIm2Col},
      {"col2im", Op::kCol2Im},
      {"slice_scatter", Op::kSliceScatter},
      {"div_trunc", Op::kDivTrunc},
      {"div_floor", Op::kDivFloor},
      {"remainder", Op::kRemainder},
      {"fmod", Op::kFmod},
      {"floor", Op::kFloor},
      {"ceil", Op::kCeil},
      {"trunc", Op::kTrunc},
      {"round", Op::kRound},
      {"sign", Op::kSign},
      {"index_put", Op::kIndexPut},
      {"arange", Op::kArange},
      {"gather", Op::kGather},
      {"index_select", Op::kIndexSelect},
      {"index", Op::kIndex},
      {"cumsum", Op::kCumsum},
      {"topk", Op::kTopk},
      {"sort", Op::kSort},
      {"histc", Op::kHistc},
      {"linalg_solve_triangular", Op::kSolveTriangular},
      {"flip", Op::kFlip},
      {"logcumsumexp", Op::kLogcumsumexp},
      {"cummax", Op::kCummax},
      {"cummin", Op::kCummin},
      {"argmax", Op::kArgmax},
      {"argmin", Op::kArgmin},
      {"pad", Op::kPad},
      {"eager", Op::kEager},
  };
  auto it = kOps.find(name);
  TORCH_CHECK_VALUE(it != kOps.end(), "trn compile: unknown graph op '", name, "'");
  return it->second;
}

// The floating functions the core runs as one library kernel (Op::kMath).
bool ParseMath(const std::string& name, int64_t* code) {
  for (size_t i = 0; i < std::size(compiler::kLibraryMathNames); ++i) {
    if (name == compiler::kLibraryMathNames[i]) {
      *code = static_cast<int64_t>(kernels::UnaryOp::kTan) + static_cast<int64_t>(i);
      return true;
    }
  }
  return false;
}

DType GraphDType(at::ScalarType s, const std::string& what) {
  DType d;
  TORCH_CHECK_VALUE(ToDType(s, &d), "trn compile: ", what, " has dtype ", s,
                    ", which trn does not support");
  return d;
}

at::ScalarType ScalarTypeOf(DType d) {
  switch (d) {
    case DType::kFloat32:
      return at::kFloat;
    case DType::kFloat64:
      return at::kDouble;
    case DType::kBFloat16:
      return at::kBFloat16;
    case DType::kFloat16:
      return at::kHalf;
    case DType::kInt32:
      return at::kInt;
    case DType::kInt64:
      return at::kLong;
    case DType::kBool:
      return at::kBool;
    default:
      break;
  }
  TORCH_INTERNAL_ASSERT(false, "unknown DType");
}

// Strides of size-1 dims do not matter; empty strides mean contiguous.
bool SameStrides(const at::Tensor& t, const std::vector<int64_t>& strides) {
  if (strides.empty()) return t.is_contiguous();
  if (strides.size() != static_cast<size_t>(t.dim())) return false;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) != 1 && t.stride(d) != strides[d]) return false;
  }
  return true;
}

// A tensor of `dtype` over all of `arena`'s storage (Note [Temp arena]):
// as_strided then places a buffer's views at its offset.
at::Tensor TypedAlias(const at::Tensor& arena, at::ScalarType dtype) {
  constexpr c10::DispatchKeySet kKeys(c10::DispatchKey::PrivateUse1);
  return at::detail::make_tensor<c10::TensorImpl>(c10::Storage(arena.storage()), kKeys,
                                                  c10::scalarTypeToTypeMeta(dtype));
}

// A view over the storage of the tensor holding its buffer (Note [Buffer binding]).
at::Tensor ViewOf(const std::vector<at::Tensor>& holders, const compiler::Bindings& bindings,
                  const compiler::View& v) {
  return at::as_strided(holders[v.buffer], v.sizes, v.strides, StorageOffset(bindings, v));
}

// Runs the steps on trn: a kernel is one launch on `device`'s current stream,
// an eager step calls the frontend on tensors over the program's buffers.
class LaunchRunner : public compiler::StepRunner {
 public:
  LaunchRunner(const CompiledProgram& compiled, const std::vector<at::Tensor>& inputs, int device,
               std::shared_ptr<const compiler::Bindings> bindings,
               const std::vector<at::Tensor>& holders, const EagerFn& eager)
      : compiled_(compiled), program_(*compiled.program), inputs_(inputs), device_(device),
        bindings_(std::move(bindings)), holders_(holders), eager_(eager) {}

  void RunKernel(int index) override {
    const compiler::KernelSummary& k = program_.kernels()[index];
    // A span named after the kernel lets key_averages() show its device
    // time as "trn::<kernel>"; RECORD_FUNCTION costs a check when no profiler runs.
    RECORD_FUNCTION(compiled_.span_names[index], std::vector<c10::IValue>());
    // A weight read as a GEMM's B operand: its pack is cached across calls
    // as in eager matmuls (Note [Packed weight cache]).
    std::shared_ptr<kernels::PackedB> packed;
    const int w = program_.GemmWeightInput(index);
    if (w >= 0 && !inputs_[w].is_inference() && inputs_[w].has_storage()) {
      packed = kernels::AcquirePackedB(program_.GemmB(index, bindings_->base),
                                       inputs_[w].storage().data(), inputs_[w]._version());
    }
    if (first_) {
      first_ = false;
      first_launch_ns.store(NowNs(), std::memory_order_relaxed);
    }
    // The launch outlives this call: it keeps the program and the bindings.
    ops::Launch(device_, k.info, [keep = compiled_.program, index, b = bindings_, packed] {
      return keep->RunKernel(index, b->base, packed.get());
    });
    program_launches.fetch_add(1, std::memory_order_relaxed);
  }

  void RunEager(int index) override {
    TORCH_CHECK(static_cast<bool>(eager_), "trn compiled program: eager step ", index,
                " needs the frontend's eager callable, but none was given");
    const compiler::EagerStep& e = program_.eager()[index];
    std::vector<at::Tensor> args;
    args.reserve(e.inputs.size());
    for (const compiler::View& v : e.inputs) args.push_back(ViewOf(holders_, *bindings_, v));
    eager_(index, args, ViewOf(holders_, *bindings_, e.output));
  }

 private:
  const CompiledProgram& compiled_;
  const compiler::Program& program_;
  const std::vector<at::Tensor>& inputs_;
  const int device_;
  const std::shared_ptr<const compiler::Bindings> bindings_;
  const std::vector<at::Tensor>& holders_;
  const EagerFn& eager_;
  bool first_ = true;
};

}  // namespace

int GraphBuilder::AddInput(at::ScalarType dtype, std::vector<int64_t> sizes,
                           std::vector<int64_t> strides, int64_t storage_offset) {
  compiler::Meta meta;
  meta.dtype = GraphDType(dtype, "graph input " + std::to_string(graph_.inputs().size()));
  meta.sizes = std::move(sizes);
  meta.strides = std::move(strides);
  meta.storage_offset = storage_offset;
  return graph_.AddInput(meta);
}

int GraphBuilder::AddNode(const std::string& op, const std::string& target, std::vector<int> inputs,
                          at::ScalarType dtype, std::vector<int64_t> sizes,
                          std::vector<int64_t> strides, int64_t storage_offset,
                          std::vector<int64_t> dims, std::optional<double> scalar,
                          bool scalar_first, double alpha, double beta, double eps,
                          bool causal, std::vector<int64_t> conv, std::vector<int64_t> pool,
                          bool pure) {
  compiler::Node node;
  int64_t math = 0;
  node.op = ParseMath(op, &math) ? compiler::Op::kMath : ParseOp(op);
  node.target = target;
  node.inputs = std::move(inputs);
  node.meta.dtype = GraphDType(dtype, "the output of " + target);
  node.meta.sizes = std::move(sizes);
  node.meta.strides = std::move(strides);
  node.meta.storage_offset = storage_offset;
  node.dims = node.op == compiler::Op::kMath ? std::vector<int64_t>{math} : std::move(dims);
  node.has_scalar = scalar.has_value();
  node.scalar = scalar.value_or(0.0);
  node.scalar_first = scalar_first;
  node.alpha = alpha;
  node.beta = beta;
  node.eps = eps;
  node.causal = causal;
  node.pure = pure;
  if (!conv.empty()) {
    constexpr int kD = compiler::Node::kConvDims;
    TORCH_CHECK_VALUE(conv.size() == 4 * kD + 1, "trn compile: conv attributes are stride, "
                      "padding before, padding after, dilation (", kD, " each, T, H, W) and "
                      "groups, got ", conv.size(), " values");
    for (int d = 0; d < kD; ++d) {
      node.conv.stride[d] = conv[d];
      node.conv.padding[d] = conv[kD + d];
      node.conv.padding_end[d] = conv[2 * kD + d];
      node.conv.dilation[d] = conv[3 * kD + d];
    }
    node.conv.groups = conv[4 * kD];
  }
  if (!pool.empty()) {
    TORCH_CHECK_VALUE(pool.size() == 8 || pool.size() == 10,
                      "trn compile: pool attributes are kernel, stride, padding and dilation (2 "
                      "each), then optionally count_include_pad and divisor_override, got ",
                      pool.size(), " values");
    for (int d = 0; d < 2; ++d) {
      node.pool.kernel[d] = pool[d];
      node.pool.stride[d] = pool[2 + d];
      node.pool.padding[d] = pool[4 + d];
      node.pool.dilation[d] = pool[6 + d];
    }
    if (pool.size() == 10) {
      node.pool.count_include_pad = pool[8] != 0;
      node.pool.divisor_override = pool[9];
    }
  }
  try {
    return graph_.AddNode(std::move(node));
  } catch (const trn::InvalidArgument& e) {
    TORCH_CHECK_VALUE(false, "trn compile: ", e.what());
  }
}

void GraphBuilder::SetOutputs(std::vector<int> outputs) {
  try {
    graph_.SetOutputs(std::move(outputs));
  } catch (const trn::InvalidArgument& e) {
    TORCH_CHECK_VALUE(false, "trn compile: ", e.what());
  }
}

std::shared_ptr<CompiledProgram> CompileGraph(const GraphBuilder& builder, bool fuse) {
  auto compiled = std::make_shared<CompiledProgram>();
  compiler::CompileOptions options;
  options.fuse = fuse;
  try {
    compiled->program =
        std::make_shared<const compiler::Program>(compiler::Compile(builder.graph(), options));
  } catch (const trn::InvalidArgument& e) {
    TORCH_CHECK_VALUE(false, "trn compile: ", e.what());
  }
  // Note [float64 policy] holds for compiled graphs too: each run counts
  // every node that computes float64, as eager counts each op call.
  for (const compiler::Node& n : builder.graph().nodes()) {
    if (n.meta.dtype != DType::kFloat64 || n.op == compiler::Op::kInput ||
        n.op == compiler::Op::kView) {
      continue;
    }
    compiled->float64_ops.push_back(
        compiler::Intern(std::string("aten::") + compiler::OpName(n.op)));
  }
  for (const compiler::KernelSummary& k : compiled->program->kernels()) {
    compiled->span_names.push_back(compiler::Intern(std::string("trn::") + k.name));
  }
  return compiled;
}

std::vector<at::Tensor> RunProgram(const CompiledProgram& compiled,
                                   const std::vector<at::Tensor>& inputs, const EagerFn& eager) {
  const compiler::Program& program = *compiled.program;
  TORCH_CHECK_VALUE(inputs.size() == program.input_views().size(),
                    "trn compiled program: expected ", program.input_views().size(),
                    " inputs, got ", inputs.size());
  int device = -1;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor& t = inputs[i];
    const compiler::View& v = program.input_views()[i];
    const int d = DeviceIndex(t);
    TORCH_CHECK_VALUE(device < 0 || d == device,
                      "trn compiled program: expected all inputs on one trn device, but input ", i,
                      " is on trn:", d, " and an earlier one on trn:", device);
    device = d;
    TORCH_CHECK_VALUE(t.scalar_type() == ScalarTypeOf(v.dtype) && t.sizes() == v.sizes &&
                          SameStrides(t, v.strides),
                      "trn compiled program: input ", i, " is ", t.scalar_type(), t.sizes(),
                      " with strides ", t.strides(), " but the program was compiled for ",
                      DTypeName(v.dtype), c10::IntArrayRef(v.sizes), " with strides ",
                      c10::IntArrayRef(v.strides));
  }
  if (device < 0) device = CurrentDevice();

  // Tensors sharing each buffer's storage (for eager steps and outputs) and
  // the memory the executor binds the buffers to (Note [Buffer binding]).
  const std::vector<compiler::Buffer>& buffers = program.buffers();
  std::vector<at::Tensor> holders(buffers.size());
  auto bindings = std::make_shared<compiler::Bindings>();
  bindings->base.assign(buffers.size(), nullptr);
  // One allocation for every temp (Note [Temp arena]), aliased per dtype.
  const at::Tensor arena = Empty({program.arena_bytes()}, at::kByte, device);
  std::array<at::Tensor, 8> typed;
  for (size_t b = 0; b < buffers.size(); ++b) {
    const compiler::Buffer& buf = buffers[b];
    if (buf.kind == compiler::Buffer::Kind::kTemp) {
      at::Tensor& alias = typed[static_cast<size_t>(buf.dtype)];
      if (!alias.defined()) alias = TypedAlias(arena, ScalarTypeOf(buf.dtype));
      holders[b] = alias;
    } else if (buf.kind == compiler::Buffer::Kind::kInput) {
      holders[b] = inputs[buf.index];
    } else {
      holders[b] = Empty({buf.numel}, ScalarTypeOf(buf.dtype), device);
      bindings->base[b] = holders[b].numel() == 0 ? nullptr : holders[b].data_ptr();
    }
  }
  compiler::BindBuffers(
      program,
      [&](int i) {
        return compiler::InputMemory{inputs[i].storage().mutable_data(),
                                     inputs[i].storage_offset()};
      },
      arena.storage().mutable_data(), bindings.get());

  for (const char* op : compiled.float64_ops) NoteFloat64(op);

  LaunchRunner runner(compiled, inputs, device, bindings, holders, eager);
  compiler::RunSteps(program, runner);

  std::vector<at::Tensor> outputs;
  outputs.reserve(program.output_views().size());
  for (const compiler::View& v : program.output_views()) {
    outputs.push_back(ViewOf(holders, *bindings, v));
  }
  return outputs;
}

int64_t ProgramKernelLaunches() { return program_launches.load(std::memory_order_relaxed); }

int64_t ProgramFirstLaunchNs() { return first_launch_ns.load(std::memory_order_relaxed); }

}  // namespace trn::bridge
