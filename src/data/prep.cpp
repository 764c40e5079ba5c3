#include "kiln/data/prep.hpp"

#include "kiln/base/error.hpp"
#include "kiln/base/log.hpp"
#include "kiln/comm/error_agreement.hpp"
#include "kiln/comm/mpi_check.hpp"
#include "kiln/data/arrow_inputs.hpp"
#include "kiln/data/doc_lengths.hpp"
#include "kiln/data/source_manifest.hpp"
#include "kiln/data/token_inputs.hpp"
#include "kiln/data/tokenizer.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

namespace kiln::data {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kExamplesKept = 5;

double secondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

void checkOptions(const PrepOptions& o, const fs::path& target) {
    if (o.source.empty() || o.source.find_first_of("/\\ \t") != std::string::npos || o.source[0] == '.')
        throw InputError(fmt::format("--source '{}': a source name is a plain directory name (letters, digits, '_', '-')", o.source));
    if (o.tokenBits != 0 && o.tokenBits != 16 && o.tokenBits != 32)
        throw InputError(fmt::format("--token-bits {}: expected 16 or 32 (or 0 to choose from the vocabulary)", o.tokenBits));
    if (o.shardTokens < 1024) throw InputError(fmt::format("--shard-tokens {}: must be at least 1024", o.shardTokens));
    if (o.trainTokenizer && o.tokenizer == "bytes")
        throw InputError("--train-tokenizer needs --tokenizer PATH.model: where to write the trained model");
    if (o.trainTokenizer && o.vocabSize < 300)
        throw InputError(fmt::format("--vocab {}: a SentencePiece vocabulary with byte fallback needs at least 300 pieces", o.vocabSize));
    if (o.format == InputFormat::Tokens && o.trainTokenizer)
        throw InputError("--train-tokenizer with --format tokens: the ids are tokenized already");
    if ((o.format == InputFormat::Parquet || o.format == InputFormat::Arrow) && o.trainTokenizer)
        throw InputError("--train-tokenizer reads its sample from text inputs (file, blocks, jsonl); with Parquet or "
                         "Arrow, train on a JSON Lines sample first, then prepare with --tokenizer");
    const bool mayHoldIds = o.format == InputFormat::Tokens || o.format == InputFormat::Parquet || o.format == InputFormat::Arrow;
    if (o.idVocab > 0 && !mayHoldIds)
        throw InputError("--vocab-size describes ids tokenized elsewhere: it goes with --format tokens, parquet or arrow "
                         "(text is tokenized by --tokenizer)");
    if (o.idVocab > 0 && o.tokenizer != "bytes")
        throw InputError(fmt::format("--vocab-size {} and --tokenizer {}: give one; --tokenizer when the ids are that "
                                     "tokenizer's, --vocab-size and --eos when kiln does not have it",
                                     o.idVocab, o.tokenizer));
    if (o.idVocab > 0 && (o.eos < 0 || o.eos >= static_cast<std::int64_t>(o.idVocab)))
        throw InputError(fmt::format("--vocab-size {} needs --eos: the id that ends each document (below {})", o.idVocab,
                                     o.idVocab));
    if (o.idVocab == 0 && o.eos >= 0)
        throw InputError("--eos goes with --vocab-size (a tokenizer named by --tokenizer has its own EOS)");
    if (!o.tokenDtype.empty() && o.format != InputFormat::Tokens)
        throw InputError(fmt::format("--token-dtype {} describes files of ids without a header: it goes with --format tokens",
                                     o.tokenDtype));
    if (fs::exists(target) && !o.overwrite)
        throw InputError(fmt::format("source {} exists already; pass --overwrite to replace it (the old one stays readable "
                                     "until the new one is complete)",
                                     target.string()));
}

// The identity of ids from a tokenizer kiln does not have: their vocabulary and EOS.
TokenizerInfo idsInfo(const PrepOptions& o) {
    return {fmt::format("ids-v{}-eos{}", o.idVocab, o.eos), o.idVocab, static_cast<std::uint32_t>(o.eos)};
}

// Rank 0 writes the first `budget` bytes of documents, one line each, for SentencePiece.
std::string writeTokenizerSample(const std::vector<WorkUnit>& units, const PrepOptions& o, const fs::path& staging) {
    const fs::path sample = staging / "tokenizer-sample.txt";
    std::ofstream out(sample);
    std::uint64_t written = 0;
    for (const auto& unit : units) {
        DocumentReader reader(unit, o.format, o.jsonField);
        for (Record r; written < o.tokenizerSampleBytes && reader.next(r);) {
            if (!r.problem.empty() || !isValidUtf8(r.text)) continue;
            std::istringstream lines(r.text);
            for (std::string line; std::getline(lines, line);) {
                if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
                out << line << '\n';
                written += line.size() + 1;
            }
        }
        if (written >= o.tokenizerSampleBytes) break;
    }
    if (written == 0) throw InputError("--train-tokenizer: the inputs hold no usable text to train on");
    return sample.string();
}

struct RankResult {
    std::vector<ShardSummary> shards;
    std::uint64_t documents = 0, tokens = 0, bytes = 0;
    std::map<std::string, SkipCount> skipped;
};

class Progress {
public:
    Progress(std::string source, std::uint64_t totalBytes, bool enabled)
        : source_(std::move(source)), total_(totalBytes), enabled_(enabled && log::rank() == 0) {}

