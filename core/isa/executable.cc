// Note [Executable format]
// Little-endian, every field written one by one (no struct images, so the
// format does not depend on the compiler's padding):
//   header, 32 bytes: magic "TRNXEXE\0" | u32 format version | u32 header size (32)
//                     | u64 payload size | u32 CRC-32 of the payload | u32 reserved (0)
//   payload: sections, each u32 tag | u64 body size | body, in this order:
//     META  name, target
//     TENS  the HBM tensor table
//     ALOC  the SBUF/PSUM allocation plan
//     SRCS  debug info: source locations
//     INST  instructions in program order (each names its engine and DMA queue)
// Strings are u32 length + bytes. A reader skips a section tag it does not know
// (a later minor addition), rejects a newer format version, a bad checksum, a
// truncated section and any enum value outside this version's range, then runs
// Validate, so a loaded executable always satisfies the target's constraints.
#include "core/isa/executable.h"

#include <fmt/format.h>
#include <zlib.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "core/common/assert.h"

namespace trn::isa {

const char* TensorKindName(TensorKind k) {
  switch (k) {
    case TensorKind::kInput:
      return "input";
    case TensorKind::kOutput:
      return "output";
    case TensorKind::kInternal:
      return "internal";
  }
  TRN_ASSERT(false, "unknown TensorKind");
  return "";
}

bool ParseTensorKind(std::string_view name, TensorKind* out) {
  for (int v = 0; v <= static_cast<int>(TensorKind::kInternal); ++v) {
    if (name == TensorKindName(static_cast<TensorKind>(v))) {
      *out = static_cast<TensorKind>(v);
      return true;
    }
  }
  return false;
}

int64_t TensorDecl::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

std::vector<uint32_t> Executable::Stream(Engine e) const {
  std::vector<uint32_t> r;
  for (uint32_t i = 0; i < instructions.size(); ++i) {
    if (instructions[i].engine == e) r.push_back(i);
  }
  return r;
}

std::vector<uint32_t> Executable::DmaQueue(int queue) const {
  std::vector<uint32_t> r;
  for (uint32_t i = 0; i < instructions.size(); ++i) {
    const Instruction& ins = instructions[i];
    if (ins.engine == Engine::kDma && ins.queue == queue) r.push_back(i);
  }
  return r;
}

namespace {

constexpr char kMagic[8] = {'T', 'R', 'N', 'X', 'E', 'X', 'E', '\0'};
constexpr uint32_t kHeaderBytes = 32;

constexpr uint32_t Tag(const char (&s)[5]) {
  return static_cast<uint32_t>(s[0]) | static_cast<uint32_t>(s[1]) << 8 |
         static_cast<uint32_t>(s[2]) << 16 | static_cast<uint32_t>(s[3]) << 24;
}
constexpr uint32_t kMeta = Tag("META"), kTens = Tag("TENS"), kAloc = Tag("ALOC"),
                   kSrcs = Tag("SRCS"), kInst = Tag("INST");

class Writer {
 public:
  void U8(uint8_t v) { bytes_.push_back(v); }
  void U32(uint32_t v) { Raw(v); }
  void I32(int32_t v) { Raw(v); }
  void U64(uint64_t v) { Raw(v); }
  void I64(int64_t v) { Raw(v); }
  void F64(double v) { Raw(v); }
  void Str(const std::string& s) {
    U32(static_cast<uint32_t>(s.size()));
    bytes_.insert(bytes_.end(), s.begin(), s.end());
  }
  // Starts a section; End() writes its size.
  void Begin(uint32_t tag) {
    U32(tag);
    section_ = bytes_.size();
    U64(0);
  }
  void End() {
    const uint64_t size = bytes_.size() - section_ - 8;
    std::memcpy(bytes_.data() + section_, &size, 8);
  }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  template <typename T>
  void Raw(T v) {  // the hosts we build for are little-endian
    static_assert(std::endian::native == std::endian::little);
    uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    bytes_.insert(bytes_.end(), b, b + sizeof(T));
  }
  std::vector<uint8_t> bytes_;
  size_t section_ = 0;
};

// Reads a bounded byte range; the first failure sticks (ok() false) and every
// later read returns zeros, so a parser checks once per record.
class Reader {
 public:
  Reader(const uint8_t* p, size_t n, std::string where) : p_(p), n_(n), where_(std::move(where)) {}

