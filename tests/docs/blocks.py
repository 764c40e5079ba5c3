#!/usr/bin/env python3
"""The command blocks of the guide's pages, for the tests that run them (tour.sh, guide.sh).

    blocks.py FILE SECTION PREFIX [--slurm]
                                    writes each ```sh block of FILE (of its section SECTION, a "## " heading, when
                                    not empty) to PREFIX-NN.sh and prints how many there are; with --slurm, the
                                    ```sh slurm blocks too, in their place (for a test that runs them under a
                                    private Slurm)
    blocks.py --sbatch ROOT         checks every sbatch of a ```sh slurm block of README.md and docs/*.md as a
                                    reader would paste it; exits 1 on a problem
    blocks.py --unrun ROOT PAGE...  prints every ```sh block of README.md and docs/*.md under ROOT outside the
                                    pages the tests run (PAGE, or PAGE#HEADING: that section); exits 1 if any

A block marked ```sh setup is what ./bootstrap.sh and .ci/run do themselves; ```sh slurm needs a cluster. Neither
is written out or counted as unrun.
"""
import glob
import os
import re
import sys

RUNNABLE = re.compile(r"^```sh\n(.*?)^```$", re.M | re.S)
WITH_SLURM = re.compile(r"^```sh(?: slurm)?\n(.*?)^```$", re.M | re.S)


def section_of(text, heading):
    if not heading:
        return text
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start:end if end > 0 else None]


def write_blocks(path, heading, prefix, slurm=""):
    text = section_of(open(path, encoding="utf-8").read(), heading)
    count = 0
    for match in (WITH_SLURM if slurm == "--slurm" else RUNNABLE).finditer(text):
        count += 1
        with open(f"{prefix}-{count:02d}.sh", "w", encoding="utf-8") as out:
            out.write(match.group(1))
    print(count)


def unrun(root, pages):
    """PAGE runs whole; PAGE#HEADING runs only that section."""
    sections = {}
    for page in pages:
        name, _, heading = page.partition("#")
        sections.setdefault(os.path.normpath(name), []).append(heading)
    found = 0
    for path in sorted([os.path.join(root, "README.md")] + glob.glob(os.path.join(root, "docs", "*.md"))):
        page = os.path.relpath(path, root)
        text = open(path, encoding="utf-8").read()
        spans = []
        for heading in sections.get(page, []):
            if not heading:
                spans.append((0, len(text)))
                continue
            start = text.index("## " + heading)
            end = text.find("\n## ", start + 3)
            spans.append((start, end if end > 0 else len(text)))
        for match in RUNNABLE.finditer(text):
            if any(start <= match.start() < end for start, end in spans):
                continue
            line = text.count("\n", 0, match.start()) + 1
            print(f"{page}:{line}: a ```sh block no test runs (mark it ```sh setup or ```sh slurm, or run its page)")
            found += 1
    return 1 if found else 0


SLURM_BLOCK = re.compile(r"^```sh slurm\n(.*?)^```$", re.M | re.S)
INSTALLED = "$HOME/kiln/share/kiln/"  # an install prefix's share/kiln, as the guide's Slurm blocks name it


def sbatch_problems(root):
    """Every sbatch of a ```sh slurm block of README.md and docs/*.md, as a reader would paste it (issue 65): one
    rank per GPU (--ntasks-per-node with --gpus-per-node, as kiln-env.sh demands), a jobscript and kiln's own
    decks named where an install puts them (share/kiln/jobscripts, share/kiln/input), never a path that only
    resolves from the checkout. Returns the problems, FILE:LINE: what."""
    problems = []
    for path in sorted([os.path.join(root, "README.md")] + glob.glob(os.path.join(root, "docs", "*.md"))):
        page = os.path.relpath(path, root)
        text = open(path, encoding="utf-8").read()
        for match in SLURM_BLOCK.finditer(text):
            first = text.count("\n", 0, match.start()) + 2
            lines = match.group(1).split("\n")
            joined, at = [], []
            for number, line in enumerate(lines):
                if at and joined[-1].endswith("\\"):
                    joined[-1] = joined[-1][:-1] + " " + line.strip()
                else:
                    joined.append(line)
                    at.append(first + number)
            for line, command in zip(at, joined):
                words = command.split()
                if "sbatch" not in words:
                    continue
                where = f"{page}:{line}"
                options = {w.split("=", 1)[0]: w.split("=", 1)[1] for w in words if w.startswith("--") and "=" in w}
                if "--gpus-per-node" in options and options.get("--ntasks-per-node") != options["--gpus-per-node"]:
                    problems.append(f"{where}: --gpus-per-node={options['--gpus-per-node']} without --ntasks-per-node "
                                    "of the same count (kiln-env.sh refuses it: one rank per GPU)")
                scripts = [w for w in words if w.endswith(".sbatch")]
                if not scripts:
                    continue
                if not scripts[0].startswith(INSTALLED + "jobscripts/") and not scripts[0].startswith("jobscripts/"):
                    problems.append(f"{where}: the jobscript {scripts[0]} is neither an install's nor the checkout's")
                name = scripts[0].split("/")[-1]
                if not os.path.exists(os.path.join(root, "jobscripts", name)):
                    problems.append(f"{where}: no jobscript {name} in jobscripts/")
                installed = scripts[0].startswith(INSTALLED)
                for deck in (w for w in words[words.index(scripts[0]) + 1:] if w.endswith(".ini")):
                    if deck.startswith("input/") and installed:
                        problems.append(f"{where}: {deck} resolves only from the checkout; an install has it as "
                                        f"{INSTALLED}{deck}")
                    elif deck.startswith(INSTALLED + "input/"):
                        if not os.path.exists(os.path.join(root, deck[len(INSTALLED):])):
                            problems.append(f"{where}: kiln ships no deck {deck[len(INSTALLED):]}")
    return problems


if __name__ == "__main__":
    if sys.argv[1] == "--unrun":
        sys.exit(unrun(sys.argv[2], sys.argv[3:]))
    if sys.argv[1] == "--sbatch":
        found = sbatch_problems(sys.argv[2])
        for problem in found:
            print(problem)
        print(f"SBATCH BLOCKS: {len(found)} problems")
        sys.exit(1 if found else 0)
    write_blocks(*sys.argv[1:5])
