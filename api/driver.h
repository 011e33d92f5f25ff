// api/driver.h — the driver loop: joins one protocol engine (core/engine.h) to one datapath
// (datapath/datapath.h) and runs it, on a background progress thread or when asked
// (docs/design.md §10 "Threading and progress model of api/").
//
// One pass (run_once): receive a batch from the datapath; under the engine lock feed it to
// the engine, run due timers, collect up to a batch of datagrams from poll_transmit and
// hand every event to the sink; then, outside the lock, send the batch. The engine lock is
// shared with whoever posts work, so the engine only ever runs under it. The driver never
// blocks while holding it: system calls happen outside.
//
// It depends only on the two interfaces, so the RoCEv2 baseline engine can reuse it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/stage_trace.h"
#include "core/engine.h"
#include "datapath/datapath.h"
#include "util/result.h"
#include "util/time.h"

struct epoll_event;  // <sys/epoll.h>

namespace mroce::api {

struct DriverConfig {
    // How long the progress thread keeps polling after its last useful pass before it
    // sleeps. Polling saves the wake-up of an idle CPU (tens of µs in a VM); it costs a core
    // for that long after every burst. 0: sleep at once.
    Duration spin = std::chrono::microseconds(50);
    // spin_alone: how long the progress thread keeps polling after its last useful pass
    // while it works alone: no application thread has made a pass (try_run_once) for
    // `alone_after`, or ever, and that pass was a small exchange (at most kAnswerFirstMax
    // datagrams received: a request, an ACK). It then answers by itself (the target of
    // READs and atomics, an application that waits on completion events), and the wake-up
    // of an idle CPU it saves is most of a round trip in a VM (ib_read_lat over loopback:
    // 19 µs against 7 with 50 µs). It polls epoll's readiness, one system call per check,
    // and makes a pass only once something is ready. Its cost is a core for that long after
    // every exchange. An application that polls is never competed with for its CPU: `spin`
    // applies while it does (on a busy CPU a spinning progress thread delays the thread
    // that would have done the same work, issue 15); so it does after a train of datagrams,
    // which keeps the thread busy anyway, and sleeping lets the next train gather into one
    // pass (ib_write_bw's target). The longer of the two applies. 0: `spin` only.
    Duration spin_alone = Duration::zero();
    // alone_after: how long after an application thread's last pass the progress thread
    // counts as working alone (spin_alone); long against a polling loop's gaps.
    Duration alone_after = std::chrono::milliseconds(1);
    // The progress thread's name (at most 15 characters), as top and /proc show it: a
    // sharded device names each shard's thread (docs/design.md §12).
    std::string thread_name = "mroce-progress";
    // Most handshake datagrams (core::Engine::is_handshake: HELLOs, older-version packets)
    // one pass hands to the engine; the batch's others are dropped and counted
    // (DriverStats::handshakes_shed), as a full socket buffer would drop them, and their
    // senders retransmit. Anyone can send these without a token, so without a bound a
    // flood of them fills every pass with handshake work and RETRYs and the established
    // connections' packets wait behind it (issue 17, finding 8; docs/security.md). The
    // rest of each batch (up to kBatch) carries on. kBatch or more: no bound.
    uint32_t max_handshakes_per_pass = 16;
    // ... and at most this many per second, on average (a token bucket holding 10 ms of
    // them, at least max_handshakes_per_pass): the passes of a flood would otherwise each
    // hand the engine their bound, as fast as the thread can read them, and answer every
    // one with a RETRY whose send costs the kernel CPU that the established connections
    // need (issue 19: an idle shard under a full-rate flood did nothing else). Over the
    // budget, handshakes are shed as above, and the datapath's handshake queue, where it
    // has one, is held (Datapath::hold_handshakes) until the bucket holds a pass's bound
    // again: the flood waits in the kernel, which drops its excess, and the thread sleeps.
    // A genuine client whose HELLO is shed resends it ([CONN-12]). 0: no budget.
    uint32_t max_handshakes_per_second = 50000;
    // Where the passes stamp their stages (api/stage_trace.h); nullptr: no tracing, at the
    // cost of one branch per stage. Not owned; it outlives the driver.
    StageTrace* trace = nullptr;
    // events_delivered: called, with the engine lock still held, after a pass has handed
    // the sink all the events it had (one at least). api::Device tells a CQ's waiters
    // only then, so that every completion of the pass is in its queue before anyone
    // looks: a datagram that answers a request and acknowledges it completes a receive and
    // a send, and an application woken by the first may look for the second (perftest's
    // -e shares one completion channel between its two CQs).
    std::function<void()> events_delivered;
    // answer_first: for a driver that the application itself runs (manual progress), a
    // pass whose few datagrams (at most kAnswerFirstMax: a request) delivered completions
    // builds nothing more; the next run_once first asks the engine for DATA only
    // (core::Engine::set_data_only) and sends it, then builds and sends the rest: the
    // application's answer to those completions leaves before their ACK, which is not even
    // built before (issue 19: the ACK's system call was a third of a loopback round trip,
    // its building a few per cent). wait() sleeps at most kBackPressureRetry meanwhile. A
    // progress thread gains nothing by it: the application answers on its own thread.
    bool answer_first = false;
    // stand_by: after an application thread made a pass (try_run_once: ibv_poll_cq, a
    // busy-polling CompletionQueue::wait), the progress thread leaves the datapath to it
    // for this long. It sleeps on its timers and on release_stand_by() only, and posted
    // work does not wake it: the polling thread receives and sends in its own passes.
    // Otherwise every datagram and every post wakes the progress thread, which on a busy
    // CPU preempts the very thread that would have done the same work (issue 15: about
    // two wake-ups and a lock hand-off per round trip of ib_write_lat). The stand-by runs
    // from the end of the application's pass (it holds while one runs), and it doubles,
    // up to 8 times this, each time the application polled through a whole one while work
    // it posted had yet to complete (core::Engine::awaits_completions): a thread that polls
    // in a loop for its completions is checked on rarely (each check is a timer interrupt
    // and two context switches on its CPU). The cost: work posted by a thread that stops
    // polling afterwards, and datagrams that arrive after the last poll, wait until the
    // stand-by ends, at most 8 times this long after that poll (this long once nothing is
    // left to complete), unless release_stand_by() ends it first, as an application pass
    // does that leaves nothing to complete and a message partly arrived, or that brought
    // no message (try_run_once). 0: never stand by.
    Duration stand_by = Duration::zero();
    // send_first: a pass that starts with work posted since the previous one produces and
    // sends it before it reads the sockets, and leaves the read to the next pass. For an
    // application thread that posts and then polls (ibv_post_send, then ibv_poll_cq): the
    // read before the send is a system call that, in a request-response exchange, finds
    // nothing (the answer cannot have come yet) and delays the request by its length
    // (issue 15: 0.5 µs of each half round trip of ib_write_lat over loopback). At most one
    // pass in a row skips its read, so a thread that posts all the time still reads.
    bool send_first = false;
    // send_on_post: notify_send() from a thread that posted sends while the progress thread
    // sleeps on the sockets (not standing by) makes the pass itself, so the work leaves at
    // once instead of after the sleeper's wake-up. For a progress thread serving an
    // application that blocks on a completion channel (ibv_rc_pingpong -e, Gloo): that
    // wake-up was one of the three thread wake-ups on each side of every message, each
    // 20-50 µs on a VM. The sleeper is still woken if the pass leaves it work or moves the
    // engine's next deadline before the end of its sleep.
    bool send_on_post = false;
};

// DriverStats: counters of one driver. Read with Driver::stats().
struct DriverStats {
    uint64_t passes = 0;          // run_once calls
    uint64_t busy_passes = 0;     // passes that moved a datagram or produced an event
    uint64_t datagrams_in = 0;
    uint64_t handshakes_shed = 0; // of datagrams_in, handshakes over max_handshakes_per_pass:
                                  // dropped before the engine saw them
    uint64_t datagrams_out = 0;
    uint64_t events = 0;
    uint64_t timeouts = 0;        // engine on_timeout calls
    uint64_t timeouts_deferred = 0;  // passes that ran due timers late: a full receive batch
                                     // came first (input that may answer them was waiting)
    uint64_t sleeps = 0;          // waits on the wake fds
    uint64_t wakeups_posted = 0;  // sleeps ended early by posted work (eventfd)
    uint64_t wakeups_timer = 0;   // sleeps ended by their deadline (timerfd)
    uint64_t wakes_sent = 0;      // eventfd writes to wake a sleeper (notify, release_stand_by)
    uint64_t tx_retries = 0;      // send_batch accepted fewer than offered (back-pressure)
    uint64_t held_for_answer = 0; // passes that left their ACKs to the next (answer_first)
    uint64_t payloads_in_place = 0;   // DATA sent with the payload read where it lies
    uint64_t payloads_copied_in = 0;  // of them, copied into the batch after all (held back)
    uint64_t assisted_passes = 0; // of passes, made by try_run_once: an application thread
                                  // helping (a busy-polling CompletionQueue::wait, ibv_poll_cq)
    uint64_t posting_passes = 0;  // of passes, made by notify_send: a posting thread sent
                                  // its work itself (DriverConfig::send_on_post)
    uint64_t stand_by_sleeps = 0; // of sleeps, those that left the datapath to an application
                                  // thread that polls (DriverConfig::stand_by)
    uint64_t alone_polls = 0;     // readiness checks (an epoll wait of 0, no pass) the progress
                                  // thread made while polling alone (DriverConfig::spin_alone)
    uint64_t stand_by_ended = 0;  // application passes after which the progress thread took
                                  // the datapath back at once: nothing awaited completion, and
                                  // a message had begun to arrive or the pass brought none
                                  // (core::Engine::receiving, messages_delivered)
    uint64_t handshake_holds = 0; // times the handshake budget was spent and the datapath's
                                  // handshake queue held (DriverConfig::max_handshakes_per_second)
    uint64_t datapath_errors = 0; // send_batch/recv_batch returned an error
    uint64_t stuck_deadlines = 0; // the engine's deadline was still due after on_timeout
                                  // and poll_transmit
                                  // (an engine bug: the driver would spin)
    // Wall time between the starts of consecutive passes, split by whether the earlier pass
    // moved anything: idle_ns is time spent polling with nothing to do (waiting for the
    // peer, or for the window), busy_ns the rest. A descheduled thread's pause counts
    // towards the pass it interrupted. Costs no clock read: the pass reads the time anyway.
    uint64_t busy_ns = 0;
    uint64_t idle_ns = 0;
};

class Driver {
public:
    // EventSink receives every engine event, oldest first, with the engine lock held: it
    // must not call back into the engine or take that lock.
    using EventSink = std::function<void(const core::Event&)>;

