#include "kiln/train/layer_state.hpp"

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
