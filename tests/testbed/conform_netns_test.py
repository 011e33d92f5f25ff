#!/usr/bin/python3
"""conform_netns_test.py — the conformance suite across the namespace testbed with loss on
one plane (issue 16's done-when line; docs/conformance.md §2).

Builds a 2-host, 4-plane testbed under a prefix unique to this run, puts 1% random loss on
one plane (1, 2 or 3, drawn from the seed; both directions), starts `mroce conform-agent`
in host 1 and runs the whole suite from host 0:

    mroce conform 198.19.255.1:4798 --via up0 --retries 2 --junit FILE --seed N

The agent's control port is on a management link between the two hosts (out of band, as
on a test rig); its UDP endpoint, 198.18.0.2:4797, is reached over the planes.

`--via up0` sends every datagram of the suite through plane 0, so what the suite sends (the
stimulus each verdict rests on) never meets the loss; the target's datagrams leave through
the planes its own ECMP hash picks for its path ports, the lossy one among them, and a test
that loses one of them fails its attempt and is run again from a fresh reset (`--retries`).
Checks: every test passes; the JUnit file has every listed test; at most MAX_RETRIED tests
needed a second attempt (a target, or a suite, that loses its way under loss fails many);
the lossy plane carried traffic and dropped some of it (the loss was real); the suite ran
within SUITE_BUDGET_S. Exits 77 (ctest SKIP_RETURN_CODE) with a one-line reason when the
machine cannot build the testbed (not root, no namespaces, no tc eBPF). The agent is ended
by its pid and the testbed removed on every exit path (`finally`, SIGTERM from ctest).

Usage: conform_netns_test.py --testbed PATH --mroce PATH [--seed N] [--plane J] [--loss PCT]
"""
import argparse
import ctypes
import os
import pathlib
import random
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testbed_test import SKIP, Failure, Skip, Testbed, check, delta, preconditions  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "scripts", "testbed.d"))
import maps  # noqa: E402  (the testbed's own map reader)

PLANES = 4
# The control protocol runs over a management link of its own between the two hosts (a veth
# pair this test adds, in 198.19.255.0/31 of the testbed's benchmarking range), as a test
# rig's management network would: out of band, off the planes and their loss. On a plane,
# a control request lost and resent by TCP held tests up for hundreds of ms.
MGMT = {0: "198.19.255.0", 1: "198.19.255.1"}
AGENT_CONTROL = f"{MGMT[1]}:4798"
AGENT_UDP = "198.18.0.2:4797"  # host 1 (scripts/testbed addr 1): the wire, over the planes
SUITE_BUDGET_S = 110  # the issue asks for under 2 minutes; loopback takes about 5 s
# Tests that may pass only at a later attempt. At 1% loss on one plane 0 or 1 of 93 did in
# 12 runs (docs/conformance.md); a target that copes badly with loss fails far more.
MAX_RETRIED = 5


