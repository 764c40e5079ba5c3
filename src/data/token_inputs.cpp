#include "kiln/data/token_inputs.hpp"

#include "input_file.hpp"
#include "kiln/base/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace fs = std::filesystem;

namespace kiln::data {
namespace {

struct IdType {
    int bytes = 2;
    bool isSigned = false;
    std::string name = "uint16";
};

using File = detail::InputFile;

std::int64_t idAt(const unsigned char* p, const IdType& t) {
    std::uint64_t v = detail::littleEndian(p, t.bytes);
    if (t.isSigned && t.bytes < 8 && (v >> (8 * t.bytes - 1)) & 1) v |= ~std::uint64_t{0} << (8 * t.bytes);
    return static_cast<std::int64_t>(v);
}

bool endsWith(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Megatron-LM's MMIDIDX index: magic, version 1, dtype code, sequence count,
// document count; then the sequences' lengths (int32) and byte offsets into
// the .bin (int64), and the document boundaries (int64 sequence indices, from 0).
struct MegatronIndex {
    IdType type;
    std::vector<std::int32_t> lengths;
    std::vector<std::int64_t> pointers, documents;
    std::uint64_t documentCount() const { return documents.empty() ? 0 : documents.size() - 1; }
};

MegatronIndex readMegatronIndex(const std::string& path) {
    const File file(path);
    char magic[9];
    file.mustRead(0, magic, 9, "the magic number");
    if (std::memcmp(magic, "MMIDIDX\0\0", 9) != 0)
        throw InputError(fmt::format("input '{}': not a Megatron-LM index (its magic number is not MMIDIDX)", path),
                         ErrorScope::ThisRank);
    std::uint64_t version = 0, sequences = 0, documents = 0;
    std::uint8_t code = 0;
    file.mustRead(9, &version, 8, "the version");
    if (version != 1)
        throw InputError(fmt::format("input '{}': Megatron-LM index version {}; kiln reads version 1", path, version),
                         ErrorScope::ThisRank);
    file.mustRead(17, &code, 1, "the dtype code");
    file.mustRead(18, &sequences, 8, "the sequence count");
    file.mustRead(26, &documents, 8, "the document count");
    MegatronIndex index;
    switch (code) {
        case 1: index.type = {1, false, "uint8"}; break;
        case 2: index.type = {1, true, "int8"}; break;
        case 3: index.type = {2, true, "int16"}; break;
        case 4: index.type = {4, true, "int32"}; break;
        case 5: index.type = {8, true, "int64"}; break;
        case 8: index.type = {2, false, "uint16"}; break;
        default:
            throw InputError(fmt::format("input '{}': dtype code {} is not an integer type (1-5 or 8); token ids are "
                                         "integers",
                                         path, code),
                             ErrorScope::ThisRank);
    }
    const std::uint64_t expected = 34 + sequences * 12 + documents * 8;
    if (fs::file_size(path) != expected)
        throw InputError(fmt::format("input '{}': {} bytes, but {} sequences and {} document boundaries take {}", path,
                                     fs::file_size(path), sequences, documents, expected),
                         ErrorScope::ThisRank);
    index.lengths.resize(sequences);
    index.pointers.resize(sequences);
    index.documents.resize(documents);
    file.mustRead(34, index.lengths.data(), sequences * 4, "the sequence lengths");
    file.mustRead(34 + sequences * 4, index.pointers.data(), sequences * 8, "the sequence pointers");
    file.mustRead(34 + sequences * 12, index.documents.data(), documents * 8, "the document boundaries");
    for (std::size_t d = 0; d < index.documents.size(); ++d) {
        const bool ordered = d == 0 ? index.documents[0] == 0 : index.documents[d] >= index.documents[d - 1];
        if (!ordered || index.documents[d] > static_cast<std::int64_t>(sequences))
            throw InputError(fmt::format("input '{}': document boundary {} is {}: boundaries start at 0 and rise to the "
                                         "sequence count {}",
                                         path, d, index.documents[d], sequences),
                             ErrorScope::ThisRank);
    }
    return index;
}

std::string binOf(const std::string& idx) { return idx.substr(0, idx.size() - 4) + ".bin"; }

// A flat file of ids: where they start, their type and count.
struct FlatLayout {
    IdType type;
    std::uint64_t offset = 0, count = 0;
};

const std::vector<IdType>& rawTypes() {
    static const std::vector<IdType> types = {{1, false, "uint8"},  {2, false, "uint16"}, {2, true, "int16"},
                                              {4, false, "uint32"}, {4, true, "int32"},   {8, true, "int64"}};
    return types;
}

IdType parseTokenType(const std::string& name) {
    for (const auto& type : rawTypes())
        if (type.name == name) return type;
    throw InputError(fmt::format("--token-dtype {}: expected uint8, uint16, int16, uint32, int32 or int64 (the ids' "
                                 "little-endian integer type)",
                                 name));
}

// `rawType` (empty: none) is the id type of a file with no header of its own.
FlatLayout flatLayout(const std::string& path, const std::string& rawType) {
    const File file(path);
    const std::uint64_t size = fs::file_size(path);
    unsigned char head[10] = {};
    const std::size_t got = file.readAt(0, head, sizeof head);
    FlatLayout layout;
    if (got >= 10 && std::memcmp(head, "\x93NUMPY", 6) == 0) {
        const int major = head[6];
        std::uint32_t headerLength = 0;
        std::uint64_t at = 0;
        if (major == 1) {
            headerLength = head[8] | (head[9] << 8);
            at = 10;
        } else {
            unsigned char four[4];
            file.mustRead(8, four, 4, "the .npy header length");
            headerLength = four[0] | (four[1] << 8) | (four[2] << 16) | (std::uint32_t{four[3]} << 24);
            at = 12;
        }
        std::string header(headerLength, '\0');
        file.mustRead(at, header.data(), headerLength, "the .npy header");
        const auto field = [&](const std::string& key) {
            const auto k = header.find("'" + key + "'");
            if (k == std::string::npos) return std::string();
            const auto colon = header.find(':', k);
            auto from = header.find_first_not_of(" ", colon + 1);
            const auto to = header[from] == '(' ? header.find(')', from) + 1 : header.find_first_of(",}", from);
            return header.substr(from, to - from);
        };
        const std::string descr = field("descr"), shape = field("shape"), fortran = field("fortran_order");
        static const std::vector<std::pair<std::string, IdType>> types = {
            {"'|u1'", {1, false, "uint8"}}, {"'<u2'", {2, false, "uint16"}}, {"'<i2'", {2, true, "int16"}},
            {"'<u4'", {4, false, "uint32"}}, {"'<i4'", {4, true, "int32"}},  {"'<i8'", {8, true, "int64"}},
            {"'<u8'", {8, false, "uint64"}}};
        bool known = false;
        for (const auto& [code, type] : types)
            if (descr == code) {
                layout.type = type;
                known = true;
            }
        if (!known)
            throw InputError(fmt::format("input '{}': a .npy array of {}; token ids are little-endian integers (uint16, "
                                         "int32, ...)",
                                         path, descr),
                             ErrorScope::ThisRank);
        // One dimension: "(N,)"; a 2-D array of rows would hide document boundaries.
        if (shape.empty() || shape.front() != '(' || std::count(shape.begin(), shape.end(), ',') != 1 ||
            shape.find_first_not_of("0123456789", 1) != shape.find(','))
            throw InputError(fmt::format("input '{}': a .npy array of shape {}; kiln reads a flat (1-D) array of ids whose "
                                         "documents the EOS id separates",
                                         path, shape),
                             ErrorScope::ThisRank);
        (void)fortran;  // irrelevant in one dimension
        layout.offset = at + headerLength;
        layout.count = std::stoull(shape.substr(1));
    } else if (got >= 8 && idAt(head, {4, true, ""}) == 20240520) {
        // llm.c: 256 int32 of header (magic, version, token count), then the ids.
        const auto version = idAt(head + 4, {4, true, ""});
        if (version != 1 && version != 2)
            throw InputError(fmt::format("input '{}': llm.c token file version {}; kiln reads 1 (uint16) and 2 (uint32)",
                                         path, version),
                             ErrorScope::ThisRank);
        layout.type = version == 1 ? IdType{2, false, "uint16"} : IdType{4, false, "uint32"};
        unsigned char count[4];
        file.mustRead(8, count, 4, "the token count");
        layout.offset = 1024;
        layout.count = static_cast<std::uint64_t>(idAt(count, {4, false, ""}));
    } else if (!rawType.empty()) {
        layout.type = parseTokenType(rawType);
        if (size % static_cast<std::uint64_t>(layout.type.bytes) != 0)
            throw InputError(fmt::format("input '{}': {} bytes is not a whole number of {} ids ({} bytes each): not a "
                                         "headerless file of {} (--token-dtype), or cut off",
                                         path, size, rawType, layout.type.bytes, rawType),
                             ErrorScope::ThisRank);
        layout.count = size / static_cast<std::uint64_t>(layout.type.bytes);
    } else {
        throw InputError(fmt::format("input '{}': not a pre-tokenized file kiln knows: expected a Megatron-LM PREFIX.idx "
                                     "(with PREFIX.bin), a .npy array of ids, an llm.c .bin (magic 20240520), or, with "
                                     "--token-dtype, a headerless file of ids (nanoGPT's train.bin: --token-dtype uint16)",
                                     path),
                         ErrorScope::ThisRank);
    }
    if (layout.offset + layout.count * static_cast<std::uint64_t>(layout.type.bytes) > size)
        throw InputError(fmt::format("input '{}': cut off: its header promises {} ids of {} ({} bytes from byte {}), the "
                                     "file has {} bytes",
                                     path, layout.count, layout.type.name, layout.count * layout.type.bytes,
                                     layout.offset, size),
                         ErrorScope::ThisRank);
    return layout;
}

}  // namespace

std::vector<WorkUnit> planTokenUnits(const std::vector<std::string>& files, std::uint64_t splitBytes,
                                     const std::string& rawType) try {
    if (!rawType.empty()) parseTokenType(rawType);
    std::vector<WorkUnit> units;
    for (const auto& file : files) {
        if (endsWith(file, ".bin") && fs::exists(file.substr(0, file.size() - 4) + ".idx")) continue;  // its .idx's
        if (!endsWith(file, ".idx")) {
            // Refused here, on every rank alike, if it is none; else cut into runs of ids that the ranks share.
            const auto flat = flatLayout(file, rawType);
            const auto width = static_cast<std::uint64_t>(flat.type.bytes);
            const std::uint64_t per = splitBytes == 0 ? std::max<std::uint64_t>(flat.count, 1)
                                                      : std::max<std::uint64_t>(splitBytes / width, 1);
            std::uint64_t begin = 0;
            do {
                const std::uint64_t end = std::min(flat.count, begin + per);
                units.push_back({file, begin, end, Compression::None, (end - begin) * width});
                begin = end;
            } while (begin < flat.count);
            continue;
        }
        if (!fs::exists(binOf(file)))
            throw InputError(fmt::format("input '{}': a Megatron-LM index without its data file {}", file, binOf(file)));
        const auto index = readMegatronIndex(file);
        std::uint64_t begin = 0, bytes = 0;
        for (std::uint64_t d = 0; d < index.documentCount(); ++d) {
            if (bytes >= splitBytes && splitBytes > 0) {
                units.push_back({file, begin, d, Compression::None, bytes});
                begin = d;
                bytes = 0;
            }
            for (auto s = index.documents[d]; s < index.documents[d + 1]; ++s)
                bytes += static_cast<std::uint64_t>(index.lengths[static_cast<std::size_t>(s)]) * index.type.bytes;
        }
        if (begin < index.documentCount()) units.push_back({file, begin, index.documentCount(), Compression::None, bytes});
    }
    return units;
} catch (const InputError& e) {
    throw InputError(e.what());  // every rank plans alike: one of them reports it
}

struct TokenDocumentReader::Source {
    WorkUnit unit;
    std::uint32_t eos = 0, vocab = 0;
    bool megatron = false;
    MegatronIndex index;
    FlatLayout flat;
    std::unique_ptr<File> file;
    std::uint64_t next = 0;  // Megatron: the next document; flat: the next id
    std::uint64_t consumed = 0;
    std::string where;
    std::vector<unsigned char> bytes;
    std::uint64_t blockBegin = 0, blockEnd = 0;  // the flat file's ids now in `bytes`

