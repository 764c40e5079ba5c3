// kiln inspect: verify a prepared source, print its statistics, decode a document.
#include "cli_options.hpp"
#include "kiln/base/error.hpp"
#include "kiln/data/doc_lengths.hpp"
#include "kiln/data/source_reader.hpp"
#include "kiln/data/source_verify.hpp"
#include "kiln/data/tokenizer.hpp"
#include "subcommands.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace kiln::apps {
namespace {

void printHistogram(const data::SourceStats& stats) {
    const auto& h = stats.lengthHistogram;
    const std::uint64_t peak = *std::max_element(h.begin(), h.end());
    fmt::print("  document length (tokens)   documents\n");
    for (std::size_t k = 0; k < h.size(); ++k) {
        if (h[k] == 0) continue;
        const std::string range = k == 0 ? "0" : fmt::format("{}..{}", std::uint64_t{1} << (k - 1), (std::uint64_t{1} << k) - 1);
        const int bar = peak ? static_cast<int>(40.0 * h[k] / peak + 0.5) : 0;
        fmt::print("  {:>22}   {:>9}  {}\n", range, h[k], std::string(std::max(bar, 1), '#'));
    }
}

}  // namespace

int inspectMain(int argc, char** argv) {
    std::string dir, tokenizerSpec;
    std::int64_t decode = -1;
    std::size_t maxChars = 2000;
    po::options_description options("kiln inspect");
    options.add_options()
        ("source", po::value<std::string>(&dir)->required(), "the source directory (DATA_DIR/NAME)")
        ("tokenizer", po::value<std::string>(&tokenizerSpec), "check the source was prepared with this tokenizer ('bytes' or a .model)")
        ("decode", po::value<std::int64_t>(&decode), "print document N decoded (needs --tokenizer)")
        ("max-chars", po::value<std::size_t>(&maxChars)->default_value(maxChars), "with --decode: print at most this many characters")
        ("no-verify", "skip reading every token (checksums, ids, offsets)")
        ("write-lengths", "after verifying, write the length index doc_lengths.h5 (sources prepared before it existed)");
    po::positional_options_description positional;
    positional.add("source", 1);
    po::variables_map values;
    if (!parseCommandLine(argc, argv, "kiln inspect DATA_DIR/SOURCE [--tokenizer T] [--decode N]", options, positional, values))
        return 0;

    // Shards are opened one by one as they are verified, so that every problem is reported, not only the first.
    data::ReaderOptions lazy;
    lazy.checkShardsAtOpen = false;
    lazy.useLengthIndex = false;  // verified below, and replaced by --write-lengths, whatever its state
    data::SourceReader reader(dir, lazy);
    const auto& m = reader.manifest();
    fmt::print("source {} ({})\n  tokenizer {} (vocabulary {}, EOS {}), tokens stored as uint{}\n  {} documents, {} tokens "
               "in {} shard{}\n",
               m.source, dir, m.tokenizer.id, m.tokenizer.vocabSize, m.tokenizer.eosId, m.tokenBits, m.numDocs(),
               m.numTokens(), m.shards.size(), m.shards.size() == 1 ? "" : "s");

    std::unique_ptr<data::Tokenizer> tokenizer;
    if (!tokenizerSpec.empty()) {
        tokenizer = data::openTokenizer(tokenizerSpec);
        reader.requireTokenizer(tokenizer->info());
        fmt::print("  tokenizer matches {}\n", tokenizerSpec);
    }

    int status = 0;
    if (!values.count("no-verify")) {
        const auto report = data::verifySource(reader);
        if (report.ok()) {
            fmt::print("  verified: every shard opens and matches the manifest, checksums match, offsets are monotone, "
                       "every token id < {}\n",
                       m.tokenizer.vocabSize);
            const auto& s = report.stats;
            fmt::print("  document length: min {}, mean {:.1f}, max {}\n", s.minLength,
                       s.numDocs ? double(s.numTokens) / s.numDocs : 0.0, s.maxLength);
            printHistogram(s);
        } else {
            for (const auto& p : report.problems) fmt::print(stderr, "  PROBLEM {}\n", p);
            status = 1;
        }
    }

    if (values.count("write-lengths") && status == 0) {
        data::writeDocLengths(dir, m);
        fmt::print("  wrote {}/{}: the lengths of {} documents; ranks now plan without opening shards\n", dir,
                   data::kDocLengthsName, m.numDocs());
    }

    if (decode >= 0) {
        if (!tokenizer) throw InputError("--decode needs --tokenizer (the one the source was prepared with)");
        const auto tokens = reader.readDocument(static_cast<std::uint64_t>(decode));
        std::string text = tokenizer->decode(tokens);
        const bool cut = text.size() > maxChars;
        if (cut) text.resize(maxChars);
        fmt::print("--- document {} ({} tokens) ---\n{}{}\n---\n", decode, tokens.size(), text, cut ? " [...]" : "");
    }
    if (status != 0) throw InputError(fmt::format("source {} failed verification (problems above)", dir));
    return status;
}

}  // namespace kiln::apps