def die_with_parent():
    """Runs in the agent's child before exec: SIGTERM when this script dies, even by SIGKILL
    (a ctest timeout), so no agent outlives its test."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def add_management_link(testbed):
    """A veth pair between hosts 0 and 1 (removed with their namespaces by `down`)."""
    ns = {k: f"{testbed.prefix}-h{k}" for k in (0, 1)}
    steps = [["ip", "-n", ns[0], "link", "add", "mgmt", "type", "veth", "peer", "name", "mgmt",
              "netns", ns[1]]]
    for k in (0, 1):
        steps += [["ip", "-n", ns[k], "addr", "add", f"{MGMT[k]}/31", "dev", "mgmt"],
                  ["ip", "-n", ns[k], "link", "set", "mgmt", "up"]]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True)
        check(done.returncode == 0, f"{' '.join(step)}: {done.stderr.strip()}")


def start_agent(testbed, mroce):
    agent = subprocess.Popen(["ip", "netns", "exec", f"{testbed.prefix}-h1", mroce, "conform-agent",
                              "--listen", AGENT_CONTROL, "--udp", AGENT_UDP],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=die_with_parent)
    ready, _, _ = select.select([agent.stdout], [], [], 10)
    line = agent.stdout.readline() if ready else ""
    check(re.match(r"conform-agent: control \S+ udp \S+", line),
          f"the agent in host 1 did not start: {line!r} "
          f"{agent.stderr.read() if agent.poll() is not None else ''}")
    return agent


def stop(proc):
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def plane_counters(testbed, plane):
    return maps.read_counters(pathlib.Path(f"/sys/fs/bpf/{testbed.prefix}/p{plane}"))


def run(testbed, mroce, seed, plane, loss):
    listed = subprocess.run([mroce, "conform", "--list"], capture_output=True, text=True, timeout=30)
    names = [l.split()[0] for l in listed.stdout.splitlines() if l.strip()]
    check(listed.returncode == 0 and names, f"--list: exit {listed.returncode}")
    add_management_link(testbed)
    testbed.run("loss", str(plane), str(loss))
    agent = start_agent(testbed, mroce)
    try:
        before = plane_counters(testbed, plane)
        with tempfile.TemporaryDirectory() as d:
            junit = os.path.join(d, "conform.xml")
            t0 = time.monotonic()
            suite = subprocess.run(["ip", "netns", "exec", f"{testbed.prefix}-h0", mroce, "conform",
                                    AGENT_CONTROL, "--via", "up0", "--retries", "2",
                                    "--junit", junit, "--seed", str(seed)],
                                   capture_output=True, text=True, timeout=SUITE_BUDGET_S + 30)
            took = time.monotonic() - t0
            sys.stdout.write(suite.stdout)
            sys.stderr.write(suite.stderr)
            check(suite.returncode == 0, f"the suite exited {suite.returncode} with {loss}% loss on "
                  f"plane {plane}")
            check(took <= SUITE_BUDGET_S, f"the suite took {took:.1f} s (budget {SUITE_BUDGET_S} s)")
            root = ET.parse(junit).getroot()
        check(agent.poll() is None, f"the agent exited {agent.returncode} during the run")
    finally:
        stop(agent)
    seen = delta({"p": plane_counters(testbed, plane)}, {"p": before})["p"]
    cases = root.findall("testcase")
    check(len(cases) == len(names) and int(root.get("failures")) == 0,
          f"JUnit: {len(cases)} cases, {root.get('failures')} failures; --list has {len(names)}")
    retried = [c.get("name") for c in cases
               if c.find("properties/property[@name='attempts']") is not None]
    check(len(retried) <= MAX_RETRIED, f"{len(retried)} tests passed only at a later attempt "
          f"(at most {MAX_RETRIED}): {' '.join(retried)}")
    # The loss was real: the plane carried the target's packets and dropped some.
    check(seen["pkts"] > 0 and seen["loss_drops"] > 0,
          f"plane {plane} carried {seen['pkts']} packets and dropped {seen['loss_drops']}: "
          f"the run did not meet the loss")
    print(f"conform_netns: {len(cases)} tests passed across the testbed in {took:.1f} s with "
          f"{loss}% loss on plane {plane} ({seen['loss_drops']} of {seen['pkts']} packets "
          f"dropped there); {len(retried)} passed at a later attempt"
          + (f": {' '.join(retried)}" if retried else ""))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--testbed", required=True, help="path of scripts/testbed")
    parser.add_argument("--mroce", required=True, help="path of the mroce binary")
    parser.add_argument("--seed", type=int, default=None,
                        help="replay a run: the suite's seed and the lossy plane")
    parser.add_argument("--plane", type=int, choices=range(1, PLANES), default=None,
                        help="the lossy plane (default: drawn from the seed)")
    parser.add_argument("--loss", type=float, default=1.0, help="loss in percent (default 1)")
    args = parser.parse_args()
    # ctest's timeout and Ctrl-C must still reach the `finally` that removes the testbed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    seed = args.seed if args.seed is not None else random.randrange(1, 1 << 31)
    plane = args.plane if args.plane is not None else random.Random(seed).randrange(1, PLANES)
    try:
        preconditions()
    except Skip as reason:
        print(f"SKIP: {reason}")
        return SKIP
    testbed = Testbed(args.testbed, f"cf{os.getpid() % 100000:05d}")
    print(f"conform_netns: seed {seed} (replay with --seed {seed}), lossy plane {plane}, "
          f"prefix {testbed.prefix}")
    result = 0
    try:
        testbed.run("up", "--hosts", "2", "--planes", str(PLANES))
        run(testbed, args.mroce, seed, plane, args.loss)
    except (Failure, subprocess.TimeoutExpired) as failure:
        print(f"FAIL: {failure} (seed {seed}, prefix {testbed.prefix})")
        result = 1
    finally:
        subprocess.run([args.testbed, "down"], env=testbed.env, capture_output=True)
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    if testbed.prefix + "-" in left:
        print(f"FAIL: namespaces with prefix {testbed.prefix} remain after down")
        return 1
    if result == 0:
        print("PASS")
    return result


if __name__ == "__main__":
    sys.exit(main())
