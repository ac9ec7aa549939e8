// A buffered JSON text sink onto a file that appears only when committed
// (written to PATH.tmp, renamed in Commit()). Shared by the Chrome-trace
// writers (chrome_trace.cc, device_trace.cc). One thread.
#pragma once

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "core/common/error.h"

namespace trn::exporter {

inline constexpr size_t kBufferBytes = size_t{4} << 20;

// Owns the temporary output file and a large text buffer; renames the file to
// its final path only in Commit(), and deletes it otherwise. One thread.
class Sink {
 public:
  explicit Sink(const std::string& path)
      : path_(path), tmp_path_(path + ".tmp"), buf_(new char[kBufferBytes]) {
    file_ = std::fopen(tmp_path_.c_str(), "wb");
    if (file_ == nullptr) Fail();
  }
  ~Sink() {
    if (file_ != nullptr) std::fclose(file_);
    if (!committed_) std::remove(tmp_path_.c_str());
  }
  Sink(const Sink&) = delete;
  Sink& operator=(const Sink&) = delete;

  void Raw(std::string_view s) {
    if (len_ + s.size() > kBufferBytes) {
      Flush();
      if (s.size() > kBufferBytes) return Write(s.data(), s.size());
    }
    std::memcpy(buf_.get() + len_, s.data(), s.size());
    len_ += s.size();
  }
  void Char(char c) {
    Reserve(1);
    buf_[len_++] = c;
  }
  void Int(int64_t v) {
    fmt::format_int f(v);
    Raw(std::string_view(f.data(), f.size()));
  }
  void Uint(uint64_t v) {
    fmt::format_int f(v);
    Raw(std::string_view(f.data(), f.size()));
  }
  // value / 1000 as fixed point with exactly 3 decimals, no floating point:
  // ns -> "µs.nnn", milli-units -> "units.mmm".
  void Milli(int64_t v) {
    uint64_t mag = static_cast<uint64_t>(v);
    if (v < 0) {
      Char('-');
      mag = ~mag + 1;  // also right for INT64_MIN
    }
    Uint(mag / 1000);
    const unsigned frac = static_cast<unsigned>(mag % 1000);
    Reserve(4);
    char* p = buf_.get() + len_;
    p[0] = '.';
    p[1] = static_cast<char>('0' + frac / 100);
    p[2] = static_cast<char>('0' + frac / 10 % 10);
    p[3] = static_cast<char>('0' + frac % 10);
    len_ += 4;
  }
  void Str(std::string_view s);  // a quoted, escaped JSON string

  // Flushes, closes and renames onto the final path.
  void Commit() {
    Flush();
    FILE* f = file_;
    file_ = nullptr;
    if (std::fclose(f) != 0) Fail();
    if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0) Fail();
    committed_ = true;
  }
  uint64_t bytes() const { return written_ + len_; }

 private:
  void Reserve(size_t n) {
    if (len_ + n > kBufferBytes) Flush();
  }
  void Flush() {
    Write(buf_.get(), len_);
    len_ = 0;
  }
  void Write(const char* data, size_t n) {
    if (n != 0 && std::fwrite(data, 1, n, file_) != n) Fail();
    written_ += n;
  }
  [[noreturn]] void Fail() {
    throw Error(
        fmt::format("cannot write Chrome trace '{}': {}", path_, std::strerror(errno)));
  }

  std::string path_, tmp_path_;
  std::unique_ptr<char[]> buf_;
  size_t len_ = 0;
  uint64_t written_ = 0;
  FILE* file_ = nullptr;
  bool committed_ = false;
};

}  // namespace trn::exporter
