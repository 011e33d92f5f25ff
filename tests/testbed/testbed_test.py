#!/usr/bin/python3
"""testbed_test.py — end-to-end check of scripts/testbed with real UDP traffic.

Builds a 2-host, 4-plane testbed under a prefix unique to this run, sends UDP from host 0 to
host 1 on many source ports (one Python process; its sockets are created inside the host
namespaces with setns) and checks, against the planes predicted by `testbed plane-of` and
the eBPF counters:
  spread     every plane carries traffic, each plane's counter matches its predicted ports
  loss       `loss 1 5` drops ~5% on plane 1 (binomial bound) and nothing on other planes
  ecn        ECT(0) arrives unmarked through an idle bottleneck and CE-marked through an
             overloaded one; Not-ECT is dropped there, never marked
  plane-down `plane-down 2` blackholes exactly plane 2's ports, routes do not change;
             `plane-up 2` restores them
  rate       `rate 1 20mbit` caps what plane 1's ports receive at 20 Mbit/s (measured at the
             receiver under an unpaced sender) while the other planes carry more than twice
             that; `status` shows the cap; `rate 1 off` lifts it
  bad input  one error line naming the problem, nothing changed
  down       leaves no namespace, link or pinned map with the prefix
Exits 77 (ctest SKIP_RETURN_CODE) with a one-line reason when the machine cannot run it (not
root, no network namespaces, no tc eBPF, missing tools).

Usage: testbed_test.py --testbed PATH [--seed N]   (the seed picks the source ports)
"""
import argparse
import ctypes
import json
import math
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time

SKIP = 77
CLONE_NEWNET = 0x40000000
SO_RCVBUFFORCE = 33
SOL_UDP = 17
UDP_SEGMENT = 103
DPORT = 9000
PAYLOAD = 1000
MAX_PAYLOAD = 8972  # fills the 9000-byte MTU
PLANES = 4
ECT0 = 2
# Losses not caused by the testbed (socket or backlog overflow on a busy machine) must stay
# below this fraction; in practice they are zero.
BACKGROUND_LOSS = 0.005
# Binomial bounds are this many standard deviations wide (false alarm ~1e-5).
SIGMAS = 4.5


class Skip(Exception):
    pass


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


class Testbed:
    """Runs scripts/testbed under this run's prefix."""

    def __init__(self, path, prefix):
        self.path = path
        self.prefix = prefix
        self.env = dict(os.environ, MROCE_TESTBED_PREFIX=prefix)

    def run(self, *args):
        result = subprocess.run([self.path, *args], env=self.env, capture_output=True, text=True)
        if result.returncode != 0:
            raise Failure(f"testbed {' '.join(args)} failed: {result.stderr.strip()}")
        return result.stdout

    def counters(self):
        return {name: element["counters"]
                for name, element in json.loads(self.run("status", "--json")).items()}

    def planes_of(self, ports, src=0, dst=1):
        planes = {}
        for line in self.run("plane-of", str(src), str(dst), str(DPORT),
                             *map(str, ports)).splitlines():
            port, plane = line.split()
            planes[int(port)] = int(plane)
        check(sorted(planes) == sorted(ports), "plane-of did not answer for every port")
        return planes


def delta(after, before):
    return {name: {key: after[name][key] - before[name][key] for key in after[name]}
            for name in after}


class NetnsSockets:
    """Creates sockets inside named network namespaces (setns on this thread)."""

    def __init__(self):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.home = os.open("/proc/self/ns/net", os.O_RDONLY)

    def enter(self, netns):
        fd = os.open(f"/run/netns/{netns}", os.O_RDONLY)
        try:
            if self.libc.setns(fd, CLONE_NEWNET) != 0:
                raise Failure(f"setns {netns}: {os.strerror(ctypes.get_errno())}")
        finally:
            os.close(fd)

    def leave(self):
        if self.libc.setns(self.home, CLONE_NEWNET) != 0:
            raise Failure(f"setns back: {os.strerror(ctypes.get_errno())}")


def host_addr(host):
    return f"198.18.0.{host + 1}"  # docs/testbed.md


