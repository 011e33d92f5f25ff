#!/usr/bin/python3
"""mutants.py — break the engine or the datapath one line at a time and see whether
`mroce conform` notices (issue 16, item 5; a first set, not yet the 40 the issue asks for).

For each mutant: apply its one-line change to the source tree, build `mroce`, start
`mroce conform-agent` on 127.0.0.1 (ephemeral ports), run the whole suite against it and
record the failing tests; then restore the file. The file is restored in `finally`, so an
interrupted run leaves the tree as it was (check `git status` anyway). A mutant is killed
when at least one test fails. The build at the end restores the binary.

Do not run it in a tree someone else is building: it edits core/ and datapath/ in place.

Usage: scripts/mutants/mutants.py [--build DIR] [--list] [NAME ...]
Exit status: 0 if every mutant run was killed, 1 if some survived, 2 for bad usage.
"""

import argparse
import pathlib
import re
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]

# name -> (file, original text, mutated text, what it breaks)
MUTANTS = {
    "token_unchecked": ("core/endpoint.cc",
                        "    if (common.dst_token != c->token()) {",
                        "    if (common.dst_token != c->token() && false) {",
                        "[CONN-4] a wrong token is accepted"),
    "ecn_not_echoed": ("core/connection_rx.cc",
                       "    a.ecn_ce_count = rp.ce_count;",
                       "    a.ecn_ce_count = 0;",
                       "[ACK-4] CE marks are never echoed"),
    "stale_dup_dropped_as_window": ("core/connection_rx.cc",
                                    "    if (ahead < 0) {\n        // [STREAM-4]",
                                    "    if (ahead < 0 && false) {\n        // [STREAM-4]",
                                    "[STREAM-4] a delivered message's duplicate is not re-reported"),
    "sack_bit_order": ("core/rx_window.h",
                       "out.bytes[w * 8 + k] = reverse_bits(static_cast<uint8_t>(v));",
                       "out.bytes[w * 8 + k] = static_cast<uint8_t>(v);",
                       "[ACK-2] SACK bits in the wrong order within a byte"),
    "read_checks_write_flag": ("core/connection_rx.cc",
                               "        need = access::kRemoteRead;\n",
                               "        need = access::kRemoteWrite;\n",
                               "[PLACE-15] READ checked against REMOTE_WRITE"),
    "write_wrong_nack_reason": ("core/connection_rx.cc",
                                "                ++stats_.access_errors;\n                return refuse(s, h, wire::NackReason::kRemoteAccess);",
                                "                ++stats_.access_errors;\n                return refuse(s, h, wire::NackReason::kInvalidRequest);",
                                "[PLACE-4] WRITE access errors NACKed as INVALID_REQUEST"),
    "atomic_twice": ("core/connection_rx.cc",
                     "            now_value = old + b.swap_add;",
                     "            now_value = old + b.swap_add + (stats_.atomics_executed ? 0 : b.swap_add);",
                     "[PLACE-17] the first FETCH_ADD adds twice"),
    "misaligned_atomic_allowed": ("core/connection_rx.cc",
                                  "    } else if (h.remote_addr % 8 != 0) {",
                                  "    } else if (h.remote_addr % 8 != 0 && false) {",
                                  "[PLACE-17] a misaligned atomic executes"),
    "no_dont_fragment": ("datapath/udp/udp_datapath.cc",
                         "    if (family == AF_INET) return set_int(fd, IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO);",
                         "    if (family == AF_INET) return set_int(fd, IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DONT);",
                         "[UDP-8] IPv4 packets without Don't Fragment"),
    "floor_ignored_on_data": ("core/connection_rx.cc",
                              "        ps.psns_skipped += rp.window.advance_to(h.psn_floor - 1);",
                              "        (void)0;",
                              "[PATH-6] a DATA's psn_floor is not applied"),
    "probe_reply_once": ("core/connection_rx.cc",
                         "        if (--rp.probe_copies > 0)",
                         "        if (--rp.probe_copies > 0 && false)",
                         "[PROBE-2] the PROBE reply is sent once"),
    "probe_reply_same_path": ("core/connection_rx.cc",
                              "            out = other_return_path(rp.probe_first_path);",
                              "            out = rp.probe_first_path;",
                              "[PROBE-2] both reply copies on one return path"),
    "hello_wrong_port": ("core/connection.cc",
                         "    h.endpoint_port = ep_.local_.port;",
                         "    h.endpoint_port = ep_.local_.port + 1;",
                         "[CONN-2] HELLO announces the wrong endpoint port"),
    "retx_no_report": ("core/connection_rx.cc",
                       "    if (h.flags & wire::data_flag::kRetx) report_delivery(s);",
                       "    (void)0;",
                       "[STREAM-9] no delivery report after a RETX DATA"),
    "stream_access_ignored": ("core/connection_rx.cc",
                              "    if (!(s.limits.remote_access & need)) return nullptr;",
                              "    (void)0;",
                              "[STREAM-12] the queue pair's remote access is not checked"),
    "request_not_rechecked": ("core/connection_rx.cc",
                              "                              read ? access::kRemoteRead : access::kRemoteAtomic) != slot.target) {",
                              "                              read ? access::kRemoteRead : access::kRemoteAtomic) != slot.target && false) {",
                              "[PLACE-26] a waiting READ or atomic is not checked again at its turn"),
    "stale_dup_no_report": ("core/connection_rx.cc",
                            "        ++stats_.stale_duplicates;\n        report_delivery(s);",
                            "        ++stats_.stale_duplicates;",
                            "[STREAM-4] no delivery report after a stale duplicate"),
}


