#!/usr/bin/env python3
"""No collateral deaths (issue 50): the ranks a fault run lost are exactly the victims its schedule chose.

A run is judged on three records, none of which alone is enough:
  chosen     the victims the schedule chose and that were hit: the log's "fault injection: killing|stopping|this
             thread sleeps forever" lines, an injected exception's "kiln: error on rank N ...: fault injection:",
             and outside kills that landed (given by the caller)
  recorded   the ranks of diag.h5's /failures rows
  ended      the start-up ranks 0..N-1 missing from the "survivors" event kiln writes when it stops (finished,
             stopped beyond f or on request): every process that ended, with a /failures row or without
Pass: recorded == chosen and ended is within chosen. A rank in recorded or ended that was not chosen is a collateral
death, whatever the losses. A collateral death whose process crashed inside Open MPI (its backtrace, printed by Open
MPI's signal handler, runs through the library's communicator code and through no kiln frame) is named apart as
the runtime's, with its stack; it still fails the run.

  victims.py KILN DIAG_H5 LOG RANKS [--outside 3,5] [--since T]    prints one VICTIMS line; exit 1 on a problem
"""
import argparse
import json
import re
import subprocess
import sys

_CHOSEN = [
    re.compile(r"\[rank (\d+) on [^]]*\]: fault injection: (killing|stopping|this thread sleeps forever)"),
    re.compile(r"kiln: error on rank (\d+) \([^)]*\): fault injection:"),
    # A job rank whose connect to joiners never ended is ended by kiln's admission deadline on purpose (the
    # schedule killed a peer during it).
    re.compile(r"kiln: rank (\d+) \([^)]*\): taking the admitted processes in made no progress"),
    # The ranks of a node the survivors condemned for wrong numbers (issue 66) end themselves: the test that injected
    # the fault checks the node named is the one it chose.
    re.compile(r"\[rank (\d+) on [^]]*\]: step \d+: this rank's node computed wrong numbers; its processes end"),
]
# Frames of Open MPI's failure-notice and shrink path (DESIGN.md: the shrink crash of 5.0.10).
_OMPI_FRAMES = re.compile(r"ompi_comm_(shrink|activate|set_rank_failed|revoke)|MPIX_Comm_(shrink|agree)|libmpi\.so")
# Frames of kiln's own code: its executable, its libtorch module, or a kiln symbol (not a path that merely
# contains the word, as a checkout in ~/kiln would).
_KILN_FRAMES = re.compile(r"_ZN4kiln|kiln::|/kiln\(|kiln_torch\.so")


def chosen_in(log_text):
    ranks = set()
    for line in log_text.splitlines():
        if line.rstrip().endswith(" in ready"):
            continue  # a process started to join, killed before it joined: never a member, nothing to record
        for pattern in _CHOSEN:
            m = pattern.search(line)
            if m:
                ranks.add(int(m.group(1)))
    return ranks


def parse_ranges(text):
    """ "0-1,4,6-7" -> {0, 1, 4, 6, 7}"""
    out = set()
    for part in filter(None, text.split(",")):
        first, _, last = part.partition("-")
        out.update(range(int(first), int(last or first) + 1))
    return out


def crash_stacks(log_text):
    """Backtraces Open MPI's signal handler printed: [(signal line, frames)]."""
    stacks, current = [], None
    for line in log_text.splitlines():
        if "*** Process received signal ***" in line:
            current = ["", []]
            stacks.append(current)
        elif current is not None and "Signal:" in line and not current[0]:
            current[0] = line.split("]", 1)[-1].strip()
        elif current is not None and re.search(r"\[ *\d+\] ", line):
            current[1].append(line.split("] ", 2)[-1].strip())
        elif current is not None and "*** End of error message ***" in line:
            current = None
    return stacks


def runtime_crash(stack):
    """Whether a crash is Open MPI's own: its frames run through the library's communicator code, none through kiln."""
    frames = stack[1]
    return any(_OMPI_FRAMES.search(f) for f in frames) and not any(_KILN_FRAMES.search(f) for f in frames)


def judge(kiln, diag_path, log_path, ranks, outside=(), since=0.0):
    """(problems, facts): problems empty when no rank but the chosen victims was lost. Rows older than `since`
    (seconds since the epoch) are an earlier run's that this one resumed, and are not judged."""
    with open(log_path, errors="replace") as f:
        log_text = f.read()
    chosen = chosen_in(log_text) | set(outside)
    facts = {"chosen": sorted(chosen)}
    try:
        diag = json.loads(subprocess.run([kiln, "diag", diag_path, "--json"], capture_output=True, text=True,
                                         check=True).stdout)
    except (subprocess.CalledProcessError, json.JSONDecodeError, OSError) as e:
        return [f"diag.h5 unreadable: {e}"], facts
    recorded = set()
    for row in (r for r in diag.get("failures", []) if r["time"] >= since):
        recorded |= {int(r) for r in row["failed_ranks"].split(",") if r}
    facts["recorded"] = sorted(recorded)
    survivors = [e for e in diag.get("events", []) if e["kind"] == "survivors" and e["time"] >= since]
    problems = []
    ended = set()
    if not survivors:
        problems.append("no survivors event in diag.h5 (kiln did not stop as it should)")
    else:
        ended = set(range(ranks)) - parse_ranges(survivors[-1]["detail"])
    facts["ended"] = sorted(ended)
    if recorded != chosen:
        problems.append(f"/failures names ranks {sorted(recorded)}, the schedule's victims are {sorted(chosen)}")
    collateral = (ended | recorded) - chosen
    facts["collateral"] = sorted(collateral)
    if collateral:
        stacks = crash_stacks(log_text)
        ours = [s for s in stacks if not runtime_crash(s)]
        theirs = [s for s in stacks if runtime_crash(s)]
        if theirs and not ours:
            facts["cause"] = "openmpi"
            problems.append(f"collateral deaths {sorted(collateral)}: Open MPI crashed inside the library "
                            f"({theirs[0][0]}; {' <- '.join(theirs[0][1][:6])})")
        else:
            facts["cause"] = "kiln"
            problems.append(f"collateral deaths {sorted(collateral)}: ranks the schedule did not choose ended")
    return problems, facts


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kiln")
    parser.add_argument("diag")
    parser.add_argument("log")
    parser.add_argument("ranks", type=int)
    parser.add_argument("--outside", default="", help="ranks killed from outside (comma-separated)")
    parser.add_argument("--since", type=float, default=0.0, help="the run's start (seconds since the epoch): older "
                        "rows are those of a run it resumed")
    args = parser.parse_args()
    outside = {int(r) for r in args.outside.split(",") if r}
    problems, facts = judge(args.kiln, args.diag, args.log, args.ranks, outside, args.since)
    line = " ".join(f"{k}={','.join(map(str, v)) if isinstance(v, list) else v}" for k, v in facts.items())
    print(f"VICTIMS {line}" + (f" PROBLEM: {'; '.join(problems)}" if problems else " ok"))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
