// Note [Tolerant tokenizing]
// Real traces are messy: profilers crash mid-write (no closing "]}"), tools
// append events with trailing commas, ids are strings or numbers, and files
// pass 4 GiB (simdjson's document cap). So the tokenizer never builds one
// document: it scans bytes, tracking only string/escape state and bracket
// depth, and hands out one event at a time. Commas between events are
// optional and may repeat; an element that is not an object, or that the sink
// rejects, is skipped and counted with its byte offset; an event longer than
// max_value_bytes is skipped without being buffered (so a 100 MB string costs
// one chunk of memory); a file that ends inside traceEvents keeps every event
// before the cut. Only input that is not a trace at all (empty, not an object
// or array, no traceEvents) is a fatal error.
#include "core/analysis/reader/json_tokenizer.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <zlib.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>

namespace trn::analysis {
namespace {

// A byte stream: gzip or plain file (zlib reads both), or memory.
class Reader {
 public:
  virtual ~Reader() = default;
  // Bytes read into dst (0 at the end); -1 on a read error (see error()).
  virtual int64_t Read(char* dst, size_t n) = 0;
  virtual uint64_t Consumed() const = 0;  // position in the underlying file
  std::string error;
};

class GzReader final : public Reader {
 public:
  explicit GzReader(gzFile f) : f_(f) {}
  ~GzReader() override { gzclose(f_); }
  int64_t Read(char* dst, size_t n) override {
    const unsigned want = static_cast<unsigned>(std::min<size_t>(n, INT_MAX / 2));
    const int got = gzread(f_, dst, want);
    if (got < 0) {
      int code = 0;
      const char* msg = gzerror(f_, &code);
      error = code == Z_ERRNO ? std::strerror(errno) : (msg != nullptr ? msg : "read error");
      return -1;
    }
    return got;
  }
  uint64_t Consumed() const override {
    const auto off = gzoffset(f_);
    return off < 0 ? 0 : static_cast<uint64_t>(off);
  }

 private:
  gzFile f_;
};

class MemoryReader final : public Reader {
 public:
  explicit MemoryReader(std::string_view data) : data_(data) {}
  int64_t Read(char* dst, size_t n) override {
    n = std::min(n, data_.size() - pos_);
    std::memcpy(dst, data_.data() + pos_, n);
    pos_ += n;
    return static_cast<int64_t>(n);
  }
  uint64_t Consumed() const override { return pos_; }

 private:
  std::string_view data_;
  size_t pos_ = 0;
};

constexpr auto MakeTable(std::string_view chars) {
  std::array<uint8_t, 256> t{};
  for (char c : chars) t[static_cast<uint8_t>(c)] = 1;
  return t;
}
// Bytes that change the scanner's state outside a string.
constexpr auto kScalarEnd = MakeTable(",]}: \t\r\n");
constexpr auto kSpace = MakeTable(" \t\r\n");

// Bytes that can change ScanValue's state: quote, backslash and brackets.
constexpr auto kSpecial = MakeTable("\"\\{}[]");

// Index of the first byte of `"\{}[]` in b[k, n), or n. Reads up to 15 bytes
// past n, which the tokenizer's padding allows. Events are mostly short
// strings and numbers, so this is the reader's hottest loop.
inline size_t FindSpecial(const char* b, size_t k, size_t n) {
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\');
  const __m128i open = _mm_set1_epi8('{'), close = _mm_set1_epi8('}'), lower = _mm_set1_epi8(0x20);
  for (; k < n; k += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + k));
    const __m128i folded = _mm_or_si128(v, lower);  // '[' -> '{', ']' -> '}'
    const __m128i hit = _mm_or_si128(
        _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
        _mm_or_si128(_mm_cmpeq_epi8(folded, open), _mm_cmpeq_epi8(folded, close)));
    const unsigned mask = static_cast<unsigned>(_mm_movemask_epi8(hit));
    if (mask != 0) return std::min(n, k + static_cast<size_t>(__builtin_ctz(mask)));
  }
  return n;
#else
  while (k < n && !kSpecial[static_cast<uint8_t>(b[k])]) ++k;
  return k;
#endif
}

