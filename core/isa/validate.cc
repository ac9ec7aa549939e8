// Validate(): the constraints of reference/neuroncore.md ("Tile and memory
// constraints") on an executable. Every message names the instruction (index,
// opcode, engine), the operand and the limit, so a kernel author can find the
// line (the instruction's SourceLoc) and fix it.
#include <fmt/format.h>

#include <algorithm>

#include <string>

#include "core/isa/executable.h"
#include "core/isa/target.h"

namespace trn::isa {
namespace {

std::string Shape(const Tile& t) {  // t.ndim may be out of range: say so
  std::string s = fmt::format("[{}", t.partitions);
  for (int d = 0; d < std::min(t.ndim, kMaxFreeDims); ++d) s += fmt::format(", {}", t.sizes[d]);
  return s + "]";
}

// Bounds that keep every offset computation below in int64 (a corrupt file may
// hold any value): a free dim is at most 2^20 elements, a stride or offset 2^40,
// a tensor 2^48 elements.
constexpr int64_t kMaxFreeSize = int64_t{1} << 20;
constexpr int64_t kMaxStride = int64_t{1} << 40;
constexpr int64_t kMaxNumel = int64_t{1} << 48;

}  // namespace

// The checks behind Validate and Validator (Note in executable.h). One thread.
class Checker {
 public:
  explicit Checker(const Executable& exe) : exe_(exe), spec_(Spec(exe.target)) {}

  Status CheckTables() {
    for (size_t i = 0; i < exe_.tensors.size(); ++i) {
      if (!CheckTensor(exe_.tensors[i])) {
        return Status::Error(fmt::format("tensor {} ('{}'): {}", i, exe_.tensors[i].name, error_));
      }
    }
    for (size_t i = 0; i < exe_.allocations.size(); ++i) {
      if (!CheckAllocation(exe_.allocations[i])) {
        return Status::Error(
            fmt::format("allocation {} ('{}'): {}", i, exe_.allocations[i].name, error_));
      }
    }
    return Status::Ok();
  }

  Status Check(size_t i) {
    const Instruction& ins = exe_.instructions[i];
    if (CheckInstruction(ins)) return Status::Ok();
    return Status::Error(fmt::format("instruction {} ({} on {}): {}", i, OpcodeName(ins.opcode),
                                     EngineName(ins.engine), error_));
  }

 private:
  bool CheckTensor(const TensorDecl& t) {
    if (t.name.empty()) return Fail("a tensor needs a name");
    if (t.shape.empty()) return Fail("shape is empty; a tensor has at least one dim");
    int64_t numel = 1;
    for (int64_t s : t.shape) {
      if (s <= 0) return Fail(fmt::format("shape has a dim of {}; dims are >= 1", s));
      if (s > kMaxNumel / numel) {
        return Fail(fmt::format("has more than {} elements", kMaxNumel));
      }
      numel *= s;
    }
    return true;
  }

  bool CheckAllocation(const Allocation& a) {
    if (a.memory == Memory::kHbm) return Fail("HBM is not allocated here (declare a tensor)");
    const int64_t cap =
        a.memory == Memory::kSbuf ? spec_.sbuf_partition_bytes : spec_.psum_partition_bytes;
    if (a.partition_start < 0 || a.partition_start > spec_.partitions || a.partitions < 1 ||
        a.partitions > spec_.partitions || a.partition_start + a.partitions > spec_.partitions) {
      return Fail(fmt::format("partitions [{}, {}) are outside the {} partitions of {}",
                              a.partition_start, int64_t{a.partition_start} + a.partitions,
                              spec_.partitions,
                              spec_.name));
    }
    if (a.byte_offset < 0 || a.bytes < 1) {
      return Fail(
          fmt::format("needs bytes >= 1 at an offset >= 0, got {} at {}", a.bytes, a.byte_offset));
    }
    if (a.bytes > cap || a.byte_offset > cap - a.bytes) {  // no int64 overflow
      return Fail(fmt::format(
          "needs {} bytes per partition at offset {} of {}; a partition of {} has {} ({} "
          "overflow)",
          a.bytes, a.byte_offset, MemoryName(a.memory), spec_.name, cap,
          a.memory == Memory::kSbuf ? "SBUF" : "PSUM"));
    }
    return true;
  }