class Traffic:
    """Host src sends to host dst from one socket per source port; dst counts per port."""

    def __init__(self, prefix, ports, sockets, src=0, dst=1):
        sockets.enter(f"{prefix}-h{src}")
        try:
            self.tx = {}
            for port in ports:
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                s.bind((host_addr(src), port))
                self.tx[port] = s
        finally:
            sockets.leave()
        self.destination = (host_addr(dst), DPORT)
        sockets.enter(f"{prefix}-h{dst}")
        try:
            self.rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.rx.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 64 << 20)
            self.rx.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
            self.rx.bind(self.destination)
        finally:
            sockets.leave()

    def close(self):
        """Closes every socket: an open socket keeps its namespace alive after `down`."""
        for s in self.tx.values():
            s.close()
        self.rx.close()

    def throughput(self, ports, seconds, size, segments=1):
        """Unpaced: a forked receiver (CPU 1) counts while this process sends (CPU 0), with
        UDP GSO of `segments` datagrams per send when > 1 (cut at the host's uplink).
        Returns (sent, received) datagrams."""
        read_end, write_end = os.pipe()
        child = os.fork()
        if child == 0:
            os.sched_setaffinity(0, {1})
            stats = {}
            self.rx.settimeout(None)
            self.rx.recvmsg(MAX_PAYLOAD, 64)  # the first datagram starts the count
            self._drain(stats, 1.0)
            os.write(write_end, str(1 + sum(e["rx"] for e in stats.values())).encode())
            os._exit(0)
        os.close(write_end)
        os.sched_setaffinity(0, {0})
        for port in ports:
            self.tx[port].setsockopt(SOL_UDP, UDP_SEGMENT, size if segments > 1 else 0)
        payload = bytes(size * segments)
        sent = 0
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for port in ports:
                self.tx[port].sendto(payload, self.destination)
            sent += len(ports) * segments
        for port in ports:
            self.tx[port].setsockopt(SOL_UDP, UDP_SEGMENT, 0)
        received = int(os.read(read_end, 64).decode() or 0)
        os.waitpid(child, 0)
        os.close(read_end)
        os.sched_setaffinity(0, set(range(os.cpu_count())))
        return sent, received

    def plane_rates(self, ports, planes, seconds, size=MAX_PAYLOAD):
        """Unpaced round-robin from `ports` for `seconds` while a forked receiver (CPU 1)
        notes each plane's received payload bytes and first and last arrival. Returns
        {plane: bit/s} over each plane's own arrival span (a capped plane's queue drains at
        its rate after the sender stops, so the span covers it)."""
        read_end, write_end = os.pipe()
        child = os.fork()
        if child == 0:
            os.sched_setaffinity(0, {1})
            seen = {}
            self.rx.settimeout(5.0)
            while True:
                try:
                    n, _, _, (_, port) = self.rx.recvmsg(MAX_PAYLOAD, 64)
                except socket.timeout:
                    break
                now = time.monotonic()
                entry = seen.setdefault(planes.get(port, -1), [0, now, now])
                entry[0] += len(n)
                entry[2] = now
                self.rx.settimeout(1.0)
            os.write(write_end, json.dumps(seen).encode())
            os._exit(0)
        os.close(write_end)
        os.sched_setaffinity(0, {0})
        payload = bytes(size)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for port in ports:
                self.tx[port].sendto(payload, self.destination)
        chunks = []
        while chunk := os.read(read_end, 65536):
            chunks.append(chunk)
        os.waitpid(child, 0)
        os.close(read_end)
        os.sched_setaffinity(0, set(range(os.cpu_count())))
        rates = {}
        for plane, (total, first, last) in json.loads(b"".join(chunks) or b"{}").items():
            rates[int(plane)] = total * 8 / (last - first) if last > first else 0.0
        return rates

    def set_tos(self, tos):
        for s in self.tx.values():
            s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)

    def _drain(self, stats, timeout):
        """Receives until nothing has arrived for `timeout` seconds (0: only what is queued)."""
        self.rx.settimeout(timeout if timeout > 0 else None)
        flags = 0 if timeout > 0 else socket.MSG_DONTWAIT
        while True:
            try:
                _, ancillary, _, (_, port) = self.rx.recvmsg(MAX_PAYLOAD, 64, flags)
            except (BlockingIOError, socket.timeout):
                return
            tos = next((data[0] for level, kind, data in ancillary
                        if level == socket.IPPROTO_IP and kind == socket.IP_TOS), 0)
            entry = stats.setdefault(port, {"rx": 0, "ce": 0, "ect0": 0})
            entry["rx"] += 1
            entry["ce"] += (tos & 3) == 3
            entry["ect0"] += (tos & 3) == 2

    def send(self, ports, count, gap=0.0, size=PAYLOAD):
        """Sends `count` datagrams from each port, round-robin; returns per-port stats."""
        stats = {port: {"tx": 0, "rx": 0, "ce": 0, "ect0": 0} for port in ports}
        payload = bytes(size)
        for _ in range(count):
            for port in ports:
                self.tx[port].sendto(payload, self.destination)
                stats[port]["tx"] += 1
                if gap:
                    time.sleep(gap)
            self._drain(stats, 0)
        self._drain(stats, 0.5)
        return stats


