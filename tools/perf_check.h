// tools/perf_check.h — `mroce perf --check`: the data pattern every message carries and
// its verification, so that corruption in transit is detected end to end (issue 17).
//
// Byte `offset` of message `index` of queue pair `qp` in direction `dir`, at message size
// `size`, is a function of all five: a flipped bit, a segment placed at the wrong offset,
// a segment of another message or queue pair, and a stale buffer (an earlier message that
// used the same slot, or nothing at all) each read as a mismatch. The pattern is 64-bit
// words, word w = spread(base(key) + w * kStep) (little-endian; kStep odd, spread a
// bijection): cheap enough to fill and compare at memory speed; two offsets of one message
// never agree on a word, and two different keys agree with probability 2^-64. Version kPatternVersion; both sides must generate the same one (perf.cc checks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

namespace mroce::tools::perf {

inline constexpr uint32_t kPatternVersion = 1;

// Direction of a message: the client's (to the server) or the server's (its replies in a
// latency ping-pong, and the data a READ fetches).
enum class Direction : uint8_t { kFromClient = 0, kFromServer = 1 };

// PatternKey names one message.
struct PatternKey {
    uint32_t size = 0;
    uint32_t qp = 0;      // the queue pair's index in the run (0 .. -q - 1), not its number
    uint64_t index = 0;   // the message's index on its queue pair within this size's run
    Direction dir = Direction::kFromClient;
};

// fill_pattern writes message `key`'s bytes into `out` (out.size() bytes, normally key.size).
void fill_pattern(std::span<std::byte> out, const PatternKey& key);
// pattern_byte is byte `offset` of message `key` (for reports and tests).
uint8_t pattern_byte(const PatternKey& key, uint64_t offset);

// Mismatch: the first byte of a checked message that differs from the pattern, or (an
// atomic, verify_value) the 8-byte value that differs from the one expected.
struct Mismatch {
    uint32_t qp = 0;
    uint64_t message = 0;
    uint64_t offset = 0;
    uint64_t expected = 0;
    uint64_t got = 0;
};

// CheckTally counts what one side verified during one size's run.
class CheckTally {
public:
    // verify compares `data` with message `key`; counts it, and on a difference its
    // mismatching bytes (and keeps the first mismatch seen). Returns true if it matched.
    bool verify(std::span<const std::byte> data, const PatternKey& key);
    // verify_value counts one 8-byte value (an atomic's), message `index` of queue pair
    // `qp`: a mismatch unless `ok`, reported with `expected` (the value it should have had,
    // or the least it could have had) and `got`.
    bool verify_value(uint32_t qp, uint64_t index, bool ok, uint64_t expected, uint64_t got);
    // missing counts a message that should have arrived and did not (a count mismatch).
    void missing(uint64_t messages) { missing_ += messages; }

    uint64_t messages() const { return messages_; }
    uint64_t bad_messages() const { return bad_messages_; }
    uint64_t bad_bytes() const { return bad_bytes_; }
    uint64_t missing() const { return missing_; }
    bool ok() const { return bad_messages_ == 0 && missing_ == 0; }
    const std::optional<Mismatch>& first() const { return first_; }

    nlohmann::json to_json() const;

private:
    uint64_t messages_ = 0, bytes_ = 0, bad_messages_ = 0, bad_bytes_ = 0, missing_ = 0;
    std::optional<Mismatch> first_;
};

// check_failure reads a tally as to_json wrote it (possibly the peer's, so every field is
// checked) and returns one line describing its failure, or "" when it verified cleanly.
// `who` names the side ("client", "server").
std::string check_failure(const nlohmann::json& tally, const std::string& who);

}  // namespace mroce::tools::perf
