// kiln import: what a deck needs to start from a Hugging Face model (see train/hf_import.hpp).
#include "cli_options.hpp"
#include "kiln/train/hf_import.hpp"
#include "subcommands.hpp"

#include <fmt/format.h>

namespace kiln::apps {

int importMain(int argc, char** argv) {
    std::string dir;
    po::options_description options("kiln import");
    options.add_options()("dir", po::value<std::string>(&dir)->required(),
                          "a Hugging Face model directory (config.json, model.safetensors or its index)");
    po::positional_options_description positional;
    positional.add("dir", 1);
    po::variables_map values;
    if (!parseCommandLine(argc, argv, "kiln import DIR", options, positional, values)) return 0;
    const auto model = train::readHuggingFaceConfig(dir);
    fmt::print("# {}: {}, {:.4g} M parameters (untied head). Put this in the deck, with\n"
               "# model.init_from = {}\n# and a data.tokenizer of {} ids at most (model.vocab pads to it):\n{}",
               dir, model.shapeText(), double(model.parameters()) / 1e6, dir, model.vocabSize, train::deckLinesFor(model));
    return 0;
}

}  // namespace kiln::apps
