// util/result.h — Error codes and Result<T> (C++20 has no std::expected).
#pragma once

#include <string_view>
#include <utility>
#include <variant>

#include "util/check.h"

namespace mroce {

// Error names every failure a public function can return. Append only.
enum class Error {
    kOk = 0,
    kInvalidArgument,
    kTruncated,       // wire: packet ends before a field
    kBadVersion,      // wire: unknown protocol version
    kBadType,         // wire: unknown packet type or opcode
    kBadLength,       // wire: a length or count field disagrees with the datagram
    kReservedNonZero, // wire: a reserved field is not zero where the spec says drop
    kBufferTooSmall,  // wire: encoder output does not fit
    kNotFound,
    kExhausted,       // a resource cap was hit
    kAccessDenied,    // protection: key, PD, access flags or bounds
    kWrongState,
    kIo,
};

std::string_view to_string(Error e);

template <typename T>
class [[nodiscard]] Result {
public:
    Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
    Result(Error e) : v_(e) { MROCE_DCHECK(e != Error::kOk); }  // NOLINT

    bool ok() const { return std::holds_alternative<T>(v_); }
    explicit operator bool() const { return ok(); }
    Error error() const { return ok() ? Error::kOk : std::get<Error>(v_); }
    T& value() & { return std::get<T>(v_); }
    const T& value() const& { return std::get<T>(v_); }
    T&& value() && { return std::get<T>(std::move(v_)); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }

private:
    std::variant<T, Error> v_;
};

inline std::string_view to_string(Error e) {
    switch (e) {
        case Error::kOk: return "ok";
        case Error::kInvalidArgument: return "invalid argument";
        case Error::kTruncated: return "truncated";
        case Error::kBadVersion: return "unknown protocol version";
        case Error::kBadType: return "unknown packet type or opcode";
        case Error::kBadLength: return "bad length";
        case Error::kReservedNonZero: return "reserved field not zero";
        case Error::kBufferTooSmall: return "buffer too small";
        case Error::kNotFound: return "not found";
        case Error::kExhausted: return "resource exhausted";
        case Error::kAccessDenied: return "access denied";
        case Error::kWrongState: return "wrong state";
        case Error::kIo: return "I/O error";
    }
    return "unknown error";
}

}  // namespace mroce