    // kBatch is the most datagrams moved per direction per pass. The datapath sends each
    // path's run of a pass as GSO super-packets of at most 65000 bytes: 15 datagrams of a
    // full 4 KiB segment (4168 bytes with the DATA header). 120 gives each of the default 8
    // paths one full super-packet per pass; with 64 (before) each carried 8, so the kernel
    // built, routed and (at the receiver) dequeued about twice as many skbs per byte. It
    // also holds a GRO super-packet whole (up to 15 such datagrams).
    static constexpr size_t kBatch = 120;
    // The most datagrams a pass may receive for DriverConfig::answer_first to leave the
    // ACKs it owes to the next pass.
    static constexpr size_t kAnswerFirstMax = 4;

    // create builds a driver over `engine` (guarded by `engine_mu`) and `datapath`; all
    // three must outlive it. It does not start the thread. Errors: kIo (eventfd or epoll
    // could not be created; `error` gets a one-line message).
    static Result<std::unique_ptr<Driver>> create(core::Engine& engine, datapath::Datapath& dp,
                                                  std::mutex& engine_mu, EventSink sink,
                                                  const DriverConfig& cfg,
                                                  std::string* error = nullptr);
    ~Driver();
    Driver(const Driver&) = delete;
    Driver& operator=(const Driver&) = delete;