  uint8_t U8() { return Raw<uint8_t>(); }
  uint32_t U32() { return Raw<uint32_t>(); }
  int32_t I32() { return Raw<int32_t>(); }
  uint64_t U64() { return Raw<uint64_t>(); }
  int64_t I64() { return Raw<int64_t>(); }
  double F64() { return Raw<double>(); }
  std::string Str() {
    const uint32_t len = U32();
    if (!Need(len)) return {};
    std::string s(reinterpret_cast<const char*>(p_ + pos_), len);
    pos_ += len;
    return s;
  }
  // An enum stored as a byte, checked against its last value.
  template <typename E>
  E Enum(E last, const char* what) {
    const uint8_t v = U8();
    if (ok() && v > static_cast<uint8_t>(last)) {
      Fail(fmt::format("{} {} is not defined in format version {}", what, v,
                       Executable::kFormatVersion));
    }
    return static_cast<E>(v);
  }
  // A count of records each at least `min_bytes` long (a corrupt count must
  // not make the parser reserve gigabytes).
  uint32_t Count(size_t min_bytes) {
    const uint32_t n = U32();
    if (ok() && static_cast<uint64_t>(n) * min_bytes > n_ - pos_) {
      Fail(fmt::format("a count of {} records does not fit the {} bytes left", n, n_ - pos_));
    }
    return ok() ? n : 0;
  }
  void Fail(std::string e) {
    if (error_.empty()) error_ = fmt::format("{}, byte {}: {}", where_, pos_, std::move(e));
  }
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  size_t pos() const { return pos_; }
  bool done() const { return pos_ == n_; }
  void Skip(size_t k) {
    if (Need(k)) pos_ += k;
  }

