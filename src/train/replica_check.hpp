// Every holder of a layer shard fingerprints its parameters and AdamW moments, and the holders compare (issue 66,
// item 3). kiln's replicas are bitwise equal by construction: every holder starts from the same tensors (layer-
// seeded, or migrated from a holder), receives the same summed gradient and takes the same update. A fingerprint
// is the sum of the tensors' 32-bit words as integers: exact on any device, and moved by any single flipped bit.
#pragma once

#include "kiln/plan/layout.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::model {
class Gpt;
}

namespace kiln::train {

class AdamW;

// This rank's fingerprint of each model layer it holds (0 for those it does not), by model layer.
std::vector<std::uint64_t> layerFingerprints(model::Gpt& model, AdamW& optimizer);

struct ReplicaVerdict {
    std::vector<int> odd;         // ranks outvoted by the other holders of their shard (three or more holders)
    std::vector<int> undecided;   // ranks of shards held twice whose two copies differ: no majority
    std::vector<std::uint32_t> layers;  // the layers whose copies differ
    bool agree() const { return odd.empty() && undecided.empty(); }
    std::string describe() const;
};

// Compares the fingerprints every rank sent (by rank, then by model layer) among the holders of each shard:
// the ranks of the same slot of stages of the same width that hold the layer.
ReplicaVerdict compareReplicas(const plan::Layout& layout, const std::vector<std::vector<std::uint64_t>>& fingerprints);

}  // namespace kiln::train
