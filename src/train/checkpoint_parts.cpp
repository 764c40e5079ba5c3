#include "kiln/train/checkpoint_parts.hpp"

#include "checkpoint_format.hpp"
#include "kiln/base/error.hpp"
#include "kiln/comm/mpi_check.hpp"
#include "kiln/io/atomic_file.hpp"
#include "kiln/io/hdf5.hpp"
#include "kiln/io/hdf5_array.hpp"
#include "kiln/train/checkpoint.hpp"
#include "kiln/train/layer_state.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace kiln::train {

namespace h5 = io::h5;

namespace {

constexpr int kShardTag = 32;
// Pieces of a shard sent to its stage's writer: 64 MiB of float32 (and below MPI's int count).
constexpr std::int64_t kPieceValues = std::int64_t{16} << 20;

std::uint64_t stateBytes(const arch::ModelConfig& config, std::uint32_t layer) {
    return 3 * 4 * config.parametersOf(layer);
}

}  // namespace

std::vector<std::vector<int>> assignWriters(const arch::ModelConfig& config, const LayerHolders& holders) {
    const auto layers = static_cast<std::uint32_t>(holders.size());
    std::vector<std::uint32_t> order(layers);
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(),
                     [&](auto a, auto b) { return stateBytes(config, a) > stateBytes(config, b); });
    std::vector<std::vector<int>> chosen(layers);
    std::vector<std::pair<int, std::uint64_t>> load;  // writer rank, bytes so far
    const auto loadOf = [&](int rank) -> std::uint64_t& {
        for (auto& [r, bytes] : load)
            if (r == rank) return bytes;
        load.emplace_back(rank, 0);
        return load.back().second;
    };
    for (std::uint32_t l : order) {
        const std::vector<int>* best = nullptr;
        for (const auto& stage : holders[l]) {
            if (stage.empty()) continue;
            if (!best || loadOf(stage.front()) < loadOf(best->front()) ||
                (loadOf(stage.front()) == loadOf(best->front()) && stage.front() < best->front()))
                best = &stage;
        }
        if (!best) throw Error(fmt::format("layer {} has no holder to write it", l), ErrorScope::AllRanks);
        chosen[l] = *best;
        loadOf(best->front()) += stateBytes(config, l);
    }
    return chosen;
}

std::filesystem::path CheckpointSnapshot::partsDirectory() const { return directory / format::partsDirectory(name); }

std::filesystem::path CheckpointSnapshot::partPath(int writer) const {
    return partsDirectory() / fmt::format("part-{:05}.h5", writer);
}

CheckpointSnapshot snapshot(MPI_Comm comm, std::uint64_t step, const std::filesystem::path& directory, model::Gpt& model,
                            AdamW& optimizer, const LayerHolders& holders, const data::Cursor& cursor,
                            const data::CursorContext& context, const std::string& deck, std::uint64_t lrDecaySteps) {
    int rank = 0, size = 1;
    KILN_MPI(MPI_Comm_rank(comm, &rank));
    KILN_MPI(MPI_Comm_size(comm, &size));
    CheckpointSnapshot s;
    s.step = step;
    s.directory = directory;
    s.name = fmt::format("step-{:08}.h5", step);
    s.rank = rank;
    s.model = model.config();
    const auto writers = assignWriters(s.model, holders);
    torch::NoGradGuard noGrad;
    for (std::uint32_t l = 0; l < s.model.numLayers(); ++l) {
        const auto& stage = writers[l];
        const auto me = std::find(stage.begin(), stage.end(), rank);
        if (me == stage.end()) continue;
        const auto slot = static_cast<std::uint32_t>(me - stage.begin());
        const auto width = static_cast<std::uint32_t>(stage.size());
        const auto local = l - model.firstLayer();
        if (width == 1) {
            // A copy: training goes on changing the model while the part is written.
            std::vector<torch::Tensor> state;
            for (const auto& t : layerState(model, optimizer, local)) state.push_back(t.to(torch::kCPU, torch::kFloat32).clone());
            s.layers.push_back(l);
            s.states.push_back(std::move(state));
            continue;
        }
        const auto specs = arch::shardSpecs(s.model, l);
        const auto shard = packAtom(layerState(model, optimizer, local), specs, HeldShard{slot, width}, slot, width);
        if (slot != 0) {  // to the stage's writer, inside the node
            for (std::int64_t at = 0; at < shard.numel(); at += kPieceValues) {
                const auto n = std::min(kPieceValues, shard.numel() - at);
                KILN_MPI(MPI_Send(shard.data_ptr<float>() + at, static_cast<int>(n), MPI_FLOAT, stage.front(), kShardTag, comm));
            }
            continue;
        }
        // Slot 0: the whole tensors, put together from every slot's shard.
        std::vector<torch::Tensor> whole;
        for (int kind = 0; kind < 3; ++kind)
            for (const auto& [name, shape] : s.model.parameterShapes(l)) whole.push_back(torch::empty(shape, torch::kFloat32));
        unpackAtom(shard, whole, specs, HeldShard{0, 1}, 0, width);
        for (std::uint32_t from = 1; from < width; ++from) {
            auto incoming = torch::empty({atomSize(s.model, l, from, width)}, torch::kFloat32);
            for (std::int64_t at = 0; at < incoming.numel(); at += kPieceValues) {
                const auto n = std::min(kPieceValues, incoming.numel() - at);
                KILN_MPI(MPI_Recv(incoming.data_ptr<float>() + at, static_cast<int>(n), MPI_FLOAT, stage[from], kShardTag,
                                  comm, MPI_STATUS_IGNORE));
            }
            unpackAtom(incoming, whole, specs, HeldShard{0, 1}, from, width);
        }
        s.layers.push_back(l);
        s.states.push_back(std::move(whole));
    }
    for (const auto& state : s.states)
        for (const auto& t : state) s.bytes += static_cast<std::uint64_t>(t.nbytes());

    const std::vector<std::uint64_t> row = data::cursorToRow(cursor);
    std::vector<std::uint64_t> all(rank == 0 ? row.size() * static_cast<std::size_t>(size) : 0);
    KILN_MPI(MPI_Gather(row.data(), static_cast<int>(row.size()), MPI_UINT64_T, all.data(), static_cast<int>(row.size()),
                        MPI_UINT64_T, 0, comm));
    if (rank == 0) {
        for (int r = 0; r < size; ++r)
            s.cursorRows.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(r * row.size()),
                                      all.begin() + static_cast<std::ptrdiff_t>((r + 1) * row.size()));
        for (const auto& stage : writers) s.writerOfLayer.push_back(stage.front());
        std::vector<int> distinct = s.writerOfLayer;
        std::sort(distinct.begin(), distinct.end());
        s.writers = static_cast<int>(std::unique(distinct.begin(), distinct.end()) - distinct.begin());
        s.cursor = cursor;
        s.context = context;
        s.deck = deck;
        s.optimizerSteps = optimizer.steps();
        s.lrDecaySteps = lrDecaySteps;
    }
    return s;
}

