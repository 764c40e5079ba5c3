// What kiln plan and kiln simulate plan from, read from a deck: the model's
// shape (the vocabulary from the corpus when the deck does not give it), the
// cluster (plan.nodes and the deck's memory and links), and, when the deck
// gives neither a profile nor a device speed, a profile measured on this
// machine's device, as kiln run would measure at start-up.
#pragma once

#include "kiln/config/deck.hpp"
#include "kiln/plan/cluster.hpp"
#include "kiln/plan/layer_profile.hpp"
#include "kiln/plan/run_plan.hpp"

#include <optional>
#include <string>

namespace kiln::apps {

struct PlanningInputs {
    arch::ModelConfig model;
    plan::ClusterSpec cluster;
    std::optional<plan::ModelProfile> measured;
    std::string noLoader;  // why the loader's memory is not counted (its data could not be opened)
    plan::GivenProfile given() const {
        return measured ? plan::GivenProfile{&*measured, measured->device} : plan::GivenProfile{};
    }
};

// `command` names the subcommand in errors.
PlanningInputs planningInputs(const config::Deck& deck, const std::string& command);

}  // namespace kiln::apps
