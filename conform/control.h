// conform/control.h — the suite's side of the control protocol (docs/conformance.md):
// JSON lines over TCP to the agent that drives the implementation under test.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "util/address.h"

namespace mroce::conform {

// ControlError: the agent could not be reached, or answered ok:false. Tests let it
// propagate: a refused setup step fails the test with the agent's one-line reason.
struct ControlError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

class ControlClient {
public:
    // connect opens the TCP connection. Returns nullopt with *why set on failure.
    static std::optional<ControlClient> connect(const Address& agent, std::string* why);
    ControlClient(ControlClient&& o) noexcept : fd_(o.fd_), next_id_(o.next_id_) { o.fd_ = -1; }
    ~ControlClient();

    // call sends {"cmd": cmd, ...args} and returns the answer; throws ControlError when the
    // answer has ok:false, or after 10 s without one.
    nlohmann::json call(const std::string& cmd, nlohmann::json args = nlohmann::json::object());

private:
    explicit ControlClient(int fd) : fd_(fd) {}
    int fd_ = -1;
    uint64_t next_id_ = 1;
    std::string buffer_;
};

}  // namespace mroce::conform
