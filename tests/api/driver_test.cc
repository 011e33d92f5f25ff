// tests/api/driver_test.cc — the driver loop against a fake engine and datapath: engine
// deadlines (the pacer's "next packet may leave at") are kept to well under 100 µs by a
// sleeping caller, whatever its timer slack, without polling in between. The bounds
// asserted are loose (a loaded machine may deschedule the thread); the measured lateness
// is printed.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <optional>
#include <vector>

#include "api/driver.h"
#include "tests/api/test_util.h"

namespace mroce::test {
namespace {

Time monotonic_now() {
    timespec ts;
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return time_from_ns(int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec);
}

// PacedEngine sends one datagram every `gap`, expressed only through next_deadline(), as
// the pacing engine does: nothing to send and the deadline due until the datagram leaves.
class PacedEngine final : public core::Engine {
public:
    PacedEngine(Time first, Duration gap, int count) : next_(first), gap_(gap), left_(count) {}
    void on_datagram(std::span<const std::byte>, const PacketMeta&, Time) override {}
    void on_timeout(Time) override {}
    size_t poll_transmit(std::span<std::byte> buf, PacketMeta& meta, Time now) override {
        if (left_ == 0 || now < next_) return 0;
        sent_at.push_back(now);
        lateness.push_back(now - next_);
        next_ += gap_;
        --left_;
        meta = PacketMeta{};
        buf[0] = std::byte{1};
        return 1;
    }
    Time next_deadline() const override { return left_ ? next_ : kNever; }
    std::optional<core::Event> poll_event() override { return std::nullopt; }
    size_t max_datagram_size() const override { return 64; }

    std::vector<Time> sent_at;
    std::vector<Duration> lateness;

private:
    Time next_;
    Duration gap_;
    int left_;
};

class NullDatapath final : public datapath::Datapath {
public:
    Result<size_t> send_batch(std::span<const datapath::TxPacket> p) override { return p.size(); }
    Result<size_t> recv_batch(std::span<datapath::RxPacket>) override { return size_t{0}; }
    Time now() const override { return monotonic_now(); }
    int wake_fd() const override { return -1; }
    Address local_address() const override { return loopback(1); }
};

// An application thread in manual mode (default timer slack, 50 µs) sleeps in wait()
// between paced datagrams 300 µs apart: every datagram leaves at or after its time, the
// typical one within tens of µs, and the driver makes a handful of passes per datagram
// (it sleeps; it does not poll in between).
TEST(Driver, WaitKeepsPacingDeadlinesWithoutPolling) {
    constexpr int kCount = 40;
    const Duration gap = std::chrono::microseconds(300);
    PacedEngine engine(monotonic_now() + gap, gap, kCount);
    NullDatapath dp;
    std::mutex mu;
    std::string why;
    auto d = api::Driver::create(engine, dp, mu, [](const core::Event&) {}, {}, &why);
    ASSERT_TRUE(d.ok()) << why;
    api::Driver& driver = **d;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (engine.sent_at.size() < kCount && std::chrono::steady_clock::now() < give_up) {
        if (!driver.run_once()) driver.wait(std::chrono::seconds(1));
    }
    ASSERT_EQ(engine.sent_at.size(), size_t{kCount});
    std::vector<Duration> late = engine.lateness;
    for (Duration l : late) EXPECT_GE(l, Duration::zero());
    std::sort(late.begin(), late.end());
    const Duration median = late[late.size() / 2];
    const api::DriverStats st = driver.stats();
    std::printf("  lateness: median %.1f us, max %.1f us; %llu passes, %llu sleeps, "
                "%llu timer wake-ups for %d datagrams\n",
                std::chrono::duration<double, std::micro>(median).count(),
                std::chrono::duration<double, std::micro>(late.back()).count(),
                static_cast<unsigned long long>(st.passes),
                static_cast<unsigned long long>(st.sleeps),
                static_cast<unsigned long long>(st.wakeups_timer), kCount);
    // Loose: a millisecond-resolution sleep or a sleep past the deadline would be ~1 ms.
    EXPECT_LT(median, std::chrono::microseconds(250));
    EXPECT_LE(st.passes, uint64_t{10} * kCount);  // no busy-wait between deadlines
    EXPECT_GE(st.wakeups_timer, uint64_t{kCount} / 2);
    EXPECT_EQ(st.stuck_deadlines, 0u);  // due until sent is not "stuck"
}

}  // namespace
}  // namespace mroce::test
