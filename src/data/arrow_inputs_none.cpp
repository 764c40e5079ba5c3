// kiln built without Apache Arrow (no pyarrow wheel found at configure time):
// Parquet and Arrow inputs are refused with what to do.
#include "kiln/data/arrow_inputs.hpp"

#include "kiln/base/error.hpp"

namespace kiln::data {
namespace {

[[noreturn]] void refuse() {
    throw InputError("this kiln was built without Apache Arrow, so it reads no Parquet or Arrow files: ./bootstrap.sh "
                     "build installs the pyarrow wheel (whose C++ libraries kiln uses) into .deps/arrow and builds "
                     "again");
}

}  // namespace

bool haveArrow() { return false; }
std::vector<WorkUnit> planArrowUnits(const std::vector<std::string>&, InputFormat) { refuse(); }

struct ArrowDocumentReader::Batches {};
ArrowDocumentReader::ArrowDocumentReader(const WorkUnit&, InputFormat, const std::string&) { refuse(); }
ArrowDocumentReader::~ArrowDocumentReader() = default;
bool ArrowDocumentReader::holdsIds() const { return false; }
bool ArrowDocumentReader::next(Record&) { return false; }
bool ArrowDocumentReader::next(std::vector<std::uint32_t>&, std::uint32_t) { return false; }
std::string ArrowDocumentReader::location() const { return ""; }
std::uint64_t ArrowDocumentReader::consumed() const { return 0; }

}  // namespace kiln::data
