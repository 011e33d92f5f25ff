// fuzz/connection.cc — two whole core::Endpoints through a scripted exchange, with the
// input choosing what happens to every datagram that crosses between them.
//
// Input: [config byte] [seed byte] [script length byte] [script] [fates]. The seed byte's
// top bit turns INTEGRITY off, its bit 6 SHORT_ACK (at B only, so it is not negotiated),
// its bit 5 COMPACT_DATA on (and bit 4 off again at B).
// - The script posts work (SEND, SEND_IMM, WRITE, WRITE_IMM, READ, both atomics, on two
//   streams, from either side; inline, fenced, as scatter/gather lists), posts receives,
//   runs the network, deregisters a region, changes a stream's limits, closes the
//   connection or destroys a stream.
// - The fates decide, for each datagram in the order the engines send them: deliver
//   (with jitter, so they reorder, and optionally CE-marked), drop, duplicate, delay, or
//   mutate: decode with wire/, set one field to a hostile value, encode again
//   (fuzz/packet_mutator.h) so it passes the decoders and reaches deep state.
// Time is simulated and every random choice of the engines comes from the seed byte, so
// an input replays exactly. Once the fates run out the network is clean and the run goes
// on until every posted work request has completed (bounded simulated time).
//
// Invariants (FUZZ_CHECK aborts; ASan/UBSan report on their own):
// 1. No byte outside the registered regions is written (guard bytes around each region),
//    and no byte of a region nobody may write (send sources, READ sources) changes.
// 2. After deregister_memory returns, the region is neither written nor read (it is
//    poisoned under ASan and compared with its snapshot at the end) [PLACE-25],
//    [PLACE-26], docs/ownership.md.
// 3. Every work request and receive completes at most once, in post order per stream
//    [PLACE-7]; a completion names a work request that was posted.
// 4. A success carries exactly the bytes sent: the receive buffer holds the SEND's bytes
//    (and nothing after them changed), a WRITE's target and a READ's destination hold the
//    source's bytes, an atomic returned the old value and left the right new one — unless
//    a mutation could have changed which bytes a message carries or where they go, or
//    could have reported a message delivered that was not (Effect in packet_mutator.h).
// 5. A completed receive or READ/atomic destination, and (when no mutation could aim a
//    message there) a delivered WRITE's target, is never written again [STREAM-4].
// 6. Every posted work request completes (success or error) within a bounded simulated
//    time on a clean network, and every receive once its connection has ended [ERR-1].
// 7. Resources stay bounded: connections and streams within their caps, heap growth of
//    one run under kHeapLimit.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "core/endpoint.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/fuzz_input.h"
#include "fuzz/packet_mutator.h"
#include "wire/integrity.h"

#if defined(__SANITIZE_ADDRESS__)
#define MROCE_FUZZ_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MROCE_FUZZ_ASAN 1
#endif
#endif

#ifdef MROCE_FUZZ_ASAN
#include <sanitizer/asan_interface.h>
extern "C" size_t __sanitizer_get_current_allocated_bytes();
#else
#include <malloc.h>
#define ASAN_POISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#define ASAN_UNPOISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#endif

