#include "kiln/train/checkpoint_contents.hpp"

#include "checkpoint_format.hpp"
#include "kiln/base/error.hpp"
#include "kiln/io/hdf5.hpp"
#include "kiln/io/hdf5_array.hpp"
#include "kiln/io/parallel_file.hpp"
#include "kiln/train/checkpoint.hpp"

#include <fmt/format.h>

namespace kiln::train {

namespace h5 = io::h5;

namespace {

// Reads a float32 dataset whole; "" or why it cannot be read.
std::string readAll(hid_t group, const std::string& name, std::vector<float>& values) {
    const h5::Handle set = h5::tryOpenDataset(group, name);
    if (!set.valid()) return fmt::format("tensor {} is missing", name);
    std::uint64_t n = 1;
    for (auto d : h5::extent(set, name)) n *= d;
    values.resize(static_cast<std::size_t>(n));
    if (n > 0 && !h5::tryReadAll(set, h5::memoryType<float>(), values.data()))
        return fmt::format("tensor {} does not read back (a checksum mismatch or a truncated file)", name);
    return "";
}

std::string partOf(hid_t file, const std::string& group) { return h5::externalTarget(file, group); }

}  // namespace

std::size_t CheckpointContents::problems() const {
    std::size_t n = 0;
    for (const auto& l : layers) n += !l.problem.empty();
    return n;
}

CheckpointContents readContents(const std::filesystem::path& path, bool verify) {
    CheckpointContents c;
    c.path = path;
    c.verified = verify;
    const std::string ctx = path.string();
    h5::Handle file = format::openCheckpoint(ctx, c.formatVersion);
    h5::LibraryLock lock(h5::libraryMutex());
    c.step = h5::readUintAttribute(file, "step", ctx);
    c.optimizerSteps = h5::readUintAttribute(file, "optimizer_steps", ctx);
    c.writers = h5::hasAttribute(file, "writers") ? h5::readUintAttribute(file, "writers", ctx) : 1;
    c.model = format::readShape(file, ctx);
    c.hasLoader = h5::exists(file, "loader");
    for (std::uint32_t l = 0; l < c.model.numLayers(); ++l) {
        CheckpointContents::Layer layer;
        layer.index = l;
        const std::string group = format::layerGroup(l);
        layer.file = partOf(file, group);
        h5::Handle g = h5::exists(file, "layers") ? h5::tryOpenGroup(file, group) : h5::Handle();
        if (!g.valid()) {
            layer.problem = layer.file.empty() ? "missing" : fmt::format("its part {} is missing or unreadable", layer.file);
            c.layers.push_back(layer);
            continue;
        }
        for (const char* kind : {"params", "adam_m", "adam_v"}) {
            const h5::Handle sub = h5::tryOpenGroup(g, kind);
            if (!sub.valid()) {
                layer.problem = fmt::format("group {} is missing", kind);
                break;
            }
            for (const auto& [name, dims] : c.model.parameterShapes(l)) {
                std::uint64_t n = 1;
                for (auto d : dims) n *= static_cast<std::uint64_t>(d);
                ++layer.tensors;
                layer.bytes += 4 * n;
                if (!verify || !layer.problem.empty()) continue;
                std::vector<float> values;
                if (auto why = readAll(sub, name, values); !why.empty()) layer.problem = fmt::format("{}/{}", kind, why);
            }
        }
        c.layers.push_back(layer);
    }
    return c;
}

std::vector<std::vector<float>> readWeights(const std::filesystem::path& path, const arch::ModelConfig& config,
                                            std::uint32_t layer) {
    const std::string ctx = path.string();
    h5::Handle file = io::openForReading(ctx, "checkpoint");
    h5::LibraryLock lock(h5::libraryMutex());
    h5::Handle params = h5::openGroup(file, format::layerGroup(layer) + "/params", ctx);
    std::vector<std::vector<float>> out;
    for (const auto& [name, dims] : config.parameterShapes(layer)) {
        out.emplace_back();
        if (const auto why = readAll(params, name, out.back()); !why.empty())
            throw CheckpointUnreadable(fmt::format("{}: layer {}: {}", ctx, layer, why));
    }
    return out;
}

}  // namespace kiln::train
