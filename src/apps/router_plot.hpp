// kiln diag --plot's pictures of a mixture of experts' routers: router.png, the balance loss and z-loss
// (means over the blocks) step by step; experts.png, each expert's load against its fair share (1: the
// tokens divided evenly), a row per expert of each block, a column per step.
#pragma once

#include "kiln/io/diag_summary.hpp"

#include <filesystem>
#include <string>

namespace kiln::apps {

// The gnuplot script for both (their data written into `dir`), or "" for a dense run's summary.
std::string routerPlotScript(const std::filesystem::path& dir, const io::DiagSummary& summary);

}  // namespace kiln::apps
