#include "kiln/train/checkpoint.hpp"

#include "kiln/comm/heartbeat.hpp"
#include "kiln/train/layer_state.hpp"

#include "checkpoint_format.hpp"

#include "kiln/base/error.hpp"
#include "kiln/io/atomic_file.hpp"
#include "kiln/io/hdf5.hpp"
#include "kiln/io/hdf5_array.hpp"
#include "kiln/comm/mpi_check.hpp"
#include "kiln/io/parallel_file.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fstream>
#include <regex>

namespace kiln::train {

namespace h5 = io::h5;

namespace {

using format::layerGroup;
using format::makeGroup;
using format::shapeOf;

void readTensor(hid_t group, const std::string& name, torch::Tensor& into, const std::string& context) {
    if (!h5::exists(group, name)) throw CheckpointUnreadable(fmt::format("{}: tensor {} is missing", context, name));
    h5::Handle set = h5::openDataset(group, name, context);
    const auto dims = h5::extent(set, context);
    const std::vector<std::int64_t> shape(dims.begin(), dims.end());
    if (shape != into.sizes().vec())
        throw InputError(fmt::format("{}: tensor {} has shape {}, the model expects {}", context, name,
                                     fmt::join(shape, "x"), fmt::join(into.sizes().vec(), "x")),
                         ErrorScope::ThisRank);
    auto cpu = torch::empty(into.sizes(), torch::kFloat32);
    if (cpu.numel() > 0) h5::readBlock(set, h5::memoryType<float>(), std::vector<std::uint64_t>(dims.size(), 0), dims, cpu.data_ptr<float>(), context);
    torch::NoGradGuard noGrad;
    into.copy_(cpu);
}

}  // namespace

CheckpointStore::CheckpointStore(std::filesystem::path dir, std::uint64_t keep) : dir_(std::move(dir)), keep_(keep) {}

std::optional<std::filesystem::path> CheckpointStore::latest() const {
    std::ifstream in(dir_ / "latest");
    std::string name;
    if (!in || !std::getline(in, name) || name.empty()) return std::nullopt;
    return dir_ / name;
}

std::optional<std::uint64_t> CheckpointStore::latestStep() const {
    const auto path = latest();
    std::smatch m;
    const std::string name = path ? path->filename().string() : std::string();
    if (!std::regex_match(name, m, std::regex(R"(step-(\d{8})\.h5)"))) return std::nullopt;
    return std::stoull(m[1].str());
}

namespace {
// Checkpoint files in `dir`, oldest first (complete: only a committed one has its final name).
std::vector<std::filesystem::path> completeCheckpoints(const std::filesystem::path& dir) {
    std::vector<std::filesystem::path> all;
    const std::regex pattern(R"(step-\d{8}\.h5)");
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
        if (std::regex_match(entry.path().filename().string(), pattern)) all.push_back(entry.path());
    std::sort(all.begin(), all.end());
    return all;
}
}  // namespace

std::vector<std::filesystem::path> CheckpointStore::complete() const { return completeCheckpoints(dir_); }

std::size_t CheckpointStore::removeStaleTemporaries() const {
    // Temporaries of the index, `latest` and parts, and parts directories whose index was never written.
    const std::regex temporary(R"(\.(step-\d{8}\.h5|latest|part-\d{5}\.h5)\.tmp\..*)"), parts(R"(step-(\d{8})\.parts)");
    std::size_t removed = 0;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
        const std::string name = entry.path().filename().string();
        std::smatch m;
        if (std::regex_match(name, temporary)) {
            if (std::filesystem::remove(entry.path(), ec)) ++removed;
        } else if (std::regex_match(name, m, parts)) {
            if (!std::filesystem::exists(dir_ / ("step-" + m[1].str() + ".h5"))) {
                removed += static_cast<std::size_t>(std::filesystem::remove_all(entry.path(), ec));
                continue;
            }
            for (const auto& inner : std::filesystem::directory_iterator(entry.path(), ec))
                if (std::regex_match(inner.path().filename().string(), temporary) && std::filesystem::remove(inner.path(), ec))
                    ++removed;
        }
    }
    return removed;
}

