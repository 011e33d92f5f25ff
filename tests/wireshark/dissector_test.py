#!/usr/bin/python3
"""dissector_test.py — tools/wireshark/mroce.lua in tshark, checked against wire/.

The ground truth is tests/wireshark/pcap_decode.cc: it decodes the same capture with wire/'s
decoders and prints every field under the dissector's names. Each case compares, frame by
frame, what tshark shows with what wire/ decoded, both ways (no field of the dissector goes
unchecked, none of wire/'s is missing), and the dissector's drop verdict (mroce.drop_reason)
with wire/'s decode error.

Cases (`sim`):
  sim       `mroce sim` on tests/wireshark/lossy.toml with --pcap at every host: every frame
            decodes as mroce with no error or warning and agrees with wire/; the lossy run
            has retransmissions, and tshark shows them (RETX), and ACKs of both forms: SHORT
            ones ([ACK-21], the engine's default for an empty SACK bitmap) and full ones
            whose bitmap reports a loss; every HELLO is numbered and a HELLO_ACK's nonzero
            echo is the number of an earlier HELLO of its connection ([CONN-32]). A second
            run of the same scenario with `--set mroce.compact_data=true` must hold COMPACT
            DATA ([DATA-9]) and HELLOs announcing COMPACT_DATA, every frame agreeing with
            wire/ as well.
  rocev2    the same run's RoCEv2 baseline capture: on UDP 4791, decoded by tshark's own
            InfiniBand dissector, whose BTH opcode, destination QP and PSN agree with the
            bytes (parsed here), and never taken by the mroce heuristic.
  crafted   packets of every type, opcode, NACK reason and CLOSE reason, and broken ones (cut
            short, wrong version or type, lengths and counts that lie, caps exceeded, reserved
            bits, rule violations, a snap-length cut), ACKs in the SHORT form ([ACK-21]: with
            and without entries, a probe reply, cut in its 48-byte fixed part, a count that
            disagrees with the length, coalesced with a DATA), DATA in the COMPACT form
            ([DATA-9]: every opcode that may be compact, payloads and bodies at byte 64, cut
            at 63 bytes, COMPACT on an opcode that consumes a receive, coalesced, with a
            trailer, in an aggregate), HELLOs and HELLO_ACKs with and without byte 3
            ([CONN-32]: `hello_seq`, `hello_echo`, by name and in the Info column), HELLOs
            with `hello_flags` SENDING and DROPPED and HELLO_ACKs with DROPPED ([CC-20],
            [CONN-31]: by name and in the Info column), both with a bit no version defines
            and HELLO_ACKs with SENDING's bit, a HELLO's only ([WIRE-6]), GSO/GRO aggregates
            and near misses, on the default port, on other ports through the heuristic and
            through the port preference, next to non-mroce UDP the heuristic must leave
            alone: each gets exactly the expert infos and verdict expected and agrees with
            wire/.
  corpus    every input of the wire/ fuzz corpora (fuzz/corpus/decode_{data,ack,control}:
            valid packets and the broken ones the fuzzer found) as a datagram on 4797: no
            Lua error, and the same verdict and fields as wire/.
  mutate    1,500 seeded mutations of those inputs and of the crafted valid packets (a byte
            set at random, a cut, bytes appended, a length field rewritten, an ACK's SHORT
            flag or a DATA's COMPACT flag toggled): the same again.
            The seed is printed; MROCE_SEED=N replays one.
Case `loopback` (its own ctest, it needs packet capture): `tshark -i lo` during short
`mroce perf` runs (write with GSO off and on, atomic, read) and the conformance test
coalesce.target_pair against an agent that coalesces (a READ response and its ACK in one
datagram, [WIRE-10]), on a loopback address of its own; every datagram, and every packet of
each GSO aggregate or coalesced pair, agrees with wire/, through the heuristic (the ports
are ephemeral); SHORT ACKs ([ACK-21]) among them.

usage: dissector_test.py --mroce BIN --decode BIN --lua FILE --scenario FILE
                         [--corpus DIR] [CASE ...]
Exit status: 0 pass, 1 fail, 77 skip (tshark missing, or capture on lo not permitted).
"""
import argparse
import collections
import json
import os
import random
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

SKIP = 77
ARGS = None
FAILURES = []

# Dissector fields that wire/ has no counterpart for: reserved bytes and undefined flag bits
# (wire/ ignores them, [WIRE-6]), bytes beyond a packet, and the verdict itself.
UNCHECKED = {"mroce.reserved", "mroce.data.flags.undefined", "mroce.ack.flags.undefined",
             "mroce.hello.flags.undefined", "mroce.hello.capabilities.undefined", "mroce.extra",
             "mroce.probe.flags.undefined",
             "mroce.undecoded", "mroce.drop_reason"}
BYTE_FIELDS = {"mroce.ack.sack", "mroce.data.payload", "mroce.hello.cookie", "mroce.retry.cookie"}
ERRORS = {"truncated", "bad_version", "bad_type", "bad_length"}
WARNINGS = {"reserved_nonzero", "rule"}


def report(what):
    """Prints a case's summary line: ok, or how many checks failed so far."""
    print(("ok: " if not FAILURES else "done, %d failures so far: " % len(FAILURES)) + what,
          flush=True)


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what, flush=True)
    return cond


class Skip(Exception):
    pass


# ---- tshark output -------------------------------------------------------------------------

# The OS picks the ports of `mroce perf`'s paths, and now and then one that Wireshark has
# registered for another protocol (EtherNet/IP, eobi, ...); its port table is tried before any
# heuristic unless this preference is set (tools/wireshark/README.md).
HEURISTIC_FIRST = ["-o", "udp.try_heuristic_first:TRUE"]


def tshark(pcap, extra=()):
    """Runs tshark with the dissector on a capture; returns {frame number: layers}."""
    cmd = ["tshark", "-n", "-X", "lua_script:" + ARGS.lua, "-r", pcap, "-T", "json",
           "--no-duplicate-keys", *extra]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if p.returncode != 0 or "Lua" in p.stderr:
        raise AssertionError("%s: exit %d: %s" % (" ".join(cmd), p.returncode, p.stderr.strip()))
    frames = {}
    for pkt in json.loads(p.stdout):
        layers = pkt["_source"]["layers"]
        frames[int(layers["frame"]["frame.number"])] = layers
    return frames


def tshark_fields(pcap, names, extra=()):
    """Runs tshark -T fields on a capture; returns {frame number: [value of each name]}
    (the Info column as _ws.col.Info, which -T json leaves out)."""
    cmd = ["tshark", "-n", "-X", "lua_script:" + ARGS.lua, "-r", pcap, "-T", "fields",
           "-E", "separator=/t", "-e", "frame.number", *[a for n in names for a in ("-e", n)],
           *extra]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if p.returncode != 0 or "Lua" in p.stderr:
        raise AssertionError("%s: exit %d: %s" % (" ".join(cmd), p.returncode, p.stderr.strip()))
    rows = {}
    for line in p.stdout.splitlines():
        cells = line.split("\t")
        rows[int(cells[0])] = (cells[1:] + [""] * len(names))[:len(names)]
    return rows


def walk(node, fields, experts):
    """Collects the leaf values of a tshark JSON tree by field name, and the names of its
    expert infos (the key beside _ws.expert.message in each _ws.expert object)."""
    for key, value in node.items():
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, dict):
                if key == "_ws.expert":
                    experts.extend(k for k in v if not k.startswith("_ws.expert."))
                walk(v, fields, experts)
            else:
                fields.setdefault(key, []).append(v)


def dissected(layers):
    """Returns (the fields of each mroce packet of the frame, as a list: one, or several for
    a GSO/GRO aggregate; the expert names of the whole frame), or (None, experts)."""
    experts = []
    walk(layers, {}, experts)
    if "mroce" not in layers:
        return None, experts
    items = layers["mroce"] if isinstance(layers["mroce"], list) else [layers["mroce"]]
    packets = []
    for item in items:
        fields = {}
        walk(item if isinstance(item, dict) else {}, fields, [])
        packets.append(fields)
    return packets, experts


def lua_trouble(layers):
    """Names the Lua errors and malformed-packet exceptions of a frame, if any."""
    experts = []
    walk(layers, {}, experts)
    return [e for e in experts if e.startswith("_ws.lua") or e.startswith("_ws.malformed")] + \
        [k for k in layers if k.startswith("_ws.malformed")]


# ---- ground truth --------------------------------------------------------------------------

def wire_decode(pcap, ports=()):
    """{frame: [wire/'s decode of each datagram of the record]} (several for an aggregate)."""
    p = subprocess.run([ARGS.decode, pcap, *map(str, ports)], capture_output=True, text=True,
                       timeout=60)
    if p.returncode != 0:
        raise AssertionError("pcap_decode %s: %s" % (pcap, p.stderr.strip()))
    out = collections.defaultdict(list)
    for d in map(json.loads, p.stdout.splitlines()):
        check(d["segment"] == len(out[d["frame"]]), "pcap_decode: segments out of order")
        out[d["frame"]].append(d)
    return dict(out)


def same_value(field, shown, truth):
    if field in BYTE_FIELDS:
        return shown.replace(":", "") == truth
    if isinstance(truth, bool):
        return shown in ("1", "True", "true") if truth else shown in ("0", "False", "false")
    if isinstance(truth, int):
        try:
            return int(shown, 0) == truth
        except ValueError:
            return False
    return shown == truth


