#!/usr/bin/python3
"""spec_coverage.py — which requirement ids of the spec are cited by code and by tests.

A requirement id is `[PREFIX-N]` (e.g. `[ACK-11]`, `[WIRE-3]`). The script collects:

  defined   ids at a definition site in docs/spec.md: the id in
            bold (`**[ACK-11]**`, the convention of spec §1.2), or the id opening the first
            cell of a table row (`| [ACK-11] |`). Other mentions are references. Fenced
            code blocks and HTML comments are skipped.
  code      ids cited in comments of the source files under core wire cc sim api datapath
            tools (and obs baselines verbs when they exist), test files excluded.
  tests     ids cited anywhere in test files: *_test.* in any module, everything under
            tests/ and fuzz/, and the conformance suite (conform, below).
  conform   ids the conformance suite checks: those a test names in its registration in
            conform/tests_*.cc (`{"group.name", "[ID] [ID]", ...}`, docs/conformance.md §3),
            and those in the string literals of conform/peer.cc (the messages of the checks
            applied to every packet the target sends). Ids in comments do not count: a
            comment may mention a rule the test relies on without checking it.
  must      defined ids whose definition paragraph (from the id to the next blank line or
            heading) says MUST, MUST NOT, SHALL or REQUIRED.
  internal  defined ids whose definition paragraph carries the marker
            `*(not wire-observable: REASON.)*` (right after the bold id, by convention):
            requirements a peer cannot check from the wire. REASON says why and names the
            unit tests that check the requirement instead.

It prints, most serious first (then the conformance map):
  ERROR    ids cited in code but not defined                              (exit status 1)
  ERROR    ids defined more than once                                     (exit status 1)
  WARNING  ids cited in tests but not defined
  WARNING  ids referenced in the spec but not defined
  INFO     ids defined but cited nowhere in code
  WARNING  ids (defined or cited in code) that no test cites
  INFO     MUST ids cited by a conformance test, MUST ids marked not wire-observable (with
           the reason), and MUST ids that are neither
  WARNING  ids marked not wire-observable that a conformance test cites anyway, or that
           no test at all cites

Usage: scripts/spec_coverage.py [--root DIR] [--sites] [--strict]
  --root DIR  repository root (default: the repository this script lives in)
  --sites     print where each undefined id is cited (file:line), not just the first site
  --strict    exit 1 on warnings too
Exit status: 0 clean (warnings allowed unless --strict), 1 errors, 2 bad usage.

Python 3 standard library only.
"""

import argparse
import pathlib
import re
import sys

SPEC_FILES = ("docs/spec.md",)
CODE_DIRS = ("core", "wire", "cc", "sim", "api", "datapath", "tools", "obs", "baselines", "verbs")
TEST_DIRS = ("tests", "fuzz")
# The conformance suite's checks: the ids each test registers, and the ids in the peer's
# per-packet check messages.
CONFORM_DIR = "conform"
CONFORM_TESTS_GLOB = "tests_*.cc"
CONFORM_CHECKS = ("peer.cc",)
REGISTRATION_RE = re.compile(r'\{\s*"[a-z0-9_]+\.[a-z0-9_]+"\s*,\s*"([^"]*)"')
STRING_RE = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
MUST_RE = re.compile(r"\b(MUST|SHALL|REQUIRED)\b")
NOT_WIRE_RE = re.compile(r"\*\(not wire-observable: (.+?)\)\*")
# Modules whose *_test.* files count as tests (code dirs plus util and bench).
TEST_FILE_DIRS = CODE_DIRS + ("util", "bench")

C_SUFFIXES = {".h", ".hh", ".hpp", ".c", ".cc", ".cpp", ".cxx", ".inc"}
HASH_SUFFIXES = {".py", ".sh", ".cmake", ".toml", ".yaml", ".yml"}
SKIP_DIR_NAMES = {"corpus", "__pycache__"}

ID = r"[A-Z][A-Z0-9]*(?:-[A-Z][A-Z0-9]*)*-[0-9]+"
ID_RE = re.compile(r"\[(" + ID + r")\]")
BOLD_DEF_RE = re.compile(r"\*\*\[(" + ID + r")\]\*\*")
TABLE_DEF_RE = re.compile(r"^\s*\|\s*(?:\*\*)?`?\[?(" + ID + r")\]?`?(?:\*\*)?\s*\|")


def id_key(ident):
    """Sort key: prefix, then number as an integer (ACK-2 before ACK-10)."""
    prefix, _, number = ident.rpartition("-")
    return (prefix, int(number))


# ---------------------------------------------------------------------------------------
# Spec documents


