// conform/agent/agent.cc — the control protocol's commands on api::Device
// (docs/conformance.md lists them with their arguments and answers).
#include "conform/agent/agent.h"

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace mroce::conform {
namespace {

using nlohmann::json;

// BadRequest carries the one-line error of a request the agent refuses.
struct BadRequest : std::runtime_error {
    using std::runtime_error::runtime_error;
};

const char* status_name(api::Status s) {
    switch (s) {
        case api::Status::kSuccess: return "success";
        case api::Status::kLocalLength: return "local_length";
        case api::Status::kLocalProtection: return "local_protection";
        case api::Status::kRemoteAccess: return "remote_access";
        case api::Status::kRemoteInvalid: return "remote_invalid";
        case api::Status::kRnrRetryExceeded: return "rnr_retry_exceeded";
        case api::Status::kRetryExceeded: return "retry_exceeded";
        case api::Status::kPeerDead: return "peer_dead";
        case api::Status::kFlushed: return "flushed";
        case api::Status::kVersionMismatch: return "version_mismatch";
    }
    return "unknown";
}

const char* opcode_name(api::WorkOpcode op) {
    switch (op) {
        case api::WorkOpcode::kSend: return "send";
        case api::WorkOpcode::kSendImm: return "send_imm";
        case api::WorkOpcode::kWrite: return "write";
        case api::WorkOpcode::kWriteImm: return "write_imm";
        case api::WorkOpcode::kRecv: return "recv";
        case api::WorkOpcode::kRecvWriteImm: return "recv_write_imm";
        case api::WorkOpcode::kRead: return "read";
        case api::WorkOpcode::kAtomicFetchAdd: return "fetch_add";
        case api::WorkOpcode::kAtomicCompareSwap: return "compare_swap";
    }
    return "unknown";
}

api::WorkOpcode parse_send_opcode(const std::string& s) {
    if (s == "send") return api::WorkOpcode::kSend;
    if (s == "send_imm") return api::WorkOpcode::kSendImm;
    if (s == "write") return api::WorkOpcode::kWrite;
    if (s == "write_imm") return api::WorkOpcode::kWriteImm;
    if (s == "read") return api::WorkOpcode::kRead;
    if (s == "fetch_add") return api::WorkOpcode::kAtomicFetchAdd;
    if (s == "compare_swap") return api::WorkOpcode::kAtomicCompareSwap;
    throw BadRequest("unknown opcode '" + s + "'");
}

const char* event_name(api::EventKind k) {
    switch (k) {
        case api::EventKind::kCompletion: return "completion";
        case api::EventKind::kConnectionUp: return "connection_up";
        case api::EventKind::kConnectionFailed: return "connection_failed";
        case api::EventKind::kConnectionClosed: return "connection_closed";
        case api::EventKind::kPathFailed: return "path_failed";
        case api::EventKind::kPathRecovered: return "path_recovered";
        case api::EventKind::kSrqLimit: return "srq_limit";
    }
    return "unknown";
}

uint32_t parse_access(const json& list) {
    uint32_t flags = 0;
    for (const auto& item : list) {
        const std::string s = item.get<std::string>();
        if (s == "local_write") flags |= api::access::kLocalWrite;
        else if (s == "remote_write") flags |= api::access::kRemoteWrite;
        else if (s == "remote_read") flags |= api::access::kRemoteRead;
        else if (s == "remote_atomic") flags |= api::access::kRemoteAtomic;
        else throw BadRequest("unknown access flag '" + s + "'");
    }
    return flags;
}

std::vector<std::byte> from_hex(const std::string& hex) {
    if (hex.size() % 2) throw BadRequest("hex string of odd length");
    auto nibble = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        throw BadRequest("not a hex digit in 'hex'");
    };
    std::vector<std::byte> out(hex.size() / 2);
    for (size_t i = 0; i < out.size(); ++i)
        out[i] = static_cast<std::byte>(nibble(hex[2 * i]) << 4 | nibble(hex[2 * i + 1]));
    return out;
}

std::string to_hex(const std::byte* p, size_t n) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string s(2 * n, '0');
    for (size_t i = 0; i < n; ++i) {
        const auto b = static_cast<uint8_t>(p[i]);
        s[2 * i] = kDigits[b >> 4];
        s[2 * i + 1] = kDigits[b & 15];
    }
    return s;
}

