// kiln prep: tokenize text into the shards of one source.
#include "cli_options.hpp"
#include "kiln/base/log.hpp"
#include "kiln/comm/world.hpp"
#include "kiln/data/prep.hpp"
#include "subcommands.hpp"

#include <fmt/format.h>

namespace kiln::apps {

int prepMain(int argc, char** argv) {
    data::PrepOptions o;
    std::string format = "file";
    po::options_description options("kiln prep");
    options.add_options()
        ("source", po::value<std::string>(&o.source)->required(), "name of the source to write (a directory under --out)")
        ("input", po::value<std::vector<std::string>>(&o.inputs)->multitoken()->required(), "input files or directories (recursed, sorted)")
        ("out", po::value<std::string>(&o.outDir)->default_value(o.outDir), "data directory that holds the sources")
        ("format", po::value<std::string>(&format)->default_value(format),
         "file: one document per file | blocks: documents separated by blank lines | jsonl: JSON Lines | tokens: ids "
         "tokenized elsewhere (Megatron-LM PREFIX.idx + .bin, .npy, llm.c .bin) | parquet | arrow (IPC file or "
         "stream); text may be gzip or zstd")
        ("field", po::value<std::string>(&o.jsonField)->default_value(o.jsonField), "with --format jsonl: the field that holds the text; parquet and arrow: the column (text, or a list of token ids)")
        ("tokenizer", po::value<std::string>(&o.tokenizer)->default_value(o.tokenizer),
         "'bytes', a SentencePiece .model or a Hugging Face tokenizer.json (with --train-tokenizer: where to "
         "write the new SentencePiece model)")
        ("vocab-size", po::value<std::uint32_t>(&o.idVocab)->default_value(0),
         "with --format tokens: the vocabulary of the tokenizer that made the ids, when kiln does not have it (ids are "
         "checked against it)")
        ("eos", po::value<std::int64_t>(&o.eos)->default_value(-1),
         "with --vocab-size: the id that ends a document (flat files: separates them)")
        ("token-dtype", po::value<std::string>(&o.tokenDtype),
         "with --format tokens: the id type of files without a header (nanoGPT's train.bin: uint16; also uint8, "
         "int16, uint32, int32, int64)")
        ("train-tokenizer", po::bool_switch(&o.trainTokenizer), "train a SentencePiece model on a sample of the input first")
        ("vocab", po::value<std::uint32_t>(&o.vocabSize)->default_value(o.vocabSize), "with --train-tokenizer: vocabulary size")
        ("sample-mb", po::value<std::uint64_t>()->default_value(64), "with --train-tokenizer: MB of text to train on")
        ("token-bits", po::value<int>(&o.tokenBits)->default_value(0), "16 or 32; 0 chooses 16 when the vocabulary fits")
        ("shard-tokens", po::value<std::uint64_t>(&o.shardTokens)->default_value(o.shardTokens), "a shard is closed once it holds this many tokens (documents are never split)")
        ("split-mb", po::value<std::uint64_t>()->default_value(64), "with --format jsonl or tokens: ranks share big files in pieces of this many MB")
        ("overwrite", po::bool_switch(&o.overwrite), "replace an existing source (atomically, at the end)")
        ("strict", po::bool_switch(&o.strict), "make every skipped record (empty, invalid UTF-8, bad JSON) an error")
        ("quiet", "no progress lines");
    po::positional_options_description positional;
    po::variables_map values;
    if (!parseCommandLine(argc, argv, "[mpirun -n N] kiln prep --source NAME --input FILE|DIR ... [options]", options,
                          positional, values))
        return 0;
    o.format = data::parseInputFormat(format);
    o.tokenizerSampleBytes = values["sample-mb"].as<std::uint64_t>() << 20;
    o.splitBytes = values["split-mb"].as<std::uint64_t>() << 20;
    o.progress = values.count("quiet") == 0;

    comm::MpiSession mpi(&argc, &argv);
    comm::World world(0);
    log::info("kiln prep: source '{}' into {}/{} on {} rank{}, tokenizer {}", o.source, o.outDir, o.source, world.size(),
              world.size() == 1 ? "" : "s", o.tokenizer);
    const auto s = data::prepareSource(world.control(), o);
    log::info("kiln prep: {} documents, {} tokens in {} shard{} from {:.1f} MB in {:.2f} s ({:.1f} MB/s, {:.2f} M tokens/s)",
              s.documents, s.tokens, s.shards, s.shards == 1 ? "" : "s", s.inputBytes / 1e6, s.seconds,
              s.inputBytes / 1e6 / s.seconds, s.tokens / 1e6 / s.seconds);
    if (!s.skipped.empty()) log::info("{}", data::describeSkipped(s.skipped));
    log::info("  tokenizer {}; verify with: kiln inspect {}/{}", s.tokenizerId, o.outDir, o.source);
    return 0;
}

}  // namespace kiln::apps