    void update(std::uint64_t bytes, std::uint64_t docs, std::uint64_t tokens, bool final = false) {
        if (!enabled_) return;
        const double elapsed = secondsSince(start_);
        if (!final && elapsed - lastPrint_ < 2.0) return;
        lastPrint_ = elapsed;
        const double rate = elapsed > 0 ? bytes / elapsed : 0.0;
        const double eta = rate > 0 ? (total_ - std::min(bytes, total_)) / rate : 0.0;
        log::info("  prep {}: {:.1f}/{:.1f} MB ({:.0f}%)  {} docs  {} tokens  {:.1f} MB/s  ETA {:.0f}s  (rank 0's share)",
                  source_, bytes / 1e6, total_ / 1e6, total_ ? 100.0 * bytes / total_ : 100.0, docs, tokens, rate / 1e6, eta);
    }

private:
    std::string source_;
    std::uint64_t total_;
    bool enabled_;
    Clock::time_point start_ = Clock::now();
    double lastPrint_ = 0.0;
};

// This rank's shards, filled a document at a time.
class RankShards {
public:
    RankShards(RankResult& result, const PrepOptions& o, ShardHeader header, int rank, fs::path staging)
        : result_(result), o_(o), header_(std::move(header)), rank_(rank), staging_(std::move(staging)) {}
    void add(const std::vector<std::uint32_t>& tokens) {
        if (!writer_)
            writer_ = std::make_unique<ShardWriter>(staging_ / fmt::format("r{:05}-{:05}.h5", rank_, result_.shards.size()),
                                                    header_, tokenChunkFor(o_.shardTokens), o_.shardTokens);
        writer_->addDocument(tokens);
        result_.documents += 1;
        result_.tokens += tokens.size();
        if (writer_->numTokens() >= o_.shardTokens) finish();
    }
    void finish() {
        if (writer_ && writer_->numDocs() > 0) result_.shards.push_back(writer_->finish());
        writer_.reset();
    }

private:
    RankResult& result_;
    const PrepOptions& o_;
    ShardHeader header_;
    int rank_;
    fs::path staging_;
    std::unique_ptr<ShardWriter> writer_;
};

void skip(RankResult& result, const PrepOptions& o, const std::string& problem, const std::string& where) {
    auto& s = result.skipped[problem];
    if (s.count++ < kExamplesKept) s.examples.push_back(where);
    if (o.strict)
        throw InputError(fmt::format("{}: {} (--strict makes every skipped record an error); nothing was written", where,
                                     problem),
                         ErrorScope::ThisRank);
}

RankResult tokenizeMyUnits(const std::vector<WorkUnit>& units, int rank, int size, const PrepOptions& o,
                           const Tokenizer* tokenizer, const TokenizerInfo& info, int tokenBits, const fs::path& staging) {
    RankResult result;
    std::uint64_t myBytes = 0;
    for (std::size_t u = rank; u < units.size(); u += size) myBytes += units[u].bytes();
    Progress progress(o.source, myBytes, o.progress);
    RankShards shards(result, o, ShardHeader{o.source, info, tokenBits}, rank, staging);
    // Ids are stored as given where the deck of options says whose they are.
    const bool idsAllowed = o.idVocab > 0 || o.tokenizer != "bytes" || o.format == InputFormat::Tokens;
    std::vector<std::uint32_t> tokens;
    // A document of text: skipped with its problem (`where` names it, computed
    // only then: a line number may cost a scan), or tokenized into the shards.
    const auto addText = [&](Record& record, const auto& where, std::uint64_t consumed) {
        if (record.problem.empty() && !tokenizer->acceptsAnyBytes() && !isValidUtf8(record.text)) record.problem = "invalid UTF-8";
        if (!record.problem.empty()) return skip(result, o, record.problem, where());
        tokens.clear();
        tokenizer->encode(record.text, tokens);
        shards.add(tokens);
        progress.update(result.bytes + consumed, result.documents, result.tokens);
    };
    // A document of ids tokenized elsewhere, stored as given but for a trailing
    // EOS (the loader puts one between documents).
    const auto addIds = [&](const std::string& where, std::uint64_t consumed) {
        if (!tokens.empty() && tokens.back() == info.eosId) tokens.pop_back();
        if (tokens.empty()) return skip(result, o, "empty document", where);
        shards.add(tokens);
        progress.update(result.bytes + consumed, result.documents, result.tokens);
    };
    for (std::size_t u = rank; u < units.size(); u += size) {
        const auto& unit = units[u];
        if (o.format == InputFormat::Tokens) {
            TokenDocumentReader reader(unit, info.eosId, info.vocabSize, o.tokenDtype);
            while (reader.next(tokens)) addIds(reader.location(), reader.consumed());
        } else if (o.format == InputFormat::Parquet || o.format == InputFormat::Arrow) {
            ArrowDocumentReader reader(unit, o.format, o.jsonField);
            if (reader.holdsIds() && !idsAllowed)
                throw InputError(fmt::format("{}: column '{}' holds token ids: name their tokenizer (--tokenizer) or their "
                                             "vocabulary (--vocab-size and --eos)",
                                             unit.path, o.jsonField));
            if (!reader.holdsIds() && !tokenizer)
                throw InputError(fmt::format("{}: column '{}' holds text, but --vocab-size names no tokenizer to encode it "
                                             "with: give --tokenizer",
                                             unit.path, o.jsonField));
            if (reader.holdsIds())
                while (reader.next(tokens, info.vocabSize)) addIds(reader.location(), reader.consumed());
            else
                for (Record record; reader.next(record);) addText(record, [&] { return record.where; }, reader.consumed());
        } else {
            DocumentReader reader(unit, o.format, o.jsonField);
            for (Record record; reader.next(record);)
                addText(record, [&] { return reader.location(record); }, reader.consumed());
        }
        result.bytes += unit.bytes();
    }
    shards.finish();
    progress.update(result.bytes, result.documents, result.tokens, /*final=*/true);
    return result;
}

std::string resultToJson(const RankResult& r) {
    nlohmann::json skipped = nlohmann::json::object();
    for (const auto& [reason, s] : r.skipped) skipped[reason] = {{"count", s.count}, {"examples", s.examples}};
    return nlohmann::json{{"shards", nlohmann::json::parse(shardsToJson(r.shards))},
                          {"documents", r.documents},
                          {"tokens", r.tokens},
                          {"bytes", r.bytes},
                          {"skipped", skipped}}
        .dump();
}

// Every rank's result, in rank order, on rank 0 (empty elsewhere).
std::vector<RankResult> gatherResults(MPI_Comm comm, const RankResult& mine, int rank, int size) {
    const std::string text = resultToJson(mine);
    int length = static_cast<int>(text.size());
    std::vector<int> lengths(size), displs(size);
    KILN_MPI(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, comm));
    std::vector<char> all;
    if (rank == 0) {
        for (int r = 1; r < size; ++r) displs[r] = displs[r - 1] + lengths[r - 1];
        all.resize(static_cast<std::size_t>(displs[size - 1] + lengths[size - 1]));
    }
    KILN_MPI(MPI_Gatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(), displs.data(), MPI_CHAR, 0, comm));
    std::vector<RankResult> results;
    if (rank != 0) return results;
    for (int r = 0; r < size; ++r) {
        const auto j = nlohmann::json::parse(std::string(all.data() + displs[r], lengths[r]));
        RankResult result;
        result.shards = shardsFromJson(j.at("shards").dump());
        result.documents = j.at("documents");
        result.tokens = j.at("tokens");
        result.bytes = j.at("bytes");
        for (const auto& [reason, s] : j.at("skipped").items())
            result.skipped[reason] = {s.at("count"), s.at("examples").get<std::vector<std::string>>()};
        results.push_back(std::move(result));
    }
    return results;
}

