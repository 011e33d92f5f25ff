// core/quiet_ports.h — spec [PATH-16]: which of this host's NIC ports have gone quiet.
//
// On a host with one NIC port per plane ([PATH-1]), every peer sprays its DATA and ACKs
// over all the planes, so each port keeps hearing packets. When a plane dies, its port
// falls silent while the others go on, and it does so for every connection at once. A
// connection that only sends ACKs has no timeout of its own to tell it ([PATH-12] needs
// many unechoed rounds, tens of round trips); the port's silence says it within a few
// dozen arrivals. A quiet port's paths then carry no ACKs or probe replies ([ACK-13]),
// until a packet arrives on it again (the peers' PROBEs of their failed paths do that
// when the plane comes back).
//
// Judged from arrivals that passed the connection's token check only: an off-path sender
// cannot make a port look alive or quiet. Pure state, no clock of its own: the caller
// gives the time.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "util/time.h"

namespace mroce::core {

class QuietPorts {
public:
    // A live port that gets its share of a host's arrivals (1/ports) misses all of
    // kArrivalsPerPort × ports of them with a chance of about e^-16 (1e-7).
    static constexpr uint64_t kArrivalsPerPort = 16;

    // ports: the host's NIC ports (at most 64 judged: [PATH-15]'s port set); min_silence:
    // the least time a port must have heard nothing, the datapath's timer floor (min_pto,
    // [LOSS-15]), so that the arrivals of one burst on the other ports are not enough.
    QuietPorts(uint16_t ports, Duration min_silence)
        : ports_(ports < 2 ? 0 : std::min<uint16_t>(ports, kMaxPorts)), min_silence_(min_silence) {}

    // heard: a packet of a known connection arrived on `port` (ids past the host's ports
    // are ignored: the datapath's meta is not trusted to index our state).
    void heard(uint16_t port, Time now) {
        if (arrivals_++ == 0) first_ = now;
        if (port < ports_) last_[port] = Mark{arrivals_, now};
    }

    // quiet: `port` has heard nothing while the host's other ports received at least
    // kArrivalsPerPort × ports packets, for at least min_silence. A port never heard is
    // judged from the host's first arrival: a plane that died before anything arrived on
    // it is as quiet as one that died later. Not judging it left the dead port the only
    // one never quiet, while live ports went quiet as the host's traffic tailed off, so
    // control packets chose the dead plane first (scripts/sim_fuzz.py case 302: 9 of a
    // handshake's 16 HELLOs on it, and the WRITE failed). A port that no peer uses is
    // quiet too, rightly: a peer that sends nothing on a plane has no port there to
    // receive on. A one-port host judges none.
    bool quiet(uint16_t port, Time now) const {
        if (port >= ports_ || arrivals_ == 0) return false;
        const Mark& m = last_[port];
        const Time since = m.arrivals == 0 ? first_ : m.at;
        return arrivals_ - m.arrivals >= kArrivalsPerPort * ports_ && now - since >= min_silence_;
    }

private:
    struct Mark {
        uint64_t arrivals = 0;  // the host's arrival count when the port last heard one
        Time at{};
    };
    static constexpr uint16_t kMaxPorts = 64;
    std::array<Mark, kMaxPorts> last_{};  // per port, the first ports_ used
    uint16_t ports_;                      // 0 on a one-port host: nothing to compare
    uint64_t arrivals_ = 0;               // every arrival of the host, all ports
    Time first_{};                        // when the first of them arrived
    Duration min_silence_;
};

}  // namespace mroce::core
