#!/usr/bin/python3
"""conform_test.py — `mroce conform` against `mroce conform-agent` on 127.0.0.1 (ctest label
conform).

Starts the agent on ephemeral ports, runs the whole suite against it with --junit, and
fails if any test failed, the JUnit file disagrees with the table, or the run took too
long. Also checks that bad command-line input gets one line on stderr and exit status 2.
The agent is stopped on every exit path (finally, by its pid).

Usage: conform_test.py MROCE_BINARY
"""

import ctypes
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

SUITE_BUDGET_S = 90  # the issue asks for well under 2 minutes


def fail(msg):
    print(f"conform_test: FAIL {msg}")
    sys.exit(1)


def die_with_parent():
    """Runs in the agent's child before exec: the kernel sends it SIGTERM when this script
    dies, even by SIGKILL (a ctest timeout), so no agent outlives its test."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def start_agent(mroce, extra=()):
    agent = subprocess.Popen([mroce, "conform-agent", "--listen", "127.0.0.1:0", "--udp", "127.0.0.1:0",
                              *extra],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=die_with_parent)
    ready, _, _ = select.select([agent.stdout], [], [], 10)
    line = agent.stdout.readline() if ready else ""
    m = re.match(r"conform-agent: control (\S+) udp (\S+)", line)
    if not m:
        return agent, None
    return agent, m.group(1)


def stop(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def check_control_protocol(control):
    """The agent answers every line with one JSON line: ok:false and a one-line error for
    what it cannot do, the request's id echoed (docs/conformance.md §1)."""
    host, port = control.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        reader = sock.makefile("r")
        cases = [
            ("not json", False),
            ('{"id": 1, "cmd": "no_such_command"}', False),
            ('{"id": 2, "cmd": "reg_mr", "length": "many"}', False),
            ('{"id": 3, "cmd": "read_mr", "mr": 999}', False),
            ('{"id": 4, "cmd": "post_send", "qp": 1, "opcode": "teleport"}', False),
            ('{"id": 5, "cmd": "hello"}', True),
        ]
        for line, ok in cases:
            sock.sendall((line + "\n").encode())
            answer = json.loads(reader.readline())
            if answer.get("ok") is not ok:
                fail(f"control {line!r}: answer {answer}")
            if not ok and (not answer.get("error") or "\n" in answer["error"]):
                fail(f"control {line!r}: no one-line error: {answer}")
            if line.startswith("{") and answer.get("id") != json.loads(line)["id"]:
                fail(f"control {line!r}: id not echoed: {answer}")


def check_unreachable(mroce):
    """An agent nobody runs is a run that failed (exit 1, one line), not a usage error."""
    p = subprocess.run([mroce, "conform", "127.0.0.1:1"], capture_output=True, text=True, timeout=30)
    if p.returncode != 1 or len(p.stderr.strip().splitlines()) != 1:
        fail(f"unreachable agent: exit {p.returncode}, stderr {p.stderr!r} (want exit 1, one line)")


def check_bad_input(mroce, control):
    cases = [
        ["conform"],
        ["conform", "not-an-address"],
        ["conform", control, "--test", "no.such_test"],
        ["conform", control, "--group", "nosuchgroup"],
        ["conform", control, "--bogus"],
        ["conform", control, "--via", "nosuchif0"],
        ["conform", control, "--retries", "9"],
        ["conform-agent", "--listen", "nowhere"],
        ["conform-agent", "--udp", "1.2.3"],
    ]
    for args in cases:
        p = subprocess.run([mroce] + args, capture_output=True, text=True, timeout=30)
        lines = p.stderr.strip().splitlines()
        if p.returncode != 2 or len(lines) != 1:
            fail(f"{args}: exit {p.returncode}, stderr {p.stderr!r} (want exit 2 and one line)")


def group_against_agent(mroce, agent_args, group):
    """Runs `--group GROUP` against an agent started with AGENT_ARGS; fails unless it exits 0.
    Returns its JUnit test cases by name."""
    agent, control = start_agent(mroce, agent_args)
    try:
        if control is None:
            fail(f"the agent with {' '.join(agent_args)} did not report its addresses")
        with tempfile.TemporaryDirectory() as d:
            junit = os.path.join(d, f"{group}.xml")
            run = subprocess.run([mroce, "conform", control, "--group", group, "--junit", junit],
                                 capture_output=True, text=True, timeout=60)
            sys.stdout.write(run.stdout)
            if run.returncode != 0:
                fail(f"--group {group} against {' '.join(agent_args)} exited {run.returncode}")
            return {c.get("name"): c for c in ET.parse(junit).getroot().findall("testcase")}
    finally:
        stop(agent)


def check_coalescing_target(mroce):
    """With the agent's --ack-with-reverse-data the target coalesces a delayed ACK with its
    DATA ([ACK-12], [WIRE-10]): the coalesce group must pass there, and coalesce.target_pair
    must pass rather than skip, so the peer's checks of a coalesced datagram really ran."""
    cases = group_against_agent(mroce, ["--ack-with-reverse-data"], "coalesce")
    pair = cases.get("coalesce.target_pair")
    if pair is None or pair.find("skipped") is not None or pair.find("failure") is not None:
        fail("coalesce.target_pair did not pass against a target that coalesces")