void pruneCheckpoints(const std::filesystem::path& dir, std::uint64_t keep) {
    const auto all = completeCheckpoints(dir);
    for (std::size_t i = 0; i + keep < all.size(); ++i) {
        std::error_code ignored;
        std::filesystem::remove(all[i], ignored);
        std::filesystem::remove_all(dir / format::partsDirectory(all[i].filename().string()), ignored);
    }
}

std::string CheckpointStore::listing() const {
    std::string text;
    for (const auto& p : completeCheckpoints(dir_)) text += (text.empty() ? "" : ", ") + p.filename().string();
    return text.empty() ? "none" : text;
}

namespace {

// Removes the temporary file unless the checkpoint was committed.
struct TemporaryFile {
    std::filesystem::path path;
    bool keep = false;
    ~TemporaryFile() {
        std::error_code ignored;
        if (!keep && !path.empty()) std::filesystem::remove(path, ignored);
    }
};

constexpr int kLayerTag = 31;
// Pieces of a layer sent to the writer: 64 MiB of float32 (and below MPI's int count).
constexpr std::int64_t kPieceValues = std::int64_t{16} << 20;

// This rank's shard of `layer` (slot = its place among `writers`), packed: one atom of as many as writers.
torch::Tensor shardOfLayer(model::Gpt& model, AdamW& optimizer, std::uint32_t layer, const std::vector<int>& writers,
                           int rank) {
    const auto slot = static_cast<std::uint32_t>(std::find(writers.begin(), writers.end(), rank) - writers.begin());
    const auto width = static_cast<std::uint32_t>(writers.size());
    return packAtom(layerState(model, optimizer, layer - model.firstLayer()), arch::shardSpecs(model.config(), layer),
                    HeldShard{slot, width}, slot, width);
}

void forEachPiece(const torch::Tensor& flat, const std::function<void(const torch::Tensor&)>& visit) {
    for (std::int64_t at = 0; at < flat.numel(); at += kPieceValues)
        visit(flat.slice(0, at, std::min(flat.numel(), at + kPieceValues)).contiguous());
}

std::int64_t valuesOf(const std::vector<std::int64_t>& shape) {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
}

// Every rank but 0: sends each layer it is a writer of to rank 0, in pieces,
// whole (packLayerState's order) or as its shard of a split stage (packAtom's).
void sendLayersToRankZero(MPI_Comm comm, int rank, model::Gpt& model, AdamW& optimizer,
                          const std::vector<std::vector<int>>& writerOfLayer) {
    for (std::uint32_t layer = 0; layer < model.config().numLayers(); ++layer) {
        const auto& writers = writerOfLayer.at(layer);
        if (std::find(writers.begin(), writers.end(), rank) == writers.end()) continue;
        const auto send = [&](const torch::Tensor& piece) {
            KILN_MPI(MPI_Send(piece.data_ptr<float>(), static_cast<int>(piece.numel()), MPI_FLOAT, 0, kLayerTag, comm));
        };
        if (writers.size() == 1) {
            forEachLayerStatePiece(model, optimizer, layer - model.firstLayer(), kPieceValues, send);
        } else {
            forEachPiece(shardOfLayer(model, optimizer, layer, writers, rank), send);
        }
    }
}

// Receives from `from` the pieces that fill `into`; returns the values received.
std::int64_t receivePieces(MPI_Comm comm, int from, torch::Tensor into, std::uint32_t layer, const std::string& ctx) {
    std::int64_t got = 0;
    while (got < into.numel()) {
        MPI_Status status;
        KILN_MPI(MPI_Probe(from, kLayerTag, comm, &status));
        int values = 0;
        KILN_MPI(MPI_Get_count(&status, MPI_FLOAT, &values));
        if (values <= 0 || got + values > into.numel())
            throw Error(fmt::format("{}: layer {} arrived with more than the {} values its shapes hold", ctx, layer,
                                    into.numel()),
                        ErrorScope::ThisRank);
        KILN_MPI(MPI_Recv(into.data_ptr<float>() + got, values, MPI_FLOAT, from, kLayerTag, comm, MPI_STATUS_IGNORE));
        got += values;
    }
    return got;
}

// Rank 0: the whole state of `layer` (parameters, then both moments, in
// packLayerState's order), from its own copy or from its writers.
torch::Tensor collectLayer(MPI_Comm comm, model::Gpt& model, AdamW& optimizer, std::uint32_t layer,
                           const std::vector<int>& writers, const std::string& ctx) {
    const auto& config = model.config();
    const auto shapes = config.parameterShapes(layer);
    std::int64_t count = 0;
    for (const auto& [tensorName, shape] : shapes) count += valuesOf(shape);
    auto flat = torch::empty({3 * count}, torch::kFloat32);
    std::int64_t filled = 0;
    if (writers.size() > 1) {
        // The whole layer's state tensors, as views of `flat`, filled shard by shard.
        std::vector<torch::Tensor> whole;
        std::int64_t offset = 0;
        for (int kind = 0; kind < 3; ++kind)
            for (const auto& [tensorName, shape] : shapes) {
                const auto n = valuesOf(shape);
                whole.push_back(flat.slice(0, offset, offset + n).view(shape));
                offset += n;
            }
        const auto specs = arch::shardSpecs(config, layer);
        const auto width = static_cast<std::uint32_t>(writers.size());
        for (std::uint32_t slot = 0; slot < width; ++slot) {
            torch::Tensor shard;
            if (writers[slot] == 0) {
                shard = shardOfLayer(model, optimizer, layer, writers, 0);
            } else {
                shard = torch::empty({atomSize(config, layer, slot, width)}, torch::kFloat32);
                receivePieces(comm, writers[slot], shard, layer, ctx);
            }
            unpackAtom(shard, whole, specs, HeldShard{0, 1}, slot, width);
        }
        filled = flat.numel();
    } else if (writers.front() == 0) {
        if (!model.holds(layer))
            throw Error(fmt::format("{}: rank 0 is to write layer {} but does not hold it", ctx, layer),
                        ErrorScope::ThisRank);
        forEachLayerStatePiece(model, optimizer, layer - model.firstLayer(), kPieceValues,
                               [&](const torch::Tensor& piece) {
                                   if (filled + piece.numel() <= flat.numel())
                                       flat.slice(0, filled, filled + piece.numel()).copy_(piece);
                                   filled += piece.numel();
                               });
    } else {
        filled = receivePieces(comm, writers.front(), flat, layer, ctx);
    }
    if (filled != 3 * count)
        throw Error(fmt::format("{}: layer {} has {} values, its shapes hold {}", ctx, layer, filled, 3 * count),
                    ErrorScope::ThisRank);
    return flat;
}

// One layer's group: params, adam_m and adam_v, each tensor checksummed.
void writeLayer(hid_t file, const arch::ModelConfig& config, std::uint32_t layer, const torch::Tensor& flat,
                const std::string& ctx) {
    h5::Handle group = makeGroup(file, layerGroup(layer), ctx);
    h5::Handle params = makeGroup(group, "params", ctx), m = makeGroup(group, "adam_m", ctx),
               v = makeGroup(group, "adam_v", ctx);
    std::int64_t offset = 0;
    for (hid_t kind : {params.id(), m.id(), v.id()}) {
        for (const auto& [tensorName, shape] : config.parameterShapes(layer)) {
            const auto n = valuesOf(shape);
            format::writeTensor(kind, tensorName, shape, flat.slice(0, offset, offset + n).view(shape), ctx,
                                /*checksum=*/true);
            offset += n;
        }
    }
}

// Every rank's loader cursor, gathered at rank 0 (empty elsewhere).
std::vector<std::vector<std::uint64_t>> gatherCursorRows(MPI_Comm comm, int rank, int size, const data::Cursor& cursor) {
    const std::vector<std::uint64_t> row = data::cursorToRow(cursor);
    std::vector<std::uint64_t> all(rank == 0 ? row.size() * static_cast<std::size_t>(size) : 0);
    KILN_MPI(MPI_Gather(row.data(), static_cast<int>(row.size()), MPI_UINT64_T, all.data(), static_cast<int>(row.size()),
                        MPI_UINT64_T, 0, comm));
    std::vector<std::vector<std::uint64_t>> rows;
    if (rank != 0) return rows;
    for (int r = 0; r < size; ++r)
        rows.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(r * row.size()),
                          all.begin() + static_cast<std::ptrdiff_t>((r + 1) * row.size()));
    return rows;
}

}  // namespace

