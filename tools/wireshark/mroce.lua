-- tools/wireshark/mroce.lua — a Wireshark/tshark dissector for mroce, MetaRoCE over UDP,
-- wire version 2 (docs/spec.md §3; wire/ is the codec it mirrors, byte for byte).
--
--   tshark -X lua_script:tools/wireshark/mroce.lua -r capture.pcap
--   wireshark -X lua_script:tools/wireshark/mroce.lua capture.pcap
--
-- It decodes every packet type and field of §3, on UDP port 4797 (spec [UDP-1]; preference
-- mroce.udp_port) and, through a heuristic (`mroce_udp`), on any port, because endpoints
-- may receive on ports the operator chose or the OS picked. A packet that a version-2
-- receiver drops is flagged with an expert error and the filterable field
-- mroce.drop_reason, named as wire/ names the error (truncated, bad_version, bad_type,
-- bad_length), checked in the order of [WIRE-9] so that the verdict is the one a receiver
-- counts. Rules a well-formed packet can still break (reserved bytes that must be sent as
-- zero, [DATA-5], [DATA-7], [CONN-2], ...) are expert warnings. An ACK with FOLLOWED starts
-- a coalesced datagram ([WIRE-10]): its DATA is shown as a packet of its own (dissect_pair;
-- the flag decides, since a capture does not show whether COALESCE was negotiated). An ACK
-- with SHORT ([ACK-21]) leaves its empty SACK bitmap out and is read in the 48-byte form,
-- again by the flag (a capture does not show whether SHORT_ACK was negotiated either), as
-- wire::decode_ack reads it. A DATA with COMPACT ([DATA-9]) leaves out `recv_seq` and
-- `immediate` and is read in the 64-byte form, by the flag as well (COMPACT_DATA's
-- negotiation is not tracked either), as wire::decode_data reads it by default.
-- tools/wireshark/README.md
-- lists the fields; tests/wireshark/ checks them against wire/'s decoders.
--
-- Written for the Lua 5.2 of Wireshark 4.0 and the Lua 5.4 of 4.4 and later: no bitwise
-- operators and no bit32 library (5.4 has no bit32, 5.2 no operators); bits are tested
-- with arithmetic.

local proto = Proto("mroce", "MetaRoCE over UDP (mroce)")

local kVersion = 2
local kDefaultPort = 4797      -- spec [UDP-1], wire::kDefaultPort
local kCommonSize = 16         -- spec §3.1
local kSackBits = 256          -- spec [ACK-2]
local kAckShortFixed = 48      -- spec [ACK-21]: an ACK with SHORT, without its 32-byte `sack`
local kAckShort = 0x04         -- spec [ACK-8]: the ACK flag SHORT
local kDataCompactFixed = 64   -- spec [DATA-9]: a DATA with COMPACT, without recv_seq, immediate
local kDataCompact = 0x20      -- spec [DATA-2]: the DATA flag COMPACT
local kMaxAckStreams = 32      -- spec [ACK-5]
local kMaxPaths = 256          -- spec [CONN-3]
local kMinMaxPayload = 256     -- spec [UDP-3]
local kMaxMaxPayload = 9000
local kTwo32 = 4294967296

local T_DATA, T_ACK, T_NACK, T_HELLO, T_HELLO_ACK, T_PROBE, T_CLOSE, T_RETRY =
    1, 2, 3, 4, 5, 6, 7, 8
-- spec §3.5: byte 2 of a HELLO and a HELLO_ACK, `hello_flags`: SENDING ([CC-20], a HELLO's
-- only) and DROPPED ([CONN-31]); the other bits are reserved ([WIRE-6]).
local kHelloSending = 0x01
local kHelloDropped = 0x02
local kHelloFlagsDefined = 0x03
-- spec [VER-2]: the `capabilities` bits this version defines (INTEGRITY, COALESCE, SHORT_ACK,
-- COMPACT_DATA).
local kCapDefined = 0x0000000F

-- spec §3.1 [WIRE-2]
local type_names = {
    [T_DATA] = "DATA", [T_ACK] = "ACK", [T_NACK] = "NACK", [T_HELLO] = "HELLO",
    [T_HELLO_ACK] = "HELLO_ACK", [T_PROBE] = "PROBE", [T_CLOSE] = "CLOSE", [T_RETRY] = "RETRY",
}
-- The size of the fixed part of each type; [WIRE-5] fixed-size types are exactly this long.
-- An ACK's is 80, or 48 with SHORT ([ACK-21]): ack_fixed below; a DATA's 72, or 64 with
-- COMPACT ([DATA-9]): data_fixed below.
local fixed_size = {
    [T_DATA] = 72, [T_ACK] = 80, [T_NACK] = 40, [T_HELLO] = 64, [T_HELLO_ACK] = 64,
    [T_PROBE] = 32, [T_CLOSE] = 24, [T_RETRY] = 32,
}
local variable_size = { [T_DATA] = true, [T_ACK] = true }
-- spec §4.9 [INT-2]: the types that carry the integrity trailer on a connection that
-- negotiated INTEGRITY. A capture does not say which did, so a packet of such a type whose
-- datagram is 4 bytes longer than its type says is read as packet + trailer (as
-- tests/wireshark/pcap_decode does).
local carries_trailer = { [T_DATA] = true, [T_ACK] = true, [T_NACK] = true, [T_PROBE] = true,
                          [T_CLOSE] = true }
local kTrailerSize = 4

-- CRC32C (Castagnoli, reflected, init and final XOR 0xFFFFFFFF; spec [INT-2]) without
-- bitwise operators (see the note above): XOR of two bytes from a 64 Ki table, of two
-- 32-bit words byte by byte.
local xor8 = {}
for a = 0, 255 do
    for b = 0, 255 do
        local r, p, x, y = 0, 1, a, b
        for _ = 1, 8 do
            if x % 2 ~= y % 2 then r = r + p end
            x, y, p = (x - x % 2) / 2, (y - y % 2) / 2, p * 2
        end
        xor8[a * 256 + b] = r
    end
end
local function xor32(a, b)
    local r, p = 0, 1
    for _ = 1, 4 do
        r = r + xor8[(a % 256) * 256 + b % 256] * p
        a, b, p = (a - a % 256) / 256, (b - b % 256) / 256, p * 256
    end
    return r
end
local crc_table = {}
for n = 0, 255 do
    local c = n
    for _ = 1, 8 do
        if c % 2 == 1 then c = xor32((c - 1) / 2, 0x82F63B78) else c = c / 2 end
    end
    crc_table[n] = c
end
-- crc32c of the first `len` bytes of tvb.
local function crc32c(tvb, len)
    local bytes = tvb:bytes(0, len)
    local c = 0xFFFFFFFF
    for i = 0, len - 1 do
        c = xor32(crc_table[xor8[(c % 256) * 256 + bytes:get_index(i)]], (c - c % 256) / 256)
    end
    return xor32(c, 0xFFFFFFFF)
end

-- spec §3.2 [DATA-1]
local OP_SEND, OP_SEND_IMM, OP_WRITE, OP_WRITE_IMM = 1, 2, 3, 4
local OP_READ_REQ, OP_READ_RESP, OP_FETCH_ADD, OP_CMP_SWAP, OP_ATOMIC_RESP = 5, 6, 7, 8, 9
local opcode_names = {
    [OP_SEND] = "SEND", [OP_SEND_IMM] = "SEND_IMM", [OP_WRITE] = "WRITE",
    [OP_WRITE_IMM] = "WRITE_IMM", [OP_READ_REQ] = "READ_REQUEST",
    [OP_READ_RESP] = "READ_RESPONSE", [OP_FETCH_ADD] = "ATOMIC_FETCH_ADD",
    [OP_CMP_SWAP] = "ATOMIC_COMPARE_SWAP", [OP_ATOMIC_RESP] = "ATOMIC_RESPONSE",
}
-- [DATA-1]/[DATA-5]: which fields each opcode uses; the others must be sent as zero.
local uses_rkey = { [OP_WRITE] = true, [OP_WRITE_IMM] = true, [OP_READ_REQ] = true,
                    [OP_FETCH_ADD] = true, [OP_CMP_SWAP] = true }
local uses_addr = { [OP_WRITE] = true, [OP_WRITE_IMM] = true, [OP_READ_REQ] = true,
                    [OP_FETCH_ADD] = true, [OP_CMP_SWAP] = true, [OP_READ_RESP] = true,
                    [OP_ATOMIC_RESP] = true }
local uses_imm = { [OP_SEND_IMM] = true, [OP_WRITE_IMM] = true }
local uses_recv_seq = { [OP_SEND] = true, [OP_SEND_IMM] = true, [OP_WRITE_IMM] = true }
-- [DATA-9]: the opcodes that consume a receive (those that use recv_seq) cannot be COMPACT.
local consumes_receive = uses_recv_seq
-- [DATA-8]: opcodes whose payload is a fixed body, and its size.
local body_size = { [OP_READ_REQ] = 8, [OP_FETCH_ADD] = 16, [OP_CMP_SWAP] = 16,
                    [OP_ATOMIC_RESP] = 8 }

