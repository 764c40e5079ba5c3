// The layer profile a run plans with when its deck gives none
// (plan.device_tflops = 0): measured on the job's own devices at start-up.
#pragma once

#include "kiln/arch/model_config.hpp"
#include "kiln/plan/layer_profile.hpp"

#include <mpi.h>
#include <torch/torch.h>

#include <filesystem>

namespace kiln::train {

// Collective over `comm`: every rank times the embedding, one block and the
// head on `device` at once (as they will compute: sharing what they share),
// and every rank gets the median over the ranks of every measured field
// (forward, backward and update times, bytes kept for backward) and the
// largest runtime, the same everywhere bit for bit, so that every rank plans
// the same layout. (Until issue 37 the update times and bytes were each
// rank's own: 1 start in 4 planned different layouts and deadlocked.)
plan::ModelProfile measureStartupProfile(const arch::ModelConfig& config, std::uint64_t microBatch,
                                         torch::Device device, bool bf16, MPI_Comm comm);

// Where a run keeps it: processes admitted later plan with the same one.
std::filesystem::path startupProfilePath(const std::filesystem::path& runDir);

}  // namespace kiln::train
