// The plan follows what runs: the speed monitor's verdicts carried out at a step boundary.
#include "trainer_state.hpp"

#include "kiln/base/error.hpp"
#include "kiln/base/log.hpp"
#include "kiln/comm/ulfm.hpp"

#include <fmt/format.h>

namespace kiln::train {

Trainer::State::Recovery Trainer::State::followSpeeds(std::uint64_t step, const std::vector<double>& compute) {
    std::vector<int> ids;
    std::vector<std::vector<int>> ranks;
    liveNodes(world, ids, ranks, retiredNodes);
    const plan::SpeedVerdict verdict =
        speeds->observe(parallel->layout(), plan, compute, static_cast<std::uint32_t>(ids.size()), tolerance);
    if (!verdict.note.empty()) {
        log::info("  SPEED      {}", verdict.note);
        if (diag) diag->event(step, "speed", verdict.note);
    }
    switch (verdict.action) {
        case plan::SpeedVerdict::Action::None: return Recovery::Continue;
        case plan::SpeedVerdict::Action::Rebalance:
            // Nothing moves but the loader's slice: every rank took the same verdict from the same times.
            parallel->redistribute(verdict.instantiation);
            sliceLoader();
            log::info("  REBALANCE  before step {}: {}", step, verdict.detail);
            if (diag) diag->event(step, "rebalance", verdict.detail);
            announceLayout(step, false, fmt::format("rebalanced by measured speed before step {}", step),
                           /*newLayout=*/false);
            return Recovery::Continue;
        case plan::SpeedVerdict::Action::Retire:
            try {
                return retireStraggler(step, verdict.node, verdict.detail);
            } catch (const ProcFailedError& e) {
                log::detail("step {}: a rank failed while straggler node {} was retired: {}", step, verdict.node,
                            e.what());
                comm::revoke(world.control());
                parallel->interrupt();
                return recoverFromFailure(step, 0.0);
            }
    }
    return Recovery::Continue;
}

}  // namespace kiln::train
