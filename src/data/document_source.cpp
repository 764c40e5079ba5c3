#include "kiln/data/document_source.hpp"

#include "kiln/base/error.hpp"
#include "kiln/data/tokenizer.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <sstream>

namespace fs = std::filesystem;

namespace kiln::data {

InputFormat parseInputFormat(const std::string& name) {
    if (name == "file") return InputFormat::FilePerDocument;
    if (name == "blocks") return InputFormat::Blocks;
    if (name == "jsonl") return InputFormat::JsonLines;
    throw InputError(fmt::format("--format {}: expected file (one document per file), blocks (blank-line separated) "
                                 "or jsonl (JSON Lines)",
                                 name));
}

std::vector<WorkUnit> planWorkUnits(const std::vector<std::string>& inputs, InputFormat format, std::uint64_t splitBytes) {
    std::vector<std::string> files;
    for (const auto& input : inputs) {
        std::error_code ec;
        if (fs::is_directory(input, ec)) {
            std::vector<std::string> found;
            for (const auto& entry : fs::recursive_directory_iterator(input))
                if (entry.is_regular_file()) found.push_back(entry.path().string());
            std::sort(found.begin(), found.end());
            if (found.empty()) throw InputError(fmt::format("input directory '{}' holds no files", input));
            files.insert(files.end(), found.begin(), found.end());
        } else if (fs::is_regular_file(input, ec)) {
            files.push_back(input);
        } else {
            throw InputError(fmt::format("input '{}': no such file or directory", input));
        }
    }
    if (files.empty()) throw InputError("no input files given (kiln prep --input FILE|DIR ...)");
    std::vector<WorkUnit> units;
    for (const auto& file : files) {
        const std::uint64_t size = fs::file_size(file);
        if (format != InputFormat::JsonLines || size <= splitBytes || splitBytes == 0) {
            units.push_back({file, 0, size});
            continue;
        }
        for (std::uint64_t at = 0; at < size; at += splitBytes) units.push_back({file, at, std::min(size, at + splitBytes)});
    }
    return units;
}

DocumentReader::DocumentReader(const WorkUnit& unit, InputFormat format, std::string jsonField)
    : unit_(unit), format_(format), jsonField_(std::move(jsonField)), in_(unit.path, std::ios::binary), position_(unit.begin) {
    if (!in_) throw InputError(fmt::format("input '{}': cannot open for reading", unit.path), ErrorScope::ThisRank);
    if (unit.begin > 0) {
        // Start at the first record that begins in this unit: the line after the
        // newline that precedes or sits at `begin - 1`. Line numbers are then
        // unknown without a scan; records name their byte offset instead.
        in_.seekg(static_cast<std::streamoff>(unit.begin - 1));
        std::string rest;
        std::getline(in_, rest);
        position_ = unit.begin - 1 + rest.size() + 1;
    }
}

std::string DocumentReader::location(const Record& record) const {
    if (format_ == InputFormat::FilePerDocument) return unit_.path;
    std::uint64_t line = record.line;
    if (line == 0) {
        std::ifstream in(unit_.path, std::ios::binary);
        std::vector<char> block(1 << 16);
        line = 1;
        for (std::uint64_t at = 0; at < record.offset;) {
            const auto want = static_cast<std::streamsize>(std::min<std::uint64_t>(block.size(), record.offset - at));
            in.read(block.data(), want);
            if (in.gcount() <= 0) break;
            line += static_cast<std::uint64_t>(std::count(block.data(), block.data() + in.gcount(), '\n'));
            at += static_cast<std::uint64_t>(in.gcount());
        }
    }
    return fmt::format("{}:{}", unit_.path, line);
}

bool DocumentReader::nextLine(std::string& line) {
    if (position_ >= unit_.end && format_ == InputFormat::JsonLines) return false;
    if (!std::getline(in_, line)) return false;
    position_ += line.size() + (in_.eof() ? 0 : 1);
    ++lineNo_;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return true;
}

bool DocumentReader::next(Record& record) {
    if (done_) return false;
    record = Record{};
    const auto mark = [&](std::uint64_t offset) {
        record.offset = offset;
        record.line = unit_.begin == 0 ? lineNo_ : 0;
    };
    switch (format_) {
        case InputFormat::FilePerDocument: {
            std::ostringstream text;
            text << in_.rdbuf();
            record.text = text.str();
            position_ = unit_.end;
            done_ = true;
            if (record.text.find_first_not_of(" \t\r\n") == std::string::npos) record.problem = "empty document";
            return true;
        }
        case InputFormat::Blocks: {
            const auto blank = [](const std::string& l) { return l.find_first_not_of(" \t") == std::string::npos; };
            std::string line;
            bool found = false;
            std::uint64_t lineStart = position_;
            while (!found) {
                lineStart = position_;
                if (!nextLine(line)) break;
                found = !blank(line);
            }
            if (!found) {
                done_ = true;
                return false;
            }
            mark(lineStart);
            record.text = line;
            while (nextLine(line) && !blank(line)) record.text += "\n" + line;
            return true;
        }
        case InputFormat::JsonLines: {
            const std::uint64_t lineStart = position_;
            std::string line;
            if (!nextLine(line)) {
                done_ = true;
                return false;
            }
            mark(lineStart);
            if (line.find_first_not_of(" \t") == std::string::npos) {
                record.problem = "empty line";
                return true;
            }
            if (!isValidUtf8(line)) {
                record.problem = "invalid UTF-8";
                return true;
            }
            const auto json = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
            if (json.is_discarded()) {
                record.problem = "not JSON";
            } else if (!json.is_object() || !json.contains(jsonField_)) {
                record.problem = fmt::format("no field '{}'", jsonField_);
            } else if (!json[jsonField_].is_string()) {
                record.problem = fmt::format("field '{}' is not a string", jsonField_);
            } else {
                record.text = json[jsonField_].get<std::string>();
                if (record.text.find_first_not_of(" \t\r\n") == std::string::npos) record.problem = "empty document";
            }
            return true;
        }
    }
    return false;
}

}  // namespace kiln::data
