// kiln data DECK: what the model will be fed. Prints the next global batches
// (every rank's slice, in rank order: source and decoded text of each sample,
// whole with --full), each batch's fingerprint (equal on any rank count), and
// the realised mix against the target. --dump writes the batches' tokens as a
// NumPy array (the reference's training parity test trains on them).
#include "batch_dump.hpp"
#include "cli_options.hpp"
#include "kiln/base/error.hpp"
#include "kiln/base/log.hpp"
#include "kiln/comm/mpi_check.hpp"
#include "kiln/comm/world.hpp"
#include "kiln/config/deck.hpp"
#include "kiln/data/agreed_batch.hpp"
#include "kiln/data/batch_fingerprint.hpp"
#include "kiln/data/cursor_io.hpp"
#include "kiln/data/loader.hpp"
#include "kiln/data/tokenizer.hpp"
#include "subcommands.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cstdio>

namespace kiln::apps {
namespace {

// A tokenizer that can decode the sources, if one is known.
std::unique_ptr<data::Tokenizer> decoderFor(const data::LoaderSpec& spec, const data::TokenizerInfo& info) {
    if (!spec.tokenizer.empty()) return data::openTokenizer(spec.tokenizer);
    if (info.id == "bytes-v1") return data::openTokenizer("bytes");
    return nullptr;
}

std::string snippet(const data::Tokenizer* tokenizer, const std::uint32_t* tokens, std::size_t n, std::size_t width) {
    std::string text;
    if (tokenizer) {
        text = tokenizer->decode(std::vector<std::uint32_t>(tokens, tokens + n));
        for (auto& c : text)
            if (c == '\n' || c == '\t' || c == '\r') c = ' ';
    } else {
        for (std::size_t i = 0; i < n && text.size() < width; ++i) text += fmt::format("{} ", tokens[i]);
    }
    if (text.size() > width) text = text.substr(0, width) + "...";
    return text;
}

// Every rank's text, printed by rank 0 in rank order.
void printInRankOrder(MPI_Comm comm, const std::string& mine) {
    int rank = 0, size = 1;
    KILN_MPI(MPI_Comm_rank(comm, &rank));
    KILN_MPI(MPI_Comm_size(comm, &size));
    int length = static_cast<int>(mine.size());
    std::vector<int> lengths(static_cast<std::size_t>(size)), offsets(static_cast<std::size_t>(size));
    KILN_MPI(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, comm));
    std::string all;
    if (rank == 0) {
        for (int r = 1; r < size; ++r) offsets[r] = offsets[r - 1] + lengths[r - 1];
        all.resize(static_cast<std::size_t>(offsets.back() + lengths.back()));
    }
    KILN_MPI(MPI_Gatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, 0, comm));
    if (rank == 0 && !all.empty()) std::fputs(all.c_str(), stdout);
    std::fflush(stdout);
}

}  // namespace

