#include "tools/ctl/json_writer.h"

#include <cmath>
#include <cstdio>

#include "tools/ctl/value_format.h"

namespace pace::ctl {

namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 if it is not valid.
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  size_t n;
  uint32_t cp;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return 0;
  if (cp >= 0xD800 && cp <= 0xDFFF) return 0;  // surrogates are not characters
  return n;
}

}  // namespace

std::string JsonQuote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('"');
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"':
        out += "\\\"";
        ++i;
        continue;
      case '\\':
        out += "\\\\";
        ++i;
        continue;
      case '\n':
        out += "\\n";
        ++i;
        continue;
      case '\r':
        out += "\\r";
        ++i;
        continue;
      case '\t':
        out += "\\t";
        ++i;
        continue;
      case '\b':
        out += "\\b";
        ++i;
        continue;
      case '\f':
        out += "\\f";
        ++i;
        continue;
      default:
        break;
    }
    if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
      ++i;
      continue;
    }
    size_t n = Utf8SequenceLength(s, i);
    if (n == 0) {
      out += "\\ufffd";
      ++i;
      continue;
    }
    out.append(s.data() + i, n);
    i += n;
  }
  out.push_back('"');
  return out;
}

void JsonWriter::BeforeValue() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) *out_ << ',';
    first_.back() = false;
  }
}

void JsonWriter::BeginObject() {
  BeforeValue();
  *out_ << '{';
  first_.push_back(true);
}

void JsonWriter::EndObject() {
  first_.pop_back();
  *out_ << '}';
}

void JsonWriter::BeginArray() {
  BeforeValue();
  *out_ << '[';
  first_.push_back(true);
}

void JsonWriter::EndArray() {
  first_.pop_back();
  *out_ << ']';
}

void JsonWriter::Key(std::string_view key) {
  BeforeValue();
  *out_ << JsonQuote(key) << ':';
  after_key_ = true;
}

void JsonWriter::String(std::string_view s) {
  BeforeValue();
  *out_ << JsonQuote(s);
}

void JsonWriter::Int(int64_t v) {
  BeforeValue();
  *out_ << v;
}

void JsonWriter::Uint(uint64_t v) {
  BeforeValue();
  *out_ << v;
}

void JsonWriter::Bool(bool v) {
  BeforeValue();
  *out_ << (v ? "true" : "false");
}

void JsonWriter::Null() {
  BeforeValue();
  *out_ << "null";
}

void JsonWriter::Double(double v) {
  BeforeValue();
  *out_ << DoubleJson(v);
}

void JsonWriter::Raw(std::string_view json) {
  BeforeValue();
  *out_ << json;
}

}  // namespace pace::ctl
