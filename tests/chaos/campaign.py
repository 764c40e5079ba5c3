#!/usr/bin/env python3
"""A chaos campaign against kiln's recovery: random failure schedules, each checked against the failure-free run.

Every schedule runs the tiny deck on 8 ranks as 4 emulated nodes of 2, fault.f = 2, pipelines 2+1+1, 12 steps with a
checkpoint every 4, and loses at most 2 nodes (within f): every schedule must be survived. Kinds of schedule, drawn
at random with random ranks, steps and phases:
  one        one rank killed (SIGKILL) in a random phase of a random step
  pair       two ranks of different nodes killed in the same step
  recovery   a second node's rank killed inside the recovery from the first (phase regroup or migrate)
The ranks a run is checked for are those its log shows killed: an injection whose step or phase is no longer
reached once an earlier failure moved the run on does not fire.
  timed      one rank killed by injection, a rank of another node killed from outside 0-10 ms after it died
  stop       a rank stopped (SIGSTOP, a hung process), found by the heartbeat detector
  rank0      rank 0 (which writes checkpoints and diag.h5) killed
  checkpoint a rank killed just before a checkpoint write
  write      a rank killed in its background write of a checkpoint's part (or rank 0 while it publishes it)
  throw      an exception from outside kiln on one rank (a local error), then maybe a kill on another node
  second     a second node's rank killed in a random phase of the recovery from the first: agree (a round's
             start), regroup (after the shrink), migrate (before the layers move), received (after its first
             migrated atom arrived), migrated (before the new layout's commit) or rebuild (after it)
  migration  as second, in a phase of the layers' migration (migrate, received, migrated, rebuild)
  third      as second, and a third node's rank in another phase of the same recovery (with f = 2 on 4 nodes
             this may leave some layer without a holder: then the run must stop for a requeue, see below)
  replay     a second node's rank killed in the replay of the failed step (its commit, which the first attempt
             never reached)
  corrupt    a rank's first activation or gradient sent in a step with a flipped exponent bit (silent corruption,
             issue 66): the step's rerun parts from the first at that rank and its node is retired; maybe a rank of
             another node killed in that recovery
  nan        a NaN in a rank's loss, once (strikes only where the rank is a last stage: else a failure-free run)
  flip       the exponent's top bit of a value of a rank's parameters flipped as a step after the first checkpoint
             starts (memory): flagged in its step, or found by the replicas' next comparison; either way the
             outvoted copy's node is retired and the survivors return to the last checkpoint (numerics.rollback),
             or with two holders the job stops for a requeue
  drift      as flip, its exponent's second bit: a weight made nearly 0, which no step check sees; only the
             comparison before the next checkpoint finds it; maybe a rank of another node killed in the rollback
(flip and drift strike after the first checkpoint, which a rollback needs: before it the steps the copy entered are
kept, and the losses part from the failure-free run's, as this campaign's seed 67 showed before the rollback.)
With --wide (issue 37, item 4) each run also draws its job, and four more kinds:
  jobs       8 ranks as 4 nodes of 2 with 2+1+1 pinned (the above); 8 ranks as 4 nodes of 2, 6 ranks as 6 nodes,
             12 and 16 ranks as 6 and 8 nodes of 2, each with nothing pinned: a profile measured at start-up, the
             planner's layout and stage widths (fault.f = 2); 6 ranks as 3 nodes of 2 with 2+1 pinned and f = 1 (two
             failures are beyond f there); 16 ranks as 8 nodes of 2 with 2+2+2+1+1 pinned
  admit      a node asked for (RUN/admit) at a random moment, maybe a rank of another node killed later
  admitkill  a node asked for, and a rank of the job killed from outside 0-20 ms after rank 0 took the request
             (while the new processes are spawned and merged)
  duty       one rank stopped and continued (SIGSTOP/SIGCONT) 30-80 ms of every 100 ms for 2-4 s: a straggler
             by duty cycle, which the speed monitor may rebalance around; no failure (fault.hang_timeout_s = 4)
  straggle   one rank lagging (fault.inject slow=) for some steps: retired as a straggler and maybe taken back
With --models dense,experts (issue 54) each run also draws its model: the tiny deck's GPT (dense) or a llama whose
blocks hold 4 experts of which 2 per token (experts), spread over the ranks of the wide stages; each model's runs are
checked against its own failure-free run.
Checks per run: exit status 0 within the time limit (else: hung), or 75 (beyond f: stopped for a requeue) after which
the same command without its injections resumes the run and exits 0; every step's loss and gradient norm equal to the
failure-free run's to 1e-5 relative; no collateral death (tests/fault/victims.py: /failures names exactly the
victims the schedule chose and hit, and no other start-up rank is missing from kiln's "survivors" event); no
temporary file left in ckpt/, no kiln process left once mpirun has returned. A collateral death whose stack shows
Open MPI's own crash (inside the library's communicator code, no kiln frame) is said on its own line and counted
apart (openmpi_crash), not hidden among kiln's. Runs where MPI_Finalize did not return and kiln's exit watchdog (fault.finalize_timeout_s, 20 s)
ended the ranks (Open MPI's hang after failures, issue 19 item 3) survive but are counted apart: finalize_watchdog. Prints one line per run, then
  CHAOS runs=N survived=S crashed=C collateral=K openmpi_crash=O hung=H requeued=R max_loss_diff=D finalize_watchdog=W
        outside_kills_missed=M
(crashed: every failed run, K of them with collateral deaths from kiln's code and O with Open MPI's own crash;
R: survived runs that went through a requeue; M: outside kills that found no process, said on their run's line:
such a run tested less than it says) and exits 1 unless every run survived. --lead KIND makes the first run of that
kind (chaos_short leads with a second failure during the migration).

  python3 tests/chaos/campaign.py KILN MPIRUN DATA WORK --seed 1 --runs 200
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fault"))
import victims  # noqa: E402  (tests/fault/victims.py: the no-collateral rule every fault test applies)

RANKS, PER_NODE, STEPS = 8, 2, 12
PHASES = ["forward", "backward", "send", "allreduce", "sums", "commit", "optimizer"]
LIMIT_S = 180


def node(rank):
    return rank // PER_NODE


# Jobs a --wide campaign draws from: (name, ranks, ranks per node, settings). The first is the classic one.
PINNED = ("pinned 8x2", 8, 2, ["plan.pipelines=2+1+1"])
UNPINNED = ["plan.pipelines=", "plan.stage_width=0", "plan.device_tflops=0"]
JOBS = [PINNED, ("unpinned 8x2", 8, 2, UNPINNED), ("unpinned 6x1", 6, 1, UNPINNED), ("unpinned 12x2", 12, 2, UNPINNED),
        ("pinned 6x2 f=1", 6, 2, ["plan.pipelines=2+1", "fault.f=1"]), ("pinned 16x2", 16, 2, ["plan.pipelines=2+2+2+1+1"]),
        ("unpinned 16x2", 16, 2, UNPINNED)]
# The models a campaign draws from (--models): the deck's, or a mixture of experts.
MODELS = {"dense": [], "experts": ["model.family=llama", "model.kv_heads=2", "model.experts=4", "model.experts_per_token=2",
                                   "model.expert_hidden=48", "model.router_z_loss=0.001"]}


def with_model(job, model):
    """The job training `model`: its settings added, its name saying so."""
    name, ranks, per_node, settings = job
    return job if model == "dense" else (f"{name} {model}", ranks, per_node, settings + MODELS[model])


# The phases of a recovery a second or third failure is put in (fault_injector.hpp).
RECOVERY_PHASES = ["agree", "regroup", "migrate", "received", "migrated", "rebuild"]
# Straggler settings of the wide jobs: decisions within the 12 steps (as tests/fault/stragglers.sh sets them).
STRAGGLERS = ["straggler.steps=3", "straggler.retire_at=4", "straggler.retire_steps=4"]


def command(args, out, inject, job=PINNED):
    _, ranks, per_node, settings = job
    sets = [f"run.out_dir={out}", f"data.dir={args.data}", "data.mix=licenses:1", "data.tokenizer=bytes",
            "train.grad_clip=0", f"run.steps={STEPS}", "checkpoint.every=4", f"cluster.ranks_per_node={per_node}",
            "fault.f=2", "fault.hang_timeout_s=4", f"fault.inject={inject}"] + settings
    if args.wide:
        sets += STRAGGLERS
    cmd = [args.mpirun, "-n", str(ranks), "--oversubscribe", "--with-ft", "ulfm", args.kiln, "run", "input/tiny-cpu.ini"]
    for s in sets:
        cmd += ["--set", s]
    return cmd


def draw(rng, wide=False, ranks=RANKS, per_node=PER_NODE, only=None):
    """A schedule: (kind, fault.inject text, ranks killed, outside action or None). An outside action is
    ("kill", rank, delay) after the first injected kill, ("admitkill", rank, delay) after rank 0 took an admission
    request, or ("duty", rank, stopped share, seconds)."""
    kinds = ["one", "pair", "recovery", "second", "migration", "third", "replay", "timed", "stop", "rank0", "checkpoint", "write",
             "throw", "corrupt", "nan", "flip", "drift"]
    if wide:
        kinds += ["admit", "admitkill", "duty", "straggle"]
    kind = rng.choice([k for k in kinds if not only or k in only])
    a = rng.randrange(ranks)
    b = rng.choice([r for r in range(ranks) if r // per_node != a // per_node])
    third = rng.choice([r for r in range(ranks) if r // per_node not in (a // per_node, b // per_node)] or [b])
    step = rng.randrange(1, STEPS - 1)
    phase = rng.choice(PHASES)
    outside = None
    if kind == "one":
        items, killed = [f"{a}:{step}:{phase}"], {a}
    elif kind == "pair":
        items, killed = [f"{a}:{step}:{phase}", f"{b}:{step}:{rng.choice(PHASES)}"], {a, b}
    elif kind == "recovery":  # the first failure must be noticed in its own step, for the recovery to be at that step
        first = rng.choice(["forward", "backward", "send", "allreduce", "sums"])
        items, killed = [f"{a}:{step}:{first}", f"{b}:{step}:{rng.choice(['regroup', 'migrate'])}"], {a, b}
    elif kind in ("second", "migration", "third"):
        first = rng.choice(["forward", "backward", "send", "allreduce", "sums"])
        phases = rng.sample(RECOVERY_PHASES[2:] if kind == "migration" else RECOVERY_PHASES, 2)
        items, killed = [f"{a}:{step}:{first}", f"{b}:{step}:{phases[0]}"], {a, b}
        if kind == "third":
            items.append(f"{third}:{step}:{phases[1]}")
            killed.add(third)
    elif kind == "replay":
        items, killed = [f"{a}:{step}:{rng.choice(['forward', 'backward', 'send'])}", f"{b}:{step}:commit"], {a, b}
    elif kind == "timed":
        items, killed, outside = [f"{a}:{step}:{phase}"], {a, b}, ("kill", b, rng.uniform(0.0, 0.010))
    elif kind == "admit":
        items, killed = [], set()
        if rng.random() < 0.5:
            items, killed = [f"{a}:{rng.randrange(6, STEPS - 1)}:{phase}"], {a}
        outside = ("admit", None, rng.uniform(0.0, 3.0))
    elif kind == "admitkill":
        items, killed, outside = [], {a}, ("admitkill", a, rng.uniform(0.0, 0.020))
    elif kind == "duty":
        items, killed, outside = [], set(), ("duty", a, rng.uniform(0.3, 0.8), rng.uniform(2.0, 4.0))
    elif kind == "straggle":
        last = rng.choice([step + 3, STEPS])  # over at some step (it may come back), or to the end
        items, killed = [f"{a}:{step}-{last}:slow={rng.choice([0.05, 0.1])}"], set()
    elif kind == "corrupt":
        items, killed = [f"{a}:{step}:corrupt"], {a}
        if rng.random() < 0.3:  # a second failure inside the recovery that retires the corrupting node
            items.append(f"{b}:{step}:{rng.choice(['regroup', 'migrate'])}")
            killed.add(b)
    elif kind == "nan":
        items, killed = [f"{a}:{step}:{kind}"], {a}
    elif kind in ("flip", "drift"):  # after the first checkpoint (step 4), which a rollback returns to
        at = rng.randrange(5, STEPS - 1)
        items, killed = [f"{a}:{at}:{kind}"], {a}
        if kind == "drift" and rng.random() < 0.3:  # a second failure in the rollback, found before step 8 or the end
            items.append(f"{b}:{8 if at < 8 else STEPS}:rollback")
            killed.add(b)
    elif kind == "stop":
        items, killed = [f"{a}:{step}:{phase}:stop"], {a}
    elif kind == "rank0":
        items, killed = [f"0:{step}:{phase}"], {0}
    elif kind == "checkpoint":
        items, killed = [f"{a}:{rng.choice([3, 7])}:checkpoint"], {a}
    elif kind == "write":  # the checkpoints after steps 3 and 7: written in the background, published steps later
        item = f"0:{rng.choice([3, 7])}:publish" if rng.random() < 0.3 else f"{a}:{rng.choice([3, 7])}:write"
        items, killed = [item], {int(item.split(":")[0])}
    else:
        items, killed = [f"{a}:{step}:{phase}:throw"], {a}
        if rng.random() < 0.5:
            items.append(f"{b}:{rng.randrange(step, STEPS - 1)}:{rng.choice(PHASES)}")
            killed.add(b)
    return kind, ",".join(items), killed, outside


def pid_of(rank, out):
    """The process of start-up rank `rank` in the run writing to `out`."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
            # mpirun's command line names the directory too, but only a rank has a rank in its environment.
            if f"run.out_dir={out}".encode() not in cmd:
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                if f"OMPI_COMM_WORLD_RANK={rank}".encode() in f.read().split(b"\0"):
                    return int(pid)
        except OSError:
            continue
    return None