int dataMain(int argc, char** argv) {
    std::string deckPath, cursorIn, cursorOut, dumpPath;
    std::vector<std::string> overrides;
    std::uint64_t steps = 3, show = 4;
    po::options_description options("kiln data");
    options.add_options()
        ("deck", po::value<std::string>(&deckPath)->required(), "the input deck")
        ("steps", po::value<std::uint64_t>(&steps)->default_value(steps), "global batches to produce")
        ("show", po::value<std::uint64_t>(&show)->default_value(show), "samples of each rank's slice to print per batch (0: none)")
        ("full", "print whole samples (all seq_len + 1 tokens, decoded text as is) rather than their first 48 tokens")
        ("cursor-in", po::value<std::string>(&cursorIn), "continue from a saved loader cursor (any rank count)")
        ("cursor-out", po::value<std::string>(&cursorOut), "save the loader cursor at the end (collective write)")
        ("dump", po::value<std::string>(&dumpPath), "write the batches' tokens to FILE.npy (uint32, steps x global batch x seq_len + 1)")
        ("set", po::value<std::vector<std::string>>(&overrides)->composing(), "override a key: --set section.key=value");
    po::positional_options_description positional;
    positional.add("deck", 1);
    po::variables_map values;
    if (!parseCommandLine(argc, argv, "[mpirun -n N] kiln data DECK [--steps N] [--show K] [--cursor-in F] [--cursor-out F] [--dump F.npy]",
                          options, positional, values))
        return 0;

    comm::MpiSession mpi(&argc, &argv);
    const auto deck = config::Deck::fromFile(deckPath, overrides);
    comm::World world(0);
    const data::LoaderSpec spec = data::loaderSpecFromDeck(deck);

    const auto startUp = std::chrono::steady_clock::now();
    // Checks the sources before anything else (the ranks share the work); gives the tokenizer.
    const auto corpus = std::make_shared<data::Corpus>(spec, data::CorpusSharing{world.control()});
    const auto context = data::cursorContext(spec, corpus->tokenizer().id, corpus->tokenizer().legacyId);
    data::Cursor start;
    {
        data::BatchPlanner planner(spec, *corpus);
        start = cursorIn.empty() ? planner.initial() : planner.resume(data::loadCursorFile(world.control(), cursorIn, context));
    }
    data::DataLoader loader(spec, corpus, start);
    const std::uint64_t G = spec.globalBatch, n = static_cast<std::uint64_t>(world.size());
    const std::uint64_t first = G * world.rank() / n, last = G * (world.rank() + 1) / n;
    loader.setSlice(first, last - first);
    const double startSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - startUp).count();
    log::info("kiln data: {} from step {}; {} rank{}, global batch {} x {} tokens; start-up {:.3f} s", deck.name(),
              start.step, world.size(), world.size() == 1 ? "" : "s", G, spec.seqLen + 1, startSeconds);

    const auto decoder = decoderFor(spec, loader.tokenizer());
    const bool full = values.count("full") > 0;
    std::unique_ptr<BatchDump> dump;
    if (!dumpPath.empty()) dump = std::make_unique<BatchDump>(world.control(), dumpPath, steps, G, spec.seqLen + 1);
    for (std::uint64_t s = 0; s < steps; ++s) {
        // A rank whose slice cannot be read (a corrupt chunk) stops every rank with its message.
        const auto [batch, error] = data::currentBatchOrFirstError(loader, world.control());
        if (!error.empty()) throw InputError(error);
        std::uint64_t part = data::sliceFingerprint(*batch), fingerprint = 0;
        KILN_MPI(MPI_Reduce(&part, &fingerprint, 1, MPI_UINT64_T, MPI_SUM, 0, world.control()));
        log::info("step {}  fingerprint {:016x}  data wait {:.1f} ms", batch->step, fingerprint, 1e3 * loader.lastWaitSeconds());
        std::string lines;
        if (show > 0 && world.size() > 1)
            lines += fmt::format(" rank {}: samples {}-{}\n", world.rank(), batch->first, batch->first + batch->count - 1);
        for (std::uint64_t i = 0; i < std::min(show, batch->count); ++i) {
            const std::uint32_t* tokens = &batch->tokens[i * batch->sampleLength];
            const std::string& source = spec.sources[batch->sourceOfSample[i]].name;
            if (full) {
                lines += fmt::format("  [{:>3}] {} ({} tokens):\n", batch->first + i, source, batch->sampleLength);
                lines += decoder ? decoder->decode(std::vector<std::uint32_t>(tokens, tokens + batch->sampleLength))
                                 : fmt::format("{}", fmt::join(tokens, tokens + batch->sampleLength, " "));
                lines += "\n";
            } else {
                lines += fmt::format("  [{:>3}] {:<10} {}\n", batch->first + i, source,
                                     snippet(decoder.get(), tokens, std::min<std::size_t>(batch->sampleLength, 48), 90));
            }
        }
        printInRankOrder(world.control(), lines);
        if (dump) dump->append(*batch);
        loader.commit();
    }

    if (dump) {
        dump->close();
        log::info("batches of steps {}-{} written to {}", start.step, start.step + steps - 1, dumpPath);
    }
    log::info("\nrealised mix of the current weight segment after step {} ({} samples):", loader.cursor().step,
              loader.cursor().samples - loader.cursor().segmentStart);
    log::info("  {:<12} {:>8} {:>9} {:>9} {:>12} {:>10} {:>7} {:>9}", "source", "target", "realised", "samples", "tokens",
              "documents", "epochs", "dropped");
    for (const auto& a : loader.accounts())
        log::info("  {:<12} {:>7.2f}% {:>8.2f}% {:>9} {:>12} {:>10} {:>7} {:>9}", a.name, 100 * a.targetShare,
                  100 * a.realisedShare, a.samples, a.tokens, a.documents, a.epochs, a.tokensDropped);
    log::info("  data wait {:.3f} s in total", loader.waitSeconds());
    std::uint64_t openings = 0, preads = 0;
    std::size_t openNow = 0, blocksNow = 0, indexed = 0;
    const std::uint64_t budget = corpus->memoryBudget();
    for (std::size_t i = 0; i < corpus->size(); ++i) {
        openings += corpus->reader(i).shardOpenings();
        preads += corpus->reader(i).directReads();
        openNow += corpus->reader(i).openShards();
        blocksNow += corpus->reader(i).blocksInMemory();
        indexed += corpus->reader(i).plansFromLengthIndex() ? 1 : 0;
    }
    log::info("  shards: {} of {} checked by this rank at start-up, {} openings in all ({} read with preads, without "
              "HDF5's opening); now {} open (data.open_shards = {} per source), {} blocks held within "
              "{:.1f} MB (data.shard_memory_mb{})",
              corpus->shardsChecked(), corpus->shardsInAll(), openings, preads, openNow, spec.openShards, blocksNow,
              budget / 1048576.0, spec.shardMemoryBytes > 0 ? "" : " = 0: a shuffle window of each source");
    log::info("  planned from the length index (doc_lengths.h5) for {} of {} source{}", indexed, corpus->size(),
              corpus->size() == 1 ? "" : "s");
    if (!cursorOut.empty()) {
        const auto t0 = std::chrono::steady_clock::now();
        data::saveCursorFile(world.control(), cursorOut, loader.cursor(), context);
        log::info("  cursor at step {} saved to {} by {} rank{} in {:.1f} ms", loader.cursor().step, cursorOut, world.size(),
                  world.size() == 1 ? "" : "s",
                  1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return 0;
}

}  // namespace kiln::apps
