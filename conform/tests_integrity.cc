// conform/tests_integrity.cc — the integrity trailer of capability INTEGRITY (spec §4.9).
// The peer announces the bit; a target that announces it too must drop DATA whose trailer
// is wrong or missing without acknowledging it ([INT-3]), take the same DATA with a good
// trailer, and put a valid trailer on every packet it sends (the peer checks each one and
// records a violation otherwise, [INT-2]). A target that does not announce the bit must
// not use the trailer ([INT-4]): its packets are then checked without one, as usual.
#include "conform/checks.h"
#include "conform/fixture.h"
#include "wire/integrity.h"

namespace mroce::conform {
namespace {

using namespace std::chrono_literals;
using wire::Opcode;
using wire::PacketType;

void integrity_trailer(Context& ctx) {
    Fixture f(ctx);
    f.peer.me().capabilities = wire::kCapIntegrity;  // [INT-1]: we announce it
    f.establish();
    if (!(f.peer.remote().capabilities & wire::kCapIntegrity))
        throw Skipped("the target does not announce INTEGRITY (integrity_check off); [INT-7] allows that");
    check(f.peer.integrity(), "[INT-1] both announced INTEGRITY but the peer does not use it");
    const Region region = f.reg_mr(16384, {"local_write", "remote_write"});
    Message m = f.message(Opcode::kWrite, pattern(1000, 171));
    m.rkey = region.rkey;
    m.remote_addr = region.addr;
    const Segment seg = f.peer.cut(m)[0];
    const auto before = f.endpoint_counter("bad_integrity");
    auto untouched = [&] {
        for (auto b : f.read_mr(region, 0, m.body.size()))
            if (b != std::byte{0}) return false;
        return true;
    };

    // A DATA whose payload lost one bit after its trailer was computed.
    auto h = f.peer.next_header(seg);
    auto bytes = Peer::encode_data(h, seg.payload);
    const size_t len = bytes.size();
    bytes.resize(len + wire::kIntegritySize);
    wire::append_integrity(bytes, len);
    bytes[wire::kDataHeaderSize + 10] ^= std::byte{0x04};
    f.peer.send_unsealed(bytes);
    auto ack = f.barrier();  // the PROBE carries a good trailer (Peer::send_bytes)
    check(!covers(ack, h.path_psn), "[INT-3] DATA with a bad trailer (PSN {:#x}) was acknowledged",
          h.path_psn);
    f.no_nack("[INT-3] DATA with a bad trailer");
    check(untouched(), "[INT-3] bytes of DATA with a bad trailer reached memory");

    // The same DATA without any trailer: a missing trailer is a bad one.
    h = f.peer.next_header(seg);
    f.peer.send_unsealed(Peer::encode_data(h, seg.payload));
    ack = f.barrier();
    check(!covers(ack, h.path_psn), "[INT-3] DATA without a trailer (PSN {:#x}) was acknowledged",
          h.path_psn);
    f.no_nack("[INT-3] DATA without a trailer");
    check(untouched(), "[INT-3] bytes of DATA without a trailer reached memory");
    if (before) {
        const auto after = f.endpoint_counter("bad_integrity");
        check(after && *after == *before + 2, "[INT-3] [ERR-7] bad_integrity went {} -> {}", *before,
              after.value_or(0));
    }

    // Control: the same segment with a good trailer is acknowledged and written.
    const Sent good = f.peer.send_segment(seg);
    ack = f.barrier();
    check(covers(ack, good.psn), "[INT-2] DATA with a good trailer (PSN {:#x}) was not acknowledged",
          good.psn);
    check(f.read_mr(region, 0, m.body.size()) == m.body,
          "control: the WRITE with a good trailer was not written as sent");
    // Every ACK above passed the peer's trailer check ([INT-2]); a bad one is a violation.
    check(f.peer.trailers_checked() >= 3, "[INT-2] only {} target packets had their trailer checked",
          f.peer.trailers_checked());
}

}  // namespace

void add_integrity_tests(std::vector<TestCase>& out) {
    out.push_back({"integrity.trailer", "[INT-1] [INT-2] [INT-3] [ERR-7]",
                   "DATA with a bad or missing CRC32C trailer is dropped unacknowledged; with a "
                   "good one it is written; the target's packets carry valid trailers",
                   integrity_trailer});
}

}  // namespace mroce::conform
