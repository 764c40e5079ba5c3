// The row a running job sends to the processes it admits (trainer.hpp's JoinState).
#include "kiln/base/error.hpp"
#include "kiln/base/packing.hpp"
#include "kiln/train/trainer.hpp"

#include <fmt/format.h>

namespace kiln::train {

std::vector<std::int64_t> packJoinState(const JoinState& join) {
    RowWriter out;
    out.put(kJoinStateVersion);
    out.put(join.startupNodes);
    out.put(join.ranksPerNode);
    out.put(join.f);
    out.putAll(join.cursor);
    out.put(join.optimizerSteps);
    out.put(join.decaySteps);
    out.put(join.tolerance);
    out.put(join.spares);
    out.put(join.nodeFailures);
    out.putAll(join.retiredNodes);
    out.putAll(join.stragglerNodes);
    out.put(join.diagHolder);
    out.put(join.nccl ? 1 : 0);
    out.put(join.fenceEpoch);
    out.putAll(join.layout);
    return std::move(out.row());
}

JoinState unpackJoinState(const std::vector<std::int64_t>& row) {
    if (row.empty() || row.front() != kJoinStateVersion)
        throw Error(fmt::format("the running job sent its state in join format {}, this process reads format {}: an "
                                "admitted process must run the job's kiln build",
                                row.empty() ? std::int64_t{0} : row.front(), kJoinStateVersion),
                    ErrorScope::ThisRank);
    RowReader in(row);
    in.get<std::int64_t>();  // the version
    JoinState join;
    join.startupNodes = in.get<std::uint32_t>();
    join.ranksPerNode = in.get<std::uint32_t>();
    join.f = in.get<std::uint32_t>();
    join.cursor = in.getAll<std::uint64_t>();
    join.optimizerSteps = in.get<std::uint64_t>();
    join.decaySteps = in.get<std::uint64_t>();
    join.tolerance = in.get<std::uint32_t>();
    join.spares = in.get<std::uint32_t>();
    join.nodeFailures = in.get<std::uint64_t>();
    join.retiredNodes = in.getAll<int>();
    join.stragglerNodes = in.getAll<int>();
    join.diagHolder = in.get<int>();
    join.nccl = in.get<int>() != 0;
    join.fenceEpoch = in.get<std::uint64_t>();
    join.layout = in.getAll<std::int64_t>();
    return join;
}

}  // namespace kiln::train
