// Flat integer rows for state that travels in one MPI message (a layout, a
// run's counters): values in order, vectors with their length first, doubles
// by their bits. The reader checks that it stays within the row.
#pragma once

#include "kiln/base/error.hpp"

#include <cstdint>
#include <cstring>
#include <vector>

namespace kiln {

class RowWriter {
public:
    template <typename T>
    void put(T value) {
        row_.push_back(static_cast<std::int64_t>(value));
    }
    void putReal(double value) {
        std::int64_t bits = 0;
        std::memcpy(&bits, &value, sizeof bits);
        row_.push_back(bits);
    }
    template <typename T>
    void putAll(const std::vector<T>& values) {
        put(values.size());
        for (const auto& v : values) put(v);
    }
    std::vector<std::int64_t>& row() { return row_; }

private:
    std::vector<std::int64_t> row_;
};

class RowReader {
public:
    explicit RowReader(const std::vector<std::int64_t>& row) : row_(row) {}
    template <typename T>
    T get() {
        if (next_ >= row_.size()) throw Error("a packed row ended early", ErrorScope::AllRanks);
        return static_cast<T>(row_[next_++]);
    }
    double getReal() {
        const auto bits = get<std::int64_t>();
        double value = 0;
        std::memcpy(&value, &bits, sizeof value);
        return value;
    }
    template <typename T>
    std::vector<T> getAll() {
        std::vector<T> values(get<std::size_t>());
        for (auto& v : values) v = get<T>();
        return values;
    }

private:
    const std::vector<std::int64_t>& row_;
    std::size_t next_ = 0;
};

}  // namespace kiln
