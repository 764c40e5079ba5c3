// The admission the job waits on, on the rank that took its request: the new nodes' processes starting while the
// job trains, until the job takes them in or gives them up, and what the step's collective carries of them.
// Private to train/; tested with fake joiners (test_admission_watch).
#pragma once

#include "kiln/comm/spawn.hpp"

#include <memory>
#include <string>

namespace kiln::train {

class AdmissionWatch {
public:
    // The new processes as the watch sees them: comm::JoinersStarting in a run (spawnedJoiners), a fake in tests.
    class Joiners {
    public:
        virtual ~Joiners() = default;
        virtual comm::JoinersStarting::Phase phase() = 0;
        virtual std::string problem() const = 0;
        virtual double readySeconds() const = 0;
        // What comm::acceptJoiners takes them in through (none for a fake).
        virtual comm::JoinersStarting* spawned() = 0;
    };

    // None waits on this rank.
    bool waiting() const { return joiners_ != nullptr; }
    // `joiners` for `nodes` nodes started; this rank watches them from now on.
    void started(std::unique_ptr<Joiners> joiners, int nodes);
    // This rank's admission field of the step's collective: +nodes once its joiners are ready, -nodes once they
    // failed (the job then says so), 0 while they start or when none waits here.
    double stepField();
    bool ready();
    int nodes() const { return nodes_; }
    double readySeconds() const { return joiners_ ? joiners_->readySeconds() : 0.0; }
    comm::JoinersStarting* spawned() { return joiners_ ? joiners_->spawned() : nullptr; }
    // Joiners that failed let go: why they failed; "" (and nothing let go) unless they had failed.
    std::string giveUpFailed();
    // Taken in, or given up at a boundary: nothing waits any more (the processes of joiners not taken in end).
    void clear();

private:
    std::unique_ptr<Joiners> joiners_;
    int nodes_ = 0;
};

// The processes of an admission started over MPI (comm::JoinersStarting), as the watch sees them.
std::unique_ptr<AdmissionWatch::Joiners> spawnedJoiners(int processes, const std::string& hosts,
                                                        std::vector<std::int64_t> preparation);

}  // namespace kiln::train
