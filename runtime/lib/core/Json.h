//===- Json.h - A small JSON reader and writer for the runtime --*- C++ -*-===//
//
// The runtime has no dependencies beyond the C++ library, so checkpoint
// indexes and safetensors headers are read with this parser: objects,
// arrays, strings (\uXXXX for the ASCII range), numbers, true/false/null.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_RUNTIME_LIB_CORE_JSON_H
#define WEFT_RUNTIME_LIB_CORE_JSON_H

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace weft::runtime {

struct JsonValue {
  enum class Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Kind::Null;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<JsonValue> array;
  std::map<std::string, JsonValue> object;

  /// The member `key` of an object, or null when there is none.
  const JsonValue *get(const std::string &key) const;
  /// The number as an integer; INT64_MIN when it has none (NaN, or out of
  /// range), which every reader refuses as it refuses a negative count.
  int64_t asInt() const {
    return number >= -9.2e18 && number <= 9.2e18
               ? static_cast<int64_t>(number)
               : std::numeric_limits<int64_t>::min();
  }
};

/// Parses `text`; false with `error` set (one line, with the offset) when
/// it is not JSON.
bool parseJson(const std::string &text, JsonValue &value, std::string &error);

/// `text` as a JSON string literal, quotes included.
std::string jsonQuote(const std::string &text);

} // namespace weft::runtime

#endif // WEFT_RUNTIME_LIB_CORE_JSON_H
