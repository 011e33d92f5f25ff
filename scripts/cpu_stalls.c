// scripts/cpu_stalls.c — how often, and for how long, this host keeps a running thread off
// its CPU: one thread pinned to each of CPUs 0 and 1 reads CLOCK_MONOTONIC in a loop for
// SECONDS and counts the gaps between consecutive reads, by length. A gap longer than the
// probe timeout's floor (200 µs over UDP, spec [LOSS-15]) on the CPU of a process that owes
// an answer is a path timeout in a loss-free run (docs/results.md, "Timeouts without loss").
// On an idle host the gaps are the kernel's and the hypervisor's, not the processes'.
// Build and run: gcc -O2 -pthread -o /tmp/cpu_stalls scripts/cpu_stalls.c && /tmp/cpu_stalls [SECONDS]
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double seconds = 5;

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

// Gap classes (µs): > 20, > 50, > 100, > 200, > 500, > 1000, > 5000.
static const int64_t kBounds[] = {20, 50, 100, 200, 500, 1000, 5000};
enum { kClasses = sizeof kBounds / sizeof kBounds[0] };

struct Probe {
    int cpu;
    uint64_t over[kClasses];  // gaps longer than kBounds[i]
    int64_t longest_ns;
};

static void* run(void* arg) {
    struct Probe* p = arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(p->cpu, &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) {
        fprintf(stderr, "cpu_stalls: cannot pin a thread to CPU %d\n", p->cpu);
        exit(1);
    }
    const int64_t start = now_ns(), end = start + (int64_t)(seconds * 1e9);
    int64_t prev = start;
    for (;;) {
        const int64_t t = now_ns(), gap = t - prev;
        if (gap > p->longest_ns) p->longest_ns = gap;
        for (int i = 0; i < kClasses && gap > kBounds[i] * 1000; ++i) ++p->over[i];
        prev = t;
        if (t >= end) break;
    }
    return NULL;
}

int main(int argc, char** argv) {
    if (argc > 1) seconds = atof(argv[1]);
    if (!(seconds > 0)) {
        fprintf(stderr, "usage: cpu_stalls [SECONDS > 0]\n");
        return 2;
    }
    struct Probe probes[2] = {{.cpu = 0}, {.cpu = 1}};
    pthread_t th[2];
    for (int i = 0; i < 2; ++i) pthread_create(&th[i], NULL, run, &probes[i]);
    for (int i = 0; i < 2; ++i) pthread_join(th[i], NULL);
    printf("%.1f s per CPU; gaps between clock reads longer than (µs):\n%-6s", seconds, "cpu");
    for (int i = 0; i < kClasses; ++i) printf(" %7lld", (long long)kBounds[i]);
    printf("  longest (µs)\n");
    for (int c = 0; c < 2; ++c) {
        printf("%-6d", probes[c].cpu);
        for (int i = 0; i < kClasses; ++i) printf(" %7llu", (unsigned long long)probes[c].over[i]);
        printf("  %.0f\n", probes[c].longest_ns / 1e3);
    }
    return 0;
}
