#!/usr/bin/env python3
"""Modules depend one way, in the order docs/developing.md states.

    module_order.py ROOT

Reads the order from docs/developing.md's line "Modules, from the bottom: `base`, `config`, ...". Then:
  - every module folder (src/<m>, include/kiln/<m>) is in the order, and every module in the order has a folder;
  - no file of module m includes a header of a module after m ("kiln/<x>/..." or "../<x>/...");
  - no library kiln_<m> of src/CMakeLists.txt links a module library after m, nor one that no file of m
    includes a header of (a link with nothing behind it: what m needs of it comes through another link);
  - no file outside the io module calls HDF5 directly (H5...()), unless it says why in a comment that begins
    "HDF5 is called directly here" (the typed layer is io/hdf5_record.hpp and io/hdf5_array.hpp).
Prints every violation as FILE:LINE: what, and exits 1 if there is any.
"""
import os
import re
import sys

ORDER_LINE = re.compile(r"^Modules, from the bottom: (.*)$", re.M)
INCLUDE = re.compile(r'^\s*#\s*include\s+"(?:kiln/|\.\./)([a-z_]+)/')
RAW_HDF5 = re.compile(r"\bH5[A-Z][A-Za-z0-9_]*\(")  # H5Gopen2 and H5Dopen2 too (issue 65)
RAW_HDF5_WHY = "HDF5 is called directly here"
LINK = re.compile(r"target_link_libraries\(\s*kiln_([a-z_]+)\b([^)]*)\)", re.S)


def stated_order(root):
    text = open(os.path.join(root, "docs", "developing.md"), encoding="utf-8").read()
    match = ORDER_LINE.search(text)
    if not match:
        sys.exit("docs/developing.md states no module order (a line 'Modules, from the bottom: `base`, ...')")
    return re.findall(r"`([a-z_]+)`", match.group(1))


def main():
    root = sys.argv[1]
    order = stated_order(root)
    rank = {m: i for i, m in enumerate(order)}
    problems = []
    folders = set(os.listdir(os.path.join(root, "src"))) | set(os.listdir(os.path.join(root, "include", "kiln")))
    folders = {f for f in folders if os.path.isdir(os.path.join(root, "src", f)) or
               os.path.isdir(os.path.join(root, "include", "kiln", f))}
    for folder in sorted(folders - set(order)):
        problems.append(f"docs/developing.md: module folder '{folder}' is not in the stated order")
    for module in order:
        if module not in folders:
            problems.append(f"docs/developing.md: module '{module}' of the stated order has no folder")

    files = 0
    included = {m: set() for m in order}  # the modules each module's files include
    for module in order:
        for base in (os.path.join(root, "src", module), os.path.join(root, "include", "kiln", module)):
            for directory, _, names in os.walk(base):
                for name in sorted(names):
                    if not name.endswith((".hpp", ".cpp", ".h", ".c", ".cu")):
                        continue
                    path = os.path.join(directory, name)
                    files += 1
                    text = open(path, encoding="utf-8").read()
                    if module != "io" and RAW_HDF5_WHY not in text:
                        for number, line in enumerate(text.splitlines(), 1):
                            if RAW_HDF5.search(line.split("//")[0]):
                                problems.append(f"{os.path.relpath(path, root)}:{number}: calls HDF5 directly outside "
                                                f"io (use io/hdf5_record.hpp or io/hdf5_array.hpp, or say why)")
                    for number, line in enumerate(text.splitlines(), 1):
                        found = INCLUDE.match(line)
                        if found:
                            included[module].add(found.group(1))
                        if found and found.group(1) in rank and rank[found.group(1)] > rank[module]:
                            problems.append(f"{os.path.relpath(path, root)}:{number}: module '{module}' includes "
                                            f"'{found.group(1)}', which comes after it")

    cmake = os.path.join(root, "src", "CMakeLists.txt")
    text = open(cmake, encoding="utf-8").read()
    links = 0
    for match in LINK.finditer(text):
        library, args = match.group(1), match.group(2)
        module = next((m for m in sorted(order, key=len, reverse=True) if library == m or library.startswith(m + "_")),
                      None)
        if module is None:
            continue
        line = text.count("\n", 0, match.start()) + 1
        for used in re.findall(r"\bkiln_([a-z]+)\b", args):
            links += 1
            if used in rank and rank[used] > rank[module]:
                problems.append(f"src/CMakeLists.txt:{line}: kiln_{library} links kiln_{used}, which comes after "
                                f"'{module}'")
            elif used in rank and used != module and library == module and used not in included[module]:
                problems.append(f"src/CMakeLists.txt:{line}: kiln_{library} links kiln_{used}, but no file of "
                                f"'{module}' includes a header of it")

    for problem in problems:
        print(problem)
    print(f"modules {' < '.join(order)}: {files} files and {links} links checked, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
