// scripts/udp_gso_pingpong.c — what one half round trip of a ping-pong costs over Linux
// loopback UDP for the three ways an ACK can ride with an 80-byte answer (spec [WIRE-10],
// docs/results.md "One datagram for the answer and its ACK"). Two threads pinned to CPUs
// 0 and 1 spin on non-blocking recvmmsg (UDP_GRO on), as the Verbs library's poll does.
//   mode 0: one 80-byte datagram (the answer alone, as `mroce perf --lat` sends it)
//   mode 1: one 168-byte send with UDP_SEGMENT 88: a GSO super-packet of 88 + 80 bytes
//   mode 2: one 168-byte datagram (the ACK and the answer coalesced)
//   mode 3: two datagrams, 88 and 80 bytes, in one sendmmsg
// Build and run: gcc -O2 -pthread -o /tmp/gsopp scripts/udp_gso_pingpong.c && /tmp/gsopp MODE [ITERS]
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

static int mode, iters = 100000;

static struct sockaddr_in at(int port) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(0x7f000001)};
    return a;
}

static int open_socket(int port) {
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = at(port);
    int one = 1;
    if (s < 0 || bind(s, (struct sockaddr*)&a, sizeof a) != 0) { perror("socket"); exit(1); }
    setsockopt(s, SOL_UDP, UDP_GRO, &one, sizeof one);
    return s;
}

static void send_one(int s, int port) {
    char buf[256], cb[CMSG_SPACE(sizeof(uint16_t))];
    memset(buf, 1, sizeof buf);
    struct sockaddr_in a = at(port);
    struct iovec iov[2] = {{buf, mode == 0 ? 80 : 168}, {buf + 88, 80}};
    struct mmsghdr m[2];
    memset(m, 0, sizeof m);
    for (int i = 0; i < 2; ++i) {
        m[i].msg_hdr.msg_name = &a;
        m[i].msg_hdr.msg_namelen = sizeof a;
        m[i].msg_hdr.msg_iov = &iov[i];
        m[i].msg_hdr.msg_iovlen = 1;
    }
    if (mode == 1) {
        m[0].msg_hdr.msg_control = cb;
        m[0].msg_hdr.msg_controllen = sizeof cb;
        struct cmsghdr* c = CMSG_FIRSTHDR(&m[0].msg_hdr);
        c->cmsg_level = SOL_UDP;
        c->cmsg_type = UDP_SEGMENT;
        c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
        *(uint16_t*)CMSG_DATA(c) = 88;
    }
    if (mode == 3) iov[0].iov_len = 88;
    const int n = mode == 3 ? 2 : 1;
    if (sendmmsg(s, m, n, 0) != n) perror("sendmmsg");
}

// receive_one spins until the peer's whole answer is in (mode 3: both datagrams).
static void receive_one(int s) {
    char buf[65536], cb[256];
    for (int got = 0;;) {
        struct iovec iov = {buf, sizeof buf};
        struct mmsghdr m;
        memset(&m, 0, sizeof m);
        m.msg_hdr.msg_iov = &iov;
        m.msg_hdr.msg_iovlen = 1;
        m.msg_hdr.msg_control = cb;
        m.msg_hdr.msg_controllen = sizeof cb;
        if (recvmmsg(s, &m, 1, MSG_DONTWAIT, NULL) == 1 && (mode != 3 || ++got == 2)) return;
    }
}

static void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set);
}

static void* server(void* arg) {
    (void)arg;
    pin(1);
    int s = open_socket(40001);
    for (int i = 0; i < iters; ++i) {
        receive_one(s);
        send_one(s, 40000);
    }
    return NULL;
}

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int by_value(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s MODE(0..3) [ITERS]\n", argv[0]); return 2; }
    mode = atoi(argv[1]);
    if (argc > 2) iters = atoi(argv[2]);
    int s = open_socket(40000);
    pthread_t t;
    pthread_create(&t, NULL, server, NULL);
    pin(0);
    usleep(100000);
    double* rtt = malloc(sizeof(double) * iters);
    for (int i = 0; i < iters; ++i) {
        double t0 = now_us();
        send_one(s, 40001);
        receive_one(s);
        rtt[i] = now_us() - t0;
    }
    pthread_join(t, NULL);
    qsort(rtt, iters, sizeof(double), by_value);
    printf("mode %d round trip p50 %.2f us, p99 %.2f us\n", mode, rtt[iters / 2], rtt[iters * 99 / 100]);
    return 0;
}