def markdown_lines(text):
    """Yields (line number, line) outside fenced code blocks and HTML comments."""
    in_fence = False
    in_comment = False
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not in_comment and stripped.startswith(("```", "~~~")):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        visible = ""
        rest = line
        while rest:
            if in_comment:
                end = rest.find("-->")
                if end < 0:
                    rest = ""
                else:
                    in_comment = False
                    rest = rest[end + 3:]
            else:
                start = rest.find("<!--")
                if start < 0:
                    visible += rest
                    rest = ""
                else:
                    visible += rest[:start]
                    in_comment = True
                    rest = rest[start + 4:]
        yield number, visible


def scan_spec(root):
    """Returns (definitions, references, present files, MUST ids, internal ids).

    definitions: id -> list of "file:line"; references: id -> list of "file:line";
    MUST ids: the defined ids whose definition paragraph (up to a blank line or a
    heading) says MUST, MUST NOT, SHALL or REQUIRED; internal ids: id -> the reason of the
    not-wire-observable marker in its definition paragraph.
    """
    definitions, references, present = {}, {}, []
    must = set()
    internal = {}
    for rel in SPEC_FILES:
        path = root / rel
        if not path.is_file():
            continue
        present.append(rel)
        text = path.read_text(encoding="utf-8", errors="replace")
        paragraph = []  # the ids whose definition paragraph is still open
        for number, line in markdown_lines(text):
            site = f"{rel}:{number}"
            defined_here = set(BOLD_DEF_RE.findall(line))
            table = TABLE_DEF_RE.match(line)
            if table:
                defined_here.add(table.group(1))
            if not line.strip() or line.lstrip().startswith("#") or defined_here:
                paragraph = []
            paragraph.extend(sorted(defined_here))
            if MUST_RE.search(line):
                must.update(paragraph)
            marker = NOT_WIRE_RE.search(line)
            if marker:
                for ident in paragraph:
                    internal[ident] = marker.group(1)
            for ident in defined_here:
                definitions.setdefault(ident, []).append(site)
            for ident in ID_RE.findall(line):
                if ident not in defined_here:
                    references.setdefault(ident, []).append(site)
    return definitions, references, present, must, internal


# ---------------------------------------------------------------------------------------
# Source files


def c_comments(text):
    """Yields (line number, comment text) for every // and /* */ comment of C/C++ source,
    skipping string and character literals (raw strings included)."""
    i, n, line = 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            yield line, text[i + 2:end]
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end
            body = text[i + 2:end]
            for offset, part in enumerate(body.split("\n")):
                yield line + offset, part
            line += body.count("\n")
            i = end + 2
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            open_paren = text.find("(", i + 2)
            if open_paren < 0:
                i += 1
                continue
            delimiter = text[i + 2:open_paren]
            close = text.find(")" + delimiter + '"', open_paren + 1)
            close = n if close < 0 else close
            line += text.count("\n", i, close)
            i = close + len(delimiter) + 2
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        else:
            i += 1


def hash_comments(text):
    """Yields (line number, text) for '#' comments and, for Python, whole lines: docstrings
    and comments both document Python, so every line is searched."""
    for number, line in enumerate(text.splitlines(), start=1):
        yield number, line


def is_test_file(rel):
    name = rel.name
    return re.match(r".*_test\.[A-Za-z0-9]+$", name) is not None


def source_files(root, top_dirs):
    for top in top_dirs:
        base = root / top
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            if not path.is_file() or any(part in SKIP_DIR_NAMES for part in path.parts):
                continue
            if path.suffix in C_SUFFIXES or path.suffix in HASH_SUFFIXES or path.name == "CMakeLists.txt":
                yield path


