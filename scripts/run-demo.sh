#!/usr/bin/env bash
# scripts/run-demo.sh — what `make run` shows: the version, then `mroce demo` (a transfer
# over the simulated lossy multipath network and one over loopback UDP).
set -euo pipefail
mroce=${1:-build/mroce}
"$mroce" --version
echo
exec "$mroce" demo