def compare(where, fields, truth):
    """Checks one frame's dissector fields against wire/'s, both ways; returns True if equal."""
    ok = True
    if truth["error"]:
        ok &= check(fields.get("mroce.drop_reason") == [truth["error"]],
                    "%s: wire/ drops it as %s, the dissector shows %s" %
                    (where, truth["error"], fields.get("mroce.drop_reason")))
        return ok
    ok &= check("mroce.drop_reason" not in fields,
                "%s: wire/ accepts it, the dissector drops it as %s" %
                (where, fields.get("mroce.drop_reason")))
    for name, value in truth["fields"].items():
        want = value if isinstance(value, list) else [value]
        got = fields.get(name, [])
        if len(got) != len(want) or not all(same_value(name, g, w) for g, w in zip(got, want)):
            short = lambda x: (str(x)[:60] + "...") if len(str(x)) > 60 else x
            ok &= check(False, "%s: %s is %s in tshark, %s in wire/" %
                        (where, name, short(got), short(want)))
    extra = [k for k in fields if k.startswith("mroce.") and k not in truth["fields"]
             and k not in UNCHECKED and not k.endswith("_tree")
             and not k.startswith("mroce.expert.")]
    ok &= check(not extra, "%s: fields wire/ did not decode: %s" % (where, extra))
    return ok


def compare_capture(name, pcap, truth, frames, allowed_experts):
    """Every frame of truth must be mroce in tshark, agree with wire/, and raise no expert
    info outside allowed_experts. Returns Counter of (type, flags) seen."""
    seen = collections.Counter()
    for n, truths in sorted(truth.items()):
        where = "%s frame %d" % (name, n)
        layers = frames.get(n)
        if not check(layers is not None, where + ": missing in tshark's output"):
            continue
        check(not lua_trouble(layers), "%s: %s" % (where, lua_trouble(layers)))
        packets, experts = dissected(layers)
        if not check(packets is not None, where + ": not decoded as mroce"):
            continue
        if not check(len(packets) == len(truths), "%s: %d packets in tshark, %d in wire/" %
                     (where, len(packets), len(truths))):
            continue
        for i, (fields, t) in enumerate(zip(packets, truths)):
            compare(where + (" packet %d" % i if len(truths) > 1 else ""), fields, t)
            f = t["fields"]
            seen[f.get("mroce.type")] += 1
            if f.get("mroce.data.flags.retx"):
                seen["retx"] += 1
            if f.get("mroce.ack.sack.count"):
                seen["sack"] += 1
            if f.get("mroce.ack.flags.short"):
                seen["short"] += 1
            if f.get("mroce.data.flags.compact"):
                seen["compact"] += 1
            if f.get("mroce.hello.capabilities.compact_data"):
                seen["compact_data"] += 1
            if "mroce.coalesced.offset" in f:
                seen["coalesced"] += 1
        if len(truths) > 1:
            seen["aggregates"] += 1
        unexpected = [e for e in experts if e.startswith("mroce.")
                      and e[len("mroce.expert."):] not in allowed_experts]
        check(not unexpected, "%s: expert info %s" % (where, unexpected))
    return seen


# ---- pcap writing --------------------------------------------------------------------------

def ip_checksum(b):
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff


def ipv4_udp(payload, sport, dport, src="198.18.0.1", dst="198.18.0.2"):
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload  # no checksum
    hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0x02, 20 + len(udp), 1, 0x4000, 64, 17, 0,
                      socket.inet_aton(src), socket.inet_aton(dst))
    hdr = hdr[:10] + struct.pack("!H", ip_checksum(hdr)) + hdr[12:]
    return hdr + udp


def ipv6_udp(payload, sport, dport):
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    hdr = struct.pack("!IHBB16s16s", 0x60000000, len(udp), 17, 64,
                      socket.inet_pton(socket.AF_INET6, "2001:db8::1"),
                      socket.inet_pton(socket.AF_INET6, "2001:db8::2"))
    # UDP over IPv6 needs a checksum (RFC 8200); compute it over the pseudo-header.
    pseudo = hdr[8:40] + struct.pack("!IxxxB", len(udp), 17) + udp
    csum = ip_checksum(pseudo + (b"\0" if len(pseudo) % 2 else b"")) or 0xffff
    udp = udp[:6] + struct.pack("!H", csum) + udp[8:]
    return hdr + udp


def write_pcap(path, records):
    """records: (ip packet bytes, captured length or None); link type raw IP (101)."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 101))
        for i, (pkt, snap) in enumerate(records):
            incl = len(pkt) if snap is None else snap
            f.write(struct.pack("<IIII", 1, i, incl, len(pkt)))
            f.write(pkt[:incl])


# ---- crafted packets (docs/spec.md §3, written here independently of wire/) ----------------

CONN, TOKEN = 0x0A0B0C0D, 0x1122334455667788


def common(ptype, version=2, reserved=0, conn=CONN, token=TOKEN):
    return struct.pack("!BBHIQ", version, ptype, reserved, conn, token)


def data(opcode=3, flags=0x01, path=2, gen=1, payload=b"x" * 100, payload_len=None, psn=1000,
         floor=990, stream=5, msg_seq=7, recv_seq=0, msg_len=None, offset=0, ts=123456,
         rkey=0x42, addr=0x7f0000001000, imm=0, reserved=0):
    payload_len = len(payload) if payload_len is None else payload_len
    msg_len = offset + len(payload) if msg_len is None else msg_len
    return common(1) + struct.pack("!BBHBBHIIIIIIIIIQI", opcode, flags, path, gen, reserved,
                                   payload_len, psn, floor, stream, msg_seq, recv_seq, msg_len,
                                   offset, ts, rkey, addr, imm) + payload


def cdata(flags=0x01, **kw):
    """[DATA-9]: a DATA with COMPACT (flag 0x20, added to `flags`): data()'s datagram without
    `recv_seq` (bytes 40-43) and `immediate` (68-71), a 64-byte header, then the payload."""
    full = data(flags=flags | 0x20, recv_seq=0, imm=0, **kw)
    return full[:40] + full[44:68] + full[72:]


def ack(path=3, gen=0, flags=0, cum=5000, sack_bits=(), ce=4, ts_echo=777, delay=1500,
        hint=25000, probe_psn=0, streams=((9, 100),), count=None, sack_bytes=None):
    bitmap = bytearray(32)
    for i in sack_bits:
        bitmap[i // 8] |= 0x80 >> (i % 8)
    if sack_bytes is not None:
        bitmap = bytearray(sack_bytes)
    count = len(streams) if count is None else count
    body = struct.pack("!HBBI", path, gen, flags, cum) + bytes(bitmap) + \
        struct.pack("!IIIIIHH", ce, ts_echo, delay, hint, probe_psn, count, 0)
    return common(2) + body + b"".join(struct.pack("!II", s, d) for s, d in streams)


def short_ack(path=3, gen=0, flags=0, cum=5000, ce=4, ts_echo=777, delay=1500, hint=25000,
              probe_psn=0, streams=((9, 100),), count=None, return_path=5):
    """[ACK-21]: an ACK with SHORT (flag 0x04, added to `flags`): no `sack`, every later
    field 32 bytes up; 48 bytes + 8 per stream entry."""
    count = len(streams) if count is None else count
    body = struct.pack("!HBBI", path, gen, flags | 0x04, cum) + \
        struct.pack("!IIIIIHH", ce, ts_echo, delay, hint, probe_psn, count, return_path)
    assert len(body) == 48 - 16
    return common(2) + body + b"".join(struct.pack("!II", s, d) for s, d in streams)


def nack(reason=1, path=1, gen=0, psn=42, stream=3, msg_seq=9, detail=50):
    return common(3) + struct.pack("!BBHB3sIIII", reason, 0, path, gen, b"\0\0\0", psn, stream,
                                   msg_seq, detail)


def hello(ptype=4, src_conn=0x01020304, src_token=0xAABBCCDDEEFF0011, isn=4294967290,
          msg_isn=17, port=4797, paths=8, max_payload=4096, caps=0, conn=0, token=0,
          cookie=bytes(16), hello_flags=0, byte3=0):
    """HELLO (ptype 4) or HELLO_ACK (5). hello_flags: byte 2 (SENDING 0x01, a HELLO's only,
    [CC-20]; DROPPED 0x02, both types, [CONN-31]). byte3: a HELLO's `hello_seq` or a
    HELLO_ACK's `hello_echo` ([CONN-32])."""
    return common(ptype, reserved=hello_flags << 8 | byte3, conn=conn, token=token) + \
        struct.pack("!IQIIHHII", src_conn, src_token, isn, msg_isn, port, paths, max_payload,
                    caps) + cookie


def hello_ack(grant=0, echo=0, **kw):
    """HELLO_ACK: its cookie is the grant in Mbit/s, then 12 zero bytes ([CC-20]); echo is
    `hello_echo` ([CONN-32])."""
    kw.setdefault("conn", CONN)
    kw.setdefault("token", TOKEN)
    return hello(ptype=5, cookie=struct.pack("!I", grant) + bytes(12), byte3=echo, **kw)


# [CONN-32]: crafted HELLOs and HELLO_ACKs whose byte 3 the dissector must show, by case
# name: (field, value, the Info column's word for it or None where 0 shows none).
HELLO_NUMBERS = {
    "hello": ("mroce.hello.seq", 0, None),
    "hello_ack": ("mroce.hello.echo", 0, None),
    "hello seq 3": ("mroce.hello.seq", 3, "seq=3"),
    "hello seq 255, SENDING": ("mroce.hello.seq", 255, "seq=255"),
    "hello seq 0 (not numbered), SENDING": ("mroce.hello.seq", 0, None),
    "hello_ack echo 3": ("mroce.hello.echo", 3, "echo=3"),
    "hello_ack echo 3, grant": ("mroce.hello.echo", 3, "echo=3"),
    "hello_ack echo 0 (no HELLO received), grant": ("mroce.hello.echo", 0, None),
    "hello_ack echo 7, byte 2 set": ("mroce.hello.echo", 7, "echo=7"),
    "hello_ack echo 2, DROPPED, grant": ("mroce.hello.echo", 2, "echo=2"),
    "heuristic hello, seq 7": ("mroce.hello.seq", 7, "seq=7"),
    "heuristic hello_ack, echo 7": ("mroce.hello.echo", 7, "echo=7"),
}

