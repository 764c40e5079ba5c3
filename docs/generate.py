#!/usr/bin/env python3
"""Writes the reference pages of docs/reference from the code that defines what they describe:

  deck.md   every deck key              (kiln reference deck: the deck schema)
  diag.md   diag.h5's datasets, columns and event kinds  (kiln reference diag: the record types)
  log.md    the log lines a user acts on (kiln reference log)
  tests.md  every ctest test and what it proves (tests/CMakeLists.txt, and each test's own header comment)

and checks that the sources log no upper-case tag that log.md lacks.

    docs/generate.py KILN [OUT_DIR]          write the pages (OUT_DIR: docs/reference)
    docs/generate.py KILN --check [CTEST_BUILD_DIR]
                                              exit 1 when a committed page differs from what the code gives,
                                              or (with a build directory) a registered test is missing from tests.md

Standard library only: it runs with the system's python3.
"""
import difflib
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REFERENCE = os.path.join(ROOT, "docs", "reference")


def header_comment(path):
    """The comment a file starts with (after a shebang), as one paragraph of text."""
    lines = open(path, encoding="utf-8").read().splitlines()
    if lines and lines[0].startswith("#!"):
        lines = lines[1:]
    text = []
    if path.endswith(".py") and lines and lines[0].startswith('"""'):
        first = lines[0][3:]
        body = [first] if first else []
        for line in lines[1:]:
            if '"""' in line:
                body.append(line.split('"""')[0])
                break
            body.append(line)
        return " ".join(" ".join(body).split())
    in_block = False
    for line in lines:
        s = line.strip()
        if in_block:
            end = "*/" in s
            text.append(s.split("*/")[0].lstrip("* ").strip())
            if end:
                break
            continue
        if s.startswith("/*"):
            in_block = True
            text.append(s[2:].split("*/")[0].strip())
            if "*/" in s:
                break
        elif s.startswith("//"):
            text.append(s[2:].strip())
        elif s.startswith("#") and not s.startswith("#include") and not s.startswith("#pragma"):
            text.append(s[1:].strip())
        elif s == "" and not text:
            continue
        else:
            break
    return " ".join(" ".join(text).split())


def parens(line):
    """Open minus closed parentheses of a CMake line, outside quoted strings and comments."""
    bare = re.sub(r'"(?:[^"\\]|\\.)*"', "", line).split("#")[0]
    return bare.count("(") - bare.count(")")


def cli_checks(call):
    """What a kiln_add_cli_test checks, from its registration: the command, the exit status, the output."""
    command = re.search(r"\bCOMMAND\s+(.*?)(?=\s+(?:REGEX|LABEL|RC|TIMEOUT|PROCESSORS)\b|\)\s*$)", call)
    rc = re.search(r"\bRC\s+(\w+)", call)
    regexes = re.findall(r'"((?:[^"\\]|\\.)*)"', call.split("REGEX", 1)[1]) if "REGEX" in call else []
    cmd = command.group(1).strip() if command else ""
    for var, shown in (("${KILN}", "kiln"), ("${MPIEXEC_EXECUTABLE}", "mpirun"), ("${MPIRUN}", "mpirun"), ("${CMAKE_BINARY_DIR}", "build"),
                       ("${CMAKE_SOURCE_DIR}/", ""), ("${KILN_REFERENCE_PYTHON}", "python")):
        cmd = cmd.replace(var, shown)
    cmd = re.sub(r"\$<TARGET_FILE:(\w+)>", r"\1", cmd)
    status = "0" if rc and rc.group(1) == "0" else "an error status"
    shown = "; ".join("`" + r.replace("\\\\", "").replace("\\", "") + "`" for r in regexes)
    return f"Runs `{cmd}`; passes when it exits with {status} and prints {shown}." if cmd else ""


def registered_tests():
    """Each test of tests/CMakeLists.txt: name, label, processes, what it proves."""
    lines = open(os.path.join(ROOT, "tests", "CMakeLists.txt"), encoding="utf-8").read().splitlines()
    tests, comment = [], []
    executables = {m.group(1): m.group(2) for m in re.finditer(r"add_executable\((\w+)\s+(\S+)", "\n".join(lines))}
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("#"):
            if not line.startswith("# ---"):
                comment.append(line.lstrip("#").strip())
            i += 1
            continue
        m = re.match(r"(kiln_add_unit_test|kiln_add_mpi_test|kiln_add_cli_test|add_test)\(\s*(NAME\s+)?([A-Za-z0-9_]+)", line)
        if not m:
            if not re.match(r"(set_|target_|add_executable|find_program|if\(|else|endif)", line):
                comment = []
            i += 1
            continue
        call = line
        depth = parens(line)
        while depth > 0:
            i += 1
            call += " " + lines[i].strip()
            depth += parens(lines[i])
        kind, name = m.group(1), m.group(3)
        label = {"kiln_add_unit_test": "unit", "kiln_add_mpi_test": "mpi", "kiln_add_cli_test": None, "add_test": None}[kind]
        if kind == "kiln_add_mpi_test" and re.search(r"\bFAULT\b", call):
            label = "fault"
        lm = re.search(r"\bLABEL\s+(\w+)", call)
        if lm:
            label = lm.group(1)
        np = re.search(r"\bNP\s+(\d+)", call) or re.search(r"\bPROCESSORS\s+(\d+)", call) or re.search(r"-n (\d+)", call)
        source = None
        sm = re.search(r"\bSOURCES\s+(\S+)", call)
        target = re.search(r"\$<TARGET_FILE:(\w+)>", call) or re.search(r"\bCOMMAND\s+(\w+)", call)
        script = re.search(r"\b(tests/[\w/.-]+\.(?:sh|py))", call)
        if sm:
            source = os.path.join("tests", sm.group(1))
        elif script:  # a script's helpers (checkpoint_diff, ...) are its arguments, not the test
            source = script.group(1)
        elif target and target.group(1) in executables:
            source = executables[target.group(1)].replace("${CMAKE_SOURCE_DIR}/", "").rstrip(")")
            if not source.startswith(("tests/", "perf/")):
                source = os.path.join("tests", source)
        said = " ".join(comment)
        if source and os.path.exists(os.path.join(ROOT, source)):
            from_file = header_comment(os.path.join(ROOT, source))
            said = (said + " " + from_file).strip() if said else from_file
        if kind == "kiln_add_cli_test":
            said = (said + " " + cli_checks(call)).strip()
        tests.append({"name": name, "label": label or "", "processes": int(np.group(1)) if np else 1,
                      "source": source or "tests/CMakeLists.txt", "proves": said})
        comment = []
        i += 1
    # Labels set afterwards (set_tests_properties ... LABELS x) override.
    text = "\n".join(lines)
    for t in tests:
        lm = re.search(r"set_tests_properties\(\s*" + re.escape(t["name"]) + r"\s+PROPERTIES[^)]*?LABELS\s+\"?([\w;]+)", text)
        if lm:
            t["label"] = lm.group(1).replace(";", ", ")
    return tests


