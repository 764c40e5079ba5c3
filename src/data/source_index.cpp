#include "kiln/data/source_index.hpp"

#include "kiln/base/error.hpp"
#include "kiln/io/atomic_file.hpp"
#include "kiln/io/hdf5.hpp"
#include "kiln/io/hdf5_array.hpp"

#include <fmt/format.h>

namespace kiln::data {

namespace h5 = io::h5;

void writeShardIndex(const std::filesystem::path& path, const std::string& source, const ShardTable& shards) {
    if (!shards.namesImplied())
        throw std::logic_error(fmt::format("{}: the index holds no names; its shards must be named shard-NNNNN.h5", path.string()));
    h5::LibraryLock lock(h5::libraryMutex());
    h5::quietErrors();
    const auto temporary = io::temporarySibling(path);
    const std::string context = temporary.string();
    {
        h5::Handle file = h5::createFile(context, context);
        h5::writeAttribute(file, "format", std::string(kIndexFormat));
        h5::writeAttribute(file, "format_version", kIndexVersion);
        h5::writeAttribute(file, "source", source);
        h5::writeAttribute(file, "n_shards", std::uint64_t{shards.size()});
        h5::writeAttribute(file, "n_docs", shards.totalDocs());
        h5::writeAttribute(file, "n_tokens", shards.totalTokens());
        std::vector<std::uint64_t> docs(shards.size()), tokens(shards.size());
        for (std::size_t i = 0; i < shards.size(); ++i) {
            docs[i] = shards.numDocs(i);
            tokens[i] = shards.numTokens(i);
        }
        h5::writeArray(file, "n_docs", {docs.size()}, docs, context);
        h5::writeArray(file, "n_tokens", {tokens.size()}, tokens, context);
        h5::writeArray(file, "tokens_crc32", {shards.size()}, shards.tokensCrcs(), context);
        h5::writeArray(file, "offsets_crc32", {shards.size()}, shards.offsetsCrcs(), context);
        h5::flush(file, context);
    }
    io::commitTemporary(temporary, path);
}

ShardTable readShardIndex(const std::filesystem::path& path) {
    h5::LibraryLock lock(h5::libraryMutex());
    h5::quietErrors();
    const std::string context = path.string();
    h5::Handle file = h5::openReadOnly(context);
    if (!file.valid())
        throw InputError(fmt::format("{}: cannot open the source's shard index (missing, truncated or not HDF5); prepare "
                                     "the source again with kiln prep",
                                     context));
    const std::string format = h5::hasAttribute(file, "format") ? h5::readStringAttribute(file, "format", context) : "";
    if (format != kIndexFormat)
        throw InputError(fmt::format("{}: not a kiln source index (format '{}', expected '{}')", context, format, kIndexFormat));
    if (const auto version = h5::readIntAttribute(file, "format_version", context); version != kIndexVersion)
        throw InputError(fmt::format("{}: index version {}, this kiln reads version {}", context, version, kIndexVersion));
    // The native types convert from the stored little-endian ones on any host.
    const auto column = [&](const char* name) { return h5::openDataset(file, name, context); };
    const auto docs = h5::readArray<std::uint64_t>(column("n_docs"), context);
    const auto tokens = h5::readArray<std::uint64_t>(column("n_tokens"), context);
    auto tokensCrc = h5::readArray<std::uint32_t>(column("tokens_crc32"), context);
    auto offsetsCrc = h5::readArray<std::uint32_t>(column("offsets_crc32"), context);
    const std::uint64_t n = h5::readUintAttribute(file, "n_shards", context);
    if (docs.size() != n || tokens.size() != n || tokensCrc.size() != n || offsetsCrc.size() != n)
        throw InputError(fmt::format("{}: the columns hold {}, {}, {} and {} rows but n_shards is {}: the index is corrupt; "
                                     "prepare the source again",
                                     context, docs.size(), tokens.size(), tokensCrc.size(), offsetsCrc.size(), n));
    ShardTable table = ShardTable::fromColumns(docs, tokens, std::move(tokensCrc), std::move(offsetsCrc));
    if (table.totalDocs() != h5::readUintAttribute(file, "n_docs", context) ||
        table.totalTokens() != h5::readUintAttribute(file, "n_tokens", context))
        throw InputError(fmt::format("{}: totals disagree with the sum over its shards: the index is corrupt", context));
    return table;
}

}  // namespace kiln::data
