#!/usr/bin/env bash
# scripts/run-demo.sh — what `make run` shows. Runs `mroce demo` once the CLI has that
# subcommand; until then, `mroce --version`.
set -euo pipefail
mroce=${1:-build/mroce}
if "$mroce" --help | grep -qE '^ +demo( |$)'; then
    exec "$mroce" demo
fi
exec "$mroce" --version
