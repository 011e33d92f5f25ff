// tests/core/rdma_mix_test.cc — the property sweep of the RDMA-semantics issue: random
// mixes of SEND, SEND_IMM, WRITE, WRITE_IMM, READ, FETCH_ADD and COMPARE_SWAP on several
// streams, issued by both sides on the same streams (at least 300 operations per stream),
// over loss up to 20%, duplication and reordering. Every operation targets its own memory,
// so the final memory is known; atomics hammer shared counters on each side whose final
// values and returned old values prove exactly-once execution. Some seeds shrink the
// READ/atomic limits so requests queue and responders defer.
// Replay one seed with MROCE_SEED=<n>; MROCE_SEEDS=<n> sets the sweep size.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>

#include "tests/core/harness.h"

namespace mroce::test {
namespace {

using namespace std::chrono_literals;
using core::Status;
using core::WorkOpcode;

constexpr uint32_t kCounters = 4;  // shared FETCH_ADD targets on each side
constexpr size_t kMemBytes = 24 << 20;  // each side's one region

struct Mem {
    std::vector<std::byte> bytes;
    core::MemoryKeys keys;
    size_t used = 0;
    bool overflow = false;
    // take hands out a fresh 8-byte-aligned slice, so no two operations share memory.
    size_t take(size_t n) {
        if (used + n + 8 > bytes.size()) {
            overflow = true;  // the plan is too large for the region: a test bug, reported
            return 0;
        }
        const size_t at = used;
        used += (n + 7) & ~size_t{7};
        return at;
    }
    uint64_t addr(size_t off) { return reinterpret_cast<uint64_t>(bytes.data() + off); }
};

// One posted operation and what must be true when it is done.
struct Op {
    WorkOpcode opcode;
    uint32_t len = 0;
    size_t src = 0, dst = 0;  // src in the sender's memory; dst in the target's memory
    uint32_t imm = 0;
    uint32_t counter = 0;     // FETCH_ADD: which shared counter
    uint64_t add = 0;         // FETCH_ADD addend; COMPARE_SWAP: expected old value
};

// Side is one endpoint: its memory, its ends of the streams, the work it posts and the
// completions it reports. Both sides post every kind of operation on the same streams.
struct Side {
    const char* name = "";
    core::Endpoint* ep = nullptr;
    uint32_t pd = 0;
    Mem mem;
    std::vector<uint32_t> streams;
    size_t counters = 0;                // kCounters FETCH_ADD targets the peer hammers
    std::vector<size_t> cas_at;         // per stream: the peer's COMPARE_SWAP target here
    std::vector<uint32_t> cas_count;    // per stream: COMPARE_SWAPs the peer sent to it
    std::vector<std::vector<Op>> plan;  // per stream: what this side posts, in order
    std::vector<size_t> recvs;          // per stream: receives posted for the peer's messages
    // Completions per local stream, in arrival order; counts for the run's stop test.
    std::map<uint32_t, std::vector<core::Completion>> send, recv;
    size_t completions = 0, errors = 0;
};

struct Outcome {
    bool ok = true;
    std::string why;
    uint64_t retransmits = 0, deferred = 0, atomics = 0, reads = 0, ops = 0, min_stream_ops = 0;
    void fail(const std::string& w) {
        if (ok) why = w;
        ok = false;
    }
};

bool is_atomic(WorkOpcode op) {
    return op == WorkOpcode::kAtomicFetchAdd || op == WorkOpcode::kAtomicCompareSwap;
}

// plan_and_post plans `nops` random operations of `from` on stream s towards `to`, posts
// them, and posts the receives `to` needs for them.
void plan_and_post(Rng& r, Side& from, Side& to, uint32_t s, uint32_t nops, uint32_t& tag,
                   Time now, Outcome& out) {
    auto fill = [&](Mem& m, size_t at, uint32_t len, uint32_t t) {
        if (m.overflow) return;
        for (uint32_t i = 0; i < len; ++i) m.bytes[at + i] = pattern_byte(t, 0, i);
    };
    for (uint32_t i = 0; i < nops; ++i) {
        Op op;
        const uint32_t kind = static_cast<uint32_t>(r.uniform(7));
        op.opcode = std::array{WorkOpcode::kSend, WorkOpcode::kSendImm, WorkOpcode::kWrite,
                               WorkOpcode::kWriteImm, WorkOpcode::kRead,
                               WorkOpcode::kAtomicFetchAdd, WorkOpcode::kAtomicCompareSwap}[kind];
        // Mostly small, so a stream window fills before the peer's requests are answered.
        op.len = r.uniform(8) == 0 ? static_cast<uint32_t>(r.uniform(40'000))
                                   : static_cast<uint32_t>(r.uniform(5'000));
        op.imm = static_cast<uint32_t>(r.next_u64());
        core::SendWr wr;
        wr.wr_id = i;
        wr.opcode = op.opcode;
        wr.imm = op.imm;
        wr.lkey = from.mem.keys.lkey;
        wr.rkey = to.mem.keys.rkey;
        wr.fence = r.uniform(10) == 0;
        if (op.opcode == WorkOpcode::kRead) {
            op.src = to.mem.take(op.len);  // remote source
            fill(to.mem, op.src, op.len, tag++);
            op.dst = from.mem.take(op.len);
            wr.local_addr = from.mem.addr(op.dst);
            wr.remote_addr = to.mem.addr(op.src);
        } else if (op.opcode == WorkOpcode::kAtomicFetchAdd) {
            op.len = 8;
            op.counter = static_cast<uint32_t>(r.uniform(kCounters));
            op.add = 1 + r.uniform(1000);
            op.dst = from.mem.take(8);
            wr.local_addr = from.mem.addr(op.dst);
            wr.remote_addr = to.mem.addr(to.counters + 8 * op.counter);
            wr.compare_add = op.add;
        } else if (op.opcode == WorkOpcode::kAtomicCompareSwap) {
            // Per-stream counter: the k-th CAS of a stream expects k, and stream order
            // makes every one succeed.
            op.len = 8;
            op.add = to.cas_count[s]++;
            op.dst = from.mem.take(8);
            wr.local_addr = from.mem.addr(op.dst);
            wr.remote_addr = to.mem.addr(to.cas_at[s]);
            wr.compare_add = op.add;
            wr.swap = op.add + 1;
        } else {
            op.src = from.mem.take(op.len);
            fill(from.mem, op.src, op.len, tag++);
            wr.local_addr = from.mem.addr(op.src);
            if (op.opcode == WorkOpcode::kWrite || op.opcode == WorkOpcode::kWriteImm) {
                op.dst = to.mem.take(op.len);
                wr.remote_addr = to.mem.addr(op.dst);
            }
            if (op.opcode != WorkOpcode::kWrite) {
                // Receives are posted in order, one per consuming message.
                const size_t buf = to.mem.take(op.len + 16);
                core::RecvWr rw{to.recvs[s]++, to.mem.addr(buf), op.len + 16, to.mem.keys.lkey};
                std::array<core::Sge, 2> halves;
                if (r.uniform(3) == 0) {  // a scatter list of two adjacent pieces
                    const uint32_t cut = static_cast<uint32_t>(r.uniform(op.len + 17));
                    halves = {core::Sge{rw.addr, cut, rw.lkey},
                              core::Sge{rw.addr + cut, op.len + 16 - cut, rw.lkey}};
                    rw.sg_list = halves.data();
                    rw.num_sge = 2;
                }
                if (to.ep->post_recv(to.streams[s], rw, now) != Error::kOk)
                    out.fail(std::string("post_recv ") + to.name);
                if (op.opcode == WorkOpcode::kSend || op.opcode == WorkOpcode::kSendImm)
                    op.dst = buf;
            }
        }
        wr.length = op.len;
        // [PLACE-22] [PLACE-23]: some buffers go as a list of adjacent pieces cut at
        // random points, some small sends inline.
        std::array<core::Sge, 3> pieces;
        if (!is_atomic(op.opcode) && op.len > 2 && r.uniform(3) == 0) {
            uint32_t cut1 = static_cast<uint32_t>(1 + r.uniform(op.len - 1));
            uint32_t cut2 = static_cast<uint32_t>(1 + r.uniform(op.len - 1));
            if (cut1 > cut2) std::swap(cut1, cut2);
            const uint64_t base = wr.local_addr;
            pieces = {core::Sge{base, cut1, wr.lkey}, core::Sge{base + cut1, cut2 - cut1, wr.lkey},
                      core::Sge{base + cut2, op.len - cut2, wr.lkey}};
            wr.sg_list = pieces.data();
            wr.num_sge = 3;
        } else if (!is_atomic(op.opcode) && op.opcode != WorkOpcode::kRead && op.len <= 256 &&
                   r.uniform(2) == 0) {
            wr.inline_data = true;
        }
        if (from.mem.overflow || to.mem.overflow) {
            out.fail("the plan does not fit the test's memory (a test bug)");
            return;
        }
        if (from.ep->post_send(from.streams[s], wr, now) != Error::kOk)
            out.fail(std::string("post_send ") + from.name);
        from.plan[s].push_back(op);
    }
}

// verify checks everything `from` asked of `to`: requester completions once each, in post
// order, successful, with the right opcode and length; READ and WRITE bytes; COMPARE_SWAP
// old and final values; `to`'s receives in order with their lengths, immediates and bytes;
// and FETCH_ADD exactly once on each of `to`'s counters.
void verify(Side& from, Side& to, Outcome& out) {
    const std::string dir = std::string(from.name) + "->" + to.name + " ";
    for (uint32_t s = 0; s < from.streams.size(); ++s) {
        const auto& got = from.send[from.streams[s]];
        for (size_t i = 0; i < got.size(); ++i) {
            const Op& op = from.plan[s][i];
            if (got[i].wr_id != i || got[i].status != Status::kSuccess || got[i].opcode != op.opcode ||
                got[i].byte_len != op.len) {
                out.fail(dir + "stream " + std::to_string(s) + " completion " + std::to_string(i) +
                         " wr_id " + std::to_string(got[i].wr_id) + " status " +
                         core::to_string(got[i].status));
                return;
            }
            if (op.opcode == WorkOpcode::kRead &&
                std::memcmp(from.mem.bytes.data() + op.dst, to.mem.bytes.data() + op.src, op.len) != 0)
                out.fail(dir + "READ bytes differ, stream " + std::to_string(s) + " op " + std::to_string(i));
            if (op.opcode == WorkOpcode::kWrite || op.opcode == WorkOpcode::kWriteImm)
                if (std::memcmp(to.mem.bytes.data() + op.dst, from.mem.bytes.data() + op.src, op.len) != 0)
                    out.fail(dir + "WRITE bytes differ, stream " + std::to_string(s) + " op " +
                             std::to_string(i));
            if (op.opcode == WorkOpcode::kAtomicCompareSwap) {
                uint64_t old;
                std::memcpy(&old, from.mem.bytes.data() + op.dst, 8);
                if (old != op.add) out.fail(dir + "COMPARE_SWAP returned a wrong old value");
            }
            out.reads += op.opcode == WorkOpcode::kRead;
        }
        const auto& rt = to.recv[to.streams[s]];
        size_t k = 0;
        for (const Op& op : from.plan[s]) {
            if (op.opcode == WorkOpcode::kWrite || op.opcode == WorkOpcode::kRead || is_atomic(op.opcode))
                continue;
            if (k >= rt.size()) {
                out.fail(dir + "receive " + std::to_string(k) + " of stream " + std::to_string(s) + " missing");
                return;
            }
            const auto& c = rt[k];
            const bool imm = op.opcode == WorkOpcode::kSendImm || op.opcode == WorkOpcode::kWriteImm;
            if (c.wr_id != k || c.status != Status::kSuccess || c.byte_len != op.len ||
                c.has_imm != imm || (imm && c.imm != op.imm) ||
                c.opcode != (op.opcode == WorkOpcode::kWriteImm ? WorkOpcode::kRecvWriteImm : WorkOpcode::kRecv))
                out.fail(dir + "receive " + std::to_string(k) + " of stream " + std::to_string(s) + " wrong");
            if ((op.opcode == WorkOpcode::kSend || op.opcode == WorkOpcode::kSendImm) &&
                std::memcmp(to.mem.bytes.data() + op.dst, from.mem.bytes.data() + op.src, op.len) != 0)
                out.fail(dir + "SEND bytes differ");
            ++k;
        }
        uint64_t cas_final;
        std::memcpy(&cas_final, to.mem.bytes.data() + to.cas_at[s], 8);
        if (cas_final != to.cas_count[s]) out.fail(dir + "COMPARE_SWAP counter final value wrong");
    }
    // FETCH_ADD exactly once: per counter, the (old, add) pairs chain from 0 to the final
    // value. A lost execution breaks the chain; a repeated one repeats an old value.
    for (uint32_t c = 0; c < kCounters; ++c) {
        std::vector<std::pair<uint64_t, uint64_t>> chain;
        for (uint32_t s = 0; s < from.streams.size(); ++s)
            for (const Op& op : from.plan[s])
                if (op.opcode == WorkOpcode::kAtomicFetchAdd && op.counter == c) {
                    uint64_t old;
                    std::memcpy(&old, from.mem.bytes.data() + op.dst, 8);
                    chain.push_back({old, op.add});
                }
        std::sort(chain.begin(), chain.end());
        uint64_t at = 0;
        for (const auto& [old, add] : chain) {
            if (old != at) {
                out.fail(dir + "FETCH_ADD chain broken on counter " + std::to_string(c));
                break;
            }
            at += add;
        }
        uint64_t final_value;
        std::memcpy(&final_value, to.mem.bytes.data() + to.counters + 8 * c, 8);
        if (final_value != at) out.fail(dir + "FETCH_ADD counter final value wrong");
        out.atomics += chain.size();
    }
}

Outcome run_mix(uint64_t seed) {
    Outcome out;
    Rng r(seed * 7919 + 11);
    sim::NetworkConfig nc;
    nc.routes = 8;
    nc.link.rate_bps = 10'000'000'000;
    nc.link.delay = 2us;
    const double losses[] = {0, 0.01, 0.05, 0.1, 0.2};
    nc.link.loss_probability = losses[r.uniform(5)];
    nc.link.duplicate_probability = r.uniform(3) == 0 ? 0.02 : 0;
    nc.link.reorder_probability = r.uniform(3) == 0 ? 0.05 : 0;
    nc.host.line_rate_bps = 10'000'000'000;
    core::EndpointConfig ca, cb;
    ca.num_paths = cb.num_paths = static_cast<uint16_t>(1 + r.uniform(8));
    if (r.uniform(3) == 0) {  // force queuing at the requester and deferral at the responder
        ca.max_rd_atomic = cb.max_rd_atomic = static_cast<uint32_t>(1 + r.uniform(4));
        ca.max_dest_rd_atomic = cb.max_dest_rd_atomic = static_cast<uint32_t>(1 + r.uniform(2));
    }
    // [DATA-9]: the COMPACT form on most seeds, off on either side on the others. Drawn
    // from a generator of its own, so that every seed's plan is what it was before.
    Rng forms(seed ^ 0xC0DA7Aull);
    ca.compact_data = forms.uniform(4) != 0;
    cb.compact_data = forms.uniform(4) != 0;
    Pair p(seed, nc, ca, cb);
    // Every DATA leaves in the form [DATA-9] gives it: compact exactly when both sides
    // announced COMPACT_DATA and its opcode consumes no receive. (A coalesced datagram
    // starts with its ACK; this workload does not coalesce.)
    const bool negotiated = ca.compact_data && cb.compact_data;
    uint64_t compact_seen = 0, wrong_form = 0;
    std::vector<std::byte> scratch;
    p.net.set_tap([&](const sim::Packet& pkt, const sim::Host&) {
        const auto d = without_trailer(pkt.bytes.view(scratch));
        if (d.size() < wire::kDataCompactHeaderSize ||
            static_cast<uint8_t>(d[1]) != static_cast<uint8_t>(wire::PacketType::kData))
            return;
        const bool flag = (static_cast<uint8_t>(d[17]) & wire::data_flag::kCompact) != 0;
        compact_seen += flag;
        wrong_form += flag != (negotiated && wire::may_be_compact(static_cast<wire::Opcode>(d[16])));
    });

    Side a, b;
    a.name = "A";
    b.name = "B";
    a.ep = p.a.get();
    b.ep = p.b.get();
    const uint32_t nstreams = static_cast<uint32_t>(2 + r.uniform(3));
    for (Side* x : {&a, &b}) {
        x->pd = x->ep->alloc_pd();
        x->mem.bytes.assign(kMemBytes, std::byte{0});
        x->mem.keys = *x->ep->register_memory(x->pd, x->mem.bytes.data(), x->mem.bytes.size(), kAllAccess);
        x->counters = x->mem.take(8 * kCounters);
        for (uint32_t s = 0; s < nstreams; ++s) x->cas_at.push_back(x->mem.take(8));
        x->cas_count.assign(nstreams, 0);
        x->plan.resize(nstreams);
        x->recvs.assign(nstreams, 0);
    }
    for (uint32_t s = 0; s < nstreams; ++s) {
        a.streams.push_back(*p.a->create_stream(a.pd, p.host_b().address(), s + 1, p.now()));
        b.streams.push_back(*p.b->create_stream(b.pd, p.host_a().address(), s + 1, p.now()));
    }
    auto sink = [](Side& x) {
        return [&x](const core::Event& e) {
            if (e.kind != core::EventKind::kCompletion) return;
            const auto& c = e.completion;
            const bool is_recv = c.opcode == WorkOpcode::kRecv || c.opcode == WorkOpcode::kRecvWriteImm;
            (is_recv ? x.recv : x.send)[c.stream].push_back(c);
            ++x.completions;
            x.errors += c.status != Status::kSuccess;
        };
    };
    p.host_a().set_event_callback(sink(a));
    p.host_b().set_event_callback(sink(b));

    // Plan and post: on every stream both sides issue every kind of operation, 150 to 199
    // each, so each stream carries at least 300 ([PLACE-30]: both sides' requests, and
    // their answers, on one stream, with windows that fill).
    uint32_t tag = 1;
    out.min_stream_ops = UINT64_MAX;
    for (uint32_t s = 0; s < nstreams; ++s) {
        const uint32_t na = static_cast<uint32_t>(150 + r.uniform(50));
        const uint32_t nb = static_cast<uint32_t>(150 + r.uniform(50));
        plan_and_post(r, a, b, s, na, tag, p.now(), out);
        plan_and_post(r, b, a, s, nb, tag, p.now(), out);
        out.ops += na + nb;
        out.min_stream_ops = std::min<uint64_t>(out.min_stream_ops, na + nb);
    }
    if (!out.ok) return out;
    // Every posted work request and receive reports once.
    size_t expected = 0;
    for (const Side* x : {&a, &b})
        for (uint32_t s = 0; s < nstreams; ++s) expected += x->plan[s].size() + x->recvs[s];
    p.host_a().kick();
    p.host_b().kick();
    auto all_done = [&] { return a.completions + b.completions == expected; };
    // Stop early on the first error: nothing in this workload should fail.
    p.sim.run_until([&] { return all_done() || a.errors + b.errors > 0; }, p.sim.now() + 5s,
                    200'000'000);
    if (a.errors + b.errors > 0 || !all_done()) {
        // Name the first failed completion, if any, else the hang.
        for (Side* x : {&a, &b})
            for (const auto* m : {&x->send, &x->recv})
                for (const auto& [stream, cs] : *m)
                    for (const auto& c : cs)
                        if (c.status != Status::kSuccess) {
                            out.fail(std::string(x->name) + " stream " + std::to_string(stream) +
                                     " wr_id " + std::to_string(c.wr_id) + ": " +
                                     core::to_string(c.status));
                            return out;
                        }
        out.fail("not finished after " + std::to_string(to_ns(p.now()) / 1000) + " us: " +
                 std::to_string(a.completions + b.completions) + " of " + std::to_string(expected) +
                 " completions (a hang or a lost completion)");
        return out;
    }
    verify(a, b, out);
    verify(b, a, out);
    const auto& conn_a = *p.a->connection(p.a->connection_to(p.host_b().address()));
    const auto& conn_b = *p.b->connection(p.b->connection_to(p.host_a().address()));
    out.retransmits = conn_a.stats().retransmits + conn_b.stats().retransmits;
    out.deferred = conn_a.stats().requests_deferred + conn_b.stats().requests_deferred;
    if (conn_a.stats().orphan_responses + conn_b.stats().orphan_responses != 0)
        out.fail("orphan responses without any error");
    if (wrong_form != 0)
        out.fail(std::to_string(wrong_form) + " DATA packets in the wrong form (COMPACT_DATA " +
                 (negotiated ? "negotiated" : "not negotiated") + ", [DATA-9])");
    if (negotiated != (compact_seen > 0))
        out.fail("COMPACT_DATA " + std::string(negotiated ? "negotiated" : "not negotiated") + " and " +
                 std::to_string(compact_seen) + " compact DATA packets");
    if (conn_a.compact_data() != negotiated || conn_b.compact_data() != negotiated)
        out.fail("the connections disagree with the HELLOs about COMPACT_DATA");
    return out;
}

// [PLACE-7] [PLACE-10] [PLACE-15] [PLACE-16] [PLACE-17] [PLACE-18] [PLACE-19] [PLACE-20]
// [PLACE-21] [PLACE-30] [STREAM-3] [DATA-8], over the loss recovery of spec §7. Both
// sides issue every operation on the same streams, at least 300 per stream. The default
// sweep is short; MROCE_SEEDS=1000 is the full one (docs/results.md).
TEST(RdmaMix, PropertySweep) {
    uint64_t retransmits = 0, deferred = 0, atomics = 0, reads = 0, ops = 0;
    uint64_t min_stream_ops = UINT64_MAX;
    const auto seeds = seeds_from_env(40, 1000);
    for (uint64_t seed : seeds) {
        const Outcome o = run_mix(seed);
        ASSERT_TRUE(o.ok) << "seed " << seed << " (replay: MROCE_SEED=" << seed << "): " << o.why;
        retransmits += o.retransmits;
        deferred += o.deferred;
        atomics += o.atomics;
        reads += o.reads;
        ops += o.ops;
        min_stream_ops = std::min(min_stream_ops, o.min_stream_ops);
    }
    std::printf("seeds %zu: operations %llu (at least %llu per stream), READs %llu, FETCH_ADDs "
                "checked %llu, retransmits %llu, deferred requests %llu\n",
                seeds.size(), (unsigned long long)ops, (unsigned long long)min_stream_ops,
                (unsigned long long)reads, (unsigned long long)atomics,
                (unsigned long long)retransmits, (unsigned long long)deferred);
    EXPECT_GE(min_stream_ops, 300u);
    if (seeds.size() >= 20) {
        EXPECT_GT(retransmits, 0u);
        EXPECT_GT(deferred, 0u);
    }
}

}  // namespace
}  // namespace mroce::test
