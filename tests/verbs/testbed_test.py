#!/usr/bin/python3
"""testbed_test.py — unmodified perftest and Gloo on mroce's libibverbs.so.1 across the
network-namespace testbed (scripts/testbed: 2 hosts, 4 ECMP planes), server or rank 0 in
host 0 and client or rank 1 in host 1.

Cases:
  loss  1% random loss on plane 1, both directions: ib_{write,send,read,atomic}_bw,
        ib_write_lat and a Gloo job finish with exit 0 and their results (perftest stops
        at the first error completion; Gloo checks every sum), and plane 1 dropped packets
  cut   a plane taken down in the middle of ib_write_bw -D and of a Gloo job: both finish
        as above. perftest's own TCP connection rides the planes too, so the plane cut is
        one that carries neither direction of it (asked of the kernel's ECMP route).
  threads  devices of two shards each (MROCE_THREADS=2) under 1% loss on plane 1:
        ib_write_bw over 4 queue pairs, ib_send_lat and a Gloo job.
Exits 77 (ctest SKIP_RETURN_CODE) with a one-line reason where the machine cannot run the
testbed. The testbed is removed on every exit path.

usage: testbed_test.py --testbed PATH --lib DIR --gloo PROGRAM [--cases loss,cut,threads]
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testbed"))
from testbed_test import SKIP, Failure, Skip, Testbed, check, preconditions  # noqa: E402

PLANES = 4
TIMEOUT = 120
ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", re.M)
LIB = GLOO = None


def addr(host):
    return f"198.18.0.{host + 1}"  # docs/testbed.md


# Settings every process started gets (case_threads).
EXTRA_ENV = {}


def start(testbed, host, argv):
    env = dict(os.environ, LD_LIBRARY_PATH=LIB, MROCE_IP=addr(host), **EXTRA_ENV)
    return subprocess.Popen(["ip", "netns", "exec", f"{testbed.prefix}-h{host}", *argv], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc, what):
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise Failure(f"{what} did not finish within {TIMEOUT} s")
    return proc.returncode, out, err


def listening(testbed, host, port):
    out = subprocess.run(["ip", "netns", "exec", f"{testbed.prefix}-h{host}", "ss", "-Hltn",
                          f"sport = :{port}"], capture_output=True, text=True).stdout
    return bool(out.strip())


class Perftest:
    """A perftest server in host 0 and its client in host 1."""

    def __init__(self, testbed, tool, args, port):
        self.testbed, self.tool, self.port = testbed, tool, port
        common = ["-F", "-p", str(port)] + args
        self.server = start(testbed, 0, [tool] + common)
        deadline = time.monotonic() + 10
        while not listening(testbed, 0, port):
            if self.server.poll() is not None or time.monotonic() > deadline:
                raise Failure(f"{tool} server did not listen: {finish(self.server, tool)}")
            time.sleep(0.05)
        self.client = start(testbed, 1, [tool] + common + [addr(0)])
        self.what = f"{tool} {' '.join(args)}"

    def tcp_planes(self):
        """The planes perftest's TCP connection uses, in both directions."""
        out = subprocess.run(["ip", "netns", "exec", f"{self.testbed.prefix}-h1", "ss", "-Htn",
                              f"dport = :{self.port}"], capture_output=True, text=True).stdout
        planes = set()
        for line in out.splitlines():
            local = line.split()[3]
            sport = int(local.rsplit(":", 1)[1])
            for src, dst, s, d in ((1, 0, sport, self.port), (0, 1, self.port, sport)):
                route = subprocess.run(["ip", "-n", f"{self.testbed.prefix}-h{src}", "route", "get",
                                        addr(dst), "from", addr(src), "ipproto", "tcp", "sport",
                                        str(s), "dport", str(d)], capture_output=True,
                                       text=True).stdout
                m = re.search(r"dev up(\d+)", route)
                check(m is not None, f"no uplink in the route of perftest's TCP: {route}")
                planes.add(int(m.group(1)))
        check(bool(planes), "perftest's TCP connection not found")
        return planes

    def wait(self):
        results = {}
        for name, proc in (("client", self.client), ("server", self.server)):
            results[name] = finish(proc, f"{self.what} ({name})")
        for name, (rc, out, err) in results.items():
            noise = [l for l in err.splitlines()
                     if l.strip() and "Device not recognized to implement inline" not in l]
            check(rc == 0 and not noise, f"{self.what}: {name} exited {rc}\n{out}\n{err}")
        rows = ROW.findall(results["client"][1])
        check(bool(rows) and all(float(r[4]) > 0 for r in rows),
              f"{self.what}: no result\n{results['client'][1]}")
        print(f"  {self.what}: {rows[-1][0]} B x {rows[-1][1]}: {' '.join(rows[-1][2:])}", flush=True)