std::string Describe(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return fmt::format("'{}'", c);
  return fmt::format("byte 0x{:02x}", u);
}

// Walks one file; see Note [Tolerant tokenizing]. One thread.
class Tokenizer {
 public:
  Tokenizer(Reader& in, uint64_t file_size, TokenSink& sink, const TokenizeOptions& opt)
      : in_(in), file_size_(file_size), sink_(sink), opt_(opt) {
    // Tiny chunks are allowed so tests and the fuzzer can put a chunk
    // boundary anywhere; the buffer grows as a value needs.
    cap_ = std::max<size_t>(opt.chunk_bytes, 16);
    buf_.reset(new char[cap_ + kSpanPadding]);
  }

  TokenizeResult Run() {
    TokenizeResult r;
    char c;
    if (!NextNonWs(&c)) {
      r.error = read_failed_ ? fmt::format("read error: {}", in_.error)
                             : base_ + end_ == 0 ? "the file is empty, expected a JSON trace"
                                                 : "the file holds only whitespace, expected a "
                                                   "JSON trace";
      return r;
    }
    if (c == '{') {
      ++pos_;
      if (!TopObject(&r.error)) return r;
    } else if (c == '[') {
      ++pos_;
      Events();
    } else {
      r.error = fmt::format(
          "not a Chrome trace: expected '{{' or '[' at byte {}, found {}", Offset(), Describe(c));
      return r;
    }
    if (!stats_.truncated && NextNonWs(&c))
      Warn(fmt::format("ignored data after the end of the trace at byte {}", Offset()));
    if (read_failed_) Warn(fmt::format("read error at byte {}: {}", Offset(), in_.error));
    stats_.bytes = base_ + end_;
    r.ok = true;
    r.stats = std::move(stats_);
    return r;
  }

 private:
  enum class Scan { kDone, kOversized, kEof };

  uint64_t Offset() const { return base_ + pos_; }

  void Warn(std::string w) {
    stats_.recovered = true;
    if (stats_.warnings.size() < TokenizeStats::kMaxWarnings) {
      stats_.warnings.push_back(std::move(w));
    } else {
      ++stats_.warnings_dropped;
    }
  }
  void Skip(uint64_t offset, std::string_view why) {
    ++stats_.skipped;
    Warn(fmt::format("skipped event at byte {}: {}", offset, why));
  }

  // Keeps [pos_, end_), reads more after it. False at end of input.
  bool Fill() {
    if (eof_) return false;
    if (pos_ > 0) {
      std::memmove(buf_.get(), buf_.get() + pos_, end_ - pos_);
      base_ += pos_;
      end_ -= pos_;
      pos_ = 0;
    }
    if (end_ == cap_) {  // one value fills the buffer: grow (bounded by ScanValue)
      const size_t cap = cap_ * 2;
      std::unique_ptr<char[]> bigger(new char[cap + kSpanPadding]);
      std::memcpy(bigger.get(), buf_.get(), end_);
      buf_ = std::move(bigger);
      cap_ = cap;
    }
    const int64_t got = in_.Read(buf_.get() + end_, cap_ - end_);
    if (got <= 0) {
      eof_ = true;
      read_failed_ = got < 0;
      return false;
    }
    end_ += static_cast<size_t>(got);
    std::memset(buf_.get() + end_, 0, kSpanPadding);
    if (opt_.progress) opt_.progress(in_.Consumed(), file_size_);
    return true;
  }

  bool NextNonWs(char* c) {
    for (;;) {
      while (pos_ < end_ && kSpace[static_cast<uint8_t>(buf_[pos_])]) ++pos_;
      if (pos_ < end_) {
        // A UTF-8 byte order mark at the very start.
        if (base_ + pos_ == 0 && end_ - pos_ >= 3 && std::memcmp(buf_.get(), "\xEF\xBB\xBF", 3) == 0) {
          pos_ += 3;
          continue;
        }
        *c = buf_[pos_];
        return true;
      }
      if (!Fill()) return false;
    }
  }

