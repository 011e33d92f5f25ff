#!/usr/bin/env python3
"""fuzz/gen_connection_seeds.py - write the hand-made seeds of fuzz/corpus/connection/.

Each seed is a scenario in the input language of fuzz/connection.cc:
  [config byte] [seed byte] [script length] [script] [fates]
(the seed byte's top bit turns INTEGRITY off, its bit 6 SHORT_ACK at B, [ACK-21]; bit 5
turns COMPACT_DATA on, and bit 4 off again at B, [DATA-9]).
The seeds cover every work request type from both sides on both streams, then differ in
what the network does (clean, lossy, mutating) and in the configuration. libFuzzer finds
the rest from here; the files it adds are named by their SHA-1.

Usage: python3 fuzz/gen_connection_seeds.py
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus", "connection")

SEND, SEND_IMM, WRITE, WRITE_IMM, READ, FETCH_ADD, CMP_SWAP = range(7)
# length codes (index into the length table of connection.cc)
L0, L1, L8, L100, L255, L256, L257, L511, L512, L513, L1000, L1024, L2048, L2049, L3000, L4096 = range(16)


def post(side, stream, op, length, extra=3, fence=False, inline=False, pieces=False):
    a = side | stream << 1 | op << 2 | (0x20 if fence else 0) | (0x40 if inline else 0)
    if inline:
        length |= 0x40
    if pieces:  # a two-piece scatter/gather list
        length |= 0x80
    return bytes([0, a, length, extra])


def recv(side, stream, count, length, pieces=False):
    return bytes([3, side | stream << 1 | (count - 1) << 2, length | (0x80 if pieces else 0)])


def run(steps):
    return bytes([4, steps - 1])


def dereg(side, read_src=False):
    return bytes([5, side | (2 if read_src else 0)])


def close(side):
    return bytes([6, side])


def wait(units):  # 20 us each
    return bytes([6, (units - 1) << 2 | 2])


def limits(side, stream, b):  # [STREAM-12]: bits 0-2 remote write/read/atomic, then depths
    return bytes([6, side | stream << 1 | 2 << 2, b])


def settle():
    return bytes([7])


def config(paths=4, b_payload=256, wrap=False, no_hint=False, fixed_cc=False, few_reads=False):
    c = {1: 0, 2: 1, 4: 2, 8: 3}[paths] << 3
    c |= {256: 0, 512: 1, 1024: 2}[b_payload] << 5
    c |= (1 if wrap else 0) | (2 if no_hint else 0) | (4 if fixed_cc else 0)
    c |= 0x80 if few_reads else 0
    return bytes([c])


def scenario(cfg, seed, script, fates=b""):
    assert len(script) < 256
    return cfg + bytes([seed, len(script)]) + script + fates


MIX = b"".join([
    post(0, 0, SEND, L1000), post(0, 0, WRITE, L2048), post(0, 0, READ, L513),
    post(0, 1, SEND_IMM, L100, inline=True), post(0, 1, WRITE_IMM, L257),
    post(0, 1, FETCH_ADD, L8), post(0, 0, CMP_SWAP, L8, extra=1),
    post(1, 0, SEND, L2048), post(1, 1, READ, L4096), post(1, 1, WRITE, L255),
    post(1, 0, FETCH_ADD, L8, fence=True), run(40),
    post(0, 0, SEND, L0), post(1, 1, SEND_IMM, L1), post(0, 1, READ, L0),
    settle(),
])

# Fates, one per datagram in order: 0 deliver, 4 drop, 5 duplicate (+delay byte),
# 6 delay (+u16), 7 mutate (+field choices), 0x80 CE mark.
LOSSY = bytes([0, 0, 0, 0, 4, 0, 0x85, 3, 0, 6, 0, 40, 0, 0, 4, 4, 0, 0x80, 0x18, 5, 9] * 12)


def mutation(field_bytes, keep_original=False):
    return bytes([7 | (8 if keep_original else 0)]) + bytes(field_bytes) + bytes([1])


# Mutations after the handshake: DATA fields (msg_seq, offset, rkey, remote_addr, stream id,
# msg_len), an ACK's stream entry, a NACK, a PROBE; each a few packets apart.
MUTATING = b"".join([bytes([0] * 6)] + [
    bytes([0, 0]) + mutation([1, f, v, 0, 1]) for f in range(19) for v in (0, 2, 6, 11, 13)
])


def seeds():
    yield "mix-clean", scenario(config(), 1, MIX)
    yield "mix-lossy", scenario(config(paths=8), 2, MIX, LOSSY)
    yield "mix-mutating", scenario(config(b_payload=512), 3, MIX, MUTATING)
    yield "wrap-fixed-one-path", scenario(config(paths=1, wrap=True, fixed_cc=True, no_hint=True), 4, MIX, LOSSY)
    yield "reads-deferred", scenario(config(few_reads=True), 5, b"".join([
        post(0, 0, READ, L1024), post(0, 0, READ, L2048), post(0, 0, FETCH_ADD, L8),
        post(1, 0, READ, L512), post(1, 0, CMP_SWAP, L8), post(0, 0, READ, L3000, fence=True),
        post(1, 1, READ, L100), settle()]), LOSSY)
    yield "deregister-mid-write", scenario(config(), 6, b"".join([
        post(0, 0, WRITE, L4096), post(0, 1, READ, L4096), run(6), dereg(1), dereg(1, read_src=True),
        post(0, 0, WRITE, L100), post(0, 1, FETCH_ADD, L8), settle()]), LOSSY)
    # The segments arrive spread out (jitter), and B deregisters the target after some of
    # them: the rest must be refused ([PLACE-25]); a regression changes the region.
    jitter = bytes([((i * 5) % 16) << 3 for i in range(64)])
    yield "deregister-mid-write-jitter", scenario(config(), 6, b"".join([
        post(0, 0, WRITE, L4096), run(5), dereg(1), settle()]), jitter)
    yield "close-mid-transfer", scenario(config(), 7, b"".join([
        post(0, 0, SEND, L2048), post(1, 1, WRITE, L3000), post(0, 1, READ, L1024), run(10),
        close(1), post(0, 0, SEND, L8), settle()]))
    yield "rnr-then-receive", scenario(config(paths=2), 8, b"".join([
        post(0, 0, SEND, L100), post(0, 0, SEND, L100), post(0, 0, SEND, L100), post(0, 0, SEND, L100),
        post(0, 0, SEND_IMM, L100), post(0, 0, WRITE_IMM, L1), wait(5), recv(1, 0, 2, L1024),
        settle()]))
    yield "destroy-stream", scenario(config(), 9, b"".join([
        post(0, 1, WRITE, L2048), post(1, 1, SEND, L512), run(8), bytes([6, 1 << 2 | 1 << 1 | 1]),
        post(0, 1, SEND, L8), settle()]))
    yield "limits-revoked", scenario(config(), 11, b"".join([
        limits(1, 0, 0x02), post(0, 0, WRITE, L1000), post(0, 0, READ, L512), post(0, 0, FETCH_ADD, L8),
        limits(0, 1, 0x3f), post(1, 1, READ, L3000), post(1, 1, READ, L100), post(1, 1, CMP_SWAP, L8),
        settle()]))
    # [ACK-21]: B does not announce SHORT_ACK (seed bit 6), so every ACK is in the full
    # form and a mutation that sets SHORT makes an ACK the receiver reads at full length.
    yield "mix-lossy-full-acks", scenario(config(paths=8), 2 | 0x40, MIX, LOSSY)
    yield "mix-mutating-full-acks", scenario(config(b_payload=512), 3 | 0x40, MIX, MUTATING)
    # [DATA-9]: COMPACT_DATA negotiated (seed bit 5), then announced by A alone (bit 4): a
    # mutation that sets COMPACT makes a DATA the receiver reads at full length.
    yield "mix-lossy-compact", scenario(config(paths=8), 4 | 0x20, MIX, LOSSY)
    yield "mix-mutating-compact-one-sided", scenario(config(b_payload=512), 5 | 0x30, MIX, MUTATING)
    yield "scatter-gather", scenario(config(paths=2), 10, b"".join([
        recv(1, 0, 4, L4096, pieces=True), recv(0, 1, 2, L1024, pieces=True),
        post(0, 0, SEND, L1000, pieces=True), post(0, 0, SEND_IMM, L100, inline=True, pieces=True),
        post(0, 0, WRITE, L3000, pieces=True), post(0, 0, READ, L2049, pieces=True),
        post(0, 0, FETCH_ADD, L8, pieces=True), post(1, 1, SEND, L513, pieces=True),
        post(1, 1, READ, L4096, pieces=True), settle()]), LOSSY)


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, payload in seeds():
        with open(os.path.join(OUT, "seed-" + name), "wb") as f:
            f.write(payload)
        print(f"seed-{name}: {len(payload)} bytes")


if __name__ == "__main__":
    main()
