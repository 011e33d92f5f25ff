// fuzz/decode_control.cc — libFuzzer target for the common header and the control packets:
// NACK, HELLO / HELLO_ACK, PROBE, CLOSE and RETRY (docs/spec.md §3.1, §3.4–§3.8), and the
// version-1 HELLO decoder that exists only to refuse a version-1 peer ([VER-1]).
//
// Runs every decoder over the same bytes. Each one that succeeds must re-encode to bytes
// that decode to an equal struct and equal the input with its reserved bytes zeroed. At most
// one typed decoder may accept a datagram, and when the common header is rejected every
// decoder must fail with the same error.
#include <cstdint>
#include <span>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "wire/buffer.h"
#include "wire/codec_internal.h"
#include "wire/control.h"

using namespace mroce;
using namespace mroce::wire;

namespace {

// round_trip re-encodes a decoded packet with `encode`, decodes that with `decode` and
// checks the result.
template <typename Packet, typename Encode, typename Decode>
void round_trip(std::span<const std::byte> in, const Packet& p, size_t packet_size, Encode encode,
                Decode decode, std::initializer_list<fuzz::Reserved> reserved) {
    FUZZ_CHECK(in.size() == packet_size);  // [WIRE-5]
    std::vector<std::byte> out(packet_size);
    const auto n = encode(p, std::span<std::byte>(out));
    FUZZ_CHECK(n.ok() && *n == packet_size);
    const auto q = decode(std::span<const std::byte>(out));
    FUZZ_CHECK(q.ok());
    FUZZ_CHECK(*q == p);
    fuzz::check_canonical(in, out, reserved);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto in = std::as_bytes(std::span(data, size));

    const auto common = decode_common_header(in);
    const auto nack = decode_nack(in);
    const auto hello = decode_hello(in);
    const auto probe = decode_probe(in);
    const auto close = decode_close(in);
    const auto retry = decode_retry(in);
    fuzz::last_input_accepted = nack.ok() || hello.ok() || probe.ok() || close.ok() || retry.ok();

    // The version-1 HELLO: only ever 48 bytes of version 1, and then it is the same
    // packet as version 2's HELLO without the cookie.
    if (const auto v1 = decode_hello_v1(in)) {
        FUZZ_CHECK(in.size() == kHelloV1Size && static_cast<uint8_t>(in[0]) == kLegacyVersion);
        FUZZ_CHECK(common.error() == Error::kBadVersion);
        std::vector<std::byte> out(kHelloV1Size);
        FUZZ_CHECK(encode_hello_v1(*v1, out).ok());
        const auto again = decode_hello_v1(out);
        FUZZ_CHECK(again.ok() && *again == *v1);
        fuzz::check_canonical(in, out, {fuzz::kCommonReserved});
    }

    if (!common) {
        // §3.1: the common header's verdict comes first for every decoder.
        FUZZ_CHECK(nack.error() == common.error());
        FUZZ_CHECK(hello.error() == common.error());
        FUZZ_CHECK(probe.error() == common.error());
        FUZZ_CHECK(close.error() == common.error());
        FUZZ_CHECK(retry.error() == common.error());
        return 0;
    }

    // The common header alone: re-encode its 16 bytes.
    {
        std::vector<std::byte> out(kCommonHeaderSize);
        Writer w(out);
        write_common_header(w, *common, common->type);
        FUZZ_CHECK(w.ok() && w.pos() == kCommonHeaderSize);
        const auto again = decode_common_header(out);
        FUZZ_CHECK(again.ok() && *again == *common);
        fuzz::check_canonical(in.first(kCommonHeaderSize), out, {fuzz::kCommonReserved});
    }

    FUZZ_CHECK(int{nack.ok()} + int{hello.ok()} + int{probe.ok()} + int{close.ok()} +
                   int{retry.ok()} <= 1);

    if (nack) {
        FUZZ_CHECK(common->type == PacketType::kNack && nack->common == *common);
        FUZZ_CHECK(is_known_nack_reason(static_cast<uint8_t>(nack->reason)));  // [NACK-2]
        round_trip(in, *nack, kNackSize, encode_nack, decode_nack,
                   {fuzz::kCommonReserved, {17, 1}, {21, 3}});
    }
    if (hello) {
        FUZZ_CHECK(common->type == PacketType::kHello || common->type == PacketType::kHelloAck);
        FUZZ_CHECK(hello->common == *common);
        // [CONN-3]
        FUZZ_CHECK(hello->num_paths >= 1 && hello->num_paths <= kMaxPaths);
        FUZZ_CHECK(hello->max_payload >= kMinMaxPayload && hello->max_payload <= kMaxMaxPayload);
        round_trip(in, *hello, kHelloSize, encode_hello, decode_hello, {fuzz::kCommonReserved});
    }
    if (probe) {
        FUZZ_CHECK(common->type == PacketType::kProbe && probe->common == *common);
        round_trip(in, *probe, kProbeSize, encode_probe, decode_probe,
                   {fuzz::kCommonReserved, {19, 1}});
    }
    if (close) {
        FUZZ_CHECK(common->type == PacketType::kClose && close->common == *common);
        round_trip(in, *close, kCloseSize, encode_close, decode_close,
                   {fuzz::kCommonReserved, {20, 4}});
    }
    if (retry) {
        FUZZ_CHECK(common->type == PacketType::kRetry && retry->common == *common);
        round_trip(in, *retry, kRetrySize, encode_retry, decode_retry, {fuzz::kCommonReserved});
    }
    return 0;
}
