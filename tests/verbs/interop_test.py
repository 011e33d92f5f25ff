#!/usr/bin/python3
"""interop_test.py — unmodified Debian RDMA programs on mroce's libibverbs.so.1.

Runs the installed binaries of rdma-core (ibv_devinfo, ibv_devices, ibv_rc_pingpong,
ibv_srq_pingpong, ibv_asyncwatch), qperf, perftest
(ib_{write,send,read,atomic}_{bw,lat}) and a Gloo program (tests/verbs/gloo_collectives.cc)
with LD_LIBRARY_PATH pointing at the library, server and client (or every rank) as
processes on this host, and checks what they print: exit codes, result rows for every
size of a sweep, byte counts, Gloo's checked sums, and a quiet stderr. Then the refusals:
what the library does not support fails with a one-line reason. No speed is asserted
(STYLE.md §6): docs/results.md has the measurements.

usage: interop_test.py LIBDIR GLOO_PROGRAM [CASE ...]
"""
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

LIBDIR = None
GLOO = None
TIMEOUT = 90  # seconds for one process; a hang fails the case instead of the suite


def env(**extra):
    e = dict(os.environ)
    e["LD_LIBRARY_PATH"] = LIBDIR
    e.update({k: str(v) for k, v in extra.items()})
    return e


def free_tcp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port):
    """True once some process listens on TCP `port` (read from /proc: a probe connection
    would be taken for the client by a one-shot server)."""
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as f:
                next(f)
                for line in f:
                    cols = line.split()
                    if int(cols[1].split(":")[1], 16) == port and cols[3] == "0A":
                        return True
        except FileNotFoundError:
            pass
    return False


def run(cmd, **extra):
    p = subprocess.run(cmd, env=env(**extra), capture_output=True, text=True, timeout=TIMEOUT)
    return p.returncode, p.stdout, p.stderr


def clean_stderr(text, allowed=()):
    """The lines of stderr that are not expected noise of the client itself."""
    return [l for l in text.splitlines() if l.strip() and not any(a in l for a in allowed)]


