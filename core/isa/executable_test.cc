// The artifact's file format: round trips, and every way a file can be wrong
// gets a clear error (Note [Executable format]). Checksums are recomputed here
// with zlib so a test can corrupt one field and reach the check behind the CRC.
#include "core/isa/executable.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <iterator>
#include <fstream>
#include <string>
#include <vector>

#include "core/isa/isa_test_util.h"

namespace trn::isa {
namespace {

using testing::MatmulTile;

constexpr size_t kHeader = 32;

void FixChecksum(std::vector<uint8_t>& b) {
  const uint64_t payload = b.size() - kHeader;
  std::memcpy(b.data() + 16, &payload, 8);
  const uint32_t crc =
      static_cast<uint32_t>(crc32(0L, b.data() + kHeader, static_cast<uInt>(payload)));
  std::memcpy(b.data() + 24, &crc, 4);
}

std::string ParseError(const std::vector<uint8_t>& b) {
  Executable out;
  out.name = "untouched";
  const Status s = Parse(b.data(), b.size(), &out);
  EXPECT_EQ(out.name, "untouched");  // nothing is written on error
  return s.error;
}

// Offset in the payload of the first byte of section `tag`'s body.
size_t SectionBody(const std::vector<uint8_t>& b, const char* tag) {
  for (size_t at = kHeader; at + 12 <= b.size();) {
    uint64_t size;
    std::memcpy(&size, b.data() + at + 4, 8);
    if (std::memcmp(b.data() + at, tag, 4) == 0) return at + 12;
    at += 12 + size;
  }
  ADD_FAILURE() << "no section " << tag;
  return 0;
}

TEST(Executable, RoundTripsEveryField) {
  Executable x = MatmulTile(Target::kTrn1);
  x.instructions[4].engine = Engine::kScalar;  // tensor_copy moved to another engine
  x.instructions[3].accumulate = true;
  x.instructions[4].imm0 = -0.0;
  x.instructions[4].imm1 = 1e-300;
  x.instructions[4].op0 = AluOp::kIsGreater;
  x.instructions[4].func = ActivationFunc::kReciprocal;
  x.instructions[0].src0.ndim = 2;
  x.instructions[0].src0.sizes[0] = 2;
  x.instructions[0].src0.sizes[1] = 64;
  x.instructions[0].src0.strides[0] = 64;
  const std::vector<uint8_t> bytes = Serialize(x);
  Executable y;
  ASSERT_EQ(Parse(bytes.data(), bytes.size(), &y).error, "");
  EXPECT_TRUE(y == x);
  EXPECT_EQ(y.target, Target::kTrn1);
  EXPECT_EQ(y.sources[2].kernel_id, 3);
  EXPECT_EQ(Serialize(y), bytes);  // deterministic bytes

  const std::string path = ::testing::TempDir() + "/exe_roundtrip.trnx";
  ASSERT_EQ(Save(x, path).error, "");
  Executable z;
  ASSERT_EQ(Load(path, &z).error, "");
  EXPECT_TRUE(z == x);
  std::remove(path.c_str());
}

TEST(Executable, RejectsAnotherFileType) {
  const std::string json = "{\"traceEvents\": []}                    ";
  EXPECT_EQ(ParseError(std::vector<uint8_t>(json.begin(), json.end())),
            "not a trnscope executable: the file does not start with the \"TRNXEXE\" header");
  EXPECT_NE(ParseError({}).find("not a trnscope executable"), std::string::npos);
}

TEST(Executable, RejectsANewerFormatVersion) {
  std::vector<uint8_t> b = Serialize(MatmulTile());
  const uint32_t v = Executable::kFormatVersion + 1;
  std::memcpy(b.data() + 8, &v, 4);
  EXPECT_EQ(ParseError(b),
            "executable format version 2 is not supported: this trnscope reads "
            "version 1 (written by a newer trnscope)");
}

TEST(Executable, RejectsTruncationAndCorruption) {
  const std::vector<uint8_t> good = Serialize(MatmulTile());
  std::vector<uint8_t> b(good.begin(), good.end() - 1);
  EXPECT_NE(ParseError(b).find("truncated or padded executable: the header announces"),
            std::string::npos);
  b = good;
  b[b.size() / 2] ^= 0x40;
  EXPECT_NE(ParseError(b).find("corrupt executable: payload checksum"), std::string::npos);
  b = std::vector<uint8_t>(good.begin(), good.begin() + kHeader - 4);
  EXPECT_NE(ParseError(b).find("not a trnscope executable"), std::string::npos);
}

TEST(Executable, RejectsValuesOutsideTheFormat) {
  std::vector<uint8_t> b = Serialize(MatmulTile());
  const size_t inst = SectionBody(b, "INST");
  b[inst + 4] = 200;  // the first instruction's opcode
  FixChecksum(b);
  EXPECT_EQ(ParseError(b),
            "corrupt executable: section INST, byte 5: opcode 200 is not defined in format "
            "version 1");
}

TEST(Executable, RejectsAHugeCountWithoutAllocatingIt) {
  std::vector<uint8_t> b = Serialize(MatmulTile());
  const size_t inst = SectionBody(b, "INST");
  const uint32_t n = 0x7fffffff;
  std::memcpy(b.data() + inst, &n, 4);
  FixChecksum(b);
  EXPECT_NE(ParseError(b).find("a count of 2147483647 records does not fit"), std::string::npos);
}

TEST(Executable, RejectsASectionLargerThanTheFile) {
  std::vector<uint8_t> b = Serialize(MatmulTile());
  const size_t body = SectionBody(b, "ALOC");
  const uint64_t size = 1 << 30;
  std::memcpy(b.data() + body - 8, &size, 8);
  FixChecksum(b);
  EXPECT_NE(ParseError(b).find("section ALOC at payload byte"), std::string::npos);
}

TEST(Executable, SkipsAnUnknownSection) {
  const Executable x = MatmulTile();
  std::vector<uint8_t> b = Serialize(x);
  const uint8_t extra[] = {'N', 'E', 'X', 'T', 3, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3};
  b.insert(b.begin() + kHeader, std::begin(extra), std::end(extra));
  FixChecksum(b);
  Executable y;
  ASSERT_EQ(Parse(b.data(), b.size(), &y).error, "");
  EXPECT_TRUE(y == x);
}

TEST(Executable, ParseValidatesTheProgram) {
  Executable x = MatmulTile();
  x.allocations[3].bytes = 20 << 10;  // PSUM overflow
  const std::vector<uint8_t> b = Serialize(x);
  EXPECT_EQ(ParseError(b),
            "invalid executable: allocation 3 ('acc'): needs 20480 bytes per "
            "partition at offset 0 of psum; a partition of trn2 has 16384 (PSUM "
            "overflow)");
  EXPECT_NE(Save(x, ::testing::TempDir() + "/bad.trnx").error.find("PSUM overflow"),
            std::string::npos);
}

TEST(Executable, LoadNamesTheFile) {
  Executable y;
  EXPECT_EQ(Load("/nonexistent/k.trnx", &y).error,
            "cannot open '/nonexistent/k.trnx': No such file or directory");
  const std::string path = ::testing::TempDir() + "/not_exe.trnx";
  std::ofstream(path) << "hello";
  EXPECT_NE(Load(path, &y).error.find(path + ": not a trnscope executable"), std::string::npos);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace trn::isa

#ifdef TRN_ISA_TESTDATA
namespace trn::isa {
namespace {

// Inputs the fuzzer (cli/fuzz_executable_reader.cc) found, with their header
// fixed as the fuzzer does: each must parse to an error or to a program that
// validates again after a round trip (they crashed or overflowed before).
TEST(Executable, FuzzerFindingsStayFixed) {
  int seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(TRN_ISA_TESTDATA)) {
    if (entry.path().extension() != ".bin") continue;
    ++seen;
    std::ifstream f(entry.path(), std::ios::binary);
    std::vector<uint8_t> b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (b.size() >= kHeader) FixChecksum(b);
    Executable x;
    const Status s = Parse(b.data(), b.size(), &x);
    if (s.ok()) EXPECT_EQ(Validate(x).error, "") << entry.path();
  }
  EXPECT_EQ(seen, 3);
}

}  // namespace
}  // namespace trn::isa
#endif
