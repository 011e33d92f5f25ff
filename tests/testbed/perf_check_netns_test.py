#!/usr/bin/python3
"""perf_check_netns_test.py — `mroce perf --check` against real corruption in transit: a
2-host, 2-plane testbed (scripts/testbed) whose planes flip one payload bit of 2% of the
large UDP datagrams and patch the UDP checksum to match (`testbed corrupt all 2`), so the
receiving kernel accepts them and only an end-to-end check can notice.

  detected   WRITE bandwidth with --check: both sides exit non-zero, naming the first
             mismatch found by the server, and the planes counted corrupted datagrams
  integrity  the same with --integrity (the CRC32C trailer, spec §4.9): the receiver drops
             every corrupted datagram (bad_integrity > 0), they are retransmitted, and
             --check finds every byte right
  sharded    integrity again with both devices over two threads (--threads 2, issue 19)

Exits 77 (ctest SKIP_RETURN_CODE) with a one-line reason when the machine cannot run it (not
root, no network namespaces, no tc eBPF). The testbed is removed on every exit path.

Usage: perf_check_netns_test.py --testbed PATH --mroce PATH
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testbed_test import SKIP, Failure, Skip, Testbed, check, preconditions  # noqa: E402

TIMEOUT = 60
ARGS = ["--check", "--verb", "write", "-n", "300", "-s", "65536"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_pair(testbed, mroce, extra):
    """Server in host 1, client in host 0; returns (client rc, stderr, json or None), (server rc, stderr)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "MROCE_PERF_TEST_CORRUPT"}
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    os.unlink(path)
    def start(host, argv):
        return subprocess.Popen(["ip", "netns", "exec", f"{testbed.prefix}-h{host}", mroce, "perf", *argv],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    server = start(1, ["-p", str(port)] + ARGS + extra)
    time.sleep(0.3)
    client = start(0, [testbed.run("addr", "1").strip(), "-p", str(port), "--json", path] + ARGS + extra)
    try:
        _, cerr = client.communicate(timeout=TIMEOUT)
        _, serr = server.communicate(timeout=TIMEOUT)
    finally:
        for proc in (client, server):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    result = None
    if os.path.exists(path):
        with open(path) as f:
            result = json.load(f)["results"][0]  # one size: a one-row array
        os.unlink(path)
    print(f"  client rc {client.returncode}: {cerr.strip()}\n  server rc {server.returncode}: {serr.strip()}")
    return (client.returncode, cerr, result), (server.returncode, serr)


def corrupted(testbed):
    return sum(c.get("corrupted", 0) for c in testbed.counters().values())


def case_detected(testbed, mroce):
    before = corrupted(testbed)
    (crc, cerr, _), (src, serr) = run_pair(testbed, mroce, [])
    flipped = corrupted(testbed) - before
    print(f"  the planes flipped a bit in {flipped} datagrams")
    check(flipped > 0, "the planes corrupted nothing")
    for name, rc, err in (("client", crc, cerr), ("server", src, serr)):
        check(rc != 0, f"the {name} exited 0 although {flipped} datagrams were corrupted")
        check("--check: the server found" in err and "first: queue pair 0 message" in err,
              f"the {name} did not name the mismatch: {err!r}")


def case_integrity(testbed, mroce):
    before = corrupted(testbed)
    (crc, cerr, result), (src, serr) = run_pair(testbed, mroce, ["--integrity"])
    flipped = corrupted(testbed) - before
    check(crc == 0 and src == 0, f"with --integrity: client {crc} ({cerr.strip()}), server {src} ({serr.strip()})")
    check(result is not None, "no JSON result")
    dropped = result.get("server_endpoint", {}).get("bad_integrity", 0) + \
        result.get("endpoint", {}).get("bad_integrity", 0)
    verified = result.get("server_check", {}).get("messages", 0)
    print(f"  the planes flipped {flipped}; the trailer caught {dropped}; the server verified {verified} messages")
    check(flipped > 0 and dropped > 0, "nothing was corrupted or nothing caught")
    check(verified == 300, f"the server verified {verified} of 300 messages")


def case_sharded(testbed, mroce):
    """integrity, with both devices spread over two threads (mroce perf --threads 2; issue
    19, docs/design.md §12): steering, shards and retransmission across real interfaces."""
    before = corrupted(testbed)
    (crc, cerr, result), (src, serr) = run_pair(testbed, mroce, ["--integrity", "--threads", "2"])
    flipped = corrupted(testbed) - before
    check(crc == 0 and src == 0, f"with --threads 2: client {crc} ({cerr.strip()}), server {src} ({serr.strip()})")
    check(result is not None, "no JSON result")
    dropped = result.get("server_endpoint", {}).get("bad_integrity", 0) + \
        result.get("endpoint", {}).get("bad_integrity", 0)
    verified = result.get("server_check", {}).get("messages", 0)
    print(f"  the planes flipped {flipped}; the trailer caught {dropped}; the server verified {verified} messages")
    check(flipped > 0 and dropped > 0, "nothing was corrupted or nothing caught")
    check(verified == 300, f"the server verified {verified} of 300 messages")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--testbed", required=True)
    parser.add_argument("--mroce", required=True)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        preconditions()
    except Skip as reason:
        print(f"SKIP: {reason}")
        return SKIP
    testbed = Testbed(args.testbed, f"pc{os.getpid() % 100000:05d}")
    print(f"perf_check_netns: prefix {testbed.prefix}")
    started = time.monotonic()
    result = 0
    try:
        testbed.run("up", "--hosts", "2", "--planes", "2")
        testbed.run("corrupt", "all", "2")
        for name, case in (("detected", case_detected), ("integrity", case_integrity),
                           ("sharded", case_sharded)):
            print(f"{name}:")
            case(testbed, args.mroce)
    except Failure as failure:
        print(f"FAIL: {failure} (prefix {testbed.prefix})")
        result = 1
    finally:
        subprocess.run([args.testbed, "down"], env=testbed.env, capture_output=True)
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    if testbed.prefix + "-" in left:
        print(f"FAIL: namespaces with prefix {testbed.prefix} remain after down")
        return 1
    if result == 0:
        print(f"PASS ({time.monotonic() - started:.1f} s)")
    return result


if __name__ == "__main__":
    sys.exit(main())
