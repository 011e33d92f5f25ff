// tests/api/qp_state_test.cc — the queue pair state machine (docs/design.md "QP
// lifecycle"): every (state, target) pair, attribute errors, posting rules per state,
// flush in ERR, reset and reconnect with traffic, WR chains, and per-QP settings that
// reach the engine (spec [STREAM-12], [STREAM-13]). Two devices on 127.0.0.1, manual
// progress.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include "api/device.h"
#include "tests/api/test_util.h"

namespace mroce::test {
namespace {

using api::Completion;
using api::QpAttr;
using api::QpState;
using api::Status;
using api::WorkOpcode;
namespace access = api::access;
namespace qa = api::qp_attr;

constexpr uint32_t kAllRemote = access::kRemoteWrite | access::kRemoteRead | access::kRemoteAtomic;
constexpr auto kWait = std::chrono::milliseconds(10'000);

struct Dev {
    std::unique_ptr<api::Device> dev;
    std::unique_ptr<api::ProtectionDomain> pd;
    std::unique_ptr<api::CompletionQueue> cq;
    std::vector<std::byte> mem;
    std::unique_ptr<api::MemoryRegion> mr;
    uint64_t addr(size_t off) { return reinterpret_cast<uint64_t>(mem.data() + off); }
    std::unique_ptr<api::QueuePair> qp() {
        auto q = pd->create_qp(*cq, *cq);
        EXPECT_TRUE(q.ok());
        return q.ok() ? std::move(q).value() : nullptr;
    }
};

class QpLifecycle : public ::testing::Test {
protected:
    void SetUp() override {
        seed_ = test_seed();
        std::printf("seed %llu (replay: MROCE_SEED=%llu)\n", static_cast<unsigned long long>(seed_),
                    static_cast<unsigned long long>(seed_));
        open(a_, seed_ * 2 + 1);
        open(b_, seed_ * 2 + 2);
    }
    static void open(Dev& d, uint64_t seed) {
        api::DeviceConfig cfg;
        cfg.local = loopback();
        cfg.seed = seed;
        cfg.progress = api::ProgressMode::kManual;
        std::string why;
        auto dev = api::Device::open(cfg, &why);
        ASSERT_TRUE(dev.ok()) << why;
        d.dev = std::move(dev).value();
        d.pd = d.dev->alloc_pd();
        d.cq = d.dev->create_cq();
        d.mem.assign(1 << 16, std::byte{0});
        auto mr = d.pd->register_memory(d.mem.data(), d.mem.size(),
                                        access::kLocalWrite | kAllRemote);
        ASSERT_TRUE(mr.ok());
        d.mr = std::move(mr).value();
    }
    void step() {
        a_.dev->progress();
        b_.dev->progress();
    }
    // collect polls `d`'s CQ until n completions arrived (or the wait ends).
    std::vector<Completion> collect(Dev& d, size_t n) {
        std::vector<Completion> out;
        eventually(
            [&] {
                Completion c[16];
                const size_t k = d.cq->poll(c);
                out.insert(out.end(), c, c + k);
                return out.size() >= n;
            },
            kWait, [&] { step(); });
        return out;
    }
    // drive moves `qp` (of a_) to `target` along the forward path; ERR via RTS.
    void drive(api::QueuePair& qp, QpState target) {
        if (target == QpState::kReset) return;
        const auto init = api::qp_to_init(kAllRemote);
        ASSERT_EQ(qp.modify(init.attr, init.mask), Error::kOk);
        if (target == QpState::kInit) return;
        peers_.push_back(b_.qp());
        const auto rtr = api::qp_to_rtr(b_.dev->local_address(), peers_.back()->number());
        ASSERT_EQ(qp.modify(rtr.attr, rtr.mask), Error::kOk);
        if (target == QpState::kRtr) return;
        const auto rts = api::qp_to_rts();
        ASSERT_EQ(qp.modify(rts.attr, rts.mask), Error::kOk);
        if (target == QpState::kRts) return;
        QpAttr err;
        err.state = QpState::kError;
        ASSERT_EQ(qp.modify(err, qa::kState), Error::kOk);
    }

    uint64_t seed_ = 0;
    Dev a_, b_;
    std::vector<std::unique_ptr<api::QueuePair>> peers_;
};

constexpr std::array<QpState, 5> kStates{QpState::kReset, QpState::kInit, QpState::kRtr,
                                         QpState::kRts, QpState::kError};

// The forward mask for reaching `to` (what a verbs application passes).
api::QpModify forward(QpState to, const Address& peer, uint32_t remote) {
    switch (to) {
        case QpState::kInit: return api::qp_to_init(kAllRemote);
        case QpState::kRtr: return api::qp_to_rtr(peer, remote);
        case QpState::kRts: return api::qp_to_rts();
        default: {
            api::QpModify m;
            m.attr.state = to;
            m.mask = qa::kState;
            return m;
        }
    }
}

// Every (state, target) pair with the target's usual mask (only the state when it stays
// the same): legal exactly as verbs' RC
// table says (RESET->INIT->RTR->RTS, INIT->INIT, RTS->RTS, anything to RESET or ERR);
// an illegal one fails with a reason and leaves the state as it was.
TEST_F(QpLifecycle, EveryTransitionPairFollowsTheVerbsTable) {
    auto legal = [](QpState from, QpState to) {
        if (to == QpState::kReset || to == QpState::kError) return true;
        return (from == QpState::kReset && to == QpState::kInit) ||
               (from == QpState::kInit && to == QpState::kRtr) ||
               (from == QpState::kRtr && to == QpState::kRts) ||
               (from == QpState::kInit && to == QpState::kInit) ||
               (from == QpState::kRts && to == QpState::kRts);
    };
    int checked = 0;
    for (QpState from : kStates) {
        for (QpState to : kStates) {
            auto qp = a_.qp();
            drive(*qp, from);
            ASSERT_EQ(qp->state(), from);
            auto peer = b_.qp();
            api::QpModify m = forward(to, b_.dev->local_address(), peer->number());
            if (from == to) m.mask = qa::kState;  // INIT->INIT, RTS->RTS: all fields optional
            std::string why;
            const Error e = qp->modify(m.attr, m.mask, &why);
            SCOPED_TRACE(std::string(api::to_string(from)) + " -> " + std::string(api::to_string(to)));
            if (legal(from, to)) {
                EXPECT_EQ(e, Error::kOk) << why;
                EXPECT_EQ(qp->state(), to);
            } else {
                EXPECT_EQ(e, Error::kInvalidArgument);
                EXPECT_NE(why.find("illegal transition"), std::string::npos) << why;
                EXPECT_EQ(qp->state(), from);
            }
            ++checked;
        }
    }
    EXPECT_EQ(checked, 25);
    // INIT -> INIT takes its optional fields alone (or none).
    auto qp = a_.qp();
    drive(*qp, QpState::kInit);
    QpAttr a;
    a.state = QpState::kInit;
    a.access_flags = access::kRemoteRead;
    EXPECT_EQ(qp->modify(a, qa::kState | qa::kAccessFlags), Error::kOk);
    EXPECT_EQ(qp->query().access_flags, access::kRemoteRead);
}

// Each required field missing, a field the transition does not take, and each value out
// of range: refused with a one-line reason naming it, and nothing changes.
TEST_F(QpLifecycle, AttributeErrorsNameTheFieldAndChangeNothing) {
    auto peer = b_.qp();
    const Address pa = b_.dev->local_address();
    struct Step {
        QpState from;
        api::QpModify m;
    };
    const std::array<Step, 3> steps{{{QpState::kReset, api::qp_to_init(kAllRemote)},
                                     {QpState::kInit, api::qp_to_rtr(pa, peer->number())},
                                     {QpState::kRtr, api::qp_to_rts()}}};
    int missing_checked = 0;
    for (const Step& s : steps) {
        for (uint32_t bit = 1; bit; bit <<= 1) {
            if (!(s.m.mask & bit) || bit == qa::kState || bit == qa::kPathMtu) continue;
            auto qp = a_.qp();
            drive(*qp, s.from);
            std::string why;
            EXPECT_EQ(qp->modify(s.m.attr, s.m.mask & ~bit, &why), Error::kInvalidArgument);
            EXPECT_NE(why.find("needs"), std::string::npos) << why;
            EXPECT_EQ(qp->state(), s.from);
            ++missing_checked;
        }
    }
    EXPECT_EQ(missing_checked, 3 + 5 + 5);

    // A field the transition does not take.
    {
        auto qp = a_.qp();
        drive(*qp, QpState::kInit);
        auto m = api::qp_to_rtr(pa, peer->number());
        std::string why;
        EXPECT_EQ(qp->modify(m.attr, m.mask | qa::kSqPsn, &why), Error::kInvalidArgument);
        EXPECT_NE(why.find("does not take sq_psn"), std::string::npos) << why;
        EXPECT_EQ(qp->state(), QpState::kInit);
    }
    // Values out of range, one at a time, on the transition that takes them.
    struct Bad {
        QpState from;
        void (*spoil)(QpAttr&);
        const char* field;
    };
    const std::array<Bad, 13> bad{{
        {QpState::kInit, [](QpAttr& a) { a.sl = 8; }, "sl"},
        {QpState::kReset, [](QpAttr& a) { a.port = 2; }, "port"},
        {QpState::kReset, [](QpAttr& a) { a.pkey_index = 1; }, "pkey_index"},
        {QpState::kReset, [](QpAttr& a) { a.access_flags = 1u << 30; }, "access_flags"},
        {QpState::kInit, [](QpAttr& a) { a.path_mtu = 6; }, "path_mtu"},
        {QpState::kInit, [](QpAttr& a) { a.dest_qp_num = 0; }, "dest_qp_num"},
        {QpState::kInit, [](QpAttr& a) { a.rq_psn = 1u << 24; }, "rq_psn"},
        {QpState::kInit, [](QpAttr& a) { a.min_rnr_timer = 32; }, "min_rnr_timer"},
        {QpState::kInit, [](QpAttr& a) { a.peer = Address{}; }, "peer"},
        {QpState::kRtr, [](QpAttr& a) { a.timeout = 32; }, "timeout"},
        {QpState::kRtr, [](QpAttr& a) { a.retry_cnt = 8; }, "retry_cnt"},
        {QpState::kRtr, [](QpAttr& a) { a.rnr_retry = 8; }, "rnr_retry"},
        {QpState::kRtr, [](QpAttr& a) { a.max_rd_atomic = 255; }, "max_rd_atomic"},
    }};
    for (const Bad& b : bad) {
        auto qp = a_.qp();
        drive(*qp, b.from);
        api::QpModify m = b.from == QpState::kReset ? steps[0].m
                          : b.from == QpState::kInit ? api::qp_to_rtr(pa, peer->number() + 1000)
                                                     : steps[2].m;
        b.spoil(m.attr);
        std::string why;
        EXPECT_EQ(qp->modify(m.attr, m.mask, &why), Error::kInvalidArgument) << b.field;
        EXPECT_NE(why.find(b.field), std::string::npos) << why;
        EXPECT_EQ(qp->state(), b.from) << b.field;
    }
}

// Posting rules: receives from INIT on, sends only in RTS; in ERR both are accepted and
// complete with kFlushed.
TEST_F(QpLifecycle, PostingFollowsTheState) {
    const api::SendWr send{1, WorkOpcode::kSend, a_.addr(0), 8, a_.mr->lkey()};
    const api::RecvWr recv{2, a_.addr(64), 8, a_.mr->lkey()};
    struct Rule {
        QpState state;
        Error send, recv;
    };
    const std::array<Rule, 5> rules{{
        {QpState::kReset, Error::kWrongState, Error::kWrongState},
        {QpState::kInit, Error::kWrongState, Error::kOk},
        {QpState::kRtr, Error::kWrongState, Error::kOk},
        {QpState::kRts, Error::kOk, Error::kOk},
        {QpState::kError, Error::kOk, Error::kOk},
    }};
    for (const Rule& r : rules) {
        SCOPED_TRACE(std::string(api::to_string(r.state)));
        auto qp = a_.qp();
        drive(*qp, r.state);
        EXPECT_EQ(qp->post_recv(recv), r.recv);
        EXPECT_EQ(qp->post_send(send), r.send);
        if (r.state == QpState::kError) {
            const auto c = collect(a_, 2);
            ASSERT_EQ(c.size(), 2u);
            EXPECT_EQ(c[0].status, Status::kFlushed);
            EXPECT_EQ(c[0].opcode, WorkOpcode::kRecv);
            EXPECT_EQ(c[1].status, Status::kFlushed);
            EXPECT_EQ(c[1].wr_id, 1u);
        }
        // Moving back to RESET discards whatever is posted without reporting it.
        QpAttr reset;
        reset.state = QpState::kReset;
        ASSERT_EQ(qp->modify(reset, qa::kState), Error::kOk);
    }
    for (int i = 0; i < 50; ++i) step();
    Completion c[4];
    EXPECT_EQ(a_.cq->poll(c), 0u);
}

// ERR flushes every outstanding request in posting order, then later posts after them.
TEST_F(QpLifecycle, ErrorFlushesOutstandingWorkInOrder) {
    auto qp = a_.qp();
    drive(*qp, QpState::kRts);  // the peer QP never connects: sends stay outstanding
    for (uint64_t i = 1; i <= 3; ++i)
        ASSERT_EQ(qp->post_recv({i, a_.addr(i * 64), 64, a_.mr->lkey()}), Error::kOk);
    ASSERT_EQ(qp->post_send({10, WorkOpcode::kSend, a_.addr(0), 8, a_.mr->lkey()}), Error::kOk);
    QpAttr err;
    err.state = QpState::kError;
    ASSERT_EQ(qp->modify(err, qa::kState), Error::kOk);
    ASSERT_EQ(qp->post_recv({4, a_.addr(0), 8, a_.mr->lkey()}), Error::kOk);
    const auto c = collect(a_, 5);
    ASSERT_EQ(c.size(), 5u);
    std::vector<uint64_t> recv_ids;
    for (const Completion& x : c) {
        EXPECT_EQ(x.status, Status::kFlushed);
        if (x.opcode == WorkOpcode::kRecv) recv_ids.push_back(x.wr_id);
    }
    EXPECT_EQ(recv_ids, (std::vector<uint64_t>{1, 2, 3, 4}));
}

// exchange connects a and b both ways through modify (the verbs dance).
void connect_both(api::QueuePair& qa_, const Address& pa, api::QueuePair& qb_, const Address& pb) {
    const uint32_t na = qa_.number(), nb = qb_.number();
    for (auto [qp, peer, remote] : {std::tuple{&qa_, pb, nb}, std::tuple{&qb_, pa, na}}) {
        if (qp->state() == QpState::kReset) {
            const auto init = api::qp_to_init(kAllRemote);
            ASSERT_EQ(qp->modify(init.attr, init.mask), Error::kOk);
        }
        const auto rtr = api::qp_to_rtr(peer, remote);
        ASSERT_EQ(qp->modify(rtr.attr, rtr.mask), Error::kOk);
        const auto rts = api::qp_to_rts();
        ASSERT_EQ(qp->modify(rts.attr, rts.mask), Error::kOk);
    }
}

// [STREAM-13]: both sides back to RESET get fresh numbers; reconnected, traffic flows and
// lands only where the new incarnation's receives point.
TEST_F(QpLifecycle, ResetAndReconnectCarriesTraffic) {
    auto qa_ = a_.qp();
    auto qb_ = b_.qp();
    const Address pa = a_.dev->local_address(), pb = b_.dev->local_address();
    for (int round = 0; round < 3; ++round) {
        SCOPED_TRACE("round " + std::to_string(round));
        connect_both(*qa_, pa, *qb_, pb);
        constexpr int kMsgs = 8;
        for (int m = 0; m < kMsgs; ++m) {
            const size_t off = static_cast<size_t>(round * kMsgs + m) * 512;
            for (size_t i = 0; i < 512; ++i)
                a_.mem[off + i] = static_cast<std::byte>((round * 31 + m * 7 + i) & 0xff);
            ASSERT_EQ(qb_->post_recv({uint64_t(m), b_.addr(off), 512, b_.mr->lkey()}), Error::kOk);
            ASSERT_EQ(qa_->post_send({uint64_t(m), WorkOpcode::kSend, a_.addr(off), 512,
                                      a_.mr->lkey()}),
                      Error::kOk);
        }
        const auto got_b = collect(b_, kMsgs);
        const auto got_a = collect(a_, kMsgs);
        ASSERT_EQ(got_b.size(), size_t(kMsgs));
        ASSERT_EQ(got_a.size(), size_t(kMsgs));
        for (int m = 0; m < kMsgs; ++m) {
            EXPECT_EQ(got_b[m].status, Status::kSuccess);
            EXPECT_EQ(got_b[m].wr_id, uint64_t(m));
            EXPECT_EQ(got_a[m].status, Status::kSuccess);
            EXPECT_EQ(got_b[m].stream, qb_->number());
        }
        const size_t base = static_cast<size_t>(round * kMsgs) * 512;
        EXPECT_TRUE(std::equal(a_.mem.begin() + base, a_.mem.begin() + base + kMsgs * 512,
                               b_.mem.begin() + base));
        const uint32_t old_a = qa_->number(), old_b = qb_->number();
        QpAttr reset;
        reset.state = QpState::kReset;
        ASSERT_EQ(qa_->modify(reset, qa::kState), Error::kOk);
        ASSERT_EQ(qb_->modify(reset, qa::kState), Error::kOk);
        EXPECT_NE(qa_->number(), old_a);
        EXPECT_NE(qb_->number(), old_b);
        EXPECT_EQ(qa_->query().dest_qp_num, 0u);  // attributes start over
    }
}

// WR chains stop at the first bad request and report it; the earlier ones stay posted
// and complete.
TEST_F(QpLifecycle, ChainsStopAtTheFirstBadRequest) {
    auto qa_ = a_.qp();
    auto qb_ = b_.qp();
    connect_both(*qa_, a_.dev->local_address(), *qb_, b_.dev->local_address());
    std::array<api::RecvWr, 4> recvs{{{1, b_.addr(0), 64, b_.mr->lkey()},
                                      {2, b_.addr(64), 64, b_.mr->lkey()},
                                      {3, b_.addr(128), 64, b_.mr->lkey() ^ 0x99},
                                      {4, b_.addr(192), 64, b_.mr->lkey()}}};
    const api::RecvWr* bad_recv = nullptr;
    EXPECT_EQ(qb_->post_recv_chain(recvs, &bad_recv), Error::kAccessDenied);
    EXPECT_EQ(bad_recv, &recvs[2]);
    std::array<api::SendWr, 4> sends{{{11, WorkOpcode::kSend, a_.addr(0), 16, a_.mr->lkey()},
                                      {12, WorkOpcode::kSend, a_.addr(16), 16, a_.mr->lkey()},
                                      {13, WorkOpcode::kRecv, a_.addr(0), 16, a_.mr->lkey()},
                                      {14, WorkOpcode::kSend, a_.addr(0), 16, a_.mr->lkey()}}};
    const api::SendWr* bad_send = nullptr;
    EXPECT_EQ(qa_->post_send_chain(sends, &bad_send), Error::kInvalidArgument);
    EXPECT_EQ(bad_send, &sends[2]);
    const auto b = collect(b_, 2);
    const auto a = collect(a_, 2);
    ASSERT_EQ(b.size(), 2u);
    ASSERT_EQ(a.size(), 2u);
    EXPECT_EQ(b[0].wr_id, 1u);
    EXPECT_EQ(b[1].wr_id, 2u);
    EXPECT_EQ(a[0].wr_id, 11u);
    EXPECT_EQ(a[1].wr_id, 12u);
    for (int i = 0; i < 50; ++i) step();
    Completion c[4];
    EXPECT_EQ(a_.cq->poll(c) + b_.cq->poll(c), 0u);  // nothing more was posted
    const api::SendWr* none = &sends[0];
    EXPECT_EQ(qa_->post_send_chain(std::span(sends).first(1), &none), Error::kOk);
    EXPECT_EQ(none, nullptr);
}

// [STREAM-12]: per-QP settings reach the engine: rnr_retry 0 fails at the first RNR NACK,
// and a QP without remote write access refuses a WRITE its memory region would allow.
TEST_F(QpLifecycle, PerQueuePairSettingsReachTheEngine) {
    {
        auto qa_ = a_.qp();
        auto qb_ = b_.qp();
        connect_both(*qa_, a_.dev->local_address(), *qb_, b_.dev->local_address());
        QpAttr rts = qa_->query();
        EXPECT_EQ(rts.state, QpState::kRts);
        EXPECT_EQ(rts.rnr_retry, 7);
        EXPECT_EQ(rts.peer, b_.dev->local_address());
        EXPECT_EQ(rts.dest_qp_num, qb_->number());
        EXPECT_EQ(rts.access_flags, kAllRemote);
        EXPECT_EQ(rts.cap.max_inline_data, core::EndpointConfig{}.max_inline_data);
        EXPECT_EQ(rts.cap.max_send_sge, core::kMaxSge);
        // RTS -> RTS does not take rnr_retry (verbs), so use a fresh QP pair below.
        auto qc = a_.qp();
        auto qd = b_.qp();
        auto init = api::qp_to_init(kAllRemote);
        ASSERT_EQ(qc->modify(init.attr, init.mask), Error::kOk);
        ASSERT_EQ(qd->modify(init.attr, init.mask), Error::kOk);
        auto rtr = api::qp_to_rtr(b_.dev->local_address(), qd->number());
        ASSERT_EQ(qc->modify(rtr.attr, rtr.mask), Error::kOk);
        rtr = api::qp_to_rtr(a_.dev->local_address(), qc->number());
        ASSERT_EQ(qd->modify(rtr.attr, rtr.mask), Error::kOk);
        QpAttr base;
        base.rnr_retry = 0;
        const auto to_rts = api::qp_to_rts(base);
        ASSERT_EQ(qc->modify(to_rts.attr, to_rts.mask), Error::kOk);
        EXPECT_EQ(qc->query().rnr_retry, 0);
        // No receive at qd: the first RNR NACK ends the request.
        ASSERT_EQ(qc->post_send({1, WorkOpcode::kSend, a_.addr(0), 8, a_.mr->lkey()}), Error::kOk);
        const auto c = collect(a_, 1);
        ASSERT_EQ(c.size(), 1u);
        EXPECT_EQ(c[0].status, Status::kRnrRetryExceeded) << core::to_string(c[0].status);
        EXPECT_EQ(qc->state(), QpState::kError);
    }
    {
        auto qa_ = a_.qp();
        auto qb_ = b_.qp();
        auto init = api::qp_to_init(access::kRemoteRead);  // no remote write on b's QP
        ASSERT_EQ(qb_->modify(init.attr, init.mask), Error::kOk);
        connect_both(*qa_, a_.dev->local_address(), *qb_, b_.dev->local_address());
        api::SendWr w{5, WorkOpcode::kWrite, a_.addr(0), 32, a_.mr->lkey()};
        w.remote_addr = b_.addr(0);
        w.rkey = b_.mr->rkey();
        ASSERT_EQ(qa_->post_send(w), Error::kOk);
        const auto c = collect(a_, 1);
        ASSERT_EQ(c.size(), 1u);
        EXPECT_EQ(c[0].status, Status::kRemoteAccess) << core::to_string(c[0].status);
    }
}

// [PLACE-24] through the API: two queue pairs share one SRQ; each message takes the next
// receive of the SRQ, completions go to the queue pair's CQ, the armed limit raises one
// event, and a queue pair reset keeps its SRQ.
TEST_F(QpLifecycle, SharedReceiveQueueFeedsSeveralQueuePairs) {
    auto srq = b_.pd->create_srq();
    ASSERT_TRUE(srq.ok());
    auto q1 = b_.pd->create_qp(*b_.cq, *b_.cq, srq->get());
    auto q2 = b_.pd->create_qp(*b_.cq, *b_.cq, srq->get());
    ASSERT_TRUE(q1.ok() && q2.ok());
    auto p1 = a_.qp();
    auto p2 = a_.qp();
    const Address pa = a_.dev->local_address(), pb = b_.dev->local_address();
    connect_both(*p1, pa, **q1, pb);
    connect_both(*p2, pa, **q2, pb);
    EXPECT_EQ((*q1)->post_recv({1, b_.addr(0), 64, b_.mr->lkey()}), Error::kInvalidArgument);
    std::array<api::RecvWr, 6> recvs;
    for (uint64_t i = 0; i < recvs.size(); ++i) recvs[i] = {100 + i, b_.addr(i * 64), 64, b_.mr->lkey()};
    ASSERT_EQ((*srq)->post_recv_chain(recvs), Error::kOk);
    EXPECT_EQ((*srq)->size(), 6u);
    ASSERT_EQ((*srq)->arm_limit(3), Error::kOk);
    for (uint64_t m = 0; m < 2; ++m) {
        ASSERT_EQ(p1->post_send({m, WorkOpcode::kSend, a_.addr(0), 8, a_.mr->lkey()}), Error::kOk);
        ASSERT_EQ(p2->post_send({m, WorkOpcode::kSend, a_.addr(0), 8, a_.mr->lkey()}), Error::kOk);
    }
    const auto got = collect(b_, 4);
    ASSERT_EQ(got.size(), 4u);
    std::vector<uint64_t> ids;
    for (const Completion& c : got) {
        EXPECT_EQ(c.status, Status::kSuccess);
        EXPECT_TRUE(c.stream == (*q1)->number() || c.stream == (*q2)->number());
        ids.push_back(c.wr_id);
    }
    std::sort(ids.begin(), ids.end());
    EXPECT_EQ(ids, (std::vector<uint64_t>{100, 101, 102, 103}));  // the SRQ's first four
    EXPECT_EQ((*srq)->size(), 2u);
    api::Event ev[16];
    size_t limit_events = 0;
    const size_t n = b_.dev->poll_events(ev);
    for (size_t i = 0; i < n; ++i) limit_events += ev[i].kind == api::EventKind::kSrqLimit;
    EXPECT_EQ(limit_events, 1u);
    // Reset q1 and its peer and reconnect: q1's fresh stream still takes from the SRQ.
    QpAttr reset;
    reset.state = QpState::kReset;
    ASSERT_EQ((*q1)->modify(reset, qa::kState), Error::kOk);
    ASSERT_EQ(p1->modify(reset, qa::kState), Error::kOk);
    connect_both(*p1, pa, **q1, pb);
    ASSERT_EQ(p1->post_send({9, WorkOpcode::kSend, a_.addr(0), 8, a_.mr->lkey()}), Error::kOk);
    const auto again = collect(b_, 1);
    ASSERT_EQ(again.size(), 1u);
    EXPECT_EQ(again[0].wr_id, 104u);
    EXPECT_EQ(again[0].stream, (*q1)->number());
}

// [ERR-5] caps through the API: streams (queue pairs, and the fresh stream a RESET needs),
// outstanding work requests per queue (QP send, QP receive, SRQ) and connections, each
// refused with kExhausted, and nothing else disturbed.
TEST_F(QpLifecycle, ResourceCapsAreRefusedWithExhausted) {
    api::DeviceConfig cfg;
    cfg.local = loopback();
    cfg.seed = seed_ * 2 + 3;
    cfg.progress = api::ProgressMode::kManual;
    cfg.endpoint.max_streams = 3;
    cfg.endpoint.max_outstanding_wrs = 4;
    cfg.endpoint.max_connections = 1;
    auto dev = api::Device::open(cfg);
    ASSERT_TRUE(dev.ok());
    auto pd = (*dev)->alloc_pd();
    auto cq = (*dev)->create_cq();
    std::vector<std::byte> mem(4096);
    auto mr = pd->register_memory(mem.data(), mem.size(), access::kLocalWrite);
    ASSERT_TRUE(mr.ok());
    const uint64_t base = reinterpret_cast<uint64_t>(mem.data());
    auto q1 = pd->create_qp(*cq, *cq);
    auto q2 = pd->create_qp(*cq, *cq);
    ASSERT_TRUE(q1.ok() && q2.ok());
    auto srq = pd->create_srq();
    ASSERT_TRUE(srq.ok());
    auto q3 = pd->create_qp(*cq, *cq);
    ASSERT_TRUE(q3.ok());
    EXPECT_EQ(pd->create_qp(*cq, *cq).error(), Error::kExhausted);  // streams

    // Receives: 4 per queue.
    const auto init = api::qp_to_init(kAllRemote);
    ASSERT_EQ((*q1)->modify(init.attr, init.mask), Error::kOk);
    std::array<api::RecvWr, 5> recvs;
    for (uint64_t i = 0; i < recvs.size(); ++i) recvs[i] = {i, base + i * 64, 64, (*mr)->lkey()};
    const api::RecvWr* bad = nullptr;
    EXPECT_EQ((*q1)->post_recv_chain(recvs, &bad), Error::kExhausted);
    EXPECT_EQ(bad, &recvs[4]);
    EXPECT_EQ((*srq)->post_recv_chain(recvs, &bad), Error::kExhausted);
    EXPECT_EQ(bad, &recvs[4]);
    EXPECT_EQ((*srq)->size(), 4u);

    // Sends: 4 outstanding (the peer QP never connects, so none completes yet).
    auto peer = a_.qp();
    const auto rtr = api::qp_to_rtr(a_.dev->local_address(), peer->number());
    ASSERT_EQ((*q1)->modify(rtr.attr, rtr.mask), Error::kOk);
    const auto rts = api::qp_to_rts();
    ASSERT_EQ((*q1)->modify(rts.attr, rts.mask), Error::kOk);
    for (uint64_t i = 0; i < 4; ++i)
        ASSERT_EQ((*q1)->post_send({i, WorkOpcode::kSend, base, 8, (*mr)->lkey()}), Error::kOk);
    EXPECT_EQ((*q1)->post_send({4, WorkOpcode::kSend, base, 8, (*mr)->lkey()}), Error::kExhausted);

    // Connections: the second peer needs a second connection.
    ASSERT_EQ((*q2)->modify(init.attr, init.mask), Error::kOk);
    auto other = b_.qp();
    const auto rtr_b = api::qp_to_rtr(b_.dev->local_address(), other->number());
    std::string why;
    EXPECT_EQ((*q2)->modify(rtr_b.attr, rtr_b.mask, &why), Error::kExhausted);
    EXPECT_FALSE(why.empty());
    EXPECT_EQ((*q2)->state(), QpState::kInit);

    // A RESET needs a fresh stream: none is left, so it is refused and nothing changes.
    QpAttr reset;
    reset.state = QpState::kReset;
    const uint32_t n2 = (*q2)->number();
    EXPECT_EQ((*q2)->modify(reset, qa::kState, &why), Error::kExhausted);
    EXPECT_NE(why.find("no stream left"), std::string::npos) << why;
    EXPECT_EQ((*q2)->number(), n2);
    EXPECT_EQ((*q2)->state(), QpState::kInit);
}

}  // namespace
}  // namespace mroce::test