    // start_thread runs the progress thread until stop_thread. Errors: kWrongState (already
    // running or closed), kIo (the thread could not be created). Any thread but the
    // progress thread itself.
    Error start_thread();
    // stop_thread asks the progress thread to finish its pass and joins it. Idempotent.
    void stop_thread();
    bool thread_running() const { return thread_.joinable(); }

    // run_once makes one pass (see the file comment). Returns true if it moved a datagram or
    // produced an event. Any thread; passes are serialised by the driver's own lock, which
    // is taken before the engine lock.
    bool run_once();
    // try_run_once is run_once unless another thread holds the driver lock (it is in a
    // pass): then it returns false at once instead of waiting for it. For an application
    // thread that polls in a loop; `polling` false: it polls once before it blocks, so the
    // progress thread must not stand by for it (DriverConfig::stand_by).
    bool try_run_once(bool polling = true);
    // wait sleeps until the datapath has data, work was posted (notify), the engine's next
    // deadline, or `max`, whichever comes first. Any thread; used by the progress thread
    // and by applications in manual mode. The deadline is kept to the µs whatever the
    // calling thread's timer slack (a timerfd ends the sleep): the engine's pacer expresses
    // the next packet's departure as its deadline.
    void wait(Duration max);
    // notify tells the driver that work was posted to the engine, so the next pass polls
    // it for datagrams, and wakes a sleeping wait(). Any thread; call it after releasing
    // the engine lock. Costs a write(2) only when someone is asleep.
    void notify();
    // notify_send is notify() for posted sends: with DriverConfig::send_on_post, while the
    // progress thread sleeps on the sockets, the calling thread makes the pass that sends
    // the work (unless another thread is in one). Any thread; after releasing the engine
    // lock.
    void notify_send();
    // release_stand_by tells the driver that no application thread will poll for now (it
    // is about to block on a completion channel, say): a progress thread standing by
    // (DriverConfig::stand_by) goes back to watching the datapath at once. Any thread.
    void release_stand_by();

