#!/usr/bin/python3
"""check_layering.py — reject #includes that cross the module boundaries of STYLE.md §2.

Scans every C++ source and header under the module directories of a source tree and checks
each `#include "X/..."` (or `<X/...>`) whose path starts with one of our modules against the
table below. Includes of anything that is not a module (standard library, third-party
headers) are ignored. A module may always include itself.

A module may be a subdirectory of another (`conform/agent`): a file belongs to the longest
module its path starts with, and so does an included path. The two are separate modules:
each may include the other only if the table says so.

Usage: check_layering.py [--root DIR]   (default: the repository this script lives in)
Prints one line per violation, `file:line: module 'core' may not include 'datapath/udp.h'`,
and exits 1 if there is any, 0 otherwise.
"""

import argparse
import pathlib
import re
import sys

ANYTHING = None  # marker: the module may include every other module

# module -> modules it may include (besides itself). The project style guide's module table
# (section 2) is the source; change both together.
ALLOWED = {
    "util": set(),
    "wire": {"util"},
    "cc": {"util"},
    "core": {"wire", "cc", "util"},
    "obs": {"util", "core"},  # core only for its read-only stats structs
    "datapath": {"util"},
    "sim": {"core", "baselines", "cc", "wire", "obs", "util", "datapath"},
    "baselines": {"wire", "cc", "util", "core"},
    "api": {"core", "datapath", "obs", "util", "wire", "cc"},
    "verbs": {"api", "util"},
    # The conformance suite is a peer that speaks the wire protocol itself: the codec and
    # util, never the engine or the API. Its agent drives an implementation through the API.
    "conform": {"wire", "util"},
    "conform/agent": {"api", "util"},
    "tools": ANYTHING,
    "tests": ANYTHING,
    "fuzz": ANYTHING,
    "bench": ANYTHING,
}

SOURCE_SUFFIXES = {".h", ".cc", ".hpp", ".cpp"}
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*(?:"([^"]+)"|<([^>]+)>)')


def module_of(path):
    """The longest module that `path` (a relative path with '/') lies in, or None."""
    best = None
    for module in ALLOWED:
        if path.startswith(module + "/") and (best is None or len(module) > len(best)):
            best = module
    return best


def violations(root):
    """Yields (relative file, line number, module, include) for each forbidden include."""
    for top in sorted(m for m in ALLOWED if "/" not in m):
        module_dir = root / top
        if not module_dir.is_dir():
            continue
        for path in sorted(module_dir.rglob("*")):
            if path.suffix not in SOURCE_SUFFIXES or not path.is_file():
                continue
            rel = path.relative_to(root)
            module = module_of(rel.as_posix())
            allowed = ALLOWED[module]
            text = path.read_text(encoding="utf-8", errors="replace")
            for number, line in enumerate(text.splitlines(), start=1):
                match = INCLUDE_RE.match(line)
                if not match:
                    continue
                target = match.group(1) or match.group(2)
                included = module_of(target)
                if included is None or included == module:
                    continue
                if allowed is ANYTHING or included in allowed:
                    continue
                yield rel, number, module, target


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_root = pathlib.Path(__file__).resolve().parents[2]
    parser.add_argument("--root", type=pathlib.Path, default=default_root,
                        help="source tree to check (default: %(default)s)")
    args = parser.parse_args()
    root = args.root.resolve()
    if not root.is_dir():
        print(f"check_layering: no such directory: {root}", file=sys.stderr)
        return 2

    count = 0
    for file, line, module, target in violations(root):
        print(f"{file}:{line}: module '{module}' may not include '{target}'")
        count += 1
    if count:
        print(f"check_layering: {count} forbidden include(s); the allowed ones are ALLOWED in "
              f"{pathlib.Path(__file__).resolve()}", file=sys.stderr)
        return 1
    print(f"check_layering: OK ({root})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