  // The layout of one operand against its buffer.
  bool CheckTile(const char* what, const Tile& t) {
    const auto bad = [&](const std::string& e) {
      return Fail(fmt::format("{} {}: {}", what, Shape(t), e));
    };
    if (t.ndim < 1 || t.ndim > kMaxFreeDims) {
      return bad(fmt::format("{} free dims; a tile has 1..{}", t.ndim, kMaxFreeDims));
    }
    if (t.partitions < 1 || t.partitions > spec_.partitions) {
      return bad(fmt::format("{} partitions; the limit is {} (nl.tile_size.pmax)", t.partitions,
                             spec_.partitions));
    }
    if (t.offset < 0 || t.offset > kMaxStride || t.partition_stride < 0 ||
        t.partition_stride > kMaxStride || t.partition_start < 0 ||
        t.partition_start > spec_.partitions) {
      return bad(fmt::format("offset {}, partition start {} and partition stride {} must be in "
                             "[0, 2^40]",
                             t.offset, t.partition_start, t.partition_stride));
    }
    int64_t last = t.offset;  // the farthest element reached within a partition
    for (int d = 0; d < t.ndim; ++d) {
      if (t.sizes[d] > kMaxFreeSize || t.strides[d] > kMaxStride) {
        return bad(fmt::format("free dim {} has size {} and stride {}; at most 2^20 and 2^40", d,
                               t.sizes[d], t.strides[d]));
      }
      if (t.sizes[d] < 1 || t.strides[d] < 0) {
        return bad(
            fmt::format("free dim {} has size {} and stride {}; sizes are >= 1 and "
                        "strides >= 0",
                        d, t.sizes[d], t.strides[d]));
      }
      last += (t.sizes[d] - 1) * t.strides[d];
    }
    if (t.memory == Memory::kHbm) {
      if (t.buffer >= exe_.tensors.size()) {
        return bad(
            fmt::format("names tensor {}, the executable has {}", t.buffer, exe_.tensors.size()));
      }
      const TensorDecl& decl = exe_.tensors[t.buffer];
      if (t.dtype != decl.dtype) {
        return bad(fmt::format("is {} but tensor '{}' is {}", DTypeName(t.dtype), decl.name,
                               DTypeName(decl.dtype)));
      }
      last += (t.partitions - 1) * t.partition_stride;
      if (last >= decl.numel()) {
        return bad(fmt::format("reaches element {} of tensor '{}', which has {}", last, decl.name,
                               decl.numel()));
      }
      return true;
    }
    if (t.buffer >= exe_.allocations.size()) {
      return bad(fmt::format("names allocation {}, the executable has {}", t.buffer,
                             exe_.allocations.size()));
    }
    const Allocation& a = exe_.allocations[t.buffer];
    if (a.memory != t.memory) {
      return bad(fmt::format("is in {} but allocation '{}' is {}", MemoryName(t.memory), a.name,
                             MemoryName(a.memory)));
    }
    if (t.partition_start < 0 || t.partition_start + t.partitions > a.partitions) {
      return bad(fmt::format("partitions [{}, {}) are outside allocation '{}' ({} partitions)",
                             t.partition_start, t.partition_start + t.partitions, a.name,
                             a.partitions));
    }
    const int64_t end = (last + 1) * static_cast<int64_t>(ItemSize(t.dtype));
    if (end > a.bytes) {
      return bad(fmt::format("reaches byte {} of each partition of allocation '{}', which has {}",
                             end, a.name, a.bytes));
    }
    return true;
  }

  // Vector / Scalar / GpSimd read and write SBUF or PSUM, within free-size limits.
  bool CheckComputeOperand(const char* what, const Tile& t) {
    if (t.memory == Memory::kHbm) {
      return Fail(
          fmt::format("{} is in HBM; compute engines read and write SBUF or PSUM only "
                      "(move it with dma_copy)",
                      what));
    }
    const int64_t limit = t.memory == Memory::kSbuf ? spec_.sbuf_free_max : spec_.psum_free_max;
    if (t.free_size() > limit) {
      return Fail(fmt::format("{} {} has free size {} in {}; the limit is {}", what, Shape(t),
                              t.free_size(), MemoryName(t.memory), limit));
    }
    return true;
  }

  bool SameShape(const char* a, const Tile& x, const char* b, const Tile& y) {
    if (x.partitions != y.partitions || x.free_size() != y.free_size()) {
      return Fail(fmt::format("{} {} and {} {} differ in shape", a, Shape(x), b, Shape(y)));
    }
    return true;
  }

