#!/usr/bin/env python3
"""The command blocks of the guide's pages, for the tests that run them (tour.sh, guide.sh).

    blocks.py FILE SECTION PREFIX [--slurm]
                                    writes each ```sh block of FILE (of its section SECTION, a "## " heading, when
                                    not empty) to PREFIX-NN.sh and prints how many there are; with --slurm, the
                                    ```sh slurm blocks too, in their place (for a test that runs them under a
                                    private Slurm)
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


if __name__ == "__main__":
    if sys.argv[1] == "--unrun":
        sys.exit(unrun(sys.argv[2], sys.argv[3:]))
    write_blocks(*sys.argv[1:5])