namespace {

using namespace mroce;
using namespace std::chrono_literals;
using core::Status;
using core::WorkOpcode;
using fuzz::Input;

size_t heap_in_use() {
#ifdef MROCE_FUZZ_ASAN
    return __sanitizer_get_current_allocated_bytes();
#else
    return mallinfo2().uordblks;
#endif
}

constexpr size_t kHeapLimit = 64u << 20;   // invariant 7
constexpr Duration kCleanLimit = 10s;      // invariant 6: simulated time on a clean network
constexpr size_t kMaxSteps = 400'000;      // and steps, so a livelock ends the run too
constexpr size_t kMaxQueued = 4096;        // datagrams in flight; more are dropped
constexpr size_t kGuard = 64;
constexpr std::byte kGuardByte{0x5a};
constexpr std::byte kReclaimed{0xee};      // what the application wrote after a completion

// Each side's memory: four regions with guard bytes between and around them.
enum RegionKind : uint8_t {
    kSendSrc,   // local sources of sends; nobody writes it
    kRecvDst,   // receive buffers and READ/atomic destinations (LOCAL_WRITE)
    kWriteDst,  // the peer's WRITE targets and atomic slots (REMOTE_WRITE | ATOMIC)
    kReadSrc,   // the peer's READ source (REMOTE_READ); nobody writes it
    kRegions,
};
constexpr std::array<size_t, kRegions> kRegionLen{8 * 1024, 32 * 1024, 16 * 1024, 8 * 1024};
constexpr size_t kMaxRegionLen = 32 * 1024;

std::byte initial_byte(int side, int region, size_t off) {
    uint64_t x = (uint64_t(side) << 56) ^ (uint64_t(region) << 48) ^ off;
    x *= 0x9e3779b97f4a7c15ULL;
    return static_cast<std::byte>(x >> 57 | 0x80);  // never kGuardByte, never 0
}

// region_offset: where region r starts in a side's arena (after the guards before it).
constexpr size_t region_offset(int r) {
    size_t off = kGuard;
    for (int k = 0; k < r; ++k) off += kRegionLen[k] + kGuard;
    return off;
}
constexpr size_t kArenaLen = region_offset(kRegions);

// initial_arena: side i's memory before anything happened: guard bytes and each region's
// pattern. Built once; each run copies it, and the end checks compare against it.
const std::vector<std::byte>& initial_arena(int i) {
    static const std::array<std::vector<std::byte>, 2> images = [] {
        std::array<std::vector<std::byte>, 2> im;
        for (int side = 0; side < 2; ++side) {
            im[side].assign(kArenaLen, kGuardByte);
            for (int r = 0; r < kRegions; ++r)
                for (size_t o = 0; o < kRegionLen[r]; ++o)
                    im[side][region_offset(r) + o] = initial_byte(side, r, o);
        }
        return im;
    }();
    return images[i];
}

// first_difference: the offset of the first byte where [a, a + n) and [b, b + n) differ,
// or n (memcmp first: these checks run on every input).
size_t first_difference(const std::byte* a, const std::byte* b, size_t n) {
    if (std::memcmp(a, b, n) == 0) return n;
    size_t k = 0;
    while (a[k] == b[k]) ++k;
    return k;
}
const std::byte* reclaimed_bytes() {
    static const std::vector<std::byte> v(kMaxRegionLen, kReclaimed);
    return v.data();
}

// A slice of a region handed to one message; slices never overlap.
struct Slice {
    size_t off = 0, len = 0;
    enum class State : uint8_t { kPending, kReclaimed, kFree } state = State::kPending;
};

struct Region {
    std::byte* base = nullptr;
    size_t len = 0;
    uint32_t key = 0;
    bool live = true;
    size_t cursor = 0;
    std::vector<Slice> slices;
    std::vector<std::byte> snapshot;  // at deregistration
    // alloc hands out the next len bytes (8-aligned), or SIZE_MAX when full.
    size_t alloc(size_t n) {
        const size_t at = (cursor + 7) & ~size_t{7};
        if (at + n > len) return SIZE_MAX;
        cursor = at + n;
        slices.push_back(Slice{at, n, Slice::State::kPending});
        return slices.size() - 1;
    }
};

// A posted send work request and what its success must mean.
struct SendRec {
    WorkOpcode op;
    int stream;            // stream index 0/1
    uint32_t len = 0;
    size_t src_off = 0;    // in own kSendSrc (sends, writes) or peer's kReadSrc (READ)
    size_t dst_slice = SIZE_MAX;     // own kRecvDst (READ, atomic result)
    size_t target_slice = SIZE_MAX;  // peer's kWriteDst (WRITE, atomic slot)
    uint32_t consume_index = UINT32_MAX;  // k-th receive-consuming message of its stream
    uint32_t imm = 0;
    uint64_t add_or_compare = 0, swap = 0;
    bool done = false;
    Status status = Status::kSuccess;
};

struct RecvRec {
    int stream;
    size_t slice;
    uint32_t len;
    uint32_t index;  // k-th receive of its stream
    bool done = false;
};

struct Side {
    std::unique_ptr<core::Endpoint> ep;
    uint32_t pd = 0;
    std::vector<std::byte> arena;
    std::array<Region, kRegions> regions;
    std::array<uint32_t, 2> streams{};
    std::array<bool, 2> stream_live{true, true};
    std::vector<SendRec> sends;
    std::vector<RecvRec> recvs;
    std::array<std::vector<size_t>, 2> consuming;  // per stream: send indices, in post order
    std::array<uint32_t, 2> recvs_posted{};        // per stream
    std::array<size_t, 2> last_send_done{SIZE_MAX, SIZE_MAX};
    std::array<size_t, 2> last_recv_done{SIZE_MAX, SIZE_MAX};
};

struct InFlight {
    int to;
    std::vector<std::byte> bytes;
    PacketMeta meta;
};

#define CHECKF(cond, ...)                                    \
    do {                                                     \
        if (!(cond)) {                                       \
            std::fprintf(stderr, "connection fuzz: " __VA_ARGS__); \
            std::fprintf(stderr, "\n");                      \
            FUZZ_CHECK(cond);                                \
        }                                                    \
    } while (0)

class Run {
public:
    Run(Input config, Input script, Input fates) : script_(script), fates_(fates) {
        const uint8_t c = config.u8();
        const uint8_t seed = config.u8();
        for (int i = 0; i < 2; ++i) {
            core::EndpointConfig cfg;
            cfg.num_paths = std::array<uint16_t, 4>{1, 2, 4, 8}[(c >> 3) & 3];
            cfg.max_payload = i == 0 ? 256 : std::array<uint32_t, 4>{256, 512, 1024, 256}[(c >> 5) & 3];
            cfg.forced_isn = (c & 1) ? 0xFFFFFF80u : 0;
            cfg.rate_hint = !(c & 2);
            cfg.pacing = !(c & 2);
            cfg.congestion_control = (c & 4) ? core::EndpointConfig::Cc::kFixed
                                             : core::EndpointConfig::Cc::kAimd;
            cfg.peer_dead_timeout = 20ms;
            cfg.max_pto = 10ms;
            cfg.rnr_retry = 3;
            cfg.rnr_delay_us = 50;
            cfg.retry_limit = 8;
            cfg.max_connections = 8;
            cfg.max_streams = 8;
            cfg.max_outstanding_wrs = 64;
            // [INT-1]: the integrity trailer on (the default) unless the seed's top bit says off.
            cfg.integrity_check = !(seed & 0x80);
            // [ACK-21]: SHORT_ACK negotiated (the default) unless the seed's bit 6 says B does
            // not announce it: then both send full ACKs, and a mutated SHORT bit is undefined.
            cfg.short_acks = i == 0 || !(seed & 0x40);
            // [DATA-9]: COMPACT_DATA announced by A when bit 5 is set, and by B too unless
            // bit 4 is: negotiated, one-sided (a mutated COMPACT bit is then undefined) or off.
            cfg.compact_data = (seed & 0x20) && (i == 0 || !(seed & 0x10));
            if (c & 0x80) {
                cfg.max_rd_atomic = 2;
                cfg.max_dest_rd_atomic = 1;
            }
            FUZZ_CHECK(core::config_error(cfg).empty());
            const Address addr = Address::ipv4(0x0a000001 + i, 4797);
            Side& s = side_[i];
            s.ep = std::make_unique<core::Endpoint>(cfg, addr, seed * 2 + i + 1);
            s.pd = s.ep->alloc_pd();
            s.arena = initial_arena(i);
            static constexpr std::array<uint32_t, kRegions> kAccess{
                core::access::kLocalWrite, core::access::kLocalWrite,
                core::access::kRemoteWrite | core::access::kRemoteAtomic, core::access::kRemoteRead};
            for (int r = 0; r < kRegions; ++r) {
                Region& rg = s.regions[r];
                rg.base = s.arena.data() + region_offset(r);
                rg.len = kRegionLen[r];
                auto k = s.ep->register_memory(s.pd, rg.base, rg.len, kAccess[r]);
                FUZZ_CHECK(k.ok());
                rg.key = k->rkey;
            }
        }
        // Two stream pairs: the ids are exchanged out of band, as QP numbers are.
        for (int st = 0; st < 2; ++st)
            for (int i = 0; i < 2; ++i) {
                auto id = side_[i].ep->reserve_stream(side_[i].pd);
                FUZZ_CHECK(id.ok());
                side_[i].streams[st] = *id;
            }
        for (int st = 0; st < 2; ++st)
            for (int i = 0; i < 2; ++i) {
                FUZZ_CHECK(side_[i].ep->bind_stream(side_[i].streams[st], side_[1 - i].ep->local_address(),
                                                    side_[1 - i].streams[st], now_) == Error::kOk);
                for (int k = 0; k < 4; ++k) post_recv(i, st, 2048);
            }
        heap_base_ = heap_in_use();
    }

