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

// The views of `tensor` (held as `held`) that atom `atom` of `atoms` covers.
std::vector<torch::Tensor> atomViews(const torch::Tensor& tensor, const arch::ShardSpec& spec, HeldShard held,
                                     std::uint32_t atom, std::uint32_t atoms) {
    if (spec.replicated()) return {tensor};
    return model::unitViews(tensor, spec, arch::unitRange(spec.units, held.width, held.slot),
                            arch::unitRange(spec.units, atoms, atom));
}

}  // namespace

std::vector<torch::Tensor> layerState(model::Gpt& model, AdamW& optimizer, std::uint32_t l) {
    return layerStateTensors(model, optimizer, l);
}

torch::Tensor packAtom(const std::vector<torch::Tensor>& state, const std::vector<arch::ShardSpec>& specs, HeldShard held,
                       std::uint32_t atom, std::uint32_t atoms, torch::Device where) {
    torch::NoGradGuard noGrad;
    std::vector<torch::Tensor> parts;
    for (std::size_t k = 0; k < state.size(); ++k)
        for (const auto& view : atomViews(state[k], specs[k % specs.size()], held, atom, atoms)) parts.push_back(view.reshape({-1}));
    return torch::cat(parts).to(where, torch::kFloat32).contiguous();
}

void unpackAtom(const torch::Tensor& flat, const std::vector<torch::Tensor>& state,
                const std::vector<arch::ShardSpec>& specs, HeldShard held, std::uint32_t atom, std::uint32_t atoms) {
    torch::NoGradGuard noGrad;
    std::int64_t offset = 0;
    for (std::size_t k = 0; k < state.size(); ++k)
        for (auto view : atomViews(state[k], specs[k % specs.size()], held, atom, atoms)) {
            const auto values = flat.slice(0, offset, offset + view.numel()).to(view.device());
            view.copy_(values.view(view.sizes()));
            offset += view.numel();
        }
}

std::int64_t atomSize(const arch::ModelConfig& config, std::uint32_t layer, std::uint32_t atom, std::uint32_t atoms) {
    const auto shapes = config.parameterShapes(layer);
    const auto specs = arch::shardSpecs(config, layer);
    std::int64_t values = 0;
    for (std::size_t k = 0; k < shapes.size(); ++k) {
        auto shape = shapes[k].second;
        if (!specs[k].replicated()) shape = arch::shardShape(shape, specs[k], atoms, atom);
        std::int64_t n = 1;
        for (auto d : shape) n *= d;
        values += n;
    }
    return 3 * values;
}

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
