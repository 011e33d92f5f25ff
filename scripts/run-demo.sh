#!/usr/bin/env bash
# scripts/run-demo.sh — what `make run` shows: the version, then `mroce demo` (a transfer
# over the simulated lossy multipath network and one over loopback UDP), then a short
# `mroce perf` between two processes on 127.0.0.1: WRITE bandwidth, the same traffic as
# plain UDP (--raw, the baseline) and 8-byte WRITE latency; then perftest's ib_write_bw,
# unmodified, on mroce's Verbs library (verbs/README.md); last, one scenario file on the
# switched simulator with MetaRoCE and RoCEv2 side by side (`mroce sim`, docs/sim.md).
set -euo pipefail
mroce=${1:-build/mroce}
"$mroce" --version
echo
"$mroce" demo

# perf_pair ARGS...: a server and a client with the same arguments on a free TCP port;
# the server is killed if the client fails.
perf_pair() {
    local port
    port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    "$mroce" perf -p "$port" "$@" > /dev/null &
    local server=$!
    trap 'kill $server 2>/dev/null || true' RETURN
    echo
    echo "\$ mroce perf 127.0.0.1 $*"
    "$mroce" perf 127.0.0.1 -p "$port" "$@"
    wait "$server"
}
echo
echo "mroce perf over loopback (server and client are two processes on this host):"
perf_pair -D 2 -s 65536 --report_gbits
perf_pair -D 1 -s 65536 --report_gbits --raw
perf_pair --lat -s 8 -n 2000

verbs=$(dirname "$mroce")/verbs
if [ -e "$verbs/libibverbs.so.1" ] && command -v ib_write_bw > /dev/null; then
    port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    echo
    echo "perftest, unmodified, on mroce's Verbs library:"
    echo "\$ LD_LIBRARY_PATH=$verbs ib_write_bw -F -D 2 --report_gbits 127.0.0.1"
    LD_LIBRARY_PATH=$verbs ib_write_bw -F -p "$port" -D 2 --report_gbits > /dev/null 2>&1 &
    server=$!
    for _ in $(seq 100); do ss -Hltn "sport = :$port" | grep -q . && break; sleep 0.05; done
    LD_LIBRARY_PATH=$verbs ib_write_bw -F -p "$port" -D 2 --report_gbits 127.0.0.1 | grep -E -A3 "Device|#bytes" || kill "$server" 2>/dev/null
    wait "$server" || true
fi

echo
echo "\$ mroce sim scenarios/incast-small.toml --out build/sim-demo   (16 -> 1 incast, MetaRoCE on a lossy fabric vs RoCEv2 with PFC)"
"$mroce" sim scenarios/incast-small.toml --out build/sim-demo
echo "(per-run fct.txt and time series in build/sim-demo/; plots: /usr/bin/python3 scripts/plot.py build/sim-demo)"
