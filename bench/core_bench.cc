// bench/core_bench.cc — cost of the protocol core per DATA packet and per ACK, with two
// endpoints joined back to back (no network, no simulator): the sender builds and encodes
// a DATA packet, the receiver decodes it, places it and updates its SACK state, and every
// ack_every packets an ACK goes back and is processed.
//
//   build/bench/core_bench                         wall time per packet, and split:
//                                                  BM_Sender, BM_Receiver (per DATA),
//                                                  BM_Ack (per ACK, both ends)
//   valgrind --tool=callgrind build/bench/core_bench --benchmark_filter=Fixed
//                                                  instructions (stable on noisy machines)
//   build/bench/core_bench --benchmark_filter=HelloRetry
//                                                  per forged HELLO: the cookie and the
//                                                  RETRY it costs (issue 17, finding 8)
//   build/bench/core_bench --benchmark_filter='Crc32c|Integrity'
//                                                  the integrity trailer (spec §4.9): one
//                                                  CRC32C per implementation and size, and
//                                                  each end per DATA with and without it
#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

#include "core/endpoint.h"
#include "obs/observer.h"
#include "util/crc32c.h"
#include "util/rng.h"
#include "wire/control.h"

namespace mroce {
namespace {

struct BackToBack {
    // integrity: the CRC32C trailer (spec §4.9) on both ends. The benchmarks that predate it
    // run without, so their figures in docs/results.md stay comparable; BM_Integrity pairs
    // the two.
    // selection: the path policy (spec [PATH-10], [PATH-14]); BM_SenderRoom times the second.
    explicit BackToBack(uint32_t payload, bool integrity = false,
                        core::EndpointConfig::PathSelection selection =
                            core::EndpointConfig::PathSelection::kRoundRobin) {
        core::EndpointConfig cfg;
        cfg.max_payload = payload;
        cfg.integrity_check = integrity;
        cfg.path_selection = selection;
        cfg.window_bytes_per_path = 1u << 30;  // never window-limited: measure the core
        a = std::make_unique<core::Endpoint>(cfg, Address::ipv4(0xC6120001, 4797), 1);
        b = std::make_unique<core::Endpoint>(cfg, Address::ipv4(0xC6120002, 4797), 2);
        buf.resize(a->max_datagram_size());
        msg_bytes = payload * 64;
        src.assign(msg_bytes, std::byte{1});
        dst.assign(msg_bytes, std::byte{0});
        const uint32_t pa = a->alloc_pd(), pb = b->alloc_pd();
        ka = *a->register_memory(pa, src.data(), src.size(), core::access::kLocalWrite);
        kb = *b->register_memory(pb, dst.data(), dst.size(),
                                 core::access::kLocalWrite | core::access::kRemoteWrite);
        stream = *a->create_stream(pa, b->local_address(), 1, now);
        (void)*b->create_stream(pb, a->local_address(), 1, now);
        for (int i = 0; i < 8; ++i) post();
        while (pump_one(*a, *b) + pump_one(*b, *a)) {}
    }
    void post() {
        core::SendWr wr;
        wr.opcode = core::WorkOpcode::kWrite;
        wr.local_addr = reinterpret_cast<uint64_t>(src.data());
        wr.length = msg_bytes;
        wr.lkey = ka.lkey;
        wr.remote_addr = reinterpret_cast<uint64_t>(dst.data());
        wr.rkey = kb.rkey;
        wr.signaled = true;
        (void)a->post_send(stream, wr, now);
    }
    // pump_one moves one datagram from `from` to `to`; returns 1 if it moved one.
    int pump_one(core::Endpoint& from, core::Endpoint& to) {
        PacketMeta meta;
        const size_t n = from.poll_transmit(buf, meta, now);
        if (!n) return 0;
        PacketMeta rx = meta;
        rx.src = meta.src;
        rx.dst = meta.dst;
        to.on_datagram(std::span(buf.data(), n), rx, now);
        return 1;
    }
    // cycle sends one DATA packet A->B and lets every ACK B->A through; keeps work posted.
    void cycle() {
        now += std::chrono::nanoseconds(50);
        if (!pump_one(*a, *b)) {
            // Sender idle: completions are waiting; recycle them into new messages.
            a->on_timeout(now);
            b->on_timeout(now);
            while (int k = pump_one(*b, *a)) to_a += k;
            to_b += pump_one(*a, *b);
        } else {
            ++to_b;
        }
        while (int k = pump_one(*b, *a)) to_a += k;
        while (auto e = a->poll_event())
            if (e->kind == core::EventKind::kCompletion) post();
        while (b->poll_event()) {}
        // A driver asks each engine for its next deadline once per batch; here a batch
        // is one packet, the worst case.
        benchmark::DoNotOptimize(a->next_deadline());
        benchmark::DoNotOptimize(b->next_deadline());
    }