json connection_json(const api::ConnectionReport& r) {
    const auto& c = r.connection;
    json j;
#define MROCE_FIELD(name) j[#name] = c.name;
    MROCE_FIELD(messages_sent) MROCE_FIELD(messages_received) MROCE_FIELD(retransmits)
    MROCE_FIELD(retransmits_sack) MROCE_FIELD(retransmits_timeout)
    MROCE_FIELD(retransmits_path_failure) MROCE_FIELD(retransmits_rnr)
    MROCE_FIELD(retransmits_cancelled) MROCE_FIELD(duplicate_segments)
    MROCE_FIELD(held_last_segments) MROCE_FIELD(stale_duplicates) MROCE_FIELD(stale_generation)
    MROCE_FIELD(stale_probe_replies) MROCE_FIELD(out_of_window) MROCE_FIELD(malformed)
    MROCE_FIELD(unknown_stream) MROCE_FIELD(retired_stream) MROCE_FIELD(wrong_state)
    MROCE_FIELD(nacks_dropped) MROCE_FIELD(access_errors) MROCE_FIELD(rnr_nacks_sent)
    MROCE_FIELD(requests_deferred) MROCE_FIELD(atomics_executed) MROCE_FIELD(orphan_responses)
    MROCE_FIELD(read_source_gone) MROCE_FIELD(nacks_sent) MROCE_FIELD(nacks_received)
    MROCE_FIELD(hello_sent) MROCE_FIELD(closes_repeated) MROCE_FIELD(probes_received) MROCE_FIELD(path_failures)
    MROCE_FIELD(path_rerolls) MROCE_FIELD(retransmits_tail)
#undef MROCE_FIELD
    json paths = json::array();
    for (const auto& p : r.paths) {
        json q;
#define MROCE_FIELD(name) q[#name] = p.name;
        MROCE_FIELD(packets_sent) MROCE_FIELD(retransmits_sent) MROCE_FIELD(lost_by_sack)
        MROCE_FIELD(lost_by_timeout) MROCE_FIELD(spurious_retransmits) MROCE_FIELD(timeouts)
        MROCE_FIELD(overtaken) MROCE_FIELD(stalled_timeouts) MROCE_FIELD(failures)
        MROCE_FIELD(probes_sent) MROCE_FIELD(acks_received) MROCE_FIELD(ecn_echoed)
        MROCE_FIELD(packets_received) MROCE_FIELD(duplicate_psns) MROCE_FIELD(ecn_marks)
        MROCE_FIELD(acks_sent) MROCE_FIELD(psns_skipped)
#undef MROCE_FIELD
        paths.push_back(q);
    }
    return json{{"connection", j}, {"paths", paths}};
}

}  // namespace

// Buffer: page-aligned, zero-filled memory and its registration. The region is
// deregistered before the memory is freed.
struct Agent::Buffer {
    std::byte* mem = nullptr;
    size_t length = 0;
    uint32_t pd = 0;
    std::unique_ptr<api::MemoryRegion> mr;
    ~Buffer() {
        mr.reset();
        std::free(mem);
    }
};

// Queue: a queue pair whose send and receive completions share one completion queue. The
// queue pair goes first: it reports to the CQ.
struct Agent::Queue {
    std::unique_ptr<api::CompletionQueue> cq;
    std::unique_ptr<api::QueuePair> qp;
    ~Queue() { qp.reset(); }
};

Agent::Agent(Address udp, bool ack_with_reverse_data, bool short_acks, bool compact_data)
    : udp_(udp),
      ack_with_reverse_data_(ack_with_reverse_data),
      short_acks_(short_acks),
      compact_data_(compact_data) {}
Agent::~Agent() { close_all(); }

void Agent::close_all() {
    queues_.clear();
    buffers_.clear();
    pds_.clear();
    dev_.reset();  // sends CLOSE on every connection (spec [CONN-21])
}

