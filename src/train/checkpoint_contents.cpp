#include "kiln/train/checkpoint_contents.hpp"

#include "checkpoint_format.hpp"
#include "kiln/base/error.hpp"
#include "kiln/io/hdf5.hpp"
#include "kiln/io/parallel_file.hpp"
#include "kiln/train/checkpoint.hpp"

#include <fmt/format.h>

namespace kiln::train {

namespace h5 = io::h5;

namespace {

// Reads a float32 dataset whole; "" or why it cannot be read.
std::string readAll(hid_t group, const std::string& name, std::vector<float>& values) {
    const hid_t set = H5Dopen2(group, name.c_str(), H5P_DEFAULT);
    if (set < 0) return fmt::format("tensor {} is missing", name);
    h5::Handle owner(set);
    h5::Handle space(H5Dget_space(set));
    const auto n = H5Sget_simple_extent_npoints(space);
    values.resize(static_cast<std::size_t>(std::max<hssize_t>(n, 0)));
    if (n > 0 && H5Dread(set, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) < 0)
        return fmt::format("tensor {} does not read back (a checksum mismatch or a truncated file)", name);
    return "";
}

std::string partOf(hid_t file, const std::string& group) {
    H5L_info_t info;
    if (H5Lget_info(file, group.c_str(), &info, H5P_DEFAULT) < 0 || info.type != H5L_TYPE_EXTERNAL) return "";
    std::vector<char> value(info.u.val_size);
    if (H5Lget_val(file, group.c_str(), value.data(), value.size(), H5P_DEFAULT) < 0) return "";
    const char* target = nullptr;
    const char* object = nullptr;
    unsigned flags = 0;
    if (H5Lunpack_elink_val(value.data(), value.size(), &flags, &target, &object) < 0) return "";
    return target;
}

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
    c.hasLoader = H5Lexists(file, "loader", H5P_DEFAULT) > 0;
    for (std::uint32_t l = 0; l < c.model.numLayers(); ++l) {
        CheckpointContents::Layer layer;
        layer.index = l;
        const std::string group = format::layerGroup(l);
        layer.file = partOf(file, group);
        const hid_t g = H5Lexists(file, "layers", H5P_DEFAULT) > 0 && H5Lexists(file, group.c_str(), H5P_DEFAULT) > 0
                            ? H5Gopen2(file, group.c_str(), H5P_DEFAULT)
                            : -1;
        if (g < 0) {
            layer.problem = layer.file.empty() ? "missing" : fmt::format("its part {} is missing or unreadable", layer.file);
            c.layers.push_back(layer);
            continue;
        }
        h5::Handle owner(g);
        for (const char* kind : {"params", "adam_m", "adam_v"}) {
            const hid_t sub = H5Gopen2(g, kind, H5P_DEFAULT);
            if (sub < 0) {
                layer.problem = fmt::format("group {} is missing", kind);
                break;
            }
            h5::Handle subOwner(sub);
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
    h5::Handle params(KILN_H5(H5Gopen2(file, (format::layerGroup(layer) + "/params").c_str(), H5P_DEFAULT), ctx));
    std::vector<std::vector<float>> out;
    for (const auto& [name, dims] : config.parameterShapes(layer)) {
        out.emplace_back();
        if (const auto why = readAll(params, name, out.back()); !why.empty())
            throw CheckpointUnreadable(fmt::format("{}: layer {}: {}", ctx, layer, why));
    }
    return out;
}

}  // namespace kiln::train