def totals(stats, ports):
    return {key: sum(stats[p][key] for p in ports) for key in ("tx", "rx", "ce", "ect0")}


def binomial_ok(observed, n, p, slack=0.0):
    """Whether `observed` successes out of n trials fit probability p within SIGMAS."""
    sd = math.sqrt(n * p * (1 - p))
    return abs(observed - n * p) <= SIGMAS * sd + slack


def test_spread(testbed, traffic, planes, ports):
    first16 = [planes[p] for p in ports[:16]]
    print(f"spread: 16 ports per plane {[first16.count(k) for k in range(PLANES)]}, "
          f"256 ports per plane {[list(planes.values()).count(k) for k in range(PLANES)]}")
    before = testbed.counters()
    stats = traffic.send(ports, 100)
    seen = delta(testbed.counters(), before)
    all_ = totals(stats, ports)
    lost = all_["tx"] - all_["rx"]
    check(lost <= BACKGROUND_LOSS * all_["tx"],
          f"spread: {lost} of {all_['tx']} lost without any impairment")
    for k in range(PLANES):
        expected = sum(stats[p]["tx"] for p in ports if planes[p] == k)
        got = seen[f"p{k}"]["pkts"]
        check(expected > 0, f"spread: no port of 256 hashes to plane {k}")
        # Packets lost before the plane are not counted there; nothing else can differ.
        check(expected - lost <= got <= expected,
              f"spread: plane {k} counted {got} packets, its ports sent {expected}")
    print(f"spread: {all_['tx']} sent, {lost} lost; plane counters match the predicted ports")


def test_loss(testbed, traffic, planes, ports):
    testbed.run("loss", "1", "5")
    before = testbed.counters()
    stats = traffic.send(ports, 100)
    seen = delta(testbed.counters(), before)
    testbed.run("loss", "1", "0")

    plane1 = [p for p in ports if planes[p] == 1]
    others = [p for p in ports if planes[p] != 1]
    one, rest = totals(stats, plane1), totals(stats, others)
    drops, counted = seen["p1"]["loss_drops"], seen["p1"]["pkts"]
    check(binomial_ok(drops, counted, 0.05),
          f"loss: plane 1 dropped {drops} of {counted} (expected 5%)")
    for k in (0, 2, 3):
        check(seen[f"p{k}"]["loss_drops"] == 0, f"loss: plane {k} dropped packets")
    rest_lost = rest["tx"] - rest["rx"]
    check(rest_lost <= BACKGROUND_LOSS * rest["tx"],
          f"loss: {rest_lost} of {rest['tx']} lost on planes without loss")
    one_lost = one["tx"] - one["rx"]
    background = rest_lost / rest["tx"] * one["tx"]
    check(binomial_ok(one_lost, one["tx"], 0.05, slack=background + 1),
          f"loss: {one_lost} of {one['tx']} lost on plane 1's ports (expected 5%)")
    print(f"loss: plane 1 ports lost {one_lost}/{one['tx']} = {one_lost / one['tx']:.2%} "
          f"(eBPF {drops}/{counted}); other ports lost {rest_lost}/{rest['tx']}")


