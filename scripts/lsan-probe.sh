#!/usr/bin/env bash
# scripts/lsan-probe.sh — prints 1 if LeakSanitizer works here, else 0 (with a note on
# stderr). LSan stops the process with ptrace to scan it, which some containers forbid;
# there it aborts every sanitized process at exit, so `make test` turns leak checks off.
set -euo pipefail
cxx=${CXX:-c++}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
printf '#include <cstdlib>\nint main() { void* volatile p = std::malloc(7); p = nullptr; }\n' \
    > "$dir/leak.cc"
if "$cxx" -fsanitize=address -g "$dir/leak.cc" -o "$dir/leak" 2>"$dir/log" &&
   { ASAN_OPTIONS=detect_leaks=1 "$dir/leak" >>"$dir/log" 2>&1 || true; } &&
   grep -q 'ERROR: LeakSanitizer: detected memory leaks' "$dir/log"; then
    echo 1
else
    echo "note: LeakSanitizer does not work here (ptrace restricted?);" \
         "running ASan with detect_leaks=0" >&2
    head -5 "$dir/log" | sed "s/^/note:   /" >&2
    echo 0
fi
