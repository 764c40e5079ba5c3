// What a checkpoint holds, read without building a model: its attributes,
// where each layer is (the file itself, or the part an external link names),
// and, when asked, whether every tensor reads back (the Fletcher-32 checksums
// are checked on read). `kiln checkpoint` prints it; `kiln export` reads the
// weights through it.
#pragma once

#include "kiln/arch/model_config.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace kiln::train {

struct CheckpointContents {
    std::filesystem::path path;
    std::int64_t formatVersion = 0;
    std::uint64_t step = 0, optimizerSteps = 0, writers = 0;
    bool hasLoader = false;  // the loader cursor (/loader)
    arch::ModelConfig model;  // the shape attributes (seed and the rest at their defaults)
    struct Layer {
        std::uint32_t index = 0;
        std::string file;  // the part holding it ("" when in the index file itself)
        std::uint64_t tensors = 0, bytes = 0;
        std::string problem;  // why it does not read back ("" when it does, or was not verified)
    };
    std::vector<Layer> layers;
    bool verified = false;
    std::size_t problems() const;
};

// Throws CheckpointUnreadable when the index cannot be opened or is not a
// kiln checkpoint; problems inside layers are reported in `layers`.
CheckpointContents readContents(const std::filesystem::path& path, bool verify);

// The weights of layer `layer` (params only), each tensor flattened, in
// parameterShapes() order.
std::vector<std::vector<float>> readWeights(const std::filesystem::path& path, const arch::ModelConfig& config,
                                            std::uint32_t layer);

}  // namespace kiln::train
