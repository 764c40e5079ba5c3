#!/usr/bin/env python3
"""The example decks' comments are true: every file they name exists, and every command they show is one kiln has.

    deck_comments.py KILN ROOT

For each input/*.ini, in its comment lines:
  - a path of the repository (jobscripts/..., perf/..., input/..., docs/..., tools/..., tests/...) must exist;
  - a kiln command (`kiln SUB ...`, `build/kiln SUB ...`, alone or after mpirun) must name a subcommand of kiln,
    and each of its --options must be one that `kiln SUB --help` lists; `kiln deck --check` and `kiln plan` of
    the deck itself are run, and must succeed;
  - an sbatch line must name an existing jobscript and ask for one rank per GPU when it asks for GPUs.
Prints one line per deck and exit 1 with every problem, each as FILE:LINE: what.
"""
import glob
import os
import re
import subprocess
import sys

PATH = re.compile(r"(?<![\w/.<-])((?:jobscripts|perf|input|docs|tools|tests)/[\w./-]*[\w])")
# A command is a backticked span, or an indented comment line (up to two spaces before its explanation).
QUOTED = re.compile(r"`([^`]+)`")
INDENTED = re.compile(r"^#\s{3,}(\S.*?)(?:\s{2,}\S.*)?$")
KILN = re.compile(r"^(?:mpirun .*?)?(?:build/)?kiln ([a-z]+)(.*)$")
SBATCH = re.compile(r"^sbatch\b(.*)$")


def commands_of(line):
    found = QUOTED.findall(line)
    indented = INDENTED.match(line.rstrip())
    if indented:
        found.append(indented.group(1))
    return [c.strip() for c in found if KILN.match(c.strip()) or SBATCH.match(c.strip())]


def help_options(kiln, sub, cache={}):
    if sub not in cache:
        done = subprocess.run([kiln, sub, "--help"], capture_output=True, text=True)
        cache[sub] = None if done.returncode != 0 else set(re.findall(r"--[a-z][\w-]*", done.stdout))
    return cache[sub]


def check_deck(kiln, root, deck):
    problems, commands = [], 0
    rel = os.path.relpath(deck, root)
    for number, line in enumerate(open(deck, encoding="utf-8"), 1):
        if not line.lstrip().startswith("#"):
            continue
        where = f"{rel}:{number}"
        for path in PATH.findall(line):
            if not os.path.exists(os.path.join(root, path)):
                problems.append(f"{where}: names {path}, which is not in the repository")
        for command in commands_of(line):
            commands += 1
            kiln_command, sbatch = KILN.match(command), SBATCH.match(command)
            if sbatch:
                problems += check_sbatch(where, sbatch.group(1))
                continue
            sub, args = kiln_command.groups()
            options = help_options(kiln, sub)
            if options is None:
                problems.append(f"{where}: 'kiln {sub}' is not a kiln command")
                continue
            for option in re.findall(r"(?<!\S)(--[a-z][\w-]*)", args):
                if option not in options:
                    problems.append(f"{where}: 'kiln {sub}' has no option {option}")
            words = args.split()
            if sub in ("deck", "plan") and rel in words:
                cmd = [kiln, sub] + words
                done = subprocess.run(cmd, capture_output=True, text=True, cwd=root)
                if done.returncode != 0:
                    tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
                    problems.append(f"{where}: '{' '.join(['kiln', sub] + words)}' failed: {' / '.join(tail)}")
    return problems, commands


def check_sbatch(where, args):
    problems = []
    if not [w for w in args.split() if w.endswith(".sbatch")]:
        problems.append(f"{where}: an sbatch line without a jobscript")
    gpus = re.search(r"--gpus-per-node[= ](\d+)", args)
    tasks = re.search(r"--ntasks-per-node[= ](\d+)", args)
    if not tasks:
        problems.append(f"{where}: sbatch without --ntasks-per-node (kiln's ranks per node)")
    elif gpus and tasks.group(1) != gpus.group(1):
        problems.append(f"{where}: sbatch asks for {gpus.group(1)} GPUs per node but not one task per GPU")
    return problems


def main():
    kiln, root = sys.argv[1], sys.argv[2]
    problems = []
    for deck in sorted(glob.glob(os.path.join(root, "input", "*.ini"))):
        found, commands = check_deck(kiln, root, deck)
        problems += found
        print(f"{os.path.relpath(deck, root)}: {commands} commands, {len(found)} problems")
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