// Rank 0: number the shards, write the manifest, swap the new source into place.
void publish(const std::vector<RankResult>& results, const PrepOptions& o, const TokenizerInfo& tokenizer, int tokenBits,
             const fs::path& staging, const fs::path& target) {
    SourceManifest manifest{o.source, tokenizer, tokenBits, {}};
    for (const auto& result : results) {
        for (auto shard : result.shards) {
            const std::string name = shardFileName(manifest.shards.size());
            fs::rename(staging / shard.file, staging / name);
            shard.file = name;
            manifest.shards.push_back(shard);
        }
    }
    fs::remove(staging / "tokenizer-sample.txt");
    writeManifest(staging, manifest);  // last: a source is complete once it has one
    const fs::path old = target.parent_path() / fmt::format(".{}.old", o.source);
    if (fs::exists(target)) {
        fs::remove_all(old);
        fs::rename(target, old);
    }
    fs::rename(staging, target);
    fs::remove_all(old);
}

}  // namespace

std::string smallShardWarning(std::uint64_t shardTokens) {
    if (shardTokens >= kSmallShardTokens) return "";
    return fmt::format(
        "warning: --shard-tokens {} makes small shards. Every shard is a file with about 8 KB of HDF5 metadata, opened "
        "through HDF5 once at start-up (about 0.1 ms on a local disk, the work divided among the ranks) and again by "
        "each rank whose stream reaches it; on a parallel file system every opening is a request to its metadata "
        "server. Below about {} Mi tokens a shard these costs show in start-up, metadata load and disk use "
        "(perf/RESULTS.md, \"Shard counts\"). The default, 64 Mi tokens, suits any corpus larger than a few G tokens.",
        shardTokens, kSmallShardTokens >> 20);
}

