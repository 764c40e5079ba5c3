#include "kiln/model/router_record.hpp"

namespace kiln::model {

void RouterRecord::reset(std::uint32_t blockCount, std::uint32_t expertCount) {
    blocks = blockCount;
    experts = expertCount;
    balanceSum.assign(blocks, 0.0);
    zSum.assign(blocks, 0.0);
    load.assign(std::size_t{blocks} * experts, 0.0);
}

double RouterRecord::meanBalance(double sequences) const {
    double sum = 0.0;
    for (double b : balanceSum) sum += b;
    return blocks == 0 || sequences <= 0 ? 0.0 : sum / (blocks * sequences);
}

double RouterRecord::meanZ(double tokens) const {
    double sum = 0.0;
    for (double z : zSum) sum += z;
    return blocks == 0 || tokens <= 0 ? 0.0 : sum / (blocks * tokens);
}

}  // namespace kiln::model
