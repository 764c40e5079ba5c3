#include "kiln/plan/flops.hpp"

#include <algorithm>
#include <cctype>

namespace kiln::plan {

FlopsPerToken flopsPerToken(const arch::ModelConfig& config, const std::vector<PipelinePlacement>& pipelines) {
    FlopsPerToken f;
    double forward = 0.0, attention = 0.0;
    for (std::uint32_t l = 0; l < config.numLayers(); ++l) {
        forward += config.forwardFlopsPerToken(l);
        attention += config.attentionFlopsPerToken(l);
    }
    f.model = 3.0 * forward;
    f.hardware = f.model;
    if (config.recompute == arch::ModelConfig::Recompute::Selective) f.hardware += attention;
    double microbatches = 0.0, again = 0.0;
    for (const auto& p : pipelines) {
        double recomputed = 0.0;
        for (std::size_t s = 0; s < p.recompute.size() && s + 1 < p.cuts.size(); ++s)
            if (p.recompute[s])
                for (std::uint32_t l = p.cuts[s]; l < p.cuts[s + 1]; ++l) recomputed += config.forwardFlopsPerToken(l);
        again += double(p.microbatches) * recomputed;
        microbatches += double(p.microbatches);
    }
    if (microbatches > 0) f.hardware += again / microbatches;
    return f;
}

const std::vector<DevicePeak>& devicePeaks() {
    // Dense (no sparsity) tensor-core peaks from the vendors' data sheets; the SXM form where a part comes in two.
    static const std::vector<DevicePeak> peaks = {
        {"GB200", 2500, 1250}, {"B200", 2250, 1100}, {"GH200", 989, 494}, {"H200", 989, 494},
        {"H100 PCIe", 756, 378}, {"H100 NVL", 835, 418}, {"H100", 989, 494}, {"H800", 989, 494},
        {"A100", 312, 156},    {"A800", 312, 156},     {"L40S", 362, 183},  {"L4", 121, 60},
        {"A10", 125, 62.5},    {"MI355X", 2500, 1250}, {"MI300X", 1307, 654}, {"MI250X", 383, 191},
    };
    return peaks;
}

const DevicePeak* devicePeakOf(const std::string& deviceName) {
    std::string name = deviceName;
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return char(std::toupper(c)); });
    // The table's order puts longer names first where one contains another (GH200 before H200 would
    // not match "GH200" as H200; H100 PCIe before H100).
    for (const auto& p : devicePeaks()) {
        std::string key = p.name;
        std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) { return char(std::toupper(c)); });
        if (name.find(key) != std::string::npos) return &p;
    }
    return nullptr;
}

}  // namespace kiln::plan