bool Agent::open(std::string* why) {
    api::DeviceConfig cfg;
    // [INT-7]: the target offers INTEGRITY, so integrity.trailer can test it; a connection
    // uses it only when the suite's HELLO announces it too.
    cfg.endpoint.integrity_check = true;
    cfg.local = udp_;
    // The target runs the spec's ACK rule ([ACK-11], [ACK-12]), not the batched one a
    // Device fits to its datapath for speed: the suite checks the spec's behaviour.
    cfg.fit_acks_to_datapath = false;
    // Likewise [PATH-10]'s default of one segment per turn, not the runs a UDP Device uses
    // to fill its GSO super-packets: the suite checks that segments are spread.
    cfg.endpoint.path_run_segments = 1;
    // Off by default (the spec's default); on, a delayed ACK leaves with the next DATA, in
    // one datagram where COALESCE was negotiated: coalesce.target_pair needs it to pass.
    cfg.endpoint.ack_with_reverse_data = ack_with_reverse_data_;
    // On by default; off, the short_ack group judges a target that does not announce it.
    cfg.endpoint.short_acks = short_acks_;
    // Off by default; on, the compact group's negotiated tests judge the COMPACT form.
    cfg.endpoint.compact_data = compact_data_;
    auto dev = api::Device::open(cfg, why);
    if (!dev) return false;
    dev_ = std::move(dev).value();
    // Keep the port across resets: the suite may cache the address from `hello`.
    udp_ = dev_->local_address();
    auto pd = dev_->alloc_pd();
    default_pd_ = pd->id();
    pds_[default_pd_] = std::move(pd);
    return true;
}

Address Agent::udp_address() const { return udp_; }

json Agent::handle(const json& request) {
    json answer;
    try {
        if (!request.is_object() || !request.contains("cmd") || !request["cmd"].is_string())
            throw BadRequest("a request is a JSON object with a string 'cmd'");
        if (!dev_) throw BadRequest("no device (a reset failed)");
        answer = dispatch(request["cmd"].get<std::string>(), request);
        answer["ok"] = true;
    } catch (const BadRequest& e) {
        answer = json{{"ok", false}, {"error", e.what()}};
    } catch (const json::exception& e) {
        answer = json{{"ok", false}, {"error", std::string("bad argument: ") + e.what()}};
    }
    if (request.is_object() && request.contains("id")) answer["id"] = request["id"];
    return answer;
}

json Agent::dispatch(const std::string& cmd, const json& r) {
    if (cmd == "hello") return hello();
    if (cmd == "reset") return reset();
    if (cmd == "alloc_pd") return alloc_pd();
    if (cmd == "reg_mr") return reg_mr(r);
    if (cmd == "write_mr") return write_mr(r);
    if (cmd == "read_mr") return read_mr(r);
    if (cmd == "dereg_mr") return dereg_mr(r);
    if (cmd == "create_qp") return create_qp(r);
    if (cmd == "connect_qp") return connect_qp(r);
    if (cmd == "reset_qp") return reset_qp(r);
    if (cmd == "destroy_qp") return destroy_qp(r);
    if (cmd == "post_recv") return post_recv(r);
    if (cmd == "post_send") return post_send(r);
    if (cmd == "poll_cq") return poll_cq(r);
    if (cmd == "events") return events();
    if (cmd == "stats") return stats(r);
    throw BadRequest("unknown command '" + cmd + "'");
}

json Agent::hello() {
    const auto& e = dev_->config().endpoint;
    return json{{"udp", udp_.to_string()},
                {"implementation", "mroce"},
                {"wire_version", 1},
                {"max_payload", e.max_payload},
                {"num_paths", e.num_paths},
                {"rnr_delay_us", e.rnr_delay_us},
                {"endpoint_counters", true}};
}

json Agent::reset() {
    close_all();
    std::string why;
    if (!open(&why)) throw BadRequest("reset: " + why);
    return hello();
}

json Agent::alloc_pd() {
    auto pd = dev_->alloc_pd();
    const uint32_t id = pd->id();
    pds_[id] = std::move(pd);
    return json{{"pd", id}};
}

api::ProtectionDomain& Agent::pd(const json& r) {
    const uint32_t id = r.value("pd", default_pd_);
    auto it = pds_.find(id);
    if (it == pds_.end()) throw BadRequest("no protection domain " + std::to_string(id));
    return *it->second;
}

Agent::Buffer& Agent::buffer(const json& r) {
    const uint32_t id = r.at("mr").get<uint32_t>();
    auto it = buffers_.find(id);
    if (it == buffers_.end()) throw BadRequest("no memory region " + std::to_string(id));
    return *it->second;
}

Agent::Queue& Agent::queue(const json& r) {
    const uint32_t id = r.at("qp").get<uint32_t>();
    auto it = queues_.find(id);
    if (it == queues_.end()) throw BadRequest("no queue pair " + std::to_string(id));
    return *it->second;
}

