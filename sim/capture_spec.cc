#include "sim/capture_spec.h"

#include <charconv>
#include <vector>

namespace mroce::sim {
namespace {

std::string_view trim(std::string_view s) {
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
    return s;
}

struct Point {
    enum Kind { kHost, kCable, kAllHosts } kind;
    size_t index = 0;
};

// parse_point reads one item; returns an empty string or why it is not a point.
std::string parse_point(const Topology& topo, std::string_view item, Point& out) {
    if (item == "hosts") {
        out = {Point::kAllHosts, 0};
        return {};
    }
    const size_t colon = item.find(':');
    const std::string_view kind = item.substr(0, colon);
    const std::string_view num = colon == std::string_view::npos ? "" : item.substr(colon + 1);
    size_t limit = 0;
    if (kind == "host") {
        out.kind = Point::kHost;
        limit = topo.host_count();
    } else if (kind == "cable") {
        out.kind = Point::kCable;
        limit = topo.cable_count();
    } else {
        return "expected host:N, cable:N or hosts";
    }
    const auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), out.index);
    if (num.empty() || ec != std::errc{} || end != num.data() + num.size())
        return "expected a number after '" + std::string(kind) + ":'";
    if (out.index >= limit)
        return "no " + std::string(kind) + " " + std::to_string(out.index) + " (the topology has " +
               std::to_string(limit) + ")";
    return {};
}

}  // namespace

std::string apply_capture_spec(Topology& topo, std::string_view spec, PacketTap& tap) {
    std::vector<Point> points;
    for (std::string_view rest = spec;;) {
        const size_t comma = rest.find(',');
        const std::string_view item = trim(rest.substr(0, comma));
        Point p{};
        if (std::string why = parse_point(topo, item, p); !why.empty())
            return "capture point '" + std::string(item) + "': " + why;
        points.push_back(p);
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
    }
    for (const Point& p : points) {
        switch (p.kind) {
            case Point::kHost:
                topo.capture_host(static_cast<uint32_t>(p.index), tap);
                break;
            case Point::kCable:
                topo.capture_cable(p.index, tap);
                break;
            case Point::kAllHosts:
                for (uint32_t h = 0; h < topo.host_count(); ++h) topo.capture_host(h, tap);
                break;
        }
    }
    return {};
}

}  // namespace mroce::sim
