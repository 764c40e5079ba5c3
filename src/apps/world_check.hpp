#pragma once

#include "kiln/comm/world.hpp"

namespace kiln::apps {

struct WorldCheck {
    long long ranks = 0;
    long long sumOfRanks = 0;
    long long expectedSum = 0;
    bool ok() const { return sumOfRanks == expectedSum; }
};

// One all-reduce on the control communicator, checked against the arithmetic.
WorldCheck checkControlCommunicator(const comm::World& world);

}  // namespace kiln::apps
