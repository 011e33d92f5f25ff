#include "core/endpoint.h"

#include <algorithm>
#include <cstring>

#include "wire/ack.h"
#include "wire/control.h"
#include "wire/data.h"
#include "wire/integrity.h"

namespace mroce::core {

namespace {
// child_seed: 32 bytes of `parent` as the seed of an independent generator.
CryptoSeed child_seed(CryptoRng& parent) {
    CryptoSeed s{};
    for (size_t i = 0; i < s.size(); i += 8) {
        const uint64_t v = parent.next_u64();
        for (size_t b = 0; b < 8; ++b) s[i + b] = static_cast<uint8_t>(v >> (8 * b));
    }
    return s;
}

cc::FairShareConfig fair_share_config(const EndpointConfig& c) {
    cc::FairShareConfig f;
    f.capacity_bps = c.inbound_capacity_bps ? c.inbound_capacity_bps : ports_bps(c);
    f.interval = c.hint_interval;
    f.class_weights = c.class_weights;
    f.mss = c.max_payload;
    f.first_rtt_bytes = c.first_rtt_bytes;
    f.young_weight = c.young_weight;  // [CC-21]
    f.young_bytes = c.young_bytes;
    // [CC-12], [INT-6]: every byte a full DATA datagram adds to its payload, the integrity
    // trailer included when this endpoint announces it; without it, senders paced at the
    // sum of the shares would offer 4 bytes per packet more than the downlink carries.
    // [DATA-9]: bulk DATA (WRITEs, READ answers) is compact where announced.
    const size_t header = c.compact_data ? wire::kDataCompactHeaderSize : wire::kDataHeaderSize;
    f.header_bytes = static_cast<uint32_t>(header + (c.integrity_check ? wire::kIntegritySize : 0));
    return f;
}
}  // namespace

Endpoint::Endpoint(const EndpointConfig& cfg, const Address& local, uint64_t seed,
                   const CryptoSeed& secret)
    : cfg_(cfg), local_(local), rng_(seed), secrets_(secret),
      guard_(secrets_, cfg.cookie_lifetime),
      memory_(CryptoRng(child_seed(secrets_)), cfg.memory_key_tag_bits),
      fair_share_(fair_share_config(cfg)), quiet_ports_(cfg.num_local_ports, cfg.min_pto) {
    MROCE_DCHECK(config_error(cfg).empty());
    // A shard (conn_id_shard_bits): the cookie key and the memory table came from the
    // common secret (cookies and memory keys are the same in every shard); what follows
    // (connection tokens) comes from a generator keyed by the secret and the shard.
    if (cfg.conn_id_shard_bits > 0) {
        CryptoSeed s = child_seed(secrets_);
        s[0] ^= static_cast<uint8_t>(cfg.conn_id_shard + 1);
        secrets_ = CryptoRng(s);
    }
}

Endpoint::~Endpoint() = default;

// [INT-6]: the integrity trailer comes on top of a full DATA packet.
size_t Endpoint::max_datagram_size() const {
    return wire::kDataHeaderSize + cfg_.max_payload + (cfg_.integrity_check ? wire::kIntegritySize : 0);
}

const Stream* Endpoint::stream(uint32_t id) const {
    return const_cast<Endpoint*>(this)->stream_mut(id);
}
const Connection* Endpoint::connection(uint32_t id) const {
    return const_cast<Endpoint*>(this)->conn_mut(id);
}
size_t Endpoint::connections_in_first_round_trip(size_t at_most) const {
    size_t n = 0;
    for (const auto& c : conns_)
        if (c && c->in_first_round_trip() && ++n >= at_most) break;
    return n;
}

bool Endpoint::work_outstanding() const {
    for (const auto& s : streams_)
        if (s && !s->tx.empty()) return true;
    return false;
}

bool Endpoint::awaits_completions() const {
    for (const auto& s : streams_)
        if (s && (!s->tx.empty() || !s->posted.empty())) return true;
    for (const auto& q : srqs_)
        if (q && !q->posted.empty()) return true;
    return false;
}

bool Endpoint::receiving() const {
    for (const auto& s : streams_) {
        if (!s) continue;
        for (const RxMessage& m : s->ring)
            if (m.active && !m.complete) return true;
    }
    return false;
}

uint32_t Endpoint::connection_to(const Address& peer) const {
    auto it = by_peer_.find(peer);
    return it == by_peer_.end() ? 0 : it->second;
}

Connection* Endpoint::new_connection(const Address& peer, Time now) {
    reclaim(now);
    // [CONN-24]: a slot given back after its quiet period first (oldest first), else a new
    // one while under max_connections.
    uint32_t slot = 0, prev_high = 0;
    if (!free_conns_.empty()) {
        const uint32_t prev = free_conns_.front();
        free_conns_.pop_front();
        slot = (prev & 0xFFFF) - 1;
        prev_high = prev >> 16;
    } else if (conns_.size() < cfg_.max_connections) {
        slot = static_cast<uint32_t>(conns_.size());
        conns_.emplace_back();
    } else {
        ++stats_.connections_refused;
        return nullptr;
    }
    // spec §4 [CONN-11]: connection ids are non-zero and unique on this endpoint; the
    // high half is random, and differs from the slot's previous connection's ([CONN-24]),
    // so a late packet of that one misses this one by id as well as by token.
    // A shard's ids carry the shard in their top bits (conn_id_shard_bits), and the rest
    // of the half stays random and non-zero.
    const uint32_t free_bits = 16 - cfg_.conn_id_shard_bits;
    const uint32_t tag = cfg_.conn_id_shard << free_bits;
    uint32_t high = 0;
    do {
        high = tag | (1 + static_cast<uint32_t>(rng_.uniform((1u << free_bits) - 1)));
    } while (high == prev_high);
    const uint32_t id = high << 16 | (slot + 1);
    auto c = std::make_unique<Connection>(*this, id, peer, secrets_.next_nonzero_u64(),
                                          rng_.fork("conn").fork(std::to_string(id)), now);
    rng_.next_u64();  // the next connection forks from a different state
    Connection* raw = c.get();
    conns_[slot] = std::move(c);
    by_peer_[peer] = id;
    return raw;
}

void Endpoint::connection_ended(Connection& c, Time now) {
    saw(now);
    if (!c.proven()) ++stats_.unproven_ended;
    retiring_conns_.push_back(Retired{now_ + quiet_period(cfg_), c.id()});
}

// reclaim gives back, once their quiet period is over ([CONN-24], [STREAM-15]), the
// slots of ended connections (the Connection is freed, and the peer's entry dropped if it
// still names it) and of destroyed streams.
void Endpoint::reclaim(Time now) {
    saw(now);
    while (!retiring_conns_.empty() && retiring_conns_.front().at <= now_) {
        const uint32_t id = retiring_conns_.front().id;
        retiring_conns_.pop_front();
        const uint32_t slot = (id & 0xFFFF) - 1;
        Connection* c = conn_mut(id);
        if (!c) continue;
        auto it = by_peer_.find(c->peer());
        if (it != by_peer_.end() && it->second == id) by_peer_.erase(it);
        if (!c->proven()) --unproven_;  // [CONN-26]: counted until its slot is free
        conns_[slot].reset();
        free_conns_.push_back(id);
        ++stats_.connections_reclaimed;
    }
    while (!retiring_streams_.empty() && retiring_streams_.front().at <= now_) {
        free_streams_.push_back(retiring_streams_.front().id);
        retiring_streams_.pop_front();
        ++stats_.streams_reclaimed;
    }
}

Result<uint32_t> Endpoint::reserve_stream(uint32_t pd) {
    if (!memory_.pd_exists(pd)) return Error::kInvalidArgument;
    reclaim(now_);
    // [STREAM-15]: a slot given back after its quiet period first (oldest first), with the
    // next generation in the id's upper bits; else a new slot (generation 0, so the first
    // ids are 1, 2, 3, ...) while under max_streams.
    uint32_t id = 0;
    if (!free_streams_.empty()) {
        const uint32_t prev = free_streams_.front();
        free_streams_.pop_front();
        const uint32_t gen = ((prev >> kStreamSlotBits) + 1) & ((1u << (32 - kStreamSlotBits)) - 1);
        id = gen << kStreamSlotBits | (prev & kStreamSlotMask);
    } else if (streams_.size() < cfg_.max_streams) {
        streams_.emplace_back();
        id = static_cast<uint32_t>(streams_.size());
    } else {
        return Error::kExhausted;
    }
    auto s = std::make_unique<Stream>();
    s->id = id;
    s->pd = pd;
    s->limits = default_stream_limits();
    streams_[(id & kStreamSlotMask) - 1] = std::move(s);
    return id;
}

Error Endpoint::adopt_stream(uint32_t pd, uint32_t id) {
    if (!memory_.pd_exists(pd)) return Error::kInvalidArgument;
    const uint32_t slot = (id & kStreamSlotMask) - 1;
    if ((id & kStreamSlotMask) == 0 || slot >= cfg_.max_streams) return Error::kInvalidArgument;
    if (slot >= streams_.size()) streams_.resize(slot + 1);
    if (streams_[slot]) return Error::kWrongState;
    auto s = std::make_unique<Stream>();
    s->id = id;
    s->pd = pd;
    s->limits = default_stream_limits();
    streams_[slot] = std::move(s);
    return Error::kOk;
}

StreamLimits Endpoint::default_stream_limits() const {
    StreamLimits l;
    l.retry_limit = cfg_.retry_limit;
    l.rnr_retry = cfg_.rnr_retry;
    l.rnr_delay_us = cfg_.rnr_delay_us;
    l.max_rd_atomic = cfg_.max_rd_atomic;
    l.max_dest_rd_atomic = cfg_.max_dest_rd_atomic;
    return l;
}

Error Endpoint::set_stream_limits(uint32_t stream_id, const StreamLimits& limits) {
    Stream* s = stream_mut(stream_id);
    if (!s) return Error::kNotFound;
    if (limits.retry_limit > 1000 || limits.max_rd_atomic < 1 ||
        limits.max_dest_rd_atomic < 1 || limits.min_delivery_timeout < Duration::zero() ||
        limits.traffic_class > kMaxTrafficClass)
        return Error::kInvalidArgument;
    s->limits = limits;
    if (Connection* c = s->conn ? conn_mut(s->conn) : nullptr) c->update_control_class();
    return Error::kOk;
}

Error Endpoint::bind_stream(uint32_t stream_id, const Address& peer, uint32_t remote_stream,
                            Time now) {
    Stream* s = stream_mut(stream_id);
    if (!s) return Error::kNotFound;
    if (s->conn != 0) return Error::kWrongState;
    if (remote_stream == 0) return Error::kInvalidArgument;
    Connection* c = conn_mut(connection_to(peer));
    if (c && (c->state() == ConnState::kFailed || c->state() == ConnState::kClosed)) {
        // A failed connection is replaced by a fresh one for new streams.
        by_peer_.erase(peer);
        c = nullptr;
    }
    // [STREAM-1]: one local stream per peer stream on a connection.
    if (c && c->bound_to_remote(remote_stream)) return Error::kInvalidArgument;
    if (!c) {
        c = new_connection(peer, now);
        if (!c) return Error::kExhausted;
        c->start_connect(now);
    }
    s->remote_id = remote_stream;
    s->conn = c->id();
    c->attach_stream(*s);
    touched(*c, now);
    return Error::kOk;
}

Result<uint32_t> Endpoint::create_stream(uint32_t pd, const Address& peer, uint32_t remote_stream,
                                         Time now) {
    if (remote_stream == 0) return Error::kInvalidArgument;
    auto id = reserve_stream(pd);
    if (!id) return id;
    if (Error e = bind_stream(*id, peer, remote_stream, now); e != Error::kOk) {
        // Undo the reservation: its slot is free again at once (its id was never seen).
        streams_[(*id & kStreamSlotMask) - 1].reset();
        free_streams_.push_front(*id);
        return e;
    }
    return id;
}

Error Endpoint::post_send(uint32_t stream_id, const SendWr& wr, Time now) {
    Stream* s = stream_mut(stream_id);
    if (!s) return Error::kNotFound;
    Connection* c = conn_mut(s->conn);
    if (!c || s->failed || c->state() == ConnState::kFailed || c->state() == ConnState::kClosed)
        return Error::kWrongState;
    wire::Opcode op;
    switch (wr.opcode) {
        case WorkOpcode::kSend: op = wire::Opcode::kSend; break;
        case WorkOpcode::kSendImm: op = wire::Opcode::kSendImm; break;
        case WorkOpcode::kWrite: op = wire::Opcode::kWrite; break;
        case WorkOpcode::kWriteImm: op = wire::Opcode::kWriteImm; break;
        case WorkOpcode::kRead: op = wire::Opcode::kReadRequest; break;
        case WorkOpcode::kAtomicFetchAdd: op = wire::Opcode::kAtomicFetchAdd; break;
        case WorkOpcode::kAtomicCompareSwap: op = wire::Opcode::kAtomicCompareSwap; break;
        default: return Error::kInvalidArgument;
    }
    const bool atomic = op == wire::Opcode::kAtomicFetchAdd || op == wire::Opcode::kAtomicCompareSwap;
    if (s->tx.size() >= cfg_.max_outstanding_wrs) return Error::kExhausted;
    TxMessage m;
    m.wr = wr;
    m.wr.sg_list = nullptr;  // the caller's list is not ours to keep
    m.opcode = op;
    if (wr.inline_data) {
        // [PLACE-23]: the bytes are copied now; no lkey is needed or checked.
        if (is_request(op)) return Error::kInvalidArgument;
        uint64_t total = wr.length;
        if (wr.num_sge > 0) {
            if (wr.num_sge > kMaxSge || !wr.sg_list) return Error::kInvalidArgument;
            total = 0;
            for (uint32_t i = 0; i < wr.num_sge; ++i) total += wr.sg_list[i].length;
        }
        if (total > cfg_.max_inline_data) return Error::kInvalidArgument;
        std::byte* copy;
        if (total <= TxMessage::kInlineSmall) {
            m.in_inline_small = true;  // payload() finds them: the message moves
            copy = m.inline_small.data();
        } else {
            m.inline_bytes.resize(total);
            copy = m.inline_bytes.data();
            m.src = copy;
        }
        if (wr.num_sge == 0) {
            if (total) std::memcpy(copy, reinterpret_cast<const void*>(wr.local_addr), total);
        } else {
            size_t at = 0;
            for (uint32_t i = 0; i < wr.num_sge; ++i) {
                const Sge& g = wr.sg_list[i];
                if (g.length) std::memcpy(copy + at, reinterpret_cast<const void*>(g.addr), g.length);
                at += g.length;
            }
        }
        m.wr.length = static_cast<uint32_t>(total);
    } else {
        // READ and atomics write their answer into the local buffer: LOCAL_WRITE.
        std::byte* one = nullptr;
        if (Error e = resolve_local(s->pd, wr.local_addr, wr.length, wr.lkey, wr.sg_list, wr.num_sge,
                                    is_request(op), m.sg, one, m.wr.length);
            e != Error::kOk)
            return e;
        if (is_request(op))
            m.dst = one;
        else
            m.src = one;
    }
    // [PLACE-17]: an atomic works on exactly 8 bytes, in one piece.
    if (atomic && (m.wr.length != 8 || !m.sg.empty())) return Error::kInvalidArgument;
    m.msg_len = m.wr.length;
    if (op == wire::Opcode::kReadRequest) {
        m.msg_len = wire::kReadRequestBodySize;
        wire::encode_read_request(m.wr.length, std::span(m.body).first<wire::kReadRequestBodySize>());
    } else if (atomic) {
        m.msg_len = wire::kAtomicRequestBodySize;
        const wire::AtomicRequestBody b{op == wire::Opcode::kAtomicCompareSwap ? wr.swap : wr.compare_add,
                                        op == wire::Opcode::kAtomicCompareSwap ? wr.compare_add : 0};
        wire::encode_atomic_request(b, std::span(m.body).first<wire::kAtomicRequestBodySize>());
    }
    s->tx.push_back(std::move(m));
    c->stream_has_work(*s);
    touched(*c, now);
    return Error::kOk;
}

// resolve_local checks a work request's local buffer — one piece, or a list of them — for
// lkey, PD, bounds and (write) LOCAL_WRITE. One piece comes back in `one`, several in
// `pieces` (zero-length pieces dropped); `total` is the byte count. Errors: kInvalidArgument
// (more than kMaxSge pieces, a total over 2^32 - 1), kAccessDenied.
Error Endpoint::resolve_local(uint32_t pd, uint64_t addr, uint32_t length, uint32_t lkey,
                              const Sge* sg, uint32_t nsge, bool write, std::vector<Piece>& pieces,
                              std::byte*& one, uint32_t& total) const {
    if (nsge == 0) {
        total = length;
        if (length == 0) return Error::kOk;
        auto r = memory_.check_local(lkey, pd, addr, length, write);
        if (!r) return r.error();
        one = *r;
        return Error::kOk;
    }
    if (nsge > kMaxSge || !sg) return Error::kInvalidArgument;
    uint64_t sum = 0;
    for (uint32_t i = 0; i < nsge; ++i) {
        sum += sg[i].length;
        if (sg[i].length == 0) continue;
        auto r = memory_.check_local(sg[i].lkey, pd, sg[i].addr, sg[i].length, write);
        if (!r) return r.error();
        pieces.push_back(Piece{*r, sg[i].length});
    }
    if (sum > UINT32_MAX) return Error::kInvalidArgument;
    total = static_cast<uint32_t>(sum);
    if (pieces.size() == 1) {  // one real piece: the fast path
        one = pieces[0].p;
        pieces.clear();
    }
    return Error::kOk;
}

Error Endpoint::post_recv(uint32_t stream_id, const RecvWr& wr, Time now) {
    Stream* s = stream_mut(stream_id);
    if (!s) return Error::kNotFound;
    Connection* c = conn_mut(s->conn);
    if (s->failed || (s->conn != 0 && (!c || c->state() == ConnState::kFailed ||
                                       c->state() == ConnState::kClosed)))
        return Error::kWrongState;
    if (s->srq != 0) return Error::kInvalidArgument;  // its receives come from the SRQ
    if (Error e = queue_receive(s->posted, s->pd, wr); e != Error::kOk) return e;
    if (c) touched(*c, now);
    return Error::kOk;
}

// queue_receive checks a receive's buffer (LOCAL_WRITE) and appends it to a queue: a
// stream's or an SRQ's.
Error Endpoint::queue_receive(LazyDeque<PostedRecv>& queue, uint32_t pd, const RecvWr& wr) {
    if (queue.size() >= cfg_.max_outstanding_wrs) return Error::kExhausted;
    PostedRecv pr;
    pr.wr = wr;
    pr.wr.sg_list = nullptr;  // the caller's list is not ours to keep
    if (Error e = resolve_local(pd, wr.addr, wr.length, wr.lkey, wr.sg_list, wr.num_sge, true,
                                pr.sg, pr.buf, pr.wr.length);
        e != Error::kOk)
        return e;
    queue.push_back(std::move(pr));
    return Error::kOk;
}

Result<uint32_t> Endpoint::create_srq(uint32_t pd) {
    if (!memory_.pd_exists(pd)) return Error::kInvalidArgument;
    if (srqs_.size() >= cfg_.max_streams) return Error::kExhausted;
    auto q = std::make_unique<Srq>();
    q->id = static_cast<uint32_t>(srqs_.size() + 1);
    q->pd = pd;
    srqs_.push_back(std::move(q));
    return srqs_.back()->id;
}

Error Endpoint::use_srq(uint32_t stream_id, uint32_t srq) {
    Stream* s = stream_mut(stream_id);
    if (!s) return Error::kNotFound;
    Srq* q = srq_mut(srq);
    if (!q || q->pd != s->pd) return Error::kInvalidArgument;
    if (s->conn != 0 || !s->posted.empty() || s->srq != 0) return Error::kWrongState;
    s->srq = srq;
    ++q->users;
    return Error::kOk;
}

Error Endpoint::post_srq_recv(uint32_t srq, const RecvWr& wr) {
    Srq* q = srq_mut(srq);
    if (!q) return Error::kNotFound;
    // A stream whose message met an empty SRQ retries after its RNR wait; nothing to wake.
    return queue_receive(q->posted, q->pd, wr);
}

Error Endpoint::arm_srq_limit(uint32_t srq, uint32_t limit) {
    Srq* q = srq_mut(srq);
    if (!q) return Error::kNotFound;
    q->limit = limit;
    return Error::kOk;
}

Error Endpoint::destroy_srq(uint32_t srq) {
    Srq* q = srq_mut(srq);
    if (!q) return Error::kNotFound;
    if (q->users > 0) return Error::kWrongState;
    srqs_[srq - 1].reset();
    return Error::kOk;
}

size_t Endpoint::srq_size(uint32_t srq) const {
    return srq == 0 || srq > srqs_.size() || !srqs_[srq - 1] ? 0 : srqs_[srq - 1]->posted.size();
}

Error Endpoint::destroy_stream(uint32_t stream_id, Time now) {
    Stream* s = stream_mut(stream_id);
    if (!s) return Error::kNotFound;
    Connection* c = s->conn ? conn_mut(s->conn) : nullptr;
    if (c) {
        c->detach_stream(*s);
        touched(*c, now);
    } else {
        for (const PostedRecv& pr : s->posted) emit(flushed_receive(0, s->id, pr.wr.wr_id));
    }
    if (Srq* q = srq_mut(s->srq)) --q->users;
    // Queued references to it (ready lists, retransmissions, timers, stream reports) are
    // by id and find nothing from now on; a reused slot has a new id, so none can find
    // another. The slot waits out the quiet period ([STREAM-15]).
    streams_[(stream_id & kStreamSlotMask) - 1].reset();
    saw(now);
    retiring_streams_.push_back(Retired{now_ + quiet_period(cfg_), stream_id});
    return Error::kOk;
}

Error Endpoint::hold_stream(uint32_t stream_id, Time now) {
    if (Error e = destroy_stream(stream_id, now); e != Error::kOk) return e;
    // destroy_stream queued the slot for reuse under a new generation; it stays out of
    // the free list instead, for this id alone ([STREAM-13]).
    Retired r = retiring_streams_.back();
    retiring_streams_.pop_back();
    held_streams_.push_back(r);
    return Error::kOk;
}

std::optional<Time> Endpoint::held_stream_ready(uint32_t id) const {
    for (const Retired& r : held_streams_)
        if (r.id == id) return r.at;
    return std::nullopt;
}

Result<uint32_t> Endpoint::reserve_held_stream(uint32_t pd, uint32_t id, Time now) {
    saw(now);
    auto it = std::find_if(held_streams_.begin(), held_streams_.end(),
                           [id](const Retired& r) { return r.id == id; });
    if (it == held_streams_.end()) return Error::kNotFound;
    if (!memory_.pd_exists(pd)) return Error::kInvalidArgument;
    // [STREAM-15]'s quiet period: every packet and timer of the old incarnation is gone.
    if (it->at > now_) return Error::kWrongState;
    held_streams_.erase(it);
    auto s = std::make_unique<Stream>();
    s->id = id;
    s->pd = pd;
    s->limits = default_stream_limits();
    streams_[(id & kStreamSlotMask) - 1] = std::move(s);
    return id;
}

void Endpoint::release_held_stream(uint32_t id) {
    auto it = std::find_if(held_streams_.begin(), held_streams_.end(),
                           [id](const Retired& r) { return r.id == id; });
    if (it == held_streams_.end()) return;
    // Out of `at` order in the deque: it is reclaimed no earlier than its time, maybe later.
    retiring_streams_.push_back(*it);
    held_streams_.erase(it);
}

Error Endpoint::close_connection(uint32_t conn, Time now) {
    Connection* c = conn_mut(conn);
    if (!c) return Error::kNotFound;
    c->close(now);
    touched(*c, now);
    return Error::kOk;
}

bool Endpoint::close_unconfirmed(uint32_t conn) const {
    const Connection* c = connection(conn);
    return c && c->close_unconfirmed();
}

bool Endpoint::repeat_close(uint32_t conn, Time now) {
    Connection* c = conn_mut(conn);
    if (!c || !c->repeat_close(now)) return false;
    touched(*c, now);
    return true;
}

void Endpoint::count_decode_error(Error e) {
    switch (e) {
        case Error::kTruncated: ++stats_.truncated; break;
        case Error::kBadVersion: ++stats_.bad_version; break;
        case Error::kBadType: ++stats_.bad_type; break;
        default: ++stats_.bad_length; break;
    }
}

bool Endpoint::hello_names_sender(const wire::HelloPacket& h) {
    // [CONN-23]: 0 is no connection id and no token ([CONN-2], [CONN-5]). Taken as an
    // identity, id 0 looked like a restart of a live peer ([CONN-14]) and the connection
    // it then made could never be replaced, so every reconnect from that peer failed.
    if (h.src_conn_id != 0 && h.src_token != 0) return true;
    ++stats_.malformed_hello;
    return false;
}

void Endpoint::on_hello_datagram(std::span<const std::byte> datagram, const PacketMeta& meta,
                                 Time now) {
    auto h = wire::decode_hello(datagram);
    if (!h) return count_decode_error(h.error());
    if (!hello_names_sender(*h)) return;
    // spec §4 [CONN-13]: the peer endpoint is its IP and the port its HELLO announces.
    const Address peer = meta.src.with_port(h->endpoint_port);
    Connection* c = conn_mut(connection_to(peer));
    if (c && (c->state() == ConnState::kFailed || c->state() == ConnState::kClosed)) c = nullptr;
    if (c && c->peer_known() && c->peer_conn_id() == h->src_conn_id) {
        // The peer we know, again ([CONN-6]: its HELLO_ACK was lost): answered, no proof
        // needed, since nothing new is bound ([CONN-18] checks the token).
        c->on_hello(*h, now);
        touched(*c, now);
        return;
    }
    if (c && !c->peer_known()) {
        // [CONN-7]: we are opening a connection to this peer ourselves. The HELLO is
        // answered but binds nothing: our connection is established by the HELLO_ACK to
        // our own HELLO, which carries our token and so cannot be forged off-path.
        c->answer_hello(*h);
        touched(*c, now);
        return;
    }
    // Accepting this HELLO binds a connection to the identity it claims: a restart's
    // replacement ([CONN-14]) or a new connection. [CONN-25]: a restart always needs the
    // proof of address, a new connection only when the budget of unproven connections is
    // spent ([CONN-26]).
    const HelloGuard::Proof proof = guard_.check(peer, *h, now);
    if (proof == HelloGuard::Proof::kForged) ++stats_.bad_cookie;
    if (proof == HelloGuard::Proof::kExpired) ++stats_.expired_cookie;
    const bool proven = proof == HelloGuard::Proof::kValid;
    if (!proven && (c || unproven_ >= cfg_.unproven_connections))
        return answer_with_retry(peer, *h, c, now);
    if (proven) ++stats_.cookies_accepted;
    if (c && c->peer_known()) {
        // [CONN-14]: a proven HELLO with a new identity from a known peer: the peer
        // restarted, so the old connection fails and a new one answers.
        ++stats_.peer_restarts;
        c->fail(Status::kPeerDead, now);
        touched(*c, now);
        c = nullptr;
    }
    if (!c) {
        c = new_connection(peer, now);
        if (!c) return;
        if (!proven) {
            c->set_unproven(now);
            ++unproven_;
        }
    }
    c->on_hello(*h, now);
    touched(*c, now);
}

void Endpoint::answer_with_retry(const Address& peer, const wire::HelloPacket& h,
                                 const Connection* c, Time now) {
    if (guard_.queue_retry(peer, h, now, c ? c->control_class() : 0))
        ++stats_.retries_sent;
    else
        ++stats_.replies_dropped;
}

void Endpoint::on_v1_datagram(std::span<const std::byte> datagram, const PacketMeta& meta,
                              Time now) {
    auto h = wire::decode_hello_v1(datagram);
    if (!h || !hello_names_sender(*h)) {
        ++stats_.bad_version;  // [WIRE-3]: anything else of version 1 is not read
        return;
    }
    ++stats_.version_mismatch;
    if (h->common.type == wire::PacketType::kHelloAck) {
        // The answer to our own version-1 probe ([VER-1]): the peer speaks version 1. Only
        // an answer carrying our token counts (the token check of [CONN-4]).
        Connection* c = conn_mut(h->common.dst_conn_id);
        if (!c || c->token() != h->common.dst_token) return;
        if (c->on_v1_hello_ack(now)) touched(*c, now);
    }
    // Either way the peer's version-1 connection ends at once with a CLOSE it can read,
    // no larger than what it sent.
    if (!guard_.queue_v1_close(meta.src.with_port(h->endpoint_port), *h)) ++stats_.replies_dropped;
}

// A HELLO is the one version-2 packet with no token to check ([CONN-4]); every version-1
// packet goes to on_v1_datagram, which decodes a HELLO out of it and queues a refusal.
// Both cost the endpoint work ([CONN-25]'s MAC, a queued reply) for anyone who can send a
// datagram, so the driver bounds how many it hands over per pass.
bool Endpoint::is_handshake(std::span<const std::byte> datagram) const {
    if (datagram.size() < 2) return false;
    const auto version = static_cast<uint8_t>(datagram[0]);
    if (version == wire::kLegacyVersion) return true;
    return version == wire::kProtocolVersion &&
           static_cast<uint8_t>(datagram[1]) == static_cast<uint8_t>(wire::PacketType::kHello);
}

void Endpoint::on_datagram(std::span<const std::byte> datagram, const PacketMeta& meta,
                           Time now) {
    ++stats_.datagrams_received;
    apply_coalesced_ack(now);
    update_fair_share(now);
    wire::CommonHeader common;
    if (Error e = wire::parse_common_header(datagram, common); e != Error::kOk) {
        if (e == Error::kBadVersion && common.version == wire::kLegacyVersion)
            return on_v1_datagram(datagram, meta, now);
        return count_decode_error(e);
    }
    if (common.type == wire::PacketType::kHello) return on_hello_datagram(datagram, meta, now);

    Connection* c = conn_mut(common.dst_conn_id);
    if (!c) {
        ++stats_.unknown_connection;
        // [CONN-24]: the id names a slot that is or was in use by another connection.
        if ((common.dst_conn_id & 0xFFFF) - 1 < conns_.size()) ++stats_.stale_connection;
        return;
    }
    // spec §4 [CONN-4]: every packet but HELLO carries the receiver's token; a wrong
    // token is counted and dropped, so off-path packets cannot touch the connection.
    if (common.dst_token != c->token()) {
        ++stats_.bad_token;
        return;
    }
    // spec §4.9 [INT-3]: on a connection that negotiated INTEGRITY, the trailer is checked
    // and removed here, the one place packets enter a connection; a bad or missing one
    // changes nothing (no ACK, no placement) and the sender recovers the packet as lost.
    if (c->integrity() && wire::carries_integrity(common.type) &&
        !wire::strip_integrity(datagram, datagram)) {
        ++stats_.bad_integrity;
        return;
    }
    quiet_ports_.heard(meta.local_port, now);  // [PATH-16]: a checked packet, on this port
    // [CONN-26]: a packet with our token shows that the peer got our HELLO_ACK at the
    // address its HELLO claimed.
    if (!c->proven()) {
        c->prove();
        --unproven_;
    }
    // [CONN-28]: the peer still sends after this side closed: its CLOSE may have been lost.
    if (c->state() == ConnState::kClosed && common.type != wire::PacketType::kClose)
        c->peer_spoke_after_close(now);
    switch (common.type) {
        case wire::PacketType::kData: {
            // [CONN-31]: a connection not yet Established drops DATA unread. A Connecting
            // one does not know yet whether the peer's DATA is compact ([DATA-9]): read
            // with the wrong form, a peer's compact DATA was a bad length, and the peer
            // never heard that its DATA was dropped (fuzz case 210 of scripts/sim_fuzz.py).
            if (c->state() != ConnState::kEstablished) {
                c->on_data_unread();
                break;
            }
            // DATA and ACK decode into members reused for every packet: no Result, no
            // copy of the header, no clearing of the ACK's 32 stream entries.
            // [DATA-9]: COMPACT means something only where both HELLOs announced COMPACT_DATA.
            if (Error e = wire::parse_data_body(datagram, rx_data_, c->compact_data()); e != Error::kOk)
                return count_decode_error(e);
            rx_data_.hdr.common = common;
            c->on_data(rx_data_, meta, now);
            break;
        }
        case wire::PacketType::kAck: {
            // [WIRE-10]: on a connection that negotiated COALESCE an ACK with FOLLOWED is
            // as long as its count says and a DATA of the same connection follows. Both
            // are parsed before either is applied ([WIRE-8]).
            // [ACK-21]: SHORT means something only where both HELLOs announced SHORT_ACK.
            const bool short_ok = c->short_acks();
            const size_t ack_len = c->coalesce() ? wire::coalesced_ack_size(datagram, short_ok) : 0;
            const bool followed = ack_len > 0;
            std::span<const std::byte> rest;
            if (followed) {
                // Nothing after the ACK, or longer than the bound a sender keeps (a full DATA
                // of our max_payload; the trailer is already stripped): a bad length.
                if (ack_len >= datagram.size() || datagram.size() > wire::kDataHeaderSize + cfg_.max_payload)
                    return count_decode_error(Error::kBadLength);
                rest = datagram.subspan(ack_len);
                datagram = datagram.first(ack_len);
            }
            if (Error e = wire::parse_ack_body(datagram, rx_ack_, short_ok); e != Error::kOk)
                return count_decode_error(e);
            rx_ack_.common = common;
            if (followed) {
                wire::CommonHeader inner;
                if (Error e = wire::parse_common_header(rest, inner); e != Error::kOk)
                    return count_decode_error(e);
                if (inner.type != wire::PacketType::kData || inner.dst_conn_id != common.dst_conn_id ||
                    inner.dst_token != common.dst_token)
                    return count_decode_error(Error::kBadType);
                if (Error e = wire::parse_data_body(rest, rx_data_, c->compact_data()); e != Error::kOk)
                    return count_decode_error(e);
                rx_data_.hdr.common = inner;
                ++stats_.coalesced_received;
            }
            if (followed) {
                // The DATA now, its ACK at the next input, timer or full poll.
                c->on_data(rx_data_, meta, now);
                coalesced_ack_ = rx_ack_;
                coalesced_ack_conn_ = c->id();
                coalesced_ack_due_ = true;
                break;
            }
            c->on_ack(rx_ack_, now);
            settle_after_ack(*c);
            break;
        }
        case wire::PacketType::kNack: {
            auto n = wire::decode_nack(datagram);
            if (!n) return count_decode_error(n.error());
            c->on_nack(*n, now);
            break;
        }
        case wire::PacketType::kHelloAck: {
            auto h = wire::decode_hello(datagram);
            if (!h) return count_decode_error(h.error());
            if (!hello_names_sender(*h)) return;
            c->on_hello(*h, now);
            break;
        }
        case wire::PacketType::kProbe: {
            auto p = wire::decode_probe(datagram);
            if (!p) return count_decode_error(p.error());
            c->on_probe(*p, now);
            break;
        }
        case wire::PacketType::kRetry: {
            auto r = wire::decode_retry(datagram);
            if (!r) return count_decode_error(r.error());
            c->on_retry(*r, now);
            break;
        }
        case wire::PacketType::kClose: {
            auto p = wire::decode_close(datagram);
            if (!p) return count_decode_error(p.error());
            c->on_close(p->reason, now);
            break;
        }
        case wire::PacketType::kHello: break;  // handled above
    }
    touched(*c, now);
}

void Endpoint::flush_deadlines() const {
    for (uint32_t id : dirty_) {
        Connection* cp = const_cast<Endpoint*>(this)->conn_mut(id);
        if (!cp) continue;
        Connection& c = *cp;
        c.deadline_dirty = false;
        if (c.settle_pending) {
            c.settle_pending = false;
            c.settle_deadline();
        }
        const Time d = c.next_deadline();
        if (d != c.armed_deadline) {
            c.armed_deadline = d;
            if (d != kNever) timers_.push(TimerEntry{d, c.id()});
        }
    }
    dirty_.clear();
}

void Endpoint::settle_after_ack(Connection& c) {
    // The ACK may have ended timers (issue 19): the connection's deadline is made exact
    // once, when the deadlines are next flushed, not after every ACK of a batch.
    if (c.settle_pending) return;
    c.settle_pending = true;
    if (!c.deadline_dirty) {
        c.deadline_dirty = true;
        dirty_.push_back(c.id());
    }
}

void Endpoint::apply_coalesced_ack(Time now) {
    if (!coalesced_ack_due_) return;
    coalesced_ack_due_ = false;
    Connection* c = conn_mut(coalesced_ack_conn_);
    if (!c) return;
    c->on_ack(coalesced_ack_, now);
    settle_after_ack(*c);
    touched(*c, now);
}

void Endpoint::on_timeout(Time now) {
    apply_coalesced_ack(now);
    update_fair_share(now);
    reclaim(now);
    for (;;) {
        flush_deadlines();
        if (timers_.empty() || timers_.top().at > now) break;
        const TimerEntry e = timers_.top();
        timers_.pop();
        Connection* c = conn_mut(e.conn);
        if (!c || c->armed_deadline != e.at) continue;  // stale entry
        c->armed_deadline = kNever;
        c->on_timeout(now);
        touched(*c, now);
    }
}

Time Endpoint::next_deadline() const {
    flush_deadlines();
    // Stale heap entries (a connection's deadline moved) at the top would wake the driver
    // for nothing (issue 19: a timer cancelled by an ACK); they go now, as on_timeout would
    // skip them.
    while (!timers_.empty()) {
        const Connection* c = const_cast<Endpoint*>(this)->conn_mut(timers_.top().conn);
        if (c && c->armed_deadline == timers_.top().at) break;
        timers_.pop();
    }
    Time conn = timers_.empty() ? kNever : timers_.top().at;
    // [CONN-24], [STREAM-15]: the next quiet period to end, so memory is freed on time.
    if (!retiring_conns_.empty()) conn = std::min(conn, retiring_conns_.front().at);
    if (!retiring_streams_.empty()) conn = std::min(conn, retiring_streams_.front().at);
    return std::min(conn, fair_share_.next_update());
}

size_t Endpoint::poll_transmit(std::span<std::byte> buf, PacketMeta& meta, Time now) {
    return produce(buf, meta, now, nullptr);
}

size_t Endpoint::poll_transmit_in_place(std::span<std::byte> buf, PacketMeta& meta, Time now,
                                        std::span<const std::byte>& payload) {
    payload = {};
    return produce(buf, meta, now, &payload);
}

size_t Endpoint::produce(std::span<std::byte> buf, PacketMeta& meta, Time now,
                         Connection::InPlace* in_place) {
    if (!data_only_) {  // a poll for DATA only leaves both for the next full one
        apply_coalesced_ack(now);
        if (guard_.has_replies())
            if (size_t n = guard_.poll(buf, meta, local_)) return n;
    }
    // [PATH-15]: with some NIC ports busy, a connection whose only sendable data is for
    // those ports produces nothing yet keeps its work: it stays in the list, behind the
    // others, and one pass over the list ends the poll. So does one with only control
    // packets due while the poll is for DATA only (set_data_only).
    const bool keep_idle = ready_ports_ != kAllPorts || data_only_;
    for (size_t turns = ready_.size(); !ready_.empty() && (!keep_idle || turns > 0); --turns) {
        const uint32_t id = ready_.front();
        Connection* c = conn_mut(id);
        if (!c) {
            ready_.pop_front();
            continue;
        }
        // [INT-2], [INT-6]: the connection writes the packet in all but the trailer's room;
        // the trailer goes on here, the one place packets leave a connection.
        // A payload left in place would need the trailer after it: copied instead.
        const bool trailer = c->integrity() && buf.size() >= wire::kIntegritySize;
        size_t n = c->produce(trailer ? buf.first(buf.size() - wire::kIntegritySize) : buf, meta, now,
                              trailer ? nullptr : in_place, data_only_);
        if (n > 0 && trailer && wire::carries_integrity(static_cast<wire::PacketType>(static_cast<uint8_t>(buf[1]))))
            n = wire::append_integrity(buf, n);
        // Re-queue at the back if it has more (round-robin). A connection that produced
        // nothing waits for the event that unblocks it, so this loop cannot spin. A lone
        // ready connection that has more simply stays where it is.
        if ((n > 0 || keep_idle) && c->has_work(now)) {
            if (&ready_.front() != &ready_.back()) {  // more than one ready
                ready_.pop_front();
                ready_.push_back(id);
            }
        } else {
            ready_.pop_front();
            c->in_ready = false;
        }
        touched(*c, now, false);
        if (n > 0) {
            meta.src.ip = local_.ip;
            return n;
        }
    }
    return 0;
}

std::optional<Event> Endpoint::poll_event() {
    if (events_.empty()) return std::nullopt;
    Event e = events_.front();
    events_.pop_front();
    return e;
}

}  // namespace mroce::core