 private:
  bool Need(size_t k) {
    if (!ok()) return false;
    if (n_ - pos_ < k) {
      Fail(fmt::format("truncated: {} more bytes needed, {} left", k, n_ - pos_));
      return false;
    }
    return true;
  }
  template <typename T>
  T Raw() {
    T v{};
    if (!Need(sizeof(T))) return v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
  std::string where_;
  std::string error_;
};

void WriteTile(Writer& w, const Tile& t) {
  w.U8(static_cast<uint8_t>(t.memory));
  w.U8(static_cast<uint8_t>(t.dtype));
  w.U32(t.buffer);
  w.I32(t.partition_start);
  w.I32(t.partitions);
  w.I64(t.partition_stride);
  w.I64(t.offset);
  w.I32(t.ndim);
  for (int d = 0; d < kMaxFreeDims; ++d) w.I64(t.sizes[d]);
  for (int d = 0; d < kMaxFreeDims; ++d) w.I64(t.strides[d]);
}

Tile ReadTile(Reader& r) {
  Tile t;
  t.memory = r.Enum(Memory::kPsum, "memory");
  t.dtype = r.Enum(kLastDType, "dtype");
  t.buffer = r.U32();
  t.partition_start = r.I32();
  t.partitions = r.I32();
  t.partition_stride = r.I64();
  t.offset = r.I64();
  t.ndim = r.I32();
  for (int d = 0; d < kMaxFreeDims; ++d) t.sizes[d] = r.I64();
  for (int d = 0; d < kMaxFreeDims; ++d) t.strides[d] = r.I64();
  return t;
}
constexpr size_t kTileBytes = 2 + 4 + 4 + 4 + 8 + 8 + 4 + 16 * kMaxFreeDims;

void WriteInstruction(Writer& w, const Instruction& ins) {
  w.U8(static_cast<uint8_t>(ins.opcode));
  w.U8(static_cast<uint8_t>(ins.engine));
  w.U8(static_cast<uint8_t>(ins.op0));
  w.U8(static_cast<uint8_t>(ins.op1));
  w.U8(static_cast<uint8_t>(ins.func));
  w.U8(ins.accumulate ? 1 : 0);
  w.U8(ins.queue);
  w.U32(ins.semaphore);
  w.U32(ins.value);
  w.F64(ins.imm0);
  w.F64(ins.imm1);
  WriteTile(w, ins.dst);
  WriteTile(w, ins.src0);
  WriteTile(w, ins.src1);
  w.U32(ins.source);
}

Instruction ReadInstruction(Reader& r) {
  Instruction ins;
  ins.opcode = r.Enum(Opcode::kDmaCopy, "opcode");
  ins.engine = r.Enum(Engine::kDma, "engine");
  ins.op0 = r.Enum(AluOp::kIsGreater, "op0");
  ins.op1 = r.Enum(AluOp::kIsGreater, "op1");
  ins.func = r.Enum(ActivationFunc::kReciprocal, "activation function");
  const uint8_t acc = r.U8();
  if (r.ok() && acc > 1) r.Fail(fmt::format("accumulate flag {} is not 0 or 1", acc));
  ins.accumulate = acc == 1;
  ins.queue = r.U8();
  const uint32_t sem = r.U32();
  if (r.ok() && sem > 0xffff) r.Fail(fmt::format("semaphore {} is out of range", sem));
  ins.semaphore = static_cast<uint16_t>(sem);
  ins.value = r.U32();
  ins.imm0 = r.F64();
  ins.imm1 = r.F64();
  ins.dst = ReadTile(r);
  ins.src0 = ReadTile(r);
  ins.src1 = ReadTile(r);
  ins.source = r.U32();
  return ins;
}
constexpr size_t kInstructionBytes = 7 + 4 + 4 + 8 + 8 + 3 * kTileBytes + 4;

// One section's body into `exe`.
void ReadSection(uint32_t tag, Reader& r, Executable& exe) {
  if (tag == kMeta) {
    exe.name = r.Str();
    exe.target = r.Enum(Target::kTrn2, "target");
  } else if (tag == kTens) {
    const uint32_t n = r.Count(4 + 1 + 1 + 4);
    for (uint32_t i = 0; i < n && r.ok(); ++i) {
      TensorDecl t;
      t.name = r.Str();
      t.kind = r.Enum(TensorKind::kInternal, "tensor kind");
      t.dtype = r.Enum(kLastDType, "dtype");
      const uint32_t dims = r.Count(8);
      for (uint32_t d = 0; d < dims && r.ok(); ++d) t.shape.push_back(r.I64());
      exe.tensors.push_back(std::move(t));
    }
  } else if (tag == kAloc) {
    const uint32_t n = r.Count(4 + 1 + 4 + 4 + 8 + 8);
    for (uint32_t i = 0; i < n && r.ok(); ++i) {
      Allocation a;
      a.name = r.Str();
      a.memory = r.Enum(Memory::kPsum, "memory");
      a.partition_start = r.I32();
      a.partitions = r.I32();
      a.byte_offset = r.I64();
      a.bytes = r.I64();
      exe.allocations.push_back(std::move(a));
    }
  } else if (tag == kSrcs) {
    const uint32_t n = r.Count(4 + 4 + 4 + 8);
    for (uint32_t i = 0; i < n && r.ok(); ++i) {
      SourceLoc s;
      s.file = r.Str();
      s.line = r.I32();
      s.op = r.Str();
      s.kernel_id = r.I64();
      exe.sources.push_back(std::move(s));
    }
  } else if (tag == kInst) {
    const uint32_t n = r.Count(kInstructionBytes);
    exe.instructions.reserve(n);
    for (uint32_t i = 0; i < n && r.ok(); ++i) exe.instructions.push_back(ReadInstruction(r));
  } else {
    return;  // a section of a later minor addition: skipped
  }
  if (r.ok() && !r.done()) r.Fail("the section has bytes left after its records");
}

std::string TagName(uint32_t tag) {
  std::string s(4, '?');
  for (int i = 0; i < 4; ++i) {
    const char c = static_cast<char>(tag >> (8 * i));
    if (c >= 32 && c < 127) s[i] = c;
  }
  return s;
}

}  // namespace

std::vector<uint8_t> Serialize(const Executable& exe) {
  Writer w;
  w.Begin(kMeta);
  w.Str(exe.name);
  w.U8(static_cast<uint8_t>(exe.target));
  w.End();
  w.Begin(kTens);
  w.U32(static_cast<uint32_t>(exe.tensors.size()));
  for (const TensorDecl& t : exe.tensors) {
    w.Str(t.name);
    w.U8(static_cast<uint8_t>(t.kind));
    w.U8(static_cast<uint8_t>(t.dtype));
    w.U32(static_cast<uint32_t>(t.shape.size()));
    for (int64_t s : t.shape) w.I64(s);
  }
  w.End();
  w.Begin(kAloc);
  w.U32(static_cast<uint32_t>(exe.allocations.size()));
  for (const Allocation& a : exe.allocations) {
    w.Str(a.name);
    w.U8(static_cast<uint8_t>(a.memory));
    w.I32(a.partition_start);
    w.I32(a.partitions);
    w.I64(a.byte_offset);
    w.I64(a.bytes);
  }
  w.End();
  w.Begin(kSrcs);
  w.U32(static_cast<uint32_t>(exe.sources.size()));
  for (const SourceLoc& s : exe.sources) {
    w.Str(s.file);
    w.I32(s.line);
    w.Str(s.op);
    w.I64(s.kernel_id);
  }
  w.End();
  w.Begin(kInst);
  w.U32(static_cast<uint32_t>(exe.instructions.size()));
  for (const Instruction& ins : exe.instructions) WriteInstruction(w, ins);
  w.End();

  const std::vector<uint8_t>& payload = w.bytes();
  Writer h;
  for (char c : kMagic) h.U8(static_cast<uint8_t>(c));
  h.U32(Executable::kFormatVersion);
  h.U32(kHeaderBytes);
  h.U64(payload.size());
  h.U32(static_cast<uint32_t>(crc32(0L, payload.data(), static_cast<uInt>(payload.size()))));
  h.U32(0);
  std::vector<uint8_t> out = std::move(h.bytes());
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

Status Parse(const uint8_t* data, size_t size, Executable* out) {
  if (size < kHeaderBytes || std::memcmp(data, kMagic, sizeof kMagic) != 0) {
    return Status::Error(
        "not a trnscope executable: the file does not start with the \"TRNXEXE\" header");
  }
  Reader h(data + sizeof kMagic, kHeaderBytes - sizeof kMagic, "header");
  const uint32_t version = h.U32();
  const uint32_t header_bytes = h.U32();
  const uint64_t payload_bytes = h.U64();
  const uint32_t crc = h.U32();
  if (version > Executable::kFormatVersion || version == 0) {
    return Status::Error(fmt::format(
        "executable format version {} is not supported: this trnscope reads version {}{}", version,
        Executable::kFormatVersion, version > 1 ? " (written by a newer trnscope)" : ""));
  }
  if (header_bytes != kHeaderBytes) {
    return Status::Error(
        fmt::format("corrupt executable: header size {}, expected {}", header_bytes, kHeaderBytes));
  }
  if (payload_bytes != size - kHeaderBytes) {
    return Status::Error(fmt::format(
        "truncated or padded executable: the header announces {} payload bytes, the file has {}",
        payload_bytes, size - kHeaderBytes));
  }
  const uint8_t* payload = data + kHeaderBytes;
  const uint32_t actual =
      static_cast<uint32_t>(crc32(0L, payload, static_cast<uInt>(payload_bytes)));
  if (actual != crc) {
    return Status::Error(fmt::format(
        "corrupt executable: payload checksum {:08x}, the header says {:08x}", actual, crc));
  }
  Executable exe;
  Reader r(payload, payload_bytes, "payload");
  bool seen_inst = false;
  while (r.ok() && !r.done()) {
    const size_t at = r.pos();
    const uint32_t tag = r.U32();
    const uint64_t body = r.U64();
    if (!r.ok()) break;
    if (body > payload_bytes - r.pos()) {
      return Status::Error(fmt::format(
          "corrupt executable: section {} at payload byte {} announces {} bytes, {} are left",
          TagName(tag), at, body, payload_bytes - r.pos()));
    }
    Reader section(payload + r.pos(), body, fmt::format("section {}", TagName(tag)));
    ReadSection(tag, section, exe);
    if (!section.ok()) return Status::Error("corrupt executable: " + section.error());
    seen_inst |= tag == kInst;
    r.Skip(body);
  }
  if (!r.ok()) return Status::Error("corrupt executable: " + r.error());
  if (!seen_inst) return Status::Error("corrupt executable: no INST section");
  if (Status s = Validate(exe); !s.ok()) return Status::Error("invalid executable: " + s.error);
  *out = std::move(exe);
  return Status::Ok();
}

Status Save(const Executable& exe, const std::string& path) {
  if (Status s = Validate(exe); !s.ok()) return s;
  const std::vector<uint8_t> bytes = Serialize(exe);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return Status::Error(fmt::format("cannot write '{}': {}", path, std::strerror(errno)));
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f.flush()) return Status::Error(fmt::format("writing '{}' failed", path));
  return Status::Ok();
}

Status Load(const std::string& path, Executable* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::Error(fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)),
                                   std::istreambuf_iterator<char>());
  Status s = Parse(bytes.data(), bytes.size(), out);
  if (!s.ok()) return Status::Error(fmt::format("{}: {}", path, s.error));
  return s;
}

}  // namespace trn::isa