void writePart(const CheckpointSnapshot& s, const std::function<void()>& afterFirstLayer) {
    if (s.layers.empty()) return;
    const auto path = s.partPath(s.rank);
    std::filesystem::create_directories(path.parent_path());
    const auto temporary = io::temporarySibling(path);
    const std::string ctx = path.string();
    try {
        {
            // The library lock per layer, not for the whole part: the loader's
            // prefetch and the diagnostics go on meanwhile.
            h5::Handle file;
            {
                h5::LibraryLock lock(h5::libraryMutex());
                h5::quietErrors();
                file = h5::createFile(temporary.string(), ctx);
                h5::writeAttribute(file, "format", std::string(format::kName) + "-part");
                h5::writeAttribute(file, "step", s.step);
            }
            for (std::size_t k = 0; k < s.layers.size(); ++k) {
                h5::LibraryLock lock(h5::libraryMutex());
                format::writeLayer(file, s.model, s.layers[k], s.states[k], ctx, /*checksum=*/true);
                // Inside the lock, as a write the file system stalls holds it (fault.inject ...:write:slow).
                if (k == 0 && afterFirstLayer) afterFirstLayer();
            }
            h5::LibraryLock lock(h5::libraryMutex());
            h5::flush(file, ctx);
            file.reset();
        }
        io::commitTemporary(temporary, path);
    } catch (...) {
        std::error_code ignored;
        std::filesystem::remove(temporary, ignored);
        throw;
    }
}

void publish(const CheckpointSnapshot& s, std::uint64_t keep, const std::function<void()>& beforeCommit) {
    const auto path = s.path();
    const std::string ctx = path.string();
    const auto temporary = io::temporarySibling(path);
    const std::string parts = format::partsDirectory(s.name);
    try {
        h5::LibraryLock lock(h5::libraryMutex());
        h5::quietErrors();
        h5::Handle file = h5::createFile(temporary.string(), ctx);
        h5::writeAttribute(file, "format", std::string(format::kName));
        h5::writeAttribute(file, "format_version", format::kParts);
        h5::writeAttribute(file, "step", s.step);
        h5::writeAttribute(file, "optimizer_steps", s.optimizerSteps);
        h5::writeAttribute(file, "lr_decay_steps", s.lrDecaySteps);
        format::writeShape(file, s.model);
        h5::writeAttribute(file, "deck", s.deck);
        h5::writeAttribute(file, "writers", std::uint64_t(s.writers));
        format::makeGroup(file, "layers", ctx);
        // Relative targets: HDF5 looks for them beside the index, so a run directory can move.
        for (std::uint32_t l = 0; l < s.writerOfLayer.size(); ++l) {
            const auto target = fmt::format("{}/part-{:05}.h5", parts, s.writerOfLayer[l]);
            h5::linkExternal(file, format::layerGroup(l), target, format::layerGroup(l), ctx);
        }
        data::writeCursorRows(file, "loader", s.cursorRows, s.cursor, s.context);
        h5::flush(file, ctx);
    } catch (...) {
        std::error_code ignored;
        std::filesystem::remove(temporary, ignored);
        throw;
    }
    try {
        if (beforeCommit) beforeCommit();
    } catch (...) {
        std::error_code ignored;
        std::filesystem::remove(temporary, ignored);
        throw;
    }
    io::commitTemporary(temporary, path);
    io::writeFileAtomically(s.directory / "latest", s.name + "\n");
    pruneCheckpoints(s.directory, keep);
}

}  // namespace kiln::train