# [CC-20] [CONN-31]: crafted HELLOs and HELLO_ACKs whose `hello_flags` (byte 2) the dissector
# must show, by case name: (SENDING, DROPPED), each by name (mroce.hello.flags.sending,
# .dropped) and, when set, as a word of the Info column. SENDING None: a HELLO_ACK, which
# shows no mroce.hello.flags.sending (its bit 0x01 is reserved there) and no SENDING.
HELLO_FLAGS = {
    "hello": (False, False),
    "hello SENDING": (True, False),
    "hello DROPPED": (False, True),
    "hello seq 4, SENDING and DROPPED": (True, True),
    "hello_flags: a bit no version defines, DROPPED": (False, True),
    "heuristic hello, SENDING": (True, False),
    "heuristic hello, DROPPED, seq 2": (False, True),
    "hello_ack": (None, False),
    "hello_ack echo 2, DROPPED, grant": (None, True),
    "hello_ack echo 7, byte 2 set": (None, False),
    "hello_ack DROPPED and SENDING's bit": (None, True),
    "hello_ack DROPPED and a bit no version defines": (None, True),
    "heuristic hello_ack, DROPPED, echo 3": (None, True),
}


def retry(cookie=bytes(range(1, 17))):
    return common(8) + cookie


def probe(path=4, gen=2, next_psn=2000, floor=1990, ts=31337, flags=0):
    """PROBE (ptype 6). flags: byte 19 ([PROBE-4]: FAILED 0x01, the others undefined)."""
    return common(6) + struct.pack("!HBBIII", path, gen, flags, next_psn, floor, ts)


def close(reason=0):
    return common(7) + struct.pack("!II", reason, 0)


def crc32c(b):
    """CRC32C, bit by bit (spec [INT-2]; check value of b"123456789": 0xE3069283)."""
    c = 0xFFFFFFFF
    for x in b:
        c ^= x
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
    return c ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283


def sealed(packet, flip=False):
    """packet + its integrity trailer ([INT-2]); flip: a trailer one bit off."""
    return packet + struct.pack("!I", crc32c(packet) ^ (1 if flip else 0))


