// tests/api/loopback_test.cc — two api::Devices in one process over 127.0.0.1: handshake,
// SEND/RECV (up to 1 MiB, every byte checked), RDMA WRITE and WRITE_WITH_IMM, completion
// order, remote access errors, a dead peer, and both progress modes. Plumbing over real
// sockets: bounds on time are generous and only guard against hangs (STYLE §6).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "api/device.h"
#include "tests/api/test_util.h"

namespace mroce::test {
namespace {

const bool kWatchdogInstalled = install_watchdog();

using api::Completion;
using api::ProgressMode;
using api::Status;
using api::WorkOpcode;
namespace access = api::access;

constexpr uint32_t kAllRemote = access::kRemoteWrite | access::kRemoteRead | access::kRemoteAtomic;
constexpr auto kTimeout = std::chrono::milliseconds(20'000);

// pattern is the payload byte at `offset` of message `msg`.
std::byte pattern(uint32_t msg, uint64_t offset) {
    uint64_t x = (uint64_t{msg} << 40) ^ offset;
    x *= 0x9e3779b97f4a7c15ULL;
    return static_cast<std::byte>(x >> 56);
}
constexpr std::byte kSentinel{0xA5};

const char* mode_name(ProgressMode m) { return m == ProgressMode::kThread ? "thread" : "manual"; }

// Side is one device with a PD, one MR over `memory`, a send CQ, a receive CQ and a QP.
struct Side {
    std::unique_ptr<api::Device> dev;
    std::unique_ptr<api::ProtectionDomain> pd;
    std::vector<std::byte> memory;
    std::unique_ptr<api::MemoryRegion> mr;
    std::unique_ptr<api::CompletionQueue> send_cq, recv_cq;
    std::unique_ptr<api::QueuePair> qp;

    uint64_t addr(uint64_t offset) const { return mr->addr() + offset; }
};

api::DeviceConfig device_config(ProgressMode mode, uint64_t seed) {
    api::DeviceConfig cfg;
    cfg.local = loopback();
    cfg.seed = seed;
    cfg.progress = mode;
    return cfg;
}

Side open_side(const api::DeviceConfig& cfg, size_t memory_bytes) {
    Side s;
    std::string why;
    auto dev = api::Device::open(cfg, &why);
    EXPECT_TRUE(dev.ok()) << why;
    if (!dev.ok()) return s;
    s.dev = std::move(dev).value();
    s.pd = s.dev->alloc_pd();
    s.memory.assign(memory_bytes, kSentinel);
    auto mr = s.pd->register_memory(s.memory.data(), s.memory.size(),
                                    access::kLocalWrite | access::kRemoteWrite);
    EXPECT_TRUE(mr.ok());
    s.mr = std::move(mr).value();
    s.send_cq = s.dev->create_cq();
    s.recv_cq = s.dev->create_cq();
    auto qp = s.pd->create_qp(*s.send_cq, *s.recv_cq);
    EXPECT_TRUE(qp.ok());
    s.qp = std::move(qp).value();
    // INIT, as a verbs application does first, so that receives can be posted early.
    const api::QpModify init = api::qp_to_init(kAllRemote);
    EXPECT_EQ(s.qp->modify(init.attr, init.mask), Error::kOk);
    return s;
}

class Loopback : public ::testing::TestWithParam<ProgressMode> {
protected:
    void SetUp() override {
        seed_ = test_seed();
        std::printf("seed %llu (replay: MROCE_SEED=%llu), %s progress\n",
                    static_cast<unsigned long long>(seed_), static_cast<unsigned long long>(seed_),
                    mode_name(GetParam()));
    }

    // open_pair opens both sides; connect_pair exchanges the QP numbers "out of band".
    void open_pair(size_t memory_bytes, core::EndpointConfig ecfg = {}) {
        auto cfg = device_config(GetParam(), seed_ * 2 + 1);
        cfg.endpoint = ecfg;
        a_ = open_side(cfg, memory_bytes);
        cfg.seed = seed_ * 2 + 2;
        b_ = open_side(cfg, memory_bytes);
        ASSERT_TRUE(a_.qp && b_.qp);
    }
    void connect_pair() {
        ASSERT_EQ(a_.qp->connect(b_.dev->local_address(), b_.qp->number()), Error::kOk);
        ASSERT_EQ(b_.qp->connect(a_.dev->local_address(), a_.qp->number()), Error::kOk);
        EXPECT_TRUE(a_.qp->connected());
    }

    // step lets both devices progress: in manual mode the test thread drives them.
    void step() {
        if (GetParam() == ProgressMode::kManual) {
            const bool did = a_.dev->progress() | b_.dev->progress();
            if (!did) std::this_thread::yield();
        } else {
            std::this_thread::sleep_for(std::chrono::microseconds(20));
        }
    }

    // collect polls `cq` until it has produced `n` completions (appended to out).
    bool collect(api::CompletionQueue& cq, size_t n, std::vector<Completion>& out) {
        const bool ok = eventually(
            [&] {
                Completion buf[16];
                const size_t got = cq.poll(buf);
                out.insert(out.end(), buf, buf + got);
                return out.size() >= n;
            },
            kTimeout, [&] { step(); });
        if (!ok) {
            describe("A", a_);
            describe("B", b_);
        }
        return ok;
    }

    // describe prints what a side's device saw, to diagnose a failure.
    static void describe(const char* name, Side& s) {
        if (!s.dev) return;
        const api::DeviceStats st = s.dev->stats();
        std::printf("%s %s: driver out %llu in %llu passes %llu sleeps %llu timeouts %llu; udp "
                    "sent %llu received %llu bind failures %llu send errors %llu last error '%s'\n",
                    name, s.dev->local_address().to_string().c_str(),
                    static_cast<unsigned long long>(st.driver.datagrams_out),
                    static_cast<unsigned long long>(st.driver.datagrams_in),
                    static_cast<unsigned long long>(st.driver.passes),
                    static_cast<unsigned long long>(st.driver.sleeps),
                    static_cast<unsigned long long>(st.driver.timeouts),
                    static_cast<unsigned long long>(st.udp.packets_sent),
                    static_cast<unsigned long long>(st.udp.packets_received),
                    static_cast<unsigned long long>(st.udp.bind_failures),
                    static_cast<unsigned long long>(st.udp.send_errors), "");
        api::Event e[32];
        const size_t n = s.dev->poll_events(e);
        for (size_t i = 0; i < n; ++i)
            std::printf("  event kind %d conn %u path %u status %s peer %s\n",
                        static_cast<int>(e[i].kind), e[i].connection, e[i].path,
                        core::to_string(e[i].status), e[i].peer.to_string().c_str());
    }

    // wait_event waits for an event of `kind` on `dev` (other events are skipped).
    bool wait_event(api::Device& dev, api::EventKind kind, api::Event* found = nullptr) {
        return eventually(
            [&] {
                api::Event e[8];
                const size_t n = dev.poll_events(e);
                for (size_t i = 0; i < n; ++i)
                    if (e[i].kind == kind) {
                        if (found) *found = e[i];
                        return true;
                    }
                return false;
            },
            kTimeout, [&] { step(); });
    }

    uint64_t seed_ = 1;
    Side a_, b_;
};

INSTANTIATE_TEST_SUITE_P(Modes, Loopback,
                         ::testing::Values(ProgressMode::kManual, ProgressMode::kThread),
                         [](const auto& info) { return std::string(mode_name(info.param)); });

TEST_P(Loopback, HandshakeRaisesConnectionUpOnBothSides) {
    open_pair(4096);
    connect_pair();
    api::Event e;
    ASSERT_TRUE(wait_event(*a_.dev, api::EventKind::kConnectionUp, &e));
    EXPECT_EQ(e.peer, b_.dev->local_address());
    ASSERT_TRUE(wait_event(*b_.dev, api::EventKind::kConnectionUp, &e));
    EXPECT_EQ(e.peer, a_.dev->local_address());
}

// SEND/RECV of messages from 0 bytes to 1 MiB (256 segments of 4 KiB): receive completions
// in order with the right lengths, every byte at its place, send completions in order.
TEST_P(Loopback, SendRecvUpToOneMebibyte) {
    const std::vector<uint32_t> sizes = {1, 100, 0, 4096, 4097, 60000, 1 << 20};
    uint64_t total = 0;
    std::vector<uint64_t> offsets;
    for (uint32_t s : sizes) {
        offsets.push_back(total);
        total += s;
    }
    open_pair(total);
    // Receives posted before connect are handed over by connect.
    for (size_t m = 0; m < sizes.size(); ++m)
        ASSERT_EQ(b_.qp->post_recv({m, b_.addr(offsets[m]), sizes[m], b_.mr->lkey()}), Error::kOk);
    connect_pair();
    for (size_t m = 0; m < sizes.size(); ++m)
        for (uint32_t i = 0; i < sizes[m]; ++i)
            a_.memory[offsets[m] + i] = pattern(static_cast<uint32_t>(m), i);

    // The small ones first, then the 1 MiB one alone, timed.
    const size_t big = sizes.size() - 1;
    for (size_t m = 0; m < big; ++m) {
        api::SendWr wr;
        wr.wr_id = 100 + m;
        wr.opcode = WorkOpcode::kSend;
        wr.local_addr = a_.addr(offsets[m]);
        wr.length = sizes[m];
        wr.lkey = a_.mr->lkey();
        ASSERT_EQ(a_.qp->post_send(wr), Error::kOk);
    }
    std::vector<Completion> recvs, sends;
    ASSERT_TRUE(collect(*b_.recv_cq, big, recvs)) << "got " << recvs.size();
    const auto t0 = std::chrono::steady_clock::now();
    api::SendWr wr;
    wr.wr_id = 100 + big;
    wr.local_addr = a_.addr(offsets[big]);
    wr.length = sizes[big];
    wr.lkey = a_.mr->lkey();
    ASSERT_EQ(a_.qp->post_send(wr), Error::kOk);
    ASSERT_TRUE(collect(*b_.recv_cq, sizes.size(), recvs)) << "got " << recvs.size();
    const auto t1 = std::chrono::steady_clock::now();
    ASSERT_TRUE(collect(*a_.send_cq, sizes.size(), sends)) << "got " << sends.size();
    std::printf("1 MiB SEND over loopback (%s progress): %.3f ms\n", mode_name(GetParam()),
                std::chrono::duration<double, std::milli>(t1 - t0).count());

    ASSERT_EQ(recvs.size(), sizes.size());
    for (size_t m = 0; m < sizes.size(); ++m) {
        EXPECT_EQ(recvs[m].status, Status::kSuccess) << core::to_string(recvs[m].status);
        EXPECT_EQ(recvs[m].wr_id, m);
        EXPECT_EQ(recvs[m].opcode, WorkOpcode::kRecv);
        EXPECT_EQ(recvs[m].byte_len, sizes[m]);
        EXPECT_EQ(recvs[m].stream, b_.qp->number());
        EXPECT_FALSE(recvs[m].has_imm);
        EXPECT_EQ(sends[m].status, Status::kSuccess);
        EXPECT_EQ(sends[m].wr_id, 100 + m);
        EXPECT_EQ(sends[m].opcode, WorkOpcode::kSend);
        for (uint32_t i = 0; i < sizes[m]; ++i)
            if (b_.memory[offsets[m] + i] != pattern(static_cast<uint32_t>(m), i))
                FAIL() << "message " << m << " byte " << i << " wrong";
    }
    const api::DeviceStats st = a_.dev->stats();
    std::printf("A: %llu datagrams out, %llu in, %llu passes, %llu sleeps, %llu tx retries\n",
                static_cast<unsigned long long>(st.driver.datagrams_out),
                static_cast<unsigned long long>(st.driver.datagrams_in),
                static_cast<unsigned long long>(st.driver.passes),
                static_cast<unsigned long long>(st.driver.sleeps),
                static_cast<unsigned long long>(st.driver.tx_retries));
    EXPECT_GE(st.udp.packets_sent, 256u);
    EXPECT_EQ(st.udp.send_errors, 0u);
}

// A datagram that answers A's SEND and acknowledges it (B's answer, with the ACK riding on
// it: ack_with_reverse_data) completes a receive and a send at A in one pass. Both are
// queued before either CQ's waiters are told: an application woken for the receive that
// looks at once for its send completion finds it (perftest's ib_send_lat -e shares one
// completion channel between its two CQs and polls the other CQ once per event; it read an
// empty CQ about once in a thousand round trips and failed). The hook on A's receive CQ,
// run as the waiters are told, polls A's send CQ; max_ack_delay is long, so B's ACK waits
// for the answer, however slowly the test posts it. Ten round trips. Manual progress only:
// the guarantee holds within one pass, and a progress thread that reads the socket while
// the kernel is still queueing a GSO pair (or a pass that cannot send, and so leaves a
// coalesced ACK for the next) may take the answer and its ACK in two passes. With the test
// thread driving both devices, B's send has queued both before A's pass reads.
struct PeekAtSendCq {
    api::CompletionQueue* send_cq = nullptr;
    std::vector<Completion> seen;  // send completions found when the receive CQ's waiters were told
    int calls = 0;
};
void peek_at_send_cq(void* arg) {
    auto* p = static_cast<PeekAtSendCq*>(arg);
    ++p->calls;
    Completion c[4];
    const size_t n = p->send_cq->poll(c);
    p->seen.insert(p->seen.end(), c, c + n);
}

class ManualLoopback : public Loopback {};
INSTANTIATE_TEST_SUITE_P(Modes, ManualLoopback, ::testing::Values(ProgressMode::kManual),
                         [](const auto& info) { return std::string(mode_name(info.param)); });

TEST_P(ManualLoopback, ASendCompletionIsQueuedBeforeTheAnswersReceiveIsTold) {
    // 8 bytes: the ACK and the answer share a datagram ([WIRE-10]); 4096: they leave as a
    // GSO pair, the answer first ([ACK-12]).
    for (const uint32_t len : {8u, 4096u}) {
        SCOPED_TRACE("answers of " + std::to_string(len) + " bytes");
        core::EndpointConfig ecfg;
        ecfg.ack_with_reverse_data = true;
        ecfg.max_ack_delay = std::chrono::milliseconds(100);
        open_pair(2 * 4096, ecfg);
        connect_pair();
        PeekAtSendCq peek{a_.send_cq.get(), {}, 0};
        a_.recv_cq->set_notify(peek_at_send_cq, &peek);
        constexpr int kRounds = 10;
        std::vector<Completion> b_recvs, b_sends;
        for (int i = 0; i < kRounds; ++i) {
            const auto id = static_cast<uint64_t>(i);
            ASSERT_EQ(a_.qp->post_recv({id, a_.addr(4096), len, a_.mr->lkey()}), Error::kOk);
            ASSERT_EQ(b_.qp->post_recv({id, b_.addr(4096), len, b_.mr->lkey()}), Error::kOk);
            ASSERT_EQ(a_.qp->post_send({100 + id, WorkOpcode::kSend, a_.addr(0), len, a_.mr->lkey()}), Error::kOk);
            ASSERT_TRUE(collect(*b_.recv_cq, static_cast<size_t>(i + 1), b_recvs));
            const size_t before = peek.seen.size();
            const int calls = peek.calls;
            ASSERT_EQ(b_.qp->post_send({200 + id, WorkOpcode::kSend, b_.addr(0), len, b_.mr->lkey()}), Error::kOk);
            ASSERT_TRUE(eventually([&] { return peek.calls > calls; }, kTimeout, [&] { step(); }));
            ASSERT_EQ(peek.seen.size(), before + 1)
                << "round " << i << ": A's receive CQ was told before its send completion was queued";
            EXPECT_EQ(peek.seen.back().wr_id, 100 + id);
            EXPECT_EQ(peek.seen.back().status, Status::kSuccess);
            std::vector<Completion> a_recv;
            ASSERT_TRUE(collect(*a_.recv_cq, 1, a_recv));
        }
        a_.recv_cq->set_notify(nullptr, nullptr);
        if (len == 8) {  // the answers' ACKs rode in their datagrams
            EXPECT_GE(a_.dev->stats().endpoint.coalesced_received, static_cast<uint64_t>(kRounds));
        }
        ASSERT_TRUE(collect(*b_.send_cq, kRounds, b_sends));  // the last one after max_ack_delay
        a_ = Side{};
        b_ = Side{};
    }
}

// A stream of 1 MiB SENDs posted back to back: all complete in order, the last one's
// bytes are checked, and the goodput is printed (a plumbing figure, not asserted).
TEST_P(Loopback, StreamOfOneMebibyteSends) {
    constexpr uint32_t kMsg = 1 << 20, kCount = 16;
    open_pair(2 * kMsg);
    connect_pair();
    for (uint32_t i = 0; i < kMsg; ++i) a_.memory[i] = pattern(kCount - 1, i);
    for (uint32_t m = 0; m < kCount; ++m)  // B's receives alternate between two buffers
        ASSERT_EQ(b_.qp->post_recv({m, b_.addr((m % 2) * kMsg), kMsg, b_.mr->lkey()}), Error::kOk);
    const auto t0 = std::chrono::steady_clock::now();
    for (uint32_t m = 0; m < kCount; ++m)
        ASSERT_EQ(a_.qp->post_send({m, WorkOpcode::kSend, a_.addr(0), kMsg, a_.mr->lkey()}),
                  Error::kOk);
    std::vector<Completion> recvs, sends;
    ASSERT_TRUE(collect(*b_.recv_cq, kCount, recvs)) << "got " << recvs.size();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_TRUE(collect(*a_.send_cq, kCount, sends));
    std::printf("%u x 1 MiB SEND (%s progress): %.1f ms, %.2f Gbit/s\n", kCount,
                mode_name(GetParam()), s * 1e3, kCount * kMsg * 8.0 / s / 1e9);
    for (uint32_t m = 0; m < kCount; ++m) {
        EXPECT_EQ(recvs[m].wr_id, m);
        EXPECT_EQ(recvs[m].status, Status::kSuccess);
        EXPECT_EQ(sends[m].wr_id, m);
        EXPECT_EQ(sends[m].status, Status::kSuccess);
    }
    const uint64_t last = ((kCount - 1) % 2) * kMsg;
    for (uint32_t i = 0; i < kMsg; ++i)
        if (b_.memory[last + i] != pattern(kCount - 1, i)) FAIL() << "byte " << i << " wrong";
    const api::DeviceStats st = a_.dev->stats();
    std::printf("A: %llu datagrams out, %llu passes, %llu sleeps; udp would-block %llu, "
                "bind failures %llu; stuck deadlines %llu; B udp received %llu\n",
                static_cast<unsigned long long>(st.driver.datagrams_out),
                static_cast<unsigned long long>(st.driver.passes),
                static_cast<unsigned long long>(st.driver.sleeps),
                static_cast<unsigned long long>(st.udp.send_would_block),
                static_cast<unsigned long long>(st.udp.bind_failures),
                static_cast<unsigned long long>(st.driver.stuck_deadlines),
                static_cast<unsigned long long>(b_.dev->stats().udp.packets_received));
}

// RDMA WRITE then WRITE_WITH_IMM: the immediate reaches B's receive completion, and when
// it completes both writes' bytes are in place; A's completions come in posting order.
TEST_P(Loopback, WriteAndWriteWithImmediate) {
    constexpr uint32_t kLen = 200'000;
    open_pair(2 * kLen);
    connect_pair();
    for (uint32_t i = 0; i < 2 * kLen; ++i) a_.memory[i] = pattern(i < kLen ? 1 : 2, i % kLen);
    // WRITE_WITH_IMM consumes a receive; its buffer is not written, so it may be empty.
    ASSERT_EQ(b_.qp->post_recv({7, 0, 0, 0}), Error::kOk);

    api::SendWr w;
    w.wr_id = 1;
    w.opcode = WorkOpcode::kWrite;
    w.local_addr = a_.addr(0);
    w.length = kLen;
    w.lkey = a_.mr->lkey();
    w.remote_addr = b_.addr(0);
    w.rkey = b_.mr->rkey();
    ASSERT_EQ(a_.qp->post_send(w), Error::kOk);
    w.wr_id = 2;
    w.opcode = WorkOpcode::kWriteImm;
    w.local_addr = a_.addr(kLen);
    w.remote_addr = b_.addr(kLen);
    w.imm = 0xdeadbeef;
    ASSERT_EQ(a_.qp->post_send(w), Error::kOk);

    std::vector<Completion> recvs, sends;
    ASSERT_TRUE(collect(*b_.recv_cq, 1, recvs));
    EXPECT_EQ(recvs[0].wr_id, 7u);
    EXPECT_EQ(recvs[0].status, Status::kSuccess);
    EXPECT_EQ(recvs[0].opcode, WorkOpcode::kRecvWriteImm);
    EXPECT_TRUE(recvs[0].has_imm);
    EXPECT_EQ(recvs[0].imm, 0xdeadbeefu);
    EXPECT_EQ(recvs[0].byte_len, kLen);
    for (uint32_t i = 0; i < 2 * kLen; ++i)
        if (b_.memory[i] != pattern(i < kLen ? 1 : 2, i % kLen)) FAIL() << "byte " << i << " wrong";

    ASSERT_TRUE(collect(*a_.send_cq, 2, sends));
    EXPECT_EQ(sends[0].wr_id, 1u);
    EXPECT_EQ(sends[0].opcode, WorkOpcode::kWrite);
    EXPECT_EQ(sends[1].wr_id, 2u);
    EXPECT_EQ(sends[1].opcode, WorkOpcode::kWriteImm);
    for (const Completion& c : sends) EXPECT_EQ(c.status, Status::kSuccess);
    // A plain WRITE consumes no receive: nothing else arrived at B.
    Completion extra[1];
    EXPECT_EQ(b_.recv_cq->poll(extra), 0u);
}

// [PLACE-4]: a WRITE with an rkey B never issued completes at A with a remote access
// error, and B's memory is untouched.
TEST_P(Loopback, WriteToBadRkeyIsARemoteAccessError) {
    open_pair(8192);
    connect_pair();
    api::SendWr w;
    w.wr_id = 9;
    w.opcode = WorkOpcode::kWrite;
    w.local_addr = a_.addr(0);
    w.length = 5000;
    w.lkey = a_.mr->lkey();
    w.remote_addr = b_.addr(0);
    w.rkey = b_.mr->rkey() ^ 0x5a;  // wrong tag
    ASSERT_EQ(a_.qp->post_send(w), Error::kOk);
    std::vector<Completion> sends;
    ASSERT_TRUE(collect(*a_.send_cq, 1, sends));
    EXPECT_EQ(sends[0].wr_id, 9u);
    EXPECT_EQ(sends[0].status, Status::kRemoteAccess) << core::to_string(sends[0].status);
    EXPECT_TRUE(std::all_of(b_.memory.begin(), b_.memory.end(),
                            [](std::byte v) { return v == kSentinel; }));
    // [ERR-1]: the QP is in error; later posts complete with a flush error (verbs).
    EXPECT_EQ(a_.qp->state(), api::QpState::kError);
    w.wr_id = 10;
    EXPECT_EQ(a_.qp->post_send(w), Error::kOk);
    sends.clear();
    ASSERT_TRUE(collect(*a_.send_cq, 1, sends));
    EXPECT_EQ(sends[0].wr_id, 10u);
    EXPECT_EQ(sends[0].status, Status::kFlushed);
}

// Destroying a device closes its connections: the peer's outstanding receives flush.
TEST_P(Loopback, ClosingADeviceFlushesThePeer) {
    open_pair(4096);
    connect_pair();
    // A sends CLOSE only once it knows its peer (the handshake completed on its side).
    ASSERT_TRUE(wait_event(*a_.dev, api::EventKind::kConnectionUp));
    ASSERT_TRUE(wait_event(*b_.dev, api::EventKind::kConnectionUp));
    ASSERT_EQ(b_.qp->post_recv({5, b_.addr(0), 100, b_.mr->lkey()}), Error::kOk);
    Side gone = std::move(a_);
    gone.dev.reset();  // the QP, MR and CQs outlive their device
    EXPECT_EQ(gone.qp->post_send({}), Error::kWrongState);
    a_ = open_side(device_config(GetParam(), seed_), 16);  // keeps step() usable
    std::vector<Completion> recvs;
    ASSERT_TRUE(collect(*b_.recv_cq, 1, recvs));
    EXPECT_EQ(recvs[0].wr_id, 5u);
    EXPECT_EQ(recvs[0].status, Status::kFlushed);
    ASSERT_TRUE(wait_event(*b_.dev, api::EventKind::kConnectionClosed));
}

// saw_event: `dev` has reported an event of `kind` (now or in an earlier call: `seen`).
bool saw_event(api::Device& dev, api::EventKind kind, bool& seen) {
    api::Event e[8];
    const size_t n = dev.poll_events(e);
    for (size_t i = 0; i < n; ++i) seen |= e[i].kind == kind;
    return seen;
}

// destroy_timed destroys `s`'s device and returns how long that took.
std::chrono::duration<double, std::milli> destroy_timed(Side& s) {
    const auto t0 = std::chrono::steady_clock::now();
    s.dev.reset();
    return std::chrono::steady_clock::now() - t0;
}

// [CONN-29] a destroyed device lingers until its peer confirms the close: B (its own
// progress thread) answers the CLOSE with a CONFIRM and A's destruction returns at once,
// long before its (here long) linger bound.
TEST(Api, DestructionEndsWhenThePeerConfirmsTheClose) {
    const uint64_t seed = test_seed();
    std::printf("seed %llu (replay: MROCE_SEED=%llu)\n", static_cast<unsigned long long>(seed),
                static_cast<unsigned long long>(seed));
    auto cfg = device_config(ProgressMode::kThread, seed * 2 + 1);
    cfg.close_linger = std::chrono::seconds(2);
    Side a = open_side(cfg, 4096);
    Side b = open_side(device_config(ProgressMode::kThread, seed * 2 + 2), 4096);
    ASSERT_TRUE(a.qp && b.qp);
    ASSERT_EQ(a.qp->connect(b.dev->local_address(), b.qp->number()), Error::kOk);
    ASSERT_EQ(b.qp->connect(a.dev->local_address(), a.qp->number()), Error::kOk);
    const Address a_addr = a.dev->local_address();
    bool a_up = false, b_up = false;
    ASSERT_TRUE(eventually(
        [&] {
            return saw_event(*a.dev, api::EventKind::kConnectionUp, a_up) &&
                   saw_event(*b.dev, api::EventKind::kConnectionUp, b_up);
        },
        kTimeout));
    const auto took = destroy_timed(a);
    std::printf("destruction took %.2f ms (linger bound 2000 ms)\n", took.count());
    EXPECT_LT(took.count(), 1000.0) << "A waited out its linger: no confirmation";
    auto r = b.dev->connection_report(a_addr);
    ASSERT_TRUE(r.ok());
    EXPECT_GE(r->connection.closes_answered, 1u);
}

// [CONN-29] a peer that never answers (here: B's device is not driven) costs the
// destruction its linger bound and no more; A sends the CLOSE again meanwhile, and B,
// once it runs, finds them and closes.
TEST(Api, DestructionNeverLingersPastItsBound) {
    const uint64_t seed = test_seed();
    std::printf("seed %llu (replay: MROCE_SEED=%llu)\n", static_cast<unsigned long long>(seed),
                static_cast<unsigned long long>(seed));
    auto cfg = device_config(ProgressMode::kThread, seed * 2 + 1);
    cfg.close_linger = std::chrono::milliseconds(100);
    Side a = open_side(cfg, 4096);
    Side b = open_side(device_config(ProgressMode::kManual, seed * 2 + 2), 4096);
    ASSERT_TRUE(a.qp && b.qp);
    ASSERT_EQ(a.qp->connect(b.dev->local_address(), b.qp->number()), Error::kOk);
    ASSERT_EQ(b.qp->connect(a.dev->local_address(), a.qp->number()), Error::kOk);
    const Address a_addr = a.dev->local_address();
    bool a_up = false, b_up = false;
    ASSERT_TRUE(eventually(
        [&] {
            return saw_event(*a.dev, api::EventKind::kConnectionUp, a_up) &&
                   saw_event(*b.dev, api::EventKind::kConnectionUp, b_up);
        },
        kTimeout, [&] { (void)b.dev->progress(); }));
    // B reads what the handshake still has in flight (copies of HELLO_ACK) until 20 ms
    // pass without a datagram, so that what it reads after A's destruction is A's CLOSEs.
    auto received = [&] { return b.dev->stats().endpoint.datagrams_received; };
    auto drain_b = [&](std::chrono::milliseconds quiet) {
        auto last = received();
        auto since = std::chrono::steady_clock::now();
        const auto give_up = since + kTimeout;
        while (std::chrono::steady_clock::now() - since < quiet && std::chrono::steady_clock::now() < give_up) {
            (void)b.dev->progress();
            if (received() != last) {
                last = received();
                since = std::chrono::steady_clock::now();
            }
        }
    };
    drain_b(std::chrono::milliseconds(20));
    const uint64_t before = received();
    const auto took = destroy_timed(a);
    std::printf("destruction took %.2f ms (linger bound 100 ms)\n", took.count());
    EXPECT_GE(took.count(), 95.0);   // it waited for a confirmation
    EXPECT_LT(took.count(), 1000.0);  // and stopped at its bound (with room for a loaded host)
    bool closed = false;
    ASSERT_TRUE(eventually([&] { return saw_event(*b.dev, api::EventKind::kConnectionClosed, closed); },
                           kTimeout, [&] { (void)b.dev->progress(); }));
    drain_b(std::chrono::milliseconds(5));
    auto r = b.dev->connection_report(a_addr);
    ASSERT_TRUE(r.ok());
    // B answered A's CLOSE.
    EXPECT_GE(r->connection.closes_answered, 1u);
    // A sent its CLOSE again while it lingered, with a doubling interval from min_pto
    // (200 µs): eight resends fit in 100 ms; at least three must have left, even on a
    // loaded host. (CI, 7 Dec: a resend queued without waking the driver never left, and
    // the one CLOSE that did went out on a path whose source port another socket held.)
    const uint64_t closes = received() - before;
    std::printf("B read %llu CLOSEs\n", static_cast<unsigned long long>(closes));
    EXPECT_GE(closes, 4u);
}

// With close_connections off (the Verbs library's setting), a device that goes away
// tells its peers nothing: their posted receives stay, as with a NIC whose peer process
// ended, and the connection is still up.
TEST_P(Loopback, ADeviceThatDoesNotCloseLeavesThePeersReceivesPosted) {
    auto cfg = device_config(GetParam(), seed_ * 2 + 1);
    cfg.close_connections = false;
    a_ = open_side(cfg, 4096);
    b_ = open_side(device_config(GetParam(), seed_ * 2 + 2), 4096);
    ASSERT_TRUE(a_.qp && b_.qp);
    connect_pair();
    ASSERT_TRUE(wait_event(*a_.dev, api::EventKind::kConnectionUp));
    ASSERT_TRUE(wait_event(*b_.dev, api::EventKind::kConnectionUp));
    ASSERT_EQ(b_.qp->post_recv({5, b_.addr(0), 100, b_.mr->lkey()}), Error::kOk);
    Side gone = std::move(a_);
    gone.dev.reset();
    a_ = open_side(device_config(GetParam(), seed_), 16);  // keeps step() usable
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    while (std::chrono::steady_clock::now() < until) step();
    Completion c[1];
    EXPECT_EQ(b_.recv_cq->poll(c), 0u);
    EXPECT_EQ(b_.qp->state(), api::QpState::kRts);
}

// [CONN-12]: towards an address where nobody listens, the handshake gives up after its
// retries and every work request completes with an error; nothing hangs.
TEST_P(Loopback, DeadPeerFailsTheConnectionWithAnErrorCompletion) {
    core::EndpointConfig ecfg;
    ecfg.handshake_timeout = std::chrono::milliseconds(1);
    ecfg.handshake_retries = 3;  // 1 + 2 + 4 + 8 ms
    ecfg.peer_dead_timeout = std::chrono::milliseconds(50);
    auto cfg = device_config(GetParam(), seed_);
    cfg.endpoint = ecfg;
    a_ = open_side(cfg, 4096);
    ASSERT_TRUE(a_.qp);
    // An address that was just free: bind, read the port, close.
    Address nobody;
    {
        std::string why;
        auto probe = datapath::UdpDatapath::open(loopback(), {}, &why);
        ASSERT_TRUE(probe.ok()) << why;
        nobody = (*probe)->local_address();
    }
    ASSERT_EQ(a_.qp->connect(nobody, 1), Error::kOk);
    ASSERT_EQ(a_.qp->post_recv({1, a_.addr(0), 64, a_.mr->lkey()}), Error::kOk);
    ASSERT_EQ(a_.qp->post_send({2, WorkOpcode::kSend, a_.addr(64), 64, a_.mr->lkey()}), Error::kOk);
    ASSERT_EQ(a_.qp->post_send({3, WorkOpcode::kSend, a_.addr(128), 64, a_.mr->lkey()}), Error::kOk);

    const auto t0 = std::chrono::steady_clock::now();
    auto manual_step = [&] {
        if (GetParam() == ProgressMode::kManual)
            a_.dev->progress();
        else
            std::this_thread::sleep_for(std::chrono::microseconds(50));
    };
    std::vector<Completion> sends, recvs;
    auto poll_both = [&] {
        Completion buf[4];
        size_t n = a_.send_cq->poll(buf);
        sends.insert(sends.end(), buf, buf + n);
        n = a_.recv_cq->poll(buf);
        recvs.insert(recvs.end(), buf, buf + n);
        return sends.size() >= 2 && recvs.size() >= 1;
    };
    ASSERT_TRUE(eventually(poll_both, kTimeout, manual_step));
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("dead peer detected after %.1f ms\n", ms);
    EXPECT_EQ(sends[0].wr_id, 2u);
    EXPECT_EQ(sends[0].status, Status::kPeerDead) << core::to_string(sends[0].status);
    EXPECT_EQ(sends[1].wr_id, 3u);
    EXPECT_EQ(sends[1].status, Status::kFlushed);
    EXPECT_EQ(recvs[0].wr_id, 1u);
    EXPECT_EQ(recvs[0].status, Status::kFlushed);
    api::Event e[8];
    const size_t n = a_.dev->poll_events(e);
    ASSERT_GE(n, 1u);
    EXPECT_EQ(e[n - 1].kind, api::EventKind::kConnectionFailed);
    EXPECT_EQ(e[n - 1].status, Status::kPeerDead);
    EXPECT_EQ(a_.qp->state(), api::QpState::kError);
    EXPECT_EQ(a_.qp->post_send({4, WorkOpcode::kSend, a_.addr(0), 1, a_.mr->lkey()}),
              Error::kOk);
    Completion c[2];
    ASSERT_EQ(a_.send_cq->poll(c), 1u);  // flushed at once, in ERR
    EXPECT_EQ(c[0].wr_id, 4u);
    EXPECT_EQ(c[0].status, Status::kFlushed);
}

// A receive posted in INIT (before connect) is checked at once: a bad key is refused
// and nothing is queued.
TEST_P(Loopback, EarlyReceiveWithBadKeyIsRefusedAtPost) {
    open_pair(4096);
    EXPECT_EQ(b_.qp->post_recv({1, b_.addr(0), 64, b_.mr->lkey() ^ 0x77}), Error::kAccessDenied);
    connect_pair();
    Completion c[2];
    EXPECT_EQ(b_.recv_cq->poll(c), 0u);
}

TEST(Api, QueuePairsConnectInAnyOrder) {
    auto cfg = device_config(ProgressMode::kManual, test_seed() + 5);
    std::string why;
    auto dev = api::Device::open(cfg, &why);
    ASSERT_TRUE(dev.ok()) << why;
    auto pd = (*dev)->alloc_pd();
    auto cq = (*dev)->create_cq();
    auto q1 = pd->create_qp(*cq, *cq);
    auto q2 = pd->create_qp(*cq, *cq);
    ASSERT_TRUE(q1.ok() && q2.ok());
    EXPECT_EQ((*q1)->number(), 1u);
    EXPECT_EQ((*q2)->number(), 2u);
    const Address peer = loopback(9);  // never progressed: nothing is sent
    EXPECT_EQ((*q1)->connect(peer, 0), Error::kInvalidArgument);
    EXPECT_EQ((*q1)->post_send({}), Error::kWrongState);
    // The numbers are reserved in the engine at create_qp: any connect order works.
    EXPECT_EQ((*q2)->connect(peer, 1), Error::kOk);
    EXPECT_EQ((*q2)->connect(peer, 1), Error::kWrongState);
    // [STREAM-1]: one local stream per peer stream.
    EXPECT_EQ((*q1)->connect(peer, 1), Error::kInvalidArgument);
    EXPECT_EQ((*q1)->connect(peer, 2), Error::kOk);
    // CQs of another device are refused.
    auto other = api::Device::open(cfg, &why);
    ASSERT_TRUE(other.ok()) << why;
    auto foreign = (*other)->create_cq();
    EXPECT_EQ(pd->create_qp(*foreign, *cq).error(), Error::kInvalidArgument);
}

TEST(Api, OpenRejectsAnInvalidConfigWithAMessage) {
    auto cfg = device_config(ProgressMode::kManual, test_seed());
    cfg.endpoint.num_paths = 0;
    std::string why;
    auto dev = api::Device::open(cfg, &why);
    ASSERT_FALSE(dev.ok());
    EXPECT_EQ(dev.error(), Error::kInvalidArgument);
    EXPECT_EQ(why.rfind("device: num_paths must be", 0), 0u) << why;
    // A taken port is reported by the datapath, in one line.
    auto first = api::Device::open(device_config(ProgressMode::kManual, test_seed()), &why);
    ASSERT_TRUE(first.ok()) << why;
    cfg = device_config(ProgressMode::kManual, test_seed());
    cfg.local = (*first)->local_address();
    ASSERT_FALSE(api::Device::open(cfg, &why).ok());
    EXPECT_EQ(why, "udp: bind " + cfg.local.to_string() + ": Address already in use");
}

// [PATH-1]: plane devices become the engine's local ports, and a conflicting
// num_local_ports is refused in one line.
TEST(Api, PlaneDevicesSetTheLocalPorts) {
    auto cfg = device_config(ProgressMode::kManual, test_seed());
    cfg.udp.plane_devices = {"lo", "lo"};
    std::string why;
    auto dev = api::Device::open(cfg, &why);
    ASSERT_TRUE(dev.ok()) << why;
    EXPECT_EQ((*dev)->config().endpoint.num_local_ports, 2u);
    cfg.endpoint.num_local_ports = 3;
    ASSERT_FALSE(api::Device::open(cfg, &why).ok());
    EXPECT_EQ(why, "device: endpoint.num_local_ports (3) differs from the 2 plane devices");
}

// The endpoint's own drop counters reach DeviceStats: garbage sent to the device's port
// is counted by kind and dropped.
TEST(Api, EndpointDropCountersReachTheStats) {
    api::DeviceConfig cfg;
    cfg.local = loopback();
    cfg.progress = ProgressMode::kManual;
    auto dev = api::Device::open(cfg);
    ASSERT_TRUE(dev.ok());
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    to.sin_port = htons((*dev)->local_address().port);
    std::array<uint8_t, 64> bad_version{};
    bad_version[0] = 0x7f;
    for (int i = 0; i < 5; ++i)
        ASSERT_EQ(::sendto(fd, bad_version.data(), bad_version.size(), 0,
                           reinterpret_cast<sockaddr*>(&to), sizeof(to)), 64);
    for (int i = 0; i < 3; ++i)
        ASSERT_EQ(::sendto(fd, "ab", 2, 0, reinterpret_cast<sockaddr*>(&to), sizeof(to)), 2);
    ::close(fd);
    const bool all = eventually(
        [&] { return (*dev)->stats().endpoint.datagrams_received >= 8; }, kTimeout,
        [&] { (*dev)->progress(); });
    ASSERT_TRUE(all);
    const core::EndpointStats e = (*dev)->stats().endpoint;
    EXPECT_EQ(e.truncated, 3u);
    EXPECT_EQ(e.bad_version, 5u);
}

TEST(Api, ParseAddress) {
    auto a = api::parse_address("127.0.0.1:4797");
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(*a, Address::ipv4(0x7f000001, 4797));
    auto b = api::parse_address("[::1]:80");
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(b->ip[15], 1);
    EXPECT_FALSE(b->is_ipv4());
    EXPECT_EQ(api::parse_address(a->to_string()).value(), *a);
    EXPECT_FALSE(api::parse_address("127.0.0.1").ok());
    EXPECT_FALSE(api::parse_address("127.0.0.1:65536").ok());
    EXPECT_FALSE(api::parse_address("host:1").ok());
}

// An idle device in thread mode sleeps: after the handshake no timer is armed, so the
// progress threads block in epoll and cost (almost) no CPU.
TEST(Api, IdleThreadModeDeviceSleeps) {
    std::string why;
    auto cfg = device_config(ProgressMode::kThread, test_seed() + 11);
    auto a = open_side(cfg, 64);
    cfg.seed = test_seed() + 12;
    auto b = open_side(cfg, 64);
    ASSERT_TRUE(a.qp && b.qp);
    ASSERT_EQ(a.qp->connect(b.dev->local_address(), b.qp->number()), Error::kOk);
    ASSERT_EQ(b.qp->connect(a.dev->local_address(), a.qp->number()), Error::kOk);
    ASSERT_TRUE(eventually(
        [&] {
            api::Event e[4];
            return b.dev->poll_events(e) > 0;
        },
        kTimeout));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let delayed ACKs settle
    auto cpu = [] {
        rusage u;
        ::getrusage(RUSAGE_SELF, &u);
        return std::chrono::seconds(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
               std::chrono::microseconds(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
    };
    const auto sleeps0 = a.dev->stats().driver.sleeps;
    const auto c0 = cpu();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const auto used = cpu() - c0;
    std::printf("CPU used by two idle devices over 300 ms: %.2f ms\n",
                std::chrono::duration<double, std::milli>(used).count());
    EXPECT_LT(used, std::chrono::milliseconds(60));
    EXPECT_LE(a.dev->stats().driver.sleeps - sleeps0, 5u);  // blocked, not waking up
}

}  // namespace
}  // namespace mroce::test

namespace mroce::test {
namespace {

// DeviceConfig::busy_poll (issue 19): the progress threads never sleep in epoll, and a
// CompletionQueue::wait returns the completion without sleeping either; ping-pongs of
// WRITE_WITH_IMM complete as with the default. A device without it sleeps when idle
// (IdleThreadModeDeviceSleeps), so the zero below is the option's doing.
TEST(Api, BusyPollDeviceNeverSleeps) {
    auto cfg = device_config(ProgressMode::kThread, test_seed() + 21);
    cfg.busy_poll = true;
    auto a = open_side(cfg, 64);
    cfg.seed = test_seed() + 22;
    auto b = open_side(cfg, 64);
    ASSERT_TRUE(a.qp && b.qp);
    ASSERT_EQ(a.qp->connect(b.dev->local_address(), b.qp->number()), Error::kOk);
    ASSERT_EQ(b.qp->connect(a.dev->local_address(), a.qp->number()), Error::kOk);
    api::SendWr w;
    w.opcode = WorkOpcode::kWriteImm;
    w.length = 8;
    w.lkey = a.mr->lkey();
    for (uint32_t i = 0; i < 100; ++i) {
        ASSERT_EQ(b.qp->post_recv({i, 0, 0, 0}), Error::kOk);
        w.wr_id = i;
        w.local_addr = a.addr(0);
        w.remote_addr = b.addr(8);
        w.rkey = b.mr->rkey();
        ASSERT_EQ(a.qp->post_send(w), Error::kOk);
        Completion c[1];
        ASSERT_EQ(b.recv_cq->wait(c, kTimeout), 1u) << "message " << i;
        EXPECT_EQ(c[0].status, Status::kSuccess);
        EXPECT_EQ(c[0].wr_id, i);
        ASSERT_EQ(a.send_cq->wait(c, kTimeout), 1u) << "message " << i;
        EXPECT_EQ(c[0].status, Status::kSuccess);
    }
    EXPECT_EQ(a.dev->stats().driver.sleeps, 0u);
    EXPECT_EQ(b.dev->stats().driver.sleeps, 0u);
}

}  // namespace
}  // namespace mroce::test
