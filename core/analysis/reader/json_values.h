// Value coercion for the reader: the lenient conversions real traces need
// (numbers or numeric strings, microseconds to exact nanoseconds, pid/tid as
// text, string ids hashed). Internal to core/analysis/reader. Pure; any thread.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace trn::analysis {

namespace od = simdjson::ondemand;

std::string_view Trim(std::string_view s);  // ASCII whitespace at both ends

// "123.4567" microseconds -> 123457 ns without a double; false if not a number.
bool MicrosToNs(std::string_view s, int64_t* ns);
// Decimal digits only (whitespace trimmed) into a uint64; false otherwise.
bool ParseU64Text(std::string_view s, uint64_t* out);

// A number or numeric string as uint64 (negative/fractional values clamp); a
// non-numeric string becomes a hashed id with the top bit set.
bool GetU64(od::value v, uint64_t* out);
// A timestamp or duration in microseconds (number or string) as ns.
bool GetNs(od::value v, int64_t* ns);
// pid/tid: numbers or strings, kept as text ("5385", "Spans"; 7.0 -> "7").
bool GetId(od::value v, std::string* out);
// The raw bytes of a key up to its closing quote, never past `end`.
std::string_view RawKey(od::raw_json_string k, const char* end);

// s == lit, with the length known at compile time so the compare is inlined
// (the event parser tests every key of every event against these).
template <size_t N>
inline bool Is(std::string_view s, const char (&lit)[N]) {
  return s.size() == N - 1 && std::memcmp(s.data(), lit, N - 1) == 0;
}

// s equals lower_ascii ignoring ASCII case.
bool Lower(std::string_view s, std::string_view lower_ascii);

}  // namespace trn::analysis
