// TensorBoard's event files, written by kiln itself: a file of records (each
// a length, the data, and their masked CRC-32Cs), each record one Event
// message in protobuf's wire format. Only what kiln writes is encoded:
// scalars, text, and the session-start marker that makes TensorBoard drop
// the steps a resumed run does again. A reader sees every record up to the
// last flush; a record cut by a crash is ignored by TensorBoard's reader.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace kiln::io {

class EventFile {
public:
    // Creates a new events.out.tfevents.<seconds>.<host>.<pid>.<n> in `dir` (made if missing) and writes
    // its version record. Throws an InputError naming the directory when it cannot be written.
    explicit EventFile(const std::string& dir);
    ~EventFile();
    EventFile(const EventFile&) = delete;
    EventFile& operator=(const EventFile&) = delete;

    void scalar(const std::string& tag, std::int64_t step, double value, double wallTime);
    // Markdown text, shown by TensorBoard's text tab.
    void text(const std::string& tag, std::int64_t step, const std::string& text, double wallTime);
    // A run (re)starts at `step`: TensorBoard drops what it holds at this step and after it.
    void sessionStart(std::int64_t step, double wallTime);
    void flush();
    const std::string& path() const { return path_; }

private:
    void record(const std::string& event);
    std::string path_;
    std::FILE* file_ = nullptr;
};

// The CRC-32C of `data`, masked as TensorBoard's records store it.
std::uint32_t maskedCrc32c(const void* data, std::size_t size);

}  // namespace kiln::io