def crafted_cases():
    """(name, datagram, verdict or None, expert names that must appear, ports, ip version,
    snap length). Every expected expert is given; other expert infos fail the case unless
    listed in `also` below."""
    P = 4797
    cases = []

    def add(name, dgram, verdict=None, experts=(), sport=50000, dport=P, ipv=4, snap=None):
        cases.append((name, dgram, verdict, set(experts), sport, dport, ipv, snap))

    # Valid packets of every type, opcode and reason.
    add("data write", data())
    add("data write middle segment, ACK_NOW", data(flags=0x04, offset=4096, msg_len=16384,
                                                   payload=b"\x11" * 4096))
    add("data retransmitted", data(flags=0x03), experts={"retransmission"})
    add("data echoing return path 5", data(flags=0x09, reserved=5))  # [PATH-12]
    add("data send", data(opcode=1, rkey=0, addr=0, recv_seq=77))
    add("data send_imm", data(opcode=2, rkey=0, addr=0, recv_seq=78, imm=0xCAFEBABE))
    add("data write_imm", data(opcode=4, recv_seq=79, imm=0xFEEDFACE))
    add("data zero-length send", data(opcode=1, rkey=0, addr=0, recv_seq=5, payload=b"",
                                      msg_len=0))
    add("data read_request", data(opcode=5, payload=struct.pack("!II", 65536, 0)))
    add("data read_response", data(opcode=6, rkey=0, addr=7, payload=b"r" * 300))
    add("data fetch_add", data(opcode=7, payload=struct.pack("!QQ", 5, 0)))
    add("data compare_swap", data(opcode=8, payload=struct.pack("!QQ", 0xDEAD, 0xBEEF)))
    add("data atomic_response", data(opcode=9, rkey=0, addr=7,
                                     payload=struct.pack("!Q", 0x0123456789ABCDEF)))
    add("data over IPv6", data(), ipv=6)
    # SACK: PSNs cum+2..cum+4, cum+10, cum+256 (the last bit), across the 2^32 wrap.
    add("ack with sack ranges", ack(sack_bits=(1, 2, 3, 9, 255), cum=4294967290,
                                    streams=((1, 10), (2, 20), (3, 30))))
    add("ack empty sack, no streams", ack(streams=(), hint=0))
    add("ack full sack", ack(sack_bytes=b"\x7f" + b"\xff" * 31, streams=()))
    add("ack probe reply", ack(flags=0x01, probe_psn=5003))
    add("ack sack bit 0 set", ack(sack_bits=(0, 5)), experts={"note"})
    for reason in range(1, 6):
        add("nack reason %d" % reason,
            nack(reason=reason, detail=50 if reason == 1 else (1 if reason == 3 else 0)))
    add("hello", hello())
    add("hello_ack", hello(ptype=5, conn=0x0A0B0C0D, token=TOKEN))
    add("hello max caps", hello(paths=256, max_payload=9000))
    add("hello SENDING", hello(hello_flags=0x01))
    # [CONN-31]: DROPPED, alone and with SENDING.
    add("hello DROPPED", hello(hello_flags=0x02))
    add("hello seq 4, SENDING and DROPPED", hello(hello_flags=0x03, byte3=4))
    # [CONN-32]: byte 3 is a HELLO's number and a HELLO_ACK's echo of one (0: none).
    add("hello seq 3", hello(byte3=3))
    add("hello seq 255, SENDING", hello(hello_flags=0x01, byte3=255))
    add("hello seq 0 (not numbered), SENDING", hello(hello_flags=0x01, byte3=0))
    add("hello_ack echo 3", hello_ack(echo=3))
    add("hello_ack echo 3, grant", hello_ack(echo=3, grant=25000))
    add("hello_ack echo 0 (no HELLO received), grant", hello_ack(echo=0, grant=100))
    # [CONN-31]: the HELLO_ACK confirming the establishment of a side that dropped DATA.
    add("hello_ack echo 2, DROPPED, grant", hello_ack(echo=2, grant=25000, hello_flags=0x02))
    add("probe", probe())
    add("probe across the wrap", probe(next_psn=3, floor=4294967295))
    add("probe of a Failed path", probe(next_psn=2000, floor=2000, flags=0x01))
    for reason in (0, 1, 2):
        add("close reason %d" % reason, close(reason))
    add("close unlisted reason", close(1000), experts={"note"})

    # Broken: one per rule of [WIRE-9], in its order, and per type-specific check.
    add("10 bytes", data()[:10], "truncated", {"truncated"})
    add("version 1", bytes([1]) + data()[1:], "bad_version", {"bad_version"})
    add("retry", retry())
    add("hello with a cookie", hello(cookie=bytes(range(0xC0, 0xD0))))
    add("version 0, also cut short", bytes([0]) + data()[1:12], "truncated", {"truncated"})
    add("type 0", common(0) + b"\0" * 16, "bad_type", {"bad_type"})
    add("type 9", common(9) + b"\0" * 16, "bad_type", {"bad_type"})
    add("data cut in its header", data()[:50], "truncated", {"truncated"})
    add("data payload_len lies", data(payload_len=99), "bad_length", {"bad_length"})
    add("data payload longer than payload_len", data() + b"zz", "bad_length", {"bad_length"})
    add("data opcode 0x0a", data(opcode=0x0A), "bad_type", {"bad_type"})
    add("data opcode 0 and a lying length", data(opcode=0, payload_len=1), "bad_type",
        {"bad_type", "bad_length"})
    add("data beyond msg_len", data(msg_len=50), "bad_length", {"bad_length"})
    add("data LAST on a middle segment", data(msg_len=1000), "bad_length", {"bad_length"})
    add("data no LAST on the last segment", data(flags=0), "bad_length", {"bad_length"})
    add("data empty payload in a message", data(payload=b"", msg_len=10, flags=0),
        "bad_length", {"bad_length"})
    add("ack cut", ack()[:79], "truncated", {"truncated"})
    add("ack count 33", ack(streams=((1, 1),) * 33), "bad_length", {"bad_length"})
    add("ack count says 2, one entry", ack(count=2), "bad_length", {"bad_length"})
    add("ack count says 0, one entry", ack(count=0), "bad_length", {"bad_length"})
    add("nack 41 bytes", nack() + b"\0", "bad_length", {"bad_length"})
    add("nack reason 6", nack(reason=6, detail=0), "bad_type", {"bad_type"})
    add("nack reason 0", nack(reason=0, detail=0), "bad_type", {"bad_type"})
    add("hello cut", hello()[:47], "truncated", {"truncated"})
    add("hello 49 bytes", hello() + b"\0", "bad_length", {"bad_length"})
    add("hello 0 paths", hello(paths=0), "bad_length", {"bad_length"})
    add("hello 257 paths", hello(paths=257), "bad_length", {"bad_length"})
    add("hello max_payload 255", hello(max_payload=255), "bad_length", {"bad_length"})
    add("hello max_payload 9001", hello(max_payload=9001), "bad_length", {"bad_length"})
    add("probe 33 bytes", probe() + b"\0", "bad_length", {"bad_length"})
    add("close cut", close()[:23], "truncated", {"truncated"})
    add("close 25 bytes", close() + b"\0", "bad_length", {"bad_length"})

    # Well-formed, but a sender broke a rule: warnings, no drop verdict (wire/ accepts).
    add("reserved bits in the common header", common(7, reserved=0x0100) +
        struct.pack("!II", 0, 0), None, {"reserved_nonzero"})
    add("data return_echo without RETURN_ECHO", data(reserved=1), None, {"rule"})
    add("data last, sender drained", data(flags=0x11))  # [CC-12]
    add("undefined data flag", data(flags=0x41), None, {"reserved_nonzero"})
    add("undefined ack flag", ack(flags=0x08), None, {"reserved_nonzero"})
    add("hello capabilities: a bit no version defines", hello(caps=0x10), None,
        {"reserved_nonzero"})
    add("hello capabilities: INTEGRITY and COALESCE", hello(caps=3), None, set())
    add("hello capabilities: SHORT_ACK", hello(caps=4), None, set())
    add("hello capabilities: COMPACT_DATA", hello(caps=8), None, set())
    add("hello_ack capabilities: all four", hello(ptype=5, conn=0x0A0B0C0D, token=TOKEN,
                                                  caps=0xF), None, set())
    add("hello_ack capabilities: all four, and an undefined bit", hello(
        ptype=5, conn=0x0A0B0C0D, token=TOKEN, caps=0x8000000F), None, {"reserved_nonzero"})
    add("hello src_conn_id 0", hello(src_conn=0), None, {"rule"})
    add("hello src_token 0", hello(src_token=0), None, {"rule"})
    add("hello with a destination", hello(conn=5), None, {"rule"})
    # [WIRE-6]: hello_flags bits no version defines are reserved.
    add("hello_flags: a bit no version defines", hello(hello_flags=0x04), None,
        {"reserved_nonzero"})
    add("hello_flags: a bit no version defines, DROPPED", hello(hello_flags=0x82), None,
        {"reserved_nonzero"})
    # A HELLO_ACK's hello_flags defines DROPPED only ([CONN-31]): SENDING's bit (a HELLO's,
    # [CC-20]) and the bits no version defines are reserved there.
    add("hello_ack echo 7, byte 2 set", hello_ack(echo=7, hello_flags=0x01), None,
        {"reserved_nonzero"})
    add("hello_ack DROPPED and SENDING's bit", hello_ack(echo=1, hello_flags=0x03), None,
        {"reserved_nonzero"})
    add("hello_ack DROPPED and a bit no version defines", hello_ack(echo=1, hello_flags=0x82),
        None, {"reserved_nonzero"})
    add("data psn_floor after psn", data(floor=1001), None, {"rule"})
    add("data send with an rkey", data(opcode=1, recv_seq=1), None, {"rule"})
    add("data write with recv_seq", data(recv_seq=3), None, {"rule"})
    add("read_request body too long", data(opcode=5, payload=b"\0" * 12), None, {"rule"})
    add("ack probe_psn without PROBE_REPLY", ack(probe_psn=9), None, {"rule"})
    add("nack detail for OUT_OF_WINDOW", nack(reason=4, detail=1), None, {"rule"})
    add("probe psn_floor after next_psn", probe(floor=2001), None, {"rule"})
    add("probe flags: an undefined bit", probe(flags=0x81), None, {"reserved_nonzero"})

    # UDP GSO/GRO aggregates: packets back to back in one datagram, each its own size, the
    # last one shorter; one piece that is not a whole packet makes it one bad datagram.
    seg = data(flags=0, msg_len=10000, payload=b"a" * 1000)
    add("aggregate data+data+data+last", seg + data(flags=0, offset=1000, msg_len=10000,
        payload=b"b" * 1000) + seg + data(offset=9500, msg_len=10000, payload=b"c" * 500),
        experts={"aggregate"})
    add("aggregate ack+ack", ack() + ack(path=4), experts={"aggregate"}, sport=51115,
        dport=52226)
    add("no aggregate: second piece cut", seg + seg[:500], "bad_length", {"bad_length"})
    add("no aggregate: last piece longer", seg + seg + b"x", "bad_length", {"bad_length"})
    add("no aggregate: a piece of the right size breaks [DATA-3]", seg + data(
        flags=0, offset=20000, msg_len=10000, payload=b"b" * 1000), "bad_length", {"bad_length"})

    # [INT-2] [INT-3]: the integrity trailer of capability INTEGRITY, read by length.
    add("data with integrity trailer", sealed(data()))
    add("ack with integrity trailer", sealed(ack()))
    add("nack with integrity trailer", sealed(nack()))
    add("probe with integrity trailer", sealed(probe()))
    add("close with integrity trailer", sealed(close()))
    add("data with a bad integrity trailer", sealed(data(), flip=True), "bad_integrity",
        {"bad_integrity"})
    add("hello announcing INTEGRITY", hello(caps=1))
    add("hello with 4 extra bytes (HELLO never carries a trailer)", sealed(hello()),
        "bad_length", {"bad_length"})
    full = sealed(data(flags=0, msg_len=2048, payload=b"q" * 1024))
    add("aggregate data+data with trailers", full + sealed(
        data(flags=0x01, offset=1024, msg_len=2048, payload=b"r" * 1024)), experts={"aggregate"},
        sport=51117, dport=52228)

    # [WIRE-10]: coalesced datagrams, read by the FOLLOWED flag (a capture does not say
    # whether COALESCE was negotiated): the ACK at its count's length, then a DATA of the same
    # connection, one trailer for both; a broken one is dropped whole, each packet showing
    # the datagram's verdict.
    pair = ack(flags=0x02) + data()
    add("coalesced ack+data", pair)
    add("coalesced ack+data, one integrity trailer", sealed(pair))
    add("coalesced ack+data, a bad trailer", sealed(pair, flip=True), "bad_integrity",
        {"bad_integrity"})
    add("coalesced ack+data, a read response and no streams",
        ack(flags=0x02, streams=()) + data(opcode=6, rkey=0, addr=7, payload=b"r" * 300))
    add("ack FOLLOWED, nothing follows", ack(flags=0x02), "bad_length", {"bad_length"})
    add("ack FOLLOWED, nothing follows but a trailer", sealed(ack(flags=0x02)), "bad_length",
        {"bad_length"})
    add("coalesced ack+data, the data truncated in its header", ack(flags=0x02) + data()[:40],
        "truncated", {"truncated"})
    add("coalesced ack+data, the data one byte short", pair[:-1], "bad_length", {"bad_length"})
    add("coalesced ack, then 10 bytes", ack(flags=0x02) + data()[:10], "truncated", {"truncated"})
    add("coalesced ack, then a probe", ack(flags=0x02) + probe(), "bad_type", {"bad_type"})
    add("coalesced ack, then a data of another connection", ack(flags=0x02) + data()[:4] +
        struct.pack("!I", CONN + 1) + data()[8:], "bad_type", {"bad_type"})
    add("coalesced ack+data, 33 stream entries", ack(flags=0x02, streams=((1, 1),) * 33) + data(),
        "bad_length", {"bad_length"})
    add("coalesced ack+data, longer than any full DATA (9072 bytes)", ack(flags=0x02) + data(
        payload=b"y" * 9000), "bad_length", {"bad_length"})
    add("heuristic coalesced ack+data", pair, sport=51119, dport=52230)

    # [ACK-21]: the SHORT form, read by its flag (a capture does not say whether SHORT_ACK was
    # negotiated, as wire::decode_ack reads either form): 48 bytes + 8 per entry, the bitmap
    # left out, the fields after it 32 bytes up; [ACK-1] and [WIRE-7] on that length.
    add("short ack, one stream", short_ack())
    add("short ack, no streams", short_ack(streams=(), hint=0, return_path=0))
    add("short ack, three streams, cum_psn across the wrap", short_ack(
        cum=4294967295, streams=((1, 10), (2, 20), (3, 4294967295))))
    add("short ack, 32 streams", short_ack(streams=tuple((i, 2 * i) for i in range(32))))
    add("short ack probe reply", short_ack(flags=0x01, probe_psn=5003))
    add("short ack probe reply, no streams", short_ack(flags=0x01, probe_psn=1, streams=()))
    add("short ack with integrity trailer", sealed(short_ack()))
    add("short ack, no streams, with integrity trailer", sealed(short_ack(streams=())))
    add("short ack with a bad integrity trailer", sealed(short_ack(), flip=True),
        "bad_integrity", {"bad_integrity"})
    add("short ack cut in its fixed part (47 bytes)", short_ack(streams=())[:47], "truncated",
        {"truncated"})
    add("short ack cut after its flags (30 bytes)", short_ack()[:30], "truncated",
        {"truncated"})
    add("short ack cut before its flags (19 bytes)", short_ack()[:19], "truncated",
        {"truncated"})
    add("short ack cut in its entries", short_ack(streams=((1, 1), (2, 2)))[:60], "bad_length",
        {"bad_length"})
    add("short ack count says 2, one entry", short_ack(count=2), "bad_length", {"bad_length"})
    add("short ack count says 0, one entry", short_ack(count=0), "bad_length", {"bad_length"})
    add("short ack count says 1, no entry", short_ack(count=1, streams=()), "bad_length",
        {"bad_length"})
    add("short ack count 33", short_ack(streams=((1, 1),) * 33), "bad_length", {"bad_length"})
    add("short ack 8 bytes too long", short_ack() + bytes(8), "bad_length", {"bad_length"})
    # A full-form ACK with SHORT set: read as SHORT (count from the bitmap's bytes 20-21, 0),
    # so its 88 bytes disagree with the count.
    add("full-length ack with SHORT set", ack(flags=0x04), "bad_length", {"bad_length"})
    add("short ack probe_psn without PROBE_REPLY", short_ack(probe_psn=9), None, {"rule"})
    add("short ack, undefined flag", short_ack(flags=0x08), None, {"reserved_nonzero"})
    add("heuristic short ack", short_ack(), sport=51123, dport=52234)
    add("heuristic short ack, no streams", short_ack(streams=()), sport=51125, dport=52236)
    add("aggregate short ack+short ack", short_ack() + short_ack(path=4), experts={"aggregate"},
        sport=51127, dport=52238)
    # [WIRE-10] with SHORT: the ACK is 48 + 8 x its count, then the DATA.
    spair = short_ack(flags=0x02) + data()
    add("coalesced short ack+data", spair)
    add("coalesced short ack+data, no streams, a read response", short_ack(
        flags=0x02, streams=()) + data(opcode=6, rkey=0, addr=7, payload=b"r" * 300))
    add("coalesced short ack+data, a probe reply", short_ack(flags=0x03, probe_psn=77) + data())
    add("coalesced short ack+data, one integrity trailer", sealed(spair))
    add("coalesced short ack+data, a bad trailer", sealed(spair, flip=True), "bad_integrity",
        {"bad_integrity"})
    add("short ack FOLLOWED, nothing follows", short_ack(flags=0x02), "bad_length",
        {"bad_length"})
    add("short ack FOLLOWED, nothing follows but a trailer", sealed(short_ack(flags=0x02)),
        "bad_length", {"bad_length"})
    add("short ack FOLLOWED, cut in its fixed part", short_ack(flags=0x02, streams=())[:40],
        "truncated", {"truncated"})
    add("coalesced short ack+data, the data one byte short", spair[:-1], "bad_length",
        {"bad_length"})
    add("coalesced short ack+data, the data truncated in its header", short_ack(flags=0x02) +
        data()[:40], "truncated", {"truncated"})
    add("coalesced short ack, then a probe", short_ack(flags=0x02) + probe(), "bad_type",
        {"bad_type"})
    add("coalesced short ack whose count is one too many, then a data", short_ack(
        flags=0x02, count=2) + data(), "bad_version", {"bad_version"})
    add("coalesced short ack+data, 33 stream entries", short_ack(
        flags=0x02, streams=((1, 1),) * 33) + data(), "bad_length", {"bad_length"})
    add("heuristic coalesced short ack+data", spair, sport=51129, dport=52240)

    # [DATA-9]: the COMPACT form, read by its flag (a capture does not say whether
    # COMPACT_DATA was negotiated; wire::decode_data reads the flag by default): 64 bytes,
    # no recv_seq or immediate, the fields after msg_seq 4 bytes up, the payload at 64.
    add("compact write", cdata())
    add("compact write, middle segment, ACK_NOW", cdata(flags=0x04, offset=4096,
                                                        msg_len=16384, payload=b"\x11" * 4096))
    add("compact write, retransmitted", cdata(flags=0x03), experts={"retransmission"})
    add("compact write, drained, echoing return path 5", cdata(flags=0x19, reserved=5))
    add("compact zero-length write", cdata(payload=b"", msg_len=0))
    add("compact read_request", cdata(opcode=5, payload=struct.pack("!II", 65536, 0)))
    add("compact read_response", cdata(opcode=6, rkey=0, addr=7, payload=b"r" * 300))
    add("compact fetch_add", cdata(opcode=7, payload=struct.pack("!QQ", 5, 0)))
    add("compact compare_swap", cdata(opcode=8, payload=struct.pack("!QQ", 0xDEAD, 0xBEEF)))
    add("compact atomic_response", cdata(opcode=9, rkey=0, addr=7,
                                         payload=struct.pack("!Q", 0x0123456789ABCDEF)))
    add("compact write over IPv6", cdata(), ipv=6)
    add("compact write with integrity trailer", sealed(cdata()))
    add("compact fetch_add with integrity trailer", sealed(cdata(
        opcode=7, payload=struct.pack("!QQ", 5, 0))))
    add("compact write with a bad integrity trailer", sealed(cdata(), flip=True),
        "bad_integrity", {"bad_integrity"})
    for op, name in ((1, "send"), (2, "send_imm"), (4, "write_imm")):
        add("compact %s (consumes a receive)" % name, cdata(opcode=op, rkey=0 if op < 3 else 0x42,
            addr=0 if op < 3 else 0x7f0000001000), "bad_length", {"bad_length"})
    add("compact send, also 8 bytes too long", cdata(opcode=1, rkey=0, addr=0) + bytes(8),
        "bad_length", {"bad_length"})
    add("compact write cut at 63 bytes", cdata(payload=b"")[:63], "truncated", {"truncated"})
    add("compact write cut after its flags (30 bytes)", cdata()[:30], "truncated",
        {"truncated"})
    add("data without COMPACT cut at 64 bytes", data(payload=b"")[:64], "truncated",
        {"truncated"})
    add("compact opcode 0x0a", cdata(opcode=0x0A), "bad_type", {"bad_type"})
    add("compact payload_len lies", cdata(payload_len=99), "bad_length", {"bad_length"})
    add("compact beyond msg_len", cdata(msg_len=50), "bad_length", {"bad_length"})
    add("compact no LAST on the last segment", cdata(flags=0), "bad_length", {"bad_length"})
    # A full-form DATA with COMPACT set (a sender that did not negotiate it, [DATA-9]): read
    # as COMPACT, so its payload_len is 8 short of the bytes after the 64-byte header.
    add("full-length write with COMPACT set", data(flags=0x21), "bad_length", {"bad_length"})
    add("compact read_response with an rkey", cdata(opcode=6, addr=7), None, {"rule"})
    add("compact psn_floor after psn", cdata(floor=1001), None, {"rule"})
    add("compact read_request body too long", cdata(opcode=5, payload=b"\0" * 12), None,
        {"rule"})
    add("compact write, undefined flag", cdata(flags=0x81), None, {"reserved_nonzero"})
    add("heuristic compact write", cdata(), sport=51131, dport=52242)
    add("heuristic compact read_response with trailer", sealed(cdata(opcode=6, rkey=0, addr=7)),
        sport=51133, dport=52244)
    cseg = cdata(flags=0, msg_len=3000, payload=b"a" * 1000)
    add("aggregate compact data+compact data+compact last", cseg + cdata(
        flags=0, offset=1000, msg_len=3000, payload=b"b" * 1000) + cdata(
        offset=2000, msg_len=3000, payload=b"c" * 1000), experts={"aggregate"})
    # [WIRE-10] with COMPACT: the follower's header is 64, the datagram's bound a full DATA's.
    cpair = ack(flags=0x02) + cdata()
    add("coalesced ack+compact data", cpair)
    add("coalesced ack+compact data, one integrity trailer", sealed(cpair))
    add("coalesced short ack+compact read response, one integrity trailer", sealed(short_ack(
        flags=0x02, streams=()) + cdata(opcode=6, rkey=0, addr=7, payload=b"r" * 300)))
    add("coalesced ack+compact data, the data one byte short", cpair[:-1], "bad_length",
        {"bad_length"})
    add("coalesced ack+compact data, the data cut at 63 bytes", ack(flags=0x02) +
        cdata(payload=b"")[:63], "truncated", {"truncated"})
    add("coalesced ack+compact send", ack(flags=0x02) + cdata(opcode=1, rkey=0, addr=0),
        "bad_length", {"bad_length"})
    add("coalesced ack+compact data, longer than any full DATA", ack(flags=0x02, streams=()) +
        cdata(payload=b"y" * 9000), "bad_length", {"bad_length"})
    add("heuristic coalesced ack+compact data", cpair, sport=51135, dport=52246)

    # A capture cut by the snap length: shown as far as captured, never a Lua error.
    add("data cut by the snap length", data(payload=b"p" * 1000), None, {"snapped"},
        snap=20 + 8 + 40)
    add("data payload cut by the snap length", data(payload=b"p" * 1000), None, {"snapped"},
        snap=20 + 8 + 100)
    add("short ack cut by the snap length", short_ack(), None, {"snapped"}, snap=20 + 8 + 30)
    add("compact write cut by the snap length", cdata(payload=b"p" * 1000), None, {"snapped"},
        snap=20 + 8 + 50)
    add("compact write payload cut by the snap length", cdata(payload=b"p" * 1000), None,
        {"snapped"}, snap=20 + 8 + 100)
    add("compact write cut by the snap length before its flags", cdata(payload=b"p" * 1000),
        None, {"snapped"}, snap=20 + 8 + 17)

    # The heuristic: a valid packet between ephemeral ports is mroce; a later broken one of
    # the same conversation is mroce too (flagged); other UDP is left alone.
    add("heuristic data", data(), sport=51111, dport=52222)
    add("heuristic conversation, broken", data()[:40], "truncated", {"truncated"},
        sport=51111, dport=52222)
    add("heuristic ack", ack(), sport=51113, dport=52224)
    # [CC-20], [CONN-30]: a HELLO with SENDING (byte 2), as its copies on other paths
    # arrive, each the first datagram of its conversation.
    add("heuristic hello, SENDING", hello(hello_flags=0x01), sport=51121, dport=52232)
    # [CONN-31]: the next HELLO of a sender that dropped DATA while opening.
    add("heuristic hello, DROPPED, seq 2", hello(hello_flags=0x02, byte3=2), sport=51141,
        dport=52252)
    # [CONN-32]: every numbered HELLO and every answer to one sets byte 3.
    add("heuristic hello, seq 7", hello(hello_flags=0x01, byte3=7), sport=51137, dport=52248)
    add("heuristic hello_ack, echo 7", hello_ack(echo=7, grant=1000), sport=51139, dport=52250)
    # [CONN-31]: the HELLO_ACK confirming the establishment of a side that dropped DATA.
    add("heuristic hello_ack, DROPPED, echo 3", hello_ack(echo=3, hello_flags=0x02),
        sport=51143, dport=52254)
    return cases


