// Published model shapes by name (model.preset): each fills the shape keys a
// deck leaves at their defaults; a key the deck sets still wins.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kiln::config {

struct ModelPreset {
    std::string name;
    std::string about;  // what it is, and where kiln differs from the published model
    std::vector<std::pair<std::string, std::string>> settings;  // deck key, value
};

const std::vector<ModelPreset>& modelPresets();
// The preset called `name`, or nullptr.
const ModelPreset* findModelPreset(const std::string& name);

}  // namespace kiln::config
