// kiln export: a checkpoint's model for Hugging Face transformers (see train/hf_export.hpp).
#include "cli_options.hpp"
#include "kiln/base/error.hpp"
#include "kiln/train/hf_export.hpp"
#include "subcommands.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace kiln::apps {

int exportMain(int argc, char** argv) {
    std::string checkpoint, dir;
    double shardMb = 4000, referenceMb = 4000;
    po::options_description options("kiln export");
    options.add_options()
        ("checkpoint", po::value<std::string>(&checkpoint)->required(), "a checkpoint (RUN_DIR/ckpt/step-NNNNNNNN.h5)")
        ("dir", po::value<std::string>(&dir)->required(), "the directory to write (created)")
        ("max-shard-mb", po::value<double>(&shardMb)->default_value(shardMb),
         "largest safetensors file; a larger model is cut at layer boundaries into numbered files with "
         "model.safetensors.index.json")
        ("reference-max-mb", po::value<double>(&referenceMb)->default_value(referenceMb),
         "write kiln_reference.json (kiln's logits for two sequences) for models up to this size");
    po::positional_options_description positional;
    positional.add("checkpoint", 1).add("dir", 1);
    po::variables_map values;
    if (!parseCommandLine(argc, argv, "kiln export CHECKPOINT DIR [--max-shard-mb MB]", options, positional, values))
        return 0;
    if (!(shardMb > 0) || !(referenceMb >= 0))
        throw InputError(fmt::format("kiln export: --max-shard-mb = {} must be > 0 and --reference-max-mb = {} >= 0",
                                     shardMb, referenceMb));
    train::ExportOptions exportOptions;
    exportOptions.maxShardBytes = static_cast<std::uint64_t>(shardMb * 1048576.0);
    exportOptions.maxReferenceBytes = static_cast<std::uint64_t>(referenceMb * 1048576.0);
    const auto report = train::exportToHuggingFace(checkpoint, dir, exportOptions);
    const std::string files = report.files.size() <= 6
                                  ? fmt::format("{}", fmt::join(report.files, ", "))
                                  : fmt::format("{}, ..., {}", report.files.front(), fmt::join(report.files.end() - 3, report.files.end(), ", "));
    fmt::print("exported {} ({:.1f} M parameters, {} tensors, {:.1f} MB) as {} to {}: {}\n"
               "  from transformers import {}\n"
               "  model = {}.from_pretrained(\"{}\")\n"
               "  logits = model(torch.tensor([[1, 2, 3]])).logits\n",
               checkpoint, report.parameters / 1e6, report.tensors, report.bytes / 1e6, report.architecture, dir, files,
               report.architecture, report.architecture, dir);
    for (const auto& note : report.notes) fmt::print("  note: {}\n", note);
    return 0;
}

}  // namespace kiln::apps