def check_target_without_short_acks(mroce):
    """Against an agent with --no-short-acks ([ACK-21]) the short_ack group must pass: the
    tests that need the target's SHORT_ACK skip, and those of a connection without it run
    and pass (the target must neither send SHORT nor apply a SHORT ACK there)."""
    cases = group_against_agent(mroce, ["--no-short-acks"], "short_ack")
    expect_outcomes(cases, (("short_ack.empty_bitmap_short", "skipped"),
                            ("short_ack.not_negotiated_full", None),
                            ("short_ack.not_negotiated_ignored", None)), "--no-short-acks")


def expect_outcomes(cases, wants, where):
    """Each (name, want) of `wants` ran in `cases` (JUnit elements by name) and skipped
    (want "skipped") or passed (want None)."""
    for name, want in wants:
        c = cases.get(name)
        if c is None:
            fail(f"{name} did not run against {where}")
        skipped = c.find("skipped") is not None
        if (want == "skipped") != skipped or c.find("failure") is not None:
            fail(f"{name} against {where}: want {want or 'a pass'}")


COMPACT_NEGOTIATED = ("compact.announced", "compact.target_write", "compact.target_answers",
                      "compact.receive_ops_full", "compact.placed", "compact.receive_op_dropped")
COMPACT_NOT_NEGOTIATED = ("compact.not_negotiated_full", "compact.not_negotiated_dropped")


def check_compact_cases(cases, negotiated_want, where):
    expect_outcomes(cases, [(n, negotiated_want) for n in COMPACT_NEGOTIATED] +
                    [(n, None) for n in COMPACT_NOT_NEGOTIATED], where)


def check_compact_target(mroce, default_cases):
    """COMPACT_DATA ([DATA-9]) is off by default: against the default agent the compact
    tests of a negotiated connection skip and those without it pass (DEFAULT_CASES, the
    whole suite's run). Against an agent with --compact-data every compact test must pass,
    not skip, so the peer's checks of the 64-byte form really ran."""
    check_compact_cases(default_cases, "skipped", "the default agent")
    cases = group_against_agent(mroce, ["--compact-data"], "compact")
    check_compact_cases(cases, None, "--compact-data")


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    mroce = sys.argv[1]
    # A SIGTERM (ctest, the user) unwinds through `finally`, which stops the agent.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    agent, control = start_agent(mroce)
    try:
        if control is None:
            fail(f"the agent did not report its addresses: {agent.stderr.read() if agent.poll() is not None else ''}")
        listed = subprocess.run([mroce, "conform", "--list"], capture_output=True, text=True, timeout=30)
        names = [l.split()[0] for l in listed.stdout.splitlines() if l.strip()]
        if listed.returncode != 0 or len(names) < 40:
            fail(f"--list: exit {listed.returncode}, {len(names)} tests")
        with tempfile.TemporaryDirectory() as d:
            junit = os.path.join(d, "conform.xml")
            t0 = time.monotonic()
            run = subprocess.run([mroce, "conform", control, "--junit", junit],
                                 capture_output=True, text=True, timeout=SUITE_BUDGET_S + 30)
            took = time.monotonic() - t0
            sys.stdout.write(run.stdout)
            sys.stderr.write(run.stderr)
            if run.returncode != 0:
                fail(f"the suite exited {run.returncode}")
            if took > SUITE_BUDGET_S:
                fail(f"the suite took {took:.1f} s (budget {SUITE_BUDGET_S} s)")
            suite = ET.parse(junit).getroot()
            cases = suite.findall("testcase")
            if len(cases) != len(names) or int(suite.get("failures")) != 0:
                fail(f"JUnit: {len(cases)} cases, {suite.get('failures')} failures; --list has {len(names)}")
            for case in cases:
                ids = case.find("properties/property[@name='spec_ids']")
                if ids is None or not re.search(r"\[[A-Z]+-[0-9]+\]", ids.get("value", "")):
                    fail(f"JUnit case {case.get('name')} names no spec id")
        # One test by name and one group: the selection works and the table says PASS.
        one = subprocess.run([mroce, "conform", control, "--test", names[0]], capture_output=True,
                             text=True, timeout=60)
        if one.returncode != 0 or not re.search(re.escape(names[0]) + r"\s.*PASS", one.stdout):
            fail(f"--test {names[0]}: exit {one.returncode}: {one.stdout}")
        check_control_protocol(control)
        check_bad_input(mroce, control)
        check_unreachable(mroce)
        check_coalescing_target(mroce)
        check_target_without_short_acks(mroce)
        check_compact_target(mroce, {c.get("name"): c for c in cases})
        if agent.poll() is not None:
            fail(f"the agent exited {agent.returncode} during the run")
    finally:
        stop(agent)
    print(f"conform_test: OK ({len(names)} tests, {took:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
