// sim/import_lines.h — what the importers (import.cc, import_htsim_topology.cc) share:
// a line reader whose every error names file:line, and the exception it throws, caught
// at each parser's boundary (no exception leaves sim/import.h). Internal to them.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "sim/import.h"

namespace mroce::sim::import_detail {

struct ImportError {
    std::string message;
};

// Lines walks a text's lines, keeping the 1-based number of the current one.
class Lines {
  public:
    Lines(const std::string& text, const std::string& name) : in_(text), name_(name) {}
    // next stores the next line's whitespace-separated tokens (blank lines skipped when
    // skip_blank); returns false at the end.
    bool next(std::vector<std::string>& tokens, bool skip_blank = true) {
        std::string line;
        while (std::getline(in_, line)) {
            ++line_;
            tokens.clear();
            std::istringstream ls(line);
            for (std::string t; ls >> t;) tokens.push_back(t);
            if (!tokens.empty() || !skip_blank) return true;
        }
        return false;
    }
    uint32_t line() const { return line_; }
    [[noreturn]] void fail(const std::string& what) const {
        throw ImportError{name_ + ":" + std::to_string(line_) + ": " + what};
    }
    [[noreturn]] void fail_at(uint32_t line, const std::string& what) const {
        throw ImportError{name_ + ":" + std::to_string(line) + ": " + what};
    }
    [[noreturn]] void fail_at_end(const std::string& what) const {
        throw ImportError{name_ + ": " + what};
    }

    uint64_t unsigned_at(const std::string& t, const char* what, uint64_t lo, uint64_t hi) const {
        uint64_t v = 0;
        const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
        if (ec != std::errc() || end != t.data() + t.size())
            fail(std::string(what) + " '" + t + "' is not an unsigned integer");
        if (v < lo || v > hi)
            fail(std::string(what) + " " + t + " is outside " + std::to_string(lo) + ".." +
                 std::to_string(hi));
        return v;
    }
    double real_at(const std::string& t, const char* what) const {
        double v = 0;
        const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
        if (ec != std::errc() || end != t.data() + t.size() || !std::isfinite(v))
            fail(std::string(what) + " '" + t + "' is not a number");
        return v;
    }
    // host_at maps a node id token to its host index, or fails naming the problem.
    uint32_t host_at(const std::string& t, const char* what, const NodeMap& nodes) const {
        const uint64_t node = unsigned_at(t, what, 0, UINT32_MAX);
        if (node >= nodes.host_of_node.size())
            fail(std::string(what) + " node " + t + ": the topology has " +
                 std::to_string(nodes.host_of_node.size()) + " nodes");
        const uint32_t h = nodes.host_of_node[node];
        if (h == NodeMap::kNotAHost)
            fail(std::string(what) + " node " + t + " is a switch, not a host");
        return h;
    }

  private:
    std::istringstream in_;
    std::string name_;
    uint32_t line_ = 0;
};

}  // namespace mroce::sim::import_detail
