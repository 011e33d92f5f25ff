#!/usr/bin/python3
"""perf_check_test.py — `mroce perf --check` end to end (issue 17): a server and a client on
127.0.0.1 (free ports; both killed on any failure).

1. A checked transfer of every test type perf has (write, send, read and atomic bandwidth;
   write (WRITE_WITH_IMM), send, read and atomic ping-pong) passes on both sides, and the
   side that receives the data says it verified every message.
2. A corruption is detected: MROCE_PERF_TEST_CORRUPT=N (test-only) makes the side that fills
   the data flip one bit of message N; the verifying side names that message and offset,
   and both exit non-zero. For WRITE and SEND the client fills, for READ the server.
3. The two sides must agree: a server with --check refuses a client without it, and
   --check refuses what it cannot verify (--raw, -D with WRITE, too many WRITE slots),
   each in one line.

usage: perf_check_test.py PATH/TO/mroce
"""
import os
import re
import socket
import subprocess
import sys

TIMEOUT = 30  # seconds for one process
MROCE = None


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_pair(args, server_args=None, client_env=None, server_env=None):
    """Runs server and client; returns {"client": (rc, out, err), "server": (...)}."""
    port = free_port()
    sargs = args if server_args is None else server_args
    def env(extra):
        e = dict(os.environ)
        e.update(extra or {})
        return e
    server = subprocess.Popen([MROCE, "perf", "-p", str(port)] + sargs, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env(server_env))
    client = subprocess.Popen([MROCE, "perf", "127.0.0.1", "-p", str(port)] + args,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env(client_env))
    print(f"  port {port}: mroce perf {' '.join(args)}", flush=True)
    out = {}
    try:
        for name, proc in (("client", client), ("server", server)):
            try:
                stdout, stderr = proc.communicate(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"{name} did not finish within {TIMEOUT} s")
            out[name] = (proc.returncode, stdout, stderr)
    finally:
        for proc in (client, server):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return out


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def verified(stdout, who):
    """{size: messages} from the '--check #bytes S: the WHO verified N messages' lines."""
    found = {}
    for m in re.finditer(r"--check #bytes (\d+): the (\w+) verified (\d+) messages, (\d+) bytes",
                         stdout):
        if m.group(2) == who:
            size, n, nbytes = int(m.group(1)), int(m.group(3)), int(m.group(4))
            check(nbytes == size * n, f"{who} verified {nbytes} bytes for {n} x {size}")
            found[size] = n
    return found


# (extra args, who verifies, messages verified per size)
CLEAN = [
    (["--verb", "write", "-n", "300", "-s", "65536"], "server", 300),
    (["--verb", "write", "-n", "200", "-q", "2", "-s", "12345"], "server", 400),
    (["--verb", "send", "-n", "300", "-s", "65536"], "server", 300),
    (["--verb", "send", "-n", "200", "-q", "2", "-s", "9001"], "server", 400),
    (["--verb", "read", "-n", "300", "-s", "65536"], "client", 300),
    (["--verb", "write", "--lat", "-n", "100", "-s", "5000"], "both", 116),
    (["--verb", "send", "--lat", "-n", "100", "-s", "5000"], "both", 116),
    (["--verb", "read", "--lat", "-n", "100", "-s", "5000"], "client", 116),
    # FETCH_ADD: the client checks every returned value, the server the final counter.
    (["--verb", "atomic", "-n", "300", "-q", "2", "-s", "8"], "client", 600),
    (["--verb", "atomic", "--lat", "-n", "100", "-s", "8"], "client", 116),
]


def clean_runs():
    for extra, who, n in CLEAN:
        check_clean(run_pair(["--check"] + extra), extra, who, n)


# A server spread over two threads (mroce perf --threads 2; issue 19, docs/design.md §12),
# and every other run a client too: the same verification through sharded devices.
SHARDED = [
    (["--verb", "write", "-n", "300", "-q", "4", "-s", "65536"], "server", 1200),
    (["--verb", "send", "-n", "200", "-q", "2", "-s", "9001"], "server", 400),
    (["--verb", "read", "-n", "300", "-s", "65536"], "client", 300),
    (["--verb", "atomic", "-n", "300", "-q", "2", "-s", "8"], "client", 600),
    (["--verb", "send", "--lat", "-n", "100", "-s", "5000"], "both", 116),
]


def sharded_runs():
    threads = ["--threads", "2"]
    for i, (extra, who, n) in enumerate(SHARDED):
        out = run_pair(["--check"] + extra + (threads if i % 2 else []),
                       server_args=["--check"] + extra + threads)
        check_clean(out, extra, who, n)


