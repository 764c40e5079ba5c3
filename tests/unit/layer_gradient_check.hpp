// A layer's analytic gradients against central differences in float64: a
// sample of every parameter's elements and of the input's (what a pipeline
// stage sends upstream). Shared by the model tests of both families.
#pragma once

#include "kiln/model/gpt.hpp"

#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

// Checks `layer` (moved to float64) on a random (2, 5, width) input; returns how many parameter elements it compared.
inline int checkLayerGradients(kiln::model::Layer& layer, std::int64_t width) {
    layer->to(torch::kFloat64);
    const auto x = torch::randn({2, 5, width}, torch::kFloat64).requires_grad_(true);
    const auto weights = torch::randn({2, 5, width}, torch::kFloat64);
    const auto lossOf = [&] { return (layer->forward(x) * weights).sum(); };
    lossOf().backward();
    torch::NoGradGuard noGrad;
    // Central difference of the loss in element i of `flat`, which aliases a tensor the loss reads.
    const auto numeric = [&](torch::Tensor flat, std::int64_t i) {
        const double eps = 1e-6, original = flat[i].item<double>();
        flat[i] = original + eps;
        const double up = lossOf().item<double>();
        flat[i] = original - eps;
        const double down = lossOf().item<double>();
        flat[i] = original;
        return (up - down) / (2 * eps);
    };
    int checked = 0;
    for (auto& named : layer->named_parameters()) {
        auto p = named.value();
        for (std::int64_t i = 0; i < p.numel(); i += std::max<std::int64_t>(1, p.numel() / 7)) {
            const double expected = numeric(p.view({-1}), i), analytic = p.grad().view({-1})[i].item<double>();
            EXPECT_NEAR(analytic, expected, 1e-6 * std::max(1.0, std::abs(expected))) << named.key() << "[" << i << "]";
            ++checked;
        }
    }
    for (std::int64_t i = 0; i < x.numel(); i += 17)
        EXPECT_NEAR(x.grad().view({-1})[i].item<double>(), numeric(x.view({-1}), i), 1e-6) << "input[" << i << "]";
    return checked;
}
