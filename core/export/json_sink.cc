#include "core/export/json_sink.h"

#include <array>

namespace trn::exporter {
namespace {

// 1 for bytes that end a plain run inside a JSON string: control characters,
// '"', '\\', DEL (Perfetto's key reader rejects it raw) and non-ASCII (checked
// as UTF-8).
constexpr auto kSpecial = [] {
  std::array<bool, 256> t{};
  for (int c = 0; c < 256; ++c) t[c] = c < 0x20 || c == '"' || c == '\\' || c >= 0x7f;
  return t;
}();

// Length of the well-formed UTF-8 sequence at s (RFC 3629: no overlongs, no
// surrogates, nothing past U+10FFFF), 0 if there is none.
size_t Utf8Length(const unsigned char* s, size_t n) {
  const unsigned c = s[0];
  auto cont = [&](size_t i) { return i < n && (s[i] & 0xC0) == 0x80; };
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    if (c == 0xE0 && s[1] < 0xA0) return 0;  // overlong
    if (c == 0xED && s[1] > 0x9F) return 0;  // surrogate
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if (c == 0xF0 && s[1] < 0x90) return 0;  // overlong
    if (c == 0xF4 && s[1] > 0x8F) return 0;  // > U+10FFFF
    return 4;
  }
  return 0;
}

}  // namespace

void Sink::Str(std::string_view s) {
  Char('"');
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t run = 0;  // start of the pending plain run
  for (size_t i = 0; i < n;) {
    if (!kSpecial[p[i]]) {
      ++i;
      continue;
    }
    const unsigned char c = p[i];
    if (c >= 0x80) {
      if (size_t len = Utf8Length(p + i, n - i)) {
        i += len;  // valid UTF-8 passes through inside the run
        continue;
      }
    }
    Raw(s.substr(run, i - run));
    switch (c) {
      case '"':
        Raw("\\\"");
        break;
      case '\\':
        Raw("\\\\");
        break;
      case '\n':
        Raw("\\n");
        break;
      case '\r':
        Raw("\\r");
        break;
      case '\t':
        Raw("\\t");
        break;
      case '\b':
        Raw("\\b");
        break;
      case '\f':
        Raw("\\f");
        break;
      default:
        if (c >= 0x80) {
          Raw("\xEF\xBF\xBD");  // U+FFFD for each byte of invalid UTF-8
        } else {
          constexpr char kHex[] = "0123456789abcdef";
          const char esc[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
          Raw(std::string_view(esc, 6));
        }
    }
    run = ++i;
  }
  Raw(s.substr(run));
  Char('"');
}

}  // namespace trn::exporter
