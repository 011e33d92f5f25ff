#!/usr/bin/python3
"""obs_cli_test.py — a running `mroce perf` observed from outside (docs/observability.md):

1. `mroce stat --list` shows both processes; `mroce stat --json PID` twice, a second apart,
   shows the client's transmitted bytes and RTT samples growing and per-path state;
2. `curl /metrics` (the client's --metrics listener) twice: well-formed exposition whose
   mroce_tx_data_bytes_total grows;
3. garbage datagrams sent at the server's endpoint port show up in its endpoint drop
   counters (truncated, bad_version) through `mroce stat --json` and `--prometheus`;
4. `mroce stat --events` prints the connection_up event as a JSON line;
5. an unmodified Verbs program (ibv_rc_pingpong on the build's libibverbs.so.1) with
   MROCE_METRICS set serves /metrics and is listed by `mroce stat --list` (skipped, with a
   message, where ibv_rc_pingpong or the Verbs library is missing);
6. a sharded server (`mroce perf --threads 2`, docs/design.md §12): `mroce stat --json`
   lists both shards and the client's connection with the shard that carries it, whose
   per-shard receive counter is the one that grew; `--prometheus` labels it by shard.

Every process it starts is killed on the way out; the stat directory is the test's own
(MROCE_STAT_DIR). Plumbing only: values must move, no speed is asserted.

usage: obs_cli_test.py PATH/TO/mroce
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

MROCE = sys.argv[1]
STAT_DIR = tempfile.mkdtemp(prefix="mroce-obs-test-")
ENV = dict(os.environ, MROCE_STAT_DIR=STAT_DIR)


def free_port(kind=socket.SOCK_STREAM):
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(*args, timeout=20):
    r = subprocess.run([MROCE, *args], capture_output=True, text=True, timeout=timeout, env=ENV)
    assert r.returncode == 0, f"mroce {' '.join(args)}: exit {r.returncode}\n{r.stderr}"
    return r.stdout


def curl(port):
    r = subprocess.run(["curl", "-sf", "--max-time", "5", f"http://127.0.0.1:{port}/metrics"],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, f"curl /metrics: exit {r.returncode} {r.stderr}"
    return r.stdout


def metric(text, name):
    """Sum of the samples of `name` (any labels)."""
    total, seen = 0.0, False
    for line in text.splitlines():
        m = re.match(r"^([a-z_0-9]+)(\{[^}]*\})? (\S+)$", line)
        if m and m.group(1) == name:
            total += float(m.group(3))
            seen = True
    assert seen, f"no sample of {name}"
    return total


def check_exposition(text):
    for line in text.splitlines():
        if line.startswith("#"):
            assert re.match(r"^# (HELP|TYPE) mroce_[a-z_0-9]+ ", line), line
        else:
            assert re.match(r'^mroce_[a-z_0-9]+(\{([a-z_]+="[^"]*",?)+\})? -?[0-9.e+-]+$', line), line


def verbs_program(procs):
    lib = os.path.join(os.path.dirname(os.path.abspath(MROCE)), "verbs")
    if not shutil.which("ibv_rc_pingpong") or not os.path.exists(os.path.join(lib, "libibverbs.so.1")):
        print("5. skipped: ibv_rc_pingpong or build/verbs/libibverbs.so.1 missing", flush=True)
        return
    oob, mport = free_port(), free_port()
    env = dict(ENV, LD_LIBRARY_PATH=lib)
    args = ["ibv_rc_pingpong", "-g", "0", "-p", str(oob), "-n", "1000000"]
    server = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs.append(server)
    time.sleep(0.5)
    client = subprocess.Popen(args + ["127.0.0.1"], env=dict(env, MROCE_METRICS=f"127.0.0.1:{mport}"),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs.append(client)
    time.sleep(1.5)
    m1 = curl(mport)
    time.sleep(0.5)
    m2 = curl(mport)
    check_exposition(m2)
    a, b = metric(m1, "mroce_tx_data_packets_total"), metric(m2, "mroce_tx_data_packets_total")
    assert b > a > 0, (a, b)
    assert metric(m2, "mroce_connection_up") == 1
    listed = {e["pid"] for e in json.loads(run("stat", "--list", "--json"))}
    assert client.pid in listed and server.pid in listed, listed
    print(f"5. ibv_rc_pingpong with MROCE_METRICS: tx packets {a:.0f} -> {b:.0f}", flush=True)


def sharded_server(procs):
    oob, mport = free_port(), free_port()
    server = subprocess.Popen([MROCE, "perf", "-p", str(oob), "--threads", "2", "--metrics", f"127.0.0.1:{mport}"],
                              env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    procs.append(server)
    time.sleep(0.3)
    client = subprocess.Popen([MROCE, "perf", "127.0.0.1", "-p", str(oob), "-D", "4"], env=ENV,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    procs.append(client)
    time.sleep(1.5)
    s = json.loads(run("stat", "--json", str(server.pid)))
    assert [sh["shard"] for sh in s.get("shards", [])] == [0, 1], s.get("shards")
    conns = [c for c in s["connections"] if c["state"] == "established"]
    assert len(conns) == 1, s["connections"]
    shard = conns[0]["shard"]
    rx = [sh["counters"]["rx_datagrams"] for sh in s["shards"]]
    assert rx[shard] > 1000 and rx[shard] > 10 * rx[1 - shard], rx
    assert s["counters"]["rx_datagrams"] == sum(rx), (s["counters"]["rx_datagrams"], rx)
    m = curl(mport)
    check_exposition(m)
    assert metric(m, "mroce_endpoint_shards") == 2
    assert f'conn="{conns[0]["connection"]}"' in m and f'shard="{shard}"' in m
    assert metric(m, "mroce_shard_rx_datagrams_total") >= rx[shard]
    print(f"6. --threads 2: the connection is in shard {shard}; rx datagrams per shard {rx}", flush=True)
    rc = client.wait(timeout=30)
    assert rc == 0, f"client exit {rc}: {client.stderr.read()}"


def main():
    procs = []
    try:
        # A malformed --metrics address is a usage error, before any run.
        r = subprocess.run([MROCE, "perf", "127.0.0.1", "--metrics", "localhost"], capture_output=True,
                           text=True, timeout=10, env=ENV)
        assert r.returncode == 2 and "--metrics localhost: not ADDR:PORT" in r.stderr, (r.returncode, r.stderr)
        oob = free_port()
        mport = free_port()
        server = subprocess.Popen([MROCE, "perf", "-p", str(oob)], env=ENV,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(server)
        time.sleep(0.3)
        # -D 15: the steps below take about 6 s on an idle machine and over twice that on
        # a loaded 2-core one; the client must still be running at step 4.
        client = subprocess.Popen([MROCE, "perf", "127.0.0.1", "-p", str(oob), "-D", "15",
                                   "--metrics", f"127.0.0.1:{mport}"], env=ENV,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(client)
        time.sleep(1.5)

        # 1. --list and --json
        listed = json.loads(run("stat", "--list", "--json"))
        pids = {e["pid"]: e for e in listed}
        assert server.pid in pids and client.pid in pids, f"stat --list: {listed}"
        print(f"stat --list: {len(listed)} endpoints", flush=True)
        a = json.loads(run("stat", "--json", str(client.pid)))
        time.sleep(1.0)
        b = json.loads(run("stat", "--json", str(client.pid)))
        assert b["counters"]["tx_data_bytes"] > a["counters"]["tx_data_bytes"] > 0, (a["counters"], b["counters"])
        assert b["rtt"]["count"] > a["rtt"]["count"] > 0
        assert b["time_ns"] > a["time_ns"]
        conn = b["connections"][0]
        assert conn["state"] == "established"
        assert len(conn["paths"]) == 8
        used = [p for p in conn["paths"] if p["counters"]["tx_data_packets"] > 0]
        assert used, "no path carried data"
        for p in used:
            r = p["rtt"]
            assert r["count"] > 0 and r["min_ns"] <= r["p50_ns"] <= r["p99_ns"] <= r["p999_ns"] <= r["max_ns"], r
            assert p["state"] == "active" and p["cwnd_bytes"] > 0
        print(f"stat --json: tx {a['counters']['tx_data_bytes']} -> {b['counters']['tx_data_bytes']} bytes, "
              f"rtt p50 {b['rtt']['p50_ns']} ns", flush=True)
        table = run("stat", str(client.pid))
        assert "conn " in table and "srtt_us" in table, table

        # 2. /metrics
        m1 = curl(mport)
        check_exposition(m1)
        time.sleep(1.0)
        m2 = curl(mport)
        t1, t2 = metric(m1, "mroce_tx_data_bytes_total"), metric(m2, "mroce_tx_data_bytes_total")
        assert t2 > t1 > 0, (t1, t2)
        assert metric(m2, "mroce_rtt_seconds_count") > 0
        print(f"/metrics: mroce_tx_data_bytes_total {t1:.0f} -> {t2:.0f}", flush=True)

        # 3. garbage at the server's endpoint: counted, visible
        server_ep = pids[server.pid]["endpoint"]
        host, port = server_ep.rsplit(":", 1)
        before = json.loads(run("stat", "--json", str(server.pid)))["counters"]
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for i in range(500):
                s.sendto(b"\x01", (host, int(port)))              # shorter than any header
                s.sendto(bytes([0xF0]) + bytes(63), (host, int(port)))  # version 15
        time.sleep(0.5)
        after = json.loads(run("stat", "--json", str(server.pid)))["counters"]
        drops = sum(after[k] - before[k] for k in ("truncated", "bad_version", "bad_type", "bad_length"))
        assert drops >= 900, f"1000 garbage datagrams, {drops} counted: {before} -> {after}"
        prom = run("stat", "--prometheus", str(server.pid))
        assert metric(prom, "mroce_endpoint_truncated_total") + metric(prom, "mroce_endpoint_bad_version_total") >= 900
        print(f"garbage: {drops} endpoint drops counted", flush=True)

        # 4. the event log
        events = [json.loads(l) for l in run("stat", "--events", str(client.pid)).splitlines()]
        assert any(e["event"] == "connection_up" for e in events), events[:3]

        rc = client.wait(timeout=30)
        assert rc == 0, f"client exit {rc}: {client.stderr.read()}"
        verbs_program(procs)
        sharded_server(procs)
        print("PASS")
        return 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(STAT_DIR, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
