// fuzz/decode_data.cc — libFuzzer target for decode_data (docs/spec.md §3.2).
//
// Decodes arbitrary bytes as a receiver with and without COMPACT_DATA ([DATA-9]); when that
// succeeds, re-encodes the header, appends the payload and checks that the result decodes
// to an equal header and payload and is the input with its reserved bytes zeroed. Any
// mismatch aborts.
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "wire/data.h"

using namespace mroce;
using namespace mroce::wire;

namespace {


// check_decoded: what a successful decode promises, and that re-encoding gives the input
// back (reserved bytes zeroed). compact_ok: as the receiver of a connection that
// negotiated COMPACT_DATA ([DATA-9]) or not.
void check_decoded(std::span<const std::byte> in, const DataPacket& p, bool compact_ok) {
    // [DATA-3]: the payload is the rest of the datagram, inside the message, LAST at its end.
    const DataHeader& h = p.hdr;
    const bool compact = (h.flags & data_flag::kCompact) != 0;
    FUZZ_CHECK(compact_ok || !compact);
    FUZZ_CHECK(!compact || (may_be_compact(h.opcode) && h.recv_seq == 0 && h.immediate == 0));
    const size_t header = data_header_size(h.flags);
    FUZZ_CHECK(p.payload.data() == in.data() + header);
    FUZZ_CHECK(p.payload.size() == h.payload_len && in.size() == header + h.payload_len);
    FUZZ_CHECK(uint64_t{h.offset} + h.payload_len <= h.msg_len);
    FUZZ_CHECK(((h.flags & data_flag::kLast) != 0) ==
               (uint64_t{h.offset} + h.payload_len == h.msg_len));
    FUZZ_CHECK(h.payload_len != 0 || h.msg_len == 0);
    FUZZ_CHECK(is_known_opcode(static_cast<uint8_t>(h.opcode)));

    std::vector<std::byte> out(in.size());
    const auto n = encode_data_header(h, out);
    FUZZ_CHECK(n.ok() && *n == header);
    if (!p.payload.empty()) std::memcpy(out.data() + header, p.payload.data(), p.payload.size());
    const auto q = decode_data(out, compact_ok);
    FUZZ_CHECK(q.ok());
    FUZZ_CHECK(q->hdr == h);
    FUZZ_CHECK(q->payload.size() == p.payload.size());
    FUZZ_CHECK(p.payload.empty() ||
               std::memcmp(q->payload.data(), p.payload.data(), p.payload.size()) == 0);
    // Without COMPACT_DATA the bit is cleared on receive, so the re-encoding differs from
    // the input there too ([WIRE-6]: an undefined bit is ignored, not kept).
    if (compact_ok || !(static_cast<uint8_t>(in[17]) & data_flag::kCompact))
        fuzz::check_canonical(in, out, {fuzz::kCommonReserved});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto in = std::as_bytes(std::span(data, size));
    const auto common = decode_common_header(in);
    const auto p = decode_data(in);
    const auto full = decode_data(in, /*compact_ok=*/false);
    fuzz::last_input_accepted = p.ok() || full.ok();
    if (!common) {
        // The common header's verdict comes first for every decoder (§3.1).
        FUZZ_CHECK(!p && p.error() == common.error());
        FUZZ_CHECK(!full && full.error() == common.error());
        return 0;
    }
    // [DATA-9]: without the COMPACT bit the two readings are the same.
    if (size > 17 && !(static_cast<uint8_t>(in[17]) & data_flag::kCompact)) {
        FUZZ_CHECK(p.ok() == full.ok());
        FUZZ_CHECK(p.ok() ? p->hdr == full->hdr : p.error() == full.error());
    }
    if (p) {
        FUZZ_CHECK(common->type == PacketType::kData && p->hdr.common == *common);
        check_decoded(in, *p, true);
    }
    if (full) {
        FUZZ_CHECK(common->type == PacketType::kData && full->hdr.common == *common);
        check_decoded(in, *full, false);
    }
    return 0;
}
