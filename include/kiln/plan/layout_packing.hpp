// A layout as one row of integers and back: how a running job hands its
// current layout (the outcome of every regroup so far, not recomputable from
// the deck) to the processes that join it.
#pragma once

#include "kiln/base/packing.hpp"
#include "kiln/plan/layout.hpp"

namespace kiln::plan {

void packLayout(const Layout& layout, RowWriter& out);
Layout unpackLayout(RowReader& in);

}  // namespace kiln::plan
