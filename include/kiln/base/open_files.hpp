// The process's limit on open files. Readers keep shard files open (up to
// data.open_shards per source); a soft limit of 1024, common on clusters,
// is raised towards the hard limit when the deck asks for more.
#pragma once

#include <cstddef>

namespace kiln::base {

// Raises the soft limit to at least `needed` (at most the hard limit).
// Returns the soft limit now in force.
std::size_t ensureOpenFiles(std::size_t needed);

}  // namespace kiln::base
