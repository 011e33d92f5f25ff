// tests/verbs/gloo_collectives.cc — one rank of a Gloo job over Gloo's ibverbs transport,
// for the interop tests (tests/verbs/interop_test.py), which run it on mroce's
// libibverbs.so.1. Unmodified Gloo: the program is an ordinary Gloo application.
//
//   gloo_collectives RANK SIZE STORE_DIR [COUNT] [ITERATIONS]
//
// Runs AllreduceRing, AllreduceHalvingDoubling and BroadcastOneToAll on float buffers
// whose values depend on the rank and the iteration, checks every element of every result
// and prints "rank R: OK" (exit 0) or the first wrong element (exit 1).
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/broadcast_one_to_all.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/ibverbs/device.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace {

// value is what rank r contributes at index i in iteration it: small integers, so float
// sums are exact.
float value(int r, size_t i, int it) { return static_cast<float>((r + 1) * 3 + (i % 97) + it); }

bool check(const char* what, int rank, const std::vector<float>& got,
           const std::vector<float>& want) {
    for (size_t i = 0; i < want.size(); ++i) {
        if (got[i] != want[i]) {
            std::fprintf(stderr, "rank %d: %s: element %zu is %g, expected %g\n", rank, what, i,
                         static_cast<double>(got[i]), static_cast<double>(want[i]));
            return false;
        }
    }
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 4) {
        std::fprintf(stderr, "usage: gloo_collectives RANK SIZE STORE_DIR [COUNT] [ITERATIONS]\n");
        return 2;
    }
    const int rank = std::atoi(argv[1]);
    const int size = std::atoi(argv[2]);
    const std::string dir = argv[3];
    const size_t count = argc > 4 ? std::strtoul(argv[4], nullptr, 10) : 100000;
    const int iterations = argc > 5 ? std::atoi(argv[5]) : 3;
    if (rank < 0 || size < 1 || rank >= size || count == 0 || iterations < 1) {
        std::fprintf(stderr, "gloo_collectives: bad RANK/SIZE/COUNT/ITERATIONS\n");
        return 2;
    }

    gloo::transport::ibverbs::attr attr{"", 1, 0};  // the first device, port 1, GID 0
    auto dev = gloo::transport::ibverbs::CreateDevice(attr);
    gloo::rendezvous::FileStore file_store(dir);
    gloo::rendezvous::PrefixStore store("job", file_store);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
    ctx->connectFullMesh(store, dev);

    // The algorithms are built once and run every iteration, as applications use them.
    // Gloo's ring and halving-doubling do not wait for the completion of their last send
    // (a notification); destroying them while it is in flight aborts the process
    // ("Destructing buffer expecting completions"), so they are never destroyed. The
    // context and the device are: their teardown closes the connections.
    std::vector<float> buf(count), want(count);
    auto* ring = new gloo::AllreduceRing<float>(ctx, {buf.data()}, static_cast<int>(count));
    auto* hd = new gloo::AllreduceHalvingDoubling<float>(ctx, {buf.data()}, static_cast<int>(count));
    std::vector<gloo::BroadcastOneToAll<float>*> bcast;
    for (int root = 0; root < size; ++root)
        bcast.push_back(new gloo::BroadcastOneToAll<float>(ctx, {buf.data()}, count, root));
    auto* barrier = new gloo::BarrierAllToAll(ctx);

    bool ok = true;
    for (int it = 0; it < iterations && ok; ++it) {
        auto fill = [&](int salt) {
            for (size_t i = 0; i < count; ++i) {
                buf[i] = value(rank, i, salt);
                want[i] = 0;
                for (int r = 0; r < size; ++r) want[i] += value(r, i, salt);
            }
        };
        fill(2 * it);
        ring->run();
        ok = ok && check("AllreduceRing", rank, buf, want);
        fill(2 * it + 1);
        hd->run();
        ok = ok && check("AllreduceHalvingDoubling", rank, buf, want);
        const int root = it % size;
        for (size_t i = 0; i < count; ++i) {
            buf[i] = rank == root ? value(root, i, it) : -1.0f;
            want[i] = value(root, i, it);
        }
        bcast[static_cast<size_t>(root)]->run();
        ok = ok && check("BroadcastOneToAll", rank, buf, want);
        barrier->run();
    }
    std::printf("rank %d: %s\n", rank, ok ? "OK" : "FAILED");
    return ok ? 0 : 1;
}