-- spec §3.4 [NACK-1]
local NACK_RNR, NACK_INVALID = 1, 3
local nack_reasons = {
    [1] = "RECEIVER_NOT_READY", [2] = "REMOTE_ACCESS", [3] = "INVALID_REQUEST",
    [4] = "OUT_OF_WINDOW", [5] = "NO_RESOURCES",
}
-- spec §3.7 [CLOSE-1]; other values are legal ([CLOSE-2]) and shown as unknown.
local close_reasons = { [0] = "NORMAL", [1] = "PROTOCOL_ERROR", [2] = "LOCAL_FAILURE",
                        [3] = "VERSION_MISMATCH", [4] = "CONFIRM" }

-- Fields. Those several types share (path, PSN, stream, message) have one name, so that
-- `mroce.path_id == 3` finds a path's DATA, ACKs, NACKs and PROBEs at once.
local f = {
    version = ProtoField.uint8("mroce.version", "Version", base.DEC),
    type = ProtoField.uint8("mroce.type", "Type", base.DEC, type_names),
    reserved = ProtoField.bytes("mroce.reserved", "Reserved"),
    conn_id = ProtoField.uint32("mroce.conn_id", "Destination connection id", base.HEX),
    token = ProtoField.uint64("mroce.token", "Destination token", base.HEX),
    path_id = ProtoField.uint16("mroce.path_id", "Path id", base.DEC),
    path_gen = ProtoField.uint8("mroce.path_gen", "Path generation", base.DEC),
    psn = ProtoField.uint32("mroce.psn", "Path PSN", base.DEC),
    psn_floor = ProtoField.uint32("mroce.psn_floor", "PSN floor", base.DEC),
    stream_id = ProtoField.uint32("mroce.stream_id", "Stream id", base.DEC),
    msg_seq = ProtoField.uint32("mroce.msg_seq", "Message sequence", base.DEC),
    timestamp = ProtoField.uint32("mroce.timestamp", "Timestamp (ns, low 32 bits)", base.DEC),
    drop_reason = ProtoField.string("mroce.drop_reason", "Dropped by a v1 receiver as"),
    integrity = ProtoField.uint32("mroce.integrity", "Integrity trailer (CRC32C, [INT-2])",
                                  base.HEX),
    extra = ProtoField.bytes("mroce.extra", "Bytes beyond the packet"),
    undecoded = ProtoField.bytes("mroce.undecoded", "Not interpreted"),
    gso_segments = ProtoField.uint16("mroce.gso.segments", "Packets in this GSO/GRO record",
                                     base.DEC),
    gso_size = ProtoField.uint16("mroce.gso.size", "Size of each (the last may be shorter)",
                                 base.DEC),
    coalesced_offset = ProtoField.uint16("mroce.coalesced.offset",
        "Coalesced [WIRE-10]: offset of this DATA, after its FOLLOWED ACK", base.DEC),

    data_opcode = ProtoField.uint8("mroce.data.opcode", "Opcode", base.HEX, opcode_names),
    data_flags = ProtoField.uint8("mroce.data.flags", "Flags", base.HEX),
    data_last = ProtoField.bool("mroce.data.flags.last", "LAST", 8, nil, 0x01),
    data_retx = ProtoField.bool("mroce.data.flags.retx", "RETX", 8, nil, 0x02),
    data_ack_now = ProtoField.bool("mroce.data.flags.ack_now", "ACK_NOW", 8, nil, 0x04),
    data_return_echo_flag = ProtoField.bool("mroce.data.flags.return_echo", "RETURN_ECHO", 8, nil, 0x08),
    data_return_echo = ProtoField.uint8("mroce.data.return_echo", "Return path echoed", base.DEC),
    data_drained = ProtoField.bool("mroce.data.flags.drained", "DRAINED", 8, nil, 0x10),
    data_compact = ProtoField.bool("mroce.data.flags.compact",
                                   "COMPACT (no recv_seq, no immediate) [DATA-9]", 8, nil,
                                   kDataCompact),
    data_flags_undef = ProtoField.uint8("mroce.data.flags.undefined", "Undefined in v2",
                                        base.HEX, nil, 0xC0),
    data_payload_len = ProtoField.uint16("mroce.data.payload_len", "Payload length", base.DEC),
    data_recv_seq = ProtoField.uint32("mroce.data.recv_seq", "Receive sequence", base.DEC),
    data_msg_len = ProtoField.uint32("mroce.data.msg_len", "Message length", base.DEC),
    data_offset = ProtoField.uint32("mroce.data.offset", "Offset", base.DEC),
    data_rkey = ProtoField.uint32("mroce.data.rkey", "Remote key", base.HEX),
    data_remote_addr = ProtoField.uint64("mroce.data.remote_addr", "Remote address", base.HEX),
    data_immediate = ProtoField.uint32("mroce.data.immediate", "Immediate", base.HEX),
    data_payload = ProtoField.bytes("mroce.data.payload", "Payload"),
    data_read_length = ProtoField.uint32("mroce.data.read_length", "Length to read", base.DEC),
    data_atomic_add = ProtoField.uint64("mroce.data.atomic.add", "Addend", base.HEX),
    data_atomic_swap = ProtoField.uint64("mroce.data.atomic.swap", "Swap value", base.HEX),
    data_atomic_compare = ProtoField.uint64("mroce.data.atomic.compare", "Compare value",
                                            base.HEX),
    data_atomic_original = ProtoField.uint64("mroce.data.atomic.original", "Original value",
                                             base.HEX),

    ack_flags = ProtoField.uint8("mroce.ack.flags", "Flags", base.HEX),
    ack_probe_reply = ProtoField.bool("mroce.ack.flags.probe_reply", "PROBE_REPLY", 8, nil,
                                      0x01),
    ack_followed = ProtoField.bool("mroce.ack.flags.followed", "FOLLOWED", 8, nil, 0x02),
    ack_short = ProtoField.bool("mroce.ack.flags.short", "SHORT (no SACK bitmap)", 8, nil,
                                kAckShort),
    ack_flags_undef = ProtoField.uint8("mroce.ack.flags.undefined", "Undefined",
                                       base.HEX, nil, 0xF8),
    ack_cum_psn = ProtoField.uint32("mroce.ack.cum_psn", "Cumulative PSN", base.DEC),
    ack_sack = ProtoField.bytes("mroce.ack.sack", "SACK bitmap"),
    ack_sack_count = ProtoField.uint16("mroce.ack.sack.count", "PSNs acknowledged by SACK",
                                       base.DEC),
    ack_sack_range = ProtoField.string("mroce.ack.sack.range", "SACKed PSNs"),
    ack_sack_holes = ProtoField.uint16("mroce.ack.sack.holes",
                                       "PSNs missing below the highest SACKed", base.DEC),
    ack_ecn_ce_count = ProtoField.uint32("mroce.ack.ecn_ce_count", "CE-marked DATA count",
                                         base.DEC),
    ack_ts_echo = ProtoField.uint32("mroce.ack.ts_echo", "Timestamp echo", base.DEC),
    ack_delay_ns = ProtoField.uint32("mroce.ack.ack_delay_ns", "ACK delay (ns)", base.DEC),
    ack_rate_hint = ProtoField.uint32("mroce.ack.rate_hint_mbps", "Rate hint (Mbit/s)",
                                      base.DEC),
    ack_probe_psn = ProtoField.uint32("mroce.ack.probe_psn", "Probe PSN", base.DEC),
    ack_stream_count = ProtoField.uint16("mroce.ack.stream_count", "Stream entries", base.DEC),
    ack_return_path = ProtoField.uint16("mroce.ack.return_path", "Return path (sender's path it leaves on)",
                                        base.DEC),
    ack_stream_id = ProtoField.uint32("mroce.ack.stream.id", "Stream id", base.DEC),
    ack_delivered_seq = ProtoField.uint32("mroce.ack.stream.delivered_seq", "Delivered sequence",
                                          base.DEC),

    nack_reason = ProtoField.uint8("mroce.nack.reason", "Reason", base.DEC, nack_reasons),
    nack_detail = ProtoField.uint32("mroce.nack.detail", "Detail", base.DEC),

    hello_src_conn_id = ProtoField.uint32("mroce.hello.src_conn_id", "Source connection id",
                                          base.HEX),
    hello_src_token = ProtoField.uint64("mroce.hello.src_token", "Source token", base.HEX),
    hello_isn = ProtoField.uint32("mroce.hello.isn", "Initial PSN", base.DEC),
    hello_msg_isn = ProtoField.uint32("mroce.hello.msg_isn", "Initial message sequence",
                                      base.DEC),
    hello_endpoint_port = ProtoField.uint16("mroce.hello.endpoint_port", "Endpoint UDP port",
                                            base.DEC),
    hello_num_paths = ProtoField.uint16("mroce.hello.num_paths", "Paths", base.DEC),
    hello_max_payload = ProtoField.uint32("mroce.hello.max_payload", "Max payload (bytes)",
                                          base.DEC),
    hello_capabilities = ProtoField.uint32("mroce.hello.capabilities", "Capabilities", base.HEX),
    hello_cap_integrity = ProtoField.bool("mroce.hello.capabilities.integrity",
                                          "INTEGRITY [INT-1]", 32, nil, 0x00000001),
    hello_cap_coalesce = ProtoField.bool("mroce.hello.capabilities.coalesce",
                                         "COALESCE [WIRE-10]", 32, nil, 0x00000002),
    hello_cap_short_ack = ProtoField.bool("mroce.hello.capabilities.short_ack",
                                          "SHORT_ACK [ACK-21]", 32, nil, 0x00000004),
    hello_cap_compact_data = ProtoField.bool("mroce.hello.capabilities.compact_data",
                                             "COMPACT_DATA [DATA-9]", 32, nil, 0x00000008),
    hello_cap_undef = ProtoField.uint32("mroce.hello.capabilities.undefined", "Undefined",
                                        base.HEX, nil, 0xFFFFFFF0),
    hello_cookie = ProtoField.bytes("mroce.hello.cookie", "Cookie (echoed from a RETRY)"),
    hello_grant = ProtoField.uint32("mroce.hello.grant_mbps", "Grant (Mbit/s, 0: none) [CC-20]", base.DEC),
    hello_flags = ProtoField.uint8("mroce.hello.flags",
                                   "HELLO flags (0x01 SENDING, a HELLO's only [CC-20]; " ..
                                   "0x02 DROPPED [CONN-31])", base.HEX),
    hello_sending = ProtoField.bool("mroce.hello.flags.sending", "SENDING (DATA waiting) [CC-20]",
                                    8, nil, kHelloSending),
    hello_dropped = ProtoField.bool("mroce.hello.flags.dropped",
                                    "DROPPED (dropped DATA while Connecting) [CONN-31]", 8, nil,
                                    kHelloDropped),
    hello_flags_undef = ProtoField.uint8("mroce.hello.flags.undefined", "Undefined", base.HEX, nil,
                                         0xFC),
    hello_seq = ProtoField.uint8("mroce.hello.seq", "HELLO number (hello_seq, 0: not numbered) [CONN-32]",
                                 base.DEC),
    hello_echo = ProtoField.uint8("mroce.hello.echo",
                                  "Echoed HELLO number (hello_echo, 0: none) [CONN-32]", base.DEC),

    retry_cookie = ProtoField.bytes("mroce.retry.cookie", "Cookie"),

    probe_next_psn = ProtoField.uint32("mroce.probe.next_psn", "Next PSN", base.DEC),
    probe_flags = ProtoField.uint8("mroce.probe.flags", "Flags", base.HEX),
    probe_failed = ProtoField.bool("mroce.probe.flags.failed", "FAILED (the path waits for this reply) [PROBE-4]",
                                   8, nil, 0x01),
    probe_flags_undef = ProtoField.uint8("mroce.probe.flags.undefined", "Undefined", base.HEX, nil, 0xFE),

    close_reason = ProtoField.uint32("mroce.close.reason", "Reason", base.DEC, close_reasons),
}
local field_list = {}
for _, v in pairs(f) do field_list[#field_list + 1] = v end
proto.fields = field_list

-- Expert infos. The four errors are wire/'s decode errors: a v1 receiver drops the packet.
local e = {
    truncated = ProtoExpert.new("mroce.expert.truncated",
        "Truncated: shorter than its type's fixed part [WIRE-7]", expert.group.MALFORMED,
        expert.severity.ERROR),
    bad_version = ProtoExpert.new("mroce.expert.bad_version",
        "Unknown version: dropped, not interpreted [WIRE-3]", expert.group.MALFORMED,
        expert.severity.ERROR),
    bad_type = ProtoExpert.new("mroce.expert.bad_type", "Unknown type, opcode or NACK reason",
        expert.group.MALFORMED, expert.severity.ERROR),
    bad_length = ProtoExpert.new("mroce.expert.bad_length",
        "A length, count or cap disagrees with the datagram", expert.group.MALFORMED,
        expert.severity.ERROR),
    bad_integrity = ProtoExpert.new("mroce.expert.bad_integrity",
        "Integrity trailer is not the CRC32C of the packet [INT-3]", expert.group.CHECKSUM,
        expert.severity.ERROR),
    reserved = ProtoExpert.new("mroce.expert.reserved_nonzero",
        "Reserved bits set: must be sent as zero, ignored on receive [WIRE-6]",
        expert.group.PROTOCOL, expert.severity.WARN),
    rule = ProtoExpert.new("mroce.expert.rule", "The sender broke a rule of docs/spec.md",
        expert.group.PROTOCOL, expert.severity.WARN),
    note = ProtoExpert.new("mroce.expert.note", "Allowed but unusual", expert.group.PROTOCOL,
        expert.severity.NOTE),
    retx = ProtoExpert.new("mroce.expert.retransmission", "Retransmission (RETX flag)",
        expert.group.SEQUENCE, expert.severity.NOTE),
    aggregate = ProtoExpert.new("mroce.expert.aggregate",
        "Several packets in one captured datagram (UDP GSO/GRO)", expert.group.PROTOCOL,
        expert.severity.NOTE),
    snapped = ProtoExpert.new("mroce.expert.snapped",
        "Capture cut at the snap length: later fields not shown", expert.group.UNDECODED,
        expert.severity.NOTE),
}
proto.experts = { e.truncated, e.bad_version, e.bad_type, e.bad_length, e.bad_integrity, e.reserved, e.rule,
                  e.note, e.retx, e.aggregate, e.snapped }

proto.prefs.udp_port = Pref.uint("UDP port", kDefaultPort,
    "UDP port decoded as mroce (spec [UDP-1] default 4797; 0: none). The heuristic " ..
    "mroce_udp finds endpoints on other ports.")

-- bit_set reports whether the bit under `mask` (a power of two) is set in `value`.
local function bit_set(value, mask)
    return math.floor(value / mask) % 2 == 1
end

-- ack_fixed is the size of the fixed part of the ACK at `off` of tvb ([ACK-1]): 48 when
-- its flags (byte 19) have SHORT ([ACK-21]), else 80, also when byte 19 is not there (an
-- ACK shorter than the 20 bytes that hold its flags is truncated in either form).
local function ack_fixed(tvb, off)
    if tvb:len() >= off + 20 and bit_set(tvb(off + 19, 1):uint(), kAckShort) then
        return kAckShortFixed
    end
    return fixed_size[T_ACK]
end

-- data_fixed is the size of the header of the DATA at `off` of tvb ([DATA-9]): 64 when its
-- flags (byte 17) have COMPACT, else 72, also when byte 17 is not there (a DATA shorter than
-- 64 bytes is truncated in either form).
local function data_fixed(tvb, off)
    if tvb:len() >= off + 18 and bit_set(tvb(off + 17, 1):uint(), kDataCompact) then
        return kDataCompactFixed
    end
    return fixed_size[T_DATA]
end

-- ack_count is the `stream_count` of the ACK at `off` of tvb (the last 4 bytes of its fixed
-- part hold it and `return_path`), or nil when those bytes are not in the capture.
local function ack_count(tvb, off)
    local at = off + ack_fixed(tvb, off) - 4
    if tvb:len() < at + 2 then return nil end
    return tvb(at, 2):uint()
end

-- is_after reports whether sequence number a is after b (spec §1.4).
local function is_after(a, b)
    local d = (a - b) % kTwo32
    return d ~= 0 and d < 2147483648
end

local function is_zero64(v)
    return v == UInt64(0)
end

-- Dissection context for one datagram: the length the receiver sees (`len`, the UDP payload
-- length, [UDP-2]) may exceed what was captured (`cap`) when the snap length cut it.
local Ctx = {}
Ctx.__index = Ctx

local function new_ctx(tvb, pinfo, tree)
    local c = setmetatable({}, Ctx)
    c.tvb, c.pinfo, c.root = tvb, pinfo, tree
    c.len = tvb:reported_length_remaining(0)
    c.cap = tvb:len()
    c.drop = nil      -- the first [WIRE-9] verdict, as wire/ names it
    c.info = {}
    c.snapped = false
    return c
end

-- fits reports whether bytes off .. off+size-1 exist in the datagram and in the capture;
-- it notes a snap-length cut once.
function Ctx:fits(off, size)
    if off + size > self.len then return false end
    if off + size > self.cap then
        if not self.snapped then
            self.snapped = true
            self.root:add_proto_expert_info(e.snapped)
        end
        return false
    end
    return true
end

-- add adds field `fld` over bytes off .. off+size-1 to tree t (if they are there) and
-- returns its value (a number, or a UInt64 for 8-byte fields) and the tree item.
function Ctx:add(t, fld, off, size)
    if not self:fits(off, size) then return nil, nil end
    local r = self.tvb(off, size)
    local item = t:add(fld, r)
    if size == 8 then return r:uint64(), item end
    if size <= 4 then return r:uint(), item end
    return r:bytes(), item
end

-- nonzero reports whether any of bytes off .. off+size-1 (which must fit) is not zero.
function Ctx:nonzero(off, size)
    for i = off, off + size - 1 do
        if self.tvb(i, 1):uint() ~= 0 then return true end
    end
    return false
end

-- reserved shows a reserved field and warns if any of its bits is set ([WIRE-6]).
function Ctx:reserved(t, off, size)
    if not self:fits(off, size) then return end
    local r = self.tvb(off, size)
    local item = t:add(f.reserved, r)
    for i = 0, size - 1 do
        if r(i, 1):uint() ~= 0 then
            item:add_proto_expert_info(e.reserved)
            return
        end
    end
end

-- fail records a drop: the first one in [WIRE-9] order is the receiver's verdict; every
-- violation gets its expert error on `item` (or the protocol item).
function Ctx:fail(kind, item, text)
    if not self.drop then self.drop = kind end
    local target = item or self.root
    target:add_proto_expert_info(e[kind], text)
end

function Ctx:warn(item, text)
    (item or self.root):add_proto_expert_info(e.rule, text)
end

function Ctx:info_add(s)
    self.info[#self.info + 1] = s
end

-- Each type's body. Fields are added while they fit, so a truncated packet still shows
-- what it has; checks that need a field run only when it is there.

local function dissect_data(c, t)
    local op, op_item = c:add(t, f.data_opcode, 16, 1)
    local flags, flags_item = c:add(t, f.data_flags, 17, 1)
    if flags_item then
        flags_item:add(f.data_last, c.tvb(17, 1))
        flags_item:add(f.data_retx, c.tvb(17, 1))
        flags_item:add(f.data_ack_now, c.tvb(17, 1))
        flags_item:add(f.data_return_echo_flag, c.tvb(17, 1))
        flags_item:add(f.data_drained, c.tvb(17, 1))
        flags_item:add(f.data_compact, c.tvb(17, 1))  -- [DATA-9]
        local undef = flags_item:add(f.data_flags_undef, c.tvb(17, 1))
        if flags >= 64 then undef:add_proto_expert_info(e.reserved) end  -- [DATA-2]
    end
    -- [DATA-9]: with COMPACT, recv_seq and immediate are left out and every later field is
    -- 4 bytes up (the payload 8); the flag decides, as a capture does not show whether
    -- COMPACT_DATA was negotiated.
    local compact = flags ~= nil and bit_set(flags, kDataCompact)
    local header = compact and kDataCompactFixed or fixed_size[T_DATA]
    local at = compact and -4 or 0  -- the fields after msg_seq are at at + 44 ...
    local path_id = c:add(t, f.path_id, 18, 2)
    local path_gen = c:add(t, f.path_gen, 20, 1)
    -- [PATH-12]: one of the receiver's paths whose ACK reached the sender; 0 without the flag.
    local echo, echo_item = c:add(t, f.data_return_echo, 21, 1)
    if echo_item and flags and flags % 16 < 8 and echo ~= 0 then
        c:warn(echo_item, "return_echo not 0 without RETURN_ECHO [PATH-12]")
    end
    local payload_len, pl_item = c:add(t, f.data_payload_len, 22, 2)
    local psn = c:add(t, f.psn, 24, 4)
    local floor, floor_item = c:add(t, f.psn_floor, 28, 4)
    local stream = c:add(t, f.stream_id, 32, 4)
    local msg_seq = c:add(t, f.msg_seq, 36, 4)
    local recv_seq, recv_item, imm, imm_item = 0, nil, 0, nil
    if not compact then recv_seq, recv_item = c:add(t, f.data_recv_seq, 40, 4) end
    local msg_len, ml_item = c:add(t, f.data_msg_len, at + 44, 4)
    local offset = c:add(t, f.data_offset, at + 48, 4)
    c:add(t, f.timestamp, at + 52, 4)
    local rkey, rkey_item = c:add(t, f.data_rkey, at + 56, 4)
    local addr, addr_item = c:add(t, f.data_remote_addr, at + 60, 8)
    if not compact then imm, imm_item = c:add(t, f.data_immediate, 68, 4) end
    if compact and flags_item then
        flags_item:append_text(" (COMPACT: recv_seq and immediate left out, read as 0 [DATA-9])")
    end

    c:info_add(op and (opcode_names[op] or string.format("opcode=0x%02x", op)) or "")
    if path_id then c:info_add(string.format("path=%d/%d", path_id, path_gen or 0)) end
    if psn then c:info_add("psn=" .. psn) end
    if stream then c:info_add(string.format("stream=%d msg=%d", stream, msg_seq or 0)) end
    if offset then c:info_add(string.format("off=%d len=%d/%d", offset, payload_len, msg_len)) end
    if flags then
        if bit_set(flags, 0x01) then c:info_add("LAST") end
        if bit_set(flags, 0x02) then
            c:info_add("RETX")
            flags_item:add_proto_expert_info(e.retx)
        end
        if bit_set(flags, 0x04) then c:info_add("ACK_NOW") end
        if compact then c:info_add("COMPACT") end
    end

    -- Truncated (flagged by the caller) or cut by the snap length: nothing more to check.
    if c.len < header or addr == nil or imm == nil then return end
    -- [DATA-1]: an unknown opcode is a bad type, checked before the lengths.
    if not opcode_names[op] then
        c:fail("bad_type", op_item, string.format("Unknown opcode 0x%02x [DATA-1]", op))
    elseif compact and consumes_receive[op] then
        -- [DATA-9]: right after the opcode, the header lacks fields the opcode needs.
        c:fail("bad_length", flags_item, string.format(
            "COMPACT on %s, which consumes a receive: its header lacks recv_seq%s [DATA-9]",
            opcode_names[op], uses_imm[op] and " and immediate" or ""))
    end
    -- [DATA-3], in its order.
    local actual = c.len - header
    local end_off = offset + payload_len
    if payload_len ~= actual then
        c:fail("bad_length", pl_item, string.format(
            "payload_len %d, but %d bytes follow the header [DATA-3]", payload_len, actual))
    end
    if end_off > msg_len then
        c:fail("bad_length", ml_item, string.format(
            "offset + payload_len = %d is beyond msg_len %d [DATA-3]", end_off, msg_len))
    end
    if bit_set(flags, 0x01) ~= (end_off == msg_len) then
        c:fail("bad_length", flags_item, bit_set(flags, 0x01)
            and "LAST set on a segment that does not end the message [DATA-3]"
            or "LAST clear on the segment that ends the message [DATA-3]")
    end
    if payload_len == 0 and msg_len ~= 0 then
        c:fail("bad_length", pl_item, "Empty payload in a non-empty message [DATA-3]")
    end
    -- [DATA-7]
    if is_after(floor, psn) then
        c:warn(floor_item, "psn_floor is after path_psn: receivers drop this packet [DATA-7]")
    end
    -- [DATA-5]: fields the opcode does not use are sent as zero.
    if opcode_names[op] then
        if not uses_rkey[op] and rkey ~= 0 then
            c:warn(rkey_item, "rkey must be 0 for " .. opcode_names[op] .. " [DATA-5]")
        end
        if not uses_addr[op] and not is_zero64(addr) then
            c:warn(addr_item, "remote_addr must be 0 for " .. opcode_names[op] .. " [DATA-5]")
        end
        if not uses_imm[op] and imm ~= 0 then
            c:warn(imm_item, "immediate must be 0 for " .. opcode_names[op] .. " [DATA-5]")
        end
        if not uses_recv_seq[op] and recv_seq ~= 0 then
            c:warn(recv_item, "recv_seq must be 0 for " .. opcode_names[op] .. " [DATA-5]")
        end
        if op == OP_READ_RESP or op == OP_ATOMIC_RESP then
            addr_item:append_text(" (names the request with msg_seq " .. tostring(addr) .. ")")
        end
    end

    -- The payload: a fixed body for requests and atomic responses ([DATA-8]), else bytes.
    if actual <= 0 then return end
    local body = body_size[op]
    if body and (msg_len ~= body or actual ~= body) then
        c:warn(ml_item, string.format("%s carries a %d-byte body, not %d bytes: refused " ..
            "with NACK(INVALID_REQUEST) [DATA-8]", opcode_names[op], body, actual))
        body = nil
    end
    local h = header  -- the payload's offset: 72, or 64 with COMPACT ([DATA-9])
    if body and c:fits(h, body) then
        local bt = t:add(f.data_payload, c.tvb(h, body))
        if op == OP_READ_REQ then
            c:add(bt, f.data_read_length, h, 4)
            c:reserved(bt, h + 4, 4)
        elseif op == OP_FETCH_ADD then
            c:add(bt, f.data_atomic_add, h, 8)
            c:reserved(bt, h + 8, 8)
        elseif op == OP_CMP_SWAP then
            c:add(bt, f.data_atomic_swap, h, 8)
            c:add(bt, f.data_atomic_compare, h + 8, 8)
        else
            c:add(bt, f.data_atomic_original, h, 8)
        end
    elseif c.cap > h then
        c:fits(h, actual)  -- notes a payload the snap length cut
        t:add(f.data_payload, c.tvb(h, math.min(actual, c.cap - h)))
    end
end

-- sack_decode lists the SACKed PSNs of bitmap `bytes` (a ByteArray of 32) above cum_psn:
-- returns count, ranges ({first, last} PSNs in order), holes and whether bit 0 is set.
local function sack_decode(bytes, cum)
    local count, ranges, highest_bit = 0, {}, -1
    local run_start = nil
    for i = 0, kSackBits do
        local set = false
        if i < kSackBits then
            set = bit_set(bytes:get_index(math.floor(i / 8)), 2 ^ (7 - i % 8))
        end
        if set then
            count = count + 1
            highest_bit = i
            if not run_start then run_start = i end
        elseif run_start then
            ranges[#ranges + 1] = { (cum + 1 + run_start) % kTwo32, (cum + i) % kTwo32 }
            run_start = nil
        end
    end
    -- Holes: PSNs from cum_psn + 1 up to the highest SACKed one that have not arrived.
    local holes = highest_bit >= 0 and (highest_bit + 1 - count) or 0
    return count, ranges, holes, bit_set(bytes:get_index(0), 0x80)
end

local function dissect_ack(c, t)
    local path_id = c:add(t, f.path_id, 16, 2)
    local path_gen = c:add(t, f.path_gen, 18, 1)
    local flags, flags_item = c:add(t, f.ack_flags, 19, 1)
    if flags_item then
        flags_item:add(f.ack_probe_reply, c.tvb(19, 1))
        flags_item:add(f.ack_followed, c.tvb(19, 1))  -- [WIRE-10]
        flags_item:add(f.ack_short, c.tvb(19, 1))     -- [ACK-21]
        local undef = flags_item:add(f.ack_flags_undef, c.tvb(19, 1))
        if flags >= 8 then undef:add_proto_expert_info(e.reserved) end  -- [ACK-8]
    end
    -- [ACK-21]: with SHORT the bitmap is left out and every later field is 32 bytes up; the
    -- flag decides, as a capture does not show whether SHORT_ACK was negotiated.
    local short = flags ~= nil and bit_set(flags, kAckShort)
    local fixed = short and kAckShortFixed or fixed_size[T_ACK]
    local at = fixed - fixed_size[T_ACK]  -- the fields after `sack` are at at + 56 ...
    local cum = c:add(t, f.ack_cum_psn, 20, 4)
    local sack_count, sack_holes = nil, nil
    if short then
        -- No bitmap on the wire: no PSN acknowledged by SACK, no hole (generated fields, so
        -- that filters on them cover both forms).
        local item = t:add(f.ack_sack_count, 0)
        item:set_generated()
        item:append_text(" (SHORT: the SACK bitmap is left out, no bit set [ACK-21])")
        t:add(f.ack_sack_holes, 0):set_generated()
    elseif c:fits(24, 32) then
        local item = t:add(f.ack_sack, c.tvb(24, 32))
        local count, ranges, holes, bit0 = sack_decode(c.tvb(24, 32):bytes(), cum)
        item:append_text(string.format(" (%d PSNs in %d ranges)", count, #ranges))
        item:add(f.ack_sack_count, count):set_generated()
        for _, r in ipairs(ranges) do
            local s = r[1] == r[2] and tostring(r[1]) or (r[1] .. "-" .. r[2])
            item:add(f.ack_sack_range, s):set_generated()
        end
        item:add(f.ack_sack_holes, holes):set_generated()
        if bit0 then
            item:add_proto_expert_info(e.note,
                "SACK bit 0 set: cum_psn + 1 arrived but cum_psn does not include it [ACK-2]")
        end
        sack_count, sack_holes = count, holes
    end
    c:add(t, f.ack_ecn_ce_count, at + 56, 4)
    c:add(t, f.ack_ts_echo, at + 60, 4)
    c:add(t, f.ack_delay_ns, at + 64, 4)
    local hint = c:add(t, f.ack_rate_hint, at + 68, 4)
    local probe_psn, probe_item = c:add(t, f.ack_probe_psn, at + 72, 4)
    local count, count_item = c:add(t, f.ack_stream_count, at + 76, 2)
    c:add(t, f.ack_return_path, at + 78, 2)  -- [PATH-12]

    if path_id then c:info_add(string.format("path=%d/%d", path_id, path_gen or 0)) end
    if cum then c:info_add("cum=" .. cum) end
    if sack_count and sack_count > 0 then
        c:info_add(string.format("sacked=%d holes=%d", sack_count, sack_holes))
    end
    if hint and hint ~= 0 then c:info_add("hint=" .. hint .. "Mbps") end
    if count and count > 0 then c:info_add("streams=" .. count) end
    if flags and bit_set(flags, 0x01) then c:info_add("PROBE_REPLY probe_psn=" .. tostring(probe_psn)) end
    if short then c:info_add("SHORT") end

    if c.len < fixed or count == nil then return end
    -- [ACK-5] then [ACK-1], wire/'s order.
    local entries_bytes = c.len - fixed
    if count > kMaxAckStreams then
        c:fail("bad_length", count_item, string.format(
            "stream_count %d is above the cap of %d [ACK-5]", count, kMaxAckStreams))
    elseif entries_bytes ~= 8 * count then
        -- (An ACK with FOLLOWED and bytes after it is read as a coalesced pair, dissect_pair;
        -- it comes here only when the capture cut it.)
        c:fail("bad_length", count_item, string.format(
            "stream_count %d needs %d bytes of entries after the %d-byte fixed part%s, " ..
            "the datagram has %d [ACK-1]", count, 8 * count, fixed, short and " (SHORT)" or "",
            entries_bytes))
    end
    if not bit_set(flags, 0x01) and probe_psn ~= 0 then
        c:warn(probe_item, "probe_psn must be 0 without PROBE_REPLY [ACK-8]")
    end
    -- Entries: those the datagram holds, even when their count disagrees.
    local n = math.min(count, math.floor(entries_bytes / 8))
    for i = 0, n - 1 do
        local off = fixed + 8 * i
        if not c:fits(off, 8) then break end
        local st = t:add(c.tvb(off, 8), "Stream entry " .. i)
        local id = c:add(st, f.ack_stream_id, off, 4)
        local seq = c:add(st, f.ack_delivered_seq, off + 4, 4)
        st:append_text(string.format(": stream %d, delivered before %d", id, seq))
    end
    local used = fixed + 8 * n
    if c.len > used and c:fits(used, c.len - used) then
        t:add(f.extra, c.tvb(used, c.len - used))
    end
end

local function dissect_nack(c, t)
    local reason, reason_item = c:add(t, f.nack_reason, 16, 1)
    c:reserved(t, 17, 1)
    local path_id = c:add(t, f.path_id, 18, 2)
    local path_gen = c:add(t, f.path_gen, 20, 1)
    c:reserved(t, 21, 3)
    local psn = c:add(t, f.psn, 24, 4)
    local stream = c:add(t, f.stream_id, 28, 4)
    local msg_seq = c:add(t, f.msg_seq, 32, 4)
    local detail, detail_item = c:add(t, f.nack_detail, 36, 4)

    if reason then c:info_add(nack_reasons[reason] or ("reason=" .. reason)) end
    if path_id then c:info_add(string.format("path=%d/%d", path_id, path_gen or 0)) end
    if psn then c:info_add("psn=" .. psn) end
    if stream then c:info_add(string.format("stream=%d msg=%d", stream, msg_seq or 0)) end
    if detail and reason then
        -- [NACK-4]
        if reason == NACK_RNR then
            detail_item:append_text(" (retry after µs; 0: no suggestion)")
            if detail ~= 0 then c:info_add("wait=" .. detail .. "us") end
        elseif reason == NACK_INVALID then
            detail_item:append_text(detail == 1 and " (UNKNOWN_STREAM)" or " (other)")
            if detail == 1 then c:info_add("UNKNOWN_STREAM") end
        elseif detail ~= 0 and nack_reasons[reason] then
            c:warn(detail_item, "detail must be 0 for " .. nack_reasons[reason] .. " [NACK-4]")
        end
    end
    if c.len ~= fixed_size[T_NACK] or detail == nil then return end
    -- [NACK-2]: the reason is checked after the length (the caller did that).
    if not nack_reasons[reason] then
        c:fail("bad_type", reason_item, "Unknown NACK reason " .. reason .. " [NACK-2]")
    end
end

local function dissect_hello(c, t, typ)
    local src_id, src_id_item = c:add(t, f.hello_src_conn_id, 16, 4)
    local src_token, token_item = c:add(t, f.hello_src_token, 20, 8)
    c:add(t, f.hello_isn, 28, 4)
    c:add(t, f.hello_msg_isn, 32, 4)
    local port = c:add(t, f.hello_endpoint_port, 36, 2)
    local paths, paths_item = c:add(t, f.hello_num_paths, 38, 2)
    local max_payload, mp_item = c:add(t, f.hello_max_payload, 40, 4)
    local caps, caps_item = c:add(t, f.hello_capabilities, 44, 4)
    local caps_undef = nil
    if caps_item then
        -- [VER-2]: the bits this version defines, by name.
        caps_item:add(f.hello_cap_integrity, c.tvb(44, 4))
        caps_item:add(f.hello_cap_coalesce, c.tvb(44, 4))
        caps_item:add(f.hello_cap_short_ack, c.tvb(44, 4))
        caps_item:add(f.hello_cap_compact_data, c.tvb(44, 4))
        caps_undef = caps_item:add(f.hello_cap_undef, c.tvb(44, 4))
    end
    -- [CONN-32]: byte 3, the HELLO's number or the one its HELLO_ACK echoes (0: none).
    local byte3 = c:fits(3, 1) and c.tvb(3, 1):uint() or 0
    -- [CC-20] [CONN-31]: byte 2, hello_flags (SENDING in a HELLO only).
    local flags = c:fits(2, 1) and c.tvb(2, 1):uint() or 0
    if typ == T_HELLO then
        if byte3 ~= 0 then c:info_add("seq=" .. byte3) end
        if bit_set(flags, kHelloSending) then c:info_add("SENDING") end
        if bit_set(flags, kHelloDropped) then c:info_add("DROPPED") end
        local cookie = c:fits(48, 16) and c:nonzero(48, 16)
        c:add(t, f.hello_cookie, 48, 16)
        if cookie then c:info_add("cookie") end
    else
        if byte3 ~= 0 then c:info_add("echo=" .. byte3) end
        if bit_set(flags, kHelloDropped) then c:info_add("DROPPED") end
        -- [CC-20]: a HELLO_ACK's cookie is its grant, then 12 zero bytes.
        local grant = c:add(t, f.hello_grant, 48, 4)
        if grant and grant ~= 0 then c:info_add("grant=" .. grant .. "Mbps") end
        if c:fits(52, 12) and c:nonzero(52, 12) then
            c:warn(nil, "HELLO_ACK with a nonzero cookie beyond its grant [CONN-2]")
        end
    end

    if src_id then c:info_add(string.format("src_conn=0x%08x", src_id)) end
    if port then c:info_add("port=" .. port) end
    if paths then c:info_add("paths=" .. paths) end
    if max_payload then c:info_add("max_payload=" .. max_payload) end

    if c.len ~= fixed_size[typ] or caps == nil then return end
    -- [CONN-3], after the length.
    if paths == 0 or paths > kMaxPaths then
        c:fail("bad_length", paths_item, string.format(
            "num_paths %d is outside 1 .. %d [CONN-3]", paths, kMaxPaths))
    end
    if max_payload < kMinMaxPayload or max_payload > kMaxMaxPayload then
        c:fail("bad_length", mp_item, string.format(
            "max_payload %d is outside %d .. %d [CONN-3]", max_payload, kMinMaxPayload,
            kMaxMaxPayload))
    end
    -- [CONN-23]: not a wire/ error, but every receiver drops it before matching.
    if src_id == 0 then
        c:warn(src_id_item, "src_conn_id 0: dropped as malformed_hello [CONN-23]")
    end
    if is_zero64(src_token) then
        c:warn(token_item, "src_token 0: dropped as malformed_hello [CONN-23]")
    end
    -- [VER-2]: bit 0x1 is INTEGRITY ([INT-1]), 0x2 COALESCE ([WIRE-10]), 0x4 SHORT_ACK
    -- ([ACK-21]), 0x8 COMPACT_DATA ([DATA-9]); the others are reserved ([CONN-2]).
    if bit_set(caps, 0x1) then c:info_add("INTEGRITY") end
    if bit_set(caps, 0x2) then c:info_add("COALESCE") end
    if bit_set(caps, 0x4) then c:info_add("SHORT_ACK") end
    if bit_set(caps, 0x8) then c:info_add("COMPACT_DATA") end
    if caps > kCapDefined then caps_undef:add_proto_expert_info(e.reserved) end
end

local function dissect_probe(c, t)
    local path_id = c:add(t, f.path_id, 16, 2)
    local path_gen = c:add(t, f.path_gen, 18, 1)
    -- [PROBE-4]: byte 19 is `flags`: FAILED (0x01); the other bits are reserved ([WIRE-6]).
    local pflags, pflags_item = c:add(t, f.probe_flags, 19, 1)
    if pflags_item then
        pflags_item:add(f.probe_failed, c.tvb(19, 1))
        local undef = pflags_item:add(f.probe_flags_undef, c.tvb(19, 1))
        if pflags >= 2 then undef:add_proto_expert_info(e.reserved) end
    end
    local next_psn = c:add(t, f.probe_next_psn, 20, 4)
    local floor, floor_item = c:add(t, f.psn_floor, 24, 4)
    c:add(t, f.timestamp, 28, 4)
    if path_id then c:info_add(string.format("path=%d/%d", path_id, path_gen or 0)) end
    if next_psn then c:info_add("next_psn=" .. next_psn) end
    if pflags and bit_set(pflags, 0x01) then c:info_add("FAILED") end
    if next_psn and floor and is_after(floor, next_psn) then
        c:warn(floor_item, "psn_floor is after next_psn: receivers drop this PROBE [PROBE-1]")
    end
end

local function dissect_retry(c, t)
    c:add(t, f.retry_cookie, 16, 16)
    if c:fits(16, 16) and not c:nonzero(16, 16) then
        c:warn(nil, "RETRY with an all-zero cookie [CONN-25]")
    end
end

local function dissect_close(c, t)
    local reason, item = c:add(t, f.close_reason, 16, 4)
    c:reserved(t, 20, 4)
    if reason then
        c:info_add(close_reasons[reason] or ("reason=" .. reason))
        if not close_reasons[reason] then
            item:add_proto_expert_info(e.note, "Unlisted CLOSE reason: accepted [CLOSE-2]")
        end
    end
end

-- dissect_one decodes one datagram (tvb) into a new protocol item under tree and returns
-- its Info column text, the item and its drop verdict (nil when a receiver accepts it).
-- in_pair: tvb is one packet of a coalesced datagram (dissect_pair): no trailer of its own
-- is looked for, and the verdict is left to the caller (the datagram's, not the packet's).
local function dissect_one(tvb, pinfo, tree, in_pair)
    local t = tree:add(proto, tvb())
    local c = new_ctx(tvb, pinfo, t)
    local len = c.len

    -- [WIRE-9] 1: shorter than the common header.
    if len < kCommonSize then
        c:add(t, f.version, 0, 1)
        c:add(t, f.type, 1, 1)
        c:fail("truncated", nil, string.format(
            "%d bytes: shorter than the 16-byte common header [WIRE-7]", len))
        t:add(f.drop_reason, c.drop):set_generated()
        return string.format("[truncated] %d bytes", len), t, c.drop
    end
    -- 2: version; nothing else of the datagram is interpreted ([WIRE-3]).
    local version, version_item = c:add(t, f.version, 0, 1)
    if version ~= kVersion then
        c:fail("bad_version", version_item, string.format(
            "Version %d; this dissector knows version %d [WIRE-3]", version, kVersion))
        if c:fits(1, len - 1) then t:add(f.undecoded, tvb(1, len - 1)) end
        t:add(f.drop_reason, c.drop):set_generated()
        return string.format("[bad_version] version %d", version), t, c.drop
    end
    -- 3: type.
    local typ, type_item = c:add(t, f.type, 1, 1)
    if typ == T_HELLO and c:fits(2, 1) then
        -- [CC-20] [CONN-31]: a HELLO's byte 2, `hello_flags`.
        local flags, flags_item = c:add(t, f.hello_flags, 2, 1)
        if flags_item then
            flags_item:add(f.hello_sending, c.tvb(2, 1))
            flags_item:add(f.hello_dropped, c.tvb(2, 1))
            local undef = flags_item:add(f.hello_flags_undef, c.tvb(2, 1))
            if flags > kHelloFlagsDefined then undef:add_proto_expert_info(e.reserved) end
        end
        c:add(t, f.hello_seq, 3, 1)    -- [CONN-32]: a HELLO's byte 3, its number
    elseif typ == T_HELLO_ACK and c:fits(2, 1) then
        -- [CONN-31]: a HELLO_ACK's byte 2, `hello_flags`, of which only DROPPED is defined:
        -- SENDING's bit (0x01, [CC-20]) is reserved there as the bits 0xFC are ([WIRE-6]).
        local flags, flags_item = c:add(t, f.hello_flags, 2, 1)
        if flags_item then
            flags_item:add(f.hello_dropped, c.tvb(2, 1))
            local undef = flags_item:add(f.hello_flags_undef, c.tvb(2, 1))
            if flags > kHelloFlagsDefined then undef:add_proto_expert_info(e.reserved) end
            if bit_set(flags, kHelloSending) then
                flags_item:add_proto_expert_info(e.reserved,
                    "0x01 (SENDING) is a HELLO's flag, reserved in a HELLO_ACK [CC-20] [WIRE-6]")
            end
        end
        c:add(t, f.hello_echo, 3, 1)   -- [CONN-32]: a HELLO_ACK's byte 3, the number it echoes
    else
        c:reserved(t, 2, 2)
    end
    local conn_id = c:add(t, f.conn_id, 4, 4)
    c:add(t, f.token, 8, 8)
    local name = type_names[typ]
    if not name then
        c:fail("bad_type", type_item, string.format("Unknown type %d [WIRE-4]", typ))
        if c:fits(16, len - 16) and len > 16 then t:add(f.undecoded, tvb(16, len - 16)) end
        t:add(f.drop_reason, c.drop):set_generated()
        return string.format("[bad_type] type %d", typ), t, c.drop
    end
    t:append_text(", " .. name)
    -- [INT-2], [INT-3]: a trailer, checked before the body (spec §4.5 step 4); the rest of
    -- the packet is then read without it.
    if not in_pair and carries_trailer[typ] and c.cap >= len and len >= kCommonSize + kTrailerSize then
        local plain = fixed_size[typ]
        if typ == T_DATA and len >= 24 then plain = data_fixed(tvb, 0) + tvb(22, 2):uint()
        elseif typ == T_ACK then
            plain = ack_fixed(tvb, 0)  -- [ACK-21]: 48 with SHORT
            if len >= plain - 2 then plain = plain + 8 * tvb(plain - 4, 2):uint() end
        end
        if plain == len - kTrailerSize then
            len = len - kTrailerSize
            c.len = len
            local got = tvb(len, kTrailerSize):uint()
            local item = t:add(f.integrity, tvb(len, kTrailerSize))
            local want = crc32c(tvb, len)
            if got ~= want then
                c:fail("bad_integrity", item, string.format(
                    "Trailer 0x%08x; the CRC32C of the packet is 0x%08x [INT-3]", got, want))
            else
                c:info_add("crc32c")
            end
        end
    end
    -- 4 and 5: the type's fixed part, and the exact size of fixed-size types ([WIRE-5]).
    local fixed = fixed_size[typ]
    if typ == T_ACK then
        -- [ACK-1]: 48 with SHORT ([ACK-21]); when the snap length cut the flags off, the
        -- form is unknown, and only a datagram too short for either is truncated.
        fixed = (c.cap < 20 and len >= 20) and kAckShortFixed or ack_fixed(tvb, 0)
    elseif typ == T_DATA then
        -- [DATA-9]: 64 with COMPACT; when the snap length cut the flags off, only a datagram
        -- too short for either form is truncated.
        fixed = (c.cap < 18 and len >= 18) and kDataCompactFixed or data_fixed(tvb, 0)
    end
    if typ == T_ACK and len < 20 then
        c:fail("truncated", nil, string.format(
            "%d bytes: an ACK needs 20 to hold its flags, and its fixed part (80, or 48 " ..
            "with SHORT) [WIRE-7] [ACK-1]", len))
    elseif len < fixed then
        c:fail("truncated", nil, string.format(
            "%d bytes: %s%s needs at least %d [WIRE-7]", len, name,
            ((typ == T_ACK and ack_fixed(tvb, 0) == kAckShortFixed) and " with SHORT") or
            ((typ == T_DATA and data_fixed(tvb, 0) == kDataCompactFixed) and " with COMPACT") or "",
            fixed))
    elseif len > fixed and not variable_size[typ] then
        c:fail("bad_length", nil, string.format(
            "%d bytes: %s is exactly %d [WIRE-5]", len, name, fixed))
        if c:fits(fixed, len - fixed) then t:add(f.extra, tvb(fixed, len - fixed)) end
    end
    -- HELLO's destination ids are zero ([CONN-2]); every other packet names a connection.
    if typ == T_HELLO then
        local token = c.cap >= 16 and tvb(8, 8):uint64() or UInt64(0)
        if conn_id ~= 0 or not is_zero64(token) then
            c:warn(nil, "HELLO with a nonzero dst_conn_id or dst_token [CONN-2]")
        end
    elseif conn_id then
        c:info_add(string.format("conn=0x%08x", conn_id))
    end
    -- 6: the type's own fields and checks.
    if typ == T_DATA then dissect_data(c, t)
    elseif typ == T_ACK then dissect_ack(c, t)
    elseif typ == T_NACK then dissect_nack(c, t)
    elseif typ == T_HELLO or typ == T_HELLO_ACK then dissect_hello(c, t, typ)
    elseif typ == T_PROBE then dissect_probe(c, t)
    elseif typ == T_RETRY then dissect_retry(c, t)
    else dissect_close(c, t) end

    local info = name
    for _, s in ipairs(c.info) do
        if s ~= "" then info = info .. " " .. s end
    end
    if c.drop and not in_pair then
        t:add(f.drop_reason, c.drop):set_generated()
        info = "[" .. c.drop .. "] " .. info
    end
    return info, t, c.drop
end

-- [WIRE-10] Coalesced datagrams. A capture cannot tell whether a connection negotiated
-- COALESCE (its HELLOs may not be in it), so the FOLLOWED flag decides, as it decides for
-- the sender: an ACK with FOLLOWED is read at the length its count gives, and what follows
-- it as a DATA of the same connection, with one integrity trailer at the datagram's end when
-- the lengths say so. The datagram is dropped whole, each packet showing the one verdict,
-- when a check fails, in the order a receiver makes them (core/endpoint.cc): the trailer;
-- nothing after the ACK; longer than 72 + 9000 bytes (the largest max_payload: a
-- receiver's own bound, 72 + its max_payload, is not in the capture); the ACK's own
-- checks; a follower that is not a version-2 DATA of the ACK's connection and token (one
-- packet then, the rest shown as bytes); the DATA's own checks. An ACK with SHORT as well
-- ([ACK-21]) is 48 bytes plus its entries (wire::coalesced_ack_size); its DATA may be
-- COMPACT ([DATA-9]), read by its flag, the datagram's bound still that of a full DATA.

-- followed_ack: whether the datagram is read as a coalesced pair (whole in the capture, and
-- at least the ACK's fixed part: a shorter one is one truncated ACK, as for a receiver).
local function followed_ack(tvb)
    local len = tvb:reported_length_remaining(0)
    if tvb:len() < len or len < kCommonSize + 4 then return false end
    return tvb(0, 1):uint() == kVersion and tvb(1, 1):uint() == T_ACK and
           bit_set(tvb(19, 1):uint(), 0x02) and len >= ack_fixed(tvb, 0)
end

-- dissect_pair shows a coalesced datagram as its ACK and (when it is one) its DATA, each
-- its own mroce item, and returns the Info text and the datagram's verdict.
local function dissect_pair(tvb, pinfo, tree)
    local len = tvb:reported_length_remaining(0)
    local ack_len = ack_fixed(tvb, 0) + 8 * math.min(ack_count(tvb, 0), kMaxAckStreams + 1)
    -- [INT-2]: one trailer over both, when the lengths say a DATA (or nothing) ends 4 bytes
    -- before the datagram does.
    local body = len
    if len == ack_len + kTrailerSize or (len >= ack_len + 24 and
            ack_len + data_fixed(tvb, ack_len) + tvb(ack_len + 22, 2):uint() == len - kTrailerSize) then
        body = len - kTrailerSize
    end
    local rest = body - ack_len
    local follower = rest >= kCommonSize and tvb(ack_len, 1):uint() == kVersion and
        tvb(ack_len + 1, 1):uint() == T_DATA and
        tostring(tvb(ack_len + 4, 12):bytes()) == tostring(tvb(4, 12):bytes())

    local ack_info, ack_item, ack_drop = dissect_one(tvb(0, math.min(ack_len, body)):tvb(), pinfo, tree, true)
    local data_info, data_item, data_drop
    if follower then
        data_info, data_item, data_drop = dissect_one(tvb(ack_len, rest):tvb(), pinfo, tree, true)
        data_item:add(f.coalesced_offset, ack_len):set_generated()
    end
    local last = data_item or ack_item
    local drop, fail_item, why = nil, nil, nil
    local function fail(kind, item, text)
        if drop then return end
        drop, fail_item, why = kind, item, text
        item:add_proto_expert_info(e[kind], text)
    end
    if body < len then
        local item = last:add(f.integrity, tvb(body, kTrailerSize))
        local got, want = tvb(body, kTrailerSize):uint(), crc32c(tvb, body)
        if got ~= want then
            fail("bad_integrity", item, string.format(
                "Trailer 0x%08x; the CRC32C of the coalesced datagram is 0x%08x [INT-3]", got, want))
        end
    end
    if rest <= 0 then
        fail("bad_length", ack_item, string.format(
            "FOLLOWED, but nothing follows the ACK's %d bytes [WIRE-10] (a receiver without " ..
            "COALESCE reads it as a plain ACK)", ack_len))
    elseif body > fixed_size[T_DATA] + kMaxMaxPayload then
        fail("bad_length", ack_item, string.format(
            "A coalesced datagram of %d bytes is longer than any full DATA (%d) [WIRE-10]", body,
            fixed_size[T_DATA] + kMaxMaxPayload))
    end
    if ack_drop and not drop then drop = ack_drop end
    if not drop and not follower then
        local b = ack_item:add(f.extra, tvb(ack_len, rest))
        if rest < kCommonSize then
            fail("truncated", b, string.format(
                "%d bytes after the FOLLOWED ACK: shorter than a common header [WIRE-10] [WIRE-7]", rest))
        elseif tvb(ack_len, 1):uint() ~= kVersion then
            fail("bad_version", b, "What follows the FOLLOWED ACK is not version 2 [WIRE-10] [WIRE-3]")
        elseif not type_names[tvb(ack_len + 1, 1):uint()] then
            fail("bad_type", b, "What follows the FOLLOWED ACK has an unknown type [WIRE-10] [WIRE-4]")
        else
            fail("bad_type", b, "What follows the FOLLOWED ACK is not a DATA of the same " ..
                "connection and token [WIRE-10]")
        end
    end
    if data_drop and not drop then drop = data_drop end
    local info = ack_info .. (data_info and (" + " .. data_info) or "")
    if drop then
        ack_item:add(f.drop_reason, drop):set_generated()
        if data_item then data_item:add(f.drop_reason, drop):set_generated() end
        info = "[" .. drop .. "] " .. info
    end
    return info, drop
end

-- null_tree stands in for the tree when only a packet's verdict is wanted: each of its
-- methods does nothing and returns it, so dissect_one runs unchanged without a display.
local null_tree = setmetatable({}, {
    __index = function() return function(self) return self end end,
})

-- own_size is the length the packet at `off` of tvb says it has (its type's size, or the
-- fixed part plus what its length or count field adds), or nil if that is not readable
-- or it is no version-2 packet.
local function own_size(tvb, off)
    if tvb:len() < off + kCommonSize then return nil end
    if tvb(off, 1):uint() ~= kVersion then return nil end
    local typ = tvb(off + 1, 1):uint()
    local fixed = fixed_size[typ]
    if not fixed then return nil end
    if typ == T_DATA then
        if tvb:len() < off + 24 then return nil end
        return data_fixed(tvb, off) + tvb(off + 22, 2):uint()  -- [DATA-9]: 64 with COMPACT
    elseif typ == T_ACK then
        local count = ack_count(tvb, off)  -- [ACK-21]: SHORT moves it (and the entries) up
        if not count then return nil end
        return ack_fixed(tvb, off) + 8 * count
    end
    return fixed
end

-- aggregate_size returns the segment size when the datagram is a UDP GSO/GRO aggregate:
-- several mroce packets back to back, each the size its own header says, all of the first
-- one's size but the last, which may be shorter (the kernel's rule for a UDP_SEGMENT send
-- and for coalescing on receive), and each one a packet a receiver accepts; otherwise it is
-- shown as one datagram whose length is wrong, which is what it is if it was not split. A capture on the sending host taken before segmentation
-- (loopback, NICs that segment), or on the receiving host after GRO, holds such records;
-- the receiving endpoint sees the packets one by one. nil when the datagram is one packet
-- or not entirely captured.
local function aggregate_size(tvb, pinfo)
    local len = tvb:reported_length_remaining(0)
    if tvb:len() < len then return nil end
    local own = own_size(tvb, 0)
    if not own then return nil end
    -- Each packet may carry its own integrity trailer ([INT-5]): try without, then with.
    local extras = carries_trailer[tvb(1, 1):uint()] and { 0, kTrailerSize } or { 0 }
    for _, extra in ipairs(extras) do
        local seg = own + extra
        local ok = seg >= kCommonSize and seg < len
        for off = seg, len - 1, seg do
            if not ok then break end
            local size = own_size(tvb, off)
            ok = size ~= nil and size + extra == math.min(seg, len - off)
        end
        for off = 0, len - 1, seg do
            if not ok then break end
            local piece = tvb(off, math.min(seg, len - off)):tvb()
            local _, _, drop = dissect_one(piece, pinfo, null_tree)
            ok = not drop
        end
        if ok then return seg end
    end
    return nil
end

-- dissect decodes a datagram, or each packet of an aggregate; it always claims it.
local function dissect(tvb, pinfo, tree)
    pinfo.cols.protocol = "mroce"
    local len = tvb:reported_length_remaining(0)
    if followed_ack(tvb) then
        pinfo.cols.info = (dissect_pair(tvb, pinfo, tree))
        return len
    end
    local seg = aggregate_size(tvb, pinfo)
    if not seg then
        pinfo.cols.info = (dissect_one(tvb, pinfo, tree))
        return len
    end
    local count = math.ceil(len / seg)
    local first_info, first
    for i = 0, count - 1 do
        local off = i * seg
        local info, item = dissect_one(tvb(off, math.min(seg, len - off)):tvb(), pinfo, tree)
        if i == 0 then first_info, first = info, item end
    end
    -- The first packet's item says what the record is.
    first:add(f.gso_segments, count):set_generated()
    first:add(f.gso_size, seg):set_generated()
    first:add_proto_expert_info(e.aggregate, string.format(
        "%d packets of %d bytes in one record (UDP GSO/GRO); the receiver sees them one by one",
        count, seg))
    pinfo.cols.info = string.format("%d× %s …", count, first_info)
    return len
end

function proto.dissector(tvb, pinfo, tree)
    return dissect(tvb, pinfo, tree)
end

-- The heuristic accepts only what a version-2 receiver would decode without a length
-- error (version 2, a known type, reserved bytes zero and a length that matches the type),
-- or an aggregate of such packets. Byte 2 of a HELLO and a HELLO_ACK is `hello_flags`, not
-- reserved, and its bits defined for the type are allowed, since the copies of a HELLO on
-- other paths ([CONN-30]) and a HELLO_ACK each may open a conversation of their own: in a
-- HELLO, SENDING ([CC-20]), which every HELLO of a sender with data waiting sets, and
-- DROPPED ([CONN-31]), which a sender that dropped DATA while opening sets in its next HELLO;
-- in a HELLO_ACK, DROPPED only (the HELLO_ACK confirming the establishment of such a sender
-- when the answer came before its next HELLO). Byte 3 is a HELLO's `hello_seq` and a
-- HELLO_ACK's `hello_echo` ([CONN-32]), any value, since every numbered HELLO and every
-- answer to one sets it. That is strict enough that other UDP traffic is very unlikely to
-- pass; broken packets on a non-default port are still decoded once their conversation was
-- recognised.
local function heuristic(tvb, pinfo, tree)
    local len = tvb:reported_length_remaining(0)
    if len < kCommonSize or tvb:len() < kCommonSize then return false end
    if tvb(0, 1):uint() ~= kVersion then return false end
    local typ = tvb(1, 1):uint()
    if tvb(3, 1):uint() ~= 0 and typ ~= T_HELLO and typ ~= T_HELLO_ACK then return false end
    local byte2 = tvb(2, 1):uint()
    if byte2 ~= 0 and not (typ == T_HELLO and byte2 <= kHelloFlagsDefined) and
        not (typ == T_HELLO_ACK and byte2 == kHelloDropped) then
        return false
    end
    local own = own_size(tvb, 0)
    local sealed = carries_trailer[typ] and own and own + kTrailerSize == len
    if followed_ack(tvb) then
        -- [WIRE-10]: a coalesced pair a receiver accepts.
        local _, drop = dissect_pair(tvb, pinfo, null_tree)
        if drop then return false end
    elseif own ~= len and not sealed and not aggregate_size(tvb, pinfo) then
        return false
    end
    if typ == T_DATA and not opcode_names[tvb(16, 1):uint()] then return false end
    -- [DATA-9]: COMPACT on an opcode that consumes a receive is a bad length.
    if typ == T_DATA and data_fixed(tvb, 0) == kDataCompactFixed and
            consumes_receive[tvb(16, 1):uint()] then
        return false
    end
    if typ == T_ACK and (ack_count(tvb, 0) or 0) > kMaxAckStreams then return false end
    -- Later datagrams of this UDP conversation go straight to the dissector, so a broken
    -- one is shown (and flagged) as mroce instead of as unknown UDP data.
    pinfo.conversation = proto
    dissect(tvb, pinfo, tree)
    return true
end
proto:register_heuristic("udp", heuristic)

local registered_port = 0
local function register_port(port)
    local udp = DissectorTable.get("udp.port")
    if registered_port ~= 0 then udp:remove(registered_port, proto) end
    if port ~= 0 then udp:add(port, proto) end
    registered_port = port
end

function proto.prefs_changed()
    if proto.prefs.udp_port ~= registered_port then register_port(proto.prefs.udp_port) end
end

register_port(kDefaultPort)
