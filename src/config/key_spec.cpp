#include "kiln/config/key_spec.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>
#include <sstream>

namespace kiln::config {
namespace {

std::string trim(const std::string& s) {
    const auto first = s.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) return "";
    return s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1);
}

bool isIdentifier(const std::string& s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) {
        return std::isalnum(c) || c == '_' || c == '-' || c == '.';
    });
}

std::variant<Value, std::string> parseMix(const std::string& raw) {
    // "wiki:0.7 books:0.3" or "wiki:3, books:1"
    std::string spaced = raw;
    std::replace(spaced.begin(), spaced.end(), ',', ' ');
    std::istringstream in(spaced);
    Mix mix;
    for (std::string item; in >> item;) {
        const auto colon = item.rfind(':');
        if (colon == std::string::npos || colon == 0 || colon + 1 == item.size())
            return fmt::format("'{}' is not SOURCE:WEIGHT (e.g. wiki:0.7)", item);
        const std::string name = item.substr(0, colon);
        const std::string weightText = item.substr(colon + 1);
        char* end = nullptr;
        const double weight = std::strtod(weightText.c_str(), &end);
        if (end != weightText.c_str() + weightText.size() || !std::isfinite(weight))
            return fmt::format("weight '{}' of source '{}' is not a number", weightText, name);
        mix.push_back({name, weight});
    }
    return Value{mix};
}

}  // namespace

const char* typeName(KeyType type) {
    switch (type) {
        case KeyType::Integer: return "integer";
        case KeyType::Real: return "real";
        case KeyType::Flag: return "flag";
        case KeyType::Text: return "text";
        case KeyType::Mix: return "mix";
    }
    return "?";
}

std::variant<Value, std::string> parseValue(KeyType type, const std::string& rawUntrimmed) {
    const std::string raw = trim(rawUntrimmed);
    switch (type) {
        case KeyType::Integer: {
            std::int64_t v = 0;
            const auto [ptr, ec] = std::from_chars(raw.data(), raw.data() + raw.size(), v);
            if (raw.empty() || ec != std::errc() || ptr != raw.data() + raw.size())
                return std::string("expected an integer");
            return Value{v};
        }
        case KeyType::Real: {
            char* end = nullptr;
            const double v = std::strtod(raw.c_str(), &end);
            if (raw.empty() || end != raw.c_str() + raw.size() || !std::isfinite(v))
                return std::string("expected a real number");
            return Value{v};
        }
        case KeyType::Flag: {
            std::string lower = raw;
            std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
            if (lower == "true" || lower == "yes" || lower == "on" || lower == "1") return Value{true};
            if (lower == "false" || lower == "no" || lower == "off" || lower == "0") return Value{false};
            return std::string("expected true/false (or yes/no, on/off, 1/0)");
        }
        case KeyType::Text: return Value{raw};
        case KeyType::Mix: return parseMix(raw);
    }
    return std::string("unknown type");
}

std::string formatValue(const Value& value) {
    struct Formatter {
        std::string operator()(std::int64_t v) const { return std::to_string(v); }
        std::string operator()(double v) const { return fmt::format("{}", v); }
        std::string operator()(bool v) const { return v ? "true" : "false"; }
        std::string operator()(const std::string& v) const { return v; }
        std::string operator()(const Mix& mix) const {
            std::string out;
            for (const auto& e : mix) out += fmt::format("{}{}:{}", out.empty() ? "" : " ", e.source, e.weight);
            return out;
        }
    };
    return std::visit(Formatter{}, value);
}

Check atLeast(std::int64_t min) {
    return [min](const Value& v) {
        return std::get<std::int64_t>(v) >= min ? std::string() : fmt::format("must be an integer >= {}", min);
    };
}

Check realInRange(double min, double max) {
    return [min, max](const Value& v) {
        const double x = std::get<double>(v);
        return (x >= min && x <= max) ? std::string() : fmt::format("must be a real number in [{}, {}]", min, max);
    };
}

Check oneOf(std::vector<std::string> allowed) {
    return [allowed](const Value& v) {
        const auto& s = std::get<std::string>(v);
        if (std::find(allowed.begin(), allowed.end(), s) != allowed.end()) return std::string();
        return fmt::format("must be one of: {}", fmt::join(allowed, ", "));
    };
}

Check identifier() {
    return [](const Value& v) {
        return isIdentifier(std::get<std::string>(v)) ? std::string()
                                                       : std::string("must be a non-empty name of letters, digits, '_', '-', '.'");
    };
}

Check validMixOrEmpty() {
    return [](const Value& v) -> std::string {
        return std::get<Mix>(v).empty() ? std::string() : validMix()(v);
    };
}

Check validMix() {
    return [](const Value& v) -> std::string {
        const auto& mix = std::get<Mix>(v);
        if (mix.empty()) return "must name at least one source, as SOURCE:WEIGHT ...";
        std::set<std::string> seen;
        double total = 0.0;
        for (const auto& e : mix) {
            if (!isIdentifier(e.source)) return fmt::format("source name '{}' must use letters, digits, '_', '-', '.'", e.source);
            if (!seen.insert(e.source).second) return fmt::format("source '{}' is listed twice", e.source);
            if (e.weight < 0.0) return fmt::format("weight of source '{}' is {}; weights must be >= 0", e.source, e.weight);
            total += e.weight;
        }
        if (total <= 0.0) return "weights are all zero; at least one source needs a weight > 0";
        return "";
    };
}

}  // namespace kiln::config
