//===- Json.cpp - A small JSON reader and writer for the runtime ----------===//

#include "core/Json.h"

#include <cstdio>
#include <cstdlib>

namespace weft::runtime {

const JsonValue *JsonValue::get(const std::string &key) const {
  auto it = object.find(key);
  return kind == Kind::Object && it != object.end() ? &it->second : nullptr;
}

namespace {

class Parser {
public:
  explicit Parser(const std::string &text) : text(text) {}

  bool parseDocument(JsonValue &value, std::string &error) {
    bool ok = parseValue(value, 0) && (skipSpace(), pos == text.size());
    if (!ok)
      error = "malformed JSON at offset " + std::to_string(pos);
    return ok;
  }

private:
  // Deeper nesting than any index has is refused rather than recursed into.
  static constexpr int maxDepth = 64;

  void skipSpace() {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\n' ||
                                 text[pos] == '\t' || text[pos] == '\r'))
      ++pos;
  }
  bool consume(char c) {
    skipSpace();
    if (pos < text.size() && text[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  }
  bool consumeWord(const char *word) {
    size_t n = std::char_traits<char>::length(word);
    if (text.compare(pos, n, word) != 0)
      return false;
    pos += n;
    return true;
  }

  bool parseString(std::string &out) {
    if (!consume('"'))
      return false;
    while (pos < text.size() && text[pos] != '"') {
      char c = text[pos++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos >= text.size())
        return false;
      char e = text[pos++];
      switch (e) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'u': {
        if (pos + 4 > text.size())
          return false;
        long code = strtol(text.substr(pos, 4).c_str(), nullptr, 16);
        pos += 4;
        if (code >= 0x80)
          return false;
        out += static_cast<char>(code);
        break;
      }
      default:
        out += e; // \" \\ \/
      }
    }
    return consume('"');
  }

  bool parseValue(JsonValue &value, int depth) {
    if (depth > maxDepth)
      return false;
    skipSpace();
    if (pos >= text.size())
      return false;
    char c = text[pos];
    if (c == '{') {
      value.kind = JsonValue::Kind::Object;
      ++pos;
      if (consume('}'))
        return true;
      do {
        std::string key;
        if (!parseString(key) || !consume(':') ||
            !parseValue(value.object[key], depth + 1))
          return false;
      } while (consume(','));
      return consume('}');
    }
    if (c == '[') {
      value.kind = JsonValue::Kind::Array;
      ++pos;
      if (consume(']'))
        return true;
      do {
        value.array.emplace_back();
        if (!parseValue(value.array.back(), depth + 1))
          return false;
      } while (consume(','));
      return consume(']');
    }
    if (c == '"') {
      value.kind = JsonValue::Kind::String;
      return parseString(value.string);
    }
    if (consumeWord("true") || consumeWord("false")) {
      value.kind = JsonValue::Kind::Bool;
      value.boolean = c == 't';
      return true;
    }
    if (consumeWord("null"))
      return true;
    const char *start = text.c_str() + pos;
    char *end = nullptr;
    value.number = strtod(start, &end);
    if (end == start)
      return false;
    value.kind = JsonValue::Kind::Number;
    pos += end - start;
    return true;
  }

  const std::string &text;
  size_t pos = 0;
};

} // namespace

bool parseJson(const std::string &text, JsonValue &value, std::string &error) {
  value = JsonValue();
  return Parser(text).parseDocument(value, error);
}

std::string jsonQuote(const std::string &text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      snprintf(escaped, sizeof(escaped), "\\u%04x", c);
      out += escaped;
      continue;
    }
    out += c;
  }
  return out + "\"";
}

} // namespace weft::runtime
