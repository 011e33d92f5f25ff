// api/metrics.cc — what a Device shows to obs/: snapshots of its engine, driver loop and
// datapath, and the stat socket and metrics listener that serve them (docs/observability.md).
#include <time.h>

#include <cstdlib>
#include <cstring>

#include "api/device_state.h"

namespace mroce::api::detail {

namespace {

// The driver loop's and datapath's counters, with their stable names.
void add_driver_counters(obs::Snapshot& s, const DriverStats& d, const datapath::UdpStats& u) {
    auto add = [&](const char* key, const char* prom, const char* help, uint64_t v) {
        s.driver_counters.push_back({key, prom, help, v});
    };
    add("udp_tx_packets", "mroce_udp_tx_packets_total", "Datagrams the UDP datapath sent.", u.packets_sent);
    add("udp_tx_bytes", "mroce_udp_tx_bytes_total", "UDP payload bytes sent.", u.bytes_sent);
    add("udp_rx_packets", "mroce_udp_rx_packets_total", "Datagrams the UDP datapath received.", u.packets_received);
    add("udp_rx_bytes", "mroce_udp_rx_bytes_total", "UDP payload bytes received.", u.bytes_received);
    add("udp_send_would_block", "mroce_udp_send_would_block_total",
        "Sends stopped by socket back-pressure (EAGAIN/ENOBUFS).", u.send_would_block);
    add("udp_send_errors", "mroce_udp_send_errors_total", "Datagrams the kernel refused: dropped.", u.send_errors);
    add("udp_receive_truncated", "mroce_udp_receive_truncated_total",
        "Datagrams larger than the receive buffer: dropped.", u.receive_truncated);
    add("udp_gso_sends", "mroce_udp_gso_sends_total", "GSO super-packets sent.", u.gso_sends);
    add("udp_gro_receives", "mroce_udp_gro_receives_total", "GRO super-packets received.", u.gro_receives);
    add("udp_rx_stamps_unusable", "mroce_udp_rx_stamps_unusable_total",
        "Receive timestamps not used: the wall clock stepped, or a stamp out of range.", u.rx_stamps_unusable);
    add("driver_passes", "mroce_driver_passes_total", "Passes of the driver loop.", d.passes);
    add("driver_busy_passes", "mroce_driver_busy_passes_total", "Passes that moved a datagram or an event.",
        d.busy_passes);
    add("driver_sleeps", "mroce_driver_sleeps_total", "Times the driver slept on its wake-up fds.", d.sleeps);
    add("driver_timeouts_deferred", "mroce_driver_timeouts_deferred_total",
        "Passes that ran due timers late behind a full receive batch.", d.timeouts_deferred);
    add("driver_handshakes_shed", "mroce_driver_handshakes_shed_total",
        "Handshake datagrams over the per-pass bound or the budget: dropped unread.", d.handshakes_shed);
    add("driver_assisted_passes", "mroce_driver_assisted_passes_total",
        "Passes an application thread made to help the progress thread.", d.assisted_passes);
    add("driver_posting_passes", "mroce_driver_posting_passes_total",
        "Passes a posting thread made to send its work while the progress thread slept.", d.posting_passes);
    add("driver_payloads_in_place", "mroce_driver_payloads_in_place_total",
        "DATA sent with the payload read from the application's memory, not copied first.", d.payloads_in_place);
    add("driver_payloads_copied_in", "mroce_driver_payloads_copied_in_total",
        "Of those, payloads copied into the batch after all: held for the next pass.", d.payloads_copied_in);
    add("driver_stand_by_sleeps", "mroce_driver_stand_by_sleeps_total",
        "Sleeps that left the sockets to a polling application thread.", d.stand_by_sleeps);
    add("driver_stand_by_ended", "mroce_driver_stand_by_ended_total",
        "Application passes after which the progress thread took the sockets back: nothing awaited, and a "
        "message arriving or none brought.",
        d.stand_by_ended);
    add("driver_alone_polls", "mroce_driver_alone_polls_total",
        "Readiness checks the progress thread made while it polled alone (no application poll lately).",
        d.alone_polls);
    add("driver_handshake_holds", "mroce_driver_handshake_holds_total",
        "Times the handshake budget was spent and the handshake queue held.", d.handshake_holds);
}

// shard_snapshot: one engine's snapshot (the whole device's when it has one shard).
obs::Snapshot shard_snapshot(DeviceState& st, uint64_t events_after) {
    const DriverStats d = st.driver->stats();
    datapath::UdpStats u = st.final_udp_stats;
    st.driver->with_datapath([&](datapath::Datapath&) {
        if (st.dp) u = st.dp->stats();
    });
    obs::Snapshot s;
    {
        std::lock_guard<std::mutex> g(st.engine_mu);
        if (!st.endpoint) return s;
        const Time now = st.dp ? st.now() : Time{};
        s = obs::Snapshot::take(*st.endpoint, &st.observer, now, events_after);
        timespec ts{};
        ::clock_gettime(CLOCK_REALTIME, &ts);
        s.wall_now_ns = int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
    }
    add_driver_counters(s, d, u);
    return s;
}

}  // namespace

obs::Snapshot snapshot(DeviceState& st, uint64_t events_after) {
    if (st.num_shards() == 1) return shard_snapshot(st, events_after);
    // Every event numbered up to here is in its shard's log before that shard is read
    // (numbered and logged under the shard's engine lock, which the read takes after this).
    const uint64_t complete_through = st.event_seq.load(std::memory_order_relaxed) - 1;
    std::vector<obs::Snapshot> shards;
    shards.reserve(st.num_shards());
    for (uint32_t i = 0; i < st.num_shards(); ++i) shards.push_back(shard_snapshot(st.shard(i), events_after));
    return obs::merge_shards(std::move(shards), complete_through);
}

Error start_observability(DeviceState& st, std::string* error) {
    bool stat_socket = st.cfg.stat_socket;
    if (const char* e = std::getenv("MROCE_STAT"); e && std::strcmp(e, "0") == 0) stat_socket = false;
    std::string metrics = st.cfg.metrics;
    if (metrics.empty())
        if (const char* e = std::getenv("MROCE_METRICS")) metrics = e;
    std::optional<obs::ListenAddress> listen;
    if (!metrics.empty()) {
        listen = obs::parse_listen_address(metrics);
        if (!listen) {
            if (error) *error = "device: metrics address '" + metrics + "' is not ADDR:PORT";
            return Error::kInvalidArgument;
        }
    }
    if (!stat_socket && !listen) return Error::kOk;
    DeviceState* raw = &st;
    auto source = [raw](uint64_t events_after) { return snapshot(*raw, events_after); };
    std::string why;
    st.stat_server = obs::StatServer::start(source, stat_socket, listen, &why);
    // The stat socket is on by default: a process where it cannot be made (no writable
    // directory) runs without it. A metrics listener was asked for: its failure is an error.
    if (!st.stat_server && stat_socket && listen)
        st.stat_server = obs::StatServer::start(source, false, listen, &why);
    if (!st.stat_server && !listen) return Error::kOk;
    if (!st.stat_server) {
        if (error) *error = "device: " + why;
        return Error::kIo;
    }
    return Error::kOk;
}

}  // namespace mroce::api::detail
