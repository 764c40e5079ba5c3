// Checkpoints: <run dir>/ckpt/step-NNNNNNNN.h5; `latest` (a one-line text
// file, replaced atomically) names the last complete one; the last `keep`
// are kept. A crash at any instant leaves the previous one `latest`.
// Two forms, read alike:
//  - format 2 (checkpoint.parallel = true, the default): every layer written
//    by one of its holders into the holder's part file, the file below an
//    index whose layer groups are external links (checkpoint_parts.hpp);
//  - format 1: one file; each layer's holder sends it to rank 0, which writes
//    the file alone (save() below).
// Tensors are chunked with a Fletcher-32 checksum that HDF5 verifies on read.
//
//   attributes  format "kiln-checkpoint", format_version (1 or 2), step, optimizer_steps,
//               lr_decay_steps (the cosine horizon the run fixed at its first start),
//               shape_model_blocks, shape_model_d_model, shape_model_heads, shape_model_mlp_ratio,
//               shape_the_tokenizer_s_vocabulary, shape_data_seq_len,
//               deck (the resolved deck of the run that wrote it)
//   /layers/NNNNN/params/*    each parameter of layer N (float32), every layer of the model once
//   /layers/NNNNN/adam_m/*    AdamW first moments
//   /layers/NNNNN/adam_v/*    AdamW second moments
//   /loader                   the loader cursor, one row per rank of the writing job (data/cursor_io.hpp)
#pragma once

#include "kiln/base/error.hpp"
#include "kiln/data/cursor_io.hpp"
#include "kiln/model/gpt.hpp"
#include "kiln/train/adamw.hpp"

#include <mpi.h>

#include <filesystem>
#include <functional>
#include <optional>
#include <string>

namespace kiln::train {

// A checkpoint that cannot be read back: a missing or truncated file, part or
// tensor, or data whose checksum does not match. A run resuming from `latest`
// falls back to the newest older checkpoint that reads.
class CheckpointUnreadable : public InputError {
public:
    explicit CheckpointUnreadable(std::string message) : InputError(std::move(message), ErrorScope::ThisRank) {}
};

class CheckpointStore {
public:
    CheckpointStore(std::filesystem::path dir, std::uint64_t keep);

    const std::filesystem::path& directory() const { return dir_; }
    // The checkpoint `latest` names, if there is one.
    std::optional<std::filesystem::path> latest() const;
    // The step of the checkpoint `latest` names, if there is one.
    std::optional<std::uint64_t> latestStep() const;
    // The complete checkpoints present, oldest first, as "step-NNNNNNNN.h5, ..." (or "none").
    std::string listing() const;
    // Their paths, oldest first.
    std::vector<std::filesystem::path> complete() const;
    // Removes what a killed writer left (temporaries of the index, of
    // `latest` and of parts; parts directories without an index); returns how
    // many. Call on one rank only while no checkpoint is being written (at
    // start, after a recovery).
    std::size_t removeStaleTemporaries() const;
    std::uint64_t keep() const { return keep_; }

    // Collective over `comm`. `model` holds this rank's layers; every layer of
    // the model is written once, sent by the ranks `writerOfLayer[layer]` (of
    // `comm`: one, or the ranks of a split stage in slot order, each sending
    // its shard), so the file is the same whatever the layout. `beforeCommit`
    // runs on the writing rank once the file is complete, before it is
    // renamed and `latest` moved (fencing, fault injection). Returns the path written.
    std::filesystem::path save(MPI_Comm comm, std::uint64_t step, model::Gpt& model, AdamW& optimizer,
                               const std::vector<std::vector<int>>& writerOfLayer, const data::Cursor& cursor,
                               const data::CursorContext& context, const std::string& deck, std::uint64_t lrDecaySteps,
                               const std::function<void()>& beforeCommit = {});

    // Reads `path` into `model` and `optimizer` (its layers only: any layout
    // restores from any checkpoint); returns the step to continue
    // from and sets `cursor`. Refuses a checkpoint of another model shape,
    // naming each key that differs (InputError); throws CheckpointUnreadable
    // when a part of it cannot be read.
    // `lrDecaySteps` gets the saved cosine horizon (0 in checkpoints that predate it).
    static std::uint64_t load(const std::filesystem::path& path, model::Gpt& model, AdamW& optimizer,
                              const data::CursorContext& context, data::Cursor& cursor, std::uint64_t& lrDecaySteps);

private:
    std::filesystem::path dir_;
    std::uint64_t keep_;
};

// Removes all but the newest `keep` complete checkpoints of `dir` (with their parts).
void pruneCheckpoints(const std::filesystem::path& dir, std::uint64_t keep);

}  // namespace kiln::train