std::filesystem::path CheckpointStore::save(MPI_Comm comm, std::uint64_t step, model::Gpt& model, AdamW& optimizer,
                                            const std::vector<std::vector<int>>& writerOfLayer, const data::Cursor& cursor,
                                            const data::CursorContext& context, const std::string& deck,
                                            std::uint64_t lrDecaySteps, const std::function<void()>& beforeCommit) {
    int rank = 0, size = 1;
    KILN_MPI(MPI_Comm_rank(comm, &rank));
    KILN_MPI(MPI_Comm_size(comm, &size));
    const std::string name = fmt::format("step-{:08}.h5", step);
    const std::filesystem::path path = dir_ / name;
    const std::string ctx = path.string();
    const auto& config = model.config();

    // Every layer's holder sends it to rank 0, which alone writes the file
    // (serial HDF5): no MPI-IO, so a rank that fails meanwhile is an ordinary
    // MPI error on this communicator, and the previous checkpoint stays `latest`.
    if (rank != 0) {
        const comm::PeerWait peers;  // rank 0 writes the file meanwhile: its wait is not this rank's hang
        sendLayersToRankZero(comm, rank, model, optimizer, writerOfLayer);
        gatherCursorRows(comm, rank, size, cursor);
        int done = 0;
        KILN_MPI(MPI_Bcast(&done, 1, MPI_INT, 0, comm));
        return path;
    }

    std::filesystem::create_directories(dir_);
    TemporaryFile temporary{io::temporarySibling(path)};
    {
        h5::LibraryLock lock(h5::libraryMutex());
        h5::quietErrors();
        h5::Handle file = h5::createFile(temporary.path.string(), ctx);
        h5::writeAttribute(file, "format", std::string(format::kName));
        h5::writeAttribute(file, "format_version", format::kSingleFile);
        h5::writeAttribute(file, "step", step);
        h5::writeAttribute(file, "optimizer_steps", optimizer.steps());
        h5::writeAttribute(file, "lr_decay_steps", lrDecaySteps);
        format::writeShape(file, config);
        h5::writeAttribute(file, "deck", deck);
        h5::Handle layers = makeGroup(file, "layers", ctx);
        // Every layer once, whoever holds it: the file does not depend on the layout.
        for (std::uint32_t layer = 0; layer < config.numLayers(); ++layer)
            writeLayer(file, config, layer, collectLayer(comm, model, optimizer, layer, writerOfLayer.at(layer), ctx), ctx);
        data::writeCursorRows(file, "loader", gatherCursorRows(comm, rank, size, cursor), cursor, context);
        h5::flush(file, ctx);
    }
    if (beforeCommit) beforeCommit();
    io::commitTemporary(temporary.path.string(), path.string());
    temporary.keep = true;
    io::writeFileAtomically(dir_ / "latest", name + "\n");
    // Prune only now that the new one is complete and named by `latest`.
    pruneCheckpoints(dir_, keep_);
    int done = 1;
    KILN_MPI(MPI_Bcast(&done, 1, MPI_INT, 0, comm));
    return path;
}

