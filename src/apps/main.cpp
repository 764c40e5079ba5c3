// kiln: one executable, a table of subcommands. Those that use libtorch run
// in the module kiln_torch (torch_module.hpp), loaded for them alone.
#include "kiln/base/error.hpp"
#include "kiln/base/heap.hpp"
#include "report_error.hpp"
#include "subcommands.hpp"
#include "torch_module.hpp"

#include <cstdio>
#include <cstring>
#include <exception>

namespace {

struct Subcommand {
    const char* name;
    const char* summary;
    int (*main)(int argc, char** argv);  // nullptr: a command of kiln_torch
};

const Subcommand kSubcommands[] = {
    {"run", "train from an input deck (MPI; fault tolerant under mpirun --with-ft ulfm)", nullptr},
    {"prep", "tokenize text or JSON Lines into the HDF5 shards of one source (MPI-parallel)", kiln::apps::prepMain},
    {"inspect", "verify a prepared source, print its statistics, decode a document", kiln::apps::inspectMain},
    {"data", "print the next global batches of a deck, their fingerprints and the realised mix", kiln::apps::dataMain},
    {"diag", "summarise a run's diag.h5 (also while it runs); --plot writes PNG plots", kiln::apps::diagMain},
    {"profile", "measure each layer's forward/backward time and memory; writes the planner's profile", nullptr},
    {"plan", "pipeline templates for every node count, the instantiation for the cluster, what-if failures", nullptr},
    {"simulate", "a whole run against a failure rate or trace with kiln's own decisions: choose f, spares, checkpoints", nullptr},
    {"checkpoint", "what a checkpoint holds, where each layer is, and whether every tensor reads back", nullptr},
    {"export", "write a checkpoint's model as safetensors + config.json for Hugging Face transformers (GPT2LMHeadModel or LlamaForCausalLM)", nullptr},
    {"import", "check a Hugging Face model directory and print the deck's [model] section to start from it (model.init_from)", nullptr},
    {"deck", "list every deck key (--list) or check a deck and print it resolved (--check DECK)", kiln::apps::deckMain},
    {"reference", "print a page of the reference (deck keys, diag.h5, log lines) as Markdown: docs/reference", kiln::apps::referenceMain},
    {"launch-relay", "Open MPI's ssh agent under kiln-mpirun: a host lost whole is recovered inside the job (not run by hand)", kiln::apps::launchRelayMain},
    {"version", "versions of kiln and of the MPI, ULFM, HDF5, libtorch and NCCL it was built with", kiln::apps::versionMain},
};

void printUsage(std::FILE* out) {
    std::fprintf(out, "usage: kiln <command> [options]    (kiln <command> --help for its options)\n\ncommands:\n");
    for (const auto& s : kSubcommands) std::fprintf(out, "  %-8s %s\n", s.name, s.summary);
    std::fprintf(out, "\n  --version  same as 'kiln version'\n");
}

}  // namespace

int main(int argc, char** argv) {
    kiln::base::keepHeapForTraining();
    if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
        printUsage(stdout);
        return argc < 2 ? 2 : 0;
    }
    const char* name = !std::strcmp(argv[1], "--version") ? "version" : argv[1];
    for (const auto& s : kSubcommands) {
        if (std::strcmp(s.name, name) != 0) continue;
        try {
            return s.main ? s.main(argc - 1, argv + 1) : kiln::apps::runTorchCommand(s.name, argc - 1, argv + 1);
        } catch (const std::exception& e) {
            return kiln::apps::reportError(e);
        }
    }
    std::fprintf(stderr, "kiln: unknown command '%s'\n\n", argv[1]);
    printUsage(stderr);
    return 2;
}
