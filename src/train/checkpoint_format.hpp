// The checkpoint file format's pieces shared by the single-file writer, the
// parallel one and the reader (see checkpoint.hpp for the layout).
#pragma once

#include "kiln/io/hdf5.hpp"
#include "kiln/arch/model_config.hpp"

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln::train::format {

constexpr const char* kName = "kiln-checkpoint";
// 1: one file; 2: an index whose layer groups link to part files (one per writer).
constexpr std::int64_t kSingleFile = 1, kParts = 2;

// The deck keys a checkpoint must agree on with the run that reads it.
std::vector<std::pair<std::string, std::uint64_t>> shapeOf(const arch::ModelConfig& c);
std::string attributeName(const std::string& key);
// Writes the model's shape (shapeOf) and its real-valued settings (rope_theta, norm_eps) as attributes.
void writeShape(hid_t file, const arch::ModelConfig& c);
// The model a checkpoint holds. Shape keys absent from a checkpoint written before they existed read 0
// (a gpt2 model); the real-valued settings read their defaults.
arch::ModelConfig readShape(hid_t file, const std::string& context);
// "/layers/NNNNN"
std::string layerGroup(std::uint32_t layer);
// The parts directory of checkpoint file `name` (step-NNNNNNNN.h5 -> step-NNNNNNNN.parts).
std::string partsDirectory(const std::string& name);

// Opens a checkpoint (or its index) for reading and checks that it is one of
// a format this kiln reads; returns that format's version. Throws
// CheckpointUnreadable when it cannot be opened or is not a kiln checkpoint.
// The caller holds the HDF5 library lock for what it reads next.
io::h5::Handle openCheckpoint(const std::string& path, std::int64_t& version);

io::h5::Handle makeGroup(hid_t parent, const std::string& name, const std::string& context);
// A float32 dataset of `shape` holding `tensor`; with `checksum`, chunked and
// Fletcher-32 protected (HDF5 verifies it on every read).
void writeTensor(hid_t group, const std::string& name, const std::vector<std::int64_t>& shape, const torch::Tensor& tensor,
                 const std::string& context, bool checksum);
// Writes `state` (a layer's weights, first and second moments, each in
// parameterShapes() order, whole) as /layers/NNNNN/{params,adam_m,adam_v} of `file`.
void writeLayer(hid_t file, const arch::ModelConfig& config, std::uint32_t layer, const std::vector<torch::Tensor>& state,
                const std::string& context, bool checksum);

}  // namespace kiln::train::format
