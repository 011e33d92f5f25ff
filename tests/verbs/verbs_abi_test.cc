// tests/verbs/verbs_abi_test.cc — libibverbs.so.1 through <infiniband/verbs.h>, as an
// application calls it: the inline dispatch through the context, two contexts of this
// process connected over UDP on loopback, the verbs semantics applications rely on
// (receive-queue FIFO including WRITE_WITH_IMM, immediates passed through, selective
// signaling, completion channels), and the refusals.
#include <infiniband/verbs.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/time.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace {

using Clock = std::chrono::steady_clock;

// ScopedEnv sets an environment variable for one test.
class ScopedEnv {
public:
    ScopedEnv(const char* name, const char* value) : name_(name) {
        if (const char* old = std::getenv(name)) old_ = old, had_ = true;
        ::setenv(name, value, 1);
    }
    ~ScopedEnv() { had_ ? (void)::setenv(name_, old_.c_str(), 1) : (void)::unsetenv(name_); }

private:
    const char* name_;
    std::string old_;
    bool had_ = false;
};

ibv_context* open_mroce() {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (!list || n != 1) return nullptr;
    ibv_context* c = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    return c;
}

// Side is one context with a PD, a 64 KiB registered buffer, a CQ (optionally on a
// channel) and one RC queue pair.
struct Side {
    ibv_context* ctx = nullptr;
    ibv_pd* pd = nullptr;
    std::vector<uint8_t> buf = std::vector<uint8_t>(65536);
    ibv_mr* mr = nullptr;
    ibv_comp_channel* channel = nullptr;
    ibv_cq* cq = nullptr;
    ibv_qp* qp = nullptr;
    int cq_tag = 0;

    explicit Side(bool with_channel = false) {
        ctx = open_mroce();
        if (!ctx) return;
        pd = ibv_alloc_pd(ctx);
        mr = ibv_reg_mr(pd, buf.data(), buf.size(),
                        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                            IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_RELAXED_ORDERING);
        if (with_channel) channel = ibv_create_comp_channel(ctx);
        cq = ibv_create_cq(ctx, 64, &cq_tag, channel, 0);
        ibv_qp_init_attr init{};
        init.send_cq = cq;
        init.recv_cq = cq;
        init.qp_type = IBV_QPT_RC;
        init.cap.max_send_wr = 64;
        init.cap.max_recv_wr = 64;
        init.cap.max_send_sge = 1;
        init.cap.max_recv_sge = 1;
        qp = ibv_create_qp(pd, &init);
    }
    ~Side() {
        if (qp) ibv_destroy_qp(qp);
        if (cq) ibv_destroy_cq(cq);
        if (channel) ibv_destroy_comp_channel(channel);
        if (mr) ibv_dereg_mr(mr);
        if (pd) ibv_dealloc_pd(pd);
        if (ctx) ibv_close_device(ctx);
    }
    bool ok() const { return ctx && pd && mr && cq && qp; }

    ibv_gid gid() const {
        ibv_gid g{};
        EXPECT_EQ(ibv_query_gid(ctx, 1, 0, &g), 0);
        return g;
    }

    // connect: the rc_pingpong sequence of modify_qp masks towards `peer`, by GID.
    int connect(const Side& peer) {
        ibv_ah_attr ah{};
        ah.is_global = 1;
        ah.grh.dgid = peer.gid();
        ah.grh.hop_limit = 1;
        ah.port_num = 1;
        return connect_to(ah, peer.qp->qp_num, /*rts=*/true);
    }
    // connect_to: INIT, RTR towards (ah, dest_qpn) and, with rts, RTS.
    int connect_to(const ibv_ah_attr& ah, uint32_t dest_qpn, bool rts) {
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_INIT;
        a.pkey_index = 0;
        a.port_num = 1;
        a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
        if (int r = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
            return r;
        a = {};
        a.qp_state = IBV_QPS_RTR;
        a.path_mtu = IBV_MTU_1024;
        a.dest_qp_num = dest_qpn;
        a.rq_psn = 0;
        a.max_dest_rd_atomic = 16;
        a.min_rnr_timer = 12;
        a.ah_attr = ah;
        if (int r = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                              IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                                              IBV_QP_MIN_RNR_TIMER))
            return r;
        if (!rts) return 0;
        a = {};
        a.qp_state = IBV_QPS_RTS;
        a.timeout = 14;
        a.retry_cnt = 7;
        a.rnr_retry = 7;
        a.sq_psn = 0;
        a.max_rd_atomic = 16;
        return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                         IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
    }

    int post_recv(uint64_t id, uint32_t offset, uint32_t len) {
        ibv_sge sge{reinterpret_cast<uintptr_t>(buf.data() + offset), len, mr->lkey};
        ibv_recv_wr wr{};
        wr.wr_id = id;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        ibv_recv_wr* bad = nullptr;
        return ibv_post_recv(qp, &wr, &bad);
    }

