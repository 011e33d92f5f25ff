#include "sim/link.h"

#include <algorithm>

#include "util/check.h"

namespace mroce::sim {

SimDuration serialization_time(uint64_t bytes, uint64_t rate_bps) {
    if (rate_bps == 0) return SimDuration{0};
    __extension__ using u128 = unsigned __int128;
    const u128 bits_ps = static_cast<u128>(bytes) * 8u * 1'000'000'000'000u;
    return SimDuration{static_cast<int64_t>((bits_ps + rate_bps - 1) / rate_bps)};
}

const char* to_string(DropReason r) {
    switch (r) {
        case DropReason::kQueueFull:
            return "queue full";
        case DropReason::kRandomLoss:
            return "random loss";
        case DropReason::kBurstLoss:
            return "burst loss";
        case DropReason::kPattern:
            return "pattern";
        case DropReason::kBlackhole:
            return "blackhole";
    }
    return "unknown";
}

uint64_t LinkStats::dropped_total() const {
    uint64_t n = 0;
    for (uint64_t d : dropped_packets) n += d;
    return n;
}

namespace {

bool is_ect(uint8_t codepoint) { return codepoint == ecn::kEct0 || codepoint == ecn::kEct1; }

bool later_arrival(SimTime a_time, uint64_t a_seq, SimTime b_time, uint64_t b_seq) {
    return a_time != b_time ? a_time > b_time : a_seq > b_seq;
}

}  // namespace

Link::Link(Sim& sim, const LinkConfig& config, std::string name, PacketSink* sink)
    : sim_(sim),
      sink_(sink),
      jitter_rng_(sim.fork_rng(name + "/jitter")),
      config_(config),
      name_(std::move(name)),
      loss_rng_(sim.fork_rng(name_ + "/loss")),
      burst_rng_(sim.fork_rng(name_ + "/burst")),
      duplicate_rng_(sim.fork_rng(name_ + "/duplicate")),
      late_duplicate_rng_(sim.fork_rng(name_ + "/late-duplicate")),
      reorder_rng_(sim.fork_rng(name_ + "/reorder")) {}

Link::~Link() {
    sim_.cancel(service_event_);
    sim_.cancel(pipe_event_);
    sim_.cancel(late_event_);
}

size_t Link::in_flight() const { return queue_.size() + pipe_.size() + late_.size(); }

void Link::receive(PacketPtr packet, uint32_t size) {
    ++stats_.offered_packets;
    stats_.offered_bytes += size;
    if (config_.rate_bps == 0 && queue_.empty()) {  // infinitely fast: no queue builds
        put_on_wire(std::move(packet), size);
        return;
    }
    if (queue_bytes_ + size > config_.queue_capacity_bytes) {
        drop(size, DropReason::kQueueFull, packet->data);
        return;
    }
    if (config_.ecn_threshold_bytes && queue_bytes_ >= *config_.ecn_threshold_bytes &&
        is_ect(packet->meta.ecn)) {
        packet->meta.ecn = ecn::kCe;
        ++stats_.ecn_marked;
    }
    queue_bytes_ += size;
    stats_.max_queue_bytes = std::max(stats_.max_queue_bytes, queue_bytes_);
    queue_.push_back(Queued{std::move(packet), size});
    if (queue_.size() == 1) start_service();
}

void Link::start_service() {
    const SimDuration t = serialization_time(queue_.front().size, config_.rate_bps);
    service_event_ = sim_.schedule_in(t, [this] { on_serialized(); });
}

void Link::on_serialized() {
    service_event_ = {};
    PacketPtr packet = std::move(queue_.front().packet);
    const uint32_t size = queue_.front().size;
    queue_.pop_front();
    queue_bytes_ -= size;
    if (!queue_.empty()) start_service();
    put_on_wire(std::move(packet), size);
}

std::optional<DropReason> Link::wire_drop_decision() {
    const uint64_t index = wire_index_++;
    // Each enabled random model draws for every packet, whatever the others decide, so a
    // stream's k-th draw always belongs to the k-th packet on the wire.
    const bool random_loss =
        config_.loss_probability > 0 && loss_rng_.bernoulli(config_.loss_probability);
    bool burst_loss = false;
    if (const auto& ge = config_.burst_loss) {
        if (burst_bad_) {
            burst_loss = burst_rng_.bernoulli(ge->loss_in_bad);
            if (burst_rng_.bernoulli(ge->p_bad_to_good)) burst_bad_ = false;
        } else if (burst_rng_.bernoulli(ge->p_good_to_bad)) {
            burst_bad_ = true;
        }
    }

    if (config_.blackhole && config_.blackhole->contains(sim_.now())) return DropReason::kBlackhole;
    const DropPattern& pattern = config_.drop_pattern;
    if (!pattern.empty()) {
        const bool in_mask =
            (pattern.mask_repeats || index < 64) && ((pattern.mask >> (index % 64)) & 1);
        if (in_mask || std::find(pattern.indices.begin(), pattern.indices.end(), index) !=
                           pattern.indices.end())
            return DropReason::kPattern;
    }
    if (random_loss) return DropReason::kRandomLoss;
    if (burst_loss) return DropReason::kBurstLoss;
    return std::nullopt;
}

void Link::drop(uint32_t size, DropReason why, bool data) {
    ++stats_.dropped_packets[static_cast<size_t>(why)];
    stats_.dropped_bytes += size;
    stats_.dropped_data_packets += data;
}

SimTime Link::wire_arrival() {
    SimTime arrival = sim_.now() + config_.delay;
    if (config_.jitter_max > SimDuration{0})
        arrival += SimDuration{static_cast<int64_t>(
            jitter_rng_.uniform(static_cast<uint64_t>(to_ps(config_.jitter_max)) + 1))};
    return arrival;
}

void Link::put_on_wire(PacketPtr packet, uint32_t size) {
    if (!impaired()) [[likely]] {
        // A plain wire (every cable until a fault or loss is configured on it): no loss
        // decision, no copies, no reordering. It draws what the general path below draws
        // for it (only the jitter) and counts the packet's wire index the same way, so
        // taking this path changes no random sequence and no outcome.
        ++wire_index_;
        pipe_push(wire_arrival(), std::move(packet), size);
        return;
    }
    if (auto why = wire_drop_decision()) {
        drop(size, *why, packet->data);
        return;
    }
    SimTime arrival = wire_arrival();

    const bool reorder =
        config_.reorder_probability > 0 && reorder_rng_.bernoulli(config_.reorder_probability);
    const bool duplicate = config_.duplicate_probability > 0 &&
                           duplicate_rng_.bernoulli(config_.duplicate_probability);
    const bool late_duplicate = config_.late_duplicate_probability > 0 &&
                                late_duplicate_rng_.bernoulli(config_.late_duplicate_probability);

    PacketPtr copy = duplicate ? sim_.packets().clone(*packet) : PacketPtr(nullptr, {});
    PacketPtr late_copy = late_duplicate ? sim_.packets().clone(*packet) : PacketPtr(nullptr, {});
    const SimTime late_copy_arrival = arrival + config_.late_duplicate_delay;

    if (reorder) {
        // Held back by reorder_delay outside the FIFO pipe: packets behind it overtake it.
        ++stats_.reordered;
        arrival += config_.reorder_delay;
        late_push(arrival, std::move(packet));
        if (copy) late_push(arrival, std::move(copy));  // same time, inserted after
    } else {
        pipe_push(arrival, std::move(packet), size);
        if (copy) pipe_push(arrival, std::move(copy), size);
    }
    if (duplicate) ++stats_.duplicated;
    if (late_copy) {
        ++stats_.late_duplicated;
        late_push(late_copy_arrival, std::move(late_copy));
    }
}

void Link::pipe_push(SimTime arrival, PacketPtr packet, uint32_t size) {
    // Clamp so the pipe stays FIFO whatever the jitter or a delay change mid-run.
    arrival = std::max(arrival, last_pipe_arrival_);
    last_pipe_arrival_ = arrival;
    pipe_.push_back(InPipe{arrival, std::move(packet), size});
    if (pipe_.size() == 1) pipe_event_ = sim_.schedule_at(arrival, [this] { on_pipe_head(); });
}

void Link::on_pipe_head() {
    pipe_event_ = {};
    PacketPtr packet = std::move(pipe_.front().packet);
    const uint32_t size = pipe_.front().size;
    pipe_.pop_front();
    if (!pipe_.empty())
        pipe_event_ = sim_.schedule_at(pipe_.front().arrival, [this] { on_pipe_head(); });
    deliver(std::move(packet), size);
}

void Link::late_push(SimTime arrival, PacketPtr packet) {
    auto cmp = [](const Late& a, const Late& b) {
        return later_arrival(a.arrival, a.seq, b.arrival, b.seq);
    };
    late_.push_back(Late{arrival, late_seq_++, std::move(packet)});
    std::push_heap(late_.begin(), late_.end(), cmp);
    if (late_.front().arrival < late_event_time_) {
        sim_.cancel(late_event_);
        late_event_time_ = late_.front().arrival;
        late_event_ = sim_.schedule_at(late_event_time_, [this] { on_late_head(); });
    }
}

void Link::on_late_head() {
    auto cmp = [](const Late& a, const Late& b) {
        return later_arrival(a.arrival, a.seq, b.arrival, b.seq);
    };
    late_event_ = {};
    late_event_time_ = kSimForever;
    std::pop_heap(late_.begin(), late_.end(), cmp);
    PacketPtr packet = std::move(late_.back().packet);
    late_.pop_back();
    if (!late_.empty()) {
        late_event_time_ = late_.front().arrival;
        late_event_ = sim_.schedule_at(late_event_time_, [this] { on_late_head(); });
    }
    const uint32_t size = packet_size(*packet);  // the late heap is rare: no size kept
    deliver(std::move(packet), size);
}

void Link::deliver(PacketPtr packet, uint32_t size) {
    ++stats_.delivered_packets;
    stats_.delivered_bytes += size;
    if (sink_) sink_->receive(std::move(packet));
}

}  // namespace mroce::sim