def test_plane_down(testbed, traffic, planes, ports, sockets):
    # The reverse direction (host 1 -> host 0) hashes with host 1's own ECMP.
    back = Traffic(testbed.prefix, ports, sockets, src=1, dst=0)
    back_planes = testbed.planes_of(ports, src=1, dst=0)
    testbed.run("plane-down", "2")
    stats = traffic.send(ports, 20)
    try:
        back_stats = back.send(ports, 5)
    finally:
        back.close()
    back_dead = [p for p in ports if back_planes[p] == 2]
    check(back_dead and totals(back_stats, back_dead)["rx"] == 0,
          "plane-down: packets crossed the dead plane from host 1 to host 0")
    check(all(back_stats[p]["rx"] > 0 for p in ports if back_planes[p] != 2),
          "plane-down: a live port from host 1 to host 0 got nothing")
    check(testbed.planes_of(ports) == planes, "plane-down: the kernel rehashed some ports")
    link = subprocess.run(["ip", "-n", f"{testbed.prefix}-h0", "-o", "link", "show", "up2"],
                          capture_output=True, text=True).stdout
    check("LOWER_UP" in link and "state UP" in link, "plane-down: the uplink went down")
    testbed.run("plane-up", "2")
    dead = [p for p in ports if planes[p] == 2]
    dead_tx = totals(stats, dead)["tx"]
    alive = [p for p in ports if planes[p] != 2]
    check(totals(stats, dead)["rx"] == 0, "plane-down: packets crossed the dead plane")
    live = totals(stats, alive)
    check(live["tx"] - live["rx"] <= BACKGROUND_LOSS * live["tx"],
          f"plane-down: {live['tx'] - live['rx']} of {live['tx']} lost on live planes")
    check(all(stats[p]["rx"] > 0 for p in alive), "plane-down: a live port got nothing")

    stats = traffic.send(ports, 20)
    check(all(stats[p]["rx"] > 0 for p in ports), "plane-up: a port still gets nothing")
    print(f"plane-down: {len(dead)} ports on plane 2 got 0 of {dead_tx}, "
          f"others {live['rx']}/{live['tx']} (reverse: {len(back_dead)} ports got 0); "
          f"plane-up restored all {len(ports)} ports")


def test_rate(testbed, traffic, planes, ports):
    cap = 20_000_000  # bit/s; an unpaced Python sender offers each plane 10x that or more
    chosen = [p for k in range(PLANES) for p in [q for q in ports if planes[q] == k][:4]]
    testbed.run("rate", "1", "20mbit")
    try:
        shown = json.loads(testbed.run("status", "--json"))
        check(shown["p1"]["rate_bps"] == [cap, cap] and shown["p0"]["rate_bps"] == [0, 0],
              f"rate: status shows {shown['p1']['rate_bps']} on plane 1, "
              f"{shown['p0']['rate_bps']} on plane 0")
        capped = traffic.plane_rates(chosen, {p: planes[p] for p in chosen}, 2.0)
    finally:
        testbed.run("rate", "1", "off")
    check(all(k in capped for k in range(PLANES)), f"rate: a plane carried nothing: {capped}")
    # A full tbf queue sends at its rate: the payload rate sits just below the cap (headers).
    # The bucket's first burst (18 KB) adds under 1% over 2 s.
    check(0.7 * cap <= capped[1] <= 1.02 * cap,
          f"rate: plane 1 capped at 20 Mbit/s carried {capped[1] / 1e6:.1f} Mbit/s")
    for k in (0, 2, 3):
        check(capped[k] > 2 * cap,
              f"rate: uncapped plane {k} carried only {capped[k] / 1e6:.1f} Mbit/s")
    check(json.loads(testbed.run("status", "--json"))["p1"]["rate_bps"] == [0, 0],
          "rate: status still shows a cap after `rate 1 off`")
    free = traffic.plane_rates(chosen, {p: planes[p] for p in chosen}, 1.0)
    check(free.get(1, 0) > 2 * cap,
          f"rate: plane 1 carried only {free.get(1, 0) / 1e6:.1f} Mbit/s after `rate 1 off`")
    print("rate: with `rate 1 20mbit` planes 0..3 carried "
          + " / ".join(f"{capped[k] / 1e6:.1f}" for k in range(PLANES))
          + f" Mbit/s; after `rate 1 off` plane 1 carried {free[1] / 1e6:.1f} Mbit/s")