# Non-mroce UDP that the heuristic must not take: (name, datagram, sport, dport).
def not_mroce():
    rng = random.Random(18)
    return [
        ("random bytes", bytes(rng.randrange(256) for _ in range(64)), 53000, 53001),
        ("version 2 DATA whose length lies", data(payload_len=3), 53002, 53003),
        ("version 2 unknown type", common(9) + b"\0" * 32, 53004, 53005),
        ("reserved set, non-default port", common(7, reserved=1) + b"\0" * 8, 53006, 53007),
        ("byte 2 set in a CLOSE", common(7, reserved=0x0100) + b"\0" * 8, 53008, 53009),
        ("hello_flags bit no version defines", hello(hello_flags=0x04), 53010, 53011),
        ("hello_flags SENDING and a bit no version defines", hello(hello_flags=0x41), 53018,
         53019),
        ("SENDING's bit in a HELLO_ACK", hello_ack(echo=1, hello_flags=0x01), 53014, 53015),
        ("SENDING's bit and DROPPED in a HELLO_ACK", hello_ack(echo=1, hello_flags=0x03),
         53020, 53021),
        ("DROPPED and a bit no version defines in a HELLO_ACK",
         hello_ack(echo=1, hello_flags=0x42), 53022, 53023),
        ("byte 3 set in a PROBE", common(6, reserved=0x0001) + probe()[16:], 53016, 53017),
        ("version 2 COMPACT SEND", cdata(opcode=1, rkey=0, addr=0), 53012, 53013),
    ]


