// One deck key: its name, type, default, check and help text, in one place.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <variant>
#include <vector>

namespace kiln::config {

enum class KeyType { Integer, Real, Flag, Text, Mix };

// One entry of a data mix: a source name and its (unnormalised) weight.
struct MixEntry {
    std::string source;
    double weight = 0.0;
    bool operator==(const MixEntry&) const = default;
};
using Mix = std::vector<MixEntry>;

using Value = std::variant<std::int64_t, double, bool, std::string, Mix>;

// Returns an empty string when the value is allowed, else what is allowed.
using Check = std::function<std::string(const Value&)>;

struct KeySpec {
    std::string name;  // "section.key"
    KeyType type;
    std::string defaultValue;  // as a user would write it in a deck
    std::string help;
    Check check;  // may be empty: any value of the type is allowed
};

const char* typeName(KeyType type);

// Parses `raw` as `type`; on failure returns the text that says what was expected.
std::variant<Value, std::string> parseValue(KeyType type, const std::string& raw);

// Writes a value back the way a deck would spell it.
std::string formatValue(const Value& value);

// Common checks.
Check atLeast(std::int64_t min);
Check realInRange(double min, double max);
Check oneOf(std::vector<std::string> allowed);
Check identifier();
Check validMix();
// A mix, or nothing (an optional list of sources).
Check validMixOrEmpty();

}  // namespace kiln::config
