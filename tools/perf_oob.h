// tools/perf_oob.h — the out-of-band channel of `mroce perf`: TCP between client and
// server (perftest's port 18515) carrying newline-delimited JSON messages: the options,
// addresses, queue pair numbers, rkeys and buffer addresses, then one run/go/end exchange
// per message size.
//
// The channel is up to kLanes TCP connections ("lanes"), each from its own source port, so
// on an ECMP fabric they hash onto different routes. Every message goes on every lane with
// a sequence number and the receiver takes the first copy: a route that dies mid-run (a cut
// plane) stalls the lanes on it, not the channel. A lane's first line is a header
// {"lanes": n, "lane": i} from the client, which tells the server how many to accept.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/address.h"

namespace mroce::tools::perf {

using Json = nlohmann::json;

class Oob {
public:
    Oob() = default;
    ~Oob();
    Oob(Oob&& o) noexcept;
    Oob& operator=(Oob&&) = delete;
    Oob(const Oob&) = delete;

    // listen waits for one client on `port` (any address, IPv6 dual-stack when available)
    // for up to `timeout`. On error returns nullopt and sets `error` to one line.
    static std::optional<Oob> listen(uint16_t port, std::chrono::seconds timeout,
                                     std::string& error);
    // connect reaches `host`:`port` (a name or address), trying for up to `timeout` so a
    // client started just before its server still finds it.
    static std::optional<Oob> connect(const std::string& host, uint16_t port,
                                      std::chrono::seconds timeout, std::string& error);

    // send writes one message. Returns false (and sets error()) if the peer is gone. After
    // a malformed line from the peer it still sends (the error's answer).
    bool send(const Json& message);
    // receive waits for the next message for up to `timeout`, calling `idle` (if given)
    // between checks instead of sleeping, so the caller keeps its engine moving. Returns
    // nullopt on timeout, on a closed connection or on a malformed message (error() says).
    std::optional<Json> receive(std::chrono::milliseconds timeout,
                                const std::function<void()>& idle = {});
    // poll returns a message if one has fully arrived, without waiting. Sets error() and
    // returns nullopt if the peer closed the connection (check alive()).
    std::optional<Json> poll();
    bool alive() const { return !lanes_.empty() && error_.empty(); }
    // quiet: true while the peer is connected and has said nothing; during a test run any
    // message or a closed connection is an error (one line in `error`).
    bool quiet(std::string& error);
    const std::string& error() const { return error_; }
    // malformed: the peer sent a line that is not a control message (the error says so),
    // as opposed to closing, timing out or failing.
    bool malformed() const { return malformed_; }

    // local_ip / peer_ip are the two ends' IP addresses (port 0): the UDP datapaths bind
    // to the same interface the control connection uses.
    Address local_ip() const { return local_; }
    Address peer_ip() const { return peer_; }

    // lanes is how many TCP connections carry the channel (for tests and reports).
    size_t lanes() const { return lanes_.size(); }

    static constexpr size_t kLanes = 4;

private:
    struct Lane {
        int fd = -1;
        std::string in;
    };
    explicit Oob(std::vector<int> fds);
    bool fill(int timeout_ms);  // reads what is available; false on EOF or error
    std::optional<Json> take_line();
    void drop_lane(Lane& l);

    std::vector<Lane> lanes_;
    uint64_t send_seq_ = 0;
    uint64_t recv_seq_ = 0;
    std::string error_;
    bool malformed_ = false;
    Address local_, peer_;
};

// message_type is a control message's "type", or "" when it has none or it is not a
// string: the peer's JSON is never trusted to have the types we expect.
inline std::string message_type(const Json& m) {
    const auto it = m.find("type");
    return it != m.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace mroce::tools::perf