def run_suite(build):
    """Starts an agent, runs the suite, stops the agent (by pid). Returns failing tests."""
    mroce = str(build / "mroce")
    agent = subprocess.Popen([mroce, "conform-agent", "--listen", "127.0.0.1:0", "--udp", "127.0.0.1:0"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = agent.stdout.readline()
        m = re.match(r"conform-agent: control (\S+) ", line)
        if not m:
            return ["(agent did not start)"]
        run = subprocess.run([mroce, "conform", m.group(1)], capture_output=True, text=True, timeout=300)
        fails = [l.split()[0] for l in run.stdout.splitlines() if re.search(r"\sFAIL\s", l)]
        if run.returncode != 0 and not fails:
            fails = [f"(suite exited {run.returncode})"]
        return fails
    finally:
        agent.terminate()
        agent.wait()


def build_mroce(build):
    b = subprocess.run(["cmake", "--build", str(build), "-j2", "--target", "mroce"], cwd=ROOT,
                       capture_output=True, text=True)
    return b.returncode == 0, b.stdout[-3000:] + b.stderr[-3000:]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", type=pathlib.Path, default=ROOT / "build")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("names", nargs="*")
    args = parser.parse_args()
    if args.list:
        for name, (f, _, _, what) in MUTANTS.items():
            print(f"{name:<30} {f:<32} {what}")
        return 0
    unknown = [n for n in args.names if n not in MUTANTS]
    if unknown:
        print(f"mutants.py: no mutant named {', '.join(unknown)} (see --list)", file=sys.stderr)
        return 2
    survivors, killed = [], 0
    for name in args.names or list(MUTANTS):
        rel, old, new, what = MUTANTS[name]
        path = ROOT / rel
        original = path.read_text()
        if original.count(old) != 1:
            print(f"{name}: the line to mutate is not in {rel} exactly once; the mutant is stale")
            survivors.append(name)
            continue
        t0 = time.monotonic()
        try:
            path.write_text(original.replace(old, new, 1))
            ok, log = build_mroce(args.build)
            if not ok:
                print(f"{name}: build failed\n{log}")
                survivors.append(name)
                continue
            fails = run_suite(args.build)
        finally:
            path.write_text(original)
        if fails:
            killed += 1
            print(f"{name:<30} KILLED   by {' '.join(fails)} ({time.monotonic() - t0:.0f} s)")
        else:
            survivors.append(name)
            print(f"{name:<30} SURVIVED ({what})")
        sys.stdout.flush()
    build_mroce(args.build)  # the unmutated binary again
    total = killed + len(survivors)
    print(f"mutants: {killed} of {total} killed" + (f"; survivors: {' '.join(survivors)}" if survivors else ""))
    return 0 if not survivors else 1


if __name__ == "__main__":
    sys.exit(main())
