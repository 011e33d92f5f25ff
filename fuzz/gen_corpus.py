#!/usr/bin/env python3
"""fuzz/gen_corpus.py - write the seed corpora in fuzz/corpus/<target>/.

Encodes small valid and invalid packets straight from the byte tables of docs/spec.md §3,
independently of the C++ encoder, so the seeds also check that codec and spec agree (the
file name says what each one is: the replay driver checks that `seed-valid-*` files
decode and `seed-bad-*` files do not; the endpoint target's seeds are datagram sequences,
named by neither). Deterministic: rerunning rewrites the same files. Files that libFuzzer added (named by their SHA-1) are
left alone.

Usage: python3 fuzz/gen_corpus.py [--check]
  --check  verify the committed seed files match what this script would write.
"""

import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")

# §3.1 [WIRE-2]
DATA, ACK, NACK, HELLO, HELLO_ACK, PROBE, CLOSE, RETRY = range(1, 9)
# §3.2 [DATA-1], [DATA-2]
SEND, SEND_IMM, WRITE, WRITE_IMM, READ_REQUEST, READ_RESPONSE = 1, 2, 3, 4, 5, 6
LAST, RETX, ACK_NOW, COMPACT = 0x01, 0x02, 0x04, 0x20

CONN, TOKEN = 0x0A0B0C0D, 0x1112131415161718


def common(ptype, conn=CONN, token=TOKEN, version=2, reserved=0):
    """§3.1: version u8 | type u8 | reserved u16 | dst_conn_id u32 | dst_token u64."""
    return struct.pack(">BBHIQ", version, ptype, reserved, conn, token)


def data(opcode=SEND, flags=LAST, payload=b"abcd", payload_len=None, msg_len=None,
         offset=0, path_id=1, path_gen=0, psn=100, psn_floor=90, stream_id=7, msg_seq=3,
         recv_seq=2, timestamp=12345, rkey=0, remote_addr=0, immediate=0, reserved21=0,
         **kw):
    """§3.2: 72-byte DATA header, then the payload."""
    if payload_len is None:
        payload_len = len(payload)
    if msg_len is None:
        msg_len = offset + len(payload)
    body = struct.pack(">BBHBBH9IQI", opcode, flags, path_id, path_gen, reserved21,
                       payload_len, psn, psn_floor, stream_id, msg_seq, recv_seq, msg_len,
                       offset, timestamp, rkey, remote_addr, immediate)
    return common(DATA, **kw) + body + payload


def compact_data(opcode=WRITE, flags=LAST | COMPACT, rkey=0xCAFEBABE, remote_addr=0x7F0012345000,
                 **kw):
    """[DATA-9]: the 64-byte COMPACT header, then the payload: data()'s datagram without
    recv_seq (bytes 40-43) and immediate (68-71)."""
    full = data(opcode=opcode, flags=flags, rkey=rkey, remote_addr=remote_addr, recv_seq=0,
                immediate=0, **kw)
    return full[:40] + full[44:68] + full[72:]


