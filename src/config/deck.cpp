#include "kiln/config/deck.hpp"

#include "kiln/config/deck_schema.hpp"
#include "kiln/config/model_presets.hpp"

#include <algorithm>
#include <boost/program_options.hpp>
#include <fmt/format.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace po = boost::program_options;

namespace kiln::config {
namespace {

std::string trim(const std::string& s) {
    const auto first = s.find_first_not_of(" \t\r");
    if (first == std::string::npos) return "";
    return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

std::string unknownKeyProblem(const std::string& where, const std::string& key) {
    const std::string near = nearestKey(key);
    return near.empty() ? fmt::format("{}: unknown key '{}' (kiln deck --list shows every key)", where, key)
                        : fmt::format("{}: unknown key '{}'; did you mean '{}'?", where, key, near);
}

// Boost.Program_options reads the deck but cannot say on which line a key
// stands, nor which line it choked on. This pass mirrors its syntax (sections,
// key = value, '#' comments) to map every key to its line and to report syntax
// errors and repeated keys with their line before Boost sees them.
struct LineMap {
    std::map<std::string, int> lineOfKey;
    std::vector<std::string> problems;
};

LineMap scanLines(const std::string& text, const std::string& name) {
    LineMap map;
    std::istringstream in(text);
    std::string section;
    int lineNo = 0;
    for (std::string line; std::getline(in, line);) {
        ++lineNo;
        const std::string where = fmt::format("{}:{}", name, lineNo);
        const auto hash = line.find('#');
        const std::string body = trim(hash == std::string::npos ? line : line.substr(0, hash));
        if (body.empty()) continue;
        if (body.front() == '[') {
            if (body.back() != ']' || body.size() < 3) {
                map.problems.push_back(fmt::format("{}: '{}' is not a section header; expected [section]", where, body));
            } else {
                section = trim(body.substr(1, body.size() - 2));
            }
            continue;
        }
        const auto eq = body.find('=');
        if (eq == std::string::npos || trim(body.substr(0, eq)).empty()) {
            map.problems.push_back(fmt::format("{}: '{}' is neither [section] nor key = value", where, body));
            continue;
        }
        const std::string key = (section.empty() ? "" : section + ".") + trim(body.substr(0, eq));
        const auto [it, inserted] = map.lineOfKey.emplace(key, lineNo);
        if (!inserted)
            map.problems.push_back(fmt::format("{}: key '{}' is set again (first set on line {}); keep one", where, key, it->second));
    }
    return map;
}

void applyValue(std::map<std::string, Deck::Setting>& settings, std::vector<std::string>& problems,
                const std::string& where, const std::string& key, const std::string& raw) {
    const KeySpec* spec = findKey(key);
    if (!spec) {
        problems.push_back(unknownKeyProblem(where, key));
        return;
    }
    auto parsed = parseValue(spec->type, raw);
    if (auto* why = std::get_if<std::string>(&parsed)) {
        problems.push_back(fmt::format("{}: {} = '{}': {} ({})", where, key, raw, *why, spec->help));
        return;
    }
    const Value value = std::get<Value>(parsed);
    if (spec->check) {
        if (const std::string why = spec->check(value); !why.empty()) {
            problems.push_back(fmt::format("{}: {} = '{}': {}", where, key, raw, why));
            return;
        }
    }
    settings[key] = Deck::Setting{trim(raw), value, where};
}

std::map<std::string, Deck::Setting> defaultSettings() {
    std::map<std::string, Deck::Setting> settings;
    for (const auto& spec : deckSchema()) {
        auto parsed = parseValue(spec.type, spec.defaultValue);
        if (!std::holds_alternative<Value>(parsed))
            throw std::logic_error("deck schema: bad default for " + spec.name);
        settings[spec.name] = Deck::Setting{spec.defaultValue, std::get<Value>(parsed), "default"};
    }
    return settings;
}

void applyOverrides(std::map<std::string, Deck::Setting>& settings, std::vector<std::string>& problems,
                    const std::vector<std::string>& overrides) {
    for (const auto& item : overrides) {
        const auto eq = item.find('=');
        if (eq == std::string::npos) {
            problems.push_back(fmt::format("--set {}: expected --set section.key=value", item));
            continue;
        }
        applyValue(settings, problems, "--set", trim(item.substr(0, eq)), item.substr(eq + 1));
    }
}

// model.preset's values for the keys still at their defaults, said to come from it.
void applyPreset(std::map<std::string, Deck::Setting>& settings, std::vector<std::string>& problems) {
    const ModelPreset* preset = findModelPreset(std::get<std::string>(settings.at("model.preset").value));
    if (!preset) return;  // none, or an unknown name already reported
    const std::string where = fmt::format("model.preset = {}", preset->name);
    for (const auto& [key, raw] : preset->settings)
        if (settings.at(key).origin == "default") applyValue(settings, problems, where, key, raw);
}

}  // namespace

DeckError::DeckError(const std::string& deckName, std::vector<std::string> problems)
    : InputError([&] {
          std::string text = fmt::format("deck {} has {} problem{}:", deckName, problems.size(), problems.size() == 1 ? "" : "s");
          for (const auto& p : problems) text += "\n  " + p;
          return text;
      }()),
      problems_(std::move(problems)) {}

Deck Deck::fromFile(const std::string& path, const std::vector<std::string>& overrides) {
    std::ifstream in(path);
    if (!in) throw InputError(fmt::format("cannot open deck '{}': no such file or not readable", path));
    std::stringstream text;
    text << in.rdbuf();
    return fromText(text.str(), path, overrides);
}

Deck Deck::fromText(const std::string& text, const std::string& name, const std::vector<std::string>& overrides) {
    Deck deck;
    deck.name_ = name;
    deck.settings_ = defaultSettings();

    LineMap lines = scanLines(text, name);
    std::vector<std::string> problems = lines.problems;
    if (problems.empty()) {
        po::options_description known;
        for (const auto& spec : deckSchema()) known.add_options()(spec.name.c_str(), po::value<std::string>());
        std::istringstream in(text);
        try {
            const po::parsed_options parsed = po::parse_config_file(in, known, /*allow_unregistered=*/true);
            for (const auto& option : parsed.options) {
                const auto line = lines.lineOfKey.find(option.string_key);
                const std::string where =
                    line == lines.lineOfKey.end() ? name : fmt::format("{}:{}", name, line->second);
                applyValue(deck.settings_, problems, where, option.string_key,
                           option.value.empty() ? "" : option.value.front());
            }
        } catch (const po::error& e) {
            problems.push_back(fmt::format("{}: {}", name, e.what()));
        }
    }
    applyOverrides(deck.settings_, problems, overrides);
    applyPreset(deck.settings_, problems);
    if (!problems.empty()) throw DeckError(name, problems);
    return deck;
}

Deck Deck::defaults(const std::vector<std::string>& overrides) {
    Deck deck;
    deck.name_ = "(defaults)";
    deck.settings_ = defaultSettings();
    std::vector<std::string> problems;
    applyOverrides(deck.settings_, problems, overrides);
    applyPreset(deck.settings_, problems);
    if (!problems.empty()) throw DeckError(deck.name_, problems);
    return deck;
}

const Deck::Setting& Deck::setting(const std::string& key) const {
    const auto it = settings_.find(key);
    if (it == settings_.end()) throw std::logic_error("deck key not in schema: " + key);
    return it->second;
}

std::int64_t Deck::integer(const std::string& key) const { return std::get<std::int64_t>(setting(key).value); }
double Deck::real(const std::string& key) const { return std::get<double>(setting(key).value); }
bool Deck::flag(const std::string& key) const { return std::get<bool>(setting(key).value); }
const std::string& Deck::text(const std::string& key) const { return std::get<std::string>(setting(key).value); }
const Mix& Deck::mix(const std::string& key) const { return std::get<Mix>(setting(key).value); }

std::string Deck::resolvedText() const {
    std::string out = fmt::format("# kiln resolved deck: every key, defaults included; from {}\n", name_);
    // Each section once, in the order the schema first names it (the schema
    // keeps keys of a kind together, so one section may come back later in
    // it), so that any INI reader takes the file.
    std::vector<std::string> sections;
    for (const auto& spec : deckSchema()) {
        const std::string section = spec.name.substr(0, spec.name.find('.'));
        if (std::find(sections.begin(), sections.end(), section) == sections.end()) sections.push_back(section);
    }
    for (const auto& section : sections) {
        out += fmt::format("\n[{}]\n", section);
        for (const auto& spec : deckSchema()) {
            const auto dot = spec.name.find('.');
            if (spec.name.compare(0, dot, section) != 0 || dot != section.size()) continue;
            const Setting& s = settings_.at(spec.name);
            out += fmt::format("{} = {}  # {}\n", spec.name.substr(dot + 1), formatValue(s.value), s.origin);
        }
    }
    return out;
}

}  // namespace kiln::config
