// Start-up timed by phase: where the time to the first step goes (loading
// the libraries, MPI, the world, the data sources, planning, the model,
// communicators, the first step), so that what grows with the corpus or the
// rank count shows. Process-wide; the training thread marks the phases.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kiln::base {

// Ends the current phase as `name`: the seconds since the previous mark, or
// since the process started (as the kernel has it, so library loading
// counts) for the first. A phase marked twice adds up.
void startupPhase(const std::string& name);

// The phases in the order first marked, with their seconds.
std::vector<std::pair<std::string, double>> startupPhases();

}  // namespace kiln::base
