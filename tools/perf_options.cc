// tools/perf_options.cc — see perf_options.h.
#include "tools/perf_options.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <filesystem>

namespace mroce::tools::perf {

std::vector<uint32_t> Options::sizes() const {
    if (verb == Verb::kAtomic) return {8u};  // an atomic is always 8 bytes, as in perftest
    if (all_sizes) {
        std::vector<uint32_t> v;
        for (uint32_t s = 2; s <= kMaxSize; s *= 2) v.push_back(s);
        return v;
    }
    if (size != 0) return {size};
    return {mode == Mode::kBandwidth ? 65536u : 2u};  // perftest's defaults
}

uint64_t Options::iterations_or_default() const {
    if (iterations != 0) return iterations;
    return mode == Mode::kBandwidth && verb == Verb::kWrite ? 5000 : 1000;  // perftest's
}

const char* to_string(Verb v) {
    switch (v) {
        case Verb::kWrite: return "write";
        case Verb::kSend: return "send";
        case Verb::kRead: return "read";
        case Verb::kAtomic: return "atomic";
    }
    return "?";
}

std::optional<std::string> verb_unavailable(Verb v, bool raw) {
    // --raw is plain UDP in the data's direction; READ and atomics have no such baseline.
    if (raw && (v == Verb::kRead || v == Verb::kAtomic))
        return std::string("--verb ") + to_string(v) + " has no --raw baseline (use write or send)";
    return std::nullopt;
}

std::optional<Verb> parse_verb(const std::string& text) {
    for (Verb v : {Verb::kWrite, Verb::kSend, Verb::kRead, Verb::kAtomic})
        if (text == to_string(v)) return v;
    return std::nullopt;
}

std::string test_name(const Options& o) {
    std::string verb;
    switch (o.verb) {
        case Verb::kWrite: verb = "RDMA_Write"; break;
        case Verb::kSend: verb = "Send"; break;
        case Verb::kRead: verb = "RDMA_Read"; break;
        case Verb::kAtomic: verb = "Atomic"; break;
    }
    if (o.raw) verb = "Raw_UDP (" + verb + " baseline)";
    return verb + (o.mode == Mode::kBandwidth ? " BW" : " Lat");
}

std::string check_writable(const std::string& path) {
    if (path.empty()) return "";
    std::error_code ec;
    const bool existed = std::filesystem::exists(path, ec);
    if (std::filesystem::is_directory(path, ec)) return "is a directory";
    // Open for appending: an existing file is not truncated by the check.
    std::FILE* f = std::fopen(path.c_str(), "a");
    if (!f) return std::strerror(errno);
    std::fclose(f);
    if (!existed) std::filesystem::remove(path, ec);
    return "";
}

uint64_t check_target_bytes(const Options& o, uint32_t size) {
    return uint64_t{o.qps} * o.iterations_or_default() * size;
}

std::string check_check_options(const Options& o) {
    if (!o.check) return "";
    if (o.raw) return "--check needs the protocol (not --raw: plain UDP has no placement to verify)";
    if (o.verb == Verb::kWrite && o.mode == Mode::kBandwidth) {
        if (o.duration_s > 0)
            return "--check --verb write verifies each message in its own slot after the run: "
                   "give -n, not -D";
        uint32_t max = 0;
        for (uint32_t s : o.sizes()) max = std::max(max, s);
        if (check_target_bytes(o, max) > kCheckMaxBytes)
            return "--check --verb write needs -q x -n x -s <= 1 GiB (a slot per message at the "
                   "server); lower -n";
    }
    return "";
}

std::string check_cc_options(const Options& o) {
    if (o.tc > 7) return "--tc must be a traffic class 0..7, not " + std::to_string(o.tc);
    if (!o.dscp_map.empty()) {
        if (o.dscp_map.size() != 8)
            return "--dscp-map needs 8 DSCPs (one per traffic class 0..7), not " +
                   std::to_string(o.dscp_map.size());
        for (int d : o.dscp_map)
            if (d < 0 || d > 63) return "--dscp-map: " + std::to_string(d) + " is not a DSCP (0..63)";
    }
    // The engine needs at least 1 Mbit/s (core/config.h); 100 Tbit/s bounds typos.
    if (o.line_rate_gbps != 0 && !(o.line_rate_gbps >= 0.001 && o.line_rate_gbps <= 100'000))
        return "--line-rate must be 0.001..100000 Gbit/s";
    return "";
}

}  // namespace mroce::tools::perf
