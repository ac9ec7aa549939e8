// libFuzzer target for the executable reader (core/isa: Parse, Validate) and
// what reads a parsed executable (inspect, the simulator, the summary). Built
// and run by `make fuzz-smoke` with clang++ -fsanitize=fuzzer,address,undefined
// from the seed core/isa/testdata/matmul_tile.trnx. Not part of the g++ build.
// Reproduce a finding: build/fuzz/fuzz_executable_reader build/fuzz/exe-crash-<sha>.
//
// The header's payload size and CRC-32 are rewritten to match each input, so
// mutations reach the section parser and the validator instead of all failing
// the checksum (the header checks themselves are unit-tested).
//
// Oracle beyond "no crash": whatever Parse accepts re-serializes to the same
// bytes and parses to an equal executable (the format has one encoding).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <zlib.h>

#include "core/isa/executable.h"
#include "core/isa/inspect.h"
#include "core/model/report.h"
#include "core/model/simulator.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr size_t kHeader = 32;  // Note [Executable format]
  std::vector<uint8_t> bytes(data, data + size);
  if (size >= kHeader) {
    const uint64_t payload = size - kHeader;
    const uint32_t crc = static_cast<uint32_t>(
        crc32(0L, bytes.data() + kHeader, static_cast<uInt>(payload)));
    std::memcpy(bytes.data() + 16, &payload, 8);
    std::memcpy(bytes.data() + 24, &crc, 4);
  }
  trn::isa::Executable exe;
  if (!trn::isa::Parse(bytes.data(), bytes.size(), &exe).ok()) return 0;
  const std::vector<uint8_t> again = trn::isa::Serialize(exe);
  trn::isa::Executable back;
  if (!trn::isa::Parse(again.data(), again.size(), &back).ok() || !(back == exe)) {
    std::fprintf(stderr, "fuzz_executable_reader: a parsed executable does not round-trip\n");
    std::abort();
  }
  (void)trn::isa::FormatInspect(exe, 4);
  if (exe.instructions.size() <= 4096) {  // keep each input fast
    trn::model::Timeline t;
    if (trn::model::Simulate(exe, {}, &t).ok()) (void)trn::model::FormatDeviceProfile(exe, t);
  }
  return 0;
}
