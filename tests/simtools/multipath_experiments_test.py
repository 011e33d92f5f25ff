#!/usr/bin/python3
"""Tests the pure functions of scripts/multipath_experiments.py (no simulator run): end-to-end
loss, the ideal finish after a plane cut, reading a pcap of `mroce sim --pcap`, and finding
the packets that left one host and never reached the other.

usage: multipath_experiments_test.py MULTIPATH_EXPERIMENTS_PY
"""
import importlib.util
import os
import struct
import sys

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL {what}")


def close(a, b, eps=1e-9):
    return a is not None and abs(a - b) <= eps * max(1.0, abs(b))


def load(path):
    # The script imports cc_experiments from its own directory.
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec = importlib.util.spec_from_file_location("multipath_experiments", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def record(t_ns, ip_id, src, dst, sport, dport, ptype, snap=64):
    """One pcap record as mroce sim writes it: raw IPv4 + UDP + the MetaRoCE common header."""
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 28 + 16, ip_id, 0x4000, 64, 17, 0,
                     bytes(src), bytes(dst))
    udp = struct.pack(">HHHH", sport, dport, 8 + 16, 0)
    payload = bytes([2, ptype]) + bytes(14)
    pkt = (ip + udp + payload)[:snap]
    return struct.pack("<IIII", t_ns // 1_000_000_000, t_ns % 1_000_000_000, len(pkt), 44) + pkt


def pcap(records):
    return struct.pack("<IHHiIII", 0xa1b23c4d, 2, 4, 0, 0, 65535, 101) + b"".join(records)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: multipath_experiments_test.py MULTIPATH_EXPERIMENTS_PY")
    mp = load(sys.argv[1])

    check(mp.e2e_loss(0) == 0, "no loss end to end")
    check(close(mp.e2e_loss(0.1), 1 - 0.9 ** 4), "10 % on 4 cables is 34.4 % end to end")
    check(close(mp.e2e_loss(0.5, cables=1), 0.5), "one cable")

    # 4 ports of 100 Gbit/s: 400 x 4096 / 4168 Gbit/s of payload = 49,136 bytes per us.
    per_us = 4 * 100e3 * 4096 / 4168 / 8
    small = mp.ideal_after_cut_us(1_000_000, 200, 4, 100, 4)
    check(close(small, 1_000_000 / per_us + 4), "a flow done before the cut runs at 4 ports")
    big = mp.ideal_after_cut_us(67108864, 200, 4, 100, 4)
    check(close(big, 200 + (67108864 - per_us * 200) / (per_us * 3 / 4) + 4),
          "a flow cut at 200 us finishes on three ports")
    check(1750 < big < 1770, f"64 MiB with the cut: {big:.1f} us, about 1758")

    a, b = [198, 18, 0, 1], [198, 18, 0, 2]
    recs = [
        record(1_000, 7, a, b, 50000, 4797, 1),    # DATA a -> b, sent
        record(3_000, 7, a, b, 50000, 4797, 1),    # ... and received
        record(5_000, 9, b, a, 50001, 4797, 2),    # ACK b -> a, sent and never received
        record(6_000, 7, a, b, 50000, 4797, 1),    # the id reused long after: a new packet, sent
        record(500_000, 7, a, b, 50000, 4797, 1),  # seen again 494 us later: not its arrival
        record(700_000, 3, a, b, 50002, 4797, 6, snap=29),  # cut before the type byte
    ]
    pk = mp.pcap_packets(pcap(recs))
    check(len(pk) == 6, f"six packets read, got {len(pk)}")
    check(pk[0][0] == 1_000 and pk[0][2] == 1 and pk[2][2] == 2, "times and types read")
    check(pk[0][1] == (7, bytes(a), bytes(b), 50000, 4797), "the key: ip id, addresses, ports")
    check(pk[5][2] is None, "a record too short for the type has none")
    lost = mp.unmatched(pk, window_ns=100_000, tail_ns=0)
    check([(t, typ) for t, _, typ in lost] == [(5_000, 2), (6_000, 1), (500_000, 1), (700_000, None)],
          f"unpaired: the ACK, the reused id twice (too far apart), the short record; got {lost}")
    lost = mp.unmatched(pk, window_ns=100_000, tail_ns=200_001)
    check([t for t, _, _ in lost] == [5_000, 6_000],
          f"packets seen in the capture's last tail_ns were on their way when it stopped; got {lost}")
    check(mp.unmatched(pk[:2]) == [], "a packet seen leaving and arriving is not lost")
    try:
        mp.pcap_packets(b"\xd4\xc3\xb2\xa1" + bytes(20))
        check(False, "a microsecond pcap is refused")
    except ValueError:
        pass

    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("multipath_experiments.py: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