    // close stops the thread and makes every later run_once/wait a no-op, so the datapath
    // may be destroyed afterwards. Any thread but the progress thread.
    void close();

    // with_datapath runs fn on the datapath under the driver lock, unless closed.
    void with_datapath(const std::function<void(datapath::Datapath&)>& fn);

    // Payloads sent from where they lie. Over a datapath that sends a datagram in two
    // pieces (Datapath::sends_in_two_pieces), a pass lets the engine leave DATA payloads in
    // the application's memory (core::Engine::poll_transmit_in_place) and the kernel copies
    // them from there, once, instead of the engine copying each into the batch first. Such
    // a batch is sent after the pass has released the engine lock, so the memory it reads
    // must not be handed back to the application meanwhile. Completions cannot: they come
    // from the peer's ACKs of those very datagrams, read by a later pass, and what a pass
    // could not send (back-pressure) is copied into the batch before the pass ends. What
    // remains is an application thread that ends work requests itself, under the engine
    // lock, while a pass sends: a queue pair destroyed or moved to ERR or RESET (its work
    // flushed), memory deregistered. Such a call ends with wait_payloads_sent()
    // (api/device.cc).
    //
    // wait_payloads_sent returns once no pass is sending payloads from the application's
    // memory that the engine handed out before the caller's last release of the engine
    // lock. Any thread but one inside a pass; the engine lock may be held.
    void wait_payloads_sent() const;

    DriverStats stats() const;

private:
    Driver(core::Engine& engine, datapath::Datapath& dp, std::mutex& engine_mu, EventSink sink,
           const DriverConfig& cfg);
    bool pass();          // driver lock held
    bool pass_inner();    // driver lock held
    void account_time(Time now);  // driver lock held
    bool admit_handshake(Time now);  // driver lock held: the budget allows one more
    void hold_handshakes(Time now);  // driver lock held: spent; hold the queue until refilled
    void flush_tx();      // driver lock held
    // fill_batch polls the engine into tx_ from tx_count_ on (stamping kEngineTx); engine
    // lock held.
    void fill_batch(Time now);
    // send_answer sends what the engine has of DATA (answer_first), before anything else;
    // true if it sent some. Driver lock held, engine lock not.
    bool send_answer();
    // copy_payloads_in copies the payloads of tx_[tx_next_, tx_count_) into their slots, so
    // the batch no longer reads the application's memory, and says so (payloads_out_).
    void copy_payloads_in();  // driver lock held
    void group_by_port(); // driver lock held: orders tx_[tx_next_, tx_count_) by source port
    void thread_main();
    void wake();  // ends a sleeper's wait (the eventfd), counted in wakes_sent
    // stand_by: the stand-by in force: DriverConfig::stand_by, longer while the
    // application keeps polling (stand_by_scale_) for work it posted (awaits_).
    Duration stand_by() const;
    // spin: how long the progress thread polls after its last useful pass, spin or, while
    // it works alone, spin_alone (DriverConfig). The progress thread's only (app_seen_ns_).
    Duration spin();
    // wait_ready: while the progress thread polls alone, wait without a pass until epoll
    // reports a socket (or a wake-up) ready, work is posted, a timer is due, an application
    // thread polls, or `until`.
    void wait_ready(Time until);
    // drain_wakes reads the wake and timer fds among the n epoll events (level-triggered:
    // left readable they would end every later wait at once) and says which were there.
    void drain_wakes(const epoll_event* evs, int n, bool& posted, bool& timer);
    // app_polling: an application pass runs, or ended less than stand_by() ago.
    bool app_polling() const;
    // sleep is wait(); the progress thread's (may_stand_by) sleeps without the datapath
    // while an application thread polls.
    void sleep(Duration max, bool may_stand_by);

    core::Engine& engine_;
    datapath::Datapath& dp_;
    std::mutex& engine_mu_;
    EventSink sink_;
    DriverConfig cfg_;

