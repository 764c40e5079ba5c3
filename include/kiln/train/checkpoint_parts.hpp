// Parallel checkpoints (format 2): every layer is written once, by one of its
// holders, into that writer's own part file; rank 0 writes a small index last.
//
//   ckpt/step-NNNNNNNN.h5          the index: the attributes of checkpoint.hpp,
//                                  /loader, and /layers/NNNNN as HDF5 external
//                                  links into the parts (any HDF5 reader follows them)
//   ckpt/step-NNNNNNNN.parts/part-RRRRR.h5
//                                  /layers/NNNNN/{params,adam_m,adam_v}/* of the
//                                  layers writer R wrote; chunked, Fletcher-32
//
// Why files and not MPI-IO: under ULFM a rank may die in the middle of a
// write, and MPI-IO's collective calls are not fault tolerant; a part file is
// ordinary POSIX I/O of one process. A checkpoint counts once every writer
// has renamed its part into place and the survivors agreed: only then does
// rank 0 write the index (renamed into place) and move `latest`. A directory
// of parts without its index is an abandoned checkpoint, removed at the next
// start or recovery.
//
// The work is split in three so that it can overlap training:
//   snapshot()  collective, at a step boundary: each writer copies the layers
//               it writes to host memory (gathering the shards of a split
//               stage on its slot 0, inside the node); rank 0 gathers the
//               loader rows. Afterwards training may change the model.
//   writePart() no MPI: this rank's part file (a background thread may run it).
//   publish()   rank 0, after the agreement: the index, then `latest`.
#pragma once

#include "kiln/data/cursor_io.hpp"
#include "kiln/model/gpt.hpp"
#include "kiln/train/adamw.hpp"

#include <mpi.h>
#include <torch/torch.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace kiln::train {

// For each layer, the stages that hold it (each the ranks of one stage, in
// slot order), any of which may write it.
using LayerHolders = std::vector<std::vector<std::vector<int>>>;

// The stage that writes each layer: the bytes (weights and both moments)
// spread over the stages' first ranks as evenly as a greedy choice makes them,
// heaviest layers first; the same on every rank.
std::vector<std::vector<int>> assignWriters(const arch::ModelConfig& config, const LayerHolders& holders);

struct CheckpointSnapshot {
    std::uint64_t step = 0;
    std::filesystem::path directory;  // ckpt/
    std::string name;                 // step-NNNNNNNN.h5
    int rank = 0;                     // in the communicator it was taken on
    arch::ModelConfig model;
    // The layers this rank writes, each as whole host tensors (weights, then
    // both moments, each in parameterShapes() order).
    std::vector<std::uint32_t> layers;
    std::vector<std::vector<torch::Tensor>> states;
    std::uint64_t bytes = 0;  // of those tensors
    // The index (rank 0 only).
    std::vector<int> writerOfLayer;  // the rank whose part holds each layer
    std::vector<std::vector<std::uint64_t>> cursorRows;
    data::Cursor cursor;
    data::CursorContext context;
    std::string deck;
    std::uint64_t optimizerSteps = 0, lrDecaySteps = 0;
    int writers = 0;  // ranks with a part

    std::filesystem::path path() const { return directory / name; }
    std::filesystem::path partsDirectory() const;
    std::filesystem::path partPath(int writer) const;
};

// Collective over `comm` (see above). `holders` uses `comm`'s ranks.
CheckpointSnapshot snapshot(MPI_Comm comm, std::uint64_t step, const std::filesystem::path& directory, model::Gpt& model,
                            AdamW& optimizer, const LayerHolders& holders, const data::Cursor& cursor,
                            const data::CursorContext& context, const std::string& deck, std::uint64_t lrDecaySteps);
// This rank's part file (nothing when it writes no layer). Not collective.
// `afterFirstLayer` runs once the first layer is written (fault injection).
void writePart(const CheckpointSnapshot& snapshot, const std::function<void()>& afterFirstLayer = {});
// Rank 0: the index, `beforeCommit` (fencing, fault injection), the index
// renamed into place, `latest`, and the checkpoints beyond `keep` removed.
void publish(const CheckpointSnapshot& snapshot, std::uint64_t keep, const std::function<void()>& beforeCommit);

}  // namespace kiln::train
