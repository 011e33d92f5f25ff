// fuzz/decode_ack.cc — libFuzzer target for decode_ack (docs/spec.md §3.3).
//
// Decodes arbitrary bytes; when that succeeds, re-encodes and checks that the result
// decodes to an equal AckPacket and is the input with its reserved bytes zeroed.
#include <cstdint>
#include <span>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "wire/ack.h"

using namespace mroce;
using namespace mroce::wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto in = std::as_bytes(std::span(data, size));
    const auto common = decode_common_header(in);
    const auto a = decode_ack(in);
    fuzz::last_input_accepted = a.ok();
    if (!common) {
        FUZZ_CHECK(!a && a.error() == common.error());
        return 0;
    }
    if (!a) return 0;
    FUZZ_CHECK(common->type == PacketType::kAck && a->common == *common);

    // [ACK-1] [ACK-5]: the count is capped and matches the datagram; unused entries stay zero.
    FUZZ_CHECK(a->stream_count <= kMaxAckStreams);
    FUZZ_CHECK(size == encoded_size(*a));
    for (size_t i = a->stream_count; i < kMaxAckStreams; ++i)
        FUZZ_CHECK(a->streams[i] == StreamAck{});

    std::vector<std::byte> out(encoded_size(*a));
    const auto n = encode_ack(*a, out);
    FUZZ_CHECK(n.ok() && *n == out.size());
    const auto b = decode_ack(out);
    FUZZ_CHECK(b.ok());
    FUZZ_CHECK(*b == *a);
    fuzz::check_canonical(in, out, {fuzz::kCommonReserved});
    return 0;
}
