// The commands that use libtorch (run, profile, plan, simulate, checkpoint,
// export, import) live in a module, kiln_torch, which kiln opens only when
// one of them is run: the others start without libtorch's libraries.
#pragma once

namespace kiln::apps {

// Runs command `name` of the module (loaded on the first call) with the
// arguments after the name; its exit code. Throws Error when the module
// cannot be loaded, naming its path.
int runTorchCommand(const char* name, int argc, char** argv);

}  // namespace kiln::apps