json Agent::reg_mr(const json& r) {
    const uint64_t length = r.at("length").get<uint64_t>();
    if (length == 0 || length > (uint64_t{1} << 30)) throw BadRequest("length must be 1..2^30");
    const uint32_t flags = parse_access(r.value("access", json::array()));
    api::ProtectionDomain& domain = pd(r);
    auto b = std::make_unique<Buffer>();
    const size_t rounded = (length + 4095) / 4096 * 4096;
    b->mem = static_cast<std::byte*>(std::aligned_alloc(4096, rounded));
    if (!b->mem) throw BadRequest("out of memory");
    std::memset(b->mem, 0, rounded);
    b->length = length;
    b->pd = domain.id();
    auto mr = domain.register_memory(b->mem, length, flags);
    if (!mr) throw BadRequest("register_memory failed");
    b->mr = std::move(mr).value();
    const uint32_t id = next_buffer_++;
    json out{{"mr", id}, {"addr", b->mr->addr()}, {"rkey", b->mr->rkey()},
             {"lkey", b->mr->lkey()}, {"length", length}};
    buffers_[id] = std::move(b);
    return out;
}

json Agent::write_mr(const json& r) {
    Buffer& b = buffer(r);
    const uint64_t offset = r.value("offset", uint64_t{0});
    const auto bytes = from_hex(r.at("hex").get<std::string>());
    if (offset > b.length || bytes.size() > b.length - offset)
        throw BadRequest("write_mr past the end of the region");
    std::memcpy(b.mem + offset, bytes.data(), bytes.size());
    return json::object();
}

json Agent::read_mr(const json& r) {
    Buffer& b = buffer(r);
    const uint64_t offset = r.value("offset", uint64_t{0});
    const uint64_t length = r.value("length", b.length - std::min<uint64_t>(offset, b.length));
    if (offset > b.length || length > b.length - offset)
        throw BadRequest("read_mr past the end of the region");
    return json{{"hex", to_hex(b.mem + offset, length)}};
}

json Agent::dereg_mr(const json& r) {
    Buffer& b = buffer(r);
    if (!b.mr) throw BadRequest("memory region already deregistered");
    // The memory stays allocated (read_mr still works) so a test can check that nothing
    // reached it after deregistration.
    b.mr.reset();
    return json::object();
}

json Agent::create_qp(const json& r) {
    api::ProtectionDomain& domain = pd(r);
    auto q = std::make_unique<Queue>();
    q->cq = dev_->create_cq();
    auto qp = domain.create_qp(*q->cq, *q->cq);
    if (!qp) throw BadRequest("create_qp failed");
    q->qp = std::move(qp).value();
    const uint32_t number = q->qp->number();
    queues_[number] = std::move(q);
    return json{{"qp", number}};
}

json Agent::connect_qp(const json& r) {
    Queue& q = queue(r);
    auto peer = api::parse_address(r.at("peer").get<std::string>());
    if (!peer) throw BadRequest("peer is not HOST:PORT");
    if (r.contains("access")) {
        // [STREAM-12]: the remote access this queue pair grants, set at INIT; connect()
        // from INIT keeps it (without "access" it grants every remote access).
        const auto init = api::qp_to_init(parse_access(r["access"]));
        std::string why;
        if (q.qp->modify(init.attr, init.mask, &why) != Error::kOk) throw BadRequest("connect_qp: " + why);
    }
    const Error e = q.qp->connect(*peer, r.at("remote_qp").get<uint32_t>());
    if (e != Error::kOk) throw BadRequest("connect failed");
    return json::object();
}

json Agent::reset_qp(const json& r) {
    const uint32_t old = r.at("qp").get<uint32_t>();
    Queue& q = queue(r);
    api::QpAttr attr;
    attr.state = api::QpState::kReset;
    std::string why;
    if (q.qp->modify(attr, api::qp_attr::kState, &why) != Error::kOk)
        throw BadRequest("reset_qp: " + why);
    // [STREAM-13]: a queue pair back in RESET continues on a new stream, so a new number.
    const uint32_t number = q.qp->number();
    auto node = queues_.extract(old);
    node.key() = number;
    queues_.insert(std::move(node));
    return json{{"qp", number}};
}

json Agent::destroy_qp(const json& r) {
    (void)queue(r);
    queues_.erase(r.at("qp").get<uint32_t>());
    return json::object();
}

json Agent::post_recv(const json& r) {
    Queue& q = queue(r);
    Buffer& b = buffer(r);
    if (!b.mr) throw BadRequest("memory region deregistered");
    const uint64_t offset = r.value("offset", uint64_t{0});
    const uint64_t length = r.value("length", b.length - std::min<uint64_t>(offset, b.length));
    if (offset > b.length || length > b.length - offset)
        throw BadRequest("receive buffer past the end of the region");
    api::RecvWr wr;
    wr.wr_id = r.value("wr_id", uint64_t{0});
    wr.addr = b.mr->addr() + offset;
    wr.length = static_cast<uint32_t>(length);
    wr.lkey = b.mr->lkey();
    if (q.qp->post_recv(wr) != Error::kOk) throw BadRequest("post_recv refused");
    return json::object();
}