    ~Run() {
        // The engines go first; the memory they named is the arena (unpoisoned for its
        // owner, the vector).
        for (Side& s : side_) s.ep.reset();
        for (Side& s : side_) ASAN_UNPOISON_MEMORY_REGION(s.arena.data(), s.arena.size());
    }

    void execute() {
        while (!script_.empty()) command();
        // The rest of the fates, then a clean network until every work request is done.
        while (!fates_.empty() && steps_ < kMaxSteps && step()) {}
        fates_ = Input();
        settle();
        if (std::getenv("MROCE_FUZZ_VERBOSE") && all_done()) summary();
        check_final();
    }

    // summary: what the run did (MROCE_FUZZ_VERBOSE=1), to see what an input exercises.
    void summary() const {
        std::fprintf(stderr, "steps %zu, simulated %lld us, %zu mutations, tainted %d/%d\n", steps_,
                     static_cast<long long>(to_ns(now_) / 1000), mutations_, tainted_[0], tainted_[1]);
        for (int i = 0; i < 2; ++i) {
            const Side& s = side_[i];
            std::fprintf(stderr, "side %d: connection %s;", i, connection_live(i) ? "live" : "ended");
            for (const SendRec& r : s.sends)
                std::fprintf(stderr, " op%d/%u:%s", static_cast<int>(r.op), r.len,
                             r.done ? core::to_string(r.status) : "pending");
            size_t recv_done = 0;
            for (const RecvRec& r : s.recvs) recv_done += r.done;
            std::fprintf(stderr, "; receives %zu/%zu done\n", recv_done, s.recvs.size());
            const core::Connection* c =
                s.ep->connection(s.ep->connection_to(side_[1 - i].ep->local_address()));
            if (c) {
                const core::ConnectionStats& cs = c->stats();
                std::fprintf(stderr,
                             "  conn %08x state %d: sent %llu recv %llu retx %llu malformed %llu "
                             "oow %llu stale %llu orphan %llu nacks %llu/%llu deferred %llu caps%s%s%s%s\n",
                             c->id(), static_cast<int>(c->state()),
                             (unsigned long long)cs.messages_sent, (unsigned long long)cs.messages_received,
                             (unsigned long long)cs.retransmits, (unsigned long long)cs.malformed,
                             (unsigned long long)cs.out_of_window, (unsigned long long)cs.stale_duplicates,
                             (unsigned long long)cs.orphan_responses, (unsigned long long)cs.nacks_sent,
                             (unsigned long long)cs.nacks_received, (unsigned long long)cs.requests_deferred,
                             c->integrity() ? " integrity" : "", c->coalesce() ? " coalesce" : "",
                             c->short_acks() ? " short_acks" : "", c->compact_data() ? " compact_data" : "");
            }
            for (uint32_t id : s.streams) {
                const core::Stream* st = s.ep->stream(id);
                if (!st) continue;
                std::fprintf(stderr,
                             "  stream %u: tx %zu next %u acked %u rd_out %u failed %d | delivered %u "
                             "posted_front %u rx_failed %d@%u answers %zu\n",
                             id, st->tx.size(), st->next_msg_seq, st->acked_seq, st->rd_outstanding,
                             st->failed, st->delivered_seq, st->posted_front_seq, st->rx_failed,
                             st->rx_fail_seq, st->answers.size());
                for (const core::TxMessage& m : st->tx)
                    std::fprintf(stderr,
                                 "    msg %u op %d len %u done %d resp_done %d acked %u/%u "
                                 "next_new %u rnr_wait %d probes %u\n",
                                 m.msg_seq, static_cast<int>(m.opcode), m.msg_len, m.done,
                                 m.resp_done, m.path_acked, m.nseg, m.next_new_seg, m.rnr_wait,
                                 m.stream_probes);
            }
        }
    }

private:
    // ---- the script -------------------------------------------------------------------
    void command() {
        const uint8_t cmd = script_.u8();
        switch (cmd % 8) {
            case 0:
            case 1:
            case 2: {
                const uint8_t a = script_.u8();  // one statement each: a fixed order
                const uint8_t lb = script_.u8();
                post_send(a, lb, script_.u8());
                break;
            }
            case 3: {
                const uint8_t a = script_.u8();
                const uint8_t lb = script_.u8();
                for (int k = 0; k <= (a >> 2) % 4; ++k) post_recv(a & 1, (a >> 1) & 1, length(lb), lb & 0x80);
                break;
            }
            case 4: run_steps(1 + script_.u8()); break;
            case 5: deregister(script_.u8()); break;
            case 6: {
                const uint8_t a = script_.u8();
                const int i = a & 1, st = (a >> 1) & 1;
                if ((a >> 2) % 8 == 0) {
                    (void)side_[i].ep->close_connection(
                        side_[i].ep->connection_to(side_[1 - i].ep->local_address()), now_);
                } else if ((a >> 2) % 8 == 1 && side_[i].stream_live[st]) {
                    FUZZ_CHECK(side_[i].ep->destroy_stream(side_[i].streams[st], now_) == Error::kOk);
                    side_[i].stream_live[st] = false;
                    drain_events();
                } else if ((a >> 2) % 8 == 2 && side_[i].stream_live[st]) {
                    set_limits(i, st, script_.u8());
                } else {
                    idle_until(now_ + Duration{(1 + int64_t{a >> 2}) * 20'000});
                }
                break;
            }
            default: run_steps(200); break;
        }
    }

    static uint32_t length(uint8_t b) {
        static constexpr std::array<uint32_t, 16> kLen{0,   1,   8,   100, 255, 256,  257,  511,
                                                       512, 513, 1000, 1024, 2048, 2049, 3000, 4096};
        return kLen[b % kLen.size()];
    }

    void post_send(uint8_t a, uint8_t lb, uint8_t extra) {
        const int i = a & 1, st = (a >> 1) & 1;
        Side& me = side_[i];
        Side& peer = side_[1 - i];
        if (!me.stream_live[st]) return;
        static constexpr std::array<WorkOpcode, 7> kOps{
            WorkOpcode::kSend, WorkOpcode::kSendImm, WorkOpcode::kWrite, WorkOpcode::kWriteImm,
            WorkOpcode::kRead, WorkOpcode::kAtomicFetchAdd, WorkOpcode::kAtomicCompareSwap};
        SendRec r;
        r.op = kOps[(a >> 2) % kOps.size()];
        r.stream = st;
        r.len = length(lb);
        r.imm = 0x1000u * extra + lb;
        const bool atomic = r.op == WorkOpcode::kAtomicFetchAdd || r.op == WorkOpcode::kAtomicCompareSwap;
        core::SendWr wr;
        wr.wr_id = me.sends.size();
        wr.opcode = r.op;
        wr.imm = r.imm;
        wr.fence = (a & 0x20) != 0;
        if (atomic) r.len = 8;
        if (r.op == WorkOpcode::kRead) {
            r.src_off = std::min<size_t>(size_t{extra} * 61, kRegionLen[kReadSrc] - r.len);
            r.dst_slice = me.regions[kRecvDst].alloc(r.len);
            if (r.dst_slice == SIZE_MAX) return;
            wr.local_addr = addr(me.regions[kRecvDst], me.regions[kRecvDst].slices[r.dst_slice].off);
            wr.lkey = me.regions[kRecvDst].key;
            wr.remote_addr = addr(peer.regions[kReadSrc], r.src_off);
            wr.rkey = peer.regions[kReadSrc].key;
        } else if (atomic) {
            r.dst_slice = me.regions[kRecvDst].alloc(8);
            r.target_slice = peer.regions[kWriteDst].alloc(8);
            if (r.dst_slice == SIZE_MAX || r.target_slice == SIZE_MAX) return;
            wr.local_addr = addr(me.regions[kRecvDst], me.regions[kRecvDst].slices[r.dst_slice].off);
            wr.lkey = me.regions[kRecvDst].key;
            wr.remote_addr = addr(peer.regions[kWriteDst], peer.regions[kWriteDst].slices[r.target_slice].off);
            wr.rkey = peer.regions[kWriteDst].key;
            const uint64_t old = initial_u64(1 - i, peer.regions[kWriteDst].slices[r.target_slice].off);
            // COMPARE_SWAP compares equal half the time.
            r.add_or_compare = r.op == WorkOpcode::kAtomicFetchAdd ? 0x0101010101010101ULL * (extra | 1)
                                                                   : ((lb & 1) ? old : old ^ extra);
            r.swap = 0x1122334455667788ULL ^ extra;
            wr.compare_add = r.add_or_compare;
            wr.swap = r.swap;
        } else {
            r.src_off = std::min<size_t>(size_t{extra} * 29, kRegionLen[kSendSrc] - r.len);
            wr.local_addr = addr(me.regions[kSendSrc], r.src_off);
            wr.lkey = me.regions[kSendSrc].key;
            // [PLACE-23]: small sends go inline one time in four.
            wr.inline_data = r.len <= 256 && (a & 0x40) && (lb & 0x40);
            if (r.op == WorkOpcode::kWrite || r.op == WorkOpcode::kWriteImm) {
                r.target_slice = peer.regions[kWriteDst].alloc(r.len);
                if (r.target_slice == SIZE_MAX) return;
                wr.remote_addr = addr(peer.regions[kWriteDst], peer.regions[kWriteDst].slices[r.target_slice].off);
                wr.rkey = peer.regions[kWriteDst].key;
            }
        }
        wr.length = r.len;
        // [PLACE-22]: the same bytes as a two-piece scatter list when the length byte's top
        // bit is set (atomics take one piece only, and refuse a list).
        std::array<core::Sge, 2> sg;
        if ((lb & 0x80) && split(wr.local_addr, wr.length, wr.lkey, sg)) {
            wr.sg_list = sg.data();
            wr.num_sge = 2;
        }
        if (me.ep->post_send(me.streams[st], wr, now_) != Error::kOk) {
            // Refused at once (stream or connection failed): nothing to complete. Its
            // slices stay pending, which only relaxes the end checks of their bytes.
            return;
        }
        if (r.op == WorkOpcode::kSend || r.op == WorkOpcode::kSendImm || r.op == WorkOpcode::kWriteImm) {
            r.consume_index = static_cast<uint32_t>(me.consuming[st].size());
            me.consuming[st].push_back(me.sends.size());
        }
        me.sends.push_back(r);
    }

    // split: [addr, addr + len) as two adjacent pieces, a third and the rest: the engine
    // must treat them as one buffer, so every check of the bytes stays as it is.
    static bool split(uint64_t addr, uint32_t len, uint32_t lkey, std::array<core::Sge, 2>& sg) {
        if (len < 2) return false;
        const uint32_t first = len / 3 + 1;
        sg[0] = core::Sge{addr, first, lkey};
        sg[1] = core::Sge{addr + first, len - first, lkey};
        return true;
    }

    void post_recv(int i, int st, uint32_t len, bool pieces = false) {
        Side& me = side_[i];
        if (!me.stream_live[st]) return;
        Region& rg = me.regions[kRecvDst];
        const size_t slice = rg.alloc(len);
        if (slice == SIZE_MAX) return;
        core::RecvWr wr;
        wr.wr_id = (uint64_t{1} << 32) | me.recvs.size();
        wr.addr = addr(rg, rg.slices[slice].off);
        wr.length = len;
        wr.lkey = rg.key;
        std::array<core::Sge, 2> sg;
        if (pieces && split(wr.addr, wr.length, wr.lkey, sg)) {
            wr.sg_list = sg.data();
            wr.num_sge = 2;
        }
        if (me.ep->post_recv(me.streams[st], wr, now_) != Error::kOk) return;
        me.recvs.push_back(RecvRec{st, slice, len, me.recvs_posted[st]++});
    }

    // set_limits changes a stream's [STREAM-12] settings mid-run: the peer access it
    // grants (a WRITE, READ or atomic it no longer allows is refused), READ/atomic depth
    // on both sides, retries and the traffic class.
    void set_limits(int i, int st, uint8_t b) {
        core::Endpoint& ep = *side_[i].ep;
        core::StreamLimits l = ep.default_stream_limits();
        l.remote_access = (b & 1 ? core::access::kRemoteWrite : 0) | (b & 2 ? core::access::kRemoteRead : 0) |
                          (b & 4 ? core::access::kRemoteAtomic : 0);
        l.max_rd_atomic = 1 + ((b >> 3) & 3);
        l.max_dest_rd_atomic = 1 + ((b >> 5) & 1);
        l.retry_limit = (b & 0x40) ? 1 : l.retry_limit;
        l.traffic_class = b >> 5;
        FUZZ_CHECK(ep.set_stream_limits(side_[i].streams[st], l) == Error::kOk);
    }

    void deregister(uint8_t a) {
        Side& s = side_[a & 1];
        Region& rg = s.regions[(a & 2) ? kReadSrc : kWriteDst];
        if (!rg.live) return;
        FUZZ_CHECK(s.ep->deregister_memory(rg.key) == Error::kOk);
        rg.live = false;
        rg.snapshot.assign(rg.base, rg.base + rg.len);
        // From now on the engine may neither read nor write it (docs/ownership.md).
        ASAN_POISON_MEMORY_REGION(rg.base, rg.len);
    }

    // initial_u64: the value an atomic slot of side i's kWriteDst holds before any atomic
    // (each atomic has a fresh slot), read in memory order as the engine reads it.
    static uint64_t initial_u64(int i, size_t off) {
        std::array<std::byte, 8> b{};
        for (size_t k = 0; k < 8; ++k) b[k] = initial_byte(i, kWriteDst, off + k);
        return load_u64(b.data());
    }
    static uint64_t addr(const Region& rg, size_t off) { return reinterpret_cast<uint64_t>(rg.base + off); }
    static uint64_t load_u64(const std::byte* p) {
        uint64_t v;
        std::memcpy(&v, p, 8);
        return v;
    }

    // ---- the network ------------------------------------------------------------------
    void run_steps(int n) {
        for (int k = 0; k < n && steps_ < kMaxSteps; ++k)
            if (!step()) break;
    }

    void idle_until(Time t) {
        while (steps_ < kMaxSteps) {
            if (next_event() > t) {
                now_ = std::max(now_, t);
                return;
            }
            if (!step()) return;
        }
    }

    Time next_event() const {
        Time t = queue_.empty() ? kNever : queue_.begin()->first.first;
        for (const Side& s : side_) t = std::min(t, s.ep->next_deadline());
        return t;
    }

    // step: collect what the engines send, move time to the next event, deliver what is
    // due and run due timers. false when nothing will ever happen again.
    bool step() {
        ++steps_;
        const bool sent = collect();
        const Time t = next_event();
        if (t == kNever) return sent;
        bool progressed = sent;
        if (t > now_) {
            now_ = t;
            progressed = true;
        }
        while (!queue_.empty() && queue_.begin()->first.first <= now_) {
            InFlight f = std::move(queue_.begin()->second);
            queue_.erase(queue_.begin());
            side_[f.to].ep->on_datagram(f.bytes, f.meta, now_);
            progressed = true;
        }
        for (Side& s : side_)
            if (s.ep->next_deadline() <= now_) s.ep->on_timeout(now_);
        drain_events();
        stuck_ = progressed ? 0 : stuck_ + 1;
        // An engine whose deadline stays due after on_timeout, sending nothing, would spin
        // its driver.
        CHECKF(stuck_ < 1000, "a deadline stays due at %lld ns and nothing happens",
               static_cast<long long>(to_ns(now_)));
        if (steps_ % 64 == 0) check_resources();
        return true;
    }

    bool collect() {
        bool any = false;
        std::vector<std::byte> buf;
        for (int i = 0; i < 2; ++i) {
            Side& s = side_[i];
            buf.resize(s.ep->max_datagram_size());
            for (int k = 0; k < 256; ++k) {
                PacketMeta m;
                const size_t n = s.ep->poll_transmit(buf, m, now_);
                if (n == 0) break;
                any = true;
                route(i, std::vector<std::byte>(buf.begin(), buf.begin() + static_cast<ptrdiff_t>(n)), m);
            }
        }
        return any;
    }

    void enqueue(Duration delay, int to, std::vector<std::byte> bytes, const PacketMeta& m) {
        if (queue_.size() >= kMaxQueued) return;
        queue_.emplace(std::pair{now_ + delay, seq_++}, InFlight{to, std::move(bytes), m});
    }

    // has_trailer: side `from` sent d on a connection that negotiated INTEGRITY, in a type
    // that carries the trailer ([INT-2]).
    bool has_trailer(int from, const std::vector<std::byte>& d, const PacketMeta& m) const {
        const core::Endpoint& ep = *side_[from].ep;
        const core::Connection* c = ep.connection(ep.connection_to(m.dst));
        return c && c->integrity() && d.size() >= wire::kCommonHeaderSize + wire::kIntegritySize &&
               wire::carries_integrity(static_cast<wire::PacketType>(static_cast<uint8_t>(d[1])));
    }

    // route decides the fate of one datagram from side `from`.
    void route(int from, std::vector<std::byte> bytes, PacketMeta m) {
        // Only an endpoint's own address reaches it: a HELLO that announced another port
        // gets its answers sent where no endpoint listens.
        int to = -1;
        for (int i = 0; i < 2; ++i)
            if (m.dst == side_[i].ep->local_address()) to = i;
        if (to < 0) return;
        const uint8_t f = fates_.u8();
        const Duration base = 1us;
        switch (f % 8) {
            default:  // deliver, with up to 3.75 us of jitter; CE-marked if the top bit is set
                if (f & 0x80) m.ecn = ecn::kCe;
                enqueue(base + Duration{((f >> 3) & 15) * 250}, to, std::move(bytes), m);
                break;
            case 4: break;  // drop
            case 5: {       // duplicate: a second copy up to 255 us later
                enqueue(base, to, bytes, m);
                enqueue(base + Duration{int64_t{fates_.u8()} * 1000}, to, std::move(bytes), m);
                break;
            }
            case 6:  // delay: up to 6.5 ms, overtaken by everything after it
                enqueue(base + Duration{int64_t{fates_.u16()} * 100}, to, std::move(bytes), m);
                break;
            case 7: {  // mutate one field, re-encoded; the original too when bit 3 is set
                std::vector<std::byte> copy = bytes;
                // A hostile peer computes the integrity trailer ([INT-2]) of what it sends:
                // the field is changed behind it and the trailer made good again, so the
                // packet reaches the connection. (A raw bit flip then models corruption in
                // flight, which the receiver's check catches.)
                const bool sealed = has_trailer(from, copy, m);
                if (sealed) copy.resize(copy.size() - wire::kIntegritySize);
                const fuzz::Effect e = fuzz::mutate_datagram(copy, fates_, context());
                if (sealed) {
                    const size_t n = copy.size();
                    copy.resize(n + wire::kIntegritySize);
                    wire::append_integrity(copy, n);
                }
                taint(e, from, to);
                if (verbose_) log_mutation(from, bytes, copy, e);
                ++mutations_;
                if (f & 8) enqueue(base, to, std::move(bytes), m);
                enqueue(base + Duration{int64_t{fates_.u8()} * 100}, to, std::move(copy), m);
                break;
            }
        }
    }

    // log_mutation prints which bytes a mutation changed (MROCE_FUZZ_VERBOSE=1).
    void log_mutation(int from, const std::vector<std::byte>& before,
                      const std::vector<std::byte>& after, fuzz::Effect e) const {
        std::fprintf(stderr, "%8lld ns: %d->%d type %d effect %d:", static_cast<long long>(to_ns(now_)),
                     from, 1 - from, before.size() > 1 ? static_cast<int>(before[1]) : -1,
                     static_cast<int>(e));
        for (size_t k = 0; k < std::max(before.size(), after.size()); ++k) {
            const int b = k < before.size() ? static_cast<int>(before[k]) : -1;
            const int a = k < after.size() ? static_cast<int>(after[k]) : -1;
            if (a != b) std::fprintf(stderr, " [%zu] %d->%d", k, b, a);
        }
        std::fprintf(stderr, "\n");
    }

    // taint records that a mutation may make a message of that direction carry other
    // bytes, land elsewhere or be reported delivered when it was not (invariant 4, 5).
    void taint(fuzz::Effect e, int from, int to) {
        switch (e) {
            case fuzz::Effect::kPath: break;
            case fuzz::Effect::kPlacement:
            case fuzz::Effect::kSequence: tainted_[from] = true; break;
            case fuzz::Effect::kDelivery: tainted_[to] = true; break;
        }
    }

    // context: the real values of this run that hostile values are drawn near.
    const std::vector<uint64_t>& context() {
        ctx_.clear();
        for (int i = 0; i < 2; ++i) {
            const Side& s = side_[i];
            for (uint32_t id : s.streams) ctx_.push_back(id);
            for (const Region& rg : s.regions) {
                ctx_.push_back(rg.key);
                ctx_.push_back(addr(rg, 0));
                ctx_.push_back(addr(rg, rg.len - 8));
                ctx_.push_back(addr(rg, rg.len));
            }
            if (const core::Connection* c =
                    s.ep->connection(s.ep->connection_to(side_[1 - i].ep->local_address()))) {
                ctx_.push_back(c->id());
                ctx_.push_back(c->token());
                ctx_.push_back(c->peer_conn_id());
                for (uint16_t p = 0; p < c->num_paths(); ++p) ctx_.push_back(c->tx_path(p).next_psn);
            }
            for (uint32_t st : s.streams)
                if (const core::Stream* sp = s.ep->stream(st)) {
                    ctx_.push_back(sp->next_msg_seq);
                    ctx_.push_back(sp->delivered_seq);
                    ctx_.push_back(sp->posted_front_seq);
                    ctx_.push_back(sp->acked_seq);
                }
        }
        for (uint64_t v : {uint64_t{256}, uint64_t{512}, uint64_t{1024}, uint64_t{4096}, uint64_t{9000},
                           uint64_t{4797}, uint64_t{kRegionLen[kRecvDst]}})
            ctx_.push_back(v);
        return ctx_;
    }

    // ---- completions ------------------------------------------------------------------
    void drain_events() {
        for (int i = 0; i < 2; ++i)
            while (auto e = side_[i].ep->poll_event())
                if (e->kind == core::EventKind::kCompletion) on_completion(i, e->completion);
    }

    int stream_index(const Side& s, uint32_t id) const {
        for (int st = 0; st < 2; ++st)
            if (s.streams[st] == id) return st;
        return -1;
    }

    void on_completion(int i, const core::Completion& c) {
        Side& me = side_[i];
        const int st = stream_index(me, c.stream);
        CHECKF(st >= 0, "side %d: completion for unknown stream %u", i, c.stream);
        if (c.wr_id >> 32) {
            const size_t k = c.wr_id & 0xffffffffu;
            CHECKF(k < me.recvs.size(), "side %d: completion of a receive never posted", i);
            RecvRec& r = me.recvs[k];
            CHECKF(!r.done, "side %d: receive %zu completed twice", i, k);
            CHECKF(r.stream == st, "side %d: receive %zu completed on the wrong stream", i, k);
            CHECKF(me.last_recv_done[st] == SIZE_MAX || me.last_recv_done[st] < k,
                   "side %d: receive %zu completed out of order [PLACE-7]", i, k);
            me.last_recv_done[st] = k;
            r.done = true;
            on_receive(i, r, c);
            return;
        }
        const size_t k = c.wr_id;
        CHECKF(k < me.sends.size(), "side %d: completion of a work request never posted", i);
        SendRec& r = me.sends[k];
        CHECKF(!r.done, "side %d: work request %zu completed twice", i, k);
        CHECKF(r.stream == st, "side %d: work request %zu completed on the wrong stream", i, k);
        CHECKF(c.opcode == r.op, "side %d: work request %zu completed with another opcode", i, k);
        CHECKF(me.last_send_done[st] == SIZE_MAX || me.last_send_done[st] < k,
               "side %d: work request %zu completed out of order [PLACE-7]", i, k);
        me.last_send_done[st] = k;
        r.done = true;
        r.status = c.status;
        on_send_done(i, r, k);
    }

    void on_receive(int i, RecvRec& r, const core::Completion& c) {
        Side& me = side_[i];
        const Side& peer = side_[1 - i];
        Region& rg = me.regions[kRecvDst];
        Slice& sl = rg.slices[r.slice];
        std::byte* buf = rg.base + sl.off;
        if (c.status == Status::kSuccess && !tainted_[1 - i]) {
            // Invariant 4: the k-th receive took the peer's k-th receive-consuming message.
            const auto& cons = peer.consuming[r.stream];
            CHECKF(r.index < cons.size(), "side %d: receive %u succeeded, the peer sent only %zu",
                   i, r.index, cons.size());
            const SendRec& s = peer.sends[cons[r.index]];
            CHECKF(c.byte_len == s.len, "side %d: receive byte_len %u, message %u bytes", i,
                   c.byte_len, s.len);
            const bool imm = s.op != WorkOpcode::kSend;
            CHECKF(c.has_imm == imm && (!imm || c.imm == s.imm), "side %d: immediate differs", i);
            CHECKF((c.opcode == WorkOpcode::kRecvWriteImm) == (s.op == WorkOpcode::kWriteImm),
                   "side %d: receive opcode differs", i);
            const size_t placed = s.op == WorkOpcode::kWriteImm ? 0 : s.len;
            const std::byte* src = peer.regions[kSendSrc].base + s.src_off;
            CHECKF(std::memcmp(buf, src, placed) == 0, "side %d: receive %u holds other bytes", i, r.index);
            // docs/ownership.md: the bytes after byte_len are unchanged.
            const std::byte* before = initial_arena(i).data() + region_offset(kRecvDst) + sl.off;
            const size_t o = placed + first_difference(buf + placed, before + placed, sl.len - placed);
            CHECKF(o == sl.len, "side %d: receive %u written past its message at %zu", i, r.index, o);
        }
        // Invariant 5: the buffer is the application's again; the engine never writes it.
        std::memset(buf, static_cast<int>(kReclaimed), sl.len);
        sl.state = Slice::State::kReclaimed;
    }

    void on_send_done(int i, SendRec& r, size_t k) {
        Side& me = side_[i];
        Side& peer = side_[1 - i];
        const bool ok = r.status == Status::kSuccess;
        const bool clean_out = !tainted_[i], clean_both = !tainted_[0] && !tainted_[1];
        switch (r.op) {
            case WorkOpcode::kSend:
            case WorkOpcode::kSendImm:
                break;  // checked at the receive (on_receive)
            case WorkOpcode::kWrite:
            case WorkOpcode::kWriteImm: {
                Region& rg = peer.regions[kWriteDst];
                Slice& sl = rg.slices[r.target_slice];
                if (ok && clean_out && rg.live) {
                    CHECKF(std::memcmp(rg.base + sl.off, me.regions[kSendSrc].base + r.src_off, r.len) == 0,
                           "side %d: WRITE %zu succeeded but its target holds other bytes", i, k);
                    std::memset(rg.base + sl.off, static_cast<int>(kReclaimed), sl.len);
                    sl.state = Slice::State::kReclaimed;
                }
                break;
            }
            case WorkOpcode::kRead: {
                Region& rg = me.regions[kRecvDst];
                Slice& sl = rg.slices[r.dst_slice];
                // [PLACE-19]: a source deregistered mid-answer sends zeros, so only a READ of
                // a live source is compared.
                if (ok && clean_both && peer.regions[kReadSrc].live)
                    CHECKF(std::memcmp(rg.base + sl.off, peer.regions[kReadSrc].base + r.src_off, r.len) == 0,
                           "side %d: READ %zu succeeded but holds other bytes", i, k);
                std::memset(rg.base + sl.off, static_cast<int>(kReclaimed), sl.len);
                sl.state = Slice::State::kReclaimed;
                break;
            }
            default: {  // atomics
                Region& dst = me.regions[kRecvDst];
                Region& tg = peer.regions[kWriteDst];
                Slice& dsl = dst.slices[r.dst_slice];
                Slice& tsl = tg.slices[r.target_slice];
                if (ok && clean_both && tg.live) {
                    const uint64_t old = initial_u64(1 - i, tsl.off);
                    CHECKF(load_u64(dst.base + dsl.off) == old, "side %d: atomic %zu returned another value", i, k);
                    uint64_t want = old;
                    if (r.op == WorkOpcode::kAtomicFetchAdd)
                        want = old + r.add_or_compare;
                    else if (old == r.add_or_compare)
                        want = r.swap;
                    CHECKF(load_u64(tg.base + tsl.off) == want, "side %d: atomic %zu left another value", i, k);
                    std::memset(tg.base + tsl.off, static_cast<int>(kReclaimed), tsl.len);
                    tsl.state = Slice::State::kReclaimed;
                }
                std::memset(dst.base + dsl.off, static_cast<int>(kReclaimed), dsl.len);
                dsl.state = Slice::State::kReclaimed;
                break;
            }
        }
    }

    // ---- the end ----------------------------------------------------------------------
    bool all_done() const {
        for (int i = 0; i < 2; ++i) {
            const Side& s = side_[i];
            for (const SendRec& r : s.sends)
                if (!r.done) return false;
            if (!connection_live(i))
                for (const RecvRec& r : s.recvs)
                    if (!r.done) return false;
        }
        return true;
    }

    bool connection_live(int i) const {
        const core::Connection* c =
            side_[i].ep->connection(side_[i].ep->connection_to(side_[1 - i].ep->local_address()));
        return c && (c->state() == core::ConnState::kEstablished ||
                     c->state() == core::ConnState::kConnecting);
    }

    void settle() {
        const Time limit = now_ + kCleanLimit;
        while (!all_done() && now_ < limit && steps_ < kMaxSteps)
            if (!step()) break;
    }

    void check_resources() {
        for (int i = 0; i < 2; ++i) {
            const core::Endpoint& ep = *side_[i].ep;
            CHECKF(ep.num_connections() <= ep.config().max_connections, "side %d: %zu connections", i,
                   ep.num_connections());
            CHECKF(ep.num_streams() <= 2, "side %d: %zu streams", i, ep.num_streams());
        }
        const size_t heap = heap_in_use();
        CHECKF(heap < heap_base_ + kHeapLimit, "heap grew by %zu bytes", heap - heap_base_);
    }

    void check_final() {
        check_resources();
        if (!all_done()) summary();
        for (int i = 0; i < 2; ++i) {
            const Side& s = side_[i];
            for (size_t k = 0; k < s.sends.size(); ++k)
                CHECKF(s.sends[k].done,
                       "side %d: work request %zu (opcode %d, stream %d) never completed; "
                       "connection %s, %lld ns",
                       i, k, static_cast<int>(s.sends[k].op), s.sends[k].stream,
                       connection_live(i) ? "live" : "ended", static_cast<long long>(to_ns(now_)));
            if (!connection_live(i))
                for (size_t k = 0; k < s.recvs.size(); ++k)
                    CHECKF(s.recvs[k].done, "side %d: receive %zu not flushed after the connection ended",
                           i, k);
        }
        for (int i = 0; i < 2; ++i) check_memory(i);
    }

    void check_memory(int i) {
        Side& s = side_[i];
        ASAN_UNPOISON_MEMORY_REGION(s.arena.data(), s.arena.size());
        const std::byte* image = initial_arena(i).data();
        // Invariant 1: the guards.
        for (int r = 0; r <= kRegions; ++r) {
            const size_t g = region_offset(r) - kGuard;
            const size_t o = first_difference(s.arena.data() + g, image + g, kGuard);
            CHECKF(o == kGuard, "side %d: guard byte %zu before region %d written", i, o, r);
        }
        for (int r = 0; r < kRegions; ++r) {
            const Region& rg = s.regions[r];
            // Invariant 2: a deregistered region is as it was when deregistered.
            if (!rg.live) {
                CHECKF(std::memcmp(rg.base, rg.snapshot.data(), rg.len) == 0,
                       "side %d: region %d changed after deregister_memory", i, r);
                continue;
            }
            // Invariant 5 (and 1 for the regions nobody writes): bytes outside every slice
            // keep their pattern, reclaimed slices their kReclaimed; pending ones may hold
            // anything. A region the peer's messages aim at is only known when no mutation
            // could have aimed them.
            if (r == kWriteDst && tainted_[1 - i]) continue;
            const std::byte* want = image + region_offset(r);
            size_t at = 0;  // slices are in increasing offset order (a bump allocator)
            auto untouched_until = [&](size_t end) {
                const size_t o = at + first_difference(rg.base + at, want + at, end - at);
                CHECKF(o == end, "side %d: region %d byte %zu written", i, r, o);
            };
            for (const Slice& sl : rg.slices) {
                untouched_until(sl.off);
                if (sl.state == Slice::State::kReclaimed) {
                    const size_t o = first_difference(rg.base + sl.off, reclaimed_bytes(), sl.len);
                    CHECKF(o == sl.len, "side %d: region %d byte %zu written after its completion", i, r,
                           sl.off + o);
                }
                at = sl.off + sl.len;
            }
            untouched_until(rg.len);
        }
    }

    Input script_, fates_;
    std::array<Side, 2> side_;
    Time now_ = time_from_ns(1'000'000);
    std::map<std::pair<Time, uint64_t>, InFlight> queue_;
    uint64_t seq_ = 0;
    size_t steps_ = 0, stuck_ = 0, mutations_ = 0;
    size_t heap_base_ = 0;
    std::array<bool, 2> tainted_{false, false};
    std::vector<uint64_t> ctx_;
    const bool verbose_ = std::getenv("MROCE_FUZZ_VERBOSE") != nullptr;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    Input in(data, size);
    Input config = in.take(2);
    const size_t script_len = in.u8();
    Input script = in.take(script_len);
    Run run(config, script, in);
    run.execute();
    return 0;
}