    int event_fd_ = -1;  // written by notify() to wake a sleeper
    int timer_fd_ = -1;  // armed by wait() with the sleep's deadline (no timer slack)
    int epoll_fd_ = -1;  // over event_fd_, timer_fd_ and the datapath's wake fd
    int quiet_epoll_fd_ = -1;  // over event_fd_ and timer_fd_: the stand-by's sleep

    std::atomic<bool> work_pending_{true};
    std::atomic<bool> sleeping_{false};
    std::atomic<bool> standing_by_{false};  // the sleeper does not watch the datapath
    // When an application pass last ended; -1: released; kAppInPass: one is running.
    std::atomic<int64_t> assisted_ns_{-1};
    // An application thread tried a pass (try_run_once), whether it took one or found the
    // lock busy, since the progress thread last looked; the progress thread's own
    // app_seen_ns_ is when it last saw one (-1: never). Unlike assisted_ns_,
    // release_stand_by() keeps them: they say whether the progress thread works alone
    // (DriverConfig::spin_alone).
    std::atomic<bool> app_passed_{false};
    int64_t app_seen_ns_ = -1;
    // The datagrams the last pass that did something received (spin(): a small exchange).
    std::atomic<uint64_t> last_useful_rx_{0};
    static constexpr int64_t kAppInPass = INT64_MAX;
    // The progress thread's own (no lock): the stand-by doubles each time the application
    // polled through a whole one, up to kMaxStandByScale times DriverConfig::stand_by, and
    // is back to 1 when the thread takes the datapath again.
    static constexpr int kMaxStandByScale = 8;
    int stand_by_scale_ = 1;
    // The engine's awaits_completions() after the last pass that completed or took posted
    // work: the stand-by grows only while the application has completions to poll for.
    std::atomic<bool> awaits_{true};
    std::atomic<bool> stop_{false};
    // A batch that reads payloads in the application's memory is being sent: set under the
    // engine lock, cleared once they are sent or copied in (wait_payloads_sent).
    std::atomic<bool> payloads_out_{false};
    bool in_place_ = false;  // the datapath sends two pieces: payloads may stay in place
    std::atomic<int64_t> next_deadline_ns_{to_ns(kNever)};
    // When the sleeper's timer ends its sleep (ns, the datapath's clock): a pass made by
    // notify_send wakes it if the engine's next deadline is now earlier.
    std::atomic<int64_t> sleep_until_ns_{to_ns(kNever)};
    // The sleep counters of DriverStats, kept apart from mu_: a sleeper that took the
    // driver lock to count its sleep would wait out a polling application's whole pass,
    // then wake it with a futex call (issue 15: ib_write_bw's two threads on one CPU).
    struct SleepCounters {
        std::atomic<uint64_t> sleeps{0}, stand_by{0}, posted{0}, timer{0}, wakes_sent{0}, alone_polls{0};
    };
    SleepCounters sleep_counts_;
    std::thread thread_;

    // Everything below is guarded by mu_ (the driver lock).
    mutable std::mutex mu_;
    bool closed_ = false;
    bool want_poll_ = true;  // the engine may have datagrams to send
    bool answer_due_ = false;  // the next pass sends the answer, then builds the ACKs (answer_first)
    bool rx_skipped_ = false;  // the previous pass sent first and did not read (send_first)
    size_t datagram_size_ = 0;
    std::vector<std::byte> tx_arena_;  // kBatch slots of datagram_size_ (receive buffers
                                       // belong to the datapath)
    std::vector<datapath::RxPacket> rx_;
    std::vector<datapath::TxPacket> tx_;
    std::vector<datapath::TxPacket> tx_grouped_;  // group_by_port's output, swapped with tx_
    size_t tx_count_ = 0;  // datagrams in tx_
    size_t tx_next_ = 0;   // first one not yet accepted by the datapath
    uint32_t deferred_timeouts_ = 0;  // consecutive passes that put due timers off
    int64_t last_pass_ns_ = -1;       // when the previous pass read the clock
    bool last_pass_busy_ = false;
    // The handshake budget as a virtual scheduling time (GCRA): the bucket is empty at
    // hs_tat_ns_, and a handshake is admitted while that is at most hs_burst_ns_ ahead.
    int64_t hs_interval_ns_ = 0;  // 1 s / max_handshakes_per_second; 0: no budget
    int64_t hs_burst_ns_ = 0;
    int64_t hs_tat_ns_ = 0;
    int64_t hs_release_ns_ = -1;  // while the handshake queue is held: when to let it go
    DriverStats stats_;
};

}  // namespace mroce::api
