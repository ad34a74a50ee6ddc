#!/usr/bin/env python3
"""thread_safety_check.py BUILD_DIR [-jN]

Runs the compiler's front end (-fsyntax-only) on every translation unit of
BUILD_DIR/compile_commands.json, with the flags the build gives it, and fails
(exit 1) if any of them fails. `make thread-safety` configures build-tsa with
clang and -DPACE_THREAD_SAFETY=ON (-Wthread-safety -Werror), so this is
clang's thread-safety analysis of the whole tree: the analysis, and every
other front-end warning of that build, without generating code or linking.

The headers the build generates must exist first (the pace_generated_headers
target); a missing one fails the translation unit that includes it.

A translation unit listed twice with the same flags apart from the object
file and -fPIC/-fPIE (the Python module's position-independent copies of the
libraries, python/CMakeLists.txt) runs once: position independence changes
the code generated, not what the front end sees. Every other difference of
flags (the fuzzer's -fsanitize=..., a target's own definitions) runs both.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

# Flags that name outputs (dropped with their argument) or only change code
# generation (dropped); -c becomes -fsyntax-only.
OUTPUT_FLAGS = {"-o", "-MF", "-MT", "-MQ"}
CODEGEN_FLAGS = {"-c", "-MD", "-MMD", "-fPIC", "-fpic", "-fPIE", "-fpie"}


def syntax_only(argv):
    """The compile command argv as a front-end-only run."""
    out = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in OUTPUT_FLAGS:
            skip = True
        elif arg not in CODEGEN_FLAGS:
            out.append(arg)
    return out[:1] + ["-fsyntax-only"] + out[1:]


def load_units(build_dir):
    """(directory, file, argv) of every distinct translation unit."""
    path = os.path.join(build_dir, "compile_commands.json")
    with open(path) as f:
        entries = json.load(f)
    units = []
    seen = set()
    for e in entries:
        argv = e.get("arguments") or shlex.split(e["command"])
        argv = syntax_only(argv)
        # Not the directory: CMake writes absolute source and include paths,
        # and the object file (relative) is gone.
        key = (e["file"], tuple(argv))
        if key in seen:
            continue
        seen.add(key)
        units.append((e["directory"], e["file"], argv))
    return units


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build_dir")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    units = load_units(args.build_dir)
    if not units:
        print("thread_safety_check: no translation units in %s" % args.build_dir)
        return 1

    def check(unit):
        directory, file, argv = unit
        r = subprocess.run(argv, cwd=directory, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, universal_newlines=True)
        return file, argv, r.returncode, r.stdout

    failed = 0
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for n, (file, argv, rc, output) in enumerate(pool.map(check, units), 1):
            print("[%d/%d] %s" % (n, len(units), os.path.relpath(file)), flush=True)
            if rc != 0 or output:
                sys.stdout.write(output)
            if rc != 0:
                failed += 1
                print("FAILED (exit %d): %s" % (rc, " ".join(shlex.quote(a) for a in argv)),
                      flush=True)
    print("thread_safety_check: %d translation units, %d failed" % (len(units), failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