def sack_bits(*bits):
    """§3.3 [ACK-2]: bit i is byte i // 8, mask 0x80 >> (i % 8)."""
    b = bytearray(32)
    for i in bits:
        b[i // 8] |= 0x80 >> (i % 8)
    return bytes(b)


def ack(streams=(), count=None, path_id=1, path_gen=0, flags=0, cum_psn=100, sack=None,
        ce=0, ts_echo=12345, delay=500, rate=0, probe_psn=0, reserved78=0, **kw):
    """§3.3: 80-byte fixed part, then 8 bytes per stream entry."""
    if count is None:
        count = len(streams)
    if sack is None:
        sack = sack_bits()
    fixed = struct.pack(">HBBI", path_id, path_gen, flags, cum_psn) + sack + struct.pack(
        ">IIIIIHH", ce, ts_echo, delay, rate, probe_psn, count, reserved78)
    entries = b"".join(struct.pack(">II", s, d) for s, d in streams)
    return common(ACK, **kw) + fixed + entries


# §3.3 [ACK-8]
PROBE_REPLY, FOLLOWED, SHORT = 0x01, 0x02, 0x04


def short_ack(streams=(), count=None, path_id=1, path_gen=0, flags=0, cum_psn=100, ce=0,
              ts_echo=12345, delay=500, rate=0, probe_psn=0, return_path=0, **kw):
    """§3.3 [ACK-21]: the SHORT form, `sack` left out and every later field 32 bytes up:
    48-byte fixed part (ecn_ce_count at 24 ... return_path at 46), then 8 bytes per stream
    entry. SHORT is always set in flags."""
    if count is None:
        count = len(streams)
    fixed = struct.pack(">HBBI", path_id, path_gen, flags | SHORT, cum_psn) + struct.pack(
        ">IIIIIHH", ce, ts_echo, delay, rate, probe_psn, count, return_path)
    entries = b"".join(struct.pack(">II", s, d) for s, d in streams)
    return common(ACK, **kw) + fixed + entries


def framed(*datagrams):
    """fuzz/endpoint.cc's input: each datagram behind its u16 length. A datagram whose first
    byte is odd is addressed to the real connection (bytes 4..15 replaced, version set to 2),
    and so is the DATA after a FOLLOWED ACK when its own first byte is odd."""
    return b"".join(struct.pack(">H", len(d)) + d for d in datagrams)


def nack(reason=1, path_id=1, path_gen=0, psn=100, stream_id=7, msg_seq=3, detail=0, **kw):
    """§3.4: 40 bytes."""
    return common(NACK, **kw) + struct.pack(">BBHB3sIIII", reason, 0, path_id, path_gen,
                                            b"\0\0\0", psn, stream_id, msg_seq, detail)


def hello(ptype=HELLO, src_conn=42, src_token=0xA1A2A3A4A5A6A7A8, isn=1000, msg_isn=1,
          port=4797, num_paths=8, max_payload=4096, caps=0, cookie=bytes(16), **kw):
    """§3.5: 64 bytes; a HELLO carries dst_conn_id 0 and dst_token 0 [CONN-2]. Version 1's
    HELLO is the first 48 bytes (pass version=1, cookie=b"")."""
    kw.setdefault("conn", 0 if ptype == HELLO else 42)
    kw.setdefault("token", 0 if ptype == HELLO else 0xA1A2A3A4A5A6A7A8)
    return common(ptype, **kw) + struct.pack(">IQIIHHII", src_conn, src_token, isn, msg_isn,
                                             port, num_paths, max_payload, caps) + cookie


def retry(cookie=bytes(range(1, 17)), **kw):
    """§3.8: 32 bytes."""
    return common(RETRY, **kw) + cookie


def probe(path_id=1, path_gen=0, next_psn=101, psn_floor=90, timestamp=12345, **kw):
    """§3.6: 32 bytes."""
    return common(PROBE, **kw) + struct.pack(">HBBIII", path_id, path_gen, 0, next_psn,
                                             psn_floor, timestamp)


def close(reason=0, **kw):
    """§3.7: 24 bytes."""
    return common(CLOSE, **kw) + struct.pack(">II", reason, 0)


def seeds():
    max_msg = 0xFFFFFFFF
    yield "decode_data", {
        "valid-send-single": data(),
        "valid-send-imm": data(opcode=SEND_IMM, immediate=0xDEADBEEF),
        "valid-write-first": data(opcode=WRITE, flags=0, payload=bytes(range(64)), msg_len=4096,
                                  rkey=0xCAFEBABE, remote_addr=0x7F0012345000),
        "valid-write-imm-last": data(opcode=WRITE_IMM, flags=LAST | RETX, payload=b"tail",
                                     offset=4096, rkey=1, remote_addr=0x1000, immediate=9),
        "valid-zero-length": data(payload=b"", flags=LAST | ACK_NOW),
        "valid-read-request-reserved": data(opcode=READ_REQUEST),
        "valid-unknown-flags": data(flags=LAST | 0xD8),  # all but COMPACT ([DATA-9])
        "valid-compact-write-middle": compact_data(flags=COMPACT, payload=bytes(range(64)),
                                                   offset=4096, msg_len=3 * 4096),
        "valid-compact-write-last": compact_data(),
        "valid-compact-read-response": compact_data(opcode=READ_RESPONSE, rkey=0,
                                                    remote_addr=3, payload=b"answer"),
        "valid-compact-zero-length": compact_data(payload=b"", flags=LAST | COMPACT | ACK_NOW),
        "bad-compact-send": compact_data(opcode=SEND, rkey=0, remote_addr=0),
        "bad-compact-write-imm": compact_data(opcode=WRITE_IMM),
        "bad-compact-truncated": compact_data()[:63],
        "bad-compact-payload-short": compact_data(payload_len=5),
        "bad-compact-last-missing": compact_data(flags=COMPACT),
        "valid-reserved-nonzero": data(reserved21=0xFF, reserved=0xFFFF),
        "valid-psn-wrap": data(psn=0xFFFFFFFF, psn_floor=0xFFFFFFF0, msg_seq=0xFFFFFFFF),
        "valid-max-message-end": data(flags=LAST, payload=b"xy", offset=max_msg - 2,
                                      msg_len=max_msg),
        "bad-empty": b"",
        "bad-truncated-header": data()[:15],
        "bad-truncated-fixed": data()[:71],
        "bad-version": data(version=1),
        "bad-type-ack": common(ACK) + data()[16:],
        "bad-type-unknown": common(0xFF) + data()[16:],
        "bad-opcode-zero": data(opcode=0),
        "bad-opcode-0a": data(opcode=0x0A),
        "bad-payload-short": data(payload_len=5),
        "bad-payload-long": data(payload_len=3, msg_len=4),
        "bad-beyond-message": data(msg_len=3),
        "bad-offset-wraps": data(flags=0, payload=b"xy", offset=max_msg, msg_len=max_msg),
        "bad-last-missing": data(flags=0),
        "bad-last-early": data(flags=LAST, msg_len=100),
        "bad-empty-payload": data(payload=b"", flags=LAST, offset=10, msg_len=10),
    }
    full = [(i, 2 * i + 1) for i in range(32)]
    yield "decode_ack", {
        "valid-no-streams": ack(),
        "valid-one-stream": ack(streams=[(7, 4)]),
        "valid-two-streams-sack": ack(streams=[(7, 4), (8, 0x80000000)],
                                      sack=sack_bits(1, 8, 255), ce=3, rate=100000),
        "valid-32-streams": ack(streams=full),
        "valid-probe-reply": ack(flags=0x01, probe_psn=101),
        "valid-cum-wrap": ack(cum_psn=0xFFFFFFFF, sack=sack_bits(0, 7, 128)),
        "valid-sack-full": ack(sack=b"\xff" * 32),
        "valid-reserved-nonzero": ack(reserved78=0xFFFF, reserved=0xFFFF, streams=[(1, 1)]),
        "bad-empty": b"",
        "bad-truncated-header": ack()[:10],
        "bad-truncated-fixed": ack()[:79],
        "bad-version": ack(version=0),
        "bad-type-data": common(DATA) + ack()[16:],
        "bad-count-33": ack(streams=full + [(99, 99)]),
        "bad-count-ffff": ack(count=0xFFFF),
        "bad-count-short": ack(streams=[(7, 4)], count=2),
        "bad-count-long": ack(streams=[(7, 4), (8, 5)], count=1),
        "bad-trailing": ack(streams=[(7, 4)]) + b"\0",
        "bad-partial-entry": ack(streams=[(7, 4)])[:-3],
        # [ACK-21]: the SHORT form (decode_ack reads it as a connection that negotiated
        # SHORT_ACK does).
        "valid-short-no-streams": short_ack(),
        "valid-short-one-stream": short_ack(streams=[(7, 4)], ce=3, return_path=2),
        "valid-short-32-streams": short_ack(streams=full, rate=100000, cum_psn=0xFFFFFFFF),
        "valid-short-probe-reply": short_ack(flags=PROBE_REPLY, probe_psn=101,
                                             streams=[(7, 4), (8, 0x80000000)], return_path=5),
        "valid-short-followed-ack": short_ack(flags=FOLLOWED, streams=[(7, 4)]),
        "valid-short-reserved-nonzero": short_ack(reserved=0xFFFF, flags=0xF8, streams=[(1, 1)]),
        # A SHORT ACK with FOLLOWED and the DATA after it ([WIRE-10]): as one ACK the datagram
        # is longer than its count says; the fuzz target also reads it as a coalesced pair.
        "bad-short-followed-pair": short_ack(flags=FOLLOWED, streams=[(7, 4)]) + data(),
        "bad-short-truncated-flags": short_ack()[:19],
        "bad-short-truncated-mid": short_ack(streams=[(7, 4)])[:30],
        "bad-short-truncated-fixed": short_ack()[:47],
        "bad-short-count-short": short_ack(streams=[(7, 4)], count=2),
        "bad-short-count-long": short_ack(streams=[(7, 4), (8, 5)], count=1),
        "bad-short-count-33": short_ack(streams=full + [(99, 99)]),
        "bad-short-partial-entry": short_ack(streams=[(7, 4)])[:-3],
        # The full layout with SHORT set: read as SHORT, its count (bytes 44..45, inside what
        # was the bitmap) is 0 and 32 bytes are left over.
        "bad-short-flag-on-full-layout": ack(flags=SHORT),
    }
    yield "decode_control", {
        "valid-nack-not-ready": nack(reason=1, detail=100),
        "valid-nack-remote-access": nack(reason=2),
        "valid-nack-invalid-request": nack(reason=3),
        "valid-nack-out-of-window": nack(reason=4),
        "valid-nack-no-resources": nack(reason=5),
        "valid-hello": hello(),
        "valid-hello-ack": hello(ptype=HELLO_ACK, num_paths=256, max_payload=9000),
        "valid-hello-min": hello(num_paths=1, max_payload=256, caps=0xFFFFFFFF),
        "valid-hello-cookie": hello(cookie=bytes(range(0xC0, 0xD0))),
        "valid-retry": retry(),
        "valid-probe": probe(),
        "valid-probe-wrap": probe(path_gen=255, next_psn=0, psn_floor=0xFFFFFFF0),
        "valid-close": close(),
        "valid-close-unknown-reason": close(reason=0xFFFFFFFF),
        "bad-empty": b"",
        "bad-truncated-header": nack()[:15],
        "bad-nack-header-only": common(NACK),
        "bad-version": close(version=3),
        "bad-version-hello-v1": hello(version=1, cookie=b""),
        "bad-type-unknown": common(9),
        "bad-hello-v1-size": hello(cookie=b""),
        "bad-retry-trailing": retry() + b"\0",
        "bad-nack-reason-0": nack(reason=0),
        "bad-nack-reason-6": nack(reason=6),
        "bad-nack-trailing": nack() + b"\0",
        "bad-nack-truncated": nack()[:39],
        "bad-hello-paths-0": hello(num_paths=0),
        "bad-hello-paths-257": hello(num_paths=257),
        "bad-hello-payload-255": hello(max_payload=255),
        "bad-hello-payload-9001": hello(max_payload=9001),
        "bad-probe-trailing": probe() + b"\0" * 4,
        "bad-close-truncated": close()[:23],
    }
    # Datagrams into the established endpoint of fuzz/endpoint.cc (whose two sides negotiate
    # SHORT_ACK and COALESCE by default). Sequences, not single packets: their names say
    # neither valid nor bad. Version byte 3 (odd): addressed to the real connection.
    b_isn = 0xFFFFFFF0  # the fixture's forced_isn: nothing of B's is acknowledged below it
    yield "endpoint", {
        "short-acks": framed(
            short_ack(version=3, cum_psn=b_isn - 1, streams=[(1, 0)]),
            short_ack(version=3, flags=PROBE_REPLY, cum_psn=b_isn - 1, probe_psn=b_isn),
            short_ack(version=3, path_id=3, cum_psn=b_isn - 1, streams=[(1, 1), (2, 1), (9, 9)]),
            ack(version=3, flags=SHORT, cum_psn=b_isn - 1),
            short_ack(version=3, cum_psn=b_isn - 1, count=3, streams=[(1, 0)]),
            short_ack(version=3, cum_psn=b_isn - 1)[:40]),
        "short-followed-pair": framed(
            short_ack(version=3, flags=FOLLOWED, cum_psn=b_isn - 1, streams=[(1, 0)])
            + data(version=3, path_id=1, psn=0xFFFFFFF4, psn_floor=0xFFFFFFF0, stream_id=1,
                   flags=LAST | ACK_NOW),
            short_ack(version=3, flags=FOLLOWED | PROBE_REPLY, cum_psn=b_isn - 1, probe_psn=b_isn)
            + data(version=3, path_id=2, psn=0xFFFFFFF4, psn_floor=0xFFFFFFF0, stream_id=2,
                   opcode=SEND_IMM, immediate=7, flags=LAST | ACK_NOW),
            short_ack(version=3, flags=FOLLOWED, cum_psn=b_isn - 1)),
    }


def main():
    check = "--check" in sys.argv[1:]
    stale = []
    for target, files in seeds():
        d = os.path.join(CORPUS, target)
        if not check:
            os.makedirs(d, exist_ok=True)
        for name, payload in sorted(files.items()):
            path = os.path.join(d, "seed-" + name)
            if check:
                try:
                    with open(path, "rb") as f:
                        if f.read() != payload:
                            stale.append(path)
                except FileNotFoundError:
                    stale.append(path)
            else:
                with open(path, "wb") as f:
                    f.write(payload)
        if not check:
            print(f"{target}: {len(files)} seeds")
    if stale:
        print("stale or missing seeds (rerun fuzz/gen_corpus.py):", *stale, sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