  // Finds the end of the value starting at pos_ (its first byte). On kDone,
  // *len is its length and pos_ is unchanged; on kOversized pos_ is past it;
  // on kEof the input ended inside it.
  Scan ScanValue(size_t* len) {
    const char first = buf_[pos_];
    const bool container = first == '{' || first == '[';
    const bool string = first == '"';
    int64_t depth = 0;
    bool in_str = false, escaped = false, dropping = false;
    size_t k = 0;  // bytes of the value scanned so far, from pos_
    if (!container && !string) {
      // A scalar (or garbage): up to the next delimiter; at least one byte.
      for (;;) {
        while (pos_ + k < end_ && !kScalarEnd[static_cast<uint8_t>(buf_[pos_ + k])]) ++k;
        if (pos_ + k < end_ || !Fill()) break;
      }
      *len = std::max<size_t>(k, 1);
      return Scan::kDone;
    }
    if (string) {
      in_str = true;
      k = 1;
    }
    for (;;) {
      const char* b = buf_.get() + pos_;
      const size_t n = end_ - pos_;
      if (escaped && k < n) {  // a backslash ended the previous chunk
        escaped = false;
        ++k;
      }
      while ((k = FindSpecial(b, k, n)) < n) {
        const char c = b[k];
        if (in_str) {
          if (c == '\\') {
            if (k + 1 == n) {  // the escaped byte is in the next chunk
              escaped = true;
              k = n;
              break;
            }
            k += 2;
            continue;
          }
          if (c == '"') {
            in_str = false;
            if (string) {
              *len = k + 1;
              return Scan::kDone;
            }
          }
          ++k;  // brackets inside strings are text
          continue;
        }
        switch (c) {
          case '"': in_str = true; break;
          case '{': case '[': ++depth; break;
          case '}': case ']':
            if (--depth == 0) {
              if (dropping) {
                pos_ += k + 1;
                return Scan::kOversized;
              }
              *len = k + 1;
              return Scan::kDone;
            }
            break;
          default: break;  // a stray backslash outside a string
        }
        ++k;
      }
      if (dropping || k >= opt_.max_value_bytes) {  // stop buffering: skip as we go
        dropping = true;
        pos_ += k;
        k = 0;
      }
      if (!Fill()) {
        pos_ = end_;  // the rest is the cut-off value
        return Scan::kEof;
      }
    }
  }

  // The top-level object; false on a fatal error (set in *error).
  bool TopObject(std::string* error) {
    bool saw_events = false;
    char c;
    std::string key;
    for (;;) {
      if (!NextNonWs(&c)) {
        stats_.truncated = true;
        if (!saw_events) {
          *error = fmt::format("the file ends at byte {} before any traceEvents array", Offset());
          return false;
        }
        Warn(fmt::format("the file ends at byte {} inside the top-level object (missing '}}')",
                         Offset()));
        return true;
      }
      if (c == ',') {
        ++pos_;
        continue;
      }
      if (c == '}') {
        ++pos_;
        break;
      }
      const uint64_t at = Offset();
      size_t len = 0;
      bool bad = c != '"';
      if (!bad) {
        const Scan s = ScanValue(&len);
        bad = s != Scan::kDone;
        if (!bad) key.assign(buf_.get() + pos_ + 1, len - 2);
        if (!bad) pos_ += len;
      }
      if (!bad) bad = !NextNonWs(&c) || c != ':';
      if (bad) {
        if (saw_events) {
          Warn(fmt::format("expected a key at byte {}; ignored the rest of the file", at));
          return true;
        }
        *error = fmt::format("not a Chrome trace: expected a key string at byte {}", at);
        return false;
      }
      ++pos_;
      if (!NextNonWs(&c)) continue;  // reported as truncated above
      if (key == "traceEvents") {
        if (c != '[') {
          *error = fmt::format("traceEvents at byte {} is not an array (found {})", Offset(),
                               Describe(c));
          return false;
        }
        ++pos_;
        saw_events = true;
        Events();
        if (stats_.truncated) return true;
        continue;
      }
      const uint64_t value_at = Offset();
      switch (ScanValue(&len)) {
        case Scan::kDone:
          sink_.OnTopLevel(key, std::string_view(buf_.get() + pos_, len));
          pos_ += len;
          break;
        case Scan::kOversized:
          Warn(fmt::format("skipped top-level '{}' at byte {}: larger than {} bytes", key,
                           value_at, opt_.max_value_bytes));
          break;
        case Scan::kEof:
          break;  // the next NextNonWs reports the truncation
      }
    }
    if (!saw_events) {
      *error = "not a Chrome trace: the top-level object has no traceEvents array";
      return false;
    }
    return true;
  }