    int post(ibv_wr_opcode op, uint64_t id, uint32_t offset, uint32_t len, const Side* target = nullptr,
             uint32_t target_offset = 0, unsigned flags = IBV_SEND_SIGNALED, uint32_t imm = 0) {
        ibv_sge sge{reinterpret_cast<uintptr_t>(buf.data() + offset), len, mr->lkey};
        ibv_send_wr wr{};
        wr.wr_id = id;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = op;
        wr.send_flags = flags;
        wr.imm_data = imm;
        if (target) {
            const uint64_t raddr = reinterpret_cast<uintptr_t>(target->buf.data() + target_offset);
            if (op == IBV_WR_ATOMIC_FETCH_AND_ADD || op == IBV_WR_ATOMIC_CMP_AND_SWP) {
                wr.wr.atomic.remote_addr = raddr;
                wr.wr.atomic.rkey = target->mr->rkey;
            } else {
                wr.wr.rdma.remote_addr = raddr;
                wr.wr.rdma.rkey = target->mr->rkey;
            }
        }
        ibv_send_wr* bad = nullptr;
        return ibv_post_send(qp, &wr, &bad);
    }

    // poll waits up to 5 s for `n` completions (calling ibv_poll_cq, which also moves
    // packets itself).
    std::vector<ibv_wc> poll(size_t n) {
        std::vector<ibv_wc> out;
        const auto deadline = Clock::now() + std::chrono::seconds(5);
        while (out.size() < n && Clock::now() < deadline) {
            ibv_wc wc[8];
            const int got = ibv_poll_cq(cq, 8, wc);
            EXPECT_GE(got, 0);
            for (int i = 0; i < got; ++i) out.push_back(wc[i]);
        }
        return out;
    }
};

class Pair : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_TRUE(a_.ok() && b_.ok());
        ASSERT_EQ(a_.connect(b_), 0);
        ASSERT_EQ(b_.connect(a_), 0);
    }
    Side a_, b_;
};

// rdma-core's driver.h (not installed) declares these; a caller compiled against it reads
// the return value as this type. ibv_get_sysfs_path once returned an int, and librdmacm
// (ib_send_bw -R) crashed formatting it as a path.
extern "C" const char* ibv_get_sysfs_path(void);
extern "C" ibv_context* verbs_open_device(ibv_device* device, void* private_data);

TEST(VerbsDevice, DriverInterfaceReturnsWhatRdmaCoreDeclares) {
    const char* sysfs = ibv_get_sysfs_path();
    ASSERT_NE(sysfs, nullptr);
    EXPECT_STREQ(sysfs, "/sys");
    errno = 0;
    EXPECT_EQ(verbs_open_device(nullptr, nullptr), nullptr);  // refused, not a bogus pointer
    EXPECT_EQ(errno, EOPNOTSUPP);
}

TEST(VerbsDevice, OneEthernetDeviceWithARoceV2Gid) {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    ASSERT_NE(list, nullptr);
    ASSERT_EQ(n, 1);
    EXPECT_STREQ(ibv_get_device_name(list[0]), "mroce0");
    EXPECT_EQ(list[1], nullptr);
    ScopedEnv ip("MROCE_IP", "127.0.0.1");
    ScopedEnv port("MROCE_PORT", "51120");
    ibv_context* ctx = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    ASSERT_NE(ctx, nullptr);
    ibv_port_attr pa{};
    ASSERT_EQ(ibv_query_port(ctx, 1, &pa), 0);  // the inline, through verbs_context
    EXPECT_EQ(pa.state, IBV_PORT_ACTIVE);
    EXPECT_EQ(pa.link_layer, IBV_LINK_LAYER_ETHERNET);
    EXPECT_NE(ibv_query_port(ctx, 2, &pa), 0);
    ibv_gid g{};
    ASSERT_EQ(ibv_query_gid(ctx, 1, 0, &g), 0);
    const uint8_t want[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0xc7, 0xb0, 0xff, 0xff, 127, 0, 0, 1};
    EXPECT_EQ(std::memcmp(g.raw, want, 16), 0);
    EXPECT_NE(ibv_query_gid(ctx, 1, 1, &g), 0);  // one GID per port
    ibv_device_attr da{};
    ASSERT_EQ(ibv_query_device(ctx, &da), 0);
    EXPECT_EQ(da.phys_port_cnt, 1);
    EXPECT_GT(da.max_qp_rd_atom, 0);
    EXPECT_EQ(ibv_close_device(ctx), 0);
}

