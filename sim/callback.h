// sim/callback.h — a move-only `void()` callable with inline storage.
//
// The event queue stores one of these per pending event. std::function would do, but it
// must be copyable (so a lambda owning a PacketPtr cannot go in) and libstdc++ only keeps
// 16 bytes inline, so most simulator lambdas would allocate once per event. Callables of
// up to kInlineBytes that are nothrow-movable and need no more than pointer alignment live
// inside the object; others fall back to one heap allocation (correct, just slower).
#pragma once

#include <cstddef>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

namespace mroce::sim {

template <size_t kInlineBytes>
class InlineCallback {
  public:
    InlineCallback() { clear_first_word(); }

    // Wraps any callable invocable as f(). Takes ownership of f (moved in).
    template <class F>
    requires(!std::is_same_v<std::decay_t<F>, InlineCallback> &&
             std::is_invocable_r_v<void, std::decay_t<F>&>)
        InlineCallback(F&& f) {  // NOLINT(google-explicit-constructor): lambdas convert implicitly
        using Fn = std::decay_t<F>;
        clear_first_word();
        if constexpr (fits_inline<Fn>()) {
            ::new (static_cast<void*>(storage_)) Fn(std::forward<F>(f));
            ops_ = &kInlineOps<Fn>;
        } else {
            Fn* heap = new Fn(std::forward<F>(f));
            ::new (static_cast<void*>(storage_)) Fn*(heap);
            ops_ = &kHeapOps<Fn>;
        }
    }

    InlineCallback(InlineCallback&& other) noexcept { take(other); }
    InlineCallback& operator=(InlineCallback&& other) noexcept {
        if (this != &other) {
            reset();
            take(other);
        }
        return *this;
    }
    InlineCallback(const InlineCallback&) = delete;
    InlineCallback& operator=(const InlineCallback&) = delete;
    ~InlineCallback() { reset(); }

    explicit operator bool() const { return ops_ != nullptr; }

    // Calls the wrapped callable. Must not be empty.
    void operator()() { ops_->invoke(storage_); }

    // Destroys the wrapped callable (and whatever it owns); leaves this empty.
    void reset() {
        if (ops_) {
            ops_->destroy(storage_);
            ops_ = nullptr;
        }
    }

    // True if a callable of type F is stored without a heap allocation.
    template <class F>
    static constexpr bool fits_inline() {
        return sizeof(F) <= kInlineBytes && alignof(F) <= alignof(void*) &&
               std::is_nothrow_move_constructible_v<F>;
    }

    // first_word is the first pointer-sized word of the stored callable: for a lambda whose
    // first capture is a pointer (`[this] {...}`, every callback the simulator schedules)
    // the object it will run on; for a heap-stored callable, the heap object; 0 for a
    // callable smaller than a pointer. A hint for prefetching only, never dereferenced.
    const void* first_word() const {
        const void* w;
        std::memcpy(&w, storage_, sizeof w);
        return w;
    }

  private:
    struct Ops {
        void (*invoke)(void* storage);
        void (*move_to)(void* dst, void* src);  // move-construct into dst, destroy src
        void (*destroy)(void* storage);
    };

    template <class Fn>
    static constexpr Ops kInlineOps = {
        [](void* s) { (*std::launder(static_cast<Fn*>(s)))(); },
        [](void* d, void* s) {
            Fn* src = std::launder(static_cast<Fn*>(s));
            ::new (d) Fn(std::move(*src));
            src->~Fn();
        },
        [](void* s) { std::launder(static_cast<Fn*>(s))->~Fn(); },
    };

    template <class Fn>
    static constexpr Ops kHeapOps = {
        [](void* s) { (**std::launder(static_cast<Fn**>(s)))(); },
        [](void* d, void* s) { ::new (d) Fn*(*std::launder(static_cast<Fn**>(s))); },
        [](void* s) { delete *std::launder(static_cast<Fn**>(s)); },
    };

    // A callable smaller than a pointer leaves part of the first word unwritten; zeroing it
    // first keeps first_word() a defined value.
    void clear_first_word() { std::memset(storage_, 0, sizeof(void*)); }

    void take(InlineCallback& other) noexcept {
        clear_first_word();
        if (other.ops_) {
            other.ops_->move_to(storage_, other.storage_);
            ops_ = other.ops_;
            other.ops_ = nullptr;
        }
    }

    static_assert(kInlineBytes >= sizeof(void*) && kInlineBytes % alignof(void*) == 0);
    alignas(void*) unsigned char storage_[kInlineBytes];
    const Ops* ops_ = nullptr;
};

// Callback is what the event queue runs. 48 inline bytes hold `this` plus a PacketPtr plus
// a few words, which covers every callback the simulator itself schedules. Pointer
// alignment (not max_align_t's 16) keeps it at 56 bytes, so an event slot (callback and
// sequence number) is exactly one cache line.
using Callback = InlineCallback<48>;
static_assert(sizeof(Callback) == 56);

}  // namespace mroce::sim
