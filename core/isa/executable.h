// The executable artifact of a modelled NeuronCore program, in the NEFF's role
// (reference/neuroncore.md, "Compiler artifacts"): a versioned header, the HBM
// I/O tensor table, the SBUF/PSUM allocation plan, the instructions of every
// engine and DMA queue in program order, and debug info naming each
// instruction's source. Note [Executable format] in executable.cc has the
// bytes. A value type: any thread may use its own copy.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/tensor_ref.h"
#include "core/isa/isa.h"

namespace trn::isa {

enum class TensorKind : uint8_t { kInput, kOutput, kInternal };
const char* TensorKindName(TensorKind k);  // "input", "output", "internal"
bool ParseTensorKind(std::string_view name, TensorKind* out);

// An HBM tensor, dense row-major.
struct TensorDecl {
  std::string name;
  TensorKind kind = TensorKind::kInput;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;

  int64_t numel() const;
  bool operator==(const TensorDecl&) const = default;
};

// A block of SBUF or PSUM: `bytes` at `byte_offset` in each of `partitions`
// partitions starting at `partition_start`.
struct Allocation {
  std::string name;
  Memory memory = Memory::kSbuf;
  int32_t partition_start = 0;
  int32_t partitions = 128;
  int64_t byte_offset = 0;
  int64_t bytes = 0;
  bool operator==(const Allocation&) const = default;
};

// Where an instruction came from: a kernel's source line, and/or the framework
// op and kernel id it was lowered from.
struct SourceLoc {
  std::string file;
  int32_t line = 0;
  std::string op;          // e.g. "aten::mm", or the NKI kernel's name
  int64_t kernel_id = -1;  // the trn kernel launch it models, -1 if none
  bool operator==(const SourceLoc&) const = default;
};

struct Executable {
  static constexpr uint32_t kFormatVersion = 1;

  std::string name;
  Target target = Target::kTrn2;
  std::vector<TensorDecl> tensors;
  std::vector<Allocation> allocations;
  std::vector<Instruction> instructions;  // program order; each names its engine
  std::vector<SourceLoc> sources;

  // Indices into `instructions` of one engine's stream, or of one DMA queue's.
  std::vector<uint32_t> Stream(Engine e) const;
  std::vector<uint32_t> DmaQueue(int queue) const;
  bool operator==(const Executable&) const = default;
};

// Every allocation and instruction against the limits of Spec(target): a
// message naming the instruction, the operand and the limit, or ok.
Status Validate(const Executable& exe);

// Validate in steps, for a caller that walks the program anyway: the simulator
// checks each instruction as it issues it, one pass over memory instead of two.
// CheckTables() first; an instruction's check assumes the tables passed.
class Checker;
class Validator {
 public:
  explicit Validator(const Executable& exe);
  ~Validator();
  Status CheckTables();               // tensors and allocations
  Status CheckInstruction(size_t i);  // instruction i

 private:
  std::unique_ptr<Checker> checker_;
};

// The file's bytes, and back. Parse rejects another file type, a newer format
// version, a truncated or corrupt file and anything Validate rejects, naming
// what and where; `out` is untouched on error.
std::vector<uint8_t> Serialize(const Executable& exe);
Status Parse(const uint8_t* data, size_t size, Executable* out);
Status Save(const Executable& exe, const std::string& path);
Status Load(const std::string& path, Executable* out);

}  // namespace trn::isa
