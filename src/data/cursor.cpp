#include "kiln/data/cursor.hpp"

#include <stdexcept>

namespace kiln::data {
namespace {
constexpr std::size_t kHeader = 5;     // step, samples, segmentStart, weightsHash, number of sources
constexpr std::size_t kPerSource = 7;  // the integers of SourceCursor
}  // namespace

const SourceCursor* Cursor::find(const std::string& name) const {
    for (const auto& s : sources)
        if (s.name == name) return &s;
    return nullptr;
}

std::vector<std::uint64_t> cursorToRow(const Cursor& c) {
    std::vector<std::uint64_t> row{c.step, c.samples, c.segmentStart, c.weightsHash, c.sources.size()};
    for (const auto& s : c.sources)
        row.insert(row.end(), {s.epoch, s.docPos, s.tokenOffset, s.samples, s.segmentBase, s.docsDone, s.tokensDropped});
    return row;
}

Cursor cursorFromRow(const std::vector<std::uint64_t>& row, const std::vector<std::string>& names) {
    if (row.size() < kHeader || row[4] != names.size() || row.size() != kHeader + kPerSource * names.size())
        throw std::invalid_argument("cursor row does not match its source names");
    Cursor c{row[0], row[1], row[2], row[3], {}};
    for (std::size_t i = 0; i < names.size(); ++i) {
        const auto* r = &row[kHeader + kPerSource * i];
        c.sources.push_back({names[i], r[0], r[1], r[2], r[3], r[4], r[5], r[6]});
    }
    return c;
}

}  // namespace kiln::data
