// fuzz/decode_rocev2.cc — libFuzzer target for the RoCEv2 baseline's codec
// (baselines/rocev2/packet.h).
//
// Decodes arbitrary bytes; when that succeeds, re-encodes and checks that the result
// decodes to the same headers and payload and is the input with its reserved bits, pad
// bytes and ICRC zeroed (the encoder writes them as zero, the decoder ignores them).
// Seeds in corpus/decode_rocev2/ were written once by hand from the IBTA layouts (not by
// gen_corpus.py, which covers the MetaRoCE codec): seed-valid-* decode, seed-bad-* do not.
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "baselines/rocev2/packet.h"
#include "fuzz/fuzz_check.h"

using namespace mroce;
using namespace mroce::rocev2;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto in = std::as_bytes(std::span(data, size));
    const auto d = decode(in);
    fuzz::last_input_accepted = d.ok();
    if (!d) return 0;
    const Opcode op = d->h.bth.opcode;
    FUZZ_CHECK(size == encoded_size(op, d->payload.size()));
    FUZZ_CHECK(d->payload.empty() || is_data(op));
    FUZZ_CHECK(d->h.bth.dest_qp <= kPsnMask && d->h.bth.psn <= kPsnMask);

    std::vector<std::byte> out(size);
    const auto n = encode(d->h, d->payload, out);
    FUZZ_CHECK(n.ok() && *n == size);
    const auto again = decode(out);
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(again->payload.size() == d->payload.size());
    FUZZ_CHECK(d->payload.empty() ||
               std::memcmp(again->payload.data(), d->payload.data(), d->payload.size()) == 0);

    // Canonical form: reserved byte 4, the 7 reserved bits after AckReq, the CNP's 16
    // reserved bytes, the padding and the ICRC come back as zero; all else is unchanged.
    std::vector<std::byte> want(in.begin(), in.end());
    want[4] = std::byte{0};
    want[8] &= std::byte{0x80};
    const size_t pad_from = op == Opcode::kCnp ? kBthSize : header_size(op) + d->payload.size();
    for (size_t i = pad_from; i < size; ++i) want[i] = std::byte{0};
    FUZZ_CHECK(want == out);
    return 0;
}
