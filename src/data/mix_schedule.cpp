#include "kiln/data/mix_schedule.hpp"

#include <cmath>
#include <stdexcept>

namespace kiln::data {
namespace {
using u128 = unsigned __int128;
constexpr double kResolution = double(1u << 30);  // weights resolved to ~1e-9 of their sum
}  // namespace

MixSchedule::MixSchedule(const std::vector<double>& weights) {
    double total = 0.0;
    for (double w : weights) total += w;
    if (!(total > 0.0)) throw std::invalid_argument("MixSchedule: weights sum to zero");
    for (double w : weights) {
        weight_.push_back(static_cast<std::uint64_t>(std::llround(w / total * kResolution)));
        sum_ += weight_.back();
    }
    if (sum_ == 0) throw std::invalid_argument("MixSchedule: weights too small");
}

double MixSchedule::share(std::size_t s) const { return double(weight_[s]) / double(sum_); }

std::size_t MixSchedule::pick(const std::vector<std::uint64_t>& counts, std::uint64_t total) const {
    std::size_t best = weight_.size();
    for (std::size_t s = 0; s < weight_.size(); ++s) {
        if (weight_[s] == 0) continue;
        // Upper quota after this sample: m_s + 1 <= ceil(q_s (total + 1)), i.e. m_s * sum < w_s * (total + 1).
        if (u128(counts[s]) * sum_ >= u128(weight_[s]) * (total + 1)) continue;
        // Divisor rule: larger w_s / (m_s + 1) wins; strict '>' keeps the first on ties.
        if (best == weight_.size() || u128(weight_[s]) * (counts[best] + 1) > u128(weight_[best]) * (counts[s] + 1)) best = s;
    }
    if (best == weight_.size()) throw std::logic_error("MixSchedule: no eligible source (counts inconsistent with total)");
    return best;
}

}  // namespace kiln::data
