// Splits a Chrome-trace JSON file (plain or gzip) into its events without
// ever holding the whole file: it reads fixed-size chunks, walks the top-level
// object itself and hands each element of "traceEvents" (and each other
// top-level value) to a sink as a byte span. Parsing the fields of an event is
// the sink's job (TraceParser). See Note [Tolerant tokenizing].
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace trn::analysis {

// Every span handed to a sink is followed by at least this many readable
// bytes (simdjson's padding requirement; checked where simdjson is used);
// after an event span they are zeros, whatever follows in the file.
inline constexpr size_t kSpanPadding = 64;
// An event or top-level value longer than this is skipped, not buffered.
inline constexpr size_t kDefaultMaxValueBytes = size_t{64} << 20;

// Receives what the tokenizer finds, in file order.
class TokenSink {
 public:
  virtual ~TokenSink() = default;
  // One element of traceEvents (normally an object). Returns false if the
  // sink could not use it (counted as skipped, with its offset).
  virtual bool OnEvent(std::string_view json, uint64_t offset) = 0;
  // Why the last OnEvent returned false (goes into the skip warning).
  virtual std::string_view RejectReason() const { return "malformed event"; }
  // A top-level key other than traceEvents, with its raw JSON value.
  virtual void OnTopLevel(std::string_view key, std::string_view json) {}
};

// What a pass over one file recovered; deterministic for a given file.
struct TokenizeStats {
  uint64_t bytes = 0;       // uncompressed bytes read
  uint64_t events = 0;      // events the sink accepted
  uint64_t skipped = 0;     // elements dropped (malformed, oversized, truncated)
  bool truncated = false;   // the file ended before the top-level value closed
  bool recovered = false;   // anything was skipped or repaired
  std::vector<std::string> warnings;  // first kMaxWarnings, each with a byte offset
  uint64_t warnings_dropped = 0;      // warnings beyond the cap
  static constexpr size_t kMaxWarnings = 20;
};

// Result of Tokenize: ok, or a fatal error (unreadable path, not a trace).
struct TokenizeResult {
  bool ok = false;
  std::string error;  // set when !ok: names the path/offset and what was expected
  TokenizeStats stats;
};

struct TokenizeOptions {
  size_t chunk_bytes = size_t{4} << 20;
  size_t max_value_bytes = kDefaultMaxValueBytes;
  // Called every chunk with (bytes of the file consumed, file size); the
  // consumed count is of the compressed file for .gz inputs.
  std::function<void(uint64_t, uint64_t)> progress;
};

// Tokenizes the file at `path` into `sink`. Never throws for bad input.
TokenizeResult TokenizeFile(const std::string& path, TokenSink& sink,
                            const TokenizeOptions& options = {});
// The same over an in-memory document (tests, fuzzing).
TokenizeResult TokenizeBuffer(std::string_view data, TokenSink& sink,
                              const TokenizeOptions& options = {});

}  // namespace trn::analysis