namespace {

std::uint64_t loadCheckpoint(const std::filesystem::path& path, model::Gpt& model, AdamW& optimizer,
                             const data::CursorContext& context, data::Cursor& cursor, std::uint64_t& lrDecaySteps) {
    const std::string ctx = path.string();
    std::int64_t version = 0;
    h5::Handle file = format::openCheckpoint(ctx, version);
    h5::LibraryLock lock(h5::libraryMutex());
    std::vector<std::string> differences;
    const auto savedShape = shapeOf(format::readShape(file, ctx)), runShape = shapeOf(model.config());
    for (std::size_t k = 0; k < savedShape.size(); ++k) {
        const auto& [key, value] = runShape[k];
        if (savedShape[k].second != value)
            differences.push_back(fmt::format("{} is {} in the checkpoint but {} in this run", key, savedShape[k].second, value));
    }
    if (!differences.empty())
        throw InputError(fmt::format("{}: written by a different model; it cannot continue this run:\n  {}\n  Restore "
                                     "those keys, or start a new run (another run.name, or checkpoint.resume = false)",
                                     ctx, fmt::join(differences, "\n  ")));
    for (std::uint32_t l = 0; l < model.numLayers(); ++l) {
        const std::string group = layerGroup(model.firstLayer() + l);
        if (!h5::exists(file, "layers") || !h5::exists(file, group))
            throw CheckpointUnreadable(fmt::format("{}: layer group {} is missing", ctx, group));
        h5::Handle g = h5::openGroup(file, group, ctx);
        h5::Handle params = h5::openGroup(g, "params", ctx), m = h5::openGroup(g, "adam_m", ctx),
                   v = h5::openGroup(g, "adam_v", ctx);
        auto named = model.layer(l).named_parameters();
        const auto specs = arch::shardSpecs(model.config(), model.firstLayer() + l);
        const auto shapes = model.config().parameterShapes(model.firstLayer() + l);
        const auto& slice = model.slice();
        for (std::size_t k = 0; k < named.size(); ++k) {
            // A split stage reads each whole tensor and keeps its shard: checkpoints do not depend on the layout.
            const auto read = [&](hid_t group, torch::Tensor into) {
                if (!slice.split() || specs[k].replicated()) return readTensor(group, named[k].key(), into, ctx);
                auto whole = torch::empty(shapes[k].second, torch::kFloat32);
                readTensor(group, named[k].key(), whole, ctx);
                torch::NoGradGuard noGrad;
                into.copy_(model::shardOf(whole, specs[k], slice.width, slice.rank));
            };
            read(params, named[k].value());
            read(m, optimizer.firstMoments(l)[k]);
            read(v, optimizer.secondMoments(l)[k]);
        }
    }
    optimizer.setSteps(h5::readUintAttribute(file, "optimizer_steps", ctx));
    lrDecaySteps = h5::hasAttribute(file, "lr_decay_steps") ? h5::readUintAttribute(file, "lr_decay_steps", ctx) : 0;
    cursor = data::readCursor(file, "loader", context, ctx);
    return h5::readUintAttribute(file, "step", ctx);
}

}  // namespace

std::uint64_t CheckpointStore::load(const std::filesystem::path& path, model::Gpt& model, AdamW& optimizer,
                                    const data::CursorContext& context, data::Cursor& cursor,
                                    std::uint64_t& lrDecaySteps) {
    if (!std::filesystem::exists(path))
        throw CheckpointUnreadable(fmt::format("{}: no such checkpoint", path.string()));
    try {
        return loadCheckpoint(path, model, optimizer, context, cursor, lrDecaySteps);
    } catch (const LibraryError& e) {
        // HDF5 could not read it: truncated, a part missing, a checksum that does not match.
        throw CheckpointUnreadable(fmt::format("{} cannot be read: {}", path.string(), e.what()));
    }
}

}  // namespace kiln::train