  bool CheckMatmul(const Instruction& ins) {
    if (ins.opcode == Opcode::kLoadStationary) {
      const Tile& s = ins.src0;
      if (s.memory != Memory::kSbuf) return Fail("the stationary operand must be in SBUF");
      if (s.free_size() > spec_.matmul_stationary_free_max) {
        return Fail(
            fmt::format("stationary {} has free size {}; the limit is {} "
                        "(nl.tile_size.gemm_stationary_fmax)",
                        Shape(s), s.free_size(), spec_.matmul_stationary_free_max));
      }
      return true;
    }
    const Tile &d = ins.dst, &m = ins.src0, &s = ins.src1;
    if (m.memory != Memory::kSbuf || s.memory != Memory::kSbuf) {
      return Fail("the moving and stationary operands must be in SBUF");
    }
    if (!IsFloating(m.dtype) || !IsFloating(s.dtype)) {
      return Fail(fmt::format("the Tensor engine multiplies floating-point tiles; moving is {}, "
                              "stationary {}",
                              DTypeName(m.dtype), DTypeName(s.dtype)));
    }
    if (m.free_size() > spec_.matmul_moving_free_max) {
      return Fail(
          fmt::format("moving {} has free size {}; the limit is {} "
                      "(nl.tile_size.gemm_moving_fmax)",
                      Shape(m), m.free_size(), spec_.matmul_moving_free_max));
    }
    if (s.free_size() > spec_.matmul_stationary_free_max) {
      return Fail(fmt::format("stationary {} has free size {}; the limit is {}", Shape(s),
                              s.free_size(), spec_.matmul_stationary_free_max));
    }
    if (m.partitions != s.partitions) {
      return Fail(
          fmt::format("contraction sizes differ: stationary {} has K = {}, moving {} has "
                      "K = {}",
                      Shape(s), s.partitions, Shape(m), m.partitions));
    }
    if (d.memory != Memory::kPsum || d.dtype != DType::kFloat32) {
      return Fail(fmt::format("the result must be a float32 PSUM tile, got {} {}",
                              MemoryName(d.memory), DTypeName(d.dtype)));
    }
    if (d.partitions != s.free_size() || d.free_size() != m.free_size()) {
      return Fail(fmt::format("result {} must be [M = {}, N = {}]", Shape(d), s.free_size(),
                              m.free_size()));
    }
    // One matmul accumulates into one PSUM bank (2 KiB = 512 fp32 per partition).
    const Allocation& a = exe_.allocations[d.buffer];
    const int64_t bank = spec_.psum_bank_bytes();
    const int64_t first = a.byte_offset + d.offset * 4;
    const int64_t last = first + d.free_size() * 4 - 1;
    if (d.ndim != 1 || d.strides[0] != 1 || first / bank != last / bank) {
      return Fail(
          fmt::format("result {} spans PSUM bytes [{}, {}] of each partition, crossing a "
                      "{}-byte bank; a matmul writes one contiguous range within a bank",
                      Shape(d), first, last, bank));
    }
    return true;
  }

  bool CheckShapes(const Instruction& ins) {
    const Tile &d = ins.dst, &a = ins.src0, &b = ins.src1;
    switch (ins.opcode) {
      case Opcode::kTranspose:
        if (d.partitions != a.free_size() || d.free_size() != a.partitions) {
          return Fail(fmt::format("dst {} must be the transpose of src0 {}", Shape(d), Shape(a)));
        }
        if (ins.engine == Engine::kVector && (a.partitions > 32 || a.free_size() > 32)) {
          return Fail(
              fmt::format("src0 {}: the Vector engine transposes 32x32 blocks at most", Shape(a)));
        }
        if (ins.engine == Engine::kTensor && d.memory != Memory::kPsum) {
          return Fail("a Tensor-engine transpose writes PSUM");
        }
        return true;
      case Opcode::kTensorTensor:
        if (!SameShape("src0", a, "src1", b)) return false;
        return SameShape("dst", d, "src0", a);
      case Opcode::kTensorScalar:
      case Opcode::kActivation:
        if (ins.value & ~kScalarFromTile) {
          return Fail(fmt::format("value {} names scalar operands other than bits 0 and 1",
                                  ins.value));
        }
        if ((ins.value & kScalarFromTile) &&
            (b.partitions != a.partitions || b.free_size() != 1)) {
          return Fail(fmt::format("the per-partition scalars src1 {} must be [{}, 1]", Shape(b),
                                  a.partitions));
        }
        return SameShape("dst", d, "src0", a);
      case Opcode::kTensorCopy:
        return SameShape("dst", d, "src0", a);
      case Opcode::kActivationReduce:
        if (b.partitions != a.partitions || b.free_size() != 1) {
          return Fail(fmt::format("the row sums src1 {} must be [{}, 1]", Shape(b), a.partitions));
        }
        return SameShape("dst", d, "src0", a);
      case Opcode::kTensorReduce: {
        // dst holds one value per group of src0's leading free dims.
        int64_t groups = 1;
        int dim = 0;
        while (dim < a.ndim && groups < d.free_size()) groups *= a.sizes[dim++];
        if (d.partitions != a.partitions || groups != d.free_size()) {
          return Fail(fmt::format(
              "dst {} must be [{}, G] with G the product of src0 {}'s leading free dims (G = 1 "
              "reduces all of them)",
              Shape(d), a.partitions, Shape(a)));
        }
        return true;
      }
      case Opcode::kBnStats:
        if (a.free_size() > spec_.bn_stats_free_max) {
          return Fail(fmt::format("src0 {} has free size {}; bn_stats takes at most {}", Shape(a),
                                  a.free_size(), spec_.bn_stats_free_max));
        }
        if (d.partitions != a.partitions || d.free_size() != 6) {
          return Fail(fmt::format("dst {} must be [{}, 6]", Shape(d), a.partitions));
        }
        return true;
      case Opcode::kBnAggr:
        if (a.free_size() % 6 != 0) {
          return Fail(
              fmt::format("src0 {} must hold whole bn_stats rows (a multiple of 6)", Shape(a)));
        }
        if (d.partitions != a.partitions || d.free_size() != 2) {
          return Fail(fmt::format("dst {} must be [{}, 2]", Shape(d), a.partitions));
        }
        return true;
      default:
        return true;
    }
  }

