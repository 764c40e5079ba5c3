#include "kiln/data/agreed_batch.hpp"

#include "kiln/base/error.hpp"
#include "kiln/comm/error_agreement.hpp"

namespace kiln::data {

AgreedBatch currentBatchOrFirstError(DataLoader& loader, MPI_Comm comm) {
    AgreedBatch out;
    std::string problem;
    try {
        out.batch = &loader.current();
    } catch (const InputError& e) {
        problem = e.what();
    }
    out.error = comm::firstError(comm, problem);
    if (!out.error.empty()) out.batch = nullptr;
    return out;
}

}  // namespace kiln::data