def leftover_processes(out):
    return [p for p in os.listdir("/proc") if p.isdigit() and _is_kiln_of(p, out)]


def _is_kiln_of(pid, out):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().split(b"\0")
        return cmd[0].endswith(b"kiln") and f"run.out_dir={out}".encode() in cmd
    except OSError:
        return False


def losses(args, out):
    text = subprocess.run([args.kiln, "diag", f"{out}/tiny/diag.h5", "--losses"], capture_output=True, text=True,
                          check=True).stdout
    return [tuple(float(x) for x in line.split()) for line in text.splitlines() if line.strip()]


def run(args, out, inject, outside, log_path, landed=None, job=PINNED):
    """Runs kiln; returns (exit status or None when it hung, seconds). Outside kills that landed go into `landed`."""
    env = dict(os.environ, PRTE_MCA_state_base_recoverable="1")
    t0 = time.time()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(command(args, out, inject, job), stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True, cwd=args.source)
        if outside:
            what, rest = outside[0], outside[1:]
            target = {"kill": kill_after_first_death, "admit": admit_after, "admitkill": kill_during_admission,
                      "duty": duty_cycle}[what]
            threading.Thread(target=target, args=(log_path, out, proc, landed) + rest, daemon=True).start()
        try:
            status = proc.wait(timeout=LIMIT_S)
        except subprocess.TimeoutExpired:
            describe_hang(out, log_path + ".hang")
            os.killpg(proc.pid, signal.SIGKILL)
            for pid in leftover_processes(out):
                os.kill(int(pid), signal.SIGKILL)
            proc.wait()
            status = None
    return status, time.time() - t0


