#include "kiln/io/event_file.hpp"

#include "kiln/base/error.hpp"

#include <boost/crc.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

namespace kiln::io {
namespace {

// Protobuf's wire format, as far as Event, Summary, SessionLog and a string TensorProto need it.
void varint(std::string& out, std::uint64_t v) {
    while (v >= 0x80) {
        out.push_back(char((v & 0x7f) | 0x80));
        v >>= 7;
    }
    out.push_back(char(v));
}
void key(std::string& out, int field, int wire) { varint(out, std::uint64_t(field) << 3 | std::uint64_t(wire)); }
void bytes(std::string& out, int field, const std::string& data) {
    key(out, field, 2);
    varint(out, data.size());
    out += data;
}
template <typename T>
void little(std::string& out, T value) {
    char raw[sizeof(T)];
    std::memcpy(raw, &value, sizeof(T));  // x86 and ARM: little-endian, as protobuf's fixed fields
    out.append(raw, sizeof(T));
}

std::string eventHead(std::int64_t step, double wallTime) {
    std::string e;
    key(e, 1, 1);  // wall_time, double
    little(e, wallTime);
    key(e, 2, 0);  // step
    varint(e, std::uint64_t(step));
    return e;
}

std::string summaryOf(const std::string& value) {
    std::string summary;
    bytes(summary, 1, value);  // Summary.value
    return summary;
}

std::atomic<int> filesMade{0};

}  // namespace

std::uint32_t maskedCrc32c(const void* data, std::size_t size) {
    boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc;  // Castagnoli
    crc.process_bytes(data, size);
    const std::uint32_t c = crc.checksum();
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

EventFile::EventFile(const std::string& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    // Names sort by time: TensorBoard reads a directory's files in name order.
    path_ = (std::filesystem::path(dir) /
             fmt::format("events.out.tfevents.{:010d}.{}.{}.{}",
                         std::chrono::duration_cast<std::chrono::seconds>(now).count(), host, getpid(), filesMade++))
                .string();
    file_ = ec ? nullptr : std::fopen(path_.c_str(), "wb");
    if (!file_)
        throw InputError(fmt::format("{}: cannot write TensorBoard's event files there ({}); set tensorboard.dir to a "
                                     "directory this job can write, or tensorboard.enabled = false",
                                     dir, ec ? ec.message() : std::strerror(errno)));
    std::string e = eventHead(0, std::chrono::duration<double>(now).count());
    bytes(e, 3, "brain.Event:2");  // file_version
    record(e);
    flush();
}

EventFile::~EventFile() {
    if (file_) std::fclose(file_);
}

void EventFile::record(const std::string& event) {
    std::string head;
    little(head, std::uint64_t(event.size()));
    const std::uint32_t lengthCrc = maskedCrc32c(head.data(), head.size());
    little(head, lengthCrc);
    std::string tail;
    little(tail, maskedCrc32c(event.data(), event.size()));
    std::fwrite(head.data(), 1, head.size(), file_);
    std::fwrite(event.data(), 1, event.size(), file_);
    std::fwrite(tail.data(), 1, tail.size(), file_);
}

void EventFile::scalar(const std::string& tag, std::int64_t step, double value, double wallTime) {
    std::string v;
    bytes(v, 1, tag);
    key(v, 2, 5);  // simple_value, float
    little(v, float(value));
    std::string e = eventHead(step, wallTime);
    bytes(e, 5, summaryOf(v));
    record(e);
}

void EventFile::text(const std::string& tag, std::int64_t step, const std::string& text, double wallTime) {
    std::string tensor;
    key(tensor, 1, 0);  // dtype: DT_STRING
    varint(tensor, 7);
    bytes(tensor, 2, "");  // tensor_shape: a scalar
    bytes(tensor, 8, text);  // string_val
    std::string plugin, metadata, v;
    bytes(plugin, 1, "text");      // PluginData.plugin_name
    bytes(metadata, 1, plugin);    // SummaryMetadata.plugin_data
    bytes(v, 1, tag);
    bytes(v, 8, tensor);
    bytes(v, 9, metadata);
    std::string e = eventHead(step, wallTime);
    bytes(e, 5, summaryOf(v));
    record(e);
}

void EventFile::sessionStart(std::int64_t step, double wallTime) {
    std::string log;
    key(log, 1, 0);  // SessionLog.status: START
    varint(log, 1);
    std::string e = eventHead(step, wallTime);
    bytes(e, 6, log);
    record(e);
}

void EventFile::flush() {
    if (file_) std::fflush(file_);
}

}  // namespace kiln::io
