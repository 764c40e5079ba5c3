// kiln checkpoint: what a checkpoint holds, where each layer is, and whether every tensor reads back.
#include "cli_options.hpp"
#include "kiln/train/checkpoint_contents.hpp"
#include "subcommands.hpp"

#include <fmt/format.h>

namespace kiln::apps {

int checkpointMain(int argc, char** argv) {
    std::string path;
    po::options_description options("kiln checkpoint");
    options.add_options()
        ("checkpoint", po::value<std::string>(&path)->required(), "a checkpoint (RUN_DIR/ckpt/step-NNNNNNNN.h5)")
        ("no-verify", "list only; do not read every tensor (the checksums are checked on read)");
    po::positional_options_description positional;
    positional.add("checkpoint", 1);
    po::variables_map values;
    if (!parseCommandLine(argc, argv, "kiln checkpoint CHECKPOINT [--no-verify]", options, positional, values)) return 0;
    const auto c = train::readContents(path, values.count("no-verify") == 0);
    std::uint64_t bytes = 0;
    for (const auto& l : c.layers) bytes += l.bytes;
    fmt::print("checkpoint {}\n  format {} ({}), step {}, optimizer steps {}, {:.1f} MB of weights and moments{}\n",
               path, c.formatVersion, c.formatVersion == 2 ? fmt::format("parts from {} writers", c.writers) : "one file",
               c.step, c.optimizerSteps, bytes / 1e6, c.hasLoader ? ", loader cursor" : ", NO loader cursor");
    fmt::print("  model: {}, vocabulary {}, seq_len {} ({:.1f} M parameters)\n", c.model.shapeText(), c.model.vocabSize,
               c.model.seqLen, c.model.parameters() / 1e6);
    fmt::print("  {:>5}  {:>7} {:>10}  {:<36} {}\n", "layer", "tensors", "MB", "file", c.verified ? "verified" : "");
    for (const auto& l : c.layers)
        fmt::print("  {:>5}  {:>7} {:>10.2f}  {:<36} {}\n", l.index, l.tensors, l.bytes / 1e6, l.file.empty() ? "(index)" : l.file,
                   l.problem.empty() ? (c.verified ? "ok" : "") : "UNREADABLE: " + l.problem);
    if (c.problems() > 0) {
        fmt::print("{} of {} layers cannot be read back: this checkpoint cannot be restored\n", c.problems(), c.layers.size());
        return 1;
    }
    if (c.verified) fmt::print("every tensor reads back and matches its checksum\n");
    return 0;
}

}  // namespace kiln::apps
