#include "kiln/train/layer_state.hpp"

#include <algorithm>

namespace kiln::train {

std::int64_t layerStateSize(model::Gpt& model, std::uint32_t l) {
    std::int64_t values = 0;
    for (auto& p : model.layer(l).parameters()) values += 3 * p.numel();
    return values;
}

torch::Tensor packLayerState(model::Gpt& model, AdamW& optimizer, std::uint32_t l, torch::Device where) {
    std::vector<torch::Tensor> parts;
    for (auto& p : model.layer(l).parameters()) parts.push_back(p.detach().reshape({-1}));
    for (auto& m : optimizer.firstMoments(l)) parts.push_back(m.reshape({-1}));
    for (auto& v : optimizer.secondMoments(l)) parts.push_back(v.reshape({-1}));
    return torch::cat(parts).to(where, torch::kFloat32).contiguous();
}

void forEachLayerStatePiece(model::Gpt& model, AdamW& optimizer, std::uint32_t l, std::int64_t maxValues,
                            const std::function<void(const torch::Tensor&)>& visit) {
    torch::NoGradGuard noGrad;
    const auto visitTensor = [&](const torch::Tensor& t) {
        const auto flat = t.detach().reshape({-1});
        for (std::int64_t at = 0; at < flat.numel(); at += maxValues)
            visit(flat.slice(0, at, std::min(flat.numel(), at + maxValues)).to(torch::kCPU, torch::kFloat32).contiguous());
    };
    for (auto& p : model.layer(l).parameters()) visitTensor(p);
    for (auto& m : optimizer.firstMoments(l)) visitTensor(m);
    for (auto& v : optimizer.secondMoments(l)) visitTensor(v);
}

void unpackLayerState(const torch::Tensor& flat, model::Gpt& model, AdamW& optimizer, std::uint32_t l, torch::Device device) {
    torch::NoGradGuard noGrad;
    const auto values = flat.to(device);
    std::int64_t offset = 0;
    const auto take = [&](torch::Tensor& into) {
        into.copy_(values.slice(0, offset, offset + into.numel()).view_as(into));
        offset += into.numel();
    };
    for (auto& p : model.layer(l).parameters()) take(p);
    for (auto& m : optimizer.firstMoments(l)) take(m);
    for (auto& v : optimizer.secondMoments(l)) take(v);
}

}  // namespace kiln::train
