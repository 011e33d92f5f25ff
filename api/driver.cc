// api/driver.cc — see driver.h.
#include "api/driver.h"

#include "api/udp_tuning.h"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <system_error>

namespace mroce::api {

static_assert(kUdpPacingBurstPackets == Driver::kBatch,
              "udp_endpoint_defaults' pacing burst is one driver pass (api/udp_tuning.h)");

namespace {
// While the datapath refuses packets (a full socket buffer), retry this often.
constexpr Duration kBackPressureRetry = std::chrono::microseconds(20);
// Most consecutive passes that put due timers off while a receive backlog drains.
constexpr uint32_t kMaxDeferredTimeouts = 64;
// The longest single sleep; a sleeper re-checks its state at least this often.
constexpr Duration kMaxSleep = std::chrono::seconds(1);

std::string error_text(int err) {
    const char* s = strerrordesc_np(err);
    return s ? s : ("errno " + std::to_string(err));
}
}  // namespace

Driver::Driver(core::Engine& engine, datapath::Datapath& dp, std::mutex& engine_mu, EventSink sink,
               const DriverConfig& cfg)
    : engine_(engine), dp_(dp), engine_mu_(engine_mu), sink_(std::move(sink)), cfg_(cfg) {
    if (const uint32_t rate = cfg.max_handshakes_per_second) {
        hs_interval_ns_ = std::max<int64_t>(1, 1'000'000'000 / rate);
        const int64_t capacity = std::max<int64_t>({1, cfg.max_handshakes_per_pass, rate / 100});
        hs_burst_ns_ = (capacity - 1) * hs_interval_ns_;
    }
}

Result<std::unique_ptr<Driver>> Driver::create(core::Engine& engine, datapath::Datapath& dp,
                                               std::mutex& engine_mu, EventSink sink,
                                               const DriverConfig& cfg, std::string* error) {
    std::unique_ptr<Driver> d(new Driver(engine, dp, engine_mu, std::move(sink), cfg));
    auto report = [&](const char* what) -> Result<std::unique_ptr<Driver>> {
        if (error) *error = std::string("driver: ") + what + ": " + error_text(errno);
        return Error::kIo;
    };
    d->event_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (d->event_fd_ < 0) return report("eventfd");
    d->epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (d->epoll_fd_ < 0) return report("epoll_create1");
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = d->event_fd_;
    if (::epoll_ctl(d->epoll_fd_, EPOLL_CTL_ADD, d->event_fd_, &ev) != 0)
        return report("epoll_ctl eventfd");
    // The sleep's deadline: a timerfd's hrtimer has no slack, unlike the timeout of
    // epoll_pwait2 (the calling thread's timer slack, 50 us by default: an application
    // thread in manual mode would wake up to 50 us after a pacing deadline).
    d->timer_fd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (d->timer_fd_ < 0) return report("timerfd_create");
    ev.data.fd = d->timer_fd_;
    if (::epoll_ctl(d->epoll_fd_, EPOLL_CTL_ADD, d->timer_fd_, &ev) != 0)
        return report("epoll_ctl timerfd");
    if (cfg.stand_by > Duration::zero()) {
        d->quiet_epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
        if (d->quiet_epoll_fd_ < 0) return report("epoll_create1");
        for (const int fd : {d->event_fd_, d->timer_fd_}) {
            ev.data.fd = fd;
            if (::epoll_ctl(d->quiet_epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0)
                return report("epoll_ctl stand-by");
        }
    }
    if (dp.wake_fd() >= 0) {
        ev.data.fd = dp.wake_fd();
        if (::epoll_ctl(d->epoll_fd_, EPOLL_CTL_ADD, dp.wake_fd(), &ev) != 0)
            return report("epoll_ctl datapath");
    }
    {
        std::lock_guard<std::mutex> g(engine_mu);
        d->datagram_size_ = engine.max_datagram_size();
        d->next_deadline_ns_.store(to_ns(engine.next_deadline()));
    }
    d->tx_arena_.resize(d->datagram_size_ * kBatch);
    d->rx_.resize(kBatch);
    d->tx_.resize(kBatch);
    d->tx_grouped_.resize(kBatch);
    d->in_place_ = dp.sends_in_two_pieces();
    return d;
}

Driver::~Driver() {
    stop_thread();
    if (epoll_fd_ >= 0) ::close(epoll_fd_);
    if (quiet_epoll_fd_ >= 0) ::close(quiet_epoll_fd_);
    if (event_fd_ >= 0) ::close(event_fd_);
    if (timer_fd_ >= 0) ::close(timer_fd_);
}

Error Driver::start_thread() {
    {
        std::lock_guard<std::mutex> g(mu_);
        if (closed_ || thread_.joinable()) return Error::kWrongState;
    }
    stop_.store(false);
    try {
        thread_ = std::thread([this] { thread_main(); });
    } catch (const std::system_error&) {
        return Error::kIo;
    }
    return Error::kOk;
}

void Driver::stop_thread() {
    if (!thread_.joinable()) return;
    stop_.store(true);
    const uint64_t one = 1;
    (void)!::write(event_fd_, &one, sizeof(one));
    thread_.join();
}

void Driver::close() {
    stop_thread();
    std::lock_guard<std::mutex> g(mu_);
    closed_ = true;
}

void Driver::wake() {
    const uint64_t one = 1;
    (void)!::write(event_fd_, &one, sizeof(one));
    sleep_counts_.wakes_sent.fetch_add(1, std::memory_order_relaxed);
}

void Driver::notify() {
    // Pairs with wait(): with sequentially consistent order, either the sleeper sees
    // work_pending_ before it sleeps, or we see sleeping_ and wake it.
    // A progress thread standing by is not woken: the application's next pass takes
    // the work (DriverConfig::stand_by).
    // Only the post that finds no work pending wakes the thread: work already pending
    // either kept the thread from sleeping (sleep() checks it) or its own post woke it. A
    // burst of posts (perftest posts up to its send queue's depth at once) then costs one
    // eventfd write, not one per post while the woken thread waits for the CPU.
    if (work_pending_.exchange(true)) return;
    if (sleeping_.load() && !standing_by_.load()) wake();
}

void Driver::notify_send() {
    if (cfg_.send_on_post && sleeping_.load() && !standing_by_.load()) {
        std::unique_lock<std::mutex> g(mu_, std::try_to_lock);
        if (g.owns_lock() && !closed_) {
            // The work is pending, so the pass produces and sends it (first, and without
            // a read, under DriverConfig::send_first); the sleeper keeps the sockets.
            work_pending_.store(true);
            ++stats_.posting_passes;
            (void)pass();
            const bool more = want_poll_ || tx_next_ < tx_count_;
            g.unlock();
            if (more || next_deadline_ns_.load() < sleep_until_ns_.load()) wake();
            return;
        }
    }
    notify();
}

void Driver::release_stand_by() {
    // Pairs with sleep(): either the sleeper sees the release before it stands by, or we
    // see it standing by and wake it.
    assisted_ns_.store(-1);
    if (standing_by_.load()) wake();
}

void Driver::with_datapath(const std::function<void(datapath::Datapath&)>& fn) {
    std::lock_guard<std::mutex> g(mu_);
    if (!closed_) fn(dp_);
}

DriverStats Driver::stats() const {
    DriverStats s;
    {
        std::lock_guard<std::mutex> g(mu_);
        s = stats_;
    }
    s.sleeps = sleep_counts_.sleeps.load(std::memory_order_relaxed);
    s.stand_by_sleeps = sleep_counts_.stand_by.load(std::memory_order_relaxed);
    s.alone_polls = sleep_counts_.alone_polls.load(std::memory_order_relaxed);
    s.wakeups_posted = sleep_counts_.posted.load(std::memory_order_relaxed);
    s.wakeups_timer = sleep_counts_.timer.load(std::memory_order_relaxed);
    s.wakes_sent = sleep_counts_.wakes_sent.load(std::memory_order_relaxed);
    return s;
}

bool Driver::run_once() {
    std::lock_guard<std::mutex> g(mu_);
    if (closed_) return false;
    return pass();
}

bool Driver::try_run_once(bool polling) {
    const bool stand_by = polling && quiet_epoll_fd_ >= 0;
    // For spin(): no clock read here, and no store while the flag is still set (a polling
    // loop would otherwise take the flag's cache line from the progress thread each time).
    if (!app_passed_.load(std::memory_order_relaxed)) app_passed_.store(true, std::memory_order_relaxed);
    std::unique_lock<std::mutex> g(mu_, std::try_to_lock);
    if (!g.owns_lock()) {
        // The lock is busy: the progress thread (or another poller) is in a pass. This
        // thread polls all the same, so the progress thread stands by once its pass ends,
        // rather than keep the datapath to itself while the application spins beside it.
        if (stand_by) assisted_ns_.store(to_ns(dp_.now()), std::memory_order_relaxed);
        return false;
    }
    if (closed_) return false;
    ++stats_.assisted_passes;
    // The stand-by holds for the whole pass and runs from its end: a pass that sends a full
    // batch over loopback takes 100-200 µs (each GSO send also delivers to the peer's
    // socket), so a stand-by counted from its start lapsed mid-pass, and the progress
    // thread woke to wait for the lock and then take the next pass from the application.
    int64_t passing = kAppInPass;
    if (stand_by) assisted_ns_.store(kAppInPass, std::memory_order_relaxed);
    const uint64_t delivered_before = stand_by ? engine_.messages_delivered() : 0;
    const bool did = pass();
    // An application that awaits no completion has no reason to poll again, and a message
    // still to arrive will be placed only by a pass: it may be what the application now
    // waits for, watching its memory. So the progress thread takes the datapath back at
    // once instead of after the stand-by when this pass
    // - left a message begun but not whole (ib_write_lat: its first segment came with the
    //   ACK that completed the last send, the rest follow; issue 15: 16 KiB round trips of
    //   234 µs instead of 20), or
    // - brought no message at all: what completed the send was an ACK alone, which a peer
    //   sends ahead of its answer when its delayed-ACK timer fell due first (a peer
    //   descheduled for max_ack_delay; issue 19: ib_write_lat 64 KiB, one round trip in
    //   thirty waited out the stand-by, p99 460 µs against 110 µs).
    // A pass that brought the answer whole keeps the stand-by: the application answers
    // it on its own thread, and a progress thread woken now would only compete for the CPU
    // (ib_write_lat 64 KiB: t_typical 21 µs against 42 µs when every such pass woke it).
    // Asked only after a pass that moved something: receiving() walks the streams.
    if (stand_by && did && !awaits_.load(std::memory_order_relaxed) &&
        (engine_.messages_delivered() == delivered_before || engine_.receiving())) {
        ++stats_.stand_by_ended;
        release_stand_by();
        return did;
    }
    // Unless release_stand_by() came meanwhile (a CQ armed by another thread).
    if (stand_by) assisted_ns_.compare_exchange_strong(passing, to_ns(dp_.now()), std::memory_order_relaxed);
    return did;
}

void Driver::flush_tx() {
    auto r = dp_.send_batch(std::span<const datapath::TxPacket>(tx_.data() + tx_next_,
                                                                tx_count_ - tx_next_));
    if (!r) {
        // The socket itself is unusable; the datagrams are lost and the engine's timers
        // recover or fail the connection.
        ++stats_.datapath_errors;
        tx_next_ = tx_count_;
        payloads_out_.store(false, std::memory_order_release);
        return;
    }
    stats_.datagrams_out += *r;
    tx_next_ += *r;
    if (*r && cfg_.trace) cfg_.trace->stamp(Stage::kSent, static_cast<uint32_t>(*r));
    if (tx_next_ < tx_count_) ++stats_.tx_retries;
    // What waits for the next pass must not read the application's memory then: that
    // pass reads ACKs first, which may complete the work the memory belongs to.
    copy_payloads_in();
}

void Driver::copy_payloads_in() {
    if (!payloads_out_.load(std::memory_order_relaxed)) return;
    for (size_t i = tx_next_; i < tx_count_; ++i) {
        datapath::TxPacket& p = tx_[i];
        if (p.payload.empty()) continue;
        // The slot is ours (tx_arena_) and holds a whole datagram (datagram_size_).
        std::byte* slot = tx_arena_.data() + (p.data.data() - tx_arena_.data());
        std::memcpy(slot + p.data.size(), p.payload.data(), p.payload.size());
        p.data = std::span<const std::byte>(slot, p.data.size() + p.payload.size());
        p.payload = {};
        ++stats_.payloads_copied_in;
    }
    payloads_out_.store(false, std::memory_order_release);
}

void Driver::wait_payloads_sent() const {
    // A pass sends for tens of µs at most (one batch); the caller is a rare control call.
    while (payloads_out_.load(std::memory_order_acquire)) std::this_thread::yield();
}

bool Driver::pass() {
    const uint64_t in = stats_.datagrams_in;
    const bool did = pass_inner();
    last_pass_busy_ = did;
    if (did) last_useful_rx_.store(stats_.datagrams_in - in, std::memory_order_relaxed);
    return did;
}

// account_time charges the time since the previous pass to busy or idle (DriverStats).
void Driver::account_time(Time now) {
    const int64_t t = to_ns(now);
    if (last_pass_ns_ >= 0 && t > last_pass_ns_)
        (last_pass_busy_ ? stats_.busy_ns : stats_.idle_ns) += static_cast<uint64_t>(t - last_pass_ns_);
    last_pass_ns_ = t;
}

bool Driver::admit_handshake(Time now) {
    if (hs_interval_ns_ == 0) return true;
    const int64_t t = to_ns(now);
    const int64_t tat = std::max(hs_tat_ns_, t);
    if (tat - t > hs_burst_ns_) return false;
    hs_tat_ns_ = tat + hs_interval_ns_;
    return true;
}

void Driver::hold_handshakes(Time now) {
    // Until the bucket admits a pass's bound in a row again.
    const int64_t refill = std::min<int64_t>(cfg_.max_handshakes_per_pass, hs_burst_ns_ / hs_interval_ns_ + 1);
    hs_release_ns_ = std::max(to_ns(now), hs_tat_ns_ - hs_burst_ns_ + (refill - 1) * hs_interval_ns_);
    if (hs_release_ns_ == to_ns(now)) {
        hs_release_ns_ = -1;
        return;
    }
    dp_.hold_handshakes(true);
    ++stats_.handshake_holds;
}

bool Driver::pass_inner() {
    ++stats_.passes;
    bool did = false;
    if (hs_release_ns_ >= 0 && to_ns(dp_.now()) >= hs_release_ns_) {
        hs_release_ns_ = -1;
        dp_.hold_handshakes(false);
    }
    // answer_first: the pass before delivered completions and produced nothing more; the
    // application's answer to them leaves now, before their ACKs are even built.
    const bool answer = answer_due_;
    answer_due_ = false;
    if (answer) {
        did = send_answer();
    } else if (tx_next_ < tx_count_) {
        const size_t before = tx_next_;
        flush_tx();
        did = tx_next_ != before;
    }
    size_t nrx = 0;
    // A pass that sends an answer sends the ACKs next: what arrived meanwhile (the peer's
    // ACK of our previous message, usually) waits for the next pass. So does one that
    // finds work posted (send_first), unless the pass before it did so already.
    const bool send_first = !answer && cfg_.send_first && !rx_skipped_ &&
                            work_pending_.load(std::memory_order_relaxed);
    rx_skipped_ = send_first;
    if (!answer && !send_first) {
        if (auto r = dp_.recv_batch(rx_)) {
            nrx = *r;
            if (nrx && cfg_.trace) cfg_.trace->stamp(Stage::kReceived, static_cast<uint32_t>(nrx));
        } else {
            ++stats_.datapath_errors;
        }
    }
    const bool posted = work_pending_.exchange(false);
    const Time now = dp_.now();
    account_time(now);
    const bool due = to_ns(now) >= next_deadline_ns_.load();
    const bool can_poll = tx_next_ >= tx_count_;
    if (nrx > 0 || posted || due) want_poll_ = true;
    if (!answer && nrx == 0 && !posted && !due && !(want_poll_ && can_poll)) {
        if (did) ++stats_.busy_passes;
        return did;
    }
    uint64_t events = 0;
    uint64_t completions = 0;
    auto deliver_events = [&] {
        const uint64_t before = events;
        while (auto e = engine_.poll_event()) {
            completions += e->kind == core::EventKind::kCompletion;
            sink_(*e);
            ++events;
        }
        if (events != before && cfg_.events_delivered) cfg_.events_delivered();
    };
    {
        std::lock_guard<std::mutex> g(engine_mu_);
        // Handshakes first pass the per-pass bound: a pass's engine work, and the RETRYs it
        // queues ahead of the connections' own packets, stay bounded whatever arrives.
        uint32_t handshakes = 0;
        bool over_budget = false;
        for (size_t i = 0; i < nrx; ++i) {
            if (engine_.is_handshake(rx_[i].data) &&
                (++handshakes > cfg_.max_handshakes_per_pass || !admit_handshake(now))) {
                over_budget |= handshakes <= cfg_.max_handshakes_per_pass;
                ++stats_.handshakes_shed;
                continue;
            }
            engine_.on_datagram(rx_[i].data, rx_[i].meta, now);
        }
        if (over_budget && hs_release_ns_ < 0) hold_handshakes(now);
        if (nrx && cfg_.trace) cfg_.trace->stamp(Stage::kEngineRx, static_cast<uint32_t>(nrx));
        // A full receive batch means more input is waiting, and it may be the ACKs that
        // answer the due timers (after this thread was descheduled, say): drain it first,
        // for a bounded number of passes, instead of declaring packets lost that arrived.
        const bool backlog = nrx == kBatch && deferred_timeouts_ < kMaxDeferredTimeouts;
        bool timed_out = false;
        if (engine_.next_deadline() <= now) {
            if (backlog) {
                ++deferred_timeouts_;
                ++stats_.timeouts_deferred;
            } else {
                deferred_timeouts_ = 0;
                engine_.on_timeout(now);
                ++stats_.timeouts;
                timed_out = true;
            }
        }
        // answer_first: a request of a few datagrams that completes something is answered
        // by the application in the next pass; until then this pass builds nothing (the
        // ACK would only be built to wait), and it hands over the completions at once.
        if (cfg_.answer_first && nrx > 0 && nrx <= kAnswerFirstMax && can_poll) {
            deliver_events();
            if (completions > 0) {
                answer_due_ = true;
                ++stats_.held_for_answer;
            }
        }
        if (want_poll_ && can_poll && !answer_due_) {
            tx_count_ = tx_next_ = 0;
            fill_batch(now);
        }
        // A pacing deadline is due until poll_transmit sends the paced packet, so the
        // deadline is checked after polling: still due with room left in the batch means
        // the engine would have the driver spin.
        if (timed_out && engine_.next_deadline() <= now && !want_poll_) ++stats_.stuck_deadlines;
        deliver_events();
        if (events && cfg_.trace) cfg_.trace->stamp(Stage::kCompleted, static_cast<uint32_t>(events));
        // Only a completion or a post changes what the application awaits.
        if (completions > 0 || posted)
            awaits_.store(engine_.awaits_completions(), std::memory_order_relaxed);
        next_deadline_ns_.store(to_ns(engine_.next_deadline()));
    }
    stats_.datagrams_in += nrx;
    stats_.events += events;
    if (nrx > 0 || events > 0) did = true;
    if (tx_next_ < tx_count_) {
        group_by_port();
        flush_tx();
        did = true;
    }
    if (did) ++stats_.busy_passes;
    return did;
}

void Driver::fill_batch(Time now) {
    bool in_place = false;  // some payload of this batch stays where it lies
    while (tx_count_ < kBatch) {
        const std::span<std::byte> slot(tx_arena_.data() + tx_count_ * datagram_size_, datagram_size_);
        datapath::TxPacket& p = tx_[tx_count_];
        const size_t n = in_place_ ? engine_.poll_transmit_in_place(slot, p.meta, now, p.payload)
                                   : engine_.poll_transmit(slot, p.meta, now);
        if (n == 0) break;
        p.data = slot.first(n);
        if (!p.payload.empty()) {
            in_place = true;
            ++stats_.payloads_in_place;
        }
        ++tx_count_;
    }
    // Before the engine lock goes: a thread that flushes work under it next must see that
    // this batch may still read the work's memory (wait_payloads_sent).
    if (in_place) payloads_out_.store(true, std::memory_order_relaxed);
    // A full batch means the engine may have more; otherwise it is drained until the next
    // input (a datagram, a timer or posted work).
    want_poll_ = tx_count_ == kBatch;
    if (tx_count_ && cfg_.trace) cfg_.trace->stamp(Stage::kEngineTx, static_cast<uint32_t>(tx_count_));
}

bool Driver::send_answer() {
    {
        std::lock_guard<std::mutex> g(engine_mu_);
        tx_count_ = tx_next_ = 0;
        engine_.set_data_only(true);
        fill_batch(dp_.now());
        engine_.set_data_only(false);
        want_poll_ = true;  // the ACKs, which the same pass builds and sends next
    }
    if (tx_count_ == 0) return false;
    group_by_port();
    flush_tx();
    return true;
}

void Driver::group_by_port() {
    // Group the batch by source port, stable so each path stays in order: the datapath
    // sends each run of one socket with one sendmmsg, as GSO super-packets. Paths are
    // independent routes, so the order between them carries no meaning. The engine deals
    // its datagrams round-robin over the paths, so an insertion sort would move almost every
    // packet past almost every other (quadratic: it cost as much as the payload copy at 120
    // per pass); this places each packet once, in order of first appearance of its port.
    std::array<uint16_t, kBatch> ports;   // distinct ports, in order of first appearance
    std::array<uint32_t, kBatch> counts;  // packets per distinct port, then start offsets
    std::array<uint32_t, kBatch> which;   // the distinct-port index of each packet
    size_t distinct = 0;
    for (size_t i = tx_next_; i < tx_count_; ++i) {
        const uint16_t port = tx_[i].meta.src.port;
        size_t k = 0;
        while (k < distinct && ports[k] != port) ++k;
        if (k == distinct) {
            ports[distinct] = port;
            counts[distinct++] = 0;
        }
        ++counts[k];
        which[i] = static_cast<uint32_t>(k);
    }
    if (distinct < 2) return;
    uint32_t at = static_cast<uint32_t>(tx_next_);
    for (size_t k = 0; k < distinct; ++k) {
        const uint32_t n = counts[k];
        counts[k] = at;
        at += n;
    }
    for (size_t i = tx_next_; i < tx_count_; ++i) tx_grouped_[counts[which[i]]++] = tx_[i];
    std::swap(tx_, tx_grouped_);
}

void Driver::wait(Duration max) { sleep(max, false); }

Duration Driver::spin() {
    if (cfg_.spin_alone <= cfg_.spin) return cfg_.spin;
    const int64_t now = to_ns(dp_.now());
    if (app_passed_.load(std::memory_order_relaxed) && app_passed_.exchange(false, std::memory_order_relaxed))
        app_seen_ns_ = now;
    // Only after a small exchange (a request, an ACK): a thread that receives trains of
    // datagrams is kept busy by them, and sleeping between trains lets the next one gather
    // into one pass (ib_write_bw's target, 56 against 49 Gbit/s polling alone after them).
    if (last_useful_rx_.load(std::memory_order_relaxed) > kAnswerFirstMax) return cfg_.spin;
    const bool alone = app_seen_ns_ < 0 || now - app_seen_ns_ >= cfg_.alone_after.count();
    return alone ? cfg_.spin_alone : cfg_.spin;
}

Duration Driver::stand_by() const {
    // An application with nothing left to complete is not about to poll again: it may wait
    // for a remote WRITE by spinning on memory (ib_write_lat), which only a pass made here
    // places. The grown stand-by would hold that WRITE up to 8 times longer (issue 15:
    // ib_write_lat's p99.9 went from 0.5-1.2 ms to 1.1-1.7 ms).
    return awaits_.load(std::memory_order_relaxed) ? cfg_.stand_by * stand_by_scale_ : cfg_.stand_by;
}

bool Driver::app_polling() const {
    const int64_t assisted = assisted_ns_.load(std::memory_order_relaxed);
    if (assisted == kAppInPass) return true;
    return assisted >= 0 && to_ns(dp_.now()) - assisted < stand_by().count();
}

void Driver::sleep(Duration max, bool may_stand_by) {
    Duration timeout = std::min(max, kMaxSleep);
    // Standing by: an application thread polled lately, so its passes receive, send and
    // run the timers; sleep without the datapath or the engine's deadline until the
    // stand-by ends (DriverConfig::stand_by).
    bool quiet = false;
    if (may_stand_by && quiet_epoll_fd_ >= 0) {
        const int64_t assisted = assisted_ns_.load();
        const int64_t sb = stand_by().count();
        const int64_t left = assisted < 0             ? 0
                             : assisted == kAppInPass ? sb
                                                      : assisted + sb - to_ns(dp_.now());
        if (left > 0) {
            quiet = true;
            timeout = std::min(timeout, Duration{left});
        }
    }
    if (!quiet) {
        // Once closed, only notify() can end the sleep early: the datapath is gone.
        std::lock_guard<std::mutex> g(mu_);
        if (!closed_) {
            // A batch the socket refused in part, or ACKs left for an answer that has not
            // come (answer_first): retried or sent soon, not at the next deadline.
            if (tx_next_ < tx_count_ || answer_due_) timeout = std::min(timeout, kBackPressureRetry);
            if (hs_release_ns_ >= 0)  // the held handshake queue is let go then
                timeout = std::min(timeout, Duration{hs_release_ns_ - to_ns(dp_.now())});
            const int64_t deadline = next_deadline_ns_.load();
            if (deadline != to_ns(kNever))
                timeout = std::min(timeout, Duration{deadline - to_ns(dp_.now())});
        }
    }
    if (timeout <= Duration::zero()) return;
    standing_by_.store(quiet);
    sleep_until_ns_.store(to_ns(dp_.now()) + timeout.count());
    sleeping_.store(true);
    // Posted work is the polling application's to send while we stand by.
    if ((!quiet && work_pending_.load()) || stop_.load() || (quiet && assisted_ns_.load() < 0)) {
        sleeping_.store(false);
        standing_by_.store(false);
        return;
    }
    // The timerfd ends the sleep at the deadline itself (ns resolution, no slack); the
    // epoll timeout is only a backstop, so its own resolution (ms before Linux 5.11) and
    // the thread's timer slack no longer matter. Arming it also clears an expiry left
    // from an earlier sleep that ended otherwise.
    const timespec ts{static_cast<time_t>(timeout.count() / 1'000'000'000),
                      static_cast<long>(timeout.count() % 1'000'000'000)};
    const itimerspec its{{0, 0}, ts};
    const bool timed = ::timerfd_settime(timer_fd_, 0, &its, nullptr) == 0;
    epoll_event evs[3];
    const Duration backstop = timed ? timeout + std::chrono::milliseconds(1) : timeout;
    const timespec bts{static_cast<time_t>(backstop.count() / 1'000'000'000),
                       static_cast<long>(backstop.count() % 1'000'000'000)};
    const int efd = quiet ? quiet_epoll_fd_ : epoll_fd_;
    int n = ::epoll_pwait2(efd, evs, 3, &bts, nullptr);
    if (n < 0 && errno == ENOSYS) {  // kernels before 5.11: millisecond resolution
        const auto ms = std::chrono::ceil<std::chrono::milliseconds>(backstop).count();
        n = ::epoll_wait(efd, evs, 3, static_cast<int>(ms));
    }
    sleeping_.store(false);
    standing_by_.store(false);
    if (n > 0 && cfg_.trace) cfg_.trace->stamp(Stage::kWoke, static_cast<uint32_t>(n));
    bool posted = false;
    bool timer = false;
    drain_wakes(evs, n, posted, timer);
    sleep_counts_.sleeps.fetch_add(1, std::memory_order_relaxed);
    if (quiet) sleep_counts_.stand_by.fetch_add(1, std::memory_order_relaxed);
    if (posted) sleep_counts_.posted.fetch_add(1, std::memory_order_relaxed);
    if (timer) sleep_counts_.timer.fetch_add(1, std::memory_order_relaxed);
}

void Driver::thread_main() {
    // Timers as short as the delayed-ACK bound (10 µs) need a fine sleep: the default
    // timer slack of 50 µs would stretch every timed sleep.
    (void)::prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    (void)::pthread_setname_np(::pthread_self(), cfg_.thread_name.substr(0, 15).c_str());
    Time last_busy = dp_.now();
    while (!stop_.load(std::memory_order_relaxed)) {
        // An application thread polls: its passes do the work (DriverConfig::stand_by).
        if (app_polling()) {
            const int64_t before = assisted_ns_.load(std::memory_order_relaxed);
            sleep(kMaxSleep, true);
            // The application polled again while this thread stood by: it polls in a loop,
            // so check on it less often (each check is a timer interrupt and two context
            // switches on its CPU: issue 15, ib_write_bw lost a fifth of its bandwidth to
            // 5,000 of them a second). Back to the configured stand-by once it stops.
            const int64_t after = assisted_ns_.load(std::memory_order_relaxed);
            if (after != before && after >= 0)
                stand_by_scale_ = std::min(stand_by_scale_ * 2, kMaxStandByScale);
            continue;
        }
        stand_by_scale_ = 1;
        if (run_once()) {
            last_busy = dp_.now();
            continue;
        }
        const Duration polling = spin();
        if (dp_.now() - last_busy < polling) {
            // Poll. Working alone, ask epoll rather than make passes: a check is one system
            // call, where a pass makes a receive call on every socket and asks the engine
            // for work, and the longer spin_alone is made of such checks.
            if (polling > cfg_.spin) wait_ready(last_busy + polling);
            continue;
        }
        sleep(kMaxSleep, true);
    }
}

void Driver::drain_wakes(const epoll_event* evs, int n, bool& posted, bool& timer) {
    for (int i = 0; i < n; ++i) {
        if (evs[i].data.fd != event_fd_ && evs[i].data.fd != timer_fd_) continue;
        uint64_t v;
        (void)!::read(evs[i].data.fd, &v, sizeof(v));
        (evs[i].data.fd == event_fd_ ? posted : timer) = true;
    }
}

void Driver::wait_ready(Time until) {
    // A datapath that cannot sleep has no readiness to ask for: it polls by passes.
    if (dp_.wake_fd() < 0) return;
    const timespec zero{0, 0};
    epoll_event evs[3];
    while (!stop_.load(std::memory_order_relaxed) && !work_pending_.load(std::memory_order_relaxed) &&
           !app_polling()) {
        const Time now = dp_.now();
        if (now >= until || to_ns(now) >= next_deadline_ns_.load(std::memory_order_relaxed)) return;
        const int n = ::epoll_pwait2(epoll_fd_, evs, 3, &zero, nullptr);
        sleep_counts_.alone_polls.fetch_add(1, std::memory_order_relaxed);
        if (n < 0 && errno != EINTR) return;  // (kernels before 5.11: a pass instead)
        bool posted = false, timer = false;
        drain_wakes(evs, n, posted, timer);
        if (n > 0) return;
    }
}

}  // namespace mroce::api
