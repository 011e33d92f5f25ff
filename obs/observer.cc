// obs/observer.cc — see observer.h.
#include "obs/observer.h"

#include <algorithm>

namespace mroce::obs {

void Observer::on_rtt_sample(uint32_t connection, uint16_t path, Duration rtt, Time) {
    const uint64_t ns = static_cast<uint64_t>(rtt.count());
    auto it = conns_.find(connection);
    if (it == conns_.end()) {
        if (conns_.size() >= kMaxConnections) {
            overflow_.record(ns);
            return;
        }
        it = conns_.emplace(connection, PerConnection{}).first;
    }
    auto& paths = it->second.paths;
    if (path >= paths.size()) paths.resize(path + 1u);
    paths[path].record(ns);
}

void Observer::on_trace(const core::TraceEvent& e) {
    if (e.kind == core::TraceKind::kRateHintChanged) {
        // An ACK without a hint (0) leaves the last one in force for its lifetime
        // (spec [CC-16]): not a change an operator sees.
        if (e.after == 0) return;
        auto it = conns_.find(e.connection);
        if (it == conns_.end() && conns_.size() < kMaxConnections)
            it = conns_.emplace(e.connection, PerConnection{}).first;
        if (it != conns_.end()) {
            const uint32_t last = it->second.logged_hint;
            const uint64_t now = e.after;
            const uint64_t step = last / kHintLogQuarter;
            const bool moved = last == 0 || now >= last + step || now + step <= last;
            const Time was = it->second.logged_hint_at;
            if (!moved || (was != kNever && e.at < was + kHintLogGap)) return;
            it->second.logged_hint = static_cast<uint32_t>(now);
            it->second.logged_hint_at = e.at;
            core::TraceEvent logged = e;
            logged.before = last;  // the hint last logged, not one an ACK without a hint hid
            return log(logged);
        }
    }
    log(e);
}

void Observer::log(const core::TraceEvent& e) {
    if (events_.size() >= kMaxEvents) {
        events_.pop_front();
        ++dropped_;
    }
    const uint64_t seq = shared_seq_ ? shared_seq_->fetch_add(1, std::memory_order_relaxed) : next_seq_++;
    events_.push_back(LoggedEvent{seq, e});
}

const Histogram* Observer::path_rtt(uint32_t connection, uint16_t path) const {
    auto it = conns_.find(connection);
    if (it == conns_.end() || path >= it->second.paths.size()) return nullptr;
    return &it->second.paths[path];
}

std::vector<LoggedEvent> Observer::events_since(uint64_t after) const {
    std::vector<LoggedEvent> out;
    if (after >= last_event_seq()) return out;  // nothing newer (and no overflow of after + 1)
    for (auto it = std::lower_bound(events_.begin(), events_.end(), after + 1,
                                    [](const LoggedEvent& e, uint64_t s) { return e.seq < s; });
         it != events_.end(); ++it)
        out.push_back(*it);
    return out;
}

void Observer::forget_except(const std::vector<uint32_t>& live) {
    for (auto it = conns_.begin(); it != conns_.end();) {
        if (std::find(live.begin(), live.end(), it->first) == live.end())
            it = conns_.erase(it);
        else
            ++it;
    }
}

const char* event_name(core::TraceKind kind) {
    switch (kind) {
        case core::TraceKind::kConnectionUp: return "connection_up";
        case core::TraceKind::kConnectionFailed: return "connection_failed";
        case core::TraceKind::kConnectionClosed: return "connection_closed";
        case core::TraceKind::kPathFailed: return "path_failed";
        case core::TraceKind::kPathRecovered: return "path_recovered";
        case core::TraceKind::kPathRerolled: return "path_rerolled";
        case core::TraceKind::kWindowCut: return "window_cut";
        case core::TraceKind::kRateHintChanged: return "rate_hint_changed";
    }
    return "unknown";
}

}  // namespace mroce::obs
