// fuzz/decode_data.cc — libFuzzer target for decode_data (docs/spec.md §3.2).
//
// Decodes arbitrary bytes; when that succeeds, re-encodes the header, appends the payload
// and checks that the result decodes to an equal header and payload and is the input with
// its reserved bytes zeroed. Any mismatch aborts.
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "wire/data.h"

using namespace mroce;
using namespace mroce::wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto in = std::as_bytes(std::span(data, size));
    const auto common = decode_common_header(in);
    const auto p = decode_data(in);
    fuzz::last_input_accepted = p.ok();
    if (!common) {
        // The common header's verdict comes first for every decoder (§3.1).
        FUZZ_CHECK(!p && p.error() == common.error());
        return 0;
    }
    if (!p) return 0;
    FUZZ_CHECK(common->type == PacketType::kData && p->hdr.common == *common);

    // [DATA-3]: the payload is the rest of the datagram, inside the message, LAST at its end.
    const DataHeader& h = p->hdr;
    FUZZ_CHECK(p->payload.data() == in.data() + kDataHeaderSize);
    FUZZ_CHECK(p->payload.size() == h.payload_len && size == kDataHeaderSize + h.payload_len);
    FUZZ_CHECK(uint64_t{h.offset} + h.payload_len <= h.msg_len);
    FUZZ_CHECK(((h.flags & data_flag::kLast) != 0) ==
               (uint64_t{h.offset} + h.payload_len == h.msg_len));
    FUZZ_CHECK(h.payload_len != 0 || h.msg_len == 0);
    FUZZ_CHECK(is_known_opcode(static_cast<uint8_t>(h.opcode)));

    std::vector<std::byte> out(size);
    const auto n = encode_data_header(h, out);
    FUZZ_CHECK(n.ok() && *n == kDataHeaderSize);
    if (!p->payload.empty())
        std::memcpy(out.data() + kDataHeaderSize, p->payload.data(), p->payload.size());
    const auto q = decode_data(out);
    FUZZ_CHECK(q.ok());
    FUZZ_CHECK(q->hdr == h);
    FUZZ_CHECK(q->payload.size() == p->payload.size());
    FUZZ_CHECK(p->payload.empty() ||
               std::memcmp(q->payload.data(), p->payload.data(), p->payload.size()) == 0);
    fuzz::check_canonical(in, out, {fuzz::kCommonReserved});
    return 0;
}
