#include "kiln/data/source_index.hpp"

#include "kiln/base/error.hpp"
#include "kiln/io/atomic_file.hpp"
#include "kiln/io/hdf5.hpp"

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
        h5::Handle file(KILN_H5(H5Fcreate(context.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), context));
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
        h5::writeRecords(file, "n_docs", H5T_STD_U64LE, docs, context);
        h5::writeRecords(file, "n_tokens", H5T_STD_U64LE, tokens, context);
        h5::writeRecords(file, "tokens_crc32", H5T_STD_U32LE, shards.tokensCrcs(), context);
        h5::writeRecords(file, "offsets_crc32", H5T_STD_U32LE, shards.offsetsCrcs(), context);
        KILN_H5(H5Fflush(file, H5F_SCOPE_GLOBAL), context);
    }
    io::commitTemporary(temporary, path);
}

ShardTable readShardIndex(const std::filesystem::path& path) {
    h5::LibraryLock lock(h5::libraryMutex());
    h5::quietErrors();
    const std::string context = path.string();
    h5::Handle file(H5Fopen(context.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
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
    const auto docs = h5::readRecords<std::uint64_t>(file, "n_docs", H5T_NATIVE_UINT64, context);
    const auto tokens = h5::readRecords<std::uint64_t>(file, "n_tokens", H5T_NATIVE_UINT64, context);
    auto tokensCrc = h5::readRecords<std::uint32_t>(file, "tokens_crc32", H5T_NATIVE_UINT32, context);
    auto offsetsCrc = h5::readRecords<std::uint32_t>(file, "offsets_crc32", H5T_NATIVE_UINT32, context);
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