std::string describeSkipped(const std::map<std::string, SkipCount>& skipped) {
    std::string text;
    for (const auto& [reason, s] : skipped)
        text += fmt::format("  skipped {} record{}: {} (first at {})\n", s.count, s.count == 1 ? "" : "s", reason,
                            fmt::join(s.examples, ", "));
    return text.empty() ? "  (no records at all)\n" : text;
}

namespace {

// Collective: the length index the ranks plan from (doc_lengths.hpp), each
// prep rank writing its own shards' part (their documents come in rank order).
void writeLengthIndex(MPI_Comm comm, const PrepOptions& o, const RankResult& mine, const fs::path& staging) {
    std::vector<LengthsShard> shards;
    std::uint64_t counts[2] = {0, 0}, totals[2] = {0, 0}, firstDoc = 0;  // documents, tokens
    for (const auto& shard : mine.shards) {
        shards.push_back({staging / shard.file, shard.numDocs, shard.numTokens});
        counts[0] += shard.numDocs;
        counts[1] += shard.numTokens;
    }
    KILN_MPI(MPI_Exscan(&counts[0], &firstDoc, 1, MPI_UINT64_T, MPI_SUM, comm));
    int rank = 0;
    KILN_MPI(MPI_Comm_rank(comm, &rank));
    if (rank == 0) firstDoc = 0;  // MPI_Exscan leaves rank 0's undefined
    KILN_MPI(MPI_Allreduce(counts, totals, 2, MPI_UINT64_T, MPI_SUM, comm));
    writeDocLengths(comm, staging / kDocLengthsName, {o.source, totals[0], totals[1]}, shards, firstDoc);
}

// Every rank brings the error it met (or none); if any rank met one, the
// lowest such rank's message becomes everyone's error (printed once), and
// rank 0 removes the staging directory: nothing is left behind.
void agreeOnErrors(MPI_Comm comm, const std::string& mine, const fs::path& staging) {
    const std::string message = comm::firstError(comm, mine);
    if (message.empty()) return;
    int rank = 0;
    KILN_MPI(MPI_Comm_rank(comm, &rank));
    std::error_code ignored;
    if (rank == 0) fs::remove_all(staging, ignored);
    throw InputError(message);
}

}  // namespace