def test_rate_ecn(testbed, traffic, planes, ports):
    """`rate 1 20mbit LIMIT ecn ...`: plane 1 marks CE on its own queue, plane 0 does not."""
    on1 = [p for p in ports if planes[p] == 1][:8]
    on0 = [p for p in ports if planes[p] == 0][:8]
    testbed.run("rate", "1", "20mbit", "2000000", "ecn", "20000", "100000", "0.2")
    try:
        config = json.loads(testbed.run("status", "--json"))
        check(config["p1"]["config"].get("kmin") == 20000 and not config["p0"]["config"].get("kmin"),
              f"rate ecn: status shows the marker as {config['p1']['config']} / {config['p0']['config']}")
        traffic.set_tos(ECT0)
        before = testbed.counters()
        busy = totals(traffic.send(on1, 3000 // len(on1)), on1)
        other = totals(traffic.send(on0, 3000 // len(on0)), on0)
        seen = delta(testbed.counters(), before)
        check(seen["p1"]["ce_marks"] > 0 and busy["ce"] > busy["rx"] / 2,
              f"rate ecn: plane 1 over its cap marked {busy['ce']} of {busy['rx']} (counter "
              f"{seen['p1']['ce_marks']})")
        check(other["ce"] == 0 and seen["p0"]["ce_marks"] == 0,
              f"rate ecn: uncapped plane 0 marked {other['ce']} of {other['rx']}")
    finally:
        traffic.set_tos(0)
        testbed.run("rate", "1", "off")
    check(not json.loads(testbed.run("status", "--json"))["p1"]["config"].get("kmin"),
          "rate ecn: `rate 1 off` left the marker on")
    print(f"rate ecn: plane 1 at 20 Mbit/s marked {busy['ce']} of {busy['rx']} received; "
          f"plane 0 marked {other['ce']} of {other['rx']}")


def test_ecn(testbed, traffic, ports):
    # 20 Mbit/s drains 1000 B in 400 us: 2 ms apart the queue never holds two packets,
    # while an unpaced burst of 3000 (3 MB) overfills it even from a slow Python sender
    # (~20k datagrams/s on a loaded machine, 8x the drain rate).
    testbed.run("ecn", "20mbit", "20000", "100000", "0.2")
    try:
        traffic.set_tos(ECT0)
        few = ports[:16]
        before = testbed.counters()
        idle = totals(traffic.send(few, 20, gap=0.002), few)
        idle_seen = delta(testbed.counters(), before)
        check(idle["rx"] > 0 and idle["ce"] == 0 and idle_seen["h1"]["ce_marks"] == 0,
              f"ecn: {idle['ce']} of {idle['rx']} CE-marked through an idle bottleneck")
        check(idle["ect0"] == idle["rx"], "ecn: ECT(0) did not survive the path")

        before = testbed.counters()
        busy = totals(traffic.send(few, 3000 // len(few)), few)
        busy_seen = delta(testbed.counters(), before)
        check(busy["rx"] > 0 and busy_seen["h1"]["ce_marks"] > 0,
              "ecn: nothing CE-marked through an overloaded bottleneck")
        check(busy["ce"] > busy["rx"] / 2,
              f"ecn: only {busy['ce']} of {busy['rx']} CE-marked under overload")

        traffic.set_tos(0)
        before = testbed.counters()
        plain = totals(traffic.send(few, 3000 // len(few)), few)
        plain_seen = delta(testbed.counters(), before)
        check(plain["ce"] == 0 and plain_seen["h1"]["notect_drops"] > 0,
              "ecn: Not-ECT under overload was marked or never dropped")
        print(f"ecn: idle {idle['ce']}/{idle['rx']} CE; overload {busy['ce']}/{busy['rx']} "
              f"= {busy['ce'] / busy['rx']:.1%} CE, {busy['tx'] - busy['rx']} dropped; "
              f"Not-ECT overload {plain_seen['h1']['notect_drops']} dropped, 0 marked")
    finally:
        traffic.set_tos(0)
        testbed.run("ecn", "off")


def measure(testbed, traffic, planes, ports):
    """Prints the numbers docs/testbed.md quotes; asserts nothing."""
    per_plane = lambda chosen: [[planes[p] for p in chosen].count(k) for k in range(PLANES)]
    print(f"measure: ports per plane, 16 ports {per_plane(ports[:16])}, "
          f"256 ports {per_plane(ports)}")
    for pct, which in (("5", "1"), ("1", "all")):
        testbed.run("loss", which, pct)
        before = testbed.counters()
        stats = traffic.send(ports, 400)
        seen = delta(testbed.counters(), before)
        testbed.run("loss", "all", "0")
        chosen = ports if which == "all" else [p for p in ports if planes[p] == 1]
        got = totals(stats, chosen)
        drops = sum(seen[f"p{k}"]["loss_drops"] for k in range(PLANES))
        print(f"measure: loss {which} {pct}%: {got['tx'] - got['rx']}/{got['tx']} = "
              f"{(got['tx'] - got['rx']) / got['tx']:.3%} lost on the affected ports "
              f"(eBPF drops {drops})")
    testbed.run("ecn", "50mbit", "30000", "150000", "0.2")
    traffic.set_tos(ECT0)
    before = testbed.counters()
    busy = totals(traffic.send(ports[:16], 1250), ports[:16])
    seen = delta(testbed.counters(), before)["h1"]
    traffic.set_tos(0)
    testbed.run("ecn", "off")
    print(f"measure: ecn 50mbit 30000 150000 0.2, unpaced ECT(0) 1000 B: {busy['ce']}/"
          f"{busy['rx']} = {busy['ce'] / busy['rx']:.1%} of received CE, "
          f"{busy['tx'] - busy['rx']}/{busy['tx']} dropped (queue drops {seen['queue_drops']})")
    for size, segments in ((1000, 1), (MAX_PAYLOAD, 1), (1000, 64), (MAX_PAYLOAD, 7)):
        sent, received = traffic.throughput(ports[:16], 3.0, size, segments)
        print(f"measure: throughput 16 ports, {size} B x {segments} per send, 3 s: "
              f"sent {sent / 3e6:.3f} Mpps, "
              f"received {received / 3e6:.3f} Mpps = {received * size * 8 / 3e9:.2f} Gbit/s "
              f"payload ({1 - received / sent:.2%} lost)")


def test_bad_input(testbed):
    """Bad arguments get one line naming the problem and change nothing."""
    cases = [(["loss", "7", "5"], "plane"), (["loss", "1", "150"], "150"),
             (["ecn", "fast", "1", "2", "0.1"], "fast"), (["ecn", "1mbit", "1", "2", "3"], "PMAX"),
             (["plane-down", "x"], "plane"), (["up", "--hosts", "1"], "--hosts"),
             (["rate", "4", "10mbit"], "plane"), (["rate", "1", "fast"], "fast"),
             (["rate", "1", "10mbit", "100"], "LIMIT"),
             (["plane-of", "0", "1", "9000", "70000"], "70000"), (["frob"], "frob")]
    for args, named in cases:
        result = subprocess.run([testbed.path, *args], env=testbed.env, capture_output=True,
                                text=True)
        lines = result.stderr.strip().splitlines()
        check(result.returncode != 0 and len(lines) == 1 and named in lines[0],
              f"bad input: 'testbed {' '.join(args)}' gave rc {result.returncode}, "
              f"stderr {result.stderr!r}")
    check(f"{testbed.prefix}-h1" in testbed.run("status"), "bad input: the testbed went away")
    print(f"bad input: {len(cases)} bad commands each gave one error line and changed nothing")


def test_down(testbed):
    # A process left running in a host's namespace is ended by `down`.
    leftover = subprocess.Popen(["ip", "netns", "exec", f"{testbed.prefix}-h0", "sleep", "600"])
    time.sleep(0.2)
    testbed.run("down")
    try:
        leftover.wait(timeout=5)
    except subprocess.TimeoutExpired:
        leftover.kill()
        leftover.wait()
        raise Failure("down: a process in a host namespace was left running")
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    check(not any(line.startswith(testbed.prefix + "-") for line in namespaces.splitlines()),
          "down: a namespace with the prefix remains")
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    check(testbed.prefix not in links, "down: a link with the prefix remains")
    check(not os.path.exists(f"/sys/fs/bpf/{testbed.prefix}"), "down: pinned maps remain")
    print("down: no namespace, link, pinned map or process left")


def preconditions():
    if os.geteuid() != 0:
        raise Skip("needs root (network namespaces, tc eBPF)")
    for tool in ("ip", "tc", "nsenter", "unshare", "bpftool", "clang", "ethtool"):
        if shutil.which(tool) is None:
            raise Skip(f"missing tool '{tool}' (run scripts/install-deps.sh)")
    # A throwaway namespace with a veth pair: needs CAP_SYS_ADMIN, CAP_NET_ADMIN and veth.
    probe = subprocess.run(["unshare", "--net", "ip", "link", "add", "probe0", "type", "veth",
                            "peer", "name", "probe1"], capture_output=True)
    if probe.returncode != 0:
        raise Skip("cannot create network namespaces with veth pairs (CAP_NET_ADMIN?)")
    if not os.path.isdir("/sys/fs/bpf"):
        raise Skip("no /sys/fs/bpf to pin the tc eBPF maps in")
    probe = subprocess.run(["bpftool", "-j", "feature", "probe", "kernel"],
                           capture_output=True, text=True)
    try:
        usable = json.loads(probe.stdout)["program_types"]["have_sched_cls_prog_type"]
    except (ValueError, KeyError):
        usable = False
    if not usable:
        raise Skip("the kernel cannot load tc (sched_cls) eBPF programs")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--testbed", required=True, help="path of scripts/testbed")
    parser.add_argument("--seed", type=int, default=None, help="replay a run's port choice")
    parser.add_argument("--measure", action="store_true",
                        help="print spread, loss, CE and throughput figures instead of testing")
    args = parser.parse_args()
    # ctest's timeout and Ctrl-C must still reach the `finally` that removes the testbed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    print(f"testbed_test: seed {seed} (replay with --seed {seed})")
    try:
        preconditions()
    except Skip as reason:
        print(f"SKIP: {reason}")
        return SKIP

    ports = random.Random(seed).sample(range(20000, 60000), 256)
    testbed = Testbed(args.testbed, f"tb{os.getpid() % 100000:05d}")
    traffic = None
    try:
        testbed.run("up", "--hosts", "2", "--planes", str(PLANES))
        print(testbed.run("status"), end="")
        planes = testbed.planes_of(ports)
        sockets = NetnsSockets()
        traffic = Traffic(testbed.prefix, ports, sockets)
        if args.measure:
            measure(testbed, traffic, planes, ports)
            return 0
        test_spread(testbed, traffic, planes, ports)
        test_loss(testbed, traffic, planes, ports)
        test_plane_down(testbed, traffic, planes, ports, sockets)
        test_rate(testbed, traffic, planes, ports)
        test_rate_ecn(testbed, traffic, planes, ports)
        test_ecn(testbed, traffic, ports)
        test_bad_input(testbed)
        print(testbed.run("status"), end="")
        traffic.close()
        traffic = None
        test_down(testbed)
    except Failure as failure:
        print(f"FAIL: {failure} (seed {seed})")
        return 1
    finally:
        if traffic is not None:
            traffic.close()
        subprocess.run([args.testbed, "down"], env=testbed.env, capture_output=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
