// Fingerprints of the planner's decisions (base/fingerprint.hpp; compared by comm/decision_check.hpp): what
// every rank computes for itself from the same inputs and must compute
// alike, field by field, so that a difference is named where it starts.
#pragma once

#include "kiln/base/fingerprint.hpp"
#include "kiln/plan/layout.hpp"

namespace kiln::plan {

// Every field the planner reads: per layer its times and bytes.
base::Fingerprint fingerprintOf(const ModelProfile& profile);
// Every template's width and stages (cuts, times, memory).
base::Fingerprint fingerprintOf(const TemplateSet& templates);
// The pipelines chosen and the split of the global batch.
base::Fingerprint fingerprintOf(const Instantiation& inst, const std::string& decision = "the instantiation");
// Who runs what: pipelines on nodes and ranks, stage cuts, microbatches,
// gradient-sum groups.
base::Fingerprint fingerprintOf(const Layout& layout, const std::string& decision = "the layout");

}  // namespace kiln::plan