# ---- cases ---------------------------------------------------------------------------------

def run_sim(tmp):
    cap = os.path.join(tmp, "cap.pcap")
    out = os.path.join(tmp, "out")
    p = subprocess.run([ARGS.mroce, "sim", ARGS.scenario, "--out", out, "--pcap", cap,
                        "--pcap-at", "hosts"], capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise AssertionError("mroce sim: %s" % p.stderr.strip())
    runs = {r["protocol"]: r for r in json.load(open(os.path.join(out, "summary.json")))["runs"]}
    captures = {proto: (os.path.join(tmp, "cap-%s.pcap" % r["label"]), r["metrics"])
                for proto, r in runs.items()}
    # [DATA-9]: the same run with COMPACT_DATA announced (off by default), its WRITEs compact.
    ccap = os.path.join(tmp, "compact.pcap")
    cout = os.path.join(tmp, "out-compact")
    p = subprocess.run([ARGS.mroce, "sim", ARGS.scenario, "--out", cout, "--pcap", ccap,
                        "--pcap-at", "hosts", "--set", "mroce.compact_data=true",
                        "--set", "sweep.protocol=[\"mroce\"]"],
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise AssertionError("mroce sim --set mroce.compact_data=true: %s" % p.stderr.strip())
    runs = json.load(open(os.path.join(cout, "summary.json")))["runs"]
    # One run: --pcap names its file as given (several runs get -LABEL each).
    captures["mroce-compact"] = (ccap, runs[0]["metrics"])
    return captures


def case_sim(captures):
    pcap, metrics = captures["mroce"]
    truth = wire_decode(pcap)
    frames = tshark(pcap)
    check(len(truth) > 0 and len(truth) == len(frames),
          "sim: wire/ decoded %d datagrams, tshark shows %d frames" % (len(truth), len(frames)))
    bad = [n for n, ts in truth.items() if any(t["error"] for t in ts)]
    check(not bad, "sim: wire/ rejects frames %s of the engine's own capture" % bad[:10])
    seen = compare_capture("sim", pcap, truth, frames, {"retransmission", "note"})
    for t, name in ((1, "DATA"), (2, "ACK"), (4, "HELLO"), (5, "HELLO_ACK")):
        check(seen[t] > 0, "sim: no %s in the capture" % name)
    # The run is lossy: the engine retransmitted, and the capture at the hosts shows it.
    check(metrics["retransmits"] > 0 and metrics["drops"] > 0,
          "sim: the lossy scenario lost nothing (%s)" % metrics)
    check(seen["retx"] > 0, "sim: %d retransmits in summary.json, no RETX frame" %
          metrics["retransmits"])
    # [ACK-21]: the engine sends an ACK with an empty bitmap SHORT, one that reports a loss
    # in full.
    check(seen["short"] > 0 and seen["sack"] > 0,
          "sim: expected SHORT ACKs and full ACKs with SACK bits: %s" % dict(seen))
    # [DATA-9]: the engine sends no COMPACT DATA unless COMPACT_DATA is announced (off by
    # default).
    check(seen["compact"] == 0, "sim: COMPACT DATA without COMPACT_DATA: %s" % dict(seen))
    check_hello_numbers("sim", truth)
    report("sim (%d frames: %s)" % (len(truth), dict(seen)))

    pcap, _ = captures["mroce-compact"]
    truth = wire_decode(pcap)
    frames = tshark(pcap)
    check(len(truth) > 0 and len(truth) == len(frames),
          "sim compact: wire/ decoded %d datagrams, tshark shows %d frames" %
          (len(truth), len(frames)))
    bad = [n for n, ts in truth.items() if any(t["error"] for t in ts)]
    check(not bad, "sim compact: wire/ rejects frames %s of the engine's own capture" % bad[:10])
    seen = compare_capture("sim compact", pcap, truth, frames, {"retransmission", "note"})
    # Both ends announce COMPACT_DATA and the run's WRITEs leave out recv_seq and immediate.
    check(seen["compact"] > 0 and seen["compact_data"] == seen[4] + seen[5] > 0,
          "sim compact: expected COMPACT DATA and HELLOs announcing COMPACT_DATA: %s" %
          dict(seen))
    report("sim compact (%d frames: %s)" % (len(truth), dict(seen)))


def check_hello_numbers(name, truth):
    """[CONN-32] in an engine's capture (the fields agree with tshark's, compare_capture):
    every HELLO is numbered (1..255), and a HELLO_ACK that echoes a number echoes one that a
    HELLO of the connection it answers (its src_conn_id, the HELLO_ACK's conn_id) carried
    in an earlier frame. At least one HELLO_ACK echoes one."""
    sent = collections.defaultdict(set)  # src_conn_id -> hello_seq values seen so far
    echoed = 0
    for n, ts in sorted(truth.items()):
        for t in ts:
            f = t["fields"]
            if f.get("mroce.type") == 4:
                seq = f.get("mroce.hello.seq")
                check(seq is not None and 1 <= seq <= 255,
                      "%s frame %d: a HELLO numbered %s" % (name, n, seq))
                sent[f.get("mroce.hello.src_conn_id")].add(seq)
            elif f.get("mroce.type") == 5:
                echo = f.get("mroce.hello.echo")
                if echo:
                    echoed += 1
                    check(echo in sent[f.get("mroce.conn_id")],
                          "%s frame %d: a HELLO_ACK to conn 0x%08x echoes %d; its HELLOs "
                          "so far carried %s" % (name, n, f.get("mroce.conn_id"), echo,
                                                 sorted(sent[f.get("mroce.conn_id")])))
    check(echoed > 0, "%s: no HELLO_ACK echoes a HELLO's number" % name)


def bth_of(pcap):
    """{frame: (dst port, opcode, dest QP, PSN)} parsed from the raw bytes: the InfiniBand
    BTH is the first 12 bytes of the UDP payload (opcode byte 0, QP bytes 5-7, PSN 9-11)."""
    data = open(pcap, "rb").read()
    magic, = struct.unpack("<I", data[:4])
    check(magic == 0xa1b23c4d and struct.unpack("<I", data[20:24])[0] == 101,
          "rocev2: %s is not the simulator's raw-IP nanosecond pcap" % pcap)
    pos, frame, out = 24, 0, {}
    while pos < len(data):
        incl, = struct.unpack("<I", data[pos + 8:pos + 12])
        pkt = data[pos + 16:pos + 16 + incl]
        pos += 16 + incl
        frame += 1
        ihl = (pkt[0] & 15) * 4
        dport, = struct.unpack("!H", pkt[ihl + 2:ihl + 4])
        bth = pkt[ihl + 8:ihl + 20]
        out[frame] = (dport, bth[0], int.from_bytes(bth[5:8], "big"),
                      int.from_bytes(bth[9:12], "big"))
    return out


def case_rocev2(captures):
    pcap, _ = captures["rocev2"]
    truth = bth_of(pcap)
    frames = tshark(pcap)
    check(len(truth) > 0 and len(frames) == len(truth),
          "rocev2: %d records, tshark shows %d" % (len(truth), len(frames)))
    opcodes = collections.Counter()
    for n, (dport, opcode, qp, psn) in sorted(truth.items()):
        where = "rocev2 frame %d" % n
        layers = frames.get(n, {})
        check(dport == 4791, "%s: UDP destination port %d, not RoCEv2's 4791" % (where, dport))
        check("mroce" not in layers, where + ": taken by the mroce dissector")
        ib = layers.get("infiniband")
        if not check(isinstance(ib, dict), where + ": not decoded as InfiniBand (RoCEv2)"):
            continue
        fields = {}
        walk(ib, fields, [])
        shown = tuple(int(fields.get(k, ["-1"])[0], 0)
                      for k in ("infiniband.bth.opcode", "infiniband.bth.destqp",
                                "infiniband.bth.psn"))
        check(shown == (opcode, qp, psn), "%s: BTH (opcode, QP, PSN) %s in tshark, %s in the "
              "bytes" % (where, shown, (opcode, qp, psn)))
        opcodes[opcode] += 1
    # RC RDMA WRITE First/Middle/Last/Only (6-8, 10) carry the data; Acknowledge is 17.
    check(any(opcodes[o] for o in (6, 7, 8, 10)) and opcodes[17] > 0,
          "rocev2: no RDMA WRITE or no ACK among the opcodes %s" % dict(opcodes))
    report("rocev2 (%d frames, opcodes %s)" % (len(truth), dict(opcodes)))


def case_crafted(tmp):
    cases = crafted_cases()
    others = not_mroce()
    records, expect = [], {}
    for name, dgram, verdict, experts, sport, dport, ipv, snap in cases:
        pkt = ipv6_udp(dgram, sport, dport) if ipv == 6 else ipv4_udp(dgram, sport, dport)
        records.append((pkt, snap))
        expect[len(records)] = (name, verdict, experts)
    for name, dgram, sport, dport in others:
        records.append((ipv4_udp(dgram, sport, dport), None))
        expect[len(records)] = (name, "not mroce", set())
    # The port preference: with the heuristic off, port 5555 is mroce only once it is set.
    records.append((ipv4_udp(data(), 40000, 5555), None))
    pref_frame = len(records)
    expect[pref_frame] = ("port preference", None, set())
    # An ephemeral port another protocol registered (EtherNet/IP's 44818): Wireshark tries its
    # port tables before heuristics, so such a packet needs udp.try_heuristic_first, as the
    # README says and the loopback case does (the OS picks `mroce perf`'s path ports).
    records.append((ipv4_udp(data(), 44818, 52222), None))
    taken_frame = len(records)
    expect[taken_frame] = ("registered port", None, set())
    pcap = os.path.join(tmp, "crafted.pcap")
    write_pcap(pcap, records)

    truth = wire_decode(pcap)
    frames = tshark(pcap)
    check(len(frames) == len(records), "crafted: %d records, tshark shows %d" %
          (len(records), len(frames)))
    for n, (name, verdict, experts) in sorted(expect.items()):
        where = "crafted %r" % name
        layers = frames.get(n, {})
        check(not lua_trouble(layers), "%s: %s" % (where, lua_trouble(layers)))
        packets, shown_experts = dissected(layers)
        if verdict == "not mroce":
            check(packets is None, where + ": taken by the mroce heuristic")
            continue
        if n in (pref_frame, taken_frame):
            continue  # checked below with other preferences
        if not check(packets is not None, where + ": not decoded as mroce"):
            continue
        shown = {e[len("mroce.expert."):] for e in shown_experts if e.startswith("mroce.")}
        check(shown == experts, "%s: expert infos %s, expected %s" %
              (where, sorted(shown), sorted(experts)))
        verdicts = [p.get("mroce.drop_reason", [None])[0] for p in packets]
        check(verdicts == [verdict] * len(packets), "%s: verdicts %s, expected %s" %
              (where, verdicts, verdict))
        pieces = name.count("+") + 1  # an aggregate's name lists its packets
        check(len(packets) == pieces, "%s: %d packets, expected %d" %
              (where, len(packets), pieces))
        if n in truth:
            check([t["error"] for t in truth[n]] == [verdict] * pieces,
                  "%s: wire/ says %s, the test expects %s" %
                  (where, [t["error"] for t in truth[n]], verdict))
            if len(truth[n]) == len(packets):
                for fields, t in zip(packets, truth[n]):
                    compare(where, fields, t)
        else:
            check("by the snap length" in name, where + ": wire/ did not decode it")

    # [CONN-32]: byte 3 of a HELLO (`hello_seq`) and of a HELLO_ACK (`hello_echo`), shown
    # by name and, when not 0, in the Info column; the other type's name is absent.
    cols = tshark_fields(pcap, ["_ws.col.Info", "mroce.hello.seq", "mroce.hello.echo"])
    for case, (field, value, word) in HELLO_NUMBERS.items():
        where = "crafted %r" % case
        ns = [n for n, (name, _, _) in expect.items() if name == case]
        if not check(len(ns) == 1, "%s: %d such cases" % (where, len(ns))):
            continue
        packets, _ = dissected(frames.get(ns[0], {}))
        if not check(packets is not None and len(packets) == 1, where + ": not one mroce packet"):
            continue
        other = "mroce.hello.echo" if field == "mroce.hello.seq" else "mroce.hello.seq"
        check(packets[0].get(field) == [str(value)] and other not in packets[0],
              "%s: %s is %s and %s %s, expected %s alone" %
              (where, field, packets[0].get(field), other, packets[0].get(other), value))
        info, seq, echo = cols.get(ns[0], ["", "", ""])
        check((seq, echo) == ((str(value), "") if field == "mroce.hello.seq" else ("", str(value))),
              "%s: -T fields shows seq %r, echo %r, expected %s %d" % (where, seq, echo, field, value))
        words = info.split()
        if word:
            check(word in words, "%s: Info %r does not show %s" % (where, info, word))
        else:
            check(not any(w.startswith(("seq=", "echo=")) for w in words),
                  "%s: Info %r shows a number for byte 3 = 0" % (where, info))

    # [CC-20] [CONN-31]: `hello_flags`, each bit defined for the type by name and, when set,
    # in the Info column; a HELLO_ACK has no SENDING.
    names = ["_ws.col.Info", "mroce.hello.flags.sending", "mroce.hello.flags.dropped"]
    cols = tshark_fields(pcap, names)
    for case, (sending, dropped) in HELLO_FLAGS.items():
        where = "crafted %r" % case
        ns = [n for n, (name, _, _) in expect.items() if name == case]
        if not check(len(ns) == 1, "%s: %d such cases" % (where, len(ns))):
            continue
        info, shown_sending, shown_dropped = cols.get(ns[0], ["", "", ""])
        for field, shown, want in ((names[1], shown_sending, sending),
                                   (names[2], shown_dropped, dropped)):
            check(shown == "" if want is None else same_value(field, shown, want),
                  "%s: -T fields shows %s %r, expected %s" %
                  (where, field, shown, "none" if want is None else want))
        words = info.split()
        for word, want in (("SENDING", bool(sending)), ("DROPPED", dropped)):
            check((word in words) == want, "%s: Info %r %s %s" %
                  (where, info, "does not show" if want else "shows", word))

    # The heuristic can be turned off by name, and the port preference moves the port.
    off = tshark(pcap, ["--disable-heuristic", "mroce_udp"])
    check("mroce" not in off[pref_frame], "port preference: port 5555 is mroce by default")
    heur = [n for n, (name, _, _) in expect.items() if name.startswith("heuristic data")]
    check(all("mroce" not in off[n] for n in heur),
          "--disable-heuristic mroce_udp: ephemeral-port packets still decoded")
    default = [n for n, (name, _, _) in expect.items() if name == "data write"]
    check(all("mroce" in off[n] for n in default),
          "--disable-heuristic mroce_udp: the default port 4797 no longer decoded")
    moved = tshark(pcap, ["--disable-heuristic", "mroce_udp", "-o", "mroce.udp_port:5555"])
    packets, _ = dissected(moved[pref_frame])
    check(packets is not None and compare("port preference", packets[0], truth[pref_frame][0]),
          "-o mroce.udp_port:5555: the packet on 5555 is not decoded as mroce")
    check(all("mroce" not in moved[n] for n in default),
          "-o mroce.udp_port:5555: 4797 is still decoded without the heuristic")
    check("mroce" not in frames[taken_frame],
          "registered port: mroce without udp.try_heuristic_first (is 44818 still EtherNet/IP's?)")
    first = tshark(pcap, HEURISTIC_FIRST)
    packets, _ = dissected(first[taken_frame])
    check(packets is not None and compare("registered port", packets[0], truth[taken_frame][0]),
          "-o udp.try_heuristic_first:TRUE: a packet from port 44818 is not decoded as mroce")
    report("crafted (%d packets, %d not mroce)" % (len(cases), len(others)))


def case_corpus(tmp):
    if not ARGS.corpus:
        raise AssertionError("the corpus case needs --corpus DIR")
    names, records = [], []
    for target in ("decode_data", "decode_ack", "decode_control"):
        folder = os.path.join(ARGS.corpus, target)
        for f in sorted(os.listdir(folder)):
            dgram = open(os.path.join(folder, f), "rb").read()
            # Wireshark's UDP dissector hands an empty payload to no dissector; 65507 bytes
            # is the largest UDP payload over IPv4.
            if 0 < len(dgram) <= 65507:
                names.append("%s/%s" % (target, f))
                records.append((ipv4_udp(dgram, 50000, 4797), None))
    check(len(records) >= 50, "corpus: only %d inputs in %s" % (len(records), ARGS.corpus))
    pcap = os.path.join(tmp, "corpus.pcap")
    write_pcap(pcap, records)
    truth = wire_decode(pcap)
    frames = tshark(pcap)
    verdicts = collections.Counter()
    for n, name in enumerate(names, start=1):
        where = "corpus " + name
        layers = frames.get(n, {})
        check(not lua_trouble(layers), "%s: %s" % (where, lua_trouble(layers)))
        packets, _ = dissected(layers)
        if not check(packets is not None and n in truth, where + ": not decoded"):
            continue
        if check(len(packets) == len(truth[n]), "%s: %d packets in tshark, %d in wire/" %
                 (where, len(packets), len(truth[n]))):
            for fields, t in zip(packets, truth[n]):
                compare(where, fields, t)
                verdicts[t["error"] or "valid"] += 1
    # The corpora hold valid packets and every kind of drop; a shrunken corpus would not.
    check(all(verdicts[v] > 0 for v in ("valid", "truncated", "bad_type", "bad_length")),
          "corpus: verdicts %s" % dict(verdicts))
    report("corpus (%d inputs: %s)" % (len(records), dict(verdicts)))


def compare_datagrams(name, tmp, datagrams):
    """Writes datagrams to a capture on port 4797 and checks that tshark shows each without
    a Lua error and as wire/ decodes it; returns the Counter of verdicts."""
    pcap = os.path.join(tmp, name + ".pcap")
    write_pcap(pcap, [(ipv4_udp(d, 50000, 4797), None) for d in datagrams])
    truth = wire_decode(pcap)
    frames = tshark(pcap)
    verdicts = collections.Counter()
    for n, d in enumerate(datagrams, start=1):
        where = "%s %d (%s)" % (name, n, d[:24].hex())
        layers = frames.get(n, {})
        check(not lua_trouble(layers), "%s: %s" % (where, lua_trouble(layers)))
        packets, _ = dissected(layers)
        if not check(packets is not None and n in truth, where + ": not decoded"):
            continue
        if check(len(packets) == len(truth[n]), "%s: %d packets in tshark, %d in wire/" %
                 (where, len(packets), len(truth[n]))):
            for fields, t in zip(packets, truth[n]):
                compare(where, fields, t)
                verdicts[t["error"] or "valid"] += 1
    return verdicts


def mutate(rng, d):
    """One random change of a datagram, of the kinds that reach each decoder check."""
    kind = rng.randrange(5)
    b = bytearray(d)
    if kind == 0:  # a byte anywhere (the header most often)
        i = rng.randrange(min(len(b), 96)) if rng.randrange(4) else rng.randrange(len(b))
        b[i] = rng.randrange(256)
    elif kind == 1:  # cut
        b = b[:rng.randrange(1, len(b))] if len(b) > 1 else b
    elif kind == 2:  # bytes appended
        b += bytes(rng.randrange(256) for _ in range(rng.choice((1, 7, 8, 16, 72))))
    elif kind == 3 and len(b) >= 20 and b[1] == 2 and rng.randrange(4) == 0:
        b[19] ^= 0x04  # ACK flag SHORT ([ACK-21]): the other form's offsets and lengths
    elif kind == 3 and len(b) >= 20 and b[1] == 2 and len(b) >= (48 if b[19] & 0x04 else 80):
        # ACK stream_count, where its form ([ACK-21]) puts it
        at = 44 if b[19] & 0x04 else 76
        b[at:at + 2] = rng.choice((0, 1, 2, 31, 32, 33, 255, 65535)).to_bytes(2, "big")
    elif kind == 3 and len(b) >= 20 and b[1] == 1 and rng.randrange(4) == 0:
        b[17] ^= 0x20  # DATA flag COMPACT ([DATA-9]): the other form's offsets and lengths
    elif kind == 3 and len(b) >= 64 and b[1] == 1:  # DATA payload_len, offset, msg_len
        at = rng.choice((22, 40, 44) if b[17] & 0x20 else (22, 44, 48))  # [DATA-9]
        size = 2 if at == 22 else 4
        b[at:at + size] = rng.randrange(1 << (8 * size)).to_bytes(size, "big")
    else:  # a small count of flips
        for _ in range(rng.randrange(1, 4)):
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    return bytes(b)


def case_mutate(tmp):
    seed = int(os.environ.get("MROCE_SEED", "18"))
    print("mutate: seed %d (MROCE_SEED=%d replays it)" % (seed, seed), flush=True)
    rng = random.Random(seed)
    bases = [c[1] for c in crafted_cases() if c[2] is None and len(c[1]) >= 16]
    if ARGS.corpus:
        for target in ("decode_data", "decode_ack", "decode_control"):
            folder = os.path.join(ARGS.corpus, target)
            bases += [open(os.path.join(folder, f), "rb").read()
                      for f in sorted(os.listdir(folder)) if f.startswith("seed-valid")]
    datagrams = []
    while len(datagrams) < 1500:
        d = mutate(rng, rng.choice(bases))
        if rng.randrange(3) == 0:
            d = mutate(rng, d)
        if 0 < len(d) <= 65507:
            datagrams.append(d)
    verdicts = compare_datagrams("mutate", tmp, datagrams)
    check(all(verdicts[v] > 0 for v in ("valid", "truncated", "bad_version", "bad_type",
                                        "bad_length")),
          "mutate: some verdict never came up: %s (seed %d)" % (dict(verdicts), seed))
    if FAILURES:
        print("mutate: seed %d" % seed)
    report("mutate (%d datagrams, seed %d: %s)" % (len(datagrams), seed, dict(verdicts)))


# ---- loopback ------------------------------------------------------------------------------

def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def perf_pair(addr, args):
    """Runs `mroce perf` server and client (to addr) to completion; raises on failure."""
    port = free_port()
    server = subprocess.Popen([ARGS.mroce, "perf", "-p", str(port)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.2)
        client = subprocess.run([ARGS.mroce, "perf", addr, "-p", str(port), *args],
                                capture_output=True, text=True, timeout=60)
        check(client.returncode == 0, "perf %s: exit %d: %s" % (" ".join(args),
                                                               client.returncode,
                                                               client.stderr.strip()))
        server.wait(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def conform_pair(addr):
    """The conformance suite's coalesce.target_pair against `mroce conform-agent
    --ack-with-reverse-data` on addr: the target sends a READ response and the ACK of its
    request in one coalesced datagram ([WIRE-10])."""
    agent = subprocess.Popen([ARGS.mroce, "conform-agent", "--listen", "127.0.0.1:0", "--udp",
                              addr + ":0", "--ack-with-reverse-data"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([agent.stdout], [], [], 10)
        m = re.match(r"conform-agent: control (\S+) udp", agent.stdout.readline() if ready else "")
        if check(m is not None, "loopback: the conform agent did not start"):
            run = subprocess.run([ARGS.mroce, "conform", m.group(1), "--test", "coalesce.target_pair"],
                                 capture_output=True, text=True, timeout=60)
            check(run.returncode == 0 and re.search(r"coalesce.target_pair\s.*PASS", run.stdout),
                  "loopback: coalesce.target_pair did not pass: %s" % run.stdout.strip()[-300:])
    finally:
        agent.terminate()
        try:
            agent.wait(timeout=5)
        except subprocess.TimeoutExpired:
            agent.kill()
            agent.wait()


def case_loopback(tmp):
    # A loopback address of its own (all of 127/8 is local on Linux), so the capture filter
    # keeps out whatever else runs on lo at the same time.
    rng = random.Random()
    addr = "127.%d.%d.%d" % (rng.randrange(1, 255), rng.randrange(1, 255), rng.randrange(1, 255))
    pcap = os.path.join(tmp, "lo.pcap")
    cap = subprocess.Popen(["tshark", "-n", "-i", "lo", "-f", "udp and host " + addr, "-F",
                            "pcap", "-w", pcap, "-q"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
    try:
        started, lines = False, []
        deadline = time.time() + 20
        while time.time() < deadline:
            line = cap.stderr.readline()
            if not line:
                break
            lines.append(line.strip())
            if line.startswith("Capturing on"):
                started = True
                break
        if not started:
            raise Skip("cannot capture on lo with tshark: %s" % " / ".join(lines[-3:]))
        # With GSO (the default) lo captures a send before segmentation: records that hold
        # several datagrams, which the dissector shows one by one. Without, one per record.
        perf_pair(addr, ["-n", "30", "-s", "65536", "--no-offload"])
        perf_pair(addr, ["-n", "30", "-s", "65536"])
        perf_pair(addr, ["--verb", "atomic", "-n", "20"])
        perf_pair(addr, ["--verb", "read", "-n", "20", "-s", "1024", "--no-offload"])
        conform_pair(addr)
        time.sleep(0.5)  # let the last packets reach the capture
    finally:
        cap.send_signal(signal.SIGINT)
        try:
            cap.wait(timeout=20)
        except subprocess.TimeoutExpired:
            cap.kill()
            cap.wait()
    failures_before, finished = len(FAILURES), False
    try:
        check_loopback_capture(pcap, addr)
        finished = True
    finally:
        if len(FAILURES) > failures_before or not finished:
            # The capture of a real run cannot be replayed: keep it for whoever reads the log.
            kept = os.path.abspath("wireshark_loopback-failed.pcap")
            shutil.copyfile(pcap, kept)
            print("the capture is kept in", kept, flush=True)


def check_loopback_capture(pcap, addr):
    truth = wire_decode(pcap)
    frames = tshark(pcap, HEURISTIC_FIRST)
    check(len(truth) > 0 and len(truth) == len(frames),
          "loopback: wire/ decoded %d datagrams, tshark shows %d" % (len(truth), len(frames)))
    # [VER-1]: a client that starts before its server sends version-1 HELLO probes, which the
    # server refuses with a version-1 CLOSE; both are version 1 on purpose, not breakage.
    legacy = [n for n, ts in truth.items() if all(t.get("legacy_v1") for t in ts)]
    for n in legacy:
        check(all(t["error"] == "bad_version" for t in truth[n]),
              "loopback frame %d: a version-1 datagram wire/ did not refuse" % n)
        del truth[n]
        frames.pop(n, None)
    bad = [n for n, ts in truth.items() if any(t["error"] for t in ts)]
    check(not bad, "loopback: wire/ rejects frames %s" % bad[:10])
    seen = compare_capture("loopback", pcap, truth, frames,
                           {"retransmission", "note", "aggregate"})
    ops = collections.Counter(t["fields"].get("mroce.data.opcode")
                              for ts in truth.values() for t in ts)
    check(seen[4] >= 4 and seen[5] >= 4 and seen[7] >= 4,
          "loopback: expected a HELLO, HELLO_ACK and CLOSE per run: %s" % dict(seen))
    check(seen["coalesced"] >= 1, "loopback: no coalesced datagram (an ACK and a DATA) captured")
    check(seen["short"] >= 1, "loopback: no SHORT ACK captured ([ACK-21], the engine's default)")
    check(ops[3] >= 60 and ops[7] >= 20 and ops[9] >= 20 and ops[5] >= 20 and ops[6] >= 20,
          "loopback: missing WRITE, FETCH_ADD, ATOMIC_RESPONSE, READ_REQUEST or READ_RESPONSE "
          "packets: opcodes %s" % dict(ops))
    report("loopback on %s (%d frames: %s)" % (addr, len(truth), dict(seen)))


def main():
    global ARGS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mroce", required=True)
    ap.add_argument("--decode", required=True)
    ap.add_argument("--lua", required=True)
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--corpus", help="fuzz/corpus, for the corpus case")
    ap.add_argument("cases", nargs="*", default=["sim", "rocev2", "crafted"])
    ARGS = ap.parse_args()
    try:
        v = subprocess.run(["tshark", "--version"], capture_output=True, text=True)
    except FileNotFoundError:
        print("SKIP: tshark is not installed (scripts/install-deps.sh installs it)")
        return SKIP
    print(v.stdout.splitlines()[0], flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            captures = None
            for case in ARGS.cases:
                if case in ("sim", "rocev2") and captures is None:
                    captures = run_sim(tmp)
                if case == "sim":
                    case_sim(captures)
                elif case == "rocev2":
                    case_rocev2(captures)
                elif case == "crafted":
                    case_crafted(tmp)
                elif case == "corpus":
                    case_corpus(tmp)
                elif case == "mutate":
                    case_mutate(tmp)
                elif case == "loopback":
                    case_loopback(tmp)
                else:
                    raise AssertionError("unknown case " + case)
        except Skip as s:
            print("SKIP:", s)
            return SKIP
        except AssertionError as e:
            check(False, str(e))
    print("%d failed" % len(FAILURES) if FAILURES else "all passed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
