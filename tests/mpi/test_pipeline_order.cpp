// A 3-stage pipeline (ranks 0, 1, 2; 5 microbatches, so 1F1B has warm-up,
// steady state and cool-down) run over a transport that behaves as NCCL may:
// each communicator's operations one at a time in the order they were issued,
// a send done only once its receive has matched it (MPI_Issend). Over the
// pipeline's links (a channel per neighbour and direction) the schedule
// completes and the last stage's loss equals that of one rank running the
// whole model. (Over a single such channel per rank it waits for ever: stage
// s sends activation k+1 before it receives gradient k, while stage s+1 sends
// gradient k before it receives activation k+1.)
#include "kiln/comm/link_transport.hpp"
#include "kiln/fault/fault_injector.hpp"
#include "kiln/model/gpt.hpp"
#include "kiln/plan/layout.hpp"
#include "kiln/train/pipeline_stage.hpp"

#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <algorithm>
#include <deque>
#include <utility>

namespace {

// NCCL's ordering on one communicator, at its strictest: operations one at
// a time in issue order, a send done only once matched. Like a GPU, which
// runs every communicator's queue while the host waits on one, waiting here
// advances the queues of every instance in the process.
class InOrderTransport final : public kiln::comm::Transport {
public:
    explicit InOrderTransport(MPI_Comm comm) {
        MPI_Comm_dup(comm, &comm_);
        MPI_Comm_rank(comm_, &rank_);
        MPI_Comm_size(comm_, &size_);
        live().push_back(this);
    }
    ~InOrderTransport() override {
        live().erase(std::find(live().begin(), live().end(), this));
        MPI_Comm_free(&comm_);
    }
    std::string name() const override { return "in-order"; }
    int rank() const override { return rank_; }
    int size() const override { return size_; }
    void send(const void* data, std::size_t bytes, int peer) override {
        sendAsync(data, bytes, peer);
        waitSends();
    }
    void recv(void* data, std::size_t bytes, int peer) override {
        queue_.push_back({false, data, bytes, peer, 0});
        waitUntilEmpty();  // everything issued before it, then the receive
    }
    std::uint64_t sendAsync(const void* data, std::size_t bytes, int peer) override {
        queue_.push_back({true, const_cast<void*>(data), bytes, peer, nextTicket_});
        advance();
        return nextTicket_++;
    }
    std::vector<std::uint64_t> completedSends() override {
        advance();
        return std::exchange(done_, {});
    }
    void waitSends() override { waitUntilEmpty(); }
    bool deviceMemory() const override { return false; }
    void allReduceSum(float*, std::size_t) override { ADD_FAILURE() << "no sums on a pipeline link"; }
    void allReduceSumAsync(const std::vector<Floats>&) override { ADD_FAILURE() << "no sums on a pipeline link"; }
    void waitAllReduces() override {}
    void interrupt() override {}

private:
    struct Op {
        bool send;
        void* data;
        std::size_t bytes;
        int peer;
        std::uint64_t ticket;
        MPI_Request request = MPI_REQUEST_NULL;
        bool posted = false;
    };
    static std::vector<InOrderTransport*>& live() {
        static std::vector<InOrderTransport*> all;
        return all;
    }
    // Completes what is done at the front of the queue; only the front
    // operation is ever in flight.
    void advance() {
        while (!queue_.empty()) {
            Op& op = queue_.front();
            if (!op.posted) {
                if (op.send) {
                    MPI_Issend(op.data, static_cast<int>(op.bytes), MPI_BYTE, op.peer, 0, comm_, &op.request);
                } else {
                    MPI_Irecv(op.data, static_cast<int>(op.bytes), MPI_BYTE, op.peer, 0, comm_, &op.request);
                }
                op.posted = true;
            }
            int finished = 0;
            MPI_Test(&op.request, &finished, MPI_STATUS_IGNORE);
            if (!finished) return;
            if (op.send) done_.push_back(op.ticket);
            queue_.pop_front();
        }
    }
    void waitUntilEmpty() {
        while (!queue_.empty())
            for (auto* t : live()) t->advance();
    }
    MPI_Comm comm_ = MPI_COMM_NULL;
    std::deque<Op> queue_;
    std::vector<std::uint64_t> done_;
    std::uint64_t nextTicket_ = 1;
    int rank_ = 0, size_ = 1;
};

kiln::arch::ModelConfig smallModel() {
    kiln::arch::ModelConfig c;
    c.vocabSize = 61;
    c.blocks = 4;
    c.dModel = 32;  // activations of 2 x 64 x 32 floats: past Open MPI's eager limit
    c.heads = 2;
    c.seqLen = 64;
    return c;
}

// One pipeline over `ranks` stages, cut evenly; 5 microbatches of 2 samples.
kiln::plan::Layout onePipeline(std::uint32_t stages) {
    const auto config = smallModel();
    kiln::plan::Layout layout;
    layout.layers = config.numLayers();
    layout.microBatch = 2;
    layout.globalBatch = 10;
    kiln::plan::PipelinePlacement pipeline;
    for (std::uint32_t s = 0; s <= stages; ++s) pipeline.cuts.push_back(s * layout.layers / stages);
    for (std::uint32_t s = 0; s < stages; ++s) pipeline.ranks.push_back(static_cast<int>(s));
    pipeline.microbatches = 5;
    layout.pipelines = {pipeline};
    for (std::uint32_t s = 0; s < stages; ++s) {
        kiln::plan::RankRole role;
        role.pipeline = 0;
        role.stage = s;
        role.stages = stages;
        role.firstLayer = pipeline.cuts[s];
        role.endLayer = pipeline.cuts[s + 1];
        role.previous = s > 0 ? static_cast<int>(s - 1) : -1;
        role.next = s + 1 < stages ? static_cast<int>(s + 1) : -1;
        layout.roles.push_back(role);
    }
    return layout;
}

kiln::data::Batch batchOf(const kiln::arch::ModelConfig& config) {
    kiln::data::Batch batch;
    batch.count = 10;
    batch.sampleLength = config.seqLen + 1;
    for (std::uint64_t i = 0; i < batch.count * batch.sampleLength; ++i)
        batch.tokens.push_back(static_cast<std::uint32_t>((i * 37 + 11) % config.vocabSize));
    return batch;
}

}  // namespace

