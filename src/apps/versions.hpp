#pragma once

#include <string>

namespace kiln::apps {

std::string kilnVersion();
std::string hdf5Version();
std::string torchVersion();

}  // namespace kiln::apps
