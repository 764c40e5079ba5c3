// kiln profile DECK: per-layer costs on this machine, for the planner.
#include "cli_options.hpp"
#include "kiln/base/log.hpp"
#include "kiln/config/deck.hpp"
#include "kiln/data/batch_planner.hpp"
#include "kiln/model/device.hpp"
#include "kiln/arch/model_config.hpp"
#include "kiln/model/profiler.hpp"
#include "subcommands.hpp"

#include <fmt/format.h>

namespace kiln::apps {

int profileMain(int argc, char** argv) {
    std::string deckPath, out;
    std::vector<std::string> overrides;
    std::uint64_t microBatch = 0;
    int repeat = 5;
    std::uint32_t vocab = 0;
    po::options_description options("kiln profile");
    options.add_options()
        ("deck", po::value<std::string>(&deckPath)->required(), "the input deck (model.* and data.seq_len)")
        ("out", po::value<std::string>(&out)->default_value("profile.h5"), "where to write the profile (HDF5)")
        ("micro-batch", po::value<std::uint64_t>(&microBatch), "samples per microbatch (default: train.micro_batch)")
        ("repeat", po::value<int>(&repeat)->default_value(repeat), "timed runs per layer (median reported)")
        ("vocab", po::value<std::uint32_t>(&vocab), "vocabulary size (default: the deck's data sources' tokenizer)")
        ("set", po::value<std::vector<std::string>>(&overrides)->composing(), "override a key: --set section.key=value");
    po::positional_options_description positional;
    positional.add("deck", 1);
    po::variables_map values;
    if (!parseCommandLine(argc, argv, "kiln profile DECK [--out profile.h5] [--micro-batch N]", options, positional, values))
        return 0;
    const auto deck = config::Deck::fromFile(deckPath, overrides);
    if (vocab == 0) vocab = data::Corpus(data::loaderSpecFromDeck(deck)).tokenizer().vocabSize;
    if (microBatch == 0) microBatch = static_cast<std::uint64_t>(deck.integer("train.micro_batch"));
    const auto config = arch::modelConfigFromDeck(deck, vocab);
    // Where the run will compute: a GPU run is planned with GPU times.
    const auto device = model::chooseDevice(deck.text("train.device"), deck.setting("train.device").origin, 0);
    const auto profile = model::profileModel(config, microBatch, repeat, static_cast<int>(deck.integer("train.threads")),
                                             device, deck.text("train.precision") == "bf16");
    plan::writeProfile(out, profile);
    fmt::print("kiln profile: {} layers, micro-batch {} x {} tokens, {} {} (median of {})\n", config.numLayers(),
               microBatch, config.seqLen, profile.device, deck.text("train.precision"), repeat);
    fmt::print("  {:>5} {:<10} {:>12} {:>12} {:>12} {:>12} {:>14}\n", "layer", "kind", "forward ms", "backward ms",
               "params MB", "output MB", "activations MB");
    double fwd = 0, bwd = 0;
    for (std::size_t i = 0; i < profile.layers.size(); ++i) {
        const auto& l = profile.layers[i];
        fwd += l.forwardSeconds;
        bwd += l.backwardSeconds;
        fmt::print("  {:>5} {:<10} {:>12.3f} {:>12.3f} {:>12.3f} {:>12.3f} {:>14.3f}\n", i, l.kind, 1e3 * l.forwardSeconds,
                   1e3 * l.backwardSeconds, l.paramBytes / 1e6, l.outputBytes / 1e6, l.activationBytes / 1e6);
    }
    fmt::print("  total forward {:.3f} ms, backward {:.3f} ms (backward/forward {:.2f}); written to {}\n", 1e3 * fwd, 1e3 * bwd,
               bwd / fwd, out);
    if (profile.device == "cpu")
        fmt::print("  a rank's runtime besides its tensors (libraries' code and buffers, threads): {:.1f} MB, counted on "
                   "every stage's memory\n",
                   profile.runtimeBytes / 1e6);
    return 0;
}

}  // namespace kiln::apps
