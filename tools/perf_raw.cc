// tools/perf_raw.cc — `mroce perf --raw`: the same traffic as plain UDP through the same
// datapath (datapath/udp: the same sockets, batch size, GSO/GRO and ECN), with no
// protocol. It is the in-run baseline: the ratio of mroce to --raw is the cost of the
// protocol, not of the copies, because both do the same ones:
//   send:    a payload of 512 bytes or more sent from the (registered) source buffer where
//            it lies, the header from the batch slot (two pieces, as the api driver sends
//            the engine's DATA: core::Engine::poll_transmit_in_place); a shorter one copied
//            into the slot after the header;
//   receive: each datagram lands in the datapath's bounce buffer and its payload is copied
//            once into the destination buffer at its offset, as the engine's placement.
// Datagrams carry a 16-byte header (magic, message size, message number, offset) and at
// most 4096 payload bytes, the engine's segment size. Bandwidth: the client sends -n
// messages (or for -D seconds) round-robin over --paths source ports in runs, as the
// driver groups the engine's datagrams; nothing is retransmitted, so the goodput is what
// the server placed, over the time from its first to its last datagram. Latency: a UDP
// ping-pong of one message each way; a message not answered within 1 s counts as lost.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include <sys/epoll.h>

#include <fmt/core.h>

#include "api/device.h"
#include "api/driver.h"
#include "core/engine.h"
#include "datapath/udp/udp_datapath.h"
#include "tools/perf_interval.h"
#include "tools/perf_report.h"
#include "tools/perf_side.h"

