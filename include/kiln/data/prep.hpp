// kiln prep: text in, verified token shards of one source out. Runs on any
// number of MPI ranks: ranks split the work units, each writes its own shards,
// rank 0 numbers them and writes the manifest. The new source appears in one
// rename at the very end; until then any earlier version stays untouched.
#pragma once

#include "kiln/data/document_source.hpp"

#include <mpi.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kiln::data {

struct PrepOptions {
    std::string source;                 // name of the source (directory under outDir)
    std::string outDir = "data";
    std::vector<std::string> inputs;    // files or directories
    InputFormat format = InputFormat::FilePerDocument;
    std::string jsonField = "text";
    std::string tokenizer = "bytes";    // "bytes" or a SentencePiece .model path
    // --format tokens from a tokenizer kiln does not have: its vocabulary
    // size and EOS id (0 and -1: the ids are --tokenizer's).
    std::uint32_t idVocab = 0;
    std::int64_t eos = -1;
    std::string tokenDtype;             // --format tokens: the id type of headerless files ("uint16", ...)
    bool trainTokenizer = false;        // train a SentencePiece model first, write it to `tokenizer`
    std::uint32_t vocabSize = 8000;
    std::uint64_t tokenizerSampleBytes = 64u << 20;
    int tokenBits = 0;                  // 0: 16 when the vocabulary fits, else 32
    std::uint64_t shardTokens = 1u << 26;
    std::uint64_t splitBytes = 64u << 20;
    bool overwrite = false;
    bool strict = false;                // any skipped record is an error
    bool progress = true;
};

// Counted reasons for records that were not turned into documents.
struct SkipCount {
    std::uint64_t count = 0;
    std::vector<std::string> examples;  // first few "file:line"
};

struct PrepSummary {
    std::uint64_t documents = 0;
    std::uint64_t tokens = 0;
    std::uint64_t inputBytes = 0;
    std::size_t shards = 0;
    double seconds = 0.0;
    std::map<std::string, SkipCount> skipped;  // reason -> count (gathered on rank 0)
    std::string tokenizerId;
};

// Below this many tokens a shard, the per-file costs show (see smallShardWarning).
inline constexpr std::uint64_t kSmallShardTokens = 1u << 20;

// Empty, or why shards of `shardTokens` tokens are too small to be a good idea.
std::string smallShardWarning(std::uint64_t shardTokens);

// One line per skip reason with its count and first locations.
std::string describeSkipped(const std::map<std::string, SkipCount>& skipped);

// Collective over `comm`. Throws InputError for bad options or inputs (before
// any output is written) and, with `strict`, for any skipped record.
PrepSummary prepareSource(MPI_Comm comm, const PrepOptions& options);

}  // namespace kiln::data
