// kiln export: a checkpoint's model for Hugging Face transformers (see train/hf_export.hpp).
#include "cli_options.hpp"
#include "kiln/train/hf_export.hpp"
#include "subcommands.hpp"

#include <fmt/format.h>

namespace kiln::apps {

int exportMain(int argc, char** argv) {
    std::string checkpoint, dir;
    po::options_description options("kiln export");
    options.add_options()
        ("checkpoint", po::value<std::string>(&checkpoint)->required(), "a checkpoint (RUN_DIR/ckpt/step-NNNNNNNN.h5)")
        ("dir", po::value<std::string>(&dir)->required(), "the directory to write (created)");
    po::positional_options_description positional;
    positional.add("checkpoint", 1).add("dir", 1);
    po::variables_map values;
    if (!parseCommandLine(argc, argv, "kiln export CHECKPOINT DIR", options, positional, values)) return 0;
    const auto report = train::exportToHuggingFace(checkpoint, dir);
    fmt::print("exported {} ({:.1f} M parameters, {} tensors, {:.1f} MB) to {}: model.safetensors, config.json "
               "({}), kiln_reference.json\n"
               "  from transformers import {}\n"
               "  model = {}.from_pretrained(\"{}\")\n"
               "  logits = model(torch.tensor([[1, 2, 3]])).logits\n",
               checkpoint, report.parameters / 1e6, report.tensors, report.bytes / 1e6, dir, report.architecture,
               report.architecture, report.architecture, dir);
    if (!report.note.empty()) fmt::print("  note: {}\n", report.note);
    return 0;
}

}  // namespace kiln::apps
