// An input deck: INI sections read with Boost.Program_options, every value
// typed and checked against the schema, every problem reported at once with
// file:line, key, value and what is allowed.
#pragma once

#include "kiln/base/error.hpp"
#include "kiln/config/key_spec.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kiln::config {

// All problems of one deck, one per line of what(). Seen alike by all ranks.
class DeckError : public InputError {
public:
    DeckError(const std::string& deckName, std::vector<std::string> problems);
    const std::vector<std::string>& problems() const { return problems_; }

private:
    std::vector<std::string> problems_;
};

class Deck {
public:
    struct Setting {
        std::string raw;     // as written
        Value value;         // typed and checked
        std::string origin;  // "default", "file.ini:12" or "--set"
    };

    // `overrides` are "section.key=value" strings from --set; they win over the file.
    static Deck fromFile(const std::string& path, const std::vector<std::string>& overrides = {});
    // Same as fromFile for text already in memory; `name` stands for the file in messages.
    static Deck fromText(const std::string& text, const std::string& name,
                         const std::vector<std::string>& overrides = {});
    // Only the defaults (plus overrides).
    static Deck defaults(const std::vector<std::string>& overrides = {});

    std::int64_t integer(const std::string& key) const;
    double real(const std::string& key) const;
    bool flag(const std::string& key) const;
    const std::string& text(const std::string& key) const;
    const Mix& mix(const std::string& key) const;
    const Setting& setting(const std::string& key) const;

    const std::string& name() const { return name_; }

    // The resolved deck, defaults included, each key annotated with where its value came from.
    std::string resolvedText() const;

private:
    std::string name_;
    std::map<std::string, Setting> settings_;
};

}  // namespace kiln::config