def describe_hang(out, path):
    """What a hung run's processes were doing, into `path`: each kiln rank still alive with its state and, where
    gdb is installed, its threads' stacks; none alive means the launcher itself hung after the ranks ended."""
    pids = leftover_processes(out)
    with open(path, "w") as f:
        f.write(f"{len(pids)} kiln process(es) of {out} alive at the time limit\n")
        for pid in pids:
            try:
                with open(f"/proc/{pid}/environ", "rb") as e:
                    env = dict(x.split(b"=", 1) for x in e.read().split(b"\0") if b"=" in x)
                with open(f"/proc/{pid}/stat") as st:
                    state = st.read().split(") ", 1)[1].split()[0]
            except OSError:
                continue
            rank = env.get(b"OMPI_COMM_WORLD_RANK", b"?").decode()
            f.write(f"\n=== rank {rank} pid {pid} state {state}\n")
            if shutil.which("gdb"):
                f.flush()
                try:
                    subprocess.run(["gdb", "-p", pid, "-batch", "-ex", "thread apply all bt 15"], stdout=f,
                                   stderr=subprocess.DEVNULL, timeout=60, check=False)
                except subprocess.TimeoutExpired:
                    f.write("(gdb gave no stacks within 60 s)\n")


def kill_after_first_death(log_path, out, proc, landed, rank, delay):
    """SIGKILLs `rank` `delay` seconds after the log shows the first injected kill; adds it to `landed` if it did."""
    target = None
    while proc.poll() is None:
        if target is None:
            target = pid_of(rank, out)
        with open(log_path, errors="replace") as f:
            if "fault injection: killing this process" in f.read():
                break
        time.sleep(0.0005)
    time.sleep(delay)
    kill_landed(target, rank, proc, landed)