def cited_ids(path, whole_text):
    """Yields (id, line) cited in the file: in comments, or anywhere when whole_text."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if whole_text:
        lines = enumerate(text.splitlines(), start=1)
    elif path.suffix in C_SUFFIXES:
        lines = c_comments(text)
    else:
        lines = hash_comments(text)
    for number, line in lines:
        for ident in ID_RE.findall(line):
            yield ident, number


def scan_sources(root):
    """Returns (code citations, test citations, conformance citations, files scanned):
    id -> list of "file:line". Conformance citations count as test citations too."""
    code, tests, conform = {}, {}, {}
    seen = set()
    files = 0
    base = root / CONFORM_DIR
    conform_files = sorted(base.glob(CONFORM_TESTS_GLOB)) + [base / n for n in CONFORM_CHECKS
                                                             if (base / n).is_file()]
    for path in conform_files:
        seen.add(path)
        files += 1
        rel = path.relative_to(root)
        text = path.read_text(encoding="utf-8", errors="replace")
        pattern = REGISTRATION_RE if path.match(CONFORM_TESTS_GLOB) else STRING_RE
        for match in pattern.finditer(text):
            number = text.count("\n", 0, match.start()) + 1
            for ident in ID_RE.findall(match.group(1)):
                conform.setdefault(ident, []).append(f"{rel}:{number}")
                tests.setdefault(ident, []).append(f"{rel}:{number}")
    for path in source_files(root, TEST_DIRS):
        seen.add(path)
        files += 1
        rel = path.relative_to(root)
        for ident, number in cited_ids(path, whole_text=True):
            tests.setdefault(ident, []).append(f"{rel}:{number}")
    for path in source_files(root, TEST_FILE_DIRS):
        if path in seen:
            continue
        files += 1
        rel = path.relative_to(root)
        if is_test_file(rel):
            for ident, number in cited_ids(path, whole_text=True):
                tests.setdefault(ident, []).append(f"{rel}:{number}")
        elif rel.parts[0] in CODE_DIRS:
            for ident, number in cited_ids(path, whole_text=False):
                code.setdefault(ident, []).append(f"{rel}:{number}")
    return code, tests, conform, files


# ---------------------------------------------------------------------------------------
# Report


def print_ids(title, ids, sites=None, all_sites=False, width=100):
    print(f"{title} ({len(ids)}):")
    if not ids:
        print("  (none)")
        return
    if sites is None:
        line = " "
        for ident in ids:
            if len(line) + len(ident) + 1 > width:
                print(line)
                line = " "
            line += " " + ident
        print(line)
        return
    for ident in ids:
        where = sites.get(ident, [])
        if all_sites:
            shown = ", ".join(where)
        else:
            shown = where[0] if where else ""
            if len(where) > 1:
                shown += f" (+{len(where) - 1} more)"
        print(f"  {ident:<12} {shown}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_root = pathlib.Path(__file__).resolve().parents[1]
    parser.add_argument("--root", type=pathlib.Path, default=default_root,
                        help="repository root (default: %(default)s)")
    parser.add_argument("--sites", action="store_true",
                        help="list every citation site of each undefined id")
    parser.add_argument("--strict", action="store_true", help="exit 1 on warnings too")
    args = parser.parse_args()
    root = args.root.resolve()
    if not root.is_dir():
        print(f"spec_coverage: no such directory: {root}", file=sys.stderr)
        return 2

    definitions, references, present, must, internal = scan_spec(root)
    code, tests, conform, files = scan_sources(root)
    defined = set(definitions)

    missing = [f for f in SPEC_FILES if f not in present]
    print(f"spec files: {', '.join(present) if present else '(none)'}"
          + (f"; missing: {', '.join(missing)}" if missing else ""))
    print(f"defined ids: {len(defined)}; cited in code: {len(code)}; cited in tests: {len(tests)}"
          f" ({files} source files scanned)")
    print()

    undefined_in_code = sorted(set(code) - defined, key=id_key)
    duplicates = sorted((i for i, s in definitions.items() if len(s) > 1), key=id_key)
    undefined_in_tests = sorted(set(tests) - defined - set(code), key=id_key)
    undefined_refs = sorted(set(references) - defined, key=id_key)
    uncited = sorted(defined - set(code), key=id_key)
    untested = sorted((defined | set(code)) - set(tests), key=id_key)

    errors = 0
    warnings = 0
    print_ids("ERROR: cited in code but not defined in the spec", undefined_in_code, code,
              args.sites)
    errors += len(undefined_in_code)
    print()
    print_ids("ERROR: defined more than once", duplicates, definitions, all_sites=True)
    errors += len(duplicates)
    print()
    print_ids("WARNING: cited in tests but not defined in the spec", undefined_in_tests, tests,
              args.sites)
    warnings += len(undefined_in_tests)
    print()
    print_ids("WARNING: referenced in the spec but not defined", undefined_refs, references,
              args.sites)
    warnings += len(undefined_refs)
    print()
    print_ids("INFO: defined but cited nowhere in code", uncited)
    print()
    print_ids("WARNING: no test cites", untested)
    warnings += len(untested)
    print()
    must_conform = sorted(must & set(conform), key=id_key)
    must_internal = sorted((must & set(internal)) - set(conform), key=id_key)
    must_not_conform = sorted(must - set(conform) - set(internal), key=id_key)
    print_ids(f"INFO: MUST ids cited by the conformance suite ({CONFORM_DIR}/), "
              f"{len(must_conform)} of {len(must)}", must_conform)
    print()
    print_ids("INFO: MUST ids marked not wire-observable (the reason, and the tests instead)",
              must_internal, {i: [internal[i]] for i in must_internal})
    print()
    print_ids("INFO: MUST ids the conformance suite does not cite and not marked not "
              "wire-observable", must_not_conform)
    print()
    contradicted = sorted(set(internal) & set(conform), key=id_key)
    print_ids("WARNING: marked not wire-observable but cited by the conformance suite",
              contradicted, conform, args.sites)
    warnings += len(contradicted)
    internal_untested = sorted(set(internal) - set(tests), key=id_key)
    print_ids("WARNING: marked not wire-observable and cited by no test", internal_untested)
    warnings += len(internal_untested)
    print()
    print(f"spec_coverage: {errors} error(s), {warnings} warning(s)")
    if errors or (args.strict and warnings):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