def server_client(server_cmd, client_cmd, port, allowed_stderr=(), **extra):
    """Starts the server, waits until it listens on `port`, runs the client; returns both
    results. Both processes are killed on any failure."""
    server = subprocess.Popen(server_cmd, env=env(**extra), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    client = None
    try:
        deadline = time.monotonic() + 10
        while not listening(port):
            if server.poll() is not None:
                out, err = server.communicate()
                raise AssertionError(f"server exited {server.returncode} before listening:\n{out}{err}")
            if time.monotonic() > deadline:
                raise AssertionError("server did not listen within 10 s")
            time.sleep(0.02)
        client = subprocess.Popen(client_cmd, env=env(**extra), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        results = {}
        for name, proc in (("client", client), ("server", server)):
            try:
                out, err = proc.communicate(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"{name} did not finish within {TIMEOUT} s: {' '.join(proc.args)}")
            results[name] = (proc.returncode, out, err)
        for name, (rc, out, err) in results.items():
            noise = clean_stderr(err, allowed_stderr)
            if rc != 0 or noise:
                raise AssertionError(f"{name} exited {rc}: {' '.join(server_cmd if name == 'server' else client_cmd)}\n"
                                     f"stdout:\n{out}\nstderr:\n{err}")
        return results
    finally:
        for proc in (client, server):
            if proc and proc.poll() is None:
                proc.kill()
                proc.wait()


# --- loading and ibv_devinfo --------------------------------------------------------------

LOADER_NOISE = ("no version information", "undefined symbol", "version `IBVERBS")


def case_devinfo():
    rc, out, err = run(["ibv_devinfo"])
    assert rc == 0 and not err.strip(), f"ibv_devinfo exited {rc}: {err}"
    for want in ("hca_id:\tmroce0", "PORT_ACTIVE", "link_layer:\t\tEthernet", "active_mtu:\t\t4096"):
        assert want in out, f"ibv_devinfo lacks {want!r}:\n{out}"
    rc, out, err = run(["ibv_devinfo", "-v"], MROCE_IP="127.0.0.7", MROCE_PORT="4797")
    assert rc == 0 and not err.strip(), f"ibv_devinfo -v exited {rc}: {err}"
    # The protocol's default port gives the plain RoCEv2 GID of the IPv4 address.
    assert re.search(r"GID\[\s*0\]:\s+::ffff:127\.0\.0\.7, RoCE v2", out), out
    rc, out, err = run(["ibv_devinfo", "-v"], MROCE_IP="127.0.0.7", MROCE_PORT="51120")
    assert rc == 0 and re.search(r"GID\[\s*0\]:\s+::c7b0:ffff:7f00:7, RoCE v2", out), out


def case_loader():
    # Every perftest binary loads libmlx5, libefa and librdmacm, bound at load time
    # against the library's version nodes: any missing name or node kills them at start.
    for tool in ("ib_write_bw", "ib_send_lat", "ib_read_bw", "ib_atomic_lat"):
        rc, out, err = run([tool, "--version"])  # exits 1 by perftest's own convention
        assert not any(n in err for n in LOADER_NOISE), f"{tool}: {err}"
        assert "Version:" in out and not err.strip(), f"{tool} --version: {rc}\n{out}\n{err}"
    rc, out, err = run(["ibv_devices"])
    assert rc == 0 and "mroce0" in out and not err.strip(), f"ibv_devices: {rc} {out} {err}"


# --- ibv_rc_pingpong ---------------------------------------------------------------------

def pingpong(args, **extra):
    port = free_tcp_port()
    res = server_client(["ibv_rc_pingpong", "-g", "0", "-p", str(port)] + args,
                        ["ibv_rc_pingpong", "-g", "0", "-p", str(port)] + args + ["127.0.0.1"],
                        port, **extra)
    size = int(args[args.index("-s") + 1]) if "-s" in args else 4096
    iters = int(args[args.index("-n") + 1]) if "-n" in args else 1000
    for name, (_, out, _) in res.items():
        # rc_pingpong counts both directions: size x iterations x 2 bytes.
        m = re.search(r"(\d+) bytes in [\d.]+ seconds", out)
        assert m and int(m.group(1)) == size * iters * 2, f"{name}: {out}"
        assert f"{iters} iters in" in out, f"{name}: {out}"


def case_pingpong():
    pingpong(["-n", "300"])
    pingpong(["-n", "300", "-e"])                  # completion channel, blocking events
    pingpong(["-s", "100", "-n", "500"])           # under max_inline_data: sent inline
    pingpong(["-s", "1", "-r", "4", "-n", "200"])  # a receive queue of 4
    pingpong(["-s", "65536", "-n", "50", "-e"])    # many packets per message
    pingpong(["-n", "300", "-N"])                  # the ibv_wr_* interface (extended QP)
    pingpong(["-s", "64", "-n", "300", "-N"])      # ... with inline data


def case_other_utilities():
    # ibv_srq_pingpong: 16 queue pairs sharing one receive queue.
    port = free_tcp_port()
    res = server_client(["ibv_srq_pingpong", "-g", "0", "-p", str(port), "-n", "300"],
                        ["ibv_srq_pingpong", "-g", "0", "-p", str(port), "-n", "300", "127.0.0.1"],
                        port)
    for name, (_, out, _) in res.items():
        assert "300 iters in" in out, f"{name}: {out}"
    # UC and UD are refused when the queue pair is created, with the reason; XRC domains
    # are not offered (the header's inline answers EOPNOTSUPP).
    for tool, kind in (("ibv_uc_pingpong", "UC"), ("ibv_ud_pingpong", "UD")):
        rc, out, err = run([tool, "-g", "0", "-p", str(free_tcp_port())])
        assert rc != 0 and f"only RC queue pairs are supported (asked for {kind})" in err, f"{tool}: {rc} {err}"
    # Completion timestamps (-t) are not offered: rc_pingpong asks the device and refuses.
    rc, out, err = run(["ibv_rc_pingpong", "-g", "0", "-t", "-p", str(free_tcp_port())])
    assert rc != 0 and "isn't completion timestamp capable" in err + out, f"-t: {rc} {out} {err}"
    rc, out, err = run(["ibv_xsrq_pingpong", "-p", str(free_tcp_port())])
    assert rc != 0 and "Couldn't Open the XRC Domain" in err + out, f"{rc} {out} {err}"
    # ibv_asyncwatch waits on the context's async_fd (and is stopped by the timeout).
    p = subprocess.Popen(["ibv_asyncwatch"], env=env(), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=1)
        raise AssertionError(f"ibv_asyncwatch exited {p.returncode}: {out} {err}")
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    assert "mroce0: async event FD" in out and not err.strip(), f"{out} {err}"


# --- perftest ----------------------------------------------------------------------------

# A result row: size, iterations, then three numbers (bw: peak, average, message rate;
# lat: t_min, t_max, t_typical).
ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", re.M)
# perftest's own notices: an unknown device gets no inline sends.
PERFTEST_NOISE = ("Device not recognized to implement inline feature",)


# perftest calibrates its cycle counter against gettimeofday at start; on a loaded machine
# the fit can fail ("Correlation coefficient r^2: 0.87 < 0.9") and that process reports
# every latency as inf. It says nothing of the transport: such a run is tried once more.
PERFTEST_CLOCK_FAILED = "Correlation coefficient r^2"


def perftest(tool, args, sizes=None, **extra):
    for attempt in (1, 2):
        port = free_tcp_port()
        common = ["-F", "-p", str(port)] + args
        try:
            res = server_client([tool] + common, [tool] + common + ["127.0.0.1"], port,
                                allowed_stderr=PERFTEST_NOISE, **extra)
            break
        except AssertionError as e:
            if attempt == 2 or PERFTEST_CLOCK_FAILED not in str(e):
                raise
            print(f"  {tool} {' '.join(args)}: perftest's clock calibration failed; again")
    out = res["client"][1]
    rows = ROW.findall(out)
    assert rows, f"{tool} {' '.join(args)}: no result rows:\n{out}"
    got = [int(r[0]) for r in rows]
    if sizes:
        assert got == sizes, f"{tool} {' '.join(args)}: sizes {got}, expected {sizes}"
    lat = tool.endswith("_lat")
    for r in rows:
        # lat: t_min and t_max; bw: the message rate (perftest prints MB/s with two
        # decimals, 0.00 for a slow small size, and no peak in duration mode)
        ok = float(r[2]) > 0 and float(r[3]) >= float(r[2]) if lat else float(r[4]) > 0
        assert ok, f"{tool} {' '.join(args)}: row {r}:\n{out}"
    return out


def sweep(lo, hi):
    sizes, s = [], lo
    while s <= hi:
        sizes.append(s)
        s *= 2
    return sizes


def case_perftest_bw():
    perftest("ib_write_bw", ["-n", "500", "--report_gbits"], [65536])
    perftest("ib_write_bw", ["-a", "-n", "20"], sweep(2, 1 << 23))
    perftest("ib_send_bw", ["-a", "-n", "20"], sweep(2, 1 << 23))
    perftest("ib_read_bw", ["-a", "-n", "20"], sweep(2, 1 << 23))
    perftest("ib_atomic_bw", ["-n", "500"], [8])
    perftest("ib_atomic_bw", ["-n", "500", "-A", "CMP_AND_SWAP"], [8])


def case_perftest_multi():
    out = perftest("ib_write_bw", ["-q", "4", "-n", "200"], [65536])
    assert re.search(r"Number of qps\s*:\s*4", out), out
    perftest("ib_read_bw", ["-q", "4", "-n", "200"], [65536])
    perftest("ib_send_bw", ["-q", "4", "-n", "200"], [65536])
    perftest("ib_send_bw", ["--use-srq", "-q", "2", "-n", "300"], [65536])  # a shared receive queue


def case_perftest_duration():
    perftest("ib_write_bw", ["-D", "2", "--report_gbits"], [65536])
    perftest("ib_send_bw", ["-D", "2"], [65536])


def case_perftest_lat():
    for tool in ("ib_write_lat", "ib_send_lat", "ib_read_lat", "ib_atomic_lat"):
        perftest(tool, ["-n", "500"], [8 if "atomic" in tool else 2])
    perftest("ib_send_lat", ["-n", "300", "-e"], [2])  # completion events
    # One completion channel for both CQs, and one poll of the other CQ per event: a
    # receive told before the send completion that came with it failed about one round
    # trip in a thousand (tests/api/loopback_test.cc, ASendCompletionIsQueued...).
    perftest("ib_send_lat", ["-s", "4096", "-n", "1000", "-e"], [4096])
    # Size sweeps: WRITE's receiver polls the last byte of each message (last byte last);
    # READ is swept by case_perftest_bw.
    perftest("ib_write_lat", ["-a", "-n", "10"], sweep(2, 1 << 23))
    perftest("ib_send_lat", ["-a", "-n", "5"], sweep(2, 1 << 23))


def case_threads():
    # MROCE_THREADS=2 on both sides: each device runs two shards, a progress thread each,
    # and a queue pair goes to its peer's shard at RTR (docs/design.md §12). Receives
    # posted before RTR (ibv_rc_pingpong posts its whole receive queue in INIT) move too.
    t = {"MROCE_THREADS": "2"}
    for _ in range(4):  # a fresh port each time: the peer lands in either shard
        pingpong(["-n", "200"], **t)
    pingpong(["-s", "65536", "-n", "50", "-e"], **t)
    perftest("ib_write_bw", ["-q", "4", "-n", "200"], [65536], **t)
    perftest("ib_read_bw", ["-n", "200"], [65536], **t)
    perftest("ib_send_lat", ["-n", "300"], [2], **t)
    perftest("ib_send_lat", ["-s", "4096", "-n", "300", "-e"], [4096], **t)
    perftest("ib_atomic_lat", ["-n", "300"], [8], **t)
    # No shared receive queues on such a device: refused, with the reason, and not offered.
    rc, out, err = run(["ibv_srq_pingpong", "-g", "0", "-p", str(free_tcp_port())], **t)
    assert rc != 0 and "no shared receive queues on a device of 2 threads" in err, f"srq: {rc} {err}"
    rc, out, err = run(["ibv_devinfo", "-v"], **t)
    assert rc == 0 and re.search(r"max_srq:\s*0\b", out), out
    rc, out, err = run(["ibv_devinfo"], MROCE_THREADS="17")
    assert rc != 0 and "MROCE_THREADS=17: not a thread count (1..16)" in err, err


# --- Gloo --------------------------------------------------------------------------------

def gloo(ranks, count=100000, iterations=3):
    store = tempfile.mkdtemp(prefix="mroce-gloo-")
    procs = []
    try:
        for r in range(ranks):
            procs.append(subprocess.Popen([GLOO, str(r), str(ranks), store, str(count),
                                           str(iterations)], env=env(), stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
        for r, p in enumerate(procs):
            try:
                out, err = p.communicate(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"gloo rank {r} of {ranks} did not finish")
            assert p.returncode == 0 and f"rank {r}: OK" in out and not err.strip(), \
                f"gloo rank {r} of {ranks} exited {p.returncode}:\n{out}\n{err}"
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(store, ignore_errors=True)


def case_gloo():
    if not GLOO:
        print("  skip: Gloo (libgloo-dev) was not found when the tests were built")
        return
    gloo(2)
    gloo(4)
    gloo(3, count=1000, iterations=10)


# --- refusals ----------------------------------------------------------------------------

def case_refusals():
    rc, out, err = run(["ibv_devinfo"], MROCE_PORT="http")
    assert rc != 0 and "MROCE_PORT=http" in err, f"{rc}: {err}"
    assert len(clean_stderr(err, ("Failed to open device", "Failed to get"))) == 1, err
    rc, out, err = run(["ibv_devinfo"], MROCE_IP="10.0.0.300")
    assert rc != 0 and "MROCE_IP=10.0.0.300: not an IPv4 address" in err, err
    # UD is refused when the queue pair is created (after perftest's TCP exchange), with
    # the reason, on both sides.
    port = free_tcp_port()
    args = ["ib_send_bw", "-F", "-c", "UD", "-n", "10", "-p", str(port)]
    server = subprocess.Popen(args, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    try:
        deadline = time.monotonic() + 10
        while not listening(port) and time.monotonic() < deadline:
            time.sleep(0.02)
        rc, out, err = run(args + ["127.0.0.1"])
        assert rc != 0 and "only RC queue pairs are supported" in err, f"{rc}:\n{out}\n{err}"
        sout, serr = server.communicate(timeout=TIMEOUT)
        assert server.returncode != 0 and "only RC queue pairs are supported" in serr, serr
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def case_rdma_cm():
    # rdma_cm is not provided: Debian's librdmacm, loaded beside the library, finds no
    # rdma_cm device and the program exits with its own error, server and client alike
    # (librdmacm builds paths from ibv_get_sysfs_path(); a wrong signature crashed it).
    for args in (["ib_send_bw", "-R", "-n", "10"], ["ib_write_lat", "-z", "-n", "10"],
                 ["ib_read_bw", "-R", "-n", "10", "127.0.0.1"]):
        rc, out, err = run(args + ["-p", str(free_tcp_port())])
        assert rc == 1 and "rdma_create_event_channel failed" in err, \
            f"{' '.join(args)}: exit {rc} (a negative one is a signal):\n{out}\n{err}"


def case_lid_addressing():
    # Without -g, ibv_rc_pingpong addresses its peer by LID; the LID is the UDP port, which
    # reaches a peer on this host.
    pingpong_args = ["-n", "200", "-s", "1024"]
    port = free_tcp_port()
    res = server_client(["ibv_rc_pingpong", "-p", str(port)] + pingpong_args,
                        ["ibv_rc_pingpong", "-p", str(port)] + pingpong_args + ["127.0.0.1"], port)
    for name, (_, out, _) in res.items():
        assert "200 iters in" in out, f"{name}: {out}"


def case_qperf():
    # qperf exchanges LIDs (no GIDs) over its own TCP connection.
    if not shutil.which("qperf"):
        print("  skip: qperf not installed")
        return
    port = free_tcp_port()
    tests = ["rc_bw", "rc_lat", "rc_rdma_write_bw", "rc_rdma_write_lat", "rc_rdma_read_bw",
             "rc_rdma_read_lat", "rc_compare_swap_mr", "rc_fetch_add_mr"]
    server = subprocess.Popen(["qperf", "-lp", str(port)], env=env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 10
        while not listening(port) and time.monotonic() < deadline:
            time.sleep(0.02)
        rc, out, err = run(["qperf", "-lp", str(port), "-t", "1", "127.0.0.1"] + tests)
        assert rc == 0 and not err.strip(), f"qperf exited {rc}:\n{out}\n{err}"
        for t in tests:
            m = re.search(rf"^{t}:\n\s+(bw|latency|msg_rate)\s+=\s+([\d.]+)", out, re.M)
            assert m and float(m.group(2)) > 0, f"qperf {t}:\n{out}"
    finally:
        server.kill()
        server.wait()


CASES = {name[5:]: fn for name, fn in sorted(globals().items()) if name.startswith("case_")}


def main():
    global LIBDIR, GLOO
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    LIBDIR = os.path.abspath(sys.argv[1])
    GLOO = os.path.abspath(sys.argv[2]) if sys.argv[2] else ""
    missing = [t for t in ("ibv_devinfo", "ibv_rc_pingpong", "ib_write_bw") if not shutil.which(t)]
    if missing:
        print(f"SKIP: {', '.join(missing)} not installed (ibverbs-utils, perftest)")
        return 77
    names = sys.argv[3:] or list(CASES)
    failed = []
    for name in names:
        start = time.monotonic()
        try:
            CASES[name]()
            print(f"ok    {name} ({time.monotonic() - start:.1f} s)", flush=True)
        except AssertionError as e:
            print(f"FAIL  {name}: {e}", flush=True)
            failed.append(name)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
