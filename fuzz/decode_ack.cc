// fuzz/decode_ack.cc — libFuzzer target for decode_ack (docs/spec.md §3.3).
//
// Decodes arbitrary bytes; when that succeeds, re-encodes and checks that the result
// decodes to an equal AckPacket and is the input with its reserved bytes zeroed. Also
// checks the two readings of [ACK-21]: parse_ack_body without SHORT_ACK negotiated (the
// SHORT bit undefined, the ACK at its full length) agrees with decode_ack wherever the bit
// is clear, and the length coalesced_ack_size gives a FOLLOWED ACK ([WIRE-10]) is the one
// parse_ack_body accepts.
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "wire/ack.h"

using namespace mroce;
using namespace mroce::wire;

namespace {

// check_coalesced: a datagram read as a coalesced pair on a connection that negotiated
// SHORT_ACK (short_ok) or not: the ACK part coalesced_ack_size cuts, if it parses, is
// exactly its fixed part and entries, and re-encodes to the same bytes.
void check_coalesced(std::span<const std::byte> in, bool short_ok) {
    const size_t n = coalesced_ack_size(in, short_ok);
    if (n == 0) return;
    const auto flags = static_cast<uint8_t>(in[19]);
    FUZZ_CHECK(in.size() >= kCommonHeaderSize + 4 && (flags & ack_flag::kFollowed));
    // [WIRE-10] [ACK-21]: the fixed part (80 bytes, 48 with SHORT where it means something)
    // and 8 per entry of the count at its bytes -4..-3, the count capped one over the limit.
    const size_t fixed = short_ok && (flags & ack_flag::kShort) ? 48 : 80;
    FUZZ_CHECK(in.size() >= fixed);
    FUZZ_CHECK(n == fixed + 8 * std::min<size_t>(load_be16(in.data() + fixed - 4), kMaxAckStreams + 1));
    if (n > in.size()) return;  // the receiver drops it: nothing after the ACK, or cut in it
    AckPacket a;
    if (parse_ack_body(in.first(n), a, short_ok) != Error::kOk) return;
    FUZZ_CHECK(short_ok || !(a.flags & ack_flag::kShort));
    FUZZ_CHECK(n == ack_fixed_size(a.flags) + size_t{a.stream_count} * kAckStreamEntrySize);
    if (a.flags & ack_flag::kShort) FUZZ_CHECK(sack_empty(a.sack));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto in = std::as_bytes(std::span(data, size));
    const auto common = decode_common_header(in);
    const auto a = decode_ack(in);
    fuzz::last_input_accepted = a.ok();
    if (!common) {
        FUZZ_CHECK(!a && a.error() == common.error());
        return 0;
    }
    if (common->type == PacketType::kAck) {
        check_coalesced(in, true);
        check_coalesced(in, false);
        // [ACK-21]: without SHORT_ACK negotiated the bit is undefined. Clear, both readings
        // agree; set, the full-length reading clears it and keeps the full layout.
        AckPacket full;
        const Error e = parse_ack_body(in, full, false);
        const bool short_bit = size > 19 && (data[19] & ack_flag::kShort);
        if (!short_bit) {
            FUZZ_CHECK(e == (a ? Error::kOk : a.error()));
            if (a) {
                full.common = a->common;
                for (size_t i = full.stream_count; i < kMaxAckStreams; ++i) full.streams[i] = StreamAck{};
                FUZZ_CHECK(full == *a);
            }
        } else if (e == Error::kOk) {
            FUZZ_CHECK(!(full.flags & ack_flag::kShort));
            FUZZ_CHECK(size == kAckFixedSize + size_t{full.stream_count} * kAckStreamEntrySize);
            FUZZ_CHECK((full.flags | ack_flag::kShort) == data[19]);
        }
    }
    if (!a) return 0;
    FUZZ_CHECK(common->type == PacketType::kAck && a->common == *common);

    // [ACK-1] [ACK-5]: the count is capped and matches the datagram; unused entries stay zero.
    FUZZ_CHECK(a->stream_count <= kMaxAckStreams);
    FUZZ_CHECK(size == encoded_size(*a));
    for (size_t i = a->stream_count; i < kMaxAckStreams; ++i)
        FUZZ_CHECK(a->streams[i] == StreamAck{});
    // [ACK-21]: a SHORT ACK has no bitmap: it reads as an empty one.
    if (a->flags & ack_flag::kShort) FUZZ_CHECK(sack_empty(a->sack));
    // [WIRE-10]: a FOLLOWED ACK alone is as long as its count says.
    if (a->flags & ack_flag::kFollowed) FUZZ_CHECK(coalesced_ack_size(in, true) == size);

    std::vector<std::byte> out(encoded_size(*a));
    const auto n = encode_ack(*a, out);
    FUZZ_CHECK(n.ok() && *n == out.size());
    const auto b = decode_ack(out);
    FUZZ_CHECK(b.ok());
    FUZZ_CHECK(*b == *a);
    fuzz::check_canonical(in, out, {fuzz::kCommonReserved});
    return 0;
}