  // Hands buf_[pos_, pos_ + len) to the sink with kSpanPadding zero bytes
  // after it. simdjson reads into the padding when an event is malformed
  // ({"a":} looks complete if a '}' follows), so the padding must not be the
  // next event's bytes, or the result would depend on chunk boundaries.
  bool SendEvent(size_t len, uint64_t at) {
    char* tail = buf_.get() + pos_ + len;  // the buffer has kSpanPadding past cap_
    char saved[kSpanPadding];
    std::memcpy(saved, tail, kSpanPadding);
    std::memset(tail, 0, kSpanPadding);
    const bool ok = sink_.OnEvent(std::string_view(buf_.get() + pos_, len), at);
    std::memcpy(tail, saved, kSpanPadding);
    return ok;
  }

  void Events() {
    char c;
    for (;;) {
      if (!NextNonWs(&c)) {
        stats_.truncated = true;
        Warn(fmt::format(
            "the file ends at byte {} inside traceEvents (missing ']'); kept the {} events "
            "before it",
            Offset(), stats_.events));
        return;
      }
      if (c == ',') {  // separators, including trailing and repeated commas
        ++pos_;
        continue;
      }
      if (c == ']') {
        ++pos_;
        return;
      }
      const uint64_t at = Offset();
      if (c == '}' || c == ':') {
        ++pos_;
        Skip(at, fmt::format("unexpected {}", Describe(c)));
        continue;
      }
      size_t len = 0;
      switch (ScanValue(&len)) {
        case Scan::kDone:
          if (c != '{') {
            Skip(at, "not a JSON object");
          } else if (SendEvent(len, at)) {
            ++stats_.events;
          } else {
            Skip(at, sink_.RejectReason());
          }
          pos_ += len;
          break;
        case Scan::kOversized:
          Skip(at, fmt::format("larger than {} bytes", opt_.max_value_bytes));
          break;
        case Scan::kEof:
          Skip(at, "cut off by the end of the file");
          break;  // NextNonWs fails next and reports the truncation
      }
    }
  }

  Reader& in_;
  uint64_t file_size_;
  TokenSink& sink_;
  const TokenizeOptions& opt_;
  TokenizeStats stats_;
  std::unique_ptr<char[]> buf_;
  size_t cap_ = 0;
  size_t pos_ = 0, end_ = 0;  // unread bytes are buf_[pos_, end_)
  uint64_t base_ = 0;         // file offset of buf_[0]
  bool eof_ = false;
  bool read_failed_ = false;
};

}  // namespace

TokenizeResult TokenizeFile(const std::string& path, TokenSink& sink,
                            const TokenizeOptions& options) {
  TokenizeResult r;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    r.error = fmt::format("cannot open trace '{}': {}", path, std::strerror(errno));
    return r;
  }
  if (S_ISDIR(st.st_mode)) {
    r.error = fmt::format("'{}' is a directory, expected a trace file (.json or .json.gz)", path);
    return r;
  }
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) {
    r.error = fmt::format("cannot open trace '{}': {}", path, std::strerror(errno));
    return r;
  }
  gzbuffer(f, 1 << 20);
  GzReader reader(f);
  r = Tokenizer(reader, static_cast<uint64_t>(st.st_size), sink, options).Run();
  if (!r.ok) r.error = fmt::format("{}: {}", path, r.error);
  return r;
}

TokenizeResult TokenizeBuffer(std::string_view data, TokenSink& sink,
                              const TokenizeOptions& options) {
  MemoryReader reader(data);
  return Tokenizer(reader, data.size(), sink, options).Run();
}

}  // namespace trn::analysis