def kill_landed(target, rank, proc, landed):
    """SIGKILLs process `target` (start-up rank `rank`) while the run goes on; adds the rank to `landed` if it did."""
    if target is not None and proc.poll() is None:
        try:
            os.kill(target, signal.SIGKILL)
            landed.add(rank)
        except ProcessLookupError:
            pass


def wait_for_first_step(log_path, proc):
    while proc.poll() is None:
        with open(log_path, errors="replace") as f:
            if re.search(r"step +1/", f.read()):
                return
        time.sleep(0.01)


def admit_after(log_path, out, proc, landed, _rank, delay):
    """Asks for one more node (RUN/admit) `delay` seconds after the run's first step."""
    wait_for_first_step(log_path, proc)
    time.sleep(delay)
    os.makedirs(os.path.join(out, "tiny"), exist_ok=True)
    with open(os.path.join(out, "tiny", "admit"), "w") as f:
        f.write("1\n")


def kill_during_admission(log_path, out, proc, landed, rank, delay):
    """Asks for a node after the first step, then SIGKILLs `rank` `delay` s after rank 0 took the request."""
    admit_after(log_path, out, proc, landed, None, 0.0)
    target = pid_of(rank, out)
    request = os.path.join(out, "tiny", "admit")
    while proc.poll() is None and os.path.exists(request):
        time.sleep(0.0005)
    time.sleep(delay)
    kill_landed(target, rank, proc, landed)


