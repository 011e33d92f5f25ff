/* tests/verbs/qp_reset.c — a queue pair keeps its number through RESET and back (verbs
 * semantics, spec [STREAM-13]), in C as an application writes it, linked against
 * build/verbs/libibverbs.so.1. Three contexts of this process on loopback, A, B and C:
 *
 *   cycle 1: A <-> B, a SEND each way; then B's receive stays posted and B's SEND waits
 *            on A, which has no receive (RNR, retried forever);
 *   reset:   A and B to RESET: their qp_num stays, B's outstanding receive and SEND
 *            complete with IBV_WC_WR_FLUSH_ERR;
 *   cycle 2: RESET -> INIT -> RTR -> RTS again, A <-> B with the same numbers: data moves;
 *   cycle 3: A to RESET again and on to a new remote, C: data moves, A's number unchanged.
 *
 * Prints one line per failed check and exits 1; 0 when everything held. */
#include <infiniband/verbs.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BUF_BYTES 4096
#define MSG_BYTES 64

static int failures = 0;

#define CHECK(cond, ...)                                      \
    do {                                                      \
        if (!(cond)) {                                        \
            fprintf(stderr, "qp_reset: line %d: ", __LINE__); \
            fprintf(stderr, __VA_ARGS__);                     \
            fprintf(stderr, "\n");                            \
            ++failures;                                       \
        }                                                     \
    } while (0)

struct side {
    const char* name;
    struct ibv_context* ctx;
    struct ibv_pd* pd;
    struct ibv_cq* cq;
    struct ibv_qp* qp;
    struct ibv_mr* mr;
    uint8_t buf[BUF_BYTES];
};

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int open_side(struct side* s, const char* name) {
    int n = 0;
    struct ibv_device** list = ibv_get_device_list(&n);
    if (!list || n < 1) return -1;
    s->name = name;
    s->ctx = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    if (!s->ctx) return -1;
    s->pd = ibv_alloc_pd(s->ctx);
    s->cq = s->pd ? ibv_create_cq(s->ctx, 64, NULL, NULL, 0) : NULL;
    s->mr = s->pd ? ibv_reg_mr(s->pd, s->buf, sizeof s->buf,
                               IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)
                  : NULL;
    if (!s->cq || !s->mr) return -1;
    struct ibv_qp_init_attr init;
    memset(&init, 0, sizeof init);
    init.send_cq = s->cq;
    init.recv_cq = s->cq;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = 16;
    init.cap.max_recv_wr = 16;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    s->qp = ibv_create_qp(s->pd, &init);
    return s->qp ? 0 : -1;
}

static void close_side(struct side* s) {
    if (s->qp) ibv_destroy_qp(s->qp);
    if (s->mr) ibv_dereg_mr(s->mr);
    if (s->cq) ibv_destroy_cq(s->cq);
    if (s->pd) ibv_dealloc_pd(s->pd);
    if (s->ctx) ibv_close_device(s->ctx);
}

static int to_state(struct side* s, enum ibv_qp_state state) {
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = state;
    return ibv_modify_qp(s->qp, &a, IBV_QP_STATE);
}

