#!/usr/bin/python3
"""perf_cli_test.py — `mroce perf` end to end: a server and a client as two processes on
127.0.0.1 (free ports picked at random, both killed on any failure). Checks exit codes,
the perftest-style tables on both sides, and that --json is valid JSON with perftest's
keys and sane values (bytes moved = size x iterations, percentiles ordered, ...), for
--bw and --lat, write, send, read and atomic, MetaRoCE and --raw, the congestion-control
flags (--cc, --no-hint, --no-pacing, --tc, --dscp-map, --line-rate); then the error paths: a
verb without a --raw baseline, an unreachable server, a bad flag value, control lines of
the wrong types (answered, and the server keeps serving) and a peer killed mid-run (an
error, not a hang). Plumbing only: no speed is asserted (STYLE.md §6).

usage: perf_cli_test.py PATH/TO/mroce [CASE ...]
"""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

MROCE = None
TIMEOUT = 30  # seconds for one process; a hang fails the case instead of the suite


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Pair:
    """A server and a client of one run; both are killed when the pair is closed."""

    def __init__(self, args, client_extra=(), server_args=None, host="127.0.0.1"):
        self.port = free_port()
        self.json = tempfile.NamedTemporaryFile(suffix=".json", delete=False).name
        os.unlink(self.json)
        sargs = args if server_args is None else server_args
        self.server = subprocess.Popen([MROCE, "perf", "-p", str(self.port)] + sargs,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.client = subprocess.Popen(
            [MROCE, "perf", host, "-p", str(self.port), "--json", self.json] + args +
            list(client_extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        print(f"  port {self.port}: mroce perf {' '.join(args)}", flush=True)

    def wait(self):
        out = {}
        for name, proc in (("client", self.client), ("server", self.server)):
            try:
                stdout, stderr = proc.communicate(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                self.close()
                raise AssertionError(f"{name} did not finish within {TIMEOUT} s")
            out[name] = (proc.returncode, stdout, stderr)
        return out

    def close(self):
        for proc in (self.client, self.server):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if os.path.exists(self.json):
            os.unlink(self.json)


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def run_ok(args, host="127.0.0.1"):
    """Runs a pair that must succeed; returns (client stdout, server stdout, json)."""
    pair = Pair(args, host=host)
    try:
        out = pair.wait()
        for name in ("client", "server"):
            rc, stdout, stderr = out[name]
            check(rc == 0, f"{name} exited {rc}: {stderr.strip()}\n{stdout}")
        check(os.path.exists(pair.json),
              f"the client wrote no --json file; its stderr: {out['client'][2].strip()}")
        with open(pair.json) as f:
            doc = json.load(f)  # raises on invalid JSON
        check_shape(doc)
        return out["client"][1], out["server"][1], doc
    finally:
        pair.close()


def check_shape(doc):
    """results is always an array of per-size rows, with or without -a (tools/README.md)."""
    rows = doc.get("results")
    check(isinstance(rows, list) and rows, f"results is not a non-empty array: {rows!r:.200}")
    check(all(isinstance(r, dict) and isinstance(r.get("MsgSize"), int) for r in rows),
          f"a results row is not an object with MsgSize: {rows!r:.200}")


def one(doc, size=None):
    """The single row of a run without -a (one size): an array of exactly one row."""
    rows = doc["results"]
    check(isinstance(rows, list) and len(rows) == 1, f"one size gave {len(rows)} rows")
    check(size is None or rows[0]["MsgSize"] == size, f"row for {rows[0]['MsgSize']}, not {size}")
    return rows[0]


def check_tables(stdout, title, head, sizes):
    check(title in stdout, f"no '{title}' title in:\n{stdout}")
    check(head in stdout, f"no table header '{head}' in:\n{stdout}")
    check("-" * 87 in stdout, "no perftest rule line")
    # The rows are the lines between the header and the next rule.
    lines = stdout.splitlines()
    start = next(i for i, l in enumerate(lines) if head in l) + 1
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("---"))
    rows = [l.split() for l in lines[start:end]]
    got = [int(r[0]) for r in rows]
    check(got == sizes, f"table rows for sizes {got}, expected {sizes}")
    return rows


def check_bw(doc, size, messages, paths):
    r = one(doc, size)
    for key in ("MsgSize", "n_iterations", "BW_peak", "BW_average", "MsgRate", "bytes",
                "counters"):
        check(key in r, f"results has no {key}: {sorted(r)}")
    check(r["MsgSize"] == size, f"MsgSize {r['MsgSize']} != {size}")
    check(r["n_iterations"] == messages, f"n_iterations {r['n_iterations']} != {messages}")
    check(r["bytes"] == size * messages, f"bytes {r['bytes']} != {size} x {messages}")
    check(r["BW_average"] > 0 and r["MsgRate"] > 0, "zero bandwidth")
    check(r["BW_peak"] >= r["BW_average"] * 0.999, "BW_peak below BW_average")
    c = r["counters"]
    check(len(c["paths"]) == paths, f"{len(c['paths'])} per-path entries, expected {paths}")
    sent = sum(p["packets_sent"] for p in c["paths"])
    check(sent >= size * messages // 4096, f"only {sent} DATA packets for {size * messages} B")
    check(c["retransmits"] >= 0 and c["ecn_marks"] >= 0, "bad counters")
    info = doc["test_info"]
    check(info["transport"] == "mroce" and info["paths"] == paths, f"test_info {info}")


def check_lat(doc, size, iterations):
    r = one(doc, size)
    for key in ("t_min", "t_max", "t_typical", "t_avg", "t_stdev", "percentile_99",
                "percentile_99.9"):
        check(key in r, f"results has no {key}: {sorted(r)}")
    check(r["MsgSize"] == size, f"MsgSize {r['MsgSize']}")
    check(r["n_iterations"] + r.get("lost_pings", 0) == iterations,
          f"n_iterations {r['n_iterations']} for {iterations} ping-pongs")
    check(0 < r["t_min"] <= r["t_typical"] <= r["t_max"], f"t_min/typical/max out of order: {r}")
    check(r["t_min"] <= r["t_avg"] <= r["t_max"], f"t_avg outside [t_min, t_max]: {r}")
    check(r["percentile_99"] <= r["percentile_99.9"] <= r["t_max"], f"percentiles: {r}")
    check(r["t_stdev"] >= 0, "negative stdev")


BW_HEAD = "#bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]"
LAT_HEAD = "#bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]"


def case_write_bw():
    client, server, doc = run_ok(["-s", "65536", "-n", "300", "--paths", "4"])
    for out in (client, server):
        check_tables(out, "RDMA_Write BW Test", BW_HEAD, [65536])
        check("retransmits:" in out and "path" in out, "no counters after the table")
    check("(server)" in server, "the server's banner does not say so")
    check_bw(doc, 65536, 300, 4)
    # Both endpoints' own counters: everything they received, nothing dropped.
    r = one(doc)
    for key in ("endpoint", "server_endpoint"):
        e = r.get(key, {})
        check(e.get("datagrams_received", 0) > 0 and e.get("bad_token") == 0
              and e.get("truncated") == 0, f"{key}: {e}")


def case_send_bw_two_qps_gbits():
    client, server, doc = run_ok(["--verb", "send", "-s", "10000", "-n", "200", "-q", "2",
                                  "--report_gbits", "-F"])
    head = BW_HEAD.replace("MB/sec", "Gb/sec")
    check_tables(client, "Send BW Test", head, [10000])
    check_tables(server, "Send BW Test", head, [10000])
    check_bw(doc, 10000, 400, 8)
    check(doc["test_info"]["BW_unit"] == "Gb/sec", "BW_unit")
    # The server received every message the client completed.
    check(one(doc)["server_received_messages"] == 400, "server received count")


def case_write_lat():
    client, server, doc = run_ok(["--lat", "-s", "8", "-n", "300"])
    check_tables(client, "RDMA_Write Lat Test", LAT_HEAD, [8])
    check_tables(server, "RDMA_Write Lat Test", LAT_HEAD, [8])
    check_lat(doc, 8, 300)


def case_send_lat_no_offload():
    client, _, doc = run_ok(["--lat", "--verb", "send", "-s", "5000", "-n", "200",
                             "--no-offload"])
    check_tables(client, "Send Lat Test", LAT_HEAD, [5000])
    check("none (--no-offload)" in client, "offload line")
    check_lat(doc, 5000, 200)


def case_all_sizes():
    client, server, doc = run_ok(["-a", "-n", "5", "--paths", "2"])
    sizes = [2 ** k for k in range(1, 24)]
    check_tables(client, "RDMA_Write BW Test", BW_HEAD, sizes)
    check_tables(server, "RDMA_Write BW Test", BW_HEAD, sizes)
    # -a prints the table only, as perftest does, and one summary line; no per-size or
    # per-path counter blocks after it.
    for out in (client, server):
        check("retransmits:" not in out and " #bytes 2:" not in out, "per-size counters after an -a table")
        check(f"over {len(sizes)} sizes:" in out, "no summary line after the -a table")
    # The same shape as one size (check_shape in run_ok): one row per size, in order, each
    # with the keys a single size's row has.
    results = doc["results"]
    check(len(results) == len(sizes), f"{len(results)} rows for {len(sizes)} sizes")
    for r, s in zip(results, sizes):
        for key in ("MsgSize", "n_iterations", "BW_peak", "BW_average", "MsgRate", "bytes",
                    "counters"):
            check(key in r, f"size {s}: row has no {key}: {sorted(r)}")
        check(r["MsgSize"] == s and r["bytes"] == 5 * s, f"size {s}: {r['bytes']} bytes")


def case_raw_bw():
    client, server, doc = run_ok(["--raw", "-s", "65536", "-n", "200"])
    check_tables(client, "Raw_UDP (RDMA_Write baseline) BW Test", BW_HEAD, [65536])
    check_tables(server, "Raw_UDP (RDMA_Write baseline) BW Test", BW_HEAD, [65536])
    r = one(doc, 65536)
    check(doc["test_info"]["transport"] == "udp-raw", "transport")
    check(r["datagrams_sent"] == 200 * 16, f"datagrams_sent {r['datagrams_sent']}")
    check(0 < r["bytes"] <= 65536 * 200, f"bytes {r['bytes']}")
    check(r["datagrams_received"] + r["lost_datagrams"] == r["datagrams_sent"], "loss count")
    check(r["bytes"] == r["datagrams_received"] * 4096, "bytes placed != datagrams x 4096")


def case_raw_lat():
    client, _, doc = run_ok(["--raw", "--lat", "-s", "8", "-n", "300"])
    check_tables(client, "Raw_UDP (RDMA_Write baseline) Lat Test", LAT_HEAD, [8])
    check_lat(doc, 8, 300)


def case_ipv6():
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
            s.bind(("::1", 0))
    except OSError as e:
        print(f"  skipped: no IPv6 loopback here ({e})")
        return
    client, _, doc = run_ok(["-s", "8192", "-n", "100"], host="::1")
    check("[0000:0000:0000:0000:0000:0000:0000:0001]" in client, "not over ::1")
    check_bw(doc, 8192, 100, 8)


def interval_rows(stdout):
    """The -i rows of stdout: (start, end, size, iterations) per line like
    '   0.00-0.30      65536      1234   ...'."""
    rows = []
    for line in stdout.splitlines():
        f = line.split()
        if f and "-" in f[0] and f[0].replace("-", "").replace(".", "").isdigit():
            a, b = f[0].split("-")
            rows.append((float(a), float(b), int(f[1]), int(f[2])))
    return rows


def check_intervals(stdout, r, every, size):
    """-i rows on stdout and in results.intervals: back to back from 0, each at most
    `every` long, and together exactly the run's messages and bytes."""
    rows = interval_rows(stdout)
    iv = r.get("intervals")
    check(isinstance(iv, list) and len(iv) >= 3, f"results.intervals: {iv!r:.200}")
    check(len(rows) == len(iv), f"{len(rows)} interval rows printed, {len(iv)} in JSON")
    check(iv[0]["start_s"] == 0, f"first interval starts at {iv[0]['start_s']}")
    for a, b in zip(iv, iv[1:]):
        check(abs(a["end_s"] - b["start_s"]) < 1e-9, f"intervals not back to back: {a} {b}")
    for x, (s0, s1, sz, n) in zip(iv, rows):
        check(0 < x["end_s"] - x["start_s"] <= every + 1e-9, f"interval {x} longer than {every}")
        check(abs(x["start_s"] - s0) < 0.006 and abs(x["end_s"] - s1) < 0.006 and sz == size
              and n == x["n_iterations"], f"row {(s0, s1, sz, n)} != {x}")
    check(sum(x["n_iterations"] for x in iv) == r["n_iterations"],
          f"intervals sum to {sum(x['n_iterations'] for x in iv)} messages, the run to {r['n_iterations']}")
    return iv


def case_interval_bw_out_json():
    # -i 0.25 over -D 1.2: about five rows, then the table's row under its own head; the
    # JSON goes where perftest's --out_json_file says.
    out = tempfile.NamedTemporaryFile(suffix=".json", delete=False).name
    os.unlink(out)
    port = free_port()
    server = subprocess.Popen([MROCE, "perf", "-p", str(port)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        rc, stdout, err = run_fail(["perf", "127.0.0.1", "-p", str(port), "-D", "1.2", "-i", "0.25",
                                    "-s", "65536", "--out_json_file", out])
        check(rc == 0, f"client exited {rc}: {err}")
        check(server.wait(timeout=TIMEOUT) == 0, "server failed")
        with open(out) as f:
            doc = json.load(f)
        check_shape(doc)
        r = one(doc, 65536)
        iv = check_intervals(stdout, r, 0.25, 65536)
        check(4 <= len(iv) <= 7, f"{len(iv)} intervals for -D 1.2 -i 0.25")
        check(sum(x["bytes"] for x in iv) == r["bytes"], "interval bytes do not sum to the run's")
        lines = stdout.splitlines()
        head = next(i for i, l in enumerate(lines) if "interval[sec]" in l)
        last_row = max(i for i, l in enumerate(lines) if interval_rows(l))
        check(BW_HEAD in lines[last_row + 1] and lines[last_row + 2].split()[0] == "65536",
              f"the table row does not follow the interval rows under its head:\n{stdout}")
        check(head < last_row and BW_HEAD not in "\n".join(lines[:head]),
              "the table head is printed above the interval rows")
    finally:
        if server.poll() is None:
            server.kill()
        server.wait()
        if os.path.exists(out):
            os.unlink(out)


def case_interval_lat_and_raw():
    # Latency rows carry the interval's mean and p99; --raw bandwidth rows count what the
    # client sent. --out_json alone writes perftest_out.json in the working directory.
    for args, every in ((["--lat", "-D", "0.8", "-i", "0.2"], 0.2),
                        (["--raw", "-D", "0.8", "-i", "0.2", "-s", "8192"], 0.2)):
        with tempfile.TemporaryDirectory() as cwd:
            port = free_port()
            server = subprocess.Popen([MROCE, "perf", "-p", str(port)], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True)
            try:
                proc = subprocess.run([MROCE, "perf", "127.0.0.1", "-p", str(port), "--out_json"] + args,
                                      capture_output=True, text=True, timeout=TIMEOUT, cwd=cwd)
                check(proc.returncode == 0, f"{args}: client exited {proc.returncode}: {proc.stderr}")
                check(server.wait(timeout=TIMEOUT) == 0, "server failed")
                path = os.path.join(cwd, "perftest_out.json")
                check(os.path.exists(path), f"--out_json wrote no perftest_out.json: {os.listdir(cwd)}")
                with open(path) as f:
                    doc = json.load(f)
                check_shape(doc)
                r = one(doc)
                if "--raw" in args:
                    # The table's figures are the server's; the rows count the client's sends.
                    iv = r.get("intervals", [])
                    check(len(iv) >= 3 and sum(x["n_iterations"] for x in iv) == r["messages_sent"],
                          f"raw intervals {iv!r:.200} vs messages_sent {r.get('messages_sent')}")
                else:
                    iv = check_intervals(proc.stdout, r, every, 2)
                    for x in iv:
                        if x["n_iterations"]:
                            check(r["t_min"] * 0.96 <= x["t_avg"] <= r["t_max"] and
                                  x["percentile_99"] <= r["t_max"] * 1.04, f"interval {x} outside {r}")
            finally:
                if server.poll() is None:
                    server.kill()
                server.wait()


def case_interval_and_out_json_usage():
    # Usage errors exit 2 before any run: -i on the server, a bad interval, --json with
    # perftest's --out_json_file.
    for argv, what in ((["perf", "-i", "1"], "printed by the client"),
                       (["perf", "127.0.0.1", "-i", "0"], "-i"),
                       (["perf", "127.0.0.1", "--json", "a.json", "--out_json_file", "b.json"], "excludes")):
        rc, _, err = run_fail(argv)
        check(rc == 2 and what in err, f"{argv}: rc {rc}, stderr {err!r}")


def run_fail(argv, timeout=TIMEOUT):
    proc = subprocess.run([MROCE] + argv, capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


def case_usage():
    # A bare `mroce` prints its help; usage errors exit 2 with one line (tools/README.md).
    rc, out, err = run_fail([])
    check(rc == 2 and "Subcommands:" in out and "perf" in out, f"bare mroce: rc {rc}, {out!r}")
    rc, _, err = run_fail(["perf", "--bogus"])
    check(rc == 2 and len(err.strip().splitlines()) == 1 and "--bogus" in err,
          f"unknown flag: rc {rc}, stderr {err!r}")
    # --json that cannot be written is refused before the run (no server is needed).
    start = time.monotonic()
    rc, _, err = run_fail(["perf", "127.0.0.1", "-p", str(free_port()), "--json",
                           "/nonexistent-dir/x.json"])
    check(rc == 2 and err.strip() == "mroce perf: --json /nonexistent-dir/x.json: No such file or directory",
          f"unwritable --json: rc {rc}, stderr {err!r}")
    check(time.monotonic() - start < 5, "unwritable --json was found only after trying the server")
    # --plane-ifs takes one argument: a host after it is the host (the client then fails
    # on the unknown interface), not a second plane that makes it a server.
    port = free_port()
    server = subprocess.Popen([MROCE, "perf", "-p", str(port)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        rc, _, err = run_fail(["perf", "-p", str(port), "-n", "10", "--plane-ifs", "mroce-none0",
                               "127.0.0.1"])
        check(rc != 0 and err.strip() == "mroce perf: udp: plane device 'mroce-none0' is not an interface here",
              f"--plane-ifs before the host: rc {rc}, stderr {err!r}")
    finally:
        server.kill()
        server.wait()


def case_raw_read_refused():
    rc, _, err = run_fail(["perf", "127.0.0.1", "-p", str(free_port()), "--verb", "read",
                           "--raw"])
    check(rc != 0, "--verb read --raw succeeded")
    lines = err.strip().splitlines()
    check(len(lines) == 1 and "no --raw baseline" in lines[0], f"stderr: {err!r}")


def case_read_bw():
    client, server, doc = run_ok(["--verb", "read", "-s", "65536", "-n", "200", "--paths", "4"])
    for out in (client, server):
        check_tables(out, "RDMA_Read BW Test", BW_HEAD, [65536])
    r = one(doc, 65536)
    check(r["n_iterations"] == 200 and r["bytes"] == 65536 * 200, f"results {r}")
    check(r["BW_average"] > 0, "zero bandwidth")
    # READ data flows from the server: the client's paths received it.
    got = sum(p["packets_received"] for p in r["counters"]["paths"])
    check(got >= 65536 * 200 // 4096, f"the client received only {got} packets")
    # Every retransmission reason is in the JSON and on the counters line (issue 18: READ
    # request re-sends counted in the total and in no category).
    c = r["counters"]
    for key in ("retransmits_sack", "retransmits_timeout", "retransmits_path_failure", "retransmits_rnr",
                "retransmits_read_request"):
        check(key in c and c[key] >= 0, f"counters lack {key}: {sorted(c)}")
    for out in (client, server):
        check(" read request " in out and " path failure " in out and " rnr " in out,
              f"the counters line does not show every reason:\n{out}")


def case_read_and_atomic_lat():
    for verb, title, size in (("read", "RDMA_Read Lat Test", 64), ("atomic", "Atomic Lat Test", 8)):
        args = ["--lat", "--verb", verb, "-n", "200"] + (["-s", str(size)] if verb == "read" else [])
        client, _, doc = run_ok(args)
        check_tables(client, title, LAT_HEAD, [size])
        check_lat(doc, size, 200)


def case_plane_ifs():
    # [UDP-10]: paths bound to one interface per plane (here twice the loopback), for
    # MetaRoCE and for --raw; an unknown interface is a one-line error.
    for extra in ([], ["--raw"]):
        _, _, doc = run_ok(extra + ["-s", "65536", "-n", "200", "--plane-ifs", "lo,lo"])
        check(one(doc)["bytes"] > 0, f"{extra}: nothing moved over bound paths")
    pair = Pair(["-s", "65536", "-n", "10"], client_extra=["--plane-ifs", "mroce-none0"])
    try:
        rc, _, err = pair.wait()["client"]
    finally:
        pair.close()
    lines = err.strip().splitlines()
    check(rc != 0 and lines == ["mroce perf: udp: plane device 'mroce-none0' is not an interface here"],
          f"bad --plane-ifs: rc {rc}, stderr {err!r}")


def case_cc_flags():
    # Issue 13's knobs: each accepted, sent to the server, reported in test_info, and a
    # short run with it works (plumbing: the effect on speed is not asserted).
    runs = (["--cc", "fixed"], ["--cc", "aimd"], ["--no-hint"], ["--no-pacing"],
            ["--no-hint", "--no-pacing"], ["--tc", "3"], ["--dscp-map", "0,10,18,26,34,46,48,56"],
            ["--line-rate", "25"], ["--tc", "5", "--raw"])
    for extra in runs:
        _, server, doc = run_ok(["-s", "65536", "-n", "100", "--paths", "4"] + extra)
        check(one(doc)["bytes"] > 0, f"{extra}: nothing moved")
        info = doc["test_info"]
        if "--no-hint" in extra:
            check(info["rate_hint"] is False, f"test_info {info}")
        if "--no-pacing" in extra:
            check(info["pacing"] is False, f"test_info {info}")
        if "--tc" in extra:
            check(info["traffic_class"] == int(extra[extra.index("--tc") + 1]), f"test_info {info}")
        if "--dscp-map" in extra:
            check(info["dscp_map"] == [0, 10, 18, 26, 34, 46, 48, 56], f"test_info {info}")
        if "--line-rate" in extra:
            check(info["line_rate_gbps"] == 25, f"test_info {info}")
    # A latency run in a non-zero class with a custom map, both sides.
    _, _, doc = run_ok(["--lat", "-s", "8", "-n", "100", "--tc", "7",
                        "--dscp-map", "0,8,16,24,32,40,26,26"])
    check_lat(doc, 8, 100)


def case_cc_flags_refused():
    for argv, line in (
            (["--tc", "8"], "mroce perf: --tc must be a traffic class 0..7, not 8"),
            (["--dscp-map", "1,2,3"],
             "mroce perf: --dscp-map needs 8 DSCPs (one per traffic class 0..7), not 3"),
            (["--dscp-map", "0,8,16,24,32,40,48,64"],
             "mroce perf: --dscp-map: 64 is not a DSCP (0..63)"),
            (["--line-rate", "0.0000001"], "mroce perf: --line-rate must be 0.001..100000 Gbit/s"),
            (["--line-rate", "fast"], None), (["--tc", "x"], None), (["--cc", "dctcp"], None)):
        rc, _, err = run_fail(["perf", "127.0.0.1", "-p", str(free_port())] + argv)
        lines = err.strip().splitlines()
        flag = argv[0].split("=")[0]
        check(rc != 0 and len(lines) == 1 and flag in lines[0] and (line is None or lines[0] == line),
              f"{' '.join(argv)}: rc {rc}, stderr {err!r}")


def case_unreachable_server():
    start = time.monotonic()
    rc, _, err = run_fail(["perf", "127.0.0.1", "-p", str(free_port())])
    check(rc != 0, "a client without a server succeeded")
    lines = err.strip().splitlines()
    check(len(lines) == 1 and "cannot reach 127.0.0.1" in lines[0], f"stderr: {err!r}")
    check(time.monotonic() - start < TIMEOUT, "gave up too late")


def case_bad_flag_value():
    for argv, name in ((["-s", "0"], "size"), (["--paths", "999"], "paths"),
                       (["--verb", "fly"], "verb"), (["-a", "-s", "8"], "-a")):
        rc, _, err = run_fail(["perf", "127.0.0.1"] + argv)
        lines = err.strip().splitlines()
        check(rc != 0 and len(lines) == 1 and name in lines[0],
              f"{' '.join(argv)}: rc {rc}, stderr {err!r}")


def send_control_lines(port, messages, deadline):
    """Connects to a server's control port as a one-lane client, sends the lane header and
    then each of `messages` (a JSON value, sent as the next message, or raw text), reading
    one answer line after each; returns the last answer, or None if the server closed the
    connection without one."""
    while True:
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            break
        except OSError:  # between two clients the server is not listening for a moment
            if time.monotonic() > deadline:
                raise AssertionError(f"the server stopped listening on TCP port {port}")
            time.sleep(0.05)
    with sock:
        sock.sendall(b'{"lanes": 1, "lane": 0}\n')
        pending = b""
        for seq, message in enumerate(messages):
            body = message if isinstance(message, str) else json.dumps({"seq": seq, "m": message})
            sock.sendall(body.encode() + b"\n")
            while b"\n" not in pending:
                chunk = sock.recv(4096)
                if not chunk:
                    return None
                pending += chunk
            answer, pending = pending.split(b"\n", 1)
        return answer.decode()


def case_bad_control_input():
    # Issue 17, finding 10: control lines with the wrong types (or not JSON at all) are
    # answered with one error line and the server keeps serving; a real client then runs.
    hello = {"type": "hello", "options": {"verb": "write", "size": 4096}}
    bad = (
        [{"type": 7}],
        [{"type": "hello", "options": {"verb": "write", "size": "big"}}],
        [{"type": "hello", "options": {"verb": 3}}],
        [{"type": "hello", "options": {"verb": "write", "qps": -1}}],
        [{"type": "hello", "options": {"verb": "write", "dscp_map": ["x"]}}],
        [{"type": "hello", "options": 7}],
        [{"type": "hello"}],
        ["not json at all"],
        [hello, {"type": "setup", "side": 5}],  # past the options: the server's own setup
        [hello, {"type": "setup", "side": {"addr": "127.0.0.1:1", "qps": ["q"]}}],
    )
    port = free_port()
    server = subprocess.Popen([MROCE, "perf", "-p", str(port)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + TIMEOUT
        for messages in bad:
            message = messages[-1]
            answer = send_control_lines(port, messages, deadline)
            check(answer is not None, f"{message!r}: the server answered nothing "
                                      f"(exit status {server.poll()})")
            reply = json.loads(answer)
            error = reply.get("m", {})
            check(error.get("type") == "error" and isinstance(error.get("message"), str) and
                  error["message"] and "\n" not in error["message"],
                  f"{message!r}: answer {answer!r}")
            check(server.poll() is None, f"{message!r}: the server exited {server.returncode}")
            print(f"  {json.dumps(message)[:60]} -> {error['message']!r}")
        client = subprocess.run([MROCE, "perf", "127.0.0.1", "-p", str(port), "-s", "4096",
                                 "-n", "50"], capture_output=True, text=True, timeout=TIMEOUT)
        check(client.returncode == 0, f"the client after bad input exited {client.returncode}: "
                                      f"{client.stderr.strip()}")
        _, err = server.communicate(timeout=TIMEOUT)
        check(server.returncode == 0, f"the server exited {server.returncode}: {err.strip()}")
        lines = err.strip().splitlines()
        check(len(lines) == len(bad) and all(l.startswith("mroce perf: ") for l in lines),
              f"server stderr (one line per rejected client expected): {err!r}")
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def case_peer_killed_mid_run():
    for victim in ("server", "client"):
        pair = Pair(["-D", "20", "-s", "65536"])
        try:
            # Wait until the run is under way (the table header is printed first).
            time.sleep(1.5)
            proc = pair.server if victim == "server" else pair.client
            other = pair.client if victim == "server" else pair.server
            check(other.poll() is None, f"the {victim}'s peer ended before the kill")
            proc.send_signal(signal.SIGKILL)
            try:
                _, err = other.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"killing the {victim} left its peer hanging")
            check(other.returncode != 0, f"the {victim}'s peer exited 0")
            check(err.strip().startswith("mroce perf: "), f"peer's stderr: {err!r}")
            print(f"  {victim} killed: peer said {err.strip()!r}")
        finally:
            pair.close()


CASES = {name[5:]: fn for name, fn in sorted(globals().items()) if name.startswith("case_")}


def main():
    global MROCE
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    MROCE = sys.argv[1]
    names = sys.argv[2:] or list(CASES)
    failed = []
    for name in names:
        print(f"[ RUN  ] {name}", flush=True)
        t0 = time.monotonic()
        try:
            CASES[name]()
            print(f"[  OK  ] {name} ({time.monotonic() - t0:.1f} s)", flush=True)
        except Exception as e:  # noqa: BLE001 - report every failure the same way
            print(f"[FAILED] {name}: {e}", flush=True)
            failed.append(name)
    print(f"{len(names) - len(failed)}/{len(names)} passed" + (f"; failed: {failed}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
