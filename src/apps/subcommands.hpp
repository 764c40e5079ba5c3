// The kiln subcommands. Each takes the arguments after its name and returns
// the process exit code; errors are thrown and reported by main.
#pragma once

namespace kiln::apps {

int runMain(int argc, char** argv);
int deckMain(int argc, char** argv);
int versionMain(int argc, char** argv);
int prepMain(int argc, char** argv);
int inspectMain(int argc, char** argv);
int dataMain(int argc, char** argv);
int diagMain(int argc, char** argv);
int profileMain(int argc, char** argv);
int planMain(int argc, char** argv);
int simulateMain(int argc, char** argv);
int checkpointMain(int argc, char** argv);
int exportMain(int argc, char** argv);
int importMain(int argc, char** argv);
int referenceMain(int argc, char** argv);
int launchRelayMain(int argc, char** argv);

}  // namespace kiln::apps
