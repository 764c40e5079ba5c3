#include "kiln/train/layer_state.hpp"

#include <algorithm>

namespace kiln::train {
namespace {

// A layer's training state in its one order: every parameter, then every
// first moment, then every second moment (each list in parameters() order).
// The tensors share storage with the model and the optimizer.
std::vector<torch::Tensor> layerStateTensors(model::Gpt& model, AdamW& optimizer, std::uint32_t l) {
    std::vector<torch::Tensor> all;
    for (auto& p : model.layer(l).parameters()) all.push_back(p.detach());
    for (auto& m : optimizer.firstMoments(l)) all.push_back(m);
    for (auto& v : optimizer.secondMoments(l)) all.push_back(v);
    return all;
}

}  // namespace

std::int64_t layerStateSize(model::Gpt& model, std::uint32_t l) {
    std::int64_t values = 0;
    for (auto& p : model.layer(l).parameters()) values += 3 * p.numel();
    return values;
}

torch::Tensor packLayerState(model::Gpt& model, AdamW& optimizer, std::uint32_t l, torch::Device where) {
    std::vector<torch::Tensor> parts;
    for (auto& t : layerStateTensors(model, optimizer, l)) parts.push_back(t.reshape({-1}));
    return torch::cat(parts).to(where, torch::kFloat32).contiguous();
}

void forEachLayerStatePiece(model::Gpt& model, AdamW& optimizer, std::uint32_t l, std::int64_t maxValues,
                            const std::function<void(const torch::Tensor&)>& visit) {
    torch::NoGradGuard noGrad;
    for (auto& t : layerStateTensors(model, optimizer, l)) {
        const auto flat = t.reshape({-1});
        for (std::int64_t at = 0; at < flat.numel(); at += maxValues)
            visit(flat.slice(0, at, std::min(flat.numel(), at + maxValues)).to(torch::kCPU, torch::kFloat32).contiguous());
    }
}

void unpackLayerState(const torch::Tensor& flat, model::Gpt& model, AdamW& optimizer, std::uint32_t l, torch::Device device) {
    torch::NoGradGuard noGrad;
    const auto values = flat.to(device);
    std::int64_t offset = 0;
    for (auto& into : layerStateTensors(model, optimizer, l)) {
        into.copy_(values.slice(0, offset, offset + into.numel()).view_as(into));
        offset += into.numel();
    }
}

}  // namespace kiln::train