def perftest(testbed, tool, args, port):
    Perftest(testbed, tool, args, port).wait()


def gloo(testbed, count, iterations, during=None):
    store = tempfile.mkdtemp(prefix="mroce-gloo-")
    try:
        ranks = [start(testbed, r, [GLOO, str(r), "2", store, str(count), str(iterations)])
                 for r in range(2)]
        if during:
            during()
        for r, p in enumerate(ranks):
            rc, out, err = finish(p, f"gloo rank {r}")
            check(rc == 0 and f"rank {r}: OK" in out and not err.strip(),
                  f"gloo rank {r} exited {rc}\n{out}\n{err}")
        print(f"  gloo 2 ranks, {count} floats x {iterations} iterations: OK", flush=True)
    finally:
        shutil.rmtree(store, ignore_errors=True)


def loss_drops(testbed, plane):
    return testbed.counters()[f"p{plane}"]["loss_drops"]


def case_loss(testbed, port):
    testbed.run("loss", "1", "1")
    before = loss_drops(testbed, 1)
    try:
        perftest(testbed, "ib_write_bw", ["-n", "2000"], port)
        perftest(testbed, "ib_send_bw", ["-n", "2000"], port + 1)
        perftest(testbed, "ib_read_bw", ["-n", "1000"], port + 2)
        perftest(testbed, "ib_atomic_bw", ["-n", "1000"], port + 3)
        perftest(testbed, "ib_write_lat", ["-n", "1000"], port + 4)
        gloo(testbed, 100000, 5)
        dropped = loss_drops(testbed, 1) - before
        check(dropped > 0, "plane 1 dropped nothing: the runs did not cross the loss")
        print(f"  plane 1 dropped {dropped} packets", flush=True)
    finally:
        testbed.run("loss", "1", "0")


def case_cut(testbed, port):
    p = Perftest(testbed, "ib_write_bw", ["-D", "6"], port)
    time.sleep(2)
    spare = sorted(set(range(PLANES)) - p.tcp_planes())
    cut = spare[-1]
    testbed.run("plane-down", str(cut))
    print(f"  plane {cut} down 2 s into ib_write_bw -D 6", flush=True)
    try:
        p.wait()
    finally:
        testbed.run("plane-up", str(cut))

    def cut_soon():
        time.sleep(1)
        testbed.run("plane-down", "2")
        print("  plane 2 down 1 s into the Gloo job", flush=True)
    try:
        gloo(testbed, 200000, 40, during=cut_soon)
    finally:
        testbed.run("plane-up", "2")


def case_threads(testbed, port):
    # Devices of two shards each (MROCE_THREADS, docs/design.md §12) across the planes,
    # with 1 % loss on plane 1.
    EXTRA_ENV["MROCE_THREADS"] = "2"
    rc, out, err = finish(start(testbed, 0, ["ibv_devinfo", "-v"]), "ibv_devinfo")
    check(rc == 0 and re.search(r"max_srq:\s*0\b", out), f"not a device of shards:\n{out}{err}")
    testbed.run("loss", "1", "1")
    try:
        perftest(testbed, "ib_write_bw", ["-q", "4", "-n", "1000"], port)
        perftest(testbed, "ib_send_lat", ["-n", "500"], port + 1)
        gloo(testbed, 100000, 5)
    finally:
        testbed.run("loss", "1", "0")
        EXTRA_ENV.clear()


CASES = {"loss": case_loss, "cut": case_cut, "threads": case_threads}


def main():
    global LIB, GLOO
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--testbed", required=True)
    ap.add_argument("--lib", required=True, help="directory holding libibverbs.so.1")
    ap.add_argument("--gloo", required=True, help="tests/verbs/gloo_collectives")
    ap.add_argument("--cases", default=",".join(CASES))
    args = ap.parse_args()
    LIB, GLOO = os.path.abspath(args.lib), os.path.abspath(args.gloo)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # ctest's timeout: run `finally`
    try:
        preconditions()
        for tool in ("ib_write_bw", "ss"):
            if shutil.which(tool) is None:
                raise Skip(f"missing tool '{tool}'")
    except Skip as e:
        print(f"SKIP: {e}")
        return SKIP
    testbed = Testbed(os.path.abspath(args.testbed), f"mv{os.getpid() % 100000}")
    failed = []
    try:
        testbed.run("up", "--hosts", "2", "--planes", str(PLANES))
        for i, name in enumerate(args.cases.split(",")):
            start_t = time.monotonic()
            try:
                CASES[name](testbed, 20000 + 100 * i + os.getpid() % 50)
                print(f"ok    {name} ({time.monotonic() - start_t:.1f} s)", flush=True)
            except Failure as e:
                print(f"FAIL  {name}: {e}", flush=True)
                failed.append(name)
    finally:
        testbed.run("down")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