json Agent::post_send(const json& r) {
    Queue& q = queue(r);
    api::SendWr wr;
    wr.wr_id = r.value("wr_id", uint64_t{0});
    wr.opcode = parse_send_opcode(r.at("opcode").get<std::string>());
    if (r.contains("mr")) {
        Buffer& b = buffer(r);
        if (!b.mr) throw BadRequest("memory region deregistered");
        const uint64_t offset = r.value("offset", uint64_t{0});
        const uint64_t length = r.value("length", uint64_t{0});
        if (offset > b.length || length > b.length - offset)
            throw BadRequest("local buffer past the end of the region");
        wr.local_addr = b.mr->addr() + offset;
        wr.length = static_cast<uint32_t>(length);
        wr.lkey = b.mr->lkey();
    }
    wr.remote_addr = r.value("remote_addr", uint64_t{0});
    wr.rkey = r.value("rkey", uint32_t{0});
    wr.imm = r.value("imm", uint32_t{0});
    wr.signaled = r.value("signaled", true);
    wr.compare_add = wr.opcode == api::WorkOpcode::kAtomicCompareSwap
                         ? r.value("compare", uint64_t{0})
                         : r.value("add", uint64_t{0});
    wr.swap = r.value("swap", uint64_t{0});
    if (q.qp->post_send(wr) != Error::kOk) throw BadRequest("post_send refused");
    return json::object();
}

json Agent::poll_cq(const json& r) {
    Queue& q = queue(r);
    const size_t max = r.value("max", size_t{16});
    const int wait_ms = r.value("wait_ms", 0);
    std::vector<api::Completion> cqes(std::max<size_t>(max, 1));
    size_t n = wait_ms > 0 ? q.cq->wait(cqes, std::chrono::milliseconds(wait_ms))
                           : q.cq->poll(cqes);
    json list = json::array();
    for (size_t i = 0; i < n; ++i) {
        const auto& c = cqes[i];
        json e{{"wr_id", c.wr_id}, {"qp", c.stream}, {"status", status_name(c.status)},
               {"opcode", opcode_name(c.opcode)}, {"byte_len", c.byte_len}};
        if (c.has_imm) e["imm"] = c.imm;
        list.push_back(e);
    }
    return json{{"completions", list}};
}

json Agent::events() {
    std::vector<api::Event> ev(64);
    const size_t n = dev_->poll_events(ev);
    json list = json::array();
    for (size_t i = 0; i < n; ++i) {
        json e{{"kind", event_name(ev[i].kind)}, {"peer", ev[i].peer.to_string()}};
        if (ev[i].kind == api::EventKind::kConnectionFailed ||
            ev[i].kind == api::EventKind::kConnectionClosed)
            e["status"] = status_name(ev[i].status);
        if (ev[i].kind == api::EventKind::kPathFailed ||
            ev[i].kind == api::EventKind::kPathRecovered)
            e["path"] = ev[i].path;
        list.push_back(e);
    }
    return json{{"events", list}};
}

json Agent::stats(const json& r) {
    const auto d = dev_->stats();
    json out{{"datagrams_received", d.driver.datagrams_in},
             {"datagrams_sent", d.driver.datagrams_out},
             {"endpoint", json{{"datagrams_received", d.endpoint.datagrams_received},
                               {"truncated", d.endpoint.truncated},
                               {"bad_version", d.endpoint.bad_version},
                               {"bad_type", d.endpoint.bad_type},
                               {"bad_length", d.endpoint.bad_length},
                               {"unknown_connection", d.endpoint.unknown_connection},
                               {"bad_token", d.endpoint.bad_token},
                               {"bad_integrity", d.endpoint.bad_integrity},
                               {"connections_refused", d.endpoint.connections_refused},
                               {"malformed_hello", d.endpoint.malformed_hello}}}};
    if (r.contains("peer")) {
        auto peer = api::parse_address(r["peer"].get<std::string>());
        if (!peer) throw BadRequest("peer is not HOST:PORT");
        auto rep = dev_->connection_report(*peer);
        if (rep) out.update(connection_json(*rep));
    }
    return out;
}

}  // namespace mroce::conform
