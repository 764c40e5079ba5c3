#include "kiln/data/loader_spec.hpp"

#include "kiln/base/hash.hpp"
#include "kiln/base/error.hpp"
#include "kiln/config/deck.hpp"

#include <fmt/format.h>

#include <bit>

namespace kiln::data {

std::uint64_t LoaderSpec::weightsHash() const {
    double total = 0.0;
    for (const auto& s : sources) total += s.weight;
    std::uint64_t h = 0x6d6978ull;  // "mix"
    for (const auto& s : sources) {
        for (char c : s.name) h = base::mix64(h ^ static_cast<unsigned char>(c));
        h = base::mix64(h ^ std::bit_cast<std::uint64_t>(s.weight / total));
    }
    return h;
}

LoaderSpec loaderSpecFromDeck(const config::Deck& deck) {
    LoaderSpec spec;
    const std::filesystem::path dir = deck.text("data.dir");
    for (const auto& entry : deck.mix("data.mix")) spec.sources.push_back({entry.source, dir / entry.source, entry.weight});
    spec.seqLen = static_cast<std::uint64_t>(deck.integer("data.seq_len"));
    spec.globalBatch = static_cast<std::uint64_t>(deck.integer("data.global_batch"));
    spec.seed = static_cast<std::uint64_t>(deck.integer("run.seed"));
    spec.blockDocs = static_cast<std::uint64_t>(deck.integer("data.shuffle_block"));
    spec.windowBlocks = static_cast<std::uint64_t>(deck.integer("data.shuffle_window"));
    spec.prefetchSteps = static_cast<std::uint64_t>(deck.integer("data.prefetch_steps"));
    spec.openShards = static_cast<std::size_t>(deck.integer("data.open_shards"));
    if (spec.openShards == 0) spec.openShards = defaultOpenShards(spec.windowBlocks);
    spec.shardMemoryBytes = static_cast<std::uint64_t>(deck.integer("data.shard_memory_mb")) << 20;
    spec.tokenizer = deck.text("data.tokenizer");
    return spec;
}

LoaderSpec evalLoaderSpecFromDeck(const config::Deck& deck) {
    LoaderSpec spec = loaderSpecFromDeck(deck);
    spec.sources.clear();
    const std::filesystem::path dir = deck.text("data.dir");
    for (const auto& entry : deck.mix("data.eval_mix")) {
        for (const auto& trained : deck.mix("data.mix"))
            if (trained.source == entry.source)
                throw InputError(fmt::format("data.eval_mix ({}): source '{}' is also in data.mix ({}): held-out data "
                                             "must be data the run never trains on (prepare a separate source)",
                                             deck.setting("data.eval_mix").origin, entry.source,
                                             deck.setting("data.mix").origin));
        spec.sources.push_back({entry.source, dir / entry.source, entry.weight});
    }
    return spec;
}

}  // namespace kiln::data