TEST(VerbsDevice, TheLidIsThePortAndReachesAPeerOnThisHost) {
    ScopedEnv ip("MROCE_IP", "127.0.0.1");
    Side a, b;
    ASSERT_TRUE(a.ok() && b.ok());
    ibv_port_attr pa{};
    ASSERT_EQ(ibv_query_port(b.ctx, 1, &pa), 0);
    const ibv_gid g = b.gid();
    EXPECT_EQ(pa.lid, g.raw[8] << 8 | g.raw[9]);  // the GID's port
    // a reaches b by LID alone (no GRH), as qperf and ibv_rc_pingpong without -g do.
    ibv_ah_attr ah{};
    ah.dlid = pa.lid;
    ah.port_num = 1;
    ASSERT_EQ(a.connect_to(ah, b.qp->qp_num, /*rts=*/true), 0);
    ASSERT_EQ(b.connect(a), 0);
    std::memcpy(a.buf.data(), "by lid", 6);
    ASSERT_EQ(a.post(IBV_WR_RDMA_WRITE, 1, 0, 6, &b, 500), 0);
    auto tx = a.poll(1);
    ASSERT_EQ(tx.size(), 1u);
    EXPECT_EQ(tx[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(std::memcmp(b.buf.data() + 500, "by lid", 6), 0);
}

#undef ibv_query_port
TEST(VerbsDevice, CompatQueryPortWritesOnlyTheOldLayout) {
    ScopedEnv ip("MROCE_IP", "127.0.0.1");
    ScopedEnv port("MROCE_PORT", "0");
    ibv_context* ctx = open_mroce();
    ASSERT_NE(ctx, nullptr);
    // The exported symbol serves programs built before port_cap_flags2: 48 bytes.
    std::array<uint8_t, sizeof(ibv_port_attr) + 8> raw;
    raw.fill(0xa5);
    ASSERT_EQ(ibv_query_port(ctx, 1, reinterpret_cast<_compat_ibv_port_attr*>(raw.data())), 0);
    for (size_t i = offsetof(ibv_port_attr, port_cap_flags2); i < raw.size(); ++i)
        EXPECT_EQ(raw[i], 0xa5) << "byte " << i;
    EXPECT_EQ(reinterpret_cast<ibv_port_attr*>(raw.data())->state, IBV_PORT_ACTIVE);
    ibv_close_device(ctx);
}

TEST(VerbsDevice, DefaultPortGivesThePlainRoceV2Gid) {
    ScopedEnv ip("MROCE_IP", "127.0.0.1");
    ScopedEnv port("MROCE_PORT", "4797");  // the protocol's port: written as 0
    ibv_context* ctx = open_mroce();
    if (!ctx) GTEST_SKIP() << "UDP port 4797 is in use on this host";
    ibv_gid g{};
    ASSERT_EQ(ibv_query_gid(ctx, 1, 0, &g), 0);
    const uint8_t want[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
    EXPECT_EQ(std::memcmp(g.raw, want, 16), 0);
    ibv_close_device(ctx);
}

TEST(VerbsDevice, BadSettingsRefuseTheOpen) {
    ScopedEnv port("MROCE_PORT", "65536");
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    ASSERT_EQ(n, 1);
    errno = 0;
    EXPECT_EQ(ibv_open_device(list[0]), nullptr);
    EXPECT_EQ(errno, EINVAL);
    ibv_free_device_list(list);
}

TEST_F(Pair, SendWithImmediateArrivesVerbatim) {
    std::memcpy(a_.buf.data(), "hello, verbs", 12);
    ASSERT_EQ(b_.post_recv(7, 100, 64), 0);
    ASSERT_EQ(a_.post(IBV_WR_SEND_WITH_IMM, 1, 0, 12, nullptr, 0, IBV_SEND_SIGNALED, 0xdeadbeef), 0);
    auto rx = b_.poll(1);
    ASSERT_EQ(rx.size(), 1u);
    EXPECT_EQ(rx[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(rx[0].opcode, IBV_WC_RECV);
    EXPECT_EQ(rx[0].wr_id, 7u);
    EXPECT_EQ(rx[0].byte_len, 12u);
    EXPECT_EQ(rx[0].qp_num, b_.qp->qp_num);
    EXPECT_TRUE(rx[0].wc_flags & IBV_WC_WITH_IMM);
    EXPECT_EQ(rx[0].imm_data, 0xdeadbeefu);  // no byte swap on either side
    EXPECT_EQ(std::memcmp(b_.buf.data() + 100, "hello, verbs", 12), 0);
    auto tx = a_.poll(1);
    ASSERT_EQ(tx.size(), 1u);
    EXPECT_EQ(tx[0].opcode, IBV_WC_SEND);
    EXPECT_EQ(tx[0].wr_id, 1u);
}

TEST_F(Pair, AZeroLengthSendNeedsNoBuffer) {
    ASSERT_EQ(b_.post_recv(3, 0, 64), 0);
    ibv_send_wr wr{};
    wr.wr_id = 4;
    wr.opcode = IBV_WR_SEND_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = 9;
    wr.num_sge = 0;  // no scatter list at all
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_send(a_.qp, &wr, &bad), 0);
    auto rx = b_.poll(1);
    ASSERT_EQ(rx.size(), 1u);
    EXPECT_EQ(rx[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(rx[0].byte_len, 0u);
    EXPECT_EQ(rx[0].imm_data, 9u);
    auto tx = a_.poll(1);
    ASSERT_EQ(tx.size(), 1u);
    EXPECT_EQ(tx[0].status, IBV_WC_SUCCESS);
}

TEST_F(Pair, WriteWithImmediateTakesTheNextReceiveInOrder) {
    // Gloo finds its receive buffers by counting: a WRITE_WITH_IMM must consume the
    // receive at the head of the queue, like a SEND.
    for (uint64_t id = 1; id <= 3; ++id) ASSERT_EQ(b_.post_recv(id, 1000 * static_cast<uint32_t>(id), 100), 0);
    for (int i = 0; i < 4096; ++i) a_.buf[i] = static_cast<uint8_t>(i * 7);
    ASSERT_EQ(a_.post(IBV_WR_RDMA_WRITE_WITH_IMM, 10, 0, 4096, &b_, 8192, IBV_SEND_SIGNALED, 5), 0);
    ASSERT_EQ(a_.post(IBV_WR_SEND, 11, 0, 50), 0);
    ASSERT_EQ(a_.post(IBV_WR_RDMA_WRITE_WITH_IMM, 12, 0, 16, &b_, 20000, IBV_SEND_SIGNALED, 6), 0);
    auto rx = b_.poll(3);
    ASSERT_EQ(rx.size(), 3u);
    EXPECT_EQ(rx[0].wr_id, 1u);
    EXPECT_EQ(rx[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
    EXPECT_EQ(rx[0].imm_data, 5u);
    EXPECT_EQ(rx[0].byte_len, 4096u);
    EXPECT_EQ(rx[1].wr_id, 2u);
    EXPECT_EQ(rx[1].opcode, IBV_WC_RECV);
    EXPECT_EQ(rx[1].byte_len, 50u);
    EXPECT_EQ(rx[2].wr_id, 3u);
    EXPECT_EQ(rx[2].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
    EXPECT_EQ(std::memcmp(b_.buf.data() + 8192, a_.buf.data(), 4096), 0);
    auto tx = a_.poll(3);
    ASSERT_EQ(tx.size(), 3u);
    EXPECT_EQ(tx[0].opcode, IBV_WC_RDMA_WRITE);
    EXPECT_EQ(tx[1].opcode, IBV_WC_SEND);
}

TEST_F(Pair, ReadAndAtomicsReturnTheRemoteValues) {
    for (int i = 0; i < 3000; ++i) b_.buf[4096 + i] = static_cast<uint8_t>(i ^ 0x5a);
    ASSERT_EQ(a_.post(IBV_WR_RDMA_READ, 1, 0, 3000, &b_, 4096), 0);
    auto tx = a_.poll(1);
    ASSERT_EQ(tx.size(), 1u);
    EXPECT_EQ(tx[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(tx[0].opcode, IBV_WC_RDMA_READ);
    EXPECT_EQ(std::memcmp(a_.buf.data(), b_.buf.data() + 4096, 3000), 0);

    uint64_t v = 40;
    std::memcpy(b_.buf.data() + 64, &v, 8);
    ibv_sge sge{reinterpret_cast<uintptr_t>(a_.buf.data() + 512), 8, a_.mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = 2;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.atomic.remote_addr = reinterpret_cast<uintptr_t>(b_.buf.data() + 64);
    wr.wr.atomic.rkey = b_.mr->rkey;
    wr.wr.atomic.compare_add = 2;
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_send(a_.qp, &wr, &bad), 0);
    tx = a_.poll(1);
    ASSERT_EQ(tx.size(), 1u);
    EXPECT_EQ(tx[0].opcode, IBV_WC_FETCH_ADD);
    uint64_t old = 0;
    std::memcpy(&old, a_.buf.data() + 512, 8);
    EXPECT_EQ(old, 40u);
    wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
    wr.wr.atomic.compare_add = 42;
    wr.wr.atomic.swap = 1000;
    ASSERT_EQ(ibv_post_send(a_.qp, &wr, &bad), 0);
    tx = a_.poll(1);
    ASSERT_EQ(tx.size(), 1u);
    EXPECT_EQ(tx[0].opcode, IBV_WC_COMP_SWAP);
    std::memcpy(&v, b_.buf.data() + 64, 8);
    EXPECT_EQ(v, 1000u);
}

TEST_F(Pair, UnsignaledWorkRequestsCompleteSilently) {
    // perftest signals one work request in cq_mod: the earlier ones report nothing.
    for (uint64_t id = 1; id <= 9; ++id)
        ASSERT_EQ(a_.post(IBV_WR_RDMA_WRITE, id, 0, 1024, &b_, 0, id == 9 ? IBV_SEND_SIGNALED : 0), 0);
    auto tx = a_.poll(1);
    ASSERT_EQ(tx.size(), 1u);
    EXPECT_EQ(tx[0].wr_id, 9u);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ibv_wc wc;
    EXPECT_EQ(ibv_poll_cq(a_.cq, 1, &wc), 0);
}

TEST_F(Pair, AChainStopsAtTheFirstRefusedRequest) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(a_.buf.data()), 8, a_.mr->lkey};
    std::array<ibv_send_wr, 3> wrs{};
    for (size_t i = 0; i < wrs.size(); ++i) {
        wrs[i].wr_id = i;
        wrs[i].sg_list = &sge;
        wrs[i].num_sge = 1;
        wrs[i].opcode = IBV_WR_SEND;
        wrs[i].send_flags = IBV_SEND_SIGNALED;
        if (i + 1 < wrs.size()) wrs[i].next = &wrs[i + 1];
    }
    wrs[1].opcode = IBV_WR_BIND_MW;  // memory windows: not offered
    ASSERT_EQ(b_.post_recv(1, 0, 64), 0);
    ibv_send_wr* bad = nullptr;
    EXPECT_NE(ibv_post_send(a_.qp, &wrs[0], &bad), 0);
    EXPECT_EQ(bad, &wrs[1]);
    auto tx = a_.poll(1);  // the first one went
    ASSERT_EQ(tx.size(), 1u);
    EXPECT_EQ(tx[0].wr_id, 0u);
}

TEST_F(Pair, BadRkeyCompletesWithRemoteAccessError) {
    ASSERT_EQ(a_.post(IBV_WR_RDMA_WRITE, 1, 0, 64, &b_, 0), 0);
    a_.poll(1);
    ibv_sge sge{reinterpret_cast<uintptr_t>(a_.buf.data()), 64, a_.mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = 2;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(b_.buf.data());
    wr.wr.rdma.rkey = b_.mr->rkey ^ 0x100;
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_send(a_.qp, &wr, &bad), 0);
    auto tx = a_.poll(1);
    ASSERT_EQ(tx.size(), 1u);
    EXPECT_EQ(tx[0].status, IBV_WC_REM_ACCESS_ERR);
    EXPECT_STREQ(ibv_wc_status_str(tx[0].status), "remote access error");
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    ASSERT_EQ(ibv_query_qp(a_.qp, &attr, IBV_QP_STATE, &init), 0);
    EXPECT_EQ(attr.qp_state, IBV_QPS_ERR);
}

TEST(VerbsExtendedQp, WorkRequestsBuiltWithTheWrInterface) {
    ScopedEnv ip("MROCE_IP", "127.0.0.1");
    Side a, b;
    ASSERT_TRUE(a.ok() && b.ok());
    // Replace a's queue pair by an extended one.
    ibv_qp_init_attr_ex ix{};
    ix.send_cq = a.cq;
    ix.recv_cq = a.cq;
    ix.qp_type = IBV_QPT_RC;
    ix.cap.max_send_wr = 16;
    ix.cap.max_recv_wr = 16;
    ix.cap.max_send_sge = 2;
    ix.cap.max_recv_sge = 1;
    ix.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    ix.pd = a.pd;
    ix.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_READ;
    ibv_qp* q = ibv_create_qp_ex(a.ctx, &ix);  // the header's inline, through verbs_context
    ASSERT_NE(q, nullptr);
    ibv_destroy_qp(a.qp);
    a.qp = q;
    ibv_qp_ex* x = ibv_qp_to_qp_ex(q);
    ASSERT_NE(x, nullptr);
    ASSERT_EQ(a.connect(b), 0);
    ASSERT_EQ(b.connect(a), 0);
    ASSERT_EQ(b.post_recv(9, 0, 64), 0);

    std::memcpy(a.buf.data() + 100, "piece one|", 10);
    std::memcpy(a.buf.data() + 200, "piece two", 9);
    ibv_wr_start(x);
    x->wr_id = 1;
    x->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_rdma_write(x, b.mr->rkey, reinterpret_cast<uintptr_t>(b.buf.data() + 4096));
    const ibv_sge two[2] = {{reinterpret_cast<uintptr_t>(a.buf.data() + 100), 10, a.mr->lkey},
                            {reinterpret_cast<uintptr_t>(a.buf.data() + 200), 9, a.mr->lkey}};
    ibv_wr_set_sge_list(x, 2, two);
    x->wr_id = 2;
    ibv_wr_send(x);
    char text[] = "inline!";
    ibv_wr_set_inline_data(x, text, 7);
    std::memcpy(text, "changed", 7);  // copied when given: the change does not travel
    ASSERT_EQ(ibv_wr_complete(x), 0);
    auto tx = a.poll(2);
    ASSERT_EQ(tx.size(), 2u);
    EXPECT_EQ(tx[0].wr_id, 1u);
    EXPECT_EQ(tx[0].opcode, IBV_WC_RDMA_WRITE);
    EXPECT_EQ(tx[1].wr_id, 2u);
    EXPECT_EQ(std::memcmp(b.buf.data() + 4096, "piece one|piece two", 19), 0);
    auto rx = b.poll(1);
    ASSERT_EQ(rx.size(), 1u);
    EXPECT_EQ(rx[0].byte_len, 7u);
    EXPECT_EQ(std::memcmp(b.buf.data(), "inline!", 7), 0);

    // A batch with an operation the device does not have posts nothing.
    ibv_wr_start(x);
    x->wr_id = 3;
    ibv_wr_rdma_write(x, b.mr->rkey, reinterpret_cast<uintptr_t>(b.buf.data()));
    ibv_wr_set_sge(x, a.mr->lkey, reinterpret_cast<uintptr_t>(a.buf.data()), 8);
    ibv_wr_local_inv(x, 5);
    EXPECT_EQ(ibv_wr_complete(x), EOPNOTSUPP);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ibv_wc wc;
    EXPECT_EQ(ibv_poll_cq(a.cq, 1, &wc), 0);
    // wr_abort discards what was built.
    ibv_wr_start(x);
    ibv_wr_send(x);
    ibv_wr_abort(x);
    EXPECT_EQ(ibv_wr_complete(x), EINVAL);  // no batch open
}

TEST(VerbsExtendedCq, StartPollReadsEachCompletion) {
    ScopedEnv ip("MROCE_IP", "127.0.0.1");
    Side a, b;
    ASSERT_TRUE(a.ok() && b.ok());
    ibv_cq_init_attr_ex ca{};
    ca.cqe = 16;
    ca.wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
    errno = 0;
    EXPECT_EQ(ibv_create_cq_ex(b.ctx, &ca), nullptr);  // no clock to stamp completions with
    EXPECT_EQ(errno, EOPNOTSUPP);
    ca.wc_flags = IBV_WC_STANDARD_FLAGS;
    ibv_cq_ex* cx = ibv_create_cq_ex(b.ctx, &ca);
    ASSERT_NE(cx, nullptr);
    // b's queue pair reports its receives to the extended CQ.
    ibv_qp_init_attr init{};
    init.send_cq = b.cq;
    init.recv_cq = ibv_cq_ex_to_cq(cx);
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = init.cap.max_recv_wr = 8;
    init.cap.max_send_sge = init.cap.max_recv_sge = 1;
    ibv_qp* q = ibv_create_qp(b.pd, &init);
    ASSERT_NE(q, nullptr);
    ibv_destroy_qp(b.qp);
    b.qp = q;
    ASSERT_EQ(a.connect(b), 0);
    ASSERT_EQ(b.connect(a), 0);
    ibv_poll_cq_attr pa{};
    EXPECT_EQ(ibv_start_poll(cx, &pa), ENOENT);  // nothing yet: no end_poll needed
    for (uint64_t id = 1; id <= 2; ++id) ASSERT_EQ(b.post_recv(id, 0, 256), 0);
    ASSERT_EQ(a.post(IBV_WR_RDMA_WRITE_WITH_IMM, 1, 0, 100, &b, 1024, IBV_SEND_SIGNALED, 77), 0);
    ASSERT_EQ(a.post(IBV_WR_SEND, 2, 0, 30), 0);
    std::vector<std::array<uint64_t, 6>> got;  // wr_id, status, opcode, byte_len, imm, flags
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    while (got.size() < 2 && Clock::now() < deadline) {
        if (ibv_start_poll(cx, &pa) != 0) continue;
        do {
            EXPECT_EQ(ibv_wc_read_qp_num(cx), b.qp->qp_num);
            got.push_back({cx->wr_id, static_cast<uint64_t>(cx->status), ibv_wc_read_opcode(cx),
                           ibv_wc_read_byte_len(cx), ibv_wc_read_imm_data(cx), ibv_wc_read_wc_flags(cx)});
        } while (ibv_next_poll(cx) == 0);
        ibv_end_poll(cx);
    }
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0], (std::array<uint64_t, 6>{1, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, 100, 77,
                                               IBV_WC_WITH_IMM}));
    EXPECT_EQ(got[1][0], 2u);
    EXPECT_EQ(got[1][2], IBV_WC_RECV);
    EXPECT_EQ(got[1][3], 30u);
    EXPECT_EQ(got[1][5], 0u);
    ibv_destroy_qp(b.qp);
    b.qp = nullptr;
    EXPECT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cx)), 0);
}

TEST(VerbsChannel, OneEventPerArmingOnAPollableFd) {
    ScopedEnv ip("MROCE_IP", "127.0.0.1");
    Side a, b(/*with_channel=*/true);
    ASSERT_TRUE(a.ok() && b.ok() && b.channel);
    ASSERT_EQ(a.connect(b), 0);
    ASSERT_EQ(b.connect(a), 0);
    const int fd = b.channel->fd;
    ASSERT_EQ(::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
    ibv_cq* cq = nullptr;
    void* cq_ctx = nullptr;
    errno = 0;
    EXPECT_EQ(ibv_get_cq_event(b.channel, &cq, &cq_ctx), -1);  // nothing yet
    EXPECT_EQ(errno, EAGAIN);

    ASSERT_EQ(ibv_req_notify_cq(b.cq, 0), 0);
    for (uint64_t id = 1; id <= 2; ++id) ASSERT_EQ(b.post_recv(id, 0, 64), 0);
    ASSERT_EQ(a.post(IBV_WR_SEND, 1, 0, 8), 0);
    pollfd p{fd, POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 5000), 1);
    ASSERT_EQ(ibv_get_cq_event(b.channel, &cq, &cq_ctx), 0);
    EXPECT_EQ(cq, b.cq);
    EXPECT_EQ(cq_ctx, &b.cq_tag);
    ibv_ack_cq_events(cq, 1);
    EXPECT_EQ(b.poll(1).size(), 1u);

    // Not re-armed: the next completion makes no event.
    ASSERT_EQ(a.post(IBV_WR_SEND, 2, 0, 8), 0);
    EXPECT_EQ(b.poll(1).size(), 1u);
    EXPECT_EQ(::poll(&p, 1, 50), 0);
    EXPECT_EQ(ibv_get_cq_event(b.channel, &cq, &cq_ctx), -1);
    EXPECT_EQ(errno, EAGAIN);
    EXPECT_EQ(ibv_destroy_comp_channel(b.channel), EBUSY);  // its CQ still uses it
}

TEST(VerbsChannel, ASignalEndsABlockingWait) {
    // qperf ends a timed test with an alarm and expects ibv_get_cq_event to return EINTR.
    ScopedEnv ip("MROCE_IP", "127.0.0.1");
    Side b(/*with_channel=*/true);
    ASSERT_TRUE(b.ok());
    struct sigaction sa {}, old {};
    sa.sa_handler = [](int) {};
    sa.sa_flags = 0;  // no SA_RESTART
    ASSERT_EQ(::sigaction(SIGALRM, &sa, &old), 0);
    itimerval t{};
    t.it_value.tv_usec = 50'000;
    ASSERT_EQ(::setitimer(ITIMER_REAL, &t, nullptr), 0);
    ibv_cq* cq = nullptr;
    void* cq_ctx = nullptr;
    errno = 0;
    EXPECT_EQ(ibv_get_cq_event(b.channel, &cq, &cq_ctx), -1);
    EXPECT_EQ(errno, EINTR);
    ::sigaction(SIGALRM, &old, nullptr);
}

TEST(VerbsChannel, DestroyingACqWithdrawsItsPendingEvent) {
    ScopedEnv ip("MROCE_IP", "127.0.0.1");
    Side a, b(/*with_channel=*/true);
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ(a.connect(b), 0);
    ASSERT_EQ(b.connect(a), 0);
    ASSERT_EQ(ibv_req_notify_cq(b.cq, 0), 0);
    ASSERT_EQ(b.post_recv(1, 0, 64), 0);
    ASSERT_EQ(a.post(IBV_WR_SEND, 1, 0, 8), 0);
    pollfd p{b.channel->fd, POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 5000), 1);
    ASSERT_EQ(ibv_destroy_qp(b.qp), 0);
    b.qp = nullptr;
    ASSERT_EQ(ibv_destroy_cq(b.cq), 0);
    b.cq = nullptr;
    ASSERT_EQ(::fcntl(b.channel->fd, F_SETFL, O_NONBLOCK), 0);
    ibv_cq* cq = nullptr;
    void* cq_ctx = nullptr;
    EXPECT_EQ(ibv_get_cq_event(b.channel, &cq, &cq_ctx), -1);  // never the freed CQ
    EXPECT_EQ(errno, EAGAIN);
}

TEST(VerbsDevice, ClosingAContextWithQueuePairsIsRefused) {
    ScopedEnv ip("MROCE_IP", "127.0.0.1");
    Side s;
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(ibv_close_device(s.ctx), EBUSY);  // its queue pair still points at it
    ASSERT_EQ(ibv_destroy_qp(s.qp), 0);
    s.qp = nullptr;
}

TEST(VerbsRefusals, WhatIsNotOfferedFailsCleanly) {
    ScopedEnv ip("MROCE_IP", "127.0.0.1");
    Side s;
    ASSERT_TRUE(s.ok());
    ibv_qp_init_attr init{};
    init.send_cq = s.cq;
    init.recv_cq = s.cq;
    init.qp_type = IBV_QPT_UD;
    init.cap.max_send_wr = init.cap.max_recv_wr = 1;
    errno = 0;
    EXPECT_EQ(ibv_create_qp(s.pd, &init), nullptr);
    EXPECT_EQ(errno, EOPNOTSUPP);
    init.qp_type = IBV_QPT_RC;
    init.cap.max_inline_data = 1u << 20;  // beyond the device
    errno = 0;
    EXPECT_EQ(ibv_create_qp(s.pd, &init), nullptr);
    EXPECT_EQ(errno, EINVAL);

    ibv_ah_attr ah{};
    errno = 0;
    EXPECT_EQ(ibv_create_ah(s.pd, &ah), nullptr);
    EXPECT_EQ(errno, EOPNOTSUPP);
    errno = 0;
    EXPECT_EQ(ibv_reg_mr(s.pd, s.buf.data(), 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND), nullptr);
    EXPECT_EQ(errno, EOPNOTSUPP);
    errno = 0;
    EXPECT_EQ(ibv_reg_mr(s.pd, s.buf.data(), 64, IBV_ACCESS_REMOTE_WRITE), nullptr);  // no LOCAL_WRITE
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(ibv_qp_to_qp_ex(s.qp), nullptr);

    // RTR with neither a GID nor a LID: no address.
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    ASSERT_EQ(ibv_modify_qp(s.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
    a = {};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = 1;
    a.ah_attr.dlid = 0;
    EXPECT_EQ(ibv_modify_qp(s.qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                          IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
              EINVAL);
    EXPECT_EQ(s.qp->state, IBV_QPS_INIT);
}

// next_async_event waits up to 5 s for an asynchronous event on ctx's pollable fd.
bool next_async_event(ibv_context* ctx, ibv_async_event& ev) {
    pollfd p{ctx->async_fd, POLLIN, 0};
    if (::poll(&p, 1, 5000) != 1) return false;
    return ibv_get_async_event(ctx, &ev) == 0;
}

TEST(VerbsAsyncEvents, SrqLimitReachedNamesTheSrqAndDisarmsIt) {
    ScopedEnv ip("MROCE_IP", "127.0.0.1");
    Side a, b;
    ASSERT_TRUE(a.ok() && b.ok());
    ibv_srq_init_attr sinit{};
    sinit.attr.max_wr = 16;
    sinit.attr.max_sge = 1;
    ibv_srq* srq = ibv_create_srq(b.pd, &sinit);
    ASSERT_NE(srq, nullptr);
    ibv_qp_init_attr init{};
    init.send_cq = b.cq;
    init.recv_cq = b.cq;
    init.srq = srq;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = 8;
    ibv_qp* with_srq = ibv_create_qp(b.pd, &init);
    ASSERT_NE(with_srq, nullptr);
    ibv_destroy_qp(b.qp);
    b.qp = with_srq;
    ASSERT_EQ(a.connect(b), 0);
    ASSERT_EQ(b.connect(a), 0);
    for (uint64_t id = 1; id <= 4; ++id) {
        ibv_sge sge{reinterpret_cast<uintptr_t>(b.buf.data() + 64 * id), 64, b.mr->lkey};
        ibv_recv_wr wr{};
        wr.wr_id = id;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        ibv_recv_wr* bad = nullptr;
        ASSERT_EQ(ibv_post_srq_recv(srq, &wr, &bad), 0);
    }
    ibv_srq_attr attr{};
    attr.srq_limit = 3;
    ASSERT_EQ(ibv_modify_srq(srq, &attr, IBV_SRQ_LIMIT), 0);
    ASSERT_EQ(a.post(IBV_WR_SEND, 1, 0, 8), 0);  // 3 left: not below the limit
    ASSERT_EQ(b.poll(1).size(), 1u);
    pollfd p{b.ctx->async_fd, POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 50), 0);
    ASSERT_EQ(a.post(IBV_WR_SEND, 2, 0, 8), 0);  // 2 left
    ASSERT_EQ(b.poll(1).size(), 1u);
    ibv_async_event ev{};
    ASSERT_TRUE(next_async_event(b.ctx, ev));
    EXPECT_EQ(ev.event_type, IBV_EVENT_SRQ_LIMIT_REACHED);
    EXPECT_EQ(ev.element.srq, srq);
    ibv_ack_async_event(&ev);
    ASSERT_EQ(ibv_query_srq(srq, &attr), 0);
    EXPECT_EQ(attr.srq_limit, 0u);  // disarmed by the event
    ibv_destroy_qp(b.qp);
    b.qp = nullptr;
    EXPECT_EQ(ibv_destroy_srq(srq), 0);
}

TEST(VerbsAsyncEvents, AQueuePairTowardsNoOneGetsAFatalEvent) {
    ScopedEnv ip("MROCE_IP", "127.0.0.1");
    Side a;
    ASSERT_TRUE(a.ok());
    // A peer GID whose port nobody listens on (a port just bound and released): the
    // handshake is never answered.
    const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(sa);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
    ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len), 0);
    ::close(fd);
    const uint16_t port = ntohs(sa.sin_port);
    const ibv_gid silent = {.raw = {0, 0, 0, 0, 0, 0, 0, 0, static_cast<uint8_t>(port >> 8),
                                    static_cast<uint8_t>(port), 0xff, 0xff, 127, 0, 0, 1}};
    const uint32_t silent_qpn = 1;
    ibv_ah_attr ah{};
    ah.is_global = 1;
    ah.grh.dgid = silent;
    ah.port_num = 1;
    ASSERT_EQ(a.connect_to(ah, silent_qpn, /*rts=*/false), 0);
    ibv_async_event ev{};
    ASSERT_TRUE(next_async_event(a.ctx, ev));
    EXPECT_EQ(ev.event_type, IBV_EVENT_QP_FATAL);
    EXPECT_EQ(ev.element.qp, a.qp);
    ibv_ack_async_event(&ev);
    ibv_qp_attr q{};
    ibv_qp_init_attr qi{};
    ASSERT_EQ(ibv_query_qp(a.qp, &q, IBV_QP_STATE, &qi), 0);
    EXPECT_EQ(q.qp_state, IBV_QPS_ERR);
}

}  // namespace
