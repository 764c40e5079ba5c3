"""Reads kiln's event files with TensorBoard's own reader (tests/cli/tensorboard.sh).

live DIR LOSSES DIAG_JSON FIRST_LOSSES: the scalars against `kiln diag --losses` (FIRST_LOSSES: the first
attempt's, whose redone steps must be gone) and the timeline against diag.h5's summary.
same DIR_A DIR_B: both directories hold the same tags, steps and values.
"""
import json
import math
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def load(directory):
    acc = EventAccumulator(directory, size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    return acc


def fail(message):
    print("FAIL:", message)
    sys.exit(1)


def as_float32(x):
    import struct
    return struct.unpack("f", struct.pack("f", x))[0]


def scalars(acc, tag):
    return {e.step: e.value for e in acc.Scalars(tag)}


def texts(acc, tag):
    return {e.step: e.tensor_proto.string_val[0].decode() for e in acc.Tensors(tag)}


def read_losses(path):
    out = {}
    for line in open(path):
        step, loss, norm = line.split()
        out[int(step)] = (float(loss), float(norm))
    return out


def live(directory, losses_path, diag_path, first_path):
    acc = load(directory)
    tags = acc.Tags()
    expected, first = read_losses(losses_path), read_losses(first_path)
    redone = [s for s in (9, 10, 11) if first[s] != expected[s]]
    if not redone:
        fail("the resumed run's steps 9-11 equal the first attempt's: the test cannot tell them apart")
    loss, norm = scalars(acc, "train/loss"), scalars(acc, "train/grad_norm")
    if sorted(loss) != sorted(expected) or sorted(expected) != list(range(16)):
        fail("steps %s in TensorBoard, %s in diag.h5" % (sorted(loss), sorted(expected)))
    for step, (l, n) in expected.items():
        if loss[step] != as_float32(l) or norm[step] != as_float32(n):
            fail("step %d: TensorBoard %r %r, diag.h5 %r %r" % (step, loss[step], norm[step], l, n))
    diag = json.load(open(diag_path))
    failures = diag["failures"]
    if len(failures) != 1:
        fail("expected one failure in diag.h5, found %d" % len(failures))
    fstep = failures[0]["step"]
    lost = scalars(acc, "kiln/failure/nodes_lost")
    if lost != {fstep: 1.0}:
        fail("kiln/failure/nodes_lost %r, diag.h5's failure at step %d" % (lost, fstep))
    if "cause **process**" not in texts(acc, "kiln/failure").get(fstep, ""):
        fail("the failure's text: %r" % texts(acc, "kiln/failure"))
    for kind, step in (("admit", None), ("resume", 8)):
        events = [e for e in diag["events"] if e["kind"] == kind]
        shown = texts(acc, "kiln/events/" + kind) if "kiln/events/" + kind in tags["tensors"] else {}
        if not events or sorted(shown) != sorted({e["step"] for e in events}):
            fail("%s: TensorBoard at steps %s, diag.h5 %s" % (kind, sorted(shown), [e["step"] for e in events]))
        if step is not None and step not in shown:
            fail("%s not at step %d: %s" % (kind, step, sorted(shown)))
    for tag in ("kiln/layout/tolerance", "kiln/layout/pipelines", "train/tokens_per_s", "time/step_s", "data/licenses",
                "train/mfu", "train/hfu", "memory/peak_gb"):
        if tag not in tags["scalars"]:
            fail("no %s among %s" % (tag, sorted(tags["scalars"])))
    mfu, hfu = scalars(acc, "train/mfu"), scalars(acc, "train/hfu")
    if sorted(mfu) != list(range(16)) or any(not (0 < mfu[s] <= hfu[s]) for s in mfu):
        fail("MFU %s, HFU %s" % (mfu, hfu))
    peak = scalars(acc, "memory/peak_gb")
    if any(not (0.01 < v < 64) for v in peak.values()):
        fail("peak memory (GB) %s" % peak)
    print("PASS 1: TensorBoard's reader: train/loss and grad_norm equal diag.h5 at steps 0-15 (steps %s redone, "
          "the second values shown); " % redone +
          "failure at step %d (1 node), admission at step %s, resume at step 8 on the timeline; %d scalar tags, "
          "%d text tags" % (fstep, sorted(texts(acc, "kiln/events/admit")), len(tags["scalars"]), len(tags["tensors"])))


def same(dir_a, dir_b):
    a, b = load(dir_a), load(dir_b)
    ta, tb = a.Tags(), b.Tags()
    if sorted(ta["scalars"]) != sorted(tb["scalars"]) or sorted(ta["tensors"]) != sorted(tb["tensors"]):
        fail("tags differ: %s against %s" % (sorted(set(ta["scalars"]) ^ set(tb["scalars"])),
                                            sorted(set(ta["tensors"]) ^ set(tb["tensors"]))))
    for tag in ta["scalars"]:
        va, vb = scalars(a, tag), scalars(b, tag)
        if va != vb:
            fail("%s: %s against %s" % (tag, va, vb))
    for tag in ta["tensors"]:
        if sorted(texts(a, tag)) != sorted(texts(b, tag)):
            fail("%s: steps %s against %s" % (tag, sorted(texts(a, tag)), sorted(texts(b, tag))))
    print("PASS 2: kiln diag --tensorboard gives the same %d scalar tags (every step and value) and %d text tags"
          % (len(ta["scalars"]), len(ta["tensors"])))


if __name__ == "__main__":
    {"live": lambda: live(*sys.argv[2:6]), "same": lambda: same(*sys.argv[2:4])}[sys.argv[1]]()
