// What kiln tells the launcher around it (kiln-mpirun, the jobscript), so that
// a job never ends silently (DESIGN.md invariant 10).
//
// Open MPI 5.0's runtime ends a whole job when it loses a host's daemon, and
// then mpirun may exit 0 or hang. So kiln-mpirun names a file in
// KILN_END_RECORD; the process that speaks for the job writes it as the job
// ends the way kiln decided (finished, requeue, an error every rank met):
//
//     kiln-end-record 1
//     status N
//     <what, one line>
//
// A launch that ends without it is a requeue (exit 75). While the job runs,
// the same process touches KILN_END_RECORD.alive every second; its first line
// says after how many silent seconds the launcher may take the job for hung
// (no speaker left: every process dead behind a launcher that does not exit).
//
// A side that stands down after a failure (it does not hold the job's quorum) leaves KILN_END_RECORD.stood_down:
// the quorum witness of its recovery and how long another side may take to claim it. No witness by then means
// that no side goes on (every side that lived stood down, or the one that could hold the quorum died meanwhile),
// and the launcher ends the job for a requeue then, not when the alive beacon's limit ends it (640 s and more).
//
// The launcher leaves what it learnt of a lost launch (the host, the runtime's
// words) in KILN_END_RECORD.lost, and so does a job kiln ended for a requeue;
// the next launch names it in KILN_LAUNCH_LOST, and the requeued run records
// it in diag.h5's /failures (cause "launch" or "deadline") and removes it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace kiln::io {

// Writes the end record when KILN_END_RECORD is set and this process speaks for the job. `nodeFailures`: the nodes
// this run lost; the launcher then waits only a few seconds for mpirun, whose runtime may wait for ever on the
// daemon of a host lost whole.
void writeEndRecord(int status, const std::string& what, std::uint64_t nodeFailures = 0);

// Ends the whole job for a requeue: a wait that no failure detector will end (a host that lost power or was
// cut off, whose processes Open MPI never declares failed) leaves every survivor stuck alike, and one that ended
// alone would leave the others to record healthy ranks as failed. This process says why (`why`), writes the end
// record with status 75 (whoever is first: every stuck process says the same), and aborts the job.
// `silentNodes`: the nodes of the peers it waited for, where known; the launcher's record of the loss names them,
// so that the requeued job is kept off them (the jobscript excludes them) and its /failures row says where.
[[noreturn]] void endJobForRequeue(const std::string& why, const std::vector<std::string>& silentNodes = {});

// The alive beacon's thread: from now until stopAliveBeacon (or exit), while
// this process speaks for the job. On every process it also watches the
// launcher's daemon on this host (the parent): once that is gone, the job is
// over for this process, which ends at once (an orphan must not train on). `staleAfterSeconds`: the silence after
// which the launcher may end the job. Nothing without KILN_END_RECORD.
void startAliveBeacon(double staleAfterSeconds);
void stopAliveBeacon();

// Written by one process of a side that stands down, just before it ends (nothing without KILN_END_RECORD, nor
// once another side has claimed the witness):
// `witness`, the quorum witness another side would claim for this recovery; `claimWithinSeconds`, how long that
// side may take to claim it; `why`, the side's own words.
void markStoodDown(const std::filesystem::path& witness, double claimWithinSeconds, const std::string& why);

struct LaunchLoss {
    std::string host;   // the host whose daemon the runtime lost ("" when it did not say)
    std::string cause;  // the launcher's words, or kiln's
    std::string kind = "launch";  // "launch": the launcher ended the job; "deadline": kiln did (endJobForRequeue)
};
// The loss the launcher recorded for the previous attempt, if any; the file is removed.
std::optional<LaunchLoss> takeLaunchLoss();

}  // namespace kiln::io
