#include "replica_check.hpp"

#include "kiln/model/gpt.hpp"
#include "kiln/train/adamw.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <tuple>

namespace kiln::train {

std::vector<std::uint64_t> layerFingerprints(model::Gpt& model, AdamW& optimizer) {
    torch::NoGradGuard noGrad;
    std::vector<std::uint64_t> out(model.config().numLayers(), 0);
    for (std::uint32_t k = 0; k < model.numLayers(); ++k) {
        std::vector<torch::Tensor> tensors = model.layer(k).parameters();
        for (const auto* moments : {&optimizer.firstMoments(k), &optimizer.secondMoments(k)})
            tensors.insert(tensors.end(), moments->begin(), moments->end());
        // Summed on the tensors' device as 64-bit integers (no rounding), then one read for the layer.
        torch::Tensor sum;
        for (const auto& t : tensors) {
            if (!t.defined() || t.numel() == 0) continue;
            const auto words = t.detach().contiguous().view(torch::kInt32).to(torch::kInt64).sum();
            sum = sum.defined() ? sum + words : words;
        }
        // 0 means "not held": a held layer's fingerprint is never 0.
        const auto value = sum.defined() ? static_cast<std::uint64_t>(sum.item<std::int64_t>()) : 0;
        out[model.firstLayer() + k] = value == 0 ? 1 : value;
    }
    return out;
}

std::string ReplicaVerdict::describe() const {
    if (agree()) return "every layer's copies agree";
    std::string text = fmt::format("layers {} differ between their holders", fmt::join(layers, ", "));
    if (!odd.empty()) text += fmt::format("; outvoted: rank{} {}", odd.size() == 1 ? "" : "s", fmt::join(odd, ", "));
    if (!undecided.empty())
        text += fmt::format("; two copies, no majority: ranks {}", fmt::join(undecided, ", "));
    return text;
}

ReplicaVerdict compareReplicas(const plan::Layout& layout, const std::vector<std::vector<std::uint64_t>>& fingerprints) {
    // The holders of each shard: (layer, stage width, slot) -> ranks.
    std::map<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>, std::vector<int>> holders;
    for (const auto& p : layout.pipelines)
        for (std::uint32_t s = 0; s < p.stages(); ++s)
            for (std::uint32_t l = p.cuts[s]; l < p.cuts[s + 1]; ++l)
                for (std::uint32_t t = 0; t < p.width; ++t) holders[{l, p.width, t}].push_back(p.ranks[s * p.width + t]);
    ReplicaVerdict v;
    for (const auto& [shard, ranks] : holders) {
        const std::uint32_t layer = std::get<0>(shard);
        std::map<std::uint64_t, std::vector<int>> byValue;
        for (int r : ranks) {
            const auto& mine = fingerprints.at(static_cast<std::size_t>(r));
            byValue[layer < mine.size() ? mine[layer] : 0].push_back(r);
        }
        if (byValue.size() <= 1) continue;
        if (std::find(v.layers.begin(), v.layers.end(), layer) == v.layers.end()) v.layers.push_back(layer);
        const auto largest = std::max_element(byValue.begin(), byValue.end(),
                                              [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
        const bool majority = 2 * largest->second.size() > ranks.size();
        for (const auto& [value, group] : byValue)
            if (!majority || &group != &largest->second)
                for (int r : group) (majority ? v.odd : v.undecided).push_back(r);
    }
    for (auto* ranks : {&v.odd, &v.undecided}) {
        std::sort(ranks->begin(), ranks->end());
        ranks->erase(std::unique(ranks->begin(), ranks->end()), ranks->end());
    }
    std::sort(v.layers.begin(), v.layers.end());
    return v;
}

}  // namespace kiln::train
