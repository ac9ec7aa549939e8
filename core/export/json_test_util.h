// A strict JSON reader for the exporters' tests (RFC 8259: no trailing
// commas, no raw control characters, well-formed UTF-8, no duplicate keys),
// written independently of the writers' own escaping.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trn::exporter::testing {

namespace fs = std::filesystem;

struct Json {
  enum Type { kNull, kBool, kNumber, kString, kArray, kObject } type = kNull;
  bool boolean = false;
  std::string text;  // a number's literal text, or a string's decoded value
  std::vector<Json> array;
  std::vector<std::pair<std::string, Json>> object;

  const Json* Find(std::string_view key) const {
    for (const auto& [k, v] : object)
      if (k == key) return &v;
    return nullptr;
  }
  bool Has(std::string_view key) const { return Find(key) != nullptr; }
  const Json& operator[](std::string_view key) const {
    static const Json kMissing;
    const Json* v = Find(key);
    if (v == nullptr) ADD_FAILURE() << "missing key '" << key << "'";
    return v != nullptr ? *v : kMissing;
  }
  int64_t Int() const {
    EXPECT_EQ(type, kNumber);
    size_t used = 0;
    int64_t v = std::stoll(text, &used);
    EXPECT_EQ(used, text.size()) << "not an integer: " << text;
    return v;
  }
  const std::string& Str() const {
    EXPECT_EQ(type, kString);
    return text;
  }
};

class JsonReader {
 public:
  explicit JsonReader(std::string_view s) : s_(s) {}
  Json ParseDocument() {
    Json v = Value();
    Space();
    if (i_ != s_.size()) Fail("trailing data");
    return v;
  }

 private:
  [[noreturn]] void Fail(const std::string& what) {
    throw std::runtime_error(what + " at offset " + std::to_string(i_));
  }
  void Space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t'))
      ++i_;
  }
  char Peek() {
    if (i_ >= s_.size()) Fail("unexpected end");
    return s_[i_];
  }
  void Expect(char c) {
    if (Peek() != c) Fail(std::string("expected '") + c + "'");
    ++i_;
  }
  void Literal(std::string_view lit) {
    if (s_.substr(i_, lit.size()) != lit) Fail("bad literal");
    i_ += lit.size();
  }
  Json Value() {
    Space();
    Json v;
    const char c = Peek();
    if (c == '{') {
      v.type = Json::kObject;
      ++i_;
      Space();
      if (Peek() == '}') return ++i_, v;
      for (;;) {
        Space();
        std::string key = String();
        for (const auto& [k, unused] : v.object)
          if (k == key) Fail("duplicate key " + key);
        Space();
        Expect(':');
        v.object.emplace_back(std::move(key), Value());
        Space();
        if (Peek() == ',') {
          ++i_;
          continue;
        }
        Expect('}');
        return v;
      }
    }
    if (c == '[') {
      v.type = Json::kArray;
      ++i_;
      Space();
      if (Peek() == ']') return ++i_, v;
      for (;;) {
        v.array.push_back(Value());
        Space();
        if (Peek() == ',') {
          ++i_;
          continue;
        }
        Expect(']');
        return v;
      }
    }
    if (c == '"') {
      v.type = Json::kString;
      v.text = String();
      return v;
    }
    if (c == 't') return Literal("true"), v.type = Json::kBool, v.boolean = true, v;
    if (c == 'f') return Literal("false"), v.type = Json::kBool, v;
    if (c == 'n') return Literal("null"), v;
    v.type = Json::kNumber;
    v.text = Number();
    return v;
  }
  std::string Number() {
    const size_t start = i_;
    auto digits = [&] {
      const size_t d = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      if (i_ == d) Fail("expected a digit");
    };
    if (Peek() == '-') ++i_;
    if (Peek() == '0') {
      ++i_;
    } else {
      digits();
    }
    if (i_ < s_.size() && s_[i_] == '.') ++i_, digits();
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (Peek() == '+' || Peek() == '-') ++i_;
      digits();
    }
    return std::string(s_.substr(start, i_ - start));
  }
  unsigned Hex4() {
    unsigned v = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = Peek();
      ++i_;
      v <<= 4;
      if (c >= '0' && c <= '9') v |= c - '0';
      else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
      else Fail("bad \\u escape");
    }
    return v;
  }
  static void PutUtf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | cp >> 6);
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | cp >> 12);
      out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | cp >> 18);
      out += static_cast<char>(0x80 | (cp >> 12 & 0x3F));
      out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  // Decodes one raw UTF-8 code point (strictly) and appends its bytes.
  void RawUtf8(std::string& out) {
    const auto b0 = static_cast<unsigned char>(s_[i_]);
    int n = b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : b0 >= 0xC0 ? 2 : 0;
    if (n == 0 || b0 > 0xF4) Fail("invalid UTF-8 lead byte");
    if (i_ + n > s_.size()) Fail("truncated UTF-8");
    unsigned cp = b0 & (0x7F >> n);
    for (int k = 1; k < n; ++k) {
      const auto b = static_cast<unsigned char>(s_[i_ + k]);
      if ((b & 0xC0) != 0x80) Fail("invalid UTF-8 continuation");
      cp = cp << 6 | (b & 0x3F);
    }
    const unsigned min[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) Fail("invalid code point");
    out.append(s_.substr(i_, n));
    i_ += n;
  }
  std::string String() {
    Expect('"');
    std::string out;
    for (;;) {
      const auto c = static_cast<unsigned char>(Peek());
      if (c == '"') return ++i_, out;
      if (c < 0x20) Fail("raw control character in string");
      if (c >= 0x80) {
        RawUtf8(out);
        continue;
      }
      ++i_;
      if (c != '\\') {
        out += static_cast<char>(c);
        continue;
      }
      const char e = Peek();
      ++i_;
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned cp = Hex4();
          if (cp >= 0xDC00 && cp <= 0xDFFF) Fail("lone low surrogate");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            Expect('\\');
            Expect('u');
            const unsigned lo = Hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) Fail("bad surrogate pair");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          PutUtf8(out, cp);
          break;
        }
        default: Fail("bad escape");
      }
    }
  }

  std::string_view s_;
  size_t i_ = 0;
};


// ---- Helpers --------------------------------------------------------------------

inline std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline std::string TempPath(const std::string& name) {
  return (fs::temp_directory_path() / ("trn_export_test_" + std::to_string(getpid()) + "_" + name))
      .string();
}

// ns since the epoch from a "ts"/"dur" literal, which must have exactly three decimals.
inline int64_t NsOf(const Json& v) {
  EXPECT_EQ(v.type, Json::kNumber);
  const std::string& t = v.text;
  const size_t dot = t.find('.');
  EXPECT_NE(dot, std::string::npos) << t;
  if (dot == std::string::npos) return 0;
  EXPECT_EQ(t.size() - dot, 4u) << "not 3 decimals: " << t;
  return std::stoll(t.substr(0, dot)) * 1000 + std::stoll(t.substr(dot + 1));
}

}  // namespace trn::exporter::testing