/* connect: INIT -> RTR -> RTS towards `peer`'s queue pair, by GID, as ibv_rc_pingpong. */
static int connect_to(struct side* s, const struct side* peer, uint32_t dest_qpn) {
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    int r = ibv_modify_qp(s->qp, &a,
                          IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (r) return r;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = dest_qpn;
    a.rq_psn = (uint32_t)rand() & 0xffffff;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1;
    a.ah_attr.port_num = 1;
    a.ah_attr.grh.hop_limit = 1;
    if ((r = ibv_query_gid(peer->ctx, 1, 0, &a.ah_attr.grh.dgid))) return r;
    r = ibv_modify_qp(s->qp, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                          IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (r) return r;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = (uint32_t)rand() & 0xffffff;
    a.max_rd_atomic = 1;
    return ibv_modify_qp(s->qp, &a,
                         IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                             IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static int post_recv(struct side* s, uint64_t wr_id, uint32_t offset) {
    struct ibv_sge sge = {(uintptr_t)(s->buf + offset), MSG_BYTES, s->mr->lkey};
    struct ibv_recv_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    return ibv_post_recv(s->qp, &wr, &bad);
}

/* post_send sends MSG_BYTES at `offset`, filled with `fill` + i. */
static int post_send(struct side* s, uint64_t wr_id, uint32_t offset, uint8_t fill) {
    for (int i = 0; i < MSG_BYTES; ++i) s->buf[offset + i] = (uint8_t)(fill + i);
    struct ibv_sge sge = {(uintptr_t)(s->buf + offset), MSG_BYTES, s->mr->lkey};
    struct ibv_send_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    return ibv_post_send(s->qp, &wr, &bad);
}

/* poll_one waits up to 10 s for the completion `wr_id` on s's CQ; 0 when it came. Other
 * completions met on the way are checked to be successful. */
static int poll_one(struct side* s, uint64_t wr_id, struct ibv_wc* out) {
    const double deadline = now_s() + 10;
    while (now_s() < deadline) {
        struct ibv_wc wc;
        const int n = ibv_poll_cq(s->cq, 1, &wc);
        if (n < 0) return -1;
        if (n == 0) continue;
        if (wc.wr_id == wr_id) {
            *out = wc;
            return 0;
        }
        CHECK(0, "%s: unexpected completion wr_id %llu status %s", s->name,
              (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
    }
    fprintf(stderr, "qp_reset: %s: no completion for wr_id %llu in 10 s\n", s->name,
            (unsigned long long)wr_id);
    return -1;
}

/* exchange: a SEND from `from` to `to` (a receive posted first), its bytes checked. */
static void exchange(struct side* from, struct side* to, uint64_t id, uint8_t fill) {
    struct ibv_wc wc;
    CHECK(post_recv(to, id, 0) == 0, "%s: post_recv", to->name);
    CHECK(post_send(from, id, 2048, fill) == 0, "%s: post_send", from->name);
    if (poll_one(from, id, &wc) == 0)
        CHECK(wc.status == IBV_WC_SUCCESS, "%s: send %llu: %s", from->name,
              (unsigned long long)id, ibv_wc_status_str(wc.status));
    else
        CHECK(0, "%s: send %llu did not complete", from->name, (unsigned long long)id);
    if (poll_one(to, id, &wc) == 0) {
        CHECK(wc.status == IBV_WC_SUCCESS && wc.byte_len == MSG_BYTES,
              "%s: receive %llu: %s, %u bytes", to->name, (unsigned long long)id,
              ibv_wc_status_str(wc.status), wc.byte_len);
        CHECK(wc.qp_num == to->qp->qp_num, "%s: completion names qp %u, not %u", to->name,
              wc.qp_num, to->qp->qp_num);
        int same = 1;
        for (int i = 0; i < MSG_BYTES; ++i) same &= to->buf[i] == (uint8_t)(fill + i);
        CHECK(same, "%s: receive %llu: wrong bytes", to->name, (unsigned long long)id);
    } else {
        CHECK(0, "%s: receive %llu did not complete", to->name, (unsigned long long)id);
    }
    memset(to->buf, 0, MSG_BYTES);
}

/* expect_flushed: the next `n` completions on s's CQ are the work requests `ids`, in any
 * order (verbs leaves the order of a send and a receive queue's flushes open), each with
 * IBV_WC_WR_FLUSH_ERR. */
static void expect_flushed(struct side* s, const uint64_t* ids, int n) {
    int seen = 0;
    const double deadline = now_s() + 10;
    while (seen < n && now_s() < deadline) {
        struct ibv_wc wc;
        const int got = ibv_poll_cq(s->cq, 1, &wc);
        if (got <= 0) continue;
        int known = 0;
        for (int i = 0; i < n; ++i) known |= wc.wr_id == ids[i];
        CHECK(known, "%s: unexpected completion wr_id %llu", s->name, (unsigned long long)wc.wr_id);
        CHECK(wc.status == IBV_WC_WR_FLUSH_ERR, "%s: wr_id %llu completed with %s, not WR_FLUSH_ERR",
              s->name, (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
        ++seen;
    }
    CHECK(seen == n, "%s: %d of %d outstanding work requests flushed", s->name, seen, n);
}

static void expect_state(struct side* s, enum ibv_qp_state want) {
    struct ibv_qp_attr a;
    struct ibv_qp_init_attr init;
    CHECK(ibv_query_qp(s->qp, &a, IBV_QP_STATE, &init) == 0, "%s: ibv_query_qp", s->name);
    CHECK(a.qp_state == want, "%s: state %d, expected %d", s->name, (int)a.qp_state, (int)want);
}

int main(void) {
    srand((unsigned)time(NULL));
    static struct side a, b, c;
    if (open_side(&a, "A") || open_side(&b, "B") || open_side(&c, "C")) {
        fprintf(stderr, "qp_reset: cannot open three contexts with a queue pair each\n");
        return 1;
    }
    const uint32_t qpn_a = a.qp->qp_num, qpn_b = b.qp->qp_num;

    /* cycle 1 */
    CHECK(connect_to(&a, &b, qpn_b) == 0, "cycle 1: A connect");
    CHECK(connect_to(&b, &a, qpn_a) == 0, "cycle 1: B connect");
    exchange(&a, &b, 1, 0x10);
    exchange(&b, &a, 2, 0x20);
    CHECK(post_recv(&b, 100, 0) == 0, "B: post_recv 100");
    CHECK(post_send(&b, 101, 2048, 0x30) == 0, "B: post_send 101 (A has no receive: RNR)");

    /* reset: the numbers stay; B's outstanding work is flushed */
    /* B first: with A's queue pair gone B's SEND would be refused, not kept waiting. */
    CHECK(to_state(&b, IBV_QPS_RESET) == 0, "B: to RESET");
    CHECK(to_state(&a, IBV_QPS_RESET) == 0, "A: to RESET");
    expect_state(&a, IBV_QPS_RESET);
    expect_state(&b, IBV_QPS_RESET);
    CHECK(a.qp->qp_num == qpn_a, "A: qp_num %u after RESET, was %u", a.qp->qp_num, qpn_a);
    CHECK(b.qp->qp_num == qpn_b, "B: qp_num %u after RESET, was %u", b.qp->qp_num, qpn_b);
    const uint64_t outstanding[] = {100, 101}; /* the receive; the SEND waiting on RNR */
    expect_flushed(&b, outstanding, 2);

    /* cycle 2: the same numbers, exchanged again as an application does */
    const double t0 = now_s();
    CHECK(connect_to(&a, &b, b.qp->qp_num) == 0, "cycle 2: A connect");
    CHECK(connect_to(&b, &a, a.qp->qp_num) == 0, "cycle 2: B connect");
    printf("qp_reset: cycle 2 connected %.2f s after the reset\n", now_s() - t0);
    CHECK(a.qp->qp_num == qpn_a && b.qp->qp_num == qpn_b, "cycle 2: numbers changed");
    expect_state(&a, IBV_QPS_RTS);
    for (int i = 0; i < 4; ++i) {
        exchange(&a, &b, 10 + i, (uint8_t)(0x40 + i));
        exchange(&b, &a, 20 + i, (uint8_t)(0x50 + i));
    }

    /* cycle 3: A to RESET and on to a new remote, C */
    CHECK(to_state(&a, IBV_QPS_RESET) == 0, "A: to RESET again");
    CHECK(connect_to(&c, &a, qpn_a) == 0, "cycle 3: C connect");
    CHECK(connect_to(&a, &c, c.qp->qp_num) == 0, "cycle 3: A connect");
    CHECK(a.qp->qp_num == qpn_a, "cycle 3: A's qp_num %u, was %u", a.qp->qp_num, qpn_a);
    exchange(&a, &c, 30, 0x60);
    exchange(&c, &a, 31, 0x70);

    close_side(&c);
    close_side(&b);
    close_side(&a);
    if (failures) {
        fprintf(stderr, "qp_reset: %d checks failed\n", failures);
        return 1;
    }
    printf("qp_reset: qp_num %u and %u kept through RESET; data moved after each cycle\n",
           qpn_a, qpn_b);
    return 0;
}