    void check(std::int64_t id, const std::string& at) const {
        if (id < 0 || id >= static_cast<std::int64_t>(vocab))
            throw InputError(fmt::format("{}: token id {} is outside the vocabulary of {} ids (0 to {}); nothing was "
                                         "written",
                                         at, id, vocab, vocab - 1),
                             ErrorScope::ThisRank);
    }

    // The flat file's id at `k` (< flat.count), read a block at a time.
    std::int64_t flatId(std::uint64_t k) {
        constexpr std::uint64_t kBlock = 1 << 18;
        const auto width = static_cast<std::uint64_t>(flat.type.bytes);
        if (k < blockBegin || k >= blockEnd) {
            blockBegin = k;
            blockEnd = std::min(flat.count, k + kBlock);
            bytes.resize(static_cast<std::size_t>((blockEnd - blockBegin) * width));
            file->mustRead(flat.offset + blockBegin * width, bytes.data(), bytes.size(), "ids");
        }
        return idAt(bytes.data() + (k - blockBegin) * width, flat.type);
    }
};

TokenDocumentReader::TokenDocumentReader(const WorkUnit& unit, std::uint32_t eos, std::uint32_t vocabSize,
                                         const std::string& rawType)
    : source_(std::make_unique<Source>()) {
    auto& s = *source_;
    s.unit = unit;
    s.eos = eos;
    s.vocab = vocabSize;
    s.megatron = endsWith(unit.path, ".idx");
    s.next = unit.begin;
    if (s.megatron) {
        s.index = readMegatronIndex(unit.path);
        s.file = std::make_unique<File>(binOf(unit.path));
    } else {
        s.flat = flatLayout(unit.path, rawType);
        s.file = std::make_unique<File>(unit.path);
        // A unit owns the documents that start in it: the first after a separator at or past begin - 1.
        if (unit.begin > 0) {
            s.next = unit.begin - 1;
            while (s.next < s.flat.count && static_cast<std::uint32_t>(s.flatId(s.next)) != eos) ++s.next;
            ++s.next;
        }
    }
}

TokenDocumentReader::~TokenDocumentReader() = default;

std::string TokenDocumentReader::location() const { return source_->where; }
std::uint64_t TokenDocumentReader::consumed() const { return source_->consumed; }

bool TokenDocumentReader::next(std::vector<std::uint32_t>& document) {
    auto& s = *source_;
    document.clear();
    if (s.megatron) {
        if (s.next >= s.unit.end) return false;
        const auto d = s.next++;
        s.where = fmt::format("{}: document {}", binOf(s.unit.path), d);
        const auto& t = s.index.type;
        for (auto q = s.index.documents[d]; q < s.index.documents[d + 1]; ++q) {
            const auto k = static_cast<std::size_t>(q);
            const auto n = static_cast<std::size_t>(s.index.lengths[k]) * static_cast<std::size_t>(t.bytes);
            s.bytes.resize(n);
            s.file->mustRead(static_cast<std::uint64_t>(s.index.pointers[k]), s.bytes.data(), n, "a sequence's ids");
            for (std::size_t i = 0; i < n; i += static_cast<std::size_t>(t.bytes)) {
                const auto id = idAt(s.bytes.data() + i, t);
                s.check(id, fmt::format("{} (sequence {}, id {})", s.where, q, i / t.bytes));
                document.push_back(static_cast<std::uint32_t>(id));
            }
            s.consumed += n;
        }
        return true;  // with its trailing EOD, if it has one: prep drops it (the loader puts it back)
    }
    // Flat: the ids up to the next EOS, the last document past the unit's end if it runs over; empty documents
    // (a leading separator, two in a row) are not documents.
    const auto end = std::min(s.unit.end, s.flat.count);
    while (s.next < end && static_cast<std::uint32_t>(s.flatId(s.next)) == s.eos) ++s.next;
    if (s.next >= end) return false;
    const std::uint64_t first = s.next;
    while (s.next < s.flat.count) {
        const auto id = s.flatId(s.next);
        s.check(id, fmt::format("{}: id {}", s.unit.path, s.next));
        ++s.next;
        if (static_cast<std::uint32_t>(id) == s.eos) break;
        document.push_back(static_cast<std::uint32_t>(id));
    }
    s.consumed = std::min(s.next - s.unit.begin, s.unit.end - s.unit.begin) * static_cast<std::uint64_t>(s.flat.type.bytes);
    s.where = fmt::format("{}: ids [{}, {})", s.unit.path, first, s.next);
    return true;
}

}  // namespace kiln::data