  bool CheckAlu(const Instruction& ins) {
    if (ins.opcode == Opcode::kTensorTensor && ins.op0 == AluOp::kBypass) {
      return Fail("tensor_tensor needs an operation (op0 is bypass)");
    }
    if (ins.opcode == Opcode::kTensorReduce && ins.op0 != AluOp::kAdd && ins.op0 != AluOp::kMax &&
        ins.op0 != AluOp::kMin && ins.op0 != AluOp::kMultiply) {
      return Fail(fmt::format("tensor_reduce reduces with add, max, min or multiply, not {}",
                              AluOpName(ins.op0)));
    }
    return true;
  }

  bool CheckInstruction(const Instruction& ins) {
    if (!RunsOn(ins.opcode, ins.engine)) {
      return Fail(fmt::format("{} does not run on the {} engine", OpcodeName(ins.opcode),
                              EngineName(ins.engine)));
    }
    if (ins.source != kNone && ins.source >= exe_.sources.size()) {
      return Fail(
          fmt::format("names source {}, the executable has {}", ins.source, exe_.sources.size()));
    }
    if (ins.opcode == Opcode::kSemaphoreWait || ins.opcode == Opcode::kSemaphoreSignal) {
      if (ins.semaphore >= spec_.semaphores) {
        return Fail(fmt::format("semaphore {} is out of range; {} has {}", ins.semaphore,
                                spec_.name, spec_.semaphores));
      }
      return true;
    }
    const Operands io = OperandsOf(ins);
    const struct {
      bool used;
      const char* name;
      const Tile* tile;
    } operands[] = {{io.writes_dst || io.reads_dst, "dst", &ins.dst},
                    {io.reads_src0, "src0", &ins.src0},
                    {io.reads_src1 || io.writes_src1, "src1", &ins.src1}};
    for (const auto& o : operands) {
      if (!o.used) continue;
      if (!CheckTile(o.name, *o.tile)) return false;
      if (ins.engine != Engine::kDma) {
        if (!CheckComputeOperand(o.name, *o.tile)) return false;
      }
    }
    if (ins.opcode == Opcode::kDmaCopy) {
      if (ins.queue >= spec_.dma_queues) {
        return Fail(fmt::format("DMA queue {} is out of range; a core has {}", ins.queue,
                                spec_.dma_queues));
      }
      if (ins.dst.numel() != ins.src0.numel() || ins.dst.dtype != ins.src0.dtype) {
        return Fail(fmt::format(
            "dst {} {} and src0 {} {} differ; dma_copy moves bytes (cast with "
            "tensor_copy)",
            Shape(ins.dst), DTypeName(ins.dst.dtype), Shape(ins.src0), DTypeName(ins.src0.dtype)));
      }
      return true;
    }
    if (ins.engine == Engine::kTensor && ins.opcode != Opcode::kTranspose) {
      return CheckMatmul(ins);
    }
    if (!CheckAlu(ins)) return false;
    return CheckShapes(ins);
  }

  // Records the first failure's message; returns false for `return Fail(...)`.
  bool Fail(std::string e) {
    error_ = std::move(e);
    return false;
  }

  const Executable& exe_;
  const TargetSpec& spec_;
  std::string error_;
};

Validator::Validator(const Executable& exe) : checker_(std::make_unique<Checker>(exe)) {}
Validator::~Validator() = default;
Status Validator::CheckTables() { return checker_->CheckTables(); }
Status Validator::CheckInstruction(size_t i) { return checker_->Check(i); }

Status Validate(const Executable& exe) {
  Validator v(exe);
  if (Status s = v.CheckTables(); !s.ok()) return s;
  for (size_t i = 0; i < exe.instructions.size(); ++i) {
    if (Status s = v.CheckInstruction(i); !s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace trn::isa
