#!/usr/bin/env bash
# scripts/install-deps.sh — install the Debian 12 packages that building, testing, fuzzing
# and linting mroce need. Idempotent: it does nothing (and needs no root) when everything
# is already installed. This list is the only place the project's system packages are named.
set -euo pipefail

PACKAGES=(
    cmake make g++ ccache                               # toolchain
    libgtest-dev libgmock-dev libbenchmark-dev          # tests and micro-benchmarks
    libcli11-dev nlohmann-json3-dev libfmt-dev libtomlplusplus-dev
    libcpp-httplib-dev                                  # obs/: the Prometheus /metrics listener
    clang libclang-rt-14-dev                            # `make fuzz` (libFuzzer runtime)
    clang-tidy                                          # `make lint`
    valgrind
    iperf3                                              # TCP baseline (scripts/perf-loopback.py)
    python3                                             # tests/layering
    python3-matplotlib                                  # scripts/plot.py
    tcpdump                                             # sim pcap test reads captures back
    tshark                                              # tools/wireshark dissector test
    prometheus curl                                     # tests/obs: a real server scrapes mroce perf
    libjs-chart.js chromium                             # obs/ dashboard's charts; tests/obs in a real browser
    iproute2 util-linux ethtool libbpf-dev bpftool      # scripts/testbed (and clang)
    libibverbs-dev                                      # verbs/ builds against rdma-core's headers
    pkgconf                                             # tests/verbs: the installed mroce-verbs.pc
    ibverbs-utils perftest qperf libgloo-dev            # tests/verbs: unmodified RDMA programs
)

missing=()
for pkg in "${PACKAGES[@]}"; do
    # dpkg -s also succeeds for removed packages whose config files remain; check the state.
    if ! dpkg -s "$pkg" 2>/dev/null | grep -q '^Status: install ok installed$'; then
        missing+=("$pkg")
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing Debian packages (run as root to install): ${missing[*]}" >&2
    exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# tshark's wireshark-common asks whether non-root users may capture; answer no beforehand, so
# no frontend ever waits on the question (tests capture as root or skip).
echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
apt-get update
apt-get install -y --no-install-recommends "${missing[@]}"
