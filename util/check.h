// util/check.h — internal invariants.
//
// MROCE_DCHECK(cond): aborts in debug, sanitizer and simulator builds; compiled out in
// release. Never use it on peer input: a malformed packet is a counted drop.
// MROCE_BUG(id): "should never happen" in release; counts and logs once per id.
#pragma once

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace mroce::detail {
[[noreturn]] inline void dcheck_fail(const char* expr, const char* file, int line) {
    std::fprintf(stderr, "MROCE_DCHECK failed: %s at %s:%d\n", expr, file, line);
    std::abort();
}
inline void bug_once(std::atomic<unsigned>& counter, const char* id, const char* file, int line) {
    if (counter.fetch_add(1, std::memory_order_relaxed) == 0)
        std::fprintf(stderr, "MROCE_BUG(%s) at %s:%d\n", id, file, line);
}
}  // namespace mroce::detail

#if defined(NDEBUG) && !defined(MROCE_ENABLE_DCHECK)
#define MROCE_DCHECK(cond) ((void)0)
#else
#define MROCE_DCHECK(cond) \
    ((cond) ? (void)0 : ::mroce::detail::dcheck_fail(#cond, __FILE__, __LINE__))
#endif

// MROCE_SLOW_DCHECK(cond): like MROCE_DCHECK but only in unoptimised (debug, sanitizer)
// builds, for checks that cost as much as the code they check.
#if defined(NDEBUG)
#define MROCE_SLOW_DCHECK(cond) ((void)0)
#else
#define MROCE_SLOW_DCHECK(cond) MROCE_DCHECK(cond)
#endif

#define MROCE_BUG(id)                                                          \
    do {                                                                       \
        static std::atomic<unsigned> mroce_bug_count_{0};                      \
        ::mroce::detail::bug_once(mroce_bug_count_, #id, __FILE__, __LINE__); \
    } while (0)
