// Planning for a job from its deck: the layer profile (measured, from
// plan.profile, or synthetic), the templates for every node count the job can
// shrink to, and the instantiation for the nodes it has (the planner's, or the
// one plan.pipelines pins). kiln run and kiln plan both plan this way, and
// print it the same way.
#pragma once

#include "kiln/plan/cluster.hpp"
#include "kiln/plan/instantiation.hpp"

#include <deque>
#include <string>

namespace kiln::config {
class Deck;
}

namespace kiln::plan {

struct RunPlan {
    ModelProfile profile;
    std::string profileSource;  // the file, or "synthetic ..."
    ClusterSpec cluster;  // nodes: those that run pipelines at start-up (the job's, less the spares)
    std::uint32_t spares = 0;  // cluster.spare_nodes, or fewer when the job's nodes do not allow them
    std::string sparesNote;    // why spares were given up; empty when none was
    std::uint32_t f = 0;       // fault.f, or lower when the nodes do not allow it (LowerF::DownToMinF)
    std::string faultNote;     // why f was lowered; empty when it was not
    double replanMargin = 0.02;  // fault.replan_margin: how much slower a kept layout may be than a new plan
    std::uint64_t microBatch = 1, globalMicrobatches = 1;
    TemplateSet templates;
    Instantiation instantiation;
    bool pinned = false;  // plan.pipelines chose the instantiation
    double templateSeconds = 0.0, instantiationSeconds = 0.0;
};

// The profile plan.profile names (checked against `model`), or a synthetic
// one at plan.device_tflops.
ModelProfile profileFromDeck(const config::Deck& deck, const arch::ModelConfig& model, std::string& source);

// Whether the deck leaves the profile to a measurement of the device it runs
// on (no plan.profile, plan.device_tflops = 0): kiln run measures a quick
// one at start-up (train/startup_profile.hpp), kiln plan on this machine.
bool profileMeasuredAtStartUp(const config::Deck& deck);

// A profile measured for this run, and where it came from (for the log).
struct GivenProfile {
    const ModelProfile* profile = nullptr;
    std::string source;
};

// What planRun may do when the nodes cannot hold fault.f + 1 pipelines: refuse
// (kiln plan, which answers what-ifs) or lower f down to fault.min_f (kiln
// run, typically a job requeued onto fewer nodes).
enum class LowerF { Never, DownToMinF };

// Template sets planned before, reused by later planRun calls for the same
// model, profile, cluster and batch: the templates do not depend on fault.f,
// spares only change the nodes, and kiln simulate plans its reference and
// every choice from one deck.
class TemplateCache {
public:
    // The set for every f (planTemplatesForAnyF), planned on the first call for these inputs.
    const TemplateSet& forAnyF(const ModelProfile& profile, const ClusterSpec& cluster, std::uint64_t globalMicrobatches);

private:
    struct Entry {
        std::string key;
        TemplateSet set;
    };
    std::deque<Entry> entries_;  // (references stay valid as it grows)
};

// Plans for `cluster` (its nodes and ranks per node) from the deck's fault.f,
// spare nodes, batch, memory, bandwidths and plan.pipelines: the pipelines run
// on cluster.nodes less the spares. Throws InputError naming keys.
// `cache`: template sets to reuse and keep (none: planned afresh).
RunPlan planRun(const config::Deck& deck, const arch::ModelConfig& model, const ClusterSpec& cluster,
                LowerF lower = LowerF::Never, const GivenProfile& given = {}, TemplateCache* cache = nullptr);

// The text kiln plan prints: templates (at most 12 unless `all`), then the instantiation.
std::string describeTemplates(const RunPlan& plan, bool all);
std::string describeInstantiation(const TemplateSet& templates, const Instantiation& inst, std::uint64_t microBatch);
// "0-2 | 3 | 4-5": the layers of each stage.
std::string describeStages(const PipelineTemplate& t);

}  // namespace kiln::plan