def tests_page():
    tests = registered_tests()
    out = ["# Tests", "",
           "<!-- generated by docs/generate.py from tests/CMakeLists.txt and each test's header: edit those, not this page -->",
           "",
           f"Every test `ctest` runs ({len(tests)}), by label, with what it proves (the header of its source or script, "
           "where the pass criteria are spelled out). Labels: `unit` (one process, no MPI launch), `mpi` (under "
           "mpirun), `fault` (under `mpirun --with-ft ulfm`, processes killed), `pipeline` (training on several "
           "ranks), `slurm` (a private Slurm on this host), `hosts` (emulated hosts in network namespaces; in `fault` too), `tsan` (ThreadSanitizer). Run one with "
           "`ctest --test-dir build -R NAME --output-on-failure`; a label with `-L LABEL`.", ""]
    labels = sorted({t["label"].split(",")[0] for t in tests})
    for label in labels:
        group = [t for t in tests if t["label"].split(",")[0] == label]
        out += [f"## {label} ({len(group)})", ""]
        for t in group:
            where = f"[{t['source']}](../../{t['source']})"
            procs = f", {t['processes']} processes" if t["processes"] > 1 else ""
            out.append(f"- **`{t['name']}`** ({where}{procs}): {t['proves'] or 'NO DESCRIPTION'}")
        out.append("")
    return "\n".join(out), tests


def logged_tags():
    """Upper-case tags the sources start log lines with (`log::info("  TAG ...`), and the kinds of notices
    (`report.notice(step, "kind", ...)`, `announceRegroup(step, "kind", ...)`), which are logged in capitals."""
    tags = set()
    for base, _, files in os.walk(os.path.join(ROOT, "src")):
        for f in files:
            if f.endswith(".cpp"):
                text = open(os.path.join(base, f), encoding="utf-8").read()
                tags.update(re.findall(r'log::\w+\("\s*([A-Z][A-Z_-]{2,})\b', text))
                tags.update(k.upper() for k in re.findall(r'(?:announceRegroup|\.notice)\([^"]*"([a-z_]+)"', text))
    return tags


def pages(kiln):
    result = {}
    for page in ("deck", "diag", "log"):
        result[page + ".md"] = subprocess.run([kiln, "reference", page], check=True, capture_output=True, text=True).stdout
    result["tests.md"] = tests_page()[0] + "\n"
    return result


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    kiln = sys.argv[1]
    generated = pages(kiln)
    problems = []
    documented = set(re.findall(r"^\| `([^`]+)` \|", generated["log.md"], re.M))
    for tag in sorted(logged_tags() - documented):
        problems.append(f"the sources log lines starting with {tag}, which log.md does not list: add it to "
                        "src/base/log_lines.cpp")
    _, tests = tests_page()
    for t in tests:
        if not t["proves"]:
            problems.append(f"test {t['name']} says nothing of what it proves: give its source a header comment or "
                            "its registration a comment")
    if len(sys.argv) > 2 and sys.argv[2] == "--check":
        for name, text in sorted(generated.items()):
            path = os.path.join(REFERENCE, name)
            old = open(path, encoding="utf-8").read() if os.path.exists(path) else ""
            if old != text:
                diff = list(difflib.unified_diff(old.splitlines(), text.splitlines(), f"docs/reference/{name}",
                                                 "generated", lineterm="", n=0))
                problems.append(f"docs/reference/{name} is out of date ({len(diff)} diff lines; run docs/generate.py "
                                f"{kiln}):\n  " + "\n  ".join(diff[:12]))
        if len(sys.argv) > 3:
            listed = subprocess.run(["ctest", "--test-dir", sys.argv[3], "--show-only=json-v1"], check=True,
                                    capture_output=True, text=True).stdout
            registered = {t["name"] for t in json.loads(listed)["tests"]}
            missing = registered - {t["name"] for t in tests}
            for name in sorted(missing):
                problems.append(f"ctest runs {name}, which tests.md does not list (docs/generate.py cannot parse its "
                                "registration)")
        for p in problems:
            print("PROBLEM:", p)
        if problems:
            sys.exit(1)
        print(f"REFERENCE CURRENT: {', '.join(sorted(generated))} match the code; {len(tests)} tests described")
        return
    out = sys.argv[2] if len(sys.argv) > 2 else REFERENCE
    os.makedirs(out, exist_ok=True)
    for name, text in generated.items():
        open(os.path.join(out, name), "w", encoding="utf-8").write(text)
    for p in problems:
        print("PROBLEM:", p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