TEST(PipelineOrder, OneFOneBCompletesOverLinksInNcclOrder) {
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ASSERT_EQ(size, 3);
    const auto config = smallModel();
    const auto batch = batchOf(config);
    const double targets = 10.0 * config.seqLen;
    kiln::fault::FaultInjector injector({}, rank);

    const auto layout = onePipeline(3);
    const auto& role = layout.roles[static_cast<std::size_t>(rank)];
    auto links = kiln::comm::makeLinkTransport(MPI_COMM_WORLD, {role.previous, role.next},
                                               [](MPI_Comm pair) { return std::make_unique<InOrderTransport>(pair); });
    kiln::model::Gpt stageModel(config, role.firstLayer, role.endLayer);
    kiln::train::PipelineStage stage(stageModel, layout, rank, *links, torch::kCPU, false, std::chrono::seconds(60));
    double loss = 0.0;
    for (int step = 0; step < 2; ++step) loss = stage.run(batch, targets, injector, 0).lossSum;
    MPI_Bcast(&loss, 1, MPI_DOUBLE, 2, MPI_COMM_WORLD);

    // The same model on one rank (same layer seeds), no transport traffic.
    const auto whole = onePipeline(1);
    auto self = kiln::comm::makeMpiTransport(MPI_COMM_SELF);
    kiln::model::Gpt model(config);
    kiln::train::PipelineStage alone(model, whole, 0, *self, torch::kCPU, false, std::chrono::seconds(60));
    const double reference = alone.run(batch, targets, injector, 0).lossSum;
    EXPECT_GT(reference, 0.0);
    EXPECT_NEAR(loss, reference, 1e-9 * reference) << "the pipeline's loss is the whole model's";
}