namespace mroce::tools::perf {

namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kMagic = 0x4d524157;  // "MRAW"
constexpr size_t kHeader = 16;
constexpr size_t kSegment = 4096;
constexpr size_t kBatch = api::Driver::kBatch;  // the same batch as the api driver's
constexpr auto kLatencyLoss = std::chrono::seconds(1);
// After the client's "end", the server keeps receiving until the socket is quiet this long.
constexpr auto kDrainQuiet = std::chrono::milliseconds(20);
constexpr uint32_t kOobCheckEvery = 4096;
// The server checks it more often (its passes are cheap when idle), but not every pass:
// a poll(2) per pass would cost as much as the pass.
constexpr uint32_t kServeOobCheckEvery = 256;
// The bandwidth server's idle rule, as mroce's (perf_rdma.cc): poll while a datagram came
// within kSpin, then sleep on the datapath's wake fd for at most kIdleSleep.
constexpr auto kSpin = std::chrono::microseconds(50);
constexpr int kIdleSleepMs = 1;
constexpr uint32_t kWarmup = 16;

struct Header {
    uint32_t size, msg, offset;
};

void put32(std::byte* p, uint32_t v) { std::memcpy(p, &v, 4); }
uint32_t get32(const std::byte* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

class RawSide final : public Side {
public:
    RawSide(const Options& o, Oob& oob, bool server) : o_(o), oob_(oob), server_(server) {}

    bool open(std::string& error) {
        datapath::UdpOptions opt;
        opt.gso = opt.gro = o_.offload;
        opt.recv_buffer_bytes = kRecvBufferBytes;
        if (o_.busy_poll) opt.busy_poll_us = api::kBusyPollSocketUs;  // as the Device's
        for (size_t c = 0; c < o_.dscp_map.size() && c < opt.dscp_by_class.size(); ++c)
            opt.dscp_by_class[c] = static_cast<uint8_t>(o_.dscp_map[c]);
        // --plane-ifs: path p leaves on plane p mod P, as MetaRoCE's paths do ([PATH-1]).
        opt.plane_devices = o_.plane_ifs;
        const Address local = oob_.local_ip().with_port(0);
        auto dp = datapath::UdpDatapath::open(local, opt, &error);
        if (!dp) return false;
        dp_ = std::move(dp).value();
        // The paths' source ports: free ports found by binding and releasing them; the
        // datapath binds them again at the first send. Like MetaRoCE's paths, none is the
        // endpoint port, so every path has its own socket (bound to its plane).
        for (uint32_t p = 0; p < o_.paths; ++p) {
            auto probe = datapath::UdpDatapath::open(local, {}, &error);
            if (!probe) return false;
            ports_.push_back((*probe)->local_address().port);
        }
        uint32_t max = 0;
        for (uint32_t s : o_.sizes()) max = std::max(max, s);
        buf_.assign(std::max<uint32_t>(max, 64), std::byte{0x5a});
        arena_.resize(kBatch * (kHeader + kSegment));
        tx_.resize(kBatch);
        rx_.resize(kBatch);
        return true;
    }

    Json setup() override {
        Json j;
        j["addr"] = dp_->local_address().to_string();
        j["buf_bytes"] = buf_.size();
        return j;
    }

    bool connect(const Json& peer, std::string& error) override {
        auto a = api::parse_address(peer.value("addr", ""));
        if (!a) {
            error = "the peer's setup message is malformed: " + peer.dump().substr(0, 120);
            return false;
        }
        peer_ = *a;
        return true;
    }

    std::string local_line() const override {
        return fmt::format("{} (UDP, {} source ports)", dp_->local_address().to_string(),
                           ports_.size());
    }
    std::string remote_line() const override { return peer_.to_string() + " (UDP)"; }
    std::string offload() const override {
        return offload_name(dp_->gso_enabled(), dp_->gro_enabled(), o_.offload);
    }
    void idle() override { (void)receive(nullptr); }

    std::optional<Json> run(uint32_t size, std::string& error) override {
        return o_.mode == Mode::kBandwidth ? run_bw(size, error) : run_lat(size, error);
    }

    Json finish(uint32_t size, const Json& mine, const Json& server) override {
        if (o_.mode == Mode::kLatency) return mine;
        // Bandwidth is what the server placed, over its first-to-last datagram time.
        const uint64_t bytes = server.value("bytes_received", uint64_t{0});
        const double secs = server.value("seconds", 0.0);
        const uint64_t sent = mine.value("datagrams_sent", uint64_t{0});
        const uint64_t got = server.value("datagrams_received", uint64_t{0});
        Json r = bw_result(o_, size, size ? bytes / size : 0, bytes, secs, {});
        r["messages_sent"] = mine.value("messages_sent", uint64_t{0});
        r["datagrams_sent"] = sent;
        r["datagrams_received"] = got;
        r["lost_datagrams"] = sent > got ? sent - got : 0;
        r["send_would_block"] = mine.value("send_would_block", uint64_t{0});
        if (mine.contains("intervals")) r["intervals"] = mine["intervals"];
        return r;
    }

    std::optional<Json> serve(uint32_t, std::string& error) override {
        bytes_ = datagrams_ = 0;
        first_ = last_ = Clock::time_point{};
        bool ending = false;
        auto quiet_since = Clock::now();
        for (uint64_t loop = 0;; ++loop) {
            const size_t n = receive(&error);
            if (!error.empty()) return std::nullopt;
            const auto now = Clock::now();
            bool slept = false;
            if (n > 0) {
                quiet_since = now;
            } else if ((o_.mode == Mode::kBandwidth || !o_.busy_poll) && now - quiet_since > kSpin) {
                sleep_until_readable();
                slept = true;
            }
            if (ending) {
                if (Clock::now() - quiet_since > kDrainQuiet) break;
                continue;
            }
            if (slept || loop % kServeOobCheckEvery == 0) {
                if (auto m = oob_.poll()) {
                    if (message_type(*m) != "end") {
                        error = "unexpected control message: " + m->dump().substr(0, 80);
                        return std::nullopt;
                    }
                    ending = true;
                    quiet_since = Clock::now();
                }
                if (!oob_.alive()) {
                    error = oob_.error();
                    return std::nullopt;
                }
            }
        }
        Json j;
        j["bytes_received"] = bytes_;
        j["datagrams_received"] = datagrams_;
        j["seconds"] = datagrams_ > 1 ? std::chrono::duration<double>(last_ - first_).count() : 0.0;
        return j;
    }

private:
    // sleep_until_readable waits for the datapath's wake fd (the endpoint socket has data)
    // for at most kIdleSleepMs.
    void sleep_until_readable() {
        epoll_event ev;
        (void)::epoll_wait(dp_->wake_fd(), &ev, 1, kIdleSleepMs);
    }

    // receive reads one batch and places every payload in buf_ (the receive copy). In
    // latency mode the server answers each complete message with one of the same size.
    size_t receive(std::string* error) {
        auto r = dp_->recv_batch(rx_);
        if (!r) {
            if (error) *error = "udp receive failed: " + dp_->last_error();
            return 0;
        }
        const auto now = Clock::now();
        for (size_t i = 0; i < *r; ++i) {
            const auto& p = rx_[i];
            if (p.data.size() < kHeader || get32(p.data.data()) != kMagic) continue;
            const Header h{get32(p.data.data() + 4), get32(p.data.data() + 8),
                           get32(p.data.data() + 12)};
            const size_t len = p.data.size() - kHeader;
            if (h.offset > buf_.size() || len > buf_.size() - h.offset) continue;
            std::memcpy(buf_.data() + h.offset, p.data.data() + kHeader, len);
            if (datagrams_ == 0) first_ = now;
            last_ = now;
            ++datagrams_;
            bytes_ += len;
            if (h.msg != rx_msg_) {
                rx_msg_ = h.msg;
                rx_msg_bytes_ = 0;
            }
            rx_msg_bytes_ += len;
            if (rx_msg_bytes_ >= h.size) {
                ++messages_;
                if (server_ && o_.mode == Mode::kLatency) {
                    if (!send_message(h.size, h.msg, peer_, 1, nullptr)) {  // to the endpoint port
                        if (error) *error = "udp send failed: " + dp_->last_error();
                        return 0;
                    }
                }
            }
        }
        return *r;
    }

    // send_message sends `count` messages of `size` bytes starting at number `msg`, read
    // from buf_, in batches of kBatch datagrams spread over the paths' source ports in
    // contiguous runs (as the driver groups the engine's datagrams by port). Spins on
    // back-pressure. Returns false if the socket failed.
    bool send_message(uint32_t size, uint32_t msg, const Address& to, uint64_t count,
                      uint64_t* would_block) {
        const size_t per_msg = std::max<size_t>(1, (size + kSegment - 1) / kSegment);
        size_t n = 0;
        auto flush = [&]() -> bool {
            // Contiguous runs per path: datagram k of the batch goes on path k*P/n.
            const size_t planes = std::max<size_t>(1, o_.plane_ifs.size());
            for (size_t k = 0; k < n; ++k) {
                const size_t path = k * ports_.size() / n;
                tx_[k].meta.src = dp_->local_address().with_port(ports_[path]);
                tx_[k].meta.local_port = static_cast<uint16_t>(path % planes);
            }
            size_t done = 0;
            while (done < n) {
                auto r = dp_->send_batch(std::span<const datapath::TxPacket>(tx_.data() + done, n - done));
                if (!r) return false;
                done += *r;
                // Back-pressure: the bandwidth client keeps its own socket drained meanwhile
                // (the latency server is inside receive() here and must not re-enter it).
                if (done < n && would_block) {
                    ++*would_block;
                    (void)receive(nullptr);
                }
            }
            sent_datagrams_ += n;
            n = 0;
            return true;
        };
        for (uint64_t m = 0; m < count; ++m) {
            for (size_t s = 0; s < per_msg; ++s) {
                const size_t off = s * kSegment;
                const size_t len = std::min<size_t>(kSegment, size - std::min<size_t>(size, off));
                std::byte* slot = arena_.data() + n * (kHeader + kSegment);
                put32(slot, kMagic);
                put32(slot + 4, size);
                put32(slot + 8, msg + static_cast<uint32_t>(m));
                put32(slot + 12, static_cast<uint32_t>(off));
                const auto payload = std::span<const std::byte>(buf_.data() + off, len);
                if (len >= core::Engine::kInPlaceMinBytes) {
                    tx_[n].data = std::span<const std::byte>(slot, kHeader);
                    tx_[n].payload = payload;
                } else {
                    std::memcpy(slot + kHeader, payload.data(), len);
                    tx_[n].data = std::span<const std::byte>(slot, kHeader + len);
                    tx_[n].payload = {};
                }
                tx_[n].meta.dst = to;
                tx_[n].meta.ecn = ecn::kEct0;
                tx_[n].meta.traffic_class = static_cast<uint8_t>(o_.tc);
                if (++n == kBatch && !flush()) return false;
            }
        }
        return n == 0 || flush();
    }

    std::optional<Json> run_bw(uint32_t size, std::string& error) {
        const bool timed = o_.duration_s > 0;
        const auto t0 = Clock::now();
        const auto stop_at = t0 + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(o_.duration_s));
        const uint64_t total = timed ? UINT64_MAX : o_.iterations_or_default() * o_.qps;
        // Messages go out in chunks so the deadline and the peer are checked regularly.
        const uint64_t chunk = std::max<uint64_t>(1, (kBatch * kSegment) / std::max<uint32_t>(size, 1));
        uint64_t sent = 0, would_block = 0;
        sent_datagrams_ = 0;
        IntervalRows rows(o_, size);  // messages sent: the server's count comes at the end
        auto since_t0 = [&] {
            return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
        };
        for (uint64_t loop = 0; sent < total; ++loop) {
            if (timed && Clock::now() >= stop_at) break;
            const uint64_t k = std::min(chunk, total - sent);
            if (!send_message(size, next_msg_, peer_, k, &would_block)) {
                error = "udp send failed: " + dp_->last_error();
                return std::nullopt;
            }
            next_msg_ += static_cast<uint32_t>(k);
            sent += k;
            if (rows.enabled()) rows.bw(since_t0(), sent);
            if (loop % 256 == 0 && !oob_.quiet(error)) return std::nullopt;
        }
        Json j;
        if (rows.enabled()) j["intervals"] = rows.finish(since_t0());
        j["messages_sent"] = sent;
        j["datagrams_sent"] = sent_datagrams_;
        j["send_would_block"] = would_block;
        return j;
    }

    std::optional<Json> run_lat(uint32_t size, std::string& error) {
        const bool timed = o_.duration_s > 0;
        const uint64_t iters = timed ? UINT64_MAX : o_.iterations_or_default() + kWarmup;
        const auto stop_at = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                std::chrono::duration<double>(o_.duration_s));
        std::vector<double> samples;
        uint64_t lost = 0;
        IntervalRows rows(o_, size);
        const auto start = Clock::now();
        auto since_start = [&] {
            return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
        };
        for (uint64_t it = 0; it < iters; ++it) {
            if (timed && it >= kWarmup && Clock::now() >= stop_at) break;
            const uint32_t msg = next_msg_++;
            const uint64_t before = messages_;
            const auto t = Clock::now();
            if (!send_message(size, msg, peer_, 1, nullptr)) {
                error = "udp send failed: " + dp_->last_error();
                return std::nullopt;
            }
            bool replied = false;
            auto quiet_since = t;
            for (uint64_t loop = 0;; ++loop) {
                const size_t n = receive(&error);
                if (!error.empty()) return std::nullopt;
                if (!o_.busy_poll) {  // as the server: poll for kSpin, then sleep (issue 19)
                    const auto now = Clock::now();
                    if (n > 0)
                        quiet_since = now;
                    else if (now - quiet_since > kSpin)
                        sleep_until_readable();
                }
                if (messages_ > before && rx_msg_ == msg) {
                    replied = true;
                    break;
                }
                if (loop % kOobCheckEvery == kOobCheckEvery - 1) {
                    if (!oob_.quiet(error)) return std::nullopt;
                    if (Clock::now() - t > kLatencyLoss) break;
                }
            }
            if (!replied) {
                ++lost;
                continue;
            }
            const double rtt_us = std::chrono::duration<double, std::micro>(Clock::now() - t).count();
            if (it >= kWarmup) {
                samples.push_back(rtt_us / 2);
                rows.lat(since_start(), samples.back());
            }
        }
        Json r = lat_result(size, std::move(samples));
        if (rows.enabled()) r["intervals"] = rows.finish(since_start());
        r["lost_pings"] = lost;
        return r;
    }


    const Options& o_;
    Oob& oob_;
    bool server_;
    std::unique_ptr<datapath::UdpDatapath> dp_;
    std::vector<uint16_t> ports_;
    std::vector<std::byte> buf_, arena_;
    std::vector<datapath::TxPacket> tx_;
    std::vector<datapath::RxPacket> rx_;
    Address peer_;
    uint32_t next_msg_ = 1;
    // Receive accounting.
    uint64_t bytes_ = 0, datagrams_ = 0, messages_ = 0, sent_datagrams_ = 0;
    uint32_t rx_msg_ = 0;
    uint64_t rx_msg_bytes_ = 0;
    Clock::time_point first_, last_;
};

}  // namespace

std::unique_ptr<Side> make_raw_side(const Options& o, Oob& oob, bool server, std::string& error) {
    auto side = std::make_unique<RawSide>(o, oob, server);
    if (!side->open(error)) return nullptr;
    return side;
}

}  // namespace mroce::tools::perf