def check_clean(out, extra, who, n):
    """Both sides exited cleanly and `who` verified n messages of the run's size."""
    size = int(extra[extra.index("-s") + 1])
    for name in ("client", "server"):
        rc, stdout, stderr = out[name]
        check(rc == 0, f"{name} exited {rc}: {stderr.strip()}\n{stdout}")
        check("mismatch" not in stderr, f"{name}: {stderr}")
    # Both sides print both tallies (each has the other's in the result row).
    for name in ("client", "server"):
        stdout = out[name][1]
        for side in (["client", "server"] if who == "both" else [who]):
            got = verified(stdout, side).get(size)
            check(got == n, f"{name}'s output: the {side} verified {got} messages, expected {n}\n{stdout}")


# (extra args, the side whose env corrupts, the side that finds it)
CORRUPT = [
    (["--verb", "write", "-n", "100", "-s", "65536"], "client", "server"),
    (["--verb", "send", "-n", "100", "-s", "65536"], "client", "server"),
    (["--verb", "read", "-n", "100", "-s", "65536"], "server", "client"),
    (["--verb", "send", "--lat", "-n", "100", "-s", "4096"], "server", "client"),
]
CORRUPT_MESSAGE = 37


def corruption_detected():
    for extra, corrupter, finder in CORRUPT:
        env = {"MROCE_PERF_TEST_CORRUPT": str(CORRUPT_MESSAGE)}
        out = run_pair(["--check"] + extra, client_env=env if corrupter == "client" else None,
                       server_env=env if corrupter == "server" else None)
        size = int(extra[extra.index("-s") + 1])
        want = (f"the {finder} found 1 bytes wrong in 1 of ", f"first: queue pair 0 message "
                f"{CORRUPT_MESSAGE} offset {size // 2}: expected 0x")
        for name in ("client", "server"):
            rc, stdout, stderr = out[name]
            check(rc != 0, f"{name} exited 0 although message {CORRUPT_MESSAGE} was corrupted\n{stdout}")
            check(all(w in stderr for w in want), f"{name}'s error does not name the mismatch: {stderr}")
            lines = [l for l in stderr.splitlines() if "--check" in l]
            check(len(lines) == 1, f"{name}: expected one --check line, got {lines}")
            m = re.search(r"expected (0x[0-9a-f]+), got (0x[0-9a-f]+)", lines[0])
            check(m and int(m.group(1), 16) ^ int(m.group(2), 16) == 1, f"not one flipped bit: {lines[0]}")
    # Without --check the same corruption goes unnoticed: the test above is what catches it.
    out = run_pair(["--verb", "write", "-n", "100", "-s", "65536"],
                   client_env={"MROCE_PERF_TEST_CORRUPT": str(CORRUPT_MESSAGE)})
    for name in ("client", "server"):
        check(out[name][0] == 0, f"{name} without --check exited {out[name][0]}: {out[name][2]}")


def agreement():
    # A server with --check refuses a client without it; both say so in one line. (The
    # server then waits for its next client, as after any client it turns away.)
    port = free_port()
    server = subprocess.Popen([MROCE, "perf", "-p", str(port), "--check"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        client = subprocess.run([MROCE, "perf", "127.0.0.1", "-p", str(port), "-n", "50"],
                                capture_output=True, text=True, timeout=TIMEOUT)
    finally:
        server.kill()
        _, server_err = server.communicate()
    want = "this server runs --check and the client does not"
    check(client.returncode != 0, "the client accepted a --check mismatch")
    check(want in client.stderr and len(client.stderr.splitlines()) == 1, f"client: {client.stderr!r}")
    check(want in server_err, f"server: {server_err!r}")
    # What --check cannot verify is refused before anything runs (one line, no server).
    for extra, words in ((["--raw"], "not --raw"),
                         (["--verb", "write", "-D", "1"], "give -n, not -D"),
                         (["--verb", "write", "-n", "20000", "-s", "1M"], "<= 1 GiB")):
        proc = subprocess.run([MROCE, "perf", "127.0.0.1", "-p", str(free_port()), "--check"] + extra,
                              capture_output=True, text=True, timeout=TIMEOUT)
        check(proc.returncode != 0 and words in proc.stderr and len(proc.stderr.splitlines()) == 1,
              f"--check {' '.join(extra)}: rc {proc.returncode}, {proc.stderr!r}")


def main():
    global MROCE
    MROCE = sys.argv[1]
    cases = [clean_runs, sharded_runs, corruption_detected, agreement]
    failed = 0
    for case in cases:
        print(f"{case.__name__}:", flush=True)
        try:
            case()
            print("  ok", flush=True)
        except AssertionError as e:
            failed += 1
            print(f"  FAILED: {e}", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
