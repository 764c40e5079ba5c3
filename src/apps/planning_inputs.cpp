#include "planning_inputs.hpp"

#include "kiln/base/error.hpp"
#include "kiln/data/batch_planner.hpp"
#include "kiln/model/compute_threads.hpp"
#include "kiln/model/device.hpp"
#include "kiln/model/profiler.hpp"

#include <fmt/format.h>

namespace kiln::apps {

PlanningInputs planningInputs(const config::Deck& deck, const std::string& command) {
    PlanningInputs in;
    // The corpus's manifests are opened (its shards not checked) for the
    // tokenizer's vocabulary and, on CPU runs, for the loader's budget, which
    // shares host memory with the stages (counted as kiln run counts it). A
    // deck that gives its vocabulary can be planned before its data exists:
    // then without the loader, and said.
    const bool onCpu = deck.text("train.device") == "cpu";
    std::optional<data::Corpus> corpus;
    std::string noLoader;
    const auto openCorpus = [&] {
        corpus.emplace(data::loaderSpecFromDeck(deck), data::CorpusSharing{MPI_COMM_NULL, /*checkShards=*/false});
    };
    if (deck.integer("model.vocab") == 0) {
        openCorpus();
    } else if (onCpu) {
        try {
            openCorpus();
        } catch (const InputError& e) {
            noLoader = e.what();
        }
    }
    const auto model = arch::modelConfigFromDeck(deck, corpus ? corpus->tokenizer().vocabSize : 0);
    auto cluster = plan::clusterFromDeck(deck, static_cast<std::uint32_t>(deck.integer("plan.nodes")));
    if (onCpu && corpus) cluster.loaderBytesPerRank = double(corpus->memoryBudget());
    if (cluster.nodes == 0) throw InputError(fmt::format("{}: {} needs plan.nodes > 0 (the nodes to plan for)", deck.name(), command));
    // No profile in the deck and no speed to plan for: this machine's device, measured now.
    std::optional<plan::ModelProfile> measured;
    if (plan::profileMeasuredAtStartUp(deck)) {
        torch::Device device(torch::kCPU);
        try {
            device = model::chooseDevice(deck.text("train.device"), deck.setting("train.device").origin, 0);
        } catch (const InputError& e) {
            throw InputError(fmt::format("{}\n  {} measures the deck's device when the deck gives no profile "
                                         "(plan.device_tflops = 0); to plan for a device this machine lacks, set "
                                         "plan.device_tflops (e.g. --set plan.device_tflops=400) or plan.profile",
                                         e.what(), command));
        }
        model::useComputeThreads(static_cast<int>(deck.integer("train.threads")), static_cast<int>(cluster.ranksPerNode));
        measured = model::profileModel(model, static_cast<std::uint64_t>(deck.integer("train.micro_batch")), 3, -1, device,
                                       deck.text("train.precision") == "bf16", /*eachKindOnce=*/true);
        measured->device = fmt::format("measured on this machine ({}, {} rank{} per node)", device.is_cuda() ? "cuda" : "cpu",
                                       cluster.ranksPerNode, cluster.ranksPerNode == 1 ? "" : "s");
    }
    in.model = model;
    in.cluster = cluster;
    in.measured = std::move(measured);
    in.noLoader = noLoader;
    return in;
}

}  // namespace kiln::apps