def duty_cycle(log_path, out, proc, landed, rank, stopped, seconds):
    """Stops and continues `rank` (`stopped` of every 100 ms) for `seconds`, from its first step on."""
    wait_for_first_step(log_path, proc)
    target = pid_of(rank, out)
    end = time.time() + seconds
    while target is not None and proc.poll() is None and time.time() < end:
        try:
            os.kill(target, signal.SIGSTOP)
            time.sleep(0.1 * stopped)
            os.kill(target, signal.SIGCONT)
        except ProcessLookupError:
            return
        time.sleep(0.1 * (1.0 - stopped))
    try:
        os.kill(target, signal.SIGCONT)
    except (ProcessLookupError, TypeError):
        pass


def killed_in(log_path, outside_done):
    """The victims the run's log shows hit (killed, stopped, hung, an injected exception, a joiner ended by the spawn's
    deadline) and the outside kill if it landed: a scheduled injection may never fire once an earlier failure moved
    things on. A rank that ended alone for any other reason is no victim: it is a collateral death."""
    with open(log_path, errors="replace") as f:
        return victims.chosen_in(f.read()) | outside_done


def check(args, out, reference, killed, status, log_path, job, since):
    """The problems of a finished run (empty: survived), its largest relative loss difference, and the cause of
    its collateral deaths if it had any ("kiln" or "openmpi")."""
    problems = []
    if status != 0:
        problems.append(f"exit status {status}")
    diff = 0.0
    try:
        mine = {int(s): (l, g) for s, l, g in losses(args, out)}
        missing = [int(s) for s, _, _ in reference if int(s) not in mine]
        if missing or len(mine) != len(reference):
            problems.append(f"{len(mine)} steps recorded, not {len(reference)} (missing: {missing})")
        for s, rl, rg in reference:
            if int(s) not in mine:
                continue
            l, g = mine[int(s)]
            d = max(abs(l - rl) / abs(rl), abs(g - rg) / abs(rg))
            diff = max(diff, d)
            if d > 1e-5:
                problems.append(f"step {int(s)}: loss {l} vs {rl}, |g| {g} vs {rg}")
                break
    except (subprocess.CalledProcessError, ValueError) as e:
        problems.append(f"diag.h5 unreadable: {e}")
    cause = None
    judged, facts = victims.judge(args.kiln, f"{out}/tiny/diag.h5", log_path, job[1], killed, since)
    problems += judged
    if facts.get("collateral"):
        cause = facts.get("cause", "kiln")
    ckpt = os.path.join(out, "tiny", "ckpt")
    temporaries = [f for f in os.listdir(ckpt) if ".tmp" in f] if os.path.isdir(ckpt) else []
    if temporaries:
        problems.append(f"temporary files left: {temporaries}")
    time.sleep(0.5)
    if leftover_processes(out):
        problems.append("kiln processes left after mpirun returned")
    return problems, diff, cause


