// Which layers move where when the job changes layout (after a failure, an
// admission, a straggler's retirement): computed from the two layouts and the
// start-up ranks of both communicators alone, the same on every rank, so the
// plan needs no agreement of its own. Layers move in atoms
// (model/shard_spec.hpp): the finest split of both layouts, so a shard of any
// width in either is a run of whole atoms.
#pragma once

#include "kiln/base/error.hpp"
#include "kiln/plan/layout.hpp"

#include <cstdint>
#include <vector>

namespace kiln::plan {

// The start-up ranks that hold each layer in `layout` (whose ranks are those of
// a communicator with start-up ranks `members`).
std::vector<std::vector<int>> holdersOfLayers(const Layout& layout, const std::vector<int>& members);
// The start-up ranks that hold each atom of each layer ([layer][atom], one
// per pipeline), `atoms` a multiple of every width of `layout`.
std::vector<std::vector<std::vector<int>>> holdersOfAtoms(const Layout& layout, const std::vector<int>& members,
                                                          std::uint32_t atoms);

// The layers of `layout` (made for start-up ranks `layoutMembers`) that no
// rank of `members` holds any more: a recovery cannot go on in place with any
// of them (the run stops beyond f, for a requeue).
std::vector<std::uint32_t> layersWithoutLiveHolder(const Layout& layout, const std::vector<int>& layoutMembers,
                                                   const std::vector<int>& members);

// For each layer of `layout`, the live ranks (indices into `members`) that can write it to a checkpoint, one
// per shard in slot order: a live stage that holds it whole, else as many stages of one width as it takes,
// each shard from a stage whose rank of that slot lives (a node that lost one rank still has the others).
// Empty for a lost layer (layersWithoutLiveHolder: the one rule for that), and for a layer whose live shards are
// only in stages of different widths, which a checkpoint cannot assemble yet.
std::vector<std::vector<int>> checkpointWriters(const Layout& layout, const std::vector<int>& layoutMembers,
                                                const std::vector<int>& members);

// A layout change found layers that no survivor holds (every rank alike: the
// plan is computed from agreed inputs). Not a bad input: the job is beyond
// what its layout tolerates and stops for a requeue (exit 75), never exit 1.
class LayersLostError : public Error {
public:
    explicit LayersLostError(std::vector<std::uint32_t> layers);
    const std::vector<std::uint32_t>& layers() const { return layers_; }

private:
    std::vector<std::uint32_t> layers_;
};

// One atom of one layer sent (or, from == to, copied from another shard
// held by the same rank). Ranks are those of the new communicator.
struct AtomTransfer {
    std::uint32_t layer = 0, atom = 0;
    int from = -1, to = -1;
};

struct MigrationPlan {
    std::uint32_t atoms = 1;  // per layer
    std::vector<AtomTransfer> transfers;
    std::vector<std::uint32_t> lost;  // layers no surviving rank holds: the step cannot go on in place
};

// A rank that keeps layer `layer` as it is: it held it before as the same shard.
// `rank` is of the new communicator (start-up ranks `members`), the old
// layout's ranks those of `oldMembers`.
bool keepsLayer(const Layout& before, const std::vector<int>& oldMembers, const Layout& after,
                const std::vector<int>& members, int rank, std::uint32_t layer);

// The transfers that give every holder in `after` the atoms it lacks. The
// surviving old holders take turns (layer and atom modulo their count); a rank
// that held the atom as another shard copies it itself.
MigrationPlan planMigration(const Layout& before, const std::vector<int>& oldMembers, const Layout& after,
                            const std::vector<int>& members);

}  // namespace kiln::plan
