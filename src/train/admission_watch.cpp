#include "admission_watch.hpp"

namespace kiln::train {

namespace {

class Spawned final : public AdmissionWatch::Joiners {
public:
    Spawned(int processes, const std::string& hosts, std::vector<std::int64_t> preparation)
        : starting_(processes, hosts, std::move(preparation)) {}
    comm::JoinersStarting::Phase phase() override { return starting_.phase(); }
    std::string problem() const override { return starting_.problem(); }
    double readySeconds() const override { return starting_.readySeconds(); }
    comm::JoinersStarting* spawned() override { return &starting_; }

private:
    comm::JoinersStarting starting_;
};

}  // namespace

std::unique_ptr<AdmissionWatch::Joiners> spawnedJoiners(int processes, const std::string& hosts,
                                                        std::vector<std::int64_t> preparation) {
    return std::make_unique<Spawned>(processes, hosts, std::move(preparation));
}

void AdmissionWatch::started(std::unique_ptr<Joiners> joiners, int nodes) {
    joiners_ = std::move(joiners);
    nodes_ = joiners_ ? nodes : 0;
}

double AdmissionWatch::stepField() {
    if (!joiners_) return 0.0;
    switch (joiners_->phase()) {
    case comm::JoinersStarting::Phase::Ready: return double(nodes_);
    case comm::JoinersStarting::Phase::Failed: return -double(nodes_);
    case comm::JoinersStarting::Phase::Starting: break;
    }
    return 0.0;
}

bool AdmissionWatch::ready() { return joiners_ && joiners_->phase() == comm::JoinersStarting::Phase::Ready; }

std::string AdmissionWatch::giveUpFailed() {
    if (!joiners_ || joiners_->phase() != comm::JoinersStarting::Phase::Failed) return "";
    std::string why = joiners_->problem();
    clear();
    return why;
}

void AdmissionWatch::clear() {
    joiners_.reset();
    nodes_ = 0;
}

}  // namespace kiln::train