def describe_outside(outside):
    if not outside:
        return ""
    if outside[0] == "kill":
        return f" + rank {outside[1]} killed {1e3 * outside[2]:.1f} ms after"
    if outside[0] == "admit":
        return f" + a node asked for {outside[2]:.1f} s after step 1"
    if outside[0] == "admitkill":
        return f" + a node asked for, rank {outside[1]} killed {1e3 * outside[2]:.1f} ms after rank 0 took the request"
    return f" + rank {outside[1]} stopped {100 * outside[2]:.0f} % of each 100 ms for {outside[3]:.1f} s"


def finalize_watchdogs(log_path):
    """How many ranks of a run kiln's exit watchdog ended because MPI_Finalize did not return (issue 19 item 3)."""
    with open(log_path, errors="replace") as log:
        return sum("MPI_Finalize did not return" in line for line in log)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kiln")
    parser.add_argument("mpirun")
    parser.add_argument("data")
    parser.add_argument("work")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--keep", action="store_true", help="keep the output of runs that survived")
    parser.add_argument("--wide", action="store_true",
                        help="draw the job too (pinned and unpinned, measured profiles, 6-16 ranks) and admissions, duty cycles, "
                             "stragglers")
    parser.add_argument("--models", default="dense", help="draw each run's model from these (dense, experts)")
    parser.add_argument("--kinds", default="", help="draw only these kinds (comma-separated), e.g. admitkill")
    parser.add_argument("--lead", default="", help="the first run is of this kind, e.g. second")
    parser.add_argument("--source", default=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    args = parser.parse_args()
    args.kiln, args.data, args.work = (os.path.abspath(p) for p in (args.kiln, args.data, args.work))
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)

    models = [m for m in args.models.split(",") if m]
    unknown = [m for m in models if m not in MODELS]
    if unknown or not models:
        sys.exit(f"FAIL: --models {args.models}: the models are {', '.join(MODELS)}")
    references = {}
    for model in models:  # each model's failure-free run
        clean = os.path.join(args.work, f"clean-{model}")
        status, _ = run(args, clean, "", None, clean + ".log", job=with_model(PINNED, model))
        if status != 0:
            sys.exit(f"FAIL: the failure-free run of the {model} model exited with {status} (see {clean}.log)")
        references[model] = losses(args, clean)

    rng = random.Random(args.seed)
    counts = {"survived": 0, "crashed": 0, "hung": 0, "collateral": 0, "openmpi": 0, "requeued": 0}
    by_kind = {}
    watchdog_runs = 0
    missed = 0  # outside kills that found no process to kill (the run ended first, or no such rank)
    worst = 0.0
    only = [k for k in args.kinds.split(",") if k]
    for i in range(args.runs):
        job = rng.choice(JOBS) if args.wide else PINNED
        kind, inject, _, outside = draw(rng, args.wide, job[1], job[2], [args.lead] if args.lead and i == 0 else only)
        model = rng.choice(models) if len(models) > 1 else models[0]
        job, reference = with_model(job, model), references[model]
        out = os.path.join(args.work, f"run{i:03d}")
        landed = set()
        since = time.time()
        status, seconds = run(args, out, inject, outside, out + ".log", landed, job)
        killed = killed_in(out + ".log", landed)
        what = f"{kind:<10} {inject}" + describe_outside(outside)
        if args.wide:
            what = f"[{job[0]}] {what}"
        elif model != "dense":
            what += f" [{model}]"
        if outside and outside[0] in ("kill", "admitkill") and outside[1] not in landed:
            missed += 1
            what += " [the outside kill did not land]"
        tally = by_kind.setdefault((job[0], kind), [0, 0])
        tally[0] += 1
        if status is None:
            counts["hung"] += 1
            print(f"run {i:3d} HUNG     {what} ({seconds:.0f} s; {out}.log, its processes in {out}.log.hang)", flush=True)
            continue
        problems, cause = [], None
        if status == 75:
            # Beyond f: the failures recorded and no one else lost; then the requeue (the same command without
            # the schedule, fresh processes) resumes from `latest` and must finish.
            judged, facts = victims.judge(args.kiln, f"{out}/tiny/diag.h5", out + ".log", job[1], killed, since)
            problems += [f"the stop beyond f: {p}" for p in judged]
            if facts.get("collateral"):
                cause = facts.get("cause", "kiln")
            what += " [beyond f: requeued]"
            since = time.time()
            status, more = run(args, out, "", None, out + ".requeue.log", set(), job)
            seconds += more
            if status is None:
                counts["hung"] += 1
                print(f"run {i:3d} HUNG     {what}: the requeue hung ({out}.requeue.log)", flush=True)
                continue
            killed, log_path = set(), out + ".requeue.log"
        else:
            log_path = out + ".log"
        found, diff, found_cause = check(args, out, reference, killed, status, log_path, job, since)
        problems += found
        cause = cause or found_cause
        if status is not None and status < 0 and found == [f"exit status {status}"] and not cause:
            # Every rank trained to the end with the failure-free losses and no collateral death, but the launcher
            # (Open MPI's prterun) itself ended on a signal: the runtime's crash, not kiln's. A jobscript still
            # sees a failed job, so it fails the campaign, on a line of its own.
            cause = "openmpi"
            problems = [f"mpirun (prterun) ended on signal {-status} after the job's ranks finished"]
        worst = max(worst, diff)
        watchdogs = finalize_watchdogs(out + ".log")
        watchdog_runs += watchdogs > 0
        if watchdogs:
            what += f" [MPI_Finalize cut short by the exit watchdog on {watchdogs} rank(s)]"
        if problems:
            counts["crashed"] += 1
            if cause == "openmpi":
                counts["openmpi"] += 1
                print(f"run {i:3d} OPENMPI  {what}: Open MPI's own crash, not kiln's: {'; '.join(problems)} ({out}.log)",
                      flush=True)
            else:
                counts["collateral"] += cause == "kiln"
                print(f"run {i:3d} FAILED   {what}: {'; '.join(problems)} ({out}.log)", flush=True)
        else:
            counts["survived"] += 1
            counts["requeued"] += "[beyond f" in what
            tally[1] += 1
            print(f"run {i:3d} survived {what} ({seconds:.1f} s, max diff {diff:.1e})", flush=True)
            if not args.keep:
                shutil.rmtree(out, ignore_errors=True)
    if args.wide:
        for (job, kind), (runs, survived) in sorted(by_kind.items()):
            print(f"TABLE job={job.replace(' ', '_')} kind={kind} runs={runs} survived={survived}")
    print(f"CHAOS runs={args.runs} survived={counts['survived']} crashed={counts['crashed']} "
          f"collateral={counts['collateral']} openmpi_crash={counts['openmpi']} hung={counts['hung']} "
          f"requeued={counts['requeued']} max_loss_diff={worst:.2e} finalize_watchdog={watchdog_runs} "
          f"outside_kills_missed={missed} seed={args.seed}")
    sys.exit(0 if counts["survived"] == args.runs else 1)

if __name__ == "__main__":
    main()
