#include "core/analysis/reader/json_values.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>

namespace trn::analysis {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// "123.4567" microseconds -> 123457 ns without going through a double (epoch
// timestamps in µs have 19 significant digits in ns).
bool MicrosToNs(std::string_view s, int64_t* ns) {
  s = Trim(s);
  if (s.empty()) return false;
  bool neg = false;
  size_t i = 0;
  if (s[0] == '-') neg = true, ++i;
  __int128 v = 0;
  size_t digits = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, ++digits) {
    v = v * 10 + (s[i] - '0');
    if (v > (__int128{1} << 100)) return false;
  }
  int frac = 0;
  int round = 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, ++digits) {
      if (frac < 3) {
        v = v * 10 + (s[i] - '0');
        ++frac;
      } else if (frac == 3) {
        round = s[i] >= '5';
        frac = 4;
      }
    }
  }
  if (digits == 0) return false;
  if (i < s.size()) {  // exponent or junk: take the slow, approximate road
    char* end = nullptr;
    const std::string tmp(s);
    const double d = std::strtod(tmp.c_str(), &end);
    if (end == nullptr || *end != '\0' || !std::isfinite(d) || std::fabs(d) > 9e15) return false;
    *ns = static_cast<int64_t>(std::llround(d * 1000.0));
    return true;
  }
  for (int k = std::min(frac, 3); k < 3; ++k) v *= 10;
  v += round;
  if (v > INT64_MAX) return false;
  *ns = neg ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
  return true;
}

bool ParseU64Text(std::string_view s, uint64_t* out) {
  s = Trim(s);
  if (s.empty()) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    if (v > (UINT64_MAX - 9) / 10) return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return true;
}

// A number or numeric string as uint64 (negative/fractional values clamp).
bool GetU64(od::value v, uint64_t* out) {
  od::json_type t;
  if (v.type().get(t)) return false;
  if (t == od::json_type::number) {
    std::string_view raw = v.raw_json_token();
    if (ParseU64Text(raw, out)) return true;
    double d = 0;
    if (v.get_double().get(d)) return false;
    *out = d > 0 && d < 1.8e19 ? static_cast<uint64_t>(d) : 0;
    return true;
  }
  if (t == od::json_type::string) {
    std::string_view s;
    if (v.get_string().get(s)) return false;
    if (ParseU64Text(s, out)) return true;
    *out = std::hash<std::string_view>()(s) | (uint64_t{1} << 63);  // a string id
    return true;
  }
  return false;
}

bool GetNs(od::value v, int64_t* ns) {
  od::json_type t;
  if (v.type().get(t)) return false;
  std::string_view s;
  if (t == od::json_type::number) {
    s = v.raw_json_token();
  } else if (t == od::json_type::string) {
    if (v.get_string().get(s)) return false;
  } else {
    return false;
  }
  return MicrosToNs(s, ns);
}

// pid/tid: numbers or strings, kept as text ("5385", "Spans").
bool GetId(od::value v, std::string* out) {
  od::json_type t;
  if (v.type().get(t)) return false;
  std::string_view s;
  if (t == od::json_type::number) {
    s = Trim(v.raw_json_token());
    const size_t dot = s.find('.');
    if (dot != std::string_view::npos && s.find_first_not_of('0', dot + 1) == std::string_view::npos)
      s = s.substr(0, dot);  // 7.0 -> 7
  } else if (t == od::json_type::string) {
    if (v.get_string().get(s)) return false;
  } else if (t == od::json_type::null) {
    s = "";
  } else {
    return false;
  }
  out->assign(s);
  return true;
}

// The raw bytes of a key up to its closing quote (a key with escapes keeps
// them, so it simply matches none of ours).
std::string_view RawKey(od::raw_json_string k, const char* end) {
  const char* p = reinterpret_cast<const char*>(k.raw());
  const char* q = p;
  while (q < end && *q != '"') q += *q == '\\' ? 2 : 1;
  return std::string_view(p, static_cast<size_t>(std::min(q, end) - p));
}

bool Lower(std::string_view s, std::string_view lower_ascii) {
  if (s.size() != lower_ascii.size()) return false;
  for (size_t i = 0; i < s.size(); ++i)
    if ((s[i] >= 'A' && s[i] <= 'Z' ? s[i] + ('a' - 'A') : s[i]) != lower_ascii[i]) return false;
  return true;
}

}  // namespace trn::analysis