PrepSummary prepareSource(MPI_Comm comm, const PrepOptions& o) {
    const auto start = Clock::now();
    int rank = 0, size = 1;
    KILN_MPI(MPI_Comm_rank(comm, &rank));
    KILN_MPI(MPI_Comm_size(comm, &size));
    const fs::path target = fs::path(o.outDir) / o.source;
    const fs::path staging = fs::path(o.outDir) / fmt::format(".{}.staging", o.source);
    checkOptions(o, target);
    if (const auto warning = smallShardWarning(o.shardTokens); !warning.empty()) log::info("kiln prep: {}", warning);
    const auto units = planWorkUnits(o.inputs, o.format, o.splitBytes, o.tokenDtype);

    // The tokenizer is checked before anything is written (unless it is to be trained).
    const auto checkTokenBits = [&](const TokenizerInfo& info) {
        const int bits = o.tokenBits == 0 ? tokenBitsFor(info.vocabSize) : o.tokenBits;
        if (bits < tokenBitsFor(info.vocabSize))
            throw InputError(fmt::format("--token-bits {}: tokenizer {} has a vocabulary of {} ids, which does not fit in "
                                         "uint{}; use --token-bits 32 (or 0 to choose)",
                                         bits, o.tokenizer, info.vocabSize, bits));
        return bits;
    };
    if (!o.trainTokenizer) checkTokenBits(o.idVocab > 0 ? idsInfo(o) : openTokenizer(o.tokenizer)->info());

    // A staging directory left by a killed prep is never a complete source: start afresh.
    std::string problem;
    if (rank == 0) {
        problem = comm::problemOf([&] {
            fs::remove_all(staging);
            fs::create_directories(staging);
            if (!o.trainTokenizer) return;
            const std::string sample = writeTokenizerSample(units, o, staging);
            const std::string prefix = (fs::path(o.tokenizer).parent_path() / fs::path(o.tokenizer).stem()).string();
            log::info("  prep {}: training a SentencePiece model of {} pieces on {:.1f} MB of its text", o.source, o.vocabSize,
                      fs::file_size(sample) / 1e6);
            const std::string model = trainSentencePiece(sample, o.vocabSize, prefix);
            if (fs::path(model) != fs::path(o.tokenizer)) fs::rename(model, o.tokenizer);
            log::info("  prep {}: tokenizer written to {} (vocabulary {}, asked for {})", o.source, o.tokenizer,
                      openTokenizer(o.tokenizer)->info().vocabSize, o.vocabSize);
        });
    }
    agreeOnErrors(comm, problem, staging);

    const auto tokenizer = o.idVocab > 0 ? nullptr : openTokenizer(o.tokenizer);
    const TokenizerInfo info = tokenizer ? tokenizer->info() : idsInfo(o);
    const int tokenBits = checkTokenBits(info);

    // A bad record under --strict (or an unreadable input) on any rank stops every rank alike.
    RankResult mine;
    problem = comm::problemOf([&] { mine = tokenizeMyUnits(units, rank, size, o, tokenizer.get(), info, tokenBits, staging); });
    agreeOnErrors(comm, problem, staging);
    const auto results = gatherResults(comm, mine, rank, size);

    PrepSummary summary;
    summary.tokenizerId = info.id;
    if (rank == 0) {
        for (const auto& r : results) {
            summary.documents += r.documents;
            summary.tokens += r.tokens;
            summary.inputBytes += r.bytes;
            summary.shards += r.shards.size();
            for (const auto& [reason, s] : r.skipped) {
                auto& total = summary.skipped[reason];
                total.count += s.count;
                for (const auto& e : s.examples)
                    if (total.examples.size() < kExamplesKept) total.examples.push_back(e);
            }
        }
    }
    // Decided together, so that every rank raises the same error or none.
    std::uint64_t documents = summary.documents;
    KILN_MPI(MPI_Bcast(&documents, 1, MPI_UINT64_T, 0, comm));
    if (documents == 0) {
        if (rank == 0) fs::remove_all(staging);
        throw InputError(fmt::format("kiln prep {}: no documents in the inputs; every record was skipped:\n{}", o.source,
                                     describeSkipped(summary.skipped)));
    }
    // Before the swap: a source in place always has its length index.
    problem = comm::problemOf([&] { writeLengthIndex(comm, o, mine, staging); });
    agreeOnErrors(comm, problem, staging);
    if (rank == 0) publish(results, o, info, tokenBits, staging, target);
    KILN_MPI(MPI_Barrier(comm));
    summary.seconds = secondsSince(start);
    return summary;
}

}  // namespace kiln::data
