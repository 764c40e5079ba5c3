// A table's record described once: each field's name and member, from which come the HDF5 compound type, the
// column names, and the reading and writing of whole tables. Neither HighFive nor the HDF5 C++ API is there to
// use: Debian 12 packages no HighFive, and its parallel HDF5 is built without the C++ API.
//
//     struct Row { std::uint64_t step; double loss; char note[32]; };
//     const h5::Record<Row> row = h5::Record<Row>().field("step", &Row::step).field("loss", &Row::loss)
//                                                  .field("note", &Row::note);
//     h5::writeRecords(file, "rows", row, rows, path);
//
// A field's type on disk is its native type here (a fixed-length, NUL-padded string for a char array); a
// file's existing table is read by member name, as HDF5 converts compound types.
#pragma once

#include "kiln/io/hdf5.hpp"
#include "kiln/io/hdf5_array.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::io::h5 {

template <typename Row>
class Record {
public:
    // A numeric field.
    template <typename T>
    Record& field(const char* name, T Row::*member) {
        fields_.push_back({name, offsetOf(member), 0, memoryType<T>});
        return *this;
    }
    // A text field of N bytes, NUL-padded.
    template <std::size_t N>
    Record& field(const char* name, char (Row::*member)[N]) {
        fields_.push_back({name, offsetOf(member), N, nullptr});
        return *this;
    }

    // The compound type, built anew (an HDF5 identifier is not to be kept across the library's lifetime).
    Handle type(const std::string& context) const {
        Handle compound(KILN_H5(H5Tcreate(H5T_COMPOUND, sizeof(Row)), context));
        for (const auto& f : fields_) {
            if (f.textBytes > 0) {
                const Handle text = fixedString(f.textBytes, context);
                KILN_H5(H5Tinsert(compound, f.name.c_str(), f.offset, text), context);
            } else {
                KILN_H5(H5Tinsert(compound, f.name.c_str(), f.offset, f.native()), context);
            }
        }
        return compound;
    }

    std::vector<std::string> names() const {
        std::vector<std::string> out;
        for (const auto& f : fields_) out.push_back(f.name);
        return out;
    }

private:
    struct Field {
        std::string name;
        std::size_t offset;
        std::size_t textBytes;  // > 0: a fixed-length string
        hid_t (*native)();
    };
    template <typename Member>
    static std::size_t offsetOf(Member Row::*member) {
        static const Row probe{};
        return static_cast<std::size_t>(reinterpret_cast<const char*>(&(probe.*member)) -
                                        reinterpret_cast<const char*>(&probe));
    }

    std::vector<Field> fields_;
};

template <typename Row>
Handle writeRecords(hid_t where, const char* name, const Record<Row>& record, const std::vector<Row>& rows,
                    const std::string& context) {
    return writeRecords(where, name, record.type(context), rows, context);
}

template <typename Row>
std::vector<Row> readRecords(hid_t where, const char* name, const Record<Row>& record, const std::string& context,
                             bool optional = false) {
    return readRecords<Row>(where, name, record.type(context), context, optional);
}

}  // namespace kiln::io::h5