    Time now = time_from_ns(1'000'000);
    std::unique_ptr<core::Endpoint> a, b;
    std::vector<std::byte> buf, src, dst;
    core::MemoryKeys ka, kb;
    uint32_t stream = 0;
    uint32_t msg_bytes = 0;
    uint64_t to_b = 0, to_a = 0;  // datagrams cycle() moved each way (DATA; ACKs)
};

// Split costs: each iteration handles a batch of up to kBatch packets; only the side being
// measured runs with the timer on (pausing costs about a microsecond, about 15 ns per
// packet of noise at this batch size).
constexpr int kBatch = 64;

struct Batch {
    std::vector<std::vector<std::byte>> pkts;
    std::vector<PacketMeta> metas;
    std::vector<size_t> lens;
    explicit Batch(size_t mtu) : pkts(kBatch, std::vector<std::byte>(mtu)), metas(kBatch), lens(kBatch) {}
};

// produce_batch: up to kBatch datagrams from `from`. Returns how many.
int produce_batch(BackToBack& bb, core::Endpoint& from, Batch& b) {
    int n = 0;
    for (; n < kBatch; ++n) {
        b.lens[n] = from.poll_transmit(b.pkts[n], b.metas[n], bb.now);
        if (!b.lens[n]) break;
    }
    return n;
}
void deliver_batch(BackToBack& bb, core::Endpoint& to, Batch& b, int n) {
    for (int i = 0; i < n; ++i) to.on_datagram(std::span(b.pkts[i].data(), b.lens[i]), b.metas[i], bb.now);
}
// settle: ACKs back to the sender, completions recycled into new messages.
void settle(BackToBack& bb, Batch& acks) {
    bb.now += std::chrono::microseconds(2);
    // Due timers run, as a driver runs them: a delayed ACK (max_ack_delay) that nothing
    // else sends would otherwise hold the sender's window shut for good.
    bb.a->on_timeout(bb.now);
    bb.b->on_timeout(bb.now);
    for (;;) {
        const int n = produce_batch(bb, *bb.b, acks);
        if (!n) break;
        deliver_batch(bb, *bb.a, acks, n);
    }
    while (auto e = bb.a->poll_event())
        if (e->kind == core::EventKind::kCompletion) bb.post();
    while (bb.b->poll_event()) {}
}

// The timed parts, out of line so that callgrind can count exactly them:
//   valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*timed_sender*'
//            build/bench/core_bench --benchmark_filter=SenderFixed
// (timed_receiver with ReceiverFixed, timed_acks with AckFixed); divide by "items".
[[gnu::noinline]] int timed_sender(BackToBack& bb, Batch& b) { return produce_batch(bb, *bb.a, b); }
[[gnu::noinline]] void timed_receiver(BackToBack& bb, Batch& b, int n) { deliver_batch(bb, *bb.b, b, n); }
[[gnu::noinline]] int64_t timed_acks(BackToBack& bb, Batch& acks) {
    int64_t n_acks = 0;
    for (;;) {
        const int k = produce_batch(bb, *bb.b, acks);
        if (!k) break;
        n_acks += k;
        deliver_batch(bb, *bb.a, acks, k);
    }
    return n_acks;
}

// sender_loop, receiver_loop: the timed loops of BM_Sender and BM_Receiver (and of their
// integrity twins below), over an endpoint pair set up by the caller.
void sender_loop(benchmark::State& state, BackToBack& bb) {
    Batch data(bb.buf.size()), acks(bb.buf.size());
    int64_t packets = 0;
    for (auto _ : state) {
        const int n = timed_sender(bb, data);
        state.PauseTiming();
        packets += n;
        deliver_batch(bb, *bb.b, data, n);
        settle(bb, acks);
        state.ResumeTiming();
    }
    state.SetItemsProcessed(packets);
    state.counters["items"] = static_cast<double>(packets);
}
void receiver_loop(benchmark::State& state, BackToBack& bb) {
    Batch data(bb.buf.size()), acks(bb.buf.size());
    int64_t packets = 0;
    for (auto _ : state) {
        state.PauseTiming();
        const int n = produce_batch(bb, *bb.a, data);
        packets += n;
        state.ResumeTiming();
        timed_receiver(bb, data, n);
        state.PauseTiming();
        settle(bb, acks);
        state.ResumeTiming();
    }
    state.SetItemsProcessed(packets);
    state.counters["items"] = static_cast<double>(packets);
}
void BM_Sender(benchmark::State& state) {  // build + encode + bookkeeping of one DATA
    BackToBack bb(static_cast<uint32_t>(state.range(0)));
    sender_loop(state, bb);
}
void BM_SenderRoom(benchmark::State& state) {  // BM_Sender with [PATH-14]'s path choice
    BackToBack bb(static_cast<uint32_t>(state.range(0)), false,
                  core::EndpointConfig::PathSelection::kRoom);
    sender_loop(state, bb);
}
void BM_Receiver(benchmark::State& state) {  // decode + place + SACK update of one DATA
    BackToBack bb(static_cast<uint32_t>(state.range(0)));
    receiver_loop(state, bb);
}
void BM_Ack(benchmark::State& state) {  // one ACK: built and encoded, decoded and applied
    BackToBack bb(static_cast<uint32_t>(state.range(0)));
    Batch data(bb.buf.size()), acks(bb.buf.size());
    int64_t n_acks = 0;
    for (auto _ : state) {
        state.PauseTiming();
        const int n = produce_batch(bb, *bb.a, data);
        deliver_batch(bb, *bb.b, data, n);
        bb.now += std::chrono::microseconds(2);
        state.ResumeTiming();
        n_acks += timed_acks(bb, acks);
        state.PauseTiming();
        while (auto e = bb.a->poll_event())
            if (e->kind == core::EventKind::kCompletion) bb.post();
        while (bb.b->poll_event()) {}
        state.ResumeTiming();
    }
    state.SetItemsProcessed(n_acks);
    state.counters["items"] = static_cast<double>(n_acks);
}
BENCHMARK(BM_Sender)->Arg(256)->Arg(4096);
BENCHMARK(BM_SenderRoom)->Arg(256);
BENCHMARK(BM_Receiver)->Arg(256)->Arg(4096);
BENCHMARK(BM_Ack)->Arg(256);
// Fixed iteration counts (one run each) for the callgrind counts described above.
BENCHMARK(BM_Sender)->Name("SenderFixed")->Arg(256)->Iterations(2000);
BENCHMARK(BM_SenderRoom)->Name("SenderRoomFixed")->Arg(256)->Iterations(2000);
BENCHMARK(BM_Receiver)->Name("ReceiverFixed")->Arg(256)->Iterations(2000);
BENCHMARK(BM_Ack)->Name("AckFixed")->Arg(256)->Iterations(2000);

void BM_DataPacketBothSides(benchmark::State& state) {
    BackToBack bb(static_cast<uint32_t>(state.range(0)));
    for (auto _ : state) bb.cycle();
    state.SetItemsProcessed(state.iterations());
    state.counters["ns_per_packet"] = benchmark::Counter(
        static_cast<double>(state.iterations()), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
// 256-byte payloads: the copy is negligible, what remains is the protocol's cost.
BENCHMARK(BM_DataPacketBothSides)->Arg(256)->Arg(4096);
// Fixed iteration counts for callgrind: Ir(200k) - Ir(100k) = instructions per 100k packets.
BENCHMARK(BM_DataPacketBothSides)->Name("Fixed100k")->Arg(256)->Iterations(100000);
BENCHMARK(BM_DataPacketBothSides)->Name("Fixed200k")->Arg(256)->Iterations(200000);

// The integrity trailer's cost ([INT-2], [INT-3]): the same cycle with range(1) = 1 (a
// CRC32C computed by the sender and checked by the receiver on every DATA and ACK) and 0.
// Per cycle, not per DATA packet: at 4 KiB the pacer holds the sender to its 100 Gbit/s
// line, so a 50 ns cycle carries a DATA packet only about one time in 6.3 (the counters
// data_per_cycle and acks_per_cycle say how often); BM_SenderIntegrity and
// BM_ReceiverIntegrity below give the cost per DATA packet.
//   valgrind --tool=callgrind build/bench/core_bench --benchmark_filter='Integrity(On|Off)Fixed'
// with the two fixed counts gives instructions per cycle: (Ir(40k) - Ir(20k)) / 20k.
// (valgrind hides AVX-512 from the program, so under it the CRC takes the CRC32
// instruction: the counts are those of that path.)
void BM_Integrity(benchmark::State& state) {
    BackToBack bb(static_cast<uint32_t>(state.range(0)), state.range(1) != 0);
    if (bb.a->connection(bb.a->connection_to(bb.b->local_address()))->integrity() != (state.range(1) != 0))
        state.SkipWithError("integrity not negotiated as asked");
    const uint64_t b0 = bb.to_b, a0 = bb.to_a;
    for (auto _ : state) bb.cycle();
    state.SetItemsProcessed(state.iterations());
    state.counters["ns_per_cycle"] = benchmark::Counter(
        static_cast<double>(state.iterations()), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
    state.counters["data_per_cycle"] = static_cast<double>(bb.to_b - b0) / static_cast<double>(state.iterations());
    state.counters["acks_per_cycle"] = static_cast<double>(bb.to_a - a0) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_Integrity)->Args({4096, 0})->Args({4096, 1})->Args({256, 0})->Args({256, 1});
BENCHMARK(BM_Integrity)->Name("IntegrityOffFixed20k")->Args({4096, 0})->Iterations(20000);
BENCHMARK(BM_Integrity)->Name("IntegrityOffFixed40k")->Args({4096, 0})->Iterations(40000);
BENCHMARK(BM_Integrity)->Name("IntegrityOnFixed20k")->Args({4096, 1})->Iterations(20000);
BENCHMARK(BM_Integrity)->Name("IntegrityOnFixed40k")->Args({4096, 1})->Iterations(40000);

// Per DATA packet, each end alone (BM_Sender and BM_Receiver), range(1) = 1 with the
// trailer: the sender's CRC after encoding, the receiver's check before decoding.
void BM_SenderIntegrity(benchmark::State& state) {
    BackToBack bb(static_cast<uint32_t>(state.range(0)), state.range(1) != 0);
    sender_loop(state, bb);
}
void BM_ReceiverIntegrity(benchmark::State& state) {
    BackToBack bb(static_cast<uint32_t>(state.range(0)), state.range(1) != 0);
    receiver_loop(state, bb);
}
BENCHMARK(BM_SenderIntegrity)->ArgsProduct({{4096, 256}, {0, 1}});
BENCHMARK(BM_ReceiverIntegrity)->ArgsProduct({{4096, 256}, {0, 1}});

// One CRC32C ([INT-2]) over range(1) bytes, by implementation range(0): 0 the tables, 1
// the CRC32 instruction (three chains), 2 folding in AVX-512 registers, 3 what crc32c()
// picks on this CPU, 4 folding in AVX2 registers (util/crc32c.h). The sizes: an ACK with
// its trailer's room (80 bytes: 72 + 8), a DATA of 256 and of 4096 bytes of payload (328,
// 4168). The folding paths take the CRC32 instruction below 256 bytes.
void BM_Crc32c(benchmark::State& state) {
    const auto impl = state.range(0);
    if (impl == 1 && !crc32c_hw_supported()) return state.SkipWithError("no SSE4.2");
    if (impl == 2 && !crc32c_detail::fold512_supported()) return state.SkipWithError("no AVX-512 VPCLMULQDQ");
    if (impl == 4 && !crc32c_detail::fold256_supported()) return state.SkipWithError("no AVX2 VPCLMULQDQ");
    std::vector<std::byte> buf(static_cast<size_t>(state.range(1)));
    Rng rng(1);
    for (auto& b : buf) b = static_cast<std::byte>(rng.next_u32());
    const std::span<const std::byte> data(buf);
    const bool wide = data.size() >= crc32c_detail::kFoldMinBytes;
    const auto one = [&]() -> uint32_t {
        switch (impl) {
            case 0: return crc32c_sw(data);
            case 2: if (wide) return crc32c_detail::crc32c_fold512_update(0xFFFFFFFFu, data) ^ 0xFFFFFFFFu; break;
            case 3: return crc32c(data);
            case 4: if (wide) return crc32c_detail::crc32c_fold256_update(0xFFFFFFFFu, data) ^ 0xFFFFFFFFu; break;
            default: break;
        }
        return crc32c_hw(data);
    };
    for (auto _ : state) {
        benchmark::DoNotOptimize(buf.data());
        benchmark::DoNotOptimize(one());
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(1));
}
BENCHMARK(BM_Crc32c)->ArgsProduct({{0, 1, 2, 3, 4}, {80, 328, 4168}});

// The same cycle with obs/'s trace sink installed on both engines, as api::Device does:
// every RTT sample goes into its path's histogram, and window cuts and hint changes are
// checked per ACK (docs/results.md, "Cost of observability").
void BM_DataPacketBothSidesObserved(benchmark::State& state) {
    BackToBack bb(static_cast<uint32_t>(state.range(0)));
    obs::Observer oa, ob;
    bb.a->set_trace_sink(&oa);
    bb.b->set_trace_sink(&ob);
    for (auto _ : state) bb.cycle();
    state.SetItemsProcessed(state.iterations());
    benchmark::DoNotOptimize(oa.path_rtt(bb.a->connection_to(bb.b->local_address()), 0));
}
BENCHMARK(BM_DataPacketBothSidesObserved)->Arg(256);
BENCHMARK(BM_DataPacketBothSidesObserved)->Name("Fixed200kObserved")->Arg(256)->Iterations(200000);

// A forged HELLO that must prove its address (the unproven budget spent: 0 here): decoded,
// a cookie made for it (one SipHash-2-4 MAC: it carries none to check), a RETRY queued
// and encoded by poll_transmit. What one flood packet costs the engine.
void BM_HelloRetry(benchmark::State& state) {
    core::EndpointConfig cfg;
    cfg.unproven_connections = 0;
    core::Endpoint ep(cfg, Address::ipv4(0xC6120002, 4797), 2);
    Rng rng(7);
    std::vector<std::vector<std::byte>> hellos(4096);
    for (auto& b : hellos) {
        wire::HelloPacket h;
        h.common.type = wire::PacketType::kHello;
        h.src_conn_id = rng.next_u32() | 1;
        h.src_token = rng.next_u64() | 1;
        h.isn = rng.next_u32() | 1;
        h.msg_isn = rng.next_u32() | 1;
        h.endpoint_port = static_cast<uint16_t>(1024 + rng.uniform(60000));
        h.num_paths = 256;
        h.max_payload = 4096;
        b.resize(wire::kHelloSize);
        (void)wire::encode_hello(h, b);
    }
    PacketMeta rx;
    rx.src = Address::ipv4(0xC6120001, 50000);
    rx.dst = ep.local_address();
    std::vector<std::byte> out(ep.max_datagram_size());
    PacketMeta tx;
    Time now{};
    size_t i = 0;
    for (auto _ : state) {
        ep.on_datagram(hellos[i++ & 4095], rx, now);
        benchmark::DoNotOptimize(ep.poll_transmit(out, tx, now));
        now += std::chrono::microseconds(1);
    }
    state.SetItemsProcessed(state.iterations());
    state.counters["retries"] = static_cast<double>(ep.stats().retries_sent);
}
BENCHMARK(BM_HelloRetry);

}  // namespace
}  // namespace mroce

BENCHMARK_MAIN();
