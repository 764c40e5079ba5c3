// kiln's own run-time modules (the SentencePiece module, kiln_torch): found
// next to an installed kiln (<prefix>/lib/kiln beside <prefix>/bin/kiln),
// else where the build wrote them, unless an environment variable names one.
#pragma once

namespace kiln::base {

// dlopen of the module built at `builtPath`, with `flags`; `envVar`, when
// set, names the file instead. Throws Error (this rank) naming the path,
// dlerror()'s reason and `envVar`, with `what` the module in words.
void* openKilnModule(const char* what, const char* envVar, const char* builtPath, int flags);

}  // namespace kiln::base
