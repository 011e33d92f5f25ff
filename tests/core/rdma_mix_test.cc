// tests/core/rdma_mix_test.cc — the property sweep of the RDMA-semantics issue: random
// mixes of SEND, SEND_IMM, WRITE, WRITE_IMM, READ, FETCH_ADD and COMPARE_SWAP on several
// streams, both directions, over loss up to 20%, duplication and reordering. Every
// operation targets its own memory, so the final memory is known; atomics hammer shared
// counters whose final values and returned old values prove exactly-once execution. Some
// seeds shrink the READ/atomic limits so requests queue and responders defer.
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

constexpr uint32_t kCounters = 4;  // shared FETCH_ADD targets on B

struct Mem {
    std::vector<std::byte> bytes;
    core::MemoryKeys keys;
    size_t used = 0;
    // take hands out a fresh 8-byte-aligned slice, so no two operations share memory.
    size_t take(size_t n) {
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

struct Outcome {
    bool ok = true;
    std::string why;
    uint64_t retransmits = 0, deferred = 0, atomics = 0, reads = 0;
    void fail(const std::string& w) {
        if (ok) why = w;
        ok = false;
    }
};

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
    Pair p(seed, nc, ca, cb);

    const uint32_t pa = p.a->alloc_pd(), pb = p.b->alloc_pd();
    Mem ma, mb;  // each endpoint's one region; operations take disjoint slices
    ma.bytes.assign(4 << 20, std::byte{0});
    mb.bytes.assign(4 << 20, std::byte{0});
    ma.keys = *p.a->register_memory(pa, ma.bytes.data(), ma.bytes.size(), kAllAccess);
    mb.keys = *p.b->register_memory(pb, mb.bytes.data(), mb.bytes.size(), kAllAccess);
    const size_t counters = mb.take(8 * kCounters);

    const uint32_t nstreams = static_cast<uint32_t>(2 + r.uniform(5));
    std::vector<uint32_t> sa(nstreams), sb(nstreams);
    for (uint32_t s = 0; s < nstreams; ++s) {
        sa[s] = *p.a->create_stream(pa, p.host_b().address(), s + 1, p.now());
        sb[s] = *p.b->create_stream(pb, p.host_a().address(), s + 1, p.now());
    }
    // Completions per (side, stream), in arrival order.
    std::map<uint32_t, std::vector<core::Completion>> a_send, a_recv, b_send, b_recv;
    auto sink = [](auto& send, auto& recv) {
        return [&send, &recv](const core::Event& e) {
            if (e.kind != core::EventKind::kCompletion) return;
            const auto& c = e.completion;
            const bool is_recv = c.opcode == WorkOpcode::kRecv || c.opcode == WorkOpcode::kRecvWriteImm;
            (is_recv ? recv : send)[c.stream].push_back(c);
        };
    };
    p.host_a().set_event_callback(sink(a_send, a_recv));
    p.host_b().set_event_callback(sink(b_send, b_recv));

    // Plan and post. A does every kind of operation; B sends SENDs back on the same streams.
    std::vector<std::vector<Op>> plan_a(nstreams), plan_b(nstreams);
    std::vector<std::vector<std::pair<size_t, uint32_t>>> recv_b(nstreams), recv_a(nstreams);
    std::vector<uint32_t> cas_count(nstreams, 0);
    std::vector<size_t> cas_at(nstreams);
    for (uint32_t s = 0; s < nstreams; ++s) cas_at[s] = mb.take(8);
    auto fill = [&](Mem& m, size_t at, uint32_t len, uint32_t tag) {
        for (uint32_t i = 0; i < len; ++i) m.bytes[at + i] = pattern_byte(tag, 0, i);
    };
    uint32_t tag = 1;
    for (uint32_t s = 0; s < nstreams; ++s) {
        const uint32_t nops = static_cast<uint32_t>(8 + r.uniform(20));
        for (uint32_t i = 0; i < nops; ++i) {
            Op op;
            const uint32_t kind = static_cast<uint32_t>(r.uniform(7));
            op.opcode = std::array{WorkOpcode::kSend, WorkOpcode::kSendImm, WorkOpcode::kWrite,
                                   WorkOpcode::kWriteImm, WorkOpcode::kRead,
                                   WorkOpcode::kAtomicFetchAdd, WorkOpcode::kAtomicCompareSwap}[kind];
            op.len = r.uniform(4) == 0 ? static_cast<uint32_t>(r.uniform(40'000))
                                       : static_cast<uint32_t>(r.uniform(5'000));
            op.imm = static_cast<uint32_t>(r.next_u64());
            core::SendWr wr;
            wr.wr_id = i;
            wr.opcode = op.opcode;
            wr.imm = op.imm;
            wr.lkey = ma.keys.lkey;
            wr.rkey = mb.keys.rkey;
            wr.fence = r.uniform(10) == 0;
            if (op.opcode == WorkOpcode::kRead) {
                op.src = mb.take(op.len);  // remote source
                fill(mb, op.src, op.len, tag++);
                op.dst = ma.take(op.len);
                wr.local_addr = ma.addr(op.dst);
                wr.remote_addr = mb.addr(op.src);
            } else if (op.opcode == WorkOpcode::kAtomicFetchAdd) {
                op.len = 8;
                op.counter = static_cast<uint32_t>(r.uniform(kCounters));
                op.add = 1 + r.uniform(1000);
                op.dst = ma.take(8);
                wr.local_addr = ma.addr(op.dst);
                wr.remote_addr = mb.addr(counters + 8 * op.counter);
                wr.compare_add = op.add;
            } else if (op.opcode == WorkOpcode::kAtomicCompareSwap) {
                // Per-stream counter: the k-th CAS of a stream expects k, and stream order
                // makes every one succeed.
                op.len = 8;
                op.add = cas_count[s]++;
                op.dst = ma.take(8);
                wr.local_addr = ma.addr(op.dst);
                wr.remote_addr = mb.addr(cas_at[s]);
                wr.compare_add = op.add;
                wr.swap = op.add + 1;
            } else {
                op.src = ma.take(op.len);
                fill(ma, op.src, op.len, tag++);
                wr.local_addr = ma.addr(op.src);
                if (op.opcode == WorkOpcode::kWrite || op.opcode == WorkOpcode::kWriteImm) {
                    op.dst = mb.take(op.len);
                    wr.remote_addr = mb.addr(op.dst);
                }
                if (op.opcode != WorkOpcode::kWrite) {
                    // Receives are posted in order, one per consuming message.
                    const size_t buf = mb.take(op.len + 16);
                    recv_b[s].push_back({buf, op.len + 16});
                    core::RecvWr rw{recv_b[s].size() - 1, mb.addr(buf), op.len + 16, mb.keys.lkey};
                    std::array<core::Sge, 2> halves;
                    if (r.uniform(3) == 0) {  // a scatter list of two adjacent pieces
                        const uint32_t cut = static_cast<uint32_t>(r.uniform(op.len + 17));
                        halves = {core::Sge{rw.addr, cut, rw.lkey},
                                  core::Sge{rw.addr + cut, op.len + 16 - cut, rw.lkey}};
                        rw.sg_list = halves.data();
                        rw.num_sge = 2;
                    }
                    if (p.b->post_recv(sb[s], rw, p.now()) != Error::kOk) out.fail("post_recv B");
                    if (op.opcode == WorkOpcode::kSend || op.opcode == WorkOpcode::kSendImm)
                        op.dst = buf;
                }
            }
            wr.length = op.len;
            // [PLACE-22] [PLACE-23]: some buffers go as a list of adjacent pieces cut at
            // random points, some small sends inline.
            std::array<core::Sge, 3> pieces;
            const bool is_atomic = op.opcode == WorkOpcode::kAtomicFetchAdd ||
                                   op.opcode == WorkOpcode::kAtomicCompareSwap;
            if (!is_atomic && op.len > 2 && r.uniform(3) == 0) {
                uint32_t cut1 = static_cast<uint32_t>(1 + r.uniform(op.len - 1));
                uint32_t cut2 = static_cast<uint32_t>(1 + r.uniform(op.len - 1));
                if (cut1 > cut2) std::swap(cut1, cut2);
                const uint64_t base = wr.local_addr;
                pieces = {core::Sge{base, cut1, wr.lkey}, core::Sge{base + cut1, cut2 - cut1, wr.lkey},
                          core::Sge{base + cut2, op.len - cut2, wr.lkey}};
                wr.sg_list = pieces.data();
                wr.num_sge = 3;
            } else if (!is_atomic && op.opcode != WorkOpcode::kRead && op.len <= 256 &&
                       r.uniform(2) == 0) {
                wr.inline_data = true;
            }
            if (p.a->post_send(sa[s], wr, p.now()) != Error::kOk) out.fail("post_send A");
            plan_a[s].push_back(op);
        }
        // B -> A: a few SENDs on the same stream.
        const uint32_t nback = static_cast<uint32_t>(r.uniform(5));
        for (uint32_t i = 0; i < nback; ++i) {
            Op op;
            op.opcode = WorkOpcode::kSend;
            op.len = static_cast<uint32_t>(r.uniform(9'000));
            op.src = mb.take(op.len);
            fill(mb, op.src, op.len, tag++);
            op.dst = ma.take(op.len);
            core::RecvWr rw{i, ma.addr(op.dst), op.len, ma.keys.lkey};
            if (p.a->post_recv(sa[s], rw, p.now()) != Error::kOk) out.fail("post_recv A");
            core::SendWr wr;
            wr.wr_id = i;
            wr.opcode = WorkOpcode::kSend;
            wr.local_addr = mb.addr(op.src);
            wr.length = op.len;
            wr.lkey = mb.keys.lkey;
            if (p.b->post_send(sb[s], wr, p.now()) != Error::kOk) out.fail("post_send B");
            plan_b[s].push_back(op);
        }
    }
    if (!out.ok) return out;
    p.host_a().kick();
    p.host_b().kick();
    auto all_done = [&] {
        for (uint32_t s = 0; s < nstreams; ++s) {
            if (a_send[sa[s]].size() != plan_a[s].size() || b_recv[sb[s]].size() != recv_b[s].size() ||
                b_send[sb[s]].size() != plan_b[s].size() || a_recv[sa[s]].size() != plan_b[s].size())
                return false;
        }
        return true;
    };
    // Stop early on the first error: nothing in this workload should fail.
    auto any_error = [&] {
        for (const auto* side : {&a_send, &b_send})
            for (const auto& [stream, cs] : *side)
                for (const auto& c : cs)
                    if (c.status != Status::kSuccess) return true;
        return false;
    };
    p.sim.run_until([&] { return all_done() || any_error(); }, p.sim.now() + 5s, 200'000'000);
    if (!all_done()) {
        out.fail("not finished (a hang or a lost completion)");
        return out;
    }

    // Requester completions: once each, in post order, all successful, right opcode/length.
    for (uint32_t s = 0; s < nstreams; ++s) {
        const auto& got = a_send[sa[s]];
        for (size_t i = 0; i < got.size(); ++i) {
            const Op& op = plan_a[s][i];
            if (got[i].wr_id != i || got[i].status != Status::kSuccess || got[i].opcode != op.opcode ||
                got[i].byte_len != op.len) {
                out.fail("A stream " + std::to_string(s) + " completion " + std::to_string(i) +
                         " wr_id " + std::to_string(got[i].wr_id) + " status " +
                         core::to_string(got[i].status));
                return out;
            }
            if (op.opcode == WorkOpcode::kRead &&
                std::memcmp(ma.bytes.data() + op.dst, mb.bytes.data() + op.src, op.len) != 0)
                out.fail("READ bytes differ, stream " + std::to_string(s) + " op " + std::to_string(i));
            if (op.opcode == WorkOpcode::kWrite || op.opcode == WorkOpcode::kWriteImm)
                if (std::memcmp(mb.bytes.data() + op.dst, ma.bytes.data() + op.src, op.len) != 0)
                    out.fail("WRITE bytes differ, stream " + std::to_string(s) + " op " + std::to_string(i));
            if (op.opcode == WorkOpcode::kAtomicCompareSwap) {
                uint64_t old;
                std::memcpy(&old, ma.bytes.data() + op.dst, 8);
                if (old != op.add) out.fail("COMPARE_SWAP returned a wrong old value");
            }
        }
        // Receives at B: in order, each with its message's length, immediate and bytes.
        const auto& rb = b_recv[sb[s]];
        size_t k = 0;
        for (const Op& op : plan_a[s]) {
            if (op.opcode == WorkOpcode::kWrite || op.opcode == WorkOpcode::kRead ||
                op.opcode == WorkOpcode::kAtomicFetchAdd || op.opcode == WorkOpcode::kAtomicCompareSwap)
                continue;
            const auto& c = rb[k];
            const bool imm = op.opcode == WorkOpcode::kSendImm || op.opcode == WorkOpcode::kWriteImm;
            if (c.wr_id != k || c.status != Status::kSuccess || c.byte_len != op.len ||
                c.has_imm != imm || (imm && c.imm != op.imm) ||
                c.opcode != (op.opcode == WorkOpcode::kWriteImm ? WorkOpcode::kRecvWriteImm : WorkOpcode::kRecv))
                out.fail("B receive " + std::to_string(k) + " of stream " + std::to_string(s) + " wrong");
            if ((op.opcode == WorkOpcode::kSend || op.opcode == WorkOpcode::kSendImm) &&
                std::memcmp(mb.bytes.data() + op.dst, ma.bytes.data() + op.src, op.len) != 0)
                out.fail("SEND bytes differ at B");
            ++k;
        }
        uint64_t cas_final;
        std::memcpy(&cas_final, mb.bytes.data() + cas_at[s], 8);
        if (cas_final != cas_count[s]) out.fail("COMPARE_SWAP counter final value wrong");
        for (size_t i = 0; i < plan_b[s].size(); ++i) {
            const Op& op = plan_b[s][i];
            const auto& c = a_recv[sa[s]][i];
            if (c.wr_id != i || c.status != Status::kSuccess || c.byte_len != op.len ||
                std::memcmp(ma.bytes.data() + op.dst, mb.bytes.data() + op.src, op.len) != 0)
                out.fail("B->A SEND wrong");
            if (b_send[sb[s]][i].wr_id != i || b_send[sb[s]][i].status != Status::kSuccess)
                out.fail("B send completion wrong");
        }
    }
    // FETCH_ADD exactly once: per counter, the (old, add) pairs chain from 0 to the final
    // value. A lost execution breaks the chain; a repeated one repeats an old value.
    for (uint32_t c = 0; c < kCounters; ++c) {
        std::vector<std::pair<uint64_t, uint64_t>> chain;
        for (uint32_t s = 0; s < nstreams; ++s)
            for (const Op& op : plan_a[s])
                if (op.opcode == WorkOpcode::kAtomicFetchAdd && op.counter == c) {
                    uint64_t old;
                    std::memcpy(&old, ma.bytes.data() + op.dst, 8);
                    chain.push_back({old, op.add});
                }
        std::sort(chain.begin(), chain.end());
        uint64_t at = 0;
        for (const auto& [old, add] : chain) {
            if (old != at) {
                out.fail("FETCH_ADD chain broken on counter " + std::to_string(c));
                break;
            }
            at += add;
        }
        uint64_t final_value;
        std::memcpy(&final_value, mb.bytes.data() + counters + 8 * c, 8);
        if (final_value != at) out.fail("FETCH_ADD counter final value wrong");
        out.atomics += chain.size();
    }
    const auto& conn_a = *p.a->connection(p.a->connection_to(p.host_b().address()));
    const auto& conn_b = *p.b->connection(p.b->connection_to(p.host_a().address()));
    out.retransmits = conn_a.stats().retransmits + conn_b.stats().retransmits;
    out.deferred = conn_b.stats().requests_deferred;
    if (conn_a.stats().orphan_responses != 0) out.fail("orphan responses without any error");
    return out;
}

// [PLACE-7] [PLACE-10] [PLACE-15] [PLACE-16] [PLACE-17] [PLACE-18] [PLACE-19] [PLACE-20]
// [PLACE-21] [DATA-8], over the loss recovery of spec §7.
TEST(RdmaMix, PropertySweep) {
    uint64_t retransmits = 0, deferred = 0, atomics = 0;
    const auto seeds = seeds_from_env(500, 1000);
    for (uint64_t seed : seeds) {
        const Outcome o = run_mix(seed);
        ASSERT_TRUE(o.ok) << "seed " << seed << " (replay: MROCE_SEED=" << seed << "): " << o.why;
        retransmits += o.retransmits;
        deferred += o.deferred;
        atomics += o.atomics;
    }
    std::printf("seeds %zu: retransmits %llu, deferred requests %llu, FETCH_ADDs checked %llu\n",
                seeds.size(), (unsigned long long)retransmits, (unsigned long long)deferred,
                (unsigned long long)atomics);
    if (seeds.size() >= 20) {
        EXPECT_GT(retransmits, 0u);
        EXPECT_GT(deferred, 0u);
    }
}

}  // namespace
}  // namespace mroce::test
