// Which source each sample of the global stream comes from: a deterministic
// quota schedule (Balinski-Young quota method). Within a weight segment, after
// k samples source s has m_s samples with floor(q_s k) <= m_s <= ceil(q_s k),
// q_s its normalised weight: the mix is met to within one sample of every
// source at every point, and counts only grow (house monotone). Among the
// sources whose upper quota allows one more, the one with the largest
// q_s / (m_s + 1) (D'Hondt divisor) gets the sample; ties go to the source
// listed first. Weights are held as exact integers, so the schedule does not
// drift with floating point however long the run.
#pragma once

#include <cstdint>
#include <vector>

namespace kiln::data {

class MixSchedule {
public:
    // Weights >= 0, not all zero (the deck checks this).
    explicit MixSchedule(const std::vector<double>& weights);
    // The source of the next sample, given the samples each source got since
    // the segment began (`counts`) and their total (`total`).
    std::size_t pick(const std::vector<std::uint64_t>& counts, std::uint64_t total) const;
    // q_s as used: the integerised weight over the sum.
    double share(std::size_t source) const;

private:
    std::vector<std::uint64_t> weight_;
    std::uint64_t sum_ = 0;
};

}  // namespace kiln::data
