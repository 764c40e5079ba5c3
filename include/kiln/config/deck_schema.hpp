// The table of every deck key kiln knows. Adding a key = adding one entry.
#pragma once

#include "kiln/config/key_spec.hpp"

#include <string>
#include <vector>

namespace kiln::config {

const std::vector<KeySpec>& deckSchema();

// The spec of `name`, or nullptr.
const KeySpec* findKey(const std::string& name);

// The known key closest to `name` by edit distance, or "" when none is close.
std::string nearestKey(const std::string& name);

// Edit (Levenshtein) distance between two strings.
std::size_t editDistance(const std::string& a, const std::string& b);

}  // namespace kiln::config
