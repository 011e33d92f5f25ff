#!/usr/bin/python3
"""mutants_test.py — the mutant list of scripts/mutation-score stays usable (ctest label
conform; no mutant is built or run here, that takes tens of minutes).

Checks: `scripts/mutation-score --list` runs and lists at least 40 mutants, each naming at
least one requirement id that docs/spec.md defines; `--check` passes, i.e. every mutant's
original text occurs exactly once in its file, so a refactor of core/ or datapath/ cannot
silently disable a mutant (it must be updated with the code); and `--check` does fail
for a mutant whose text is gone (checked on a copy of the mutant table, not the tree).

Usage: mutants_test.py REPOSITORY_ROOT
"""

import importlib.util
import io
import pathlib
import re
import subprocess
import sys
import contextlib

MIN_MUTANTS = 40


def fail(msg):
    print(f"mutants_test: FAIL {msg}")
    sys.exit(1)


def main():
    root = pathlib.Path(sys.argv[1]).resolve()
    script = root / "scripts" / "mutation-score"
    listed = subprocess.run([str(script), "--list"], capture_output=True, text=True, timeout=60)
    if listed.returncode != 0:
        fail(f"--list exited {listed.returncode}: {listed.stderr.strip()}")
    rows = [l for l in listed.stdout.splitlines() if l and not re.match(r"^\d+ mutants$", l)]
    if len(rows) < MIN_MUTANTS:
        fail(f"--list shows {len(rows)} mutants, fewer than {MIN_MUTANTS}")
    spec = (root / "docs" / "spec.md").read_text()
    defined = set(re.findall(r"\*\*\[([A-Z]+-[0-9]+)\]\*\*", spec))
    for row in rows:
        ids = re.findall(r"\[([A-Z]+-[0-9]+)\]", row)
        if not ids:
            fail(f"mutant names no spec id: {row}")
        unknown = [i for i in ids if i not in defined]
        if unknown:
            fail(f"mutant names ids the spec does not define ({', '.join(unknown)}): {row}")
    checked = subprocess.run([str(script), "--check"], capture_output=True, text=True, timeout=60)
    if checked.returncode != 0:
        fail(f"--check: a mutant no longer applies:\n{checked.stdout}")

    # The check itself must be able to fail: load the module and break one mutant's text.
    spec_ = importlib.util.spec_from_file_location("mutants", root / "scripts" / "mutants" / "mutants.py")
    mutants = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(mutants)
    name = next(iter(mutants.MUTANTS))
    rel, old, new, what = mutants.MUTANTS[name]
    mutants.MUTANTS[name] = (rel, old + "\n#no such line#", new, what)
    with contextlib.redirect_stdout(io.StringIO()):
        stale = mutants.check_texts([name])
    if stale != [name]:
        fail("check_texts did not report a mutant whose text is not in its file")
    print(f"mutants_test: {len(rows)} mutants listed, each applies once and names a defined spec id")
    return 0


if __name__ == "__main__":
    sys.exit(main())
